"""Trades for every instance of a block at once: one changed feature given back while another is
bought (:mod:`counterplan.solver.core.trade`'s rule), priced in the distance's own units.

Per instance, a table of every value a trade may take, ``(instances, slots)`` with each slot's
feature: its layout's scan grid and split values (the scan's table), the original, and the values
near the original and the best (:func:`~counterplan.solver.core.trade.local_values`). A give-back
sets a changed feature to its original or a value strictly between it and the best; a buy sets any
mutable feature to another of its values; a value of the scan's grid only where it is its tree
cell's nearest the original (a farther one makes the same prediction at a greater distance). Only
pairs whose costs added make the row nearer than the best are kept, and per instance at most
``rows`` of them, in the per-row rule's tiers: the fine repairs (a buy a fine step from a changed
value) first, then the buys on the instance's singles' fronts, then the rest. Each tier's pairs
are drawn, ``rows`` an instance, from the instance's own counter-based stream as ranks among its
pairs near enough (the buys sorted by cost, so the pairs are never listed: an instance has about
1,800 fine or front pairs on heloc and takes 128), so the rows an instance gets do not depend on
its block.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from counterplan.planning.distance import FeaturePricer, feature_costs
from counterplan.planning.problem import CounterfactualProblem
from counterplan.solver.core.combinations import segmented_smallest
from counterplan.solver.core.protocol import BoolArray, FloatMatrix
from counterplan.solver.core.trade import FINE_STEPS, LOCAL_VALUES, local_values
from counterplan.solver.vector.combos import cheaper_ranges
from counterplan.solver.vector.draws import key, uniforms
from counterplan.solver.vector.layouts import Layouts

IntArray = npt.NDArray[np.intp]
_TRADE = 4
"""The trades' phase number in the random keys."""


class BlockTrades:
    """The trade values of a block's instances and one trade round's rows (see the module)."""

    def __init__(
        self,
        problem: CounterfactualProblem,
        layouts: Layouts,
        table: tuple[IntArray, FloatMatrix, IntArray, IntArray],
        seeds: npt.NDArray[np.uint64],
        *,
        originals: FloatMatrix,
        cells: IntArray | None = None,
    ) -> None:
        """``table``: the scan's (column, value) entries of every layout, flat, with each layout's
        offset and size (:class:`~counterplan.solver.vector.search.VectorSearch`'s); ``originals``:
        the block's instances'; ``cells``: each entry's cell of the trees
        (:func:`~counterplan.solver.vector.search.split_cells`), none: every entry a cell of its own."""
        space = problem.space
        self.problem, self.layouts, self.seeds = problem, layouts, seeds
        self.nominal, self.graded = space.nominal, space.graded
        self.scales = problem.scales
        self.metric = problem.distance.metric
        self.costs = space.costs
        self.penalty = problem.distance.change_penalty
        mutable = np.flatnonzero(space.mutable)
        numbers = np.flatnonzero(space.mutable & space.graded)
        pricer = FeaturePricer(space.original, space.nominal, problem.scales, self.metric, costs=space.costs)
        self.unit = np.ones(space.n_features)
        self.unit[mutable] = pricer.unit(mutable)
        # the scan's entries, per layout and feature, padded to the most any layout has (NaN)
        columns, values, offsets, sizes = table
        counts = np.zeros((layouts.count, space.n_features), dtype=np.intp)
        for k in range(layouts.count):
            counts[k] = np.bincount(columns[offsets[k] : offsets[k] + sizes[k]], minlength=space.n_features)
        width = counts.max(axis=0)
        start = np.concatenate([[0], np.cumsum(width)[:-1]])
        self.grid = np.full((layouts.count, int(width.sum())), np.nan)
        entry = np.full(self.grid.shape, -1, dtype=np.intp)  # each slot's entry of the flat table
        for k in range(layouts.count):
            mine = slice(offsets[k], offsets[k] + sizes[k])
            col = columns[mine]
            place = np.arange(col.size) - np.searchsorted(col, col)  # entries are grouped by column
            self.grid[k, start[col] + place] = values[mine]
            entry[k, start[col] + place] = np.arange(offsets[k], offsets[k] + sizes[k])
        slot_cell = np.where(entry >= 0, (np.arange(values.size) if cells is None else cells)[entry], -1)
        grid_feature = np.repeat(np.arange(space.n_features), width)
        # then each mutable feature's original, then each number's local values
        self.feature = np.concatenate([grid_feature, mutable, np.repeat(numbers, LOCAL_VALUES)]).astype(np.intp)
        self._numbers = numbers
        self._grid_slots = grid_feature.size
        self._mutable = mutable.size
        self.nearest = self._nearest_in_cells(slot_cell, originals, self._grid_slots)

    def _nearest_in_cells(self, slot_cell: IntArray, originals: FloatMatrix, width: int) -> BoolArray:
        """Per instance of the block (``originals``) and grid slot (``width`` of them, of cells
        ``slot_cell`` per layout, -1: none): whether the slot's value is its cell's nearest the
        original (the first among equals) and is not the original (which has a slot of its own).

        Between two of a tree model's thresholds its trees decide alike, so a farther value of a
        cell makes the same prediction at a greater distance: as a buy, a give-back or a rebuild
        step it gains as much for more, and it is feasible only where the nearer one is (the
        scan's rule, :meth:`~counterplan.solver.vector.search.VectorSearch._nearest_in_cells`;
        the per-row rebuild's values are one per cell too). On heloc GB it halves a rebuild's
        rows, and on adult GB takes them to a fifth."""
        n = originals.shape[0]
        layout = self.layouts.layout[:n]
        cell = slot_cell[layout]
        near = np.abs(self.grid[layout] - originals[:, self.feature[:width]])
        owner = np.repeat(np.arange(n), width)
        order = np.lexsort((near.ravel(), cell.ravel(), owner))
        c, o = cell.ravel()[order], owner[order]
        first = np.r_[True, (o[1:] != o[:-1]) | (c[1:] != c[:-1])]
        keep = np.zeros(n * width, dtype=bool)
        keep[order[first]] = True
        return np.asarray(keep.reshape(n, width) & (cell >= 0) & (near != 0.0))  # the original: its own slot

    def _price(self, values: FloatMatrix, original: FloatMatrix, f: IntArray | None = None) -> FloatMatrix:
        """What each slot's value (slots of features ``f``, all by default) adds to the distance
        (:func:`feature_costs`, the one rule)."""
        f = self.feature if f is None else f
        return feature_costs(
            values,
            original,
            self.nominal[f],
            self.scales[f],
            self.metric,
            costs=self.costs[f],
            change_penalty=self.penalty,
        )

    def values(self, best: FloatMatrix, original: FloatMatrix, idx: IntArray) -> FloatMatrix:
        """Per instance ``idx`` (best ``best``, original ``original``): its slots' values on its
        grid and within its bounds (NaN: none)."""
        layout = self.layouts.layout[idx]
        f = self.feature
        numbers = self._numbers
        near = local_values(original[:, numbers], best[:, numbers], self.unit[numbers]).reshape(idx.size, -1)
        V = np.hstack([self.grid[layout], original[:, f[self._grid_slots : f.size - near.shape[1]]], near])
        local = slice(f.size - near.shape[1], f.size)
        inside = (V[:, local] >= self.layouts.lower[layout][:, f[local]]) & (
            V[:, local] <= self.layouts.upper[layout][:, f[local]]
        )
        V[:, local] = np.where(inside, V[:, local], np.nan)
        return self.layouts.to_grid(V, idx[:, None], f[None, :])

    def candidates(
        self,
        best: FloatMatrix,
        distance: FloatMatrix,
        original: FloatMatrix,
        idx: IntArray,
        *,
        front: BoolArray | None,
        rows: int,
        round_number: int,
    ) -> tuple[FloatMatrix, IntArray]:
        """One trade round's rows for instances ``idx`` (their ``best`` rows at ``distance``), at
        most ``rows`` per instance (see the module); ``front`` marks, per instance and slot, the
        values on its singles' fronts. The rows and, for each, its place in ``idx`` (its route)."""
        slots = self.feature.size
        f = self.feature
        V = self.values(best, original, idx)
        now, start = best[:, f], original[:, f]
        valid = ~np.isnan(V)
        valid[:, : self._grid_slots] &= self.nearest[idx]
        own = self._price(now, start)
        delta = self._price(np.where(valid, V, now), start) - own
        changed = (now != start) & self.problem.space.mutable[f]
        give = valid & changed & ((start == V) | (self.graded[f] & ((V - start) * (V - now) < 0)))
        buy = valid & (now != V) & self.problem.space.mutable[f]
        gi, gs = np.nonzero(give)  # row-major: by instance, then slot (as alone)
        bi, bs = np.nonzero(buy)
        if gi.size == 0 or bi.size == 0:
            return np.empty((0, best.shape[1])), np.empty(0, dtype=np.intp)
        tolerance = 1e-9 * np.maximum(distance, 1.0)  # as the per-row rule: strictly nearer
        budget = -delta[gi, gs] - tolerance[gi]
        fine = changed[bi, bs] & (np.abs(V[bi, bs] - now[bi, bs]) <= FINE_STEPS[-1] * self.unit[f[bs]] * (1 + 1e-9))
        tier = np.where(fine, 0.0, 2.0)
        if front is not None:
            tier = np.where(~fine & front[bi, bs], 1.0, tier)
        # per tier (the fine repairs, the front's buys, the rest) a sample of the pairs near
        # enough, drawn per instance from its own stream; an instance's rows are its first
        # ``rows`` by tier, then draw
        gl: list[IntArray] = []
        bl: list[IntArray] = []
        ul: list[FloatMatrix] = []
        for level in range(3):
            mine = np.flatnonzero(tier == level)
            if mine.size == 0:
                continue
            cost = delta[bi[mine], bs[mine]]
            sampled = self._sample(
                gi=gi, bi=bi[mine], cost=cost, budget=budget, idx=idx, rows=rows, stream=(round_number, level)
            )
            gl.append(sampled[0])
            bl.append(mine[sampled[1]])
            ul.append(level + sampled[2])
        if not gl:
            return np.empty((0, best.shape[1])), np.empty(0, dtype=np.intp)
        g, b, u = np.concatenate(gl), np.concatenate(bl), np.concatenate(ul)
        pi = gi[g]
        ok = (f[gs[g]] != f[bs[b]]) & (delta[pi, gs[g]] + delta[pi, bs[b]] < -tolerance[pi])
        g, b, pi, u = g[ok], b[ok], pi[ok], u[ok]
        key_rows = (pi * slots + gs[g]) * slots + bs[b]
        _, first = np.unique(key_rows, return_index=True)  # a pair drawn twice, once
        g, b, pi, u = g[first], b[first], pi[first], u[first]
        pick = segmented_smallest(u, pi, rows)
        g, b, pi = g[pick], b[pick], pi[pick]
        gs, bs = gs[g], bs[b]
        X = best[pi].copy()
        r = np.arange(pi.size)
        X[r, f[gs]] = V[pi, gs]
        X[r, f[bs]] = V[pi, bs]
        return X, pi

    def _sample(
        self,
        *,
        gi: IntArray,
        bi: IntArray,
        cost: FloatMatrix,
        budget: FloatMatrix,
        idx: IntArray,
        rows: int,
        stream: tuple[int, int],
    ) -> tuple[IntArray, IntArray, FloatMatrix]:
        """``rows`` pairs per instance drawn uniformly (with replacement) from its give-backs'
        buys near enough (:func:`~counterplan.solver.vector.combos.cheaper_ranges`), without
        listing them all: each draw is a rank among the instance's pairs, found by ``searchsorted``
        on the running counts; ``stream``: the round and tier, in the draws' keys. The pairs
        (give-back, buy) and a further draw for each."""
        order, start, end = cheaper_ranges(bi, cost, gi, budget)
        counts = end - start
        total = np.cumsum(counts)
        n = idx.size
        before = np.zeros(n, dtype=np.intp)
        per = np.bincount(gi, weights=counts, minlength=n).astype(np.intp)
        before[1:] = np.cumsum(per)[:-1]
        inst = np.repeat(np.flatnonzero(per > 0), rows)
        if inst.size == 0:
            return np.empty(0, dtype=np.intp), np.empty(0, dtype=np.intp), np.empty(0)
        nth = np.tile(np.arange(rows), inst.size // rows)
        draws = uniforms(key(self.seeds[idx[inst]], _TRADE, *stream, -1 - nth), 2)
        rank = before[inst] + np.minimum((draws[0] * per[inst]).astype(np.intp), per[inst] - 1)
        g = np.searchsorted(total, rank, side="right").astype(np.intp)
        b = order[start[g] + rank - (total[g] - counts[g])]
        return g, b, draws[1]

    def recreate(
        self,
        rows: FloatMatrix,
        inst: IntArray,
        *,
        originals: FloatMatrix,
        best: FloatMatrix,
        caps: tuple[IntArray, FloatMatrix],
        slack: float | FloatMatrix,
        max_rows: int,
    ) -> tuple[FloatMatrix, IntArray]:
        """One step of every ruin-and-recreate chain (:func:`~counterplan.solver.core.trade.recreate_candidates`'
        rule): chain ``c``'s row (of instance ``inst[c]``) with one mutable feature set to another
        of its scan values (one per tree cell, :attr:`nearest`) or its original, where the
        distance predicted stays below the instance's ``best`` times ``1 + slack`` (one, or one
        per chain: a chain past a farther feasible step has none); the chain's ruined feature
        (``caps``: feature and cost per chain) only cheaper than it was; per chain the
        ``max_rows`` nearest. The rows and their chains."""
        f = self.feature[: self._grid_slots + self._mutable]
        layout = self.layouts.layout[inst]
        original = originals[inst]
        V = np.hstack([self.grid[layout], original[:, f[self._grid_slots :]]])
        now, start = rows[:, f], original[:, f]
        nearest = np.ones(V.shape, dtype=bool)
        nearest[:, : self._grid_slots] = self.nearest[inst]
        valid = ~np.isnan(V) & (now != V) & nearest
        cost = self._price(np.where(valid, V, now), start, f)
        delta = cost - self._price(now, start, f)
        distance = self._price_rows(rows, original)
        limit = best[inst] * (1.0 + np.broadcast_to(np.asarray(slack, dtype=np.float64), inst.shape) - 1e-9)
        ok = valid & (distance[:, None] + delta < limit[:, None])
        ok &= (f[None, :] != caps[0][:, None]) | (cost < caps[1][:, None])
        ci, cs = np.nonzero(ok)
        pick = segmented_smallest(delta[ci, cs], ci, max_rows)
        ci, cs = ci[pick], cs[pick]
        X = rows[ci].copy()
        X[np.arange(ci.size), f[cs]] = V[ci, cs]
        return X, ci

    def _price_rows(self, rows: FloatMatrix, original: FloatMatrix) -> FloatMatrix:
        """Each row's distance from its original (the per-feature costs summed)."""
        costs = None if (self.costs == 1.0).all() else self.costs
        return np.asarray(
            feature_costs(
                rows, original, self.nominal, self.scales, self.metric, costs=costs, change_penalty=self.penalty
            ).sum(axis=1),
            dtype=np.float64,
        )
