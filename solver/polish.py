"""The boundary-polish phase: shave a counterfactual down to the decision boundary.

A local search gets close to the boundary by chance; this phase gets there deterministically.
Each iteration scores, in one batched call, the best solution with

* every changed number set to each point of a grid between its original and current value,
* all changed numbers moved back together by each fraction of the same grid,
* each changed feature reverted,

and keeps the best row. Each iteration divides the remaining gap by the grid size, so a few
iterations reach the boundary to high precision; the phase stops early when an iteration
finds nothing better.
"""

from __future__ import annotations

import numpy as np

from solver.config import BoundaryPolishPhaseConfig
from solver.events import EngineListener
from solver.phase import announce
from solver.protocol import FloatMatrix
from solver.scope import Progress, SolverScope
from solver.termination import Termination


class BoundaryPolishPhase:
    """Runs one boundary polish."""

    def __init__(self, config: BoundaryPolishPhaseConfig) -> None:
        self.config = config

    def candidates(self, scope: SolverScope) -> FloatMatrix:
        """The rows one iteration scores around the current best."""
        space = scope.space
        best = scope.best_row
        changed = np.flatnonzero((best != space.original) & space.mutable)
        if changed.size == 0:
            return np.empty((0, best.size))
        fractions = np.linspace(0.0, 1.0, self.config.grid_size + 1)[1:-1]  # strictly between
        numeric = changed[~space.nominal[changed]]
        blocks: list[FloatMatrix] = []
        gap = space.original - best  # moving by a fraction t of the gap goes back towards the original
        for j in numeric:
            block = np.repeat(best.reshape(1, -1), fractions.size, axis=0)
            block[:, j] = best[j] + fractions * gap[j]
            blocks.append(block)
        if numeric.size > 1:
            joint = best + np.outer(fractions, np.where(np.isin(np.arange(best.size), numeric), gap, 0.0))
            blocks.append(joint)
        reverts = np.repeat(best.reshape(1, -1), changed.size, axis=0)
        reverts[np.arange(changed.size), changed] = space.original[changed]
        blocks.append(reverts)
        X = np.vstack(blocks)
        X = np.where(space.integral, np.rint(X), X)
        return np.asarray(X[(best != X).any(axis=1)], dtype=np.float64)

    def solve(self, scope: SolverScope, solver_termination: Termination, listeners: list[EngineListener]) -> None:
        """Iterate until an iteration improves nothing, the limit, or the solver's termination."""
        phase = Progress.starting(scope.best_score)
        for _ in range(self.config.max_iterations):
            if solver_termination.evaluate(scope.progress)[0] or scope.terminate_flag.is_set():
                return
            X = self.candidates(scope)
            if X.shape[0] == 0:
                return
            if not scope.offer(X, scope.scorer.score(X), [scope.progress, phase]):
                return
            announce(scope, listeners)
