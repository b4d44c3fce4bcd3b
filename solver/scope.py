"""Scope objects: the state of one solve and of one phase, passed to every plug-in.

State travels through scopes, never through module globals: the seeded random generator
lives in the solver scope, so the same seed gives the same search.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import numpy as np

from solver.protocol import BatchScorer, EncodedSpace, FloatMatrix


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
    def starting(cls, best_score: FloatMatrix) -> Progress:
        """Counters that start now, at ``best_score``."""
        now = time.perf_counter()
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

    def time_spent(self) -> float:
        """Seconds since the solve started."""
        return self.progress.elapsed()


@dataclass
class Walker:
    """One independent search of a local-search phase: its current solution and score."""

    index: int
    current: FloatMatrix
    current_score: FloatMatrix
    step_count: int = 0
