"""One scikit-learn pipeline walker: what each column the final estimator reads is made of.

:func:`describe` follows the columns of a search space through a fitted pipeline's preprocessing
(a nested ``Pipeline``, ``ColumnTransformer`` with any selector and remainder, the scalers, one-hot
and ordinal encoders, ``SimpleImputer``, an identity ``FunctionTransformer``, pass-through and
dropped columns) and describes every estimator column in the neutral terms of
:mod:`counterplan.planning.structure.columns`. Each supported step is one small entry of
:data:`STEPS`; a step that is not one of them, or a setting that changes what it computes beyond
what is described (indicators, transformer weights, a function), is refused naming the step with
:class:`~counterplan.planning.structure.errors.NotEncodableError`.

The description is exact: a scaler's arithmetic is kept in its own operation order, and an
encoder's table is computed with the encoder's own categories, so the fast path reproduces the
pipeline bit for bit and the exact engine writes the same values as linear expressions.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from counterplan.planning.features import BooleanFeature, CategoricalFeature
from counterplan.planning.space import FeatureSpace
from counterplan.planning.structure.cache import MEMO
from counterplan.planning.structure.columns import (
    MISSING,
    CategoryColumn,
    Column,
    EstimatorColumn,
    Layer,
    LookupColumn,
    NumberColumn,
    same_category,
)
from counterplan.planning.structure.errors import NotEncodableError
from counterplan.planning.structure.kind import final_estimator, kind_name, pipeline_steps
from counterplan.planning.structure.selection import select


@dataclass(frozen=True)
class ModelColumns:
    """What a model's final estimator reads, column by column, and where its pipeline raises."""

    columns: tuple[EstimatorColumn, ...]
    raises: tuple[tuple[int, int], ...] = ()
    """(feature, slot) pairs some encoder fitted with ``handle_unknown='error'`` does not know, in
    the order the encoders meet them: the pipeline raises on a row holding that category."""


class _Walk:
    """The state of one walk: the features' names (for messages), and where encoders would raise."""

    def __init__(self, names: Sequence[str] | None) -> None:
        self.names = names
        self.raises: list[tuple[int, int]] = []

    def name(self, source: int) -> str:
        """Feature ``source``'s name, or its position."""
        return repr(self.names[source]) if self.names is not None else f"number {source}"


def entry_columns(space: FeatureSpace, decoded: bool) -> list[Column]:
    """One column per feature of ``space``, as a pipeline's first step sees it: decoded into a
    DataFrame (``decoded``: numbers, booleans, categories as the model's values, missing as None or
    NaN) or as the array a model fitted on one gets
    (:meth:`~counterplan.planning.space.FeatureSpace.to_array`: the same, but a text category as
    its code, a float matrix holding no text)."""
    columns: list[Column] = []
    for j, feature in enumerate(space.features):
        if isinstance(feature, CategoricalFeature):
            codes = not decoded and feature.category_type == "text"
            values = tuple(float(k) for k in range(len(feature.domain))) if codes else feature.model_values()
            columns.append(CategoryColumn(j, (MISSING, *values)))
        else:
            columns.append(NumberColumn(j, boolean=isinstance(feature, BooleanFeature)))
    return columns


def describe_model(model: Any, space: FeatureSpace, decoded: bool) -> ModelColumns:
    """:func:`describe` for candidates of ``space`` (decoded into a DataFrame, or not); a model
    fitted on other columns than the space's is refused."""
    names = getattr(model, "feature_names_in_", None)
    if decoded and names is not None and list(names) != list(space.names):
        raise NotEncodableError(f"the model was fitted on columns {list(names)}, the space has {list(space.names)}")
    entry = tuple(entry_columns(space, decoded))
    # the walk reads the entry columns and names only: kept per model for them (a batch's rows,
    # each with a space of its own, share one walk; the estimate, the split values and the fast
    # path each ask for it)
    key = (_DESCRIBED, entry, tuple(space.names))
    try:
        hash(key)
    except TypeError:  # a category value that cannot be a key: walked every time
        return describe(model, entry, space.names)
    return MEMO.get(model, key, lambda: describe(model, entry, space.names))


_DESCRIBED = "pipeline-described"
"""The memo's key (with the entry columns and names) of a model's description."""


def describe(model: Any, entry: Sequence[Column], names: Sequence[str] | None = None) -> ModelColumns:
    """The columns the final estimator of ``model`` (a ``Pipeline`` or a bare estimator) reads,
    given the columns its first step takes (``names``: the features' names, for messages)."""
    if getattr(model, "steps", None) and pipeline_steps(model) is None:
        raise NotEncodableError(
            f"{kind_name(model)} is a pipeline that writes its own prediction method: what it answers "
            "is not what its steps give"
        )
    walk = _Walk(names)
    columns = list(entry)
    for name, step in (pipeline_steps(model) or [])[:-1]:
        columns = _apply(step, columns, f"pipeline step {name!r}", walk)
    reader = kind_name(final_estimator(model))
    return ModelColumns(tuple(_as_number(column, reader, walk) for column in columns), tuple(walk.raises))


def _apply(step: Any, columns: list[Column], where: str, walk: _Walk) -> list[Column]:
    """What ``step`` makes of ``columns``; refuses anything it does not know, naming it."""
    if step is None or (isinstance(step, str) and step == "passthrough"):
        return columns
    if isinstance(step, str) and step == "drop":
        return []
    kind = kind_name(step)
    handler = STEPS.get(kind)
    if handler is None:
        raise NotEncodableError(f"{where}: {kind} is not supported")
    try:
        return handler(step, columns, where, walk)
    except NotEncodableError:
        raise
    except (AttributeError, IndexError, KeyError, TypeError, ValueError) as exc:  # a fitted layout not known here
        raise NotEncodableError(f"{where}: {kind} is not understood ({type(exc).__name__}: {exc})") from None


def _pipeline(step: Any, columns: list[Column], where: str, walk: _Walk) -> list[Column]:
    for name, inner in step.steps:
        columns = _apply(inner, columns, f"{where} step {name!r}", walk)
    return columns


def _function_transformer(step: Any, columns: list[Column], where: str, walk: _Walk) -> list[Column]:
    if step.func is not None:
        raise NotEncodableError(f"{where}: a FunctionTransformer with a function")
    return columns


def _column_transformer(step: Any, columns: list[Column], where: str, walk: _Walk) -> list[Column]:
    if getattr(step, "transformer_weights", None):
        raise NotEncodableError(f"{where}: transformer weights")
    names = [str(n) for n in getattr(step, "feature_names_in_", [])]
    if names and len(names) != len(columns):
        raise NotEncodableError(f"{where}: fitted on {len(names)} columns, given {len(columns)}")
    fitted = getattr(step, "_transformer_to_input_indices", {})
    out: list[Column] = []
    for name, transformer, selection in step.transformers_:
        inner = f"{where} transformer {name!r}"
        picked = select(selection, names, len(columns), inner, fitted.get(name))
        if not picked or (isinstance(transformer, str) and transformer == "drop"):
            continue
        out += _apply(transformer, [columns[i] for i in picked], inner, walk)
    return out


def _check_width(step: Any, columns: list[Column], where: str) -> None:
    fitted = getattr(step, "n_features_in_", None)
    if fitted is not None and fitted != len(columns):
        raise NotEncodableError(f"{where}: fitted on {fitted} columns, given {len(columns)}")


def _scaler(step: Any, columns: list[Column], where: str, walk: _Walk) -> list[Column]:
    """Scalers: one layer per column, with the operations the scaler applies to a dense array."""
    _check_width(step, columns, where)
    kind = kind_name(step)
    layers = [_scaler_layer(step, kind, i, f"{where}: {kind}") for i in range(len(columns))]
    return [_with_layer(column, layer, where, walk) for column, layer in zip(columns, layers, strict=True)]


def _scaler_layer(step: Any, kind: str, i: int, where: str) -> Layer:
    if kind == "StandardScaler":
        return _centre_and_scale((step.with_mean, step.mean_), (step.with_std, step.scale_), i, where)
    if kind == "RobustScaler":
        return _centre_and_scale((step.with_centering, step.center_), (step.with_scaling, step.scale_), i, where)
    if kind == "MinMaxScaler":
        low, high = step.feature_range if step.clip else (-math.inf, math.inf)
        scaling: set[str] = {"mul", "add", "clip"} if step.clip else {"mul", "add"}
        return Layer(
            frozenset(scaling), mul=float(step.scale_[i]), add=float(step.min_[i]), lo=low, hi=high, where=where
        )
    clip = bool(getattr(step, "clip", False))  # MaxAbsScaler
    ops: set[str] = {"div", "clip"} if clip else {"div"}
    return Layer(frozenset(ops), div=float(step.scale_[i]), lo=-1.0, hi=1.0, where=where)


def _centre_and_scale(centring: tuple[bool, Any], scaling: tuple[bool, Any], i: int, where: str) -> Layer:
    """Subtract the centre, divide by the scale (each only when the scaler does)."""
    (centre, centres), (scale, scales) = centring, scaling
    ops = ({"sub"} if centre else set()) | ({"div"} if scale else set())
    sub = float(centres[i]) if centre else 0.0
    return Layer(frozenset(ops), sub=sub, div=float(scales[i]) if scale else 1.0, where=where)


def _with_layer(column: Column, layer: Layer, where: str, walk: _Walk) -> Column:
    """A number column with one more layer (a category column is read as its numbers first); a
    layer without operations changes nothing."""
    if not layer.ops:
        return column
    number = _as_number(column, where, walk)
    return replace(number, layers=(*number.layers, layer))


def _as_number(column: Column, reader: str, walk: _Walk) -> EstimatorColumn:
    """A column read as numbers: categories become a lookup of their numeric values."""
    if not isinstance(column, CategoryColumn):
        return column
    values = []
    for value in column.values:
        if value is MISSING or value is None:
            values.append(math.nan)
        elif isinstance(value, bool | int | float | np.number):
            values.append(float(value))
        else:
            raise NotEncodableError(
                f"{reader} reads feature {walk.name(column.source)} of text categories without an encoder"
            )
    return LookupColumn(column.source, tuple(values), "value", column.errors, where=reader)


def as_number(column: Column, reader: str, names: Sequence[str] | None = None) -> EstimatorColumn:
    """A column read as numbers by ``reader`` (categories: a lookup of their numeric values; text
    categories refused): what another graph reader (an ONNX graph's) shares with this walker."""
    return _as_number(column, reader, _Walk(names))


def _as_categories(column: Column, where: str, walk: _Walk) -> CategoryColumn:
    """A column an encoder reads: a nominal feature, or a plain boolean one (False/True)."""
    if isinstance(column, CategoryColumn):
        return column
    if isinstance(column, NumberColumn) and column.boolean and not column.layers:
        return CategoryColumn(column.source, (MISSING, False, True))
    raise NotEncodableError(
        f"{where}: encodes feature {walk.name(column.source)}, which is not a categorical feature here"
    )


def _match(values: Sequence[Any], known: Any) -> list[int | None]:
    """Per slot: the position of the encoder category it matches, or None (unknown)."""
    return [next((q for q, category in enumerate(known) if same_category(value, category)), None) for value in values]


def _check_frequent(step: Any, where: str) -> None:
    if getattr(step, "_infrequent_enabled", False) and any(
        c is not None for c in getattr(step, "infrequent_categories_", [])
    ):
        raise NotEncodableError(f"{where}: infrequent categories")


def _check_encoded_width(step: Any, columns: list[Column], where: str) -> None:
    if len(step.categories_) != len(columns):
        raise NotEncodableError(f"{where}: fitted on {len(step.categories_)} columns, given {len(columns)}")


def _unknown(source: CategoryColumn, matched: list[int | None], raises: bool, walk: _Walk) -> frozenset[int]:
    """The slots the encoder raises on (noted for the walk), with the ones already known."""
    if not raises:
        return source.errors
    unknown = [slot for slot, hit in enumerate(matched) if hit is None]
    walk.raises += [(source.source, slot) for slot in unknown if slot > 0]
    return source.errors | frozenset(unknown)


def _one_hot(step: Any, columns: list[Column], where: str, walk: _Walk) -> list[Column]:
    """One indicator lookup per output column: 1 where the slot's category is that column's."""
    _check_frequent(step, where)
    _check_encoded_width(step, columns, where)
    drop = getattr(step, "drop_idx_", None)
    out: list[Column] = []
    for i, (column, known) in enumerate(zip(columns, step.categories_, strict=True)):
        source = _as_categories(column, where, walk)
        matched = _match(source.values, known)
        errors = _unknown(source, matched, step.handle_unknown == "error", walk)
        dropped = None if drop is None or drop[i] is None else int(drop[i])
        for q in range(len(known)):
            if q != dropped:
                values = tuple(1.0 if hit == q else 0.0 for hit in matched)
                out.append(LookupColumn(source.source, values, "indicator", errors, where=f"{where}: OneHotEncoder"))
    return out


def _ordinal(step: Any, columns: list[Column], where: str, walk: _Walk) -> list[Column]:
    """One code lookup per column: the category's position, the missing or the unknown value."""
    _check_frequent(step, where)
    _check_encoded_width(step, columns, where)
    out: list[Column] = []
    for column, known in zip(columns, step.categories_, strict=True):
        source = _as_categories(column, where, walk)
        matched = _match(source.values, known)
        raises = step.handle_unknown == "error"
        errors = _unknown(source, matched, raises, walk)
        unknown = math.nan if raises else float(step.unknown_value)
        values = []
        for hit in matched:
            if hit is None:
                values.append(unknown)
            elif same_category(MISSING, known[hit]):
                values.append(float(step.encoded_missing_value))
            else:
                values.append(float(hit))
        out.append(LookupColumn(source.source, tuple(values), "code", errors, where=f"{where}: OrdinalEncoder"))
    return out


def _imputer(step: Any, columns: list[Column], where: str, walk: _Walk) -> list[Column]:
    """A ``SimpleImputer`` of NaN without indicators: fills a column's missing value with its statistic."""
    missing = step.missing_values
    if step.add_indicator or not (isinstance(missing, float) and math.isnan(missing)):
        raise NotEncodableError(f"{where}: a SimpleImputer with indicators or other missing values")
    statistics = list(step.statistics_)
    if len(statistics) != len(columns) or any(same_category(MISSING, s) for s in statistics):
        raise NotEncodableError(f"{where}: a SimpleImputer that drops empty columns")
    return [_filled(given, statistic, where, walk) for given, statistic in zip(columns, statistics, strict=True)]


def _filled(given: Column, statistic: Any, where: str, walk: _Walk) -> Column:
    plain_boolean = isinstance(given, NumberColumn) and given.boolean and not given.layers
    column = _as_categories(given, where, walk) if plain_boolean else given  # an encoder may read it next
    if isinstance(column, CategoryColumn):
        gaps = [slot for slot, value in enumerate(column.values) if same_category(value, np.nan)]
        values = tuple(statistic if slot in gaps else value for slot, value in enumerate(column.values))
        return replace(column, values=values, errors=column.errors - set(gaps))
    if isinstance(statistic, bool | int | float | np.number):
        layer = Layer(frozenset({"fill"}), fill=float(statistic), where=f"{where}: SimpleImputer")
        return _with_layer(column, layer, where, walk)
    raise NotEncodableError(f"{where}: fills a number column with {statistic!r}")


_Handler = Callable[[Any, list[Column], str, _Walk], list[Column]]
STEPS: dict[str, _Handler] = {
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
"""The supported preprocessing steps, by class name."""


__all__ = ["STEPS", "ModelColumns", "describe", "describe_model", "entry_columns"]
