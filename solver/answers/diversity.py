"""Choosing several counterfactuals: a max-mean diverse selection among close, minimal answers.

Why this method: the walkers already search different basins, and every feasible row they
score is kept, so the pool holds many valid answers at no extra model call. Successive solves
that penalise used feature sets would cost a whole solve per answer; instead
:mod:`counterplan.solver.answers.routes` runs only the cheap greedy chains of the feature scan with the features
of answers already found held back, which finds the near routes the pool lacks. Every
candidate first loses its needless changes (:mod:`counterplan.solver.core.boundary`), so no answer is a shorter
answer plus extra edits (DiCE's and CARLA's redundancy stays 0).

From these candidates, the best row comes first. Only rows still close are eligible: at most
``CLOSENESS`` times the best's distance, 3 first, widened to 10 when too few distinct rows
qualify; farther rows are never returned (a route ten times as costly as the best is not a
real alternative, and it would dominate every average). Among the eligible, each next answer
maximises its *mean* difference to those already chosen (max-sum dispersion: DiCE's diversity
and count diversity are means over pairs, while a max-min rule only looks at the closest one;
on the benchmark the max-min choice overlapped more and was no closer), less a small
proximity term. A difference counts the features that differ *materially*
(:func:`material_differences`): changed by one answer and not the other, changed to other
categories, or moved by both with values at least half the larger move apart; value gaps
(scaled as in the score, capped at 1 per feature) weigh little beside them. So "income
48,200" and "income 48,250" are one route, not two, and answers differ in which features they
change or in clearly different values while staying close and sparse.
A candidate that differs materially from some chosen answer in no feature (a near-duplicate,
the same route with slightly other amounts) is never chosen: when fewer than k distinct
answers exist, fewer come back.
"""

from __future__ import annotations

import numpy as np

from counterplan.planning.score import best_first
from counterplan.solver.core.protocol import FloatMatrix

CANDIDATES = 400
CLOSENESS = (3.0, 10.0)
PROXIMITY_WEIGHT = 0.25
MATERIAL = 0.5
"""Two moves of one feature are different answers when their values are this share of the larger move apart."""
GAP_WEIGHT = 0.1
"""The weight of the (capped, scaled) value gaps beside the count of material differences."""


def material_differences(
    rows: FloatMatrix, other: FloatMatrix, original: FloatMatrix, nominal: np.ndarray
) -> np.ndarray:
    """Per row of ``rows``: which features differ materially from ``other`` (one row).

    A feature differs materially when exactly one of the two changes it, when both change a
    nominal feature to different categories, or when both move a number and their values are
    at least ``MATERIAL`` times the larger of the two moves apart (so opposite directions
    always count, and 48,200 against 48,250 from 40,000 does not). The rule is scale-free:
    it reads the same under every distance metric.
    """
    changed = rows != original
    other_changed = other != original
    both = changed & other_changed
    larger = np.maximum(np.abs(rows - original), np.abs(other - original))
    apart = np.abs(rows - other) >= MATERIAL * larger
    same_value = rows == other
    return np.asarray(
        (changed != other_changed) | (both & np.where(nominal, ~same_value, apart & ~same_value)), dtype=bool
    )


def select_diverse(
    rows: FloatMatrix,
    scores: FloatMatrix,
    *,
    original: FloatMatrix,
    scales: FloatMatrix,
    nominal: np.ndarray,
    k: int,
) -> list[int]:
    """Indices into ``rows`` of up to ``k`` diverse feasible answers, best first."""
    if rows.shape[0] == 0 or k < 1:
        return []
    order = best_first(scores)[:CANDIDATES]
    pool = rows[order]
    values = np.where(nominal, 0.0, pool / scales)
    own = np.maximum(-scores[order, 3], 0.0)
    best_own = max(float(own[0]), 1e-9)
    nearest = np.full(pool.shape[0], np.inf)  # fewest material differences from a chosen answer
    total = np.zeros(pool.shape[0])  # summed difference to the chosen answers

    def choose(i: int) -> None:  # every answer counts once in the sums, whichever pass chose it
        nonlocal nearest, total
        gap = np.minimum(np.abs(values - values[i]), 1.0)
        gap = np.where(nominal, (pool != pool[i]).astype(float), gap).sum(axis=1)
        count = material_differences(pool, pool[i], original, nominal).sum(axis=1).astype(float)
        nearest = np.minimum(nearest, count)
        total = total + count + GAP_WEIGHT * gap
        chosen.append(i)

    chosen: list[int] = []
    choose(0)
    for factor in CLOSENESS:
        eligible = own <= factor * best_own
        while len(chosen) < k:
            gain = total / len(chosen) - PROXIMITY_WEIGHT * own / best_own
            gain = np.where(eligible & (nearest >= 1.0), gain, -np.inf)
            gain[chosen] = -np.inf
            pick = int(np.argmax(gain))
            if not np.isfinite(gain[pick]):
                break
            choose(pick)
        if len(chosen) >= k:
            break
    return [int(order[i]) for i in chosen]


def undominated(
    rows: FloatMatrix, original: FloatMatrix, nominal: np.ndarray, protect: int | None = None
) -> np.ndarray:
    """Indices of the rows no other row dominates, in order (``protect`` is always kept).

    Row j dominates row i when both change the same features, to the same categories and in
    the same directions, and j moves no number further than i does (and the rows differ): i
    is then a worse copy of j, not another way to the goal.
    """
    delta = rows - original
    changed = delta != 0.0
    same_set = (changed[:, None, :] == changed[None, :, :]).all(axis=2)
    same_categories = ((rows[:, None, :] == rows[None, :, :]) | ~nominal).all(axis=2)
    same_directions = (np.sign(delta[:, None, :]) == np.sign(delta[None, :, :])).all(axis=2)
    no_further = (np.abs(delta[None, :, :]) <= np.abs(delta[:, None, :])).all(axis=2)  # [i, j]: j within i
    identical = (rows[:, None, :] == rows[None, :, :]).all(axis=2)
    dominated = (same_set & same_categories & same_directions & no_further & ~identical).any(axis=1)
    if protect is not None:
        dominated[protect] = False
    return np.flatnonzero(~dominated)
