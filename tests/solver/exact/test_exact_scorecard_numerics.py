"""Points tables whose points span 1e9 and 1: the exact engine's optimum is brute force's on
every backend (found by fuzzing). Written as it was, the goal row asked HiGHS and SCIP to tell a
point from a binary at 1e-9, inside their tolerances: answers 10 points short of the goal
(rejected by the table), programs with an answer called infeasible, and, after the retries'
wider margins (relative to a bound near 4e9), a worse answer proven optimal. The goal row is
tightened now (``counterplan.solver.exact.tighten``), and a retried program's optimum is proven
only by the loosened program."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

from counterplan.planning import (
    CategoricalFeature,
    ClassGoal,
    CounterfactualProblem,
    FloatFeature,
    IntegerFeature,
    RangeGoal,
)
from counterplan.planning.distance import DistanceSettings
from counterplan.planning.scorecard import OddsScaling, PointsTable, ScorecardAdapter, ScorecardBin, ScorecardVariable
from counterplan.solver.core.config import SolverConfig
from counterplan.solver.counterfactual import explain
from counterplan.solver.exact.config import ExactPhaseConfig
from counterplan.solver.exact.milp import INF, LIFT_CEILING, Milp, lifted, sizes
from counterplan.solver.exact.tighten import tightened_row
from tests.solver.exact.test_exact import _brute_force

pytest.importorskip("highspy")
pytest.importorskip("ortools")


def _variable(name: str, edges: list[float], points: list[float]) -> ScorecardVariable:
    lows: list[float | None] = [None, *edges]
    highs: list[float | None] = [*edges, None]
    return ScorecardVariable(
        name=name,
        bins=tuple(ScorecardBin(lower=lo, upper=hi, points=p) for lo, hi, p in zip(lows, highs, points, strict=True)),
    )


def _at_least() -> tuple[PointsTable, list[Any], Any]:
    """The original scores -3999999975.148; 4.226 more points reach the goal: f1 19 -> 15
    (distance 0.1), not f0 out of its -4e9 bin (0.111, what the retry proved optimal)."""
    table = PointsTable(
        variables=(
            _variable("f0", [4.5, 12.5], [0.0, -1.03, -3999999999.25]),
            _variable("f1", [-1.0, 3.5, 16.0, 22.0], [9.828, -24.568, 21.217, 11.602, -6.343]),
            _variable("f2", [1.0, 10.0], [22.0, 16.0, 16.0]),
        ),
        intercept=-3.5,
        cutoff=0.0,
    )
    features = [
        IntegerFeature(name="f0", value=14, low=0, high=18),
        IntegerFeature(name="f1", value=19, low=0, high=20, cost=0.5),
        IntegerFeature(name="f2", value=7, low=0, high=13),
    ]
    return table, features, RangeGoal(output="score", low=-3999999970.922, high=math.inf)


def _cut_off() -> tuple[PointsTable, list[Any], Any]:
    """A cut-off 20 points above the original's 1e10: only f0's bins give them."""
    table = PointsTable(
        variables=(
            _variable("f0", [0.5, 4.0, 11.0, 17.0], [10.0, 10.0, 20.0, 0.0, 20.0]),
            _variable("f1", [7.0, 11.0], [-1e9, -2e9, 5e9]),
            _variable("f2", [15.0, 21.0, 21.5], [5e9, 0.0, -2.0, 4e9]),
        ),
        cutoff=10000000020.0,
    )
    features = [
        IntegerFeature(name="f0", value=14, low=0, high=19, cost=2.0),
        IntegerFeature(name="f1", value=16, low=0, high=19),
        IntegerFeature(name="f2", value=11, low=0, high=21),
    ]
    return table, features, ClassGoal(target=1)


def _leave_the_huge_bin() -> tuple[PointsTable, list[Any], Any]:
    """f0 must leave its -5e9 bin for [0, 4) and f1 reach its 51 points: SCIP's answer stayed
    10 points short (f0 = 10)."""
    table = PointsTable(
        variables=(
            _variable("f0", [-2.0, 4.0, 11.0], [4e9, -1.0, -4.0, -5e9]),
            _variable("f1", [0.3, 0.9, 1.35, 2.6], [51.0, 33.0, 44.0, 25.0, 50.0]),
        ),
        intercept=91.0,
        cutoff=0.0,
    )
    features = [
        IntegerFeature(name="f0", value=13, low=0, high=13),
        FloatFeature(name="f1", value=1.1, low=0.0, high=3.0, precision=1),
    ]
    return table, features, RangeGoal(output="score", low=141.0, high=math.inf)


def _at_most() -> tuple[PointsTable, list[Any], Any]:
    """A range up to 5 with an immutable 10 points: only f0's -5 bin fits (SCIP: infeasible)."""
    table = PointsTable(
        variables=(
            _variable("f0", [1.5, 3.5, 6.5, 7.5, 9.5], [-1.0, -3e9, -4e9, 2e9, -5.0, 2.0]),
            _variable("f1", [-1.0], [20.0, 10.0]),
        ),
        cutoff=0.0,
    )
    features = [
        IntegerFeature(name="f0", value=4, low=0, high=10, cost=2.0),
        IntegerFeature(name="f1", value=1, low=0, high=14, constrained=True),
    ]
    return table, features, RangeGoal(output="score", low=-2999999980.0, high=5.0)


def _range_far_below() -> tuple[PointsTable, list[Any], Any]:
    """A range from 1e9 below to 2 points below the original: f0 to its 2-point bin. Shifted
    by each variable's least points in one row, the range's upper end sat near 1e9 on the
    right side (SCIP and CP-SAT: infeasible); each end has its own row now."""
    table = PointsTable(
        variables=(
            _variable("f0", [0.5], [2.0, 4.0]),
            _variable("f1", [0.42, 1.53], [5.0, -5.0, -1e9]),
            ScorecardVariable(
                name="f2",
                bins=(ScorecardBin(categories=("a", "b"), points=-8.68), ScorecardBin(categories=("d",), points=-0.81)),
            ),
        ),
        intercept=100.0,
        cutoff=0.0,
    )
    features = [
        IntegerFeature(name="f0", value=7, low=0, high=11, monotone="decrease"),
        FloatFeature(name="f1", value=0.59, low=0.0, high=2.5, precision=2),
        CategoricalFeature(name="f2", value="b", categories=("a", "b", "c", "d", "e"), cost=0.5),
    ]
    return table, features, RangeGoal(output="score", low=-999999896.81, high=88.32)


def _at_most_a_bins_points() -> tuple[PointsTable, list[Any], Any]:
    """At most 106.993, which f0's [0.5, 0.6) bin gives exactly: shifted, the bound lay 5e-15
    below that bin's points, a row that forced the farther bin (0.9 proven optimal, not 0.4)."""
    table = PointsTable(
        variables=(_variable("f0", [0.1, 0.5, 0.6], [2.191, 13.025, 6.993, 24.656]),),
        intercept=100.0,
        cutoff=0.0,
    )
    features = [FloatFeature(name="f0", value=0.9, low=0.0, high=1.0, precision=1)]
    return table, features, RangeGoal(output="score", low=-math.inf, high=100.0 + 6.993)


CARDS = {
    "at least, 4e9 below": _at_least,
    "cut-off at 1e10 + 20": _cut_off,
    "leave a -5e9 bin": _leave_the_huge_bin,
    "a range, 3e9 wide": _at_most,
    "a range from 1e9 below": _range_far_below,
    "at most a bin's points exactly": _at_most_a_bins_points,
}


@pytest.mark.parametrize("backend", ["highs", "ortools"])
@pytest.mark.parametrize("card", CARDS.values(), ids=CARDS.keys())
def test_a_card_of_huge_points_is_solved_exactly(card: Any, backend: str) -> None:
    table, features, goal = card()
    problem = CounterfactualProblem(features, [goal], ScorecardAdapter(table))
    config = SolverConfig(phases=(ExactPhaseConfig(backend=backend),))
    result = explain(problem, config, seed=0)
    exact = result.statistics.exact
    assert exact is not None
    assert result.valid and result.feasible, exact
    assert exact.proven, exact
    assert result.score_levels == pytest.approx(tuple(_brute_force(problem)), abs=1e-9)


def _written(groups: list[list[int]], terms: dict[int, float], lower: float, upper: float) -> Milp:
    milp = Milp()
    for _ in range(sum(len(g) for g in groups)):
        milp.binary("leaf")
    tightened_row(milp, groups, terms, lower, upper)
    return milp


def test_a_tightened_row_keeps_every_integer_solution() -> None:
    """Every choice of one leaf per group meets the tightened row exactly when it meets the
    original; leaves no choice saves are fixed at 0, and no coefficient exceeds the bound."""
    import itertools

    groups = [[0, 1, 2], [3, 4], [5, 6, 7]]
    values = {0: 0.0, 1: -1.03, 2: -4e9, 3: 21.2, 4: 11.6, 5: 22.0, 6: 16.0, 7: 5e9}
    for lower, upper in [(-3999999970.9, math.inf), (-math.inf, 30.0), (10.0, 40.0), (-4e9 + 30, 5e9)]:
        milp = _written(groups, values, lower, upper)
        for choice in itertools.product(*groups):
            x = [1.0 if v in choice else 0.0 for v in range(8)]
            meets = lower <= sum(values[v] for v in choice) <= upper
            fixed = any(milp.upper[v] == 0.0 for v in choice)
            kept = all(lo <= sum(c * x[v] for v, c in terms.items()) <= hi for terms, lo, hi in milp.rows)
            assert meets == (kept and not fixed), (lower, upper, choice)
        assert all(abs(c) <= 5e9 for terms, _, _ in milp.rows for c in terms.values())
    # a lower bound 4.226 above the -4e9 leaf's group: no coefficient beyond what the bound needs
    milp = _written(groups, values, -3999999970.9, math.inf)
    assert max(abs(c) for terms, _, _ in milp.rows for c in terms.values()) < 100.0


@pytest.mark.parametrize("backend", ["highs", "ortools"])
def test_a_retried_programs_optimum_is_proven_only_by_the_loosened_program(backend: str) -> None:
    """Two 1e9 bins and a 1-point one, the goal 1e9 + 1: SCIP's first answer (both 1e9 bins
    left, or one and a point short: within its relative tolerance) is rejected, and the retry's
    margin, relative to 1e9, keeps the goal 1e5 points inside: its optimum changes both big
    variables (2.67), while one of them and the 1-point bin (1.17) is valid. That optimum was
    called proven; now only the program with the goals loosened proves an answer, and the
    reason says why not."""
    big = 1e9
    table = PointsTable(
        variables=(
            _variable("f0", [1.5], [0.0, big]),
            _variable("f1", [1.5], [0.0, big]),
            _variable("f2", [1.5, 2.5, 3.5], [0.0, 1.0, 2.0, 3.0]),
        ),
        cutoff=0.0,
    )
    features = [
        IntegerFeature(name="f0", value=0, low=0, high=3),
        IntegerFeature(name="f1", value=0, low=0, high=3, cost=3.0),
        IntegerFeature(name="f2", value=0, low=0, high=4),
    ]
    problem = CounterfactualProblem(
        features, [RangeGoal(output="score", low=big + 1, high=math.inf)], ScorecardAdapter(table)
    )
    result = explain(problem, SolverConfig(phases=(ExactPhaseConfig(backend=backend),)), seed=0)
    exact = result.statistics.exact
    assert exact is not None and result.valid and result.feasible
    best = _brute_force(problem)
    if exact.proven:
        assert result.score_levels == pytest.approx(tuple(best), abs=1e-9), exact
    else:
        assert exact.retries > 0 and "wider" in exact.reason, exact


def test_a_probability_goal_from_a_certain_original_is_encoded() -> None:
    """Odds doubling every point, the original 100 points above the anchor: its probability of
    the high class rounds to 1, whose log-odds were called unbounded (``engine="exact"`` refused
    the problem). The table's own log-odds (69.3) are finite: the answer is brute force's."""
    table = PointsTable(
        variables=(_variable("f0", [5.0, 8.0], [0.0, 60.0, 110.0]), _variable("f1", [2.0], [0.0, 45.0])),
        intercept=45.0,
        odds=OddsScaling(points=100.0, odds=1.0, pdo=1.0),
    )
    features = [IntegerFeature(name="f0", value=9, low=0, high=10), IntegerFeature(name="f1", value=3, low=0, high=4)]
    problem = CounterfactualProblem(features, [ClassGoal(target=0, confidence=0.9)], ScorecardAdapter(table))
    result = explain(problem, engine="exact", seed=0)
    exact = result.statistics.exact
    assert exact is not None and result.valid and exact.proven, exact
    assert result.predictions["prediction"]["0"] >= 0.9, result.predictions
    assert result.score_levels == pytest.approx(tuple(_brute_force(problem)), abs=1e-9)


def test_a_row_with_an_unbounded_part_drops_noise_rather_than_lift_it() -> None:
    """A closeness row: its two unbounded parts at 1 and rounding noise of 1e-20 from the
    factor. The noise is dropped, not lifted by 2^60 (HiGHS failed on such rows, or refused the
    program's rows altogether and solved an empty program, "optimal" at 0); no lift passes
    :data:`LIFT_CEILING`."""
    milp = Milp()
    plus, minus = milp.var("plus", 0.0, INF), milp.var("minus", 0.0, INF)
    leaf = milp.binary("leaf")
    terms, low, high = lifted({plus: -1.0, minus: 1.0, leaf: 1e-20}, 4.9e-5, 4.9e-5, sizes(milp))
    assert terms == {plus: -1.0, minus: 1.0} and low == high == 4.9e-5
    # a lift the row's largest term would carry past the ceiling stops at it
    terms, low, high = lifted({leaf: 1e-30, plus: 1.0}, 0.0, 1.0)
    assert max(abs(c) for c in terms.values()) <= LIFT_CEILING and high <= LIFT_CEILING


def test_the_papers_objective_with_a_one_bin_variable_is_solved() -> None:
    """Two one-bin variables (their WoE constant, their covariance 0): the closeness factor holds
    rounding noise, which was lifted past HiGHS's range (a "solve error", no answer) while SCIP
    proved the optimum; both prove brute force's now."""
    table = PointsTable(
        variables=(
            _variable("f0", [], [3e-07]),
            _variable("f1", [0.5, 10.0, 14.0, 20.0, 21.5], [5.859, -2.512, 19.458, -15.525, 21.436, -3.137]),
            _variable("f2", [], [49.428]),
        ),
        cutoff=68.88600029999999,
        classes=("bad", "good"),
    )
    rng = np.random.default_rng(73)
    data = pd.DataFrame({"f0": rng.integers(0, 18, 300), "f1": rng.integers(0, 24, 300), "f2": rng.integers(0, 9, 300)})
    problem = CounterfactualProblem.from_dataframe(
        data,
        {"f0": 1, "f1": 19, "f2": 3},
        ScorecardAdapter(table),
        [ClassGoal(target="good")],
        distance=DistanceSettings(metric="scorecard", alpha=0.5, beta=1.0),
    )
    best = _brute_force(problem)
    for backend in ("highs", "ortools"):
        result = explain(problem, SolverConfig(phases=(ExactPhaseConfig(backend=backend),)), seed=0)
        exact = result.statistics.exact
        assert exact is not None and result.valid and exact.proven, (backend, exact)
        assert result.score_levels[3] == pytest.approx(best[3], abs=1e-9), backend
