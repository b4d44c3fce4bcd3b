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

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from counterplan.solver.core.combinations import (
    TOLERANCE as _TOLERANCE,
    beam_pairs as core_beam_pairs,
    cheap_ends,
    combinations as core_combinations,
    expand_ranges,
    positions,
    segmented_smallest,
)
from counterplan.solver.core.protocol import BoolArray, FloatMatrix

IntArray = npt.NDArray[np.intp]


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


def pareto_fronts(group: IntArray, cost: FloatMatrix, gain: FloatMatrix) -> IntArray:
    """:func:`~counterplan.solver.core.trade.pareto_front` per group (an instance's feature): the
    entries that gain more than every cheaper entry of their group, grouped, cheapest first."""
    index = np.flatnonzero(gain > 1e-12)
    if index.size == 0:
        return index.astype(np.intp)
    order = index[np.lexsort((-gain[index], cost[index], group[index]))]
    run, place, starts = positions(group[order])
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
    run, place, starts = positions(group[front])
    sizes = np.diff(np.r_[starts, front.size])
    keep = sizes[run] <= per_group
    for size in np.unique(sizes[sizes > per_group]).tolist():  # a few distinct sizes, not per group
        chosen = np.zeros(size, dtype=bool)
        chosen[np.unique(np.linspace(0, size - 1, per_group).round().astype(np.intp))] = True
        mine = sizes[run] == size
        keep[mine] = chosen[place[mine]]
    return np.asarray(front[keep], dtype=np.intp)


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
    return order, start, cheap_ends(sorted_cost, start, high, np.zeros(of.size), budget)


def cheaper(inst: IntArray, cost: FloatMatrix, of: IntArray, budget: FloatMatrix) -> tuple[IntArray, IntArray]:
    """Every row of :func:`cheaper_ranges` listed: a ragged join that skips the pairs too dear to
    matter. Each found row's query and its index, by query then index (the order of the full
    join, so caps break ties alike)."""
    order, start, end = cheaper_ranges(inst, cost, of, budget)
    which, at = expand_ranges(start, end)
    found = order[at]
    # by query, then index: one stable sort of a combined key (the queries are in order)
    again = np.argsort(which.astype(np.int64) * max(inst.size, 1) + found, kind="stable")
    return which[again], found[again]


def combinations(
    singles: Singles,
    entries: IntArray,
    *,
    deficit: FloatMatrix,
    best: FloatMatrix,
    max_features: int,
    slack: float,
    max_rows: int,
    max_states: int,
    should_stop: Callable[[], bool] | None = None,
) -> tuple[IntArray, IntArray, FloatMatrix]:
    """:func:`~counterplan.solver.core.trade.combo_candidates` for every instance: the
    :func:`~counterplan.solver.core.combinations.combinations` of each instance's ``entries``
    (its thinned fronts, grouped by instance and feature), ``should_stop`` asked between its lots.
    Returns each combination's instance, its single rows (``-1`` padded) and gains added."""
    inst, chosen, gained = core_combinations(
        singles.inst[entries],
        singles.feature[entries],
        singles.cost[entries],
        singles.gain[entries],
        deficit=deficit,
        best=best,
        max_features=max_features,
        slack=slack,
        max_rows=max_rows,
        max_states=max_states,
        should_stop=should_stop,
    )
    return inst, np.where(chosen >= 0, entries[np.maximum(chosen, 0)], -1), gained


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
    singles: Singles,
    *,
    best: FloatMatrix,
    width: int,
    max_rows: int,
    should_stop: Callable[[], bool] | None = None,
) -> tuple[IntArray, IntArray]:
    """:func:`~counterplan.solver.core.trade.beam_candidates` for every instance of ``singles``
    (grouped by instance; ``best`` indexed by instance):
    :func:`~counterplan.solver.core.combinations.beam_pairs`, ``should_stop`` asked between its
    lots. The pairs' two single rows."""
    return core_beam_pairs(
        singles.inst,
        singles.feature,
        singles.cost,
        singles.gain,
        best=best,
        width=width,
        max_rows=max_rows,
        should_stop=should_stop,
    )


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
    _, place, _ = positions(inst[order])
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
