from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

from counterplan.planning import BendableScore, ScoreFormatError
from counterplan.planning.score import best_row, compare_to

level = st.one_of(
    st.integers(-1000, 0).map(float),
    st.floats(-1e12, 0.0, allow_nan=False, allow_infinity=False),
)
scores = st.builds(lambda *v: BendableScore.of(v), level, level, level, level, level)


def test_text_form_and_feasibility() -> None:
    score = BendableScore.of([0, 0, 0, -1.5, -2])
    assert str(score) == "[0/0/0]hard/[-1.5/-2]soft"
    assert score.is_feasible
    infeasible = BendableScore.of([-0.25, 0, -1, 0, 0])
    assert str(infeasible) == "[-0.25/0/-1]hard/[0/0]soft"
    assert not infeasible.is_feasible
    assert BendableScore.zero().is_feasible


def test_negative_zero_prints_as_zero() -> None:
    assert str(BendableScore.of([-0.0, 0, 0, -0.0, 0])) == "[0/0/0]hard/[0/0]soft"


@given(scores)
def test_text_form_round_trips(score: BendableScore) -> None:
    assert BendableScore.parse(str(score)) == score


@given(scores, scores)
def test_order_is_lexicographic_hard_first(a: BendableScore, b: BendableScore) -> None:
    assert (a < b) == (a.levels < b.levels)
    assert (a == b) == (a.levels == b.levels)
    assert int(compare_to(a.to_array().reshape(1, -1), b.to_array())[0]) == (a > b) - (a < b)


@given(st.lists(scores, min_size=1, max_size=20))
def test_best_row_picks_the_maximum_first_among_equals(items: list[BendableScore]) -> None:
    matrix = np.vstack([s.to_array() for s in items])
    best = max(items)
    assert best_row(matrix) == items.index(best)


def test_hard_beats_soft() -> None:
    assert BendableScore.of([0, 0, -1, 0, 0]) < BendableScore.of([0, 0, 0, -1e9, -20])
    assert BendableScore.of([-1, 0, 0, 0, 0]) < BendableScore.of([0, -5, -5, 0, 0])


@pytest.mark.parametrize(
    "text", ["", "[0/0]hard/[0/0]soft", "[0/0/0]hard/[0/0/0]soft", "0hard/0soft", "[a/0/0]hard/[0/0]soft"]
)
def test_bad_text_is_rejected(text: str) -> None:
    with pytest.raises(ScoreFormatError, match="expected the form"):
        BendableScore.parse(text)
