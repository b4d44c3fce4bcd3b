"""Other routes to the goal: greedy chains that must leave some features alone.

When several answers are asked for, the pool of rows the search scored tends to hold the best
answer's route and its supersets: rows that reach the goal by the same changes plus others.
Once their needless changes are dropped (:mod:`counterplan.solver.core.boundary`) they collapse onto the best
answer, and the only other routes left may be far ones. This module looks for the near ones
directly, as the successive-solve method of diverse counterfactuals does, but at the price of
the construction phase only: for each set of features to avoid it runs the feature scan's
greedy chain (take the scanned move with the best goal gain per unit of distance, rescan from
there, repeat until feasible) with those features held at their original values. Every chain
steps in lockstep with the others, so a step of all of them is one model call.

:func:`successive_routes` repeats this: each route found is looked for again with its own
features held back too, so the second and third answers need not share features with the
first ones either (the successive-solve idea again, one round of chains per step of it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from counterplan.planning.score import HARD_LEVELS
from counterplan.solver.core.pool import best_per_change_set
from counterplan.solver.core.protocol import BatchScorer, BoolArray, EncodedSpace, FloatMatrix, score_batches
from counterplan.solver.local.scan import ScanGrid

SETS_MAX = 256
"""Minimal routes are looked for among at most this many sets of changed features, the best-scored."""


class Routes(NamedTuple):
    """What a round of greedy chains found."""

    rows: FloatMatrix
    """Every feasible row the chains scored..."""
    scores: FloatMatrix
    """...its score..."""
    chain: np.ndarray
    """...and the index of the chain that scored it."""


def alternative_routes(
    space: EncodedSpace,
    scorer: BatchScorer,
    start_score: FloatMatrix,
    avoid: list[BoolArray],
    *,
    grid_size: int = 24,
    max_steps: int = 5,
    should_stop: Callable[[], bool] | None = None,
) -> Routes:
    """Every feasible row the chains scored, its score, and the index of the chain that scored it.

    Parameters
    ----------
    space, scorer:
        The problem, through the engines' protocol.
    start_score:
        The original row's score (every chain starts from the original).
    avoid:
        One mask per chain: the features that chain must not change.
    grid_size, max_steps:
        The scan grid of a number, and at most this many steps (one model call each, per
        4,096 rows).
    should_stop:
        Asked before every step; True ends the chains with what they found.
    """
    n = len(avoid)
    bases = np.repeat(space.original.reshape(1, -1), n, axis=0)
    base_scores = np.repeat(start_score.reshape(1, -1), n, axis=0)
    scanned = space.mutable & ~np.array(avoid, dtype=bool).reshape(n, space.n_features)
    grid = ScanGrid(space, space.mutable, grid_size)
    active = np.ones(n, dtype=bool)
    found_rows: list[FloatMatrix] = []
    found_scores: list[FloatMatrix] = []
    found_chains: list[np.ndarray] = []
    for _ in range(max_steps):
        if should_stop is not None and should_stop():
            break
        live = np.flatnonzero(active)
        X, _, source = grid.rows_many(bases[live], scanned[live])  # every live chain's scan, end to end
        if X.shape[0] == 0:
            break
        chains = live[source]
        scores = score_batches(scorer, X)
        feasible: BoolArray = np.asarray((scores[:, :HARD_LEVELS] >= 0.0).all(axis=1), dtype=bool)
        found_rows.append(X[feasible])
        found_scores.append(scores[feasible])
        found_chains.append(chains[feasible])
        picks = _most_efficient_per_chain(scores, base_scores, chains, n)
        stuck = active & (picks < 0)  # no scanned row gains (or none scanned): the chain ends
        active &= ~stuck
        moving = np.flatnonzero(picks >= 0)
        bases[moving], base_scores[moving] = X[picks[moving]], scores[picks[moving]]
        active[moving[feasible[picks[moving]]]] = False  # these chains reached the goal
        if not active.any():
            break
    if not found_rows:
        return Routes(np.empty((0, space.n_features)), np.empty((0, start_score.size)), np.empty(0, dtype=np.intp))
    return Routes(np.vstack(found_rows), np.vstack(found_scores), np.concatenate(found_chains))


def _most_efficient_per_chain(
    scores: FloatMatrix, base_scores: FloatMatrix, chains: np.ndarray, n: int
) -> npt.NDArray[np.intp]:
    """Per chain, the row of ``scores`` that :func:`~counterplan.solver.local.scan.most_efficient` picks among
    that chain's rows (``chains[k]`` owns row ``k``), -1 when none gains: all chains at once."""
    own = base_scores[chains]
    gain = scores[:, 0] - own[:, 0]
    cost = np.maximum(own[:, 3] - scores[:, 3], 1e-12)
    ratio = np.where(gain > 0.0, gain / cost, -np.inf)
    index = np.arange(scores.shape[0])
    order = np.lexsort((-index, ratio, chains))  # per chain, its best ratio last (the first among equals)
    grouped = chains[order]
    last = np.flatnonzero(np.r_[grouped[1:] != grouped[:-1], True])
    picks = np.full(n, -1, dtype=np.intp)
    top = order[last]
    gains = np.isfinite(ratio[top])
    picks[grouped[last][gains]] = top[gains]
    return picks


def successive_routes(
    space: EncodedSpace,
    scorer: BatchScorer,
    start_score: FloatMatrix,
    avoid: list[BoolArray],
    *,
    rounds: int,
    width: int,
    should_stop: Callable[[], bool] | None = None,
) -> tuple[FloatMatrix, FloatMatrix]:
    """Every feasible row of ``rounds`` rounds of :func:`alternative_routes`, and its score.

    The first round avoids ``avoid``. Each next one follows up to ``width`` of the routes the
    last round found, best first: one per minimal set of changed features (a set that holds
    another found set is the same route with extra changes, as a chain's last scan yields many
    of), each by a chain that avoids that route's features as well as everything the chain
    that found it avoided.
    """
    rows: list[FloatMatrix] = []
    scores: list[FloatMatrix] = []
    masks = avoid
    for _ in range(rounds):
        if not masks or (should_stop is not None and should_stop()):
            break
        found = alternative_routes(space, scorer, start_score, masks, should_stop=should_stop)
        rows.append(found.rows)
        scores.append(found.scores)
        firsts = np.array(
            best_per_change_set(found.rows, found.scores, space.original, SETS_MAX, per_set=1), dtype=np.intp
        )
        sets = found.rows[firsts] != space.original
        holds = (sets[:, None, :] >= sets[None, :, :]).all(axis=2)  # [i, j]: set i holds set j
        minimal = firsts[~(holds & ~np.eye(len(firsts), dtype=bool)).any(axis=1)][:width]
        followers: dict[bytes, BoolArray] = {}  # two routes can leave the same features to avoid
        for i in minimal:
            mask = masks[int(found.chain[i])] | (found.rows[i] != space.original)
            followers.setdefault(mask.tobytes(), mask)
        masks = list(followers.values())
    if not rows:
        return np.empty((0, space.n_features)), np.empty((0, start_score.size))
    return np.vstack(rows), np.vstack(scores)
