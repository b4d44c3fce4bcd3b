"""The pool: every feasible row a solve scored, kept for the phases that choose among them.

Several answers are chosen from it, and a boundary polish with several starts refines the best of
its routes. It is bounded (:data:`POOL_MAX_VALUES`): past the cap it keeps each row once and the
three best rows of each set of changed features (all that choosing answers ever reads), in their
order; past half the cap, the best-scored of those.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from counterplan.planning.distinct_rows import distinct_rows
from counterplan.planning.score import best_first
from counterplan.solver.core.protocol import FloatMatrix

IntArray = npt.NDArray[np.intp]

POOL_MAX_VALUES = 4_000_000
"""Values the pool of feasible rows kept for several answers may hold (32 MB)."""


def best_per_change_set(
    rows: FloatMatrix, scores: FloatMatrix, original: FloatMatrix, limit: int, per_set: int = 3
) -> list[int]:
    """Indices of the ``per_set`` best-scored rows of each distinct set of changed features, best first.

    A pool holds many rows that change the same features by slightly different amounts; a few of
    each set are enough to look for different routes to the goal (and for answers that differ
    only in their values when no other route exists). At most ``limit`` indices.
    """
    if rows.shape[0] == 0:
        return []
    distinct, _ = distinct_rows(rows)  # a row the search scored twice counts once
    distinct = np.sort(distinct)
    order = distinct[best_first(scores[distinct])]
    _, group = distinct_rows(rows[order] != original)
    by_group = np.argsort(group, kind="stable")  # within a group, still best first
    sorted_groups = group[by_group]
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_groups)) + 1]
    sizes = np.diff(np.r_[starts, sorted_groups.size])
    rank = np.empty(order.size, dtype=np.intp)
    rank[by_group] = np.arange(sorted_groups.size) - np.repeat(starts, sizes)
    return [int(i) for i in order[rank < per_set][:limit]]


class Pool:
    """The feasible rows scored so far, with their scores, within :data:`POOL_MAX_VALUES`."""

    def __init__(self, original: FloatMatrix) -> None:
        self.original = original
        self.parts: list[tuple[FloatMatrix, FloatMatrix]] = []
        self.values = 0
        """Values the pool holds."""

    def __bool__(self) -> bool:
        return bool(self.parts)

    def add(self, rows: FloatMatrix, scores: FloatMatrix) -> None:
        """Keep ``rows`` (feasible, scored ``scores``; the pool owns them), compacting past the cap."""
        self.parts.append((rows, scores))
        self.values += rows.shape[0] * rows.shape[1]
        if self.values > POOL_MAX_VALUES:
            self._compact()

    def rows(self) -> tuple[FloatMatrix, FloatMatrix]:
        """Every row kept (in the order scored) and its score."""
        return np.vstack([p[0] for p in self.parts]), np.vstack([p[1] for p in self.parts])

    def _compact(self) -> None:
        rows, scores = self.rows()
        keep = np.sort(np.asarray(best_per_change_set(rows, scores, self.original, rows.shape[0]), dtype=np.intp))
        room = max(POOL_MAX_VALUES // (2 * max(rows.shape[1], 1)), 1)
        if keep.size > room:
            keep = np.sort(keep[best_first(scores[keep])[:room]])
        self.parts = [(rows[keep], scores[keep])]
        self.values = int(keep.size) * rows.shape[1]

    def merged(self, start: FloatMatrix, start_score: FloatMatrix) -> tuple[FloatMatrix, FloatMatrix]:
        """Distinct feasible rows (the start too, when feasible), each once."""
        parts = [*self.parts]
        if (start_score[:3] >= 0.0).all():
            parts.append((start.reshape(1, -1), start_score.reshape(1, -1)))
        if not parts:
            return np.empty((0, start.size)), np.empty((0, start_score.size))
        rows = np.vstack([p[0] for p in parts])
        scores = np.vstack([p[1] for p in parts])
        first, _ = distinct_rows(rows)
        return rows[first], scores[first]
