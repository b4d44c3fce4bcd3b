"""The counterfactual problem as a mixed-integer linear program: same domains, same rules, same
score as every other engine.

Variables per mutable feature: a number on its grid (an integer count of grid steps; beyond
:data:`~counterplan.solver.exact.milp.WIDE_STEPS` steps a continuous one, rounded onto the grid
when decoded), a continuous number, one of its allowed values, or one category (an indicator each); a binary
"changed" and, for numbers, the absolute change. Immutable features are constants. The
objective is the soft score's level 0 (the distance: range- or MAD-scaled L1 per feature, 1 per
changed category, the change penalty); level 1 (the number of changed features) is the
tie-break, solved lexicographically (:mod:`counterplan.solver.exact.phase`). Hard rules are constraints:
domains and monotone directions (bounds), allowed values and decimals (the grid), the maximum
number of changes, and every goal on the model's output, which an encoder of the registry
(:mod:`counterplan.solver.exact.encoders`, called by :func:`encode_model`) writes as a linear
expression of these variables.

Every threshold of a tree and every goal bound keeps a margin, so an answer the program calls
valid is valid for the real model too (which compares float32 inputs, for scikit-learn's trees);
the answer is still checked through the real model.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from counterplan.planning.calculator import PROBABILITY_TOLERANCE
from counterplan.planning.features import BooleanFeature, CategoricalFeature
from counterplan.planning.goals import ClassGoal, RangeGoal, ValueGoal
from counterplan.planning.models import SklearnClassifierAdapter, SklearnRegressorAdapter, model_input
from counterplan.planning.onnx_model import OnnxModel
from counterplan.planning.problem import CounterfactualProblem
from counterplan.planning.scorecard import ScorecardAdapter
from counterplan.planning.structure.errors import NotEncodableError
from counterplan.planning.structure.kind import XGBOOST, kind_name
from counterplan.solver.exact.encoders import estimator_encoder, model_encoder
from counterplan.solver.exact.encoders.network import TooManyUnstableUnitsError
from counterplan.solver.exact.encoders.relations import encode_relations
from counterplan.solver.exact.encoders.trust_region import check_trust_region, encode_trust_region
from counterplan.solver.exact.inputs import model_inputs
from counterplan.solver.exact.milp import INF, WIDE_STEPS, Expr, Milp, add
from counterplan.solver.exact.program import (
    Domains,
    FeatureVars,
    Formulation,
    Lin,
    ModelInputs,
    Output,
    evaluate,
    original_input_row,
    reach_limit,
)
from counterplan.solver.exact.tighten import tightened_row

RETRIES = 3
"""Programs solved again after an answer the real model rejects, at most (:func:`retry_margins`)."""
WIDER = 100.0
"""How much wider each retry's margins are than the one before, from the second retry on."""


def retry_margins(retry: int, goal_epsilon: float) -> tuple[float, float, float]:
    """The margins of a solve's ``retry``-th program (0: the first): the goal's epsilon, the
    epsilon of a goal on an averaged probability, and the scale of the thresholds' margins
    (:func:`build`'s arguments).

    The first program states every goal at its end: it holds every answer of the scored goal (a
    relaxation of it, up to the solver's tolerance), so its optimum, once the real model confirms
    it, is the scored problem's. Kept ``goal_epsilon`` inside, a goal lost the answers whose
    output lies on its end, and a farther one was proven optimal (fuzzing: a linear regression
    whose range began at its own output at x = 5 was proven at x = 6). An answer the real model
    rejects (an output a rounding short of the end: a network over numbers of six decimals, 3 of
    25 rows) is solved again with every goal ``goal_epsilon`` inside, then a hundred times more,
    twice, the thresholds' margins widened alike."""
    if retry == 0:
        return 0.0, 0.0, 1.0
    wider = WIDER ** (retry - 1)
    return goal_epsilon * wider, goal_epsilon * wider, wider


def build(
    problem: CounterfactualProblem,
    goal_epsilon: float = 1e-6,
    probability_epsilon: float = 0.0,
    margin_scale: float = 1.0,
    *,
    milp: Milp | None = None,
    should_stop: Callable[[], bool] | None = None,
    interval_distance: bool = True,
    reach: float | None = None,
    leaf_bounds: bool = True,
    structure_only: bool = False,
    tighten_bounds: bool = True,
) -> Formulation:
    """The program of ``problem``; raises :class:`NotEncodableError` saying why it cannot be built.
    With ``milp``, its variables and rows are added to that program (one copy of several: a set
    of answers solved at once, :mod:`counterplan.solver.exact.answer_set`). ``should_stop`` is
    asked between trees and layers (and while a forest's splits are decided): when it says stop,
    :class:`~counterplan.solver.exact.program.BuildStopped` is raised (the
    building counts against the phase's time limit). ``interval_distance`` False writes a tree
    ensemble's distance cuts one row per threshold, as before the interval rows (a benchmark's
    comparison: :attr:`~counterplan.solver.exact.program.Formulation.interval_distance`);
    ``leaf_bounds`` False keeps the leaves beyond ``reach`` (the same benchmark's comparison:
    :attr:`~counterplan.solver.exact.program.Formulation.leaf_bounds`). ``structure_only``
    writes no tree of a tree ensemble (:func:`check`); ``tighten_bounds`` False gives a network's
    units their interval bounds only (:attr:`~counterplan.solver.exact.program.Formulation.tighten_bounds`).

    ``reach``, an objective some answer is known to reach (the warm start's distance), narrows
    every feature to the values it can take in a solution at most that far: a feature whose
    change alone costs more is fixed, a number's range is cut to the distance left after its
    change penalty. A tree split outside the narrowed range is then decided while building, and
    its subtree dropped (:func:`narrowed_domains`). Every solution with objective at most
    ``reach`` is kept, so an optimum at or below it is the whole program's; above it, or none,
    the caller must solve the program again without ``reach``
    (:class:`~counterplan.solver.exact.phase.ExactPhase` does)."""
    check_problem(problem)
    milp = Milp() if milp is None else milp
    domains = Domains.of(problem) if reach is None else narrowed_domains(problem, reach)
    features = [_feature(milp, problem, j, domains) for j in range(problem.space.n_features)]
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
    formulation.should_stop = should_stop
    formulation.domains = domains
    formulation.reach = reach
    formulation.interval_distance = interval_distance
    formulation.leaf_bounds = leaf_bounds
    formulation.structure_only = structure_only
    formulation.tighten_bounds = tighten_bounds
    formulation.check_stop()
    formulation.output = encode_model(formulation)
    formulation.check_stop()
    _goal(formulation, probability_epsilon if formulation.output.link == "probability" else goal_epsilon)
    encode_trust_region(formulation)
    if problem.relations is not None:
        encode_relations(formulation)
    milp.minimise(formulation.distance)  # an encoding may replace the distance (the scorecard metric)
    return formulation


def check(problem: CounterfactualProblem) -> None:
    """Raise :class:`NotEncodableError` saying why ``problem`` cannot be encoded, as :func:`build`
    would, without writing a tree ensemble's trees: the check before a solve (``engine="exact"``
    and ``auto``), which runs before the solve's clock starts, so it must cost a fraction of the
    program (a 300-tree depth-8 forest's program takes over a second to write, its check a few
    hundredths once the trees are read). Everything else is built as :func:`build` builds it:
    the features, the model's inputs checked at the original, the trees read (the reader's
    refusals), the goal, the trust region and the relations. A refusal only a tree's split can
    raise (a split whose column mixes features, a domain inside a threshold's margin) comes from
    the phase's own build, which reports it as ``not encodable``. A network is first checked with
    its interval bounds: tighter bounds only make fewer units unstable, so a network that fits
    with them fits, and only one that does not is checked again with the linear programs' bounds
    (1.3 s of them for a (100, 100) network of 20 features, before every solve)."""
    try:
        build(problem, structure_only=True, tighten_bounds=False)
    except TooManyUnstableUnitsError:
        build(problem, structure_only=True)


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
    if not isinstance(problem.model, SklearnClassifierAdapter | SklearnRegressorAdapter | ScorecardAdapter | OnnxModel):
        raise NotEncodableError(f"a {type(problem.model).__name__} is a black box to the exact engine")
    if len(problem.goals) != 1:
        raise NotEncodableError("the exact engine takes one goal")


def narrowed_domains(problem: CounterfactualProblem, reach: float) -> Domains:
    """The domains of the solutions whose objective (the distance: a sum of non-negative terms
    per feature) is at most ``reach``: a changed feature costs its change weight plus, for a
    number, ``cost / scale`` per unit of change, so a number moves at most
    ``(reach - weight) * scale / cost`` either way; a feature whose weight alone is more than
    ``reach`` keeps its original (its range shrinks to it)."""
    space = problem.space
    domains = Domains.of(problem)
    limit = reach_limit(reach)
    penalty = problem.distance.change_penalty
    for j in range(space.n_features):
        cost = float(space.costs[j])
        o = float(space.original[j])
        if cost <= 0.0 or not space.lower[j] <= o <= space.upper[j]:
            continue  # free to move, or an original outside its domain: left as it is
        weight = cost * ((0.0 if space.graded[j] else 1.0) + penalty)
        if weight > limit:
            domains.lower[j] = domains.upper[j] = o
            continue
        if isinstance(space.features[j], CategoricalFeature | BooleanFeature):
            continue
        span = (limit - weight) * float(problem.scales[j]) / cost
        domains.lower[j] = max(domains.lower[j], o - span)
        domains.upper[j] = min(domains.upper[j], o + span)
        domains.grid_lower[j] = max(domains.grid_lower[j], o - span)
        domains.grid_upper[j] = min(domains.grid_upper[j], o + span)
    return domains


def _feature(milp: Milp, problem: CounterfactualProblem, j: int, domains: Domains) -> FeatureVars:
    space = problem.space
    feature = space.features[j]
    o = float(space.original[j])
    low, high = float(domains.lower[j]), float(domains.upper[j])
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
        return _allowed_values(milp, problem, j, (low, high), (changed, distance))
    if space.grid.gridded[j]:
        unit = space.grid.unit(j)  # a value is steps / up * down: the float decode shows
        lo_steps, hi_steps = unit.step_ends(float(domains.grid_lower[j]), float(domains.grid_upper[j]))
        home = unit.steps(o)
        on_grid = abs(round(home) - home) < 1e-9
        if not on_grid and lo_steps > hi_steps:  # no grid value within reach: the original stays
            return _constant(problem, j)
        if on_grid:
            steps = milp.var(f"{name}/step", lo_steps, hi_steps, integer=hi_steps - lo_steps <= WIDE_STEPS)
            value = ({steps: unit.value(1.0)}, 0.0)
            _changed_rows(milp, value, o, low, high, changed)
            _distance_rows(milp, value, o, distance)
            return FeatureVars(j, value, changed=changed, distance=distance, grid=(steps, unit))
        # the original is off the grid: it may stay, or move onto the grid
        stay = milp.binary(f"stay[{name}]")
        whole = max(hi_steps, 0) - min(lo_steps, 0) <= WIDE_STEPS
        steps = milp.var(f"{name}/step", min(lo_steps, 0), max(hi_steps, 0), integer=whole)
        milp.row({steps: 1.0, stay: float(lo_steps)}, float(lo_steps), INF)
        milp.row({steps: 1.0, stay: float(hi_steps)}, -INF, float(hi_steps))
        milp.row({changed: 1.0, stay: 1.0}, 1.0, 1.0)
        value = ({steps: unit.value(1.0), stay: o}, 0.0)
        _distance_rows(milp, value, o, distance)
        return FeatureVars(j, value, changed=changed, distance=distance, grid=(steps, unit), stay=stay)
    x = milp.var(name, low, high)
    value = ({x: 1.0}, 0.0)
    _changed_rows(milp, value, o, low, high, changed)
    _distance_rows(milp, value, o, distance)
    return FeatureVars(j, value, changed=changed, distance=distance)


def _allowed_values(
    milp: Milp, problem: CounterfactualProblem, j: int, domain: tuple[float, float], variables: tuple[int, int]
) -> FeatureVars:
    """A number of allowed values: one indicator each (those outside ``domain``, out of reach, at 0)."""
    space = problem.space
    name = space.features[j].name
    o = float(space.original[j])
    low, high = domain
    changed, distance = variables
    grid = space.allowed[j]
    picks = [milp.binary(f"{name}={v:g}") for v in grid]
    for pick, v in zip(picks, grid, strict=True):
        if not low <= v <= high:  # out of reach (the space's allowed values lie in its range)
            milp.upper[pick] = 0.0
    milp.row(dict.fromkeys(picks, 1.0), 1.0, 1.0)
    value: Lin = (dict(zip(picks, map(float, grid), strict=True)), 0.0)
    home = [p for p, v in zip(picks, grid, strict=True) if v == o]
    milp.row({changed: 1.0, home[0]: 1.0}, 1.0, 1.0)
    _distance_rows(milp, value, o, distance)
    return FeatureVars(j, value, changed=changed, distance=distance, allowed=(picks, grid))


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


def encode_model(formulation: Formulation) -> Output:
    """The model's output as a linear expression of the program's variables, by the encoder the
    registry has for it (:mod:`counterplan.solver.exact.encoders`)."""
    problem = formulation.problem
    adapter: Any = problem.model
    whole = model_encoder(adapter)
    if whole is not None:
        return whole(formulation, adapter)
    if len(adapter.outputs) != 1:
        raise NotEncodableError("a model with several outputs")
    inputs = model_inputs(formulation)
    formulation.inputs = inputs
    for lin in inputs.forbidden:
        formulation.milp.row(lin[0], -INF, -lin[1])
    estimator = inputs.estimator
    kind = kind_name(estimator)
    expected = getattr(estimator, "n_features_in_", len(inputs.columns))
    if expected != len(inputs.columns):
        raise NotEncodableError(f"{kind} reads {expected} columns; the pipeline gives {len(inputs.columns)}")
    original = original_input_row(problem, inputs)
    if kind in XGBOOST and inputs.preprocess is not None and _sparse_output(problem, inputs):
        raise NotEncodableError(
            "XGBoost reads this pipeline's sparse output, where a zero counts as missing: "
            "encode densely (OneHotEncoder(sparse_output=False) or sparse_threshold=0)"
        )
    _check_columns(formulation, inputs, original, kind)
    return estimator_encoder(estimator)(formulation, estimator, inputs, original)


def _check_columns(formulation: Formulation, inputs: ModelInputs, original: Any, kind: str) -> None:
    """The encoding must reproduce the real preprocessing at the original instance."""
    at_original = formulation.assignment_of_original()
    for i, lin in enumerate(inputs.columns):
        if lin[0] or not np.isnan(original[i]):
            mine = evaluate(lin, at_original)
            if not math.isclose(mine, original[i], rel_tol=inputs.tolerance, abs_tol=inputs.tolerance):
                raise NotEncodableError(
                    f"column {i} of {kind}'s input: the encoding gives {mine!r}, the pipeline {original[i]!r}"
                )


def _sparse_output(problem: CounterfactualProblem, inputs: ModelInputs) -> bool:
    adapter: Any = problem.model
    row = problem.space.original.reshape(1, -1)
    data = model_input(row, problem.space, adapter.input_kind)
    return hasattr(inputs.preprocess.transform(data), "toarray")


def _goal(formulation: Formulation, epsilon: float) -> None:
    """The goal as bounds on the output expression, each kept ``epsilon`` inside."""
    problem = formulation.problem
    (bound,) = problem.goals
    goal = bound.goal
    terms, constant = formulation.output.lin
    link = formulation.output.link
    if isinstance(goal, ClassGoal):
        classes = bound.output.classes or ()
        if len(classes) > 2:
            _multi_class_goal(formulation, bound.class_index, goal, epsilon)
        else:
            _class_goal(formulation, bound.class_index == 1, goal, epsilon)
        return
    if link != "value":
        raise NotEncodableError("a numeric goal on a classifier")
    if formulation.output.inclusive and formulation.margin_scale == 1.0:
        # a scorecard's points, a tree regressor's leaf sums: its ends themselves are reachable
        # (retries keep a margin; a relaxation, goal_epsilon outside, stays one)
        epsilon = min(epsilon, 0.0)
    low, high = _numeric_interval(goal, epsilon)
    _goal_row(formulation, terms, low - constant, high - constant)


def _goal_row(formulation: Formulation, terms: Expr, lower: float, upper: float) -> None:
    """The goal's row; a scorecard's tightened (its points may span 1e9 and 1)."""
    if formulation.output.grouped:
        tightened_row(formulation.milp, [list(leaves.values()) for leaves in formulation.leaves], terms, lower, upper)
    else:
        formulation.milp.row(terms, lower, upper)


ROUNDS_TO_ONE = 40.0
"""A score (a sigmoid's, or a softmax's lead over each other class, past ``log(K - 1)``) from which
the probability is 1.0 in float64 and float32 alike: a sigmoid rounds up to 1 from about 36.7 in
float64 and 16.6 in float32, and one minus it down to 0 likewise."""
_ROUNDED_ONE = (
    "a class goal needing probability 1: the model's probability is {link}, 1 only where floating "
    "point rounds it up (from a score of about 37 in float64); the program asks a score of 40, which "
    "is enough, so a closer answer may exist (a confidence plus margin below 1 can be proven)"
)
"""Why a program for a goal needing probability 1 of a sigmoid or softmax proves nothing. It was
refused as out of reach ("below 1 everywhere"); a separable logistic regression's probability is
1.0 in float64 from a score of about 37 on, where local search found valid answers (the goal
fuzz). Asked a score that surely rounds up, the program answers, and its answer is checked by the
real model as any."""


def _class_goal(formulation: Formulation, target_is_one: bool, goal: ClassGoal, epsilon: float) -> None:
    """A class goal on a binary model: its label, probability or logit past the needed confidence."""
    terms, constant = formulation.output.lin
    link = formulation.output.link
    milp = formulation.milp
    needed = min(round(goal.confidence + goal.margin, 12), 1.0) if goal.confidence is not None else 0.0
    p = max((1.0 + goal.margin) / 2.0, needed)
    if link == "label":  # the predicted label is certain: the right side of the hyperplane is enough
        if target_is_one:
            # at a scorecard's cut-off itself on the first try (retries keep a margin)
            inside = 0.0 if formulation.output.inclusive and formulation.margin_scale == 1.0 else epsilon
            _goal_row(formulation, terms, inside - constant, INF)
        else:
            _goal_row(formulation, terms, -INF, -epsilon - constant)
        return
    if link == "probability":
        # a probability outside [0, 1] fails the row in the score calculator: an ONNX graph's
        # summed leaf values can leave it (the ONNX fuzz: the program's answer there was rejected
        # after every retry); a forest's average never does
        milp.row(terms, -PROBABILITY_TOLERANCE - constant, 1.0 + PROBABILITY_TOLERANCE - constant)
        limit = min(p + epsilon, 1.0)
        if target_is_one:
            milp.row(terms, limit - constant, INF)
        else:
            milp.row(terms, -INF, 1.0 - limit - constant)
        return
    if link != "logit":
        raise NotEncodableError("a class goal on a model without class probabilities")
    if p >= 1.0:
        # a logistic regression's, a gradient boosting's or a network's sigmoid: 1 only by rounding
        formulation.conservative = _ROUNDED_ONE.format(link="a logistic function of its score")
    logit = (ROUNDS_TO_ONE if p >= 1.0 else math.log(p / (1.0 - p))) + epsilon
    if target_is_one:
        _goal_row(formulation, terms, logit - constant, INF)
    else:
        _goal_row(formulation, terms, -INF, -logit - constant)


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
        gap = ROUNDS_TO_ONE + math.log(k - 1) + epsilon
        for j, (terms, constant) in enumerate(output.classes):
            if j != target:
                milp.row(add(target_terms, terms, -1.0), gap - target_constant + constant, INF)
        formulation.conservative = _ROUNDED_ONE.format(link="a softmax of its scores")
        return
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
        # each end kept inside by its own magnitude, never past a quarter of the range: one pad
        # from the larger end (fuzzing: low 50, high 1e9 padded both by 1000) emptied the range
        width = goal.high - goal.low
        low_pad, high_pad = (
            min(epsilon * max(1.0, abs(end)), width / 4.0) if math.isfinite(end) else 0.0  # an open end stays open
            for end in (goal.low, goal.high)
        )
        return goal.low + low_pad, goal.high - high_pad
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
