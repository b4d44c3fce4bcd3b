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
"""

from __future__ import annotations

import numpy as np

from solver.config import BoundaryPolishPhaseConfig
from solver.diversity import best_per_change_set
from solver.events import EngineListener
from solver.phase import announce
from solver.protocol import FloatMatrix
from solver.refine import refine_rows
from solver.scope import Progress, SolverScope
from solver.scores import best_row
from solver.termination import Termination

_JOINT = -1
_REVERT = -2


class _StepScorer:
    """The solve's scorer, counting each batch as a step of the phase (as ``offer`` does)."""

    def __init__(self, scope: SolverScope, counters: list[Progress]) -> None:
        self._scope = scope
        self._counters = counters

    @property
    def calculation_count(self) -> int:
        """Candidates scored so far."""
        return self._scope.scorer.calculation_count

    @property
    def model_call_count(self) -> int:
        """Model calls made so far."""
        return self._scope.scorer.model_call_count

    def score(self, X: FloatMatrix) -> FloatMatrix:
        """Score one batch; count it as one step."""
        scores = self._scope.scorer.score(X)
        for progress in self._counters:
            progress.step_count += 1
            progress.score_calculation_count += X.shape[0]
            progress.move_count += X.shape[0]
        return scores


class BoundaryPolishPhase:
    """Runs one boundary polish."""

    def __init__(self, config: BoundaryPolishPhaseConfig) -> None:
        self.config = config

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
        numeric = changed[~space.nominal[changed]]
        blocks: list[FloatMatrix] = []
        owners: list[np.ndarray] = []
        for j in numeric:
            block = np.repeat(best.reshape(1, -1), fractions.size, axis=0)
            block[:, j] = best[j] + fractions * (bracket[j] - best[j])
            blocks.append(block)
            owners.append(np.full(fractions.size, j))
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
        X = space.snap(np.where(space.integral, np.rint(X), X))
        keep = (best != X).any(axis=1)
        return np.asarray(X[keep], dtype=np.float64), np.concatenate(owners)[keep]

    def solve(self, scope: SolverScope, solver_termination: Termination, listeners: list[EngineListener]) -> None:
        """Polish the best, then the other routes' best rows (``starts``), within the solver's termination."""
        phase = Progress.starting(scope.best_score)
        self._polish_best(scope, solver_termination, listeners, phase)
        if self.config.starts > 1 and scope.pool:
            self._polish_routes(scope, solver_termination, listeners, phase)

    def _polish_routes(
        self, scope: SolverScope, solver_termination: Termination, listeners: list[EngineListener], phase: Progress
    ) -> None:
        """Refine the best row of each of the next ``starts - 1`` change sets, together; offer the results."""
        pool = scope.pool or []
        rows, scores = np.vstack([p[0] for p in pool]), np.vstack([p[1] for p in pool])
        chosen = best_per_change_set(rows, scores, scope.space.original, self.config.starts, per_set=1)
        rows, scores = rows[chosen], scores[chosen]
        others = ~(rows == scope.best_row).all(axis=1)
        if not others.any():
            return

        def should_stop() -> bool:
            return bool(solver_termination.evaluate(scope.progress)[0] or scope.terminate_flag.is_set())

        refined, refined_scores = refine_rows(
            rows[others],
            scores[others],
            scope.space,
            _StepScorer(scope, [scope.progress, phase]),
            grid_size=max(self.config.grid_size // 2, 2),
            max_rounds=self.config.max_iterations,
            should_stop=should_stop,
        )
        if scope.offer(refined, refined_scores, [scope.progress, phase]):
            announce(scope, listeners)

    def _polish_best(
        self, scope: SolverScope, solver_termination: Termination, listeners: list[EngineListener], phase: Progress
    ) -> None:
        """Iterate until an iteration improves nothing, the limit, or the solver's termination."""
        bracket = scope.space.original.copy()
        for _ in range(self.config.max_iterations):
            if solver_termination.evaluate(scope.progress)[0] or scope.terminate_flag.is_set():
                return
            X, owners = self.candidates(scope, bracket)
            if X.shape[0] == 0:
                return
            scores = scope.scorer.score(X)
            winner = best_row(scores)
            previous = scope.best_row.copy()
            if not scope.offer(X, scores, [scope.progress, phase]):
                return
            announce(scope, listeners)
            j = int(owners[winner])
            old = bracket[j] if j >= 0 else 0.0
            bracket = scope.space.original.copy()  # another feature moved: old brackets may be wrong
            if j >= 0:  # the grid point just past the winner, towards the old bracket, is the new one
                values = X[owners == j, j]
                side = np.sign(previous[j] - old)
                beyond = values[(values - X[winner, j]) * side < 0.0]
                bracket[j] = beyond[np.argmin(np.abs(beyond - X[winner, j]))] if beyond.size else old
