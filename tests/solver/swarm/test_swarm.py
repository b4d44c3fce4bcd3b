"""The particle-swarm engine (MD-PSO): its update, box, decoding, ranking, clusters and phase."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import make_classification
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression

from counterplan.planning import (
    CallableAdapter,
    ClassGoal,
    CounterfactualProblem,
    FloatFeature,
    IntegerFeature,
    OutputSpec,
)
from counterplan.planning.relevance import bin_codes, information_value
from counterplan.planning.space import FeatureSpace
from counterplan.solver.core.config import ConfigError, SolverConfig, TerminationConfig, stable_termination
from counterplan.solver.counterfactual import CounterfactualSolver, explain
from counterplan.solver.engines import SWARM_FROM_FEATURES, choose
from counterplan.solver.local.config import BoundaryPolishPhaseConfig, LocalSearchPhaseConfig
from counterplan.solver.swarm.clusters import kmeans, pick_per_cluster
from counterplan.solver.swarm.config import SwarmPhaseConfig
from counterplan.solver.swarm.phase import paper_objective
from counterplan.solver.swarm.positions import SwarmPositions, searchable
from counterplan.solver.swarm.velocity import Coefficients, move


def test_velocity_update_matches_hand_computed_values() -> None:
    X = np.array([[0.2, 0.5], [0.6, 0.1]])
    V = np.array([[0.1, -0.1], [0.0, 0.05]])
    own = np.array([[0.3, 0.4], [0.6, 0.3]])
    best = np.array([0.3, 0.4])
    draws = np.array([[[0.5, 1.0], [0.2, 0.4]], [[0.25, 0.5], [1.0, 0.0]], [[1.0, 0.0], [0.5, 0.5]]])
    c = Coefficients(inertia=0.5, cognitive=1.0, social=2.0, diversity=0.4)
    low, high = np.zeros(2), np.ones(2)
    moved, velocity = move(
        X, V, own_best=own, swarm_best=best, draws=draws, coefficients=c, box=(low, high), max_velocity=1.0
    )
    mean = X.mean(axis=0)  # (0.4, 0.3): the swarm-mean diversity term pushes away from it
    # particle 0, dim 0: 0.5*0.1 + 1*0.5*(0.3-0.2) + 2*0.25*(0.3-0.2) + 0.4*1.0*(0.2-0.4)
    v00 = 0.05 + 0.05 + 0.05 - 0.08
    # particle 0, dim 1: 0.5*-0.1 + 1*1.0*(0.4-0.5) + 2*0.5*(0.4-0.5) + 0.4*0*(...)
    v01 = -0.05 - 0.1 - 0.1 + 0.0
    # particle 1, dim 0: 0 + 1*0.2*(0.6-0.6) + 2*1.0*(0.3-0.6) + 0.4*0.5*(0.6-0.4)
    v10 = 0.0 + 0.0 - 0.6 + 0.04
    # particle 1, dim 1: 0.5*0.05 + 1*0.4*(0.3-0.1) + 2*0*(...) + 0.4*0.5*(0.1-0.3)
    v11 = 0.025 + 0.08 + 0.0 - 0.04
    assert mean.tolist() == pytest.approx([0.4, 0.3])
    assert velocity == pytest.approx(np.array([[v00, v01], [v10, v11]]))
    assert moved == pytest.approx(X + np.array([[v00, v01], [v10, v11]]))


def test_the_diversity_term_can_push_away_from_the_swarm_best() -> None:
    X = np.array([[0.5]])
    zero = np.zeros((1, 1))
    ones = np.ones((3, 1, 1))
    c = Coefficients(0.0, 0.0, 0.0, 1.0)
    _, velocity = move(
        X,
        zero,
        own_best=X,
        swarm_best=np.array([0.2]),
        draws=ones,
        coefficients=c,
        box=(np.zeros(1), np.ones(1)),
        max_velocity=1.0,
        away_from="global_best",
    )
    assert velocity[0, 0] == pytest.approx(0.3)  # X - P_g


def test_the_box_clips_positions_clamps_and_absorbs_velocity() -> None:
    X = np.array([[0.9, 0.55, 0.15]])
    V = np.array([[0.5, -0.9, 0.0]])
    zero = np.zeros((3, 1, 3))
    c = Coefficients(1.0, 0.0, 0.0, 0.0)  # the velocity alone moves the particle
    low, high = np.array([0.0, 0.4, 0.1]), np.array([1.0, 0.6, 0.2])
    moved, velocity = move(
        X, V, own_best=X, swarm_best=X[0], draws=zero, coefficients=c, box=(low, high), max_velocity=0.5
    )
    # dim 0: v clamped to 0.5 * 1.0 = 0.5, 0.9 + 0.5 = 1.4 -> wall at 1.0, velocity 0
    # dim 1: v clamped to -0.5 * 0.2 = -0.1, 0.55 - 0.1 = 0.45: inside, velocity kept
    # dim 2: no velocity, stays 0.15
    assert moved[0].tolist() == pytest.approx([1.0, 0.45, 0.15])
    assert velocity[0].tolist() == pytest.approx([0.0, -0.1, 0.0])


def _space() -> FeatureSpace:
    from counterplan.planning import BooleanFeature, CategoricalFeature

    return FeatureSpace(
        [
            FloatFeature(name="a", value=4.0, low=0.0, high=10.0),
            FloatFeature(name="zero", value=0.0, low=0.0, high=10.0),
            IntegerFeature(name="n", value=5, low=0, high=10),
            CategoricalFeature(name="plan", value="silver", categories=("basic", "silver", "gold")),
            BooleanFeature(name="flag", value=False),
            FloatFeature(name="fixed", value=3.0, low=0.0, high=10.0, constrained=True),
        ]
    )


def test_the_box_is_relative_to_the_scaled_original_with_an_additive_fallback_at_zero() -> None:
    space = _space()
    positions = SwarmPositions.of(space, searchable(space), box_ratio=0.5, tolerance=0.01)
    assert 5 not in searchable(space).tolist()  # the immutable column is never searched
    # numbers first: a (z = 0.4), zero (z = 0), n (z = 0.5)
    assert positions.low[:3] == pytest.approx([0.2, 0.0, 0.25])  # z (1 - eps); 0 - eps clipped to 0
    assert positions.high[:3] == pytest.approx([0.6, 0.5, 0.75])  # z (1 + eps); z + eps at 0
    # one-hot: plan (basic, silver*, gold), then flag (False*, True)
    assert positions.low[3:] == pytest.approx([0.0, 0.5, 0.0, 0.5, 0.0])
    assert positions.high[3:] == pytest.approx([0.5, 1.0, 0.5, 1.0, 0.5])
    assert positions.start.tolist() == pytest.approx([0.4, 0.0, 0.5, 0.0, 1.0, 0.0, 1.0, 0.0])


def test_decoding_unscales_snaps_rounds_and_takes_the_argmax_category() -> None:
    space = _space()
    positions = SwarmPositions.of(space, searchable(space), box_ratio=1.0, tolerance=0.01)
    rows = positions.decode(
        np.array(
            [
                [0.405, 0.3, 0.57, 0.1, 0.2, 0.9, 0.3, 0.7],  # a within tolerance: kept 4.0
                [0.25, 0.0, 0.5, 0.9, 0.2, 0.1, 0.8, 0.1],
            ]
        )
    )
    assert rows[0].tolist() == pytest.approx([4.0, 3.0, 6.0, 2.0, 1.0, 3.0])  # n 5.7 -> 6; gold; True
    assert rows[1].tolist() == pytest.approx([2.5, 0.0, 5.0, 0.0, 0.0, 3.0])  # basic; False
    back = positions.encode(rows)
    assert positions.decode(back).tolist() == rows.tolist()


def test_information_value_matches_the_formula() -> None:
    codes = np.array([0, 0, 0, 1, 1, 1])
    positive = np.array([True, True, False, False, False, True])
    # bin 0: 2 positives, 1 negative; bin 1: 1 positive, 2 negatives; totals 3 and 3, 2 bins
    p = [(2 + 0.5) / (3 + 1.0), (1 + 0.5) / (3 + 1.0)]
    n = [(1 + 0.5) / (3 + 1.0), (2 + 0.5) / (3 + 1.0)]
    expected = sum((pi - ni) * math.log(pi / ni) for pi, ni in zip(p, n, strict=True))
    assert information_value(codes, positive) == pytest.approx(expected)
    separated = np.array([True, True, True, False, False, False])  # the bins tell the labels apart
    assert information_value(codes, separated) > expected


def test_numbers_fall_into_ten_quantile_bins_and_missing_values_into_their_own() -> None:
    column = pd.Series([*range(100), np.nan])
    codes = bin_codes(column)
    assert np.unique(codes[:100]).size == 10
    assert codes[100] == 10


def test_paper_objective_is_hinge_plus_gower_plus_count() -> None:
    space = _space()
    rows = np.array([[6.0, 0.0, 5.0, 2.0, 0.0, 3.0]])  # a +2 (of 10), plan changed
    scores = np.array([[-0.2, 0.0, -1.0, -1.0, -2.0]])
    # l1 = 0.2; l2 = (0.2 + 1) / 6 features; l3 = 2
    assert paper_objective(rows, scores, space)[0] == pytest.approx(0.2 + 1.2 / 6 + 2)


def test_kmeans_separates_clear_groups_and_picks_the_best_valid_per_cluster() -> None:
    rng = np.random.default_rng(0)
    points = np.vstack([rng.normal(0, 0.01, (5, 2)), rng.normal(5, 0.01, (5, 2)), rng.normal(-5, 0.01, (4, 2))])
    labels = kmeans(points, 3, np.random.default_rng(1))
    assert len({tuple(labels[:5]), tuple(labels[5:10]), tuple(labels[10:])}) == 3
    assert all(len(set(group)) == 1 for group in (labels[:5], labels[5:10], labels[10:]))
    scores = np.zeros((14, 5))
    scores[:, 3] = -np.arange(14, dtype=float)  # earlier rows are closer
    feasible = np.ones(14, dtype=bool)
    feasible[:2] = False  # the group's two best are invalid: its third is picked
    feasible[10:] = False  # the third group has no valid member
    picks, empty = pick_per_cluster(labels, scores, feasible)
    assert picks == [2, 5]
    assert empty == 1


def _wide(features: int = 40) -> tuple[pd.DataFrame, RandomForestClassifier]:
    X, y = make_classification(n_samples=400, n_features=features, n_informative=6, random_state=0)
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(features)])
    model = RandomForestClassifier(n_estimators=20, random_state=0).fit(frame, y)
    frame["label"] = y
    return frame, model


@pytest.fixture(scope="module")
def wide() -> tuple[pd.DataFrame, RandomForestClassifier]:
    return _wide()


def _wide_problem(
    wide: tuple[pd.DataFrame, RandomForestClassifier], immutable: tuple[str, ...] = ()
) -> CounterfactualProblem:
    frame, model = wide
    rejected = int(np.flatnonzero(model.predict(frame.drop(columns="label")) == 0)[0])
    return CounterfactualProblem.from_dataframe(
        frame, rejected, model, [ClassGoal(target=1, confidence=0.5)], target="label", immutable=immutable
    )


def test_the_swarm_finds_a_valid_answer_on_many_features_and_moves_no_immutable(wide) -> None:
    immutable = tuple(f"f{i}" for i in range(0, 40, 3))
    problem = _wide_problem(wide, immutable)
    result = explain(problem, seed=0, engine="swarm")
    assert result.valid
    assert result.statistics.engine == "swarm"
    swarm = result.statistics.swarm
    assert swarm is not None and swarm.ranking == "information_value" and swarm.searched == 20
    assert not set(swarm.searched_features) & set(immutable)
    assert not {c.feature for c in result.changes} & set(immutable)
    predicted = problem.model.predict(problem.space.encode(result.proposed).reshape(1, -1), problem.space)
    assert float(next(iter(predicted.values()))[0, 1]) >= 0.5  # checked through the real model


def test_the_same_seed_gives_the_same_answer_and_another_seed_may_not(wide) -> None:
    problem = _wide_problem(wide)
    config = SolverConfig(phases=(SwarmPhaseConfig(iterations=20, particles=20),))
    first = explain(problem, config, seed=3)
    again = explain(_wide_problem(wide), config, seed=3)
    assert first.proposed == again.proposed and first.score == again.score
    other = explain(problem, config, seed=4)
    assert other.proposed != first.proposed


class CountingModel:
    """A classifier that counts its calls and the rows of each."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def __call__(self, X: np.ndarray) -> np.ndarray:
        self.calls.append(X.shape[0])
        p = 1.0 / (1.0 + np.exp(-(X.sum(axis=1) - 12.0)))
        return np.column_stack([1.0 - p, p])


def test_every_iteration_scores_the_whole_swarm_in_one_model_call() -> None:
    counting = CountingModel()
    features = [FloatFeature(name=f"x{i}", value=1.0, low=0.0, high=3.0) for i in range(8)]
    problem = CounterfactualProblem(
        features, [ClassGoal(target=1)], CallableAdapter(counting, [OutputSpec("y", (0, 1))])
    )
    config = SolverConfig(phases=(SwarmPhaseConfig(particles=17, iterations=9, top_features="all"),))
    result = CounterfactualSolver(problem, config).solve()
    assert result.statistics.swarm is not None and result.statistics.swarm.iterations == 9
    swarm_calls = [n for n in counting.calls if n == 17]
    assert len(swarm_calls) == 9  # nine iterations, nine calls of 17 rows
    assert len(counting.calls) == 9 + 2  # plus the original and the final check


def test_sensitivity_ranks_by_the_model_at_this_row_in_one_call() -> None:
    counting = CountingModel()

    def model(X: np.ndarray) -> np.ndarray:
        counting.calls.append(X.shape[0])
        p = 1.0 / (1.0 + np.exp(-(5.0 * X[:, 2] + 3.0 * X[:, 5] - 12.0)))  # only x2 and x5 matter
        return np.column_stack([1.0 - p, p])

    features = [FloatFeature(name=f"x{i}", value=1.0, low=0.0, high=3.0) for i in range(8)]
    problem = CounterfactualProblem(features, [ClassGoal(target=1)], CallableAdapter(model, [OutputSpec("y", (0, 1))]))
    config = SolverConfig(phases=(SwarmPhaseConfig(particles=10, iterations=5, top_features=2, box_ratio=2.0),))
    result = explain(problem, config)
    swarm = result.statistics.swarm
    assert swarm is not None and swarm.ranking == "sensitivity"  # no data: information value is unknown
    assert swarm.searched_features == ["x2", "x5"]
    assert counting.calls[1] == 16  # one call: both ends of each of the 8 boxes


def test_the_paper_objective_guides_the_swarm_and_the_answer_is_still_scored_by_the_score(wide) -> None:
    problem = _wide_problem(wide)
    config = SolverConfig(phases=(SwarmPhaseConfig(objective="paper", top_features=10), BoundaryPolishPhaseConfig()))
    result = explain(problem, config, seed=0)
    assert result.valid
    assert result.statistics.swarm is not None and result.statistics.swarm.objective == "paper"


def test_the_swarm_hands_its_best_rows_to_local_search_as_starts(wide) -> None:
    from counterplan.planning.calculator import ScoreCalculator
    from counterplan.solver.core.phase import PhaseScope
    from counterplan.solver.core.scope import Progress, SolverScope
    from counterplan.solver.core.termination import Termination
    from counterplan.solver.local.factory import LocalSearchPhaseFactory
    from counterplan.solver.scoring import CalculatorScorer
    from counterplan.solver.swarm.phase import SwarmPhase

    problem = _wide_problem(wide)
    scorer = CalculatorScorer(ScoreCalculator(problem))
    start = problem.space.original.copy()
    score = scorer.score(start.reshape(1, -1))[0]
    scope = SolverScope(
        space=problem.space,
        scorer=scorer,
        rng=np.random.default_rng(0),
        best_row=start,
        best_score=score,
        progress=Progress.starting(score),
        problem=problem,
    )
    SwarmPhase(SwarmPhaseConfig(iterations=20)).solve(
        PhaseScope(scope, 0, Termination(TerminationConfig(step_count_limit=1000)))
    )
    starts = np.vstack(scope.starts)
    assert 1 < starts.shape[0] <= 16 and np.unique(starts, axis=0).shape[0] == starts.shape[0]
    assert np.array_equal(starts[0], scope.best_row)  # the swarm's best row first
    scores = scorer.score(starts.copy())
    assert all(tuple(row) <= tuple(scores[0]) for row in scores)  # best first
    _, currents, _ = LocalSearchPhaseFactory().build(LocalSearchPhaseConfig(walkers=4))._walkers(scope)
    assert np.array_equal(currents, starts[:4])  # the walkers start where the swarm ended best


def test_several_answers_come_from_the_clusters_and_say_when_fewer(wide) -> None:
    problem = _wide_problem(wide)
    result = explain(problem, seed=0, engine="swarm", num_counterfactuals=4)
    swarm = result.statistics.swarm
    assert swarm is not None and swarm.clusters == 4 and swarm.answers_from == "visited"
    assert len(result.counterfactuals) == 4  # every cluster of valid rows gives one
    assert all(c.valid for c in result.counterfactuals)
    assert result.counterfactuals[0].proposed == result.proposed
    assert len({tuple(sorted(c.proposed.items())) for c in result.counterfactuals}) == 4
    final = explain(
        problem, SolverConfig(phases=(SwarmPhaseConfig(answers_from="final_swarm"),)), num_counterfactuals=4
    )
    assert final.statistics.swarm is not None and final.statistics.swarm.answers_from == "final_swarm"
    assert all(c.valid for c in final.counterfactuals)
    no_valid = SolverConfig(
        phases=(SwarmPhaseConfig(iterations=1, particles=6, box_ratio=0.01, answers_from="final_swarm"),)
    )
    unreachable = explain(problem, no_valid, seed=0, num_counterfactuals=3)
    swarm = unreachable.statistics.swarm
    assert swarm is not None and swarm.clusters == 3 and swarm.empty_clusters == 3  # the paper's way: empty clusters
    assert not unreachable.valid


def test_the_note_says_why_fewer_answers_came_back() -> None:
    from counterplan.solver.result import CounterfactualResult, SolveStatistics
    from counterplan.solver.swarm.report import SwarmStatistics

    def result(swarm: SwarmStatistics) -> CounterfactualResult:
        statistics = SolveStatistics(
            steps=1,
            score_calculation_count=1,
            model_call_count=1,
            score_calculation_speed=1.0,
            time_spent_seconds=1.0,
            best_found_at_step=1,
            best_found_after_seconds=1.0,
            termination_reason="",
            engine="swarm",
            swarm=swarm,
        )
        answer = {"proposed": {}, "changes": [], "predictions": {}, "score": "", "score_levels": [0.0] * 5}
        return CounterfactualResult(
            original={},
            **answer,
            original_predictions={},
            valid=True,
            feasible=True,
            statistics=statistics,
            counterfactuals=[{**answer, "valid": True, "feasible": True}] * 2,
            requested=5,
        )

    base = {"particles": 5, "iterations": 5, "searched": 5, "searchable": 5, "ranking": "all"}
    empty = result(SwarmStatistics(**base, answers_from="final_swarm", clusters=5, empty_clusters=3))
    asked = "found 2 distinct valid counterfactuals of the 5 asked for"
    assert empty.note == f"{asked}: 3 of the swarm's 5 clusters held no valid particle"
    few = result(SwarmStatistics(**base, answers_from="visited", clusters=2))
    assert few.note == f"{asked}: the swarm found only 2 distinct valid rows"


def test_the_swarm_configuration_round_trips_through_yaml_and_refuses_bad_values() -> None:
    config = SolverConfig(phases=(SwarmPhaseConfig(top_features="all", diversity_from="global_best"),))
    assert SolverConfig.from_yaml(config.to_yaml()) == config
    loaded = SolverConfig.from_yaml("phases:\n  - type: swarm\n    particles: 30\n    top_features: 5\n")
    assert isinstance(loaded.phases[0], SwarmPhaseConfig) and loaded.phases[0].top_features == 5
    with pytest.raises(ConfigError, match="particles"):
        SolverConfig.from_yaml("phases:\n  - type: swarm\n    particles: 1\n")
    with pytest.raises(ConfigError, match="diversity_from"):
        SolverConfig.from_yaml("phases:\n  - type: swarm\n    diversity_from: nowhere\n")
    with pytest.raises(ConfigError, match="particles"):
        explain_config = SolverConfig(phases=(SwarmPhaseConfig(particles=4096),))
        from counterplan.solver.core.budget import check_budget

        check_budget(explain_config, 10_000, 10_000)


def test_auto_picks_by_model_kind_and_number_of_features(wide) -> None:
    small = _wide_problem(wide)  # 40 features, a random forest
    many_frame, many_model = _wide(SWARM_FROM_FEATURES)
    rejected = int(np.flatnonzero(many_model.predict(many_frame.drop(columns="label")) == 0)[0])
    many = CounterfactualProblem.from_dataframe(many_frame, rejected, many_model, [ClassGoal(target=1)], target="label")
    _, engine, reason = choose(many, SolverConfig(), "auto")
    assert engine == "swarm" and "mutable features" in reason
    linear = LogisticRegression(max_iter=500).fit(many_frame.drop(columns="label"), many_frame["label"])
    rejected = int(np.flatnonzero(linear.predict(many_frame.drop(columns="label")) == 0)[0])
    many_linear = CounterfactualProblem.from_dataframe(
        many_frame, rejected, linear, [ClassGoal(target=1)], target="label"
    )
    pytest.importorskip("highspy")
    _, engine, _ = choose(many_linear, SolverConfig(), "auto")
    assert engine == "exact"  # a linear model is solved exactly whatever its width
    _, engine, _ = choose(small, SolverConfig(), "swarm")
    assert engine == "swarm"


def test_the_solvers_step_limit_cuts_the_swarm_short() -> None:
    features = [FloatFeature(name=f"x{i}", value=1.0, low=0.0, high=3.0) for i in range(5)]

    def model(X: np.ndarray) -> np.ndarray:
        return np.column_stack([np.ones(len(X)), np.zeros(len(X))])  # never approves

    problem = CounterfactualProblem(features, [ClassGoal(target=1)], CallableAdapter(model, [OutputSpec("y", (0, 1))]))
    config = SolverConfig(
        phases=(SwarmPhaseConfig(iterations=100_000, top_features="all"),),
        termination=TerminationConfig(step_count_limit=7),
    )
    result = explain(problem, config)
    assert not result.valid
    assert result.statistics.swarm is not None and result.statistics.swarm.iterations == 7


def test_the_swarm_runs_in_bulk_and_each_row_gets_its_single_answer(wide) -> None:
    from counterplan.solver.batch.rows import row_seed
    from counterplan.solver.explainer import Explainer

    frame, model = wide
    config = SolverConfig(phases=(SwarmPhaseConfig(iterations=15, particles=12), BoundaryPolishPhaseConfig()))
    explainer = Explainer(model, frame, [ClassGoal(target=1, confidence=0.5)], target="label", config=config)
    rejected = frame.drop(columns="label")[model.predict(frame.drop(columns="label")) == 0].iloc[:5]
    singles = [explainer.explain(row, seed=row_seed(2, row_id)) for row_id, row in rejected.iterrows()]
    records = explainer.explain_batch(rejected, seed=2, window=5)
    assert records["score"].tolist() == [s.score for s in singles]
    assert records["valid"].tolist() == [s.valid for s in singles]
    assert explainer.profile.relevance  # the information values were computed once, for every row


def test_the_swarms_answers_survive_a_following_local_search(wide) -> None:
    problem = _wide_problem(wide)
    phases = (SwarmPhaseConfig(), LocalSearchPhaseConfig(termination=stable_termination()), BoundaryPolishPhaseConfig())
    result = explain(problem, SolverConfig(phases=phases), seed=0, num_counterfactuals=3)
    assert result.statistics.swarm is not None and result.statistics.swarm.clusters == 3
    assert len(result.counterfactuals) == 3 and all(c.valid for c in result.counterfactuals)
    assert result.counterfactuals[0].proposed == result.proposed  # the polished best leads

    from counterplan.planning.calculator import ScoreCalculator
    from counterplan.solver.core.solver import Solver
    from counterplan.solver.scoring import CalculatorScorer

    outcome = Solver(SolverConfig(phases=phases), collect_pool=True, answers=3).solve(
        problem.space, CalculatorScorer(ScoreCalculator(problem)), problem=problem
    )
    picks = outcome.answer_set
    assert picks is not None and picks.kind == "picks" and picks.rows.shape[0] == 3


def test_a_missing_categorical_or_computed_feature_is_never_searched() -> None:
    from sklearn.linear_model import LinearRegression

    from counterplan.planning import CategoricalFeature
    from counterplan.planning.relations import LearnedConstraint

    def model(X: np.ndarray) -> np.ndarray:
        p = 1.0 / (1.0 + np.exp(-(X[:, 0] + X[:, 1] - 8.0)))
        return np.column_stack([1.0 - p, p])

    rng = np.random.default_rng(0)
    inputs = rng.uniform(0, 10, (50, 1))
    relation = LinearRegression().fit(inputs, 2.0 * inputs[:, 0])
    features = [
        FloatFeature(name="a", value=1.0, low=0.0, high=10.0),
        FloatFeature(name="b", value=1.0, low=0.0, high=10.0),
        CategoricalFeature(name="plan", value=None, categories=("basic", "gold"), fill_missing=True),
        FloatFeature(name="twice", value=2.0, low=0.0, high=20.0),
    ]
    problem = CounterfactualProblem(
        features,
        [ClassGoal(target=1)],
        CallableAdapter(model, [OutputSpec("y", (0, 1))]),
        relations=[LearnedConstraint.of("twice", ["a"], relation)],
    )
    assert problem.space.mutable[2] and problem.space.missing[2]
    result = explain(problem, SolverConfig(phases=(SwarmPhaseConfig(top_features="all"),)), seed=0)
    swarm = result.statistics.swarm
    assert swarm is not None and swarm.searched_features == ["a", "b"]
    assert result.valid and result.proposed["plan"] is None  # the gap stays a gap


def test_information_values_need_both_outcomes_in_the_labels() -> None:
    frame, model = _wide(20)
    frame["label"] = 0  # nothing in the data has the goal's outcome
    rejected = int(np.flatnonzero(model.predict(frame.drop(columns="label")) == 0)[0])
    problem = CounterfactualProblem.from_dataframe(frame, rejected, model, [ClassGoal(target=1)], target="label")
    assert problem.relevance is not None and problem.relevance.values() == {}
    config = SolverConfig(phases=(SwarmPhaseConfig(top_features=5, iterations=5),))
    swarm = explain(problem, config).statistics.swarm
    assert swarm is not None and swarm.ranking == "sensitivity"


def test_other_goals_keep_the_information_values(wide) -> None:
    problem = _wide_problem(wide)
    other = problem.with_goals([ClassGoal(target=1, confidence=0.8)])
    assert other.relevance is not None and other.relevance.values() == problem.relevance.values()
    config = SolverConfig(phases=(SwarmPhaseConfig(iterations=5),))
    swarm = explain(other, config).statistics.swarm
    assert swarm is not None and swarm.ranking == "information_value"


def test_a_configuration_with_a_swarm_phase_is_named_swarm(wide) -> None:
    config = SolverConfig(phases=(SwarmPhaseConfig(iterations=5),))
    result = explain(_wide_problem(wide), config, engine="local")
    assert result.statistics.engine == "swarm" and "swarm phase" in result.statistics.engine_reason


def test_the_budget_counts_the_swarms_one_hot_coordinates() -> None:
    from counterplan.planning import CategoricalFeature
    from counterplan.solver.core.budget import check_budget, estimate_bytes, one_hot_width

    features = [
        CategoricalFeature(name="code", value="c0", categories=tuple(f"c{i}" for i in range(10_000))),
        FloatFeature(name="x", value=1.0, low=0.0, high=2.0),
    ]
    assert one_hot_width(features) == 10_001
    config = SolverConfig(phases=(SwarmPhaseConfig(particles=1024),))
    with pytest.raises(ConfigError, match="particles"):
        check_budget(config, 2, 2, one_hot_width(features))
    check_budget(config, 2, 2)  # two numbers: two coordinates
    small = SolverConfig(phases=(SwarmPhaseConfig(particles=50),))
    assert estimate_bytes(small, 2, 2, one_hot=10_001) > 50 * 8 * 10_000 * 8


def test_a_cap_on_changed_features_holds_for_every_particle_and_the_swarm_finds_feasible_answers() -> None:
    """With ``max_changed_features``, a particle's row keeps the changes its position commits to
    most and the rest go back to the original. Only the score penalised a row over the cap, so
    with a cap of one the swarm ended without a feasible answer on 2 of these 10 rows of a
    logistic regression and 4 of a forest, where local search found one for every row."""
    rng = np.random.default_rng(0)
    n, d = 400, 6
    data = pd.DataFrame(rng.normal(0, 1, (n, d)).round(3), columns=[f"f{j}" for j in range(d)])
    weights = np.array([1.0, 0.8, 0.6, 0.4, 0.3, 0.2])
    data["y"] = ((data.to_numpy() @ weights + rng.normal(0, 0.3, n)) > 0).astype(int)
    features = data.drop(columns="y")
    space_positions = None
    for model in (LogisticRegression(), RandomForestClassifier(30, max_depth=4, random_state=0)):
        model.fit(features, data["y"])
        rows = features[model.predict(features) == 0].iloc[:10]
        for seed, (_, row) in enumerate(rows.iterrows()):
            problem = CounterfactualProblem.from_dataframe(
                data, row, model, [ClassGoal(target=1, confidence=0.6)], target="y", max_changed_features=1
            )
            result = explain(problem, engine="swarm", seed=seed)
            assert result.valid and result.feasible, (type(model).__name__, seed, result.counterfactuals)
            assert len(result.counterfactuals[0].changes) <= 1
            if space_positions is None:
                columns = searchable(problem.space)
                space_positions = SwarmPositions.of(problem.space, columns, 0.5, 0.0, most_changes=2)
    assert space_positions is not None
    positions = space_positions.uniform(500, np.random.default_rng(1))
    decoded = space_positions.decode(positions)
    changed = decoded != space_positions.space.original
    assert changed.sum(axis=1).max() == 2  # a cap of two: rows of two changes, none of more
    uncapped = SwarmPositions.of(space_positions.space, space_positions.columns, 0.5, 0.0).decode(positions)
    kept = changed  # what a capped row keeps is what the uncapped row had there
    np.testing.assert_array_equal(decoded[kept], uncapped[kept])
