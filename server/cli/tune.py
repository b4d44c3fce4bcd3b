"""``counterplan tune``: search solver configurations with optuna and report what it found."""

from __future__ import annotations

import argparse
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from counterplan.server.cli.local_model import MODEL_HELP, add_served_model_flags
from counterplan.server.cli.problem_flags import add_problem_flags, add_search_flags

if TYPE_CHECKING:
    import numpy as np
    from rich.console import Console


def add_parser(commands: Any) -> None:
    """The ``tune`` subcommand's flags."""
    tune = commands.add_parser(
        "tune",
        help="tune the solver configuration with optuna",
        description="Tune the solver configuration on rows of your data (default: the demo) with optuna and "
        "compare the best with the default on held-out rows; with --output, the best configuration is written "
        "as a file explain --config, model cards and gRPC accept.",
    )
    group = tune.add_argument_group("the model and the rows")
    group.add_argument("--model", help=MODEL_HELP + "; default: the demo model")
    group.add_argument("--trust-model", action="store_true", help="load skops types not trusted by default")
    add_served_model_flags(group)
    group.add_argument("--data", help="CSV of training data (with the label column)")
    group.add_argument("--target", help="label column of --data")
    group.add_argument(
        "--rows", type=int, default=12, help="rows to tune on (rows that miss the goal, seeded shuffle; default: 12)"
    )
    group.add_argument("--heldout", type=int, default=12, help="further rows for the held-out comparison (default: 12)")
    add_problem_flags(tune)
    search = add_search_flags(
        tune, leave_out=("--config", "--time-limit", "--threads", "--auto-budget", "--auto-improve")
    )
    search.add_argument(
        "--trials", type=int, default=30, help="trials to run now (a resumed study keeps its own; default: 30)"
    )
    search.add_argument(
        "--budget", type=float, default=0.25, metavar="SECONDS", help="time budget per row (default: 0.25)"
    )
    search.add_argument(
        "--storage",
        default="sqlite:///counterplan-tuning.db",
        help="optuna storage URL (default: sqlite:///counterplan-tuning.db)",
    )
    search.add_argument(
        "--study-name",
        help="resumed when it exists and was made for the same problem (default: one name per problem)",
    )
    tune.add_argument(
        "--output",
        metavar="FILE",
        help="write the best configuration to FILE (default: nothing is written; the report says whether "
        "it beats the default on the held-out rows)",
    )


def run(args: argparse.Namespace, usage: Any) -> int:
    """Tune, print the report and the verdict, write the best configuration when ``--output`` asks."""
    import numpy as np  # noqa: PLC0415 - this module is imported for its flags, which must load fast
    from rich.console import Console  # noqa: PLC0415

    from counterplan.server.cli.interrupt import stop_on_interrupt  # noqa: PLC0415
    from counterplan.server.cli.local_model import local_explainer  # noqa: PLC0415
    from counterplan.server.cli.problem_flags import flag_errors, problem_spec  # noqa: PLC0415
    from counterplan.solver.batch.rows import probe_row  # noqa: PLC0415

    try:
        import optuna  # noqa: PLC0415 - optional: only tuning needs it
    except ImportError:
        raise usage("tuning needs optuna: pip install 'counterplan[tune]'") from None
    from counterplan.solver.tuning import tune  # noqa: PLC0415

    _check_counts(args, usage)
    spec = problem_spec(args)
    if (args.model is None) != (args.data is None) or (args.model is not None and args.target is None):
        raise usage("give --model, --data and --target together (or none, for the demo)")
    explainer = local_explainer(args, spec)
    seed = args.seed if args.seed is not None else 0
    with flag_errors(instance_flag="--data"):
        first = explainer.problem(probe_row(explainer))  # the question every row is asked, checked once
        missed = _rows_missing_the_goal(explainer, first, usage=usage)
    rng = np.random.default_rng(seed)
    problems, unfit = _solvable_rows(explainer, rng.permutation(missed), args.rows + args.heldout)
    if len(problems) < args.rows + (1 if args.heldout else 0):
        skipped = f" ({unfit.count} more skipped: the model fails on them or they meet it; {unfit.first})"
        raise usage(
            f"only {len(problems)} rows miss the goal{skipped if unfit.count else ''}; ask for fewer --rows/--heldout"
        )
    err = Console(stderr=True)
    # a failed trial's warning (with its traceback) repeats what the command reports in one line:
    # the error, or Ctrl-C
    optuna.logging.set_verbosity(optuna.logging.ERROR)

    progress = _Progress(err, shown=not args.no_progress, kept=not _in_memory(args.storage))
    try:  # Ctrl-C asks the study to stop (a KeyboardInterrupt of its own could be lost, see tune's stop)
        with stop_on_interrupt() as interrupt:
            report = tune(
                problems[: args.rows],
                problems[args.rows :],
                n_trials=args.trials,
                budget_seconds=args.budget,
                storage=args.storage,
                study_name=args.study_name,
                seed=seed,
                on_trial=progress,
                engine=args.engine,
                stop=interrupt,
            )
    except KeyboardInterrupt:  # the study keeps its finished trials: running again resumes it
        raise progress.stopped() from None
    if interrupt.requested:  # during the held-out comparison, after the last trial
        raise progress.stopped()
    if args.output is not None:
        _write_output(Path(args.output), report.best_config.to_yaml())
    _print_report(report, args, first, Console())
    return 0


class _Progress:
    """The line of each trial on stderr (unless ``--no-progress``), and the study's best trial so
    far for the line a Ctrl-C prints."""

    def __init__(self, console: Console, *, shown: bool, kept: bool = True) -> None:
        self.console, self.shown, self.best, self.kept = console, shown, "", kept

    def __call__(self, study: Any, trial: Any) -> None:
        with suppress(ValueError):  # no trial completed yet
            self.best = f"trial {study.best_trial.number}, objective {study.best_value:.4f}"
        if self.shown:
            state = f"{trial.value:.4f}" if trial.value is not None else trial.state.name.lower()
            best = f"{study.best_value:.4f}" if self.best else "-"
            self.console.print(f"trial {trial.number}: {state}  (best {best})")

    def stopped(self) -> KeyboardInterrupt:
        """What a Ctrl-C (or SIGTERM) says: the trials are kept, the best of them, and how to resume."""
        from counterplan.server.cli.interrupt import Interrupted  # noqa: PLC0415

        so_far = f" (the best: {self.best})" if self.best else ""
        if not self.kept:
            return Interrupted(
                f"the finished trials{so_far} were in an in-memory --storage and end with the command; nothing "
                "written; give a database file (sqlite:///tuning.db) to keep them and resume"
            )
        return Interrupted(
            f"the finished trials{so_far} are kept in the study's --storage; run the same command to resume it; "
            "nothing written"
        )


def _print_report(report: Any, args: argparse.Namespace, problem: Any, console: Console) -> None:
    import optuna  # noqa: PLC0415
    from rich.table import Table  # noqa: PLC0415

    from counterplan.server.cli.render import goal_line  # noqa: PLC0415

    console.print(goal_line(problem.goal_text, problem.goals_default), markup=False, soft_wrap=True)

    trials = [t for t in report.study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    pruned = sum(t.state == optuna.trial.TrialState.PRUNED for t in report.study.trials)
    console.print(
        f"Study {report.study.study_name!r} in {args.storage}: {len(report.study.trials)} trials, "
        f"{len(trials)} complete, {pruned} pruned. Objective: mean over rows of "
        "(10 + goal distance if invalid) + d/(1+d) + 0.1 c/(1+c), d the distance, c the changes; lower is better."
    )
    best = Table(title="Best trials")
    for column in ("trial", "objective", "engine", "walkers", "moves/step", "scan", "polish"):
        best.add_column(column)
    for t in sorted(trials, key=lambda t: t.value)[:5]:
        p = t.params
        best.add_row(
            str(t.number),
            f"{t.value:.4f}",
            p.get("engine", ""),
            str(p.get("walkers", "")),
            str(p.get("moves_per_step", "")),
            str(p.get("feature_scan", "")),
            str(p.get("boundary_polish", "")),
        )
    console.print(best)
    if report.importances:
        imp = Table(title="Parameter importances")
        imp.add_column("parameter")
        imp.add_column("importance", justify="right")
        for name, value in list(report.importances.items())[:8]:
            imp.add_row(name, f"{value:.3f}")
        console.print(imp)
    if report.tuned_heldout is not None and report.default_heldout is not None:
        table = Table(title=f"Held-out rows ({args.heldout}), {args.budget} s budget per row")
        for column in ("configuration", "objective", "validity", "mean distance", "mean changed", "median s"):
            table.add_column(column, justify="right")
        for label, e in (("default", report.default_heldout), ("tuned", report.tuned_heldout)):
            table.add_row(
                label,
                f"{e.mean_cost:.4f}",
                f"{e.validity:.0%}",
                f"{e.mean_distance:.4f}",
                f"{e.mean_changed:.2f}",
                f"{e.median_seconds:.3f}",
            )
        console.print(table)
    console.print(verdict(report, args.output, kept=not _in_memory(args.storage)), markup=False)


def verdict(report: Any, output: str | None, *, kept: bool = True) -> str:
    """Whether the tuned configuration is worth using (better than the default on the held-out rows
    beyond :data:`~counterplan.solver.tuning.MEANINGFUL_GAIN`), at what speed, and what was written."""
    from counterplan.solver.tuning import MEANINGFUL_GAIN  # noqa: PLC0415

    written = f"Best configuration written to {output} (use: counterplan explain --config {output})."
    gain, slowdown = report.heldout_gain, report.slowdown
    speed = "" if slowdown is None else f", {_speed(slowdown)}"
    if gain is None:
        said = "No held-out rows (--heldout 0): the tuned configuration is not compared with the default."
        return f"{said} {written if output else 'Nothing written.'}"
    measured = f"Held-out gain over the default: {gain:+.4f} objective{speed}"
    if report.beats_default:
        resumes = "the study resumes" if kept else "an in-memory --storage keeps no study to resume"
        then = written if output else f"Not written: run again with --output FILE to write it ({resumes})."
        return f"{measured}: better than the default (beyond {MEANINGFUL_GAIN:g}). {then}"
    judged = "as good" if gain >= -MEANINGFUL_GAIN else "better"
    said = f"{measured}: the default configuration is {judged} (a gain within {MEANINGFUL_GAIN:g} is noise)."
    return f"{said} {written if output else 'Keep the default; nothing written.'}"


def _speed(slowdown: float) -> str:
    """``3.6x slower``, ``2.0x faster`` or ``as fast``, for the tuned configuration."""
    if slowdown >= 1.05:
        return f"{slowdown:.1f}x slower"
    if slowdown <= 1 / 1.05:
        return f"{1 / slowdown:.1f}x faster"
    return "as fast"


def _check_counts(args: argparse.Namespace, usage: Any) -> None:
    """``--rows``, ``--heldout``, ``--trials``, ``--budget`` and ``--seed``, each named when it is wrong
    (the budget and the seed as the solver configuration they feed bounds them)."""
    from counterplan.planning.errors import InvalidInputError, ProblemError, echo  # noqa: PLC0415
    from counterplan.server.cli.bounds import check_seconds, check_seed  # noqa: PLC0415
    from counterplan.solver.batch.writer import check_writable_directory  # noqa: PLC0415
    from counterplan.solver.tuning import MAX_TRIALS, check_row_budget  # noqa: PLC0415 - after the check that optuna loads

    if args.rows < 1:
        raise usage(f"--rows must be at least 1, given {args.rows}")
    if args.heldout < 0:
        raise usage(f"--heldout must be at least 0, given {args.heldout}")
    if not 1 <= args.trials <= MAX_TRIALS:
        raise usage(f"--trials must be from 1 to {MAX_TRIALS:,}, given {args.trials:,}")
    check_seconds("--budget", args.budget, usage)
    try:
        check_row_budget(args.budget)
    except InvalidInputError as exc:
        raise usage(f"--budget {exc.problem}") from None
    check_seed("--seed", args.seed, usage)
    if args.output is not None:  # checked before minutes of trials
        try:
            check_writable_directory("output", Path(args.output))
        except ProblemError as exc:
            raise usage(f"--output: {exc.problem}") from None
        if _is_storage_file(Path(args.output), args.storage):
            output = echo(args.output)
            raise usage(f"--output: {output} is the --storage's database: writing it would destroy the study")


def _is_storage_file(output: Path, storage: str) -> bool:
    """Whether ``output`` names the SQLite file of the ``storage`` URL: the configuration written
    over it after the trials destroyed the study they were kept in (and the write failed with
    optuna's traceback)."""
    database = _sqlite_database(storage)
    if not database or _in_memory(storage):
        return False
    return Path(database).resolve() == output.resolve()


def _in_memory(storage: str) -> bool:
    """Whether ``storage`` is an SQLite database in memory (``sqlite://``, ``sqlite:///:memory:``):
    its study, and the trials, end with the command, so nothing resumes it."""
    database = _sqlite_database(storage)
    if database is None:
        return False
    return database in {"", ":memory:"} or database.startswith("file::memory:") or "mode=memory" in storage


def _sqlite_database(storage: str) -> str | None:
    """The database of an SQLite ``storage`` URL (``""`` for ``sqlite://``); None for another
    backend, or a URL that does not parse (the storage's own check names it)."""
    from sqlalchemy.engine import make_url  # noqa: PLC0415 - optuna's RDB storage brings it
    from sqlalchemy.exc import ArgumentError  # noqa: PLC0415

    try:
        url = make_url(storage)
    except (ArgumentError, ValueError):
        return None
    return (url.database or "") if url.get_backend_name() == "sqlite" else None


def _write_output(path: Path, text: str) -> None:
    """Write the best configuration; a file system that refuses it (a full disk, a removed
    directory) is one line, not a traceback after the trials: they are kept in the study."""
    from counterplan.server.cli.batch import OutputError  # noqa: PLC0415

    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise OutputError(
            f"--output: cannot write {str(path)!r}: {exc.strerror or exc}; the trials are kept in the study: "
            "run the same command with another --output to write its best configuration"
        ) from None


MAX_UNFIT_ROWS = 100
"""Rows the selection (:func:`_solvable_rows`) tries before it stops looking when none of them
could be used: a model that fails on every row would otherwise be asked about each row of a
large table, one call a row."""


@dataclass
class _Unfit:
    """The rows :func:`_solvable_rows` skipped: how many, and why the first was."""

    count: int = 0
    first: str = ""

    def skip(self, why: str) -> None:
        self.count += 1
        self.first = self.first or why


def _solvable_rows(explainer: Any, candidates: np.ndarray, wanted: int) -> tuple[list[Any], _Unfit]:
    """The problems of the first ``wanted`` candidate rows a solve can score, in order: a row whose
    problem cannot be built (an infinite value), whose original the model fails on (it raises, or
    gives no finite prediction: :func:`~counterplan.solver.tuning.checked_original`) or that meets
    the goal after all (a gap the selection could not judge) is skipped. Such a row stopped the
    whole run, with the model's traceback, in the first trial; which rows were chosen depends on
    ``--seed``, so the run failed or not by chance."""
    from counterplan.planning.errors import CounterplanError  # noqa: PLC0415
    from counterplan.solver.counterfactual import best_valid  # noqa: PLC0415
    from counterplan.solver.tuning import checked_original  # noqa: PLC0415

    problems: list[Any] = []
    unfit = _Unfit()
    for row in candidates:
        if len(problems) == wanted or (unfit.count >= MAX_UNFIT_ROWS and not problems):
            break
        try:
            problem = explainer.problem(int(row))
            met = best_valid(checked_original(problem))
        except CounterplanError as exc:
            unfit.skip(f"row {int(row)}: {exc}")
            continue
        if met:
            unfit.skip(f"row {int(row)} meets the goal")  # a gap the selection could not judge
        else:
            problems.append(problem)
    return problems, unfit


def _rows_missing_the_goal(explainer: Any, problem: Any, *, usage: Any) -> np.ndarray:
    """The rows of the explainer's data that miss the problem's goal, as each row's own solve
    decides it (:func:`~counterplan.solver.batch.rows.meeting_the_goal`: one call of the real
    model for the rows, whatever the model is, a served one too): the ones worth tuning on. A row
    that call cannot judge (a gap) is kept: its solve decides."""
    import numpy as np  # noqa: PLC0415

    from counterplan.planning.goals import ClassGoal  # noqa: PLC0415
    from counterplan.solver.batch.rows import meeting_the_goal  # noqa: PLC0415

    if len(problem.goals) != 1 or not isinstance(problem.goals[0].goal, ClassGoal):
        raise usage("--goal: tune takes one class goal")
    return np.flatnonzero(~meeting_the_goal(explainer, explainer.data))
