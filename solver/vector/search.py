"""The vectorised search: a feature scan with a greedy chain, tabu search, a bracketing polish,
then combinations, trades and rebuilds, each step one array program over every running instance
of a block.

The phases are those of the default solve (:func:`counterplan.solver.local.config.default_phases`):

* **scan**: every mutable feature alone over a grid of its domain and the model's split values,
  from each instance's base, one value per cell between two of a tree model's thresholds (the
  nearest the original: :func:`split_cells`); the greedy chain then takes, per instance whose chain is still
  infeasible, the row with the best goal gain per unit of distance and scans again from there,
  leaving out the rows farther than the instance's best feasible row (no model call needed);
* **local search**: ``walkers`` walkers per instance, started from the scan's best rows, each
  drawing ``moves`` moves per step (numeric steps on a log scale, jumps to split values, category
  changes, pairs of changes, reverts, steps toward the original, all changed numbers shrunk
  together); a walker
  takes its best move whose features are not tabu (or that beats its instance's best);
* **polish**: every changed number bisected between a bracket (a value known not to reach the
  goal, first the original) and the best, all changed numbers shrunk together, each change
  reverted, until an iteration improves nothing.
* **combinations and the beam** (:mod:`~counterplan.solver.vector.combos`), **trades** and
  **ruin and recreate** (:mod:`~counterplan.solver.vector.trades`): the per-row polish's rows
  that change several features at once, give one back while buying another, or rebuild a best
  without its priciest change; an instance they improve is polished again.

Per instance: its own random stream (:func:`~counterplan.solver.vector.draws.key` of its seed and
the step, walker and slot), step and unimproved-step counts, best, and termination, all held as
arrays and masks. No Python runs per instance per step, so an instance's answer is the same
whatever block it runs in; only the block's time limit or stop flag (a promise) may cut it short.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from counterplan.planning.distance import feature_costs
from counterplan.planning.score import LEVELS, compare_to
from counterplan.planning.space import FeatureSpace
from counterplan.planning.structure.splits import MAX_PER_FEATURE, PAIR_TOLERANCE, paired_split_values
from counterplan.solver.core.budget import MAX_CELLS_PER_STEP
from counterplan.solver.core.combinations import segmented_smallest
from counterplan.solver.core.protocol import BoolArray, FloatMatrix
from counterplan.solver.core.trade import COMBO_FEATURES, COMBO_SLACK, COMBO_STATES, FRONT_PER_FEATURE
from counterplan.solver.vector.combos import (
    Singles,
    beam_keep,
    beam_pairs,
    combination_rows,
    combinations,
    extend_rows,
    pair_rows,
    pareto_fronts,
    thinned,
)
from counterplan.solver.vector.draws import key, uniforms
from counterplan.solver.vector.scoring import BlockScorer, SearchStoppedError
from counterplan.solver.vector.trades import BlockTrades

IntArray = npt.NDArray[np.intp]
_SCAN, _LOCAL, _POLISH = 1, 2, 3
"""Phase numbers in the random keys."""
_CHANGE, _PAIR, _REVERT, _TOWARD, _SHRINK = range(5)
MOVE_SHARES = np.array([0.4, 0.5, 0.65, 0.85])
"""Where each move kind's share of a walker's moves ends (a uniform draw below 0.4 is a change,
then a pair of changes, a revert, a step toward the original, a shrink): the per-row engine's
default weights' pair share (1 in 9) taken from the changes."""
MOVE_DRAWS = 18
"""Uniform draws per move: the first ten for the move, the last eight for a pair's second change
(draws are counters: asking for more leaves the first ones as they were)."""
_SECOND = np.r_[0, 10:18, 9]
"""The draws a pair's second change reads in the places of the first's (``u[1]`` to ``u[8]``)."""


@dataclass(frozen=True)
class VectorSettings:
    """The search's sizes and limits (the default solve's, scaled to a block's lockstep)."""

    grid_size: int = 24
    greedy_steps: int = 6
    walkers: int = 4
    moves: int = 32
    """Moves each walker draws per step (16 left one heloc row in 64 at 5.3 times the per-row
    engine's distance; 32 found its answer at about the same time per block)."""
    stable_steps: int = 4
    """A feasible instance stops once its best has not improved for this many steps."""
    unimproved_step_limit: int = 400
    step_limit: int = 1000
    local_step_ratio: float = 0.8
    local_step_scale: float = 0.1
    split_jump_ratio: float = 0.25
    polish_grid: int = 16
    polish_iterations: int = 6
    combos: bool = True
    """After the polish, the per-row polish's combinations and beam from each instance's single
    rows (:mod:`~counterplan.solver.vector.combos`); an instance they improve is polished again."""
    combo_rows: int = 512
    """Combinations, and as many beam rows, per instance and call (the per-row polish scores up to
    1,024). 128 found the per-row engine's answers on adult's boosting, but on adult's 100-tree
    forest it left a row whose greedy scan bought capital-loss 0 -> 1,814 at 135 times the per-row
    engine's distance (6.5 times in all over 256 rows); 512 with as many rebuild rows: 1.015."""
    combo_states: int = COMBO_STATES
    beam_width: int = 4
    """The beam's sizes: the default solve's polish phase's (the batch takes them from the solve's
    configuration, :func:`counterplan.solver.batch.vectorised._settings`)."""
    beam_depth: int = 4
    beam_keep: int = 16
    trade_rounds: int = 4
    """Rounds of trades (:mod:`~counterplan.solver.vector.trades`), as the polish phase's."""
    trade_rows: int = 128
    """Trade rows per instance and round (the per-row polish scores up to 1,024)."""
    recreate_steps: int = 8
    """Steps of a ruin-and-recreate chain (:meth:`VectorSearch._recreate`); 0: none."""
    recreate_share: float = 0.15
    recreate_features: int = 4
    recreate_slack: float = 0.1
    recreate_rows: int = 512
    """Rows per chain and step (the nearest; the per-row polish scores up to 1,024; see
    ``combo_rows`` for why not 128)."""
    recreate_onward: int = 6
    """Steps a chain goes on past a feasible step farther than the best (the polish phase's)."""


@dataclass
class Outcome:
    """Per instance: the best row and its score, steps taken, and why the search ended."""

    best: FloatMatrix
    scores: FloatMatrix
    steps: IntArray
    stopped: bool = False
    """The block's stop check cut the search short."""
    reasons: list[str] = field(default_factory=list)


def feasible(scores: FloatMatrix) -> BoolArray:
    """Rows whose every hard level is 0."""
    return np.asarray((scores[:, :3] >= 0.0).all(axis=1))


def split_cells(
    space: FeatureSpace, owners: IntArray, values: FloatMatrix, split: BoolArray, splits: dict[int, FloatMatrix]
) -> IntArray:
    """Per entry of a scan table (``values`` of columns ``owners``, sorted within each column;
    ``split`` marks the model's split values): its cell, numbered in entry order.

    The split values are the grid values just on each side of each of a tree model's thresholds
    (:mod:`counterplan.planning.structure.splits`), so where a column's list is complete a
    threshold lies only between two split values one grid step apart: a cell runs from one such
    pair to the next, and its entries all make the trees decide alike. A column's list is taken
    as complete when it is a number on a grid whose split values all pair up (each a grid step
    from another, or from a bound) and were not sampled down; elsewhere every entry is a cell of
    its own. (The per-row engine's scan cuts its cells at every split value,
    :func:`counterplan.solver.local.scan.split_cells`.)"""
    n = owners.size
    if n == 0:
        return np.empty(0, dtype=np.intp)
    eligible = np.zeros(space.n_features, dtype=bool)
    for j, found in splits.items():
        step = float(space.step[j])
        if space.nominal[j] or step <= 0.0 or found.size == 0 or found.size >= MAX_PER_FEATURE:
            continue
        sv = np.sort(found)
        owner = np.full(sv.size, j, dtype=np.intp)
        eligible[j] = bool(paired_split_values(owner, sv, space.step, space.lower, space.upper).all())
    steps = space.step[owners[1:]]
    threshold = split[1:] & split[:-1] & (np.abs(np.diff(values) - steps) <= PAIR_TOLERANCE * steps)
    new = np.ones(n, dtype=bool)
    new[1:] = (owners[1:] != owners[:-1]) | threshold | ~eligible[owners[1:]]
    return np.asarray(np.cumsum(new) - 1, dtype=np.intp)


def _value_keys(inst: npt.ArrayLike, feature: npt.ArrayLike, value: npt.ArrayLike) -> npt.NDArray[np.uint64]:
    """One 64-bit key per (instance, feature, value): a set of them is a membership test in arrays."""
    bits = np.ascontiguousarray(np.asarray(value, dtype=np.float64) + 0.0).view(np.int64)
    return key(np.asarray(inst, dtype=np.int64).astype(np.uint64), feature, bits)


def _fits(rows: int, slots: int) -> bool:
    """Whether a trade or rebuild table of ``rows`` x ``slots`` values (a few float64 matrices of
    that size) stays within a step's budget (:data:`~counterplan.solver.core.budget.MAX_CELLS_PER_STEP`,
    shared by its working copies); a problem of thousands of features skips those stages."""
    return rows * slots * 8 <= MAX_CELLS_PER_STEP


def greedy_picks(scores: FloatMatrix, base: FloatMatrix, owner: IntArray) -> IntArray:
    """Per owner, its row with the best goal gain (hard 0) per unit of distance added (soft 0)
    over its base score (``base``, per row), the first among equals; none for an owner no row
    gains for: the feature scan's greedy rule (:func:`counterplan.solver.local.scan.most_efficient`)
    for every owner at once (no rows: no picks; a chain's step can drop every row it drew, as
    farther than its instance's feasible best)."""
    if owner.size == 0:
        return np.empty(0, dtype=np.intp)
    gain = scores[:, 0] - base[:, 0]
    cost = np.maximum(base[:, 3] - scores[:, 3], 1e-12)
    ratio = np.where(gain > 0.0, gain / cost, -np.inf)
    order = np.lexsort((-np.arange(owner.size), ratio, owner))
    grouped = owner[order]
    last = order[np.flatnonzero(np.r_[grouped[1:] != grouped[:-1], True])]
    return np.asarray(last[np.isfinite(ratio[last])], dtype=np.intp)


def hopeless(scores: FloatMatrix, base: FloatMatrix, bound: FloatMatrix) -> BoolArray:
    """Per greedy step from a row scored ``base`` to one scored ``scores``: whether, at that step's
    goal gain per unit of distance, the rest of the way to the goal would end no nearer than
    ``bound`` (greedy steps' rates mostly fall as a chain goes): the per-row rebuild's rule
    (:func:`counterplan.solver.local.polish._hopeless`) for every chain at once."""
    gain = scores[:, 0] - base[:, 0]
    cost = base[:, 3] - scores[:, 3]
    judged = (gain > 0.0) & (cost > 1e-12)
    end = -scores[:, 3] - scores[:, 0] * np.where(judged, cost, 0.0) / np.where(judged, gain, 1.0)
    return np.asarray(judged & (end >= bound))


def best_per_owner(scores: FloatMatrix, owner: IntArray, count: int) -> IntArray:
    """Per owner in ``range(count)``, the index of its best row (the first among equals); -1 for none.

    The engine lists rows grouped by owner, so the best of each group is found level by level
    with segmented maxima (``reduceat``), not a sort of the whole batch."""
    picks = np.full(count, -1, dtype=np.intp)
    n = scores.shape[0]
    if n == 0:
        return picks
    if (np.diff(owner) < 0).any():  # not grouped: one sort by owner first (stable: order kept)
        order = np.argsort(owner, kind="stable")
        inner = best_per_owner(scores[order], owner[order], count)
        found = inner >= 0
        picks[found] = order[inner[found]]
        return picks
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    group = np.repeat(np.arange(starts.size), np.diff(np.r_[starts, n]))
    candidate = np.ones(n, dtype=bool)
    for level in range(scores.shape[1]):
        column = np.where(candidate, scores[:, level], -np.inf)
        top = np.maximum.reduceat(column, starts)
        candidate &= column == top[group]
    index = np.where(candidate, np.arange(n), n)
    first = np.minimum.reduceat(index, starts)
    has = first < n
    picks[owner[starts[has]]] = first[has]
    return picks


class VectorSearch:
    """Searches every instance of a block together (see the module's doc)."""

    def __init__(self, scorer: BlockScorer, seeds: npt.NDArray[np.uint64], settings: VectorSettings) -> None:
        self.scorer = scorer
        self.seeds = seeds
        self.settings = settings
        space = scorer.space
        self.space = space
        self.originals = scorer.originals
        self.count = self.originals.shape[0]
        self.mutable_columns = np.flatnonzero(space.mutable)
        self.graded_columns = np.flatnonzero(space.mutable & space.graded)
        layouts = scorer.layouts
        self.layouts = layouts
        self.layout = layouts.layout
        self.lower, self.upper = layouts.lower, layouts.upper
        self.span = layouts.upper - layouts.lower
        # per layout: the scan's (column, value) table and the split values a move may jump to,
        # each held flat with per-layout offsets (an instance reads its own layout's)
        tables = []
        splits_of = []
        for k, problem in enumerate(layouts.problems):
            splits = problem.split_values()
            tables.append(self._scan_table(splits, k))
            splits_of.append(splits)
        sizes = np.array([t[0].size for t in tables], dtype=np.intp)
        self._table_sizes = sizes
        self._table_offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.intp)
        self.columns = np.concatenate([t[0] for t in tables])
        self.values = np.concatenate([t[1] for t in tables])
        # cells numbered across layouts (an entry outside any cell is a cell of its own)
        cells = [t[2] for t in tables]
        shift = np.concatenate([[0], np.cumsum([c.max(initial=-1) + 1 for c in cells])[:-1]]).astype(np.intp)
        self.cells = np.concatenate([c + k for c, k in zip(cells, shift, strict=True)])
        d = space.n_features
        self._split_counts = np.zeros((layouts.count, d), dtype=np.intp)
        parts = []
        for k, splits in enumerate(splits_of):
            for j, values in sorted(splits.items()):
                self._split_counts[k, j] = values.size
                parts.append(values)
        flat = self._split_counts.ravel()
        self._split_offsets = np.concatenate([[0], np.cumsum(flat)[:-1]]).astype(np.intp).reshape(flat.size // d, d)
        self._split_values = np.concatenate(parts) if parts else np.empty(0)
        self._trades_memo: BlockTrades | None = None

    def _scan_table(self, splits: dict[int, FloatMatrix], layout: int) -> tuple[IntArray, FloatMatrix, IntArray]:
        """Every (column, value) the scan tries in ``layout``: a grid of each mutable number's
        domain and its split values, every value of each category; and each entry's cell
        (:func:`split_cells`)."""
        space = self.layouts.problems[layout].space
        columns: list[IntArray] = []
        values: list[FloatMatrix] = []
        split: list[BoolArray] = []
        for j in self.mutable_columns.tolist():
            known = np.empty(0)
            if space.nominal[j]:
                grid = np.arange(space.lower[j], space.upper[j] + 1.0)
            else:
                grid = np.linspace(space.lower[j], space.upper[j], self.settings.grid_size)
                extra = splits.get(j, np.empty(0))
                known = extra[(extra >= space.lower[j]) & (extra <= space.upper[j])]
                grid = np.concatenate([grid, known])
                grid = space.to_grid(grid, np.full(grid.size, j))
            grid = np.unique(grid)
            columns.append(np.full(grid.size, j, dtype=np.intp))
            values.append(grid)
            split.append(np.isin(grid, known))
        if not columns:
            return np.empty(0, dtype=np.intp), np.empty(0), np.empty(0, dtype=np.intp)
        owners, flat = np.concatenate(columns), np.concatenate(values)
        return owners, flat, split_cells(space, owners, flat, np.concatenate(split), splits)

    def run(self, active: BoolArray) -> Outcome:
        """Search the instances where ``active`` holds; the others keep their original."""
        outcome = Outcome(self.originals.copy(), np.full((self.count, LEVELS), -np.inf), np.zeros(self.count, np.intp))
        if self.mutable_columns.size == 0:
            return outcome
        try:
            outcome.scores = self.scorer.score(outcome.best, np.arange(self.count))
            origin = outcome.scores.copy()
            starts, singles = self._scan(outcome, active)
            self._local(outcome, active, starts)
            self._polish(outcome, active)
            tree = bool(self._split_values.size)  # as the per-row polish: a linear model's gains add up
            if self.settings.combos and tree:
                improved = self._combos(outcome, active, singles, origin)
                self._polish(outcome, improved)
            if self.settings.trade_rounds:
                self._trades(outcome, active, singles if tree else None)
            if self.settings.recreate_steps and tree:  # as the per-row polish: a linear model's trades suffice
                self._recreate(outcome, active)
        except SearchStoppedError:
            outcome.stopped = True
        return outcome

    def _offer(self, outcome: Outcome, X: FloatMatrix, owner: IntArray, scores: FloatMatrix) -> BoolArray:
        """Rows better than their instance's best replace it; which instances improved."""
        count = outcome.best.shape[0]
        picks = best_per_owner(scores, owner, count)
        has = picks >= 0
        improved = np.zeros(count, dtype=bool)
        improved[has] = compare_to(scores[picks[has]], outcome.scores[has]) > 0
        outcome.best[improved] = X[picks[improved]]
        outcome.scores[improved] = scores[picks[improved]]
        return improved

    # ---- scan and greedy chain -------------------------------------------------------------
    def _scan(self, outcome: Outcome, active: BoolArray) -> tuple[FloatMatrix, Singles]:
        """The scan and the greedy chain; each instance's starting rows for the walkers
        ``(count, walkers, n_features)``: its best scanned rows, best first; and the first scan's
        rows, each the original with one feature changed (:meth:`_combos` builds on them)."""
        s = self.settings
        base = outcome.best.copy()
        base_scores = outcome.scores.copy()
        starts = np.repeat(outcome.best[:, None, :], s.walkers, axis=1)
        running = active.copy()
        d = self.space.n_features
        singles = Singles(np.empty(0, np.intp), np.empty(0, np.intp), np.empty(0), np.empty(0), np.empty(0))
        # the entries each instance scans (one per cell), chosen once: every pass scans them
        every_owner, every_table = self._scan_rows(np.flatnonzero(running))
        nearest = self._nearest_in_cells(every_owner, every_table)
        every_owner, every_table = every_owner[nearest], every_table[nearest]
        for chain in range(s.greedy_steps + 1):
            idx = np.flatnonzero(running)
            if idx.size == 0:
                break
            mine = running[every_owner]
            owner, table = every_owner[mine], every_table[mine]
            X = base[owner]
            rows = np.arange(owner.size)
            cols = self.columns[table]
            X[rows, cols] = self.values[table]
            keep = X[rows, cols] != base[owner, cols]
            if chain > 0:  # a row farther than a feasible best cannot beat it: not scored
                known = feasible(outcome.scores)[owner]
                keep &= ~known | (self.scorer.distance(X, owner) >= outcome.scores[owner, 3])
            X, owner = X[keep], owner[keep]
            scores = self.scorer.score(X, owner)
            outcome.steps[idx] += 1
            self._offer(outcome, X, owner, scores)
            if chain == 0:
                starts[idx] = self._starts(X, owner, scores, idx, starts[idx])
                feature = (base[owner] != X).argmax(axis=1) if X.size else np.empty(0, np.intp)
                singles = Singles(
                    owner,
                    feature.astype(np.intp),
                    X[np.arange(owner.size), feature] if d else np.empty(0),
                    -scores[:, 3],
                    scores[:, 0] - base_scores[owner, 0],
                )
            # greedy: the best goal gain per unit of added distance, from each infeasible base
            take = greedy_picks(scores, base_scores[owner], owner)
            base[owner[take]] = X[take]
            base_scores[owner[take]] = scores[take]
            gained = np.zeros(self.count, dtype=bool)
            gained[owner[take]] = True
            running &= gained & ~feasible(base_scores)
        return starts, singles

    def _scan_rows(self, idx: IntArray) -> tuple[IntArray, IntArray]:
        """Per row of a scan of instances ``idx``: its instance, and its entry of the flat scan
        table (each instance's own layout's entries, in order)."""
        layout = self.layout[idx]
        sizes = self._table_sizes[layout]
        owner = np.repeat(idx, sizes)
        ends = np.cumsum(sizes)
        within = np.arange(owner.size) - np.repeat(ends - sizes, sizes)
        return owner, np.repeat(self._table_offsets[layout], sizes) + within

    def _nearest_in_cells(self, owner: IntArray, table: IntArray) -> BoolArray:
        """Which scan rows to score: per instance and cell, the entry nearest the instance's
        original. Between two of a tree model's thresholds its trees decide alike, so a farther
        value of a cell only adds distance: it can be neither the instance's best scanned row, its
        best row of that feature, nor the greedy chain's step (the most gain per distance)."""
        cells = self.cells[table]
        near = np.abs(self.values[table] - self.originals[owner, self.columns[table]])
        order = np.lexsort((near, cells, owner))
        o, c = owner[order], cells[order]
        first = np.r_[True, (o[1:] != o[:-1]) | (c[1:] != c[:-1])]
        keep = np.zeros(owner.size, dtype=bool)
        keep[order[first]] = True
        return keep

    def _starts(
        self, X: FloatMatrix, owner: IntArray, scores: FloatMatrix, idx: IntArray, current: FloatMatrix
    ) -> FloatMatrix:
        """Per instance of ``idx``: the best scanned row of each of its most promising features,
        best first (repeated when it has fewer), so its walkers begin in different basins."""
        walkers = self.settings.walkers
        d = self.space.n_features
        column = (self.originals[owner] != X).argmax(axis=1)  # a scan row changes one feature
        group = owner * d + column
        picks = best_per_owner(scores, group, self.count * d)
        picks = picks[picks >= 0]
        best_owner = owner[picks]
        order = np.lexsort((picks, *(-scores[picks]).T[::-1], best_owner))  # by owner, best first
        chosen = picks[order]
        grouped = best_owner[order]
        first = np.searchsorted(grouped, idx)
        size = np.searchsorted(grouped, idx, side="right") - first
        rank = np.arange(walkers)
        pick = first[:, None] + rank[None, :] % np.maximum(size[:, None], 1)
        out = current.copy()
        has = size > 0
        out[has] = X[chosen[pick[has]]]
        return out

    # ---- local search ----------------------------------------------------------------------
    def _local(self, outcome: Outcome, active: BoolArray, starts: FloatMatrix) -> None:
        """Tabu search (as the local phase's default acceptor): each walker takes its best move
        whose features were not touched in its last ``tabu`` steps, unless the move beats its
        instance's best (aspiration), even when the move is worse than where it stands."""
        s = self.settings
        m, w, d = starts.shape
        starts[:, 0] = outcome.best  # walker 0 starts from the best (the greedy chain's end)
        current = starts.reshape(m * w, d).copy()
        walker_owner = np.repeat(np.arange(m), w)
        tenure = min(max(self.mutable_columns.size // 3, 1), 7, max(self.mutable_columns.size - 1, 0))
        tabu_until = np.zeros((m * w, d), dtype=np.intp)
        unimproved = np.zeros(m, dtype=np.intp)
        steps = np.zeros(m, dtype=np.intp)
        running = active.copy()
        while True:
            done = (feasible(outcome.scores) & (unimproved >= s.stable_steps)) | (unimproved >= s.unimproved_step_limit)
            running &= ~done & (steps < s.step_limit)
            idx = np.flatnonzero(running)
            if idx.size == 0:
                return
            walkers = (idx[:, None] * w + np.arange(w)[None, :]).ravel()
            owner_walker = np.repeat(walkers, s.moves)
            slot = np.tile(np.arange(s.moves), walkers.size)
            inst = walker_owner[owner_walker]
            draws = uniforms(key(self.seeds[inst], _LOCAL, steps[inst], owner_walker % w, slot), MOVE_DRAWS)
            base = current[owner_walker]
            X = self._moves(base, inst, draws)
            touched = base != X
            moved = touched.any(axis=1)
            X, touched, owner_walker, inst = X[moved], touched[moved], owner_walker[moved], inst[moved]
            scores = self.scorer.score(X, inst)
            best_before = outcome.scores[inst]
            improved = self._offer(outcome, X, inst, scores)
            steps[idx] += 1
            outcome.steps[idx] += 1
            unimproved[idx] += 1
            unimproved[improved] = 0
            free = ~(touched & (tabu_until[owner_walker] > steps[inst, None])).any(axis=1)
            ok = free | (compare_to(scores, best_before) > 0)
            masked = np.where(ok[:, None], scores, -np.inf)
            picks = best_per_owner(masked, owner_walker, m * w)[walkers]
            took = picks >= 0
            took[took] = ok[picks[took]]
            moved_walkers = walkers[took]
            chosen = picks[took]
            current[moved_walkers] = X[chosen]
            stamp = tabu_until[moved_walkers]
            np.copyto(stamp, (steps[walker_owner[moved_walkers]] + tenure)[:, None], where=touched[chosen])
            tabu_until[moved_walkers] = stamp

    def _moves(self, base: FloatMatrix, inst: IntArray, u: FloatMatrix) -> FloatMatrix:
        """One move from each row of ``base`` (of instance ``inst``), drawn with ``u``
        ``(MOVE_DRAWS, n)``: a change, a pair of changes of two features (the per-row engine's
        ``pair_change``: where only two changes together move a forest's vote, one at a time
        gains nothing and a walker never takes the first), a revert, a step toward the original,
        or a shrink of every changed number; a move that needs a changed feature the row lacks
        becomes a change, a pair with one mutable feature a change."""
        space = self.space
        X = base.copy()
        original = self.originals[inst]
        changed = (original != X) & space.mutable
        numeric = changed & space.graded
        n_changed = changed.sum(axis=1)
        n_numeric = numeric.sum(axis=1)
        kind = np.searchsorted(MOVE_SHARES, u[0], side="right")  # change, pair, revert, toward, shrink
        kind = np.where((kind == _PAIR) & (self.mutable_columns.size < 2), _CHANGE, kind)
        kind = np.where((kind == _REVERT) & (n_changed == 0), _CHANGE, kind)
        kind = np.where((kind >= _TOWARD) & (n_numeric == 0), _CHANGE, kind)
        size_m = self.mutable_columns.size
        first = np.minimum((u[1] * size_m).astype(np.intp), size_m - 1)
        single = np.flatnonzero(kind == _CHANGE)
        self._change(X, single, inst, u, self.mutable_columns[first[single]])
        pair = np.flatnonzero(kind == _PAIR)
        if pair.size:
            self._change(X, pair, inst, u, self.mutable_columns[first[pair]])
            second_draws = u[_SECOND]  # the second change's own draws, its column another one
            other = np.minimum((second_draws[1, pair] * (size_m - 1)).astype(np.intp), size_m - 2)
            second = self.mutable_columns[(first[pair] + 1 + other) % size_m]
            self._change(X, pair, inst, second_draws, second)
        for k, mask_of in ((_REVERT, changed), (_TOWARD, numeric)):
            r = np.flatnonzero(kind == k)
            if r.size:
                self._back(X, r, mask_of[r], original[r], u, own=inst[r], revert=k == _REVERT)
        r = np.flatnonzero(kind == _SHRINK)
        if r.size:
            fraction = (0.02 + 0.58 * u[2, r])[:, None]
            now_rows = X[r]
            shrunk = self.layouts.to_grid(
                now_rows + fraction * (original[r] - now_rows), inst[r][:, None], np.arange(space.n_features)[None, :]
            )
            X[r] = np.where(numeric[r], shrunk, now_rows)
        return X

    def _change(self, X: FloatMatrix, r: IntArray, inst: IntArray, draws: FloatMatrix, col: IntArray) -> None:
        """Each of rows ``r`` with its column of ``col`` set to another value: a number by a step on
        a log scale, a uniform draw or a jump to a split value; a category to any other."""
        s = self.settings
        space = self.space
        u = draws[:, r]
        now = X[r, col]
        own = inst[r]
        layout = self.layout[own]
        low, high, span, step = (
            self.lower[layout, col],
            self.upper[layout, col],
            self.span[layout, col],
            space.step[col],
        )
        uniform = low + u[2] * span
        sign = np.where(u[4] < 0.5, -1.0, 1.0)
        local = now + sign * s.local_step_scale * span * 10.0 ** (2.0 * u[3] - 2.0)
        value = np.where(u[5] < s.local_step_ratio, local, uniform)
        if self._split_values.size:
            counts = self._split_counts[layout, col]
            jump = (counts > 0) & (u[6] < s.split_jump_ratio)
            pick = np.minimum(
                self._split_offsets[layout, col] + (u[7] * counts).astype(np.intp), self._split_values.size - 1
            )
            value = np.where(jump, self._split_values[pick], value)
        value = self.layouts.to_grid(np.clip(value, low, high), own, col)
        stuck = (step > 0) & (value == now)  # a step that rounded to nothing: one grid step
        value = self.layouts.to_grid(np.clip(np.where(stuck, now + sign * step, value), low, high), own, col)
        size = np.maximum(span + 1.0, 1.0)
        other = low + np.mod(now - low + 1.0 + np.floor(u[8] * np.maximum(size - 1.0, 1.0)), size)
        X[r, col] = np.where(space.nominal[col], other, value)

    def _back(
        self,
        X: FloatMatrix,
        r: IntArray,
        mask: BoolArray,
        original: FloatMatrix,
        draws: FloatMatrix,
        *,
        own: IntArray,
        revert: bool,
    ) -> None:
        """Each of rows ``r`` with one of its ``mask`` columns back at the original (``revert``) or
        part of the way back (fine shaves and big steps alike)."""
        space = self.space
        counts = mask.sum(axis=1)
        listed = np.argsort(~mask, axis=1, kind="stable")
        nth = np.minimum((draws[9, r] * counts).astype(np.intp), counts - 1)
        j = listed[np.arange(r.size), nth]
        target = original[np.arange(r.size), j]
        if revert:
            X[r, j] = target
            return
        was = X[r, j]
        moved = self.layouts.to_grid(was + 10.0 ** (-2.0 * draws[2, r]) * (target - was), own, j)
        step = space.step[j]
        stuck = np.flatnonzero((step > 0) & (moved == was))  # rounded to nothing: one grid step, on the grid
        if stuck.size:
            ahead = was[stuck] + np.sign(target[stuck] - was[stuck]) * step[stuck]
            moved[stuck] = self.layouts.to_grid(ahead, own[stuck], j[stuck])
        X[r, j] = np.where((moved - target) * (was - target) < 0, target, moved)

    # ---- combinations and beam -------------------------------------------------------------
    def _combos(self, outcome: Outcome, active: BoolArray, singles: Singles, origin: FloatMatrix) -> BoolArray:
        """The per-row polish's combinations and beam (:mod:`~counterplan.solver.vector.combos`)
        for every instance with a feasible best whose original misses the goal: one call for the
        combinations and the beam's pairs of all of them, one for each further level of the beam.
        Which instances improved."""
        s = self.settings
        d = self.space.n_features
        running = active & feasible(outcome.scores) & (origin[:, 0] < 0.0)
        singles = singles.take(running[singles.inst])
        if singles.inst.size == 0:
            return np.zeros(self.count, dtype=bool)
        deficit = -origin[:, 0]
        group = singles.inst * d + singles.feature
        entries = thinned(pareto_fronts(group, singles.cost, singles.gain), group, FRONT_PER_FEATURE)
        inst, chosen, gained = combinations(
            singles,
            entries,
            deficit=deficit,
            best=-outcome.scores[:, 3],
            max_features=COMBO_FEATURES,
            slack=COMBO_SLACK,
            max_rows=s.combo_rows,
            max_states=s.combo_states,
            should_stop=self.scorer.stopping,  # a block's combinations take seconds: a deadline holds
        )
        # the beam, for instances no combination is predicted to take all the way
        predicted = np.zeros(self.count, dtype=bool)
        predicted[inst[gained >= deficit[inst]]] = True
        beamed = singles.take(~predicted[singles.inst])
        a, b = beam_pairs(
            beamed,
            best=-outcome.scores[:, 3],
            width=s.beam_width,
            max_rows=s.combo_rows,
            should_stop=self.scorer.stopping,
        )
        self.scorer.check_stop()  # cut short: the rows left out are not scored
        level = np.vstack(
            [combination_rows(self.originals, singles, inst, chosen), pair_rows(self.originals, beamed, a, b)]
        )
        level_inst = np.concatenate([inst, beamed.inst[a]])
        improved = np.zeros(self.count, dtype=bool)
        for depth in range(s.beam_depth - 1):
            if level_inst.size == 0:
                break
            scores = self.scorer.score(level, level_inst)
            outcome.steps[np.unique(level_inst)] += 1
            improved |= self._offer(outcome, level, level_inst, scores)
            if depth == s.beam_depth - 2:
                break
            keep = beam_keep(scores, level_inst, s.beam_keep)
            level, level_inst = extend_rows(
                level[keep],
                level_inst[keep],
                -scores[keep, 3],
                scores[keep, 0] - origin[level_inst[keep], 0],
                singles,
                originals=self.originals,
                best=-outcome.scores[:, 3],
                max_rows=s.combo_rows,
            )
        return improved

    # ---- trades ----------------------------------------------------------------------------
    def trades(self) -> BlockTrades:
        """The block's trade values: the scan's table of every layout, and the values near each
        instance's original and best."""
        if self._trades_memo is None:
            table = (self.columns, self.values, self._table_offsets, self._table_sizes)
            self._trades_memo = BlockTrades(
                self.scorer.problem, self.layouts, table, self.seeds, originals=self.originals, cells=self.cells
            )
        return self._trades_memo

    def _trades(self, outcome: Outcome, active: BoolArray, singles: Singles | None) -> None:
        """Trade rounds (:mod:`~counterplan.solver.vector.trades`) from every feasible best, one
        call a round for the block; an instance whose best a round improved is polished and
        trades again, the others stop (as the per-row polish's trades)."""
        trades = self.trades()
        if not _fits(self.count, trades.feature.size):
            return
        fronts = None
        if singles is not None and singles.inst.size:
            group = singles.inst * self.space.n_features + singles.feature
            chosen = pareto_fronts(group, singles.cost, singles.gain)
            fronts = _value_keys(singles.inst[chosen], singles.feature[chosen], singles.value[chosen])
        self._trade_rounds(outcome, active & feasible(outcome.scores), np.arange(self.count), fronts)

    def _trade_rounds(
        self, outcome: Outcome, running: BoolArray, instances: IntArray, fronts: npt.NDArray[np.uint64] | None
    ) -> None:
        """Trade rounds from the bests of ``outcome``'s rows where ``running`` holds (row ``r`` is
        instance ``instances[r]``'s: the block's instances, or the routes of :meth:`_recreate`),
        one call a round; a row a round improved is polished and trades again. ``fronts``: the
        keys of the values on the instances' singles' fronts, bought first."""
        s = self.settings
        trades = self.trades()
        running = running.copy()
        for round_number in range(s.trade_rounds):
            rows = np.flatnonzero(running)
            if rows.size == 0:
                return
            inst = instances[rows]
            best = outcome.best[rows]
            front = None
            if fronts is not None:
                V = trades.values(best, self.originals[inst], inst)
                slots = np.broadcast_to(trades.feature, V.shape)
                front = np.isin(_value_keys(np.broadcast_to(inst[:, None], V.shape), slots, V), fronts)
            X, place = trades.candidates(
                best,
                -outcome.scores[rows, 3],
                self.originals[inst],
                inst,
                front=front,
                rows=s.trade_rows,
                round_number=round_number,
            )
            if place.size == 0:
                return
            scores = self.scorer.score(X, inst[place])
            outcome.steps[rows] += 1
            improved = self._offer(outcome, X, rows[place], scores)
            self._polish(outcome, improved, instances)
            running &= improved

    # ---- ruin and recreate -----------------------------------------------------------------
    def _recreate(self, outcome: Outcome, active: BoolArray) -> None:
        """Ruin and recreate (the per-row polish's rule) for every feasible best at once: each of
        its ``recreate_features`` priciest changed features carrying at least ``recreate_share``
        of its distance is given back, one chain each, and every chain is rebuilt greedily (the
        scan's rule, :func:`greedy_picks`), one call a step for all chains, the ruined feature
        only cheaper than it was (:meth:`BlockTrades.recreate`), until a step finds a feasible
        row nearer than the best or the chain's going on past a farther one ends
        (:meth:`_chain_steps`); each chain's best feasible row is polished and offered to its
        instance."""
        s = self.settings
        idx = np.flatnonzero(active & feasible(outcome.scores))
        if idx.size == 0:
            return
        trades = self.trades()
        if not _fits(idx.size * s.recreate_features, trades.feature.size):
            return
        best, original = outcome.best[idx], self.originals[idx]
        problem = self.scorer.problem
        costs = feature_costs(
            best,
            original,
            self.space.nominal,
            problem.scales,
            problem.distance.metric,
            costs=self.space.costs,
            change_penalty=problem.distance.change_penalty,
        )
        ruin = (best != original) & self.space.mutable & (costs >= s.recreate_share * -outcome.scores[idx, 3:4])
        ci, ck = np.nonzero(ruin)
        keep = segmented_smallest(-costs[ci, ck], ci, s.recreate_features)
        ci, ck = ci[keep], ck[keep]
        if ci.size == 0:
            return
        chain_inst, cap = idx[ci], (ck.astype(np.intp), costs[ci, ck])
        rows = best[ci].copy()
        rows[np.arange(ci.size), ck] = original[ci, ck]
        base = np.full((ci.size, outcome.scores.shape[1]), -np.inf)
        found = Outcome(rows.copy(), base.copy(), np.zeros(ci.size, np.intp))
        alive = np.ones(ci.size, dtype=bool)
        left = np.full(ci.size, -1, dtype=np.intp)  # steps left past a farther feasible step (-1: none yet)
        for step in range(s.recreate_steps):
            a = np.flatnonzero(alive)
            if a.size == 0:
                break
            X, local = trades.recreate(
                rows[a],
                chain_inst[a],
                originals=self.originals,
                best=-outcome.scores[:, 3],
                caps=(cap[0][a], cap[1][a]),
                slack=np.where(left[a] < 0, s.recreate_slack, 0.0),
                max_rows=s.recreate_rows,
            )
            chain = a[local]
            if step == 0:  # the ruined rows are scored with the first step's
                X, chain = np.vstack([rows[a], X]), np.concatenate([a, chain])
            if chain.size == 0:
                break
            before = -outcome.scores[chain_inst, 3]  # each chain's instance's best distance before the step
            scores = self.scorer.score(X, chain_inst[chain])
            outcome.steps[np.unique(chain_inst[chain])] += 1
            self._offer(outcome, X, chain_inst[chain], scores)
            if step == 0:
                base[a] = scores[: a.size]
                X, chain, scores = X[a.size :], chain[a.size :], scores[a.size :]
            goes, pick = self._chain_steps(found, X=X, chain=chain, scores=scores, base=base, before=before, left=left)
            alive &= goes
            rows[alive], base[alive] = X[pick[alive]], scores[pick[alive]]
        done = feasible(found.scores)
        if done.any():
            self._polish(found, done, chain_inst)
            self._trade_rounds(found, done, chain_inst, None)  # as the per-row polish trades a rebuild's answer
            self._offer(outcome, found.best[done], chain_inst[done], found.scores[done])

    def _chain_steps(
        self,
        found: Outcome,
        *,
        X: FloatMatrix,
        chain: IntArray,
        scores: FloatMatrix,
        base: FloatMatrix,
        before: FloatMatrix,
        left: IntArray,
    ) -> tuple[BoolArray, IntArray]:
        """One step of every rebuild chain (the per-row rebuild's ``_Chain.step`` for all of them):
        rows ``X`` of chains ``chain`` scored ``scores``, each chain's row scored ``base`` and its
        instance's best distance before the step ``before``. Each chain keeps its best feasible
        row in ``found``. A step whose best feasible row is nearer than the best ends its chain;
        when it is farther, the chain goes on for up to ``recreate_onward`` more steps (``left``,
        counted down) from its most efficient row short of the goal, scoring only rows predicted
        nearer than the best, while that row's rate could still reach the goal nearer than the
        best (:func:`hopeless`); a chain before a feasible step goes on while its rate could
        reach the goal within the slack of the best. Per chain whether it goes on, and the row
        of ``X`` it goes to."""
        s = self.settings
        count = base.shape[0]
        ok = feasible(scores)
        self._offer(found, X[ok], chain[ok], scores[ok])
        reached = np.flatnonzero(ok)
        top = best_per_owner(scores[reached], chain[reached], count)
        stepped = top >= 0
        distance = np.full(count, np.inf)
        distance[stepped] = -scores[reached[top[stepped]], 3]
        nearer = stepped & (distance < before)
        left[stepped & ~nearer & (left < 0)] = s.recreate_onward
        short = np.flatnonzero(~ok)
        take = short[greedy_picks(scores[short], base[chain[short]], chain[short])]
        pick = np.full(count, -1, dtype=np.intp)
        pick[chain[take]] = take
        has = np.flatnonzero(pick >= 0)
        bound = before[has] * np.where(left[has] < 0, 1.0 + s.recreate_slack, 1.0)
        goes = np.zeros(count, dtype=bool)
        goes[has] = ~hopeless(scores[pick[has]], base[has], bound)
        goes &= ~nearer & (left != 0)
        left[goes & (left > 0)] -= 1
        return goes, pick

    # ---- polish ----------------------------------------------------------------------------
    def _polish(self, outcome: Outcome, active: BoolArray, instances: IntArray | None = None) -> None:
        """Bisect each changed number of every instance's best between its bracket and the best.
        ``instances``: the instance of each of ``outcome``'s rows, when they are not the block's
        instances in order (the routes of :meth:`_recreate`)."""
        s = self.settings
        g = s.polish_grid
        graded = self.graded_columns
        mutable = self.mutable_columns
        d = outcome.best.shape[1]
        fractions = np.arange(1, g) / g
        inst = np.arange(self.count) if instances is None else instances
        bracket = self.originals[inst][:, graded].copy()  # a value known not to do better: the original first
        running = active & feasible(outcome.scores)
        per = graded.size * (g - 1) + (g - 1) + mutable.size
        for _ in range(s.polish_iterations):
            idx = np.flatnonzero(running)
            if idx.size == 0:
                return
            best = outcome.best[idx]
            n = idx.size
            # single numbers: bracket + f * (best - bracket)
            lo = bracket[idx][:, :, None]
            hi = best[:, graded][:, :, None]
            single = self.layouts.to_grid(
                lo + fractions[None, None, :] * (hi - lo), inst[idx][:, None, None], graded[None, :, None]
            )
            block = np.repeat(best[:, None, :], per, axis=1)
            a = graded.size * (g - 1)
            cells = block[:, :a].reshape(n, graded.size, g - 1, d)
            cells[:, np.arange(graded.size), :, graded] = np.moveaxis(single, 1, 0)
            block[:, :a] = cells.reshape(n, a, d)
            # all changed numbers together
            orig = self.originals[inst[idx]]
            together = best[:, None, :] + fractions[None, ::-1, None] * (orig[:, None, :] - best[:, None, :])
            together = self.layouts.to_grid(together, inst[idx][:, None, None], np.arange(d)[None, None, :])
            numeric = np.zeros(d, dtype=bool)
            numeric[graded] = True
            block[:, a : a + g - 1] = np.where(numeric[None, None, :], together, block[:, a : a + g - 1])
            # each change reverted
            reverts = block[:, a + g - 1 :]
            reverts[:, np.arange(mutable.size), mutable] = orig[:, mutable]
            X = block.reshape(n * per, d)
            owner = np.repeat(idx, per)
            moved = (best[np.repeat(np.arange(n), per)] != X).any(axis=1)
            scores = np.full((n * per, outcome.scores.shape[1]), -np.inf)
            scores[moved] = self.scorer.score(X[moved], inst[owner[moved]])
            outcome.steps[idx] += 1
            # brackets: per number, the largest fraction that did not reach the goal
            ok = feasible(scores[:, :])[: n * per].reshape(n, per)[:, :a].reshape(n, graded.size, g - 1)
            ok |= ~moved.reshape(n, per)[:, :a].reshape(n, graded.size, g - 1)
            last_bad = np.where(~ok, np.arange(g - 1)[None, None, :], -1).max(axis=2)
            has = last_bad >= 0
            new_lo = np.take_along_axis(single, np.maximum(last_bad, 0)[:, :, None], axis=2)[:, :, 0]
            sub = bracket[idx]
            sub[has] = new_lo[has]
            improved = self._offer(outcome, X[moved], owner[moved], scores[moved])
            # a number the best moved keeps its bracket only if it still lies between
            moved_cols = outcome.best[idx][:, graded] != best[:, graded]
            sub = np.where(
                moved_cols & ((sub - orig[:, graded]) * (outcome.best[idx][:, graded] - sub) < 0), orig[:, graded], sub
            )
            bracket[idx] = sub
            running &= improved
