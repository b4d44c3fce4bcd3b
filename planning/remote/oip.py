"""The Open Inference Protocol's (OIP, "V2") messages as plain values, and their REST JSON form.

One request or answer is the same value whichever transport carries it: the REST transport
writes and reads the JSON below, the gRPC transport the protobuf messages
(:mod:`counterplan.planning.remote.grpc_transport`). A tensor's data is a flat numpy array in
row-major order, of the numpy type its OIP datatype names (``object`` holding ``str`` for BYTES).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from counterplan.planning.errors import one_line

DTYPES: dict[str, npt.DTypeLike] = {
    "BOOL": np.bool_,
    "UINT8": np.uint8,
    "UINT16": np.uint16,
    "UINT32": np.uint32,
    "UINT64": np.uint64,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "FP16": np.float16,
    "FP32": np.float32,
    "FP64": np.float64,
    "BYTES": object,
}
"""The numpy type of each OIP datatype."""
NUMERIC = frozenset(DTYPES) - {"BYTES"}


class ProtocolFormError(ValueError):
    """An answer is not an OIP message of the expected form (the adapter names the model)."""


@dataclass(frozen=True)
class TensorMeta:
    """One input or output a model's metadata declares."""

    name: str
    datatype: str
    shape: tuple[int, ...]
    parameters: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelMetadata:
    """What ``GET /v2/models/NAME`` (or gRPC ``ModelMetadata``) says; MLServer answers only what
    the model's settings declare, often nothing (empty ``inputs``)."""

    name: str
    inputs: tuple[TensorMeta, ...] = ()
    outputs: tuple[TensorMeta, ...] = ()
    parameters: dict[str, str] = field(default_factory=dict)
    platform: str = ""


@dataclass(frozen=True)
class Tensor:
    """One input or output tensor: flat row-major ``data``, its ``shape`` and OIP ``datatype``."""

    name: str
    datatype: str
    shape: tuple[int, ...]
    data: npt.NDArray[Any]
    parameters: dict[str, str] = field(default_factory=dict)

    def array(self) -> npt.NDArray[Any]:
        """``data`` in its ``shape``; a size that does not fit raises :class:`ProtocolFormError`."""
        check_size(self.name, self.data.size, self.shape)
        return self.data.reshape(self.shape)


def shape_size(name: str, shape: tuple[int, ...]) -> int:
    """How many values output ``name``'s ``shape`` holds; a negative dimension (gRPC's are signed)
    raises :class:`ProtocolFormError`. The product is Python's: numpy's wraps at 2^64
    (``[2**32, 2**32]`` held 0 values, and reshaping to it raised a ValueError that read as the
    model's failure)."""
    if any(d < 0 for d in shape):
        raise ProtocolFormError(f"output {name!r} has a bad shape {list(shape)}")
    return math.prod(shape)


def check_size(name: str, count: int, shape: tuple[int, ...]) -> None:
    """Output ``name``'s ``count`` values fit its ``shape``, else :class:`ProtocolFormError`; a
    reader that can count the values before decoding them checks first."""
    if count != shape_size(name, shape):
        raise ProtocolFormError(f"output {name!r} has {count} values for shape {list(shape)}")


@dataclass(frozen=True)
class InferRequest:
    """One inference request: the inputs, the outputs asked for (empty: the model's default),
    and request parameters (``content_type: pd`` for MLServer's pandas codec)."""

    inputs: tuple[Tensor, ...]
    outputs: tuple[str, ...] = ()
    parameters: dict[str, str] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        """The batch size (the first dimension of the first input)."""
        return self.inputs[0].shape[0] if self.inputs and self.inputs[0].shape else 0


def request_json(request: InferRequest) -> dict[str, Any]:
    """The REST body of ``request``."""
    body: dict[str, Any] = {"inputs": [_tensor_json(t) for t in request.inputs]}
    if request.outputs:
        body["outputs"] = [{"name": name} for name in request.outputs]
    if request.parameters:
        body["parameters"] = dict(request.parameters)
    return body


def _tensor_json(tensor: Tensor) -> dict[str, Any]:
    """One input as JSON; a missing number (NaN, which JSON cannot write) as ``null``: whether a
    server takes it is the server's affair (MLServer's NumPy codec refuses it)."""
    data = tensor.data
    if data.dtype.kind == "f" and not np.isfinite(data).all():
        values: list[Any] = [None if not np.isfinite(v) else v for v in data.tolist()]
    else:
        values = data.tolist()
    out: dict[str, Any] = {
        "name": tensor.name,
        "datatype": tensor.datatype,
        "shape": list(tensor.shape),
        "data": values,
    }
    if tensor.parameters:
        out["parameters"] = dict(tensor.parameters)
    return out


def metadata_from_json(body: Any) -> ModelMetadata:
    """The metadata in a REST answer; a body of another form raises :class:`ProtocolFormError`."""
    if not isinstance(body, dict) or not isinstance(body.get("name", ""), str):
        raise ProtocolFormError("the metadata is not a JSON object with a name")
    return ModelMetadata(
        name=str(body.get("name", "")),
        inputs=tuple(_meta_json(t) for t in _list(body, "inputs")),
        outputs=tuple(_meta_json(t) for t in _list(body, "outputs")),
        parameters=_parameters(body.get("parameters")),
        platform=str(body.get("platform", "") or ""),
    )


def _meta_json(item: Any) -> TensorMeta:
    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
        raise ProtocolFormError("a declared tensor has no name")
    shape = item.get("shape") or []
    if not isinstance(shape, list) or not all(isinstance(d, int) for d in shape):
        raise ProtocolFormError(f"tensor {item['name']!r} has a bad shape")
    return TensorMeta(
        str(item["name"]), str(item.get("datatype", "")).upper(), tuple(shape), _parameters(item.get("parameters"))
    )


def outputs_from_json(body: Any) -> tuple[Tensor, ...]:
    """The output tensors of a REST answer, each data flattened into its datatype's numpy type."""
    out = []
    for item in _list(body if isinstance(body, dict) else {}, "outputs"):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise ProtocolFormError("an output has no name")
        datatype = str(item.get("datatype", "")).upper()
        if datatype not in DTYPES:
            raise ProtocolFormError(f"output {item['name']!r} has datatype {datatype!r}")
        shape = item.get("shape")
        if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise ProtocolFormError(f"output {item['name']!r} has a bad shape")
        data = output_data(item.get("data", []), datatype, item["name"])
        out.append(Tensor(item["name"], datatype, tuple(shape), data, _parameters(item.get("parameters"))))
    if not out:
        raise ProtocolFormError("the answer has no outputs")
    return tuple(out)


def output_data(values: Any, datatype: str, name: str) -> npt.NDArray[Any]:
    """An output's ``values`` (a JSON list, a gRPC message's contents) as a flat array of
    ``datatype``'s numpy type. Values that are not of that type raise :class:`ProtocolFormError`
    naming the output: text in a number, and in an integer type a fraction or a number out of
    its range, which numpy would truncate silently (``0.7`` read as INT64 is ``0``) or refuse with
    an ``OverflowError``, no ``ValueError``."""
    dtype = np.dtype(DTYPES[datatype])
    try:
        data = np.asarray(values, dtype=dtype).ravel()
        if dtype.kind in "iu" and not np.array_equal(data, np.asarray(values, dtype=np.float64).ravel()):
            raise ValueError("a value is not a whole number")
    except (TypeError, ValueError, OverflowError) as exc:
        raise ProtocolFormError(f"output {name!r} has data that is not {datatype}: {one_line(str(exc))}") from None
    return data


def _list(body: dict[str, Any], key: str) -> list[Any]:
    value = body.get(key) or []
    if not isinstance(value, list):
        raise ProtocolFormError(f"{key!r} is not a list")
    return value


def _parameters(value: Any) -> dict[str, str]:
    """Parameters as strings (only strings are read: ``content_type``)."""
    if not isinstance(value, dict):
        return {}
    return {str(k): v for k, v in value.items() if isinstance(v, str)}


__all__ = [
    "DTYPES",
    "NUMERIC",
    "InferRequest",
    "ModelMetadata",
    "ProtocolFormError",
    "Tensor",
    "TensorMeta",
    "check_size",
    "metadata_from_json",
    "output_data",
    "outputs_from_json",
    "request_json",
    "shape_size",
]
