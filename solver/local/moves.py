"""Move selectors: sample a batch of neighbour candidates of one solution, vectorised.

A move changes one or two features of the current solution. Kinds, as in OptaPlanner plus
two for counterfactuals:

* ``change``: one feature to another value of its domain (numbers: uniform in the domain, a
  local step, or a jump just past one of the model's split thresholds; integers stay whole;
  categories: another category; booleans: flip);
* ``pair_change``: two features at once;
* ``revert``: a changed feature back to its original value (sparsity);
* ``toward_original``: a changed number part of the way back (proximity);
* ``shrink``: every changed number the same part of the way back at once;
* ``swap``: two features of the same kind exchange values (OptaPlanner's swap, for parity).

Constrained features are pinned: no move ever touches them. A batch is a candidate matrix
plus a ``touched`` mask; rows equal to the current solution are dropped before scoring.

Walkers step in lockstep, so :meth:`MoveSelector.sample_many` samples every walker's moves at
once: each move kind is drawn for all walkers' rows in one vectorised pass, with per-walker
masks of the changed features (a revert picks among its own walker's changes). A step then
costs the same few dozen numpy operations whether it has one walker or 64; sampling walker by
walker cost that many per walker, which was most of the engine's own time per solve.

Given each feature's distance unit (``unit``: how far the feature moves for one unit of the
distance, :meth:`~counterplan.planning.distance.FeaturePricer.unit`), a share of the local steps
(``distance_step_share``) is sized in the distance's units rather than as a share of the range:
under MAD-L1 a range-sized step of adult's capital-loss (MAD 0: 1 per dollar, range 4,356) is
4-436 units, never a small one. A split jump may pick, of ``split_jump_draws`` thresholds drawn,
the one nearest the original (the cheapest; off by default, see the config).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from counterplan.solver.core.protocol import BoolArray, EncodedSpace, FloatMatrix
from counterplan.solver.local.config import MoveSelectorConfig

MOVE_KINDS = ("change", "pair_change", "revert", "toward_original", "shrink", "swap")
_CHANGE, _PAIR, _REVERT, _TOWARD, _SHRINK, _SWAP = range(len(MOVE_KINDS))
_DRAWS = 8
"""Uniform draws per change move, taken as one ``(8, n)`` block: one generator call per step
(the jumps' extra thresholds, when weighted by their cost, are one more)."""

IntArray = npt.NDArray[np.intp]


@dataclass
class MoveBatch:
    """Sampled moves: the resulting candidates and which features each one touched."""

    candidates: FloatMatrix
    touched: BoolArray
    kinds: np.ndarray
    owner: IntArray | None = None
    """The walker each move belongs to (rows grouped by walker, in walker order), when the
    batch holds several walkers' moves (:meth:`MoveSelector.sample_many`)."""

    def __len__(self) -> int:
        return int(self.candidates.shape[0])

    def select(self, mask: BoolArray | IntArray | slice) -> MoveBatch:
        """The moves where ``mask`` holds (or at these indices, or in this slice)."""
        owner = None if self.owner is None else self.owner[mask]
        return MoveBatch(self.candidates[mask], self.touched[mask], self.kinds[mask], owner)


class MoveSelector:
    """Samples mixed move batches by the configured weights."""

    def __init__(self, config: MoveSelectorConfig, space: EncodedSpace, unit: FloatMatrix | None = None) -> None:
        self.config = config
        self.space = space
        self._unit = unit if config.distance_step_share > 0.0 else None
        """Per column, how far it moves for one unit of the distance (None: steps by range only)."""
        self.mutable_columns = np.flatnonzero(space.mutable)
        self.span = space.upper - space.lower
        self._weights = np.array(
            [
                config.change_weight,
                config.pair_change_weight,
                config.revert_weight,
                config.toward_original_weight,
                config.shrink_weight,
                config.swap_weight,
            ]
        )
        self._swap_pairs = self._compatible_pairs() if config.swap_weight > 0 else np.empty((0, 2), dtype=np.intp)
        # every column's split values end to end: a column's are values[offset : offset + count]
        counts = np.zeros(space.n_features, dtype=np.intp)
        parts = []
        for j, values in sorted(space.split_values.items()):
            counts[j] = values.size
            parts.append(values)
        self._split_counts = counts
        self._split_offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.intp)
        self._split_values = np.concatenate(parts) if parts else np.empty(0)
        self._columns = np.arange(space.n_features).reshape(1, -1)
        # what a change move reads of its column, one row per quantity: one gather per step
        self._table = np.vstack(
            [
                space.lower,
                space.upper,
                self.span,
                space.step,
                space.nominal,
                space.graded,
                self._split_counts,
                self._split_offsets,
            ]
        ).astype(np.float64)

    def _compatible_pairs(self) -> np.ndarray:
        """Pairs of mutable features of one kind whose domains are the same."""
        s = self.space
        pairs = []
        for a_pos, a in enumerate(self.mutable_columns):
            for b in self.mutable_columns[a_pos + 1 :]:
                same_kind = s.nominal[a] == s.nominal[b] and s.integral[a] == s.integral[b] and s.step[a] == s.step[b]
                graded = (s.graded[a] and s.graded[b]) or (s.nominal[a] and s.nominal[b])
                if same_kind and graded and s.lower[a] == s.lower[b] and s.upper[a] == s.upper[b]:
                    pairs.append((a, b))
        return np.array(pairs, dtype=np.intp).reshape(-1, 2)

    def sample(self, current: FloatMatrix, count: int, rng: np.random.Generator) -> MoveBatch:
        """``count`` moves from ``current`` (fewer once no-op moves are dropped)."""
        batch = self.sample_many(current.reshape(1, -1), count, rng)
        batch.owner = None
        return batch

    def sample_many(self, currents: FloatMatrix, count: int, rng: np.random.Generator) -> MoveBatch:
        """``count`` moves from each row of ``currents`` (one per walker), in one vectorised pass.

        The batch's rows are grouped by walker, in walker order, and ``owner`` says whose each
        one is; no-op moves are dropped, so a walker may have fewer than ``count``. Each walker
        draws its mix of move kinds from its own weights: a revert needs a changed feature, a
        shrink two changed numbers.
        """
        walkers, d = currents.shape
        if self.mutable_columns.size == 0 or walkers == 0:
            return MoveBatch(
                np.empty((0, d)), np.empty((0, d), dtype=bool), np.empty(0, dtype=np.int8), np.empty(0, dtype=np.intp)
            )
        space = self.space
        changed = (currents != space.original) & space.mutable
        changed_numeric = changed & space.graded
        n_changed = changed.sum(axis=1)
        n_numeric = changed_numeric.sum(axis=1)
        weights = self._kind_weights(n_changed, n_numeric)
        counts = rng.multinomial(count, weights / weights.sum(axis=1, keepdims=True))
        kinds = np.repeat(np.tile(np.arange(len(MOVE_KINDS), dtype=np.int8), walkers), counts.ravel())
        owner = np.repeat(np.arange(walkers, dtype=np.intp), count)
        base = currents[owner]
        X = base.copy()
        touched = np.zeros(X.shape, dtype=bool)
        present = counts.sum(axis=0) > 0
        if present[_CHANGE] or present[_PAIR]:  # a pair is two changes of distinct features: one pass for all
            single = np.flatnonzero(kinds == _CHANGE)
            pair = np.flatnonzero(kinds == _PAIR)
            first, second = self._distinct_pairs(pair.size, rng)
            rows = np.concatenate([single, pair, pair])
            self._change(X, touched, rows, np.concatenate([self._random_columns(single.size, rng), first, second]), rng)
        if present[_REVERT]:
            rows = np.flatnonzero(kinds == _REVERT)
            self._revert(X, touched, rows, _pick_true(changed, n_changed, owner[rows], rng))
        if present[_TOWARD]:
            rows = np.flatnonzero(kinds == _TOWARD)
            self._toward_original(X, touched, rows, _pick_true(changed_numeric, n_numeric, owner[rows], rng), rng)
        if present[_SHRINK]:
            rows = np.flatnonzero(kinds == _SHRINK)
            self._shrink(X, touched, rows, changed_numeric[owner[rows]], rng)
        if present[_SWAP]:
            self._swap(X, touched, np.flatnonzero(kinds == _SWAP), currents=currents, owner=owner, rng=rng)
        X = space.snap(X)
        differs = base != X
        moved = differs.any(axis=1)
        touched &= differs
        return MoveBatch(X[moved], touched[moved], kinds[moved], owner[moved])

    def _kind_weights(self, n_changed: np.ndarray, n_numeric: np.ndarray) -> FloatMatrix:
        """Each walker's weights of the move kinds: a revert needs a changed feature, a move
        toward the original a changed number, a shrink two; a swap needs compatible pairs, a pair
        change two mutable features; with none left, a plain change."""
        weights = np.repeat(self._weights.reshape(1, -1), n_changed.size, axis=0)
        weights[n_changed == 0, _REVERT] = 0.0
        weights[n_numeric == 0, _TOWARD] = 0.0
        weights[n_numeric < 2, _SHRINK] = 0.0  # with one changed number, shrinking is toward_original
        if self._swap_pairs.shape[0] == 0:
            weights[:, _SWAP] = 0.0
        if self.mutable_columns.size < 2:
            weights[:, _PAIR] = 0.0
        total = weights.sum(axis=1)
        weights[total <= 0.0, _CHANGE] = 1.0
        return weights

    def _revert(self, X: FloatMatrix, touched: BoolArray, rows: np.ndarray, columns: np.ndarray) -> None:
        """Each of ``rows`` with its column of ``columns`` back at the original value."""
        X[rows, columns] = self.space.original[columns]
        touched[rows, columns] = True

    def _swap(
        self,
        X: FloatMatrix,
        touched: BoolArray,
        rows: np.ndarray,
        *,
        currents: FloatMatrix,
        owner: np.ndarray,
        rng: np.random.Generator,
    ) -> None:
        """Each of ``rows`` with the values of a random compatible pair of columns exchanged."""
        pairs = self._swap_pairs[rng.integers(0, self._swap_pairs.shape[0], rows.size)]
        a, b = pairs[:, 0], pairs[:, 1]
        own = owner[rows]
        X[rows, a], X[rows, b] = currents[own, b], currents[own, a]
        touched[rows, a] = touched[rows, b] = True

    def _random_columns(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return self.mutable_columns[rng.integers(0, self.mutable_columns.size, n)]

    def _distinct_pairs(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        m = self.mutable_columns.size
        first = rng.integers(0, m, n)
        second = (first + rng.integers(1, m, n)) % m
        return self.mutable_columns[first], self.mutable_columns[second]

    def _change(
        self, X: FloatMatrix, touched: BoolArray, rows: np.ndarray, columns: np.ndarray, rng: np.random.Generator
    ) -> None:
        s = self.space
        now = X[rows, columns]
        low, high, span, step, nominal, graded, split_count, split_offset = self._table[:, columns]
        nominal = nominal > 0.0
        u = rng.random((_DRAWS, rows.size))
        # Numbers: a uniform draw in the domain, or a local step of up to local_step_scale of
        # the range, on a log scale so both fine and coarse steps are tried. A missing original
        # has no "near": it is filled by a uniform draw.
        uniform = low + u[0] * span
        magnitude = self.config.local_step_scale * span * 10.0 ** (2.0 * u[1] - 2.0)
        if self._unit is not None:  # a share of them: 0.01 to local_step_distance units of the distance
            largest = self.config.local_step_distance
            by_unit = largest * self._unit[columns] * (0.01 / largest) ** (1.0 - u[1])
            magnitude = np.where(
                u[3] < self.config.local_step_ratio * self.config.distance_step_share, by_unit, magnitude
            )
        local = now + np.where(u[2] < 0.5, -1.0, 1.0) * magnitude
        local_move = (u[3] < self.config.local_step_ratio) & (graded > 0.0)
        numeric = np.where(local_move, local, uniform)
        if self._split_values.size:  # jump just past a split threshold, where the trees change their decision
            jump = (split_count > 0) & (u[4] < self.config.split_jump_ratio)
            pick = (split_offset + np.floor(u[5] * split_count)).astype(np.intp)
            jumped = self._split_values[np.minimum(pick, self._split_values.size - 1)]
            draws = self.config.split_jump_draws
            if draws > 1:  # of several thresholds, the cheapest: nearest the original (a column's cost grows with it)
                more = rng.random((draws - 1, rows.size))
                picks = (split_offset + np.floor(more * split_count)).astype(np.intp)
                others = self._split_values[np.minimum(picks, self._split_values.size - 1)]
                every = np.vstack([jumped.reshape(1, -1), others])
                nearest = np.argmin(np.abs(every - s.original[columns]), axis=0)
                jumped = every[nearest, np.arange(rows.size)]
            numeric = np.where(jump, jumped, numeric)
        numeric = s.to_grid(numeric, columns)
        stuck = (step > 0) & (numeric == now)  # a step that rounded to nothing: one grid step
        numeric = np.where(stuck, now + np.where(u[6] < 0.5, -1.0, 1.0) * step, numeric)
        numeric = s.to_grid(np.clip(numeric, low, high), columns)
        # Categories and booleans: any other value of the (search) domain, uniformly.
        size = np.maximum(span + 1.0, 1.0)
        shift = 1.0 + np.floor(u[7] * np.maximum(size - 1.0, 1.0))
        other = low + np.mod(now - low + shift, size)
        X[rows, columns] = np.where(nominal, other, numeric)
        touched[rows, columns] = True

    def _shrink(
        self, X: FloatMatrix, touched: BoolArray, rows: np.ndarray, shrinking: BoolArray, rng: np.random.Generator
    ) -> None:
        """Every changed number of each row (``shrinking``, per row) back by one fraction per row."""
        s = self.space
        now = X[rows]
        fraction = rng.uniform(0.02, 0.6, (rows.size, 1))
        moved = np.where(shrinking, s.to_grid(now + fraction * (s.original - now), self._columns), now)
        X[rows] = moved
        touched[rows] = moved != now

    def _toward_original(
        self, X: FloatMatrix, touched: BoolArray, rows: np.ndarray, columns: np.ndarray, rng: np.random.Generator
    ) -> None:
        s = self.space
        now = X[rows, columns]
        target = s.original[columns]
        fraction = 10.0 ** rng.uniform(-2.0, 0.0, rows.size)  # fine shaves and big steps alike
        moved = s.to_grid(now + fraction * (target - now), columns)
        step = s.step[columns]
        stuck = (step > 0) & (moved == now)
        moved = np.where(stuck, now + np.sign(target - now) * step, moved)
        # a step past the original's side (an original off the grid) lands on the original
        moved = np.where((moved - target) * (now - target) < 0, target, moved)
        X[rows, columns] = moved
        touched[rows, columns] = True


def _pick_true(mask: BoolArray, counts: np.ndarray, owner: IntArray, rng: np.random.Generator) -> IntArray:
    """For each entry of ``owner``, a uniformly drawn column where that owner's row of ``mask`` holds.

    ``counts`` is ``mask.sum(axis=1)``; every owner asked for has at least one such column
    (its move kind had weight 0 otherwise). A stable argsort lists each row's true columns
    first, in column order, so the k-th one is a lookup.
    """
    listed = np.argsort(~mask, axis=1, kind="stable")
    k = np.floor(rng.random(owner.size) * counts[owner]).astype(np.intp)
    return np.asarray(listed[owner, k], dtype=np.intp)
