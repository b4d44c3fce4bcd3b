"""``counterplan explain``: one prediction explained with a counterfactual, in-process or on a server.

With no model and no data it explains the embedded demo: a loan model trained on data counterplan
generates, for a rejected applicant. With ``--server`` the same flags ask a counterplan server.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

# Only light modules at the top: --help and argument errors must answer at once. The command
# imports what it needs (scikit-learn, pandas, rich, grpc) when it runs.
from counterplan.server.cli.flags import EXIT_NOT_FOUND, UsageError, server_refusal
from counterplan.server.cli.local_model import MODEL_HELP, add_served_model_flags, served_flags_given
from counterplan.server.cli.problem_flags import add_problem_flags, add_search_flags

if TYPE_CHECKING:
    from counterplan.planning.spec import ProblemSpec
    from counterplan.solver.core.config import SolverConfig
    from counterplan.solver.counterfactual import CounterfactualSolver


def add_parser(commands: Any) -> None:
    """``counterplan explain``: its flags in the order ``--help`` shows them."""
    explain = commands.add_parser(
        "explain",
        help="find the smallest actionable change that reaches a goal",
        description="Explain one prediction with a counterfactual. With no arguments: the embedded demo loan model.",
    )
    add_input_flags(explain, what="explain")
    add_problem_flags(explain)
    explain.add_argument(
        "-k",
        "--num-counterfactuals",
        type=int,
        default=1,
        metavar="K",
        help="return K distinct valid answers (default 1)",
    )
    add_search_flags(explain)
    explain.add_argument("--json", action="store_true", help="print the result as JSON")
    add_server_flags(explain, what="explain")


def add_input_flags(parser: argparse.ArgumentParser, *, what: str) -> None:
    """What to ask about: the model, its data and the row (``explain`` and ``plan``)."""
    group = parser.add_argument_group("the model and the row")
    group.add_argument("--model", help=MODEL_HELP + "; default: the embedded demo")
    group.add_argument("--trust-model", action="store_true", help="load skops types not trusted by default")
    add_served_model_flags(group)
    group.add_argument("--data", help="CSV of training data: domains and statistics are inferred from it")
    group.add_argument("--target", help="label column of --data, left out of the features")
    group.add_argument("--row", type=int, help=f"row of --data to {what} (0-based)")
    group.add_argument("--instance", help="the instance as a JSON object, or @file.json (instead of --row)")


def add_server_flags(parser: argparse.ArgumentParser, *, what: str) -> None:
    """Ask a counterplan server instead of this process (``explain`` and ``plan``)."""
    group = parser.add_argument_group("on a server")
    group.add_argument("--server", metavar="HOST:PORT", help=f"{what} on a counterplan server instead of in-process")
    group.add_argument("--model-id", default="loan-demo", help="the served model's id (default loan-demo)")
    group.add_argument("--token", help="bearer token")
    group.add_argument("--tls-ca", help="CA certificate (PEM) to dial with TLS")


def run(args: argparse.Namespace) -> int:
    """Run ``counterplan explain``; returns the exit code."""
    if args.num_counterfactuals < 1:
        raise UsageError(f"-k must be at least 1, given {args.num_counterfactuals}")
    return _explain_remote(args) if args.server else _explain(args)


def _explain(args: argparse.Namespace) -> int:
    from rich.console import Console  # noqa: PLC0415 - each command loads what it needs

    from counterplan.server.cli.interrupt import Interrupted, stop_on_interrupt  # noqa: PLC0415
    from counterplan.server.cli.problem_flags import problem_spec, solver_config  # noqa: PLC0415
    from counterplan.server.cli.render import interrupted_line, print_result, progress_line  # noqa: PLC0415
    from counterplan.solver.result import BestSolutionEvent  # noqa: PLC0415

    spec, config = problem_spec(args), solver_config(args)  # every flag checked before a file is read
    solver = _solver(args, spec, config)
    err = Console(stderr=True)
    show_progress = not args.no_progress and not args.json and err.is_terminal
    with stop_on_interrupt(solver.terminate_early) as interrupt:  # Ctrl-C: the best so far, in one line
        if show_progress:
            with err.status("searching...") as status:

                def update(event: BestSolutionEvent) -> None:
                    status.update(progress_line(event))

                solver.add_listener(update)
                result = solver.solve()
        else:
            result = solver.solve()
    if interrupt.requested:
        raise Interrupted(interrupted_line(result))
    if args.json:
        print(result.model_dump_json(indent=2))
    else:
        print_result(result, Console())
    return 0 if result.valid else EXIT_NOT_FOUND


def _solver(args: argparse.Namespace, spec: ProblemSpec, config: SolverConfig) -> CounterfactualSolver:
    """The row's solver: the flags' spec over the model's explainer (the demo's own rules, or
    none beyond the data's), as the server lays a request over a served model's."""
    from counterplan.server.cli.local_model import asked_row, local_explainer  # noqa: PLC0415
    from counterplan.server.cli.problem_flags import flag_errors  # noqa: PLC0415

    explainer = local_explainer(args, spec, config, engine=args.engine)
    row = asked_row(args, explainer)
    with flag_errors():
        return explainer.solver(row, seed=args.seed, num_counterfactuals=args.num_counterfactuals)


def _explain_remote(args: argparse.Namespace) -> int:
    import grpc  # noqa: PLC0415 - grpc loads only when a server is named

    from counterplan.server.cli.remote import explain_remote  # noqa: PLC0415
    from counterplan.server.grpc.client import CounterplanClient  # noqa: PLC0415

    local = {"--model": args.model, "--data": args.data, "--row": args.row, "--target": args.target}
    given = [flag for flag, value in local.items() if value is not None] + served_flags_given(args)
    if given or args.trust_model:
        flags = ", ".join(given + ["--trust-model"] * args.trust_model)
        raise UsageError(
            f"{flags}: with --server, the model and its data are the server's: use --model-id and --instance"
        )
    try:
        with CounterplanClient(args.server, token=args.token, root_certificate=args.tls_ca) as client:
            return explain_remote(client, args)
    except grpc.RpcError as exc:
        raise server_refusal(exc) from None
