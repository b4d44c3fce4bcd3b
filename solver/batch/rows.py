"""Which rows a batch explains, and the seed each one gets.

A selection is ``all``, ``rejected`` (the rows whose prediction does not meet the goal now),
a half-open range of positions ``START:STOP`` (either end may be left out), or a list of
positions. ``rejected`` is decided before any solve, with one call of the real model over the
selected rows (:func:`meeting_the_goal`): a data set where most rows are approved must not pay a
solve per approved row only to drop its record (27,291 of them cost 239 s on Give Me Some Credit,
more than the 1,591 rejected ones). A row's id is its index label in the DataFrame it comes from (for a CSV read with
pandas, its position), and its seed comes from the global seed and that id alone, so a row gets
the same answer whatever batch, worker or Ray block it runs in.
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from counterplan.planning.calculator import ScoreCalculator
from counterplan.planning.errors import CounterplanError, ProblemError
from counterplan.planning.features import is_missing
from counterplan.planning.space import AnyFeature, FeatureSpace, FloatMatrix
from counterplan.solver.batch.protocol import RowExplainer
from counterplan.solver.core.config import MAX_SEED

_RANGE = re.compile(r"^\s*(-?\d*)\s*:\s*(-?\d*)\s*$")


@dataclass(frozen=True)
class RowSelection:
    """Rows of a DataFrame chosen by position: ``positions`` None means every row."""

    positions: tuple[int, ...] | None = None
    only_rejected: bool = False

    @classmethod
    def parse(cls, text: str | Sequence[int] | None, n_rows: int) -> RowSelection:
        """``all``, ``rejected``, ``START:STOP`` or positions, checked against ``n_rows`` rows."""
        if text is None or (isinstance(text, str) and text.strip() == "all"):
            return cls()
        if isinstance(text, str):
            if text.strip() == "rejected":
                return cls(only_rejected=True)
            match = _RANGE.match(text)
            if match is None:
                raise ProblemError("rows", f"give all, rejected, START:STOP or positions; given {text[:40]!r}")
            start = int(match.group(1)) if match.group(1) else 0
            stop = int(match.group(2)) if match.group(2) else n_rows
            if not 0 <= start < stop <= n_rows:
                raise ProblemError("rows", f"{start}:{stop} is not a range of positions in the data's {n_rows} rows")
            return cls(tuple(range(start, stop)))
        positions = [int(p) for p in text]
        bad = [p for p in positions if not 0 <= p < n_rows]
        if bad:
            raise ProblemError("rows", f"position {bad[0]} is outside the data's {n_rows} rows")
        return cls(tuple(positions))

    def apply(self, data: pd.DataFrame) -> pd.DataFrame:
        """The selected rows of ``data``."""
        return data if self.positions is None else data.iloc[list(self.positions)]


def meeting_the_goal(explainer: RowExplainer, frame: pd.DataFrame) -> npt.NDArray[np.bool_]:
    """Which rows of ``frame`` already meet the goal, by one call of the real model over them all.

    True only where the answer is certain, the way a row's own solve decides it: the row encodes
    plainly in the features of a problem built for the first complete row (no gap, a known
    category, a number inside the data's domain; else its own problem may read it differently),
    the model's reference path predicts it without raising and with a plausible output (a call that
    raises is bisected by the score calculator: only the rows that fail are lost), and every goal
    is met at its confidence. Every other row is False: it goes to its solve, which explains it, says
    it meets the goal, or gives its error record, as before. A model that cannot be asked at all
    (an error building the problem or reading its outputs) leaves every row to its solve.
    """
    met = np.zeros(len(frame), dtype=bool)
    complete = np.flatnonzero(frame.notna().all(axis=1).to_numpy())
    if complete.size == 0:
        return met
    try:
        problem = explainer.problem(frame.iloc[int(complete[0])], trust_region=False)
        X, plain = _plain_rows(problem.space, frame)
        if not plain.any():
            return met
        goals_only = copy.copy(problem)  # the goal levels need no rule judged against the first row
        goals_only.plausibility = None
        goals_only.trust_region = None
        evaluation = ScoreCalculator(goals_only).check(X[plain])
    except CounterplanError:
        return met
    scores = evaluation.scores
    fine = np.array([failure is None for failure in evaluation.failures], dtype=bool)
    met[plain] = (scores[:, 0] == 0.0) & (scores[:, 2] == 0.0) & fine
    return met


def _plain_rows(space: FeatureSpace, frame: pd.DataFrame) -> tuple[FloatMatrix, npt.NDArray[np.bool_]]:
    """``frame`` encoded in ``space`` (the features' own ``encode``) and where that is certain
    to be what the row's own problem encodes: no gap, no value its feature refuses, inside the
    domain (a row outside it widens its own domain)."""
    X = np.zeros((len(frame), space.n_features), dtype=np.float64)
    plain = np.ones(len(frame), dtype=bool)
    for i, feature in enumerate(space.features):
        if feature.missing or feature.name not in frame.columns:
            return X, np.zeros(len(frame), dtype=bool)
        column = np.array([_code(feature, v) for v in frame[feature.name].tolist()], dtype=np.float64)
        with np.errstate(invalid="ignore"):
            plain &= (column >= space.domain_lower[i]) & (column <= space.domain_upper[i])  # NaN: False
        X[:, i] = np.where(np.isfinite(column), column, space.original[i])
    return X, plain


def _code(feature: AnyFeature, value: Any) -> float:
    """``value``'s code, NaN for a gap or a value the feature refuses."""
    if is_missing(value):
        return float("nan")
    try:
        return feature.encode(value)
    except (CounterplanError, ValueError, TypeError):
        return float("nan")


def row_seed(seed: int, row_id: Any) -> int:
    """The seed of the row with id ``row_id`` in a batch seeded with ``seed``: a hash of both, so
    it depends on nothing else (not the row's place in a batch, nor the worker)."""
    digest = hashlib.blake2b(f"{seed}/{id_text(row_id)}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % (MAX_SEED + 1)


def id_text(row_id: Any) -> str:
    """A row id as text, the same for ``5``, ``np.int64(5)`` and ``5.0``."""
    if isinstance(row_id, bool | np.bool_):
        return str(bool(row_id))
    if isinstance(row_id, int | np.integer):
        return str(int(row_id))
    if isinstance(row_id, float | np.floating) and float(row_id).is_integer():
        return str(int(row_id))
    return str(row_id)
