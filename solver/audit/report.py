"""What a recourse audit found, as data: the :class:`AuditReport` ``audit.json`` holds.

A credit-risk or fairness team asks about a portfolio, not one applicant: what share of the
selected rows can reach the goal at all (the recourse rate), which rows cannot, with a proof where
the exact engine gives one, at what cost for each value of each group column, how much harder it is
for one group than for the best-off one (the burden), what each group is asked to change, which few
rules would help most rows, and whether the answers survive a refit of the model. Every figure is
plain JSON (NaN becomes ``null``), so the report is read back with ``AuditReport.model_validate_json``
and rendered by :mod:`counterplan.solver.audit.html` without the rows.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer

AuditStatus = Literal["with_recourse", "no_recourse_proven", "no_recourse_unproven", "already_met", "error"]
AUDIT_STATUSES: tuple[AuditStatus, ...] = (
    "with_recourse",
    "no_recourse_proven",
    "no_recourse_unproven",
    "already_met",
    "error",
)
"""A row's audit status (the ``audit_status`` column of ``rows.parquet``): a valid answer checked
through the model; none, and the exact engine proved none exists under the problem's rules; none,
without a proof (search failed, the model cannot be encoded, the proof ran out of time or failed);
the row meets the goal already; the row could not be explained at all."""

Interval = tuple[float | None, float | None]
"""An interval at the audit's level: (low, high); ``(None, None)`` when there is none (no rows, or
``bootstrap=0``)."""


def level_text(confidence: float) -> str:
    """An interval's level as a person reads it (``95%``, ``99.5%``): the HTML page's plots said
    95% whatever the level, and the command's summary rounded 0.995 to a ``99%`` or ``100% CI``."""
    return f"{100 * confidence:.6g}%"


def _plain(value: float | None) -> float | None:
    """NaN and infinities as None: JSON has no such numbers."""
    return None if value is None or not math.isfinite(value) else float(value)


class _Figures(BaseModel):
    """A model whose float fields are written as JSON numbers or null (never NaN)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    @field_serializer("*", when_used="json")
    def _finite(self, value: Any) -> Any:
        if isinstance(value, float):
            return _plain(value)
        if isinstance(value, tuple) and all(isinstance(v, float | None) for v in value):
            return tuple(_plain(v) for v in value)
        return value


class GroupFigures(_Figures):
    """One value of one group column: its rows and what they are offered.

    ``cost`` is an answer's distance (the record's ``distance``, in the problem's distance: MAD-
    or range-scaled L1 by default), over the rows with recourse; ``changed`` its number of changed
    features. The recourse rate's interval is a Wilson score interval, the cost's a bootstrap
    percentile interval (:mod:`counterplan.solver.audit.stats`).
    """

    n: int
    """Rows of this value that need a change (every status but ``already_met``)."""
    with_recourse: int
    no_recourse_proven: int
    no_recourse_unproven: int
    errors: int
    already_met: int
    recourse_rate: float | None
    """``with_recourse / n`` (None when n is 0)."""
    recourse_rate_ci: Interval = (None, None)
    cost_mean: float | None = None
    cost_mean_ci: Interval = (None, None)
    cost_median: float | None = None
    changed_mean: float | None = None
    changed_median: float | None = None


class BurdenFigures(_Figures):
    """One group value's burden against the best-off value of its column (see :class:`AuditReport.burden`)."""

    cost_ratio: float | None
    """This value's mean cost over the best-off value's (1 for the best-off itself)."""
    cost_ratio_ci: Interval = (None, None)
    no_recourse_ratio: float | None
    """This value's share without recourse over the best-off value's (None when that share is 0)."""
    no_recourse_ratio_ci: Interval = (None, None)


class GroupBurden(_Figures):
    """The burden of every value of one group column."""

    cost_reference: str | None
    """The value with the lowest mean cost (None: no value has an answer)."""
    no_recourse_reference: str | None
    """The value with the lowest share without recourse (None: no value has rows)."""
    values: dict[str, BurdenFigures] = {}


class FeatureFigures(_Figures):
    """How often the answers change one feature, overall and by group value."""

    changed: int
    """Answers (rows with recourse) that change it."""
    share: float | None
    """``changed`` over the rows with recourse."""
    by_group: dict[str, dict[str, float | None]] = {}
    """``{column: {value: share of that value's answers that change the feature}}``."""


class Condition(BaseModel):
    """One test of a rule's condition: ``feature op value``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    feature: str
    op: Literal["==", "!=", "<", "<=", ">", ">=", "in"]
    value: Any


class Action(BaseModel):
    """One change a rule asks for: set the feature to ``value``, or add ``value`` to it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    feature: str
    kind: Literal["set", "add"]
    value: Any


class AuditRule(_Figures):
    """A global rule: "for rows with <condition>, apply <action>" (AReS, GLOBE-CE, T-CREx style),
    filled by :mod:`counterplan.solver.audit.rules`."""

    condition: list[Condition]
    action: list[Action]
    coverage: float | None
    """Share of the rows without an already-met goal that the condition covers."""
    validity: float | None
    """Share of the covered rows the action takes to the goal (checked through the model)."""
    cost_mean: float | None
    """Mean distance of the action over the covered rows it makes valid."""
    rows_covered: int

    def condition_text(self) -> str:
        """The condition in words (``every row`` when it has none): what the HTML page and the
        command's summary print."""
        return " and ".join(f"{c.feature} {c.op} {_value_text(c.value)}" for c in self.condition) or "every row"

    def action_text(self) -> str:
        """The action in words."""
        return " and ".join(
            f"change {a.feature} by {a.value:+,.6g}"
            if a.kind == "add"
            else f"set {a.feature} to {_value_text(a.value)}"
            for a in self.action
        )


def _value_text(value: Any) -> str:
    """A rule's value as a person reads it: text quoted, whole numbers without a decimal point."""
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, float) and value.is_integer():
        return f"{int(value):,}"
    return f"{value:,}" if isinstance(value, int | float) and not isinstance(value, bool) else str(value)


class Robustness(_Figures):
    """``retrain=K``: the answers checked again under K models refit on bootstrap samples of the data."""

    k: int
    answers: int
    """Answers checked (the rows with recourse)."""
    shares: list[float] = []
    """Per refit, the share of the answers that still meet the goal."""
    mean: float | None = None
    minimum: float | None = None


class AuditSettings(BaseModel):
    """What the audit ran with."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    engine: str | None
    """The bulk engine (None: the explainer's configuration)."""
    proof_engine: str = "exact"
    seed: int
    goal: str
    """The goal every row is asked, in words."""
    rows: str
    """The selection, in words (``rejected``, ``all``, ``0:300``, ``300 rows given``)."""
    groups: list[str]
    bootstrap: int
    retrain: int
    prove: bool
    screen: bool = False
    """Each row was put to the exact engine for feasibility before its search (``AuditOptions.screen``)."""
    workers: int
    ray: str | None = None
    started: str
    """When the audit started (UTC, ISO 8601)."""
    version: str = ""


class AuditTiming(_Figures):
    """Where the audit's time went (wall seconds; rows/s over the bulk search's rows)."""

    seconds: float
    search_seconds: float
    prove_seconds: float
    statistics_seconds: float
    retrain_seconds: float = 0.0
    rules_seconds: float = 0.0
    rows_searched: int
    """Rows the bulk engine explained in this run (a resumed audit's earlier rows not counted)."""
    rows_proved: int
    """Rows the exact engine was asked about in this run, after their search."""
    rows_per_second: float | None
    screen_seconds: float = 0.0
    """The screen (not in ``search_seconds``)."""
    rows_screened: int = 0
    """Rows the exact engine was asked about before their search in this run; the ones it proved
    infeasible were not searched (``AuditOptions.screen``)."""


class AuditReport(_Figures):
    """The result of :func:`counterplan.solver.audit.audit`, written as ``audit.json``.

    Row ids are the rows' index labels (positions for a CSV or Parquet file read by the command line).

    ``recourse_rate`` is ``len(with_recourse) / (n_rows - len(already_met))``: the share of the rows
    that need a change for which a valid answer was found and checked through the model. Rows
    without one are split: ``no_recourse_proven`` when the exact engine proved, under the same
    problem (domains, immutables, rules, goal), that no answer exists; ``no_recourse_unproven``
    otherwise, with the reason in ``unproven_reasons``. ``errors`` (rows that could not be
    explained) count in the denominator: an unknown row is not a row with recourse.

    ``burden`` (after the "burden" of Sharma et al., CERTIFAI, 2020, and the group cost of
    recourse of Ustun et al., 2019): for each group column, the value with the lowest mean cost
    among its rows with recourse is the reference, and each value's ``cost_ratio`` is its mean cost
    over the reference's; likewise ``no_recourse_ratio`` is the value's share of rows without
    recourse (proven or not, errors included) over the lowest such share. A ratio of 1.5 means
    that value's members are asked for half as much change again as the best-off value's (or go
    without recourse half as often again). Intervals are percentile bootstrap intervals with the
    rows resampled within each value, the reference held fixed.
    """

    recourse_rate: float | None
    recourse_rate_ci: Interval = (None, None)
    n_rows: int
    """Rows selected and audited (with ``rows="rejected"``, the rows that miss the goal)."""
    skipped_already_met: int = 0
    """Rows ``rows="rejected"`` left out before any search because they meet the goal already."""
    with_recourse: list[Any]
    no_recourse_proven: list[Any]
    no_recourse_unproven: list[Any]
    unproven_reasons: dict[str, int] = {}
    """Why the unproven rows have no proof, counted (``not encodable``, ``time limit``, ...)."""
    already_met: list[Any]
    errors: list[Any]
    cost_mean: float | None = None
    cost_mean_ci: Interval = (None, None)
    cost_median: float | None = None
    changed_mean: float | None = None
    groups: dict[str, dict[str, GroupFigures]] = {}
    burden: dict[str, GroupBurden] = {}
    features: dict[str, FeatureFigures] = {}
    rules: list[AuditRule] = []
    robustness: Robustness | None = None
    settings: AuditSettings
    timing: AuditTiming
    confidence: float = Field(default=0.95, gt=0.0, lt=1.0)
    """The level of every interval."""
    partial: bool = False
    """The audit was stopped (``AuditOptions.stop``: a server's deadline, cancel or shutdown)
    before every row was searched and proved: the figures are over the rows done (``n_rows``),
    and a row left without an answer before its proof is unproven ("stopped before its proof")."""

    def already_met_text(self) -> str:
        """The rows that meet the goal already, in words: the audited ones and those ``rejected``
        left out before the search (the page said 0 where the command's summary said 16)."""
        met = len(self.already_met) + self.skipped_already_met
        skipped = self.skipped_already_met
        return f"{met:,}" + (f" ({skipped:,} left out before the search)" if skipped else "")

    def to_json(self, indent: int | None = 2) -> str:
        """The report as JSON text (what ``audit.json`` holds)."""
        return self.model_dump_json(indent=indent)
