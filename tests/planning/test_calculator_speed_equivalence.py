"""The vectorised calculator's fast paths score bit for bit as the plain formulas do.

The calculator skips work where it provably changes nothing (per-row Python when no row failed,
a sort to find the best row, a multiplication by costs of 1, ...). These tests keep the plain
formulas it replaced (:func:`_plain_scores`, as the calculator computed them before issue 16) and
compare every bit of the scores, the failures and the kept best row on random batches: every
feature kind and rule, every metric, class (binary and three-class), value and range goals, and
outputs that are NaN, infinite or no probability distribution.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

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
)
from counterplan.planning.goals import ClassGoal as _ClassGoal, _needed, _value_distance
from counterplan.planning.score import last_best_row
from counterplan.planning.space import AnyFeature, FloatMatrix

_UNMET_FLOOR = 1e-12
_GOAL_DISTANCE_KNEE = 1.0e11
_TOLERANCE = 1e-6


# --- the plain formulas ----------------------------------------------------------------------


def _plain_class_distance(proba: FloatMatrix, index: int, confidence: float | None, margin: float) -> FloatMatrix:
    target = proba[:, index]
    others = np.delete(proba, index, axis=1)
    best_other = others.max(axis=1) if others.shape[1] else np.zeros_like(target)
    predicted = (np.argmax(proba, axis=1) == index) & (target - best_other >= margin)
    shortfall = np.where(predicted, 0.0, np.maximum(best_other + margin - target, _UNMET_FLOOR))
    if confidence is not None:
        shortfall = np.maximum(shortfall, np.maximum(_needed(confidence, margin) - target, 0.0))
    return shortfall


def _plain_goal_distance(bound: Any, prediction: FloatMatrix) -> FloatMatrix:
    goal = bound.goal
    if isinstance(goal, _ClassGoal):
        return _plain_class_distance(prediction, bound.class_index, goal.confidence, goal.margin)
    if isinstance(goal, ValueGoal):
        return _value_distance(prediction, goal.value, goal.tolerance)
    return np.asarray(np.maximum(goal.low - prediction, 0.0) + np.maximum(prediction - goal.high, 0.0))


def _plain_implausible(name: str, array: FloatMatrix) -> list[tuple[int, str]]:
    if array.ndim == 1:
        return [(int(row), f"output {name!r} is not finite") for row in np.flatnonzero(~np.isfinite(array))]
    out = [(int(row), f"output {name!r} is not finite") for row in np.flatnonzero(~np.isfinite(array).all(axis=1))]
    finite = np.isfinite(array).all(axis=1)
    with np.errstate(invalid="ignore"):
        outside = ((array < -_TOLERANCE) | (array > 1.0 + _TOLERANCE)).any(axis=1)
        total = np.abs(array.sum(axis=1) - 1.0) > _TOLERANCE * max(array.shape[1], 1)
    for row in np.flatnonzero(finite & (outside | total)):
        out.append((int(row), f"output {name!r} is not a probability distribution (values in [0, 1] summing to 1)"))
    return out


def _plain_feature_distance(problem: CounterfactualProblem, X: FloatMatrix) -> FloatMatrix:
    space = problem.space
    diff = X - space.original
    changed = (diff != 0.0).astype(np.float64)
    scaled = diff / problem.scales
    per_feature = np.square(scaled) if problem.distance.metric == "sd_squared" else np.abs(scaled)
    per_feature = np.where(~space.graded, changed, per_feature)
    if problem.distance.change_penalty:
        per_feature = per_feature + problem.distance.change_penalty * changed
    per_feature = per_feature * space.costs
    return np.asarray(per_feature.sum(axis=1), dtype=np.float64)


def _plain_scores(
    problem: CounterfactualProblem, X: FloatMatrix, predictions: dict[str, FloatMatrix]
) -> tuple[FloatMatrix, list[str | None]]:
    """Scores and failures of a batch the model answered whole, computed as before issue 16."""
    space = problem.space
    n = X.shape[0]
    failures: list[str | None] = [None] * n
    for name, array in predictions.items():
        for row, reason in _plain_implausible(name, array):
            if failures[row] is None:
                failures[row] = reason
    failed = np.array([reason is not None for reason in failures], dtype=bool)
    scores = np.zeros((n, 5))
    goal_distance = np.zeros(n)
    below = np.zeros(n, dtype=np.int64)
    confidence_goals = sum(1 for g in problem.goals if getattr(g.goal, "confidence", None) is not None)
    for bound in problem.goals:
        column = predictions[bound.output.name]
        with np.errstate(invalid="ignore"):
            goal_distance += _plain_goal_distance(bound, column)
            below += bound.below_confidence(column)
    with np.errstate(invalid="ignore", divide="ignore"):  # the summed distance, logarithmic past the knee
        far = _GOAL_DISTANCE_KNEE * (1.0 + np.log(np.minimum(goal_distance, 1.7e308) / _GOAL_DISTANCE_KNEE))
    goal_distance = np.where(goal_distance > _GOAL_DISTANCE_KNEE, far, goal_distance)
    scores[:, 0] = np.where(failed, FAILED_PREDICTION, -goal_distance)
    changed = space.original != X
    broken = (changed & ~space.mutable).sum(axis=1).astype(np.float64)
    broken += ((X - space.original) * space.monotone < 0.0).sum(axis=1)
    if space.checks_grid:
        broken += space.off_grid(X)
    if problem.max_changed_features is not None:
        broken += np.maximum(changed.sum(axis=1) - problem.max_changed_features, 0)
    scores[:, 1] = -broken
    scores[:, 2] = np.where(failed, -max(confidence_goals, 1), -below)
    scores[:, 3] = -_plain_feature_distance(problem, X)
    scores[:, 4] = -changed.sum(axis=1)
    scores += 0.0
    return scores, failures


# --- random problems and batches ------------------------------------------------------------


def _features(variant: int) -> list[AnyFeature]:
    return [
        FloatFeature(name="x", value=2.0, low=0.0, high=10.0, cost=2.0 if variant % 2 else 1.0),
        IntegerFeature(name="n", value=1, low=0, high=5, monotone="increase" if variant % 3 == 0 else None),
        CategoricalFeature(name="color", value="red", categories=("red", "green", "blue")),
        BooleanFeature(name="flag", value=False),
        FloatFeature(name="fixed", value=1.0, low=0.0, high=4.0, constrained=True),
        FloatFeature(
            name="p", value=0.25, low=0.0, high=1.0, precision=2, monotone="decrease" if variant == 1 else None
        ),
        IntegerFeature(name="a", value=10, low=0, high=100, allowed=(0, 10, 20, 50, 100) if variant % 2 == 0 else None),
        FloatFeature(name="w", value=3.0, low=-5.0, high=5.0, cost=0.5 if variant < 2 else 1.0),
    ]


_STATISTICS = {
    "x": FeatureStatistics(range=10.0, std=2.0, mad=1.5),
    "n": FeatureStatistics(range=5, std=1.0, mad=0.0),
    "p": FeatureStatistics(range=1.0, std=0.3, mad=0.2),
    "a": FeatureStatistics(range=100, std=30, mad=20),
    "w": FeatureStatistics(range=10, std=0.0, mad=2.0),
}
_OUTPUTS = [OutputSpec("c", (0, 1)), OutputSpec("v"), OutputSpec("t", ("a", "b", "c"))]
_GOALS: list[list[Any]] = [
    [ClassGoal(output="c", target=1, confidence=0.7)],
    [ClassGoal(output="c", target=0)],
    [ClassGoal(output="c", target=1, margin=0.0)],
    [ClassGoal(output="c", target=0, margin=0.0, confidence=0.6)],
    [ValueGoal(output="v", value=4.0, tolerance=0.05)],
    [ValueGoal(output="v", value=0.0, tolerance=0.1), ClassGoal(output="c", target=1, confidence=0.8)],
    [RangeGoal(output="v", low=1.0, high=3.0), ClassGoal(output="t", target="c", confidence=0.5)],
    [ClassGoal(output="t", target="a", margin=0.0), RangeGoal(output="v", low=-np.inf, high=0.5)],
]


class _Outputs:
    """Outputs that depend on the row only, with rows whose outputs are NaN, infinite, or class
    probabilities outside [0, 1], not summing to 1, or tied (``bad`` rows only when asked)."""

    def __init__(self, seed: int, bad: bool) -> None:
        self.seed = seed
        self.bad = bad

    def __call__(self, X: FloatMatrix) -> dict[str, FloatMatrix]:
        h = (np.abs(X) * np.arange(1, X.shape[1] + 1)).sum(axis=1)
        p1 = (np.sin(h * 12.9898 + self.seed) * 43758.5453) % 1.0
        proba = np.column_stack([1.0 - p1, p1])
        value = 10.0 * p1 - 2.0
        kind = (h * 7.0) % 13.0
        proba[(kind >= 2.0) & (kind < 2.6)] = 0.5  # a tie: class 0's
        if self.bad:
            proba[kind < 0.4] = np.nan
            proba[(kind >= 0.4) & (kind < 0.7), 0] = np.inf
            proba[(kind >= 0.7) & (kind < 1.0)] += 0.1
            proba[(kind >= 1.0) & (kind < 1.2)] = [1.3, -0.3]
            value[(kind >= 1.2) & (kind < 1.5)] = np.nan
            value[(kind >= 1.5) & (kind < 1.6)] = -np.inf
        three = np.column_stack([proba[:, 0] * 0.5, proba[:, 0] * 0.5, proba[:, 1]])
        three[(kind >= 3.0) & (kind < 3.4)] = [0.4, 0.4, 0.2]
        return {"c": proba, "v": value, "t": three}


def _batches(problem: CounterfactualProblem, rng: np.random.Generator, count: int) -> list[FloatMatrix]:
    """Candidates with one to four columns changed anywhere in the domain (immutables too),
    some snapped onto the grid, some repeated rows (ties), some in Fortran order."""
    space = problem.space
    out = []
    for _ in range(count):
        n = int(rng.integers(1, 80))
        X = np.repeat(space.original[None], n, axis=0)
        for i in range(n):
            cols = rng.choice(space.n_features, int(rng.integers(1, 5)), replace=False)
            lo, hi = space.domain_lower[cols], space.domain_upper[cols]
            values = lo + rng.random(cols.size) * (hi - lo)
            X[i, cols] = np.where(space.integral[cols], np.round(values), values)
        if rng.random() < 0.4:
            X = space.snap(X)
        if n > 4 and rng.random() < 0.3:
            X[n // 2 :] = X[: n - n // 2]
        if rng.random() < 0.2:
            X = np.asfortranarray(X)
        out.append(X)
    return out


def _bits(array: FloatMatrix) -> bytes:
    return np.ascontiguousarray(array).tobytes()


_CASES = list(
    itertools.product(range(4), range(len(_GOALS)), ["range_l1", "mad_l1", "sd_squared"], [0.0, 0.7], [None, 2])
)


@pytest.mark.parametrize("bad", [False, True], ids=["plausible", "failing-outputs"])
@pytest.mark.parametrize("case", range(0, len(_CASES), 7))
def test_scores_failures_and_best_row_are_bit_identical_to_the_plain_formulas(case: int, bad: bool) -> None:
    variant, goals, metric, penalty, limit = _CASES[case]
    problem = CounterfactualProblem(
        _features(variant),
        _GOALS[goals],
        CallableAdapter(_Outputs(case, bad), _OUTPUTS),
        DistanceSettings(metric=metric, change_penalty=penalty),
        _STATISTICS,
        max_changed_features=limit,
    )
    calculator = ScoreCalculator(problem)
    rng = np.random.default_rng(case)
    best: tuple[tuple[float, ...], bytes] | None = None
    for X in [problem.original_row(), *_batches(problem, rng, 6)]:
        evaluation = calculator.calculate(X)
        expected, failures = _plain_scores(problem, X, evaluation.predictions)
        assert _bits(evaluation.scores) == _bits(expected)
        assert evaluation.failures == failures
        fine = np.flatnonzero([reason is None for reason in failures])
        if fine.size:  # the best row kept as before: np.lexsort's last among the rows with a prediction
            top = int(fine[np.lexsort(expected[fine].T[::-1])[-1]])
            if best is None or tuple(expected[top]) > best[0]:
                best = (tuple(expected[top]), _bits(X[top]))
        if best is None:
            assert calculator.best is None
        else:
            assert calculator.best is not None
            assert _bits(calculator.best[0]) == best[1]
            assert tuple(calculator.best[1].scores[0]) == best[0]


def test_the_best_row_is_the_one_a_lexicographic_sort_puts_last() -> None:
    rng = np.random.default_rng(16)
    for trial in range(400):
        n = int(rng.integers(1, 60))
        levels = rng.integers(0, 3, size=(n, 5)).astype(np.float64) - rng.integers(0, 2, size=(n, 5)) * 0.5
        if trial % 5 == 0:
            levels[rng.random((n, 5)) < 0.1] = np.nan
        if trial % 7 == 0:
            levels[:] = levels[0]  # every row tied
        assert last_best_row(levels) == int(np.lexsort(levels.T[::-1])[-1])
