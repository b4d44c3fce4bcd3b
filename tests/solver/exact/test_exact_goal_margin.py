"""The exact engine's program keeps every goal ``goal_epsilon`` inside its threshold; its
infeasibility is a proof only when the program with the goals ``goal_epsilon`` outside (a
relaxation) has no answer either.

Fuzzing: a boosted regressor whose best output lay 3e-7 above a range goal's low end was proven
infeasible by HiGHS, SCIP and CP-SAT, while local search found that valid answer (and, with local
search's answer as the warm start, the report said ``infeasible``, proven, beside it). And a
range whose low end is itself one of the regressor's outputs (a quantile of its predictions): the
program, that end kept ``goal_epsilon`` inside, proved a farther answer optimal, four times the
distance of the one reaching the end exactly; a tree regressor's end is now kept as it is."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import GradientBoostingRegressor
from sklearn.linear_model import LogisticRegression
from sklearn.tree import DecisionTreeRegressor

from counterplan.planning import ClassGoal, CounterfactualProblem, RangeGoal
from counterplan.solver.core.config import SolverConfig
from counterplan.solver.counterfactual import explain
from counterplan.solver.engines import exact_config
from counterplan.solver.exact.config import ExactPhaseConfig

pytest.importorskip("highspy")
pytest.importorskip("ortools")

BELOW = 3e-7
"""How far below the model's best output the goal's low end lies: inside ``goal_epsilon`` (1e-6)."""


def _best_output_just_met() -> tuple[CounterfactualProblem, float]:
    """A depth-3 regression tree on one number in hundredths, a row at its lowest leaf, and the
    goal: at least the highest leaf's value less 3e-7. Returns the problem and that leaf's value."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"x": np.round(rng.uniform(0.0, 10.0, 300), 2)})
    y = np.sin(frame.x.to_numpy()) + rng.normal(0, 0.1, 300)
    model = DecisionTreeRegressor(max_depth=3, random_state=0).fit(frame, y)
    predictions = model.predict(frame)
    best = float(predictions.max())
    row = int(np.argmin(predictions))
    goal = RangeGoal(low=best - BELOW, high=float("inf"))
    problem = CounterfactualProblem.from_dataframe(frame.assign(y=y), row, model, [goal], target="y")
    return problem, best


@pytest.mark.parametrize("backend", ["highs", "ortools", "cpsat"])
@pytest.mark.parametrize("warm", [False, True])
def test_a_valid_answer_within_goal_epsilon_of_the_goal_is_not_proven_away(backend: str, warm: bool) -> None:
    """The program alone, and after local search: the answer reaches the highest leaf, valid and
    proven optimal (by the program with the goal loosened), never ``infeasible``."""
    problem, best = _best_output_just_met()
    phase = ExactPhaseConfig(backend=backend)
    if warm:
        config = exact_config(SolverConfig())
        config = config.model_copy(update={"phases": (*config.phases[:-1], phase)})
    else:
        config = SolverConfig(phases=(phase,))
    result = explain(problem, config, seed=0)
    exact = result.statistics.exact
    assert exact is not None
    assert result.valid and result.feasible, (result.score, exact)
    assert result.predictions["y"] == pytest.approx(best, abs=1e-12)
    assert exact.status == "optimal" and exact.proven, exact


@pytest.mark.parametrize(("low", "high"), [(50.0, 1e9), (-1e12, 50.0)])
def test_a_range_with_one_far_end_keeps_its_near_end_within_goal_epsilon(low: float, high: float) -> None:
    """Each end is kept inside by its own magnitude: one pad from the larger end (1e-6 of 1e9 is
    1000) emptied the range [50, 1e9] of a tree whose leaves are 0 and 100 (the ONNX fuzz: the
    exact engine said infeasible, local search's answer stood unproven)."""
    frame = pd.DataFrame({"x": np.round(np.linspace(0.0, 10.0, 101), 2)})
    y = np.where(frame.x > 5.0, 100.0, 0.0)
    model = DecisionTreeRegressor(max_depth=1).fit(frame, y)
    row = 0 if low > 0 else 100  # a row the goal does not hold for
    problem = CounterfactualProblem.from_dataframe(
        frame.assign(y=y), row, model, [RangeGoal(low=low, high=high)], target="y"
    )
    result = explain(problem, SolverConfig(phases=(ExactPhaseConfig(),)), seed=0)
    exact = result.statistics.exact
    assert exact is not None and result.valid, exact
    assert exact.status == "optimal" and exact.proven, exact
    assert result.proposed["x"] == (5.1 if low > 0 else 5.0)  # the nearest grid value past the split


def _end_reached_exactly() -> tuple[CounterfactualProblem, float]:
    """Boosted trees on a whole number ``i`` and a fixed ``j``; the goal's low end is the output
    at the nearest ``i`` that raises the row's output (so nearer values stay below it). Returns
    the problem and the true optimum: the smallest ``|i - i0| / MAD`` over every valid ``i``."""
    rng = np.random.default_rng(3)
    n = 240
    frame = pd.DataFrame({"i": rng.integers(0, 30, n), "j": rng.integers(-5, 6, n)})
    y = np.sin(frame.i.to_numpy() / 4.0) + 0.1 * frame.j.to_numpy() + rng.normal(0, 0.2, n)
    model = GradientBoostingRegressor(n_estimators=15, max_depth=3, random_state=3).fit(frame, y)
    row = int(np.argmin(model.predict(frame)))
    here = frame.iloc[[row]]
    grid = pd.DataFrame({"i": np.arange(30), "j": int(here.j.iloc[0])})
    outputs = model.predict(grid)
    start = float(model.predict(here)[0])
    i0 = int(here.i.iloc[0])
    nearest = min((i for i in range(30) if outputs[i] > start), key=lambda i: abs(i - i0))
    low = float(outputs[nearest])
    mad = float(np.median(np.abs(frame.i - np.median(frame.i))))
    optimum = min(abs(i - i0) / mad for i in range(30) if outputs[i] >= low)
    goal = RangeGoal(low=low, high=float("inf"))
    problem = CounterfactualProblem.from_dataframe(frame.assign(y=y), row, model, [goal], target="y", immutable=["j"])
    return problem, optimum


@pytest.mark.parametrize("backend", ["highs", "ortools", "cpsat"])
def test_a_range_end_the_regressor_reaches_exactly_is_not_proven_away(backend: str) -> None:
    """The program alone (no warm start to show it a nearer answer): its proven optimum is the
    true one, the end reached exactly."""
    problem, optimum = _end_reached_exactly()
    result = explain(problem, SolverConfig(phases=(ExactPhaseConfig(backend=backend),)), seed=0)
    exact = result.statistics.exact
    assert exact is not None and exact.status == "optimal" and exact.proven, exact
    assert result.valid and result.feasible, (result.score, exact)
    assert -result.score_levels[3] == pytest.approx(optimum, rel=1e-9), (result.proposed, exact)


@pytest.mark.parametrize("classes", [2, 3])
def test_a_goal_needing_probability_1_is_not_proven_either_way_without_calling_a_boosted_model_logistic(
    classes: int,
) -> None:
    """A confidence whose margin takes it to 1 of a model whose probability is a logistic function
    of its score (or a softmax of its scores): a logistic regression's, but also a gradient
    boosting's or a network's. The probability is 1 only where floating point rounds it up, so
    the program asks a score that surely does: its infeasibility proves nothing, and the report
    says why. The refusal it replaced called each of them "a logistic model" (the result fuzz:
    GB, MLP)."""
    from sklearn.ensemble import GradientBoostingClassifier

    from counterplan.planning import ClassGoal

    rng = np.random.default_rng(0)
    data = pd.DataFrame({"a": rng.uniform(0, 10, 300), "b": rng.uniform(0, 10, 300)})
    data["y"] = np.minimum(((data.a + data.b) / (20 / classes)).astype(int), classes - 1)
    model = GradientBoostingClassifier(n_estimators=10, max_depth=2, random_state=0).fit(data[["a", "b"]], data.y)
    row = int(np.flatnonzero(model.predict(data[["a", "b"]]) == 0)[0])
    goal = ClassGoal(target=1, confidence=0.999)
    problem = CounterfactualProblem.from_dataframe(data, row, model, [goal], target="y")
    result = explain(problem, engine="exact", seed=0)
    exact = result.statistics.exact
    assert not result.valid and exact is not None and exact.status == "infeasible" and not exact.proven, exact
    word = "logistic function of its score" if classes == 2 else "softmax of its scores"
    assert word in exact.reason and "rounds it up" in exact.reason and "logistic model" not in exact.reason


@pytest.mark.parametrize("classes", [2, 3])
def test_a_goal_needing_probability_one_is_met_where_it_rounds_up_and_not_called_out_of_reach(classes: int) -> None:
    """A separable logistic regression's probability is 1.0 in float64 from a score of about 37
    on: local search finds an answer with probability 1, so the exact engine may not say such a
    goal is out of reach (it said "below 1 everywhere", and ``auto`` repeated it): its program asks
    a score that surely rounds up, answers, and says why its answer is not proven."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.integers(0, 100, 400), "b": rng.integers(0, 5, 400)})
    frame["y"] = np.digitize(frame.a, [50, 75][: classes - 1])
    model = LogisticRegression(C=1e6, max_iter=5000).fit(frame[["a", "b"]], frame.y)
    row = int(np.flatnonzero(model.predict(frame[["a", "b"]]) == 0)[0])
    goal = ClassGoal(target=1, confidence=0.9, margin=0.1)  # needs 1.0
    problem = CounterfactualProblem.from_dataframe(frame, row, model, [goal], target="y")
    local = explain(problem, seed=0, engine="local")
    assert local.valid and local.predictions["y"]["1"] == 1.0  # reached: float64 rounds it up
    exact = explain(problem, seed=0, engine="exact")
    report = exact.statistics.exact
    assert exact.valid and exact.predictions["y"]["1"] == 1.0 and report is not None, report
    assert not report.proven and "rounds it up" in report.reason and "reach" not in report.reason, report
    auto = explain(problem, seed=0, engine="auto")
    assert auto.valid and "reach" not in auto.statistics.engine_reason
