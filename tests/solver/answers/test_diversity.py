"""Choosing several answers: material differences, the max-mean selection and successive routes."""

from __future__ import annotations

import numpy as np

from counterplan.planning import CounterfactualProblem, ScoreCalculator
from counterplan.solver.answers.diversity import material_differences, select_diverse
from counterplan.solver.answers.routes import successive_routes
from counterplan.solver.scoring import CalculatorScorer

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
    # categories 2 and 3 (from 0) differ; as numbers the gap would be under half the move
    other_category = np.array([48_200.0, 10.0, 5.0, 3.0, 3.0])
    assert material_differences(rows[4:], other_category, ORIGINAL, NOMINAL).sum() == 1


def test_selection_maximises_the_mean_difference_to_the_chosen_answers() -> None:
    rows = np.array(
        [
            [48_000.0, 10.0, 5.0, 3.0, 0.0],  # best: the first feature alone (distance 1.0)
            [40_000.0, 10.0, 7.0, 2.0, 0.0],  # the third and fourth, nothing in common (1.3)
            [40_000.0, 10.0, 5.0, 3.0, 2.0],  # a category alone (1.2)
            [43_000.0, 12.0, 5.0, 3.0, 0.0],  # the first, under half as far, and the second (1.2)
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
    rows = np.array(
        [
            [48_000.0, 10.0, 5.0, 3.0, 0.0],
            [48_000.0, 10.0, 5.0, 3.0, 0.0],  # the same row
            [48_050.0, 10.0, 5.0, 3.0, 0.0],  # the same route, 50 more
        ]
    )
    chosen = select_diverse(rows, scores_for([1.0, 1.0, 1.01]), original=ORIGINAL, scales=SCALES, nominal=NOMINAL, k=4)
    assert chosen == [0]


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


def test_widening_to_farther_answers_counts_each_chosen_one_once() -> None:
    """X (distance 5) differs from the best and A in 7 and 2 features, Y in 1 and 6: X has the larger mean.

    Both are only eligible once the selection widens from 3 to 10 times the best's distance;
    counting A twice at that point (once per pass) would make Y's mean the larger.
    """
    width = 8
    nominal, original, scales = np.zeros(width, dtype=bool), np.zeros(width), np.full(width, 100.0)

    def changing(features: set[int]) -> np.ndarray:
        row = np.zeros(width)
        row[list(features)] = 1.0
        return row

    rows = np.array([changing({0}), changing({1, 2, 3, 4}), changing({1, 2, 3, 4, 5, 6}), changing({0, 7})])
    chosen = select_diverse(
        rows, scores_for([1.0, 1.5, 5.0, 5.0]), original=original, scales=scales, nominal=nominal, k=3
    )
    assert chosen == [0, 1, 2]


def test_each_follower_avoids_what_the_chain_that_found_its_route_avoided(
    linear_problem: CounterfactualProblem,
) -> None:
    space = linear_problem.space
    calculator = ScoreCalculator(linear_problem)
    start = calculator.calculate(linear_problem.original_row()).scores[0]
    x, n = space.names.index("x"), space.names.index("n")
    features = np.arange(space.n_features)
    avoid = [features == x, np.isin(features, [x, n])]  # the second chain finds the plan-and-debt route
    scorer = CalculatorScorer(calculator)
    first, _ = successive_routes(space, scorer, start, avoid, rounds=1, width=6)
    both, _ = successive_routes(space, scorer, start, avoid, rounds=2, width=6)
    np.testing.assert_array_equal(both[: len(first)], first)  # deterministic: round one again, then round two
    second = both[len(first) :]
    assert second.shape[0] > 0
    # the plan-and-debt route's follower avoids x and n too (its chain did), so nothing in
    # round two raises n; the n route's follower finds plan and debt again
    assert (second[:, n] == space.original[n]).all()
