"""The tie-break program's budget (``ExactPhaseConfig.tie_break_effort``): the distance is proven by
the first program; the second, which only looks for fewer changes at that distance, gets a multiple
of the first's work in the backend's own load-independent measure (CP-SAT's deterministic seconds,
HiGHS's and SCIP's nodes), at least a floor. Before, it ran to the time limit: on heloc's 100-tree
forest the rows proven in 8-16 s took the whole 30 s."""

from __future__ import annotations

from typing import Any

import pytest

from counterplan.solver.core.config import SolverConfig
from counterplan.solver.counterfactual import explain
from counterplan.solver.exact import phase as exact_phase
from counterplan.solver.exact.config import ExactPhaseConfig
from counterplan.solver.exact.milp import MilpResult
from tests.solver.exact.test_exact_trees import MODELS, _problem

pytest.importorskip("highspy")
pytest.importorskip("ortools")


def _first(nodes: int, deterministic: float | None) -> MilpResult:
    return MilpResult("optimal", None, 1.0, 1.0, 0.0, nodes, 0.1, deterministic)


def test_the_budget_is_a_multiple_of_the_first_programs_work_with_a_floor() -> None:
    config = ExactPhaseConfig(tie_break_effort=0.5)
    assert exact_phase._tie_break_budget(config, _first(10_000, 8.0)) == (5_000, 4.0)
    floor_nodes, floor_time = exact_phase.TIE_BREAK_FLOOR_NODES, exact_phase.TIE_BREAK_FLOOR_DETERMINISTIC
    assert exact_phase._tie_break_budget(config, _first(1, 0.01)) == (floor_nodes, floor_time)
    # HiGHS and SCIP report no deterministic time: the node limit alone bounds them
    assert exact_phase._tie_break_budget(config, _first(4_000, None)) == (floor_nodes * 2, None)
    # never more nodes than the config allows; None: the time limit alone, as before
    capped = ExactPhaseConfig(tie_break_effort=100.0, node_limit=50_000)
    assert exact_phase._tie_break_budget(capped, _first(10_000, 1.0))[0] == 50_000
    unlimited = ExactPhaseConfig(tie_break_effort=None)
    assert exact_phase._tie_break_budget(unlimited, _first(10_000, 8.0)) == (unlimited.node_limit, None)


@pytest.mark.parametrize("effort", [0.25, 3.0])
def test_the_tie_break_solve_gets_the_budget_from_the_first_cpsat_solve(
    monkeypatch: pytest.MonkeyPatch, effort: float
) -> None:
    """The second program is asked for at most ``effort`` times the first's deterministic seconds
    (at least the floor), and the answer is the same proven one as with no budget."""
    calls: list[dict[str, Any]] = []
    results: list[MilpResult] = []
    real = exact_phase.solve

    def recording(*args: Any, **kwargs: Any) -> tuple[MilpResult, str]:
        calls.append(kwargs)
        result, backend = real(*args, **kwargs)
        results.append(result)
        return result, backend

    monkeypatch.setattr(exact_phase, "solve", recording)
    problem = _problem(MODELS["random forest"]())
    config = SolverConfig(phases=(*SolverConfig().phases, ExactPhaseConfig(backend="cpsat", tie_break_effort=effort)))
    budgeted = explain(problem, config, engine="exact", seed=0)
    assert len(calls) == 2, calls  # the distance's program, then the tie-break's
    first = results[0]
    assert first.deterministic_seconds is not None and first.deterministic_seconds > 0.0
    assert calls[0].get("deterministic_limit") is None  # the proof has only the time limit
    expected = max(exact_phase.TIE_BREAK_FLOOR_DETERMINISTIC, effort * first.deterministic_seconds)
    assert calls[1]["deterministic_limit"] == pytest.approx(expected)
    assert results[1].deterministic_seconds is not None
    assert results[1].deterministic_seconds <= expected * 1.05 + 0.05  # CP-SAT checks its limit often
    monkeypatch.setattr(exact_phase, "solve", real)
    unlimited = SolverConfig(phases=(*SolverConfig().phases, ExactPhaseConfig(backend="cpsat", tie_break_effort=None)))
    whole = explain(problem, unlimited, engine="exact", seed=0)
    assert budgeted.statistics.exact is not None and budgeted.statistics.exact.proven
    assert budgeted.valid and budgeted.score_levels == whole.score_levels


def test_a_zero_or_negative_effort_is_refused_naming_the_field() -> None:
    for effort in (0.0, -1.0):
        with pytest.raises(ValueError, match=r"'tie_break_effort': Input should be greater than 0"):
            ExactPhaseConfig(tie_break_effort=effort)
