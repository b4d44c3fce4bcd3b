"""Vectorised lexicographic comparison of bendable score rows (hard 0 first, higher better)."""

from __future__ import annotations

import numpy as np

from counterplan.solver.core.protocol import BatchScorer, BoolArray, FloatMatrix

HARD_LEVELS = 3
MAX_ROWS_PER_CALL = 4096
"""Larger batches are split: a model call on millions of rows would only cost memory."""


def score_batches(scorer: BatchScorer, X: FloatMatrix) -> FloatMatrix:
    """Score ``X`` with one call per ``MAX_ROWS_PER_CALL`` rows (one call for most batches)."""
    if X.shape[0] <= MAX_ROWS_PER_CALL:
        return scorer.score(X)
    return np.vstack([scorer.score(X[i : i + MAX_ROWS_PER_CALL]) for i in range(0, X.shape[0], MAX_ROWS_PER_CALL)])


def best_first(scores: FloatMatrix) -> np.ndarray:
    """Row indices from the best score to the worst; among equal scores, the earlier row first."""
    return np.lexsort((-np.arange(scores.shape[0]), *scores.T[::-1]))[::-1]


def compare_to(scores: FloatMatrix, reference: FloatMatrix) -> FloatMatrix:
    """Sign of the lexicographic comparison of every row of ``scores`` with one row.

    ``reference`` is one row, or one row per row of ``scores``. Returns an ``(n,)`` array of -1,
    0 or 1: the sign of the first level that differs. Built from the last level up, each level
    overriding where it differs: a handful of ufuncs on ``(n,)`` columns (the engine compares every
    step's batch, so this runs a few dozen times per solve).
    """
    signs = np.sign(scores - reference)
    result = signs[:, -1].copy()
    for level in range(signs.shape[1] - 2, -1, -1):
        column = signs[:, level]
        np.copyto(result, column, where=column != 0.0)
    return result


def better(scores: FloatMatrix, reference: FloatMatrix) -> BoolArray:
    """Rows strictly better than ``reference``."""
    return compare_to(scores, reference) > 0


def not_worse(scores: FloatMatrix, reference: FloatMatrix) -> BoolArray:
    """Rows at least as good as ``reference``."""
    return compare_to(scores, reference) >= 0


def best_row(scores: FloatMatrix) -> int:
    """Index of the best row (the first among equals).

    Level by level, the rows holding the level's best value among those still tied; most batches
    are decided by the first level or two, so this is a few ufuncs rather than a full sort.
    """
    tied = np.flatnonzero(scores[:, 0] == scores[:, 0].max())
    for level in range(1, scores.shape[1]):
        if tied.size == 1:
            break
        column = scores[tied, level]
        tied = tied[column == column.max()]
    return int(tied[0])


def is_better(a: FloatMatrix, b: FloatMatrix) -> bool:
    """True when score row ``a`` is strictly better than ``b``."""
    return bool(better(a.reshape(1, -1), b)[0])


def is_feasible(score: FloatMatrix) -> bool:
    """True when every hard level of the row is 0."""
    return bool((score[:HARD_LEVELS] >= 0.0).all())
