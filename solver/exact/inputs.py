"""What the final estimator of a scikit-learn pipeline sees, as linear expressions of the MILP's
feature variables.

A pipeline's preprocessing (scalers, one-hot encoders, pass-through and dropped columns, in a
``ColumnTransformer`` or a ``Pipeline``) is affine per column, so each column the estimator
reads is a linear expression of the features' variables: a number's value, or the indicators of
a categorical feature's categories. Anything else is refused naming the step, so ``auto`` falls
back to local search. The decomposition is checked against the real pipeline on the original
instance before it is used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from counterplan.planning.structure.columns import same_category
from counterplan.planning.structure.errors import NotEncodableError
from counterplan.solver.exact.milp import Expr, add

Lin = tuple[Expr, float]
"""A linear expression and its constant."""


@dataclass
class Column:
    """One column as the next step sees it.

    ``lin`` is its value as a linear expression (None for a column of text categories, which
    only an encoder may read); ``categories`` are, for a categorical source column, the model's
    value of each category and its indicator expression.
    """

    lin: Lin | None
    name: str
    categories: list[tuple[Any, Lin]] | None = None


@dataclass
class ModelInputs:
    """The estimator at the end of the pipeline, and the columns it reads."""

    estimator: Any
    columns: list[Lin]
    forbidden: list[Lin] = field(default_factory=list)
    """Indicators that must stay 0: categories an encoder fitted with ``handle_unknown='error'``
    does not know."""
    preprocess: Any = None
    """The fitted preprocessing (a pipeline without its last step), or None."""


def scaled(lin: Lin, factor: float, shift: float = 0.0) -> Lin:
    """``factor * lin + shift``."""
    terms, constant = lin
    return {k: v * factor for k, v in terms.items()}, constant * factor + shift


def decompose(model: Any, base: list[Column]) -> ModelInputs:
    """Split ``model`` (an estimator or a ``Pipeline``) into its final estimator and the linear
    columns it reads, given the columns the pipeline takes (one per feature, in order)."""
    forbidden: list[Lin] = []
    steps = getattr(model, "steps", None)
    if steps is None:
        return ModelInputs(model, _numeric(base, type(model).__name__), forbidden)
    columns = base
    for name, step in steps[:-1]:
        columns = _apply(step, columns, forbidden, f"pipeline step {name!r}")
    estimator = steps[-1][1]
    return ModelInputs(estimator, _numeric(columns, type(estimator).__name__), forbidden, model[:-1])


def _numeric(columns: list[Column], reader: str) -> list[Lin]:
    out = []
    for column in columns:
        if column.lin is None:
            raise NotEncodableError(f"{reader} reads column {column.name!r} of text categories without an encoder")
        out.append(column.lin)
    return out


def _apply(step: Any, columns: list[Column], forbidden: list[Lin], where: str) -> list[Column]:
    kind = type(step).__name__
    if step is None or (isinstance(step, str) and step == "passthrough"):
        return columns
    if isinstance(step, str) and step == "drop":
        return []
    if kind == "Pipeline":
        for name, inner in step.steps:
            columns = _apply(inner, columns, forbidden, f"{where} step {name!r}")
        return columns
    if kind == "ColumnTransformer":
        return _column_transformer(step, columns, forbidden, where)
    if kind == "StandardScaler":  # scikit-learn keeps mean_ with with_mean=False, but does not subtract it
        mean = step.mean_ if step.with_mean and step.mean_ is not None else np.zeros(len(columns))
        scale = step.scale_ if step.with_std and step.scale_ is not None else np.ones(len(columns))
        return _affine(columns, 1.0 / np.asarray(scale), -np.asarray(mean) / np.asarray(scale), where)
    if kind == "MinMaxScaler":
        if getattr(step, "clip", False):
            raise NotEncodableError(f"{where}: MinMaxScaler(clip=True) is not affine")
        return _affine(columns, np.asarray(step.scale_), np.asarray(step.min_), where)
    if kind == "RobustScaler":
        center = step.center_ if step.center_ is not None else np.zeros(len(columns))
        scale = step.scale_ if step.scale_ is not None else np.ones(len(columns))
        return _affine(columns, 1.0 / np.asarray(scale), -np.asarray(center) / np.asarray(scale), where)
    if kind == "MaxAbsScaler":
        return _affine(columns, 1.0 / np.asarray(step.scale_), np.zeros(len(columns)), where)
    if kind == "OneHotEncoder":
        return _one_hot(step, columns, forbidden, where)
    if kind == "FunctionTransformer" and step.func is None:
        return columns
    if kind == "SimpleImputer":
        if step.add_indicator or np.isnan(np.asarray(step.statistics_, dtype=np.float64)).any():
            raise NotEncodableError(f"{where}: a SimpleImputer that adds indicators or drops columns")
        return columns  # the exact engine never proposes a missing value: imputing is the identity
    raise NotEncodableError(f"{where}: {kind} is not supported by the exact engine")


def _affine(columns: list[Column], factor: np.ndarray, shift: np.ndarray, where: str) -> list[Column]:
    if factor.shape[0] != len(columns):
        raise NotEncodableError(f"{where}: fitted on {factor.shape[0]} columns, given {len(columns)}")
    out = []
    for column, a, b in zip(columns, factor, shift, strict=True):
        if column.lin is None:
            raise NotEncodableError(f"{where}: scales column {column.name!r} of text categories")
        out.append(Column(scaled(column.lin, float(a), float(b)), column.name))
    return out


def _one_hot(step: Any, columns: list[Column], forbidden: list[Lin], where: str) -> list[Column]:
    if getattr(step, "_infrequent_enabled", False):
        raise NotEncodableError(f"{where}: OneHotEncoder with infrequent categories")
    if len(step.categories_) != len(columns):
        raise NotEncodableError(f"{where}: fitted on {len(step.categories_)} columns, given {len(columns)}")
    drop = getattr(step, "drop_idx_", None)
    out: list[Column] = []
    for i, (column, known) in enumerate(zip(columns, step.categories_, strict=True)):
        if column.categories is None:
            raise NotEncodableError(f"{where}: one-hot encodes {column.name!r}, which is not a categorical feature")
        dropped = None if drop is None or drop[i] is None else int(drop[i])
        matched: set[int] = set()
        for q, value in enumerate(known):
            terms: Expr = {}
            constant = 0.0
            for k, (ours, indicator) in enumerate(column.categories):
                if same_category(ours, value):
                    matched.add(k)
                    terms = add(terms, indicator[0])
                    constant += indicator[1]
            if q != dropped:
                out.append(Column((terms, constant), f"{column.name}={value}"))
        for k, (_, indicator) in enumerate(column.categories):
            if k not in matched and step.handle_unknown == "error":
                forbidden.append(indicator)  # the encoder would raise on this category
    return out


def _column_transformer(step: Any, columns: list[Column], forbidden: list[Lin], where: str) -> list[Column]:
    names = list(getattr(step, "feature_names_in_", []))
    out: list[Column] = []
    for name, transformer, selection in step.transformers_:
        picked = _select(selection, names, len(columns), f"{where} transformer {name!r}")
        if not picked or (isinstance(transformer, str) and transformer == "drop"):
            continue
        out += _apply(transformer, [columns[i] for i in picked], forbidden, f"{where} transformer {name!r}")
    return out


def _select(selection: Any, names: list[str], n: int, where: str) -> list[int]:
    if isinstance(selection, slice):
        return list(range(n))[selection]
    if isinstance(selection, str | int):
        selection = [selection]
    picked = list(selection)
    if picked and all(isinstance(p, bool | np.bool_) for p in picked):
        return [i for i, p in enumerate(picked) if p]
    out = []
    for p in picked:
        if isinstance(p, str):
            if p not in names:
                raise NotEncodableError(f"{where}: unknown column {p!r}")
            out.append(names.index(p))
        else:
            out.append(int(p))
    return out


def evaluate(lin: Lin, x: npt.NDArray[np.float64]) -> float:
    """A linear expression's value at ``x``."""
    terms, constant = lin
    return constant + math.fsum(c * x[i] for i, c in terms.items())


__all__ = ["Column", "Lin", "ModelInputs", "NotEncodableError", "decompose", "evaluate", "scaled"]
