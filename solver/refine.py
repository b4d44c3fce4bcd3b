"""Refining several answers at once: the boundary polish, batched across rows.

The single best answer is shaved to the decision boundary by the boundary-polish phase. The
other answers of a ``num_counterfactuals = k`` request come from the pool of feasible rows the
search scored on its way, so they usually carry changes they do not need (a feature that can go
back to its original value with the answer still valid: DiCE's and CARLA's *redundancy*) and
moves larger than needed. This module removes both, for every row together: each round scores,
in one model call for all rows,

* every changed feature of every row reverted, and
* every changed number of every row moved to each point of a grid between its value and its
  bracket (the nearest value known to be worse; at first the original value),

and gives each row its best candidate when that candidate scores strictly better. A row's
winning grid move sets that number's bracket to the grid point just past it, so the next grid
is finer. Rows stop at their first round without an improvement, all stop after
``max_rounds``. A better score than a feasible row's is feasible too, so refinement can
never make an answer invalid.
"""

from __future__ import annotations

import numpy as np

from solver.protocol import BatchScorer, EncodedSpace, FloatMatrix
from solver.scores import best_row, better

_REVERT = -1.0


def refine_rows(
    rows: FloatMatrix,
    scores: FloatMatrix,
    space: EncodedSpace,
    scorer: BatchScorer,
    *,
    grid_size: int = 8,
    max_rounds: int = 8,
) -> tuple[FloatMatrix, FloatMatrix]:
    """Refined copies of ``rows`` and their scores; each row is at least as good as given.

    Parameters
    ----------
    rows, scores:
        ``(m, n_features)`` candidates and their ``(m, 5)`` scores.
    space, scorer:
        The problem, through the engines' protocol; one ``scorer.score`` call per round.
    grid_size:
        A bracket is cut into this many parts per round.
    max_rounds:
        At most this many rounds (model calls).
    """
    rows = np.array(rows, dtype=np.float64, copy=True)
    scores = np.array(scores, dtype=np.float64, copy=True)
    brackets = np.repeat(space.original.reshape(1, -1), rows.shape[0], axis=0)
    active = np.ones(rows.shape[0], dtype=bool)
    fractions = np.linspace(0.0, 1.0, grid_size + 1)[1:-1]
    for _ in range(max_rounds):
        if not active.any():
            break
        X, owner, feature, fraction = _candidates(rows, brackets, active, space, fractions)
        if X.shape[0] == 0:
            break
        candidate_scores = scorer.score(X)
        for i in np.flatnonzero(active):
            mine = np.flatnonzero(owner == i)
            if mine.size == 0:
                active[i] = False
                continue
            pick = mine[best_row(candidate_scores[mine])]
            if not better(candidate_scores[pick : pick + 1], scores[i])[0]:
                active[i] = False
                continue
            j = int(feature[pick])
            if fraction[pick] != _REVERT:
                step = min(fraction[pick] + 1.0 / grid_size, 1.0)
                brackets[i, j] = rows[i, j] + step * (brackets[i, j] - rows[i, j])
            rows[i] = X[pick]
            scores[i] = candidate_scores[pick]
    return rows, scores


def _candidates(
    rows: FloatMatrix,
    brackets: FloatMatrix,
    active: np.ndarray,
    space: EncodedSpace,
    fractions: FloatMatrix,
) -> tuple[FloatMatrix, np.ndarray, np.ndarray, FloatMatrix]:
    """Every active row's reverts and grid moves; for each: its row, feature and fraction."""
    original = space.original
    blocks: list[FloatMatrix] = []
    owners: list[np.ndarray] = []
    features: list[np.ndarray] = []
    steps: list[FloatMatrix] = []
    for i in np.flatnonzero(active):
        row = rows[i]
        changed = np.flatnonzero((row != original) & space.mutable)
        if changed.size == 0:
            continue
        reverts = np.repeat(row.reshape(1, -1), changed.size, axis=0)
        reverts[np.arange(changed.size), changed] = original[changed]
        blocks.append(reverts)
        features.append(changed)
        steps.append(np.full(changed.size, _REVERT))
        numeric = changed[~space.nominal[changed]]
        for j in numeric:
            block = np.repeat(row.reshape(1, -1), fractions.size, axis=0)
            block[:, j] = row[j] + fractions * (brackets[i, j] - row[j])
            blocks.append(block)
            features.append(np.full(fractions.size, j))
            steps.append(fractions)
        owners.append(np.full(sum(b.shape[0] for b in blocks) - sum(o.size for o in owners), i))
    if not blocks:
        empty = np.empty(0, dtype=np.intp)
        return np.empty((0, rows.shape[1])), empty, empty, np.empty(0)
    X = np.vstack(blocks)
    X = space.snap(np.where(space.integral, np.rint(X), X))
    owner = np.concatenate(owners)
    feature = np.concatenate(features)
    fraction = np.concatenate(steps)
    keep = (rows[owner] != X).any(axis=1)
    return np.asarray(X[keep], dtype=np.float64), owner[keep], feature[keep], fraction[keep]
