"""The OIP's gRPC messages, from a private descriptor pool, behind typed functions.

kserve, MLServer and tritonclient each generate stubs for the OIP proto's package ``inference``
into protobuf's default pool, and a second copy there fails to load ("duplicate symbol
'inference.ServerLiveRequest'"). So the messages here come from their own
:class:`~google.protobuf.descriptor_pool.DescriptorPool`, built from the serialized descriptor
in :mod:`counterplan.planning.remote._oip_descriptor`, and no generated module exists. The
message classes are untyped: only the functions below touch them, each with typed values of
:mod:`counterplan.planning.remote.oip` on its other side.
"""

from __future__ import annotations

import functools
import struct
from typing import Any

import numpy as np

from counterplan.planning.remote.oip import (
    DTYPES,
    InferRequest,
    ModelMetadata,
    ProtocolFormError,
    Tensor,
    TensorMeta,
    check_size,
    output_data,
    shape_size,
)

SERVICE = "/inference.GRPCInferenceService/"
_CONTENTS = {
    "BOOL": "bool_contents",
    "INT8": "int_contents",
    "INT16": "int_contents",
    "INT32": "int_contents",
    "INT64": "int64_contents",
    "UINT8": "uint_contents",
    "UINT16": "uint_contents",
    "UINT32": "uint_contents",
    "UINT64": "uint64_contents",
    "FP32": "fp32_contents",
    "FP64": "fp64_contents",
    "BYTES": "bytes_contents",
}
"""The ``InferTensorContents`` field of each datatype (FP16 has none: raw contents only)."""


@functools.cache
def _messages() -> dict[str, Any]:
    """The message classes by name, from a pool of their own (built once per process)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory  # noqa: PLC0415

    from counterplan.planning.remote._oip_descriptor import FILE_DESCRIPTOR  # noqa: PLC0415

    pool: Any = descriptor_pool.DescriptorPool()  # protobuf's stubs leave its methods untyped
    pool.Add(descriptor_pb2.FileDescriptorProto.FromString(FILE_DESCRIPTOR))
    names = ("ModelInferRequest", "ModelInferResponse", "ModelMetadataRequest", "ModelMetadataResponse")
    return {n: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"inference.{n}")) for n in names}


def codecs(method: str) -> tuple[Any, Any]:
    """The request serializer and response deserializer of ``ModelInfer`` or ``ModelMetadata``."""
    messages = _messages()
    return messages[f"{method}Request"].SerializeToString, messages[f"{method}Response"].FromString


def parse_answer(method: str, raw: bytes) -> Any:
    """The ``ModelInfer`` or ``ModelMetadata`` answer in ``raw``; bytes that are no such message
    raise :class:`ProtocolFormError`."""
    from google.protobuf.message import DecodeError  # noqa: PLC0415

    try:
        return _messages()[f"{method}Response"].FromString(raw)
    except DecodeError:
        raise ProtocolFormError(f"the answer is not a {method}Response message") from None


def metadata_request(name: str, version: str | None) -> Any:
    """A ``ModelMetadataRequest``."""
    return _messages()["ModelMetadataRequest"](name=name, version=version or "")


def infer_request(request: InferRequest, name: str, version: str | None) -> Any:
    """A ``ModelInferRequest`` carrying ``request`` (typed contents, not raw bytes)."""
    message = _messages()["ModelInferRequest"](model_name=name, model_version=version or "")
    for key, value in request.parameters.items():
        message.parameters[key].string_param = value
    for tensor in request.inputs:
        field = _CONTENTS.get(tensor.datatype)
        if field is None:
            raise ProtocolFormError(f"input {tensor.name!r}: datatype {tensor.datatype} has no gRPC contents")
        item = message.inputs.add(name=tensor.name, datatype=tensor.datatype, shape=list(tensor.shape))
        for key, value in tensor.parameters.items():
            item.parameters[key].string_param = value
        values = tensor.data.tolist()
        if tensor.datatype == "BYTES":
            values = [v.encode("utf-8") for v in values]
        getattr(item.contents, field).extend(values)
    for output in request.outputs:
        message.outputs.add(name=output)
    return message


def read_metadata(message: Any) -> ModelMetadata:
    """A ``ModelMetadataResponse`` as :class:`ModelMetadata` (the OIP proto has no parameters)."""

    def meta(items: Any) -> tuple[TensorMeta, ...]:
        return tuple(TensorMeta(str(t.name), str(t.datatype).upper(), tuple(int(d) for d in t.shape)) for t in items)

    return ModelMetadata(str(message.name), meta(message.inputs), meta(message.outputs), {}, str(message.platform))


def read_outputs(message: Any) -> tuple[Tensor, ...]:
    """The output tensors of a ``ModelInferResponse``: typed ``contents`` or, when the server
    answers raw (Triton's default, MLServer's to a raw request), ``raw_output_contents``. Each
    output's values are counted against its shape before they are decoded (as Python's values,
    they take up to ten times their bytes)."""
    raw = list(message.raw_output_contents)
    out = []
    for i, item in enumerate(message.outputs):
        datatype = str(item.datatype).upper()
        if datatype not in DTYPES:
            raise ProtocolFormError(f"output {item.name!r} has datatype {datatype!r}")
        shape = tuple(int(d) for d in item.shape)
        if i < len(raw) and raw[i]:
            data = _raw(raw[i], datatype, str(item.name), shape)
        elif datatype in _CONTENTS:
            contents = getattr(item.contents, _CONTENTS[datatype])
            check_size(str(item.name), len(contents), shape)
            values = list(contents)
            if datatype == "BYTES":
                values = [v.decode("utf-8", errors="replace") for v in values]
            data = output_data(values, datatype, str(item.name))
        else:
            raise ProtocolFormError(f"output {item.name!r}: {datatype} comes only raw")
        parameters = {k: v.string_param for k, v in item.parameters.items() if v.HasField("string_param")}
        out.append(Tensor(str(item.name), datatype, shape, data, parameters))
    if not out:
        raise ProtocolFormError("the answer has no outputs")
    return tuple(out)


def _raw(buffer: bytes, datatype: str, name: str, shape: tuple[int, ...]) -> Any:
    """Raw contents: little-endian numbers, or BYTES elements each after a 4-byte length; as many
    as ``shape`` holds (BYTES read no further than that)."""
    if datatype != "BYTES":
        dtype = np.dtype(DTYPES[datatype])
        if len(buffer) % dtype.itemsize:
            raise ProtocolFormError(
                f"output {name!r}: {len(buffer)} raw bytes are no whole number of {datatype} values"
            )
        check_size(name, len(buffer) // dtype.itemsize, shape)
        return np.frombuffer(buffer, dtype=dtype.newbyteorder("<")).astype(dtype)
    wanted = shape_size(name, shape)
    values: list[str] = []
    at = 0
    while at + 4 <= len(buffer):
        if len(values) == wanted:  # the rest is not decoded
            raise ProtocolFormError(f"output {name!r} has more than {wanted} values for shape {list(shape)}")
        (size,) = struct.unpack_from("<I", buffer, at)
        values.append(buffer[at + 4 : at + 4 + size].decode("utf-8", errors="replace"))
        at += 4 + size
    if at != len(buffer):
        raise ProtocolFormError("raw BYTES contents do not split into elements")
    check_size(name, len(values), shape)
    return np.asarray(values, dtype=object)


__all__ = ["SERVICE", "codecs", "infer_request", "metadata_request", "parse_answer", "read_metadata", "read_outputs"]
