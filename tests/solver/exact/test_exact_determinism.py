"""The exact engine gives the same answers every run, OR-Tools' SCIP included.

pywraplp hands SCIP each row's terms in the order of a hash map keyed by the variables'
addresses, which changes from one solve to the next; SCIP's presolve read them in that order, so
the same set of answers came back different from run to run (fuzzing: a five-stump forest with
features near 1e-6, whose set of answers CP-SAT does not state and SCIP solved). SCIP now runs
without its presolve, and a tree ensemble's set goes to HiGHS when highspy loads. A row with a
term at or below the solvers' zero (a grid of 1e-12, or of nine decimals: 1e-9 itself) is handed
over multiplied up, so that the term is not dropped."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any
from unittest.mock import patch

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LinearRegression

from counterplan.planning import ClassGoal, CounterfactualProblem, FloatFeature, RangeGoal
from counterplan.planning.models import adapt_sklearn
from counterplan.solver.core.config import SolverConfig
from counterplan.solver.counterfactual import explain
from counterplan.solver.engines import exact_config
from counterplan.solver.exact import answer_set
from counterplan.solver.exact.answer_set import solve_set
from counterplan.solver.exact.backend import Backend, solve
from counterplan.solver.exact.config import ExactPhaseConfig
from counterplan.solver.exact.milp import INF, LIFTED_SMALLEST, ZERO_TOLERANCE, Milp, lifted

pytest.importorskip("ortools")

RUNS = 10


def _stumps_problem() -> CounterfactualProblem:
    """Five stumps over two numbers in hundredths and two numbers near 1e-6 (a grid of 1e-12):
    the tree program goes to CP-SAT, the set of three answers to SCIP. Before the fix ten runs
    gave nine different sets."""
    rng = np.random.default_rng(18)
    n = 200
    frame = pd.DataFrame(
        {
            "a": -np.abs(np.round(rng.normal(5, 3, n), 2)) - 1.0,
            "b": rng.normal(0, 1e-6, n),
            "c": -np.abs(np.round(rng.normal(5, 3, n), 2)) - 1.0,
            "d": rng.normal(0, 1e-6, n),
        }
    )
    score = sum(rng.normal() * (frame[c] - frame[c].mean()) / frame[c].std() for c in frame) + rng.normal(0, 0.5, n)
    label = (score > np.median(score)).astype(int)
    model = RandomForestClassifier(n_estimators=5, max_depth=1, random_state=18).fit(frame, label)
    row = int(np.flatnonzero(model.predict(frame) == 0)[0])
    return CounterfactualProblem.from_dataframe(
        frame.assign(label=label), row, model, [ClassGoal(target=1, confidence=0.65)], target="label"
    )


def _answers(problem: CounterfactualProblem, backend: Backend = "auto") -> list[dict[str, float]]:
    """The exact engine's set of three answers as its program gives them, every program on
    ``backend`` (``auto``: the tree program on CP-SAT, the set on HiGHS). The program's set is
    read as it comes back (the real ``solve_set``, its result kept): on these stumps its three
    answers are the optimum plus a change each does not need, which the answers phase drops, so
    the result holds the optimum alone (checked too)."""
    config = exact_config(SolverConfig())
    phases = (*config.phases[:-1], ExactPhaseConfig(backend=backend))
    programs: list[np.ndarray] = []

    def kept(*args: Any, **kwargs: Any) -> Any:
        out = solve_set(*args, **kwargs)
        assert out[0] is not None, "the program has a set"
        programs.append(out[0])
        return out

    with patch.object(answer_set, "solve_set", kept):
        result = explain(problem, config.model_copy(update={"phases": phases}), seed=0, num_counterfactuals=3)
    exact = result.statistics.exact
    assert exact is not None and exact.answer_set == "optimal", exact
    assert backend != "ortools" or str(exact.backend).startswith("SCIP"), exact.backend
    assert [answer.proposed for answer in result.counterfactuals] == [result.proposed]
    names = problem.space.names
    return [{name: float(value) for name, value in zip(names, row, strict=True)} for row in programs[-1]]


IN_A_FRESH_PROCESS = """
import json
from tests.solver.exact.test_exact_determinism import _answers, _stumps_problem
print(json.dumps(_answers(_stumps_problem())))
"""


def test_the_exact_engines_set_of_answers_is_the_same_every_run_and_in_a_fresh_process() -> None:
    """The default engine: the tree program on CP-SAT, the set on HiGHS (before the fix on SCIP:
    ten runs gave nine sets)."""
    problem = _stumps_problem()
    first = _answers(problem)
    assert len(first) == 3
    for run in range(1, RUNS):
        assert _answers(problem) == first, f"run {run} gave another set"
    root = Path(__file__).resolve().parents[3]
    done = subprocess.run(
        [sys.executable, "-c", IN_A_FRESH_PROCESS], capture_output=True, text=True, cwd=root, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == first


def test_the_set_of_answers_on_scip_is_the_same_every_run() -> None:
    """Every program on OR-Tools' SCIP (``backend="ortools"``, as a scorecard's, or a tree
    ensemble's when highspy is not installed): before the fix ten runs gave several sets."""
    problem = _stumps_problem()
    first = _answers(problem, "ortools")
    assert len(first) == 3
    for run in range(1, RUNS):
        assert _answers(problem, "ortools") == first, f"run {run} gave another set"


def _tiny_grid_program() -> tuple[Milp, float]:
    """A number near 1e-6 on a grid of 1e-12 (``k`` steps) that must cross a split at step
    -1,505,364, its distance from the original ``d >= |1e-12 k - o|``; returns the program and its
    optimum (the distance at the split, times the objective's 1e6)."""
    o = -1.1256737771719637e-06
    milp = Milp()
    k = milp.var("k", -2740109, 3224177, integer=True)
    d = milp.var("d", 0.0, 5e-6)
    milp.row({k: 1e-12, d: -1.0}, -INF, o)
    milp.row({k: 1e-12, d: 1.0}, o, INF)
    milp.row({k: 1.0}, -INF, -1505364)
    milp.minimise({d: 1e6})
    return milp, 1e6 * (o - (-1505364 * 1e-12))


@pytest.mark.parametrize("backend", ["ortools", "highs"])
def test_a_term_below_the_solvers_zero_still_counts(backend: Backend) -> None:
    """SCIP and HiGHS took the 1e-12 for zero: the distance no longer followed the number, and the
    program's optimum was called 1.126 (the distance of staying put) where the split is 0.380
    away; SCIP put the number at the end of its domain."""
    if backend == "highs":
        pytest.importorskip("highspy")
    milp, optimum = _tiny_grid_program()
    result, _ = solve(milp, backend, time_limit=30.0, relative_gap=0.0)
    assert result.status == "optimal" and result.x is not None
    assert result.x[0] == -1505364, "the number crosses the split and goes no further"
    assert result.objective == pytest.approx(optimum, rel=1e-6)


def test_a_row_is_lifted_by_a_power_of_two_only_when_a_term_is_below_the_solvers_zero() -> None:
    terms = {0: 1e-12, 1: -1.0, 2: 3.5}
    lifted_terms, low, up = lifted(terms, -INF, 2.0)
    factor = lifted_terms[1] / -1.0
    assert np.log2(factor) == round(np.log2(factor)), "a power of two: every coefficient exact"
    assert LIFTED_SMALLEST <= lifted_terms[0] < 2 * LIFTED_SMALLEST
    assert lifted_terms == {i: c * factor for i, c in terms.items()}
    assert (low, up) == (-INF, 2.0 * factor)
    at_zero, _, _ = lifted({0: ZERO_TOLERANCE, 1: -1.0}, 0.0, 1.0)  # the solvers drop it too (<=)
    assert LIFTED_SMALLEST <= at_zero[0] < 2 * LIFTED_SMALLEST
    normal = {0: 2 * ZERO_TOLERANCE, 1: -1.0}
    assert lifted(normal, 0.0, 1.0) == (normal, 0.0, 1.0)
    assert lifted({}, 1.0, INF) == ({}, 1.0, INF)


@pytest.mark.parametrize("backend", ["ortools", "highs"])
def test_a_term_at_the_solvers_zero_still_counts(backend: Backend) -> None:
    """A grid of nine decimals enters a distance row at exactly 1e-9 per step: HiGHS and SCIP
    dropped it as they drop what is below their zero, the distance no longer followed the number,
    and the program's optimum was called 0.7465 (the distance of the number's whole way to 0)
    where the goal's bound, 31 steps off, is 0.7434."""
    if backend == "highs":
        pytest.importorskip("highspy")
    o = 7.465e-6
    milp = Milp()
    k = milp.var("k", 0, 10000, integer=True)
    d = milp.var("d", 0.0, o)
    milp.row({k: 1e-9, d: -1.0}, -INF, o)
    milp.row({k: 1e-9, d: 1.0}, o, INF)
    milp.row({k: 1.0}, -INF, 31)
    milp.minimise({d: 1e5})
    result, _ = solve(milp, backend, time_limit=30.0, relative_gap=0.0)
    assert result.status == "optimal" and result.x is not None
    assert result.x[k] == 31, "the number stops at the goal's bound"
    assert result.objective == pytest.approx(1e5 * (o - 31e-9), rel=1e-9)


def test_a_linear_models_optimum_on_a_grid_of_nine_decimals_is_the_same_from_every_warm_start() -> None:
    """A number near 1e-5 with nine decimals beside one in tenths, a linear regression: every
    seed (local search's warm start) proved a different distance optimal, from 0.8143 (the
    optimum, by enumerating the grid) to 0.8150, before the term at the solvers' zero was lifted."""
    pytest.importorskip("highspy")
    rng = np.random.default_rng(0)
    X = np.column_stack([np.round(rng.uniform(0, 1e-5, 200), 9), np.round(rng.uniform(0, 10, 200), 1)])
    model = LinearRegression().fit(X, 5e5 * X[:, 0] + 0.4 * X[:, 1] + rng.normal(0, 0.1, 200))
    original = [7.465e-6, 3.4]
    high = float(model.predict(np.array([original]))[0]) - 4.0
    features = [
        FloatFeature(name="tiny", value=original[0], low=0.0, high=1e-5, precision=9),
        FloatFeature(name="one", value=original[1], low=0.0, high=10.0, precision=1),
    ]
    problem = CounterfactualProblem(features, [RangeGoal(low=-INF, high=high)], adapt_sklearn(model, "y"))
    tiny, one = (grid.ravel() for grid in np.meshgrid(np.arange(10001) / 1e9, np.arange(101) / 10))
    reached = model.predict(np.column_stack([tiny, one])) <= high
    optimum = float((np.abs(tiny - original[0]) / 1e-5 + np.abs(one - original[1]) / 10)[reached].min())
    for seed in range(8):
        result = explain(problem, engine="exact", seed=seed)
        exact = result.statistics.exact
        assert exact is not None and exact.proven and result.valid, (seed, exact)
        assert -result.score_levels[3] == pytest.approx(optimum, rel=1e-6), seed
