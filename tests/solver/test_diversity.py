"""Choosing several answers: material differences, the max-mean selection and successive routes."""

from __future__ import annotations

import numpy as np

from planning import CounterfactualProblem, ScoreCalculator
from solver.counterfactual import CalculatorScorer
from solver.diversity import material_differences, select_diverse
from solver.routes import successive_routes

NOMINAL = np.array([False, False, False, False, True])
ORIGINAL = np.array([40_000.0, 10.0, 5.0, 3.0, 0.0])
SCALES = np.array([10_000.0, 5.0, 2.0, 1.0, 1.0])


def scores_for(distances: list[float]) -> np.ndarray:
    """Feasible scores (hard levels 0) with soft 0 = -distance and soft 1 = -1."""
    out = np.zeros((len(distances), 5))
    out[:, 3] = -np.asarray(distances)
    out[:, 4] = -1.0
    return out


def test_material_differences_tell_routes_from_near_duplicates() -> None:
    best = np.array([48_200.0, 10.0, 5.0, 3.0, 0.0])
    rows = np.array(
        [
            [48_250.0, 10.0, 5.0, 3.0, 0.0],  # the same route, 50 more: not material
            [43_000.0, 10.0, 5.0, 3.0, 0.0],  # the same direction, under half the move: material
            [30_000.0, 10.0, 5.0, 3.0, 0.0],  # the opposite direction: material
            [40_000.0, 12.0, 5.0, 3.0, 0.0],  # another feature instead: two material differences
            [48_200.0, 10.0, 5.0, 3.0, 2.0],  # the same move plus a category: one
        ]
    )
    got = material_differences(rows, best, ORIGINAL, NOMINAL)
    assert got.sum(axis=1).tolist() == [0, 1, 1, 2, 1]
    other_category = np.array([48_200.0, 10.0, 5.0, 3.0, 1.0])
    assert material_differences(rows[4:], other_category, ORIGINAL, NOMINAL).sum() == 1  # category 2 vs 1


def test_selection_maximises_the_mean_difference_to_the_chosen_answers() -> None:
    rows = np.array(
        [
            [48_000.0, 10.0, 5.0, 3.0, 0.0],  # best: the first feature alone (distance 1.0)
            [40_000.0, 10.0, 7.0, 2.0, 0.0],  # the third and fourth, nothing in common (1.3)
            [40_000.0, 10.0, 5.0, 3.0, 2.0],  # a category alone (1.2)
            [44_000.0, 12.0, 5.0, 3.0, 0.0],  # the first, half as far, and the second (1.2)
            [48_050.0, 10.0, 5.0, 3.0, 0.0],  # a near-duplicate of the best (1.01)
        ]
    )
    chosen = select_diverse(
        rows, scores_for([1.0, 1.3, 1.2, 1.2, 1.01]), original=ORIGINAL, scales=SCALES, nominal=NOMINAL, k=3
    )
    # first the route with nothing in common with the best; then the row that differs from the
    # two chosen in 2 and 4 features (mean 3), not the one differing in 2 and 3 (mean 2.5), which
    # a max-min rule prefers for its larger smallest difference (value gaps counted in full)
    assert chosen == [0, 1, 3]


def test_the_selection_never_returns_near_duplicates_and_says_fewer() -> None:
    rows = np.array([[48_000.0, 10.0, 5.0, 3.0, 0.0], [48_000.0, 10.0, 5.0, 3.0, 0.0]])
    assert select_diverse(rows, scores_for([1.0, 1.0]), original=ORIGINAL, scales=SCALES, nominal=NOMINAL, k=4) == [0]


def test_successive_routes_also_avoid_the_routes_already_found(linear_problem: CounterfactualProblem) -> None:
    space = linear_problem.space
    calculator = ScoreCalculator(linear_problem)
    start = calculator.calculate(linear_problem.original_row()).scores[0]
    x, n = space.names.index("x"), space.names.index("n")
    avoid = [np.arange(space.n_features) == x]  # the best answer raises x
    scorer = CalculatorScorer(calculator)

    first, _ = successive_routes(space, scorer, start, avoid, rounds=1, width=6)
    assert first.shape[0] > 0 and (first[:, n] != space.original[n]).all()  # one round: every route raises n

    calls = calculator.model_call_count
    rows, scores = successive_routes(space, scorer, start, avoid, rounds=2, width=6)
    assert calculator.model_call_count - calls <= 2 * 5  # at most max_steps calls per round
    np.testing.assert_array_equal(scores, calculator.calculate(rows).scores)
    assert (scores[:, :3] == 0.0).all() and (rows[:, x] == space.original[x]).all()
    # the second round avoided n as well and found the plan-and-debt route
    disjoint = rows[(rows[:, x] == space.original[x]) & (rows[:, n] == space.original[n])]
    assert disjoint.shape[0] > 0
    assert (disjoint[:, space.names.index("plan")] == 2).all()
