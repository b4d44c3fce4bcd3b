"""A tree ensemble's program without its numbers' values (:mod:`counterplan.solver.exact.intervals`),
solved by HiGHS and SCIP: the same optimum as the whole program, its solutions whole ones."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from counterplan.planning import ClassGoal, CounterfactualProblem, FloatFeature, IntegerFeature
from counterplan.planning.models import adapt_sklearn
from counterplan.solver.exact import intervals
from counterplan.solver.exact.backend import solve
from counterplan.solver.exact.formulation import build
from tests.solver.exact.test_exact_numerics import _tree_on_huge_numbers
from tests.solver.exact.test_exact_trees import MODELS, _data, _problem

pytest.importorskip("highspy")
pytest.importorskip("ortools")


def _off_grid(name: str) -> CounterfactualProblem:
    """Three numbers on grids of a tenth and of one, the income's original off its grid."""
    frame, label = _data()
    model = MODELS[name]().fit(frame, label)
    features = [
        FloatFeature(name="income", value=6.25, low=0.0, high=10.0, precision=1),
        IntegerFeature(name="tenure", value=3, low=0, high=14),
        FloatFeature(name="debt", value=3.0, low=0.0, high=5.0, precision=1),
    ]
    return CounterfactualProblem(features, [ClassGoal(target=1, confidence=0.7)], adapt_sklearn(model, "ok"))


@pytest.mark.parametrize("backend", ["highs", "ortools"])
@pytest.mark.parametrize("off_grid", [False, True])
@pytest.mark.parametrize("name", list(MODELS))
def test_the_program_without_values_has_the_whole_programs_optimum(
    monkeypatch: pytest.MonkeyPatch, name: str, off_grid: bool, backend: Any
) -> None:
    """Every tree program sent without its values (the width limit at 0): the same optimum as the
    whole program on the same backend, every incumbent and the answer a solution of the whole
    program (its rows met, each number inside its interval), and the whole program's optimum a
    start of the same objective."""
    problem = _off_grid(name) if off_grid else _problem(MODELS[name]())
    whole, _ = solve(build(problem).milp, backend, time_limit=None, relative_gap=1e-9)
    monkeypatch.setattr(intervals, "WIDE_STEPS", 0.0)
    built: list[intervals.IntervalProgram] = []
    real = intervals.interval_program

    def spied(*args: Any, **kwargs: Any) -> intervals.IntervalProgram | None:
        program = real(*args, **kwargs)
        if program is not None:
            built.append(program)
        return program

    monkeypatch.setattr(intervals, "interval_program", spied)
    formulation = build(problem)
    seen: list[np.ndarray] = []
    reduced, _ = solve(
        formulation.milp,
        backend,
        time_limit=None,
        relative_gap=1e-9,
        on_incumbent=lambda x, _objective: seen.append(x.copy()),
        formulation=formulation,
    )
    assert len(built) == 1, "the program went without its values"
    assert built[0].milp.n_vars >= formulation.milp.n_vars
    assert whole.status == reduced.status == "optimal"
    assert reduced.objective == pytest.approx(whole.objective, rel=1e-7, abs=1e-9)
    assert reduced.bound <= reduced.objective + 1e-9
    assert reduced.x is not None and intervals.meets_rows(formulation.milp, reduced.x)
    assert seen, "the final solution at least is handed on"
    assert all(intervals.meets_rows(formulation.milp, x) for x in seen)
    assert whole.x is not None
    start = built[0].start(whole.x)
    assert start is not None and intervals.meets_rows(built[0].milp, start), "a whole solution starts it"
    assert built[0].milp.value(built[0].milp.objective, start, built[0].milp.objective_offset) == pytest.approx(
        whole.objective, rel=1e-7, abs=1e-9
    )


def test_only_numbers_of_very_many_grid_steps_make_a_program_wide() -> None:
    assert not intervals.wide(build(_problem(MODELS["random forest"]())))
    assert not intervals.wide(build(_off_grid("gradient boosting")))
    assert intervals.wide(build(_tree_on_huge_numbers(2)))


def test_a_program_it_does_not_state_is_solved_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """A linear model's program is no tree ensemble's: wide or not, HiGHS solves it whole."""
    from sklearn.linear_model import LogisticRegression

    monkeypatch.setattr(intervals, "WIDE_STEPS", 0.0)
    formulation = build(_problem(LogisticRegression(max_iter=1000)))
    with pytest.raises(intervals.Unsupported):
        intervals.interval_program(formulation)
    result, _ = solve(formulation.milp, "highs", time_limit=None, relative_gap=1e-9, formulation=formulation)
    assert result.status == "optimal" and result.x is not None
