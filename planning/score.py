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
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from counterplan.planning.errors import ScoreFormatError

HARD_LEVELS = 3
SOFT_LEVELS = 2
LEVELS = HARD_LEVELS + SOFT_LEVELS

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


def best_index(scores: npt.NDArray[np.float64]) -> int:
    """Index of the best row of an ``(n, 5)`` score matrix (the first among equals)."""
    if scores.shape[0] == 0:
        raise ValueError("no scores to choose from")
    order = np.lexsort(scores.T[::-1])  # last key is primary: hard 0
    best = scores[order[-1]]
    ties = np.flatnonzero((scores == best).all(axis=1))
    return int(ties[0])


def compare_rows(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> int:
    """Lexicographic comparison of two score rows: -1, 0 or 1."""
    diff = np.flatnonzero(a != b)
    if diff.size == 0:
        return 0
    return 1 if a[diff[0]] > b[diff[0]] else -1
