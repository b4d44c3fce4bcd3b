"""The feature-scan construction phase: every mutable feature alone, over its whole domain.

One batched call scores each mutable feature set to each of ``grid_size`` values spread over
its domain (every other category; the other boolean), the other features kept as they are.
This finds the single-feature counterfactuals, or the features that move the prediction
most, at the cost of one model call. The best row becomes the solution; the best row of each
of the most promising features becomes a starting point for the next local-search phase, so
its walkers begin in different basins.
"""

from __future__ import annotations

import numpy as np

from solver.config import FeatureScanPhaseConfig
from solver.events import EngineListener
from solver.phase import announce
from solver.protocol import FloatMatrix
from solver.scope import Progress, SolverScope
from solver.termination import Termination

_MAX_ROWS_PER_CALL = 4096


class FeatureScanPhase:
    """Runs one feature scan."""

    def __init__(self, config: FeatureScanPhaseConfig) -> None:
        self.config = config

    def candidates(self, scope: SolverScope) -> tuple[FloatMatrix, np.ndarray]:
        """The scan's rows and, for each, the feature it changes."""
        space = scope.space
        base = scope.best_row
        rows: list[FloatMatrix] = []
        owners: list[np.ndarray] = []
        for j in np.flatnonzero(space.mutable):
            low, high = space.lower[j], space.upper[j]
            if space.nominal[j]:
                values = np.arange(low, high + 1.0)
            else:
                values = np.linspace(low, high, self.config.grid_size)
                if space.integral[j]:
                    values = np.unique(np.rint(values))
            values = values[values != base[j]]
            block = np.repeat(base.reshape(1, -1), values.size, axis=0)
            block[:, j] = values
            rows.append(block)
            owners.append(np.full(values.size, j))
        if not rows:
            return np.empty((0, base.size)), np.empty(0, dtype=np.intp)
        return np.vstack(rows), np.concatenate(owners)

    def solve(self, scope: SolverScope, solver_termination: Termination, listeners: list[EngineListener]) -> None:
        """Score the scan in batched calls and leave starting points for the next phase."""
        if solver_termination.evaluate(scope.progress)[0] or scope.terminate_flag.is_set():
            return
        X, owners = self.candidates(scope)
        if X.shape[0] == 0:
            return
        scores = np.vstack(
            [scope.scorer.score(X[i : i + _MAX_ROWS_PER_CALL]) for i in range(0, X.shape[0], _MAX_ROWS_PER_CALL)]
        )
        phase = Progress.starting(scope.best_score)
        if scope.offer(X, scores, [scope.progress, phase]):
            announce(scope, listeners)
        order = np.lexsort(scores.T[::-1])[::-1]  # best first
        _, first = np.unique(owners[order], return_index=True)
        per_feature = order[np.sort(first)]  # each feature's best row, best features first
        scope.starts = [X[i].copy() for i in per_feature]
