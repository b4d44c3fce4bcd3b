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
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from counterplan.planning.relations import LearnedRelations
from counterplan.planning.structure.errors import NotEncodableError
from counterplan.planning.structure.kind import LINEAR_REGRESSORS, NETWORKS, kind_name
from counterplan.planning.structure.trees import read_ensemble
from counterplan.solver.exact.encoders.linear import affine_output
from counterplan.solver.exact.encoders.network import encode_network
from counterplan.solver.exact.encoders.trees import encode_ensemble
from counterplan.solver.exact.inputs import relation_inputs
from counterplan.solver.exact.milp import add
from counterplan.solver.exact.program import Formulation, Lin, ModelInputs

FloatArray = npt.NDArray[np.float64]


def encode_relations(formulation: Formulation) -> None:
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
        try:
            inputs = relation_inputs(formulation, relation.model, columns)
            raw_original = space.original[columns].reshape(1, -1)
            model_original = raw_original if inputs.preprocess is None else inputs.preprocess.transform(raw_original)
            model_original = np.asarray(model_original, dtype=np.float64)[0]
            baseline = float(np.asarray(relation.model.predict(raw_original), dtype=np.float64).reshape(-1)[0])
            terms, constant = _regressor(formulation, inputs, (model_original, baseline), columns, k)
        except NotEncodableError as error:  # the regressor's step or layer, not the model's: say whose
            if str(error).startswith("relation"):
                raise
            raise NotEncodableError(f"relation of {relation.target!r}: {error}") from None
        if relation.form == "additive":  # x_t = x̂_t + f(x) - f(x̂)
            constant += float(space.original[j]) - baseline
        tolerance = relations.tolerance(j)
        target_terms, target_constant = formulation.features[j].value
        # |x_t - value| <= tolerance
        difference = add(target_terms, terms, -1.0)
        milp = formulation.milp
        milp.row(difference, constant - target_constant - tolerance, constant - target_constant + tolerance)


def _regressor(
    formulation: Formulation, inputs: ModelInputs, at_original: tuple[FloatArray, float], columns: Sequence[int], k: int
) -> Lin:
    """``f``'s output as a linear expression (and warm-start fills for its auxiliaries);
    ``at_original``: what ``f``'s estimator reads at the original, and ``f``'s value there."""
    estimator = inputs.estimator
    kind = kind_name(estimator)
    original, baseline = at_original
    if kind in LINEAR_REGRESSORS:
        coef = np.asarray(estimator.coef_, dtype=np.float64).reshape(-1)
        intercept = float(np.asarray(estimator.intercept_, dtype=np.float64).reshape(-1)[0])
        return affine_output(coef, intercept, inputs, original)
    # a separate view of the program, so the relation's trees and thresholds stay out of the model's
    sub = dataclasses.replace(
        formulation, leaves=[], trees=[], thresholds=[], bands={}, original_sides={}, fills=[], inputs=inputs
    )
    if kind in NETWORKS:
        if kind != "MLPRegressor":
            raise NotEncodableError(f"relation {k}: a {kind} is not a regressor")
        return _network(formulation, sub, inputs, original, columns)
    return _trees((formulation, sub), inputs, (original, baseline), columns, k)


def _network(
    formulation: Formulation, sub: Formulation, inputs: ModelInputs, original: FloatArray, columns: Sequence[int]
) -> Lin:
    network = encode_network(sub, inputs.estimator, inputs, original)

    def fill_units(x: FloatArray, row: FloatArray) -> None:
        for var, unit in network.unit_values(_model_row(inputs, row[list(columns)])).items():
            x[var] = unit

    formulation.fills.append(fill_units)
    return network.lin


def _trees(
    views: tuple[Formulation, Formulation],
    inputs: ModelInputs,
    at_original: tuple[FloatArray, float],
    columns: Sequence[int],
    k: int,
) -> Lin:
    formulation, sub = views  # the program (for the warm-start fill), and the relation's own view of it
    kind = kind_name(inputs.estimator)
    original, baseline = at_original
    try:
        ensemble = read_ensemble(inputs.estimator)
    except NotEncodableError:
        raise NotEncodableError(f"relation {k}: a {kind} is not a regressor the exact engine reads") from None
    if ensemble.link != "value":
        raise NotEncodableError(f"relation {k}: a {kind} is not a regressor")
    output = encode_ensemble(sub, ensemble, inputs, original, real=np.array([baseline]))

    def fill_trees(x: FloatArray, row: FloatArray) -> None:
        model_row = _model_row(inputs, row[list(columns)])
        for tree, leaves in zip(sub.trees, sub.leaves, strict=True):
            leaf = tree.leaf(model_row)
            if leaf in leaves:
                x[list(leaves.values())] = 0.0
                x[leaves[leaf]] = 1.0
        for var, j, t in sub.thresholds:
            x[var] = float(row[j] > t)

    formulation.fills.append(fill_trees)
    return output.lin


def _model_row(inputs: ModelInputs, values: FloatArray) -> FloatArray:
    data = values.reshape(1, -1)
    if inputs.preprocess is not None:
        data = inputs.preprocess.transform(data)
    row: FloatArray = np.asarray(data, dtype=np.float64)[0]
    return row


__all__ = ["encode_relations"]
