"""The solver: runs its phases in sequence on one problem, from the original instance.

It knows the problem only through :mod:`counterplan.solver.core.protocol` and the phases only
through :mod:`counterplan.solver.core.phase`: each configured phase is built by its type's factory
(:mod:`counterplan.solver.core.registry`), with no dispatch on types here (as Timefold's
``AbstractSolver.runPhases``). The solver-level termination bounds every phase; once it ends the
search, the remaining search phases are skipped and only the closing phases run (choosing the
answers). :meth:`Solver.terminate_early` stops the solve from another thread, and the best
solution found so far comes back.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from counterplan.solver.core.config import SolverConfig
from counterplan.solver.core.events import BestSolutionChanged, BestSolutionListener
from counterplan.solver.core.phase import Phase, PhaseScope, build_phase, factory_for
from counterplan.solver.core.pool import Pool
from counterplan.solver.core.protocol import BatchScorer, EncodedSpace, FloatMatrix
from counterplan.solver.core.scope import AnswerSet, Progress, SolverScope
from counterplan.solver.core.termination import TERMINATED_EARLY, Termination, wall_limit

if TYPE_CHECKING:
    from counterplan.planning.problem import CounterfactualProblem


@dataclass(frozen=True)
class SolveOutcome:
    """The solve's answer: the best row and score, and what the search spent."""

    best_row: FloatMatrix
    best_score: FloatMatrix
    step_count: int
    score_calculation_count: int
    model_call_count: int
    time_spent: float
    termination_reason: str
    best_step_index: int
    best_time: float
    pool: tuple[FloatMatrix, FloatMatrix] | None = None
    """When collected: distinct feasible rows and their scores."""
    answer_set: AnswerSet | None = None
    """An engine's own set of answers, when one chose a set (see :class:`AnswerSet`)."""
    reports: dict[str, Any] = field(default_factory=dict)
    """Each phase type's report, by type."""


class Solver:
    """Solves one encoded problem with a :class:`~counterplan.solver.core.config.SolverConfig`.

    Parameters
    ----------
    config:
        Phases, termination and random seed.
    listeners:
        Called on every new best solution, in the solving thread.
    collect_pool:
        Keep every feasible row scored (for choosing several answers).
    answers:
        How many answers the caller wants (the exact engine then solves for a set).
    closing:
        Phases run after the configured ones, even when a termination ended the search (the
        answers phase): built by the caller, read by the caller after the solve.
    """

    def __init__(
        self,
        config: SolverConfig,
        listeners: list[BestSolutionListener] | None = None,
        collect_pool: bool = False,
        answers: int = 1,
        closing: Sequence[Phase] = (),
    ) -> None:
        self.config = config
        self.listeners: list[BestSolutionListener] = list(listeners or [])
        self.collect_pool = collect_pool
        self.answers = answers
        self.closing = list(closing)
        self._terminate = threading.Event()

    def add_listener(self, listener: BestSolutionListener) -> None:
        """Hear every new best solution."""
        self.listeners.append(listener)

    def terminate_early(self) -> None:
        """Ask a running solve to stop at its next step; safe from any thread."""
        self._terminate.set()

    @property
    def terminate_requested(self) -> bool:
        """True once :meth:`terminate_early` was called."""
        return self._terminate.is_set()

    def solve(
        self,
        space: EncodedSpace,
        scorer: BatchScorer,
        started: float | None = None,
        problem: CounterfactualProblem | None = None,
    ) -> SolveOutcome:
        """Search from the original instance until the termination says stop.

        ``started`` (a ``perf_counter`` reading) is when the caller's solve began, so a time limit
        also covers what it did first (setting up thread pools, scoring the original).
        """
        start = space.original.reshape(1, -1).copy()
        start_score = scorer.score(start)[0]
        phases = [build_phase(c) for c in self.config.phases] + self.closing
        pooled = self.collect_pool or any(factory_for(c).collects_pool(c) for c in self.config.phases)
        best_at = [0, 0.0]  # the step and the time of the last new best

        def remember(event: BestSolutionChanged) -> None:
            best_at[:] = [event.step_index, event.time_spent]

        scope = SolverScope(
            space=space,
            scorer=scorer,
            rng=np.random.default_rng(self.config.random_seed),
            best_row=start[0].copy(),
            best_score=start_score.copy(),
            original_score=start_score.copy(),
            progress=Progress.starting(start_score, started),
            terminate_flag=self._terminate,
            listeners=[remember, *self.listeners],
            pool=Pool(space.original) if pooled else None,
            problem=problem,
            wall_limit=wall_limit(self.config.termination),
            answers=self.answers,
        )
        scope.progress.score_calculation_count = 1
        initial = BestSolutionChanged(start[0].copy(), start_score.copy(), scope.time_spent(), 0, 1)
        for listener in scope.listeners:
            listener(initial)
        self._run(phases, scope)
        return SolveOutcome(
            best_row=scope.best_row,
            best_score=scope.best_score,
            step_count=scope.progress.step_count,
            score_calculation_count=scorer.calculation_count,
            model_call_count=scorer.model_call_count,
            time_spent=scope.time_spent(),
            termination_reason=scope.termination_reason or "all phases ended",
            best_step_index=int(best_at[0]),
            best_time=float(best_at[1]),
            pool=scope.pool.merged(start[0], start_score) if self.collect_pool and scope.pool is not None else None,
            answer_set=scope.answer_set,
            reports=dict(scope.reports),
        )

    def _run(self, phases: list[Phase], scope: SolverScope) -> None:
        """Every phase's lifecycle, in order; search phases stop once a termination ends the search."""
        for phase in phases:
            phase.solving_started(scope)
        termination = Termination(self.config.termination)
        own = [c.own_termination for c in self.config.phases] + [None] * len(self.closing)
        searching = True
        for index, (phase, limit) in enumerate(zip(phases, own, strict=True)):
            if not phase.closing:
                if not searching:
                    continue
                if self._terminate.is_set():
                    scope.termination_reason, searching = TERMINATED_EARLY, False
                    continue
            scope.phase_index = index
            phase_scope = PhaseScope(scope, index, termination, Termination(limit) if limit is not None else None)
            phase.phase_started(phase_scope)
            phase_scope.start()
            phase.solve(phase_scope)
            phase.phase_ended(phase_scope)
            if not phase.closing and scope.termination_reason and not scope.termination_reason.startswith("phase "):
                searching = False
        scope.offer_deferred()
        for phase in phases:
            phase.solving_ended(scope)
