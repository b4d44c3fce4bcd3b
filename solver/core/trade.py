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

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from counterplan.planning.distance import SUMMED_METRICS, FeaturePricer
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
    the very same arrays, so every decision stays as without it. Arrays handed out are read-only."""

    def __init__(self, space: EncodedSpace, pricer: FeaturePricer, grid_size: int) -> None:
        self.space, self.pricer, self.grid_size = space, pricer, grid_size
        self.columns = np.flatnonzero(space.mutable)
        self._unit = dict(zip(self.columns.tolist(), pricer.unit(self.columns).tolist(), strict=True))
        self._values: dict[tuple[int, str], FloatMatrix] = {}
        self._cells: dict[tuple[int, str], tuple[FloatMatrix, FloatMatrix]] = {}
        self._fronts: dict[tuple[int, str], BoolArray] = {}
        self._buys: dict[int, FloatMatrix] | None = None

    def values(self, j: int, at: float) -> FloatMatrix:
        """:func:`trade_values` of mutable feature ``j`` around ``at``."""
        key = (j, at.hex())  # exact: -0.0 and 0.0 differ, as in the arrays built from them
        found = self._values.get(key)
        if found is None:
            found = trade_values(self.space, j, self.grid_size, self._unit[j], at)
            found.flags.writeable = False
            self._values[key] = found
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

    def front(self, j: int, at: float, buys: dict[int, FloatMatrix] | None) -> BoolArray:
        """Which of :meth:`values` are among ``buys[j]`` (none without it)."""
        if buys is not self._buys:  # kept alive here, so never a stale answer for another dict
            self._fronts, self._buys = {}, buys
        key = (j, at.hex())
        found = self._fronts.get(key)
        if found is None:
            v = self.values(j, at)
            chosen = None if buys is None else buys.get(j)
            found = np.zeros(v.size, dtype=bool) if chosen is None else np.isin(v, chosen)
            found.flags.writeable = False
            self._fronts[key] = found
        return found


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
    column_list = columns.tolist()
    at = best[columns].tolist()
    values = {j: memo.values(j, a) for j, a in zip(column_list, at, strict=True)}
    own = np.zeros(best.size)
    own[columns] = pricer.cost(best[columns], columns)
    # the give-backs: each changed k to its original or a value strictly between
    gk_parts: list[IntArray] = []
    gv_parts: list[FloatMatrix] = []
    for k in changed.tolist():
        o, b, v = original[k], best[k], values[k]
        between = v[(v - o) * (v - b) < 0] if space.graded[k] else v[:0]
        w = np.concatenate([[o], between])
        gk_parts.append(np.full(w.size, k, dtype=np.intp))
        gv_parts.append(w)
    gk, gv = np.concatenate(gk_parts), np.concatenate(gv_parts)
    saved = pricer.cost(gv, gk) - own[gk]
    # the buys: each mutable j to any of its values
    bv = np.concatenate([values[j] for j in column_list])
    bj = np.repeat(columns, [values[j].size for j in column_list])
    front = np.concatenate([memo.front(j, a, buys) for j, a in zip(column_list, at, strict=True)])
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
    cells = [memo.cells(j, o)[0] for j, o in zip(columns.tolist(), original[columns].tolist(), strict=True)]
    owner = np.repeat(columns, [v.size for v in cells])
    value = np.concatenate(cells)
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


def undominated(space: EncodedSpace, pricer: FeaturePricer, X: FloatMatrix, base: FloatMatrix) -> FloatMatrix:
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
    plausibility, trust region or computed features)."""
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
    on_grid = space.to_grid(values[at], columns[at]) == values[at]
    for j in np.unique(columns[at]).tolist():
        mine = at[(columns[at] == j) & on_grid]
        starts = np.concatenate([[-np.inf], cuts[j]])
        key[mine] = starts[np.searchsorted(cuts[j], values[mine], side="right")]  # a cell by where it starts
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
    if e.size == 0:
        return np.empty((0, X.shape[1]))
    order = np.argsort(owner[e], kind="stable")
    e = e[order]
    ef, ec, eg = owner[e], cost[e], gain[e]
    state = np.arange(e.size).reshape(-1, 1)
    s_cost, s_gain = ec.copy(), eg.copy()
    found_rows: list[IntArray] = []
    found_cost: list[FloatMatrix] = []
    for _ in range(max_features - 1):
        last = state[:, -1]
        si, ei = np.nonzero(ef.reshape(1, -1) > ef[last].reshape(-1, 1))  # a state, an entry of a later feature
        c = s_cost[si] + ec[ei]
        ok = c < best_distance * (1.0 - 1e-9)
        si, ei, c = si[ok], ei[ok], c[ok]
        g = s_gain[si] + eg[ei]
        if si.size > max_states:
            pick = smallest(c, max_states)
            si, ei, c, g = si[pick], ei[pick], c[pick], g[pick]
        state = np.hstack([state[si], ei.reshape(-1, 1)])
        s_cost, s_gain = c, g
        reach = g >= slack * deficit
        if reach.any():
            found_rows.append(state[reach])
            found_cost.append(c[reach])
        if state.shape[0] == 0:
            break
    if not found_rows:
        return np.empty((0, X.shape[1]))
    width = max(r.shape[1] for r in found_rows)
    combos = np.vstack([np.pad(r, ((0, 0), (0, width - r.shape[1])), constant_values=-1) for r in found_rows])
    pick = smallest(np.concatenate(found_cost), max_rows)
    combos = combos[pick]
    return _combo_rows(original, X, owner, e[np.maximum(combos, 0)], combos >= 0)


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
    if owner.size == 0:
        return np.empty((0, X.shape[1]))
    top_gain = np.full(owner.max() + 1, -np.inf)
    np.maximum.at(top_gain, owner, gain)
    leaders = np.argsort(-top_gain, kind="stable")[:width]
    leaders = leaders[top_gain[leaders] > 0]
    lead = np.flatnonzero(np.isin(owner, leaders))
    if lead.size == 0:
        return np.empty((0, X.shape[1]))
    is_leader = np.isin(owner, leaders)
    # each pair once: a leader with a later feature, or with an earlier one that leads not
    pair = (owner[lead].reshape(-1, 1) < owner.reshape(1, -1)) | (
        (owner[lead].reshape(-1, 1) > owner.reshape(1, -1)) & ~is_leader.reshape(1, -1)
    )
    pair &= (cost[lead].reshape(-1, 1) + cost.reshape(1, -1)) < best_distance * (1.0 - 1e-9)
    li, ei = np.nonzero(pair)
    g = gain[lead[li]] + gain[ei]
    pick = smallest(-g, max_rows)
    entries = np.stack([lead[li[pick]], ei[pick]], axis=1)
    return _combo_rows(original, X, owner, entries, np.ones(entries.shape, dtype=bool))


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
    row_distance: float,
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
    ``row`` (at distance ``row_distance``) with one mutable feature set to another of its trade
    values, each feature's values one per cell of its split values, and the feature each row
    changes. Feature ``k`` of ``caps`` (a ruined one) only at values costing below ``caps[k]``,
    so it can come back cheaper but not as it was; only rows predicted nearer than
    ``best_distance`` times ``1 + slack`` (a feasible row a little farther may bisect below it),
    the nearest first, at most ``max_rows``."""
    memo = TradeValues(space, pricer, grid_size) if memo is None else memo
    columns = memo.columns
    if columns.size == 0:
        return np.empty((0, row.size)), np.empty(0, dtype=np.intp)
    cells = [memo.cells(j, a) for j, a in zip(columns.tolist(), row[columns].tolist(), strict=True)]
    sizes = [v.size for v, _ in cells]
    owner = np.repeat(columns, sizes)
    value = np.concatenate([v for v, _ in cells])
    cost = np.concatenate([c for _, c in cells])
    now = pricer.cost(row[columns], columns)
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
