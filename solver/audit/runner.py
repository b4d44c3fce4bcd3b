"""A recourse audit: the bulk engine over many rows, a proof for the rows left without an answer,
and the figures by group (:func:`audit`).

The audit adds no search loop of its own. The rows go to :meth:`Explainer.explain_batch
<counterplan.solver.explainer.Explainer.explain_batch>` (blocks, workers or Ray, one record per
row, resumable through the batch writer when ``out`` is given). A row whose search found no valid
answer is then put to the exact engine (:mod:`counterplan.solver.exact`), under the same problem
(the row's own problem, with its domains, immutables, rules, trust region and goal): only a proven
"infeasible" makes the row ``no_recourse_proven``; a valid answer found there makes it a row with
recourse after all; anything else (the model cannot be encoded, the proof ran out of time, the
engine failed) leaves it ``no_recourse_unproven`` with the reason
(:mod:`counterplan.solver.audit.proofs`, on the worker processes too). So a row is never called
proven because a search failed. Before the search, each row can be screened
(:attr:`AuditOptions.screen`, by default when the proofs are on and the model can be encoded):
put to the exact engine for its feasibility alone, a row proven infeasible there is not searched
(the search would spend its whole budget on it and find nothing), and every other row goes on as
without the screen. The figures are then computed from the rows
(:mod:`counterplan.solver.audit.stats`), and with ``retrain=K`` the answers are checked again
under K refits of the model on bootstrap samples of the training data
(:mod:`counterplan.solver.audit.robustness`).
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import importlib.util
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import structlog

from counterplan.planning.errors import InvalidInputError, ProblemError, echo
from counterplan.solver.audit.html import write_report
from counterplan.solver.audit.proofs import (
    SCREEN,
    Proof,
    ProofStoppedError,
    append_proof,
    exact_backend,
    plain,
    proof_config,
    prove_rows,
    read_proofs,
    screen_config,
)
from counterplan.solver.audit.report import AuditReport, AuditSettings, AuditTiming, Robustness
from counterplan.solver.audit.robustness import retrain_shares
from counterplan.solver.audit.rules import global_rules
from counterplan.solver.audit.stats import (
    STATUS,
    burden,
    feature_figures,
    figure_rng,
    figures_of,
    group_figures,
    group_labels,
)
from counterplan.solver.batch.records import (
    PROPOSED_PREFIX,
    RECORD_COLUMNS,
    batch_question,
    breaks_a_rule,
    records_frame,
)
from counterplan.solver.batch.rows import RowSelection, id_text, meeting_the_goal, model_rows, probe_row, row_seed
from counterplan.solver.batch.run import check_forked_threads
from counterplan.solver.batch.writer import (
    check_same_job,
    check_writable_directory,
    exists,
    no_records,
    open_records,
    read_existing,
    record_dtypes,
)
from counterplan.solver.core.config import check_seed
from counterplan.solver.engines import EngineChoice, not_encodable
from counterplan.solver.explainer import Explainer

_log = structlog.get_logger(__name__)

Progress = Callable[[str, int, int], None]
"""Told ``(stage, done, total)`` as the audit goes: stage ``screen`` (the rows put to the exact
engine before their search, :attr:`AuditOptions.screen`), ``search`` (the bulk engine's rows),
then ``prove`` (the rows put to the exact engine)."""
Rows = pd.DataFrame | RowSelection | str | slice | Sequence[int] | None
Stop = Callable[[], bool]
"""Asked between rows (after each bulk record, after each proof) and, in this process (one
worker, no Ray), before every model call of a block of rows searched together and every
:data:`~counterplan.solver.batch.block.STOP_POLL_SECONDS` while rows of the threads path or a
proof run (which it stops at their next step; a proof cut short keeps no verdict): True stops
the audit, which then reports the rows done so far, marked ``partial`` (a server's deadline,
cancel or shutdown). A block's rows share their time limits (each row has its own), so a block may run
longer than one row's limit: a deadline for the whole audit is this check."""
Outcome = Callable[[str, str], None]
"""Told ``(stage, outcome)`` as each row is done: a search record's status (``ok``,
``not_found``, ...) in stage ``search``, a proof's outcome (``proven``, ``found``, ``unproven``)
in stage ``prove``, a screen's (``proven``, ``feasible``, ``unproven``) in stage ``screen``: what
a caller tallies for a running count of rows with recourse."""
SCREEN_PROBE = 32
"""The default screen (``AuditOptions.screen=None``) stops when this many rows screened hold no
row proven without recourse: a portfolio with recourse nearly everywhere is searched as without
the screen, at the cost of these few checks."""
STOPPED_REASON = "stopped before its proof"
"""Why a row has no proof when the audit was stopped before its turn."""

AUDIT_FILE = "audit.json"
ROWS_FILE = "rows.parquet"
ROWS_CSV = "rows.csv"
"""The audit's rows when pyarrow is missing."""
REPORT_FILE = "report.html"
RECORDS_STEM = "records"
"""The bulk engine's records in ``out`` (``records.parquet`` or ``.csv``), kept for ``resume``."""
PROOFS_FILE = "proofs.jsonl"
"""One line per row put to the exact engine, appended as each is done, kept for ``resume``."""
MAX_BOOTSTRAP = 100_000
MAX_RETRAIN = 1_000
MAX_RULES = 50
MAX_GROUP_VALUES = 1_000
"""Distinct values of one group column, and of all the group columns together, among the audited
rows at most: the report has figures, bootstrap intervals and burden ratios per value (an id
column as a group, 4,000 values, took minutes and an 11 MB report of one-row groups; three
columns of 1,000 values each, an 18 MB page drawn in a minute). A gRPC server's own limits are
lower (``max_audit_groups``, ``max_audit_group_values``)."""
REASON_COLUMN = "audit_reason"
"""The column of the audit's rows that says why a row without recourse has no proof."""


@dataclass(frozen=True)
class AuditOptions:
    """How an audit runs, checked once (:meth:`checked`); the parameters of :func:`audit`."""

    groups: tuple[str, ...] = ()
    seed: int = 0
    engine: EngineChoice | None = None
    workers: int = 1
    ray: str | None = None
    prove: bool = True
    prove_seconds: float | None = None
    bootstrap: int = 1000
    confidence: float = 0.95
    retrain: int = 0
    resume: bool = True
    window: int | None = None
    vectorised: bool | None = None
    progress: Progress | None = None
    rules: int = 5
    """At most this many global rules (:mod:`counterplan.solver.audit.rules`; 0: none)."""
    rule_validity: float = 0.8
    """A rule's least share of covered rows its action must bring to the goal."""
    stop: Stop | None = None
    on_outcome: Outcome | None = None
    screen: bool | None = None
    """Put each row to the exact engine for feasibility before its search
    (:func:`~counterplan.solver.audit.proofs.screen_config`): a row proven infeasible there is
    ``no_recourse_proven`` without a search (where the search would spend its whole budget to
    find nothing); every other row is searched and proved as without the screen, so the row sets
    and the answers are the same. None (auto): on when ``prove`` is and the exact engine can
    encode the model (the first row's problem), and stopped after the first :data:`SCREEN_PROBE`
    rows screened when none of them is proven; True screens every row and refuses a model the
    exact engine cannot encode."""

    def checked(self) -> AuditOptions:
        """The options, each refused naming its field when out of range."""
        seed, bootstrap, retrain = self.seed, self.bootstrap, self.retrain
        check_seed(seed)
        if isinstance(bootstrap, bool) or not isinstance(bootstrap, int) or not 0 <= bootstrap <= MAX_BOOTSTRAP:
            raise ProblemError("bootstrap", f"must be from 0 to {MAX_BOOTSTRAP}, given {bootstrap!r}")
        if not 0.0 < self.confidence < 1.0:
            raise ProblemError("confidence", f"must be between 0 and 1, given {self.confidence!r}")
        if isinstance(retrain, bool) or not isinstance(retrain, int) or not 0 <= retrain <= MAX_RETRAIN:
            raise ProblemError("retrain", f"must be from 0 to {MAX_RETRAIN}, given {retrain!r}")
        if isinstance(self.rules, bool) or not isinstance(self.rules, int) or not 0 <= self.rules <= MAX_RULES:
            raise ProblemError("rules", f"must be from 0 to {MAX_RULES}, given {self.rules!r}")
        if not 0.0 < self.rule_validity <= 1.0:
            raise ProblemError("rule_validity", f"must be above 0 and at most 1, given {self.rule_validity!r}")
        if self.prove_seconds is not None and not self.prove_seconds > 0:
            raise ProblemError("prove_seconds", f"must be above 0 (or None: no limit), given {self.prove_seconds!r}")
        groups = (self.groups,) if isinstance(self.groups, str) else tuple(self.groups)
        bad = [g for g in groups if not isinstance(g, str) or not g]
        if bad:
            raise ProblemError("groups", f"give column names, given {bad[0]!r}")
        if len(set(groups)) != len(groups):
            raise ProblemError("groups", "a group column is named twice")
        return dataclasses.replace(self, groups=groups)


def audit(
    explainer: Explainer,
    rows: Rows = "rejected",
    *,
    groups: Iterable[str] = (),
    seed: int = 0,
    engine: EngineChoice | None = None,
    workers: int = 1,
    ray: str | None = None,
    prove: bool = True,
    prove_seconds: float | None = None,
    bootstrap: int = 1000,
    confidence: float = 0.95,
    retrain: int = 0,
    out: str | Path | None = None,
    resume: bool = True,
    progress: Progress | None = None,
    window: int | None = None,
    vectorised: bool | None = None,
    rules: int = 5,
    rule_validity: float = 0.8,
    screen: bool | None = None,
) -> AuditReport:
    """Audit ``explainer``'s model over ``rows``: who can reach the goal, at what cost, by group.

    Parameters
    ----------
    explainer:
        The model, its training data and the problem's settings (every row is asked the same question).
    rows:
        ``"rejected"`` (the default: the rows that miss the goal now), ``"all"``, ``"START:STOP"``,
        a ``slice`` or a list of positions in the explainer's data, or a DataFrame of rows (ids: its
        index labels).
    groups:
        Columns of the rows to break the figures down by (they need not be model features).
    seed:
        The audit's seed: each row's search (:func:`~counterplan.solver.batch.rows.row_seed`), the
        bootstrap and the refits come from it, so the same call gives the same report whatever the
        number of workers.
    engine:
        The bulk engine (default the explainer's); the proof always uses the exact engine.
    workers, ray, window, vectorised:
        As for :meth:`Explainer.explain_batch <counterplan.solver.explainer.Explainer.explain_batch>`.
    prove:
        Put the rows left without an answer to the exact engine (False: they are all unproven).
    prove_seconds:
        A time limit for each proof (None: the exact engine's own; a proof cut short is unproven).
    screen:
        Put each row to the exact engine for feasibility before its search (None: when ``prove``
        is on and the model can be encoded; :attr:`AuditOptions.screen`).
    bootstrap:
        Resamples of each interval (0: no intervals).
    confidence:
        The level of the intervals.
    retrain:
        K > 0: refit a clone of the model on K bootstrap samples of the training data and report the
        share of the answers each refit still accepts (a scikit-learn model with ``target`` set).
    out:
        A directory to write ``audit.json``, ``rows.parquet`` (``rows.csv`` without pyarrow) and,
        when the HTML module is there, ``report.html``; the bulk records and the proofs are kept
        there as they finish, so an interrupted audit continues where it stopped (``resume``).
    resume:
        With ``out``: continue the records and proofs already there (False: refuse a directory
        that holds them).
    progress:
        Called with ``(stage, done, total)`` as rows finish (:data:`Progress`).
    rules, rule_validity:
        At most ``rules`` global rules ("for rows with <condition>, change <feature> by <amount>"),
        each bringing at least ``rule_validity`` of the rows it covers to the goal through the model
        (:func:`~counterplan.solver.audit.rules.global_rules`; ``rules=0``: none).

    Returns
    -------
    AuditReport
        The figures (:class:`~counterplan.solver.audit.report.AuditReport` says what each means).
    """
    options = AuditOptions(
        tuple(groups) if not isinstance(groups, str) else (groups,),
        seed,
        engine,
        workers,
        ray,
        prove,
        prove_seconds,
        bootstrap,
        confidence,
        retrain,
        resume,
        window,
        vectorised,
        progress,
        rules,
        rule_validity,
        screen=screen,
    )
    return run_audit(explainer, rows, options, out)[0]


def run_audit(
    explainer: Explainer, rows: Rows, options: AuditOptions, out: str | Path | None = None
) -> tuple[AuditReport, pd.DataFrame]:
    """:func:`audit`, with the audit's rows: every audited row's record, its ``audit_status``,
    ``audit_reason`` and group values (what ``rows.parquet`` holds)."""
    started = time.perf_counter()
    started_at = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    options = options.checked()
    check_forked_threads(options.workers, explainer.config.model_threads, options.ray)
    if options.engine is not None:
        explainer = copy.copy(explainer)  # the bulk engine for this audit only
        explainer.engine = options.engine
    frame, only_rejected, rows_text = _selected(explainer, rows)
    _check_groups(options.groups, frame)
    folder = _out_folder(out)
    probe = explainer.problem(probe_row(explainer), trust_region=False)  # its features, and the goal asked
    features = [f.name for f in probe.space.features]
    skipped = 0
    if only_rejected:  # one model call: a row that meets the goal costs no search
        met = meeting_the_goal(explainer, frame)
        skipped = int(met.sum())
        frame = frame[~met]
    dtypes = record_dtypes(explainer.data if explainer.data is not None else frame, features)
    screening = _screening(explainer, frame, options)
    known = _earlier_proofs(folder, options, explainer.question)
    records, searched, stopped, screened = _search(
        explainer,
        frame=frame,
        features=features,
        dtypes=dtypes,
        folder=folder,
        options=options,
        proofs=known,
        screening=screening,
    )
    search_done = time.perf_counter()
    proofs, proved, unasked = (
        _prove_all(explainer, frame, records, folder, options, known=known) if not stopped else (_final(known), 0, True)
    )
    stopped = stopped or unasked
    prove_done = time.perf_counter()
    audited = _audit_rows(records, proofs, frame, options, stopped=stopped)
    shares = (
        retrain_shares(explainer, frame=frame, rows=audited, features=features, k=options.retrain, seed=options.seed)
        if options.retrain and not stopped
        else None
    )
    retrain_done = time.perf_counter()
    settings = AuditSettings(
        engine=explainer.engine,
        seed=options.seed,
        goal=probe.goal_text,
        rows=rows_text,
        groups=list(options.groups),
        bootstrap=options.bootstrap,
        retrain=options.retrain,
        prove=options.prove,
        screen=screening,
        workers=options.workers,
        ray=options.ray,
        started=started_at,
        version=_version(),
    )
    report = _report(
        audited, frame=frame, features=features, options=options, skipped=skipped, shares=shares, settings=settings
    )
    statistics_done = time.perf_counter()
    if options.rules and not audited.empty and not stopped:
        found = global_rules(
            explainer,
            frame.loc[audited["row_id"]],
            audited,
            max_rules=options.rules,
            min_validity=options.rule_validity,
            seed=options.seed,
            stop=options.stop,
        )
        stopped = options.stop is not None and options.stop()  # rules measured in part are no rules
        report = report.model_copy(update={"rules": [] if stopped else found})
    rules_done = time.perf_counter()
    search_seconds = search_done - started - screened.seconds
    timing = AuditTiming(
        seconds=rules_done - started,
        search_seconds=search_seconds,
        prove_seconds=prove_done - search_done,
        retrain_seconds=retrain_done - prove_done,
        statistics_seconds=statistics_done - retrain_done,
        rules_seconds=rules_done - statistics_done,
        rows_searched=searched,
        rows_proved=proved,
        rows_per_second=searched / search_seconds if searched and search_seconds > 0 else None,
        screen_seconds=screened.seconds,
        rows_screened=screened.rows,
    )
    report = report.model_copy(update={"timing": timing, "partial": stopped})
    if folder is not None:
        write_outputs(report, audited, folder)
    _log.info(
        "audit.done",
        rows=report.n_rows,
        with_recourse=len(report.with_recourse),
        proven=len(report.no_recourse_proven),
        unproven=len(report.no_recourse_unproven),
        seconds=round(timing.seconds, 3),
    )
    return report, audited


def _check_groups(groups: Sequence[str], frame: pd.DataFrame) -> None:
    """Every group column is in the rows, and none takes the name of an audit row's own column."""
    missing = [g for g in groups if g not in frame.columns]
    if missing:
        raise ProblemError("groups", f"no column {missing[0]!r} in the rows; columns: {_listed(frame.columns)}")
    taken = [g for g in groups if g in (*RECORD_COLUMNS, STATUS, REASON_COLUMN) or g.startswith(PROPOSED_PREFIX)]
    if taken:
        raise ProblemError("groups", f"{taken[0]!r} is the name of a column of the audit's rows: rename it in the data")
    total = 0
    for g in groups:
        count = int(frame[g].nunique(dropna=False))
        if count > MAX_GROUP_VALUES:
            raise ProblemError(
                "groups",
                f"column {echo(g)} has {count:,} distinct values among the rows; at most {MAX_GROUP_VALUES:,} "
                "(figures are per value: bin a numeric column, or group by a coarser one)",
            )
        total += count
        _distinct_labels(g, frame[g])
    if total > MAX_GROUP_VALUES:  # the report has a row, a bar and a box per value of every column
        raise ProblemError(
            "groups",
            f"the group columns have {total:,} distinct values together among the rows; at most "
            f"{MAX_GROUP_VALUES:,} (figures are per value: fewer columns, or coarser ones)",
        )


def _distinct_labels(name: str, column: pd.Series) -> None:
    """Refuse a group column two of whose values the report would key alike
    (:func:`~counterplan.solver.audit.stats.group_labels`): a gap and the text ``missing``, or the
    number 5 and the text ``5``, were counted as one group, their rows' figures merged."""
    values = column.astype(object)
    labels = group_labels(column)
    for label, raw in values.groupby(labels.to_numpy(), dropna=False, sort=True):
        distinct = pd.unique(raw.to_numpy())
        if len(distinct) > 1:
            first, second = (echo(v) for v in distinct[:2])
            raise ProblemError(
                "groups",
                f"column {echo(name)}: the values {first} and {second} would both be reported as "
                f"{echo(str(label))}; make them one value, or two that read differently, in the data",
            )


def _selected(explainer: Explainer, rows: Rows) -> tuple[pd.DataFrame, bool, str]:
    """The rows to audit, whether to keep only the ones that miss the goal, and the selection in words."""
    if isinstance(rows, pd.DataFrame):
        if rows.index.has_duplicates:
            raise ProblemError("rows", "the rows' index has duplicate labels: row ids must be unique")
        if rows.empty:
            raise ProblemError("rows", "no rows to audit")
        return rows, False, f"{len(rows)} rows given"
    if explainer.data is None:
        raise ProblemError("rows", "this explainer has no training data to select rows from: give the rows")
    n = len(explainer.data)
    if isinstance(rows, slice):
        positions = range(n)[rows]
        if not len(positions):
            raise ProblemError("rows", f"the slice {rows} selects none of the data's {n} rows")
        selection = RowSelection.parse(list(positions), n)
        text = f"{positions.start}:{positions.stop}" if positions.step == 1 else f"{len(positions)} positions"
    elif isinstance(rows, RowSelection):
        selection, text = rows, "rejected" if rows.only_rejected else "selection"
    else:
        if not isinstance(rows, str | None) and not isinstance(rows, Sequence):
            raise ProblemError(
                "rows",
                f"give rejected, all, START:STOP, a slice, positions or a DataFrame; given {type(rows).__name__}",
            )
        selection = RowSelection.parse(rows, n)
        text = rows.strip() if isinstance(rows, str) else ("all" if rows is None else f"{len(rows)} positions")
    frame = selection.apply(explainer.data)
    if frame.index.has_duplicates:
        raise ProblemError("rows", "a row is selected twice: row ids must be unique")
    return frame, selection.only_rejected, text


def _listed(columns: Iterable[Any], most: int = 30) -> str:
    names = [str(c) for c in columns]
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def _out_folder(out: str | Path | None) -> Path | None:
    """The output directory, created if its parent exists (refused naming ``out`` otherwise)."""
    if out is None:
        return None
    folder = Path(out)
    if exists("out", folder) and not folder.is_dir():
        raise ProblemError("out", f"{str(folder)!r} exists and is not a directory")
    if not folder.exists():
        check_writable_directory("out", folder)
        folder.mkdir()
    check_writable_directory("out", folder / AUDIT_FILE)
    return folder


def _records_path(folder: Path) -> Path:
    suffix = ".parquet" if importlib.util.find_spec("pyarrow") is not None else ".csv"
    return folder / (RECORDS_STEM + suffix)


def _search(
    explainer: Explainer,
    *,
    frame: pd.DataFrame,
    features: list[str],
    dtypes: dict[str, str],
    folder: Path | None,
    options: AuditOptions,
    proofs: dict[str, Proof],
    screening: bool,
) -> tuple[pd.DataFrame, int, bool, _Screened]:
    """Every row's record (an earlier run's, read back, and this run's), in the order of
    ``frame``, the number of rows this run searched, whether :attr:`AuditOptions.stop` stopped
    the search (the rows not searched then have no record), and the screen's figures. With
    ``screening``, the rows are first screened (:func:`_screen`); a row the screen proved
    infeasible (in this run or an earlier one: ``proofs``) is not searched, its record is the
    screen's."""
    columns = list(dtypes)
    path = _records_path(folder) if folder is not None else None
    progress = options.progress
    existing, todo, screened = _to_search(
        explainer,
        frame,
        _earlier_records(explainer, path, frame, dtypes, options),
        folder=folder,
        options=options,
        proofs=proofs,
        features=features,
        screening=screening,
    )
    total, counted = len(todo), 0
    writer = open_records(path, features, dtypes) if path is not None and total else None  # none: no empty file

    got: list[dict[str, Any]] = []

    def on_record(record: dict[str, Any]) -> None:
        nonlocal counted
        counted += 1
        got.append(record)
        if writer is not None:
            writer.write(record)
        status = str(record["status"])
        _tell(options, "search", "not_found" if breaks_a_rule(status, record["score"]) else status, counted, total)

    if progress is not None:
        progress("search", 0, total)
    new = no_records(columns, dtypes)
    stopped = screened.stopped  # a stopped screen leaves no row to search
    try:
        if total:
            new = explainer.explain_batch(
                todo,
                seed=options.seed,
                workers=options.workers,
                ray=options.ray,
                window=options.window,
                on_record=on_record,
                vectorised=options.vectorised,
                stop=options.stop if options.workers == 1 and options.ray is None else None,
            )
        if writer is not None:
            writer.finish()
    except _StoppedError:  # the rows done so far, as they are
        if writer is not None:
            writer.finish()
        new, stopped = records_frame(got, features), True
    except BaseException:
        if writer is not None:
            writer.stop()
        raise
    parts = [f for f in (existing, new) if len(f)]
    records = pd.concat(parts, ignore_index=True) if parts else new
    return _in_order(records, frame), counted if stopped else total, stopped, screened


def _in_order(records: pd.DataFrame, frame: pd.DataFrame) -> pd.DataFrame:
    """``records`` in the order of ``frame``'s rows."""
    order = {id_text(label): i for i, label in enumerate(frame.index)}
    records = records.iloc[np.argsort([order[id_text(r)] for r in records["row_id"]], kind="stable")]
    return records.reset_index(drop=True)


@dataclass(frozen=True)
class _Screened:
    """What the screen did in this run."""

    rows: int = 0
    seconds: float = 0.0
    stopped: bool = False


def _to_search(
    explainer: Explainer,
    frame: pd.DataFrame,
    existing: pd.DataFrame,
    *,
    folder: Path | None,
    options: AuditOptions,
    proofs: dict[str, Proof],
    features: list[str],
    screening: bool,
) -> tuple[pd.DataFrame, pd.DataFrame, _Screened]:
    """The records there are (``existing``, an earlier run's, and the screen's), the rows left to
    search, and what the screen did. The rows without a record are screened first (with
    ``screening``); a row a screen proved infeasible (in this run or an earlier one) is not
    searched, its record is the screen's. A stopped screen leaves no row to search."""
    done = {id_text(i) for i in existing["row_id"]}
    todo = frame[[id_text(i) not in done for i in frame.index]]
    screened = _screen(explainer, todo, folder, options, proofs) if screening and len(todo) else _Screened()
    keys = [id_text(i) for i in todo.index]
    proven = np.array([k in proofs and proofs[k].stage == SCREEN and proofs[k].final for k in keys], dtype=bool)
    left = todo.iloc[:0] if screened.stopped else todo[~proven]
    if not proven.any():
        return existing, left, screened
    early = records_frame([proofs[k].record or {} for k, p in zip(keys, proven, strict=True) if p], features)
    parts = [f for f in (existing, early) if len(f)]
    return pd.concat(parts, ignore_index=True), left, screened


def _screening(explainer: Explainer, frame: pd.DataFrame, options: AuditOptions) -> bool:
    """Whether to screen the rows (:attr:`AuditOptions.screen`): asked, or by default when the
    proofs are on, the rows are not on Ray (whose workers search; the screen would run here) and
    the exact engine can encode the first row's problem (the data's first row's when that row's
    own values cannot make one: the row gets its error record, as without the screen)."""
    if options.screen and not options.prove:
        raise ProblemError("screen", "the screen proves rows infeasible: it needs prove=True")
    if options.screen is False or not options.prove or frame.empty:
        return False
    if options.screen is None and options.ray is not None:
        return False
    first = {str(k): v for k, v in model_rows(explainer, frame).iloc[probe_row(explainer, frame)].items()}
    try:
        problem = explainer.problem(first)
    except InvalidInputError:  # that row's own bad value (an unseen category): its error record, not the audit's
        problem = explainer.problem(probe_row(explainer))
    why = not_encodable(problem, exact_backend(explainer.config))
    if why is not None and options.screen:
        raise ProblemError("screen", f"the exact engine cannot encode this model: {why}")
    return why is None


def _screen(
    explainer: Explainer, todo: pd.DataFrame, folder: Path | None, options: AuditOptions, proofs: dict[str, Proof]
) -> _Screened:
    """Put the rows of ``todo`` not yet screened or proved (``proofs``) to the exact engine for
    their feasibility (:func:`~counterplan.solver.audit.proofs.screen_config`, on the worker
    processes when ``workers`` > 1); each verdict goes into ``proofs`` and ``proofs.jsonl`` as it
    arrives, and the stop check is asked after each."""
    started = time.perf_counter()
    items = _items(explainer, todo, [i for i in todo.index if id_text(i) not in proofs], options.seed)
    path = folder / PROOFS_FILE if folder is not None else None
    if options.progress is not None:
        options.progress("screen", 0, len(items))
    keep = _Keeper(proofs, path, options, "screen", len(items))
    workers = options.workers if options.ray is None else 1
    config = screen_config(explainer.config, options.prove_seconds)
    # the default probes: when the first SCREEN_PROBE rows screened (in any run) hold no proven
    # one, the rest are not screened (each check would cost more than the search it spares)
    earlier = sum(p.stage == SCREEN for p in proofs.values())
    first = max(0, SCREEN_PROBE - earlier) if options.screen is None else len(items)
    try:
        stop = options.stop
        prove_rows(explainer, items[:first], config, workers=workers, on_proof=keep, stage=SCREEN, stop=stop)
        if first < len(items) and any(p.stage == SCREEN and p.outcome == "proven" for p in proofs.values()):
            prove_rows(explainer, items[first:], config, workers=workers, on_proof=keep, stage=SCREEN, stop=stop)
        elif keep.done < len(items) and options.progress is not None:
            options.progress("screen", keep.done, keep.done)  # the probe found none: the screen ends here
    except (_StoppedError, ProofStoppedError):
        return _Screened(rows=keep.done, seconds=time.perf_counter() - started, stopped=True)
    return _Screened(rows=keep.done, seconds=time.perf_counter() - started)


def _items(explainer: Explainer, frame: pd.DataFrame, ids: Sequence[Any], seed: int) -> list[Any]:
    """The rows ``ids`` of ``frame`` as the exact engine takes them: id, the model's values, the row's seed."""
    labels = {id_text(label): label for label in frame.index}
    readable = model_rows(explainer, frame)
    return [(r, {str(k): v for k, v in readable.loc[labels[id_text(r)]].items()}, row_seed(seed, r)) for r in ids]


class _StoppedError(Exception):
    """Raised from the audit's callbacks when :attr:`AuditOptions.stop` says so."""


class _Keeper:
    """What a stage does with each verdict as it arrives: keep it by row, append it to ``path``
    (so a resumed audit never proves a row twice), count it and tell the caller (:func:`_tell`)."""

    def __init__(
        self, proofs: dict[str, Proof], path: Path | None, options: AuditOptions, stage: str, total: int
    ) -> None:
        self.proofs, self.path, self.options, self.stage, self.total = proofs, path, options, stage, total
        self.done = 0
        """Verdicts kept so far."""

    def __call__(self, proof: Proof) -> None:
        self.done += 1
        self.proofs[id_text(proof.row_id)] = proof
        if self.path is not None:
            append_proof(self.path, proof)
        _tell(self.options, self.stage, proof.outcome, self.done, self.total)


def _tell(options: AuditOptions, stage: str, outcome: str, done: int, total: int) -> None:
    """A row of ``stage`` is done: tell the caller's callbacks, and stop (raise
    :class:`_StoppedError`) when rows are left and the stop check says so."""
    if options.on_outcome is not None:
        options.on_outcome(stage, outcome)
    if options.progress is not None:
        options.progress(stage, done, total)
    if done < total and options.stop is not None and options.stop():
        raise _StoppedError


def _earlier_records(
    explainer: Explainer, path: Path | None, frame: pd.DataFrame, dtypes: dict[str, str], options: AuditOptions
) -> pd.DataFrame:
    """The records an earlier run of the audit kept in ``path``, of the rows of ``frame``; refused
    when they answered another question or another seed's (:func:`check_same_job`): a resumed
    audit's report mixed them without a word."""
    columns = list(dtypes)
    if path is None or not (path.exists() or path.with_name(path.name + ".parts").exists()):
        return no_records(columns, dtypes)
    if not options.resume:
        raise ProblemError("out", f"{str(path.parent)!r} holds an earlier audit's records; resume it or remove them")
    existing = read_existing(path, columns, dtypes)
    question = batch_question(explainer.question, vectorised=options.vectorised is not False)
    check_same_job(existing, seed=options.seed, question=question, path=path, field="out", fresh="another --out")
    wanted = {id_text(i) for i in frame.index}
    return existing[[id_text(i) in wanted for i in existing["row_id"]]]


def _prove_all(
    explainer: Explainer,
    frame: pd.DataFrame,
    records: pd.DataFrame,
    folder: Path | None,
    options: AuditOptions,
    *,
    known: dict[str, Proof],
) -> tuple[dict[str, Proof], int, bool]:
    """The exact engine's word on each row the search left without an answer (status
    ``not_found``, or ``ok`` with an answer that breaks a rule: :func:`breaks_a_rule`), by row
    id text, how many rows this run put to it, and whether
    :attr:`AuditOptions.stop` stopped the proofs before the last. ``known``: the verdicts
    already there (an earlier run's, from ``proofs.jsonl``, and this run's screen); a screen's
    verdict other than ``proven`` does not count as a row's proof."""
    wanted = [
        r
        for r, s, score in zip(records["row_id"], records["status"].astype(str), records["score"], strict=True)
        if s == "not_found" or breaks_a_rule(s, score)
    ]
    progress = options.progress
    if not options.prove:
        return {id_text(r): Proof(r, "skipped", "not asked: prove=False") for r in wanted}, 0, False
    path = folder / PROOFS_FILE if folder is not None else None
    proofs = _final(known)
    todo = [r for r in wanted if id_text(r) not in proofs]
    items = _items(explainer, frame, todo, options.seed)
    if progress is not None:
        progress("prove", 0, len(todo))
    keep = _Keeper(proofs, path, options, "prove", len(todo))
    workers = options.workers if options.ray is None else 1  # on Ray, the proofs run here
    config = proof_config(explainer.config, options.prove_seconds)
    # the stop is asked after each proof, so before the first one here: a proof may take the whole limit
    if todo and options.stop is not None and options.stop():
        return proofs, 0, True
    try:  # in this process, a proof under way is cut by the stop check too: a deadline is a promise
        prove_rows(explainer, items, config, workers=workers, on_proof=keep, stop=options.stop)
    except (_StoppedError, ProofStoppedError):
        return proofs, keep.done, True
    return proofs, len(todo), False


def _earlier_proofs(folder: Path | None, options: AuditOptions, question: str) -> dict[str, Proof]:
    """The verdicts an earlier run wrote to ``proofs.jsonl`` (refused without ``resume``, and when
    one is a verdict on another ``question`` than this audit's: a resume with another goal or
    rules took them as this question's)."""
    path = folder / PROOFS_FILE if folder is not None else None
    if not options.prove or path is None or not path.exists():
        return {}
    if not options.resume:
        raise ProblemError("out", f"{str(folder)!r} holds an earlier audit's proofs; resume it or remove them")
    proofs = read_proofs(path)
    other = next((p for p in proofs.values() if p.question not in (None, question)), None)
    if other is not None:
        raise ProblemError(
            "out",
            f"{str(path)!r} holds row {id_text(other.row_id)} proved for another question than this run's (the "
            "goal, the rules, the distance, --config or --engine differ): resume with the flags it was started "
            "with, or write to another --out",
        )
    return proofs


def _final(proofs: dict[str, Proof]) -> dict[str, Proof]:
    """The verdicts that are a row's proof (not a screen's ``feasible`` or ``unproven``)."""
    return {k: p for k, p in proofs.items() if p.final}


AUDIT_STATUS_OF = {"ok": "with_recourse", "already_met": "already_met", "error": "error"}


def _audit_rows(
    records: pd.DataFrame,
    proofs: dict[str, Proof],
    frame: pd.DataFrame,
    options: AuditOptions,
    *,
    stopped: bool = False,
) -> pd.DataFrame:
    """Every audited row: its record (a proof's answer replacing the search's), its status, why
    it has no proof, and its group values."""
    rows = records.copy()
    if any(p.record is not None for p in proofs.values()):
        position = {id_text(r): i for i, r in enumerate(rows["row_id"])}
        found = {k: p.record for k, p in proofs.items() if p.record is not None and k in position}
        for key, record in found.items():
            assert record is not None
            for column, value in record.items():
                if column in rows.columns:
                    rows.loc[position[key], column] = value
    status: list[str] = []
    reasons: list[str | None] = []
    columns = (rows["row_id"], rows["status"].astype(str), rows["score"], rows["error"])
    for row_id, record_status, score, error in zip(*columns, strict=True):
        proof = proofs.get(id_text(row_id))
        if record_status in AUDIT_STATUS_OF and not breaks_a_rule(record_status, score):
            status.append(AUDIT_STATUS_OF[record_status])
            reasons.append(str(error) if record_status == "error" else None)
        elif proof is None:  # not_found (or an answer breaking a rule) and never put to the engine
            status.append("no_recourse_unproven")
            reasons.append("not asked" if not options.prove else STOPPED_REASON if stopped else "no proof")
        else:
            status.append(
                {"proven": "no_recourse_proven", "found": "with_recourse"}.get(proof.outcome, "no_recourse_unproven")
            )
            reasons.append(proof.reason or None)
    rows[STATUS] = pd.Series(status, index=rows.index, dtype="string")
    rows[REASON_COLUMN] = pd.Series(reasons, index=rows.index, dtype="string")
    position = {id_text(label): i for i, label in enumerate(frame.index)}
    labels = np.array([position[id_text(r)] for r in rows["row_id"]], dtype=np.intp)
    for column in options.groups:
        rows[column] = frame[column].iloc[labels].to_numpy()
    return rows


def _report(
    rows: pd.DataFrame,
    *,
    frame: pd.DataFrame,
    features: list[str],
    options: AuditOptions,
    skipped: int,
    shares: Robustness | None,
    settings: AuditSettings,
) -> AuditReport:
    """The report's figures from the audit's rows (timing filled in by the caller)."""
    view, groups, seed = rows, list(options.groups), options.seed
    bootstrap, confidence = options.bootstrap, options.confidence
    overall = figures_of(view, lambda name: figure_rng(seed, "overall", name), bootstrap, confidence)
    status = view[STATUS].astype(str).to_numpy()
    ids = [plain(r) for r in view["row_id"]]

    def listed(name: str) -> list[Any]:
        return [i for i, s in zip(ids, status, strict=True) if s == name]

    unproven = view[REASON_COLUMN][status == "no_recourse_unproven"].fillna("no proof").astype(str)
    reasons = unproven.map(lambda r: r.split(":")[0]).value_counts().sort_index()
    originals = frame[features].copy()
    originals.index = [plain(i) for i in frame.index]
    return AuditReport(
        recourse_rate=overall.recourse_rate,
        recourse_rate_ci=overall.recourse_rate_ci,
        n_rows=len(view),
        skipped_already_met=skipped,
        with_recourse=listed("with_recourse"),
        no_recourse_proven=listed("no_recourse_proven"),
        no_recourse_unproven=listed("no_recourse_unproven"),
        unproven_reasons={str(k): int(v) for k, v in reasons.items()},
        already_met=listed("already_met"),
        errors=listed("error"),
        cost_mean=overall.cost_mean,
        cost_mean_ci=overall.cost_mean_ci,
        cost_median=overall.cost_median,
        changed_mean=overall.changed_mean,
        groups=group_figures(view, groups, seed, bootstrap, confidence),
        burden=burden(view, groups, seed, bootstrap, confidence),
        features=feature_figures(_with_ids(view), originals, groups),
        robustness=shares,
        settings=settings,
        timing=AuditTiming(
            seconds=0.0,
            search_seconds=0.0,
            prove_seconds=0.0,
            statistics_seconds=0.0,
            rows_searched=0,
            rows_proved=0,
            rows_per_second=None,
        ),
        confidence=confidence,
    )


def _with_ids(rows: pd.DataFrame) -> pd.DataFrame:
    out = rows.copy()
    out["row_id"] = [plain(r) for r in out["row_id"]]
    return out


def write_outputs(report: AuditReport, rows: pd.DataFrame, folder: Path) -> list[Path]:
    """Write ``audit.json``, the rows (``rows.parquet``, or ``rows.csv`` without pyarrow) and,
    with matplotlib (the ``plot`` extra) installed, ``report.html``
    (:mod:`counterplan.solver.audit.html`); returns the paths."""
    written = [folder / AUDIT_FILE]
    _replace(written[0], lambda tmp: tmp.write_text(report.to_json(), encoding="utf-8"))
    if importlib.util.find_spec("pyarrow") is not None:
        path = folder / ROWS_FILE
        _replace(path, lambda tmp: _for_parquet(rows).to_parquet(tmp, index=False))
    else:
        path = folder / ROWS_CSV
        _replace(path, lambda tmp: rows.to_csv(tmp, index=False))
    written.append(path)
    if importlib.util.find_spec("matplotlib") is not None:  # the plot extra draws the report's plots
        page = folder / REPORT_FILE
        write_report(report, rows, page)
        written.append(page)
    return written


def _for_parquet(rows: pd.DataFrame) -> pd.DataFrame:
    """Columns of mixed Python objects as text (a group column of numbers and gaps stays as it is)."""
    out = rows.copy()
    for name in out.columns:
        if out[name].dtype == object:
            kinds = {type(v) for v in out[name].dropna()}
            if len(kinds) > 1:
                out[name] = out[name].astype("string")
    return out


def _replace(path: Path, write: Callable[[Path], Any]) -> None:
    """Write through a temporary file and rename: the file is whole or absent."""
    temporary = path.with_name(path.name + ".tmp")
    write(temporary)
    temporary.replace(path)


def _version() -> str:
    try:
        from importlib.metadata import version  # noqa: PLC0415

        return version("counterplan")
    except Exception:  # an uninstalled checkout
        return ""
