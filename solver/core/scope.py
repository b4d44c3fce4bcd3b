"""Scope objects: the state of one solve and of one phase, passed to every plug-in.

State travels through scopes, never through module globals: the seeded random generator
lives in the solver scope, so the same seed gives the same search.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from counterplan.solver.core.budget import POOL_MAX_VALUES
from counterplan.solver.core.diversity import best_per_change_set
from counterplan.solver.core.protocol import BatchScorer, EncodedSpace, FloatMatrix
from counterplan.solver.core.scores import HARD_LEVELS, best_first, best_row, is_better


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


@dataclass
class SolverScope:
    """Everything one solve shares: the problem, the generator, the best so far, counters."""

    space: EncodedSpace
    scorer: BatchScorer
    rng: np.random.Generator
    best_row: FloatMatrix
    best_score: FloatMatrix
    progress: Progress
    terminate_flag: threading.Event = field(default_factory=threading.Event)
    termination_reason: str = ""
    phase_index: int = -1
    starts: list[FloatMatrix] = field(default_factory=list)
    """Starting points a construction phase leaves for the next local-search phase's walkers."""
    pool: list[tuple[FloatMatrix, FloatMatrix]] | None = None
    """When collecting: every feasible row scored, with its score, for choosing several answers."""

    pool_values: int = 0
    """Values the pool holds."""
    problem: Any = None
    """The planning problem, for engines that read the model's structure (the exact engine)."""
    wall_limit: float | None = None
    """Seconds after the solve's start when its termination ends it whatever else happens."""
    exact: Any = None
    """The exact engine's report, when it ran (:class:`counterplan.solver.core.result.ExactStatistics`)."""
    answers: int = 1
    """How many answers the solve wants."""
    answer_rows: FloatMatrix | None = None
    """An engine's own set of answers, best first: the exact engine's verified set when it solved
    for one, or the swarm's picks per cluster (``answer_source`` says which)."""
    answer_source: str = ""
    swarm: Any = None
    """The particle swarm's report, when it ran (:class:`counterplan.solver.core.result.SwarmStatistics`)."""
    deferred: list[tuple[FloatMatrix, FloatMatrix]] = field(default_factory=list)
    """Scored rows a phase set aside, offered before the next boundary polish (or at the end)."""

    def _compact_pool(self) -> None:
        """Keep the pool within :data:`~counterplan.solver.core.budget.POOL_MAX_VALUES`: each row once, the three
        best of each set of changed features (all that choosing answers ever reads), in their
        order; past half the cap, the best-scored of those."""
        assert self.pool is not None
        rows = np.vstack([p[0] for p in self.pool])
        scores = np.vstack([p[1] for p in self.pool])
        keep = np.sort(np.asarray(best_per_change_set(rows, scores, self.space.original, rows.shape[0]), dtype=np.intp))
        room = max(POOL_MAX_VALUES // (2 * max(rows.shape[1], 1)), 1)
        if keep.size > room:
            keep = np.sort(keep[best_first(scores[keep])[:room]])
        self.pool = [(rows[keep], scores[keep])]
        self.pool_values = int(keep.size) * rows.shape[1]

    def time_spent(self) -> float:
        """Seconds since the solve started."""
        return self.progress.elapsed()

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
                self.pool.append((X[feasible].copy(), scores[feasible].copy()))
                self.pool_values += int(feasible.sum()) * X.shape[1]
                if self.pool_values > POOL_MAX_VALUES:
                    self._compact_pool()
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
