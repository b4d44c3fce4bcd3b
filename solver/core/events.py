"""Best-solution events: what listeners hear each time the solve finds a better solution.

A search with one answer (local search, the exact engine, the swarm) announces its new best row.
A multi-objective search (action plans) has a set of best answers, its Pareto front, and
announces the front each time it changes, through the same event and the same listeners: the
event's ``row`` and ``score`` are then the front's lexicographic best (for plans, the cheapest),
and ``front`` holds the whole of it. A listener that knows only single answers (a progress line,
a job's best score) reads a plan search's events unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from counterplan.solver.core.protocol import FloatMatrix


@dataclass(frozen=True)
class ParetoFront:
    """The non-dominated answers of a multi-objective search, in the engine's encoded form."""

    rows: FloatMatrix
    """One encoded answer a row (for plans: the random-key genomes)."""
    objectives: FloatMatrix
    """Each answer's objective vector, every objective minimised (for plans: the total cost, the
    distance, then per feature some action can change, the steps that changed it)."""


@dataclass(frozen=True)
class BestSolutionChanged:
    """A new best solution, in the engine's encoded form."""

    row: FloatMatrix
    score: FloatMatrix
    time_spent: float
    step_index: int
    score_calculation_count: int
    front: ParetoFront | None = None
    """The whole front, when the search keeps one (action plans); None for a single best row."""


BestSolutionListener = Callable[[BestSolutionChanged], None]
"""Hears every new best solution (or changed front), in the solving thread."""
