"""Trades and combinations: rows a bisection cannot reach, priced in the distance's own units.

The bisection (:mod:`counterplan.solver.core.boundary`) only moves a row's changed features back
toward the original. It never *adds* a change, so it cannot find what the exact engine proves
under MAD-L1 (issue 29's study): a cheap move of a large-MAD feature (adult's fnlwgt to a split
value, 0.2-2 MADs) that lets an expensive small-MAD one (education-num, 1 MAD a year) go back
part of the way; nor give one feature back entirely while pushing another a little further (the
demo's 5 changes where 2 suffice). Two kinds of rows reach those answers:

* a **trade** (:func:`trade_candidates`): one changed feature ``k`` given back (to its original
  or a value between) while one other feature ``j`` is bought (a grid value, a split value, a
  step of the distance's units from the original, or a fine step around ``j``'s own changed
  value: the repair of a give-back);
* a **combination** (:func:`combo_candidates`): 2-4 single-feature moves of the original at
  once, from the single-feature rows' gain/cost Pareto fronts, where the goal gains added reach
  a share of the original's deficit: a basin the greedy scan, one feature at a time, never enters.

Both are kept only where the distance predicted from the per-feature costs
(:class:`~counterplan.planning.distance.FeaturePricer`, the calculator's own pricing) is below
the best's, and are scored by the real calculator like every row; only a strictly better score
is taken, so validity never suffers. Only for distances that are a sum over features
(:func:`pricer_for`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from counterplan.planning.distance import SUMMED_METRICS, FeaturePricer
from counterplan.planning.structure.interactions import PairMoves
from counterplan.solver.core.combinations import TOLERANCE, beam_pairs, combinations, smallest
from counterplan.solver.core.protocol import BoolArray, EncodedSpace, FloatMatrix

if TYPE_CHECKING:
    from counterplan.planning.problem import CounterfactualProblem

IntArray = npt.NDArray[np.intp]

DISTANCE_STEPS = np.array([0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0])
"""Steps from the original in the distance's own units (MADs under ``mad_l1``), each side."""
FINE_STEPS = np.array([0.001, 0.003, 0.01, 0.03, 0.1, 0.3])
"""Steps from a changed feature's current value, in the distance's units, each side: a buy that
repairs a give-back (the last sliver of goal a reverted feature bought)."""
_FRACTIONS = np.linspace(0.0, 1.0, 9)[1:-1]
COMBO_FEATURES = 4
"""A combination changes at most this many features."""
COMBO_SLACK = 0.5
"""A combination is scored when its single rows' goal gains, added, reach this share of the
deficit: a tree ensemble's gains are far from additive (adult GB: 0.55 of a deficit added, yet
valid together)."""
COMBO_STATES = 20_000
"""Partial combinations kept per added feature (the cheapest)."""
FRONT_PER_FEATURE = 16
"""Entries of each feature's Pareto front a combination may take (evenly along it)."""
MAX_PAIRS = 4_000_000
"""Give-back and buy pairs one trade round weighs (each a few float64 matrices of that size)."""


def pricer_for(problem: CounterfactualProblem | None) -> FeaturePricer | None:
    """The problem's per-feature pricing, or None where the distance is not a per-feature sum
    (``scorecard``) or a feature is computed from others (a trade's prediction would be wrong)."""
    if problem is None or problem.distance.metric not in SUMMED_METRICS:
        return None
    if problem.relations is not None or problem.scorecard_distance is not None:
        return None
    space = problem.space
    return FeaturePricer(
        space.original,
        ~space.graded,
        problem.scales,
        problem.distance.metric,
        costs=space.costs,
        change_penalty=problem.distance.change_penalty,
    )


LOCAL_VALUES = 2 * DISTANCE_STEPS.size + _FRACTIONS.size + 2 * FINE_STEPS.size
"""How many values :func:`local_values` gives a number."""


def local_values(original: FloatMatrix, at: FloatMatrix, unit: FloatMatrix) -> FloatMatrix:
    """The values of a number a trade may take near its ``original`` and its value ``at``, as the
    last axis of ``original``'s shape (every argument broadcasts): steps of ``unit`` (one distance
    unit) either side of the original, fractions of the way from it to ``at``, and fine steps
    around ``at`` (NaN where ``at`` is the original). Before the domain's bounds and grid. One
    number's (:func:`trade_values`) or every instance's of a block (the vectorised engine's trades)."""
    o, a, u = (np.asarray(v, dtype=np.float64)[..., None] for v in (original, at, unit))
    steps, fine = u * DISTANCE_STEPS, u * FINE_STEPS
    near = np.where(a != o, 1.0, np.nan)
    parts = (o + steps, o - steps, o + _FRACTIONS * (a - o), (a + fine) * near, (a - fine) * near)
    lead = np.broadcast_shapes(o.shape[:-1], a.shape[:-1], u.shape[:-1])
    return np.concatenate([np.broadcast_to(p, (*lead, p.shape[-1])) for p in parts], axis=-1)


def trade_values(space: EncodedSpace, j: int, grid_size: int, unit: float, at: float) -> FloatMatrix:
    """Every value feature ``j`` may take in a trade or combination: its scan grid, the model's
    split values, steps of ``unit`` (one distance unit of ``j``) either side of the original,
    fractions of the way from the original to ``at``, and fine steps around ``at`` when changed."""
    low, high = float(space.lower[j]), float(space.upper[j])
    if space.nominal[j]:
        return np.arange(low, high + 1.0)
    if j in space.allowed:
        grid = space.allowed[j]
    else:
        o = float(space.original[j])
        grid = np.linspace(low, high, grid_size)
        if space.graded[j]:
            local = local_values(np.array(o), np.array(at), np.array(unit))
            grid = np.concatenate([grid, local[~np.isnan(local)]])
        grid = grid[(grid >= low) & (grid <= high)]
    split = space.split_values.get(j)
    if split is not None:
        grid = np.concatenate([grid, split[(split >= low) & (split <= high)]])
    grid = space.to_grid(grid, np.full(grid.size, j, dtype=np.intp))
    return np.unique(grid)


class TradeValues:
    """One solve's memo of :func:`trade_values` and of the values :func:`one_per_cell` keeps with
    their costs, by feature and the value ``at`` it is taken around. A polish asks for the same
    ones again and again (each trade round and recreate step moves one or two features of a row
    of a few dozen), and building them is a dozen small numpy calls per feature: the memo gives
    the very same arrays, so every decision stays as without it. Every feature's around the
    original are built together (:meth:`_at_original`), and a row's concatenation of all features
    is spliced from them (:meth:`row_values`, :meth:`row_cells`). Arrays handed out are read-only."""

    def __init__(self, space: EncodedSpace, pricer: FeaturePricer, grid_size: int) -> None:
        self.space, self.pricer, self.grid_size = space, pricer, grid_size
        self.columns = np.flatnonzero(space.mutable)
        self._unit = dict(zip(self.columns.tolist(), pricer.unit(self.columns).tolist(), strict=True))
        self._values: dict[tuple[int, str], FloatMatrix] = {}
        self._cells: dict[tuple[int, str], tuple[FloatMatrix, FloatMatrix]] = {}
        self._fixed_values: dict[int, FloatMatrix] = {}
        self._split_cells: SplitCells | None = None
        self._built = False
        self._buys: tuple[dict[int, FloatMatrix] | None, npt.NDArray[np.complex128]] | None = None
        self._original = space.original[self.columns]
        self._original_bits = self._original.view(np.int64)
        self._bases: dict[str, _Block] = {}
        """Per kind (``"values"``, ``"cells"``): every mutable feature's arrays around the original."""

    def values(self, j: int, at: float) -> FloatMatrix:
        """:func:`trade_values` of mutable feature ``j`` around ``at``."""
        key = (j, at.hex())  # exact: -0.0 and 0.0 differ, as in the arrays built from them
        found = self._values.get(key)
        if found is None:
            space = self.space
            if space.nominal[j] or j in space.allowed or not space.graded[j]:
                found = trade_values(space, j, self.grid_size, self._unit[j], at)
            else:
                found = self._graded_values(j, at)
            found.flags.writeable = False
            self._values[key] = found
        return found

    def _graded_values(self, j: int, at: float) -> FloatMatrix:
        """:func:`trade_values` of a graded number ``j`` (not a grid of allowed values), the same
        array: the sorted distinct values, on the grid, of its scan grid, split values and steps
        from the original (:meth:`_fixed`, the same for every ``at``), and of the fractions and
        fine steps :func:`local_values` takes around ``at``, each filtered and rounded as there."""
        space = self.space
        low, high = float(space.lower[j]), float(space.upper[j])
        o = float(space.original[j])
        near = o + _FRACTIONS * (at - o)
        if at != o:  # NaN too, as local_values' mask (its values are then NaN, dropped)
            fine = self._unit[j] * FINE_STEPS
            near = np.concatenate([near, at + fine, at - fine])
        near = near[~np.isnan(near)]
        near = near[(near >= low) & (near <= high)]
        near = space.to_grid(near, np.full(near.size, j, dtype=np.intp))
        return _distinct(np.concatenate([self._fixed(j), near]))

    def _fixed(self, j: int) -> FloatMatrix:
        """The values of :meth:`_graded_values` that do not depend on ``at`` (on the grid)."""
        found = self._fixed_values.get(j)
        if found is None:
            space = self.space
            low, high = float(space.lower[j]), float(space.upper[j])
            o, steps = float(space.original[j]), self._unit[j] * DISTANCE_STEPS
            local = np.concatenate([o + steps, o - steps])
            grid = np.concatenate([np.linspace(low, high, self.grid_size), local[~np.isnan(local)]])
            grid = grid[(grid >= low) & (grid <= high)]
            split = space.split_values.get(j)
            if split is not None:
                grid = np.concatenate([grid, split[(split >= low) & (split <= high)]])
            found = self._fixed_values[j] = _distinct(space.to_grid(grid, np.full(grid.size, j, dtype=np.intp)))
        return found

    def cells(self, j: int, at: float) -> tuple[FloatMatrix, FloatMatrix]:
        """The values of :meth:`values` other than ``at``, one per cell (:func:`one_per_cell`), and
        what each costs (:meth:`FeaturePricer.cost`)."""
        key = (j, at.hex())
        found = self._cells.get(key)
        if found is None:
            v = self.values(j, at)
            v = one_per_cell(self.space, j, v[v != at])
            cost = self.pricer.cost(v, np.full(v.size, j, dtype=np.intp))
            v.flags.writeable = False
            cost.flags.writeable = False
            found = self._cells[key] = (v, cost)
        return found

    @property
    def split_cells(self) -> SplitCells:
        """The space's cuts as one table (:class:`SplitCells`), built once."""
        if self._split_cells is None:
            self._split_cells = SplitCells(self.space)
        return self._split_cells

    def row_values(self, at: FloatMatrix) -> tuple[IntArray, FloatMatrix, IntArray]:
        """:meth:`values` of every mutable feature around its value in ``at`` (the mutable
        columns' values, in order), concatenated: each value's feature, the values, and each
        feature's count (:meth:`_row`)."""
        owner, (value,), sizes = self._row(at, "values")
        return owner, value, sizes

    def row_cells(self, at: FloatMatrix) -> tuple[IntArray, FloatMatrix, FloatMatrix, IntArray]:
        """:meth:`cells` of every mutable feature at its value in ``at``, concatenated as
        :meth:`row_values`: each value's feature, the values, their costs, each feature's count."""
        owner, (value, cost), sizes = self._row(at, "cells")
        return owner, value, cost, sizes

    def _row(self, at: FloatMatrix, kind: str) -> tuple[IntArray, tuple[npt.NDArray[Any], ...], IntArray]:
        """``kind``'s arrays (:meth:`values` or :meth:`cells`) of every mutable feature at its
        value in ``at``, concatenated. Built once around the original; a row differs from it in a
        few features, and only theirs are looked up (the same arrays, so the same concatenation)."""

        def per_feature(j: int, value: float) -> tuple[npt.NDArray[Any], ...]:
            return (self.values(j, value),) if kind == "values" else self.cells(j, value)

        base = self._bases.get(kind)
        if base is None:
            self._at_original_once()
            base = self._bases[kind] = self._block([per_feature(j, o) for j, o in self._pairs(self._original)])
        moved = self._moved(at)
        if moved.size == 0:
            return base.owner, base.parts, base.sizes
        return base.spliced(moved, [per_feature(j, a) for j, a in self._pairs(at, moved)])

    def in_buys(self, owner: IntArray, values: FloatMatrix, buys: dict[int, FloatMatrix] | None) -> BoolArray:
        """Which of ``values`` (of features ``owner``) are among ``buys[j]`` (none without it): as
        ``np.isin`` feature by feature, in one search of the sorted (feature, value) pairs of
        ``buys`` (:func:`pairs_key`), sorted once per ``buys``."""
        if self._buys is None or buys is not self._buys[0]:  # kept alive: never stale
            wanted = [(j, np.asarray(v, dtype=np.float64).ravel()) for j, v in (buys or {}).items()]
            columns = [np.full(v.size, j, dtype=np.intp) for j, v in wanted]
            keys = pairs_key(
                np.concatenate([np.empty(0, dtype=np.intp), *columns]), np.concatenate([[], *(v for _, v in wanted)])
            )
            self._buys = (buys, np.sort(keys))
        table = self._buys[1]
        if table.size == 0:
            return np.zeros(values.size, dtype=bool)
        keys = pairs_key(owner, values)
        at = np.minimum(np.searchsorted(table, keys), table.size - 1)
        return np.asarray(table[at] == keys, dtype=bool)

    def _at_original_once(self) -> None:
        """:meth:`_at_original`, at the first call."""
        if not self._built:
            self._built = True
            self._at_original()

    def _at_original(self) -> None:
        """Every graded number's :meth:`values`, :meth:`cells` (with :meth:`_fixed`) at its
        original, put in the memo in a few operations on a table of one row per feature (a
        padded row of candidate values each), rather than a dozen small numpy calls per feature
        (the polish's first use asks for all of them): the same arrays, as the tests check.
        Other features are left to :meth:`values` and :meth:`cells`."""
        space, columns = self.space, self.columns
        graded = space.graded[columns] & ~space.nominal[columns]
        graded &= np.array([j not in space.allowed for j in columns.tolist()], dtype=bool)
        columns = columns[graded]
        if columns.size == 0:
            return
        low, high, o = space.lower[columns], space.upper[columns], space.original[columns]
        unit = np.array([self._unit[j] for j in columns.tolist()])
        steps = unit[:, None] * DISTANCE_STEPS
        splits = [space.split_values.get(j, np.empty(0)) for j in columns.tolist()]
        width = max(split.size for split in splits)
        split = np.full((columns.size, width), np.nan)  # NaN: out of every bound, dropped
        for i, known in enumerate(splits):
            split[i, : known.size] = known
        fixed = np.hstack([_linspaces(low, high, self.grid_size), o[:, None] + steps, o[:, None] - steps, split])
        near = o[:, None] + _FRACTIONS * (o - o)[:, None]  # local_values' fractions, all at the original
        table = np.hstack([fixed, near])
        inside = (table >= low[:, None]) & (table <= high[:, None])
        table = np.where(inside, space.to_grid(table, columns[:, None]), np.nan)
        keys = [float(v).hex() for v in o.tolist()]
        fixed_flat, fixed_ends = _distinct_rows(table[:, : fixed.shape[1]])
        flat, ends = _distinct_rows(table)
        for j, key, f0, f1, v0, v1 in zip(
            columns.tolist(), keys, fixed_ends, fixed_ends[1:], ends, ends[1:], strict=False
        ):  # an end more than features
            self._fixed_values.setdefault(j, fixed_flat[f0:f1])
            self._values.setdefault((j, key), flat[v0:v1])
        # cells: each feature's values but its original, one per cell (one_per_cell, all at once)
        owner = np.repeat(np.arange(columns.size), np.diff(ends))
        keep = flat != o[owner]
        flat, owner = flat[keep], owner[keep]
        sizes = np.bincount(owner, minlength=columns.size)
        keep = self._one_per_cell(columns, flat, owner, sizes)
        flat, owner = flat[keep], owner[keep]
        cost = self.pricer.cost(flat, columns[owner])
        flat.flags.writeable = cost.flags.writeable = False
        ends = np.concatenate([[0], np.cumsum(np.bincount(owner, minlength=columns.size))]).tolist()
        for j, key, start, end in zip(columns.tolist(), keys, ends, ends[1:], strict=False):
            self._cells.setdefault((j, key), (flat[start:end], cost[start:end]))

    def _one_per_cell(self, columns: IntArray, values: FloatMatrix, owner: IntArray, sizes: IntArray) -> BoolArray:
        """Which of ``values`` (each feature's sorted values, feature ``columns[owner]``, at
        ``sizes`` per feature) :func:`one_per_cell` keeps, for every feature at once."""
        space = self.space
        keep = np.zeros(values.size, dtype=bool)
        o = space.original[columns]
        cut = np.array([j in space.split_cuts for j in columns.tolist()], dtype=bool)
        has_split = np.array([space.split_values.get(j, np.empty(0)).size > 0 for j in columns.tolist()], dtype=bool)
        all_kept = ~has_split | (space.step[columns] <= 0.0) | ~np.isfinite(o) | (sizes < 2)
        alone = ~all_kept & ~cut  # the paired split values' rule: one feature at a time
        starts = np.cumsum(sizes) - sizes
        for i in np.flatnonzero(alone).tolist():
            mine = slice(starts[i], starts[i] + sizes[i])
            keep[mine] = np.isin(values[mine], one_per_cell(space, int(columns[i]), values[mine]))
        keep |= all_kept[owner]
        at = np.flatnonzero(~all_kept[owner] & cut[owner])
        if at.size == 0:
            return keep
        v, r = values[at], owner[at]
        cell = self.split_cells.index(v, columns[r])
        side = np.sign(v - o[r])
        key = cell * 3 + (side + 1).astype(np.intp)
        distance = np.abs(v - o[r])
        # a feature's values ascend, so its keys do: the groups of one_per_cell's sort are runs
        change = (key[1:] != key[:-1]) | (r[1:] != r[:-1])
        if not ((key[1:] >= key[:-1]) | (r[1:] != r[:-1])).all():
            order = np.lexsort((distance, key, r))
            first = np.ones(order.size, dtype=bool)
            first[1:] = (key[order][1:] != key[order][:-1]) | (r[order][1:] != r[order][:-1])
            keep[at[order[first]]] = True
            return keep
        starts = np.flatnonzero(np.concatenate([[True], change]))
        run = np.cumsum(np.concatenate([[0], change]))
        nearest = np.minimum.reduceat(distance, starts)
        at_nearest = np.flatnonzero(distance == nearest[run])  # the nearest of each run, the first on a tie
        first = np.concatenate([[True], run[at_nearest][1:] != run[at_nearest][:-1]])
        keep[at[at_nearest[first]]] = True
        return keep

    def _moved(self, at: FloatMatrix) -> IntArray:
        """Which mutable features (by position) ``at`` holds at another value than the original,
        bit for bit (as the memo's keys: -0.0 is not 0.0)."""
        bits = np.ascontiguousarray(at, dtype=np.float64).view(np.int64)
        return np.flatnonzero(bits != self._original_bits)

    def _pairs(self, at: FloatMatrix, where: IntArray | None = None) -> list[tuple[int, float]]:
        """(feature, value) of the mutable features (at positions ``where``) in ``at``."""
        columns, values = (self.columns, at) if where is None else (self.columns[where], at[where])
        return list(zip(columns.tolist(), values.tolist(), strict=True))

    def _block(self, per_feature: Sequence[tuple[FloatMatrix, ...] | FloatMatrix]) -> _Block:
        """The per-feature arrays (one or a tuple per mutable feature) as a concatenated block."""
        parts = [p if isinstance(p, tuple) else (p,) for p in per_feature]
        sizes = np.array([p[0].size for p in parts], dtype=np.intp)
        joined = tuple(np.concatenate([p[i] for p in parts]) for i in range(len(parts[0])))
        for array in joined:
            array.flags.writeable = False
        return _Block(self.columns, joined, sizes)


def _linspaces(low: FloatMatrix, high: FloatMatrix, num: int) -> FloatMatrix:
    """``np.linspace(low[i], high[i], num)`` as row ``i`` (``num`` >= 2), by numpy's own steps."""
    div = num - 1
    delta = high - low
    step = delta / div
    i = np.arange(0, num, dtype=np.float64)
    y = np.where(step[:, None] == 0, (i / div) * delta[:, None], i * step[:, None])  # numpy's denormal rule
    y += low[:, None]
    y[:, -1] = high
    return np.asarray(y, dtype=np.float64)


def _distinct_rows(table: FloatMatrix) -> tuple[FloatMatrix, list[int]]:
    """:func:`_distinct` of each row's values other than NaN, concatenated (read only), and where
    each row's begin and end (``ends[i]:ends[i + 1]``)."""
    table = np.sort(table, axis=1)  # NaN last
    keep = ~np.isnan(table)
    keep[:, 1:] &= table[:, 1:] != table[:, :-1]
    flat = table[keep]
    flat.flags.writeable = False
    return flat, np.concatenate([[0], np.cumsum(keep.sum(axis=1))]).tolist()


def _distinct(values: FloatMatrix) -> FloatMatrix:
    """``np.unique(values)`` of values on a grid (no NaN, no -0.0: :meth:`EncodedSpace.to_grid`
    adds 0.0), without its overhead (half a :func:`trade_values`): sorted, the first of each run."""
    values = np.sort(values)
    keep = np.empty(values.size, dtype=bool)
    keep[:1] = True
    np.not_equal(values[1:], values[:-1], out=keep[1:])
    return values[keep]


class _Block:
    """Arrays of every mutable feature, concatenated in column order (:class:`TradeValues`'s
    memo around the original): the features (``columns``), ``owner`` (each element's feature), the
    ``parts`` and each feature's count ``sizes``."""

    def __init__(self, features: IntArray, parts: tuple[npt.NDArray[Any], ...], sizes: IntArray) -> None:
        self.columns, self.parts, self.sizes = features, parts, sizes
        self.owner = np.repeat(features, sizes)
        self.starts = np.concatenate([[0], np.cumsum(sizes)]).tolist()
        self.owner.flags.writeable = False

    def spliced(
        self,
        moved: IntArray,
        patches: Sequence[tuple[npt.NDArray[Any], ...]],
        base: tuple[npt.NDArray[Any], ...] | None = None,
    ) -> tuple[IntArray, tuple[npt.NDArray[Any], ...], IntArray]:
        """The block with the features at positions ``moved`` (ascending) replaced by
        ``patches`` (their arrays, as ``parts`` or as ``base``, which defaults to ``parts``)."""
        base = self.parts if base is None else base
        starts = self.starts
        pieces: list[list[npt.NDArray[Any]]] = [[] for _ in base]
        sizes = self.sizes.copy()
        previous = 0
        for i, patch in zip(moved.tolist(), patches, strict=True):
            start = starts[i]
            for piece, whole, new in zip(pieces, base, patch, strict=True):
                piece.extend((whole[previous:start], new))
            sizes[i] = patch[0].size
            previous = starts[i + 1]
        for piece, whole in zip(pieces, base, strict=True):
            piece.append(whole[previous:])
        return np.repeat(self.columns, sizes), tuple(np.concatenate(p) for p in pieces), sizes


def trade_candidates(
    best: FloatMatrix,
    best_distance: float,
    space: EncodedSpace,
    pricer: FeaturePricer,
    *,
    grid_size: int,
    max_rows: int,
    rng: np.random.Generator,
    buys: dict[int, FloatMatrix] | None = None,
    memo: TradeValues | None = None,
) -> FloatMatrix:
    """One trade round's rows around ``best`` (see the module), predicted nearer than
    ``best_distance``: the fine-step repairs first, then buys on ``buys`` (a feature's front of
    useful values), then a sample drawn with ``rng`` of the rest, at most ``max_rows``.
    Nearest-first would spend the rows on large give-backs, which are mostly infeasible.
    ``memo`` (built on the same space, pricer and grid size) saves rebuilding the values."""
    original, mutable = space.original, space.mutable
    changed = np.flatnonzero((best != original) & mutable)
    columns = np.flatnonzero(mutable)
    if changed.size == 0 or columns.size < 2:
        return np.empty((0, best.size))
    memo = TradeValues(space, pricer, grid_size) if memo is None else memo
    at = best[columns]
    bj, bv, _ = memo.row_values(at)
    front = memo.in_buys(bj, bv, buys)
    own = np.zeros(best.size)
    own[columns] = pricer.cost(best[columns], columns)
    # the give-backs: each changed k to its original or a value strictly between
    gk_parts: list[IntArray] = []
    gv_parts: list[FloatMatrix] = []
    for k in changed.tolist():
        o, b = original[k], best[k]
        v = memo.values(k, float(b))
        between = v[(v - o) * (v - b) < 0] if space.graded[k] else v[:0]
        w = np.concatenate([[o], between])
        gk_parts.append(np.full(w.size, k, dtype=np.intp))
        gv_parts.append(w)
    gk, gv = np.concatenate(gk_parts), np.concatenate(gv_parts)
    saved = pricer.cost(gv, gk) - own[gk]
    # the buys: each mutable j to any of its values (bj, bv, front)
    keep = bv != best[bj]
    bj, bv, front = bj[keep], bv[keep], front[keep]
    if gk.size * bj.size > MAX_PAIRS:  # thousands of features: a seeded sample of the buys
        sample = np.sort(rng.choice(bj.size, max(MAX_PAIRS // gk.size, 1), replace=False))
        bj, bv, front = bj[sample], bv[sample], front[sample]
    added = pricer.cost(bv, bj) - own[bj]
    total = saved.reshape(-1, 1) + added.reshape(1, -1)
    ok = (gk.reshape(-1, 1) != bj.reshape(1, -1)) & (total < -1e-9 * max(best_distance, 1.0))
    gi, bi = np.nonzero(ok)
    if gi.size == 0:
        return np.empty((0, best.size))
    unit_b = pricer.unit(bj)
    fine = (best[bj] != original[bj]) & (np.abs(bv - best[bj]) <= FINE_STEPS[-1] * unit_b * (1 + 1e-9))
    picked: list[IntArray] = []
    room = max_rows
    for tier in (fine[bi], front[bi] & ~fine[bi], ~front[bi] & ~fine[bi]):
        index = np.flatnonzero(tier)
        if index.size > room:
            index = np.sort(rng.choice(index, room, replace=False)) if room > 0 else index[:0]
        picked.append(index)
        room -= index.size
    order = np.concatenate(picked)
    gi, bi = gi[order], bi[order]
    X = np.repeat(best.reshape(1, -1), gi.size, axis=0)
    rows = np.arange(gi.size)
    X[rows, gk[gi]] = gv[gi]
    X[rows, bj[bi]] = bv[bi]
    return X


def single_rows(
    space: EncodedSpace, pricer: FeaturePricer, grid_size: int, memo: TradeValues | None = None
) -> tuple[FloatMatrix, IntArray]:
    """The original with each mutable feature set to each of its trade values, and the feature
    each row changes."""
    original = space.original
    memo = TradeValues(space, pricer, grid_size) if memo is None else memo
    columns = memo.columns
    if columns.size == 0:
        return np.empty((0, original.size)), np.empty(0, dtype=np.intp)
    owner, value, _, _ = memo.row_cells(original[columns])
    X = np.repeat(original.reshape(1, -1), owner.size, axis=0)
    X[np.arange(owner.size), owner] = value
    return X, owner


def one_per_cell(space: EncodedSpace, j: int, values: FloatMatrix) -> FloatMatrix:
    """``values`` of feature ``j`` (sorted) less those a tree ensemble cannot tell from a nearer
    one: with the other features fixed, its output changes only where a value crosses a
    threshold, so of the values of a cell only the nearest the original on each side can be
    worth scoring. The cells are the feature scan's
    (:func:`counterplan.solver.local.scan.split_cells`): from one cut to the next where the
    space knows the cuts (``split_cuts``); else each split value is a cell of its own, with the
    values between two neighbouring ones, only where every split value pairs up (one grid step
    from another or from a bound): the list is complete."""
    split = space.split_values.get(j)
    step = float(space.step[j])
    o = float(space.original[j])
    if split is None or split.size == 0 or step <= 0.0 or not np.isfinite(o) or values.size < 2:
        return values
    cuts = space.split_cuts.get(j)
    if cuts is not None:
        cell = np.searchsorted(cuts, values, side="right")
    else:
        tolerance = 1e-6 * step
        gaps = np.abs(np.diff(split) - step) <= tolerance
        paired = np.zeros(split.size, dtype=bool)
        paired[1:] |= gaps
        paired[:-1] |= gaps
        paired |= (split - space.lower[j] < step + tolerance) | (space.upper[j] - split < step + tolerance)
        if not paired.all():
            return values
        position = np.searchsorted(split, values)
        exact = np.isin(values, split)
        cell = np.where(exact, 2 * position + 1, 2 * position)  # split value k: cell 2k+1; between k-1 and k: 2k
    side = np.sign(values - o)
    key = cell * 3 + (side + 1).astype(np.intp)
    distance = np.abs(values - o)
    order = np.lexsort((distance, key))
    first = np.ones(order.size, dtype=bool)
    first[1:] = key[order][1:] != key[order][:-1]
    return np.sort(values[order[first]])


_NEARER = 1e-9
"""A row is dropped only when this share (and this much) farther than the nearest of its cells: the
calculator sums the same shares, in another order."""


class SplitCells:
    """Every column's cuts (the space's ``split_cuts``) in one sorted table, so that the cells of
    many values of many columns are found in one ``searchsorted``: the table holds (column,
    cut) pairs as complex numbers, which numpy orders by the real part, then the imaginary."""

    def __init__(self, space: EncodedSpace) -> None:
        columns = sorted(space.split_cuts)
        cuts = [np.asarray(space.split_cuts[j], dtype=np.float64) for j in columns]
        sizes = np.array([c.size for c in cuts], dtype=np.intp)
        self.cuts = np.concatenate(cuts) if cuts else np.empty(0)
        self.offset = np.zeros(space.n_features, dtype=np.intp)
        self.offset[columns] = np.cumsum(sizes) - sizes
        owner = np.repeat(np.array(columns, dtype=np.intp), sizes)
        self.table = pairs_key(owner, self.cuts)
        ascending = (self.cuts[1:] >= self.cuts[:-1]) | (owner[1:] != owner[:-1])
        self._sorted = bool(ascending.all()) and not np.isnan(self.cuts).any()
        self._split_cuts = space.split_cuts

    def index(self, values: FloatMatrix, columns: IntArray) -> IntArray:
        """``np.searchsorted(cuts[j], v, side="right")`` for each value ``v`` of column ``j``
        (every column has cuts): the cell it lies in."""
        if not self._sorted:  # never for a model's cuts; the plain search then
            found = np.empty(values.size, dtype=np.intp)
            for j in np.unique(columns).tolist():
                mine = columns == j
                found[mine] = np.searchsorted(self._split_cuts[j], values[mine], side="right")
            return found
        at = np.searchsorted(self.table, pairs_key(columns, values), side="right")
        return np.asarray(at - self.offset[columns], dtype=np.intp)

    def start(self, values: FloatMatrix, columns: IntArray) -> FloatMatrix:
        """Where the cell of each value ``v`` of column ``j`` starts: the last cut of ``j`` at or
        below ``v`` (``-inf`` below the first)."""
        index = self.index(values, columns)
        below = np.flatnonzero(index > 0)
        found = np.full(values.size, -np.inf)
        found[below] = self.cuts[self.offset[columns[below]] + index[below] - 1]
        return found


def pairs_key(columns: IntArray, values: FloatMatrix) -> npt.NDArray[np.complex128]:
    """(column, value) pairs as complex numbers (column real, value imaginary, both exact)."""
    key = np.empty(values.size, dtype=np.complex128)
    key.real = columns
    key.imag = values
    return key


def undominated(
    space: EncodedSpace, pricer: FeaturePricer, X: FloatMatrix, base: FloatMatrix, cells: SplitCells | None = None
) -> FloatMatrix:
    """``X`` (rows that each change ``base`` in the same number of features, as a trade round's
    two) less each row another row of ``X`` beats for sure: a tree ensemble decides both alike
    and the other is nearer (priced by ``pricer``; rows at the same distance all stay).

    Two such rows are decided alike when they change the same features to the same values, but
    where a feature with cuts (the space's ``split_cuts``) takes two grid values of one cell: the
    trees' every split then sends them the same way (:func:`counterplan.solver.local.scan.split_cells`).
    A value off the grid (an original between two grid values) is a cell of its own: a threshold
    may lie between it and its grid neighbours. Such a row scores the same hard levels and a
    larger distance, so it is never a search's best or a round's winner. Only where nothing else
    in a row's score reads its values: the caller checks (no pool of every feasible row, no
    plausibility, trust region or computed features). ``cells``: the space's (built here without)."""
    cuts = space.split_cuts
    n = X.shape[0]
    if n < 2 or not cuts:
        return X
    rows, columns = np.nonzero(base != X)  # row by row, each row's columns in order
    per_row = np.bincount(rows, minlength=n)
    if per_row.min() != per_row.max() or per_row[0] == 0:
        return X
    values = X[rows, columns]
    key = values.copy()
    cut = np.zeros(space.n_features, dtype=bool)
    cut[list(cuts)] = True
    at = np.flatnonzero(cut[columns])
    if at.size == 0:
        return X
    mine = at[space.to_grid(values[at], columns[at]) == values[at]]  # on the grid
    key[mine] = (SplitCells(space) if cells is None else cells).start(values[mine], columns[mine])
    width = int(per_row[0])
    pairs = np.stack([columns.astype(np.float64), key + 0.0], axis=1).reshape(n, 2 * width)
    order = np.lexsort(pairs.T[::-1])  # rows decided alike side by side
    ranked = pairs[order]
    group = np.empty(n, dtype=np.intp)
    group[order] = np.cumsum(np.concatenate([[False], (ranked[1:] != ranked[:-1]).any(axis=1)]))
    cost = pricer.cost(values, columns).reshape(n, width).sum(axis=1)  # the same features: the rest alike
    nearest = np.full(int(group.max()) + 1, np.inf)
    np.minimum.at(nearest, group, cost)
    keep = cost <= nearest[group] * (1.0 + _NEARER) + _NEARER  # clearly farther: the calculator's sum agrees
    return X if keep.all() else X[keep]


def pareto_front(owner: IntArray, cost: FloatMatrix, gain: FloatMatrix) -> IntArray:
    """Per feature, the single-feature entries that gain (goal distance) more than every cheaper
    entry of that feature: the only ones worth buying when gains add up."""
    index = np.flatnonzero(gain > 1e-12)
    keep: list[int] = []
    for j in np.unique(owner[index]).tolist():
        mine = index[owner[index] == j]
        mine = mine[np.lexsort((-gain[mine], cost[mine]))]  # cheapest first, larger gain first on ties
        top = -np.inf
        for i in mine.tolist():
            if gain[i] > top + 1e-12:
                keep.append(i)
                top = gain[i]
    return np.array(keep, dtype=np.intp)


def front_values(X: FloatMatrix, owner: IntArray, front: IntArray) -> dict[int, FloatMatrix]:
    """Each feature's values on ``front`` (the buys a trade tries first)."""
    return {j: X[front[owner[front] == j], j] for j in np.unique(owner[front]).tolist()}


def combo_candidates(
    original: FloatMatrix,
    X: FloatMatrix,
    owner: IntArray,
    cost: FloatMatrix,
    gain: FloatMatrix,
    *,
    deficit: float,
    best_distance: float,
    max_features: int = COMBO_FEATURES,
    slack: float = COMBO_SLACK,
    max_rows: int = 2048,
    max_states: int = COMBO_STATES,
    per_feature: int = FRONT_PER_FEATURE,
) -> FloatMatrix:
    """Rows that change 2 to ``max_features`` features of the original at once, built from the
    single-feature rows ``X`` (feature ``owner``, distance ``cost``, goal gain ``gain`` over the
    original's ``deficit``): per feature at most ``per_feature`` entries of its Pareto front;
    combinations predicted (gains added) to reach ``slack`` of the deficit and (costs added)
    nearer than ``best_distance``, cheapest first (:data:`COMBO_SLACK`: why the slack).
    :mod:`counterplan.solver.vector.combos` is the same rule for a block's instances at once."""
    e = _thinned(pareto_front(owner, cost, gain), owner, per_feature)
    e = e[np.argsort(owner[e], kind="stable")]
    _, chosen, _ = combinations(
        np.zeros(e.size, dtype=np.intp),
        owner[e],
        cost[e],
        gain[e],
        deficit=np.array([deficit]),
        best=np.array([best_distance]),
        max_features=max_features,
        slack=slack,
        max_rows=max_rows,
        max_states=max_states,
    )
    if chosen.shape[0] == 0:
        return np.empty((0, X.shape[1]))
    return _combo_rows(original, X, owner, e[np.maximum(chosen, 0)], chosen >= 0)


def _thinned(front: IntArray, owner: IntArray, per_feature: int) -> IntArray:
    """At most ``per_feature`` entries of each feature's front (evenly along it, both ends kept):
    a linear model's front holds every value in the gain's direction, and the combinations grow
    with the product of the fronts (heloc logreg took 2 s with whole fronts)."""
    kept: list[IntArray] = []
    for j in np.unique(owner[front]).tolist():
        mine = front[owner[front] == j]
        if mine.size > per_feature:
            mine = mine[np.unique(np.linspace(0, mine.size - 1, per_feature).round().astype(np.intp))]
        kept.append(mine)
    return np.concatenate(kept) if kept else front


def unique_rows(X: FloatMatrix, original: FloatMatrix) -> FloatMatrix:
    """``np.unique(X, axis=0)`` (the distinct rows in lexicographic order) of rows that each
    change ``original`` in a few features, sorted by their changes alone: each changed feature
    ``j`` a pair of keys, its value and where the row falls against rows that leave ``j`` at the
    original (below them when the value is lower: the earlier ``j``, the lower; above when
    higher: the earlier, the higher). Two rows then compare as their first differing feature
    does. np.unique's own sort of the whole rows as records took a third of the combinations'
    time. Rows with NaN or -0.0 (equal but not the same bits) go to np.unique."""
    n, m = X.shape
    if n < 2 or np.isnan(X).any() or (np.signbit(X) & (X == 0.0)).any() or np.isnan(original).any():
        return np.unique(X, axis=0)
    rows, columns = np.nonzero(original != X)  # row by row, each row's features in order
    count = np.bincount(rows, minlength=n)
    width = int(count.max()) if rows.size else 0
    place = np.arange(rows.size) - np.repeat(np.cumsum(count) - count, count)
    side = np.full((n, width), 0, dtype=np.intp)  # 0: no more changes (between below and above)
    value = np.zeros((n, width))
    values = X[rows, columns]
    side[rows, place] = np.where(values < original[columns], columns - m, m - columns)
    value[rows, place] = values
    keys = [k for p in range(width) for k in (side[:, p], value[:, p])]
    order = np.lexsort(keys[::-1]) if keys else np.arange(n)
    ranked_side, ranked_value = side[order], value[order]
    new = np.ones(n, dtype=bool)
    new[1:] = (ranked_side[1:] != ranked_side[:-1]).any(axis=1) | (ranked_value[1:] != ranked_value[:-1]).any(axis=1)
    return X[order[new]]


def _combo_rows(
    original: FloatMatrix, X: FloatMatrix, owner: IntArray, entries: IntArray, valid: BoolArray
) -> FloatMatrix:
    """The original with, per row, the features of its ``entries`` (where ``valid``) set to their values."""
    out = np.repeat(original.reshape(1, -1), entries.shape[0], axis=0)
    rows = np.arange(entries.shape[0])
    for col in range(entries.shape[1]):
        v = valid[:, col]
        entry = entries[v, col]
        out[rows[v], owner[entry]] = X[entry, owner[entry]]
    return out


def beam_candidates(
    original: FloatMatrix,
    X: FloatMatrix,
    owner: IntArray,
    cost: FloatMatrix,
    gain: FloatMatrix,
    *,
    best_distance: float,
    width: int = 4,
    max_rows: int = 2048,
) -> FloatMatrix:
    """Pairs the added gains cannot predict: every single-feature entry of the ``width`` features
    whose single rows gain most, with every entry of another feature, where the costs added are
    below ``best_distance``; the largest added gains first. Two features that cross the boundary
    only together (a tree's interaction: the demo's income 69,587 with debt 22,457, or adult GB's
    fnlwgt 300,970 with education-num 16, each alone gaining no more than a cheaper value of
    it, so on no front) are found here."""
    a, b = beam_pairs(
        np.zeros(owner.size, dtype=np.intp),
        owner,
        cost,
        gain,
        best=np.array([best_distance]),
        width=width,
        max_rows=max_rows,
    )
    entries = np.stack([a, b], axis=1)
    return _combo_rows(original, X, owner, entries, np.ones(entries.shape, dtype=bool))


def pair_candidates(
    original: FloatMatrix, moves: PairMoves, pricer: FeaturePricer, *, best_distance: float, max_rows: int
) -> FloatMatrix:
    """The original with each pair of ``moves`` (:meth:`~counterplan.planning.problem.CounterfactualProblem.pair_moves`:
    two changes a tree ensemble rewards only together, which no added gains predict) whose costs
    added are below ``best_distance``; at most ``max_rows``, the most gain per unit of distance
    first (ties: the trees' order)."""
    if len(moves) == 0 or max_rows <= 0:
        return np.empty((0, original.size))
    cost = pricer.cost(moves.first_value, moves.first) + pricer.cost(moves.second_value, moves.second)
    cheap = np.flatnonzero(cost < best_distance * (1.0 - TOLERANCE))
    rate = moves.gain[cheap] / np.maximum(cost[cheap], np.finfo(np.float64).tiny)
    pick = cheap[np.lexsort((cheap, -rate))[:max_rows]]
    rows = np.repeat(original.reshape(1, -1), pick.size, axis=0)
    at = np.arange(pick.size)
    rows[at, moves.first[pick]] = moves.first_value[pick]
    rows[at, moves.second[pick]] = moves.second_value[pick]
    return rows


def extend_candidates(  # noqa: PLR0917 - the rows and the singles, each as the other functions take them
    original: FloatMatrix,
    rows: FloatMatrix,
    row_cost: FloatMatrix,
    row_gain: FloatMatrix,
    X: FloatMatrix,
    owner: IntArray,
    cost: FloatMatrix,
    gain: FloatMatrix,
    *,
    best_distance: float,
    max_rows: int,
) -> FloatMatrix:
    """The beam's next level: each of ``rows`` (scored combinations: their distance ``row_cost``
    and real goal gain ``row_gain``) with one more single-feature entry (``X``, ``owner``,
    ``cost``, ``gain``) of a feature it leaves at the original, where the costs added are below
    ``best_distance``; the largest gains (the row's, real, plus the entry's) first."""
    ri, ei = np.nonzero(row_cost.reshape(-1, 1) + cost.reshape(1, -1) < best_distance * (1.0 - 1e-9))
    untouched = rows[ri, owner[ei]] == original[owner[ei]]
    ri, ei = ri[untouched], ei[untouched]
    if ri.size == 0:
        return np.empty((0, X.shape[1]))
    pick = smallest(-(row_gain[ri] + gain[ei]), max_rows)
    ri, ei = ri[pick], ei[pick]
    out: FloatMatrix = rows[ri].copy()
    out[np.arange(ri.size), owner[ei]] = X[ei, owner[ei]]
    return out


def recreate_candidates(
    row: FloatMatrix,
    row_distance: float | None,
    best_distance: float,
    space: EncodedSpace,
    pricer: FeaturePricer,
    *,
    grid_size: int,
    caps: dict[int, float],
    max_rows: int,
    slack: float = 0.0,
    memo: TradeValues | None = None,
) -> tuple[FloatMatrix, IntArray]:
    """One step of a ruin-and-recreate chain (:class:`~counterplan.solver.local.polish.BoundaryPolishPhase`):
    ``row`` (at distance ``row_distance``; None: the sum of its features' costs) with one mutable
    feature set to another of its trade values, each feature's values one per cell of its split
    values, and the feature each row changes. Feature ``k`` of ``caps`` (a ruined one) only at
    values costing below ``caps[k]``, so it can come back cheaper but not as it was; only rows
    predicted nearer than ``best_distance`` times ``1 + slack`` (a feasible row a little farther
    may bisect below it), the nearest first, at most ``max_rows``."""
    memo = TradeValues(space, pricer, grid_size) if memo is None else memo
    columns = memo.columns
    if columns.size == 0:
        return np.empty((0, row.size)), np.empty(0, dtype=np.intp)
    at = row[columns]
    owner, value, cost, sizes = memo.row_cells(at)
    now = pricer.cost(at, columns)
    row_distance = float(now.sum()) if row_distance is None else row_distance
    delta = cost - np.repeat(now, sizes)
    keep = row_distance + delta < best_distance * (1.0 + slack - 1e-9)
    cap = np.full(row.size, np.inf)
    if caps:
        cap[list(caps)] = list(caps.values())
    keep &= cost < cap[owner]
    owner, value, delta = owner[keep], value[keep], delta[keep]
    pick = np.sort(smallest(delta, max_rows))
    owner, value = owner[pick], value[pick]
    X = np.repeat(row.reshape(1, -1), owner.size, axis=0)
    X[np.arange(owner.size), owner] = value
    return X, owner
