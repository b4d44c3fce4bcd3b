"""The trust region in the engines: the exact engine states the hull exactly (its proven optimum
equals brute force under the region, and lies inside it); local search keeps to it through hard
level 1; the nearest rows, the slack and the enlargement change the answer as they should."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import GradientBoostingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler
from structlog.testing import capture_logs

from counterplan.planning import ClassGoal, CounterfactualProblem, ScoreCalculator, TrustRegionSettings
from counterplan.solver.core.config import SolverConfig
from counterplan.solver.counterfactual import explain
from counterplan.solver.exact.config import ExactPhaseConfig
from counterplan.solver.result import CounterfactualResult

pytest.importorskip("highspy")

PLANS = ("basic", "silver", "gold")
INSTANCE = {"income": 2.0, "tenure": 3, "debt": 3.0, "plan": "basic"}
GOAL = ClassGoal(target=1, confidence=0.7)


@pytest.fixture(scope="module")
def data() -> pd.DataFrame:
    """Approval rises with income and tenure, falls with debt; gold plans help."""
    rng = np.random.default_rng(0)
    n = 600
    frame = pd.DataFrame(
        {
            "income": np.round(rng.uniform(0.0, 10.0, n), 1),
            "tenure": rng.integers(0, 15, n),
            "debt": np.round(rng.uniform(0.0, 5.0, n), 1),
            "plan": rng.choice(PLANS, n),
        }
    )
    score = frame.income + 0.4 * frame.tenure - frame.debt + 1.5 * (frame.plan == "gold") + rng.normal(0, 0.5, n)
    frame["ok"] = (score > 6.0).astype(int)
    return frame


def _pipeline(estimator: Any) -> Pipeline:
    encode = ColumnTransformer(
        [
            ("plan", OneHotEncoder(handle_unknown="ignore"), ["plan"]),
            ("numbers", StandardScaler(), ["income", "tenure", "debt"]),
        ]
    )
    return Pipeline([("encode", encode), ("model", estimator)])


@pytest.fixture(scope="module")
def boosting(data: pd.DataFrame) -> Pipeline:
    model = GradientBoostingClassifier(n_estimators=25, max_depth=3, random_state=0)
    return _pipeline(model).fit(data.drop(columns="ok"), data.ok)


def _problem(
    data: pd.DataFrame, model: Pipeline, settings: TrustRegionSettings | None, **kwargs: Any
) -> CounterfactualProblem:
    return CounterfactualProblem.from_dataframe(
        data, INSTANCE, model, [GOAL], target="ok", trust_region=settings, **kwargs
    )


def _inside(problem: CounterfactualProblem, result: CounterfactualResult) -> bool:
    assert problem.trust_region is not None
    return bool(problem.trust_region.inside(problem.space.encode(result.proposed).reshape(1, -1))[0])


def _approved_by_the_model(problem: CounterfactualProblem, result: CounterfactualResult) -> bool:
    adapter: Any = problem.model
    frame = problem.space.to_frame(problem.space.encode(result.proposed).reshape(1, -1))
    return bool(adapter.model.predict_proba(frame)[0, 1] >= 0.705)


def _proven(result: CounterfactualResult) -> bool:
    """The program's proven optimum is the answer itself (not one the search refined after it)."""
    exact = result.statistics.exact
    return (
        exact is not None
        and exact.status == "optimal"
        and exact.proven
        and exact.objective == pytest.approx(-result.score_levels[3], rel=1e-6, abs=1e-9)
    )


def test_the_exact_answer_in_the_hull_is_proven_inside_valid_and_no_closer(
    data: pd.DataFrame, boosting: Pipeline
) -> None:
    free = explain(_problem(data, boosting, None), engine="exact", seed=0)
    problem = _problem(data, boosting, TrustRegionSettings())
    region = problem.trust_region
    assert region is not None and not region.enlarged and region.reference_rows > 100
    result = explain(problem, engine="exact", seed=0)
    assert result.valid and result.feasible and _proven(result)
    assert _inside(problem, result) and _approved_by_the_model(problem, result)
    assert result.score_levels[3] <= free.score_levels[3]
    assert not _inside(problem, free), "the region must bind in this case, or the test shows nothing"
    exact = result.statistics.exact
    assert exact is not None and exact.variables >= region.reference_rows  # one weight per reference row


def test_the_exact_optimum_under_the_hull_equals_brute_force(data: pd.DataFrame, boosting: Pipeline) -> None:
    """Every candidate on the grid (tenure and plan held), scored by the calculator, whose hard
    level 1 judges each candidate by exact hull membership."""
    problem = _problem(data, boosting, TrustRegionSettings(), immutable=["tenure", "plan"])
    result = explain(problem, engine="exact", seed=0)
    assert _proven(result) and _inside(problem, result)
    space = problem.space
    income, debt = space.index["income"], space.index["debt"]
    grid = np.array(list(itertools.product(np.arange(0, 101) / 10, np.arange(0, 51) / 10)))
    X = np.repeat(problem.original_row(), grid.shape[0], axis=0)
    X[:, income], X[:, debt] = grid[:, 0], grid[:, 1]
    scores = ScoreCalculator(problem).calculate(X).scores
    feasible = scores[(scores[:, :3] >= 0.0).all(axis=1)]
    best = feasible[np.lexsort(feasible.T[::-1])[-1]]
    assert result.score_levels[3] == pytest.approx(best[3], rel=1e-6, abs=1e-9)
    unbounded = explain(_problem(data, boosting, None, immutable=["tenure", "plan"]), engine="exact", seed=0)
    assert unbounded.score_levels[3] > best[3]  # the hull binds here too


def test_local_search_keeps_to_the_hull(data: pd.DataFrame, boosting: Pipeline) -> None:
    problem = _problem(data, boosting, TrustRegionSettings())
    result = explain(problem, engine="local", seed=0)
    assert result.valid and result.feasible and _inside(problem, result)
    free = explain(_problem(data, boosting, None), engine="local", seed=0)
    assert not _inside(problem, free)


def test_the_nearest_rows_make_a_smaller_hull(data: pd.DataFrame, boosting: Pipeline) -> None:
    # the programs' sizes compared whole: not narrowed to each one's warm start
    whole = SolverConfig(phases=(*SolverConfig().phases, ExactPhaseConfig(narrow_to_warm_start=False)))
    free = explain(_problem(data, boosting, None), whole, engine="exact", seed=0).statistics.exact
    full = explain(_problem(data, boosting, TrustRegionSettings()), engine="exact", seed=0)
    problem = _problem(data, boosting, TrustRegionSettings(nearest=30))
    region = problem.trust_region
    assert region is not None and region.reference_rows == 30
    result = explain(problem, whole, engine="exact", seed=0)
    assert result.valid and _proven(result) and _inside(problem, result)
    assert result.score_levels[3] <= full.score_levels[3]  # a subset's hull: never closer
    exact = result.statistics.exact
    assert exact is not None and free is not None and exact.variables == free.variables + 30  # a weight per row


def test_a_slack_admits_answers_within_its_distance_of_the_hull(data: pd.DataFrame, boosting: Pipeline) -> None:
    free = explain(_problem(data, boosting, None), engine="exact", seed=0)
    plain_problem = _problem(data, boosting, TrustRegionSettings())
    plain = explain(plain_problem, engine="exact", seed=0)
    problem = _problem(data, boosting, TrustRegionSettings(slack=0.3))
    region = problem.trust_region
    assert region is not None and region.slack == 0.3
    result = explain(problem, engine="exact", seed=0)
    assert result.valid and _proven(result) and _inside(problem, result)
    needed = float(region.slack_needed(problem.space.encode(result.proposed).reshape(1, -1))[0])
    assert 0.0 < needed <= 0.3 + region.tolerance  # outside the plain hull, within the slack
    assert not _inside(plain_problem, result)
    assert plain.score_levels[3] < result.score_levels[3] <= free.score_levels[3]


def _old_applicants() -> pd.DataFrame:
    rng = np.random.default_rng(1)
    n = 500
    frame = pd.DataFrame(
        {"age": rng.integers(18, 80, n), "income": rng.uniform(0.0, 10.0, n), "debt": rng.uniform(0.0, 5.0, n)}
    )
    frame["ok"] = ((frame.income - frame.debt + rng.normal(0.0, 0.5, n) > 3.0) & (frame.age <= 60)).astype(int)
    return frame


def test_an_unreachable_hull_is_enlarged_and_the_engine_says_so() -> None:
    """age is immutable at 70 and no approved row is over 60: the plain hull holds no reachable
    candidate (proven infeasible); enlarged, the exact engine answers and says it was enlarged."""
    data = _old_applicants()
    model = Pipeline([("scale", StandardScaler()), ("model", LogisticRegression(max_iter=1000))])
    model.fit(data[["age", "income", "debt"]], data.ok)
    instance = {"age": 70, "income": 4.0, "debt": 3.0}

    def problem(settings: TrustRegionSettings) -> CounterfactualProblem:
        goal = ClassGoal(target=1, confidence=0.6)
        return CounterfactualProblem.from_dataframe(
            data, instance, model, [goal], target="ok", immutable=["age"], trust_region=settings
        )

    strict = explain(problem(TrustRegionSettings(enlarge_when_infeasible=False)), engine="exact", seed=0)
    assert not strict.feasible
    assert strict.statistics.exact is not None and strict.statistics.exact.status == "infeasible"
    enlarged = problem(TrustRegionSettings())
    region = enlarged.trust_region
    assert region is not None and region.enlarged and region.slack > 0.0
    with capture_logs() as logs:
        result = explain(enlarged, engine="exact", seed=0)
    assert result.valid and result.feasible and _proven(result) and _inside(enlarged, result)
    assert result.proposed["age"] == 70
    notes = [entry["note"] for entry in logs if entry["event"] == "trust region enlarged"]
    assert notes and "enlarged" in notes[0] and notes[0] == region.note
