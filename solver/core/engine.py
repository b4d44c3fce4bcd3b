"""The solver: runs its phases in sequence on one problem, from the original instance.

It knows the problem only through :mod:`counterplan.solver.core.protocol`. The solver-level termination
bounds every phase; :meth:`Solver.terminate_early` stops the solve from another thread, and
the best solution found so far comes back.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from counterplan.solver.core.config import (
    BoundaryPolishPhaseConfig,
    ExactPhaseConfig,
    FeatureScanPhaseConfig,
    SolverConfig,
    SwarmPhaseConfig,
)
from counterplan.solver.core.events import BestSolutionChanged, EngineListener
from counterplan.solver.core.protocol import BatchScorer, EncodedSpace, FloatMatrix
from counterplan.solver.core.scope import Progress, SolverScope
from counterplan.solver.core.termination import Termination, wall_limit
from counterplan.solver.local.phase import announce

if TYPE_CHECKING:
    from counterplan.solver.exact.phase import ExactPhase
    from counterplan.solver.swarm.phase import SwarmPhase
from counterplan.solver.local.phase import LocalSearchPhase
from counterplan.solver.local.polish import BoundaryPolishPhase
from counterplan.solver.local.scan import FeatureScanPhase


@dataclass(frozen=True)
class SolveOutcome:
    """The engine's answer: the best row and score, and what the search spent."""

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
    exact: Any = None
    """The exact engine's report, when it ran."""
    answer_rows: FloatMatrix | None = None
    """When several answers were asked and an engine chose a set: the exact engine's verified
    rows, or the swarm's picks per cluster, best first (``answer_source`` says which)."""
    answer_source: str = ""
    swarm: Any = None
    """The particle swarm's report, when it ran."""


class Solver:
    """Solves one encoded problem with a :class:`~counterplan.solver.core.config.SolverConfig`.

    Parameters
    ----------
    config:
        Phases, termination and random seed.
    listeners:
        Called on every new best solution, in the solving thread.
    """

    def __init__(
        self,
        config: SolverConfig,
        listeners: list[EngineListener] | None = None,
        collect_pool: bool = False,
        answers: int = 1,
    ) -> None:
        self.config = config
        self.listeners: list[EngineListener] = list(listeners or [])
        self.collect_pool = collect_pool
        self.answers = answers
        """How many answers the caller wants (the exact engine then solves for a set)."""
        self._terminate = threading.Event()

    def add_listener(self, listener: EngineListener) -> None:
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
        self, space: EncodedSpace, scorer: BatchScorer, started: float | None = None, problem: Any = None
    ) -> SolveOutcome:
        """Search from the original instance until the termination says stop.

        ``started`` (a ``perf_counter`` reading) is when the caller's solve began, so a time limit
        also covers what it did first (setting up thread pools, scoring the original).
        """
        start = space.original.reshape(1, -1).copy()
        start_score = scorer.score(start)[0]
        scope = SolverScope(
            space=space,
            scorer=scorer,
            rng=np.random.default_rng(self.config.random_seed),
            best_row=start[0].copy(),
            best_score=start_score.copy(),
            progress=Progress.starting(start_score, started),
            terminate_flag=self._terminate,
            pool=[] if self.collect_pool or _polishes_routes(self.config) else None,
            problem=problem,
            wall_limit=wall_limit(self.config.termination),
            answers=self.answers,
        )
        scope.progress.score_calculation_count = 1
        best_time = 0.0
        best_step = 0

        def remember(event: BestSolutionChanged) -> None:
            nonlocal best_time, best_step
            best_time, best_step = event.time_spent, event.step_index

        listeners = [remember, *self.listeners]
        initial = BestSolutionChanged(start[0].copy(), start_score.copy(), scope.time_spent(), 0, 1)
        for listener in listeners:
            listener(initial)
        termination = Termination(self.config.termination)
        for index, phase_config in enumerate(self.config.phases):
            scope.phase_index = index
            if self._terminate.is_set():
                scope.termination_reason = "terminated early"
                break
            if isinstance(phase_config, BoundaryPolishPhaseConfig):
                _offer_deferred(scope, listeners)
            if isinstance(phase_config, ExactPhaseConfig) and scope.answer_source == "swarm":
                scope.answer_rows, scope.answer_source = None, ""  # the program chooses its own set
            phase: FeatureScanPhase | LocalSearchPhase | BoundaryPolishPhase | ExactPhase | SwarmPhase
            if isinstance(phase_config, SwarmPhaseConfig):
                from counterplan.solver.swarm.phase import SwarmPhase  # noqa: PLC0415 - loads with the first swarm phase

                phase = SwarmPhase(phase_config)
            elif isinstance(phase_config, ExactPhaseConfig):
                from counterplan.solver.exact.phase import ExactPhase  # noqa: PLC0415 - loads HiGHS only when asked

                phase = ExactPhase(phase_config)
            elif isinstance(phase_config, FeatureScanPhaseConfig):
                phase = FeatureScanPhase(phase_config)
            elif isinstance(phase_config, BoundaryPolishPhaseConfig):
                phase = BoundaryPolishPhase(phase_config)
            else:
                phase = LocalSearchPhase(phase_config)
            phase.solve(scope, termination, listeners)
            if scope.termination_reason and not scope.termination_reason.startswith("phase "):
                break
        _offer_deferred(scope, listeners)
        return SolveOutcome(
            best_row=scope.best_row,
            best_score=scope.best_score,
            step_count=scope.progress.step_count,
            score_calculation_count=scorer.calculation_count,
            model_call_count=scorer.model_call_count,
            time_spent=scope.time_spent(),
            termination_reason=scope.termination_reason or "all phases ended",
            best_step_index=best_step,
            best_time=best_time,
            pool=_merge_pool(scope.pool, start[0], start_score) if self.collect_pool else None,
            exact=scope.exact,
            answer_rows=scope.answer_rows,
            answer_source=scope.answer_source,
            swarm=scope.swarm,
        )


def _offer_deferred(scope: SolverScope, listeners: list[EngineListener]) -> None:
    """Offer the rows a phase set aside (uncounted: their scoring was a step already)."""
    for rows, scores in scope.deferred:
        if scope.offer(rows, scores, [], count=False):
            announce(scope, listeners)
    scope.deferred.clear()


def _polishes_routes(config: SolverConfig) -> bool:
    """A boundary polish with several starts reads the pool of feasible rows."""
    return any(isinstance(p, BoundaryPolishPhaseConfig) and p.starts > 1 for p in config.phases)


def _merge_pool(
    pool: list[tuple[FloatMatrix, FloatMatrix]] | None, start: FloatMatrix, start_score: FloatMatrix
) -> tuple[FloatMatrix, FloatMatrix] | None:
    """Distinct feasible rows (the start too, when feasible), each once."""
    if pool is None:
        return None
    parts = [*pool]
    if (start_score[:3] >= 0.0).all():
        parts.append((start.reshape(1, -1), start_score.reshape(1, -1)))
    if not parts:
        return np.empty((0, start.size)), np.empty((0, start_score.size))
    rows = np.vstack([p[0] for p in parts])
    scores = np.vstack([p[1] for p in parts])
    _, first = np.unique(rows, axis=0, return_index=True)
    return rows[first], scores[first]
