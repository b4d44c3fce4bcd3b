"""End-to-end solves on problems with known answers, with every acceptor."""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.pipeline import Pipeline

from counterplan.planning import CallableAdapter, ClassGoal, CounterfactualProblem, OutputSpec
from counterplan.planning.demo import IMMUTABLE, TARGET, rejected_applicant
from counterplan.planning.errors import ProblemError
from counterplan.planning.space import FloatMatrix
from counterplan.solver import (
    BestSolutionEvent,
    CounterfactualSolver,
    GreatDelugeAcceptorConfig,
    HillClimbingAcceptorConfig,
    LateAcceptanceAcceptorConfig,
    LocalSearchPhaseConfig,
    ModelFailureError,
    SimulatedAnnealingAcceptorConfig,
    SolverConfig,
    StepCountingHillClimbingAcceptorConfig,
    TabuSearchAcceptorConfig,
    TerminationConfig,
    explain,
)
from counterplan.solver.local.config import AcceptorConfig, BoundaryPolishPhaseConfig, FeatureScanPhaseConfig

ACCEPTORS: list[AcceptorConfig] = [
    HillClimbingAcceptorConfig(),
    TabuSearchAcceptorConfig(),
    LateAcceptanceAcceptorConfig(),
    SimulatedAnnealingAcceptorConfig(),
    GreatDelugeAcceptorConfig(),
    StepCountingHillClimbingAcceptorConfig(),
]


def _config(acceptor: AcceptorConfig, steps: int = 150) -> SolverConfig:
    return SolverConfig(
        phases=(LocalSearchPhaseConfig(acceptor=acceptor),),
        termination=TerminationConfig(step_count_limit=steps),
    )


@pytest.mark.parametrize("acceptor", ACCEPTORS, ids=lambda a: a.type)
def test_every_acceptor_finds_the_cheapest_change(
    linear_problem: CounterfactualProblem, acceptor: AcceptorConfig
) -> None:
    result = explain(linear_problem, _config(acceptor), seed=3)
    assert result.valid and result.feasible
    assert [c.feature for c in result.changes] == ["x"]
    # the boundary is x = 2; the optimum is just past it (distance 0.15 of the range)
    assert 2.0 < result.proposed["x"] < 2.1
    assert result.score_levels[3] == pytest.approx(-0.15, abs=0.01)
    assert result.proposed["frozen_flag"] is True and result.proposed["age"] == 40
    assert result.predictions["approved"]["1"] > 0.5 > result.original_predictions["approved"]["1"]


def test_same_seed_same_answer_and_different_seeds_search_differently(linear_problem: CounterfactualProblem) -> None:
    config = _config(TabuSearchAcceptorConfig(), steps=20)
    first = explain(linear_problem, config, seed=7)
    again = explain(linear_problem, config, seed=7)
    other = explain(linear_problem, config, seed=8)
    assert first.proposed == again.proposed and first.score == again.score
    assert first.statistics.score_calculation_count == again.statistics.score_calculation_count
    assert other.proposed != first.proposed


def test_listeners_hear_every_new_best_in_improving_order(linear_problem: CounterfactualProblem) -> None:
    events: list[BestSolutionEvent] = []
    result = explain(linear_problem, _config(TabuSearchAcceptorConfig(), steps=60), seed=1, listeners=[events.append])
    assert events[0].step_index == 0 and events[0].values == result.original
    levels = [tuple(e.score_levels) for e in events]
    assert all(a < b for a, b in itertools.pairwise(levels))
    assert events[-1].score == result.score and events[-1].values == result.proposed
    assert [e.step_index for e in events] == sorted(e.step_index for e in events)
    assert events[-1].step_index == result.statistics.best_found_at_step


def test_the_default_termination_stops_once_stable(linear_problem: CounterfactualProblem) -> None:
    result = explain(linear_problem, seed=0)
    assert result.valid
    assert "unimproved step count" in result.statistics.termination_reason
    assert result.statistics.steps < 400


def test_terminate_early_returns_the_best_so_far(linear_problem: CounterfactualProblem) -> None:
    config = SolverConfig(phases=(LocalSearchPhaseConfig(),), termination=TerminationConfig(spent_limit_seconds=60.0))
    solver = CounterfactualSolver(linear_problem, config)
    started = threading.Event()
    solver.add_listener(lambda event: started.set())
    box: dict[str, object] = {}
    thread = threading.Thread(target=lambda: box.update(result=solver.solve()))
    thread.start()
    assert started.wait(30)
    time.sleep(0.2)
    solver.terminate_early()
    thread.join(30)
    assert not thread.is_alive()
    result = box["result"]
    assert result.statistics.termination_reason == "terminated early"  # type: ignore[attr-defined]
    assert result.statistics.time_spent_seconds < 60  # type: ignore[attr-defined]


def test_phases_run_in_sequence_and_later_ones_start_from_the_best(linear_problem: CounterfactualProblem) -> None:
    config = SolverConfig(
        phases=(
            LocalSearchPhaseConfig(
                acceptor=HillClimbingAcceptorConfig(), termination=TerminationConfig(best_score_feasible=True)
            ),
            LocalSearchPhaseConfig(
                acceptor=TabuSearchAcceptorConfig(), termination=TerminationConfig(step_count_limit=80)
            ),
        ),
        termination=TerminationConfig(step_count_limit=400),
    )
    result = explain(linear_problem, config, seed=2)
    assert result.valid
    assert result.statistics.termination_reason.startswith("phase 1")
    assert result.score_levels[3] == pytest.approx(-0.15, abs=0.01)


def test_model_failures(linear_problem: CounterfactualProblem) -> None:
    def broken(X: FloatMatrix) -> FloatMatrix:
        raise RuntimeError("model server down")

    problem = CounterfactualProblem(
        linear_problem.space.features, [ClassGoal(target=1)], CallableAdapter(broken, [OutputSpec("approved", (0, 1))])
    )
    with pytest.raises(ModelFailureError, match="model server down"):
        explain(problem)

    def fails_above_two(X: FloatMatrix) -> FloatMatrix:
        if (X[:, 0] > 2.0).any():
            raise ValueError("x out of the model's range")
        margin = 2.0 * X[:, 0] + X[:, 1] - X[:, 3] - 4.0
        p = np.where(X[:, 1] > 5, np.nan, 1.0 / (1.0 + np.exp(-3.0 * margin)))
        return np.column_stack([1.0 - p, p])

    fragile = CounterfactualProblem(
        linear_problem.space.features,
        [ClassGoal(target=1)],
        CallableAdapter(fails_above_two, [OutputSpec("approved", (0, 1))]),
    )
    result = explain(fragile, _config(TabuSearchAcceptorConfig(), steps=60), seed=0)
    assert result.valid and result.failure is None
    assert result.proposed["x"] <= 2.0 and result.proposed["n"] <= 5


def test_demo_pipeline_gets_a_valid_counterfactual_that_respects_immutables(
    loan_problem: CounterfactualProblem, loan_model: Pipeline
) -> None:
    result = explain(loan_problem, seed=0)
    assert result.valid and result.feasible
    frame = pd.DataFrame([result.proposed])[list(loan_model.feature_names_in_)]
    assert loan_model.predict_proba(frame)[0, 1] >= 0.7  # checked with the model itself
    assert all(result.proposed[name] == result.original[name] for name in IMMUTABLE)
    table = result.to_dataframe()
    assert list(table.columns) == ["feature", "original", "proposed", "changed"]
    assert table["changed"].sum() == len(result.changes) >= 1
    stats = result.statistics
    assert stats.model_call_count <= stats.steps + 3  # one batched call per step
    assert stats.score_calculation_count > 10 * stats.model_call_count


def test_the_feature_scan_finds_single_feature_counterfactuals_in_one_call(
    linear_problem: CounterfactualProblem,
) -> None:
    config = SolverConfig(
        phases=(FeatureScanPhaseConfig(grid_size=21, greedy_steps=0),), termination=TerminationConfig()
    )
    result = explain(linear_problem, config)
    # the grid over x in [0, 10] has a point every 0.5: the first one past 2 is 2.5
    assert result.valid and [c.feature for c in result.changes] == ["x"]
    assert result.proposed["x"] == 2.5
    assert result.statistics.steps == 1
    mutable = [f for f in linear_problem.space.features if f.mutable]
    expected_rows = 20 + 10 + 2 + 20  # x and debt: 21 grid values less the current; n: 0..10 less 1; plan: 2 others
    assert len(mutable) == 4
    assert result.statistics.score_calculation_count == expected_rows + 1  # plus the original


def test_walkers_start_from_the_scan_and_polish_past_its_grid(linear_problem: CounterfactualProblem) -> None:
    config = SolverConfig(
        phases=(
            FeatureScanPhaseConfig(grid_size=5),
            LocalSearchPhaseConfig(termination=TerminationConfig(step_count_limit=60)),
        ),
    )
    result = explain(linear_problem, config, seed=0)
    assert result.valid
    assert 2.0 < result.proposed["x"] < 2.1  # the scan's 2.5 shaved down to the boundary


def test_boundary_polish_shaves_a_counterfactual_to_the_boundary(linear_problem: CounterfactualProblem) -> None:
    only_scan = SolverConfig(
        phases=(FeatureScanPhaseConfig(grid_size=5, greedy_steps=0),), termination=TerminationConfig()
    )
    coarse = explain(linear_problem, only_scan)
    assert coarse.valid and coarse.proposed["x"] == 2.5  # grid 0, 2.5, 5, ...
    polished = explain(
        linear_problem,
        SolverConfig(
            phases=(
                FeatureScanPhaseConfig(grid_size=5, greedy_steps=0),
                # the bisection alone: trades and combinations add calls (tests/solver/local/test_trades.py)
                BoundaryPolishPhaseConfig(grid_size=16, max_iterations=6, starts=1, trade_rounds=0, combos=False),
            ),
            termination=TerminationConfig(),
        ),
    )
    assert polished.valid
    assert 2.0 < polished.proposed["x"] < 2.001  # 2 / 16**k of the gap left after k iterations
    assert polished.statistics.steps <= 1 + 6


def test_boundary_polish_with_several_starts_polishes_other_routes_below_the_best() -> None:
    """Scanned on a coarse grid, a alone looks best; polished, b alone (a cheaper feature) wins."""
    from counterplan.planning import FloatFeature

    def two_routes(X: FloatMatrix) -> FloatMatrix:
        p = ((X[:, 0] >= 3.2) | (X[:, 1] >= 3.4)).astype(float)
        return np.column_stack([1.0 - p, p])

    problem = CounterfactualProblem(
        [
            FloatFeature(name="a", value=0.0, low=0.0, high=10.0),
            FloatFeature(name="b", value=0.0, low=0.0, high=10.0, cost=0.9),
        ],
        [ClassGoal(target=1)],
        CallableAdapter(two_routes, [OutputSpec("ok", (0, 1))]),
    )

    def solve(starts: int) -> tuple[dict[str, object], int]:
        phases = (
            FeatureScanPhaseConfig(grid_size=4, greedy_steps=0),  # a = 3.33 costs 0.33; b = 6.67 costs 0.6
            # the bisection alone: a trade (a given back, b bought) finds b with one start too
            BoundaryPolishPhaseConfig(grid_size=16, max_iterations=6, starts=starts, trade_rounds=0, combos=False),
        )
        result = explain(problem, SolverConfig(phases=phases, termination=TerminationConfig()))
        assert result.valid
        return result.proposed, result.statistics.steps

    single, _ = solve(1)
    several, steps = solve(4)
    assert 3.2 <= single["a"] <= 3.34 and single["b"] == 0.0  # at most 0.334
    assert several["b"] == pytest.approx(3.4, abs=0.01) and several["a"] == 0.0  # 0.306
    assert steps <= 1 + 6  # the routes share the polish calls


def test_the_greedy_chain_combines_features_no_single_one_can_flip() -> None:
    from counterplan.planning import FloatFeature

    def joint(X: FloatMatrix) -> FloatMatrix:
        p = 1.0 / (1.0 + np.exp(-5.0 * (X[:, 0] + X[:, 1] - 1.2)))
        return np.column_stack([1.0 - p, p])

    features = [FloatFeature(name=name, value=0.0, low=0.0, high=1.0) for name in ("x", "y")]
    problem = CounterfactualProblem(features, [ClassGoal(target=1)], CallableAdapter(joint, [OutputSpec("ok", (0, 1))]))

    def scan(greedy: int) -> SolverConfig:
        return SolverConfig(
            phases=(FeatureScanPhaseConfig(grid_size=5, greedy_steps=greedy),), termination=TerminationConfig()
        )

    assert not explain(problem, scan(0)).valid  # x or y alone reaches at most 1.0 < 1.2
    chained = explain(problem, scan(6))
    assert chained.valid and len(chained.changes) == 2
    assert chained.proposed["x"] + chained.proposed["y"] > 1.2


def test_several_diverse_counterfactuals(linear_problem: CounterfactualProblem) -> None:
    result = explain(linear_problem, seed=0, num_counterfactuals=3)
    assert len(result.counterfactuals) == 3 and result.note is None
    first = result.counterfactuals[0]
    assert first.proposed == result.proposed and first.score == result.score  # the best comes first
    assert all(c.valid and c.feasible for c in result.counterfactuals)
    rows = [tuple(sorted(c.proposed.items())) for c in result.counterfactuals]
    assert len(set(rows)) == 3  # distinct
    assert all(c.proposed["frozen_flag"] is True and c.proposed["age"] == 40 for c in result.counterfactuals)
    feature_sets = {frozenset(ch.feature for ch in c.changes) for c in result.counterfactuals}
    assert len(feature_sets) >= 2  # they differ in which features they change, not only in values


def test_fewer_counterfactuals_than_asked_are_said_and_never_padded() -> None:
    """Two ways exist: n up to 8, or m down to 1. n = 9 or m = 0 are worse copies, not other ways."""
    from counterplan.planning import IntegerFeature

    def two_ways(X: FloatMatrix) -> FloatMatrix:
        p = ((X[:, 0] >= 8) | (X[:, 1] <= 1)).astype(float)
        return np.column_stack([1.0 - p, p])

    problem = CounterfactualProblem(
        [IntegerFeature(name="n", value=2, low=0, high=9), IntegerFeature(name="m", value=5, low=0, high=9)],
        [ClassGoal(target=1)],
        CallableAdapter(two_ways, [OutputSpec("ok", (0, 1))]),
    )
    result = explain(problem, seed=0, num_counterfactuals=5)
    answers = sorted((c.proposed["n"], c.proposed["m"]) for c in result.counterfactuals)
    assert answers == [(2, 1), (8, 5)]  # no padding, no worse copies
    assert result.note is not None and "2" in result.note and "5" in result.note
    with pytest.raises(ValueError, match="num_counterfactuals"):
        explain(problem, num_counterfactuals=0)


def test_a_valid_answer_that_breaks_a_rule_says_so() -> None:
    """A logistic regression approves when x + y is above about 14: from (1, 1) one feature alone
    reaches 11 at most, so with one change allowed every valid answer breaks that rule. The note
    said "found 0 distinct valid counterfactuals of the 3 asked for" beside ``valid: true``, and
    nothing at all for a single answer."""
    from sklearn.linear_model import LogisticRegression

    from counterplan.planning import FloatFeature
    from counterplan.planning.models import adapt_sklearn

    X = np.random.default_rng(0).uniform(0.0, 10.0, size=(400, 2))
    model = LogisticRegression().fit(X, (X.sum(axis=1) > 14).astype(int))
    features = [FloatFeature(name=name, value=1.0, low=0.0, high=10.0) for name in ("x", "y")]
    problem = CounterfactualProblem(features, [ClassGoal(target=1)], adapt_sklearn(model, "ok"), max_changed_features=1)
    broken = (
        "the answer reaches the goal but breaks an actionability rule (hard level 1: an immutable feature, a "
        "monotone direction, allowed or forbidden values, precision, the most features allowed to change, a "
        "relation, the trust region or plausibility); no answer keeping every rule was found"
    )
    single = explain(problem, seed=0)
    assert single.valid and not single.feasible and single.score_levels[1] == -1.0 and len(single.changes) == 2
    assert single.note == broken
    several = explain(problem, seed=0, num_counterfactuals=3)
    assert several.valid and not several.feasible and several.counterfactuals == []
    assert several.note == f"{broken}, and none of the 3 answers asked for came back"


def _three_changes_past_a_cap_of_one() -> CounterfactualProblem:
    """From (1, 1, 1) only all three features together pass x + y + z > 25 (a logistic
    regression), so with one change allowed every valid answer breaks the cap by two."""
    from sklearn.linear_model import LogisticRegression

    from counterplan.planning import FloatFeature
    from counterplan.planning.models import adapt_sklearn

    X = np.random.default_rng(0).uniform(0.0, 10.0, size=(600, 3))
    model = LogisticRegression().fit(X, (X.sum(axis=1) > 25).astype(int))
    features = [FloatFeature(name=name, value=1.0, low=0.0, high=10.0) for name in ("x", "y", "z")]
    return CounterfactualProblem(features, [ClassGoal(target=1)], adapt_sklearn(model, "ok"), max_changed_features=1)


def test_a_cap_passed_by_several_changes_is_not_called_several_rules() -> None:
    """Hard level 1 counts each change past ``max_changed_features``: the answer's level is -2
    while it breaks one rule. The note said "breaks 2 actionability rules" (the result fuzz's
    finding); it gives the level and how it counts instead."""
    result = explain(_three_changes_past_a_cap_of_one(), seed=0)
    assert result.valid and not result.feasible and len(result.changes) == 3 and result.score_levels[1] == -2.0
    assert result.note is not None and "2 actionability rules" not in result.note
    assert result.note.startswith(
        "the answer reaches the goal but breaks actionability rules (hard level 1 is -2, one for each rule "
        "broken and each change past the most allowed: an immutable feature, a monotone direction, "
    )
    assert result.note.endswith("; no answer keeping every rule was found")


def test_a_best_so_far_that_breaks_a_rule_is_not_listed_among_the_answers() -> None:
    """``counterfactuals`` holds only answers that keep every rule: a solve's own result lists none
    here, but the best so far a server answers with by its deadline or shutdown
    (:meth:`CounterfactualSolver.so_far`) listed its rule-breaking answer, and its note said "1 of
    the 3 answers asked for came back" (the result fuzz's finding)."""
    solver = CounterfactualSolver(_three_changes_past_a_cap_of_one(), seed=0, num_counterfactuals=3)
    result = solver.solve()
    assert result.valid and not result.feasible and result.counterfactuals == []
    stopped = solver.so_far("terminated early")
    assert stopped is not None and stopped.valid and not stopped.feasible and stopped.counterfactuals == []
    assert stopped.note is not None and stopped.note.endswith("and none of the 3 answers asked for came back")


def _spread_or_single(penalty: float) -> CounterfactualProblem:
    """Valid when sqrt(a) + sqrt(b) >= 1: a = b = 0.25 costs 0.05 (range-scaled), a = 1 alone 0.1."""
    from counterplan.planning import DistanceSettings, FloatFeature

    def concave(X: FloatMatrix) -> FloatMatrix:
        p = np.clip((np.sqrt(X[:, 0]) + np.sqrt(X[:, 1])) / 2.0, 0.0, 1.0)
        return np.column_stack([1.0 - p, p])

    return CounterfactualProblem(
        [FloatFeature(name="a", value=0.0, low=0.0, high=10.0), FloatFeature(name="b", value=0.0, low=0.0, high=10.0)],
        [ClassGoal(target=1, margin=0.0)],
        CallableAdapter(concave, [OutputSpec("ok", (0, 1))]),
        DistanceSettings(change_penalty=penalty),
    )


def test_a_change_penalty_trades_distance_for_fewer_changes() -> None:
    plain = explain(_spread_or_single(0.0), seed=0)
    assert plain.valid and {c.feature for c in plain.changes} == {"a", "b"}
    assert plain.proposed["a"] == pytest.approx(0.25, abs=0.05) and plain.proposed["b"] == pytest.approx(0.25, abs=0.05)
    sparse = explain(_spread_or_single(0.1), seed=0)  # 0.05 + 2 * 0.1 > 0.1 + 0.1
    assert sparse.valid and len(sparse.changes) == 1
    assert max(sparse.proposed.values()) == pytest.approx(1.0, abs=0.02)


def test_several_answers_carry_no_needless_change(loan_problem: CounterfactualProblem) -> None:
    """DiCE's redundancy is 0: reverting any one change of any answer loses validity."""
    from counterplan.planning import ScoreCalculator

    result = explain(loan_problem, seed=0, num_counterfactuals=4)
    assert len(result.counterfactuals) == 4 and result.counterfactuals[0].score == result.score
    space = loan_problem.space
    calculator = ScoreCalculator(loan_problem)
    for answer in result.counterfactuals:
        row = space.encode(answer.proposed)
        changed = np.flatnonzero(row != space.original)
        reverted = np.repeat(row.reshape(1, -1), changed.size, axis=0)
        reverted[np.arange(changed.size), changed] = space.original[changed]
        evaluation = calculator.calculate(reverted)
        assert not evaluation.feasible.any(), f"{answer.changes}: a change can be reverted"


def test_refining_rows_never_makes_them_worse(linear_problem: CounterfactualProblem) -> None:
    from counterplan.planning import ScoreCalculator
    from counterplan.planning.score import not_worse
    from counterplan.solver.core.boundary import refine_rows
    from counterplan.solver.scoring import CalculatorScorer

    space = linear_problem.space
    result = explain(linear_problem, seed=3, num_counterfactuals=1)
    row = space.encode(result.proposed)
    padded = row.copy()
    spare = int(np.flatnonzero((row == space.original) & space.mutable & ~space.nominal)[0])
    padded[spare] = space.upper[spare]  # a needless change on top of a valid answer
    rows = np.vstack([padded, row])
    calculator = ScoreCalculator(linear_problem)
    scores = calculator.calculate(rows).scores
    calls = calculator.model_call_count
    refined, refined_scores = refine_rows(rows, scores, space, CalculatorScorer(calculator), max_rounds=4)
    assert calculator.model_call_count - calls <= 4  # one call per round, for all rows together
    np.testing.assert_array_equal(refined_scores, calculator.calculate(refined).scores)
    assert all(not_worse(refined_scores[i : i + 1], scores[i])[0] for i in range(2))
    assert refined[0, spare] == space.original[spare]  # the needless change is gone


def test_alternative_routes_leave_the_avoided_features_alone(linear_problem: CounterfactualProblem) -> None:
    from counterplan.planning import ScoreCalculator
    from counterplan.solver.answers.routes import alternative_routes
    from counterplan.solver.scoring import CalculatorScorer

    space = linear_problem.space
    calculator = ScoreCalculator(linear_problem)
    start = calculator.calculate(linear_problem.original_row()).scores[0]
    x = space.names.index("x")
    avoid = [np.arange(space.n_features) == x, np.isin(np.arange(space.n_features), [x, space.names.index("n")])]
    calls = calculator.model_call_count
    rows, scores, chains = alternative_routes(space, CalculatorScorer(calculator), start, avoid, max_steps=4)
    assert calculator.model_call_count - calls <= 4  # every chain steps in the same call
    assert rows.shape[0] > 0 and (scores[:, :3] == 0.0).all()  # only feasible rows come back
    np.testing.assert_array_equal(scores, calculator.calculate(rows).scores)
    assert (rows[:, ~space.mutable] == space.original[~space.mutable]).all()
    # both chains avoid x (the cheapest route) and reach the goal through n, the plan or the debt
    assert (rows[:, x] == space.original[x]).all()
    assert set(chains.tolist()) == {0, 1}  # each row says which chain found it...
    n = space.names.index("n")
    assert (rows[chains == 1, n] == space.original[n]).all()  # ...and the second chain left n alone


def test_choosing_several_answers_stays_within_the_time_limit() -> None:
    """After the solve's time limit, only the two final scoring calls may start (no routes, no refinement)."""
    from counterplan.planning import FloatFeature

    starts: list[float] = []

    def slow(X: FloatMatrix) -> FloatMatrix:
        starts.append(time.perf_counter())
        time.sleep(0.02)
        p = 1.0 / (1.0 + np.exp(-(X.sum(axis=1) - 3.0)))
        return np.column_stack([1.0 - p, p])

    problem = CounterfactualProblem(
        [FloatFeature(name=f"f{i}", value=0.0, low=0.0, high=1.0) for i in range(20)],
        [ClassGoal(target=1)],
        CallableAdapter(slow, [OutputSpec("ok", (0, 1))]),
    )
    limit = 0.3
    config = SolverConfig(termination=TerminationConfig(spent_limit_seconds=limit))
    begun = time.perf_counter()
    result = explain(problem, config, seed=0, num_counterfactuals=5)
    late = [t for t in starts if t - begun > limit]
    assert result.valid
    assert len(late) <= 3, f"{len(late)} model calls started after the time limit"


def _held_back(age_matters: bool) -> CounterfactualProblem:
    """Approval needs age >= 30, which is immutable; x helps only a little."""
    from counterplan.planning import FloatFeature, IntegerFeature

    def model(X: FloatMatrix) -> FloatMatrix:
        margin = (X[:, 1] - 30.0) * (1.0 if age_matters else 0.0) + 0.1 * X[:, 0] - 0.5
        p = 1.0 / (1.0 + np.exp(-4.0 * margin))
        return np.column_stack([1.0 - p, p])

    features = [
        FloatFeature(name="x", value=0.0, low=0.0, high=1.0),
        IntegerFeature(name="age", value=20, low=18, high=90, constrained=True),
    ]
    return CounterfactualProblem(features, [ClassGoal(target=1)], CallableAdapter(model, [OutputSpec("ok", (0, 1))]))


def test_an_unreachable_goal_names_the_immutable_feature_that_blocks_it() -> None:
    result = explain(_held_back(age_matters=True), seed=0)
    assert not result.valid
    assert result.blocked_by == ["age"] and result.reaches
    assert result.note is not None and "age" in result.note and "alone would reach" in result.note
    assert result.held_fixed == ["age"] and "with age held fixed; changing age alone" in result.note
    nothing = explain(_held_back(age_matters=False), seed=0)  # no immutable can help either
    assert not nothing.valid and nothing.blocked_by == []
    assert nothing.note is not None and "no valid counterfactual" in nothing.note
    assert nothing.held_fixed == ["age"] and "with age held fixed" in nothing.note and "neither" in nothing.note


def test_an_instance_that_already_meets_the_goal_is_answered_without_a_search(
    linear_problem: CounterfactualProblem,
) -> None:
    met = linear_problem.with_goals([ClassGoal(target=0, margin=0.0)])  # rejected is already class 0
    result = explain(met, seed=0)
    assert result.valid and result.already_met and result.changes == []
    assert result.statistics.steps == 0 and result.statistics.model_call_count == 1
    assert result.note is not None and "already meets the goal" in result.note


def test_several_answers_come_best_first(loan_problem: CounterfactualProblem) -> None:
    result = explain(loan_problem, seed=0, num_counterfactuals=4)
    levels = [tuple(c.score_levels) for c in result.counterfactuals]
    assert len(levels) >= 2
    assert levels == sorted(levels, reverse=True)
    assert result.counterfactuals[0].proposed == result.proposed


@pytest.mark.parametrize("engine", ["local", "swarm", "auto"])
def test_an_allowed_value_finer_than_its_features_decimals_is_reached(engine: str) -> None:
    """Only 1.22 of the allowed 1.21, 1.22, 1.23 (a 1-decimal feature) meets the goal on ``a``:
    the swarm's positions were put onto the grid (1.2) before the allowed values (1.21), so it
    never held 1.22 and answered with b's costlier change (0.70 against 0.24)."""
    from counterplan.planning import FloatFeature
    from counterplan.solver.vector.layouts import Layouts

    def band(X: FloatMatrix) -> FloatMatrix:
        p = (((X[:, 0] > 1.215) & (X[:, 0] < 1.225)) | (X[:, 1] > 2.5)).astype(float)
        return np.column_stack([1.0 - p, p])

    allowed = (0.5, 1.21, 1.22, 1.23, 2.5)
    problem = CounterfactualProblem(
        [
            FloatFeature(name="a", value=0.5, low=0.0, high=3.0, precision=1, allowed=allowed),
            FloatFeature(name="b", value=0.5, low=0.0, high=3.0, precision=1),
        ],
        [ClassGoal(target=1)],
        CallableAdapter(band, [OutputSpec("ok", (0, 1))]),
    )
    result = explain(problem, seed=0, engine=engine)  # type: ignore[arg-type]
    assert result.valid and result.proposed == {"a": 1.22, "b": 0.5}
    values, columns = np.array([1.22, 1.26, 1.26]), np.array([0, 0, 1])
    vector = Layouts([problem]).to_grid(values, np.zeros(3, dtype=np.intp), columns)  # the batch engine's rounding
    assert vector.tolist() == problem.space.to_grid(values, columns).tolist() == [1.22, 1.26, 1.3]


@pytest.mark.parametrize("age_immutable", [False, True])
def test_model_call_count_is_the_searchs_calls(age_immutable: bool) -> None:
    """``statistics.model_call_count`` counts every call the model receives but two after the
    search (what ``SolveStatistics`` and the Python guide say): the answer's own check through the
    real model, and, without a valid answer, the diagnosis's scan of the immutable features."""
    from counterplan.planning import FloatFeature, IntegerFeature

    calls: list[int] = []

    def age_decides(X: FloatMatrix) -> FloatMatrix:  # p(yes) needs age past 30; x barely helps
        calls.append(X.shape[0])
        p = 1.0 / (1.0 + np.exp(-4.0 * ((X[:, 1] - 30.0) + 0.1 * X[:, 0] - 0.5)))
        return np.column_stack([1.0 - p, p])

    problem = CounterfactualProblem(
        [
            FloatFeature(name="x", value=0.0, low=0.0, high=1.0),
            IntegerFeature(name="age", value=20, low=18, high=90, constrained=age_immutable),
        ],
        [ClassGoal(target=1)],
        CallableAdapter(age_decides, [OutputSpec("ok", (0, 1))]),
    )
    result = explain(problem, seed=0)
    assert result.valid is not age_immutable and result.blocked_by == (["age"] if age_immutable else [])
    assert result.statistics.model_call_count == len(calls) - (2 if age_immutable else 1)


@pytest.mark.parametrize("engine", ["local", "swarm"])
def test_a_model_whose_outputs_are_1e21_from_the_goal_is_searched_as_the_same_model_unscaled(engine: str) -> None:
    """Goal distances were capped at 1e14: on a regression whose outputs are 1e21 apart every
    candidate short of the goal scored the same, local search settled for a costlier answer
    (4.75 where the same model with outputs of ones gets 4.69) and the swarm found none. Scored
    logarithmically past 1e11, huge distances keep their order and the answers agree."""
    from sklearn.linear_model import LinearRegression

    from counterplan.planning import RangeGoal

    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "a": rng.uniform(0, 10, 200).round(2),
            "b": rng.integers(0, 20, 200).astype(float),
            "c": rng.uniform(-5, 5, 200).round(2),
        }
    )
    answers = []
    for scale in (1.0, 1e21):
        model = LinearRegression().fit(frame, scale * (3.0 * frame.a - 2.0 * frame.b + frame.c))
        output = float(model.predict(frame.iloc[[0]])[0])
        goal = RangeGoal(low=output + 45.0 * scale, high=output + 1000.0 * scale)
        result = explain(CounterfactualProblem.from_dataframe(frame, 0, model, [goal]), seed=0, engine=engine)  # type: ignore[arg-type]
        assert result.valid, (scale, result.score_levels)
        answers.append(result.score_levels[3])
    assert answers[1] == pytest.approx(answers[0], rel=1e-9)


class _SquaredPipeline(Pipeline):
    """A pipeline with a rule over its estimator's answer: the approval's probability squared."""

    def predict_proba(self, X: Any, **params: Any) -> Any:
        q = super().predict_proba(X, **params)[:, 1] ** 2
        return np.column_stack([1.0 - q, q])


def test_a_pipeline_writing_its_own_predict_proba_is_searched_as_it_answers(
    loan_data: pd.DataFrame, loan_model: Pipeline
) -> None:
    """The fast path and the exact engine read a pipeline's steps: a subclass answering otherwise
    (its own predict_proba) was searched as its steps (the final check then refused the answer:
    none valid, the exact engine's 'optimal'), where the same answers from a plain wrapper got a
    valid one; such a pipeline is now called as it is, and the exact engine refuses it by name."""
    model = _SquaredPipeline(loan_model.steps)
    problem = CounterfactualProblem.from_dataframe(
        loan_data,
        rejected_applicant(),
        model,
        [ClassGoal(target=1, confidence=0.7)],
        target=TARGET,
        immutable=IMMUTABLE,
    )
    result = explain(problem, seed=0)
    assert result.valid
    proposed = pd.DataFrame([result.proposed])[list(loan_model.feature_names_in_)]
    assert model.predict_proba(proposed)[0, 1] >= 0.7
    with pytest.raises(ProblemError, match="_SquaredPipeline is a pipeline that writes its own prediction method"):
        explain(problem, seed=0, engine="exact")
