"""The rows a solve has had the model predict, so that no row goes to the model twice in a solve.

A tree model predicts row by row: a row's prediction is the same whatever batch it is in; a
matrix product's (a linear model's, a network's) may differ in the last bits, and then the one kept
is that of the row's first call, which depends only on the rows the solve scored (deterministic;
:func:`~counterplan.planning.model_protocol.predicts_row_by_row`). A local
search samples the same move more than once in a step (a revert, a move back towards the
original, a jump to the same split threshold: about a third of its rows on heloc's boosting),
its walkers meet, and the phases re-score the rows they hand each other (a scan's starting
points, the best the polish starts from). :class:`ScoredRows` keeps each row's prediction by the
row's exact values (its bytes: a missing value, NaN, equals itself; ``-0.0`` and ``0.0`` are two
rows to it, which costs a model call at worst), and :meth:`ScoredRows.split` tells a batch's new
rows, each once, from the ones it knows.

Rows are found by a 64-bit hash of their bytes, computed for the whole batch in a few numpy
operations, looked up in a sorted array of the kept hashes (a binary search for the whole batch:
no Python runs per row, where a dictionary cost a heloc solve as much time as a fifth of its
model calls), and then compared value by value with the row kept, so a hash collision costs a
model call, never a wrong prediction. The memory is bounded (:data:`MAX_REMEMBERED_BYTES`):
once full it keeps what it has and learns no more, so what it answers depends only on the rows
the solve scored, in their order (deterministic).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from counterplan.planning.model_protocol import Predictions

FloatMatrix = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]

MAX_REMEMBERED_BYTES = 16 * 1024 * 1024
"""At most this many bytes of rows and predictions are kept per solve (heloc: about 80,000 rows,
more than a default solve scores)."""
_FIRST_CAPACITY = 1024
_MULTIPLIERS_SEED = 0x5EED
_MIX = np.uint64(0xBF58476D1CE4E5B9)


@dataclass(frozen=True)
class Split:
    """A batch seen by :class:`ScoredRows`: its distinct rows, which of them are known, and where
    each row of the batch is among them."""

    first: IntArray
    """Per distinct row: the batch row where it first occurs (increasing)."""
    inverse: IntArray
    """Per batch row: its distinct row."""
    slots: IntArray
    """Per distinct row: where its prediction is kept, or -1 for a row the model must predict."""
    keys: npt.NDArray[np.uint64]
    """Per distinct row: its hash."""

    @property
    def new(self) -> npt.NDArray[np.bool_]:
        """Per distinct row: whether the model must predict it."""
        return np.asarray(self.slots < 0)


class ScoredRows:
    """The predictions of the rows of one solve, by their exact values.

    ``shapes`` gives each output's shape per row (``(n_classes,)`` or ``()``).
    """

    def __init__(self, n_features: int, shapes: dict[str, tuple[int, ...]], max_bytes: int = MAX_REMEMBERED_BYTES):
        self.n_features = n_features
        self._shapes = shapes
        width = n_features + sum(int(np.prod(s)) for s in shapes.values())
        self.capacity = max(max_bytes // (8 * max(width, 1)), 0)
        """The most rows kept (0: the memory is off)."""
        self.size = 0
        self._keys = np.empty(0, dtype=np.uint64)
        """The kept rows' hashes, sorted."""
        self._key_slots = np.empty(0, dtype=np.intp)
        """Per entry of ``_keys``: where its row is kept."""
        self._rows = np.empty((0, n_features))
        self._outputs: dict[str, FloatMatrix] = {name: np.empty((0, *s)) for name, s in shapes.items()}

    def _hashes(self, bits: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
        """Per row, its hash (:func:`_row_hashes`)."""
        return _row_hashes(bits)

    def split(self, X: FloatMatrix) -> Split | None:
        """The batch's distinct rows and which of them are known; None when two distinct rows of
        the batch share a hash (then the batch goes to the model as it is)."""
        bits = _bits(X)
        keys = self._hashes(bits)
        n = keys.size
        order = np.argsort(keys, kind="stable")
        ordered = keys[order]
        starts = np.empty(n, dtype=bool)
        starts[:1] = True
        np.not_equal(ordered[1:], ordered[:-1], out=starts[1:])
        if starts.all():  # no row repeated (most batches): each row is its own distinct row
            first = np.arange(n)
            unique, inverse = keys, first
            slots = np.empty(n, dtype=np.intp)
            slots[order] = self._find(ordered)  # looked up in increasing order: a faster search
        else:
            firsts = order[starts]  # each distinct row's first occurrence (the sort is stable)
            by_first = np.argsort(firsts, kind="stable")  # distinct rows in the order they first occur
            first, unique = firsts[by_first], keys[firsts[by_first]]
            rank = np.empty_like(by_first)
            rank[by_first] = np.arange(by_first.size)
            inverse = np.empty(n, dtype=np.intp)
            inverse[order] = rank[np.cumsum(starts) - 1]
            source = first[inverse]
            repeats = np.flatnonzero(source != np.arange(n))  # rows after their first occurrence
            if not np.array_equal(bits[repeats], bits[source[repeats]]):
                return None
            slots = self._find(ordered[starts])[by_first]
        known = slots >= 0
        if known.any():  # a hash is no proof: the kept row must be this one
            same = (_bits(self._rows[slots[known]]) == bits[first[known]]).all(axis=1)
            if not same.all():
                slots[np.flatnonzero(known)[~same]] = -1
        return Split(first, np.asarray(inverse, dtype=np.intp), slots, unique)

    def known(self, split: Split) -> Predictions:
        """The kept predictions of the split's known rows (in the order of ``split.slots >= 0``)."""
        slots = split.slots[split.slots >= 0]
        return {name: out[slots] for name, out in self._outputs.items()}

    def add(self, X: FloatMatrix, keys: npt.NDArray[np.uint64], predictions: Predictions) -> None:
        """Keep the predictions of rows ``X`` (new ones, each once) while there is room."""
        room = self.capacity - self.size
        take = min(room, X.shape[0])
        if take <= 0:
            return
        X, keys = X[:take], keys[:take]
        predictions = {name: v[:take] for name, v in predictions.items()}
        order = np.argsort(keys, kind="stable")
        at = np.searchsorted(self._keys, keys[order])  # where each goes among the kept keys
        if self._keys.size:
            kept = self._keys[np.minimum(at, self._keys.size - 1)] == keys[order]
            if kept.any():  # a collision kept out: the row already there stays
                fresh = np.ones(take, dtype=bool)
                fresh[order[kept]] = False
                X, keys = X[fresh], keys[fresh]
                predictions = {name: v[fresh] for name, v in predictions.items()}
                take = keys.size
                order = np.argsort(keys, kind="stable")
                at = np.searchsorted(self._keys, keys[order])
        end = self.size + take
        self._reserve(end)
        self._rows[self.size : end] = X
        for name, out in self._outputs.items():
            out[self.size : end] = predictions[name]
        at += np.arange(take)  # where each lands, merged
        old = np.ones(self._keys.size + take, dtype=bool)
        old[at] = False
        merged_keys = np.empty(old.size, dtype=np.uint64)
        merged_keys[at], merged_keys[old] = keys[order], self._keys
        merged_slots = np.empty(old.size, dtype=np.intp)
        merged_slots[at], merged_slots[old] = self.size + order, self._key_slots
        self._keys, self._key_slots = merged_keys, merged_slots
        self.size = end

    def _find(self, keys: npt.NDArray[np.uint64]) -> IntArray:
        """Per key (distinct keys): the slot kept under it, -1 for none."""
        if self._keys.size == 0:
            return np.full(keys.size, -1, dtype=np.intp)
        at = np.minimum(np.searchsorted(self._keys, keys), self._keys.size - 1)
        return np.where(self._keys[at] == keys, self._key_slots[at], -1)

    def _reserve(self, rows: int) -> None:
        """Room for ``rows`` rows (doubling, up to the capacity)."""
        have = self._rows.shape[0]
        if rows <= have:
            return
        grown = min(max(rows, 2 * have, _FIRST_CAPACITY), self.capacity)
        self._rows = _grown(self._rows, grown)
        self._outputs = {name: _grown(out, grown) for name, out in self._outputs.items()}


def row_index(rows: FloatMatrix, X: FloatMatrix) -> IntArray:
    """Per row of ``X``: the index of a row of ``rows`` with the very same values (its bytes, as
    :class:`ScoredRows` tells rows apart), -1 where there is none. Both hashed in a few numpy
    operations and matched by a binary search; a match is checked value by value."""
    index = np.full(X.shape[0], -1, dtype=np.intp)
    if rows.shape[0] == 0 or X.shape[0] == 0 or rows.shape[1] != X.shape[1]:
        return index
    rows_bits, x_bits = _bits(rows), _bits(X)
    keys = _row_hashes(rows_bits)
    order = np.argsort(keys, kind="stable")  # the first of equal keys first
    sorted_keys = keys[order]
    x_keys = _row_hashes(x_bits)
    at = np.minimum(np.searchsorted(sorted_keys, x_keys), sorted_keys.size - 1)
    candidate = order[at]
    found = (sorted_keys[at] == x_keys) & (rows_bits[candidate] == x_bits).all(axis=1)
    index[found] = candidate[found]
    return index


@functools.cache
def _multipliers(n_features: int) -> npt.NDArray[np.uint64]:
    """An odd 64-bit multiplier per column, the same in every solve (seeded)."""
    rng = np.random.default_rng(_MULTIPLIERS_SEED)
    multipliers = rng.integers(1, 2**63, size=n_features, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    multipliers.flags.writeable = False
    return multipliers


def _row_hashes(bits: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """Per row, a 64-bit hash of its bytes: each value's high bits folded into its low ones (a
    number on a grid has its low bits all zero), times an odd multiplier of its column, summed
    modulo 2**64 (one integer product with the multipliers: integers wrap, in any order the
    same sum), then mixed."""
    v = np.right_shift(bits, np.uint64(32))
    v ^= bits
    v *= _MIX
    v ^= v >> np.uint64(29)
    h: npt.NDArray[np.uint64] = v @ _multipliers(bits.shape[1])
    h ^= h >> np.uint64(31)
    h *= _MIX
    h ^= h >> np.uint64(29)
    return np.asarray(h, dtype=np.uint64)


def _bits(X: FloatMatrix) -> npt.NDArray[np.uint64]:
    """The rows' bytes as integers: rows are the same when these are (NaN equals NaN)."""
    return np.ascontiguousarray(X, dtype=np.float64).view(np.uint64)


def _grown(array: FloatMatrix, rows: int) -> FloatMatrix:
    out = np.empty((rows, *array.shape[1:]), dtype=array.dtype)
    out[: array.shape[0]] = array
    return out


__all__ = ["MAX_REMEMBERED_BYTES", "ScoredRows", "Split", "row_index"]
