"""Audits on the wire: an ``AuditRequest`` checked into the rows and options of
:func:`counterplan.solver.audit.runner.run_audit`, and an :class:`AuditReport` into an ``AuditResult``.

The question every row is asked travels as an ``ExplainRequest`` (``problem``) and is checked by
the same code as Explain's (:func:`counterplan.server.grpc.convert.check_request`, on the first
row), so an override, a goal or a solver field means on an audit what it means on Explain and a
bad one is named the same way, under ``problem.``. Every size is bounded here, before any work
starts: the rows (and each row id), the group columns and their distinct values, the bootstrap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from counterplan.planning.errors import InvalidInputError, echo
from counterplan.planning.spec import ProblemSpec
from counterplan.server._generated.counterplan.v1 import counterplan_pb2 as pb
from counterplan.server.grpc.convert import (
    BadRequestError,
    CheckedRequest,
    Violation,
    check_request,
    check_request_id,
    instance_values,
    value_message,
)
from counterplan.server.grpc.settings import ServerSettings
from counterplan.server.registry.registry import RegisteredModel
from counterplan.solver.audit.report import AuditReport
from counterplan.solver.batch.rows import RowSelection, id_text
from counterplan.solver.core.budget import BASE_BYTES, estimate_bytes, one_hot_width
from counterplan.solver.core.config import MAX_SEED, SolverConfig
from counterplan.solver.explainer import Explainer

MAX_AUDIT_ROW_ID_CHARS = 64
"""A row id is echoed twice in the final message (a typed list and the report's JSON): with
``max_audit_rows`` of them, longer ids would not fit in a message."""
DEFAULT_BOOTSTRAP = 1000
"""The bootstrap when the request sets none (the command line's default), capped by the server's."""
WINDOW_ROWS = 64
"""Rows the bulk engine solves at once in one process (its default window): what the memory
estimate counts."""
ROW_BYTES = 64
"""Memory of one cell of the audit's rows, records and figures, a generous mean."""


@dataclass(frozen=True)
class CheckedAudit:
    """An audit request turned into what :func:`run_audit` takes, every field checked."""

    model: RegisteredModel
    rows: pd.DataFrame | str
    """The inline rows (index: the caller's row ids) or a selection of the card's training data."""
    n_rows: int
    groups: tuple[str, ...]
    spec: ProblemSpec
    """The request's question, laid over the card's own by the explainer."""
    config: SolverConfig
    engine: str | None
    seed: int
    prove: bool
    prove_seconds: float | None
    bootstrap: int
    confidence: float
    estimate: int
    """The audit's peak memory, estimated: a window of row solves plus the rows' tables."""

    def explainer(self, config: SolverConfig) -> Explainer:
        """The card's explainer asking the request's question, solving with ``config``."""
        base = self.model.ready_explainer
        source: dict[str, Any] = {"data": base.data} if base.data is not None else {"profile": base.source}
        return Explainer(
            base.adapter,
            spec=self.spec.over(base.spec),
            target=base.target,
            columns=base.columns,
            config=config,
            check=False,
            **source,
        )


def check_audit_request(request: pb.AuditRequest, model: RegisteredModel, settings: ServerSettings) -> CheckedAudit:
    """Check every field of ``request`` against ``model`` and the server's limits; raise
    :class:`BadRequestError` naming each bad one."""
    out: list[Violation] = []
    check_request_id(request.request_id, out)
    if request.retrain:
        out.append(
            (
                "retrain",
                "must be 0: a server does not refit models (each refit holds a core with no stop between its "
                "steps); run counterplan audit --retrain K instead",
            )
        )
    seed = request.seed if request.HasField("seed") else 0
    if not 0 <= seed <= MAX_SEED:
        out.append(("seed", f"must be from 0 to {MAX_SEED}, given {seed}"))
    bootstrap = (
        request.bootstrap if request.HasField("bootstrap") else min(DEFAULT_BOOTSTRAP, settings.max_audit_bootstrap)
    )
    if not 0 <= bootstrap <= settings.max_audit_bootstrap:
        out.append(
            (
                "bootstrap",
                f"must be from 0 to {settings.max_audit_bootstrap:,} (max_audit_bootstrap), given {bootstrap:,}",
            )
        )
    confidence = request.confidence if request.HasField("confidence") else 0.95
    if not (math.isfinite(confidence) and 0.0 < confidence < 1.0):
        out.append(("confidence", f"must be between 0 and 1, given {confidence!r}"))
    prove_seconds = request.prove_seconds if request.HasField("prove_seconds") else None
    if prove_seconds is not None and not (math.isfinite(prove_seconds) and prove_seconds > 0):
        out.append(("prove_seconds", f"must be above 0, given {prove_seconds!r}"))
    groups = _groups(request, settings, out)
    _check_problem_fields(request, out)
    which = request.WhichOneof("rows")
    if which == "inline":
        rows: pd.DataFrame | str | None = _inline_rows(request, model, groups, settings, out)
        first = _first_inline(request, model) if len(request.inline.rows) <= settings.max_audit_rows else None
        rows_field = "inline.rows[0].values"
    else:
        rows, first = _selected(request, model, groups, settings, out)
        rows_field = "selection"
    checked = (
        _question(request, model, first, rows_field=rows_field, settings=settings, out=out)
        if first is not None
        else None
    )
    if out or rows is None or checked is None:
        raise BadRequestError(out or [("inline.rows", "no rows to audit")])
    frame_rows = len(rows) if isinstance(rows, pd.DataFrame) else _selection_size(rows, model)
    return CheckedAudit(
        model=model,
        rows=rows,
        n_rows=frame_rows,
        groups=groups,
        spec=checked.spec,
        config=checked.config,
        engine=checked.engine,
        seed=seed,
        prove=request.prove if request.HasField("prove") else True,
        prove_seconds=prove_seconds,
        bootstrap=bootstrap,
        confidence=confidence,
        estimate=_estimate(checked, frame_rows, len(groups)),
    )


def _groups(request: pb.AuditRequest, settings: ServerSettings, out: list[Violation]) -> tuple[str, ...]:
    most = settings.max_audit_groups
    if len(request.groups) > most:
        out.append(("groups", f"at most {most} group columns (max_audit_groups), given {len(request.groups):,}"))
        return ()
    seen: set[str] = set()
    for i, name in enumerate(request.groups):
        if not name or len(name) > MAX_AUDIT_ROW_ID_CHARS * 4:
            out.append((f"groups[{i}]", "give a column name of 1 to 256 characters"))
        elif name in seen:
            out.append((f"groups[{i}]", f"{echo(name)} is named twice"))
        seen.add(name)
    return tuple(request.groups)


def _check_problem_fields(request: pb.AuditRequest, out: list[Violation]) -> None:
    """The fields of ``problem`` an audit says itself must be unset."""
    problem = request.problem
    if problem.model_id and problem.model_id != request.model_id:
        out.append(("problem.model_id", "leave unset: the audit's model_id names the model"))
    if problem.instance:
        out.append(("problem.instance", "leave unset: the rows are the audit's (inline or selection)"))
    if problem.request_id:
        out.append(("problem.request_id", "leave unset: the audit's request_id tags the call"))
    if problem.solver.HasField("seed"):
        out.append(("problem.solver.seed", "leave unset: the audit's seed gives each row's"))
    if problem.num_counterfactuals > 1:
        out.append(("problem.num_counterfactuals", "an audit asks one answer per row: leave unset"))


def _inline_rows(
    request: pb.AuditRequest,
    model: RegisteredModel,
    groups: tuple[str, ...],
    settings: ServerSettings,
    out: list[Violation],
) -> pd.DataFrame | None:
    """The inline rows as a DataFrame indexed by their ids, each value typed by the model."""
    rows = request.inline.rows
    if not rows:
        out.append(("inline.rows", "no rows to audit"))
        return None
    if len(rows) > settings.max_audit_rows:
        out.append(
            (
                "inline.rows",
                f"at most {settings.max_audit_rows:,} rows (max_audit_rows), given {len(rows):,}: split the audit",
            )
        )
        return None
    features = {f.name for f in model.features}
    extra = [g for g in groups if g not in features]
    ids: list[str] = []
    values: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, row in enumerate(rows):
        field = f"inline.rows[{i}]"
        if not row.row_id or len(row.row_id) > MAX_AUDIT_ROW_ID_CHARS:
            out.append((f"{field}.row_id", f"give 1 to {MAX_AUDIT_ROW_ID_CHARS} characters, given {len(row.row_id)}"))
        elif row.row_id in seen:
            out.append((f"{field}.row_id", f"{echo(row.row_id)} is given twice: row ids must be unique"))
        seen.add(row.row_id)
        for name in extra:
            if name not in row.values:
                out.append((f"{field}.values[{name}]", "missing: every row needs a value of each group column"))
        values.append(instance_values(row.values, model, f"{field}.values", out, extra=extra))
        ids.append(row.row_id)
        if len(out) > 100:  # named enough: the rest are not read
            return None
    if out:
        return None
    frame = pd.DataFrame.from_records(values, index=pd.Index(ids, dtype=object))
    _check_group_values(frame, groups, settings, out)
    return frame


def _first_inline(request: pb.AuditRequest, model: RegisteredModel) -> dict[str, pb.FeatureValue] | None:
    rows = request.inline.rows
    if not rows:
        return None
    features = {f.name for f in model.features}
    return {k: v for k, v in rows[0].values.items() if k in features}


def _selected(
    request: pb.AuditRequest,
    model: RegisteredModel,
    groups: tuple[str, ...],
    settings: ServerSettings,
    out: list[Violation],
) -> tuple[str | None, dict[str, pb.FeatureValue] | None]:
    """A selection of the card's training data (checked, bounded) and its first row's values."""
    text = request.selection.strip() or "rejected"
    data = model.ready_explainer.data
    if data is None:
        out.append(
            ("selection", f"model {echo(model.id)} has no training data to select rows from: send the rows inline")
        )
        return None, None
    try:
        selection = RowSelection.parse(text, len(data))
    except InvalidInputError as exc:
        out.append(("selection", exc.problem))
        return None, None
    frame = selection.apply(data)
    if len(frame) > settings.max_audit_rows:
        out.append(
            (
                "selection",
                f"selects {len(frame):,} rows; at most {settings.max_audit_rows:,} (max_audit_rows): give START:STOP",
            )
        )
        return None, None
    if frame.empty:
        out.append(("selection", "selects no rows"))
        return None, None
    for i, name in enumerate(groups):
        if name not in data.columns:
            out.append((f"groups[{i}]", f"no column {echo(name)} in the model's training data"))
    if not out:
        _check_group_values(frame, groups, settings, out)
    columns = [f.name for f in model.features]
    first = {name: value_message(_plain(frame.iloc[0][name])) for name in columns if name in frame.columns}
    return text, first


def _selection_size(text: str, model: RegisteredModel) -> int:
    data = model.ready_explainer.data
    assert data is not None
    return len(RowSelection.parse(text, len(data)).apply(data))


def _plain(value: Any) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return value.item() if hasattr(value, "item") else value


def _check_group_values(
    frame: pd.DataFrame, groups: tuple[str, ...], settings: ServerSettings, out: list[Violation]
) -> None:
    most = settings.max_audit_group_values
    for i, name in enumerate(groups):
        if name not in frame.columns:
            continue
        count = frame[name].nunique(dropna=False)
        if count > most:
            out.append(
                (
                    f"groups[{i}]",
                    f"column {echo(name)} has {count:,} distinct values among the rows; "
                    f"at most {most:,} (max_audit_group_values)",
                )
            )


def _question(
    request: pb.AuditRequest,
    model: RegisteredModel,
    first: dict[str, pb.FeatureValue],
    *,
    rows_field: str,
    settings: ServerSettings,
    out: list[Violation],
) -> CheckedRequest | None:
    """The request's question, checked as Explain checks it, on the first row."""
    explain = pb.ExplainRequest()
    explain.CopyFrom(request.problem)
    explain.model_id = model.id
    explain.ClearField("instance")
    explain.ClearField("num_counterfactuals")
    explain.request_id = ""
    explain.solver.ClearField("seed")
    for name, value in first.items():
        explain.instance[name].CopyFrom(value)
    try:
        return check_request(explain, model, settings.max_features)
    except BadRequestError as exc:
        named = {field for field, _ in out}
        for wire, problem in exc.violations:
            where = wire
            if wire.startswith("instance"):
                where = rows_field + wire.removeprefix("instance")
            elif wire != "request":
                where = "problem." + wire
            if where not in named:
                out.append((where, problem))
        return None


def _estimate(checked: CheckedRequest, n_rows: int, n_groups: int) -> int:
    """One solve's estimate, its steps' memory once more for every other row of a window (the
    window's rows share the process and its fixed overhead), and the rows' tables."""
    features = checked.features
    one = estimate_bytes(
        checked.config, len(features), sum(f.mutable for f in features), one_hot=one_hot_width(features)
    )
    window = min(WINDOW_ROWS, n_rows)
    return one + max(one - BASE_BYTES, 0) * (window - 1) + ROW_BYTES * n_rows * (2 * len(features) + n_groups + 16)


def result_message(report: AuditReport, request_id: str, model_id: str) -> pb.AuditResult:
    """The report as an ``AuditResult``: the headline figures typed, the whole report as JSON."""
    result = pb.AuditResult(
        request_id=request_id,
        model_id=model_id,
        n_rows=report.n_rows,
        skipped_already_met=report.skipped_already_met,
        with_recourse=[id_text(i) for i in report.with_recourse],
        no_recourse_proven=[id_text(i) for i in report.no_recourse_proven],
        no_recourse_unproven=[id_text(i) for i in report.no_recourse_unproven],
        already_met=[id_text(i) for i in report.already_met],
        errors=[id_text(i) for i in report.errors],
        partial=report.partial,
        report_json=report.to_json(indent=None),
        time_spent_seconds=report.timing.seconds,
    )
    _set(result, "recourse_rate", report.recourse_rate)
    _set(result, "cost_mean", report.cost_mean)
    _set(result, "cost_median", report.cost_median)
    for column, values in report.groups.items():
        burden = report.burden.get(column)
        for value, figures in values.items():
            message = pb.AuditGroupValue(
                column=column,
                value=value,
                n=figures.n,
                with_recourse=figures.with_recourse,
                no_recourse_proven=figures.no_recourse_proven,
                no_recourse_unproven=figures.no_recourse_unproven,
            )
            _set(message, "recourse_rate", figures.recourse_rate)
            _set(message, "cost_mean", figures.cost_mean)
            _set(message, "cost_median", figures.cost_median)
            ratios = burden.values.get(value) if burden is not None else None
            if ratios is not None:
                _set(message, "cost_ratio", ratios.cost_ratio)
                _set(message, "no_recourse_ratio", ratios.no_recourse_ratio)
            result.groups.append(message)
    return result


def _set(message: Any, field: str, value: float | None) -> None:
    """Set an optional double when the figure exists (None and NaN leave it unset)."""
    if value is not None and math.isfinite(value):
        setattr(message, field, float(value))
