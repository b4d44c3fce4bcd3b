"""The answer between a program's rejected answer at the goal's end and the one a retry verified.

The exact phase's first program states every goal at its end; when the real model rejects its
answer (an output a rounding short of the end: the solver's tolerance lets a number of 1e10
grid steps go 77 steps past a goal its weight of 1.3e-9 moves), the retry keeps the goal
``goal_epsilon`` inside and its verified answer lies that much farther than the scored problem's
optimum (7e-6 relative there, 3e-5 on a network over numbers of six decimals), which the first
program's bound then cannot prove. The optimum lies between the two answers, so the segment
joining them is searched through the real model: its points on the grid, in two rounds of
:data:`POINTS` rows (one model call each), the second between the last valid point of the first
and the next one. The best valid row is offered to the solve once the real model has confirmed
it alone, as the answer's final check will: on the goal's end exactly, a linear model's output
can differ by an ulp between a batch and a single row (fuzzing: a ridge regression's row valid in
the segment's batch, rejected alone, was taken for the best and its proof reported without an
answer). The phase's proof then reads the best.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from counterplan.planning.score import is_better, is_feasible
from counterplan.planning.space import FloatMatrix
from counterplan.solver.core.scope import Progress, SolverScope

POINTS = 32
"""Rows a round scores: two rounds find the valid end of the segment to 1/1089 of its length."""


def toward_the_end(
    scope: SolverScope, rejected: FloatMatrix, counters: list[Progress], should_stop: Callable[[], bool]
) -> bool:
    """Search the segment from the best answer (valid) to ``rejected`` (a program's answer the
    real model turned away) for a valid answer closer to the goal's end; True when one beat the
    best. Only numbers move along it: when the two rows differ in a category or a missing
    value, there is no segment between them, and nothing is tried."""
    best = scope.best_row.reshape(-1)
    rejected = rejected.reshape(-1)
    space = scope.space
    moved = best != rejected
    if not is_feasible(scope.best_score) or not moved.any() or (moved & ~space.graded).any():
        return False
    improved = False
    low, high = 0.0, 1.0  # the valid end at low; past high, rows were rejected (or it is the rejected row)
    for _ in range(2):
        if should_stop():
            break
        steps = low + (high - low) * np.arange(1, POINTS + 1) / (POINTS + 1)
        rows = space.snap(best + steps[:, None] * (rejected - best))
        scores = scope.scorer.score_final(rows)
        valid = np.flatnonzero([is_feasible(s) for s in scores])
        if _offer_confirmed(scope, rows, scores, valid, counters):
            scope.announce()
            improved = True
        if valid.size == 0:
            high = float(steps[0])
            continue
        last = int(valid[-1])
        low, high = float(steps[last]), float(steps[last + 1]) if last + 1 < POINTS else high
    return improved


CONFIRMED = 3
"""Valid rows of a round checked alone, best first, until one holds."""


def _offer_confirmed(
    scope: SolverScope, rows: FloatMatrix, scores: FloatMatrix, valid: npt.NDArray[np.intp], counters: list[Progress]
) -> bool:
    """Offer the best of the round's ``valid`` rows that the real model confirms alone (at most
    :data:`CONFIRMED` tried, best first); True when it beat the best."""
    order = valid[np.lexsort(scores[valid].T[::-1])[::-1]]  # best first: higher levels first
    for i in order[:CONFIRMED]:
        if not is_better(scores[i], scope.best_score):
            return False
        alone = scope.scorer.score_final(rows[i : i + 1])
        if is_feasible(alone[0]):
            return scope.offer(rows[i : i + 1], alone, counters)
    return False
