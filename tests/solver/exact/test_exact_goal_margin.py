"""The exact engine's program keeps every goal ``goal_epsilon`` inside its threshold; its
infeasibility is a proof only when the program with the goals ``goal_epsilon`` outside (a
relaxation) has no answer either.

Fuzzing: a boosted regressor whose best output lay 3e-7 above a range goal's low end was proven
infeasible by HiGHS, SCIP and CP-SAT, while local search found that valid answer (and, with local
search's answer as the warm start, the report said ``infeasible``, proven, beside it)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.tree import DecisionTreeRegressor

from counterplan.planning import CounterfactualProblem, RangeGoal
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
