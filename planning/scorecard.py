"""Credit scorecards: a points table (bins per feature, points per bin) as a model counterplan explains.

A scorecard sums, per feature, the points of the bin the applicant's value falls in. Credit-risk
teams build them with ``optbinning`` (a ``BinningProcess`` and a logistic regression in a
``Scorecard``) or elsewhere and hand over the table. Both are accepted:

- :class:`PointsTable` is the table as data (YAML, JSON or CSV; :func:`load_points_table`):
  numeric bins are half-open intervals ``[lower, upper)``, categorical bins are groups of
  categories, each with its points; an intercept, a cut-off, the two classes (low and high
  scores) and, optionally, how points map to odds (points at base odds and points to double the
  odds), or each bin's own log-odds contribution (optbinning's coefficient x WoE).
- :func:`read_optbinning` reads a fitted ``optbinning.Scorecard`` into such a table; the
  :class:`ScorecardAdapter` then predicts with the real ``Scorecard`` and keeps the table for the
  exact engine, which encodes it bin by bin (:mod:`counterplan.solver.exact.encoders.scorecard`).

The adapter has two outputs: the class (probabilities from the log-odds; with no odds given, the
decision at the cut-off as certainty) and the score in points, so a goal can ask for a class with
a confidence, a probability, or a score range.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from counterplan.planning._pydantic import reraise
from counterplan.planning.errors import ModelAdapterError
from counterplan.planning.features import within_magnitude
from counterplan.planning.goals import OutputSpec
from counterplan.planning.model_protocol import Predictions
from counterplan.planning.space import FeatureSpace, FloatMatrix

MAX_VARIABLES = 1000
MAX_BINS = 1000
MAX_CATEGORIES = 10_000


def _not_a_bool(value: Any) -> Any:
    if isinstance(value, bool | np.bool_):
        raise ValueError(f"must be a number, given {value!r}")  # pydantic would read true as 1
    return value


Real = Annotated[float, BeforeValidator(_not_a_bool), Field(allow_inf_nan=False)]
"""A finite number of a table (a log-odds, a WoE, the odds scaling): never NaN or infinite
(``cutoff: .nan`` was a cut-off no score reaches, every answer refused), never a bool (``points:
true`` was read as 1). Text that reads as a number is taken: the YAML reader gives ``1e5`` as
text (a feature's bounds, written by hand, refuse text: a table is more often generated)."""
Number = Annotated[Real, AfterValidator(within_magnitude)]
"""Points, an edge, the intercept or the cut-off: at most 2^53 in magnitude, as a feature's
values (1e308 points summed to an infinite score)."""


class ScorecardBin(BaseModel):
    """One bin: a half-open interval ``[lower, upper)`` of a number, or a group of categories."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    lower: Number | None = None
    """Inclusive lower edge; None: minus infinity."""
    upper: Number | None = None
    """Exclusive upper edge; None: infinity."""
    categories: Annotated[tuple[str, ...], Field(min_length=1, max_length=MAX_CATEGORIES)] | None = None
    points: Number
    log_odds: Real | None = None
    """This bin's contribution to the log-odds of the high-score class (optbinning: minus the
    coefficient times the WoE); None: derived from the points and the table's odds scaling."""
    woe: Real | None = None
    """Weight of evidence (optbinning's convention: higher means fewer events), when known."""

    @model_validator(mode="after")
    def _kind(self) -> ScorecardBin:
        if self.categories is not None and (self.lower is not None or self.upper is not None):
            raise ValueError("a bin is either an interval (lower/upper) or a group of categories, not both")
        if self.lower is not None and self.upper is not None and not self.lower < self.upper:
            raise ValueError(f"the interval [{self.lower:g}, {self.upper:g}) is empty")
        return self

    @property
    def label(self) -> str:
        """How the bin reads: ``[91.5, 95.5)``, ``(-inf, 30)``, ``{rent, other}``."""
        if self.categories is not None:
            return "{" + ", ".join(self.categories) + "}"
        low = "(-inf" if self.lower is None else f"[{self.lower:.6g}"
        high = "inf)" if self.upper is None else f"{self.upper:.6g})"
        return f"{low}, {high}"


class ScorecardVariable(BaseModel):
    """A feature's bins: contiguous intervals covering the numbers, or disjoint category groups."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: Annotated[str, Field(min_length=1, max_length=200)]
    bins: Annotated[tuple[ScorecardBin, ...], Field(min_length=1, max_length=MAX_BINS)]
    missing_points: Number | None = None
    """Points of a missing value (optbinning's Missing bin); None: a missing value has no score."""
    missing_log_odds: Real | None = None
    missing_woe: Real | None = None
    points_span: Annotated[Real, Field(ge=0.0)] | None = None
    """The range of the variable's unscaled points (coefficient x WoE) over its scorecard table,
    Special and Missing rows included: the scorecard paper's proximity weight is 1 / it (optbinning)."""

    @model_validator(mode="after")
    def _bins(self) -> ScorecardVariable:
        categorical = [b.categories is not None for b in self.bins]
        if any(categorical) and not all(categorical):
            raise ValueError(f"variable {self.name!r}: mixes interval bins and category bins")
        if all(categorical):
            seen: set[str] = set()
            for b in self.bins:
                assert b.categories is not None
                twice = seen.intersection(b.categories)
                if twice:
                    raise ValueError(f"variable {self.name!r}: category {sorted(twice)[0]!r} is in two bins")
                seen.update(b.categories)
            return self
        if self.bins[0].lower is not None or self.bins[-1].upper is not None:
            raise ValueError(f"variable {self.name!r}: the bins must run from -inf to inf (leave the ends open)")
        for before, after in zip(self.bins, self.bins[1:], strict=False):
            if before.upper is None or after.lower is None or before.upper != after.lower:
                raise ValueError(
                    f"variable {self.name!r}: bin {before.label} does not end where {after.label} starts; "
                    "give the bins in order, each starting at the previous one's upper edge"
                )
        return self

    @property
    def categorical(self) -> bool:
        """True for category groups."""
        return self.bins[0].categories is not None

    @property
    def edges(self) -> npt.NDArray[np.float64]:
        """The inner edges of an interval variable (each bin's lower edge but the first's)."""
        return np.array([b.lower for b in self.bins[1:]], dtype=np.float64)

    def bin_index(self, values: Any) -> npt.NDArray[np.float64]:
        """Each value's bin (NaN when missing, or a category in no bin)."""
        if self.categorical:
            lookup = {c: float(k) for k, b in enumerate(self.bins) for c in b.categories or ()}
            return np.array([lookup.get(_text(v), np.nan) for v in values], dtype=np.float64)
        x = pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(dtype=np.float64)
        index = np.searchsorted(self.edges, x, side="right").astype(np.float64)
        index[~np.isfinite(x)] = np.nan
        return index

    @property
    def points_range(self) -> float:
        """Largest minus smallest points of the variable's bins (its Missing bin's included)."""
        points = [b.points for b in self.bins] + ([self.missing_points] if self.missing_points is not None else [])
        return max(points) - min(points)

    @property
    def log_odds_range(self) -> float | None:
        """Largest minus smallest log-odds contribution (the Missing bin's included), when known:
        the paper's unscaled points, coefficient x WoE."""
        if any(b.log_odds is None for b in self.bins):
            return None
        values = [float(b.log_odds) for b in self.bins if b.log_odds is not None]
        if self.missing_log_odds is not None:
            values.append(self.missing_log_odds)
        return max(values) - min(values)


class OddsScaling(BaseModel):
    """Points to odds, as scorecards are usually scaled: ``odds`` (high-score class to low-score
    class) at ``points``, doubling every ``pdo`` points."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    points: Number
    odds: Annotated[Real, Field(gt=0.0)]
    pdo: Annotated[Real, Field(gt=0.0)]

    def log_odds(self, score: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """The log-odds of the high-score class at each score."""
        result: npt.NDArray[np.float64] = math.log(self.odds) + (score - self.points) * math.log(2.0) / self.pdo
        return result


class PointsTable(BaseModel):
    """A scorecard as data: score = intercept + the points of each variable's bin."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    variables: Annotated[tuple[ScorecardVariable, ...], Field(min_length=1, max_length=MAX_VARIABLES)]
    intercept: Number = 0.0
    """Points every applicant starts with."""
    cutoff: Number | None = None
    """Scores at or above it get the high-score class (the decision when no odds are given)."""
    classes: tuple[Any, Any] = (0, 1)
    """The low-score class and the high-score class (say ``("bad", "good")``)."""
    odds: OddsScaling | None = None
    log_odds_intercept: Real = 0.0
    """With per-bin log-odds (optbinning's), the log-odds of the high-score class before the bins."""

    @field_validator("classes")
    @classmethod
    def _scalar_classes(cls, classes: tuple[Any, Any]) -> tuple[Any, Any]:
        for c in classes:
            if not isinstance(c, str | int | float) or (isinstance(c, float) and not math.isfinite(c)):
                raise ValueError(f"a class is a text, a whole number or a finite number, given {c!r:.40}")
        return classes

    @model_validator(mode="after")
    def _check(self) -> PointsTable:
        names = [v.name for v in self.variables]
        twice = {n for n in names if names.count(n) > 1}
        if twice:
            raise ValueError(f"variable {sorted(twice)[0]!r} appears twice")
        per_bin = [b.log_odds is not None for v in self.variables for b in v.bins]
        if any(per_bin) and not all(per_bin):
            raise ValueError("give log_odds for every bin or for none")
        if self.odds is not None and all(per_bin):
            raise ValueError("give either per-bin log_odds or an odds scaling, not both")
        if self.classes[0] == self.classes[1]:
            raise ValueError("the two classes must differ")
        if self.cutoff is None and self.odds is None and not all(per_bin):
            raise ValueError("give a cutoff, an odds scaling or per-bin log_odds: nothing tells the class")
        return self

    @property
    def has_probabilities(self) -> bool:
        """True when the table says how likely the high-score class is (not only the decision)."""
        return self.odds is not None or self.variables[0].bins[0].log_odds is not None

    def bins(self, frame: pd.DataFrame) -> npt.NDArray[np.float64]:
        """``(n, n_variables)``: each row's bin per variable (NaN: missing or in no bin)."""
        missing = [v.name for v in self.variables if v.name not in frame.columns]
        if missing:
            raise ModelAdapterError("data", f"the scorecard reads columns {missing[:10]} the data does not have")
        return np.column_stack([v.bin_index(frame[v.name].to_numpy()) for v in self.variables])

    def score(self, frame: pd.DataFrame) -> npt.NDArray[np.float64]:
        """Each row's score in points (NaN when a value falls in no bin and has no points)."""
        return self._total(frame, "points", self.intercept)

    def log_odds(self, frame: pd.DataFrame) -> npt.NDArray[np.float64]:
        """Each row's log-odds of the high-score class."""
        if self.odds is not None:
            return self.odds.log_odds(self.score(frame))
        if not self.has_probabilities:
            raise ModelAdapterError("scorecard", "the table gives no odds: only the decision at the cut-off")
        return self._total(frame, "log_odds", self.log_odds_intercept)

    def _total(self, frame: pd.DataFrame, what: str, start: float) -> npt.NDArray[np.float64]:
        index = self.bins(frame)
        total = np.full(len(frame), start, dtype=np.float64)
        for j, variable in enumerate(self.variables):
            values = np.array([getattr(b, what) for b in variable.bins], dtype=np.float64)
            missing = variable.missing_points if what == "points" else variable.missing_log_odds
            column = index[:, j]
            known = np.isfinite(column)
            part = np.full(len(frame), np.nan if missing is None else missing)
            part[known] = values[column[known].astype(int)]
            total += part
        return total

    def variable(self, name: str) -> ScorecardVariable | None:
        """The variable called ``name``."""
        return next((v for v in self.variables if v.name == name), None)


def _text(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


class ScorecardAdapter:
    """A scorecard as a model: a class output and a score output, one vectorised call per batch.

    Parameters
    ----------
    table:
        The points table (for an optbinning scorecard: read from it).
    output:
        Name of the class output.
    score_output:
        Name of the score (points) output.
    model:
        The fitted ``optbinning.Scorecard`` the table was read from, or None. When given, it
        makes every prediction: answers are checked through the real model, not the table.
    """

    input_kind = "dataframe"

    def __init__(
        self, table: PointsTable, output: str = "prediction", score_output: str = "score", model: Any = None
    ) -> None:
        if output == score_output:
            raise ModelAdapterError("outputs", f"the class and score outputs need different names, given {output!r}")
        self.table = table
        self.model = model
        self.labels_only = not table.has_probabilities and model is None
        # the class order of the probabilities: the real model's own, else (low score, high score)
        order = tuple(_plain(c) for c in model.estimator_.classes_) if model is not None else tuple(table.classes)
        self._outputs = (OutputSpec(output, order), OutputSpec(score_output))
        self.feature_names = [v.name for v in table.variables]

    @property
    def outputs(self) -> tuple[OutputSpec, ...]:
        """The class output, then the score output."""
        return self._outputs

    @property
    def description(self) -> str:
        """What the scorecard is, for reports."""
        source = "optbinning Scorecard" if self.model is not None else "points table"
        bins = sum(len(v.bins) for v in self.table.variables)
        return f"{source}: {len(self.table.variables)} variables, {bins} bins"

    def predict(self, X: FloatMatrix, space: FeatureSpace) -> Predictions:
        """Class probabilities and scores for every candidate."""
        frame = space.to_frame(X)
        if self.model is not None:
            # the class from the real Scorecard; its score from the table read off it, which was
            # checked bin by bin against the Scorecard's own (each call of its binning costs ~15 ms)
            proba = np.asarray(self.model.predict_proba(frame), dtype=np.float64)
            return {self._outputs[0].name: proba, self._outputs[1].name: self.table.score(frame)}
        score = self.table.score(frame)
        if self.labels_only:
            assert self.table.cutoff is not None
            high = np.where(np.isfinite(score), (score >= self.table.cutoff).astype(np.float64), np.nan)
        else:
            # clipped: beyond 700 exp overflows (a warning), and the probability is 0 or 1 long before
            high = 1.0 / (1.0 + np.exp(-np.clip(self.table.log_odds(frame), -700.0, 700.0)))
        return {self._outputs[0].name: np.column_stack([1.0 - high, high]), self._outputs[1].name: score}

    def predicts_row_by_row(self, space: FeatureSpace) -> bool:
        """A points table adds each row's points column by column: row by row; an optbinning
        ``Scorecard``'s probabilities come from its logistic regression, a matrix product that is
        not (:func:`~counterplan.planning.model_protocol.predicts_row_by_row`)."""
        return self.model is None

    @property
    def high_is_second(self) -> bool:
        """True when the class output's second column is the high-score class's probability."""
        classes = self._outputs[0].classes
        assert classes is not None
        return bool(classes[1] == self.table.classes[1])

    def bin_label(self, feature: str, value: Any) -> str | None:
        """The label of the bin ``value`` falls in, for a scorecard variable (None otherwise)."""
        variable = self.table.variable(feature)
        if variable is None:
            return None
        index = variable.bin_index([value])[0]
        return "missing" if not np.isfinite(index) else variable.bins[int(index)].label


def is_optbinning_scorecard(model: Any) -> bool:
    """True for a fitted ``optbinning.Scorecard`` (checked without importing optbinning)."""
    return type(model).__name__ == "Scorecard" and type(model).__module__.startswith("optbinning")


def read_optbinning(scorecard: Any) -> PointsTable:
    """The points table of a fitted ``optbinning.Scorecard`` (binary target, logistic estimator).

    Each selected variable's bins come from its binning (exact split points, category groups),
    each bin's points from the scorecard's table, and its log-odds contribution from the
    estimator: minus coefficient x WoE for the high-score class, which is class 0 (optbinning's
    non-event: its WoE grows as events get rarer)."""
    if not hasattr(scorecard, "binning_process_"):
        raise ModelAdapterError("model", "the optbinning Scorecard is not fitted")
    estimator = scorecard.estimator_
    classes = [_plain(c) for c in getattr(estimator, "classes_", [])]
    if len(classes) != 2 or not hasattr(estimator, "coef_"):
        raise ModelAdapterError(
            "model", "only scorecards of a binary target with a linear estimator (logistic regression) are supported"
        )
    process = scorecard.binning_process_
    names = [str(n) for n in process.get_support(names=True)]
    coef = np.asarray(estimator.coef_, dtype=np.float64).reshape(-1)
    if coef.size != len(names):
        raise ModelAdapterError("model", f"the estimator has {coef.size} coefficients for {len(names)} variables")
    table = scorecard.table(style="detailed")
    variables = []
    for name, c in zip(names, coef, strict=True):
        binned = process.get_binned_variable(name)
        rows = table[table["Variable"] == name]
        regular = rows[~rows["Bin"].astype(str).isin(["Special", "Missing", ""])]
        points = regular["Points"].to_numpy(dtype=np.float64)
        woe = regular["WoE"].to_numpy(dtype=np.float64)
        missing = rows[rows["Bin"].astype(str) == "Missing"]
        missing_woe = float(missing["WoE"].iloc[0]) if len(missing) else 0.0
        if binned.dtype == "categorical":
            groups = [tuple(_text(v) for v in group) for group in binned.splits]
            bins = [
                ScorecardBin(categories=g, points=float(p), log_odds=-float(c) * float(w), woe=float(w))
                for g, p, w in zip(groups, points, woe, strict=True)
            ]
        else:
            edges = [float(s) for s in np.asarray(binned.splits, dtype=np.float64)]
            lows: list[float | None] = [None, *edges]
            highs: list[float | None] = [*edges, None]
            bins = [
                ScorecardBin(lower=lo, upper=hi, points=float(p), log_odds=-float(c) * float(w), woe=float(w))
                for lo, hi, p, w in zip(lows, highs, points, woe, strict=True)
            ]
        variables.append(
            ScorecardVariable(
                name=name,
                bins=tuple(bins),
                missing_points=float(missing["Points"].iloc[0]) if len(missing) else None,
                missing_log_odds=-float(c) * missing_woe,
                missing_woe=missing_woe,
                points_span=float(np.ptp(float(c) * rows["WoE"].to_numpy(dtype=np.float64))),
            )
        )
    intercept = float(np.asarray(estimator.intercept_, dtype=np.float64).reshape(-1)[0])
    table = PointsTable(variables=tuple(variables), classes=(classes[1], classes[0]), log_odds_intercept=-intercept)
    table = _missing_as_scored(table, scorecard, coef)
    _check_every_bin(table, scorecard)
    return table


def _check_every_bin(table: PointsTable, scorecard: Any) -> None:
    """The table's score equals the Scorecard's for a value in every bin of every variable (and
    a missing one), in one call; else the table is refused."""
    base = {v.name: _inside(v.bins[0]) for v in table.variables}
    rows = [{**base, v.name: _inside(b)} for v in table.variables for b in v.bins]
    rows += [{**base, v.name: np.nan} for v in table.variables]
    frame = pd.DataFrame(rows)
    for v in table.variables:
        if v.categorical:
            frame[v.name] = frame[v.name].astype(object)
    theirs = np.asarray(scorecard.score(frame), dtype=np.float64)
    mine = table.score(frame)
    if not np.allclose(mine, theirs, rtol=1e-9, atol=1e-9):
        worst = int(np.nanargmax(np.abs(mine - theirs)))
        raise ModelAdapterError(
            "model",
            f"the scorecard's table does not reproduce its scores (row {worst}: {mine[worst]!r} vs {theirs[worst]!r})",
        )


def _missing_as_scored(table: PointsTable, scorecard: Any, coef: npt.NDArray[np.float64]) -> PointsTable:
    """Each variable's Missing bin as the scorecard really scores a missing value: its
    ``metric_missing`` (0 by default, or the empirical WoE) decides, not the table's WoE column.
    Read off the scorecard itself: a row of each bin's first value, then that variable missing."""
    row = {v.name: _inside(v.bins[0]) for v in table.variables}
    frame = pd.DataFrame([row] + [{**row, v.name: np.nan} for v in table.variables])
    for v in table.variables:
        if v.categorical:
            frame[v.name] = frame[v.name].astype(object)
    score = np.asarray(scorecard.score(frame), dtype=np.float64)
    process = scorecard.binning_process_
    woe = process.transform(frame, metric="woe", metric_missing=getattr(scorecard, "_metric_missing", 0))
    woe = np.asarray(woe[[v.name for v in table.variables]], dtype=np.float64)
    variables = []
    for j, v in enumerate(table.variables):
        missing_woe = float(woe[1 + j, j])
        variables.append(
            v.model_copy(
                update={
                    "missing_points": v.bins[0].points + float(score[1 + j] - score[0]),
                    "missing_woe": missing_woe,
                    "missing_log_odds": -float(coef[j]) * missing_woe,
                }
            )
        )
    return table.model_copy(update={"variables": tuple(variables)})


def _inside(b: ScorecardBin) -> Any:
    """A value in bin ``b`` (its lower edge: bins are half-open)."""
    if b.categories is not None:
        return b.categories[0]
    if b.lower is None:
        return (b.upper if b.upper is not None else 0.0) - 1.0
    return b.lower


def adapt_scorecard(model: Any, output: str = "prediction", score_output: str = "score") -> ScorecardAdapter:
    """A :class:`ScorecardAdapter` for an ``optbinning.Scorecard`` or a :class:`PointsTable`."""
    if isinstance(model, PointsTable):
        return ScorecardAdapter(model, output, score_output)
    if is_optbinning_scorecard(model):
        return ScorecardAdapter(read_optbinning(model), output, score_output, model=model)
    raise ModelAdapterError("model", f"{type(model).__name__} is not a scorecard")


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


# --- reading points tables from files -------------------------------------------------------

_INTERVAL = re.compile(r"^\s*([\[(])\s*([^,]+?)\s*,\s*([^,]+?)\s*([\])])\s*$")
MAX_TABLE_BYTES = 8 * 1024 * 1024


def load_points_table(path: str | Path) -> PointsTable:
    """A points table from a ``.yaml``/``.yml``/``.json`` file (the :class:`PointsTable` fields) or
    a ``.csv`` file with columns ``feature,bin,points``: ``bin`` an interval such as ``[30, 50)``,
    ``(-inf, 30)`` or ``[50, inf)``, or categories separated by ``|``; rows whose feature is
    ``(intercept)`` or ``(cutoff)`` give those numbers in ``points``. Optional CSV columns:
    ``classes`` (``low|high``, on any row) and ``woe``."""
    # the configuration reader's limits (a regular file, its size, no aliases, bounded nesting)
    from counterplan.planning.safe_yaml import (  # noqa: PLC0415 - only for table files
        ConfigTextError,
        load_file_text,
        read_config_file,
    )

    file = Path(path)
    try:
        text = read_config_file(file, MAX_TABLE_BYTES).removeprefix("\ufeff")  # a spreadsheet's byte-order mark
    except ConfigTextError as exc:
        raise ModelAdapterError("model", f"{file.name}: {exc.problem}") from None
    except UnicodeDecodeError as exc:
        raise ModelAdapterError("model", f"{file.name}: not UTF-8 text (byte {exc.start})") from None
    suffix = file.suffix.lower()
    if suffix in {".yaml", ".yml", ".json"}:
        data = load_file_text(text, file, max_bytes=MAX_TABLE_BYTES)
        try:
            return PointsTable.model_validate(data)
        except ValidationError as exc:  # the field's path and what is wrong, not pydantic's dump
            reraise(exc, "", ModelAdapterError)
    if suffix == ".csv":
        return points_table_from_csv(text)
    raise ModelAdapterError("model", f"unknown points table file type {suffix!r}; use .yaml, .json or .csv")


def points_table_from_csv(text: str) -> PointsTable:
    """A points table from CSV text (see :func:`load_points_table`)."""
    reader = _csv_reader(text)
    order: list[str] = []
    bins: dict[str, list[ScorecardBin]] = {}
    extra: dict[str, Any] = {}
    for line, row in enumerate(reader, start=2):
        feature = (row.get("feature") or "").strip()
        try:
            points = float(row.get("points") or "")
        except ValueError:
            raise ModelAdapterError("model", f"CSV line {line}: points must be a number") from None
        if row.get("classes"):
            extra["classes"] = tuple(part.strip() for part in str(row["classes"]).split("|"))
        if feature in {"(intercept)", "(cutoff)"}:
            if feature.strip("()") in extra:  # the last one silently won
                raise ModelAdapterError("model", f"CSV line {line}: a second {feature} row")
            extra[feature.strip("()")] = points
            continue
        if not feature:
            raise ModelAdapterError("model", f"CSV line {line}: no feature")
        woe = _number(str(row["woe"]), line) if row.get("woe") else None
        if feature not in bins:
            order.append(feature)
            bins[feature] = []
        bins[feature].append(_csv_bin(str(row.get("bin") or ""), points, woe, line))
        if len(order) > MAX_VARIABLES or len(bins[feature]) > MAX_BINS:
            raise ModelAdapterError("model", f"CSV line {line}: too many variables or bins")
    try:
        variables = tuple(ScorecardVariable(name=n, bins=tuple(_ordered(bins[n]))) for n in order)
        return PointsTable(variables=variables, **extra)
    except ValidationError as exc:
        reraise(exc, "", ModelAdapterError)


def _csv_reader(text: str) -> csv.DictReader[str]:
    """The CSV's rows, its column names as written but for spaces around them and their case
    (``Feature, Bin, Points`` was refused as missing the columns it has)."""
    reader = csv.DictReader(io.StringIO(text))
    given = list(reader.fieldnames or ())
    reader.fieldnames = [name.strip().lower() for name in given]
    if not {"feature", "bin", "points"} <= set(reader.fieldnames):
        raise ModelAdapterError(
            "model", f"a points table CSV needs the columns feature, bin, points; given {given[:10]}"
        )
    return reader


def _csv_bin(text: str, points: float, woe: float | None, line: int) -> ScorecardBin:
    match = _INTERVAL.match(text)
    if match:
        opening, low, high, closing = match.groups()
        lower = None if low.strip().lower() in {"-inf", "-infinity"} else _number(low, line)
        upper = None if high.strip().lower() in {"inf", "+inf", "infinity"} else _number(high, line)
        if (lower is not None and opening != "[") or (upper is not None and closing != ")"):
            raise ModelAdapterError("model", f"CSV line {line}: bins are half-open, [lower, upper)")
        return _csv_made(line, lower=lower, upper=upper, points=points, woe=woe)
    categories = tuple(part.strip() for part in text.split("|") if part.strip())
    if not categories:
        raise ModelAdapterError("model", f"CSV line {line}: an empty bin")
    return _csv_made(line, categories=categories, points=points, woe=woe)


def _csv_made(line: int, **fields: Any) -> ScorecardBin:
    try:
        return ScorecardBin(**fields)
    except ValidationError as exc:  # NaN points, a NaN edge: the line and the field
        reraise(exc, f"CSV line {line}", ModelAdapterError)


def _number(text: str, line: int) -> float:
    try:
        return float(text)
    except ValueError:
        raise ModelAdapterError("model", f"CSV line {line}: {text[:40]!r} is not a number") from None


def _ordered(bins: Sequence[ScorecardBin]) -> list[ScorecardBin]:
    if bins and bins[0].categories is None:
        return sorted(bins, key=lambda b: -math.inf if b.lower is None else b.lower)
    return list(bins)


# --- the paper's objective: proximity in WoE space and closeness to the data ---------------


class ScorecardDistance:
    """Navas-Palencia's objective for scorecard counterfactuals, as a distance: ``alpha`` x
    proximity + ``beta`` x closeness.

    - proximity: per variable, the change of its WoE (its points, for a table without WoE),
      weighted by 1 / the variable's points range;
    - closeness: the L1 norm of ``F^T (w' - mu)``, the candidate's WoE vector ``w'`` against the
      training data's mean ``mu``, with ``F`` the lower Cholesky factor of the inverse covariance
      of the training data's WoE (an L1 Mahalanobis distance to the data, as in DACE).

    Closeness measures the candidate alone, so the original itself is at ``beta x
    closeness(original)``, not 0; changing a variable towards the data's mean can lower it. The
    exact engine encodes the same terms (:mod:`counterplan.solver.exact.encoders.scorecard`)."""

    def __init__(
        self,
        table: PointsTable,
        alpha: float,
        beta: float,
        mean: npt.NDArray[np.float64] | None,
        factor: npt.NDArray[np.float64] | None,
    ) -> None:
        self.table = table
        self.alpha = alpha
        self.beta = beta
        self.mean = mean
        self.factor = factor
        self.values = [_woe_or_points(v) for v in table.variables]
        """Per variable, each bin's value in the objective's space (WoE, or points: the table's
        WoE when every bin has one)."""
        spans = [
            v.points_span if v.points_span is not None else v.log_odds_range or v.points_range for v in table.variables
        ]
        self.weights = np.array([1.0 / span if span > 0 else 0.0 for span in spans])
        """1 / each variable's range of unscaled points (coefficient x WoE, its Missing bin's
        included, as optbinning does), or of its points for a table without log-odds."""

    @classmethod
    def from_data(cls, table: PointsTable, data: pd.DataFrame | None, alpha: float, beta: float) -> ScorecardDistance:
        """Closeness statistics (the WoE mean and covariance) from training rows; without data
        only ``beta = 0`` is possible."""
        if beta == 0.0:
            return cls(table, alpha, beta, None, None)
        if data is None:
            raise ModelAdapterError("distance.beta", "closeness needs training data: build the problem from data")
        woe = woe_matrix(table, data)
        woe = woe[np.isfinite(woe).all(axis=1)]
        if woe.shape[0] <= woe.shape[1]:
            raise ModelAdapterError("distance.beta", "closeness needs more training rows than scorecard variables")
        covariance = np.atleast_2d(np.cov(woe, rowvar=False))
        precision = np.linalg.pinv(covariance)
        try:
            factor = np.linalg.cholesky(precision + 1e-12 * np.eye(precision.shape[0]))
        except np.linalg.LinAlgError:
            raise ModelAdapterError("distance.beta", "the training WoE covariance is singular") from None
        return cls(table, alpha, beta, np.asarray(woe.mean(axis=0), dtype=np.float64), np.asarray(factor, np.float64))

    def proximity(self, woe: npt.NDArray[np.float64], original: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """Weighted L1 change of each row's WoE from the original's."""
        result: npt.NDArray[np.float64] = (np.abs(woe - original) * self.weights).sum(axis=1)
        return result

    def closeness(self, woe: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """``|F^T (w - mu)|_1`` per row (0 without closeness statistics)."""
        if self.factor is None or self.mean is None:
            return np.zeros(woe.shape[0])
        result: npt.NDArray[np.float64] = np.abs((woe - self.mean) @ self.factor).sum(axis=1)
        return result

    def __call__(self, frame: pd.DataFrame, original: pd.DataFrame) -> npt.NDArray[np.float64]:
        """The objective of each row of ``frame`` (NaN where a value falls in no bin)."""
        woe = woe_matrix(self.table, frame)
        base = woe_matrix(self.table, original)[0]
        distance = self.alpha * self.proximity(woe, base)
        if self.beta:
            distance = distance + self.beta * self.closeness(woe)
        return distance


def woe_matrix(table: PointsTable, frame: pd.DataFrame) -> npt.NDArray[np.float64]:
    """Each row's WoE (or points) per variable."""
    bins = table.bins(frame)
    out = np.full(bins.shape, np.nan)
    for j, variable in enumerate(table.variables):
        values = _woe_or_points(variable)
        known = np.isfinite(bins[:, j])
        out[known, j] = values[bins[known, j].astype(int)]
        missing = variable.missing_woe if all(b.woe is not None for b in variable.bins) else variable.missing_points
        if missing is not None:  # a missing value is in the Missing bin (optbinning: WoE 0)
            absent = ~known & pd.isna(frame[variable.name]).to_numpy()
            out[absent, j] = missing
    return out


def _woe_or_points(variable: ScorecardVariable) -> npt.NDArray[np.float64]:
    if all(b.woe is not None for b in variable.bins):
        return np.array([b.woe for b in variable.bins], dtype=np.float64)
    return np.array([b.points for b in variable.bins], dtype=np.float64)
