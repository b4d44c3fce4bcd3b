"""Choosing k answers: from the pool of feasible rows, or from an engine's picks.

:func:`from_pool` is local search's way (and any engine's without a set of its own): other routes
added to the pool, needless changes dropped, a diverse shortlist refined to the boundary, the final
diverse choice. :func:`from_picks` takes the swarm's picks per k-means cluster and refines them.
Both keep the search's best row as it is (the boundary polish already refined it) and stop calling
the model when the solve must wind down (:attr:`Answering.should_stop`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from counterplan.planning.distance import gower
from counterplan.planning.distinct_rows import first_of_each
from counterplan.planning.score import best_first
from counterplan.solver.answers.diversity import select_diverse, undominated
from counterplan.solver.answers.routes import successive_routes
from counterplan.solver.core.boundary import refine_rows
from counterplan.solver.core.pool import best_per_change_set
from counterplan.solver.core.protocol import BatchScorer, EncodedSpace, FloatMatrix

SHORTLIST_FACTOR = 3
"""k answers are chosen from this many times k refined candidates..."""
SHORTLIST_MAX = 96
"""...but at most this many."""
ROUTES_MAX = 128
"""At most this many pool rows (up to 3 per set of changed features) have their needless changes dropped."""
AVOID_MAX = 6
"""Other routes are looked for by avoiding each of at most this many of the best answer's features
(and, in each next round, each of at most this many routes found by the last one)."""
ROUTE_ROUNDS = 3
"""Rounds of other routes: those avoiding the best's features, then routes avoiding those too, twice."""
REFINE_GRID = 16
REFINE_ROUNDS = 5
"""The shortlist's refinement: a bracket is cut 16 ways per round, 16^5 ~ 10^6 after five."""


@dataclass(frozen=True)
class Answering:
    """What choosing answers works with: the space searched, a scorer, the original's score, the
    distance's scales and domain widths, how many answers, and when to stop calling the model."""

    space: EncodedSpace
    scorer: BatchScorer
    original_score: FloatMatrix
    scales: FloatMatrix
    domain_width: FloatMatrix
    wanted: int
    should_stop: Callable[[], bool]

    def refine_others(
        self, rows: FloatMatrix, scores: FloatMatrix, best: FloatMatrix, *, grid_size: int, max_rounds: int
    ) -> tuple[FloatMatrix, FloatMatrix]:
        """``rows`` refined to the boundary (:func:`~counterplan.solver.core.boundary.refine_rows`),
        except the best row itself."""
        rows, scores = rows.copy(), scores.copy()
        others = ~(rows == best).all(axis=1)
        if others.any():
            rows[others], scores[others] = refine_rows(
                rows[others],
                scores[others],
                self.space,
                self.scorer,
                grid_size=grid_size,
                max_rounds=max_rounds,
                should_stop=self.should_stop,
            )
        return rows, scores


def from_picks(answering: Answering, picks: FloatMatrix, best: FloatMatrix) -> FloatMatrix:
    """The swarm's picks (one per k-means cluster, best first) as answers: the solve's best in
    place of the pick nearest to it (its cluster's, which later phases polished or moved on
    from), the others without their needless changes and shaved to the boundary, as the best
    was; each row once."""
    space = answering.space
    gap = gower(picks, best, space.nominal, answering.domain_width)
    others = np.delete(picks, int(np.argmin(gap)), axis=0)
    others = others[~(others == best).all(axis=1)]
    if others.shape[0] and not answering.should_stop():
        others, _ = answering.refine_others(
            others,
            answering.scorer.score(others.copy()),
            best,
            grid_size=REFINE_GRID,
            max_rounds=REFINE_ROUNDS,
        )
    rows = np.vstack([best.reshape(1, -1), others])
    return np.asarray(rows[first_of_each(rows)][: answering.wanted], dtype=np.float64)


def from_set(answering: Answering, rows: FloatMatrix) -> FloatMatrix:
    """An engine's own set of answers (the exact engine's, solved as a whole) without needless
    changes: each answer's changes it does not need are dropped, as the pool's are (rounds of
    batched single reverts through the scorer), then the answers best first, each row once.

    The set program asks its answers to differ (in their changed features, or in the values of a
    feature two of them change); the cheapest way to differ can be a change the answer does not
    need (the optimum plus one grid step of another feature: fuzzing found it in 16 of 60 sets
    of two), which the README's promise of no needless change in any answer rules out. So two
    answers may then share their changed features (with other values), and one that falls onto
    another is dropped: fewer answers, never a padded one."""
    space = answering.space
    if answering.should_stop():
        return rows
    scores = answering.scorer.score(rows.copy())
    rows, scores = refine_rows(
        rows,
        scores,
        space,
        answering.scorer,
        grid_size=1,
        max_rounds=space.n_features,
        should_stop=answering.should_stop,
    )
    order = best_first(scores)
    rows = rows[order]
    return np.asarray(rows[first_of_each(rows)], dtype=np.float64)


def from_pool(
    answering: Answering,
    pool: tuple[FloatMatrix, FloatMatrix],
    best: FloatMatrix,
    best_score: FloatMatrix,
) -> FloatMatrix:
    """k diverse answers, each without changes it does not need.

    0. Other routes added to the pool (:mod:`counterplan.solver.answers.routes`): greedy chains
       that avoid each feature the best answer changes, and one that avoids all of them; then,
       twice, chains that also avoid the features of each route the last round found.
    1. A few rows per distinct set of changed features (the best-scored), at most
       ``ROUTES_MAX``, best first, plus those of the other routes.
    2. Their needless changes dropped: rounds of batched single reverts
       (:func:`~counterplan.solver.core.boundary.refine_rows` without a grid), so a route that only
       adds changes to a shorter one collapses onto it; then a few rows per change set again.
    3. A diverse shortlist of ``SHORTLIST_FACTOR`` times k of those, refined to the boundary
       (reverts and grid moves).
    4. Among the refined rows and the unrefined routes, rows that another one dominates
       (the same changes, in the same directions, none of them smaller) are dropped, and
       the final diverse choice of k is made.

    The best row keeps its place and value: the boundary-polish phase already refined it,
    and it is the result's ``proposed`` unless a refined row scores better. When the solve's
    time is up or it was cancelled (``should_stop``), the steps that cost model calls stop:
    the answers then come from what was found so far.
    """
    space = answering.space
    k = answering.wanted
    best_score = best_score.reshape(1, -1)

    def choose(rows: FloatMatrix, scores: FloatMatrix, k: int) -> list[int]:
        return select_diverse(
            rows, scores, original=space.original, scales=answering.scales, nominal=~space.graded, k=k
        )

    def with_best_first(rows: FloatMatrix, scores: FloatMatrix) -> tuple[FloatMatrix, FloatMatrix]:
        others = ~(rows == best).all(axis=1)
        return np.vstack([best.reshape(1, -1), rows[others]]), np.vstack([best_score, scores[others]])

    used = np.flatnonzero((best != space.original) & space.mutable)
    avoid = [np.isin(np.arange(space.n_features), [j]) for j in used[:AVOID_MAX]]
    if used.size > 1:
        avoid.append(np.isin(np.arange(space.n_features), used))
    extra = (pool[0][:0], pool[1][:0])
    if avoid and not answering.should_stop():
        extra = successive_routes(
            space,
            answering.scorer,
            answering.original_score,
            avoid,
            rounds=ROUTE_ROUNDS,
            width=AVOID_MAX,
            should_stop=answering.should_stop,
        )
    found = best_per_change_set(pool[0], pool[1], space.original, ROUTES_MAX)
    others = best_per_change_set(extra[0], extra[1], space.original, ROUTES_MAX)
    rows, scores = answering.refine_others(
        np.vstack([pool[0][found], extra[0][others]]),
        np.vstack([pool[1][found], extra[1][others]]),
        best,
        grid_size=1,
        max_rounds=space.n_features,
    )
    routes = best_per_change_set(rows, scores, space.original, ROUTES_MAX)
    rows, scores = with_best_first(rows[routes], scores[routes])
    shortlist = choose(rows, scores, min(SHORTLIST_FACTOR * k, SHORTLIST_MAX))
    refined, refined_scores = answering.refine_others(
        rows[shortlist],
        scores[shortlist],
        best,
        grid_size=REFINE_GRID,
        max_rounds=REFINE_ROUNDS,
    )
    rows, scores = with_best_first(np.vstack([refined, rows]), np.vstack([refined_scores, scores]))
    keep = undominated(rows, space.original, ~space.graded, protect=0)
    rows, scores = rows[keep], scores[keep]
    chosen = choose(rows, scores, k)
    return np.asarray(rows[chosen], dtype=np.float64)
