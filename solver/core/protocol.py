"""The small protocol through which the engines know a problem.

The engines see an encoded search space (bounds and column kinds of a float64 candidate
matrix, plus the original row) and a batched score function (which also checks answers through
the real model). Nothing else: the same engines
can search any planning problem that offers these, as OptaPlanner's solver core knows nothing
of the domains built on it. ``planning.FeatureSpace`` and ``planning.ScoreCalculator`` fit.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import numpy.typing as npt

FloatMatrix = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

MAX_ROWS_PER_CALL = 4096
"""Larger batches are split: a model call on millions of rows would only cost memory."""


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
    split_cuts: dict[int, FloatMatrix]
    """Per column whose thresholds' sides are known: the sorted values where a cell starts
    (:class:`counterplan.planning.space.SplitValues`)."""

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

    def with_split_values(self, split_values: dict[int, FloatMatrix]) -> EncodedSpace:
        """The same space knowing ``split_values`` (a shallow copy: this one is left as it is)."""
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

    @property
    def call_seconds(self) -> float:
        """How long the next model call is expected to take (0 before the first)."""
        ...

    def score(self, X: FloatMatrix, beat: FloatMatrix | None = None) -> FloatMatrix:
        """One batched evaluation of every row; with ``beat`` (a score row), a row that cannot
        beat it whatever the model says may be left out of the model call: its hard level 0 is
        then :data:`~counterplan.planning.score.PRUNED`, below any real score."""
        ...

    def score_final(self, X: FloatMatrix) -> FloatMatrix:
        """Like :meth:`score`, even when the solve is stopping: an engine's final answers are
        checked through the model however they ended (one call, the last), each row as it is
        reported (as :meth:`check`)."""
        ...

    def check(self, X: FloatMatrix) -> Checked:
        """Every row checked through the real model in one call, even when the solve is stopping
        (the answers a solve returns), as it is reported: the check's :attr:`Checked.rows`."""
        ...

    def check_best(self, row: FloatMatrix, *, stopping: bool) -> Checked:
        """The search's best row checked through the real model on its own, as it is reported;
        when the solve is ``stopping``, the prediction kept from the batch it was found in (no
        further call) if that batch held the row as reported."""
        ...

    def complete(self, X: FloatMatrix) -> FloatMatrix:
        """``X`` as the problem sees it (features computed from others set), for rows an engine
        built without scoring them."""
        ...


class Checked(Protocol):
    """Rows checked through the real model: the rows as checked and their score rows. The scorer
    that made them may keep more (the predictions) for whoever builds the result."""

    @property
    def scores(self) -> FloatMatrix:
        """``(n, 5)`` bendable levels."""
        ...

    @property
    def rows(self) -> FloatMatrix | None:
        """The rows checked: the rows given as their reports stand for them (a float a hair off
        its grid is checked as the value a report shows), which an answer is built from."""
        ...


def score_batches(scorer: BatchScorer, X: FloatMatrix) -> FloatMatrix:
    """Score ``X`` with one call per :data:`MAX_ROWS_PER_CALL` rows (one call for most batches)."""
    if X.shape[0] <= MAX_ROWS_PER_CALL:
        return scorer.score(X)
    return np.vstack([scorer.score(X[i : i + MAX_ROWS_PER_CALL]) for i in range(0, X.shape[0], MAX_ROWS_PER_CALL)])
