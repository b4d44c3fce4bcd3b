"""The rows a solve has had the model predict, so that no row goes to the model twice in a solve.

A model predicts row by row: a row's prediction is the same whatever batch it is in. A local
search samples the same move more than once in a step (a revert, a move back towards the
original, a jump to the same split threshold: about a third of its rows on heloc's boosting),
its walkers meet, and the phases re-score the rows they hand each other (a scan's starting
points, the best the polish starts from). :class:`ScoredRows` keeps each row's prediction by the
row's exact values (its bytes: a missing value, NaN, equals itself; ``-0.0`` and ``0.0`` are two
rows to it, which costs a model call at worst), and :meth:`ScoredRows.split` tells a batch's new
rows, each once, from the ones it knows.

Rows are found by a 64-bit hash of their bytes, computed for the whole batch in a few numpy
operations, and then compared value by value with the row kept, so a hash collision costs a
model call, never a wrong prediction. The memory is bounded (:data:`MAX_REMEMBERED_BYTES`):
once full it keeps what it has and learns no more, so what it answers depends only on the rows
the solve scored, in their order (deterministic).
"""

from __future__ import annotations

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
        self._slot: dict[int, int] = {}
        self._rows = np.empty((0, n_features))
        self._outputs: dict[str, FloatMatrix] = {name: np.empty((0, *s)) for name, s in shapes.items()}
        rng = np.random.default_rng(_MULTIPLIERS_SEED)
        self._multipliers = rng.integers(1, 2**63, size=n_features, dtype=np.uint64) * np.uint64(2) + np.uint64(1)

    def _hashes(self, bits: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
        """Per row, a 64-bit hash of its bytes: each value's high bits folded into its low ones (a
        number on a grid has its low bits all zero), times an odd multiplier of its column, summed
        modulo 2**64, then mixed."""
        v = bits ^ (bits >> np.uint64(32))
        v *= _MIX
        v ^= v >> np.uint64(29)
        v *= self._multipliers
        h = v.sum(axis=1, dtype=np.uint64)
        h ^= h >> np.uint64(31)
        h *= _MIX
        h ^= h >> np.uint64(29)
        return np.asarray(h, dtype=np.uint64)

    def split(self, X: FloatMatrix) -> Split | None:
        """The batch's distinct rows and which of them are known; None when two distinct rows of
        the batch share a hash (then the batch goes to the model as it is)."""
        bits = _bits(X)
        keys = self._hashes(bits)
        unique, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")  # distinct rows in the order they first occur
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        first, unique, inverse = first[order], unique[order], rank[inverse.reshape(-1)]
        if first.size < X.shape[0] and not np.array_equal(bits, bits[first][inverse]):
            return None
        slot = self._slot
        slots = np.fromiter((slot.get(k, -1) for k in unique.tolist()), dtype=np.intp, count=unique.size)
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
        fresh = np.fromiter((k not in self._slot for k in keys.tolist()), dtype=bool, count=take)
        if not fresh.all():  # a collision kept out: the row already there stays
            X, keys = X[fresh], keys[fresh]
            predictions = {name: v[fresh] for name, v in predictions.items()}
            take = keys.size
        end = self.size + take
        self._reserve(end)
        self._rows[self.size : end] = X
        for name, out in self._outputs.items():
            out[self.size : end] = predictions[name]
        self._slot.update(zip(keys.tolist(), range(self.size, end), strict=True))
        self.size = end

    def _reserve(self, rows: int) -> None:
        """Room for ``rows`` rows (doubling, up to the capacity)."""
        have = self._rows.shape[0]
        if rows <= have:
            return
        grown = min(max(rows, 2 * have, _FIRST_CAPACITY), self.capacity)
        self._rows = _grown(self._rows, grown)
        self._outputs = {name: _grown(out, grown) for name, out in self._outputs.items()}


def _bits(X: FloatMatrix) -> npt.NDArray[np.uint64]:
    """The rows' bytes as integers: rows are the same when these are (NaN equals NaN)."""
    return np.ascontiguousarray(X, dtype=np.float64).view(np.uint64)


def _grown(array: FloatMatrix, rows: int) -> FloatMatrix:
    out = np.empty((rows, *array.shape[1:]), dtype=array.dtype)
    out[: array.shape[0]] = array
    return out


__all__ = ["MAX_REMEMBERED_BYTES", "ScoredRows", "Split"]
