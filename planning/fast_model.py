"""A fast path for model calls on scikit-learn pipelines: preprocessing as index arrays, trees as bit masks.

Why: a search spends its time in model calls, and a pipeline call costs milliseconds whatever the
row count. Most of it is overhead, not arithmetic: decoding the candidates into a DataFrame, the
``ColumnTransformer`` validating and splitting it, and (for ``HistGradientBoosting``) one Cython
call per tree. This module compiles, once per search-space encoding, what the pipeline does into
numpy operations on the encoded candidate matrix:

* :func:`compile_inputs` turns the preprocessing (scalers, one-hot and ordinal encoders, imputers,
  pass-through and dropped columns, ``ColumnTransformer``, nested ``Pipeline``) into a plan that
  maps the encoded matrix to exactly the matrix the final estimator receives. Every estimator
  column is either a number column put through the same floating-point operations, in the same
  order, as the scalers apply them, or a lookup table on a categorical column's codes (one-hot,
  ordinal codes, category values; scalers after an encoder are folded into the table with the
  same operations, so the values are bit for bit the same).
* :func:`compile_trees` evaluates a gradient-boosted forest (``HistGradientBoosting*``,
  ``GradientBoosting*``) for all rows and trees at once, QuickScorer style (Lucchese et al.,
  SIGIR 2015): per input column and per rank of a value among the column's split thresholds,
  a precomputed bit mask per tree of the leaves still reachable; a row's leaf in a tree is the
  lowest bit left after AND-ing its columns' masks. The raw score is the baseline plus the leaf
  values added tree by tree, in scikit-learn's order, so the predictions are identical. A random
  forest, extra trees or a decision tree is called tree by tree through scikit-learn's own
  traversal (:class:`BaggedTrees`), without the per-call validation and thread-pool dispatch.

Anything not understood compiles to None and the caller keeps the real pipeline. A compiled path
is checked against the real pipeline (its preprocessing output and its predictions) on probe
rows built from the space before it is used, and the plan does not depend on the instance, only
on the encoding, so all problems of one data set share it (:class:`FastPathCache`).
"""

from __future__ import annotations

import logging
import math
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from counterplan.planning.errors import ModelAdapterError
from counterplan.planning.features import BooleanFeature, CategoricalFeature
from counterplan.planning.space import FeatureSpace, FloatMatrix

logger = logging.getLogger(__name__)

IntArray = npt.NDArray[np.intp]
Method = Literal["predict_proba", "predict"]
Signature = tuple[tuple[Any, ...], ...]

MAX_TABLE_BYTES = 64 * 2**20
"""A forest whose bit-mask tables would exceed this falls back to the estimator's own predict."""
SMALL_SPLIT_COUNT = 8
"""Columns with at most this many distinct thresholds are ranked by one broadcast comparison."""
CHECK_RTOL = 1e-9
CHECK_ATOL = 1e-12
"""How close a fast prediction must be to the real pipeline's (in the probe check and in debug mode)."""


class NotCompilableError(Exception):
    """Raised inside the compiler when a step is not understood; :func:`compile_inputs` returns None."""


# --------------------------------------------------------------------------------------------
# the symbolic columns the compiler tracks through the pipeline

_MISSING = object()
"""A categorical column's value in its "missing" slot (None or NaN in the frame a pipeline gets)."""


@dataclass(frozen=True)
class Layer:
    """One step's elementwise arithmetic on a number column, in scikit-learn's operation order.

    ``x = where(isnan(x), fill, x); x -= sub; x /= div; x *= mul; x += add; clip(x, lo, hi)``, each
    only when named in ``ops`` (an operation left out is not applied at all, so no ``-0.0`` turns
    into ``0.0`` on the way).
    """

    ops: frozenset[str]
    fill: float = math.nan
    sub: float = 0.0
    div: float = 1.0
    mul: float = 1.0
    add: float = 0.0
    lo: float = -math.inf
    hi: float = math.inf


def run_layer(x: FloatMatrix, ops: frozenset[str], constants: dict[str, Any]) -> FloatMatrix:
    """Apply a layer's operations to ``x`` (scalars or per-column vectors as constants).

    The compiler folds layers into lookup tables with this same function, and the runtime applies
    it to whole blocks of columns, so both compute exactly what the scaler computes.
    """
    if "fill" in ops:
        x = np.where(np.isnan(x), constants["fill"], x)
    if "sub" in ops:
        x = x - constants["sub"]
    if "div" in ops:
        x = x / constants["div"]
    if "mul" in ops:
        x = x * constants["mul"]
    if "add" in ops:
        x = x + constants["add"]
    if "clip" in ops:
        x = np.clip(x, constants["lo"], constants["hi"])
    return np.asarray(x, dtype=np.float64)


@dataclass(frozen=True)
class RawColumn:
    """A number column: the feature's value (NaN when missing), then ``layers`` in order."""

    source: int
    layers: tuple[Layer, ...] = ()
    boolean: bool = False
    """A boolean feature decoded as ``False``/``True``: an encoder may read it as two categories."""


@dataclass(frozen=True)
class TableColumn:
    """A lookup on a nominal column's code: ``values[code + 1]``; slot 0 is the missing value."""

    source: int
    values: tuple[float, ...]
    errors: frozenset[int] = frozenset()
    """Slots an encoder fitted with ``handle_unknown='error'`` does not know: the pipeline raises."""


@dataclass(frozen=True)
class CategoryColumn:
    """A nominal column not yet encoded: the value the pipeline sees per slot (slot 0: missing)."""

    source: int
    values: tuple[Any, ...]
    errors: frozenset[int] = frozenset()


Column = RawColumn | TableColumn | CategoryColumn


# --------------------------------------------------------------------------------------------
# compiling the preprocessing


def compile_inputs(model: Any, space: FeatureSpace) -> FastInputs | None:
    """Compile a fitted pipeline's preprocessing for candidates of ``space`` decoded as a DataFrame.

    Returns None when some step is not understood (the caller keeps the real pipeline). The plan
    is not checked here: :func:`compile_fast_path` checks it against the real pipeline.
    """
    try:
        return _compile_inputs(model, space, decoded=True)
    except NotCompilableError as exc:
        logger.debug("fast path: %s", exc)
        return None


def _compile_inputs(model: Any, space: FeatureSpace, decoded: bool) -> FastInputs:
    names = getattr(model, "feature_names_in_", None)
    if decoded and names is not None and list(names) != list(space.names):
        raise NotCompilableError(f"the model was fitted on columns {list(names)}, the space has {list(space.names)}")
    columns = _input_columns(space, decoded)
    for name, step in getattr(model, "steps", [])[:-1]:
        columns = _apply(step, columns, f"step {name!r}")
    return FastInputs.build([_as_number(column, "the estimator") for column in columns], space, decoded)


def _input_columns(space: FeatureSpace, decoded: bool) -> list[Column]:
    """One column per feature, as the pipeline's first step sees it."""
    if not decoded:  # the pipeline takes the encoded matrix itself
        return [RawColumn(j) for j in range(space.n_features)]
    columns: list[Column] = []
    for j, feature in enumerate(space.features):
        if isinstance(feature, CategoricalFeature):
            columns.append(CategoryColumn(j, (_MISSING, *feature.model_values())))
        else:
            columns.append(RawColumn(j, boolean=isinstance(feature, BooleanFeature)))
    return columns


def _apply(step: Any, columns: list[Column], where: str) -> list[Column]:
    """What ``step`` makes of ``columns``; raises :class:`NotCompilableError` for anything else."""
    if step is None or (isinstance(step, str) and step == "passthrough"):
        return columns
    if isinstance(step, str) and step == "drop":
        return []
    kind = type(step).__name__
    handler = _STEPS.get(kind)
    if handler is None:
        raise NotCompilableError(f"{where}: {kind} is not supported")
    return handler(step, columns, where)


def _pipeline(step: Any, columns: list[Column], where: str) -> list[Column]:
    for name, inner in step.steps:
        columns = _apply(inner, columns, f"{where} step {name!r}")
    return columns


def _function_transformer(step: Any, columns: list[Column], where: str) -> list[Column]:
    if step.func is not None:
        raise NotCompilableError(f"{where}: a FunctionTransformer with a function")
    return columns


def _column_transformer(step: Any, columns: list[Column], where: str) -> list[Column]:
    if getattr(step, "transformer_weights", None):
        raise NotCompilableError(f"{where}: transformer weights")
    names = [str(n) for n in getattr(step, "feature_names_in_", [])]
    if names and len(names) != len(columns):
        raise NotCompilableError(f"{where}: fitted on {len(names)} columns, given {len(columns)}")
    out: list[Column] = []
    for name, transformer, selection in step.transformers_:
        picked = _select(selection, names, len(columns), f"{where} transformer {name!r}")
        if not picked or (isinstance(transformer, str) and transformer == "drop"):
            continue
        out += _apply(transformer, [columns[i] for i in picked], f"{where} transformer {name!r}")
    return out


def _select(selection: Any, names: list[str], n: int, where: str) -> list[int]:
    """Column positions a ``ColumnTransformer`` entry selects (names, ints, a slice, a bool mask)."""
    if isinstance(selection, slice):
        if isinstance(selection.start, str) or isinstance(selection.stop, str):  # label slices include the end
            start = 0 if selection.start is None else _position(selection.start, names, where)
            stop = n - 1 if selection.stop is None else _position(selection.stop, names, where)
            return list(range(start, stop + 1))
        return list(range(n))[selection]
    if isinstance(selection, str | int | np.integer):
        selection = [selection]
    picked = list(np.asarray(selection).tolist()) if isinstance(selection, np.ndarray) else list(selection)
    if picked and all(isinstance(p, bool | np.bool_) for p in picked):
        return [i for i, p in enumerate(picked) if p]
    return [_position(p, names, where) if isinstance(p, str) else int(p) for p in picked]


def _position(name: str, names: list[str], where: str) -> int:
    if name not in names:
        raise NotCompilableError(f"{where}: unknown column {name!r}")
    return names.index(name)


def _check_width(step: Any, columns: list[Column], where: str) -> None:
    fitted = getattr(step, "n_features_in_", None)
    if fitted is not None and fitted != len(columns):
        raise NotCompilableError(f"{where}: fitted on {fitted} columns, given {len(columns)}")


def _scaler(step: Any, columns: list[Column], where: str) -> list[Column]:
    """Scalers: one layer per column, with the operations the scaler applies to a dense array."""
    _check_width(step, columns, where)
    kind = type(step).__name__
    layers = [_scaler_layer(step, kind, i) for i in range(len(columns))]
    return [_with_layer(column, layer, where) for column, layer in zip(columns, layers, strict=True)]


def _scaler_layer(step: Any, kind: str, i: int) -> Layer:
    if kind == "StandardScaler":
        ops = {"sub"} if step.with_mean else set()
        ops |= {"div"} if step.with_std else set()
        return Layer(
            frozenset(ops),
            sub=float(step.mean_[i]) if step.with_mean else 0.0,
            div=float(step.scale_[i]) if step.with_std else 1.0,
        )
    if kind == "RobustScaler":
        ops = {"sub"} if step.with_centering else set()
        ops |= {"div"} if step.with_scaling else set()
        return Layer(
            frozenset(ops),
            sub=float(step.center_[i]) if step.with_centering else 0.0,
            div=float(step.scale_[i]) if step.with_scaling else 1.0,
        )
    if kind == "MinMaxScaler":
        low, high = step.feature_range if step.clip else (-math.inf, math.inf)
        ops = {"mul", "add"} | ({"clip"} if step.clip else set())
        return Layer(frozenset(ops), mul=float(step.scale_[i]), add=float(step.min_[i]), lo=low, hi=high)
    # MaxAbsScaler
    clip = bool(getattr(step, "clip", False))
    return Layer(frozenset({"div"} | ({"clip"} if clip else set())), div=float(step.scale_[i]), lo=-1.0, hi=1.0)


def _with_layer(column: Column, layer: Layer, where: str) -> Column:
    """A number column with one more layer; a lookup table gets the layer folded into its values."""
    if not layer.ops:
        return column
    column = _as_number(column, where)
    if isinstance(column, RawColumn):
        return RawColumn(column.source, (*column.layers, layer))  # no longer a plain boolean
    values = run_layer(np.asarray(column.values, dtype=np.float64), layer.ops, _constants(layer))
    return replace(column, values=tuple(float(v) for v in values))


def _constants(layer: Layer) -> dict[str, float]:
    return {name: getattr(layer, name) for name in ("fill", "sub", "div", "mul", "add", "lo", "hi")}


def _as_number(column: Column, reader: str) -> RawColumn | TableColumn:
    """A column read as numbers: categories become a table of their numeric values."""
    if not isinstance(column, CategoryColumn):
        return column
    values = []
    for value in column.values:
        if value is _MISSING or value is None:
            values.append(math.nan)
        elif isinstance(value, bool | int | float | np.number):
            values.append(float(value))
        else:
            raise NotCompilableError(f"{reader} reads text categories without an encoder")
    return TableColumn(column.source, tuple(values), column.errors)


def _as_categories(column: Column, where: str) -> CategoryColumn:
    """A column an encoder reads: a categorical feature, or a boolean one (False/True)."""
    if isinstance(column, CategoryColumn):
        return column
    if isinstance(column, RawColumn) and column.boolean and not column.layers:
        return CategoryColumn(column.source, (_MISSING, False, True))
    raise NotCompilableError(f"{where}: encodes a column that is not a categorical feature")


def same_category(ours: Any, theirs: Any) -> bool:
    """Does our category value match an encoder's category (missing matches missing)? Numbers
    match numbers by value, anything else by text; the exact engine's decomposition uses it too."""
    if ours is _MISSING:
        return theirs is None or (isinstance(theirs, float | np.floating) and math.isnan(theirs))
    if isinstance(ours, str) or isinstance(theirs, str):
        return str(ours) == str(theirs)
    try:
        return bool(float(ours) == float(theirs))
    except (TypeError, ValueError):
        return False


def _match(values: Sequence[Any], known: Any) -> list[int | None]:
    """Per slot: the position of the encoder category it matches, or None (unknown)."""
    out: list[int | None] = []
    for value in values:
        hit = next((q for q, category in enumerate(known) if same_category(value, category)), None)
        out.append(hit)
    return out


def _check_frequent(step: Any, where: str) -> None:
    if getattr(step, "_infrequent_enabled", False) and any(
        c is not None for c in getattr(step, "infrequent_categories_", [])
    ):
        raise NotCompilableError(f"{where}: infrequent categories")


def _one_hot(step: Any, columns: list[Column], where: str) -> list[Column]:
    """One table per output column: 1 where the slot's category is that column's, else 0."""
    _check_frequent(step, where)
    if len(step.categories_) != len(columns):
        raise NotCompilableError(f"{where}: fitted on {len(step.categories_)} columns, given {len(columns)}")
    drop = getattr(step, "drop_idx_", None)
    out: list[Column] = []
    for i, (column, known) in enumerate(zip(columns, step.categories_, strict=True)):
        source = _as_categories(column, where)
        matched = _match(source.values, known)
        errors = source.errors | _unknown_slots(matched, step.handle_unknown == "error")
        dropped = None if drop is None or drop[i] is None else int(drop[i])
        for q in range(len(known)):
            if q != dropped:
                values = tuple(1.0 if hit == q else 0.0 for hit in matched)
                out.append(TableColumn(source.source, values, errors))
    return out


def _unknown_slots(matched: list[int | None], raises: bool) -> frozenset[int]:
    """Slots the encoder does not know, when it raises on them. Slot 0 (missing) is checked at run
    time (only spaces whose original is missing hold it); an unknown category is refused now."""
    if not raises:
        return frozenset()
    if any(hit is None for hit in matched[1:]):
        raise NotCompilableError("an encoder with handle_unknown='error' does not know some category")
    return frozenset({0}) if matched[0] is None else frozenset()


def _ordinal(step: Any, columns: list[Column], where: str) -> list[Column]:
    """One table per column: the category's position, the missing or the unknown value."""
    _check_frequent(step, where)
    if len(step.categories_) != len(columns):
        raise NotCompilableError(f"{where}: fitted on {len(step.categories_)} columns, given {len(columns)}")
    out: list[Column] = []
    for column, known in zip(columns, step.categories_, strict=True):
        source = _as_categories(column, where)
        matched = _match(source.values, known)
        raises = step.handle_unknown == "error"
        errors = source.errors | _unknown_slots(matched, raises)
        unknown = math.nan if raises else float(step.unknown_value)
        values = []
        for hit in matched:
            if hit is None:
                values.append(unknown)
            elif same_category(_MISSING, known[hit]):
                values.append(float(step.encoded_missing_value))
            else:
                values.append(float(hit))
        out.append(TableColumn(source.source, tuple(values), errors))
    return out


def _imputer(step: Any, columns: list[Column], where: str) -> list[Column]:
    """A ``SimpleImputer`` of NaN without indicators: fills a column's missing value with its statistic."""
    missing = step.missing_values
    if step.add_indicator or not (isinstance(missing, float) and math.isnan(missing)):
        raise NotCompilableError(f"{where}: a SimpleImputer with indicators or other missing values")
    statistics = list(step.statistics_)
    if len(statistics) != len(columns) or any(same_category(_MISSING, s) for s in statistics):
        raise NotCompilableError(f"{where}: a SimpleImputer that drops empty columns")
    out: list[Column] = []
    for given, statistic in zip(columns, statistics, strict=True):
        plain_boolean = isinstance(given, RawColumn) and given.boolean and not given.layers
        column = _as_categories(given, where) if plain_boolean else given  # an encoder may read it next
        if isinstance(column, CategoryColumn):
            out.append(replace(column, values=(statistic, *column.values[1:]), errors=column.errors - {0}))
        elif isinstance(statistic, bool | int | float | np.number):
            out.append(_with_layer(column, Layer(frozenset({"fill"}), fill=float(statistic)), where))
        else:
            raise NotCompilableError(f"{where}: fills a number column with {statistic!r}")
    return out


_Handler = Callable[[Any, list[Column], str], list[Column]]
_STEPS: dict[str, _Handler] = {
    "Pipeline": _pipeline,
    "ColumnTransformer": _column_transformer,
    "FunctionTransformer": _function_transformer,
    "StandardScaler": _scaler,
    "RobustScaler": _scaler,
    "MinMaxScaler": _scaler,
    "MaxAbsScaler": _scaler,
    "OneHotEncoder": _one_hot,
    "OrdinalEncoder": _ordinal,
    "SimpleImputer": _imputer,
}


# --------------------------------------------------------------------------------------------
# running the compiled preprocessing


@dataclass(frozen=True)
class _Stage:
    """One layer applied to a block of the number columns (``columns`` None: all of them)."""

    ops: frozenset[str]
    columns: IntArray | None
    constants: dict[str, FloatMatrix]


def _placement(positions: Sequence[int]) -> slice | IntArray:
    """Where a block goes in the output: a slice when the positions are consecutive (cheaper)."""
    if positions and list(positions) == list(range(positions[0], positions[0] + len(positions))):
        return slice(positions[0], positions[0] + len(positions))
    return np.asarray(positions, dtype=np.intp)


@dataclass(frozen=True)
class FastInputs:
    """The compiled preprocessing: an encoded candidate matrix in, the estimator's input out.

    Number columns are gathered from the matrix (missing codes to NaN), put through their
    layers block by block, and placed; table columns are one gather from a flat table indexed by
    each row's codes. No per-row Python anywhere.
    """

    width: int
    decoded: bool
    raw_sources: IntArray
    raw_integral: IntArray
    raw_place: slice | IntArray
    stages: tuple[_Stage, ...]
    table_sources: IntArray
    table_offsets: IntArray
    table_values: FloatMatrix
    table_place: slice | IntArray
    error_slots: npt.NDArray[np.bool_] | None = None

    @classmethod
    def build(cls, columns: list[RawColumn | TableColumn], space: FeatureSpace, decoded: bool) -> FastInputs:
        """Index arrays and tables for ``columns``, the estimator's input columns in order."""
        raw = [(p, c) for p, c in enumerate(columns) if isinstance(c, RawColumn)]
        tables = [(p, c) for p, c in enumerate(columns) if isinstance(c, TableColumn)]
        sources = np.array([c.source for _, c in raw], dtype=np.intp)
        integral = np.flatnonzero(space.integral[sources]) if decoded and raw else np.empty(0, dtype=np.intp)
        sizes = [len(c.values) for _, c in tables]
        offsets = np.cumsum([0, *sizes[:-1]]).astype(np.intp) if tables else np.empty(0, dtype=np.intp)
        flat = np.array([v for _, c in tables for v in c.values], dtype=np.float64)
        errors = np.zeros(flat.size, dtype=bool)
        for offset, (_, column) in zip(offsets, tables, strict=True):
            errors[[int(offset) + slot for slot in column.errors]] = True
        return cls(
            width=len(columns),
            decoded=decoded,
            raw_sources=sources,
            raw_integral=integral,
            raw_place=_placement([p for p, _ in raw]),
            stages=_stages([c for _, c in raw]),
            table_sources=np.array([c.source for _, c in tables], dtype=np.intp),
            table_offsets=offsets + 1,  # slot 0 is the missing code -1
            table_values=flat,
            table_place=_placement([p for p, _ in tables]),
            error_slots=errors if errors.any() else None,
        )

    def transform(self, X: FloatMatrix, missing_code: FloatMatrix) -> FloatMatrix:
        """The estimator's input for the encoded candidates ``X`` (``missing_code``: the space's)."""
        out = np.empty((X.shape[0], self.width), dtype=np.float64)
        if self.raw_sources.size:
            out[:, self.raw_place] = self._numbers(X, missing_code)
        if self.table_sources.size:
            slots = np.rint(X[:, self.table_sources]).astype(np.intp) + self.table_offsets
            if self.error_slots is not None and self.error_slots[slots].any():
                raise ValueError(
                    "Found unknown categories during transform (a missing value the encoder does not know)"
                )
            out[:, self.table_place] = self.table_values[slots]
        return out

    def _numbers(self, X: FloatMatrix, missing_code: FloatMatrix) -> FloatMatrix:
        block = X[:, self.raw_sources]
        if self.decoded:
            if self.raw_integral.size == self.raw_sources.size:
                block = np.rint(block)
            elif self.raw_integral.size:
                block[:, self.raw_integral] = np.rint(block[:, self.raw_integral])
            codes = missing_code[self.raw_sources]
            if not np.isnan(codes).all():
                block = np.where(block == codes, np.nan, block)
        for stage in self.stages:
            if stage.columns is None:
                block = run_layer(block, stage.ops, stage.constants)
            else:
                block[:, stage.columns] = run_layer(block[:, stage.columns], stage.ops, stage.constants)
        return block


def _stages(columns: list[RawColumn]) -> tuple[_Stage, ...]:
    """The columns' layers as blocks: the k-th layers of all columns sharing their operations."""
    stages: list[_Stage] = []
    depth = max((len(c.layers) for c in columns), default=0)
    for k in range(depth):
        groups: dict[frozenset[str], list[int]] = {}
        for i, column in enumerate(columns):
            if k < len(column.layers) and column.layers[k].ops:
                groups.setdefault(column.layers[k].ops, []).append(i)
        for ops, members in groups.items():
            layers = [columns[i].layers[k] for i in members]
            constants = {
                name: np.array([getattr(layer, name) for layer in layers], dtype=np.float64)
                for name in ("fill", "sub", "div", "mul", "add", "lo", "hi")
            }
            every = len(members) == len(columns)
            stages.append(_Stage(ops, None if every else np.asarray(members, dtype=np.intp), constants))
    return tuple(stages)


# --------------------------------------------------------------------------------------------
# trees


@dataclass(frozen=True)
class _Tree:
    """One regression tree in plain arrays (children -1 at leaves)."""

    feature: IntArray
    threshold: FloatMatrix
    missing_left: npt.NDArray[np.bool_]
    left: IntArray
    right: IntArray
    value: FloatMatrix


_DE_BRUIJN = {8: (0x1D, 5), 16: (0x09AF, 12), 32: (0x077CB531, 27), 64: (0x03F79D71B4CB0A89, 58)}
"""Multiplier and shift that map a single set bit to a unique index (a de Bruijn sequence)."""
_WORDS: dict[int, type[np.unsignedinteger[Any]]] = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


@dataclass(frozen=True)
class TreePredictor:
    """A boosted forest evaluated for all rows and trees at once, equal to scikit-learn's own.

    Per used input column: the sorted distinct thresholds and a block of the mask table, one row
    per rank of a value among them (rank = thresholds below the value) plus one row for NaN. A
    row of the table holds, per tree, the leaves not ruled out by the column's splits that send
    such a value right. AND-ing a candidate's rows over its columns leaves, per tree, the bits of
    leaves it may reach; the leftmost one (lowest bit, leaves numbered left to right) is the leaf
    it reaches (QuickScorer). The raw score adds the leaf values tree by tree after the baseline,
    as scikit-learn does, then the estimator's own link gives the prediction.
    """

    columns: IntArray
    thresholds: tuple[FloatMatrix, ...]
    small: IntArray
    small_thresholds: FloatMatrix
    large: IntArray
    offsets: IntArray
    nan_rows: IntArray
    table: npt.NDArray[np.unsignedinteger[Any]]
    leaf_values: FloatMatrix
    tree_base: IntArray
    baseline: FloatMatrix
    n_outputs: int
    word_bits: int
    float32_inputs: bool
    allow_nan: bool
    finish: Callable[[FloatMatrix], FloatMatrix]

    def raw(self, X: FloatMatrix) -> FloatMatrix:
        """The raw scores, shape ``(n, n_outputs)`` in Fortran order (as scikit-learn makes them)."""
        X = self._checked(X)
        values = self._leaf_values(self._masks(self._rows(X[:, self.columns].T)))  # (n_trees, n)
        steps = values.reshape(-1, self.n_outputs, X.shape[0])
        total = np.repeat(self.baseline[:, None], X.shape[0], axis=1)
        for step in steps:  # tree by tree, as scikit-learn adds them (a sum of the block could pair them up)
            total += step
        return np.asarray(total.T)

    def predict(self, X: FloatMatrix) -> FloatMatrix:
        """The estimator's prediction (``predict_proba`` for a classifier, ``predict`` for a regressor)."""
        return self.finish(self.raw(X))

    def _checked(self, X: FloatMatrix) -> FloatMatrix:
        if self.float32_inputs:  # GradientBoosting compares float32 inputs with float64 thresholds
            X = X.astype(np.float32).astype(np.float64)
        if not self.allow_nan and not np.isfinite(X).all():
            raise ValueError("Input X contains NaN or infinity (or a value too large for float32).")
        return X

    def _rows(self, XT: FloatMatrix) -> IntArray:
        """Per used column and row (``XT`` is column-major): the table row of the value's rank."""
        ranks = np.empty(XT.shape, dtype=np.intp)
        if self.small.size:
            block = XT[self.small]
            counted = np.zeros(block.shape, dtype=np.intp)
            for k in range(self.small_thresholds.shape[1]):  # padded with +inf: never below a value
                counted += block > self.small_thresholds[:, k : k + 1]
            ranks[self.small] = counted
        for i in self.large:
            ranks[i] = np.searchsorted(self.thresholds[i], XT[i], side="left")
        ranks += self.offsets[:, None]
        nan = np.isnan(XT)
        if nan.any():
            ranks = np.where(nan, self.nan_rows[:, None], ranks)
        return ranks

    def _masks(self, rows: IntArray) -> npt.NDArray[np.unsignedinteger[Any]]:
        """Per row and tree: the leaves left after AND-ing the rows' table rows. Columns whose rank is
        the same in every row (the immutable ones, say) are AND-ed once, not once per row."""
        if rows.shape[1] == 0:
            return np.empty((0, self.table.shape[1]), dtype=self.table.dtype)
        same = (rows == rows[:, :1]).all(axis=1)
        masks = np.bitwise_and.reduce(self.table[rows[same, 0]], axis=0)
        masks = np.repeat(masks[None, :], rows.shape[1], axis=0)
        for column in rows[~same]:
            masks &= self.table[column]
        return masks

    def _leaf_values(self, masks: npt.NDArray[np.unsignedinteger[Any]]) -> FloatMatrix:
        """Per tree and row: the value of the leaf of the lowest bit left in the mask."""
        masks = np.ascontiguousarray(masks.T)
        word = masks.dtype.type
        lowest = masks & (~masks + word(1))
        multiplier, shift = _DE_BRUIJN[self.word_bits]
        slot = (lowest * word(multiplier)) >> word(shift)
        return np.asarray(self.leaf_values[slot.astype(np.intp) + self.tree_base[:, None]])


class BaggedTrees:
    """A random forest or extra-trees ensemble (or a single decision tree), called tree by tree
    through scikit-learn's own traversal with ``check_input=False``.

    What the estimator's ``predict_proba`` / ``predict`` costs besides the trees is validating the
    input (a DataFrame of hundreds of columns takes milliseconds), dispatching every tree through
    joblib and, on the real path, building that DataFrame; this skips them. The trees' outputs are
    summed in the estimators' order and divided by their count, exactly as the forest does with
    ``n_jobs=None``, so the result is bit-identical (with ``n_jobs`` set, the forest's own order
    varies and the probe check's tolerance applies).
    """

    def predict(self, X: FloatMatrix, estimator: Any) -> FloatMatrix:
        """Class probabilities (a classifier) or predictions (a regressor) of ``estimator`` for
        every row. The trees are read from the estimator at every call, never kept: a forest refit
        in place (``warm_start``) is seen, and the path holds no reference to the model."""
        data = np.ascontiguousarray(X, dtype=np.float32)
        trees = list(getattr(estimator, "estimators_", [estimator]))
        outputs = int(getattr(estimator, "n_outputs_", 1))
        if hasattr(estimator, "classes_"):
            out = np.zeros((data.shape[0], int(np.atleast_1d(estimator.n_classes_)[0])), dtype=np.float64)
            for tree in trees:
                out += tree.predict_proba(data, check_input=False)
        else:
            out = np.zeros((data.shape[0], outputs) if outputs > 1 else data.shape[0], dtype=np.float64)
            for tree in trees:
                out += tree.predict(data, check_input=False)
        out /= len(trees)
        return out


BAGGED_KINDS = (
    "RandomForestClassifier",
    "RandomForestRegressor",
    "ExtraTreesClassifier",
    "ExtraTreesRegressor",
    "DecisionTreeClassifier",
    "DecisionTreeRegressor",
    "ExtraTreeClassifier",
    "ExtraTreeRegressor",
)


def compile_trees(estimator: Any) -> TreePredictor | BaggedTrees | None:
    """A faster evaluator for a fitted tree ensemble, or None when it cannot be built.

    Supports ``HistGradientBoostingClassifier/Regressor`` (numeric splits; a categorical split
    gives None) and ``GradientBoostingClassifier/Regressor`` with a constant initial estimator,
    as a vectorised QuickScorer (:class:`TreePredictor`; trees with more than 64 leaves, or tables
    beyond :data:`MAX_TABLE_BYTES`, give None); and random forests, extra trees and decision trees
    with one classification output (any number of regression outputs) as :class:`BaggedTrees`.
    """
    kind = type(estimator).__name__
    if kind in BAGGED_KINDS:
        if hasattr(estimator, "classes_") and int(getattr(estimator, "n_outputs_", 1)) != 1:
            return None  # a multi-output classifier: the adapters refuse it anyway
        return BaggedTrees()
    try:
        if kind in ("HistGradientBoostingClassifier", "HistGradientBoostingRegressor"):
            return _hist_gradient_boosting(estimator)
        if kind in ("GradientBoostingClassifier", "GradientBoostingRegressor"):
            return _gradient_boosting(estimator)
    except (AttributeError, TypeError, ValueError, IndexError) as exc:  # a fitted layout we do not know
        logger.debug("fast path: no tree evaluator for %s: %s", kind, exc)
    return None


def _hist_gradient_boosting(estimator: Any) -> TreePredictor | None:
    if getattr(estimator, "_preprocessor", None) is not None or getattr(estimator, "is_categorical_", None) is not None:
        return None
    trees: list[_Tree] = []
    for predictors in estimator._predictors:
        for predictor in predictors:
            nodes = predictor.nodes
            if nodes["is_categorical"].any():
                return None
            leaf = nodes["is_leaf"].astype(bool)
            trees.append(
                _Tree(
                    feature=nodes["feature_idx"].astype(np.intp),
                    threshold=nodes["num_threshold"].astype(np.float64),
                    missing_left=nodes["missing_go_to_left"].astype(bool),
                    left=np.where(leaf, -1, nodes["left"].astype(np.intp)),
                    right=np.where(leaf, -1, nodes["right"].astype(np.intp)),
                    value=nodes["value"].astype(np.float64),
                )
            )
    baseline = np.asarray(estimator._baseline_prediction, dtype=np.float64).reshape(-1)
    loss = estimator._loss
    if hasattr(estimator, "classes_"):
        finish: Callable[[FloatMatrix], FloatMatrix] = loss.predict_proba
    else:

        def finish(raw: FloatMatrix) -> FloatMatrix:
            return np.asarray(loss.link.inverse(raw.ravel()))

    return _forest(trees, baseline, finish, float32_inputs=False, allow_nan=True)


def _gradient_boosting(estimator: Any) -> TreePredictor | None:
    init = estimator.init_
    if not (isinstance(init, str) and init == "zero") and type(init).__name__ not in (
        "DummyClassifier",
        "DummyRegressor",
    ):
        return None  # a per-row initial estimator
    zero = np.zeros((1, estimator.n_features_in_), dtype=np.float32)
    baseline = np.asarray(estimator._raw_predict_init(zero), dtype=np.float64).reshape(-1)
    rate = float(estimator.learning_rate)
    trees = []
    for stage in estimator.estimators_:
        for regressor in stage:
            tree = regressor.tree_
            trees.append(
                _Tree(
                    feature=np.asarray(tree.feature, dtype=np.intp),
                    threshold=np.asarray(tree.threshold, dtype=np.float64),
                    missing_left=np.zeros(tree.node_count, dtype=bool),  # NaN never reaches a tree: rejected
                    left=np.asarray(tree.children_left, dtype=np.intp),
                    right=np.asarray(tree.children_right, dtype=np.intp),
                    value=rate * np.asarray(tree.value, dtype=np.float64).reshape(tree.node_count, -1)[:, 0],
                )
            )
    loss = estimator._loss
    if hasattr(estimator, "classes_"):

        def finish(raw: FloatMatrix) -> FloatMatrix:  # GradientBoosting's raw scores are C-ordered
            return np.asarray(loss.predict_proba(raw.ravel() if raw.shape[1] == 1 else np.ascontiguousarray(raw)))

    else:

        def finish(raw: FloatMatrix) -> FloatMatrix:
            return np.asarray(raw.ravel())

    return _forest(trees, baseline, finish, float32_inputs=True, allow_nan=False)


def _leaf_ranges(tree: _Tree) -> tuple[IntArray, IntArray, IntArray]:
    """Leaves numbered left to right; per node the range ``[low, high)`` of leaves below it."""
    n = tree.left.size
    low = np.zeros(n, dtype=np.intp)
    high = np.zeros(n, dtype=np.intp)
    order: list[int] = []
    stack: list[tuple[int, bool]] = [(0, False)]
    while stack:
        node, done = stack.pop()
        if tree.left[node] < 0:
            low[node] = len(order)
            order.append(node)
            high[node] = len(order)
        elif done:
            low[node] = low[tree.left[node]]
            high[node] = high[tree.right[node]]
        else:
            stack += [(node, True), (int(tree.right[node]), False), (int(tree.left[node]), False)]
    return low, high, np.asarray(order, dtype=np.intp)


def _forest(
    trees: list[_Tree],
    baseline: FloatMatrix,
    finish: Callable[[FloatMatrix], FloatMatrix],
    *,
    float32_inputs: bool,
    allow_nan: bool,
) -> TreePredictor | None:
    """Mask tables, thresholds and leaf values of ``trees`` (ordered iteration by iteration)."""
    most = max(int((t.left < 0).sum()) for t in trees)
    if most > 64:
        return None
    bits = next(b for b in (8, 16, 32, 64) if most <= b)  # narrower words: less memory to AND
    ranges = [_leaf_ranges(tree) for tree in trees]
    splits = _splits(trees, ranges, bits)
    columns = np.unique(splits["column"]) if splits["column"].size else np.zeros(1, dtype=np.intp)
    thresholds = tuple(np.unique(splits["threshold"][splits["column"] == c]) for c in columns)
    if sum(t.size + 2 for t in thresholds) * len(trees) * (bits // 8) > MAX_TABLE_BYTES:
        return None
    table, offsets = _tables(splits, columns, thresholds, len(trees), _WORDS[bits])
    counts = np.array([t.size for t in thresholds], dtype=np.intp)
    small = np.flatnonzero(counts <= SMALL_SPLIT_COUNT)
    return TreePredictor(
        columns=columns.astype(np.intp),
        thresholds=thresholds,
        small=small,
        small_thresholds=_padded([thresholds[i] for i in small]),
        large=np.flatnonzero(counts > SMALL_SPLIT_COUNT),
        offsets=offsets,
        nan_rows=offsets + counts + 1,
        table=table,
        leaf_values=_leaf_table(trees, [order for _, _, order in ranges], bits),
        tree_base=np.arange(len(trees), dtype=np.intp) * bits,
        baseline=baseline,
        n_outputs=baseline.size,
        word_bits=bits,
        float32_inputs=float32_inputs,
        allow_nan=allow_nan,
        finish=finish,
    )


def _padded(thresholds: list[FloatMatrix]) -> FloatMatrix:
    """Few thresholds per column as one matrix, padded with +inf (no value is above +inf); as wide
    as the longest list (one-hot columns have one threshold: one comparison per value)."""
    padded = np.full((len(thresholds), max((t.size for t in thresholds), default=0)), np.inf)
    for row, values in enumerate(thresholds):
        padded[row, : values.size] = values
    return padded


def _leaf_table(trees: list[_Tree], orders: list[IntArray], bits: int) -> FloatMatrix:
    """Leaf values per tree, at the index the de Bruijn hash gives each leaf's bit."""
    multiplier, shift = _DE_BRUIJN[bits]
    values = np.zeros(len(trees) * bits, dtype=np.float64)
    for t, (tree, order) in enumerate(zip(trees, orders, strict=True)):
        slots = [((1 << b) * multiplier % (1 << bits)) >> shift for b in range(order.size)]
        values[t * bits + np.asarray(slots, dtype=np.intp)] = tree.value[order]
    return values


def _splits(
    trees: list[_Tree], ranges: list[tuple[IntArray, IntArray, IntArray]], bits: int
) -> dict[str, npt.NDArray[Any]]:
    """Every internal node: its column, threshold, NaN direction, tree, and the mask of the leaves
    that stay reachable when a value goes right (all but those of its left subtree)."""
    every = (1 << bits) - 1
    parts: dict[str, list[Any]] = {"column": [], "threshold": [], "missing_left": [], "tree": [], "mask": []}
    for t, (tree, (low, high, _)) in enumerate(zip(trees, ranges, strict=True)):
        inner = np.flatnonzero(tree.left >= 0)
        for child in tree.left[inner]:
            below = ((1 << int(high[child])) - 1) ^ ((1 << int(low[child])) - 1)
            parts["mask"].append(every ^ below)
        parts["tree"] += [t] * inner.size
        parts["column"] += tree.feature[inner].tolist()
        parts["threshold"] += tree.threshold[inner].tolist()
        parts["missing_left"] += tree.missing_left[inner].tolist()
    return {
        "column": np.asarray(parts["column"], dtype=np.intp),
        "threshold": np.asarray(parts["threshold"], dtype=np.float64),
        "missing_left": np.asarray(parts["missing_left"], dtype=bool),
        "tree": np.asarray(parts["tree"], dtype=np.intp),
        "mask": np.asarray(parts["mask"], dtype=_WORDS[bits]),
    }


def _tables(
    splits: dict[str, npt.NDArray[Any]],
    columns: IntArray,
    thresholds: tuple[FloatMatrix, ...],
    n_trees: int,
    word: type[np.unsignedinteger[Any]],
) -> tuple[npt.NDArray[np.unsignedinteger[Any]], IntArray]:
    """Per column: rows for ranks 0..k (splits with a threshold below the value AND-ed in) and NaN."""
    every = np.iinfo(word).max
    blocks = []
    offsets = []
    offset = 0
    for c, column_thresholds in zip(columns, thresholds, strict=True):
        on = splits["column"] == c
        k = np.searchsorted(column_thresholds, splits["threshold"][on])
        trees, masks = splits["tree"][on], splits["mask"][on]
        block = np.full((column_thresholds.size + 2, n_trees), every, dtype=word)
        np.bitwise_and.at(block, (k + 1, trees), masks)  # a value above threshold k goes right
        block[:-1] = np.bitwise_and.accumulate(block[:-1], axis=0)
        right = ~splits["missing_left"][on]
        block[-1] = every
        np.bitwise_and.at(block[-1], trees[right], masks[right])
        blocks.append(block)
        offsets.append(offset)
        offset += block.shape[0]
    return np.concatenate(blocks), np.asarray(offsets, dtype=np.intp)


# --------------------------------------------------------------------------------------------
# the whole fast path, checked, and its cache


@dataclass(frozen=True)
class FastPath:
    """Compiled preprocessing (None: the estimator takes the matrix as it is) and how the final
    estimator is called: a compiled forest, or its own ``method`` on the compiled input.

    It holds no reference to the model (the model is given at every call), so a cache of paths
    keyed by the model never keeps the model alive.
    """

    inputs: FastInputs | None
    trees: TreePredictor | BaggedTrees | None
    method: Method

    def __call__(self, X: FloatMatrix, space: FeatureSpace, model: Any) -> Any:
        """The final estimator's answer for the encoded candidates ``X``."""
        data = X if self.inputs is None else self.inputs.transform(X, space.missing_code)
        if isinstance(self.trees, BaggedTrees):
            return self.trees.predict(data, final_estimator(model))
        if self.trees is not None:
            return self.trees.predict(data)
        return getattr(final_estimator(model), self.method)(data)


def final_estimator(model: Any) -> Any:
    """The last step of a pipeline, or the model itself."""
    steps = getattr(model, "steps", None)
    return steps[-1][1] if steps else model


_UNKNOWN: Any = object()


def compile_fast_path(
    model: Any,
    space: FeatureSpace,
    input_kind: str,
    method: Method,
    trees: TreePredictor | BaggedTrees | None = _UNKNOWN,
) -> FastPath | None:
    """The fast path of ``model.<method>`` for candidates of ``space``, checked, or None.

    ``input_kind`` is what the real path gives the model (``"dataframe"``: decoded columns,
    ``"array"``: the encoded matrix); ``trees``, when given, is the final estimator's compiled
    forest. The path must reproduce the real pipeline on probe rows (every category, bounds,
    missing values where the space has them): its preprocessing exactly, its predictions within
    ``rtol=1e-9, atol=1e-12``; anything else gives None.
    """
    estimator = final_estimator(model)
    decoded = input_kind == "dataframe"
    try:
        inputs = _compile_inputs(model, space, decoded) if hasattr(model, "steps") or decoded else None
    except NotCompilableError as exc:
        logger.debug("fast path: %s", exc)
        return None
    if trees is _UNKNOWN:
        trees = compile_trees(estimator)
    if trees is not None and hasattr(estimator, "classes_") and method != "predict_proba":
        trees = None  # the forest gives probabilities; a labels-only call wants labels
    if trees is None and (inputs is None or hasattr(estimator, "feature_names_in_")):
        return None  # nothing to gain, or the estimator wants a DataFrame (it would warn on an array)
    path = FastPath(inputs, trees, method)
    return path if _agrees(path, model, space, input_kind) else None


def probe_rows(space: FeatureSpace) -> FloatMatrix:
    """Candidates that exercise a compiled plan: the original first, then every category of every
    nominal column, numbers at their domain bounds, and the missing code where the space has one."""
    counts = [_category_count(f) for f in space.features]
    n = max(3, *counts) + 2
    rows = np.tile(space.original, (n, 1))
    for j, count in enumerate(counts):
        if space.nominal[j]:
            if count:
                rows[1:, j] = np.arange(n - 1) % count
        else:
            rows[1:, j] = np.resize([space.domain_lower[j], space.domain_upper[j], space.original[j]], n - 1)
        if space.missing[j]:
            rows[-1, j] = space.missing_code[j]
    return rows


def _category_count(feature: Any) -> int:
    if isinstance(feature, CategoricalFeature):
        return len(feature.domain)
    return 2 if isinstance(feature, BooleanFeature) else 0


def _agrees(path: FastPath, model: Any, space: FeatureSpace, input_kind: str) -> bool:
    """Does ``path`` reproduce the real model on the probe rows?"""
    probe = probe_rows(space)
    steps = getattr(model, "steps", None)
    try:
        data = space.to_frame(probe) if input_kind == "dataframe" else probe
        real_inputs = model[:-1].transform(data) if steps and len(steps) > 1 else data
        expected = getattr(final_estimator(model), path.method)(real_inputs)
        if path.inputs is not None:
            fast_inputs = path.inputs.transform(probe, space.missing_code)
            if not _same_matrix(fast_inputs, real_inputs):
                logger.debug("fast path: the compiled preprocessing differs from the pipeline's")
                return False
        got = path(probe, space, model)
    except Exception as exc:  # any failure means: keep the real pipeline
        logger.debug("fast path: the probe failed: %s", exc)
        return False
    return _close(got, expected)


def _same_matrix(fast: FloatMatrix, real: Any) -> bool:
    """Are the values of ``fast`` exactly what the estimator gets? (The estimator converts its
    input to float itself: an object matrix of numbers and booleans is fine. A float32 matrix
    would give other predictions; the prediction check catches that.)"""
    if hasattr(real, "toarray"):
        real = real.toarray()
    try:
        array = real.to_numpy(dtype=np.float64) if hasattr(real, "columns") else np.asarray(real, dtype=np.float64)
    except (TypeError, ValueError):
        return False
    return fast.shape == array.shape and bool(np.array_equal(fast, array, equal_nan=True))


def _close(got: Any, expected: Any) -> bool:
    got_array, expected_array = np.asarray(got), np.asarray(expected)
    if got_array.shape != expected_array.shape:
        return False
    if got_array.dtype.kind not in "fiub" or expected_array.dtype.kind not in "fiub":
        return bool(np.array_equal(got_array, expected_array))
    return bool(np.allclose(got_array, expected_array, rtol=CHECK_RTOL, atol=CHECK_ATOL, equal_nan=True))


def space_signature(space: FeatureSpace) -> Signature:
    """What a compiled plan depends on: names, kinds, categories and their types. Not the instance,
    the bounds or which values are missing (the plan reads the missing codes at every call)."""
    parts: list[tuple[Any, ...]] = []
    for feature in space.features:
        if isinstance(feature, CategoricalFeature):
            parts.append((feature.name, feature.kind, feature.category_type, feature.domain))
        else:
            parts.append((feature.name, feature.kind))
    return tuple(parts)


class FastPathCache:
    """Compiled fast paths of one model, per space encoding; safe to share between threads.

    A space is looked up by identity first (no signature to compute on every call), then by its
    signature and which of its columns hold a missing value: the plan depends on the signature
    only, so a new pattern of missing values reuses it after one check against the real pipeline
    (the frame a pipeline gets changes with it: an integer column with a gap is float). A failed
    compile or check is remembered too. Two threads may compile the same path at once; the last
    result is kept. The model's fitted state is checked at every call: refitting it in place
    drops everything.
    """

    def __init__(self, input_kind: str, method: Method, size: int = 256) -> None:
        self.input_kind = input_kind
        self.method = method
        self.size = size
        self._lock = threading.Lock()
        self._state: tuple[int, ...] = ()
        self._trees: TreePredictor | BaggedTrees | None = _UNKNOWN
        self._plans: dict[Signature, FastPath] = {}
        self._paths: dict[tuple[Signature, bytes], FastPath | None] = {}
        self._by_space: weakref.WeakKeyDictionary[FeatureSpace, FastPath | None] = weakref.WeakKeyDictionary()

    def get(self, model: Any, space: FeatureSpace) -> FastPath | None:
        """The fast path of ``model`` for ``space`` (compiled on first use), or None: use the real path."""
        state = fitted_state(model)
        with self._lock:
            if state != self._state:
                self._forget(state)
            if space in self._by_space:
                return self._by_space[space]
            key = (space_signature(space), space.missing.tobytes())
            known = key in self._paths
            path, plan, trees = self._paths.get(key), self._plans.get(key[0]), self._trees
        if not known:
            path, trees = self._compile(model, space, plan, trees)
        with self._lock:
            if state == self._state:
                self._keep(key, path, trees)
                self._by_space[space] = path
        return path

    def _compile(
        self, model: Any, space: FeatureSpace, plan: FastPath | None, trees: TreePredictor | BaggedTrees | None
    ) -> tuple[FastPath | None, TreePredictor | BaggedTrees | None]:
        """A path for a new (signature, missing values) pair: the signature's plan if it passes the
        check on this space's probe rows, else a new compile."""
        if plan is not None:
            return (plan if _agrees(plan, model, space, self.input_kind) else None), trees
        if trees is _UNKNOWN:
            trees = compile_trees(final_estimator(model))
        return compile_fast_path(model, space, self.input_kind, self.method, trees), trees

    def _keep(
        self, key: tuple[Signature, bytes], path: FastPath | None, trees: TreePredictor | BaggedTrees | None
    ) -> None:
        self._trees = trees
        while len(self._paths) >= self.size:
            self._paths.pop(next(iter(self._paths)))
        self._paths[key] = path
        if path is not None:
            self._plans.setdefault(key[0], path)

    def _forget(self, state: tuple[int, ...]) -> None:
        self._state = state
        self._trees = _UNKNOWN
        self._plans.clear()
        self._paths.clear()
        self._by_space = weakref.WeakKeyDictionary()

    def __getstate__(self) -> dict[str, Any]:
        """Pickle the settings only: compiled paths are rebuilt where the copy is used."""
        return {"input_kind": self.input_kind, "method": self.method, "size": self.size}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]


_SHARED: weakref.WeakKeyDictionary[Any, dict[tuple[str, str], FastPathCache]] = weakref.WeakKeyDictionary()
_SHARED_LOCK = threading.Lock()


def shared_cache(model: Any, input_kind: str, method: Method) -> FastPathCache:
    """The cache of fast paths every adapter of ``model`` shares (a problem built from a raw model
    gets its own adapter, so a cache per adapter would compile once per problem). A model that
    cannot be weakly referenced gets a cache of its own."""
    try:
        with _SHARED_LOCK:
            caches = _SHARED.setdefault(model, {})
            return caches.setdefault((input_kind, method), FastPathCache(input_kind, method))
    except TypeError:  # not hashable or not weakly referable
        return FastPathCache(input_kind, method)


def fitted_state(model: Any) -> tuple[int, ...]:
    """The identities of the fitted attributes (named ``..._``) of the model or its steps.

    Fitting replaces them (new arrays, lists, encoders), so a change of this tuple means the model
    was refitted in place. Cheap enough for every call (a few microseconds).
    """
    parts = [step for _, step in getattr(model, "steps", [])] or [model]
    return tuple(map(id, [v for part in parts for k, v in getattr(part, "__dict__", {}).items() if k[-1:] == "_"]))


def check_predictions(fast: dict[str, FloatMatrix], reference: dict[str, FloatMatrix]) -> None:
    """Raise :class:`ModelAdapterError` unless every output of the fast path matches the reference
    (``rtol=1e-9, atol=1e-12``, and the same most likely class for class probabilities)."""
    for name, expected in reference.items():
        got = fast.get(name)
        if got is None or got.shape != expected.shape:
            shape = None if got is None else got.shape
            raise ModelAdapterError(name, f"the fast path gave shape {shape}, the pipeline {expected.shape}")
        close = np.allclose(got, expected, rtol=CHECK_RTOL, atol=CHECK_ATOL, equal_nan=True)
        same_class = expected.ndim != 2 or bool((np.argmax(got, axis=1) == np.argmax(expected, axis=1)).all())
        if not (close and same_class):
            difference = float(np.nanmax(np.abs(got - expected))) if got.size else 0.0
            raise ModelAdapterError(
                name,
                f"the fast path differs from the pipeline by up to {difference:.3g}"
                + ("" if same_class else " and predicts another class"),
            )


__all__ = [
    "FastInputs",
    "FastPath",
    "FastPathCache",
    "TreePredictor",
    "BaggedTrees",
    "final_estimator",
    "fitted_state",
    "shared_cache",
    "check_predictions",
    "compile_fast_path",
    "compile_inputs",
    "compile_trees",
    "probe_rows",
    "space_signature",
]
