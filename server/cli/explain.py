"""``counterplan explain``: one prediction explained with a counterfactual, in-process or on a server.

With no model and no data it explains the embedded demo: a loan model trained on data counterplan
generates, for a rejected applicant. With ``--server`` the same flags ask a counterplan server.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

# Only light modules at the top: --help and argument errors must answer at once. The command
# imports what it needs (scikit-learn, pandas, rich, grpc) when it runs.
from counterplan.planning.errors import CounterplanError
from counterplan.server.cli.flags import (
    EXIT_NOT_FOUND,
    UsageError,
    checked_limits,
    feature_overrides,
    fill_missing_columns,
    with_margin,
)
from counterplan.server.cli.help_text import GOAL_HELP

if TYPE_CHECKING:
    from counterplan.planning.distance import DistanceSettings
    from counterplan.planning.goals import ClassGoal, RangeGoal, ValueGoal
    from counterplan.planning.problem import CounterfactualProblem


class RemoteError(CounterplanError):
    """The server refused or failed the request (exit code 1)."""


def add_parser(commands: Any) -> None:
    """Add ``explain`` to the command line's subcommands."""
    _add_explain_parser(commands)


def run(args: argparse.Namespace) -> int:
    """Run ``counterplan explain``; returns the exit code."""
    return _explain_remote(args) if args.server else _explain(args)


def _add_explain_parser(commands: Any) -> None:
    """``counterplan explain``: its flags in the order ``--help`` shows them."""
    explain = commands.add_parser(
        "explain",
        help="find the smallest actionable change that reaches a goal",
        description="Explain one prediction with a counterfactual. With no arguments: the embedded demo loan model.",
    )
    _add_input_flags(explain)
    _add_answer_flags(explain)
    _add_run_flags(explain)


def _add_input_flags(parser: argparse.ArgumentParser) -> None:
    """What to explain: the model, the data and the row, and the goal."""
    parser.add_argument(
        "--model",
        help="fitted scikit-learn model (.skops or .joblib; an optbinning Scorecard as .joblib), or a "
        "scorecard's points table (.yaml, .json or .csv)",
    )
    parser.add_argument("--trust-model", action="store_true", help="load skops types not trusted by default")
    parser.add_argument("--data", help="CSV of training data: domains and statistics are inferred from it")
    parser.add_argument("--row", type=int, help="row of --data to explain (0-based)")
    parser.add_argument("--instance", help="the instance as a JSON object, or @file.json")
    parser.add_argument("--target", help="label column of --data, left out of the features")
    parser.add_argument(
        "--immutable", action="append", default=[], metavar="COLUMNS", help="comma-separated columns never to change"
    )
    parser.add_argument("--goal", action="append", default=[], help=GOAL_HELP)


def _add_answer_flags(parser: argparse.ArgumentParser) -> None:
    """What counts as an answer: the distance, the engine, the features' rules and the limits."""
    parser.add_argument(
        "--distance",
        choices=["auto", "mad_l1", "range_l1", "sd_squared", "scorecard"],
        default="auto",
        help="feature distance (default auto: MAD-scaled when the data gives every mutable number a MAD); "
        "scorecard: the scorecard paper's objective, --alpha x WoE proximity + --beta x closeness to the data",
    )
    parser.add_argument("--alpha", type=float, default=1.0, help="scorecard distance: weight of proximity")
    parser.add_argument("--beta", type=float, default=1.0, help="scorecard distance: weight of closeness")
    parser.add_argument(
        "--engine",
        choices=["local", "exact", "swarm", "auto"],
        help="local search (the default), the exact engine (a proven optimum for linear models and tree "
        "ensembles; needs counterplan[exact]), the particle swarm (MD-PSO, for many features), or auto "
        "(chosen by the model and the number of features; the answer says which and why)",
    )
    parser.add_argument(
        "--margin",
        type=float,
        metavar="M",
        help="a class goal is met only M past its threshold (default 0.005: 0.7 means at least 0.705)",
    )
    parser.add_argument(
        "--fill-missing",
        action="append",
        default=[],
        metavar="COLUMNS",
        help="comma-separated columns (or 'all') whose missing instance value the search may fill in",
    )
    parser.add_argument(
        "--categorical",
        action="append",
        default=[],
        metavar="COLUMNS",
        help="comma-separated numeric columns that hold category codes (0..k), not quantities",
    )
    parser.add_argument(
        "--precision",
        action="append",
        default=[],
        metavar="NAME=DECIMALS",
        help="decimals of a float's proposed values (default: as the data has them): ratio=2",
    )
    parser.add_argument(
        "-k", "--num-counterfactuals", type=int, default=1, metavar="K", help="return K distinct valid answers"
    )
    parser.add_argument(
        "--monotone",
        action="append",
        default=[],
        metavar="NAME=DIR",
        help="NAME may only increase or decrease (categories along their order): income=increase",
    )
    parser.add_argument("--cost", action="append", default=[], metavar="NAME=W", help="weight of a change to NAME")
    parser.add_argument(
        "--allowed",
        action="append",
        default=[],
        metavar="NAME=V1,V2,...",
        help="a number may only change to these values: loan_amount=10000,20000,30000",
    )
    parser.add_argument("--max-changes", type=int, metavar="N", help="change at most N features")
    parser.add_argument(
        "--change-penalty",
        type=float,
        default=0.0,
        metavar="P",
        help="add P (in distance units) per changed feature: larger P, fewer changes (default 0)",
    )
    parser.add_argument(
        "--plausible", action="store_true", help="only answers near real rows of the desired class (needs data)"
    )
    parser.add_argument(
        "--trust-region",
        action="store_true",
        help="answers in the convex hull of the data's rows with the target outcome (needs --target)",
    )
    parser.add_argument("--trust-nearest", type=int, metavar="K", help="trust region: only the K rows nearest the row")
    parser.add_argument(
        "--trust-slack",
        type=float,
        metavar="S",
        help="trust region: allowed L1 distance outside the hull (range-scaled)",
    )


def _add_run_flags(parser: argparse.ArgumentParser) -> None:
    """How the search runs and reports, in-process or on a server."""
    parser.add_argument("--config", help="solver configuration file (YAML or JSON)")
    parser.add_argument("--seed", type=int, help="random seed (default: the config's)")
    parser.add_argument("--time-limit", type=float, metavar="SECONDS", help="cap the search time")
    parser.add_argument(
        "--threads",
        type=int,
        metavar="N",
        help="native (OpenMP/BLAS) threads per model call (default 1: the search already batches)",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--no-progress", action="store_true", help="no live best-score display")
    parser.add_argument("--server", metavar="HOST:PORT", help="explain on a counterplan server instead of in-process")
    parser.add_argument("--model-id", default="loan-demo", help="with --server: the served model's id")
    parser.add_argument("--token", help="with --server: bearer token")
    parser.add_argument("--tls-ca", help="with --server: CA certificate (PEM) to dial with TLS")


def _explain(args: argparse.Namespace) -> int:
    from rich.console import Console  # noqa: PLC0415 - each command loads what it needs

    from counterplan.server.cli.interrupt import Interrupted, stop_on_interrupt  # noqa: PLC0415
    from counterplan.server.cli.render import interrupted_line, print_result, progress_line  # noqa: PLC0415
    from counterplan.solver.core.config import SolverConfig, TerminationConfig  # noqa: PLC0415
    from counterplan.solver.counterfactual import CounterfactualSolver  # noqa: PLC0415
    from counterplan.solver.result import BestSolutionEvent  # noqa: PLC0415

    problem = _problem(args)
    config = SolverConfig.load(args.config) if args.config else SolverConfig()
    if args.threads is not None:  # checked with the other flags in _problem
        config = config.model_copy(update={"model_threads": args.threads})
    if args.time_limit is not None:  # checked with the other flags in _problem
        config = config.model_copy(
            update={
                "termination": TerminationConfig(spent_limit_seconds=args.time_limit, children=(config.termination,))
            }
        )
    solver = CounterfactualSolver(problem, config, args.seed, args.num_counterfactuals, args.engine)
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


def _explain_remote(args: argparse.Namespace) -> int:
    import grpc  # noqa: PLC0415 - grpc loads only when a server is named

    from counterplan.server.cli.remote import explain_remote  # noqa: PLC0415
    from counterplan.server.grpc.client import CounterplanClient  # noqa: PLC0415

    local = {"--model": args.model, "--data": args.data, "--row": args.row, "--target": args.target}
    given = [flag for flag, value in local.items() if value is not None]
    if given or args.trust_model:
        flags = ", ".join(given + ["--trust-model"] * args.trust_model)
        raise UsageError(
            f"{flags}: with --server, the model and its data are the server's: use --model-id and --instance"
        )
    try:
        with CounterplanClient(args.server, token=args.token, root_certificate=args.tls_ca) as client:
            return explain_remote(client, args)
    except grpc.RpcError as exc:
        code = exc.code()
        detail = exc.details()
        raise RemoteError(f"server said {code.name}: {detail}") from None


def _problem(args: argparse.Namespace) -> CounterfactualProblem:
    from counterplan.planning.distance import DistanceSettings  # noqa: PLC0415
    from counterplan.planning.models import adapt_sklearn  # noqa: PLC0415
    from counterplan.server.cli.bounds import validation_problem  # noqa: PLC0415
    from counterplan.server.cli.goal_text import parse_goal_text  # noqa: PLC0415
    from counterplan.server.registry.loading import load_csv, load_instance, load_model  # noqa: PLC0415
    from counterplan.solver.explainer import Explainer  # noqa: PLC0415

    immutable = [name.strip() for item in args.immutable for name in item.split(",") if name.strip()]
    goals = with_margin([parse_goal_text(text) for text in args.goal], args.margin)
    max_changes, penalty = checked_limits(args)
    try:
        distance = DistanceSettings(metric=args.distance, change_penalty=penalty, alpha=args.alpha, beta=args.beta)
    except ValueError as exc:
        raise UsageError(f"--alpha/--beta: {validation_problem(exc)}") from None
    if args.model is None and args.data is None:
        if args.row is not None or args.target is not None:
            raise UsageError("--row and --target need --model and --data")
        from counterplan.planning.demo import demo_goals  # noqa: PLC0415 - the demo's own default question

        return _demo_problem(args, goals or with_margin(demo_goals(), args.margin), immutable, distance, max_changes)
    if args.model is None or args.data is None:
        raise UsageError("give both --model and --data (or neither, for the demo)")
    if (args.row is None) == (args.instance is None):
        raise UsageError("give exactly one of --row and --instance")
    data = load_csv(args.data)
    model = load_model(args.model, trust=args.trust_model)
    instance: Any = args.row if args.row is not None else load_instance(args.instance)
    adapter = adapt_sklearn(model, args.target or "prediction")
    if args.row is not None and not 0 <= args.row < len(data):
        raise UsageError(f"--row: row {args.row} is outside the data's {len(data)} rows")
    explainer = Explainer(  # the same object the batch command uses: the data read once
        adapter,
        data,
        goals or None,  # None: the class the model does not predict now, asked once the row is checked
        target=args.target,
        immutable=immutable,
        distance=distance,
        columns=_model_columns(model, data, args.target),
        check=False,  # the row itself is checked next
        **_actionability(args, max_changes),
    )
    problem = explainer.problem(instance)
    if not goals and args.margin is not None:
        problem = problem.with_goals(with_margin([bound.goal for bound in problem.goals], args.margin))
    return problem


def _actionability(args: argparse.Namespace, max_changes: int | None) -> dict[str, Any]:
    """``overrides``, ``max_changed_features`` and ``plausibility`` from the (checked) flags."""
    from counterplan.planning.plausibility import PlausibilitySettings  # noqa: PLC0415

    return {
        "overrides": feature_overrides(args),
        "max_changed_features": max_changes,
        "plausibility": PlausibilitySettings() if args.plausible else None,
        "trust_region": trust_region_settings(args),
        "fill_missing": fill_missing_columns(args),
    }


def _demo_problem(
    args: argparse.Namespace,
    goals: list[ClassGoal | ValueGoal | RangeGoal],
    immutable: list[str],
    distance: DistanceSettings,
    max_changes: int | None,
) -> CounterfactualProblem:
    from counterplan.planning import demo  # noqa: PLC0415 - trains a model: only when the demo is asked for
    from counterplan.planning.problem import CounterfactualProblem  # noqa: PLC0415
    from counterplan.server.registry.loading import load_instance  # noqa: PLC0415

    data = demo.make_loan_data()
    model = demo.train_loan_model(data)
    instance: Any = demo.rejected_applicant() if args.instance is None else load_instance(args.instance)
    return CounterfactualProblem.from_dataframe(
        data,
        instance,
        model,
        goals,
        target=demo.TARGET,
        immutable=list(dict.fromkeys([*demo.IMMUTABLE, *immutable])),  # the served demo's: its own, and more
        distance=distance,
        **_actionability(args, max_changes),
    )


def trust_region_settings(args: argparse.Namespace) -> Any:
    """The trust region the flags ask for (``--trust-nearest``/``--trust-slack`` imply it), or None."""
    from counterplan.planning.trust_region import TrustRegionSettings  # noqa: PLC0415
    from counterplan.server.cli.bounds import validation_problem  # noqa: PLC0415

    if not (args.trust_region or args.trust_nearest is not None or args.trust_slack is not None):
        return None
    fields: dict[str, Any] = {}
    if args.trust_nearest is not None:
        fields["nearest"] = args.trust_nearest
    if args.trust_slack is not None:
        fields["slack"] = args.trust_slack
    try:
        return TrustRegionSettings(**fields)
    except ValueError as exc:
        raise UsageError(f"--trust-nearest/--trust-slack: {validation_problem(exc)}") from None


def _model_columns(model: Any, data: Any, target: str | None) -> list[str] | None:
    from counterplan.planning.scorecard import PointsTable, is_optbinning_scorecard  # noqa: PLC0415

    if isinstance(model, PointsTable) or is_optbinning_scorecard(model):
        return None  # a scorecard reads its own variables
    names = getattr(model, "feature_names_in_", None)
    if names is not None:
        return [str(n) for n in names]
    return [str(c) for c in data.columns if c != target]
