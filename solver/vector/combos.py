"""Combinations and the beam for every instance of a block at once: rows that change several
features of the original together, which single moves and a bisection do not reach.

The per-row polish (:class:`~counterplan.solver.local.polish.BoundaryPolishPhase`) scores the
original's single-feature rows, then rows changing 2-4 features of the original at once where the
single rows' goal gains, added, reach a share of the deficit
(:func:`~counterplan.solver.core.trade.combo_candidates`), and, where none is predicted to reach
all of it, a beam: every value of the features that gain most paired with every value of another
(:func:`~counterplan.solver.core.trade.beam_candidates`), then the rows nearest the goal with one
more feature each (:func:`~counterplan.solver.core.trade.extend_candidates`). On adult GB these are
the rows the vectorised engine missed: give back the many hours a week its walkers bought, and take
a few years of education with a cheap move of fnlwgt to a split value instead.

Here the same rules run on flat arrays of every instance's single rows, each keyed by its
instance: the fronts, the joins of a combination's features, the caps (the cheapest, or the
largest gains, per instance) are all segmented by instance, so the rows an instance gets depend
only on its own single rows, whatever block it runs in. Its single rows are the scan's first pass
(the original with each feature at each value of its grid and split values, one per cell of the
trees), which the block has scored already.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from counterplan.solver.core.protocol import BoolArray, FloatMatrix

IntArray = npt.NDArray[np.intp]
_TOLERANCE = 1e-9
"""A sum of costs must be this share below the best's distance (as the per-row rules)."""


@dataclass
class Singles:
    """Single-feature rows of a block's instances, grouped by instance: row ``k`` sets feature
    ``feature[k]`` of instance ``inst[k]``'s original to ``value[k]``, at distance ``cost[k]``,
    gaining ``gain[k]`` goal distance over the original."""

    inst: IntArray
    feature: IntArray
    value: FloatMatrix
    cost: FloatMatrix
    gain: FloatMatrix

    def take(self, keep: IntArray | BoolArray) -> Singles:
        """The rows ``keep`` (in instance order)."""
        return Singles(self.inst[keep], self.feature[keep], self.value[keep], self.cost[keep], self.gain[keep])


def group_starts(group: IntArray) -> IntArray:
    """Where each run of equal values of a grouped (sorted) array starts."""
    if group.size == 0:
        return np.empty(0, dtype=np.intp)
    return np.asarray(np.flatnonzero(np.r_[True, group[1:] != group[:-1]]), dtype=np.intp)


def _positions(group: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """For a grouped array: each element's run, its place within the run, and the runs' starts."""
    starts = group_starts(group)
    sizes = np.diff(np.r_[starts, group.size])
    run = np.repeat(np.arange(starts.size), sizes)
    return run, np.arange(group.size) - starts[run], starts


def segmented_smallest(values: FloatMatrix, group: IntArray, k: int) -> IntArray:
    """Per group, the indices of its ``k`` smallest ``values`` (ties in index order), grouped by
    group (ascending), smallest first: :func:`~counterplan.solver.core.trade.smallest` for every
    group at once."""
    if values.size == 0 or k <= 0:
        return np.empty(0, dtype=np.intp)
    sub = _within_kth(values, group, k)
    order = np.lexsort((values[sub], group[sub])).astype(np.intp)
    order = sub[order] if sub.size < values.size else order
    _, place, _ = _positions(group[order])
    return order[place < k]


def _within_kth(values: FloatMatrix, group: IntArray, k: int) -> IntArray:
    """The entries of a grouped (sorted) array no larger than their group's ``k``-th smallest
    value (every entry of a group of at most ``k``): a superset of each group's ``k`` smallest,
    found in linear time, so that only they are sorted. The groups of more than ``k`` are taken
    by their sizes' power of two, each lot as a table of one row a group for ``np.partition``
    (a few lots a call, none per group). All entries where the groups are not sorted or a value
    is NaN."""
    n = values.size
    if n <= 4 * k or (np.diff(group) < 0).any() or np.isnan(values).any():
        return np.arange(n, dtype=np.intp)
    starts = group_starts(group)
    sizes = np.diff(np.r_[starts, n])
    keep = np.repeat(sizes <= k, sizes)
    big = np.flatnonzero(sizes > k)
    lots = np.ceil(np.log2(sizes[big])).astype(np.intp)
    for lot in np.unique(lots).tolist():
        mine = big[lots == lot]
        width = int(sizes[mine].max())
        at = starts[mine][:, None] + np.arange(width)[None, :]
        inside = np.arange(width)[None, :] < sizes[mine][:, None]
        table = np.where(inside, values[np.minimum(at, n - 1)], np.inf)
        kth = np.partition(table, k - 1, axis=1)[:, k - 1 : k]
        keep[at[inside & (table <= kth)]] = True
    return np.asarray(np.flatnonzero(keep), dtype=np.intp)


def pareto_fronts(group: IntArray, cost: FloatMatrix, gain: FloatMatrix) -> IntArray:
    """:func:`~counterplan.solver.core.trade.pareto_front` per group (an instance's feature): the
    entries that gain more than every cheaper entry of their group, grouped, cheapest first."""
    index = np.flatnonzero(gain > 1e-12)
    if index.size == 0:
        return index.astype(np.intp)
    order = index[np.lexsort((-gain[index], cost[index], group[index]))]
    run, place, starts = _positions(group[order])
    table = np.full((starts.size, int(place.max()) + 1), -np.inf)
    table[run, place] = gain[order]
    top = np.maximum.accumulate(table, axis=1)
    before = np.where(place > 0, top[run, np.maximum(place - 1, 0)], -np.inf)
    return order[gain[order] > before + 1e-12].astype(np.intp)


def thinned(front: IntArray, group: IntArray, per_group: int) -> IntArray:
    """At most ``per_group`` entries of each group's front (evenly along it, both ends kept, as
    :func:`~counterplan.solver.core.trade.combo_candidates` thins a feature's)."""
    if front.size == 0:
        return front
    run, place, starts = _positions(group[front])
    sizes = np.diff(np.r_[starts, front.size])
    keep = sizes[run] <= per_group
    for size in np.unique(sizes[sizes > per_group]).tolist():  # a few distinct sizes, not per group
        chosen = np.zeros(size, dtype=bool)
        chosen[np.unique(np.linspace(0, size - 1, per_group).round().astype(np.intp))] = True
        mine = sizes[run] == size
        keep[mine] = chosen[place[mine]]
    return np.asarray(front[keep], dtype=np.intp)


def _expand(start: IntArray, end: IntArray) -> tuple[IntArray, IntArray]:
    """For ranges ``start[i]:end[i]``: each element's range and index (a ragged join as arrays)."""
    counts = np.maximum(end - start, 0)
    which = np.repeat(np.arange(start.size), counts)
    offsets = np.cumsum(counts) - counts
    return which, (start[which] + np.arange(which.size) - offsets[which]).astype(np.intp)


def cheaper_ranges(
    inst: IntArray, cost: FloatMatrix, of: IntArray, budget: FloatMatrix
) -> tuple[IntArray, IntArray, IntArray]:
    """For each query ``k``: where the rows of instance ``of[k]`` (``inst``, ``cost``) that cost
    less than ``budget[k]`` lie: ``order[start[k]:end[k]]``, the rows sorted by instance, then
    cost.

    Each query's instance's rows are found by ``searchsorted`` on the sorted instances, and the
    end of its cheap ones by a binary search of all queries at once (a few passes over the
    queries): exactly the rows below the budget, whatever else the block holds (a shared key of
    instance and cost would round by the block's largest budget, and a draw among the rows
    would then depend on the block)."""
    order = np.lexsort((cost, inst)).astype(np.intp)
    sorted_inst, sorted_cost = inst[order], cost[order]
    start = np.searchsorted(sorted_inst, of, side="left").astype(np.intp)
    high = np.searchsorted(sorted_inst, of, side="right").astype(np.intp)
    low = start.copy()
    open_ = low < high
    while open_.any():
        mid = (low + high) // 2
        below = sorted_cost[np.minimum(mid, max(order.size - 1, 0))] < budget
        low = np.where(open_ & below, mid + 1, low)
        high = np.where(open_ & ~below, mid, high)
        open_ = low < high
    return order, start, low


def cheaper(inst: IntArray, cost: FloatMatrix, of: IntArray, budget: FloatMatrix) -> tuple[IntArray, IntArray]:
    """Every row of :func:`cheaper_ranges` listed: a ragged join that skips the pairs too dear to
    matter. Each found row's query and its index, by query then index (the order of the full
    join, so caps break ties alike)."""
    order, start, end = cheaper_ranges(inst, cost, of, budget)
    which, at = _expand(start, end)
    found = order[at]
    # by query, then index: one stable sort of a combined key (the queries are in order)
    again = np.argsort(which.astype(np.int64) * max(inst.size, 1) + found, kind="stable")
    return which[again], found[again]


def combinations(
    singles: Singles,
    entries: IntArray,
    *,
    n_features: int,
    deficit: FloatMatrix,
    best: FloatMatrix,
    max_features: int,
    slack: float,
    max_rows: int,
    max_states: int,
) -> tuple[IntArray, IntArray, FloatMatrix]:
    """:func:`~counterplan.solver.core.trade.combo_candidates` for every instance: from each
    instance's ``entries`` (its thinned fronts, grouped by instance and feature), combinations of
    2 to ``max_features`` features whose costs added are below the instance's ``best`` distance
    and whose gains added reach ``slack`` of its ``deficit``; per instance the ``max_rows``
    cheapest. Returns each combination's instance, its entries (``-1`` padded) and gains added."""
    empty = (np.empty(0, dtype=np.intp), np.empty((0, max_features), dtype=np.intp), np.empty(0))
    if entries.size == 0:
        return empty
    e_inst, e_feature = singles.inst[entries], singles.feature[entries]
    e_cost, e_gain = singles.cost[entries], singles.gain[entries]
    e_key = e_inst * n_features + e_feature
    state = np.arange(entries.size, dtype=np.intp).reshape(-1, 1)
    s_inst, s_cost, s_gain = e_inst, e_cost, e_gain
    found: list[tuple[IntArray, IntArray, FloatMatrix, FloatMatrix]] = []
    for _ in range(max_features - 1):
        # each state with each entry of a later feature of its instance
        start = np.searchsorted(e_key, s_inst * n_features + e_feature[state[:, -1]], side="right")
        end = np.searchsorted(e_inst, s_inst, side="right")
        si, ei = _expand(start, end)
        cost = s_cost[si] + e_cost[ei]
        ok = cost < best[s_inst[si]] * (1.0 - _TOLERANCE)
        si, ei, cost = si[ok], ei[ok], cost[ok]
        inst = s_inst[si]
        pick = segmented_smallest(cost, inst, max_states)
        si, ei, cost, inst = si[pick], ei[pick], cost[pick], inst[pick]
        state = np.hstack([state[si], ei.reshape(-1, 1)])
        s_inst, s_cost, s_gain = inst, cost, s_gain[si] + e_gain[ei]
        reach = s_gain >= slack * deficit[s_inst]
        if reach.any():
            found.append((s_inst[reach], state[reach], s_cost[reach], s_gain[reach]))
        if state.shape[0] == 0:
            break
    if not found:
        return empty
    inst = np.concatenate([f[0] for f in found])
    padded = [np.pad(f[1], ((0, 0), (0, max_features - f[1].shape[1])), constant_values=-1) for f in found]
    states = np.vstack(padded)
    pick = segmented_smallest(np.concatenate([f[2] for f in found]), inst, max_rows)
    states = states[pick]
    chosen = np.where(states >= 0, entries[np.maximum(states, 0)], -1)
    return inst[pick], chosen, np.concatenate([f[3] for f in found])[pick]


def combination_rows(originals: FloatMatrix, singles: Singles, inst: IntArray, chosen: IntArray) -> FloatMatrix:
    """Each instance's original with the features of its ``chosen`` single rows (``-1``: none) set."""
    out: FloatMatrix = originals[inst].copy()
    rows = np.arange(inst.size)
    for col in range(chosen.shape[1]):
        has = chosen[:, col] >= 0
        entry = chosen[has, col]
        out[rows[has], singles.feature[entry]] = singles.value[entry]
    return out


def beam_pairs(
    singles: Singles, *, count: int, n_features: int, best: FloatMatrix, width: int, max_rows: int
) -> tuple[IntArray, IntArray]:
    """:func:`~counterplan.solver.core.trade.beam_candidates` for every instance of ``singles``
    (grouped by instance): every single row of the instance's ``width`` features that gain most,
    paired with every single row of another feature (each pair once), where the costs added are
    below the instance's ``best``; per instance the ``max_rows`` largest gains added. The pairs'
    two single rows."""
    none = (np.empty(0, dtype=np.intp), np.empty(0, dtype=np.intp))
    if singles.inst.size == 0 or width <= 0:
        return none
    top = np.full((count, n_features), -np.inf)
    group = singles.inst * n_features + singles.feature
    order = np.argsort(group, kind="stable")
    starts = group_starts(group[order])
    top.ravel()[group[order][starts]] = np.maximum.reduceat(singles.gain[order], starts)
    leaders = np.argsort(-top, axis=1, kind="stable")[:, :width]
    leader = np.zeros((count, n_features), dtype=bool)
    rows = np.repeat(np.arange(count), leaders.shape[1])
    leader[rows, leaders.ravel()] = top[rows, leaders.ravel()] > 0
    is_leader = leader[singles.inst, singles.feature]
    lead = np.flatnonzero(is_leader)
    best_of = best[singles.inst[lead]] * (1.0 - _TOLERANCE)
    li, other = cheaper(singles.inst, singles.cost, singles.inst[lead], best_of - singles.cost[lead])
    a = lead[li]
    fa, fb = singles.feature[a], singles.feature[other]
    pair = (fa < fb) | ((fa > fb) & ~is_leader[other])
    pair &= singles.cost[a] + singles.cost[other] < best[singles.inst[a]] * (1.0 - _TOLERANCE)
    a, other = a[pair], other[pair]
    pick = segmented_smallest(-(singles.gain[a] + singles.gain[other]), singles.inst[a], max_rows)
    return a[pick], other[pick]


def pair_rows(originals: FloatMatrix, singles: Singles, a: IntArray, b: IntArray) -> FloatMatrix:
    """Each pair's instance's original with both single rows' features set."""
    out: FloatMatrix = originals[singles.inst[a]].copy()
    rows = np.arange(a.size)
    out[rows, singles.feature[a]] = singles.value[a]
    out[rows, singles.feature[b]] = singles.value[b]
    return out


def beam_keep(scores: FloatMatrix, inst: IntArray, keep: int) -> IntArray:
    """Per instance, its ``keep`` rows nearest the goal (hard levels, then distance) that do not
    reach it yet: the per-row polish's ``_beam_rows`` for every instance."""
    short = np.flatnonzero(scores[:, 0] < 0.0)
    if short.size == 0:
        return short.astype(np.intp)
    order = short[np.lexsort((*(-scores[short]).T[::-1], inst[short]))]
    _, place, _ = _positions(inst[order])
    return order[place < keep].astype(np.intp)


def extend_rows(
    rows: FloatMatrix,
    inst: IntArray,
    row_cost: FloatMatrix,
    row_gain: FloatMatrix,
    singles: Singles,
    *,
    originals: FloatMatrix,
    best: FloatMatrix,
    max_rows: int,
) -> tuple[FloatMatrix, IntArray]:
    """:func:`~counterplan.solver.core.trade.extend_candidates` for every instance: each of
    ``rows`` (of instances ``inst``, at distance ``row_cost``, real goal gain ``row_gain``) with
    one more single row of its instance, of a feature it leaves at the original, where the costs
    added are below the instance's ``best``; per instance the ``max_rows`` largest gains (the
    row's plus the single's). The rows and their instances."""
    ri, ei = cheaper(singles.inst, singles.cost, inst, best[inst] * (1.0 - _TOLERANCE) - row_cost)
    feature = singles.feature[ei]
    ok = row_cost[ri] + singles.cost[ei] < best[inst[ri]] * (1.0 - _TOLERANCE)
    ok &= rows[ri, feature] == originals[inst[ri], feature]
    ri, ei = ri[ok], ei[ok]
    pick = segmented_smallest(-(row_gain[ri] + singles.gain[ei]), inst[ri], max_rows)
    ri, ei = ri[pick], ei[pick]
    out: FloatMatrix = rows[ri].copy()
    out[np.arange(ri.size), singles.feature[ei]] = singles.value[ei]
    return out, inst[ri]
