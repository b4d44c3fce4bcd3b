"""What the final estimator of a pipeline reads, as linear expressions of the program's variables.

The pipeline walker (:mod:`counterplan.planning.structure.pipeline`) describes each column the
estimator reads as a function of one feature; here each description becomes a linear expression
of that feature's variables: a number's value through the scalers' affine maps, a one-hot
indicator as the sum of the indicators of the categories it holds, a category's own number as the
indicators weighted by it. What is not linear is refused naming the step (a clipping scaler, an
ordinal encoder's codes), so ``auto`` falls back to local search. The encoding is checked against
the real pipeline at the original instance before it is used
(:func:`counterplan.solver.exact.formulation.encode_model`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from counterplan.planning.structure.columns import EstimatorColumn, LookupColumn, NumberColumn
from counterplan.planning.structure.errors import NotEncodableError
from counterplan.planning.structure.kind import final_estimator
from counterplan.planning.structure.pipeline import ModelColumns, describe, describe_model
from counterplan.solver.exact.milp import Expr, add
from counterplan.solver.exact.program import FeatureVars, Formulation, Lin, ModelInputs, scaled


def model_inputs(formulation: Formulation) -> ModelInputs:
    """The problem's model split into its final estimator and the linear columns it reads."""
    problem = formulation.problem
    adapter: Any = problem.model
    structure = getattr(adapter, "structure", None)
    if callable(structure):  # an ONNX graph (planning.structure.onnx): its node and the ops before it
        graph = structure()
        described = graph.describe(problem.space)
        columns = [
            column_lin(column, formulation.features[column.source], problem.space.names[column.source])
            for column in described.columns
        ]
        forbidden = _forbidden(described, formulation.features)
        preprocess = adapter if graph.steps else None
        return ModelInputs(graph.estimator, columns, forbidden, preprocess, tolerance=ONNX_TOLERANCE)
    model = adapter.model
    described = describe_model(model, problem.space, adapter.input_kind == "dataframe")
    return _inputs(model, described, formulation.features, problem.space.names)


def relation_inputs(formulation: Formulation, model: Any, columns: Sequence[int]) -> ModelInputs:
    """A learned relation's regressor (fitted on the encoded values of features ``columns``, in
    that order) split into its final estimator and the linear columns it reads."""
    names = formulation.problem.space.names
    entry = [NumberColumn(c) for c in columns]
    return _inputs(model, describe(model, entry, names), formulation.features, names)


ONNX_TOLERANCE = 1e-5
"""How closely an ONNX graph's columns (computed in float32) must agree with their expressions."""


def _forbidden(described: ModelColumns, features: list[FeatureVars]) -> list[Lin]:
    forbidden = []
    for j, slot in described.raises:  # the encoder raises on these categories: they stay off
        categories = features[j].categories
        if categories is not None:
            forbidden.append(categories[slot - 1][1])
    return forbidden


def _inputs(model: Any, described: ModelColumns, features: list[FeatureVars], names: Sequence[str]) -> ModelInputs:
    columns = [column_lin(column, features[column.source], names[column.source]) for column in described.columns]
    forbidden = _forbidden(described, features)
    preprocess = model[:-1] if getattr(model, "steps", None) is not None else None
    return ModelInputs(final_estimator(model), columns, forbidden, preprocess)


def column_lin(column: EstimatorColumn, f: FeatureVars, name: str) -> Lin:
    """One estimator column as a linear expression of feature ``f``'s variables."""
    lin = _value(f, column.boolean) if isinstance(column, NumberColumn) else _lookup(column, f, name)
    for layer in column.layers:
        for factor, shift in layer.affine():
            lin = scaled(lin, factor, shift)
    return lin


def _value(f: FeatureVars, boolean: bool) -> Lin:
    """A feature's value as the pipeline reads it: a number, a category's code (an encoded
    matrix), or a decoded boolean (its categories False and True, as 0 and 1)."""
    if not boolean or f.categories is None:
        return f.value
    return _weighted(f.categories, [float(value) for value, _ in f.categories], skip_zeros=False)


def _lookup(column: LookupColumn, f: FeatureVars, name: str) -> Lin:
    """A number per category: the indicators weighted by it (a one-hot column: only the
    categories it holds)."""
    if column.read == "code":
        raise NotEncodableError(f"{column.where}: ordinal codes of {name!r} are not supported by the exact engine")
    if f.categories is None:  # a constant without indicators (its original is missing)
        if column.read == "indicator":
            raise NotEncodableError(f"{column.where}: one-hot encodes {name!r}, which is not a categorical feature")
        return f.value
    return _weighted(f.categories, list(column.values[1:]), skip_zeros=column.read == "indicator")


def _weighted(categories: list[tuple[Any, Lin]], weights: list[float], *, skip_zeros: bool) -> Lin:
    """``sum_k weights[k] * indicator_k``, in the categories' order."""
    terms: Expr = {}
    constant = 0.0
    for weight, (_, (indicator, indicator_constant)) in zip(weights, categories, strict=True):
        if skip_zeros and weight == 0.0:
            continue
        terms = add(terms, indicator, weight)
        constant += weight * indicator_constant
    return terms, constant


__all__ = ["column_lin", "model_inputs", "relation_inputs"]
