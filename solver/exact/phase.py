"""The exact engine as a solver phase: build the program, warm-start it from the best solution so
far, solve it (HiGHS or OR-Tools: :mod:`counterplan.solver.exact.backend`), check every answer through the
real model, and report the proof.

Two programs run when ``lexicographic`` is on: the first minimises the distance (soft level 0);
the second, among answers within the first's optimum (to a 1e-9 relative tolerance), the number
of changed features (soft level 1). Both answers are scored by the real model and the better
score is kept, so rounding in the second program can never make the answer worse.

An answer the program calls valid but the real model rejects (a borderline rounding) is not
returned as valid: the programs are solved again with every goal and threshold margin a hundred
times wider, at most twice; the report says how many such retries there were.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from counterplan.planning.score import is_feasible
from counterplan.planning.scorecard import ScorecardAdapter
from counterplan.planning.structure.errors import NotEncodableError
from counterplan.solver.core.phase import PhaseBase, PhaseScope
from counterplan.solver.core.scope import AnswerSet, SolverScope
from counterplan.solver.exact.backend import solve
from counterplan.solver.exact.config import ExactPhaseConfig
from counterplan.solver.exact.formulation import build
from counterplan.solver.exact.milp import INF, MilpResult
from counterplan.solver.exact.program import Formulation
from counterplan.solver.exact.report import ExactStatistics

RETRIES = 2
"""Wider margins after an answer the real model rejects, at most this many times."""
WIDER = 100.0


class ExactPhase(PhaseBase[ExactPhaseConfig]):
    """Runs one :class:`~counterplan.solver.exact.config.ExactPhaseConfig`."""

    def phase_started(self, phase_scope: PhaseScope) -> None:
        """The swarm's picks give way: the program chooses its own set of answers."""
        scope = phase_scope.solver_scope
        if scope.answer_set is not None and scope.answer_set.kind == "picks":
            scope.answer_set = None

    def _backend(self, scope: SolverScope) -> ExactPhaseConfig:
        """The configuration with ``auto`` resolved for this problem: a credit scorecard goes to
        OR-Tools' SCIP when it is installed (optbinning brings it). Measured on heloc's 12-variable
        scorecard with the paper's objective (236 variables, 106 binaries, 636 rows): SCIP 0.26 s
        (K = 2) and 0.36 s (K = 4), HiGHS 2.0 s and 4.1 s, both proven, the same optimum."""
        from counterplan.solver.exact import ortools_backend  # noqa: PLC0415

        config = self.config
        scorecard = scope.problem is not None and isinstance(scope.problem.model, ScorecardAdapter)
        if config.backend == "auto" and scorecard and ortools_backend.available() is None:
            return config.model_copy(update={"backend": "ortools"})
        return config

    def solve(self, phase_scope: PhaseScope) -> None:
        """Solve the program; offer its verified answers to the scope."""
        scope = phase_scope.solver_scope
        if phase_scope.must_stop():
            return
        if scope.problem is None:
            phase_scope.report(
                "exact",
                ExactStatistics(
                    status="not encodable", proven=False, reason="the exact engine needs the planning problem"
                ),
            )
            return
        self.config = config = self._backend(scope)
        started = time.perf_counter()
        epsilon = config.goal_epsilon
        retries = 0
        while True:
            try:
                # a forest's averaged probability meets a goal exactly at the threshold (the score
                # counts it valid): no margin on it, unless the model rejected an answer
                formulation = build(
                    scope.problem,
                    epsilon,
                    probability_epsilon=epsilon if retries else 0.0,
                    margin_scale=WIDER**retries,
                )
            except NotEncodableError as exc:
                phase_scope.report("exact", ExactStatistics(status="not encodable", proven=False, reason=str(exc)))
                return
            report, verified = self._run(phase_scope, formulation, started)
            out_of_time = scope.terminate_flag.is_set() or (
                scope.wall_limit is not None and scope.time_spent() >= scope.wall_limit
            )
            if verified or report.first.status in ("infeasible", "no solution") or retries >= RETRIES or out_of_time:
                break
            retries += 1
            epsilon *= WIDER
        milp = formulation.milp
        first = report.first
        conservative = formulation.conservative or ""  # a stricter program than the problem: not a proof
        region = scope.problem.trust_region
        enlarged = region.note if region is not None and region.note else ""
        proven = not conservative and (first.status == "infeasible" or (first.status == "optimal" and verified))
        statistics = ExactStatistics(
            status=first.status,
            proven=proven,
            model=formulation.output.description,
            objective=first.objective if first.x is not None else None,
            bound=first.bound if first.status != "infeasible" else None,
            gap=first.gap if first.x is not None else None,
            nodes=report.nodes,
            seconds=time.perf_counter() - started,
            variables=milp.n_vars,
            constraints=len(milp.rows),
            verified=verified,
            retries=retries,
            reason="; ".join(part for part in (conservative, enlarged) if part),
            backend=report.backend,
        )
        phase_scope.report("exact", statistics)
        if scope.answers > 1 and config.answer_set != "pool" and not scope.terminate_flag.is_set():
            self._answer_set(phase_scope, statistics, started)

    def _clock(self, scope: SolverScope, started: float) -> tuple[Callable[[], float | None], Callable[[], bool]]:
        """The seconds the phase has left (None: no limit), and whether it must stop now."""
        config = self.config

        def remaining() -> float | None:
            limits = []
            if config.time_limit_seconds is not None:
                limits.append(config.time_limit_seconds - (time.perf_counter() - started))
            if scope.wall_limit is not None:
                limits.append(scope.wall_limit - scope.time_spent())
            return max(min(limits), 0.0) if limits else None

        def should_stop() -> bool:
            left = remaining()
            return scope.terminate_flag.is_set() or (left is not None and left <= 0.0)

        return remaining, should_stop

    def _answer_set(self, phase_scope: PhaseScope, statistics: ExactStatistics, started: float) -> None:
        """Several answers asked: solve for the set (:mod:`counterplan.solver.exact.answer_set`); the
        set (empty when there is none) is final: no later phase's picks replace it."""
        from counterplan.solver.exact.answer_set import solve_set  # noqa: PLC0415 - only for several answers

        scope = phase_scope.solver_scope
        remaining, should_stop = self._clock(scope, started)
        if not is_feasible(scope.best_score):
            return
        rows, status, reason = solve_set(scope, self.config, remaining, should_stop)
        empty = np.empty((0, scope.space.n_features))
        scope.answer_set = AnswerSet(rows if rows is not None else empty, "final")
        phase_scope.report("exact", statistics.model_copy(update={"answer_set": status, "answer_set_reason": reason}))

    def _run(self, phase_scope: PhaseScope, formulation: Formulation, started: float) -> tuple[_Run, bool]:
        config = self.config
        scope = phase_scope.solver_scope
        phase_scope.start()
        counters = phase_scope.counters
        remaining, should_stop = self._clock(scope, started)

        def offer(x: npt.NDArray[np.float64], final: bool = False) -> bool:
            row = formulation.decode(x).reshape(1, -1)
            scores = scope.scorer.score_final(row) if final else scope.scorer.score(row)
            if scope.offer(row, scores, counters):
                scope.announce()
            return bool(is_feasible(scores[0]))

        start = formulation.assignment(scope.best_row) if is_feasible(scope.best_score) else None

        def incumbent(x: npt.NDArray[np.float64], _objective: float) -> None:
            offer(x)  # each improving incumbent, checked by the model, is a best-solution event

        first, backend = solve(
            formulation.milp,
            config.backend,
            time_limit=remaining(),
            relative_gap=config.relative_gap,
            start=start,
            on_incumbent=incumbent,
            should_stop=should_stop,
            node_limit=config.node_limit,
        )
        nodes = first.nodes
        verified = False
        if first.x is not None:
            verified = offer(first.x, final=True)
            if config.lexicographic and first.status == "optimal" and not should_stop():
                milp = formulation.milp
                tolerance = abs(first.objective) * 1e-9 + 1e-9
                milp.row(formulation.distance, -INF, first.objective + tolerance)
                milp.minimise(formulation.changes)
                second, _ = solve(
                    milp,
                    config.backend,
                    time_limit=remaining(),
                    relative_gap=0.0,
                    start=first.x,
                    should_stop=should_stop,
                    node_limit=config.node_limit,
                )
                nodes += second.nodes
                if second.x is not None:
                    verified = offer(second.x, final=True) or verified
        return _Run(first, nodes, backend), verified


@dataclass(frozen=True)
class _Run:
    """The first program's result (the proof), the nodes of both programs, and the backend that
    solved them."""

    first: MilpResult
    nodes: int
    backend: str
