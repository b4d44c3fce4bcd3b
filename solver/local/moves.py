"""Move selectors: sample a batch of neighbour candidates of one solution, vectorised.

A move changes one or two features of the current solution. Kinds, as in OptaPlanner plus
two for counterfactuals:

* ``change``: one feature to another value of its domain (numbers: uniform in the domain, or
  a local step scaled to the feature's range; integers stay whole; categories: another
  category; booleans: flip);
* ``pair_change``: two features at once;
* ``revert``: a changed feature back to its original value (sparsity);
* ``toward_original``: a changed number part of the way back (proximity);
* ``shrink``: every changed number the same part of the way back at once;
* ``swap``: two features of the same kind exchange values (OptaPlanner's swap, for parity).

Constrained features are pinned: no move ever touches them. A batch is a candidate matrix
plus a ``touched`` mask; rows equal to the current solution are dropped before scoring.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from solver.core.config import MoveSelectorConfig
from solver.core.protocol import BoolArray, EncodedSpace, FloatMatrix

MOVE_KINDS = ("change", "pair_change", "revert", "toward_original", "shrink", "swap")


@dataclass
class MoveBatch:
    """Sampled moves: the resulting candidates and which features each one touched."""

    candidates: FloatMatrix
    touched: BoolArray
    kinds: np.ndarray

    def __len__(self) -> int:
        return int(self.candidates.shape[0])

    def select(self, mask: BoolArray) -> MoveBatch:
        """The moves where ``mask`` holds."""
        return MoveBatch(self.candidates[mask], self.touched[mask], self.kinds[mask])


class MoveSelector:
    """Samples mixed move batches by the configured weights."""

    def __init__(self, config: MoveSelectorConfig, space: EncodedSpace) -> None:
        self.config = config
        self.space = space
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
        d = current.shape[0]
        if self.mutable_columns.size == 0:
            return MoveBatch(np.empty((0, d)), np.empty((0, d), dtype=bool), np.empty(0, dtype=np.int8))
        changed = np.flatnonzero((current != self.space.original) & self.space.mutable)
        changed_numeric = changed[self.space.graded[changed]]
        weights = self._weights.copy()
        if changed.size == 0:
            weights[2] = 0.0
        if changed_numeric.size == 0:
            weights[3] = 0.0
        if changed_numeric.size < 2:
            weights[4] = 0.0  # with one changed number, shrinking is toward_original
        if self._swap_pairs.shape[0] == 0:
            weights[5] = 0.0
        if self.mutable_columns.size < 2:
            weights[1] = 0.0
        if weights.sum() <= 0.0:
            weights[0] = 1.0
        counts = rng.multinomial(count, weights / weights.sum())
        kinds = np.repeat(np.arange(len(MOVE_KINDS), dtype=np.int8), counts)
        X = np.repeat(current.reshape(1, -1), count, axis=0)
        touched = np.zeros((count, d), dtype=bool)
        rows = np.arange(count)
        start = 0
        for kind, n in enumerate(counts):
            if n == 0:
                continue
            block = rows[start : start + n]
            start += n
            if kind == 0:
                self._change(X, touched, block, self._random_columns(n, rng), rng)
            elif kind == 1:
                first, second = self._distinct_pairs(n, rng)
                self._change(X, touched, block, first, rng)
                self._change(X, touched, block, second, rng)
            elif kind == 2:
                columns = rng.choice(changed, n)
                X[block, columns] = self.space.original[columns]
                touched[block, columns] = True
            elif kind == 3:
                self._toward_original(X, touched, block, rng.choice(changed_numeric, n), rng)
            elif kind == 4:
                self._shrink(X, touched, block, changed_numeric, rng)
            else:
                pairs = self._swap_pairs[rng.integers(0, self._swap_pairs.shape[0], n)]
                a, b = pairs[:, 0], pairs[:, 1]
                X[block, a], X[block, b] = current[b], current[a]
                touched[block, a] = touched[block, b] = True
        X = self.space.snap(X)
        moved = (current != X).any(axis=1)
        touched &= current != X
        return MoveBatch(X[moved], touched[moved], kinds[moved])

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
        low, high, span = s.lower[columns], s.upper[columns], self.span[columns]
        nominal = s.nominal[columns]
        step = s.step[columns]
        # Numbers: a uniform draw in the domain, or a local step of up to local_step_scale of
        # the range, on a log scale so both fine and coarse steps are tried. A missing original
        # has no "near": it is filled by a uniform draw.
        uniform = low + rng.random(rows.size) * span
        magnitude = self.config.local_step_scale * span * 10.0 ** rng.uniform(-2.0, 0.0, rows.size)
        local = now + rng.choice((-1.0, 1.0), rows.size) * magnitude
        local_move = (rng.random(rows.size) < self.config.local_step_ratio) & s.graded[columns]
        numeric = np.where(local_move, local, uniform)
        has_splits = self._split_counts[columns] > 0
        if has_splits.any():  # jump just past a split threshold, where the trees change their decision
            jump = has_splits & (rng.random(rows.size) < self.config.split_jump_ratio)
            pick = self._split_offsets[columns] + np.floor(rng.random(rows.size) * self._split_counts[columns])
            jumped = self._split_values[np.minimum(pick.astype(np.intp), max(self._split_values.size - 1, 0))]
            numeric = np.where(jump, jumped, numeric)
        numeric = s.to_grid(numeric, columns)
        stuck = (step > 0) & (numeric == now)  # a step that rounded to nothing: one grid step
        numeric = np.where(stuck, now + rng.choice((-1.0, 1.0), rows.size) * step, numeric)
        numeric = s.to_grid(np.clip(numeric, low, high), columns)
        # Categories and booleans: any other value of the (search) domain, uniformly.
        size = np.maximum(span + 1.0, 1.0)
        shift = 1.0 + np.floor(rng.random(rows.size) * np.maximum(size - 1.0, 1.0))
        other = low + np.mod(now - low + shift, size)
        X[rows, columns] = np.where(nominal, other, numeric)
        touched[rows, columns] = True

    def _shrink(
        self, X: FloatMatrix, touched: BoolArray, rows: np.ndarray, columns: np.ndarray, rng: np.random.Generator
    ) -> None:
        s = self.space
        now = X[np.ix_(rows, columns)]
        target = s.original[columns]
        fraction = rng.uniform(0.02, 0.6, (rows.size, 1))
        moved = s.to_grid(now + fraction * (target - now), columns.reshape(1, -1))
        X[np.ix_(rows, columns)] = moved
        touched[np.ix_(rows, columns)] = moved != now

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
