"""The ``counterplan`` command line: the same engine as the Python API, seen from a terminal.

``counterplan explain`` with no arguments explains the embedded demo: a loan model trained on
data counterplan generates, for a rejected applicant. With arguments it explains a row of your
own model and data. Bad arguments print one line and exit with code 2. Each command is a module
of this package (``add_parser`` and ``run``); this one only parses and dispatches.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
from collections.abc import Sequence

# Only light modules at the top: this module is the console script's entry point, whose import is
# outside any handler (a Ctrl-C while it loads printed Python's traceback), and --help and argument
# errors must answer at once. The commands' modules load in main's handler, and each command imports
# what it needs (scikit-learn, pandas, rich, grpc, optuna) when it runs.
from counterplan.planning.errors import TEXT_CHARS, CounterplanError, RemoteModelError, one_line
from counterplan.server.cli import interrupt
from counterplan.server.cli.flags import Parser, UsageError

EXIT_USAGE = 2
EXIT_FAILED = 1


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    from counterplan.server.cli import audit, batch, explain, kserve, plan, serve, tune  # noqa: PLC0415 - see above

    parser = Parser(prog="counterplan", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    explain.add_parser(commands)
    tune.add_parser(commands)
    batch.add_parser(commands)
    audit.add_parser(commands)
    plan.add_parser(commands)
    serve.add_parser(commands)
    kserve.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code. A Ctrl-C is one line from the moment this module
    has loaded: while the commands' modules load (a tenth of a second), the flags are read, the
    logging loads (structlog and rich, a few tenths more) or the command runs."""
    left_before: set[threading.Thread] = set()
    try:
        return _run(argv, left_before)
    except KeyboardInterrupt as exc:  # Ctrl-C: one line (what the command had), never a traceback
        code = interrupt.report(exc)
        _exit_past_threads_left(code, left_before)
        return code


def _run(argv: Sequence[str] | None, left_before: set[threading.Thread]) -> int:
    """Parse the flags and run the command; ``left_before`` gets the threads an earlier command in
    this process left (a test's): they are not this one's."""
    from counterplan.server.cli import audit, batch, explain, kserve, plan, serve, tune  # noqa: PLC0415 - see above

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        from counterplan.server.logs import configure_console_logs  # noqa: PLC0415 - after parsing: --help stays fast

        configure_console_logs()
        from counterplan.solver.core.abandoned import alive  # noqa: PLC0415 - after parsing, as the logs

        left_before.update(alive())
        if args.command == "serve":  # the servers stop on SIGTERM their own way (a grace)
            return serve.run(args)
        if args.command == "kserve":
            return kserve.run(args)
        with interrupt.terminate_as_interrupt():  # SIGTERM keeps what the command has, as Ctrl-C
            if args.command == "explain":
                return explain.run(args)
            if args.command == "tune":
                return tune.run(args, UsageError)
            if args.command == "batch":
                return batch.run(args, UsageError)
            if args.command == "audit":
                return audit.run(args, UsageError)
            if args.command == "plan":
                return plan.run(args, UsageError)
    except CounterplanError as exc:  # one line of at most 1 KB, whatever the input it quotes
        code = EXIT_USAGE if isinstance(exc, ValueError) and not _unavailable(exc) else EXIT_FAILED
        parser.exit(code, f"counterplan: error: {one_line(str(exc), TEXT_CHARS)}\n")
    return EXIT_USAGE


def _unavailable(error: CounterplanError) -> bool:
    """A served model that is down or too slow is a failure to try again (exit 1, as a
    counterplan server that is down), not a bad argument (2) as a wrong address or model name is."""
    return isinstance(error, RemoteModelError) and error.unavailable


def _exit_past_threads_left(code: int, left_before: set[threading.Thread]) -> None:
    """End the process now, with ``code``, when the stopped command left threads it could not stop
    (:mod:`counterplan.solver.core.abandoned`: a batch row inside a model call that never returns;
    ``left_before``: those an earlier command in this process left): the interpreter's exit would
    wait for them for good, a thread pool joining its threads. What the command had is written
    and reported by then; only the output streams are flushed."""
    from counterplan.solver.core.abandoned import alive  # noqa: PLC0415

    if not set(alive()) - left_before:
        return
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
