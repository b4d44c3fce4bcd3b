"""Hand-computed scores for every level and goal kind, failures, and the batched contract."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.pipeline import Pipeline

from counterplan.planning import (
    FAILED_PREDICTION,
    BooleanFeature,
    CallableAdapter,
    CategoricalFeature,
    ClassGoal,
    CounterfactualProblem,
    DistanceSettings,
    FeatureStatistics,
    FloatFeature,
    IntegerFeature,
    OutputSpec,
    RangeGoal,
    ScoreCalculator,
    ValueGoal,
    reference_score,
)
from counterplan.planning.demo import TARGET
from counterplan.planning.features import parse_feature
from counterplan.planning.space import AnyFeature, FloatMatrix


def _features() -> list[AnyFeature]:
    return [
        FloatFeature(name="x", value=2.0, low=0.0, high=10.0),
        IntegerFeature(name="n", value=1, low=0, high=5),
        CategoricalFeature(name="color", value="red", categories=("red", "green", "blue")),
        BooleanFeature(name="flag", value=False),
        FloatFeature(name="fixed", value=1.0, low=0.0, high=4.0, constrained=True),
    ]


class LinearModel:
    """y = x + 2 n + 3 [color is blue] + flag + fixed; counts its calls."""

    def __init__(self) -> None:
        self.calls = 0
        self.rows_seen: list[int] = []

    def __call__(self, X: FloatMatrix) -> FloatMatrix:
        self.calls += 1
        self.rows_seen.append(X.shape[0])
        return X[:, 0] + 2 * X[:, 1] + 3 * (X[:, 2] == 2) + X[:, 3] + X[:, 4]


def _problem(
    goal: ValueGoal | RangeGoal, metric: str = "range_l1", stats: dict[str, FeatureStatistics] | None = None
) -> tuple[CounterfactualProblem, LinearModel]:
    model = LinearModel()
    adapter = CallableAdapter(model, [OutputSpec("y")])
    problem = CounterfactualProblem(
        _features(),
        [goal],
        adapter,
        DistanceSettings(metric=metric),
        stats,  # type: ignore[arg-type]
    )
    return problem, model


CANDIDATES = np.array(
    [
        [2.0, 1.0, 0.0, 0.0, 1.0],  # original: y = 5
        [4.0, 3.0, 2.0, 1.0, 1.0],  # A: y = 15, four features changed
        [5.0, 1.0, 0.0, 0.0, 2.0],  # B: y = 9, the constrained feature changed
        [6.6, 1.0, 0.0, 0.0, 1.0],  # C: y = 9.6, within 5% of 10
    ]
)


def test_every_level_by_hand_with_range_scaled_l1() -> None:
    problem, _ = _problem(ValueGoal(output="y", value=10.0, tolerance=0.05))
    evaluation = ScoreCalculator(problem, assert_mode=True).calculate(CANDIDATES)
    expected = [
        [-5.0, 0.0, 0.0, 0.0, 0.0],
        [-5.0, 0.0, 0.0, -(2 / 10 + 2 / 5 + 1 + 1), -4.0],
        [-1.0, -1.0, 0.0, -(3 / 10 + 1 / 4), -2.0],
        [0.0, 0.0, 0.0, -(4.6 / 10), -1.0],
    ]
    np.testing.assert_allclose(evaluation.scores, expected, rtol=1e-12)
    assert evaluation.feasible.tolist() == [False, False, False, True]
    assert evaluation.predictions["y"].tolist() == pytest.approx([5.0, 15.0, 9.0, 9.6])
    assert evaluation.failures == [None] * 4
    assert str(evaluation.score(0)) == "[-5/0/0]hard/[0/0]soft"


def test_mad_and_sd_metrics_by_hand() -> None:
    stats = {"x": FeatureStatistics(mad=2.0, std=4.0), "n": FeatureStatistics(mad=0.5, std=1.0)}
    goal = ValueGoal(output="y", value=10.0, tolerance=0.05)
    mad, _ = _problem(goal, "mad_l1", stats)
    sd, _ = _problem(goal, "sd_squared", stats)
    a = CANDIDATES[1:2]
    assert ScoreCalculator(mad).calculate(a).scores[0, 3] == pytest.approx(-(2 / 2 + 2 / 0.5 + 2))
    assert ScoreCalculator(sd).calculate(a).scores[0, 3] == pytest.approx(-((2 / 4) ** 2 + (2 / 1) ** 2 + 2))


def test_zero_scales_fall_back_like_dice() -> None:
    stats = {"x": FeatureStatistics(mad=0.0, std=0.0, range=8.0), "n": FeatureStatistics(mad=0.5, std=0.0)}
    mad, _ = _problem(ValueGoal(output="y", value=10.0), "mad_l1", stats)
    assert mad.scales[0] == 1.0 and mad.scales[1] == 0.5  # a MAD of 0 counts as 1, as in DiCE
    sd, _ = _problem(ValueGoal(output="y", value=10.0), "sd_squared", stats)
    assert sd.scales[0] == 8.0 and sd.scales[1] == 5.0  # an SD of 0 falls back to the range


def test_metrics_needing_statistics_say_so() -> None:
    with pytest.raises(ValueError, match=r"needs the feature's mad"):
        _problem(ValueGoal(output="y", value=10.0), "mad_l1", {})


def test_range_goal_by_hand() -> None:
    problem, _ = _problem(RangeGoal(output="y", low=6.0, high=9.5))
    scores = ScoreCalculator(problem, assert_mode=True).calculate(CANDIDATES).scores
    assert scores[:, 0].tolist() == pytest.approx([-1.0, -5.5, 0.0, -0.1])


def _classifier_problem(confidence: float | None) -> CounterfactualProblem:
    def decide(X: FloatMatrix) -> FloatMatrix:
        p_yes = 1.0 / (1.0 + np.exp(-(X[:, 0] - 5.0)))
        return np.column_stack([1.0 - p_yes, p_yes])

    adapter = CallableAdapter(decide, [OutputSpec("decision", ("no", "yes"))])
    goal = ClassGoal(output="decision", target="yes", confidence=confidence, margin=0.0)
    return CounterfactualProblem(_features(), [goal], adapter)


def test_class_goal_with_confidence_by_hand() -> None:
    X = np.repeat(CANDIDATES[:1], 3, axis=0)
    X[:, 0] = [2.0, 6.0, 8.0]
    p = 1.0 / (1.0 + np.exp(-(X[:, 0] - 5.0)))
    scores = ScoreCalculator(_classifier_problem(0.8), assert_mode=True).calculate(X).scores
    assert scores[0, 0] == pytest.approx(-((1 - p[0]) - p[0]))  # not predicted: the margin
    assert scores[1, 0] == pytest.approx(-(0.8 - p[1]))  # predicted, below confidence
    assert scores[2, 0] == 0.0
    assert scores[:, 2].tolist() == [-1.0, -1.0, 0.0]
    plain = ScoreCalculator(_classifier_problem(None)).calculate(X).scores
    assert plain[:, 0].tolist() == pytest.approx([-((1 - p[0]) - p[0]), 0.0, 0.0])
    assert plain[:, 2].tolist() == [0.0, 0.0, 0.0]


def test_the_original_scores_zero_on_both_soft_levels() -> None:
    problem, _ = _problem(ValueGoal(output="y", value=10.0))
    scores = ScoreCalculator(problem).calculate(problem.original_row()).scores
    assert scores[0, 3:].tolist() == [0.0, 0.0]
    assert scores[0, 1] == 0.0


def test_one_model_call_per_batch() -> None:
    problem, model = _problem(ValueGoal(output="y", value=10.0))
    calculator = ScoreCalculator(problem, remember_bytes=0)  # every row to the model, repeats too
    rng = np.random.default_rng(0)
    X = np.repeat(problem.original_row(), 64, axis=0)
    X[:, 0] = rng.uniform(0, 10, 64)
    calculator.calculate(X)
    calculator.calculate(X[:7])
    assert model.rows_seen == [64, 7]
    assert calculator.calculation_count == 71
    assert calculator.model_call_count == 2


def test_several_outputs_are_scored_by_name() -> None:
    def two_outputs(X: FloatMatrix) -> dict[str, FloatMatrix]:
        return {"low": X[:, 0] - 1.0, "high": X[:, 0] * 10.0}

    adapter = CallableAdapter(two_outputs, [OutputSpec("high"), OutputSpec("low")])
    goals = [RangeGoal(output="low", low=0.0, high=1.0), ValueGoal(output="high", value=30.0, tolerance=0.01)]
    problem = CounterfactualProblem(_features(), goals, adapter)
    X = np.repeat(problem.original_row(), 2, axis=0)
    X[1, 0] = 3.0
    scores = ScoreCalculator(problem, assert_mode=True).calculate(X).scores
    # x = 2: low = 1 (in range), high = 20 (10 from 30); x = 3: low = 2 (1 above), high = 30.
    assert scores[:, 0].tolist() == pytest.approx([-10.0, -1.0])


def test_a_model_that_raises_or_returns_nan_never_looks_valid() -> None:
    def fragile(X: FloatMatrix) -> FloatMatrix:
        if (X[:, 0] > 9.0).any():
            raise ValueError("x too large for this model")
        return np.where(X[:, 0] == 7.0, np.nan, X[:, 0] * 10.0)

    model = CallableAdapter(fragile, [OutputSpec("y")])
    problem = CounterfactualProblem(_features(), [ValueGoal(output="y", value=95.0, tolerance=0.2)], model)
    calculator = ScoreCalculator(problem)
    X = np.repeat(problem.original_row(), 16, axis=0)
    X[:, 0] = np.linspace(8.0, 9.5, 16)
    X[3, 0] = 7.0
    X[10, 0] = 9.5
    evaluation = calculator.calculate(X)
    failed = [i for i, reason in enumerate(evaluation.failures) if reason is not None]
    assert failed == [3, 10, 11, 12, 13, 14, 15]
    assert "ValueError: x too large" in (evaluation.failures[10] or "")
    assert "not finite" in (evaluation.failures[3] or "")
    assert (evaluation.scores[failed, 0] == FAILED_PREDICTION).all()
    assert not evaluation.feasible[failed].any()
    ok = [i for i in range(16) if i not in failed]
    assert evaluation.feasible[ok].all()  # 80..~90 is within 20% of 95
    assert calculator.model_call_count < 16


def test_assert_mode_agrees_with_the_reference_on_a_real_pipeline(
    loan_problem: CounterfactualProblem, loan_model: Pipeline
) -> None:
    problem = loan_problem
    space = problem.space
    rng = np.random.default_rng(1)
    X = np.repeat(problem.original_row(), 40, axis=0)
    for j in np.flatnonzero(space.mutable):
        moved = rng.random(40) < 0.3
        values = rng.uniform(space.lower[j], space.upper[j], 40)
        if space.integral[j]:
            values = np.rint(values)
        X[moved, j] = values[moved]
    evaluation = ScoreCalculator(problem, assert_mode=True).calculate(X)
    proba = loan_model.predict_proba(space.to_frame(X))
    np.testing.assert_allclose(evaluation.predictions[TARGET], proba)
    np.testing.assert_allclose(reference_score(problem, X[5]), evaluation.scores[5])


def test_constrained_features_changed_count_on_hard_one() -> None:
    features = [
        *_features(),
        parse_feature({"kind": "boolean", "name": "pinned", "value": True, "constrained": True}),
    ]

    def model(X: FloatMatrix) -> FloatMatrix:
        return X[:, 0]

    problem = CounterfactualProblem(features, [ValueGoal(value=2.0)], CallableAdapter(model, [OutputSpec("y")]))
    X = problem.original_row()
    X[0, 4] = 3.0
    X[0, 5] = 0.0
    assert ScoreCalculator(problem, assert_mode=True).calculate(X).scores[0, 1] == -2.0


def test_a_change_penalty_adds_to_the_distance_once_per_changed_feature() -> None:
    goal = ValueGoal(output="y", value=10.0, tolerance=0.05)
    plain, _ = _problem(goal)
    model = LinearModel()
    penalised = CounterfactualProblem(
        _features(), [goal], CallableAdapter(model, [OutputSpec("y")]), DistanceSettings(change_penalty=0.5)
    )
    base = ScoreCalculator(plain).calculate(CANDIDATES).scores
    scores = ScoreCalculator(penalised, assert_mode=True).calculate(CANDIDATES).scores  # the reference agrees
    changed = (CANDIDATES[0] != CANDIDATES).sum(axis=1)
    np.testing.assert_allclose(scores[:, 3], base[:, 3] - 0.5 * changed, rtol=1e-12)
    np.testing.assert_array_equal(np.delete(scores, 3, axis=1), np.delete(base, 3, axis=1))  # only soft 0 moves
    for bad in (-1.0, float("inf"), float("nan"), 1e7):
        with pytest.raises(ValueError, match="change_penalty"):
            DistanceSettings(change_penalty=bad)


def test_outputs_that_are_not_probabilities_never_make_a_candidate_valid() -> None:
    features = [FloatFeature(name="x", value=0.0, low=0.0, high=10.0)]

    def broken(X: FloatMatrix) -> FloatMatrix:  # "probabilities" of [-1, 2] past x = 5, sums of 1.2 past 8
        p = np.where(X[:, 0] > 5.0, 2.0, 0.2)
        q = np.where(X[:, 0] > 8.0, 0.0, 1.0 - p)
        return np.column_stack([q, p])

    problem = CounterfactualProblem(
        features, [ClassGoal(target=1, margin=0.0)], CallableAdapter(broken, [OutputSpec("y", (0, 1))])
    )
    X = np.array([[1.0], [6.0], [9.0]])
    evaluation = ScoreCalculator(problem, assert_mode=True).calculate(X)
    assert evaluation.failures[0] is None
    assert evaluation.failures[1] is not None and "probability distribution" in evaluation.failures[1]
    assert evaluation.failures[2] is not None
    assert not evaluation.feasible[1:].any()


def test_a_model_that_raises_on_many_candidates_costs_a_bounded_number_of_calls() -> None:
    from counterplan.planning.calculator import MAX_BISECTION_DEPTH

    features = [FloatFeature(name="x", value=0.0, low=0.0, high=10.0)]
    calls = []

    def picky(X: FloatMatrix) -> FloatMatrix:  # raises whenever a batch holds an odd whole x
        calls.append(X.shape[0])
        if (np.mod(np.rint(X[:, 0]), 2) == 1).any():
            raise RuntimeError("odd input")
        p = np.full(X.shape[0], 0.9)
        return np.column_stack([1.0 - p, p])

    problem = CounterfactualProblem(features, [ClassGoal(target=1)], CallableAdapter(picky, [OutputSpec("y", (0, 1))]))
    X = np.rint(np.linspace(0.0, 10.0, 1024)).reshape(-1, 1)  # odd and even values interleaved everywhere
    evaluation = ScoreCalculator(problem).calculate(X)
    assert len(calls) <= 2 ** (MAX_BISECTION_DEPTH + 1) - 1  # not one call per failing row (512 of them)
    odd = np.mod(X[:, 0], 2) == 1
    assert all(evaluation.failures[i] is not None for i in np.flatnonzero(odd))  # never a valid-looking failure
    assert not evaluation.feasible[odd].any()
