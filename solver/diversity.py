"""Choosing several counterfactuals: a max-min diverse selection from the feasible pool.

Why this method: the walkers already search different basins, and every feasible row they
score is kept, so the pool holds many valid answers at no extra model call. Successive solves
that penalise used feature sets would cost a whole solve per answer. From the pool, the best
row comes first; each next one maximises its smallest distance to those already chosen
(values scaled as in the score, plus one per feature changed by one and not the other)
minus half its own distance from the original and a quarter of its number of changes, so
answers differ while staying close and sparse.
Near-duplicates (distance below ``min_difference``) are never chosen: when fewer than k
distinct answers exist, fewer come back.
"""

from __future__ import annotations

import numpy as np

from solver.protocol import FloatMatrix
from solver.scores import best_row

CANDIDATES = 400
PROXIMITY_WEIGHT = 0.5
SPARSITY_WEIGHT = 0.25


def select_diverse(
    rows: FloatMatrix,
    scores: FloatMatrix,
    *,
    original: FloatMatrix,
    scales: FloatMatrix,
    nominal: np.ndarray,
    k: int,
    min_difference: float = 1e-3,
) -> list[int]:
    """Indices into ``rows`` of up to ``k`` diverse feasible answers, best first."""
    if rows.shape[0] == 0 or k < 1:
        return []
    order = np.lexsort(scores.T[::-1])[::-1][:CANDIDATES]  # best first
    pool = rows[order]
    changed = pool != original
    values = np.where(nominal, (pool != original).astype(float), pool / scales)
    own = -scores[order, 3] - SPARSITY_WEIGHT / PROXIMITY_WEIGHT * scores[order, 4]
    chosen = [best_row(scores[order])]
    nearest = np.full(pool.shape[0], np.inf)
    while len(chosen) < k:
        last = chosen[-1]
        value_gap = np.abs(values - values[last])
        value_gap = np.where(nominal, (pool != pool[last]).astype(float), value_gap)
        feature_gap = (changed != changed[last]).sum(axis=1)
        nearest = np.minimum(nearest, value_gap.sum(axis=1) + feature_gap)
        gain = np.where(nearest > min_difference, nearest - PROXIMITY_WEIGHT * own, -np.inf)
        gain[chosen] = -np.inf
        pick = int(np.argmax(gain))
        if not np.isfinite(gain[pick]):
            break
        chosen.append(pick)
    return [int(order[i]) for i in chosen]
