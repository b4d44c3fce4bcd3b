"""The forager: picks a walker's step from the accepted moves of a batch.

As OptaPlanner's local-search forager: only the first ``accepted_count_limit`` accepted moves
(in sample order) are considered, the best of them is picked, unless a pick-early rule takes
the first one that improves the best score or the last step's score.
"""

from __future__ import annotations

import numpy as np

from solver.core.config import ForagerConfig
from solver.core.protocol import BoolArray, FloatMatrix
from solver.core.scores import best_row, better


class Forager:
    """Picks one move index among the accepted ones, or None when none is accepted."""

    def __init__(self, config: ForagerConfig) -> None:
        self.config = config

    def pick(
        self, scores: FloatMatrix, accepted: BoolArray, current_score: FloatMatrix, best_score: FloatMatrix
    ) -> int | None:
        """Index into ``scores`` of the picked move."""
        candidates = np.flatnonzero(accepted)
        if candidates.size == 0:
            return None
        limit = self.config.accepted_count_limit
        if limit is not None:
            candidates = candidates[:limit]
        chosen = scores[candidates]
        early = self.config.pick_early_type
        if early != "never":
            reference = best_score if early == "first_best_score_improving" else current_score
            improving = np.flatnonzero(better(chosen, reference))
            if improving.size:
                return int(candidates[improving[0]])
        return int(candidates[best_row(chosen)])
