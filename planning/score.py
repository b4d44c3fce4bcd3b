"""The bendable score: three hard levels, two soft levels, compared lexicographically.

Higher is better; every level is 0 or negative; a score is feasible when every hard level is
0. The text form is OptaPlanner's, ``[h0/h1/h2]hard/[s0/s1]soft``, and parses back exactly.

=======  ==============================================================================
level    meaning
=======  ==============================================================================
hard 0   prediction distance: minus the summed distance of each goal output from its goal
hard 1   actionability: minus the number of broken rules (an immutable feature changed)
hard 2   confidence: minus the number of class goals below their confidence threshold
soft 0   feature distance (proximity): minus d(x, x')
soft 1   sparsity: minus the number of changed features
=======  ==============================================================================
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from counterplan.planning.errors import ScoreFormatError

FloatMatrix = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

HARD_LEVELS = 3
"""The hard levels come first in a score row: a row is feasible when all of them are 0."""
SOFT_LEVELS = 2
LEVELS = HARD_LEVELS + SOFT_LEVELS
PRUNED = -2.0e15
"""Hard level 0 of a candidate left out of a model call because whatever the model said it could
not beat the best (the calculator's ``beat``): below any real goal distance and below a failed
prediction's, so a search can tell it apart and never steps onto it."""

_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?inf"
_TEXT = re.compile(rf"^\[({_NUMBER})/({_NUMBER})/({_NUMBER})\]hard/\[({_NUMBER})/({_NUMBER})\]soft$")


@functools.total_ordering
@dataclass(frozen=True)
class BendableScore:
    """A score with ``hard`` (3 levels) and ``soft`` (2 levels) parts; higher is better."""

    hard: tuple[float, float, float]
    soft: tuple[float, float]

    @classmethod
    def of(cls, levels: Sequence[float] | npt.NDArray[np.float64]) -> BendableScore:
        """Build from the five levels in order (hard 0..2, soft 0..1), e.g. a score-matrix row."""
        values = [float(v) + 0.0 for v in levels]  # + 0.0 folds -0.0 into 0.0
        if len(values) != LEVELS:
            raise ScoreFormatError(str(list(levels)), f"expected {LEVELS} levels, given {len(values)}")
        return cls((values[0], values[1], values[2]), (values[3], values[4]))

    @classmethod
    def zero(cls) -> BendableScore:
        """The best possible score: every level 0."""
        return cls((0.0, 0.0, 0.0), (0.0, 0.0))

    @classmethod
    def parse(cls, text: str) -> BendableScore:
        """Parse the text form ``[h0/h1/h2]hard/[s0/s1]soft``."""
        match = _TEXT.match(text.strip().replace(" ", ""))
        if match is None:
            raise ScoreFormatError(text, "expected the form [h0/h1/h2]hard/[s0/s1]soft, e.g. [0/0/0]hard/[-1.5/-2]soft")
        return cls.of([float(group) for group in match.groups()])

    @property
    def levels(self) -> tuple[float, ...]:
        """All five levels, hard first."""
        return self.hard + self.soft

    @property
    def is_feasible(self) -> bool:
        """True when every hard level is 0: the goals are met and no rule is broken."""
        return all(level >= 0.0 for level in self.hard)

    def to_array(self) -> npt.NDArray[np.float64]:
        """The five levels as a float64 vector, the calculator's row layout."""
        return np.array(self.levels, dtype=np.float64)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, BendableScore):
            return NotImplemented
        return self.levels < other.levels

    def __str__(self) -> str:
        hard = "/".join(_format_level(v) for v in self.hard)
        soft = "/".join(_format_level(v) for v in self.soft)
        return f"[{hard}]hard/[{soft}]soft"


def _format_level(value: float) -> str:
    """Whole numbers without a decimal point (as OptaPlanner prints), others exactly."""
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


# Vectorised comparison of score rows (hard 0 first, higher better): the engines and the calculator
# compare whole batches of candidates at once, so this is the one place score rows are compared.


def best_first(scores: FloatMatrix) -> np.ndarray:
    """Row indices from the best score to the worst; among equal scores, the earlier row first."""
    return np.lexsort((-np.arange(scores.shape[0]), *scores.T[::-1]))[::-1]


def compare_to(scores: FloatMatrix, reference: FloatMatrix) -> FloatMatrix:
    """Sign of the lexicographic comparison of every row of ``scores`` with one row.

    ``reference`` is one row, or one row per row of ``scores``. Returns an ``(n,)`` array of -1,
    0 or 1: the sign of the first level that differs. Built from the last level up, each level
    overriding where it differs: a handful of ufuncs on ``(n,)`` columns (the engine compares every
    step's batch, so this runs a few dozen times per solve).
    """
    signs = np.sign(scores - reference)
    result = signs[:, -1].copy()
    for level in range(signs.shape[1] - 2, -1, -1):
        column = signs[:, level]
        np.copyto(result, column, where=column != 0.0)
    return result


def better(scores: FloatMatrix, reference: FloatMatrix) -> BoolArray:
    """Rows strictly better than ``reference``."""
    return compare_to(scores, reference) > 0


def not_worse(scores: FloatMatrix, reference: FloatMatrix) -> BoolArray:
    """Rows at least as good as ``reference``."""
    return compare_to(scores, reference) >= 0


def best_row(scores: FloatMatrix) -> int:
    """Index of the best row (the first among equals).

    Level by level, the rows holding the level's best value among those still tied; most batches
    are decided by the first level or two, so this is a few ufuncs rather than a full sort.
    """
    tied = np.flatnonzero(scores[:, 0] == scores[:, 0].max())
    for level in range(1, scores.shape[1]):
        if tied.size == 1:
            break
        column = scores[tied, level]
        tied = tied[column == column.max()]
    return int(tied[0])


def is_better(a: FloatMatrix, b: FloatMatrix) -> bool:
    """True when score row ``a`` is strictly better than ``b``."""
    return bool(better(a.reshape(1, -1), b)[0])


def is_feasible(score: FloatMatrix) -> bool:
    """True when every hard level of the row is 0."""
    return bool((score[:HARD_LEVELS] >= 0.0).all())


_FEW_TIED = 16
"""Rows still tied on a level that are compared as Python tuples rather than by numpy."""
_SMALL_BATCH = 96
"""Batches up to this many rows are simply sorted."""


def last_best_row(scores: FloatMatrix) -> int:
    """The row of the lexicographically greatest score, the last of equal ones: what
    ``np.lexsort(scores.T[::-1])[-1]`` gives (NaN sorting last); for a large batch level by level
    on the rows still tied, with no sort."""
    if scores.shape[0] <= _SMALL_BATCH:
        return int(np.lexsort(scores.T[::-1])[-1])
    tied: npt.NDArray[np.intp] | None = None
    for level in range(scores.shape[1]):
        column = scores[:, level] if tied is None else scores[tied, level]
        best = column.max()
        hit = np.isnan(column) if math.isnan(best) else column == best
        tied = np.flatnonzero(hit) if tied is None else tied[hit]
        if tied.size == 1:
            break
        if tied.size <= _FEW_TIED:  # a few rows: as tuples (no NaN: there tuples and sorting differ)
            rows = scores[tied].tolist()
            if not any(math.isnan(value) for row in rows for value in row):
                return int(tied[max(range(len(rows)), key=lambda i: (rows[i], i))])
    assert tied is not None
    return int(tied[-1])
