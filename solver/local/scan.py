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


class ScanGrid:
    """Every scanned feature's values, computed once: the rows around any base are then a few
    vectorised operations (a greedy chain rescans up to a dozen bases per solve, and the
    routes of several answers rescan many at once).

    A number's grid is ``grid_size`` values spread over its search bounds, on its grid (whole
    numbers, a float's precision), joined with the model's split values when ``splits``; a
    feature with allowed values gets those (evenly sampled when the list is long); a category
    or boolean gets every value. Each feature's values are sorted and listed once, features
    in column order.
    """

    def __init__(self, space: EncodedSpace, features: BoolArray, grid_size: int, *, splits: bool = True) -> None:
        self.space = space
        self.values, self.owners = _grid_values(space, np.flatnonzero(features), grid_size, splits)

    def rows(self, base: FloatMatrix, features: BoolArray | None = None) -> tuple[FloatMatrix, np.ndarray]:
        """``base`` with each feature (of ``features``, default all scanned) set, one at a time, to
        each of its values but its current one. Returns the rows and the feature each one changes."""
        keep = self.values != base[self.owners]
        if features is not None:
            keep &= features[self.owners]
        owners = self.owners[keep]
        X = np.repeat(base.reshape(1, -1), owners.size, axis=0)
        X[np.arange(owners.size), owners] = self.values[keep]
        return X, owners

    def rows_many(self, bases: FloatMatrix, features: BoolArray) -> tuple[FloatMatrix, np.ndarray, np.ndarray]:
        """:meth:`rows` for each row of ``bases`` with its row of ``features``, end to end: the rows,
        the feature each changes and the base each comes from."""
        keep = features[:, self.owners] & (self.values != bases[:, self.owners])
        base, k = np.nonzero(keep)
        owners = self.owners[k]
        X = bases[base]
        X[np.arange(owners.size), owners] = self.values[k]
        return X, owners, base


def _grid_values(
    space: EncodedSpace, columns: np.ndarray, grid_size: int, splits: bool
) -> tuple[FloatMatrix, np.ndarray]:
    """The scan values of ``columns`` end to end, and the column of each (see :class:`ScanGrid`)."""
    low, high = space.lower, space.upper
    values: list[FloatMatrix] = []
    owners: list[np.ndarray] = []
    nominal = columns[space.nominal[columns]]
    if nominal.size:  # every category: low, low + 1, ..., high
        sizes = (high[nominal] - low[nominal] + 1.0).astype(np.intp)
        owner = np.repeat(nominal, sizes)
        offset = np.arange(owner.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        values.append(low[owner] + offset)
        owners.append(owner)
    numeric = columns[~space.nominal[columns]]
    if numeric.size:  # grid_size points from low to high, on the column's grid, each once
        grid = np.linspace(low[numeric], high[numeric], grid_size, axis=1)
        keep = np.ones(grid.shape, dtype=bool)
        stepped = space.step[numeric] > 0
        if stepped.any():
            on_grid = space.to_grid(grid[stepped], numeric[stepped].reshape(-1, 1))
            grid[stepped] = on_grid
            keep[stepped, 1:] = on_grid[:, 1:] != on_grid[:, :-1]  # rounding is monotone: repeats are neighbours
        values.append(grid[keep])
        owners.append(np.broadcast_to(numeric.reshape(-1, 1), grid.shape)[keep])
    value = np.concatenate(values) if values else np.empty(0)
    owner = np.concatenate(owners) if owners else np.empty(0, dtype=np.intp)
    scanned = np.zeros(space.n_features, dtype=bool)
    scanned[columns] = True
    known = [j for j in space.split_values if scanned[j]] if splits else []
    if known:  # where the model's trees change their decision (solver.exact.splits), each value once
        split = np.concatenate([space.split_values[j] for j in known])
        split_owner = np.repeat(np.array(known, dtype=np.intp), [space.split_values[j].size for j in known])
        inside = (split >= low[split_owner]) & (split <= high[split_owner])
        value = np.concatenate([value, split[inside]])
        owner = np.concatenate([owner, split_owner[inside]])
        order = np.lexsort((value, owner))  # stable: a column without split values keeps its order
        value, owner = value[order], owner[order]
        has_splits = np.zeros(space.n_features, dtype=bool)
        has_splits[known] = True
        repeat = np.r_[False, (owner[1:] == owner[:-1]) & (value[1:] == value[:-1])] & has_splits[owner]
        value, owner = value[~repeat], owner[~repeat]
    listed = [j for j in space.allowed if scanned[j]]
    if listed:  # allowed values replace the grid
        kept = ~np.isin(owner, listed)
        values, owners = [value[kept]], [owner[kept]]
        for j in listed:
            grid = space.allowed[j]
            grid = grid[(grid >= low[j]) & (grid <= high[j])]
            if grid.size > 4 * grid_size:  # a long list: an even sample of it
                grid = grid[np.unique(np.linspace(0, grid.size - 1, 4 * grid_size).astype(int))]
            values.append(grid)
            owners.append(np.full(grid.size, j, dtype=np.intp))
        value, owner = np.concatenate(values), np.concatenate(owners)
    order = np.argsort(owner, kind="stable")
    return value[order], owner[order]


def scan_rows(
    space: EncodedSpace, base: FloatMatrix, features: BoolArray, grid_size: int, *, splits: bool = True
) -> tuple[FloatMatrix, np.ndarray]:
    """``base`` with each of ``features`` set, one at a time, to each value of its grid.

    A number's grid is ``grid_size`` values spread over its search bounds (its allowed values,
    evenly sampled, when it has a list); a category or boolean gets every other value.
    Returns the rows and the feature each one changes. Scanning several bases with one grid:
    :class:`ScanGrid`.
    """
    return ScanGrid(space, features, grid_size, splits=splits).rows(base)


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
        self._grids: dict[bool, ScanGrid] = {}

    def candidates(
        self, scope: SolverScope, base: FloatMatrix | None = None, *, splits: bool = True
    ) -> tuple[FloatMatrix, np.ndarray]:
        """The scan's rows around ``base`` (default: the best) and the feature each changes;
        with ``splits``, also the values just past the model's split thresholds."""
        base = scope.best_row if base is None else base
        grid = self._grids.get(splits)
        if grid is None or grid.space is not scope.space:
            grid = self._grids[splits] = ScanGrid(
                scope.space, scope.space.mutable, self.config.grid_size, splits=splits
            )
        return grid.rows(base)

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
        starts = list(X[per_feature])
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
