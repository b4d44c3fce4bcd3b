"""Combinations of single-feature moves, for one row or every instance of a block at once.

A combination changes 2 to ``max_features`` features of the original together, each to the value
of one of its single-feature rows ("entries": per feature, a thinned gain/cost Pareto front).
It is worth scoring when its entries' costs, added, are below the best's distance and their goal
gains, added, reach a share (``slack``) of the original's deficit. The per-row polish
(:func:`~counterplan.solver.core.trade.combo_candidates`) and the vectorised engine
(:mod:`counterplan.solver.vector.combos`) both take :func:`combinations`: one rule, in one place,
segmented by instance (a single row is a block of one), so an instance's combinations depend only
on its own entries, whatever block it runs in.

How the states grow, and why it costs what it does. An instance's entries are ranked by cost;
a partial combination (a state) grows only by entries ranked after its last, so each set of
entries is built once, and the entries cheap enough to add are one range of the ranking, found
by a binary search (:func:`cheap_ends`) instead of by pairing the state with every entry and
throwing most pairs away. A state is dropped as soon as its gain, with the largest gain its range
holds in every place left (a sparse table's range maximum, :func:`range_max`), cannot reach the
slack. Between levels each instance keeps its ``max_states`` cheapest states (the beam); at the
last level only the ``max_rows`` cheapest that reach are wanted: each state's cheapest entry that
reaches (:func:`first_reaching`) bounds the ``max_rows``-th cheapest of the instance, and only the
entries up to that bound are listed. On heloc's 100-tree forest (64 rows, 23 features) the
straightforward pairing (each state with every entry of a later feature, in feature order) listed
18 million pairs for a block, 1.8 of its 3.5 s; this lists 2.9 million. Where the cap on
states bites, the ranking also finds more: a set's partial sets are its cheapest entries, so a set
cheaper than the last state an instance keeps is always reached (in feature order, only if the
partial set of its first features was kept); states that cannot reach take no place among those
kept; and the last size keeps the cheapest that reach, not those that reach of the cheapest.

The beam's pairs (:func:`beam_pairs`) are weighed as tables a lot at a time, see there.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from counterplan.solver.core.protocol import FloatMatrix

IntArray = npt.NDArray[np.intp]
TOLERANCE = 1e-9
"""A sum of costs must be this share below the best's distance."""
COMBINATION_LOT = 256
"""Entries :func:`combinations` takes at once (whole instances, at least one): a block's
instances all at once made arrays that grew faster than the block (64 rows of a 100-tree
forest on 60 features: 13-18 s for their combinations, 2.6-3.9 s by lots, with no stop check
asked in between), and a lot's work is short enough to ask a deadline's stop check between
lots (about 0.1 s there; the demo's 206 rows take 0.02 s either way)."""
PAIR_LOT = 1 << 20
"""Pairs weighed at once (a few arrays of this size: bounded memory, whatever the block): the
beam's lots, and the size past which a combination's last size lists only the pairs that can be
among the cheapest (below it, listing them all costs less than the search for the bound)."""


def group_starts(group: IntArray) -> IntArray:
    """Where each run of equal values of a grouped (sorted) array starts."""
    if group.size == 0:
        return np.empty(0, dtype=np.intp)
    return np.asarray(np.flatnonzero(np.r_[True, group[1:] != group[:-1]]), dtype=np.intp)


def positions(group: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """For a grouped array: each element's run, its place within the run, and the runs' starts."""
    starts = group_starts(group)
    sizes = np.diff(np.r_[starts, group.size])
    run = np.repeat(np.arange(starts.size), sizes)
    return run, np.arange(group.size) - starts[run], starts


def smallest(values: FloatMatrix, k: int) -> IntArray:
    """``np.argsort(values, kind="stable")[:k]`` (the ``k`` smallest, ties in index order) without
    sorting all of ``values``: a partition finds the ``k``-th value, and only the values up to it
    are sorted. The combinations' states and pairs run to hundreds of thousands, of which a few
    thousand are kept."""
    n = values.size
    if k <= 0:
        return np.empty(0, dtype=np.intp)
    if 4 * k >= n:
        return np.argsort(values, kind="stable")[:k]
    kth = np.partition(values, k - 1)[k - 1]
    if np.isnan(kth):
        return np.argsort(values, kind="stable")[:k]
    index = np.flatnonzero(values <= kth)
    return index[np.argsort(values[index], kind="stable")[:k]]


def segmented_smallest(values: FloatMatrix, group: IntArray, k: int) -> IntArray:
    """Per group, the indices of its ``k`` smallest ``values`` (ties in index order), grouped by
    group (ascending), smallest first: :func:`~counterplan.solver.core.trade.smallest` for every
    group at once."""
    if values.size == 0 or k <= 0:
        return np.empty(0, dtype=np.intp)
    if group[0] == group[-1] and (group == group[0]).all():  # one group: a row's own search
        return smallest(values, k)
    sub = _within_kth(values, group, k)
    order = np.lexsort((values[sub], group[sub])).astype(np.intp)
    order = sub[order] if sub.size < values.size else order
    _, place, _ = positions(group[order])
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


def expand_ranges(start: IntArray, end: IntArray) -> tuple[IntArray, IntArray]:
    """Each ``i`` with each index of ``start[i]:end[i]``, by ``i`` then index (a ragged join as
    arrays)."""
    counts = np.maximum(end - start, 0)
    which = np.repeat(np.arange(start.size), counts)
    offsets = np.cumsum(counts) - counts
    return which, (start[which] + np.arange(which.size) - offsets[which]).astype(np.intp)


def cheap_ends(costs: FloatMatrix, low: IntArray, high: IntArray, base: FloatMatrix, limit: FloatMatrix) -> IntArray:
    """For each query ``i``, the first ``j`` of ``low[i]:high[i]`` where ``base[i] + costs[j]``
    reaches ``limit[i]`` (``high[i]`` when none does), ``costs`` ascending within each range.

    One ``searchsorted`` for all queries on a key ascending over the whole array (each ascending
    run of ``costs`` lifted above the one before), then a few steps that settle each end by the
    very sum and comparison the rules use, so a range holds exactly the entries cheap enough (the
    search for ``limit - base`` alone could round either way)."""
    low = np.asarray(low, dtype=np.intp)
    high = np.asarray(high, dtype=np.intp)
    if costs.size == 0 or low.size == 0:
        return low.copy()
    run = np.cumsum(np.r_[0, costs[1:] < costs[:-1]])
    finite = costs[np.isfinite(costs)]
    low_cost, high_cost = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 0.0)
    lift = (high_cost - low_cost) * 2.0 + 3.0  # an infinite cost is keyed one past the largest
    key = run * lift + np.clip(costs, low_cost - 1.0, high_cost + 1.0)
    at = np.minimum(low, costs.size - 1)
    wanted = np.clip(limit - base, low_cost - 1.0, high_cost + 1.0)
    ends = np.searchsorted(key, run[at] * lift + wanted, side="left").astype(np.intp)
    ends = np.clip(ends, low, high)
    last = costs.size - 1
    while True:  # back while the entry before is too dear, on while this one is cheap enough
        back = (ends > low) & (base + costs[np.maximum(ends - 1, 0)] >= limit)
        on = ~back & (ends < high) & (base + costs[np.minimum(ends, last)] < limit)
        if not (back.any() or on.any()):
            return ends
        ends = ends - back + on


def sparse_max(values: FloatMatrix) -> FloatMatrix:
    """A sparse table of ``values``: row ``k`` holds the maximum of ``values[i : i + 2**k]`` at
    ``i`` (``-inf`` past the end), so any range's maximum is two lookups (:func:`range_max`)."""
    levels = max(int(values.size).bit_length(), 1)
    table = np.full((levels, values.size), -np.inf)
    table[0] = values
    width = 1
    for k in range(1, levels):
        table[k, : values.size - width] = np.maximum(table[k - 1, :-width], table[k - 1, width:])
        width *= 2
    return table


def range_max(table: FloatMatrix, start: IntArray, end: IntArray) -> FloatMatrix:
    """The maximum of each ``values[start[i]:end[i]]`` (``-inf`` when empty) from its
    :func:`sparse_max` table."""
    size = np.maximum(end - start, 0)
    level = np.maximum(np.frexp(size)[1] - 1, 0)  # floor(log2(size)), 0 for an empty range
    last = max(table.shape[1] - 1, 0)
    out = np.maximum(table[level, np.minimum(start, last)], table[level, np.clip(end - (1 << level), 0, last)])
    return np.where(size > 0, out, -np.inf)


def first_reaching(table: FloatMatrix, low: IntArray, high: IntArray, need: FloatMatrix) -> IntArray:
    """For each query ``i``, the first ``j`` of ``low[i]:high[i]`` whose value reaches
    ``need[i]`` (``high[i]`` when none does): a binary search on the range maxima of
    ``low[i]:j + 1``, all queries at once."""
    start = np.asarray(low, dtype=np.intp)
    low, high = start.copy(), np.asarray(high, dtype=np.intp).copy()
    open_ = np.flatnonzero(low < high)
    while open_.size:
        mid = (low[open_] + high[open_]) // 2
        hit = range_max(table, start[open_], mid + 1) >= need[open_]
        high[open_[hit]] = mid[hit]
        low[open_[~hit]] = mid[~hit] + 1
        open_ = open_[low[open_] < high[open_]]
    return low


def combinations(
    inst: IntArray,
    feature: IntArray,
    cost: FloatMatrix,
    gain: FloatMatrix,
    *,
    deficit: FloatMatrix,
    best: FloatMatrix,
    max_features: int,
    slack: float,
    max_rows: int,
    max_states: int,
    should_stop: Callable[[], bool] | None = None,
) -> tuple[IntArray, IntArray, FloatMatrix]:
    """Combinations of the entries ``inst``, ``feature``, ``cost``, ``gain`` (grouped by
    instance, gains positive): per instance (``deficit`` and ``best`` indexed by instance), sets
    of 2 to ``max_features`` entries of distinct features whose costs added are below ``best``
    (less :data:`TOLERANCE`) and whose gains added reach ``slack`` of ``deficit``, the
    ``max_rows`` cheapest (ties: the order they are built in). Between sizes an instance keeps
    its ``max_states`` cheapest partial sets that can still reach. Returns each combination's
    instance, its entries (indices into the given arrays, ``-1`` padded to ``max_features``)
    and its gains added, grouped by instance.

    The instances are taken a lot at a time (:data:`COMBINATION_LOT`), and ``should_stop`` (a
    deadline's stop check) is asked before each lot and each size: once it says stop, what was
    found comes back and the instances not reached have none (the caller stops before its next
    model call). An instance's combinations are its own, so the lots change nothing else."""
    empty = (np.empty(0, dtype=np.intp), np.empty((0, max_features), dtype=np.intp), np.empty(0))
    found: list[tuple[IntArray, IntArray, FloatMatrix]] = []
    for start, end in _instance_lots(inst, COMBINATION_LOT):
        if should_stop is not None and should_stop():
            break
        got_inst, chosen, gained = _lot_combinations(
            inst[start:end],
            feature[start:end],
            cost[start:end],
            gain[start:end],
            deficit=deficit,
            best=best,
            max_features=max_features,
            slack=slack,
            max_rows=max_rows,
            max_states=max_states,
            should_stop=should_stop,
        )
        found.append((got_inst, np.where(chosen >= 0, chosen + start, -1), gained))
    if not found:
        return empty
    return (
        np.concatenate([f[0] for f in found]),
        np.vstack([f[1] for f in found]),
        np.concatenate([f[2] for f in found]),
    )


def _instance_lots(inst: IntArray, size: int) -> list[tuple[int, int]]:
    """``inst`` (grouped by instance) cut at instance boundaries into ranges of about ``size``
    entries (an instance larger than that is a range of its own); one range when it is not
    grouped (an instance must not span two)."""
    n = inst.size
    if n == 0:
        return []
    if (np.diff(inst) < 0).any():
        return [(0, n)]
    starts = [*group_starts(inst).tolist(), n]
    lots: list[tuple[int, int]] = []
    begin = 0
    for at in starts[1:]:
        if at - begin >= size or at == n:
            lots.append((begin, at))
            begin = at
    return lots


def _lot_combinations(
    inst: IntArray,
    feature: IntArray,
    cost: FloatMatrix,
    gain: FloatMatrix,
    *,
    deficit: FloatMatrix,
    best: FloatMatrix,
    max_features: int,
    slack: float,
    max_rows: int,
    max_states: int,
    should_stop: Callable[[], bool] | None,
) -> tuple[IntArray, IntArray, FloatMatrix]:
    """:func:`combinations` of one lot of instances (``should_stop`` asked before each size)."""
    empty = (np.empty(0, dtype=np.intp), np.empty((0, max_features), dtype=np.intp), np.empty(0))
    if inst.size == 0:
        return empty
    ranked = np.lexsort((np.arange(inst.size), cost, inst)).astype(np.intp)
    e_inst, e_feature, e_cost, e_gain = inst[ranked], feature[ranked], cost[ranked], gain[ranked]
    inst_end = np.searchsorted(e_inst, e_inst, side="right").astype(np.intp)
    need = slack * deficit
    loose = need - 1e-9 * (1.0 + np.abs(need))  # the bounds' sums round apart from the rule's
    limit = best * (1.0 - TOLERANCE)
    table = sparse_max(e_gain)
    after = np.maximum(range_max(table, np.arange(1, e_inst.size + 1), inst_end), 0.0)  # gain ranked after
    bits = _FeatureBits(e_feature)
    state = np.arange(e_inst.size, dtype=np.intp).reshape(-1, 1)
    used = bits.of(state[:, 0])
    s_inst, s_cost, s_gain = e_inst, e_cost, e_gain
    found: list[tuple[IntArray, IntArray, FloatMatrix, FloatMatrix]] = []
    for size in range(2, max_features + 1):
        if size > 2 and should_stop is not None and should_stop():
            break
        last = state[:, -1]
        ends = cheap_ends(e_cost, last + 1, inst_end[last], s_cost, limit[s_inst])
        left = max_features - size + 1  # places a state may still fill
        hopeful = s_gain + left * range_max(table, last + 1, ends) >= loose[s_inst]
        state, used, last, ends = state[hopeful], used[hopeful], last[hopeful], ends[hopeful]
        s_inst, s_cost, s_gain = s_inst[hopeful], s_cost[hopeful], s_gain[hopeful]
        if size == max_features and int(np.maximum(ends - last - 1, 0).sum()) > PAIR_LOT:
            si, ei = _last_pairs(
                last,
                used=used,
                bits=bits,
                e_cost=e_cost,
                table=table,
                s_inst=s_inst,
                s_cost=s_cost,
                s_gain=s_gain,
                ends=ends,
                need=need,
                max_rows=max_rows,
            )
        else:
            si, ei = bits.apart(used, *expand_ranges(last + 1, ends))
        pair_inst, pair_cost, pair_gain = s_inst[si], s_cost[si] + e_cost[ei], s_gain[si] + e_gain[ei]
        if size == max_features:
            reach = pair_gain >= need[pair_inst]
            pick = np.flatnonzero(reach)[segmented_smallest(pair_cost[reach], pair_inst[reach], max_rows)]
        else:
            still = pair_gain + (left - 1) * after[ei] >= loose[pair_inst]
            pick = np.flatnonzero(still)[segmented_smallest(pair_cost[still], pair_inst[still], max_states)]
        state = np.hstack([state[si[pick]], ei[pick].reshape(-1, 1)])
        used = bits.add(used[si[pick]], ei[pick])
        s_inst, s_cost, s_gain = pair_inst[pick], pair_cost[pick], pair_gain[pick]
        reach = s_gain >= need[s_inst]
        if reach.any():
            found.append((s_inst[reach], state[reach], s_cost[reach], s_gain[reach]))
        if state.shape[0] == 0:
            break
    if not found:
        return empty
    inst_found = np.concatenate([f[0] for f in found])
    padded = [np.pad(f[1], ((0, 0), (0, max_features - f[1].shape[1])), constant_values=-1) for f in found]
    pick = segmented_smallest(np.concatenate([f[2] for f in found]), inst_found, max_rows)
    states = np.vstack(padded)[pick]
    chosen = np.where(states >= 0, ranked[np.maximum(states, 0)], -1)
    return inst_found[pick], chosen, np.concatenate([f[3] for f in found])[pick]


class _FeatureBits:
    """Which features a state has, as bits (one ``uint64`` word per 64 features): whether an
    entry's feature is new to a state is one lookup, whatever the state's size."""

    def __init__(self, e_feature: IntArray) -> None:
        self.word = (e_feature >> 6).astype(np.intp)
        self.bit = np.left_shift(np.uint64(1), (e_feature & 63).astype(np.uint64))
        self.words = int(self.word.max()) + 1 if e_feature.size else 1

    def of(self, entries: IntArray) -> npt.NDArray[np.uint64]:
        """The bits of states of one entry each."""
        return self.add(np.zeros((entries.size, self.words), dtype=np.uint64), entries)

    def add(self, used: npt.NDArray[np.uint64], entries: IntArray) -> npt.NDArray[np.uint64]:
        """``used`` (a copy) with each row's entry's feature set."""
        used = used.copy()
        used[np.arange(entries.size), self.word[entries]] |= self.bit[entries]
        return used

    def has(self, used: npt.NDArray[np.uint64], si: IntArray, ei: IntArray) -> npt.NDArray[np.bool_]:
        """Whether state ``si`` has entry ``ei``'s feature already."""
        held = used[si, 0] if self.words == 1 else used[si, self.word[ei]]
        return np.asarray((held & self.bit[ei]) != 0)

    def apart(self, used: npt.NDArray[np.uint64], si: IntArray, ei: IntArray) -> tuple[IntArray, IntArray]:
        """The pairs (state ``si``, entry ``ei``) whose entry's feature is new to the state."""
        keep = ~self.has(used, si, ei)
        return si[keep], ei[keep]


def _last_pairs(
    last: IntArray,
    *,
    used: npt.NDArray[np.uint64],
    bits: _FeatureBits,
    e_cost: FloatMatrix,
    table: FloatMatrix,
    s_inst: IntArray,
    s_cost: FloatMatrix,
    s_gain: FloatMatrix,
    ends: IntArray,
    need: FloatMatrix,
    max_rows: int,
) -> tuple[IntArray, IntArray]:
    """The pairs of the last size that can be among an instance's ``max_rows`` cheapest that
    reach, listed in the order of the full join (so ties break alike).

    Each state's cheapest entry that reaches, of a feature the state lacks, is a combination; the
    ``max_rows``-th cheapest of these (per instance, when it has that many) bounds the
    ``max_rows``-th cheapest of all, so each state lists only the entries from its first that
    reaches up to that bound."""
    want = need[s_inst] - s_gain
    want -= 1e-9 * (1.0 + np.abs(want))  # a superset: the sums themselves decide below
    first = first_reaching(table, last + 1, ends, want)
    clash = np.flatnonzero(first < ends)
    while clash.size:  # an entry of a feature the state has: the next one that reaches
        clash = clash[bits.has(used, clash, first[clash])]
        first[clash] = first_reaching(table, first[clash] + 1, ends[clash], want[clash])
        clash = clash[first[clash] < ends[clash]]
    has = np.flatnonzero(first < ends)
    has = has[s_gain[has] + table[0][first[has]] >= need[s_inst[has]]]  # heads that reach, by the rule's sum
    bound = np.full(need.size, np.inf)
    heads = s_cost[has] + e_cost[first[has]]
    pick = segmented_smallest(heads, s_inst[has], max_rows)
    inst_of = s_inst[has][pick]
    starts = group_starts(inst_of)
    counts = np.diff(np.r_[starts, inst_of.size])
    full = starts[counts >= max_rows]
    bound[inst_of[full]] = heads[pick][full + max_rows - 1]
    upto = cheap_ends(e_cost, first, ends, s_cost, np.nextafter(bound[s_inst], np.inf))
    return bits.apart(used, *expand_ranges(first, np.minimum(upto, ends)))


def beam_pairs(
    inst: IntArray,
    feature: IntArray,
    cost: FloatMatrix,
    gain: FloatMatrix,
    *,
    best: FloatMatrix,
    width: int,
    max_rows: int,
    should_stop: Callable[[], bool] | None = None,
) -> tuple[IntArray, IntArray]:
    """The beam's pairs of single rows ``inst``, ``feature``, ``cost``, ``gain`` (grouped by
    instance; ``best`` indexed by instance): every single row of an instance's ``width``
    features that gain most, paired with every single row of another feature (each pair once: a
    leading feature with a later one, or with an earlier one that does not lead), where the
    costs added are below the instance's ``best``; per instance the ``max_rows`` largest gains
    added (ties: by the first row, then the second). Returns the pairs' two rows.

    The pairs are weighed as tables, a lot of instances at a time (each instance's leading rows
    x its rows cheap enough beside its cheapest leading row, padded to the lot's largest), and
    only those reaching their instance's
    ``max_rows``-th largest sum (one partition a lot) are listed and ranked: 64 rows of the demo's
    forest have 31 million pairs, which listed one by one took most of a block's time and
    gigabytes of memory. ``should_stop`` (a deadline's stop check) is asked before each lot: once
    it says stop, the pairs weighed come back and the instances not reached have none."""
    none = (np.empty(0, dtype=np.intp), np.empty(0, dtype=np.intp))
    if inst.size == 0 or width <= 0 or max_rows <= 0:
        return none
    count, n_features = best.size, int(feature.max()) + 1
    top = np.full((count, n_features), -np.inf)
    group = inst * n_features + feature
    order = np.argsort(group, kind="stable")
    starts = group_starts(group[order])
    top.ravel()[group[order][starts]] = np.maximum.reduceat(gain[order], starts)
    leaders = np.argsort(-top, axis=1, kind="stable")[:, :width]
    leader = np.zeros((count, n_features), dtype=bool)
    rows = np.repeat(np.arange(count), leaders.shape[1])
    leader[rows, leaders.ravel()] = top[rows, leaders.ravel()] > 0
    is_leader = leader[inst, feature]
    lead = np.flatnonzero(is_leader)
    if lead.size == 0:
        return none
    limit = best * (1.0 - TOLERANCE)
    every = np.arange(count)
    lead_start, lead_size = _runs(inst[lead], every)
    cheapest_lead = np.full(count, np.inf)
    np.minimum.at(cheapest_lead, inst[lead], cost[lead])
    # each instance's rows by cost: only those cheap enough beside its cheapest leading row
    by_cost = np.lexsort((np.arange(inst.size), cost, inst)).astype(np.intp)
    row_start, row_size = _runs(inst[by_cost], every)
    finite = np.where(np.isfinite(cheapest_lead), cheapest_lead, 0.0)
    row_size = cheap_ends(cost[by_cost], row_start, row_start + row_size, finite, limit) - row_start
    kept: list[tuple[IntArray, IntArray]] = []
    for mine in _lots(np.flatnonzero((lead_size > 0) & (row_size > 0)), lead_size, row_size):
        if should_stop is not None and should_stop():
            break
        a_at, a_in = _table(lead_start[mine], lead_size[mine])
        b_at, b_in = _table(row_start[mine], row_size[mine])
        a_of, b_of = lead[a_at][:, :, None], by_cost[b_at][:, None, :]
        fa, fb = feature[a_of], feature[b_of]
        ok = (fa < fb) | ((fa > fb) & ~is_leader[b_of])
        ok &= cost[a_of] + cost[b_of] < limit[mine][:, None, None]
        ok &= a_in[:, :, None] & b_in[:, None, :]
        sums = np.where(ok, gain[a_of] + gain[b_of], -np.inf).reshape(mine.size, -1)
        if sums.shape[1] > max_rows:  # each instance's max_rows-th largest sum
            floor = -np.partition(-sums, max_rows - 1, axis=1)[:, max_rows - 1 : max_rows]
            ok &= (sums >= floor).reshape(ok.shape)
        g, i, j = np.nonzero(ok)
        kept.append((lead[a_at[g, i]], by_cost[b_at[g, j]]))
    if not kept:
        return none
    a = np.concatenate([k[0] for k in kept])
    b = np.concatenate([k[1] for k in kept])
    canonical = np.lexsort((b, a, inst[a]))  # by instance, then the first row, then the second
    a, b = a[canonical], b[canonical]
    pick = segmented_smallest(-(gain[a] + gain[b]), inst[a], max_rows)
    return a[pick], b[pick]


def _lots(has: IntArray, lead_size: IntArray, row_size: IntArray) -> list[IntArray]:
    """The instances ``has``, by size (largest first), cut into lots whose padded table (the
    lot's instances x its most leading rows x its most rows) stays within ``PAIR_LOT`` (or one
    instance, however large): instances of very different sizes share no table."""
    order = has[np.argsort(-(lead_size[has] * row_size[has]), kind="stable")]
    lots: list[IntArray] = []
    start, most_lead, most_rows = 0, 0, 0
    for k, i in enumerate(order.tolist()):
        wide_lead, wide_rows = max(most_lead, int(lead_size[i])), max(most_rows, int(row_size[i]))
        if k > start and (k - start + 1) * wide_lead * wide_rows > PAIR_LOT:
            lots.append(order[start:k])
            start, wide_lead, wide_rows = k, int(lead_size[i]), int(row_size[i])
        most_lead, most_rows = wide_lead, wide_rows
    if order.size:
        lots.append(order[start:])
    return lots


def _runs(grouped: IntArray, of: IntArray) -> tuple[IntArray, IntArray]:
    """Where each value of ``of`` starts in the grouped (sorted) array, and how many it has."""
    start = np.searchsorted(grouped, of, side="left").astype(np.intp)
    return start, np.searchsorted(grouped, of, side="right").astype(np.intp) - start


def _table(start: IntArray, size: IntArray) -> tuple[IntArray, npt.NDArray[np.bool_]]:
    """The indices ``start[k] : start[k] + size[k]`` as row ``k`` of a table padded with the
    row's first index, and where the table holds a real one."""
    width = np.arange(int(size.max()))
    inside = width[None, :] < size[:, None]
    return np.where(inside, start[:, None] + width[None, :], start[:, None]).astype(np.intp), inside
