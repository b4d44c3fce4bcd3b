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

from solver.core.budget import MAX_CELLS_PER_STEP
from solver.core.config import FeatureScanPhaseConfig
from solver.core.events import EngineListener
from solver.core.protocol import BoolArray, EncodedSpace, FloatMatrix
from solver.core.scope import Progress, SolverScope, count_step
from solver.core.scores import best_row, is_better, score_batches
from solver.core.termination import Termination
from solver.local.phase import announce


def scan_rows(
    space: EncodedSpace, base: FloatMatrix, features: BoolArray, grid_size: int, *, splits: bool = True
) -> tuple[FloatMatrix, np.ndarray]:
    """``base`` with each of ``features`` set, one at a time, to each value of its grid.

    A number's grid is ``grid_size`` values spread over its search bounds (its allowed values,
    evenly sampled, when it has a list); a category or boolean gets every other value.
    Returns the rows and the feature each one changes.
    """
    rows: list[FloatMatrix] = []
    owners: list[np.ndarray] = []
    for j in np.flatnonzero(features):
        low, high = space.lower[j], space.upper[j]
        if space.nominal[j]:
            values = np.arange(low, high + 1.0)
        else:
            values = np.linspace(low, high, grid_size)
            if space.step[j] > 0:  # whole numbers, or a float's precision
                values = np.unique(space.to_grid(values, np.full(values.size, j)))
        known = space.split_values.get(int(j)) if splits else None
        if known is not None:  # where the model's trees change their decision (solver.exact.splits)
            values = np.union1d(values, known[(known >= low) & (known <= high)])
        grid = space.allowed.get(int(j))
        if grid is not None:
            values = grid[(grid >= low) & (grid <= high)]
            if values.size > 4 * grid_size:  # a long list: an even sample of it
                values = values[np.unique(np.linspace(0, values.size - 1, 4 * grid_size).astype(int))]
        values = values[values != base[j]]
        block = np.repeat(base.reshape(1, -1), values.size, axis=0)
        block[:, j] = values
        rows.append(block)
        owners.append(np.full(values.size, j))
    if not rows:
        return np.empty((0, base.size)), np.empty(0, dtype=np.intp)
    return np.vstack(rows), np.concatenate(owners)


def most_efficient(scores: FloatMatrix, base_score: FloatMatrix) -> int | None:
    """The scanned row with the best goal gain (hard 0) per unit of distance added (soft 0).

    Going for the largest gain alone jumps features to their extremes; this ratio combines
    cheap partial moves of several features instead. None when no row gains.
    """
    if scores.shape[0] == 0:
        return None
    gain = scores[:, 0] - base_score[0]
    cost = np.maximum(base_score[3] - scores[:, 3], 1e-12)
    ratio = np.where(gain > 0.0, gain / cost, -np.inf)
    pick = int(np.argmax(ratio))
    return pick if np.isfinite(ratio[pick]) else None


class FeatureScanPhase:
    """Runs one feature scan."""

    def __init__(self, config: FeatureScanPhaseConfig) -> None:
        self.config = config

    def candidates(
        self, scope: SolverScope, base: FloatMatrix | None = None, *, splits: bool = True
    ) -> tuple[FloatMatrix, np.ndarray]:
        """The scan's rows around ``base`` (default: the best) and the feature each changes;
        with ``splits``, also the values just past the model's split thresholds."""
        base = scope.best_row if base is None else base
        return scan_rows(scope.space, base, scope.space.mutable, self.config.grid_size, splits=splits)

    def _score(self, scope: SolverScope, X: FloatMatrix) -> FloatMatrix:
        return score_batches(scope.scorer, X)

    def solve(self, scope: SolverScope, solver_termination: Termination, listeners: list[EngineListener]) -> None:
        """Score the scan in batched calls and leave starting points for the next phase."""
        if solver_termination.evaluate(scope.progress)[0] or scope.terminate_flag.is_set():
            return
        base, base_score = scope.best_row.copy(), scope.best_score.copy()
        X, owners = self.candidates(scope, base, splits=False)
        if X.shape[0] == 0:
            return
        scores = self._score(scope, X)
        phase = Progress.starting(scope.best_score)
        if scope.offer(X, scores, [scope.progress, phase]):
            announce(scope, listeners)
        order = np.lexsort(scores.T[::-1])[::-1]  # best first
        _, first = np.unique(owners[order], return_index=True)
        per_feature = order[np.sort(first)]  # each feature's best row, best features first
        starts = [X[i].copy() for i in per_feature]
        chain = self._greedy_chain(
            scope,
            base=base,
            base_score=base_score,
            X=X,
            scores=scores,
            phase=phase,
            solver_termination=solver_termination,
            listeners=listeners,
        )
        scope.starts = [*chain, *starts]
        self._split_chain(scope, base, base_score, X.shape[0], solver_termination)

    def _split_chain(
        self,
        scope: SolverScope,
        base: FloatMatrix,
        base_score: FloatMatrix,
        grid_rows: int,
        solver_termination: Termination,
    ) -> None:
        """A second greedy chain over the scan with the model's split values (a tree model's;
        :mod:`solver.exact.splits`), kept aside: its rows are offered before the boundary polish
        (``scope.deferred``), so the local search runs exactly as without them and the polish
        shaves whichever is best. Where the optimum lies just past a far threshold (adult's
        boosting: 9 rows of 10 optimal with it, 2 without), this is the route that finds it."""
        space = scope.space
        extra = sum(v.size for j, v in space.split_values.items() if space.mutable[j])
        if extra == 0 or (grid_rows + extra) * space.n_features > MAX_CELLS_PER_STEP:
            return  # no split values, or more than a step may hold
        if solver_termination.evaluate(scope.progress)[0] or scope.terminate_flag.is_set():
            return
        kept = _Kept()
        phase = Progress.starting(scope.best_score)
        Y, _ = self.candidates(scope, base)
        y_scores = self._score(scope, Y)
        count_step([scope.progress, phase], Y.shape[0])
        kept.take(Y, y_scores)
        self._greedy_chain(
            scope,
            base=base,
            base_score=base_score,
            X=Y,
            scores=y_scores,
            phase=phase,
            solver_termination=solver_termination,
            listeners=[],
            splits=True,
            keep=kept,
        )
        if kept.row is not None:
            scope.deferred.append((kept.row.reshape(1, -1), kept.score.reshape(1, -1)))

    def _greedy_chain(
        self,
        scope: SolverScope,
        *,
        base: FloatMatrix,
        base_score: FloatMatrix,
        X: FloatMatrix,
        scores: FloatMatrix,
        phase: Progress,
        solver_termination: Termination,
        listeners: list[EngineListener],
        splits: bool = False,
        keep: _Kept | None = None,
    ) -> list[FloatMatrix]:
        """Build a counterfactual greedily: take the most efficient scanned move, rescan, repeat.

        Efficiency is the gain on hard level 0 (the goal distance) per unit of feature
        distance added. Going for the largest gain alone jumps features to their extremes;
        this ratio combines cheap partial moves of several features instead, and it runs even
        when a scanned row is feasible, since that row may be a costly one. The chain's last
        row starts the first walker.
        """
        chain: list[FloatMatrix] = []
        for _ in range(self.config.greedy_steps):
            if (base_score[:3] >= 0.0).all():
                break  # the chain reached a feasible row: the local search takes it from here
            pick = most_efficient(scores, base_score)
            if pick is None:
                break
            base, base_score = X[pick].copy(), scores[pick].copy()
            chain.insert(0, base.copy())
            if solver_termination.evaluate(scope.progress)[0] or scope.terminate_flag.is_set():
                break
            X, _ = self.candidates(scope, base, splits=splits)
            if X.shape[0] == 0:
                break
            scores = self._score(scope, X)
            if keep is not None:
                count_step([scope.progress, phase], X.shape[0])  # a step, its best set aside
                keep.take(X, scores)
            elif scope.offer(X, scores, [scope.progress, phase]):
                announce(scope, listeners)
        return chain[:1]


class _Kept:
    """The best row of a set of scored batches."""

    def __init__(self) -> None:
        self.row: FloatMatrix | None = None
        self.score = np.empty(0)

    def take(self, X: FloatMatrix, scores: FloatMatrix) -> None:
        if X.shape[0] == 0:
            return
        top = best_row(scores)
        if self.row is None or is_better(scores[top], self.score):
            self.row, self.score = X[top].copy(), scores[top].copy()
