"""Distinct rows: np.unique's, row for row, found by a lexsort that releases the GIL (every engine
that drops repeated rows uses them: the pool, the answers, the swarm, action plans, the trust
region's reference rows, batch layouts)."""

from __future__ import annotations

import numpy as np

from counterplan.planning.distinct_rows import distinct_rows, first_of_each


def test_distinct_rows_are_np_uniques_index_and_inverse() -> None:
    """Each distinct row's first occurrence in np.unique's order, and each row's place: NaN never
    equal, -0.0 equal to 0.0, infinities, booleans, no rows and one column alike."""
    rng = np.random.default_rng(0)
    values = np.array([0.0, -0.0, 1.0, np.nan, -1.0, np.inf, -np.inf, 2.5])
    for case in range(600):
        rows = rng.choice(values[: rng.integers(2, 9)], size=(int(rng.integers(0, 30)), int(rng.integers(1, 5))))
        if case % 3 == 0:
            rows = rows != 0.0
        _, index, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
        first, place = distinct_rows(rows)
        assert np.array_equal(first, index), rows
        assert np.array_equal(place, inverse.reshape(-1)), rows
        assert np.array_equal(first_of_each(rows), np.sort(index)), rows
