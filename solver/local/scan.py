"""The feature-scan construction phase: every mutable feature alone, over its whole domain.

One batched call scores each mutable feature set to each of ``grid_size`` values spread over
its domain (every other category; the other boolean), the other features kept as they are.
This finds the single-feature counterfactuals, or the features that move the prediction
most, at the cost of one model call. The best row becomes the solution; the best row of each
of the most promising features becomes a starting point for the next local-search phase, so
its walkers begin in different basins.

Rows drive a solve's cost (a model call costs microseconds per row), so the phase spends them
only where they can tell, and finds what scoring every row would:

* it scores no row twice (:class:`_Scans`): the scan with split values starts where the plain
  one does, in the same call, and a greedy chain's next scan shares the rows of the feature it
  just moved (and the previous base itself);
* where a tree model's split values are known, a chain rescans only each cell's values nearest
  the original (:func:`split_cells`): between two thresholds the trees decide alike, so a
  farther value of a cell only adds distance;
* a rescan leaves out the rows no nearer than the best feasible row known, unless one could
  still be the chain's next step (:meth:`FeatureScanPhase._rescan`, :class:`_Distances`).

When every feasible row is wanted (several answers, a polish of several routes), or the
scorer computes features (relations), the chains rescan every row. The first way holds for any
model and distance; the other two rest on what the scan checks as it goes (the cells' rows
scoring alike, the predicted distances).
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

import numpy as np

from counterplan.planning.score import HARD_LEVELS, best_row, is_better
from counterplan.planning.scored_rows import row_index
from counterplan.planning.structure.splits import paired_split_values
from counterplan.solver.core.budget import MAX_CELLS_PER_STEP
from counterplan.solver.core.phase import PhaseBase, PhaseScope
from counterplan.solver.core.protocol import BoolArray, EncodedSpace, FloatMatrix, score_batches
from counterplan.solver.core.scope import Progress, SolverScope, count_step
from counterplan.solver.local.config import FeatureScanPhaseConfig

_DISTANCE_TOLERANCE = 1e-9
"""A predicted distance is right within this share of it (sums in another order)."""
_Request = tuple["ScanGrid", FloatMatrix, FloatMatrix, np.ndarray]
"""A scan a greedy chain asks for: its grid, base, base score and entries."""
_Answer = tuple[FloatMatrix, FloatMatrix, int]
"""A scan's rows, their scores, and how many the model scored."""
_Chain = Generator[_Request, _Answer, list[FloatMatrix]]
"""A greedy chain: it asks for scans, one at a time, and ends with its last base (or none)."""
_FEWEST_LEFT_OUT = 64
"""A rescan leaves rows out only when at least this many can be: fewer cost less than the
second model call they may need (a call costs about what a few hundred rows do)."""


def _first_of_runs(differs: BoolArray) -> BoolArray:
    """Given whether each element differs from the one before it (from the second on), whether
    each starts a run: the first always does."""
    out = np.empty(differs.size + 1, dtype=bool)
    out[0] = True
    out[1:] = differs
    return out


class ScanGrid:
    """Every scanned feature's values, computed once: the rows around any base are then a few
    vectorised operations (a greedy chain rescans up to a dozen bases per solve, and the
    routes of several answers rescan many at once).

    A number's grid is ``grid_size`` values spread over its search bounds, on its grid (whole
    numbers, a float's precision), joined with the model's split values when ``splits``; a
    feature with allowed values gets those (evenly sampled when the list is long); a category
    or boolean gets every value. Each feature's values are sorted and listed once, features
    in column order. An entry is one value of one feature: ``values[k]`` of ``owners[k]``;
    ``split[k]`` says whether it is one of the model's split values.
    """

    def __init__(self, space: EncodedSpace, features: BoolArray, grid_size: int, *, splits: bool = True) -> None:
        values, owners = _grid_values(space, np.flatnonzero(features), grid_size)
        self._set(space, values, owners, features if splits else None)

    @classmethod
    def joined(cls, plain: ScanGrid, features: BoolArray) -> ScanGrid:
        """``plain`` (a grid without split values, of ``features``) joined with the split values:
        the grid with them, whose entries of ``plain`` are known without a search."""
        grid = cls.__new__(cls)
        grid._set(plain.space, plain.values, plain.owners, features, plain)
        return grid

    def _set(
        self,
        space: EncodedSpace,
        values: FloatMatrix,
        owners: np.ndarray,
        features: BoolArray | None,
        plain: ScanGrid | None = None,
    ) -> None:
        self.space = space
        self.plain = plain
        """The grid this one joined with the split values, if it was made so."""
        self.values, self.owners, self.split, self.origin = _join_splits(space, values, owners, features)
        """``origin[k]``: the entry's index among the values without the split values, -1 for a split value."""
        self.starts = np.searchsorted(self.owners, np.arange(space.n_features + 1))
        """Feature ``j``'s entries are ``starts[j]`` up to ``starts[j + 1]``."""

    def entries(
        self, base: FloatMatrix, features: BoolArray | None = None, keep: BoolArray | None = None
    ) -> np.ndarray:
        """The entries that change ``base``: each feature's (of ``features``, default all scanned)
        values but its current one; only those ``keep`` marks, when given."""
        change = self.values != base[self.owners]
        if features is not None:
            change &= features[self.owners]
        if keep is not None:
            change &= keep
        return np.nonzero(change)[0]

    def build(self, base: FloatMatrix, entries: np.ndarray) -> FloatMatrix:
        """One row per entry: ``base`` with the entry's feature set to its value."""
        X = np.repeat(base.reshape(1, -1), entries.size, axis=0)
        X[np.arange(entries.size), self.owners[entries]] = self.values[entries]
        return X

    def rows(self, base: FloatMatrix, features: BoolArray | None = None) -> tuple[FloatMatrix, np.ndarray]:
        """``base`` with each feature (of ``features``, default all scanned) set, one at a time, to
        each of its values but its current one. Returns the rows and the feature each one changes."""
        entries = self.entries(base, features)
        return self.build(base, entries), self.owners[entries]

    def rows_many(self, bases: FloatMatrix, features: BoolArray) -> tuple[FloatMatrix, np.ndarray, np.ndarray]:
        """:meth:`rows` for each row of ``bases`` with its row of ``features``, end to end: the rows,
        the feature each changes and the base each comes from."""
        keep = features[:, self.owners] & (self.values != bases[:, self.owners])
        base, k = np.nonzero(keep)
        owners = self.owners[k]
        X = bases[base]
        X[np.arange(owners.size), owners] = self.values[k]
        return X, owners, base

    def matching(self, other: ScanGrid) -> np.ndarray:
        """Per entry: the entry of ``other`` with the same feature and value, -1 where it has none."""
        if other is self:
            return np.arange(self.values.size)
        if other is self.plain:
            return self.origin
        if self is other.plain:
            out = np.full(self.values.size, -1, dtype=np.intp)
            found = (other.origin >= 0).nonzero()[0]
            out[other.origin[found]] = found
            return out
        n = self.values.size
        owners = np.concatenate([self.owners, other.owners])
        values = np.concatenate([self.values, other.values])
        ours = np.arange(owners.size) < n
        order = np.lexsort((ours, values, owners))  # equal entries side by side, ``other``'s first
        o, v = owners[order], values[order]
        starts = _first_of_runs((o[1:] != o[:-1]) | (v[1:] != v[:-1]))  # NaN equals nothing: never matched
        first = order[starts]
        found = np.where(first >= n, first - n, -1)
        out = np.empty(n, dtype=np.intp)
        mine = order < n
        out[order[mine]] = found[(np.cumsum(starts) - 1)[mine]]
        return out


def _grid_values(space: EncodedSpace, columns: np.ndarray, grid_size: int) -> tuple[FloatMatrix, np.ndarray]:
    """The scan values of ``columns`` without split values, end to end, and the column of each
    (see :class:`ScanGrid`)."""
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
    scanned = set(columns.tolist())
    listed = [j for j in space.allowed if j in scanned]
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


def _join_splits(
    space: EncodedSpace, value: FloatMatrix, owner: np.ndarray, features: BoolArray | None
) -> tuple[FloatMatrix, np.ndarray, BoolArray, np.ndarray]:
    """A grid's values joined with the split values of ``features`` (none when None): the values,
    the column of each, which are split values, and the index each had before (-1 for a split
    value). A feature with allowed values keeps them alone."""
    origin = np.arange(value.size)
    known = [j for j in space.split_values if features[j] and j not in space.allowed] if features is not None else []
    if not known:
        return value, owner, np.zeros(value.size, dtype=bool), origin
    # where the model's trees change their decision (counterplan.planning.structure.splits), each value once
    low, high = space.lower, space.upper
    split = np.concatenate([space.split_values[j] for j in known])
    split_owner = np.repeat(np.array(known, dtype=np.intp), [space.split_values[j].size for j in known])
    inside = (split >= low[split_owner]) & (split <= high[split_owner])
    value = np.concatenate([value, split[inside]])
    owner = np.concatenate([owner, split_owner[inside]])
    is_split = np.zeros(value.size, dtype=bool)
    is_split[origin.size :] = True
    origin = np.concatenate([origin, np.full(value.size - origin.size, -1)])
    order = np.lexsort((value, owner))  # stable: the grid's copy of a value before a split value's
    value, owner, is_split, origin = value[order], owner[order], is_split[order], origin[order]
    has_splits = np.zeros(space.n_features, dtype=bool)
    has_splits[known] = True
    repeat = ~_first_of_runs((owner[1:] != owner[:-1]) | (value[1:] != value[:-1])) & has_splits[owner]
    if repeat.any():  # one entry per value, a split value when any of its copies is one
        group = np.cumsum(~repeat) - 1
        is_split = np.bincount(group, weights=is_split, minlength=int(group[-1]) + 1)[group] > 0
        value, owner, is_split, origin = value[~repeat], owner[~repeat], is_split[~repeat], origin[~repeat]
    return value, owner, is_split, origin


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


def split_cells(space: EncodedSpace, grid: ScanGrid) -> np.ndarray:
    """Per entry of ``grid``: the cell of its feature it lies in, -1 where unknown.

    With the other features fixed, a tree ensemble's output changes only where a value crosses
    one of its thresholds, so the values between two neighbouring thresholds (a cell) score
    alike. Where the reader proved on which side of each threshold its two split values lie
    (the space's ``split_cuts``, :class:`counterplan.planning.space.SplitValues`), a cell runs
    from one cut (the first value past a threshold) up to the next. Else the split values are
    only known to be the grid values on each side of each threshold
    (:mod:`counterplan.planning.structure.splits`): a threshold lies next to a split value, never
    between two other entries. So each split value is a cell of its own, and the entries between
    two neighbouring split values (or past the outermost) share one, whichever side of its nearest
    split value a threshold lies on (``x <= t`` or XGBoost's ``x < t``). Cells are numbered
    across the grid, in entry order.

    Known for a gridded number with cuts, or whose split values all pair up (each one grid step
    from another, or within a step of a bound), as a complete list does: not for a sampled list
    without cuts (a model with more thresholds than are kept), a float, a category, a feature
    with allowed values or one without a finite original.
    """
    values, owners, split = grid.values, grid.owners, grid.split
    cells = np.full(values.size, -1, dtype=np.intp)
    index = split.nonzero()[0]
    if index.size == 0:
        return cells
    n = space.n_features
    eligible = (space.step > 0.0) & ~space.nominal & np.isfinite(space.original)
    eligible[list(space.allowed)] = False
    so, sv = owners[index], values[index]
    has_splits, lone, cut = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    has_splits[so] = True
    lone[so[~paired_split_values(so, sv, space.step, space.lower, space.upper)]] = True  # thresholds missing
    cut[list(space.split_cuts)] = True
    eligible &= has_splits & (cut | ~lone)
    new = _first_of_runs((owners[1:] != owners[:-1]) | split[1:] | split[:-1])
    for j in np.flatnonzero(cut & eligible).tolist():  # the sides known: a cell starts at each cut only
        low, high = grid.starts[j], grid.starts[j + 1]
        cell = np.searchsorted(space.split_cuts[j], values[low:high], side="right")
        new[low + 1 : high] = cell[1:] != cell[:-1]
    known = eligible[owners]
    cells[known] = (np.cumsum(new) - 1)[known]
    return cells


def _nearest_in_cells(space: EncodedSpace, grid: ScanGrid, cells: np.ndarray) -> BoolArray:
    """The entries a scan needs: of each known cell, the value nearest the original on each side
    of it (the others score alike and only add distance), and every entry of no known cell."""
    side = np.sign(grid.values - space.original[grid.owners])
    # a feature's values are sorted, so each cell's values on one side of the original are a run
    run = _first_of_runs((cells[1:] != cells[:-1]) | (side[1:] != side[:-1]))
    last = np.empty_like(run)
    last[:-1] = run[1:]
    last[-1:] = True
    return np.asarray((cells < 0) | (side == 0.0) | ((side < 0.0) & last) | ((side > 0.0) & run))


def _verified(cells: np.ndarray, grid: ScanGrid, entries: np.ndarray, scores: FloatMatrix) -> np.ndarray:
    """``cells``, less the features where a scan of ``entries`` found a cell whose rows do not all
    score alike on the hard levels (split values missing a threshold, say through a feature
    the model reads in other ways too): those get -1."""
    index = (cells[entries] >= 0).nonzero()[0]
    if index.size == 0:
        return cells
    cell = cells[entries[index]]
    order = np.argsort(cell, kind="stable")
    c, hard = cell[order], scores[index[order], :HARD_LEVELS]
    first = _first_of_runs(c[1:] != c[:-1])
    head = first.nonzero()[0][np.cumsum(first) - 1]
    differ = (hard != hard[head]).any(axis=1)
    if not differ.any():
        return cells
    out = cells.copy()
    out[np.isin(grid.owners, grid.owners[entries[index[order[differ]]]])] = -1
    return out


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


@dataclass
class _Scan:
    """One scan of a phase: its grid, base and base score, its rows and their scores, and per
    entry of the grid its row (-1 where it has none)."""

    grid: ScanGrid
    base: FloatMatrix
    base_score: FloatMatrix
    row_of: np.ndarray
    X: FloatMatrix
    scores: FloatMatrix


class _Scans:
    """The scans of one phase, so that it scores no row twice.

    A row is its base with one entry's feature set to the entry's value. A scan at an earlier
    scan's base has the rows of the entries both grids hold; one at a base one feature away from
    an earlier scan's (a greedy chain's next step) has that feature's rows, and the earlier base
    itself. Rows come as they were scored (the scorer may set computed features), so a scan is
    what scoring it all would give, with fewer rows to the model.
    """

    def __init__(self, n_features: int) -> None:
        self.done: list[_Scan] = []
        self.computed = False
        """Whether the scorer set computed features in a row of the first two scans (a problem
        with relations: a scan changes every feature, so the first shows it)."""
        self._bases = np.empty((0, n_features))
        self._nan = False
        self._matches: dict[tuple[int, int], np.ndarray] = {}

    def _matching(self, grid: ScanGrid, other: ScanGrid) -> np.ndarray:
        key = (id(grid), id(other))
        found = self._matches.get(key)
        if found is None:
            found = self._matches[key] = grid.matching(other)
        return found

    def score(
        self, scope: SolverScope, grid: ScanGrid, base: FloatMatrix, base_score: FloatMatrix, entries: np.ndarray
    ) -> tuple[FloatMatrix, FloatMatrix, int]:
        """The rows of ``entries`` around ``base`` and their scores, and how many the model scored."""
        return self.score_many(scope, [(grid, base, base_score, entries)])[0]

    def score_many(self, scope: SolverScope, requests: list[_Request]) -> list[_Answer]:
        """:meth:`score` of several scans (chains stepping together) in one model call: of the rows
        none of the earlier scans holds, each once (two chains that took the same step ask for the
        same rows). Each scan looks only at the scans made before the call."""
        built = [self._known(grid, base, base_score, entries) for grid, base, base_score, entries in requests]
        fresh = [todo.nonzero()[0] for _, _, todo in built]
        # a scan's rows change its base in one feature: two scans whose bases differ in three
        # features or more (bit for bit) share no row, and need no search for one
        bits = np.vstack([base for _, base, _, _ in requests]).view(np.int64)
        new: list[FloatMatrix] = []  # the rows to score, each once
        where: list[np.ndarray] = []  # per scan, each fresh row's place among them
        made = 0
        for i, ((X, _, _), f) in enumerate(zip(built, fresh, strict=True)):
            near = made and bool((np.count_nonzero(bits[:i] != bits[i], axis=1) <= 2).any())
            at = row_index(np.vstack(new), X[f]) if near else np.full(f.size, -1, dtype=np.intp)
            own = at < 0
            at[own] = made + np.arange(np.count_nonzero(own))
            new.append(X[f[own]])
            where.append(at)
            made += new[-1].shape[0]
        if made:
            Y = np.vstack(new)
            as_built = Y.copy()
            scored = score_batches(scope.scorer, Y)
            if len(self.done) < 2 and not self.computed and not np.array_equal(Y, as_built, equal_nan=True):
                self.computed = True  # the scorer set computed features: a row changes more than one
            for (X, scores, _), f, at in zip(built, fresh, where, strict=True):
                X[f], scores[f] = Y[at], scored[at]  # as scored
        answers: list[_Answer] = []
        for (grid, base, base_score, entries), (X, scores, _), rows in zip(requests, built, new, strict=True):
            row_of = np.full(grid.values.size, -1, dtype=np.intp)
            row_of[entries] = np.arange(entries.size)
            self.done.append(_Scan(grid, base.copy(), base_score.copy(), row_of, X, scores))
            self._bases = np.vstack([self._bases, base.reshape(1, -1)])
            self._nan = self._nan or bool(np.isnan(base).any())
            answers.append((X, scores, rows.shape[0]))
        return answers

    def _known(
        self, grid: ScanGrid, base: FloatMatrix, base_score: FloatMatrix, entries: np.ndarray
    ) -> tuple[FloatMatrix, FloatMatrix, BoolArray]:
        """The rows of ``entries`` around ``base``, the scores the earlier scans hold, and which
        rows are still to be scored."""
        X = grid.build(base, entries)
        scores = np.empty((entries.size, base_score.size))
        todo = np.ones(entries.size, dtype=bool)
        if not self.done:
            return X, scores, todo
        differ = self._bases != base
        if self._nan:
            differ &= ~(np.isnan(self._bases) & np.isnan(base))
        counts = differ.sum(axis=1)
        owners = grid.owners[entries]  # sorted: each feature's entries side by side
        for i in (counts <= 1).nonzero()[0][::-1].tolist():  # the latest first
            scan = self.done[i]
            if counts[i]:  # the rows of the one feature that differs
                j = int(differ[i].argmax())
                low, high = owners.searchsorted([j, j + 1])
                index = low + todo[low:high].nonzero()[0]
                back = grid.values[entries[index]] == scan.base[j]  # the earlier base itself
                if back.any():
                    X[index[back]] = scan.base
                    scores[index[back]] = scan.base_score
                    todo[index[back]] = False
                    index = index[~back]
            else:
                index = todo.nonzero()[0]
            if index.size == 0:
                continue
            other = self._matching(grid, scan.grid)[entries[index]]
            rows = scan.row_of[other]
            hit = (other >= 0) & (rows >= 0)
            index, rows = index[hit], rows[hit]
            X[index] = scan.X[rows]
            scores[index] = scan.scores[rows]
            todo[index] = False
        return X, scores, todo


class _Distances:
    """Each row's distance (soft level 0) around a greedy chain's bases, predicted before it is scored.

    A chain's first scan, at its first base, shows what setting each entry's feature to the
    entry's value adds to the distance. When a distance is a sum over features (as
    :mod:`counterplan.planning.distance` makes them), a row's distance is its base's, plus what its entry
    adds, less what the base's own value of that feature added. Every scan checks the
    predictions: they are vouched for once they held on rows that change two features or more
    of the first base (so that the sum is seen), and never again once one fails (a distance
    that is no such sum, as a scorecard's closeness to the data).
    """

    def __init__(
        self, grid: ScanGrid, base: FloatMatrix, base_score: FloatMatrix, entries: np.ndarray, scores: FloatMatrix
    ) -> None:
        self.grid = grid
        self.base = base.copy()
        self.nan = bool(np.isnan(base).any())
        self.added = np.zeros(grid.values.size)
        self.added[entries] = base_score[3] - scores[:, 3]
        self.trusted = True
        """False once a prediction failed."""
        self.vouched = False
        """True once predictions held on rows that change two features or more."""
        self._moved = np.zeros(base.size, dtype=bool)

    def predict(self, base: FloatMatrix, base_score: FloatMatrix, entries: np.ndarray) -> FloatMatrix | None:
        """The distances of the rows of ``entries`` around ``base``; None when it cannot tell (a
        feature moved to a value that is no entry of the grid, or a prediction failed)."""
        if not self.trusted:
            return None
        grid = self.grid
        moved = base != self.base
        if self.nan:
            moved &= ~(np.isnan(base) & np.isnan(self.base))
        own = np.zeros(base.size)
        for j in moved.nonzero()[0].tolist():
            low, high = grid.starts[j], grid.starts[j + 1]
            at = low + int(grid.values[low:high].searchsorted(base[j]))  # a feature's values are sorted
            if at >= high or grid.values[at] != base[j]:
                return None
            own[j] = self.added[at]
        self._moved = moved
        return np.asarray(self.added[entries] - own[grid.owners[entries]] - base_score[3], dtype=np.float64)

    def can_vouch(self, entries: np.ndarray) -> bool:
        """Whether the predictions are vouched for, or the rows of ``entries`` around the last
        :meth:`predict`'s base can vouch for them (some change two features or more)."""
        if self.vouched or np.count_nonzero(self._moved) >= 2:
            return True
        return bool((~self._moved[self.grid.owners[entries]]).any())

    def check(self, predicted: FloatMatrix, scores: FloatMatrix, entries: np.ndarray) -> bool:
        """Compare the last :meth:`predict`'s distances of the rows of ``entries`` with their
        scores. True when the predictions are vouched for (now or before) and none failed."""
        actual = -scores[:, 3]
        if (np.abs(actual - predicted) > _DISTANCE_TOLERANCE * np.maximum(np.abs(actual), 1.0)).any():
            self.trusted = False
        elif not self.vouched:
            self.vouched = self.can_vouch(entries)
        return self.trusted and self.vouched


class FeatureScanPhase(PhaseBase[FeatureScanPhaseConfig]):
    """Runs one feature scan."""

    def __init__(self, config: FeatureScanPhaseConfig) -> None:
        super().__init__(config)
        self._grids: dict[bool, ScanGrid] = {}

    def solving_started(self, scope: SolverScope) -> None:
        """With ``split_values``, read where the model's trees change their decision, once, before
        any phase runs: the solve then searches a view of the space that knows them (every phase,
        local search's split jumps too), and the problem's own space is left as it is."""
        if self.config.split_values and scope.problem is not None:
            scope.space = scope.space.with_split_values(scope.problem.split_values())

    def grid(self, scope: SolverScope, *, splits: bool) -> ScanGrid:
        """The phase's scan grid, with or without the model's split values."""
        grid = self._grids.get(splits)
        if grid is None or grid.space is not scope.space:
            space = scope.space
            if splits:
                grid = ScanGrid.joined(self.grid(scope, splits=False), space.mutable)
            else:
                grid = ScanGrid(space, space.mutable, self.config.grid_size, splits=False)
            self._grids[splits] = grid
        return grid

    def candidates(
        self, scope: SolverScope, base: FloatMatrix | None = None, *, splits: bool = True
    ) -> tuple[FloatMatrix, np.ndarray]:
        """The scan's rows around ``base`` (default: the best) and the feature each changes;
        with ``splits``, also the values just past the model's split thresholds."""
        base = scope.best_row if base is None else base
        return self.grid(scope, splits=splits).rows(base)

    def solve(self, phase_scope: PhaseScope) -> None:
        """Score the scan in batched calls and leave starting points for the next phase."""
        scope = phase_scope.solver_scope
        if phase_scope.must_stop():
            return
        space = scope.space
        base, base_score = scope.best_row.copy(), scope.best_score.copy()
        grid = self.grid(scope, splits=False)
        entries = grid.entries(base)
        if entries.size == 0:
            return
        scans = _Scans(space.n_features)
        phase_scope.start()
        phase, counters = phase_scope.progress, phase_scope.counters
        split_grid = self._split_grid(scope, entries.size)
        first, cells = _first_split_scan(scope, scans, split_grid, base=base, base_score=base_score, counters=counters)
        X, scores, fresh = scans.score(scope, grid, base, base_score, entries)
        if fresh:
            count_step(counters, fresh)
        if (base == space.original).all():
            scope.scanned = (X, scores) if first is None else (np.vstack([first[1], X]), np.vstack([first[2], scores]))
        if scope.offer(X, scores, counters, count=False):
            scope.announce()
        owners = grid.owners[entries]
        order = np.lexsort(scores.T[::-1])[::-1]  # best first
        _, firsts = np.unique(owners[order], return_index=True)
        per_feature = order[np.sort(firsts)]  # each feature's best row, best features first
        starts = list(X[per_feature])
        # only each rescan's best row counts, unless every feasible row is wanted (several answers,
        # a polish of several routes); and a row changes one feature, unless the scorer computes
        # some (relations): else the chains rescan every row
        lean = scope.pool is None and not scans.computed
        rescan = None
        if split_grid is not None and lean:
            matched = grid.matching(split_grid)
            rescan = _nearest_in_cells(space, grid, np.where(matched >= 0, cells[matched], -1))
        main = self._greedy_chain(
            phase_scope,
            grid,
            base=base,
            base_score=base_score,
            X=X,
            scores=scores,
            phase=phase,
            rescan=rescan,
            distances=_Distances(grid, base, base_score, entries, scores) if lean else None,
        )
        chains, kept = [main], _Kept()
        if split_grid is not None and first is not None:
            split = self._split_chain(
                phase_scope, scans, split_grid, base=base, base_score=base_score, first=first, cells=cells, kept=kept
            )
            chains += [] if split is None else [split]
        ends = _together(phase_scope, scans, chains)
        scope.starts = [*ends[0], *starts]
        if kept.row is not None:
            scope.deferred.append((kept.row.reshape(1, -1), kept.score.reshape(1, -1)))

    def _split_grid(self, scope: SolverScope, grid_rows: int) -> ScanGrid | None:
        """The grid with the model's split values, when the scan tries them: None without any, or
        when a scan of it would hold more than a step may."""
        space = scope.space
        if not self.config.split_values:
            return None
        extra = sum(v.size for j, v in space.split_values.items() if space.mutable[j])
        if extra == 0 or (grid_rows + extra) * space.n_features > MAX_CELLS_PER_STEP:
            return None
        return self.grid(scope, splits=True)

    def _split_chain(
        self,
        phase_scope: PhaseScope,
        scans: _Scans,
        grid: ScanGrid,
        *,
        base: FloatMatrix,
        base_score: FloatMatrix,
        first: tuple[np.ndarray, FloatMatrix, FloatMatrix],
        cells: np.ndarray,
        kept: _Kept,
    ) -> _Chain | None:
        """A second greedy chain over the scan with the model's split values (a tree model's;
        :mod:`counterplan.planning.structure.splits`), kept aside in ``kept``: its best row is offered before the
        boundary polish (``scope.deferred``), so the local search runs exactly as without it and
        the polish shaves whichever is best. Where the optimum lies just past a far threshold
        (adult's boosting: 9 rows of 10 optimal with it, 2 without), this is the route that finds it.

        ``first`` is its first scan (entries, rows, scores), every value around ``base``; the
        rescans after it have only the values of each of ``cells`` nearest the original
        (:func:`split_cells`). It steps with the scan's own chain (:func:`_together`); None when
        the solve must stop (``kept`` holds the first scan's best)."""
        scope = phase_scope.solver_scope
        entries, Y, y_scores = first
        kept.take(Y, y_scores)
        if phase_scope.must_stop():
            return None
        lean = scope.pool is None and not scans.computed
        return self._greedy_chain(
            phase_scope,
            grid,
            base=base,
            base_score=base_score,
            X=Y,
            scores=y_scores,
            phase=Progress.starting(scope.best_score),
            keep=kept,
            rescan=_nearest_in_cells(scope.space, grid, cells) if lean else None,
            distances=_Distances(grid, base, base_score, entries, y_scores) if lean else None,
        )

    def _greedy_chain(
        self,
        phase_scope: PhaseScope,
        grid: ScanGrid,
        *,
        base: FloatMatrix,
        base_score: FloatMatrix,
        X: FloatMatrix,
        scores: FloatMatrix,
        phase: Progress,
        keep: _Kept | None = None,
        rescan: BoolArray | None = None,
        distances: _Distances | None = None,
    ) -> _Chain:
        """Build a counterfactual greedily: take the most efficient scanned move, rescan, repeat.

        Efficiency is the gain on hard level 0 (the goal distance) per unit of feature
        distance added. Going for the largest gain alone jumps features to their extremes;
        this ratio combines cheap partial moves of several features instead, and it runs even
        when a scanned row is feasible, since that row may be a costly one. The chain's last
        row starts the first walker. With ``keep``, each rescan's best is set aside there
        instead of offered; ``rescan`` marks the entries of ``grid`` it rescans (default all).

        With ``distances``, a rescan leaves out the rows that can matter neither as its best
        nor as the next step (:meth:`_rescan`): the chain takes the same steps and finds the
        same best row as with every row scored.

        It asks for its scans (it yields each and is sent the answer), so that chains step
        together, one model call a step for all (:func:`_together`).
        """
        scope = phase_scope.solver_scope
        chain: list[FloatMatrix] = []
        counters = [scope.progress, phase]
        for step in range(self.config.greedy_steps):
            if (base_score[:3] >= 0.0).all():
                break  # the chain reached a feasible row: the local search takes it from here
            pick = most_efficient(scores, base_score)
            if pick is None:
                break
            base, base_score = X[pick].copy(), scores[pick].copy()
            chain.insert(0, base.copy())
            if phase_scope.must_stop():
                break
            entries = grid.entries(base, keep=rescan)
            if entries.size == 0:
                break
            X, scores = yield from self._rescan(
                scope,
                grid,
                base=base,
                base_score=base_score,
                entries=entries,
                counters=counters,
                keep=keep,
                distances=distances,
                steps_on=step + 1 < self.config.greedy_steps,
            )
            if keep is not None:
                keep.take(X, scores)
            elif scope.offer(X, scores, counters, count=False):
                scope.announce()
        return chain[:1]

    @staticmethod
    def _rescan(
        scope: SolverScope,
        grid: ScanGrid,
        *,
        base: FloatMatrix,
        base_score: FloatMatrix,
        entries: np.ndarray,
        counters: list[Progress],
        keep: _Kept | None,
        distances: _Distances | None,
        steps_on: bool = True,
    ) -> Generator[_Request, _Answer, tuple[FloatMatrix, FloatMatrix]]:
        """The rows of ``entries`` around ``base`` and their scores (each model call a step).

        With ``distances``, only the rows that can matter: a row no nearer than the best feasible
        row known (the solve's, or ``keep``'s) cannot be a better one, so it is scored only when
        it could still be the chain's next step, that is when the whole gap to the goal over its
        added distance reaches the best ratio of the rows scored first (a second call), or when
        those rows do not vouch for the predicted distances. The rows come in entry order, as
        with every row scored, so ties fall alike. When the chain takes no step after this rescan
        (not ``steps_on``: its last), no row left out can matter, and none gets the second call.
        """
        near, predicted = _near_rows(scope, keep, distances, base=base, base_score=base_score, entries=entries)
        X, scores, fresh = yield (grid, base, base_score, entries if near is None else entries[near])
        if fresh:
            count_step(counters, fresh)
        if near is None or predicted is None or distances is None:
            return X, scores
        far = (~near).nonzero()[0]
        if distances.check(predicted[near], scores, entries[near]):
            maybe = _could_step(predicted[far], far, scores, base_score) if steps_on else far[:0]
            if maybe.size == 0:
                return X, scores
        else:  # a prediction failed: every row left out
            maybe = far
        more, more_scores, fresh = yield (grid, base, base_score, entries[maybe])
        if fresh:
            count_step(counters, fresh)
        order = np.argsort(np.concatenate([near.nonzero()[0], maybe]), kind="stable")
        return np.vstack([X, more])[order], np.vstack([scores, more_scores])[order]


def _first_split_scan(
    scope: SolverScope,
    scans: _Scans,
    grid: ScanGrid | None,
    *,
    base: FloatMatrix,
    base_score: FloatMatrix,
    counters: list[Progress],
) -> tuple[tuple[np.ndarray, FloatMatrix, FloatMatrix] | None, np.ndarray]:
    """The first scan with the split values (``grid``; none without it): its entries, rows and
    scores, and its verified cells (:func:`split_cells`). One call for both first scans: the
    plain grid's rows are among these."""
    if grid is None:
        return None, np.empty(0, dtype=np.intp)
    entries = grid.entries(base)
    Y, y_scores, fresh = scans.score(scope, grid, base, base_score, entries)
    if fresh:
        count_step(counters, fresh)
    return (entries, Y, y_scores), _verified(split_cells(scope.space, grid), grid, entries, y_scores)


def _together(phase_scope: PhaseScope, scans: _Scans, chains: list[_Chain]) -> list[list[FloatMatrix]]:
    """Run greedy chains in step: each round, the scans every chain still going asks for are one
    model call (:meth:`_Scans.score_many`), each answer sent back in the chains' order (a chain
    that offers its rows to the solve does so before the next one asks). Each chain takes the
    steps it takes alone: a rescan leaves out only rows that can change neither its best nor its
    next step, whatever best is known when it asks. What each chain ended with, in order."""
    ends: list[list[FloatMatrix]] = [[] for _ in chains]
    asking: dict[int, _Request] = {}
    for i, chain in enumerate(chains):
        try:
            asking[i] = next(chain)
        except StopIteration as stop:
            ends[i] = stop.value
    while asking:
        answers = scans.score_many(phase_scope.solver_scope, list(asking.values()))
        for (i, _), answer in zip(list(asking.items()), answers, strict=True):
            try:
                asking[i] = chains[i].send(answer)
            except StopIteration as stop:
                ends[i] = stop.value
                del asking[i]
    return ends


def _near_rows(
    scope: SolverScope,
    keep: _Kept | None,
    distances: _Distances | None,
    *,
    base: FloatMatrix,
    base_score: FloatMatrix,
    entries: np.ndarray,
) -> tuple[BoolArray | None, FloatMatrix | None]:
    """Which entries' rows are predicted nearer than the best feasible row known (the solve's, or
    ``keep``'s), and the predicted distances; (None, ...) when every row is to be scored: too few
    to leave out for the call they may take, no distance to compare with, or none to vouch."""
    bound = _known_distance(scope.best_score)
    if keep is not None and keep.row is not None:
        bound = min(bound, _known_distance(keep.score))
    if distances is None or not np.isfinite(bound):
        return None, None
    predicted = distances.predict(base, base_score, entries)
    if predicted is None:
        return None, None
    near = np.asarray(predicted < bound + _DISTANCE_TOLERANCE * max(bound, 1.0), dtype=bool)
    if np.count_nonzero(~near) < _FEWEST_LEFT_OUT or not distances.can_vouch(entries[near]):
        return None, predicted
    return near, predicted


def _could_step(
    added_distance: FloatMatrix, far: np.ndarray, scores: FloatMatrix, base_score: FloatMatrix
) -> np.ndarray:
    """Of the rows left out (``far``, with their predicted distances), those that could still be
    the chain's next step: the whole gap to the goal over their added distance reaches the best
    ratio of the rows scored."""
    gap = -base_score[0]  # the most any row can gain: hard level 0 is at most 0
    if gap <= 0.0:
        return far[:0]
    added = added_distance + base_score[3]
    most = np.full(far.size, np.inf)
    np.divide(gap, added, out=most, where=added > 1e-12)
    gain = scores[:, 0] - base_score[0]
    ratio = np.where(gain > 0.0, gain / np.maximum(base_score[3] - scores[:, 3], 1e-12), -np.inf)
    return np.asarray(far[most * (1.0 + _DISTANCE_TOLERANCE) >= ratio.max(initial=-np.inf)], dtype=np.intp)


def _known_distance(score: FloatMatrix) -> float:
    """The distance of a feasible score; infinite when it is not feasible."""
    return float(-score[3]) if (score[:HARD_LEVELS] >= 0.0).all() else np.inf


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
