"""The counterfactual problem as a mixed-integer linear program: same domains, same rules, same
score as every other engine.

Variables per mutable feature: a number on its grid (an integer count of grid steps), a
continuous number, one of its allowed values, or one category (an indicator each); a binary
"changed" and, for numbers, the absolute change. Immutable features are constants. The
objective is the soft score's level 0 (the distance: range- or MAD-scaled L1 per feature, 1 per
changed category, the change penalty); level 1 (the number of changed features) is the
tie-break, solved lexicographically (:mod:`counterplan.solver.exact.phase`). Hard rules are constraints:
domains and monotone directions (bounds), allowed values and decimals (the grid), the maximum
number of changes, and every goal on the model's output, which an encoder
(:func:`encode_model`) writes as a linear expression of these variables.

Every threshold of a tree and every goal bound keeps a margin, so an answer the program calls
valid is valid for the real model too (which compares float32 inputs, for scikit-learn's trees);
the answer is still checked through the real model.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from counterplan.planning.features import BooleanFeature, CategoricalFeature
from counterplan.planning.goals import ClassGoal, RangeGoal, ValueGoal
from counterplan.planning.models import SklearnClassifierAdapter, SklearnRegressorAdapter
from counterplan.planning.problem import CounterfactualProblem
from counterplan.planning.scorecard import ScorecardAdapter
from counterplan.solver.exact.hull import check_trust_region, encode_trust_region
from counterplan.solver.exact.inputs import Column, Lin, ModelInputs, NotEncodableError, decompose, evaluate
from counterplan.solver.exact.milp import INF, Expr, Milp, add
from counterplan.solver.exact.trees import Ensemble, Tree, read_ensemble

LINEAR_CLASSIFIERS = ("LogisticRegression", "LogisticRegressionCV", "SGDClassifier", "LinearSVC", "RidgeClassifier")
LABEL_ONLY = ("LinearSVC", "RidgeClassifier")
"""Linear classifiers without probabilities: the predicted label is the side of the hyperplane."""
LINEAR_REGRESSORS = (
    "LinearRegression",
    "Ridge",
    "RidgeCV",
    "Lasso",
    "LassoCV",
    "ElasticNet",
    "ElasticNetCV",
    "SGDRegressor",
    "HuberRegressor",
    "BayesianRidge",
)
NETWORKS = ("MLPClassifier", "MLPRegressor")
"""ReLU networks: :mod:`counterplan.solver.exact.networks`."""
FLOAT32_MARGIN = 2.0**-19
"""Relative margin on each side of a float32 threshold: 16 units in the last place, so
rounding the input to float32 never crosses the threshold."""
FLOAT64_MARGIN = 1e-9


@dataclass
class FeatureVars:
    """One feature's variables: its encoded value, and what the model reads of it."""

    index: int
    value: Lin
    """The encoded value (a number, or a category's index)."""
    categories: list[tuple[Any, Lin]] | None = None
    """For a category or a boolean: the model's value of each category and its indicator."""
    changed: int | None = None
    distance: int | None = None
    grid: tuple[int, float] | None = None
    """For a number on a grid: the integer variable counting steps, and the values per unit."""
    allowed: tuple[list[int], npt.NDArray[np.float64]] | None = None
    stay: int | None = None
    """For a number whose original lies off its grid: 1 keeps the original."""


@dataclass
class Output:
    """The model's output as a linear expression, and what it means."""

    lin: Lin
    link: str
    description: str
    classes: list[Lin] | None = None
    """For a multi-class model: each class's probability (``link`` probability) or score
    (``logit``: the softmax's inputs)."""
    inclusive: bool = False
    """A scorecard's: for ``label``, 0 itself gives class 1 (a score at the cut-off is accepted);
    for ``value``, a range's ends are reached exactly (sums of points), kept without a margin."""


@dataclass
class Formulation:
    """The program, and how to map rows to variables and back."""

    problem: CounterfactualProblem
    milp: Milp
    features: list[FeatureVars]
    output: Output
    distance: Expr
    changes: Expr
    thresholds: list[tuple[int, int, float]] = field(default_factory=list)
    """(variable, feature, raw threshold): the variable is 1 when the feature is above it."""
    bands: dict[int, tuple[float, float]] = field(default_factory=dict)
    """Threshold variable -> the nearest values its feature may take below and above it."""
    margin_scale: float = 1.0
    """Threshold margins, as a multiple of the defaults (wider after the model rejected an answer)."""
    conservative: str | None = None
    """Why the program is stricter than the problem (a multi-class softmax), when it is."""
    original_sides: dict[int, bool] = field(default_factory=dict)
    """Threshold variables of a number whose original is off its grid: the original's side."""
    leaves: list[dict[int, int]] = field(default_factory=list)
    """Per tree: leaf node -> its indicator variable."""
    trees: list[Tree] = field(default_factory=list)
    inputs: ModelInputs | None = None
    fills: list[Callable[[npt.NDArray[np.float64], npt.NDArray[np.float64]], None]] = field(default_factory=list)
    """Set auxiliary variables in a warm start ``(x, row)`` from the values already in ``x``."""

    def decode(self, x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """The encoded row a solution stands for, exactly on its grid and categories."""
        space = self.problem.space
        row = space.original.copy()
        for f in self.features:
            j = f.index
            if f.changed is not None and x[f.changed] < 0.5:
                continue  # unchanged: exactly the original
            if f.categories is not None:
                row[j] = float(np.argmax([evaluate(indicator, x) for _, indicator in f.categories]))
            elif f.allowed is not None:
                picks, values = f.allowed
                row[j] = float(values[int(np.argmax([x[v] for v in picks]))])
            elif f.grid is not None:
                if f.stay is not None and x[f.stay] > 0.5:
                    continue
                steps, per_unit = f.grid
                row[j] = float(np.rint(x[steps])) / per_unit + 0.0
            else:
                row[j] = float(np.clip(evaluate(f.value, x), space.lower[j], space.upper[j]))
        return row

    @functools.cached_property
    def owner_of_var(self) -> dict[int, int]:
        """Each feature variable's feature (built once: tree encodings ask for every split)."""
        out: dict[int, int] = {}
        for f in self.features:
            for v in f.value[0]:
                out[v] = f.index
            for _, (terms, _c) in f.categories or ():
                for v in terms:
                    out[v] = f.index
        return out

    def assignment_of_original(self) -> npt.NDArray[np.float64]:
        """Every variable's value at the original instance."""
        return self.assignment(self.problem.space.original)

    def assignment(self, row: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """Every variable's value for an encoded row (a warm start)."""
        space = self.problem.space
        x = np.zeros(self.milp.n_vars)
        original = space.original
        for f in self.features:
            j = f.index
            moved = bool(row[j] != original[j])
            if f.changed is not None:
                x[f.changed] = float(moved)
            if f.distance is not None:
                x[f.distance] = abs(row[j] - original[j])
            if f.categories is not None:
                for k, (_, (terms, _c)) in enumerate(f.categories):
                    for v in terms:
                        x[v] = float(round(row[j]) == k)
            elif f.allowed is not None:
                picks, values = f.allowed
                for v, value in zip(picks, values, strict=True):
                    x[v] = float(value == row[j])
            elif f.grid is not None:
                steps, per_unit = f.grid
                if f.stay is not None:
                    x[f.stay] = float(not moved)
                    x[steps] = round(row[j] * per_unit) if moved else 0.0
                else:
                    x[steps] = round(row[j] * per_unit)
            else:
                for v in f.value[0]:
                    x[v] = row[j]
        for var, j, t in self.thresholds:
            staying = var in self.original_sides and row[j] == original[j]
            x[var] = float(self.original_sides[var] if staying else row[j] > t)
        if self.leaves:
            assert self.inputs is not None
            model_row = model_input_row(self.problem, self.inputs, row)
            for tree, leaves in zip(self.trees, self.leaves, strict=True):
                leaf = tree.leaf(model_row)
                if leaf in leaves:
                    x[leaves[leaf]] = 1.0
        for fill in self.fills:  # auxiliary variables of other encodings, from what is set above
            fill(x, row)
        return x


def model_input_row(problem: CounterfactualProblem, inputs: ModelInputs, row: npt.NDArray[np.float64]) -> Any:
    """What the final estimator reads for ``row``, computed by the real preprocessing."""
    adapter: Any = problem.model
    data: Any = problem.space.to_frame(row.reshape(1, -1)) if adapter.input_kind == "dataframe" else row.reshape(1, -1)
    if inputs.preprocess is not None:
        data = inputs.preprocess.transform(data)
    if hasattr(data, "toarray"):
        data = data.toarray()
    return np.asarray(data, dtype=np.float64)[0]


def build(
    problem: CounterfactualProblem,
    goal_epsilon: float = 1e-6,
    probability_epsilon: float = 0.0,
    margin_scale: float = 1.0,
    milp: Milp | None = None,
) -> Formulation:
    """The program of ``problem``; raises :class:`NotEncodableError` saying why it cannot be built.
    With ``milp``, its variables and rows are added to that program (one copy of several: a set
    of answers solved at once, :mod:`counterplan.solver.exact.diverse`)."""
    check_problem(problem)
    milp = Milp() if milp is None else milp
    features = [_feature(milp, problem, j) for j in range(problem.space.n_features)]
    distance: Expr = {}
    changes: Expr = {}
    space = problem.space
    penalty = problem.distance.change_penalty
    for f in features:
        if f.changed is None:
            continue
        cost = float(space.costs[f.index])
        changes[f.changed] = 1.0
        nominal = not space.graded[f.index]
        weight = cost * ((1.0 if nominal else 0.0) + penalty)
        distance = add(distance, {f.changed: weight})
        if f.distance is not None:
            distance = add(distance, {f.distance: cost / float(problem.scales[f.index])})
    if problem.max_changed_features is not None:
        milp.row(changes, -INF, float(problem.max_changed_features))
    formulation = Formulation(problem, milp, features, Output(({}, 0.0), "value", ""), distance, changes)
    formulation.margin_scale = margin_scale
    formulation.output = encode_model(formulation)
    _goal(formulation, probability_epsilon if formulation.output.link == "probability" else goal_epsilon)
    encode_trust_region(formulation)
    if problem.relations is not None:
        from counterplan.solver.exact.relations import encode_relations  # noqa: PLC0415

        encode_relations(formulation)
    milp.minimise(formulation.distance)  # an encoding may replace the distance (the scorecard metric)
    return formulation


def check_problem(problem: CounterfactualProblem) -> None:
    """Refuse what the program cannot state exactly, naming it."""
    if problem.distance.metric == "sd_squared":
        raise NotEncodableError("the sd_squared distance is quadratic; HiGHS solves linear programs (use mad_l1)")
    if problem.plausibility is not None:
        raise NotEncodableError("plausibility is judged by a learned model the program cannot state")
    check_trust_region(problem)  # a trust region is a convex hull: the program states it exactly
    space = problem.space
    for j, feature in enumerate(space.features):
        if space.missing[j] and feature.mutable and space.lower[j] != space.upper[j]:
            raise NotEncodableError(f"feature {feature.name!r}: filling a missing value in")
    if not isinstance(problem.model, SklearnClassifierAdapter | SklearnRegressorAdapter | ScorecardAdapter):
        raise NotEncodableError(f"a {type(problem.model).__name__} is a black box to the exact engine")
    if len(problem.goals) != 1:
        raise NotEncodableError("the exact engine takes one goal")


def _feature(milp: Milp, problem: CounterfactualProblem, j: int) -> FeatureVars:
    space = problem.space
    feature = space.features[j]
    o = float(space.original[j])
    low, high = float(space.lower[j]), float(space.upper[j])
    name = feature.name
    categorical = isinstance(feature, CategoricalFeature | BooleanFeature)
    if not feature.mutable or low == high or space.missing[j]:
        return _constant(problem, j)
    if categorical:
        values = _model_values(feature)
        indicators = [milp.binary(f"{name}={v}") for v in values]
        allowed = range(round(low), round(high) + 1)
        for k, var in enumerate(indicators):
            if k not in allowed:
                milp.upper[var] = 0.0
        milp.row(dict.fromkeys(indicators, 1.0), 1.0, 1.0)
        stay = indicators[round(o)]
        changed = milp.var(f"changed[{name}]", 0.0, 1.0)  # 1 - the original's indicator: integral already
        milp.row({changed: 1.0, stay: 1.0}, 1.0, 1.0)
        return FeatureVars(
            j,
            ({v: float(k) for k, v in enumerate(indicators)}, 0.0),
            [(value, ({var: 1.0}, 0.0)) for value, var in zip(values, indicators, strict=True)],
            changed=changed,
        )
    changed = milp.binary(f"changed[{name}]")
    distance = milp.var(f"distance[{name}]", 0.0, max(high - o, o - low, 0.0))
    if j in space.allowed:
        grid = space.allowed[j]
        picks = [milp.binary(f"{name}={v:g}") for v in grid]
        milp.row(dict.fromkeys(picks, 1.0), 1.0, 1.0)
        value: Lin = (dict(zip(picks, map(float, grid), strict=True)), 0.0)
        home = [p for p, v in zip(picks, grid, strict=True) if v == o]
        milp.row({changed: 1.0, home[0]: 1.0}, 1.0, 1.0)
        _distance_rows(milp, value, o, distance)
        return FeatureVars(j, value, changed=changed, distance=distance, allowed=(picks, grid))
    per_unit = float(space.grid_scale[j])
    if per_unit > 0:
        lo_steps = math.ceil(float(space.grid_lower[j]) * per_unit - 1e-9)
        hi_steps = math.floor(float(space.grid_upper[j]) * per_unit + 1e-9)
        on_grid = abs(round(o * per_unit) - o * per_unit) < 1e-9
        if on_grid:
            steps = milp.var(f"{name}/step", lo_steps, hi_steps, integer=True)
            value = ({steps: 1.0 / per_unit}, 0.0)
            _changed_rows(milp, value, o, low, high, changed)
            _distance_rows(milp, value, o, distance)
            return FeatureVars(j, value, changed=changed, distance=distance, grid=(steps, per_unit))
        # the original is off the grid: it may stay, or move onto the grid
        stay = milp.binary(f"stay[{name}]")
        steps = milp.var(f"{name}/step", min(lo_steps, 0), max(hi_steps, 0), integer=True)
        milp.row({steps: 1.0, stay: float(lo_steps)}, float(lo_steps), INF)
        milp.row({steps: 1.0, stay: float(hi_steps)}, -INF, float(hi_steps))
        milp.row({changed: 1.0, stay: 1.0}, 1.0, 1.0)
        value = ({steps: 1.0 / per_unit, stay: o}, 0.0)
        _distance_rows(milp, value, o, distance)
        return FeatureVars(j, value, changed=changed, distance=distance, grid=(steps, per_unit), stay=stay)
    x = milp.var(name, low, high)
    value = ({x: 1.0}, 0.0)
    _changed_rows(milp, value, o, low, high, changed)
    _distance_rows(milp, value, o, distance)
    return FeatureVars(j, value, changed=changed, distance=distance)


def _model_values(feature: Any) -> list[Any]:
    if isinstance(feature, BooleanFeature):
        return [False, True]
    return list(feature.model_values())


def _constant(problem: CounterfactualProblem, j: int) -> FeatureVars:
    space = problem.space
    feature = space.features[j]
    o = float(space.original[j])
    if isinstance(feature, CategoricalFeature | BooleanFeature) and not space.missing[j]:
        values = _model_values(feature)
        k = round(o)
        return FeatureVars(j, ({}, o), [(v, ({}, float(i == k))) for i, v in enumerate(values)])
    return FeatureVars(j, ({}, o))


def _changed_rows(milp: Milp, value: Lin, o: float, low: float, high: float, changed: int) -> None:  # noqa: PLR0917
    """``|value - o| <= M * changed``, M from the domain (tight)."""
    terms, constant = value
    milp.row(add(terms, {changed: -(high - o)}), -INF, o - constant)
    milp.row(add(terms, {changed: o - low}), o - constant, INF)


def _distance_rows(milp: Milp, value: Lin, o: float, distance: int) -> None:
    """``distance >= |value - o|`` (the objective presses it down onto the absolute change)."""
    terms, constant = value
    milp.row(add(terms, {distance: -1.0}), -INF, o - constant)
    milp.row(add(terms, {distance: 1.0}), o - constant, INF)


def base_columns(formulation: Formulation) -> list[Column]:
    """The columns the model (or its pipeline) takes, one per feature in order."""
    problem = formulation.problem
    adapter: Any = problem.model
    frame = adapter.input_kind == "dataframe"
    out = []
    for f in formulation.features:
        feature = problem.space.features[f.index]
        if f.categories is None:
            out.append(Column(f.value, feature.name))
            continue
        text = any(isinstance(v, str) for v, _ in f.categories)
        if frame:
            lin: Lin | None = None
            if not text:
                terms: Expr = {}
                constant = 0.0
                for value, (ind_terms, ind_constant) in f.categories:
                    terms = add(terms, ind_terms, float(value))
                    constant += float(value) * ind_constant
                lin = (terms, constant)
            out.append(Column(lin, feature.name, f.categories))
        else:
            out.append(Column(f.value, feature.name, [(k, ind) for k, (_, ind) in enumerate(f.categories)]))
    return out


def encode_model(formulation: Formulation) -> Output:
    """The model's output as a linear expression of the program's variables."""
    problem = formulation.problem
    adapter: Any = problem.model
    if isinstance(adapter, ScorecardAdapter):
        from counterplan.solver.exact.scorecards import encode_scorecard  # noqa: PLC0415

        return encode_scorecard(formulation, adapter)
    if len(adapter.outputs) != 1:
        raise NotEncodableError("a model with several outputs")
    inputs = decompose(adapter.model, base_columns(formulation))
    formulation.inputs = inputs
    for lin in inputs.forbidden:
        formulation.milp.row(lin[0], -INF, -lin[1])
    estimator = inputs.estimator
    kind = type(estimator).__name__
    expected = getattr(estimator, "n_features_in_", len(inputs.columns))
    if expected != len(inputs.columns):
        raise NotEncodableError(f"{kind} reads {expected} columns; the pipeline gives {len(inputs.columns)}")
    original = model_input_row(problem, inputs, problem.space.original)
    if kind.startswith("XGB") and inputs.preprocess is not None and _sparse_output(problem, inputs):
        raise NotEncodableError(
            "XGBoost reads this pipeline's sparse output, where a zero counts as missing: "
            "encode densely (OneHotEncoder(sparse_output=False) or sparse_threshold=0)"
        )
    for i, lin in enumerate(inputs.columns):  # the decomposition must reproduce the real preprocessing
        if lin[0] or not np.isnan(original[i]):
            mine = evaluate(lin, formulation.assignment_of_original())
            if not math.isclose(mine, original[i], rel_tol=1e-7, abs_tol=1e-7):
                raise NotEncodableError(
                    f"column {i} of {kind}'s input: the encoding gives {mine!r}, the pipeline {original[i]!r}"
                )
    if kind in LINEAR_CLASSIFIERS or kind in LINEAR_REGRESSORS:
        return _linear(estimator, kind, inputs, original)
    if kind in NETWORKS:
        from counterplan.solver.exact.networks import encode_network  # noqa: PLC0415 - it imports this module

        return encode_network(formulation, estimator, inputs, original)
    ensemble = read_ensemble(estimator)
    return _trees(formulation, ensemble, inputs, original)


def _linear(estimator: Any, kind: str, inputs: ModelInputs, original: npt.NDArray[np.float64]) -> Output:
    classifier = kind in LINEAR_CLASSIFIERS
    if classifier and len(estimator.classes_) > 2:
        if kind not in ("LogisticRegression", "LogisticRegressionCV"):
            raise NotEncodableError(f"a multi-class {kind}")
        coefs = np.asarray(estimator.coef_, dtype=np.float64)
        scores = [
            _affine_output(coefs[k], float(estimator.intercept_[k]), inputs, original) for k in range(coefs.shape[0])
        ]
        return Output(scores[0], "logit", kind, classes=scores)
    if kind == "SGDClassifier" and estimator.loss != "log_loss":
        raise NotEncodableError(f"SGDClassifier with loss {estimator.loss!r} has no logistic link")
    coef = np.asarray(estimator.coef_, dtype=np.float64).reshape(-1)
    if coef.size != len(inputs.columns):
        raise NotEncodableError(f"{kind} has several outputs")
    intercept = float(np.asarray(estimator.intercept_, dtype=np.float64).reshape(-1)[0])
    link = "value" if not classifier else "label" if kind in LABEL_ONLY else "logit"
    return Output(_affine_output(coef, intercept, inputs, original), link, kind)


def _affine_output(coef: npt.NDArray[np.float64], intercept: float, inputs: ModelInputs, original: Any) -> Lin:
    """``coef . columns + intercept`` as a linear expression (constant columns folded in)."""
    terms: Expr = {}
    constant = intercept
    for c, (lin, value) in enumerate(zip(inputs.columns, original, strict=True)):
        if not lin[0]:
            constant += float(coef[c]) * float(value)
            continue
        terms = add(terms, lin[0], float(coef[c]))
        constant += float(coef[c]) * lin[1]
    return terms, constant


def _trees(
    formulation: Formulation,
    ensemble: Ensemble,
    inputs: ModelInputs,
    original: npt.NDArray[np.float64],
    real: npt.NDArray[np.float64] | None = None,
) -> Output:
    """The ensemble's output; ``real`` is the model's output at the original in the ensemble's
    link (read from the scikit-learn model when not given)."""
    milp = formulation.milp
    problem = formulation.problem
    space = problem.space
    splits: dict[tuple[int, int], Lin]
    """(tree, node) -> the expression that is 1 when the split sends the row right."""
    raw: dict[int, dict[float, int]] = {}
    """feature -> raw threshold -> its binary variable."""
    thresholds: list[tuple[int, int, float]] = []
    features_of = {f.index: f for f in formulation.features}

    def right_of(tree: Tree, node: int) -> Lin | bool:
        column = int(tree.feature[node])
        lin = inputs.columns[column]
        terms = lin[0]
        if not terms:
            return not tree.goes_left(node, float(original[column]))
        t = float(tree.threshold[node])
        variables = set(terms)
        owner = _owner(formulation, variables)
        if owner is None:
            raise NotEncodableError(f"column {column} of the model's input mixes several features")
        f = features_of[owner]
        if f.categories is not None:  # a function of one category choice: right where its value is past t
            rights: Expr = {}
            right_constant = 0.0
            for _, indicator in f.categories:
                value = evaluate(lin, _unit(indicator, milp.n_vars))
                goes_right = (value >= t) if tree.strict else (value > t)
                if goes_right:
                    rights = add(rights, indicator[0])
                    right_constant += indicator[1]
            return rights, right_constant
        if f.allowed is not None:  # each allowed value decides exactly, as the model does
            picks, values = f.allowed
            a, b = _affine_in_feature(lin, f.value)
            rights = {v: 1.0 for v, value in zip(picks, values, strict=True) if not tree.goes_left(node, a * value + b)}
            return rights, 0.0
        a, b = _affine_in_feature(lin, f.value)  # a number: the column is a * value + b
        if a == 0.0:
            return not tree.goes_left(node, float(original[column]))
        if f.grid is not None and a > 0:
            exact = _grid_threshold(formulation, raw, thresholds, f, tree, node, (a, b))
            if exact is not None:
                return exact
        margin = max(abs(t), 1.0) * (FLOAT32_MARGIN if tree.float32 else FLOAT64_MARGIN) * formulation.margin_scale
        x_threshold = (t - b) / a  # in the feature's own units
        x_margin = margin / abs(a)
        o = float(space.original[owner])
        if abs(o - x_threshold) < x_margin:  # the original sits inside the margin: keep it reachable
            x_margin = abs(o - x_threshold) / 2.0
        above = _threshold_var(formulation, raw, thresholds, owner, x_threshold, x_margin, strict=tree.strict)
        if isinstance(above, bool):  # the domain lies on one side (beyond the margin)
            return above if a > 0 else not above
        return ({above: 1.0}, 0.0) if a > 0 else ({above: -1.0}, 1.0)

    outputs = ensemble.outputs
    totals: list[Expr] = [{} for _ in range(outputs)]
    for t_index, tree in enumerate(ensemble.trees):
        splits = {}
        leaves: dict[int, int] = {}
        reached: list[int] = []
        stack = [0]
        while stack:  # only the nodes a row can reach: constant splits are decided here
            node = stack.pop()
            if tree.feature[node] < 0:
                reached.append(node)
                continue
            right = right_of(tree, node)
            if right is True:
                stack.append(int(tree.right[node]))
            elif right is False:
                stack.append(int(tree.left[node]))
            else:
                splits[(t_index, node)] = right
                stack.extend([int(tree.left[node]), int(tree.right[node])])
        for leaf in reached:
            leaves[leaf] = milp.var(f"tree{t_index}/leaf{leaf}", 0.0, 1.0)
        milp.row({v: 1.0 for v in leaves.values()}, 1.0, 1.0)
        for (_, node), (terms, constant) in splits.items():
            left_leaves = _leaves_under(tree, int(tree.left[node]), leaves)
            right_leaves = _leaves_under(tree, int(tree.right[node]), leaves)
            if left_leaves:  # sum(left) <= 1 - right
                milp.row(add(dict.fromkeys(left_leaves, 1.0), terms), -INF, 1.0 - constant)
            if right_leaves:  # sum(right) <= right
                milp.row(add(dict.fromkeys(right_leaves, 1.0), terms, -1.0), -INF, constant)
        for leaf, var in leaves.items():
            for k in range(outputs):
                if tree.value[leaf, k] != 0.0:
                    totals[k][var] = totals[k].get(var, 0.0) + ensemble.weight * float(tree.value[leaf, k])
        formulation.leaves.append(leaves)
        formulation.trees.append(tree)
    formulation.thresholds = thresholds
    _crossing_rows(formulation)
    for variables in raw.values():  # above a higher threshold implies above a lower one
        ordered = [variables[t] for t in sorted(variables)]
        for lower_var, upper_var in itertools.pairwise(ordered):
            milp.row({lower_var: 1.0, upper_var: -1.0}, 0.0, INF)
    offsets = (_real_output(problem, ensemble.link, outputs) if real is None else real) - ensemble.total(original)
    lins = [(totals[k], float(offsets[k])) for k in range(outputs)]
    if outputs == 1:
        return Output(lins[0], ensemble.link, ensemble.description)
    return Output(lins[0], ensemble.link, ensemble.description, classes=lins)


def _crossing_rows(formulation: Formulation) -> None:
    """Valid inequalities that tighten the relaxation: crossing a threshold away from the
    original changes the feature and costs at least the distance to the threshold's far side.
    (The big-M rows imply both for integral values; the relaxation learns them only from these.)"""
    milp = formulation.milp
    space = formulation.problem.space
    for var, j, _ in formulation.thresholds:
        f = formulation.features[j]
        if f.changed is None:
            continue
        below, above = formulation.bands[var]
        o = float(space.original[j])
        right = formulation.original_sides.get(var, o > (below + above) / 2.0)
        if not right:  # the original lies below: var = 1 means a change up to `above` at least
            milp.row({var: 1.0, f.changed: -1.0}, -INF, 0.0)
            if f.distance is not None and above > o:
                milp.row({f.distance: 1.0, var: -(above - o)}, 0.0, INF)
        else:  # the original lies above: var = 0 means a change down to `below` at least
            milp.row({var: -1.0, f.changed: -1.0}, -INF, -1.0 + 0.0)
            if f.distance is not None and o > below:
                milp.row({f.distance: 1.0, var: (o - below)}, o - below, INF)


def _unit(indicator: Lin, n: int) -> npt.NDArray[np.float64]:
    """A variable vector where ``indicator`` is 1 and every other indicator 0."""
    x = np.zeros(n)
    for v in indicator[0]:
        x[v] = 1.0
    return x


def _owner(formulation: Formulation, variables: set[int]) -> int | None:
    """The one feature whose variables ``variables`` are, or None (several, or none)."""
    owners = {formulation.owner_of_var.get(v) for v in variables}
    return owners.pop() if len(owners) == 1 and None not in owners else None


def _affine_in_feature(column: Lin, value: Lin) -> tuple[float, float]:
    """``(a, b)`` with ``column = a * value + b``, when the column is a multiple of the value."""
    terms, constant = column
    value_terms, value_constant = value
    ratios = {terms.get(v, 0.0) / c for v, c in value_terms.items() if c != 0.0}
    if len(ratios) != 1 or set(terms) - set(value_terms):
        raise NotEncodableError("a model input column is not an affine function of one feature")
    a = ratios.pop()
    return a, constant - a * value_constant


def _threshold_var(  # noqa: PLR0917 - one call site
    formulation: Formulation,
    raw: dict[int, dict[float, int]],
    thresholds: list[tuple[int, int, float]],
    j: int,
    t: float,
    margin: float,
    *,
    strict: bool,
) -> int | bool:
    """The binary that is 1 when feature ``j`` lies above raw threshold ``t``, each side kept a
    margin away from it; or, when the domain reaches only one side beyond the margin, that side
    (True: above) with the value held out of the margin."""
    space = formulation.problem.space
    milp = formulation.milp
    low, high = float(space.lower[j]), float(space.upper[j])
    terms, constant = formulation.features[j].value
    always_left = t > high if strict else t >= high
    always_right = t <= low if strict else t < low
    if always_left or always_right:
        return always_right
    if t + margin > high and t - margin < low:
        raise NotEncodableError(f"feature {space.features[j].name!r}: its domain lies inside a threshold's margin")
    if t + margin > high:  # above cannot keep the margin: stay below
        milp.row(terms, -INF, t - margin - constant)
        return False
    if t - margin < low:
        milp.row(terms, t + margin - constant, INF)
        return True
    existing = raw.setdefault(j, {})
    if t in existing:
        return existing[t]
    var = milp.binary(f"{space.features[j].name}>{t:.6g}")
    # above: value >= t + margin when var = 1; below: value <= t - margin when var = 0
    milp.row(add(terms, {var: -(t + margin - low)}), low - constant, INF)
    milp.row(add(terms, {var: -(high - t + margin)}), -INF, t - margin - constant)
    existing[t] = var
    thresholds.append((var, j, t))
    formulation.bands[var] = (t - margin, t + margin)
    return var


def _grid_threshold(  # noqa: PLR0917 - one call site
    formulation: Formulation,
    raw: dict[int, dict[float, int]],
    thresholds: list[tuple[int, int, float]],
    f: FeatureVars,
    tree: Tree,
    node: int,
    affine: tuple[float, float],
) -> Lin | bool | None:
    """A split on a number on a grid, decided exactly: the grid step where the tree's own
    comparison (float32 for scikit-learn) turns from left to right, so no grid value is lost to
    a margin. None when the turn is not found next to the threshold (then a margin is used)."""
    assert f.grid is not None
    steps, per_unit = f.grid
    milp = formulation.milp
    a, b = affine
    t = (float(tree.threshold[node]) - b) / a
    centre = math.floor(t * per_unit)
    window = range(centre - 3, centre + 4)
    rights = [not tree.goes_left(node, a * (k / per_unit) + b) for k in window]
    if rights[0] or not rights[-1] or any(r and not later for r, later in itertools.pairwise(rights)):
        return None
    last_left = window[rights.index(True) - 1]
    space = formulation.problem.space
    low = math.ceil(float(space.grid_lower[f.index]) * per_unit - 1e-9)
    high = math.floor(float(space.grid_upper[f.index]) * per_unit + 1e-9)
    original_right = not tree.goes_left(node, a * float(space.original[f.index]) + b)
    if f.stay is None and last_left >= high:
        return False
    if f.stay is None and last_left < low:
        return True
    key = (last_left + 0.5) / per_unit  # between the last grid value on the left and the first on the right
    if f.stay is not None:  # two thresholds in one grid step may put the original on either side
        key += (-1e-6 if original_right else 1e-6) / per_unit
    existing = raw.setdefault(f.index, {})
    if key not in existing:
        var = milp.binary(f"{space.features[f.index].name}>{key:.6g}")
        if f.stay is None:
            milp.row({steps: 1.0, var: -(last_left + 1 - low)}, low, INF)  # right: steps >= last_left + 1
            milp.row({steps: 1.0, var: -(high - last_left)}, -INF, last_left)  # left: steps <= last_left
        else:  # an original off the grid: the rows hold on the grid; staying, the original's side holds
            big = float(max(abs(last_left) + 1, abs(low), abs(high)) + 1)
            milp.row({steps: 1.0, var: -(last_left + 1 - low), f.stay: big}, low, INF)
            milp.row({steps: 1.0, var: -(high - last_left), f.stay: -big}, -INF, last_left)
            milp.row(
                {var: 1.0, f.stay: -1.0} if original_right else {var: 1.0, f.stay: 1.0},
                *((0.0, INF) if original_right else (-INF, 1.0)),
            )
        existing[key] = var
        thresholds.append((var, f.index, key))
        formulation.bands[var] = (last_left / per_unit, (last_left + 1) / per_unit)
        if f.stay is not None:
            formulation.original_sides[var] = original_right
    return {existing[key]: 1.0}, 0.0


def _leaves_under(tree: Tree, node: int, leaves: dict[int, int]) -> list[int]:
    out = []
    stack = [node]
    while stack:
        n = stack.pop()
        if tree.feature[n] < 0:
            if n in leaves:
                out.append(leaves[n])
        else:
            stack.extend([int(tree.left[n]), int(tree.right[n])])
    return out


def _sparse_output(problem: CounterfactualProblem, inputs: ModelInputs) -> bool:
    adapter: Any = problem.model
    row = problem.space.original.reshape(1, -1)
    data = problem.space.to_frame(row) if adapter.input_kind == "dataframe" else row
    return hasattr(inputs.preprocess.transform(data), "toarray")


def _real_output(problem: CounterfactualProblem, link: str, outputs: int = 1) -> npt.NDArray[np.float64]:
    """The real model's outputs at the original: class 1's probability or logit (or each class's,
    for a multi-class model), or the value."""
    adapter: Any = problem.model
    model = adapter.model
    original = problem.space.original.reshape(1, -1)
    data = problem.space.to_frame(original) if adapter.input_kind == "dataframe" else original
    if link == "probability":
        proba: npt.NDArray[np.float64] = np.asarray(model.predict_proba(data), dtype=np.float64)[0]
        return proba if outputs > 1 else proba[1:2]
    if link == "logit":
        final = model.steps[-1][1] if hasattr(model, "steps") else model
        if hasattr(final, "decision_function"):
            raw = model.decision_function(data)
        elif hasattr(final, "get_booster"):  # XGBoost: the margin before the sigmoid
            raw = model.predict(data, output_margin=True)
        else:
            raw = model.predict(data, raw_score=True)  # LightGBM
        scores: npt.NDArray[np.float64] = np.asarray(raw, dtype=np.float64).reshape(-1)[:outputs]
        return scores
    value: npt.NDArray[np.float64] = np.asarray(model.predict(data), dtype=np.float64).reshape(-1)[:1]
    return value


def _goal(formulation: Formulation, epsilon: float) -> None:
    """The goal as bounds on the output expression, each kept ``epsilon`` inside."""
    problem = formulation.problem
    (bound,) = problem.goals
    goal = bound.goal
    terms, constant = formulation.output.lin
    link = formulation.output.link
    milp = formulation.milp
    if isinstance(goal, ClassGoal):
        classes = bound.output.classes or ()
        if len(classes) > 2:
            _multi_class_goal(formulation, bound.class_index, goal, epsilon)
            return
        needed = min(round(goal.confidence + goal.margin, 12), 1.0) if goal.confidence is not None else 0.0
        p = max((1.0 + goal.margin) / 2.0, needed)
        target_is_one = bound.class_index == 1
        if link == "label":  # the predicted label is certain: the right side of the hyperplane is enough
            if target_is_one:
                # at a scorecard's cut-off itself on the first try (retries keep a margin)
                inside = 0.0 if formulation.output.inclusive and formulation.margin_scale == 1.0 else epsilon
                milp.row(terms, inside - constant, INF)
            else:
                milp.row(terms, -INF, -epsilon - constant)
            return
        if link == "probability":
            limit = min(p + epsilon, 1.0)
            if target_is_one:
                milp.row(terms, limit - constant, INF)
            else:
                milp.row(terms, -INF, 1.0 - limit - constant)
            return
        if link != "logit":
            raise NotEncodableError("a class goal on a model without class probabilities")
        if p >= 1.0:
            raise NotEncodableError("a class goal needing probability 1 is out of a logistic model's reach")
        logit = math.log(p / (1.0 - p)) + epsilon
        if target_is_one:
            milp.row(terms, logit - constant, INF)
        else:
            milp.row(terms, -INF, -logit - constant)
        return
    if link != "value":
        raise NotEncodableError("a numeric goal on a classifier")
    if formulation.output.inclusive and formulation.margin_scale == 1.0:
        epsilon = 0.0  # a scorecard's points: its ends themselves are reachable (retries keep a margin)
    low, high = _numeric_interval(goal, epsilon)
    milp.row(terms, low - constant, high - constant)


def _multi_class_goal(formulation: Formulation, target: int, goal: ClassGoal, epsilon: float) -> None:
    """A class goal on a multi-class model. Averaged probabilities (a forest) state it exactly:
    the target ahead of every other class by the margin (strictly ahead of an earlier class, which
    wins a tie) and at least the confidence. Softmax scores (boosting, a multinomial logistic
    regression) are not linear in the probabilities; a sufficient condition is used instead: every
    other score below the target's by ``log(p (K - 1) / (1 - p))``, which guarantees probability
    ``p`` and hence the lead. Its optimum is then not proven (the report says so)."""
    output = formulation.output
    assert output.classes is not None
    milp = formulation.milp
    needed = min(round(goal.confidence + goal.margin, 12), 1.0) if goal.confidence is not None else 0.0
    target_terms, target_constant = output.classes[target]
    k = len(output.classes)
    if output.link == "probability":
        for j, (terms, constant) in enumerate(output.classes):
            if j == target:
                continue
            lead = goal.margin + (1e-9 if j < target and goal.margin == 0.0 else 0.0) + epsilon
            milp.row(add(target_terms, terms, -1.0), lead - target_constant + constant, INF)
        if needed > 0.0:
            milp.row(target_terms, min(needed + epsilon, 1.0) - target_constant, INF)
        return
    p = max((1.0 + goal.margin) / 2.0, needed)
    if p >= 1.0:
        raise NotEncodableError("a class goal needing probability 1 is out of a softmax's reach")
    gap = math.log(p * (k - 1) / (1.0 - p)) + epsilon
    for j, (terms, constant) in enumerate(output.classes):
        if j != target:
            milp.row(add(target_terms, terms, -1.0), gap - target_constant + constant, INF)
    formulation.conservative = (
        f"a softmax over {k} classes: each other score kept {gap:.3g} below the target's, which guarantees "
        f"probability {p:.3g}; the true optimum may be closer"
    )


def _numeric_interval(goal: ValueGoal | RangeGoal, epsilon: float) -> tuple[float, float]:
    if isinstance(goal, RangeGoal):
        if goal.low == goal.high:
            return goal.low, goal.high
        pad = epsilon * max(1.0, *(abs(end) for end in (goal.low, goal.high) if math.isfinite(end)))
        return goal.low + pad, goal.high - pad  # an open end stays infinite
    g, tol = goal.value, goal.tolerance
    if tol == 0.0:
        return g, g
    pad = epsilon * max(1.0, abs(g))
    if g == 0.0:
        return -tol + pad, tol - pad
    near = abs(g) * (1.0 - tol)
    far = abs(g) / (1.0 - tol) if tol < 1.0 else INF
    low, high = (near, far) if g > 0 else (-far, -near)
    return low + pad, high - pad
