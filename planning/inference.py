"""Infer features and normalisation statistics from a training DataFrame.

This is how data scientists build a problem: a training DataFrame and one row. Column dtypes
decide the feature kind (bool, integer, float, anything else categorical); domains are the
observed min/max or categories (widened to include the instance's own value); statistics are
range, standard deviation and MAD. Overrides replace any inferred field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from planning.distance import FeatureStatistics
from planning.errors import FeatureError, ProblemError
from planning.features import parse_feature
from planning.space import AnyFeature


def infer_features(
    data: pd.DataFrame,
    instance: Mapping[str, Any],
    columns: Sequence[str],
    immutable: Iterable[str] = (),
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[AnyFeature]:
    """One feature per column, typed and bounded by the data.

    Parameters
    ----------
    data:
        Training data with at least ``columns``.
    instance:
        The row to explain, ``{column: value}``.
    columns:
        The feature columns, in model-input order.
    immutable:
        Columns the search must never change.
    overrides:
        ``{column: {field: value}}`` replacing inferred fields (``low``, ``high``,
        ``categories``, ``kind``, ``constrained``).
    """
    overrides = dict(overrides or {})
    frozen = set(immutable)
    for name in sorted((frozen | set(overrides)) - set(columns)):
        raise ProblemError(name, f"not a feature column; columns: {list(columns)}")
    features: list[AnyFeature] = []
    for name in columns:
        if name not in data.columns:
            raise ProblemError(name, "column missing from the training data")
        if name not in instance:
            raise FeatureError(name, "the instance has no value for this feature")
        spec = _infer_one(name, data[name], instance[name])
        if name in frozen:
            spec["constrained"] = True
        spec.update(overrides.get(name, {}))
        features.append(parse_feature(spec))
    return features


def infer_statistics(data: pd.DataFrame, features: Sequence[AnyFeature]) -> dict[str, FeatureStatistics]:
    """Range, standard deviation and MAD of every numeric feature's column."""
    stats: dict[str, FeatureStatistics] = {}
    for feature in features:
        if feature.kind not in ("integer", "float"):
            continue
        column = pd.to_numeric(data[feature.name], errors="coerce").to_numpy(dtype=np.float64)
        column = column[np.isfinite(column)]
        if column.size == 0:
            continue
        median = float(np.median(column))
        stats[feature.name] = FeatureStatistics(
            range=float(column.max() - column.min()),
            std=float(column.std()),
            mad=float(np.median(np.abs(column - median))),
        )
    return stats


def _infer_one(name: str, column: pd.Series, value: Any) -> dict[str, Any]:
    value = value.item() if isinstance(value, np.generic) else value
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        raise FeatureError(name, f"the instance's value must be finite, given {value!r}")
    observed = column.dropna()
    if pd.api.types.is_bool_dtype(column):
        return {"kind": "boolean", "name": name, "value": bool(value)}
    if pd.api.types.is_integer_dtype(column) or pd.api.types.is_float_dtype(column):
        kind = "integer" if pd.api.types.is_integer_dtype(column) else "float"
        cast = int if kind == "integer" else float
        if isinstance(value, str):
            raise FeatureError(name, f"numeric column given the text {value!r}")
        if kind == "integer" and not float(value).is_integer():
            raise FeatureError(name, f"integer feature given a fractional value {value!r}")
        spec: dict[str, Any] = {"kind": kind, "name": name, "value": cast(value)}
        if observed.size:
            spec["low"] = cast(min(observed.min(), value))
            spec["high"] = cast(max(observed.max(), value))
        return spec
    categories = sorted(set(observed.astype(str).unique().tolist()) | {str(value)})
    return {"kind": "categorical", "name": name, "value": str(value), "categories": categories}
