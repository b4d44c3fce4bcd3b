"""Best-solution events: what listeners hear each time the solve finds a better solution."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from counterplan.solver.core.protocol import FloatMatrix


@dataclass(frozen=True)
class BestSolutionChanged:
    """A new best solution, in the engine's encoded form."""

    row: FloatMatrix
    score: FloatMatrix
    time_spent: float
    step_index: int
    score_calculation_count: int


BestSolutionListener = Callable[[BestSolutionChanged], None]
"""Hears every new best solution, in the solving thread."""
