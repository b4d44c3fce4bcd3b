"""The solver scope: the state of one solve, passed to every phase and plug-in.

State travels through scopes, never through module globals: the seeded random generator lives
here, so the same seed gives the same search. The best solution, the counters, the pool of
feasible rows, the starting points a phase leaves the next one, each phase's report and an
engine's own set of answers all live here, typed.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from counterplan.planning.score import HARD_LEVELS, best_row, is_better
from counterplan.solver.core.events import BestSolutionChanged, BestSolutionListener
from counterplan.solver.core.pool import Pool
from counterplan.solver.core.protocol import BatchScorer, EncodedSpace, FloatMatrix

if TYPE_CHECKING:
    from counterplan.planning.problem import CounterfactualProblem


CALL_MARGIN_SECONDS = 0.05
"""Room kept beside the expected model call when deciding whether one more fits before a limit."""


def no_time_for_a_call(spent: float, limit: float | None, call_seconds: float) -> bool:
    """A model call started now (``spent`` seconds in, expected to take ``call_seconds``) would
    not end before ``limit``: a deadline is a promise, so such a call is not started and the
    solve answers with its best so far instead (within one model call of the limit at worst,
    when a call takes longer than the ones before it)."""
    return limit is not None and spent + call_seconds + CALL_MARGIN_SECONDS > limit


@dataclass
class Progress:
    """Counters that terminations read; one for the solve, one per phase."""

    start_time: float
    best_score: FloatMatrix
    step_count: int = 0
    best_step_index: int = 0
    last_improvement_time: float = 0.0
    score_calculation_count: int = 0
    move_count: int = 0

    @classmethod
    def starting(cls, best_score: FloatMatrix, started: float | None = None) -> Progress:
        """Counters that start now (or at ``started``, a ``perf_counter`` reading), at ``best_score``."""
        now = time.perf_counter() if started is None else started
        return cls(start_time=now, best_score=best_score.copy(), last_improvement_time=now)

    def elapsed(self) -> float:
        """Seconds since these counters started."""
        return time.perf_counter() - self.start_time


@dataclass(frozen=True)
class AnswerSet:
    """An engine's own set of answers, best first, for the answers phase.

    ``final``: a set solved as a whole (the exact engine's, each row verified): taken as it is.
    ``picks``: representatives of distinct regions (the swarm's picks per cluster), refined and
    topped up as the pool's answers are.
    """

    rows: FloatMatrix
    kind: Literal["final", "picks"]


@dataclass
class SolverScope:
    """Everything one solve shares: the problem, the generator, the best so far, counters."""

    space: EncodedSpace
    """The encoded space searched (a phase may replace it by a view that knows more of the model,
    as the feature scan does with the model's split values; the problem's own space never changes)."""
    scorer: BatchScorer
    rng: np.random.Generator
    best_row: FloatMatrix
    best_score: FloatMatrix
    progress: Progress
    terminate_flag: threading.Event = field(default_factory=threading.Event)
    termination_reason: str = ""
    phase_index: int = -1
    listeners: list[BestSolutionListener] = field(default_factory=list)
    """Told of every new best solution (:meth:`announce`)."""
    starts: list[FloatMatrix] = field(default_factory=list)
    """Starting points a phase leaves for the next phase (local search's walkers, the swarm's seeds)."""
    pool: Pool | None = None
    """When collecting: every feasible row scored, with its score, for choosing several answers."""
    original_score: FloatMatrix | None = None
    """The original row's score (the first the solve computed)."""
    problem: CounterfactualProblem | None = None
    """The planning problem, for phases that read the model's structure (the exact engine, the
    scan's split values, the swarm's ranking); None for a bare encoded space."""
    wall_limit: float | None = None
    """Seconds after the solve's start when its termination ends it whatever else happens."""
    answers: int = 1
    """How many answers the solve wants."""
    answer_set: AnswerSet | None = None
    """An engine's own set of answers, best first (the exact engine's verified set when it solved
    for one, or the swarm's picks per cluster)."""
    reports: dict[str, Any] = field(default_factory=dict)
    """Each phase type's report (:class:`~counterplan.solver.core.phase.PhaseReport`), by type."""
    deferred: list[tuple[FloatMatrix, FloatMatrix]] = field(default_factory=list)
    """Scored rows a phase set aside, offered before the next phase that refines the best (or at the end)."""
    scanned: tuple[FloatMatrix, FloatMatrix] | None = None
    """The feature scan's single-feature rows of the original and their scores (as scored): the
    boundary polish's own single-feature rows take the scores of those it shares with them."""

    def time_spent(self) -> float:
        """Seconds since the solve started."""
        return self.progress.elapsed()

    def out_of_time(self) -> bool:
        """The solve's wall limit has passed, or will have before one more model call could end
        (a slow model is stopped before its limit, not one call after it)."""
        return no_time_for_a_call(self.time_spent(), self.wall_limit, self.scorer.call_seconds)

    def stop_requested(self) -> bool:
        """The solve must wind down now: its wall limit has passed or a stop was asked for (work
        after the search, choosing the answers, stops calling the model then)."""
        return self.out_of_time() or self.terminate_flag.is_set()

    def announce(self) -> None:
        """Tell every listener about the scope's new best solution."""
        event = BestSolutionChanged(
            self.best_row.copy(),
            self.best_score.copy(),
            self.time_spent(),
            self.progress.step_count,
            self.scorer.calculation_count,
        )
        for listener in self.listeners:
            listener(event)

    def offer(self, X: FloatMatrix, scores: FloatMatrix, counters: list[Progress], *, count: bool = True) -> bool:
        """Count a scored batch as a step (unless ``count`` is False: the caller counted it); take
        its best row if it beats the best. True when it did."""
        if count:
            count_step(counters, X.shape[0])
        if X.shape[0] == 0:
            return False
        if self.pool is not None:
            feasible = (scores[:, :HARD_LEVELS] >= 0.0).all(axis=1)
            if feasible.any():
                self.pool.add(X[feasible], scores[feasible])
        if scores[:, 0].max() < self.best_score[0]:  # every row's first level is worse: no row beats
            return False
        top = best_row(scores)
        if not is_better(scores[top], self.best_score):
            return False
        self.best_row = X[top].copy()
        self.best_score = scores[top].copy()
        now = time.perf_counter()
        for progress in counters:
            progress.best_score = self.best_score.copy()
            progress.best_step_index = progress.step_count
            progress.last_improvement_time = now
        return True

    def offer_deferred(self) -> None:
        """Offer the rows a phase set aside (uncounted: their scoring was a step already)."""
        for rows, scores in self.deferred:
            if self.offer(rows, scores, [], count=False):
                self.announce()
        self.deferred.clear()


def count_step(counters: list[Progress], calculations: int) -> None:
    """One step that scored ``calculations`` candidates, on every counter."""
    for progress in counters:
        progress.step_count += 1
        progress.score_calculation_count += calculations
        progress.move_count += calculations


@dataclass
class Walker:
    """One independent search of a local-search phase: its current solution and score."""

    index: int
    current: FloatMatrix
    current_score: FloatMatrix
    step_count: int = 0
