"""Learned constraints in the exact engine: the dependent feature tied to the regressor's output.

For a relation ``x_t = x̂_t + f(x) - f(x̂)`` (or ``x_t = f(x)``), ``f`` is encoded as any model
the engine reads, on the input features' variables: a linear regressor exactly, a tree ensemble
(leaves and split binaries, as for a model), a ReLU ``MLPRegressor`` (as for a model), each
behind the supported preprocessing. The dependent feature then keeps within half a grid step of
the relation's value (its rounding: the local engines compute the same value and round it), or
1e-9 of its range for a continuous feature. The domain bounds the dependent feature: where the
relation leaves it, no answer takes those inputs, exactly as the local engines count such a
candidate as breaking a rule.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import numpy.typing as npt

from counterplan.planning.relations import LearnedRelations
from counterplan.solver.exact.inputs import Column, Lin, NotEncodableError, decompose
from counterplan.solver.exact.milp import add
from counterplan.solver.exact.trees import read_ensemble

LINEAR = ("LinearRegression", "Ridge", "RidgeCV", "Lasso", "LassoCV", "ElasticNet", "ElasticNetCV", "HuberRegressor")


def encode_relations(formulation: Any) -> None:
    """Every learned constraint of the problem as rows of the program."""
    problem = formulation.problem
    relations: LearnedRelations | None = problem.relations
    if relations is None:
        return
    space = problem.space
    for k, (relation, columns, j) in enumerate(
        zip(relations.relations, relations.input_columns, relations.target_columns, strict=True)
    ):
        if j in space.allowed:
            raise NotEncodableError(f"relation of {relation.target!r}: a computed feature with allowed values")
        base = [Column(formulation.features[c].value, space.names[c]) for c in columns]
        inputs = decompose(relation.model, base)
        raw_original = space.original[columns].reshape(1, -1)
        model_original = raw_original if inputs.preprocess is None else inputs.preprocess.transform(raw_original)
        model_original = np.asarray(model_original, dtype=np.float64)[0]
        baseline = float(np.asarray(relation.model.predict(raw_original), dtype=np.float64).reshape(-1)[0])
        value = _regressor(formulation, relation.model, inputs, model_original, baseline, columns, k)
        terms, constant = value
        if relation.form == "additive":  # x_t = x̂_t + f(x) - f(x̂)
            constant += float(space.original[j]) - baseline
        tolerance = relations.tolerance(j)
        target_terms, target_constant = formulation.features[j].value
        # |x_t - value| <= tolerance
        difference = add(target_terms, terms, -1.0)
        milp = formulation.milp
        milp.row(difference, constant - target_constant - tolerance, constant - target_constant + tolerance)


def _regressor(  # noqa: PLR0917 - one call site
    formulation: Any,
    model: Any,
    inputs: Any,
    original: npt.NDArray[np.float64],
    baseline: float,
    columns: list[int],
    k: int,
) -> Lin:
    """``f``'s output as a linear expression (and warm-start fills for its auxiliaries)."""
    from counterplan.solver.exact.formulation import _affine_output, _trees  # noqa: PLC0415 - the formulation calls this

    estimator = inputs.estimator
    kind = type(estimator).__name__
    if kind in LINEAR:
        coef = np.asarray(estimator.coef_, dtype=np.float64).reshape(-1)
        intercept = float(np.asarray(estimator.intercept_, dtype=np.float64).reshape(-1)[0])
        return _affine_output(coef, intercept, inputs, original)
    # a separate view of the program, so the relation's trees and thresholds stay out of the model's
    sub = dataclasses.replace(
        formulation, leaves=[], trees=[], thresholds=[], bands={}, original_sides={}, fills=[], inputs=inputs
    )
    if kind == "MLPRegressor":
        from counterplan.solver.exact.networks import encode_network  # noqa: PLC0415

        network = encode_network(sub, estimator, inputs, original)

        def fill_units(x: npt.NDArray[np.float64], row: npt.NDArray[np.float64]) -> None:
            for var, unit in network.unit_values(_model_row(inputs, row[columns])).items():
                x[var] = unit

        formulation.fills.append(fill_units)
        return network.lin
    try:
        ensemble = read_ensemble(estimator)
    except NotEncodableError:
        raise NotEncodableError(f"relation {k}: a {kind} is not a regressor the exact engine reads") from None
    if ensemble.link != "value":
        raise NotEncodableError(f"relation {k}: a {kind} is not a regressor")
    output = _trees(sub, ensemble, inputs, original, real=np.array([baseline]))

    def fill_trees(x: npt.NDArray[np.float64], row: npt.NDArray[np.float64]) -> None:
        model_row = _model_row(inputs, row[columns])
        for tree, leaves in zip(sub.trees, sub.leaves, strict=True):
            leaf = tree.leaf(model_row)
            if leaf in leaves:
                x[list(leaves.values())] = 0.0
                x[leaves[leaf]] = 1.0
        for var, j, t in sub.thresholds:
            x[var] = float(row[j] > t)

    formulation.fills.append(fill_trees)
    return output.lin


def _model_row(inputs: Any, values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    data = values.reshape(1, -1)
    if inputs.preprocess is not None:
        data = inputs.preprocess.transform(data)
    row: npt.NDArray[np.float64] = np.asarray(data, dtype=np.float64)[0]
    return row
