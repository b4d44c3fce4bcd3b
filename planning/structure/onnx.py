"""One reader of ONNX-ML graphs, into the same plain forms the scikit-learn readers give.

An ONNX model is a graph of operators; the exact engine reads the ones whose output it can write
as linear expressions: one ``TreeEnsembleClassifier``/``TreeEnsembleRegressor`` (read into the
:class:`~counterplan.planning.structure.trees.Ensemble` the tree encoder reads) or one
``LinearClassifier``/``LinearRegressor`` (read into coefficients, as scikit-learn's linear models
hold them), fed by:

* one numeric input tensor ``[N, n_features]`` (the encoded matrix), possibly through ``Cast`` or
  ``Identity``; or
* one ``[N, 1]`` input per feature, named after it, joined by ``Concat``, with ``Gather``,
  ``Reshape``, ``Scaler`` (an affine layer) and ``OneHotEncoder`` (indicator columns) on the way,
  described column by column in the neutral terms of :mod:`~counterplan.planning.structure.columns`,
  as a scikit-learn pipeline is.

After the node, the output the adapter reads may pass through ``Identity``, ``Cast`` and
``ZipMap``; nodes that only post-process the predicted label (LightGBM's ``Cast``/``Mul``) are not
read. Any other operator is refused by name with
:class:`~counterplan.planning.structure.errors.NotEncodableError` (``the exact engine cannot read
ONNX op 'X' (node 'name')``).

The semantics are onnxruntime's: inputs are compared as float32 (a ``FLOAT`` input), a binary
classifier whose trees score only class 0 gives class 1's logit (``LOGISTIC``) or probability
(``NONE``), ``base_values`` are the offset. ``onnx`` is imported when a graph is read, never on
``import counterplan``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from counterplan.planning.space import FeatureSpace
from counterplan.planning.structure.columns import (
    MISSING,
    CategoryColumn,
    Column,
    Layer,
    LookupColumn,
    NumberColumn,
    same_category,
)
from counterplan.planning.structure.errors import NotEncodableError
from counterplan.planning.structure.pipeline import ModelColumns, as_number, entry_columns
from counterplan.planning.structure.trees import Ensemble, Link, Tree

ML_NODES = ("TreeEnsembleClassifier", "TreeEnsembleRegressor", "LinearClassifier", "LinearRegressor")
"""The ONNX-ML operators the exact engine reads."""
BEFORE = ("Identity", "Cast", "Concat", "Gather", "Reshape", "Scaler", "OneHotEncoder", "Constant")
"""Operators allowed between the graph's inputs and the node."""
AFTER = ("Identity", "Cast", "ZipMap")
"""Operators allowed between the node and the output the adapter reads."""
FLOAT, DOUBLE, STRING, INT64 = 1, 11, 8, 7
"""ONNX tensor element types."""

FloatArray = npt.NDArray[np.float64]


class OnnxTreeEnsemble:
    """The trees of a ``TreeEnsemble*`` node, as the tree encoder reads them (an object with an
    identity, so what is read from it is kept per graph)."""

    def __init__(self, ensemble: Ensemble, classes: tuple[Any, ...] | None) -> None:
        self.ensemble = ensemble
        self.classes = classes


class OnnxLinearClassifier:
    """A ``LinearClassifier`` node as scikit-learn's linear classifiers hold it: ``coef_`` (one
    row for two classes, class 1's; one per class of a softmax), ``intercept_``, ``classes_``."""

    def __init__(self, coef: FloatArray, intercept: FloatArray, classes: Sequence[Any]) -> None:
        self.coef_ = coef
        self.intercept_ = intercept
        self.classes_ = np.asarray(classes)
        self.n_features_in_ = int(coef.shape[1])


class OnnxLinearRegressor:
    """A ``LinearRegressor`` node of one target: ``coef_`` and ``intercept_``."""

    def __init__(self, coef: FloatArray, intercept: FloatArray) -> None:
        self.coef_ = coef
        self.intercept_ = intercept
        self.n_features_in_ = int(coef.size)


OnnxEstimator = OnnxTreeEnsemble | OnnxLinearClassifier | OnnxLinearRegressor


@dataclass(frozen=True)
class Step:
    """One operator before the node: its type, name, inputs, outputs and attributes."""

    op: str
    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attributes: dict[str, Any]


@dataclass(frozen=True)
class OnnxGraph:
    """What the exact engine reads of an ONNX graph: its node as an estimator, and the operators
    that make the node's input from the graph's inputs."""

    estimator: OnnxEstimator
    node_input: str
    """The tensor the node reads."""
    inputs: tuple[tuple[str, int], ...]
    """The graph's inputs: name and element type."""
    steps: tuple[Step, ...]
    constants: dict[str, Any]
    """Initializers and ``Constant`` outputs, by name."""
    matrix: bool = False
    """The graph's one input is the encoded matrix (:func:`matrix_input`), not a feature's column."""

    def describe(self, space: FeatureSpace) -> ModelColumns:
        """The columns the node reads, each a function of one feature of ``space``; refuses a
        graph whose inputs are not the space's features, naming them."""
        walk = _Walk(space, self.constants)
        tensors = self._entry(space)
        for step in self.steps:
            _run(step, tensors, walk)
        if self.node_input not in tensors:
            raise NotEncodableError(f"the node's input {self.node_input!r} is not made from the graph's inputs")
        columns = tuple(as_number(c, "the ONNX node", space.names) for c in tensors[self.node_input])
        width = _width(self.estimator)
        if width is not None and width > len(columns):
            raise NotEncodableError(f"the ONNX node reads {width} columns; its input has {len(columns)}")
        return ModelColumns(columns, tuple(walk.raises))

    def _entry(self, space: FeatureSpace) -> dict[str, list[Column]]:
        names = list(space.names)
        if self.matrix:  # one tensor: the encoded matrix, as the adapter feeds it
            return {self.inputs[0][0]: list(entry_columns(space, decoded=False))}
        decoded = entry_columns(space, decoded=True)
        found, missing = input_features([name for name, _ in self.inputs], names)
        if missing:
            raise NotEncodableError(f"the ONNX inputs {missing} are not features of the problem")
        for name, kind in self.inputs:  # the adapter feeds an int64 input the value truncated
            if kind == INT64 and not _whole(decoded[names.index(found[name])], space):
                raise NotEncodableError(
                    f"the ONNX input {name!r} is int64; feature {found[name]!r} is not a whole number"
                )
        return {name: [decoded[names.index(feature)]] for name, feature in found.items()}


def matrix_input(inputs: Sequence[tuple[bool, Sequence[Any]]]) -> bool:
    """Whether a graph's inputs are the encoded matrix: one float or double input whose width is
    not 1 (a single ``[N, 1]`` input is a feature's column, matched by name). ``inputs``: per
    input, whether it is float or double, and its shape. The adapter feeds by this rule and the
    exact engine reads by it (fuzzing: a matrix input named after a feature was read as that
    feature's column, where the adapter fed it the whole matrix)."""
    if len(inputs) != 1:
        return False
    numeric, shape = inputs[0]
    width = shape[1] if len(shape) == 2 else None
    return numeric and width != 1


def input_features(inputs: Sequence[str], names: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """Which feature each graph input is: its name, or the name with every character other than a
    letter, digit or underscore written ``_`` (converters rename ``education-num`` to
    ``education_num``); and the inputs that are no feature, or whose rewritten name is several
    features' (``a-b`` and ``a.b``: fuzzing found the last one fed, the other ignored)."""
    plain: dict[str, list[str]] = {}
    for name in names:
        plain.setdefault(re.sub(r"[^0-9A-Za-z_]", "_", name), []).append(name)
    found: dict[str, str] = {}
    missing: list[str] = []
    for name in inputs:
        rewritten = plain.get(name, [])
        feature = name if name in names else rewritten[0] if len(rewritten) == 1 else None
        if feature is None:
            missing.append(name)
        else:
            found[name] = feature
    return found, missing


def _width(estimator: OnnxEstimator) -> int | None:
    if isinstance(estimator, OnnxTreeEnsemble):
        splits = [int(t.feature.max()) + 1 for t in estimator.ensemble.trees if t.feature.size]
        return max(splits, default=0)
    return int(estimator.n_features_in_)


class _Walk:
    def __init__(self, space: FeatureSpace, constants: dict[str, Any]) -> None:
        self.space = space
        self.constants = constants
        self.raises: list[tuple[int, int]] = []


def _refuse(step: Step, why: str = "") -> NotEncodableError:
    reason = f": {why}" if why else ""
    return NotEncodableError(f"the exact engine cannot read ONNX op {step.op!r} (node {step.name!r}){reason}")


def _run(step: Step, tensors: dict[str, list[Column]], walk: _Walk) -> None:
    """What ``step`` makes of the tensors it reads (each a list of columns)."""
    if step.op == "Constant":
        return
    data = [tensors.get(name) for name in step.inputs]
    first = data[0]
    if first is None:
        raise _refuse(step, "its input is not made from the graph's inputs")
    handler = _OPS.get(step.op)
    if handler is None:
        raise _refuse(step)
    tensors[step.outputs[0]] = handler(step, first, data, walk)


def _identity(step: Step, columns: list[Column], data: list[list[Column] | None], walk: _Walk) -> list[Column]:
    return columns


def _cast(step: Step, columns: list[Column], data: list[list[Column] | None], walk: _Walk) -> list[Column]:
    """A cast to a float type changes no value; one to int64 truncates, so it is read only of
    whole numbers (:func:`_whole`)."""
    to = int(step.attributes.get("to", FLOAT))
    if to not in (FLOAT, DOUBLE, INT64):
        raise _refuse(step, "a cast to a non-numeric type")
    if to == INT64:
        for column in columns:
            if not _whole(column, walk.space):
                name = walk.space.names[column.source]
                raise _refuse(step, f"a cast to int64 truncates feature {name!r}, which is not a whole number")
    return columns


def _whole(column: Column, space: FeatureSpace) -> bool:
    """Whether every value ``column`` takes is a whole number (an int64 cast or input keeps it):
    a whole-numbered feature's own value, a lookup of whole numbers, or a category's value (read
    as before: the graph's own encoding of it). Fuzzing: a ``Cast`` to int64 was read as the
    identity, so the exact engine's program sent 2.9 right of the threshold 2.5 where the graph,
    truncating it to 2, sent it left."""
    if isinstance(column, CategoryColumn):
        return True
    if column.layers:
        return False
    if isinstance(column, LookupColumn):
        values = np.asarray(column.values, dtype=np.float64)
        return bool(np.all(np.isnan(values) | (values == np.round(values))))
    j = column.source
    step = float(space.step[j])
    original = float(space.original[j])
    return bool(space.integral[j]) or (step >= 1.0 and step.is_integer() and original.is_integer())


def _concat(step: Step, columns: list[Column], data: list[list[Column] | None], walk: _Walk) -> list[Column]:
    if int(step.attributes.get("axis", 1)) not in (1, -1) or any(d is None for d in data):
        raise _refuse(step, "only columns of the graph's inputs, along axis 1")
    return [c for d in data for c in (d or [])]


def _reshape(step: Step, columns: list[Column], data: list[list[Column] | None], walk: _Walk) -> list[Column]:
    shape = np.asarray(walk.constants.get(step.inputs[1], [])).tolist()
    if not (len(shape) == 2 and shape[0] in (-1, 0) and shape[1] in (-1, len(columns))):
        raise _refuse(step, f"a reshape to {shape}")
    return columns


def _gather(step: Step, columns: list[Column], data: list[list[Column] | None], walk: _Walk) -> list[Column]:
    if int(step.attributes.get("axis", 0)) not in (1, -1) or step.inputs[1] not in walk.constants:
        raise _refuse(step, "only constant column indices along axis 1")
    picked = np.asarray(walk.constants[step.inputs[1]]).reshape(-1).tolist()
    n = len(columns)
    if not all(-n <= int(i) < n for i in picked):
        raise _refuse(step, f"indices {picked} of {n} columns")
    return [columns[int(i) % n] for i in picked]


def _scaler(step: Step, columns: list[Column], data: list[list[Column] | None], walk: _Walk) -> list[Column]:
    """``(x - offset) * scale`` per column, an affine layer."""
    offset = list(step.attributes.get("offset", [0.0]))
    scale = list(step.attributes.get("scale", [1.0]))
    out: list[Column] = []
    for i, column in enumerate(columns):
        number = as_number(column, f"ONNX Scaler {step.name!r}", walk.space.names)
        sub = float(offset[i] if len(offset) > 1 else offset[0])
        mul = float(scale[i] if len(scale) > 1 else scale[0])
        layer = Layer(frozenset({"sub", "mul"}), sub=sub, mul=mul, where=f"ONNX Scaler {step.name!r}")
        out.append(
            NumberColumn(number.source, (*number.layers, layer), number.boolean)
            if isinstance(number, NumberColumn)
            else LookupColumn(number.source, number.values, number.read, number.errors, (*number.layers, layer))
        )
    return out


def _one_hot(step: Step, columns: list[Column], data: list[list[Column] | None], walk: _Walk) -> list[Column]:
    """One indicator column per category of each input column (the op's ``[N, C, K]`` output,
    flattened by the ``Reshape`` that follows it)."""
    known = [_text(c) for c in step.attributes.get("cats_strings", [])] or list(step.attributes.get("cats_int64s", []))
    raises = int(step.attributes.get("zeros", 1)) == 0
    out: list[Column] = []
    for column in columns:
        source = _categories(column, step, walk)
        matched = [next((q for q, c in enumerate(known) if same_category(v, c)), None) for v in source.values]
        errors = source.errors
        if raises:
            unknown = [slot for slot, hit in enumerate(matched) if hit is None]
            walk.raises += [(source.source, slot) for slot in unknown if slot > 0]
            errors = errors | frozenset(unknown)
        for q in range(len(known)):
            values = tuple(1.0 if hit == q else 0.0 for hit in matched)
            out.append(
                LookupColumn(source.source, values, "indicator", errors, where=f"ONNX OneHotEncoder {step.name!r}")
            )
    return out


_OPS = {
    "Identity": _identity,
    "Cast": _cast,
    "Concat": _concat,
    "Gather": _gather,
    "Reshape": _reshape,
    "Scaler": _scaler,
    "OneHotEncoder": _one_hot,
}
"""What each operator before the node makes of the columns it reads."""


def _categories(column: Column, step: Step, walk: _Walk) -> CategoryColumn:
    if isinstance(column, CategoryColumn):
        return column
    if isinstance(column, NumberColumn) and column.boolean and not column.layers:
        return CategoryColumn(column.source, (MISSING, False, True))
    raise _refuse(step, f"it encodes feature {walk.space.names[column.source]!r}, which is not categorical here")


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def load_proto(model: Any) -> Any:
    """An ``onnx.ModelProto`` from a path, bytes or a proto."""
    import onnx  # noqa: PLC0415 - optional dependency, loaded when a graph is read

    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, bytes | bytearray):
        return onnx.load_from_string(bytes(model))
    return onnx.load(str(model))


def read_graph(model: Any, output: str | None = None) -> OnnxGraph:
    """The graph of ``model`` (path, bytes or ``ModelProto``) as the exact engine reads it;
    ``output``: the graph output the adapter reads (its path from the node is checked).
    Refuses any operator it does not know, by name."""
    import onnx  # noqa: PLC0415
    from onnx import helper, numpy_helper  # noqa: PLC0415

    proto = load_proto(model)
    graph = proto.graph
    constants: dict[str, Any] = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    nodes = list(graph.node)
    for node in nodes:
        if node.op_type == "Constant":
            constants[node.output[0]] = numpy_helper.to_array(helper.get_attribute_value(node.attribute[0]))
    node = _ml_node(nodes)
    steps = _steps(nodes, node, helper)
    if output is not None:
        _check_after(nodes, node, output, constants)
    initial = {t.name for t in graph.initializer}
    fed = [i for i in graph.input if i.name not in initial]
    inputs = tuple((i.name, int(i.type.tensor_type.elem_type)) for i in fed)
    shapes = [[d.dim_value if d.HasField("dim_value") else None for d in i.type.tensor_type.shape.dim] for i in fed]
    matrix = matrix_input([(kind in (FLOAT, DOUBLE), shape) for (_, kind), shape in zip(inputs, shapes, strict=True)])
    attrs = {a.name: _value(helper.get_attribute_value(a)) for a in node.attribute}
    float32 = _elem_type(proto, node.input[0], onnx) != DOUBLE or _through_float32(node.input[0], inputs, steps)
    where = f"ONNX {node.op_type} {node.name!r}"
    try:
        estimator = _estimator(node.op_type, attrs, float32, where)
    except NotEncodableError:
        raise
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise NotEncodableError(f"{where}: its attributes are not understood ({type(exc).__name__}: {exc})") from None
    return OnnxGraph(estimator, node.input[0], inputs, steps, constants, matrix)


def _ml_node(nodes: list[Any]) -> Any:
    """The graph's one ML node; refuses a graph without one, naming an op it cannot read."""
    ml = [n for n in nodes if n.op_type in ML_NODES]
    if len(ml) != 1:
        unknown = next((n for n in nodes if n.op_type not in (*BEFORE, *AFTER, *ML_NODES, "Mul")), None)
        if unknown is not None:
            raise NotEncodableError(f"the exact engine cannot read ONNX op {unknown.op_type!r} (node {unknown.name!r})")
        raise NotEncodableError(f"the exact engine reads a graph of one of {list(ML_NODES)}; this one has {len(ml)}")
    return ml[0]


def _steps(nodes: list[Any], node: Any, helper: Any) -> tuple[Step, ...]:
    """The operators that make the node's input, in graph order; refuses any other by name."""
    ancestors = _ancestors(nodes, set(node.input))
    steps = []
    for n in nodes:
        if id(n) not in ancestors:
            continue
        if n.op_type not in BEFORE:
            raise NotEncodableError(f"the exact engine cannot read ONNX op {n.op_type!r} (node {n.name!r})")
        attributes = {a.name: _value(helper.get_attribute_value(a)) for a in n.attribute}
        steps.append(Step(n.op_type, n.name, tuple(n.input), tuple(n.output), attributes))
    return tuple(steps)


def _value(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode()
    return value


def _ancestors(nodes: list[Any], wanted: set[str]) -> set[int]:
    """The nodes whose outputs (through others) make the tensors ``wanted``."""
    producer = {out: n for n in nodes for out in n.output}
    found: set[int] = set()
    stack = list(wanted)
    while stack:
        name = stack.pop()
        n = producer.get(name)
        if n is None or id(n) in found:
            continue
        found.add(id(n))
        stack.extend(n.input)
    return found


def _check_after(nodes: list[Any], node: Any, output: str, constants: dict[str, Any]) -> None:
    """The output the adapter reads is made from the node through allowed operators only (and a
    ``Mul`` by a constant 1, LightGBM's)."""
    producer = {out: n for n in nodes for out in n.output}
    stack = [output]
    while stack:
        n = producer.get(stack.pop())
        if n is None or n is node:
            continue
        if n.op_type == "Mul" and any(_ones(constants.get(name)) for name in n.input):
            stack.extend(name for name in n.input if name not in constants)
            continue
        if n.op_type not in AFTER:
            raise NotEncodableError(f"the exact engine cannot read ONNX op {n.op_type!r} (node {n.name!r})")
        stack.extend(n.input)


def _ones(value: Any) -> bool:
    return value is not None and bool(np.all(np.asarray(value) == 1))


def _through_float32(tensor: str, inputs: tuple[tuple[str, int], ...], steps: tuple[Step, ...]) -> bool:
    """Whether the node's input ``tensor`` was float32 on its way from the graph's inputs (a
    ``FLOAT`` input, a ``Cast`` to it, a ``Scaler``), so a double node compares values already
    rounded to float32: its splits are decided as a float32 model's. Fuzzing: a ``FLOAT`` input
    cast to ``DOUBLE`` before a tree of double thresholds sent 0.1 (0.100000001 in float32) right
    of the threshold 0.1, where the reader sent it left, so the exact engine passed over it."""
    fed = {name for step in steps for name in step.inputs} | {tensor}
    return any(kind == FLOAT and name in fed for name, kind in inputs) or any(
        step.op == "Scaler" or (step.op == "Cast" and int(step.attributes.get("to", 0)) == FLOAT) for step in steps
    )


def _elem_type(proto: Any, name: str, onnx: Any) -> int:
    """The element type of tensor ``name`` (FLOAT when shape inference cannot tell)."""
    for info in (*proto.graph.input, *proto.graph.value_info):
        if info.name == name:
            return int(info.type.tensor_type.elem_type)
    try:
        inferred = onnx.shape_inference.infer_shapes(proto)
    except Exception:  # an op shape inference does not know: assume float
        return FLOAT
    for info in inferred.graph.value_info:
        if info.name == name:
            return int(info.type.tensor_type.elem_type)
    return FLOAT


def _estimator(op: str, attrs: dict[str, Any], float32: bool, where: str) -> OnnxEstimator:
    post = str(attrs.get("post_transform", "NONE"))
    if op == "LinearRegressor":
        if int(attrs.get("targets", 1)) != 1 or post != "NONE":
            raise NotEncodableError(f"{where}: several targets or a post_transform {post!r}")
        coef = np.asarray(attrs["coefficients"], dtype=np.float64)
        return OnnxLinearRegressor(coef, np.asarray(attrs.get("intercepts", [0.0]), dtype=np.float64)[:1])
    if op == "LinearClassifier":
        return _linear_classifier(attrs, post, where)
    return OnnxTreeEnsemble(*_trees(op, attrs, post, float32, where))


def _labels(attrs: dict[str, Any], *names: str) -> tuple[Any, ...]:
    for name in names:
        values = attrs.get(name)
        if values:
            return tuple(_value(v) if isinstance(v, bytes) else v for v in values)
    return ()


def _linear_classifier(attrs: dict[str, Any], post: str, where: str) -> OnnxLinearClassifier:
    classes = _labels(attrs, "classlabels_strings", "classlabels_ints")
    coefficients = np.asarray(attrs["coefficients"], dtype=np.float64)
    intercepts = np.asarray(attrs.get("intercepts", []), dtype=np.float64)
    rows = max(intercepts.size, 1)
    coef = coefficients.reshape(rows, -1)
    intercepts = intercepts if intercepts.size else np.zeros(rows)
    if len(classes) == 2:
        negated = rows == 2 and np.allclose(coef[0], -coef[1]) and np.isclose(intercepts[0], -intercepts[1])
        if post != "LOGISTIC" or not negated:
            raise NotEncodableError(f"{where}: a binary model without two opposite rows and a LOGISTIC link")
        return OnnxLinearClassifier(coef[1:2], intercepts[1:2], classes)
    if post != "SOFTMAX" or rows != len(classes):
        raise NotEncodableError(f"{where}: a multi-class model without a softmax ({post})")
    return OnnxLinearClassifier(coef, intercepts, classes)


_MODES = {
    "BRANCH_LEQ": (False, True),
    "BRANCH_LT": (True, True),
    "BRANCH_GT": (False, False),
    "BRANCH_GTE": (True, False),
}
"""Mode -> (a strict comparison, the true branch is the low side)."""


def _trees(
    op: str, attrs: dict[str, Any], post: str, float32: bool, where: str
) -> tuple[Ensemble, tuple[Any, ...] | None]:
    """The node's trees, their link and offset (see the module)."""
    classifier = op == "TreeEnsembleClassifier"
    prefix = "class" if classifier else "target"
    values = _floats(attrs, f"{prefix}_weights")
    ids = np.asarray(attrs[f"{prefix}_ids"], dtype=np.intp)
    base = _floats(attrs, "base_values")
    classes: tuple[Any, ...] | None = None
    if classifier:
        classes = _labels(attrs, "classlabels_strings", "classlabels_int64s")
        n = len(classes)
        used = sorted(set(ids.tolist()))
        if n == 2 and used == [0]:  # scores for class 0 only: class 1's logit or probability
            link: Link = "logit" if post == "LOGISTIC" else "probability"
            if post not in ("LOGISTIC", "NONE") or (post == "NONE" and (values < 0).any()):
                raise NotEncodableError(f"{where}: a binary model with post_transform {post!r}")
            if base.size > 1:  # onnxruntime then answers class 0's score and a constant for class 1
                raise NotEncodableError(f"{where}: a binary model scoring class 0 only, with {base.size} base_values")
            column = np.zeros(n, dtype=np.intp)
            offset = np.array([base[0] if base.size else 0.0])
            keep = np.ones(ids.size, dtype=bool)
        elif n == 2 and post == "NONE" and not base.any():  # both classes scored: class 1's probability
            _check_complements(attrs, prefix, ids, values, where)
            link, column, offset = "probability", np.array([0, 0]), np.zeros(1)
            keep = ids == 1
        elif n > 2 and post in ("SOFTMAX", "NONE"):
            link = "logit" if post == "SOFTMAX" else "probability"
            column = np.arange(n)
            offset = base if base.size == n else np.zeros(n)
            keep = np.ones(ids.size, dtype=bool)
        else:
            raise NotEncodableError(f"{where}: {n} classes with post_transform {post!r} and classes {used} scored")
        outputs = 1 if n == 2 else n
    else:
        if int(attrs.get("n_targets", 1)) != 1 or post != "NONE":
            raise NotEncodableError(f"{where}: several targets or a post_transform {post!r}")
        link, outputs = "value", 1
        column = np.zeros(1, dtype=np.intp)
        offset = np.array([base[0] if base.size else 0.0])
        keep = np.ones(ids.size, dtype=bool)
    aggregate = str(attrs.get("aggregate_function", "SUM"))
    tree_of = np.asarray(attrs["nodes_treeids"], dtype=np.intp)
    tree_ids = sorted(set(tree_of.tolist()))
    if aggregate not in ("SUM", "AVERAGE"):
        raise NotEncodableError(f"{where}: aggregate_function {aggregate!r}")
    weight = 1.0 / len(tree_ids) if aggregate == "AVERAGE" else 1.0
    leaf_tree = np.asarray(attrs[f"{prefix}_treeids"], dtype=np.intp)[keep]
    leaf_node = np.asarray(attrs[f"{prefix}_nodeids"], dtype=np.intp)[keep]
    leaf_column = column[ids[keep]] if classifier else np.zeros(int(keep.sum()), dtype=np.intp)
    leaf_value = values[keep]
    trees = [
        _tree(attrs, tree_of == t, (leaf_tree == t, leaf_node, leaf_column, leaf_value), outputs, float32, where)
        for t in tree_ids
    ]
    return Ensemble(trees, weight, link, f"{where} ({len(trees)} trees)", offset=offset), classes


def _check_complements(
    attrs: dict[str, Any], prefix: str, ids: npt.NDArray[np.intp], values: FloatArray, where: str
) -> None:
    """A binary model scoring both classes is read as class 1's probability, class 0's its
    complement: onnxruntime answers the two sums only where some leaf reached scores class 1 (a
    row without one gets class 0's sum as if only class 0 were scored), and the scorer compares
    the two columns. So every leaf must score class 1, and in each tree class 0's and class 1's
    weights must add up to one amount, the amounts of all trees (averaged or summed) to 1.
    Fuzzing: a hand-built graph whose weights did not was read as ``p0 = 1 - p1``."""
    tree_of = np.asarray(attrs[f"{prefix}_treeids"], dtype=np.intp)
    node_of = np.asarray(attrs[f"{prefix}_nodeids"], dtype=np.intp)
    leaves = {
        (int(t), int(node))
        for t, node, mode in zip(attrs["nodes_treeids"], attrs["nodes_nodeids"], attrs["nodes_modes"], strict=True)
        if _value(mode) == "LEAF"
    }
    sums: dict[tuple[int, int], float] = dict.fromkeys(leaves, 0.0)
    scored: set[tuple[int, int]] = set()
    for t, node, k, w in zip(tree_of.tolist(), node_of.tolist(), ids.tolist(), values.tolist(), strict=True):
        sums[(t, node)] = sums.get((t, node), 0.0) + w
        if k == 1:
            scored.add((t, node))
    per_tree: dict[int, set[float]] = {}
    for (t, _), total in sums.items():
        per_tree.setdefault(t, set()).add(round(total, 6))
    trees = sorted({int(t) for t in attrs["nodes_treeids"]})
    weight = 1.0 / len(trees) if str(attrs.get("aggregate_function", "SUM")) == "AVERAGE" else 1.0
    complementary = (
        leaves <= scored
        and all(len(totals) == 1 for totals in per_tree.values())
        and abs(weight * sum(next(iter(totals)) for totals in per_tree.values()) - 1.0) <= 1e-5
    )
    if not complementary:
        raise NotEncodableError(f"{where}: a binary model whose class 0 and class 1 scores are not complements")


def _floats(attrs: dict[str, Any], name: str) -> FloatArray:
    tensor = attrs.get(f"{name}_as_tensor")
    if tensor is not None:
        from onnx import numpy_helper  # noqa: PLC0415

        return np.asarray(numpy_helper.to_array(tensor), dtype=np.float64).reshape(-1)
    return np.asarray(attrs.get(name, []), dtype=np.float64)


def _tree(  # noqa: PLR0917 - one tree's slices of the node's attribute lists
    attrs: dict[str, Any],
    mine: npt.NDArray[np.bool_],
    leaves: tuple[npt.NDArray[np.bool_], npt.NDArray[np.intp], npt.NDArray[np.intp], FloatArray],
    outputs: int,
    float32: bool,
    where: str,
) -> Tree:
    ids = np.asarray(attrs["nodes_nodeids"], dtype=np.intp)[mine]
    n = int(ids.max()) + 1
    modes = [str(_value(m)) for m, keep in zip(attrs["nodes_modes"], mine, strict=True) if keep]
    features = np.asarray(attrs["nodes_featureids"], dtype=np.intp)[mine]
    thresholds = _floats(attrs, "nodes_values")[mine]
    true = np.asarray(attrs["nodes_truenodeids"], dtype=np.intp)[mine]
    false = np.asarray(attrs["nodes_falsenodeids"], dtype=np.intp)[mine]
    tracks = attrs.get("nodes_missing_value_tracks_true") or [0] * mine.size
    tracks_true = np.asarray(tracks, dtype=bool)[mine] if len(tracks) == mine.size else np.zeros(ids.size, dtype=bool)
    feature = np.full(n, -1, dtype=np.intp)
    threshold = np.zeros(n)
    left = np.full(n, -1, dtype=np.intp)
    right = np.full(n, -1, dtype=np.intp)
    missing_left = np.zeros(n, dtype=bool)
    strict: set[bool] = set()
    for k, node in enumerate(ids.tolist()):
        mode = modes[k]
        if mode == "LEAF":
            continue
        if mode not in _MODES:
            raise NotEncodableError(f"{where}: split mode {mode!r}")
        is_strict, low_is_true = _MODES[mode]
        strict.add(is_strict)
        feature[node], threshold[node] = features[k], thresholds[k]
        low, high = (true[k], false[k]) if low_is_true else (false[k], true[k])
        left[node], right[node] = low, high
        missing_left[node] = bool(tracks_true[k]) == low_is_true
    if len(strict) > 1:
        raise NotEncodableError(f"{where}: a tree mixing strict and non-strict splits")
    value = np.zeros((n, outputs))
    in_tree, node_of, column_of, weight_of = leaves
    np.add.at(value, (node_of[in_tree], column_of[in_tree]), weight_of[in_tree])
    return Tree(feature, threshold, left, right, missing_left, value, strict=strict == {True}, float32=float32)


__all__ = [
    "ML_NODES",
    "OnnxEstimator",
    "OnnxGraph",
    "OnnxLinearClassifier",
    "OnnxLinearRegressor",
    "OnnxTreeEnsemble",
    "input_features",
    "load_proto",
    "matrix_input",
    "read_graph",
]
