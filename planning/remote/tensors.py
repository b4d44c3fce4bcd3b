"""Candidate rows as OIP inference requests, and answers as predictions.

Two layouts, as served models take their input:

- ``"tensor"``: the encoded candidate matrix as one 2-D tensor ``[rows, features]``, what a bare
  estimator fitted on a numeric matrix reads (MLServer's default NumPy codec, Triton, ONNX).
- ``"columns"``: one 1-D input per feature, named as the feature, decoded by the feature space
  (category strings, integers, booleans) as a pipeline fitted on a DataFrame reads it; the
  request says ``content_type: pd`` (MLServer's pandas codec) and text columns
  ``content_type: str``.

Each input's datatype is the one the model's metadata declares for it, else the feature's own:
FP64 for numbers, INT64 for integers and integer categories, BOOL for booleans, BYTES for text.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import pandas as pd

from counterplan.planning.remote.oip import DTYPES, NUMERIC, InferRequest, ModelMetadata, Tensor, TensorMeta
from counterplan.planning.space import FeatureSpace, FloatMatrix

Layout = Literal["tensor", "columns"]
TENSOR_INPUT = "input-0"
"""The input's name in the tensor layout when the metadata declares none (MLServer's own)."""


class LayoutError(ValueError):
    """The model's declared inputs do not fit the features (the adapter names the model)."""


def choose_layout(metadata: ModelMetadata) -> Layout:
    """The layout the metadata asks for: ``columns`` for the pandas codec (``content_type: pd``)
    or one declared input per feature; ``tensor`` for one declared input, and when nothing is
    declared (MLServer's default codec is NumPy: give ``layout="columns"`` for a pipeline that
    reads named columns)."""
    if metadata.parameters.get("content_type") == "pd" or len(metadata.inputs) > 1:
        return "columns"
    return "tensor"


def build_request(
    X: FloatMatrix,
    space: FeatureSpace,
    layout: Layout,
    metadata: ModelMetadata,
    outputs: tuple[str, ...],
) -> InferRequest:
    """The request asking ``outputs`` for every row of the encoded matrix ``X``: one tensor, the
    array a model fitted on one takes (a gap NaN, codes stored as numbers their numbers:
    :meth:`~counterplan.planning.space.FeatureSpace.to_array`), or one input per column."""
    if layout == "tensor":
        return InferRequest((_matrix(space.to_array(X), metadata),), outputs)
    columns = space.to_columns(X)
    declared = {m.name: m for m in metadata.inputs}
    names = [m.name for m in metadata.inputs] if declared else list(columns)
    missing = [n for n in names if n not in columns]
    if missing:
        raise LayoutError(f"the model declares inputs {missing} that are not features ({list(columns)})")
    inputs = tuple(_column(name, columns[name], declared.get(name)) for name in names)
    return InferRequest(inputs, outputs, {"content_type": "pd"})


def _matrix(X: FloatMatrix, metadata: ModelMetadata) -> Tensor:
    meta = metadata.inputs[0] if metadata.inputs else None
    datatype = meta.datatype if meta is not None and meta.datatype in NUMERIC else "FP64"
    if meta is not None and len(meta.shape) == 2 and meta.shape[1] > 0 and meta.shape[1] != X.shape[1]:
        raise LayoutError(
            f"the model's input {meta.name!r} has {meta.shape[1]} columns; there are {X.shape[1]} features"
        )
    name = meta.name if meta is not None else TENSOR_INPUT
    return Tensor(name, datatype, (X.shape[0], X.shape[1]), _cast(X.ravel(), datatype, name))


def _column(name: str, values: npt.NDArray[Any], meta: TensorMeta | None) -> Tensor:
    datatype = meta.datatype if meta is not None and meta.datatype in DTYPES else _datatype(values)
    shape: tuple[int, ...] = (values.shape[0], 1) if meta is not None and len(meta.shape) == 2 else (values.shape[0],)
    parameters = {"content_type": "str"} if datatype == "BYTES" else {}
    return Tensor(name, datatype, shape, _cast(values, datatype, name), parameters)


def _datatype(values: npt.NDArray[Any]) -> str:
    """A feature column's own OIP datatype."""
    if values.dtype == np.bool_:
        return "BOOL"
    if np.issubdtype(values.dtype, np.integer):
        return "INT64"
    if np.issubdtype(values.dtype, np.floating):
        return "FP64"
    return "BYTES"


def _cast(values: npt.NDArray[Any], datatype: str, name: str) -> npt.NDArray[Any]:
    """``values`` as input ``name``'s ``datatype``. Values it cannot carry raise
    :class:`LayoutError`: text for a number or a boolean, and for an integer type a fraction, a
    missing value or a number out of its range; for a float type a number past its largest. numpy
    casts all of them silently (300 to 44 in INT8, -1 to 255 in UINT8, NaN to any integer, 0.4
    to 0, 1e5 to FP16's inf, any text to True): the model would answer about values no candidate
    has, and its answer would be taken for theirs."""
    if datatype == "BYTES":
        return _texts(values)
    if values.dtype.kind in "OUS":  # a text column declared a number: only numbers in text pass
        try:
            values = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError):
            raise LayoutError(f"input {name!r} is {datatype}, and the feature's values are text") from None
    if values.dtype == np.bool_:
        values = values.astype(np.int64) if datatype != "BOOL" else values
    target = np.dtype(DTYPES[datatype])
    given = values
    with np.errstate(all="ignore"):  # what the cast loses is found below, not warned about
        if target.kind in "iub" and values.dtype.kind == "f":
            whole = np.rint(values)
            lost = ~np.isfinite(values) | (np.abs(values - whole) > 1e-9 * np.maximum(1.0, np.abs(values)))
            values = whole
        else:
            lost = np.zeros(values.shape, dtype=bool)
        if target.kind in "iu":
            info = np.iinfo(target)
            lost |= (values < info.min) | (values > info.max)
        elif target.kind == "b":
            lost |= (values != 0) & (values != 1)
        cast = np.asarray(values, dtype=target)
        if target.kind == "f":
            lost |= np.isfinite(values) & ~np.isfinite(cast)
    if lost.any():
        value = given[np.flatnonzero(lost)[0]]
        raise LayoutError(f"input {name!r} is {datatype}, which cannot carry the value {value}")
    return cast


FEW_TEXTS = 512
"""Up to this many values a text input is turned value by value; past it, each distinct value
once (hashing them costs about 25 µs a column, what the plain loop costs for a few hundred)."""


def _texts(values: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """``values`` as ``str`` objects, as ``str`` writes each (a gap too). Past :data:`FEW_TEXTS`
    values each distinct value is turned once (a category column holds few: a request of
    thousands of rows spent most of its building time here, value by value)."""
    if values.size <= FEW_TEXTS:
        return np.array([v if isinstance(v, str) else str(v) for v in values.tolist()], dtype=object)
    codes, distinct = pd.factorize(values, use_na_sentinel=True)
    table = np.array([v if isinstance(v, str) else str(v) for v in distinct.tolist()] + [None], dtype=object)
    texts = table[codes]
    gaps = np.flatnonzero(codes < 0)  # a gap (None, NaN) is written as Python writes it, as before
    for i in gaps.tolist():
        texts[i] = str(values[i])
    return texts


def request_bytes(request: InferRequest) -> int:
    """About what ``request`` weighs on the wire: 24 bytes per number (as JSON writes it), a
    string's length plus 4 (its quotes and comma, or gRPC's length prefix)."""
    total = 0
    for tensor in request.inputs:
        if tensor.datatype == "BYTES":
            total += sum(map(len, tensor.data.tolist())) + 4 * tensor.data.size
        else:
            total += 24 * tensor.data.size
    return total


def split_request(request: InferRequest, max_rows: int, max_bytes: int) -> Iterator[InferRequest]:
    """``request`` in parts of at most ``max_rows`` rows and (about) ``max_bytes`` bytes each, in
    row order (one row may exceed ``max_bytes``: a row is never cut)."""
    n = request.rows
    per_row = request_bytes(request) / max(n, 1)
    step = max(1, min(max_rows, int(max_bytes // per_row) if per_row > 0 else max_rows))
    if n <= step:
        yield request
        return
    for start in range(0, n, step):
        stop = min(start + step, n)
        inputs = tuple(
            Tensor(t.name, t.datatype, (stop - start, *t.shape[1:]), _rows(t, start, stop), t.parameters)
            for t in request.inputs
        )
        yield InferRequest(inputs, request.outputs, request.parameters)


def _rows(tensor: Tensor, start: int, stop: int) -> npt.NDArray[Any]:
    return tensor.data.reshape(tensor.shape)[start:stop].ravel()


def read_output(outputs: tuple[Tensor, ...], name: str | None, rows: int) -> npt.NDArray[Any]:
    """The answer's output ``name`` (None or absent when only one came back: that one) as an
    array with ``rows`` rows. Raises :class:`LayoutError` for a missing output, one given twice
    (which of two answers is the model's?) or wrong rows."""
    if sum(t.name == name for t in outputs) > 1:
        raise LayoutError(f"the answer has output {name!r} more than once")
    chosen = next((t for t in outputs if t.name == name), None)
    if chosen is None:
        if name is not None and len(outputs) > 1:
            raise LayoutError(f"the answer has no output {name!r} (it has {[t.name for t in outputs]})")
        chosen = outputs[0]
    array = chosen.array()
    if array.ndim == 0 or array.shape[0] != rows:
        raise LayoutError(f"output {chosen.name!r} has shape {list(array.shape)} for {rows} rows")
    return array


def probabilities(array: npt.NDArray[Any], n_classes: int, name: str) -> FloatMatrix:
    """Class probabilities ``(rows, n_classes)`` from a numeric output of that shape."""
    if array.dtype in (np.dtype(object), np.dtype(np.bool_)):
        raise LayoutError(f"output {name!r} holds {array.dtype} values, not probabilities")
    if array.ndim != 2 or array.shape[1] != n_classes:
        raise LayoutError(
            f"output {name!r} has shape {list(array.shape)}; expected [rows, {n_classes}] (one per class)"
        )
    return np.asarray(array, dtype=np.float64)


def numbers(array: npt.NDArray[Any], name: str) -> npt.NDArray[np.float64]:
    """A regressor's predictions ``(rows,)`` from a numeric output ``(rows,)`` or ``(rows, 1)``."""
    if array.dtype == object:
        raise LayoutError(f"output {name!r} holds text, not numbers")
    if array.ndim == 2 and array.shape[1] == 1:
        array = array[:, 0]
    if array.ndim != 1:
        raise LayoutError(f"output {name!r} has shape {list(array.shape)}; expected [rows] or [rows, 1]")
    return np.asarray(array, dtype=np.float64)


__all__ = [
    "TENSOR_INPUT",
    "Layout",
    "LayoutError",
    "build_request",
    "choose_layout",
    "numbers",
    "probabilities",
    "read_output",
    "request_bytes",
    "split_request",
]
