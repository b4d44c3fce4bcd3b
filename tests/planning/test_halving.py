"""The one driver that halves a failing model call (the calculator's and the vectorised block's)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from counterplan.planning.errors import ModelAdapterError
from counterplan.planning.halving import Run, call_in_halves


def _fails_on(bad: set[int], calls: list[Run]) -> Callable[[Run], list[int]]:
    def call(run: Run) -> list[int]:
        calls.append(run)
        rows = list(range(run.start, run.stop))
        if bad & set(rows):
            raise ValueError(f"rows {sorted(bad & set(rows))}")
        return rows

    return call


def _halve(run: Run, _: Exception) -> tuple[Run, Run] | None:
    return None if run.size == 1 else run.halves()


def test_the_rows_the_model_answers_keep_their_results_in_row_order() -> None:
    calls: list[Run] = []
    out = call_in_halves(8, _fails_on({2, 5}, calls), _halve)
    answered = [row for _, result in out if isinstance(result, list) for row in result]
    failed = [run.start for run, result in out if isinstance(result, Exception)]
    assert answered == [0, 1, 3, 4, 6, 7] and failed == [2, 5]
    assert [run.start for run, _ in out] == sorted(run.start for run, _ in out)  # row order
    assert calls[0] == Run(0, 8) and calls[1] == Run(0, 4, 1)  # depth first, left before right
    assert [run.depth for run, _ in out] == [2, 3, 3, 3, 3, 2]


def test_a_policy_that_gives_up_keeps_the_runs_exception() -> None:
    calls: list[Run] = []
    out = call_in_halves(8, _fails_on({2}, calls), lambda run, error: None)
    assert len(calls) == 1 and len(out) == 1
    run, result = out[0]
    assert run == Run(0, 8) and isinstance(result, ValueError) and "rows [2]" in str(result)


def test_counterplans_own_reading_of_the_model_is_raised_not_halved() -> None:
    def call(run: Run) -> None:
        raise ModelAdapterError("outputs", "no output 'probabilities'")

    with pytest.raises(ModelAdapterError):
        call_in_halves(8, call, _halve)


def test_halves_cut_in_the_middle_one_level_deeper() -> None:
    assert Run(3, 10, 2).halves() == (Run(3, 6, 3), Run(6, 10, 3))
    assert Run(3, 10).rows == slice(3, 10) and Run(3, 10).size == 7
