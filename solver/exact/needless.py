"""Drop the needless changes of the exact engine's answer through the real model.

A program proves its optimum over values on each feature's grid, and a retried one with the
goal kept ``goal_epsilon`` inside its threshold. An answer of the scored problem may need less:
a change that only bought that epsilon (an original off its grid moved onto it) is needless,
and the answer without it is valid and scores better. So before an answer is called optimal, each of its
changed features is reverted to the original value, all of them in one model call per round,
and the best revert that stays valid and scores better (by the score calculator) is kept;
rounds go on while one does.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from counterplan.planning.score import best_row, is_better, is_feasible
from counterplan.solver.core.scope import Progress, SolverScope


def drop_needless_changes(scope: SolverScope, counters: list[Progress], should_stop: Callable[[], bool]) -> int:
    """Revert the best answer's needless changes (see the module); returns how many were
    dropped. The first round runs even when the phase must stop (one model call, as the final
    check of an answer); later rounds only while it need not."""
    dropped = 0
    original = scope.space.original
    while is_feasible(scope.best_score) and (dropped == 0 or not should_stop()):
        best = scope.best_row.reshape(-1)
        changed = np.flatnonzero(best != original)
        if changed.size == 0:
            break
        reverts = np.repeat(best.reshape(1, -1), changed.size, axis=0)
        reverts[np.arange(changed.size), changed] = original[changed]
        scores = scope.scorer.score_final(reverts)
        top = best_row(scores)
        if not (is_feasible(scores[top]) and is_better(scores[top], scope.best_score)):
            break
        if scope.offer(reverts[top : top + 1], scores[top : top + 1], counters):
            scope.announce()
        dropped += 1
    return dropped
