"""The forager: picks a walker's step from the accepted moves of a batch.

As OptaPlanner's local-search forager: only the first ``accepted_count_limit`` accepted moves
(in sample order) are considered, the best of them is picked, unless a pick-early rule takes
the first one that improves the best score or the last step's score.

Walkers step in lockstep, so :meth:`Forager.pick_lockstep` picks every walker's step from the
whole batch at once (one sort, not one pass per walker); :meth:`Forager.pick` is the same rule
for one walker's moves.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from counterplan.planning.score import better
from counterplan.solver.core.protocol import BoolArray, FloatMatrix
from counterplan.solver.local.config import ForagerConfig

IntArray = npt.NDArray[np.intp]


class Forager:
    """Picks one move index among the accepted ones, or None when none is accepted."""

    def __init__(self, config: ForagerConfig) -> None:
        self.config = config

    def pick(
        self, scores: FloatMatrix, accepted: BoolArray, current_score: FloatMatrix, best_score: FloatMatrix
    ) -> int | None:
        """Index into ``scores`` of the picked move."""
        owner = np.zeros(scores.shape[0], dtype=np.intp)
        pick = int(self.pick_lockstep(scores, accepted, owner, current_score.reshape(1, -1), best_score)[0])
        return None if pick < 0 else pick

    def pick_lockstep(
        self,
        scores: FloatMatrix,
        accepted: BoolArray,
        owner: IntArray,
        current_scores: FloatMatrix,
        best_score: FloatMatrix,
    ) -> IntArray:
        """Per walker, the index into ``scores`` of its picked move, -1 when it accepted none.

        ``owner[k]`` is the walker of move ``k`` (rows grouped by walker, in walker order);
        ``current_scores[i]`` is walker ``i``'s current score. Among a walker's equals the
        earliest move wins, as when picking walker by walker.
        """
        walkers = current_scores.shape[0]
        picks = np.full(walkers, -1, dtype=np.intp)
        n = scores.shape[0]
        if n == 0:
            return picks
        accepted = np.asarray(accepted, dtype=bool)
        index = np.arange(n)
        limit = self.config.accepted_count_limit
        if limit is not None:  # each walker's first `limit` accepted moves, in sample order
            seen = np.cumsum(accepted)
            starts = np.searchsorted(owner, np.arange(walkers))
            before = np.concatenate([[0], seen])[starts]
            accepted = accepted & (seen - before[owner] <= limit)
        early = self.config.pick_early_type
        if early != "never":
            reference = best_score if early == "first_best_score_improving" else current_scores[owner]
            improving = accepted & better(scores, reference)
            first = np.full(walkers, n, dtype=np.intp)
            np.minimum.at(first, owner[improving], index[improving])
            found = first < n
            picks[found] = first[found]
        # the accepted moves (a few in ten) by walker, then by score; the last row of a walker's
        # group is its best accepted move, and among equal scores the earliest (-index sorts it
        # last). One sort beats a level-by-level filter, since feasible rows tie on the hard levels.
        index = index[accepted]
        if index.size == 0:
            return picks
        order = index[np.lexsort((-index, *scores[index].T[::-1], owner[index]))]
        grouped = owner[order]
        last = np.flatnonzero(np.r_[grouped[1:] != grouped[:-1], True])
        top, walker = order[last], grouped[last]
        chosen = picks[walker] < 0
        picks[walker[chosen]] = top[chosen]
        return picks
