"""The boundary-polish phase: shave a counterfactual down to the decision boundary.

A local search gets close to the boundary by chance; this phase gets there deterministically,
as a batched many-way bisection. Each iteration scores, in one call, the best solution with

* every changed number set to each point of a grid between its current value and the nearest
  value known to be on the wrong side of the boundary (at first, its original value),
* all changed numbers moved back together by each fraction of a grid,
* each changed feature reverted,

and keeps the best row. When the winner moved one number, the grid point just past it
becomes that number's new bracket, so the next grid is ``grid_size`` times finer. It stops
after ``max_iterations`` or at the first iteration that finds nothing better.

With ``starts`` above 1, the same calls also refine the best feasible row of each of the next
``starts - 1`` distinct sets of changed features the solve has found (reverts and a grid per
changed number, :class:`counterplan.solver.core.refine.Refiner`): a route the search left coarse, or one carrying
a needless change, can shave down below the polished best. Those rows ride in the best's calls
while it still improves; after that, iterations go on for them alone, up to ``max_iterations``.
"""

from __future__ import annotations

import numpy as np

from counterplan.planning.score import best_row
from counterplan.solver.core.phase import PhaseBase, PhaseScope
from counterplan.solver.core.pool import best_per_change_set
from counterplan.solver.core.protocol import FloatMatrix, score_batches
from counterplan.solver.core.refine import Refiner
from counterplan.solver.core.scope import Progress, SolverScope, count_step
from counterplan.solver.local.config import BoundaryPolishPhaseConfig

_JOINT = -1
_REVERT = -2


class BoundaryPolishPhase(PhaseBase[BoundaryPolishPhaseConfig]):
    """Runs one boundary polish."""

    def phase_started(self, phase_scope: PhaseScope) -> None:
        """Rows an earlier phase set aside (the scan's split chain) compete for the best first."""
        phase_scope.solver_scope.offer_deferred()

    def candidates(self, scope: SolverScope, bracket: FloatMatrix) -> tuple[FloatMatrix, np.ndarray]:
        """One iteration's rows around the best, and which feature each moves (or joint/revert).

        ``bracket[j]`` is the value of feature ``j`` known to be past the boundary.
        """
        space = scope.space
        best = scope.best_row
        changed = np.flatnonzero((best != space.original) & space.mutable)
        if changed.size == 0:
            return np.empty((0, best.size)), np.empty(0, dtype=np.intp)
        fractions = np.linspace(0.0, 1.0, self.config.grid_size + 1)[1:-1]  # strictly between
        numeric = changed[space.graded[changed]]
        grid_owner = np.repeat(numeric, fractions.size)  # every changed number, each point of its grid
        grid = np.repeat(best.reshape(1, -1), grid_owner.size, axis=0)
        start = best[grid_owner]
        grid[np.arange(grid_owner.size), grid_owner] = start + np.tile(fractions, numeric.size) * (
            bracket[grid_owner] - start
        )
        blocks: list[FloatMatrix] = [grid]
        owners: list[np.ndarray] = [grid_owner]
        if numeric.size > 1:
            gap = np.zeros_like(best)
            gap[numeric] = space.original[numeric] - best[numeric]
            blocks.append(best + np.outer(fractions, gap))
            owners.append(np.full(fractions.size, _JOINT))
        reverts = np.repeat(best.reshape(1, -1), changed.size, axis=0)
        reverts[np.arange(changed.size), changed] = space.original[changed]
        blocks.append(reverts)
        owners.append(np.full(changed.size, _REVERT))
        X = np.vstack(blocks)
        X = space.snap(X)
        keep = (best != X).any(axis=1)
        return np.asarray(X[keep], dtype=np.float64), np.concatenate(owners)[keep]

    def solve(self, phase_scope: PhaseScope) -> None:
        """Iterate until an iteration improves nothing, the limit, or the solver's termination.

        With ``starts`` above 1, the other routes' refinement (:class:`counterplan.solver.core.refine.Refiner`)
        shares each iteration's model call; its rows are offered at the end.
        """
        scope = phase_scope.solver_scope
        counters = phase_scope.counters
        routes = self._routes(scope)
        bracket = scope.space.original.copy()
        polishing = True
        for _ in range(self.config.max_iterations):
            if phase_scope.must_stop():
                break
            X, owners = self.candidates(scope, bracket) if polishing else (np.empty((0, bracket.size)), None)
            polishing = X.shape[0] > 0
            others = routes.candidates() if routes is not None and routes.active else np.empty((0, bracket.size))
            if not polishing and others.shape[0] == 0:
                break
            all_scores = score_batches(scope.scorer, np.vstack([X, others]))
            count_step(counters, X.shape[0] + others.shape[0])
            scores = all_scores[: X.shape[0]]
            if others.shape[0] and routes is not None:
                routes.update(all_scores[X.shape[0] :])
            if polishing and owners is not None:
                bracket, polishing = self._step(scope, counters, X=X, owners=owners, scores=scores, bracket=bracket)
        if routes is not None and scope.offer(routes.rows, routes.scores, counters, count=False):
            scope.announce()

    def _routes(self, scope: SolverScope) -> Refiner | None:
        """A refiner of the best row of each of the next ``starts - 1`` change sets found feasible."""
        if self.config.starts < 2 or not scope.pool:
            return None
        rows, scores = scope.pool.rows()
        chosen = best_per_change_set(rows, scores, scope.space.original, self.config.starts, per_set=1)
        rows, scores = rows[chosen], scores[chosen]
        others = ~(rows == scope.best_row).all(axis=1)
        if not others.any():
            return None
        return Refiner(rows[others], scores[others], scope.space, max(self.config.grid_size // 4, 2))

    def _step(
        self,
        scope: SolverScope,
        counters: list[Progress],
        *,
        X: FloatMatrix,
        owners: np.ndarray,
        scores: FloatMatrix,
        bracket: FloatMatrix,
    ) -> tuple[FloatMatrix, bool]:
        """Take the best's polish candidates; the next brackets, and whether it improved."""
        winner = best_row(scores)
        previous = scope.best_row.copy()
        if not scope.offer(X, scores, counters, count=False):
            return bracket, False
        scope.announce()
        j = int(owners[winner])
        old = bracket[j] if j >= 0 else 0.0
        bracket = scope.space.original.copy()  # another feature moved: old brackets may be wrong
        if j >= 0:  # the grid point just past the winner, towards the old bracket, is the new one
            values = X[owners == j, j]
            side = np.sign(previous[j] - old)
            beyond = values[(values - X[winner, j]) * side < 0.0]
            bracket[j] = beyond[np.argmin(np.abs(beyond - X[winner, j]))] if beyond.size else old
        return bracket, True
