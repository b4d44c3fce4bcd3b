"""``counterplan audit``: who among many rows can get a different decision, at what cost, by group.

The command is :func:`counterplan.solver.audit.audit` from a terminal: the model, the data and the
question as ``batch`` takes them (the same flags: :mod:`counterplan.server.cli.problem_flags`), the
group columns, and a directory for ``audit.json``, ``rows.parquet`` and ``report.html``. Every
flag is checked before the first row is searched; the bulk records and the proofs are kept in the
directory as they finish, so an interrupted audit continues with ``--resume``. At the end a short
summary says the recourse rate, how many rows have no recourse (proven and not), and each group's
rate, cost and burden.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from counterplan.planning.errors import ProblemError
from counterplan.server.cli.explain import add_server_flags
from counterplan.server.cli.interrupt import Interrupted
from counterplan.server.cli.problem_flags import add_problem_flags, add_search_flags, comma_names

if TYPE_CHECKING:
    from rich.console import Console

    from counterplan.solver.audit.report import AuditReport

FLAGS = {
    "rows": "--rows",
    "groups": "--group",
    "out": "--out",
    "output": "--out",
    "retrain": "--retrain",
    "bootstrap": "--bootstrap",
    "confidence": "--confidence",
    "prove_seconds": "--prove-seconds",
    "workers": "--workers",
    "window": "--window",
    "ray": "--ray",
    "seed": "--seed",
    "rules": "--rules",
    "rule_validity": "--rule-validity",
    "screen": "--screen",
}
"""The audit's own fields, and the flag whose value a refusal of one names."""
_POSITIONS = re.compile(r"^\s*\d+(\s*,\s*\d+)*\s*$")


def add_parser(commands: Any) -> None:
    """The ``audit`` subcommand's flags."""
    audit = commands.add_parser(
        "audit",
        help="a recourse audit: who can reach the goal, at what cost, by group, with proofs where none can",
        description="Explain many rows of a data file (by default the ones the model rejects), prove 'no recourse' "
        "with the exact engine where search found no answer, and report the recourse rate, cost and burden by group.",
    )
    rows = audit.add_argument_group("the model and the rows")
    rows.add_argument("--model", help="fitted model (.skops or .joblib), as for explain")
    rows.add_argument("--trust-model", action="store_true", help="load skops types not trusted by default")
    rows.add_argument("--data", help="CSV or Parquet file: the training data and the rows to audit (ids: positions)")
    rows.add_argument("--target", help="label column of --data, left out of the features")
    rows.add_argument(
        "--rows", default="rejected", help="rejected (default: rows that miss the goal), all, START:STOP, or positions"
    )
    add_problem_flags(audit)
    search = add_search_flags(audit)
    search.add_argument("--workers", type=int, default=1, metavar="N", help="worker processes (default 1)")
    search.add_argument("--ray", metavar="ADDRESS", help="run on Ray: auto (a local Ray) or a cluster's address")
    search.add_argument("--window", type=int, metavar="N", help="rows solved at once per process (default 64)")
    figures = audit.add_argument_group("the audit")
    figures.add_argument(
        "--group", action="append", default=[], metavar="COL[,COL]", help="columns to break the figures down by"
    )
    figures.add_argument(
        "--retrain",
        type=int,
        default=0,
        metavar="K",
        help="refit the model K times on bootstrap "
        "samples of the data and report the share of answers still valid (default 0: off)",
    )
    figures.add_argument(
        "--bootstrap",
        type=int,
        default=1000,
        metavar="N",
        help="resamples of each interval (default 1000; 0: none)",
    )
    figures.add_argument("--confidence", type=float, default=0.95, help="the intervals' level (default 0.95)")
    figures.add_argument("--no-proof", action="store_true", help="do not ask the exact engine to prove 'no recourse'")
    figures.add_argument("--prove-seconds", type=float, metavar="S", help="time limit of each proof (default none)")
    figures.add_argument(
        "--screen",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="put each row to the exact engine for feasibility before its search: a row proven infeasible is "
        "not searched (default: when proofs are on and the exact engine can encode the model, until a probe of "
        "32 rows proves none)",
    )
    figures.add_argument(
        "--rules", type=int, default=5, metavar="N", help="at most N global rules (default 5; 0: none)"
    )
    figures.add_argument(
        "--rule-validity",
        type=float,
        default=0.8,
        metavar="P",
        help="a rule's least share of covered rows its change brings to the goal (default 0.8)",
    )
    output = audit.add_argument_group("the output")
    output.add_argument("--out", help="directory for audit.json, rows.parquet and report.html (created if needed)")
    output.add_argument("--resume", action="store_true", help="continue the audit already in --out")
    output.add_argument("--json", action="store_true", help="print the report as JSON instead of the summary")
    add_server_flags(audit, what="audit the served model card's data")


def run(args: argparse.Namespace, usage: Callable[[str], Exception]) -> int:
    """Check the flags, run the audit, print its summary; returns the exit code."""
    from rich.console import Console  # noqa: PLC0415

    from counterplan.server.cli.batch import check_some_row_ran, load_table  # noqa: PLC0415
    from counterplan.server.cli.local_model import local_explainer  # noqa: PLC0415
    from counterplan.server.cli.problem_flags import flag_errors, problem_spec, solver_config  # noqa: PLC0415
    from counterplan.solver.audit.runner import AuditOptions, run_audit  # noqa: PLC0415
    from counterplan.solver.batch.rows import probe_row  # noqa: PLC0415

    if args.server is not None:  # the served model card's data, audited by the server's Audit call
        from counterplan.server.cli.audit_remote import remote_audit  # noqa: PLC0415

        err = Console(stderr=True)
        with _progress(err, enabled=not args.no_progress and err.is_terminal) as progress:
            served = remote_audit(args, usage, progress)
        if args.json:
            print(served.to_json())
        else:
            print_summary(served, Path(args.out), Console())
        return 0
    missing = [flag for flag in ("model", "data", "target", "out") if getattr(args, flag) is None]
    if missing:
        raise usage(f"give {', '.join('--' + m for m in missing)}: audit needs --model, --data, --target and --out")
    if args.ray is not None and args.workers != 1:
        raise usage("--workers and --ray: give one (Ray places the work itself)")
    spec, config = problem_spec(args), solver_config(args)
    data = load_table(args.data)
    explainer = local_explainer(args, spec, config, engine=args.engine, data=data)
    with flag_errors(instance_flag="--data"):
        explainer.problem(probe_row(explainer))  # a bad flag or a model that cannot read the data: refused now
        explainer.check()  # and an engine that cannot take the model
    rows: str | list[int] = [int(p) for p in args.rows.split(",")] if _POSITIONS.match(args.rows) else args.rows
    err = Console(stderr=True)
    with _flag_errors(usage), _progress(err, enabled=not args.no_progress and err.is_terminal) as progress:
        options = AuditOptions(
            groups=tuple(comma_names(args.group)),
            seed=args.seed if args.seed is not None else 0,
            workers=args.workers,
            ray=args.ray,
            window=args.window,
            prove=not args.no_proof,
            prove_seconds=args.prove_seconds,
            screen=args.screen,
            bootstrap=args.bootstrap,
            confidence=args.confidence,
            retrain=args.retrain,
            resume=args.resume,
            progress=progress,
            rules=args.rules,
            rule_validity=args.rule_validity,
        )
        try:
            report, audited = run_audit(explainer, rows, options, out=args.out)
        except KeyboardInterrupt:
            raise Interrupted(
                f"the rows done are kept in {args.out}; run the same command with --resume to continue"
            ) from None
    if args.json:
        print(report.to_json())
    else:
        print_summary(report, Path(args.out), Console())
    check_some_row_ran(audited, args.out)
    return 0


@contextmanager
def _flag_errors(usage: Callable[[str], Exception]) -> Iterator[None]:
    """A refusal of one of the audit's own fields names its flag (``--group: no column 'sexx' ...``)."""
    try:
        yield
    except ProblemError as exc:
        flag = FLAGS.get(exc.field)
        if flag is None:
            raise
        text = exc.problem.replace("resume it", "pass --resume to continue it") if flag == "--out" else exc.problem
        raise usage(f"{flag}: {text}") from None


@contextmanager
def _progress(console: Console, *, enabled: bool) -> Iterator[Callable[[str, int, int], None] | None]:
    """Two bars on stderr, one per stage (the search, then the proofs), as ``batch`` shows them."""
    if not enabled:
        yield None
        return
    from rich.progress import Progress, TaskID  # noqa: PLC0415

    from counterplan.server.cli.batch import progress_columns  # noqa: PLC0415

    labels = {"screen": "screening", "search": "searching", "prove": "proving  "}
    tasks: dict[str, TaskID] = {}
    with Progress(*progress_columns("{task.description}"), console=console) as bars:

        def advance(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bars.add_task(labels.get(stage, stage), total=total)
            bars.update(tasks[stage], completed=done, total=total)

        yield advance


def print_summary(report: AuditReport, out: Path, console: Console) -> None:
    """The overall figures, each group's rate, cost and burden, the global rules, and the files written.

    Every text from the data (group columns and values, the rows asked, rules, reasons) is escaped:
    rich reads ``[...]`` in a cell as markup, so a value ``[/]`` ended the command with a stack trace
    after the audit, and ``[red]p`` was shown as ``p``."""
    from rich.markup import escape  # noqa: PLC0415
    from rich.table import Table  # noqa: PLC0415

    from counterplan.solver.audit.report import level_text  # noqa: PLC0415
    from counterplan.solver.audit.runner import AUDIT_FILE, REPORT_FILE, ROWS_CSV, ROWS_FILE  # noqa: PLC0415

    console.print(f"goal: {report.settings.goal}", markup=False, soft_wrap=True)
    overall = Table(title=f"Recourse audit: {report.n_rows:,} rows ({escape(report.settings.rows)})")
    overall.add_column("figure")
    overall.add_column("value", justify="right")
    reasons = ", ".join(f"{escape(k)}: {v:,}" for k, v in report.unproven_reasons.items())
    timing = report.timing
    for name, value in (
        ("recourse rate", _percent(report.recourse_rate) + _ci(report.recourse_rate_ci, report.confidence)),
        ("with recourse", f"{len(report.with_recourse):,}"),
        ("no recourse, proven", f"{len(report.no_recourse_proven):,}"),
        ("no recourse, unproven", f"{len(report.no_recourse_unproven):,}" + (f" ({reasons})" if reasons else "")),
        ("errors", f"{len(report.errors):,}"),
        ("already meeting the goal", report.already_met_text()),
        ("cost: mean / median", f"{_number(report.cost_mean)} / {_number(report.cost_median)}"),
        ("changes: mean", _number(report.changed_mean)),
        ("rows/s (search)", _number(timing.rows_per_second)),
        (
            "wall time",
            f"{timing.seconds:,.1f} s (screen {timing.screen_seconds:,.1f} s, search {timing.search_seconds:,.1f} s, "
            f"proofs {timing.prove_seconds:,.1f} s)",
        ),
    ):
        overall.add_row(name, value)
    if report.robustness is not None:
        overall.add_row(
            f"still valid after {report.robustness.k} refits: mean / min",
            f"{_percent(report.robustness.mean)} / {_percent(report.robustness.minimum)}",
        )
    console.print(overall)
    for column, values in report.groups.items():
        burden = report.burden.get(column)
        table = Table(title=f"By {escape(column)}")
        level = f"{level_text(report.confidence)} CI"
        for name in ("value", "n", "recourse rate", level, "cost mean", "cost ratio", "no-recourse ratio"):
            table.add_column(name, justify="left" if name == "value" else "right")
        for value, figures in values.items():
            ratios = burden.values.get(value) if burden is not None else None
            table.add_row(
                escape(value),
                f"{figures.n:,}",
                _percent(figures.recourse_rate),
                _interval(figures.recourse_rate_ci, percent=True),
                _number(figures.cost_mean),
                _number(ratios.cost_ratio if ratios else None),
                _number(ratios.no_recourse_ratio if ratios else None),
            )
        console.print(table)
    if report.rules:
        rules = Table(title="Global rules")
        for name in ("rule", "for rows with", "change", "rows", "coverage", "validity", "mean cost"):
            rules.add_column(name, justify="right" if name in {"rows", "coverage", "validity", "mean cost"} else "left")
        for i, rule in enumerate(report.rules, start=1):
            rules.add_row(
                f"R{i}",
                escape(rule.condition_text()),
                escape(rule.action_text()),
                f"{rule.rows_covered:,}",
                _percent(rule.coverage),
                _percent(rule.validity),
                _number(rule.cost_mean),
            )
        console.print(rules)
    rows = out / (ROWS_FILE if (out / ROWS_FILE).exists() else ROWS_CSV)
    written = [out / AUDIT_FILE, rows] + ([out / REPORT_FILE] if (out / REPORT_FILE).exists() else [])
    console.print("written: " + ", ".join(str(p) for p in written), markup=False, soft_wrap=True)


def _percent(share: float | None) -> str:
    return "-" if share is None or math.isnan(share) else f"{share:.1%}"


def _number(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:,.4g}"


def _ci(interval: tuple[float | None, float | None], confidence: float) -> str:
    """`` (95% CI 50%-63%)``, or nothing without an interval."""
    from counterplan.solver.audit.report import level_text  # noqa: PLC0415

    text = _interval(interval, percent=True)
    return f" ({level_text(confidence)} CI {text})" if text else ""


def _interval(interval: tuple[float | None, float | None], *, percent: bool = False) -> str:
    low, high = interval
    if low is None or high is None:
        return ""
    if percent:
        return f"{low:.0%}-{high:.0%}"
    return f"[{_number(low)}, {_number(high)}]"
