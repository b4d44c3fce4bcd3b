"""A credit scorecard in the exact engine: each variable's bins as a decision list.

A scorecard's output is a sum, per variable, of the contribution of the bin its value falls in:
points for the score, or the log-odds for the class (optbinning: minus coefficient x WoE; a
points table with an odds scaling: the points x ln 2 / PDO). That is an additive model of step
functions, which is exactly what the tree encoding states
(:func:`counterplan.solver.exact.encoders.trees.encode_ensemble`): each variable becomes one tree,
a chain of splits at its bin edges (``x < edge`` goes left, as the bins are half-open
``[lower, upper)``), whose leaves are its bins. So the counterfactual
changes at most one bin per variable by construction, a bin is entered at its nearest point
(the representative value shown is the closest value of the bin on the feature's grid), and every
rule of the problem (domains, grids, immutables, monotone directions, at most K changes) holds
as for any model.

A categorical variable's tree reads the bin index of the chosen category (a linear expression
of the category indicators); categories in no bin are forbidden.

Goals are exact, never a piecewise-linear sigmoid: a probability p is the linear constraint
log-odds >= logit(p); a score range bounds the points; a decision at the cut-off without odds
is score >= cut-off (the cut-off itself accepted).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from counterplan.planning.scorecard import PointsTable, ScorecardAdapter, ScorecardDistance, ScorecardVariable
from counterplan.planning.structure.errors import NotEncodableError
from counterplan.planning.structure.trees import Ensemble, Link, Tree
from counterplan.solver.exact.encoders.trees import encode_ensemble
from counterplan.solver.exact.milp import INF, Expr, add
from counterplan.solver.exact.program import Formulation, Lin, ModelInputs, Output

MAX_SCORECARD_BINS = 20_000
"""Bins in all: each costs a leaf variable and a threshold binary."""


class ScorecardColumns:
    """What the scorecard trees read, computed from rows (a DataFrame): a number's value, or a
    category's bin index (the warm start's leaf of each tree)."""

    def __init__(self, table: PointsTable) -> None:
        self.table = table

    def transform(self, frame: pd.DataFrame) -> npt.NDArray[np.float64]:
        """``(n, n_variables)``: each variable's tree input."""
        columns = []
        for variable in self.table.variables:
            if variable.categorical:
                columns.append(variable.bin_index(frame[variable.name].to_numpy()))
            else:
                columns.append(pd.to_numeric(frame[variable.name], errors="coerce").to_numpy(dtype=np.float64))
        return np.column_stack(columns)


def encode_scorecard(formulation: Formulation, adapter: ScorecardAdapter) -> Output:
    """The scorecard's output for the problem's goal, as a linear expression (an ``Output``)."""
    problem = formulation.problem
    table = adapter.table
    (bound,) = problem.goals
    space = problem.space
    if sum(len(v.bins) for v in table.variables) > MAX_SCORECARD_BINS:
        raise NotEncodableError(f"a scorecard with more than {MAX_SCORECARD_BINS} bins")
    wants_score = bound.output.classes is None
    link, per_bin = _contributions(adapter, wants_score)
    inputs, trees = _variable_trees(formulation, table, per_bin)
    formulation.inputs = inputs
    milp = formulation.milp
    for terms, constant in inputs.forbidden:
        milp.row(terms, -INF, -constant)
    original_row = space.original.reshape(1, -1)
    original = ScorecardColumns(table).transform(space.to_frame(original_row))[0]
    if np.isnan(original).any():
        missing = [v.name for v, x in zip(table.variables, original, strict=True) if np.isnan(x)]
        raise NotEncodableError(f"the original's {missing[0]!r} falls in no bin (missing, or an unknown category)")
    real = _real(adapter, space, original_row, wants_score, bound.output.name)
    ensemble = Ensemble(trees, 1.0, link, adapter.description)
    output = encode_ensemble(formulation, ensemble, inputs, original, real=np.array([real]))
    if problem.scorecard_distance is not None:
        _paper_objective(formulation, problem.scorecard_distance, original)
    output.grouped = True  # one bin of each variable: the goal row is tightened (exact.tighten)
    if wants_score:
        output.inclusive = True
    if adapter.labels_only and not wants_score:  # a decision-only table: its classes are (low, high)
        assert table.cutoff is not None
        terms, constant = output.lin
        output = Output((terms, constant - table.cutoff), "label", adapter.description, inclusive=True, grouped=True)
    return output


def _contributions(adapter: ScorecardAdapter, wants_score: bool) -> tuple[Link, list[npt.NDArray[np.float64]]]:
    """Each variable's bins' contributions to the encoded output: points (the score, or a decision
    against the cut-off), or the log-odds of the output's second class."""
    table = adapter.table
    if wants_score or adapter.labels_only:  # a decision-only table: stated as "label" by the caller
        return "value", [np.array([b.points for b in v.bins]) for v in table.variables]
    per_bin = [_log_odds(table, v) for v in table.variables]
    if not adapter.high_is_second:  # the output's second class is the low-score one
        per_bin = [-values for values in per_bin]
    return "logit", per_bin


def _variable_trees(
    formulation: Formulation, table: PointsTable, per_bin: list[npt.NDArray[np.float64]]
) -> tuple[ModelInputs, list[Tree]]:
    """Per variable: the column its tree reads (a number's value, or a category's bin index) and
    the tree, a chain of splits at its bin edges; categories in no bin are forbidden."""
    space = formulation.problem.space
    columns: list[Lin] = []
    forbidden: list[Lin] = []
    trees: list[Tree] = []
    for c, variable in enumerate(table.variables):
        if variable.name not in space.names:
            raise NotEncodableError(f"the scorecard reads {variable.name!r}, which is not a feature of the problem")
        f = formulation.features[space.names.index(variable.name)]
        if variable.categorical:
            if f.categories is None:
                raise NotEncodableError(f"variable {variable.name!r} has category bins; the feature is a number")
            columns.append(_bin_index(variable, f.categories, forbidden))
            edges = np.arange(len(variable.bins) - 1, dtype=np.float64) + 0.5
        else:
            if f.categories is not None:
                raise NotEncodableError(f"variable {variable.name!r} has interval bins; the feature is categorical")
            columns.append(f.value)
            edges = variable.edges
        trees.append(_chain(c, edges, per_bin[c]))
    inputs = ModelInputs(estimator=None, columns=columns, forbidden=forbidden, preprocess=ScorecardColumns(table))
    return inputs, trees


def _bin_index(variable: ScorecardVariable, categories: list[tuple[Any, Lin]], forbidden: list[Lin]) -> Lin:
    """The bin index of the chosen category, as a linear expression of the category indicators
    (a category in no bin has no points: its indicator goes to ``forbidden``)."""
    terms: Expr = {}
    constant = 0.0
    for value, (ind_terms, ind_constant) in categories:
        index = variable.bin_index([value])[0]
        if not np.isfinite(index):
            forbidden.append((ind_terms, ind_constant))
            continue
        terms = add(terms, ind_terms, float(index))
        constant += float(index) * ind_constant
    return terms, constant


def _log_odds(table: PointsTable, variable: ScorecardVariable) -> npt.NDArray[np.float64]:
    """Each bin's contribution to the high-score class's log-odds."""
    if table.odds is not None:
        return np.array([b.points for b in variable.bins]) * math.log(2.0) / table.odds.pdo
    return np.array([b.log_odds for b in variable.bins], dtype=np.float64)


def _chain(column: int, edges: npt.NDArray[np.float64], values: npt.NDArray[np.float64]) -> Tree:
    """A decision list: node k splits at ``edges[k]`` (``x < edge`` left, to bin k's leaf), its
    right child is the next split; the last right child is the last bin's leaf."""
    m = len(edges)
    if m == 0:  # one bin: a constant
        return Tree(
            feature=np.array([-1], dtype=np.intp),
            threshold=np.zeros(1),
            left=np.array([-1], dtype=np.intp),
            right=np.array([-1], dtype=np.intp),
            missing_left=np.zeros(1, dtype=bool),
            value=np.array([[float(values[0])]]),
            strict=True,
        )
    # nodes 0..m-1 split; leaves m..2m: leaf m+k is bin k
    n = 2 * m + 1
    feature = np.full(n, -1, dtype=np.intp)
    threshold = np.zeros(n)
    left = np.full(n, -1, dtype=np.intp)
    right = np.full(n, -1, dtype=np.intp)
    value = np.zeros((n, 1))
    for k in range(m):
        feature[k] = column
        threshold[k] = edges[k]
        left[k] = m + k
        right[k] = k + 1 if k + 1 < m else 2 * m
    for k in range(m + 1):
        value[m + k, 0] = float(values[k])
    return Tree(feature, threshold, left, right, np.zeros(n, dtype=bool), value, strict=True)


def _real(adapter: ScorecardAdapter, space: Any, row: npt.NDArray[np.float64], score: bool, output: str) -> float:
    """The real model's output at the original, in the encoding's units: points, or the log-odds
    of the output's second class (for a decision-only table: points)."""
    if not score and not adapter.labels_only and adapter.model is None:
        # a table's own log-odds: its probability rounds to 0 or 1 from 37 on (pdo 1, a score 60
        # points off the odds' anchor), whose log-odds are then unbounded (fuzzing)
        log_odds = float(adapter.table.log_odds(space.to_frame(row))[0])
        if not math.isfinite(log_odds):
            raise NotEncodableError("the scorecard's log-odds at the original are not finite")
        return log_odds if adapter.high_is_second else -log_odds
    predictions = adapter.predict(row, space)
    if score or adapter.labels_only:
        return float(predictions[adapter.outputs[1].name][0])
    proba = predictions[output][0]
    if not 0.0 < proba[1] < 1.0:
        raise NotEncodableError("the scorecard's probability at the original is 0 or 1: its log-odds are unbounded")
    return float(math.log(proba[1] / proba[0]))


def _paper_objective(formulation: Formulation, objective: ScorecardDistance, original: npt.NDArray[np.float64]) -> None:
    """The ``scorecard`` metric as the program's objective: alpha x sum_i w_i |WoE'_i - WoE_i|
    (linear in the leaves, one bin per variable) + beta x sum_i |(F^T (WoE' - mu))_i| (two
    non-negative parts per variable), + the change penalty."""
    problem = formulation.problem
    table = objective.table
    bins = table.bins(problem.space.to_frame(problem.space.original.reshape(1, -1)))[0]
    woe: list[Lin] = []  # each variable's WoE as a linear expression of its leaves
    distance: Expr = {}
    for c, (variable, leaves, tree) in enumerate(
        zip(table.variables, formulation.leaves, formulation.trees, strict=True)
    ):
        values = objective.values[c]
        here = float(values[int(bins[c])])
        splits = len(variable.bins) - 1
        terms: Expr = {}
        for node, var in leaves.items():
            k = node - splits if tree.feature[0] >= 0 else 0  # chain leaves are numbered after the splits
            terms[var] = float(values[k])
            weight = objective.alpha * float(objective.weights[c]) * abs(float(values[k]) - here)
            if weight:
                distance[var] = distance.get(var, 0.0) + weight
        woe.append((terms, 0.0))
    if objective.beta and objective.factor is not None and objective.mean is not None:
        distance = _closeness(formulation, objective, woe, distance)
    penalty = problem.distance.change_penalty
    if penalty:
        for f in formulation.features:
            if f.changed is not None:
                distance = add(distance, {f.changed: penalty * float(problem.space.costs[f.index])})
    formulation.distance = distance


def _closeness(formulation: Formulation, objective: ScorecardDistance, woe: list[Lin], distance: Expr) -> Expr:
    """``distance`` plus beta x sum_i |(F^T (WoE' - mu))_i|: two non-negative parts per variable
    (and their warm-start fill)."""
    assert objective.factor is not None and objective.mean is not None
    factor, mean = objective.factor, objective.mean
    milp = formulation.milp
    n = len(objective.table.variables)
    parts: list[tuple[int, int]] = []
    for c in range(n):
        plus = milp.var(f"closeness+[{c}]", 0.0, INF)
        minus = milp.var(f"closeness-[{c}]", 0.0, INF)
        row: Expr = {plus: -1.0, minus: 1.0}
        constant = 0.0
        for j in range(n):
            if factor[j, c] != 0.0:
                row = add(row, woe[j][0], float(factor[j, c]))
                constant -= float(factor[j, c]) * float(mean[j])
        milp.row(row, -constant, -constant)  # (F^T (w - mu))_c = plus - minus
        distance = add(distance, {plus: objective.beta, minus: objective.beta})
        parts.append((plus, minus))

    def fill(x: npt.NDArray[np.float64], _row: npt.NDArray[np.float64]) -> None:
        w = np.array([sum(coef * x[v] for v, coef in terms.items()) for terms, _ in woe])
        for c, (plus, minus) in enumerate(parts):
            value = float((w - mean) @ factor[:, c])
            x[plus], x[minus] = max(value, 0.0), max(-value, 0.0)

    formulation.fills.append(fill)
    return distance
