"""The boundary-polish phase: shave the best counterfactual down to the decision boundary.

Each iteration is one step of the bisection of :class:`~counterplan.solver.core.boundary.Bisection`
(every changed number on a grid towards its bracket, all of them back together, each reverted,
in one call) and keeps the best row. It stops after ``max_iterations`` or at the first
iteration that finds nothing better.

With ``starts`` above 1, the same calls also refine the best feasible row of each of the next
``starts - 1`` distinct sets of changed features the solve has found
(:class:`~counterplan.solver.core.boundary.Refiner`): a route the search left coarse, or one
carrying a needless change, can shave down below the polished best. Those rows ride in the
best's calls while it still improves; after that, iterations go on for them alone, up to
``max_iterations``.
"""

from __future__ import annotations

import numpy as np

from counterplan.planning.score import best_row
from counterplan.solver.core.boundary import Bisection, Refiner
from counterplan.solver.core.phase import PhaseBase, PhaseScope
from counterplan.solver.core.pool import best_per_change_set
from counterplan.solver.core.protocol import FloatMatrix, score_batches
from counterplan.solver.core.scope import Progress, SolverScope, count_step
from counterplan.solver.local.config import BoundaryPolishPhaseConfig


class BoundaryPolishPhase(PhaseBase[BoundaryPolishPhaseConfig]):
    """Runs one boundary polish."""

    def phase_started(self, phase_scope: PhaseScope) -> None:
        """Rows an earlier phase set aside (the scan's split chain) compete for the best first."""
        phase_scope.solver_scope.offer_deferred()

    def solve(self, phase_scope: PhaseScope) -> None:
        """Iterate until an iteration improves nothing, the limit, or the solver's termination.

        With ``starts`` above 1, the other routes' refinement (:class:`~counterplan.solver.core.boundary.Refiner`)
        shares each iteration's model call; its rows are offered at the end.
        """
        scope = phase_scope.solver_scope
        counters = phase_scope.counters
        routes = self._routes(scope)
        bisection = Bisection(scope.space, self.config.grid_size)
        n = scope.space.n_features
        polishing = True
        for _ in range(self.config.max_iterations):
            if phase_scope.must_stop():
                break
            X, owners = bisection.candidates(scope.best_row) if polishing else (np.empty((0, n)), None)
            polishing = X.shape[0] > 0
            others = routes.candidates() if routes is not None and routes.active else np.empty((0, n))
            if not polishing and others.shape[0] == 0:
                break
            all_scores = score_batches(scope.scorer, np.vstack([X, others]))
            count_step(counters, X.shape[0] + others.shape[0])
            scores = all_scores[: X.shape[0]]
            if others.shape[0] and routes is not None:
                routes.update(all_scores[X.shape[0] :])
            if polishing and owners is not None:
                polishing = _take(scope, counters, bisection, X=X, owners=owners, scores=scores)
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


def _take(
    scope: SolverScope,
    counters: list[Progress],
    bisection: Bisection,
    *,
    X: FloatMatrix,
    owners: np.ndarray,
    scores: FloatMatrix,
) -> bool:
    """Offer the bisection's scored rows; when the best moved, the bisection's brackets follow.
    Whether it improved."""
    winner = best_row(scores)
    previous = scope.best_row.copy()
    if not scope.offer(X, scores, counters, count=False):
        return False
    scope.announce()
    bisection.moved(previous, X, owners, winner)
    return True
