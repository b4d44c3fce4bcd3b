"""An audit's figures from its rows: rates, costs and burdens by group, with bootstrap intervals.

Pure numpy and pandas over the audit's rows (one per audited row: its ``audit_status``, its
answer's ``distance`` and ``changed``, its ``cf_`` values and its group values), so the figures are
the same for an audit just run and for one read back from ``rows.parquet``, and tests need no solver.
Every figure takes the rows in the order of their ids (:func:`in_id_order`), whatever order they
come in.

The intervals are percentile bootstrap intervals (Efron and Tibshirani, 1993, ch. 13): the rows are
drawn with replacement ``bootstrap`` times, the figure computed on each draw, and the interval is
the draws' ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles. Each figure draws from
its own generator, seeded by the audit's seed and the figure's name (the group column, its value,
the figure), so a figure's interval depends on nothing else: not on the order figures are computed
in, nor on which other groups exist. The draws are made in chunks of at most
:data:`DRAWS_PER_CHUNK` indices, so memory stays bounded for large audits.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from statistics import NormalDist
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from counterplan.solver.audit.report import (
    BurdenFigures,
    FeatureFigures,
    GroupBurden,
    GroupFigures,
    Interval,
)
from counterplan.solver.batch.rows import id_text
from counterplan.solver.batch.summary import changed_flags, feature_changes

FloatArray = npt.NDArray[np.float64]
STATUS = "audit_status"
"""The column of the audit's rows that holds each row's :data:`~counterplan.solver.audit.report.AuditStatus`."""
NO_RECOURSE = ("no_recourse_proven", "no_recourse_unproven", "error")
"""The statuses that count as "without recourse" in the burden's share (an unknown row is not one with recourse)."""
DRAWS_PER_CHUNK = 4_000_000
"""Row indices drawn at once by a bootstrap (32 MB of int64)."""
MISSING_GROUP = "missing"
"""The group value of a row whose group column is empty."""


def figure_rng(seed: int, *names: str) -> np.random.Generator:
    """The generator of one figure's bootstrap: from the audit's seed and the figure's names alone."""
    digest = hashlib.blake2b("/".join(names).encode(), digest_size=8).digest()
    return np.random.default_rng([seed, int.from_bytes(digest, "big")])


def rngs(seed: int, *names: str) -> Callable[[str], np.random.Generator]:
    """The generators of the figures of one group value (or ``overall``), by figure name."""

    def rng_of(name: str) -> np.random.Generator:
        return figure_rng(seed, *names, name)

    return rng_of


MIN_BOOTSTRAP_ROWS = 2
"""A sample has an interval from this many values on."""


def bootstrap_interval(
    samples: Sequence[FloatArray],
    statistic: Callable[[Sequence[FloatArray]], FloatArray],
    rng: np.random.Generator,
    draws: int,
    confidence: float,
) -> Interval:
    """The percentile interval of ``statistic`` over ``draws`` resamples of ``samples``.

    Each array of ``samples`` (a group's values) is resampled with replacement on its own, to its
    own size; ``statistic`` takes the resampled arrays, each of shape ``(chunk, n_i)``, and returns
    one figure per draw. A draw without a finite figure (a ratio over a reference share resampled
    to 0) counts above every other draw: its ratio is unbounded. They were left out, so an
    interval was the draws' that happened to keep the reference's rows without recourse (a third
    of them for a reference of 5 rows, one without recourse: an upper bound of 4 where the draws
    have none). ``(None, None)`` when a sample has fewer than :data:`MIN_BOOTSTRAP_ROWS` values
    (one row resampled is that row again: a zero-width interval that claims a certainty one row
    cannot give) or when a bound falls among the draws without a figure (the interval has no
    finite end)."""
    if draws <= 0 or any(len(s) < MIN_BOOTSTRAP_ROWS for s in samples):
        return (None, None)
    width = max(len(s) for s in samples) * len(samples)
    chunk = max(1, DRAWS_PER_CHUNK // max(width, 1))
    figures: list[FloatArray] = []
    done = 0
    while done < draws:
        size = min(chunk, draws - done)
        drawn = [s[rng.integers(0, len(s), size=(size, len(s)))] for s in samples]
        figures.append(np.asarray(statistic(drawn), dtype=np.float64))
        done += size
    values = np.concatenate(figures)
    finite = np.sort(values[np.isfinite(values)])
    # the quantiles of all the draws, those without a figure ranked last: a bound's position (as
    # np.quantile's linear method places it) must fall among the finite draws
    positions = np.array([(1 - confidence) / 2, (1 + confidence) / 2]) * (len(values) - 1)
    if not finite.size or positions[1] > finite.size - 1:
        return (None, None)
    low, high = np.interp(positions, np.arange(finite.size), finite)
    return (float(low), float(high))


def _mean(drawn: Sequence[FloatArray]) -> FloatArray:
    return np.asarray(drawn[0].mean(axis=1), dtype=np.float64)


def _ratio(drawn: Sequence[FloatArray]) -> FloatArray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(drawn[0].mean(axis=1) / drawn[1].mean(axis=1), dtype=np.float64)


def mean_interval(values: FloatArray, rng: np.random.Generator, draws: int, confidence: float) -> Interval:
    """The bootstrap interval of the mean of ``values``."""
    return bootstrap_interval([values], _mean, rng, draws, confidence)


def share_interval(hits: FloatArray, draws: int, confidence: float) -> Interval:
    """The Wilson score interval (Wilson, 1927) of the share of ones among ``hits`` (0/1 values),
    or ``(None, None)`` with no rows or ``draws`` 0 (``bootstrap=0``: no intervals).

    A recourse rate is a binomial share, and most are near 1. A percentile bootstrap of a share
    resamples only the outcomes seen: every row with recourse gave [1, 1], a certainty no sample
    gives, and at a true rate of 0.95 its 95% interval held the rate in 41% of samples of 10 rows
    and 76% of 30 (0.99: 10% and 25%); Wilson's held it in 92% and 93% (90% and 97%), as Brown,
    Cai and DasGupta (2001) recommend it for. It needs no draws, so it is the same whatever the
    seed."""
    n = int(hits.size)
    if draws <= 0 or n == 0:
        return (None, None)
    z = NormalDist().inv_cdf((1.0 + confidence) / 2.0)
    share = float(hits.mean())
    spread = z * z / n
    centre = (share + spread / 2.0) / (1.0 + spread)
    half = z / (1.0 + spread) * math.sqrt(share * (1.0 - share) / n + spread / (4.0 * n))
    # every row one way: that end is the share itself, not a rounding of it
    low = 0.0 if share == 0.0 else max(0.0, centre - half)
    high = 1.0 if share == 1.0 else min(1.0, centre + half)
    return (low, high)


def group_labels(column: pd.Series) -> pd.Series:
    """A group column's values as the text keys of the report (``5`` for 5.0, ``missing`` for a gap)."""

    def text(value: Any) -> str:
        if value is None or value is pd.NA or (isinstance(value, float | np.floating) and math.isnan(value)):
            return MISSING_GROUP
        if isinstance(value, bool | np.bool_):
            return str(bool(value))
        if isinstance(value, float | np.floating) and float(value).is_integer():
            return str(int(value))
        return str(value)

    return column.astype(object).map(text).astype(str)


def _figure(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def _statuses(rows: pd.DataFrame) -> npt.NDArray[np.object_]:
    return np.asarray(rows[STATUS].astype(str).to_numpy(), dtype=object)


def costs(rows: pd.DataFrame) -> FloatArray:
    """Each row's answer's distance (NaN for rows without recourse)."""
    cost = pd.to_numeric(rows["distance"], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    return np.where(_statuses(rows) == "with_recourse", cost, np.nan)


def in_id_order(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` in the order of their ``row_id`` (as text), the order every figure draws from: a
    bootstrap draws rows by position, so the same rows in another order gave other intervals for
    one seed (and a mean summed in another order another last bit). Rows without ids as they are."""
    if "row_id" not in rows.columns:
        return rows
    ids = np.array([id_text(r) for r in rows["row_id"]], dtype=object)
    return rows.iloc[np.argsort(ids, kind="stable")]


def figures_of(
    rows: pd.DataFrame, rng_of: Callable[[str], np.random.Generator], draws: int, confidence: float
) -> GroupFigures:
    """The figures of ``rows`` (one group value's, or all of them); ``rng_of(name)`` is the
    generator of the figure ``name``."""
    rows = in_id_order(rows)
    status = _statuses(rows)
    count = {name: int((status == name).sum()) for name in (*NO_RECOURSE, "with_recourse", "already_met")}
    n = len(rows) - count["already_met"]
    found = (status == "with_recourse").astype(np.float64)[status != "already_met"]
    cost = costs(rows)[status == "with_recourse"]
    changed = pd.to_numeric(rows["changed"], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    changed = changed[status == "with_recourse"]
    return GroupFigures(
        n=n,
        with_recourse=count["with_recourse"],
        no_recourse_proven=count["no_recourse_proven"],
        no_recourse_unproven=count["no_recourse_unproven"],
        errors=count["error"],
        already_met=count["already_met"],
        recourse_rate=count["with_recourse"] / n if n else None,
        recourse_rate_ci=share_interval(found, draws, confidence),
        cost_mean=_figure(float(cost.mean())) if cost.size else None,
        cost_mean_ci=mean_interval(cost, rng_of("cost_mean"), draws, confidence),
        cost_median=_figure(float(np.median(cost))) if cost.size else None,
        changed_mean=_figure(float(changed.mean())) if changed.size else None,
        changed_median=_figure(float(np.median(changed))) if changed.size else None,
    )


def group_figures(
    rows: pd.DataFrame, groups: Sequence[str], seed: int, draws: int, confidence: float
) -> dict[str, dict[str, GroupFigures]]:
    """``{column: {value: figures}}`` for every group column, values in sorted order."""
    rows = in_id_order(rows)
    out: dict[str, dict[str, GroupFigures]] = {}
    for column in groups:
        labels = group_labels(rows[column])
        out[column] = {}
        for value in sorted(labels.unique()):
            part = rows[(labels == value).to_numpy()]
            out[column][value] = figures_of(part, rngs(seed, column, value), draws, confidence)
    return out


def burden(
    rows: pd.DataFrame, groups: Sequence[str], seed: int, draws: int, confidence: float
) -> dict[str, GroupBurden]:
    """The burden of every value of every group column (defined in
    :class:`~counterplan.solver.audit.report.AuditReport`): the ratio of each value's mean cost to
    the lowest mean cost of a value of the column, and of each value's share without recourse to
    the lowest such share; each ratio's interval resamples both values' rows on their own, with the
    reference value held fixed (the one of the full data)."""
    rows = in_id_order(rows)
    status = _statuses(rows)
    cost = costs(rows)
    needs = status != "already_met"
    lacking = np.isin(status, NO_RECOURSE).astype(np.float64)
    out: dict[str, GroupBurden] = {}
    for column in groups:
        labels = group_labels(rows[column]).to_numpy()
        values = sorted(set(labels.tolist()))
        cost_of = {v: cost[(labels == v) & (status == "with_recourse")] for v in values}
        lack_of = {v: lacking[(labels == v) & needs] for v in values}
        cost_ref = _reference({v: float(c.mean()) for v, c in cost_of.items() if c.size})
        lack_ref = _reference({v: float(s.mean()) for v, s in lack_of.items() if s.size})
        figures: dict[str, BurdenFigures] = {}
        for v in values:
            cost_ratio, cost_ci = _ratio_figures(
                cost_of[v], cost_of.get(cost_ref or ""), figure_rng(seed, column, v, "cost_ratio"), draws, confidence
            )
            lack_ratio, lack_ci = _ratio_figures(
                lack_of[v],
                lack_of.get(lack_ref or ""),
                figure_rng(seed, column, v, "no_recourse_ratio"),
                draws,
                confidence,
            )
            figures[v] = BurdenFigures(
                cost_ratio=cost_ratio, cost_ratio_ci=cost_ci, no_recourse_ratio=lack_ratio, no_recourse_ratio_ci=lack_ci
            )
        out[column] = GroupBurden(cost_reference=cost_ref, no_recourse_reference=lack_ref, values=figures)
    return out


def _reference(means: dict[str, float]) -> str | None:
    """The best-off value: the lowest mean (ties: the first value in sorted order)."""
    if not means:
        return None
    return min(sorted(means), key=lambda v: means[v])


def _ratio_figures(
    own: FloatArray, base: FloatArray | None, rng: np.random.Generator, draws: int, confidence: float
) -> tuple[float | None, Interval]:
    """A value's mean over the reference's (``base``) mean, and its bootstrap interval (None when
    either is empty or the reference's mean is 0)."""
    if base is None or not own.size or not base.size:
        return None, (None, None)
    denominator = float(base.mean())
    if denominator <= 0.0:
        return None, (None, None)
    ratio = float(own.mean()) / denominator
    return _figure(ratio), bootstrap_interval([own, base], _ratio, rng, draws, confidence)


def feature_figures(rows: pd.DataFrame, originals: pd.DataFrame, groups: Sequence[str]) -> dict[str, FeatureFigures]:
    """How often the answers change each feature, overall and by group value (share of that
    value's answers); features in the order of the most changed first.

    ``rows`` are the audit's rows (with ``row_id`` and the ``cf_`` columns), ``originals`` the
    audited rows as they were, indexed by row id (the comparison is the batch summary's:
    :func:`counterplan.solver.batch.summary.feature_changes`)."""
    valid = rows[(_statuses(rows) == "with_recourse")]
    overall = feature_changes(valid, originals)
    by_group: dict[str, dict[str, dict[str, float | None]]] = {name: {} for name in overall["feature"]}
    names, flags = changed_flags(valid, originals)  # each answer's changes, counted per group value below
    for column in groups:
        labels = group_labels(valid[column]).to_numpy()
        for columns in by_group.values():
            columns[column] = {}
        for value in sorted(group_labels(rows[column]).unique()):
            mine = labels == value
            n = int(mine.sum())
            counts = flags[mine].sum(axis=0)
            for name, count in zip(names, counts.tolist(), strict=True):
                by_group[name][column][value] = _figure(count / n if n else math.nan)
    return {
        str(row["feature"]): FeatureFigures(
            changed=int(row["changed"]), share=_figure(float(row["share"])), by_group=by_group[row["feature"]]
        )
        for row in overall.to_dict(orient="records")
    }
