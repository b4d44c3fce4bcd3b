"""``counterplan batch``: explain many rows of a data file, write one record per row, summarise.

A bulk job may run for hours, so it is built to fail early and to stop without loss. Every
flag, file and path is checked before the first row is solved (a typo in ``--output`` must not
cost an hour of work); records are written as rows finish (:mod:`counterplan.solver.batch.writer`), so an
interrupted job keeps them and ``--resume`` continues it; and a row the model fails on becomes
an error record, not the end of the job. At the end a summary says what the batch found
overall and which features its answers change (:mod:`counterplan.solver.batch.summary`).
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from counterplan.planning.errors import CounterplanError, ProblemError, echo, one_line
from counterplan.server.cli.interrupt import Interrupted
from counterplan.server.cli.local_model import MODEL_HELP, add_served_model_flags
from counterplan.server.cli.problem_flags import add_problem_flags, add_search_flags

if TYPE_CHECKING:
    import pandas as pd
    from rich.console import Console

    from counterplan.solver.batch.rows import RowSelection
    from counterplan.solver.batch.summary import BatchSummary
    from counterplan.solver.batch.writer import CsvRecords, ParquetRecords
    from counterplan.solver.explainer import Explainer

FLAGGED_FIELDS = ("rows", "output", "plot", "workers", "window", "ray")
"""Fields whose errors name the flag that set them (``--rows: ...``)."""
BATCH_ENGINES = ("vector", "threads")
"""How a block's rows are searched (``--batch-engine``): the vectorised engine or threads sharing calls."""
_POSITIONS = re.compile(r"^\s*\d+(\s*,\s*\d+)*\s*$")


class OutputError(CounterplanError):
    """The output cannot be written while the job runs (a full disk, a removed directory)."""


class EveryRowFailedError(CounterplanError):
    """Every row a run solved is an error record (exit 1, as ``explain`` on one of them): the model
    or its input fails on all of them (an ONNX model of another width, a model that raises), so
    the run answered nothing, however complete its records look."""


def check_some_row_ran(records: pd.DataFrame, where: str) -> None:
    """Raise :class:`EveryRowFailedError` when ``records`` (a run's, with ``status``, ``row_id`` and
    ``error``) are all errors, quoting the first; the records stay written in ``where``."""
    if len(records) == 0 or not (records["status"].astype(str) == "error").all():
        return
    first = records.sort_values("row_id").iloc[0]
    raise EveryRowFailedError(
        f"every row failed ({len(records):,} error records, kept in {where}); "
        f"the first, row {first['row_id']}: {one_line(str(first['error']))}"
    )


def add_parser(commands: Any) -> None:
    """The ``batch`` subcommand's flags."""
    batch = commands.add_parser(
        "batch",
        help="explain many rows of a data file and write one record per row",
        description="Explain the rows of a data file (by default the ones the model rejects) with one model "
        "call per step for all of them; write a record per row as it finishes and print a summary.",
    )
    group = batch.add_argument_group("the model and the rows")
    group.add_argument("--model", help=MODEL_HELP)
    group.add_argument("--trust-model", action="store_true", help="load skops types not trusted by default")
    add_served_model_flags(group)
    group.add_argument("--data", help="CSV or Parquet file: the training data and the rows to explain (ids: positions)")
    group.add_argument("--target", help="label column of --data, left out of the features")
    group.add_argument(
        "--rows",
        default="rejected",
        help="rejected (default: rows that miss the goal), all, START:STOP, or positions 3,8,13",
    )
    add_problem_flags(batch)
    search = add_search_flags(batch)
    search.add_argument("--workers", type=int, default=1, metavar="N", help="worker processes (default 1)")
    search.add_argument("--ray", metavar="ADDRESS", help="run on Ray: auto (a local Ray) or a cluster's address")
    search.add_argument("--window", type=int, metavar="N", help="rows solved at once per process (default 64)")
    search.add_argument(
        "--batch-engine",
        default="vector",
        metavar="vector|threads",
        help="vector (default): a block's rows searched together as array operations where that engine can go; "
        "threads: each row its own solve, as explain would answer it, the solves sharing model calls",
    )
    output = batch.add_argument_group("the output")
    output.add_argument("--output", help="results file: .parquet or .csv")
    output.add_argument("--resume", action="store_true", help="continue an existing output: skip the rows it holds")
    output.add_argument("--plot", metavar="FILE.png", help="bar chart of how often each feature is changed")
    output.add_argument("--json", action="store_true", help="print the summary as JSON")


@dataclass
class Job:
    """A checked job: everything needed to run it, nothing written yet."""

    explainer: Explainer
    data: pd.DataFrame
    features: list[str]
    selection: RowSelection
    only_rejected: bool
    todo: int
    existing: pd.DataFrame
    dtypes: dict[str, str]
    output: Path
    plot: Path | None
    goal: str
    """The goal every row is asked, in words (the summary states it)."""
    goal_default: str | None
    skipped: int = 0
    """Rows left out because they meet the goal already (``--rows rejected``), found by one model call."""
    selection_seconds: float = 0.0
    """What finding them took."""


@dataclass
class Tally:
    """What this run did, counted as records arrive."""

    processed: int = 0
    already_met: int = 0
    started: float = field(default_factory=time.perf_counter)

    @property
    def seconds(self) -> float:
        """Wall time since the run started."""
        return time.perf_counter() - self.started


def run(args: argparse.Namespace, usage: Callable[[str], Exception]) -> int:
    """Check everything, then explain, write and summarise; returns the exit code."""
    with _flag_errors(usage):
        try:
            job = prepare(args, usage)
        except KeyboardInterrupt:
            raise Interrupted("before any row was solved; nothing written") from None
        return execute(job, args)


@contextmanager
def _flag_errors(usage: Callable[[str], Exception]) -> Iterator[None]:
    """Report a bad ``--rows``, ``--output``... by its flag, as the other flags are."""
    try:
        yield
    except ProblemError as exc:
        if exc.field not in FLAGGED_FIELDS:
            raise
        raise usage(f"--{exc.field}: {exc.problem}") from None


def prepare(args: argparse.Namespace, usage: Callable[[str], Exception]) -> Job:
    """Every check, in the order a user fixes them: flags, paths, the question, data, rows, model."""
    from counterplan.server.cli.local_model import local_explainer  # noqa: PLC0415
    from counterplan.server.cli.problem_flags import flag_errors, problem_spec, solver_config  # noqa: PLC0415
    from counterplan.solver.batch.records import batch_question  # noqa: PLC0415
    from counterplan.solver.batch.rows import RowSelection, meeting_the_goal, probe_row  # noqa: PLC0415
    from counterplan.solver.batch.run import batch_seed  # noqa: PLC0415
    from counterplan.solver.batch.torn_line import drop_torn_line  # noqa: PLC0415
    from counterplan.solver.batch.writer import (  # noqa: PLC0415
        check_output,
        check_same_job,
        no_records,
        read_existing,
        record_dtypes,
    )

    _check_flags(args, usage)
    spec, config = problem_spec(args), solver_config(args)
    output = Path(args.output)
    check_output(output, resume=args.resume)
    plot = _check_plot(args.plot, usage)
    _check_ray(args.ray, usage)
    data = load_table(args.data)
    selection, only_rejected = _selection(args.rows, len(data))
    explainer = local_explainer(args, spec, config, engine=args.engine, data=data)  # every row asked the same
    with flag_errors(instance_flag="--data"):
        first = explainer.problem(probe_row(explainer))  # a bad flag or a model that cannot read the data: refused now
        explainer.check()  # and an engine that cannot take the model
    features = [f.name for f in first.space.features]
    dtypes = record_dtypes(data, features)
    columns = list(dtypes)
    if args.resume:  # a line a crash tore is cut off (and its row solved again), never read as a record
        drop_torn_line(output, columns, dtypes, rows=len(data))
    existing = read_existing(output, columns, dtypes, rows=len(data)) if args.resume else no_records(columns, dtypes)
    check_same_job(
        existing,
        seed=args.seed if args.seed is not None else batch_seed(explainer),
        question=batch_question(explainer.question, vectorised=args.batch_engine == "vector"),
        path=output,
    )
    done = {int(i) for i in existing["row_id"]}
    ids = [i for i in (range(len(data)) if selection.positions is None else selection.positions) if i not in done]
    started = time.perf_counter()
    skipped = 0
    if only_rejected:  # one model call over the rows left to do: an approved row costs no solve
        met = meeting_the_goal(explainer, data.iloc[ids])
        skipped = int(met.sum())
        ids = [i for i, m in zip(ids, met.tolist(), strict=True) if not m]
        selection = RowSelection(tuple(ids))
    return Job(
        explainer,
        data,
        features,
        selection,
        only_rejected,
        len(ids),
        existing,
        dtypes,
        output,
        plot,
        first.goal_text,
        first.goals_default,
        skipped,
        time.perf_counter() - started,
    )


def _check_flags(args: argparse.Namespace, usage: Callable[[str], Exception]) -> None:
    """The flags that need no file: checked first, as they cost nothing."""
    missing = [flag for flag in ("model", "data", "target", "output") if getattr(args, flag) is None]
    if missing:
        raise usage(f"give {', '.join('--' + m for m in missing)}: batch needs --model, --data, --target and --output")
    if args.workers < 1:
        raise usage(f"--workers must be at least 1, given {args.workers}")
    if args.ray is not None and args.workers != 1:
        raise usage("--workers and --ray: give one (Ray places the work itself)")
    if args.batch_engine not in BATCH_ENGINES:
        raise usage(f"--batch-engine: give vector or threads, given {echo(args.batch_engine)}")


def _check_plot(text: str | None, usage: Callable[[str], Exception]) -> Path | None:
    """The plot's path, checked as the output's; matplotlib must load (the ``plot`` extra)."""
    from counterplan.solver.batch.writer import check_writable_directory  # noqa: PLC0415

    if text is None:
        return None
    path = Path(text)
    if path.suffix.lower() != ".png":
        raise usage(f"--plot: must end in .png, given {echo(text)}")
    check_writable_directory("plot", path)
    try:
        import matplotlib  # noqa: F401, PLC0415 - optional: only a plot needs it
    except ImportError:
        raise usage("--plot needs matplotlib: pip install 'counterplan[plot]'") from None
    return path


def _check_ray(address: str | None, usage: Callable[[str], Exception]) -> None:
    """Ray support must load; whether the address answers, ``explain_batch`` asks before any work."""
    if address is None:
        return
    try:
        importlib.import_module("counterplan.solver.batch.on_ray")  # ray loads only when asked
    except ImportError as exc:
        raise usage(f"--ray needs Ray: pip install 'counterplan[ray]' ({exc})") from None


def load_table(text: str) -> pd.DataFrame:
    """The data file (CSV, or Parquet by its suffix), indexed by position: row ids are positions."""
    import pandas as pd  # noqa: PLC0415

    from counterplan.server.registry.loading import LoadError, existing_file, load_csv  # noqa: PLC0415

    path = Path(text)
    if path.suffix.lower() != ".parquet":
        return load_csv(path).reset_index(drop=True)
    existing_file(path)
    try:
        data = pd.read_parquet(path)
    except ImportError:
        raise LoadError(str(path), "reading Parquet needs pyarrow: pip install 'counterplan[parquet]'") from None
    except Exception as exc:  # a corrupt or foreign file: one line, not a traceback
        raise LoadError(str(path), f"cannot read Parquet: {type(exc).__name__}: {exc}") from None
    if data.empty:
        raise LoadError(str(path), "the file has no rows")
    return data.reset_index(drop=True)


def _selection(text: str, n_rows: int) -> tuple[RowSelection, bool]:
    """The rows to look at (``rejected``: every row, narrowed by :func:`prepare` to the ones the
    model rejects, so the progress bar counts the rows solved) and whether to keep only those."""
    from counterplan.solver.batch.rows import RowSelection  # noqa: PLC0415

    positions: str | list[int] = [int(p) for p in text.split(",")] if _POSITIONS.match(text) else text
    selection = RowSelection.parse(positions, n_rows)
    if selection.only_rejected:
        return RowSelection(), True
    return selection, False


def execute(job: Job, args: argparse.Namespace) -> int:
    """Run the checked job: records written as rows finish, then the summary (and the plot)."""
    from rich.console import Console  # noqa: PLC0415

    from counterplan.solver.batch.run import WorkerLostError  # noqa: PLC0415
    from counterplan.solver.batch.writer import open_records  # noqa: PLC0415

    writer = open_records(job.output, job.features, job.dtypes)
    tally = Tally()
    err = Console(stderr=True)
    try:
        with _progress(job.todo, err, enabled=not args.no_progress and err.is_terminal) as advance:

            def on_record(record: dict[str, Any]) -> None:
                advance()
                if job.only_rejected and record["status"] == "already_met":  # one the selection could not judge
                    tally.already_met += 1
                    return
                tally.processed += 1
                writer.write(record)

            frame = job.explainer.explain_batch(
                job.selection,
                seed=args.seed,
                workers=args.workers,
                window=args.window,
                on_record=on_record,
                skip=set(job.existing["row_id"].tolist()),
                ray=args.ray,
                vectorised=args.batch_engine == "vector",
            )
        writer.finish()
    except KeyboardInterrupt:
        writer.stop()
        raise Interrupted(
            f"{writer.written} new rows kept in {job.output}; run the same command with --resume to continue"
        ) from None
    except WorkerLostError as exc:
        writer.stop()
        raise WorkerLostError(
            f"{exc}; {writer.written} new rows kept in {job.output}: run the same command with --resume to continue"
        ) from None
    except OSError as exc:
        _stop_quietly(writer)
        raise OutputError(f"--output: cannot write {str(job.output)!r}: {exc.strerror or exc}") from None
    except BaseException:
        writer.stop()
        raise
    _report(job, args, frame, tally)
    check_some_row_ran(
        frame[(frame["status"] != "already_met").to_numpy()] if job.only_rejected else frame, str(job.output)
    )
    return 0


def _stop_quietly(writer: CsvRecords | ParquetRecords) -> None:
    """Keep what can be kept after a write failed; the first failure is the one reported."""
    with suppress(OSError):
        writer.stop()


@contextmanager
def _progress(total: int, console: Console, *, enabled: bool) -> Iterator[Callable[[], None]]:
    """A progress bar on stderr with rows/s and an ETA; yields the function that counts a row."""
    if not enabled:
        yield lambda: None
        return
    from rich.progress import Progress  # noqa: PLC0415

    with Progress(*progress_columns("explaining"), console=console) as progress:
        task = progress.add_task("explaining", total=total)
        yield lambda: progress.advance(task)


def progress_columns(label: str) -> tuple[Any, ...]:
    """The columns of a bulk job's progress bar: ``label``, the bar, rows done of all, rows/s
    since the start, the time spent and the ETA (the audit's stages show the same)."""
    from rich.progress import (  # noqa: PLC0415
        BarColumn,
        MofNCompleteColumn,
        ProgressColumn,
        Task,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.text import Text  # noqa: PLC0415

    class RateColumn(ProgressColumn):
        """Rows per second since the start (steadier than rich's recent-window speed)."""

        def render(self, task: Task) -> Text:
            elapsed = task.elapsed or 0.0
            rate = task.completed / elapsed if elapsed > 0 else 0.0
            return Text(f"{rate:,.1f} rows/s", style="progress.data.speed")

    return (
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        RateColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )


def _report(job: Job, args: argparse.Namespace, frame: pd.DataFrame, tally: Tally) -> None:
    """The summary of the whole output (earlier runs' rows too), this run's speed, the plot."""
    import pandas as pd  # noqa: PLC0415
    from rich.console import Console  # noqa: PLC0415

    from counterplan.solver.batch.summary import summarize  # noqa: PLC0415
    from counterplan.solver.batch.writer import conform  # noqa: PLC0415

    seconds = tally.seconds
    new = frame[(frame["status"] != "already_met").to_numpy()] if job.only_rejected else frame
    parts = [f for f in (job.existing, conform(new, job.dtypes)) if len(f)]
    records = pd.concat(parts, ignore_index=True) if parts else job.existing
    summary = summarize(records, job.data[job.features])
    figures = {
        "goal": job.goal,
        "goal_default": job.goal_default,
        "output": str(job.output),
        "rows_this_run": tally.processed,
        "already_met_skipped": job.skipped + tally.already_met,
        "rows_per_second": tally.processed / seconds if tally.processed and seconds > 0 else None,
        "selection_seconds": job.selection_seconds,
        "wall_seconds": seconds,
    }
    if args.json:
        print(json.dumps({**figures, **summary.to_dict()}, indent=2))
    else:
        print_summary(summary, figures, job.only_rejected, Console())
    if job.plot is not None:
        plot_shares(summary.features, job.plot)


def print_summary(summary: BatchSummary, figures: dict[str, Any], only_rejected: bool, console: Console) -> None:
    """The overall figures and the per-feature table, as rich tables (the data's own text, and the
    output's path, escaped: rich reads ``[...]`` as markup)."""
    from rich.markup import escape  # noqa: PLC0415
    from rich.table import Table  # noqa: PLC0415

    from counterplan.server.cli.render import goal_line  # noqa: PLC0415

    console.print(goal_line(figures["goal"], figures["goal_default"]), markup=False, soft_wrap=True)
    overall = Table(title=f"Batch summary: {escape(str(figures['output']))}")
    overall.add_column("figure")
    overall.add_column("value", justify="right")
    for name, value in _overall_rows(summary, figures, only_rejected):
        overall.add_row(name, value)
    console.print(overall)
    table = Table(title=f"Features changed by the {summary.valid:,} valid answers")
    for name in ("feature", "changed", "share", "median change"):
        table.add_column(name, justify="left" if name == "feature" else "right")
    for row in summary.features.to_dict(orient="records"):
        cells = (str(row["feature"]), f"{row['changed']:,}", _percent(float(row["share"])), _change_text(row))
        table.add_row(*map(escape, cells))
    console.print(table)


def _overall_rows(summary: BatchSummary, figures: dict[str, Any], only_rejected: bool) -> list[tuple[str, str]]:
    """The overall table: the whole output's figures, then this run's speed (over the rows it
    explained; the skipped rows cost one model call together, timed apart)."""
    rate = figures["rows_per_second"]
    met = figures["already_met_skipped"] if only_rejected else summary.already_met
    skipping = [("finding the skipped rows", f"{figures['selection_seconds']:,.2f} s")] if only_rejected else []
    return [
        ("rows explained", f"{summary.explained:,}"),
        ("valid", f"{_percent(summary.valid_share)} ({summary.valid:,})"),
        ("distance (valid): mean / median", f"{_number(summary.mean_distance)} / {_number(summary.median_distance)}"),
        ("changes (valid): mean / median", f"{_number(summary.mean_changes)} / {_number(summary.median_changes)}"),
        ("reached only by breaking a rule", f"{summary.broke_rules:,}"),
        ("not found", f"{summary.not_found:,}"),
        ("errors", f"{summary.errors:,}"),
        ("already meeting the goal" + (", skipped" if only_rejected else ""), f"{met:,}"),
        ("rows explained in this run", f"{figures['rows_this_run']:,}"),
        ("explained rows/s", "-" if rate is None else f"{rate:,.2f}"),
        ("wall time", f"{figures['wall_seconds']:,.1f} s"),
        *skipping,
    ]


def _change_text(row: dict[Any, Any]) -> str:
    """A number's median change (``+1,753``), or a category's most common change and its count."""
    top = row["top_change"]
    if isinstance(top, str):
        return f"{top} ({row['top_change_count']:,})"
    median = float(row["median_change"])
    return "-" if math.isnan(median) else f"{median:+,.4g}"


def _percent(share: float) -> str:
    return "-" if math.isnan(share) else f"{share:.1%}"


def _number(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:,.4g}"


def plot_shares(features: pd.DataFrame, path: Path) -> None:
    """A horizontal bar chart of each feature's share of valid answers that change it."""
    from matplotlib.figure import Figure  # noqa: PLC0415 - the plot extra; no pyplot, no global state

    from counterplan.server.cli.labels import short_labels  # noqa: PLC0415

    shown = features.iloc[::-1]  # barh draws bottom-up: most changed at the top
    figure = Figure(figsize=(7.0, 1.2 + 0.32 * max(len(shown), 1)), layout="constrained")
    axes = figure.subplots()
    shares = shown["share"].fillna(0.0)
    names = short_labels([str(f) for f in shown["feature"]])  # a long name would push the title out
    bars = axes.barh(names, (shares * 100).tolist(), color="#4c72b0")
    axes.bar_label(bars, labels=[f"{s:.0%} ({n:,})" for s, n in zip(shares, shown["changed"], strict=True)], padding=3)
    axes.set_xlim(0, 120)  # room for the labels of a share near 100%
    axes.set_xticks(range(0, 101, 20))
    axes.set_xlabel("valid answers that change the feature (%)")
    figure.suptitle("Counterfactual summary: how often each feature is changed")  # over the figure, not the bars
    figure.savefig(path, dpi=100)
