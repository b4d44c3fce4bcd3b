"""Vectorised lexicographic comparison of bendable score rows (hard 0 first, higher better)."""

from __future__ import annotations

import numpy as np

from solver.protocol import BoolArray, FloatMatrix

HARD_LEVELS = 3


def compare_to(scores: FloatMatrix, reference: FloatMatrix) -> FloatMatrix:
    """Sign of the lexicographic comparison of every row of ``scores`` with one row.

    Returns an ``(n,)`` array of -1, 0 or 1: the sign of the first level that differs.
    """
    diff = scores - reference
    nonzero = diff != 0.0
    first = nonzero.argmax(axis=1)
    signs = np.sign(diff[np.arange(scores.shape[0]), first])
    return np.where(nonzero.any(axis=1), signs, 0.0)


def better(scores: FloatMatrix, reference: FloatMatrix) -> BoolArray:
    """Rows strictly better than ``reference``."""
    return compare_to(scores, reference) > 0


def not_worse(scores: FloatMatrix, reference: FloatMatrix) -> BoolArray:
    """Rows at least as good as ``reference``."""
    return compare_to(scores, reference) >= 0


def best_row(scores: FloatMatrix) -> int:
    """Index of the best row (the first among equals)."""
    order = np.lexsort(scores.T[::-1])
    best = scores[order[-1]]
    return int(np.flatnonzero((scores == best).all(axis=1))[0])


def is_better(a: FloatMatrix, b: FloatMatrix) -> bool:
    """True when score row ``a`` is strictly better than ``b``."""
    return bool(better(a.reshape(1, -1), b)[0])


def is_feasible(score: FloatMatrix) -> bool:
    """True when every hard level of the row is 0."""
    return bool((score[:HARD_LEVELS] >= 0.0).all())
