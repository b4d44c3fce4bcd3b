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
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from counterplan.planning.calculator import ScoreCalculator
from counterplan.planning.distinct_rows import distinct_rows
from counterplan.planning.errors import CounterplanError, ProblemError, echo
from counterplan.planning.features import (
    MAX_MAGNITUDE,
    CategoricalFeature,
    FloatFeature,
    IntegerFeature,
    is_missing,
)
from counterplan.planning.problem import CounterfactualProblem
from counterplan.planning.space import AnyFeature, FeatureSpace, FloatMatrix
from counterplan.planning.threads import NativeThreadLimit
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
        try:
            positions = [_position(p) for p in text]
        except TypeError:  # not a list of anything: 5, a float
            given = f"given the {type(text).__name__} {echo(text)}"
            raise ProblemError("rows", f"give all, rejected, START:STOP or a list of positions; {given}") from None
        bad = [p for p in positions if not 0 <= p < n_rows]
        if bad:
            raise ProblemError("rows", f"position {bad[0]} is outside the data's {n_rows} rows")
        twice = [p for p, n in Counter(positions).items() if n > 1]
        if twice:
            raise ProblemError("rows", f"position {twice[0]} is given twice: each row is explained once")
        return cls(tuple(positions))

    def apply(self, data: pd.DataFrame) -> pd.DataFrame:
        """The selected rows of ``data``."""
        return data if self.positions is None else data.iloc[list(self.positions)]


def _position(value: Any) -> int:
    """A position of a row: a whole number (a numpy integer is one; ``3.7``, ``"3"``, ``True`` or
    ``None`` is refused, not read as another row or raised as a bare ``ValueError``)."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer):
        raise ProblemError("rows", f"a position is a whole number, given {echo(value)}")
    return int(value)


def probe_row(explainer: RowExplainer, frame: pd.DataFrame | None = None) -> int:
    """The position of the row of ``frame`` (default: the explainer's data) a batch's settings
    are checked on and its features read from: the first with no infinite value among the
    features and every number within the bounds a rule gives it (0 without data, or when no row
    is). A row's own bad value (an ``inf`` in a CSV, a value outside ``low``/``high``) is that
    row's error record; checked on it, the settings check refused the whole batch, whichever rows
    it selected (fuzzing: a rule ``low: 2, high: 20`` on data whose first row holds 21 refused
    the explainer, and every batch of a checked one)."""
    data = explainer.data if frame is None else frame
    if data is None:
        return 0
    numbers = data[[c for c in explainer.columns if c in data.columns]].select_dtypes("number")
    readable = ~numbers.isin([np.inf, -np.inf]).any(axis=1).to_numpy()
    spec = getattr(explainer, "spec", None)
    for name, rule in spec.features.items() if spec is not None else ():
        if rule.low is not None and rule.high is not None and name in numbers.columns:
            column = numbers[name]
            readable &= (column.isna() | column.between(rule.low, rule.high)).to_numpy()
    return int(np.argmax(readable)) if readable.any() else 0


def model_rows(explainer: RowExplainer, frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with only the columns the model reads (the explainer's ``columns``), in its
    order: a row's problem refuses a key that is no feature, and a batch's rows often hold
    others (an id, a group column, the label). A feature the frame lacks stays missing, for the
    row's problem to refuse; a rule that names a column the model does not read is refused when
    the explainer is built, not here."""
    keep = set(explainer.columns)
    if all(str(c) in keep for c in frame.columns):
        return frame
    return frame[[c for c in frame.columns if str(c) in keep]]


def meeting_the_goal(explainer: RowExplainer, frame: pd.DataFrame) -> npt.NDArray[np.bool_]:
    """Which rows of ``frame`` already meet the goal, decided as each row's own solve decides it,
    by one call of the real model per layout of rows.

    A solve says "already meets the goal" when its original, encoded in the row's own problem,
    meets every goal at its confidence on the model's reference path without failing (raising, or
    an implausible output); plausibility and the trust region do not enter. The model's input for
    that original depends on the row only through its values and its features' kinds: a number a
    whole-number column holds with decimals (an imputed fraction) is a float in that row's problem,
    a whole one an integer; a value outside the data's range only widens the row's own domain; a
    known category is coded among the data's categories. So the rows are grouped by the kinds
    their numbers can get (:func:`_layouts`); each layout builds one of its rows' problem exactly
    as that row's solve would (a layout that cannot be built, such as decimals in a column that
    must be whole, leaves its rows to their solves, which give their error records), and the rows
    whose problems give every feature the same kind are scored in one reference call of such a
    problem's space, its domains widened to hold them (:func:`_judge`). A call that raises is
    bisected by the score calculator: only the rows that fail are lost. (The solve itself first
    asks the adapter's fast path, checked against the reference when compiled, and confirms "meets
    the goal" on the reference: the decision is the reference's, as here.)

    False for every row that cannot be read so plainly: a gap, a category the data has never seen,
    a value that is no finite number, a row of a rare layout past :data:`MAX_LAYOUTS`; it goes to
    its solve, which explains it, says it meets the goal, or gives its error record, as before. A
    model that cannot be asked at all leaves every row to its solve.
    """
    frame = model_rows(explainer, frame)
    met = np.zeros(len(frame), dtype=bool)
    complete = np.flatnonzero(frame.notna().all(axis=1).to_numpy())
    if complete.size == 0:
        return met
    try:
        base = explainer.problem(_record(frame, int(complete[0])), trust_region=False)
    except Exception:  # that row's own solve gives its error record
        return met
    codes, readable = _codes(base.space, frame)
    kinds: dict[tuple[Any, ...], tuple[CounterfactualProblem, list[npt.NDArray[np.intp]]]] = {}
    for rows in _layouts(base.space, codes, readable):
        try:
            problem = explainer.problem(_record(frame, int(rows[0])), trust_region=False)
        except Exception:  # these rows' own solves give their error records
            continue
        kinds.setdefault(_kinds(problem.space), (problem, []))[1].append(rows)
    for problem, layouts in kinds.values():  # one call for the rows whose numbers have the same kinds
        rows = np.sort(np.concatenate(layouts))
        try:
            judge = _judge(problem, base.space, codes[rows])
            if judge is None:
                continue
            originals = codes[rows]  # each row is its own instance's original: reported as it is
            with NativeThreadLimit(explainer.config.model_threads):  # as every solve's calls are
                evaluation = ScoreCalculator(judge).check(originals, originals=originals)
        except Exception:  # the model cannot be asked: these rows' own solves say what it does
            continue
        fine = np.array([failure is None for failure in evaluation.failures], dtype=bool)
        met[rows] = (evaluation.scores[:, 0] == 0.0) & (evaluation.scores[:, 2] == 0.0) & fine
    return met


def _kinds(space: FeatureSpace) -> tuple[Any, ...]:
    """What the model's input depends on besides the values: each feature's kind, and a category's
    list and type (as the fast path's cache keys a space's encoding)."""
    return tuple((f.kind, getattr(f, "domain", None), getattr(f, "category_type", None)) for f in space.features)


MAX_LAYOUTS = 32
"""Layouts of rows (:func:`_layouts`) the selection judges, the most frequent first: each costs
one problem build and one model call; the rows of rarer layouts go to their solves."""


def _record(frame: pd.DataFrame, position: int) -> dict[str, Any]:
    """The row at ``position`` as its solve gets it: a record, whose names are checked."""
    return {str(k): v for k, v in frame.iloc[position].items()}


def _codes(space: FeatureSpace, frame: pd.DataFrame) -> tuple[FloatMatrix, npt.NDArray[np.bool_]]:
    """``frame`` as the rows' own problems encode it, and where that is certain: numbers as they
    are (decimals in a whole-number column too: the row's problem makes that feature a float),
    categories and booleans by the features' own ``encode``; not readable where a value is missing,
    refused, or no finite number a feature can hold."""
    X = np.zeros((len(frame), space.n_features), dtype=np.float64)
    readable = np.ones(len(frame), dtype=bool)
    for i, feature in enumerate(space.features):
        if feature.missing or feature.name not in frame.columns:
            return X, np.zeros(len(frame), dtype=bool)
        column = column_codes(feature, frame[feature.name])
        finite = np.isfinite(column)
        readable &= finite
        X[:, i] = np.where(finite, column, space.original[i])
    return X, readable


def column_codes(feature: AnyFeature, column: pd.Series) -> FloatMatrix:
    """One column's codes, NaN where not readable: a numeric column's numbers at once, any other
    column's values once per distinct value."""
    number = isinstance(feature, IntegerFeature | FloatFeature)
    if number and pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column):
        values = column.to_numpy(dtype=np.float64, na_value=np.nan, copy=True)
        with np.errstate(invalid="ignore"):
            values[~(np.abs(values) <= MAX_MAGNITUDE)] = np.nan  # NaN and infinities too
        return values
    labels, distinct = pd.factorize(column, use_na_sentinel=True)
    table = np.array([_number(v) if number else _code(feature, v) for v in distinct] + [np.nan], dtype=np.float64)
    return np.asarray(table[labels], dtype=np.float64)  # the gaps' label -1 reads the last entry: NaN


def _number(value: Any) -> float:
    """A number a numeric feature takes as it is, else NaN (text, a boolean, a gap: the row's own
    problem refuses or reads them otherwise)."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | float | np.integer | np.floating):
        return math.nan
    number = float(value)
    return number if math.isfinite(number) and abs(number) <= MAX_MAGNITUDE else math.nan


def _code(feature: AnyFeature, value: Any) -> float:
    """``value``'s code, NaN for a gap or a value the feature refuses."""
    if is_missing(value):
        return math.nan
    try:
        return feature.encode(value)
    except (CounterplanError, ValueError, TypeError):
        return math.nan


def _layouts(space: FeatureSpace, codes: FloatMatrix, readable: npt.NDArray[np.bool_]) -> list[npt.NDArray[np.intp]]:
    """The readable rows grouped by the kinds their own problems give their numbers, the most
    frequent first (at most :data:`MAX_LAYOUTS`). A number's kind can depend on the row only in a
    column the first complete row's problem makes an integer (decimals there make it a float, or
    are refused) or where that row holds decimals (a whole number may then make it an integer);
    elsewhere it is a float whatever the row holds. So the rows are keyed by which of those
    columns hold whole numbers."""
    varying = [
        i
        for i, f in enumerate(space.features)
        if isinstance(f, IntegerFeature) or (isinstance(f, FloatFeature) and not float(space.original[i]).is_integer())
    ]
    rows = np.flatnonzero(readable)
    if not rows.size:
        return []
    if not varying:
        return [rows]
    block = codes[np.ix_(rows, np.asarray(varying, dtype=np.intp))]
    whole = np.rint(block) == block
    _, inverse = distinct_rows(whole)
    counts = np.bincount(inverse)
    return [rows[inverse == k] for k in np.argsort(-counts, kind="stable")[:MAX_LAYOUTS]]


def _judge(problem: CounterfactualProblem, base: FeatureSpace, rows: FloatMatrix) -> CounterfactualProblem | None:
    """``problem`` made to score ``rows`` as their own problems score their originals: its
    domains widened to hold them (a row's own domain holds its value, and no domain changes the
    model's input), no rule judged against one row (plausibility, trust region). None when its
    categories are not ``base``'s (the rows were coded with those)."""
    features: list[AnyFeature] = []
    for i, feature in enumerate(problem.space.features):
        if isinstance(feature, CategoricalFeature) and feature.domain != getattr(base.features[i], "domain", None):
            return None
        if isinstance(feature, IntegerFeature | FloatFeature) and feature.low is not None and feature.high is not None:
            low, high = float(rows[:, i].min()), float(rows[:, i].max())
            if low < feature.low or high > feature.high:
                cast = int if isinstance(feature, IntegerFeature) else float
                bounds = {"low": cast(min(feature.low, low)), "high": cast(max(feature.high, high))}
                features.append(feature.model_copy(update=bounds))
                continue
        features.append(feature)
    judge = copy.copy(problem)
    judge.space = FeatureSpace(features)
    judge.plausibility = None
    judge.trust_region = None
    return judge


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
