"""Why a goal was not reached: the immutable features that hold it back.

When a solve ends without a valid answer, a user's first question is "what would it take?".
Often the answer is a feature they held fixed (age, a prior default). One batched model call
scans each immutable feature that has a domain, alone, over a grid of that domain, from the
best row the search found, and reports the ones whose change would reach the goal, or else
the ones that would bring it closest. It only reads the model; it never proposes an answer
that breaks a rule.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from counterplan.planning.calculator import ScoreCalculator
from counterplan.solver.core.protocol import FloatMatrix
from counterplan.solver.local.scan import scan_rows

GRID_SIZE = 24
MOST = 3
"""Closest-coming features named, at most."""


class Diagnosis(NamedTuple):
    """What the scan found: the features it moved, and those that reach or help."""

    blocked_by: list[str]
    """The features whose change alone reaches the goal (``reaches``), else the most helpful ones."""
    reaches: bool
    held_fixed: list[str]
    """Every immutable feature the scan moved: what a user held fixed (a gap kept as a gap is not)."""


def blocking_immutables(calculator: ScoreCalculator, best: FloatMatrix, best_score: FloatMatrix) -> Diagnosis:
    """Immutable features that would reach the goal if changed alone (``reaches`` True); else the
    most helpful ones. ``blocked_by`` is empty when no immutable feature has room to move or none
    helps; ``held_fixed`` names the ones tried, so a note can say what was held fixed either way.
    """
    space = calculator.problem.space
    frozen = ~space.mutable & (space.domain_upper > space.domain_lower) & ~space.missing
    held = [space.names[j] for j in np.flatnonzero(frozen)]
    if not frozen.any():
        return Diagnosis([], False, held)
    X, owners = scan_rows(space, best, frozen, GRID_SIZE)
    if X.shape[0] == 0:
        return Diagnosis([], False, held)
    scores = calculator.calculate(X).scores
    reach = (scores[:, 0] == 0.0) & (scores[:, 2] == 0.0)
    if reach.any():
        return Diagnosis([space.names[j] for j in np.unique(owners[reach])], True, held)
    gain = scores[:, 0] - best_score[0]
    best_gain = {int(j): float(gain[owners == j].max()) for j in np.unique(owners)}
    helpful = sorted((j for j, g in best_gain.items() if g > 0.0), key=lambda j: -best_gain[j])
    return Diagnosis([space.names[j] for j in helpful[:MOST]], False, held)
