"""Which features the swarm searches: the ``top_features`` most relevant, the rest held original.

Two rankings (:class:`~counterplan.solver.core.config.SwarmPhaseConfig`'s ``rank_by``):

* ``information_value``, the paper's: each feature's information value against the training
  labels (:mod:`counterplan.planning.relevance`), available when the problem was built from data with its
  label column. It ranks what separates the classes in the data, the same for every row.
* ``sensitivity``: how far each feature alone can take this row towards the goal. Every
  candidate feature is set to each end of its box (every other category of a categorical),
  the rest original, and all those rows are scored in one model call; features are ranked by
  their best row's score. It reads the model at this row, and needs no data. Used too when
  information values are not available.

Ties keep the columns' order, so the ranking is deterministic.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from counterplan.planning.score import best_first
from counterplan.solver.core.protocol import BatchScorer, EncodedSpace, FloatMatrix, score_batches
from counterplan.solver.swarm.positions import IntArray


def information_values(problem: Any, space: EncodedSpace, columns: IntArray) -> FloatMatrix | None:
    """The problem's information values of ``columns``, or None when it has none."""
    relevance = getattr(problem, "relevance", None)
    names = getattr(space, "names", None)
    if relevance is None or names is None:
        return None
    values = relevance.values()
    if not values:  # the labels do not tell the outcomes apart
        return None
    return np.array([values.get(names[j], 0.0) for j in columns.tolist()], dtype=np.float64)


def sensitivity_rows(
    space: EncodedSpace, columns: IntArray, low: FloatMatrix, high: FloatMatrix
) -> tuple[FloatMatrix, IntArray]:
    """Rows moving one column each (to ``low``/``high`` per column, every other category of a
    nominal one), the rest original; and the column each row moves."""
    rows: list[FloatMatrix] = []
    owner: list[int] = []
    for i, j in enumerate(columns.tolist()):
        if space.nominal[j]:
            values = space.allowed.get(j)
            if values is None:
                values = np.arange(np.ceil(space.lower[j]), np.floor(space.upper[j]) + 1.0)
            values = values[values != space.original[j]]
        else:
            values = np.unique([low[i], high[i]])
        block = np.repeat(space.original.reshape(1, -1), values.size, axis=0)
        block[:, j] = values
        rows.append(block)
        owner.extend([i] * values.size)
    return space.snap(np.vstack(rows)), np.asarray(owner, dtype=np.intp)


def rank(
    space: EncodedSpace,
    columns: IntArray,
    top: int,
    *,
    by: str,
    problem: Any,
    scorer: BatchScorer,
    box: tuple[FloatMatrix, FloatMatrix],
) -> tuple[IntArray, str, tuple[FloatMatrix, FloatMatrix] | None]:
    """The ``top`` most relevant of ``columns``, the ranking used, and the rows a sensitivity
    ranking scored (with their scores), for the solve to offer as candidates.

    ``box`` holds each column's search box (encoded values) for the sensitivity rows.
    """
    if top >= columns.size:
        return columns, "all", None
    if by == "information_value":
        values = information_values(problem, space, columns)
        if values is not None:
            order = np.argsort(-values, kind="stable")
            return np.sort(columns[order[:top]]), "information_value", None
    rows, owner = sensitivity_rows(space, columns, box[0], box[1])
    scores = score_batches(scorer, rows)  # every category of a wide categorical: chunked
    per_column = np.full((columns.size, scores.shape[1]), -np.inf)
    for r in best_first(scores)[::-1].tolist():  # worst first, so each column ends with its best row
        per_column[owner[r]] = scores[r]
    order = best_first(per_column)
    return np.sort(columns[order[:top]]), "sensitivity", (rows, scores)
