"""The small protocol through which the engines know a problem.

The engines see an encoded search space (bounds and column kinds of a float64 candidate
matrix, plus the original row) and a batched score function. Nothing else: the same engines
can search any planning problem that offers these, as OptaPlanner's solver core knows nothing
of the domains built on it. ``planning.FeatureSpace`` and ``planning.ScoreCalculator`` fit.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import numpy.typing as npt

FloatMatrix = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


class EncodedSpace(Protocol):
    """Bounds and column kinds of the candidate matrix."""

    lower: FloatMatrix
    upper: FloatMatrix
    mutable: BoolArray
    integral: BoolArray
    nominal: BoolArray
    original: FloatMatrix
    graded: BoolArray
    """Numbers whose original is a number: moves may go part of the way back to it."""
    step: FloatMatrix
    """Grid spacing per column (1 for whole numbers, 0 for any float)."""
    allowed: dict[int, FloatMatrix]
    """Columns restricted to listed values: their sorted allowed values."""
    split_values: dict[int, FloatMatrix]
    """Per column, when known: values where the model's decision changes."""

    @property
    def n_features(self) -> int:
        """Number of columns."""
        ...

    def snap(self, X: FloatMatrix) -> FloatMatrix:
        """Put values on each column's grid and allowed values, keeping originals (in place)."""
        ...

    def to_grid(self, values: FloatMatrix, columns: npt.NDArray[np.intp]) -> FloatMatrix:
        """``values`` of ``columns`` rounded onto their grids, within the grid bounds."""
        ...


class BatchScorer(Protocol):
    """Scores a candidate matrix: ``(n, n_features)`` in, ``(n, 5)`` bendable levels out."""

    @property
    def calculation_count(self) -> int:
        """Candidates scored so far."""
        ...

    @property
    def model_call_count(self) -> int:
        """Model calls made so far."""
        ...

    def score(self, X: FloatMatrix) -> FloatMatrix:
        """One batched evaluation of every row."""
        ...

    def score_final(self, X: FloatMatrix) -> FloatMatrix:
        """Like :meth:`score`, even when the solve is stopping: an engine's final answers are
        checked through the model however they ended (one call, the last)."""
        ...
