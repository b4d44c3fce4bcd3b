"""``counterplan plan``: the Pareto front of action plans for one row, as a table and numbered steps.

The actions come from a YAML (or JSON) file read within the configuration reader's limits
(``counterplan.planning.safe_yaml``) and checked against the row's features
(:class:`counterplan.planning.actions.ActionSet`); a bad action is refused naming its field, before any search.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
from collections.abc import Callable
from typing import Any

from counterplan.server.cli.explain import add_input_flags, add_server_flags
from counterplan.server.cli.flags import EXIT_NOT_FOUND, server_refusal
from counterplan.server.cli.interrupt import Interrupted, stop_on_interrupt
from counterplan.server.cli.local_model import served_flags_given
from counterplan.server.cli.problem_flags import add_problem_flags, add_search_flags

DEMO_ID = "loan-demo"
"""The served demo model's id (``counterplan.server.registry.registry.DEMO_ID``, not imported:
``--help`` stays fast)."""

PLANS_SHOWN = 10
"""Plans printed step by step at most (``--json`` gives them all)."""
NOT_FOR_PLANS = ("--cost", "--change-penalty", "--distance", "--alpha", "--beta")
"""The question's flags a plan has no use for: its objectives are its own (the actions' costs,
the Gower distance, the steps per feature)."""


def add_parser(commands: Any) -> None:
    """The ``plan`` subcommand's flags."""
    plan = commands.add_parser(
        "plan",
        help="ordered actions with their costs that reach a goal (consequence-aware plans)",
        description="Find the Pareto front of action plans (cost against distance and touched features) that "
        "take one row of --data (or --instance) to the goal, with the actions of --actions (a YAML file; see "
        "examples/adult-actions.yaml). Without --model and --data: the embedded demo's applicant and its "
        "actions (examples/loan-demo-actions.yaml). With --server: planned by a counterplan server. "
        "Needs counterplan[plans].",
    )
    add_input_flags(plan, what="plan for")
    plan.add_argument("--actions", help="the actions and cost graph (YAML or JSON); the demo has its own")
    add_problem_flags(plan, leave_out=NOT_FOR_PLANS)
    group = add_search_flags(plan, leave_out=("--engine", "--config", "--auto-budget", "--auto-improve"))
    group.add_argument(
        "--population",
        type=int,
        default=500,
        help="genomes per generation (default 500; its elites, at most half as many, come on top)",
    )
    group.add_argument("--generations", type=int, default=150, help="generations (default 150)")
    plan.add_argument("--json", action="store_true", help="every plan with its steps and the state after each")
    add_server_flags(plan, what="plan")


def run(args: argparse.Namespace, usage: Callable[[str], Exception]) -> int:
    """Check the flags and the actions, search (here or on a server), print; 0 with a valid plan, 3 without."""
    from counterplan.server.cli.problem_flags import problem_spec  # noqa: PLC0415

    config = _config(args, usage)
    spec = problem_spec(args)
    if importlib.util.find_spec("pymoo") is None and args.server is None:
        raise usage("plans need pymoo: pip install 'counterplan[plans]'")
    if args.server is not None:
        result, label = _remote(args, spec, config, usage), _remote_label(args)
    else:
        solver, label = _local(args, spec, config, usage)
        with stop_on_interrupt(solver.terminate_early) as interrupt:  # Ctrl-C: the front so far, in one line
            result = _solve(args, solver)
        if interrupt.requested:
            raise Interrupted(_so_far(result))
    if args.json:
        print(result.model_dump_json(indent=2))
    else:
        _print(result, label)
    return 0 if result.cheapest is not None or result.already_met else EXIT_NOT_FOUND


SEARCH_FLAGS = {
    "population": "--population",
    "generations": "--generations",
    "step_count_limit": "--generations",
    "time_limit_seconds": "--time-limit",
    "spent_limit_seconds": "--time-limit",
    "random_seed": "--seed",
    "model_threads": "--threads",
}
"""The search's settings by the flag that gives them (under the solver's names too, a nested
termination's included): an error names the flag."""


def _config(args: argparse.Namespace, usage: Callable[[str], Exception]) -> Any:
    """The search's settings from the flags (the generations and the time limit are its
    termination), a bad one refused naming its flag."""
    from counterplan.server.cli.bounds import check_seconds, check_seed  # noqa: PLC0415
    from counterplan.solver.core.config import ConfigError  # noqa: PLC0415
    from counterplan.solver.plans.search import PlanConfig, plan_termination  # noqa: PLC0415

    check_seconds("--time-limit", args.time_limit, usage)
    check_seed("--seed", args.seed, usage)
    fields = {"random_seed": args.seed, "model_threads": args.threads}
    try:
        termination = plan_termination(args.generations, time_limit_seconds=args.time_limit)
        given = {k: v for k, v in fields.items() if v is not None}
        return PlanConfig(population=args.population, termination=termination, **given)
    except ConfigError as exc:  # each bad field by its flag (ConfigError.parts)
        named = [f"{SEARCH_FLAGS.get(field.rsplit('.', 1)[-1], field)}: {problem}" for field, problem in exc.parts]
        raise usage("; ".join(named)) from None


def _actions(args: argparse.Namespace, demo: bool, usage: Callable[[str], Exception]) -> Any:
    """The ``--actions`` file checked as data, or the demo's own actions."""
    from counterplan.planning.actions import ActionSet  # noqa: PLC0415
    from counterplan.planning.errors import echo  # noqa: PLC0415
    from counterplan.planning.safe_yaml import ConfigTextError, load_config_text, read_config_file  # noqa: PLC0415

    if args.actions is None:
        if not demo:
            raise usage("--actions: give the actions file (only the demo has its own actions)")
        from counterplan.planning.demo import DEMO_ACTIONS  # noqa: PLC0415

        return ActionSet.from_data(DEMO_ACTIONS)
    try:
        text = read_config_file(args.actions)
    except ConfigTextError as exc:  # a named pipe, a device, a file past the cap: not read
        raise usage(f"--actions: {echo(args.actions)}: {exc.problem}") from None
    except OSError as exc:
        raise usage(f"--actions: cannot read {echo(args.actions)}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:  # a binary file: a ValueError, not an OSError
        raise usage(f"--actions: {echo(args.actions)} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        return ActionSet.from_data(load_config_text(text))
    except ConfigTextError as exc:
        raise usage(f"--actions: {exc.problem}") from None


def _local(args: argparse.Namespace, spec: Any, config: Any, usage: Callable[[str], Exception]) -> tuple[Any, str]:
    """The row's problem (the flags' spec over the model's explainer, as explain builds it) and
    its plan solver in this process; the solver, and the prediction its goal follows, in words."""
    from counterplan.server.cli.local_model import asked_row, is_demo, local_explainer  # noqa: PLC0415
    from counterplan.server.cli.problem_flags import flag_errors  # noqa: PLC0415
    from counterplan.server.cli.render import prediction_label  # noqa: PLC0415
    from counterplan.solver.plans.planner import PlanSolver  # noqa: PLC0415

    for flag, value in (("--model-id", args.model_id if args.model_id != DEMO_ID else None), ("--token", args.token)):
        if value is not None:
            raise usage(f"{flag} needs --server")
    explainer = local_explainer(args, spec)
    row = asked_row(args, explainer)
    actions = _actions(args, is_demo(args), usage)
    with flag_errors():
        problem = explainer.problem(row)
    actions.compile(problem.space)  # a bad action is refused before the search
    first = problem.goals[0]  # the goal whose prediction each step reports
    return PlanSolver(problem, actions, config=config), prediction_label(first.goal, first.output.name)


def _solve(args: argparse.Namespace, solver: Any) -> Any:
    """Run the plan search, each changed front on a live line when stderr is a terminal."""
    from rich.console import Console  # noqa: PLC0415

    err = Console(stderr=True)
    if args.no_progress or args.json or not err.is_terminal:
        return solver.solve()
    with err.status("planning...") as status:

        def update(event: Any) -> None:
            front = event.front
            size = len(front.objectives) if front is not None else 0
            cheapest = f", cheapest {front.objectives[:, 0].min():.2f}" if size else ""
            status.update(f"generation {event.step_index}: {size} plans on the front{cheapest}")

        solver.add_listener(update)
        return solver.solve()


def _remote(args: argparse.Namespace, spec: Any, config: Any, usage: Callable[[str], Exception]) -> Any:
    """Send the plan to ``--server`` (streaming, with a live line on a terminal); the result as a local one."""
    import grpc  # noqa: PLC0415 - grpc loads only when a server is named

    from counterplan.planning.errors import CounterplanError  # noqa: PLC0415
    from counterplan.server.cli.problem_flags import flag_errors  # noqa: PLC0415
    from counterplan.server.cli.remote import remote_instance  # noqa: PLC0415
    from counterplan.server.grpc.client import CounterplanClient  # noqa: PLC0415
    from counterplan.server.grpc.plan_convert import plan_result  # noqa: PLC0415

    local = {"--model": args.model, "--data": args.data, "--row": args.row, "--target": args.target}
    given = [flag for flag, value in local.items() if value is not None] + served_flags_given(args)
    if given:
        raise usage(f"{', '.join(given)}: with --server, the model and its data are the server's: use --model-id")
    if args.threads is not None:
        raise usage("--threads sets this process's model threads; a server's are set by serve --model-threads")
    instance = remote_instance(args)
    with flag_errors():
        request = CounterplanClient.plan_request(
            args.model_id,
            instance,
            _actions(args, args.model_id == DEMO_ID, usage),
            seed=config.random_seed,
            population=config.population,
            generations=args.generations,
            spec=spec,
        )
    if args.time_limit is not None:
        request.search.time_limit_seconds = args.time_limit
    try:
        final = _streamed_result(args, request)
    except grpc.RpcError as exc:
        raise server_refusal(exc, usage) from None
    if final is None:
        raise CounterplanError("the server ended the stream without a result")
    return plan_result(final)


def _remote_label(args: argparse.Namespace) -> str:
    """The prediction a served plan's goal follows, in words: from --goal, or the demo's goal; a
    served model's own default goal is not known here."""
    from counterplan.server.cli.goal_text import parse_goal_text  # noqa: PLC0415
    from counterplan.server.cli.render import prediction_label  # noqa: PLC0415

    if args.goal:
        goal = parse_goal_text(args.goal[0])
        return prediction_label(goal, goal.output)
    if args.model_id == DEMO_ID:
        from counterplan.planning.demo import TARGET, demo_goals  # noqa: PLC0415

        return prediction_label(demo_goals()[0], TARGET)
    return "goal's predicted probability or value"


def _streamed_result(args: argparse.Namespace, request: Any) -> Any:
    """The server's final ``PlanResponse`` for ``request`` (None if the stream ended without one),
    each changed front shown on a live line when stderr is a terminal."""
    from rich.console import Console  # noqa: PLC0415

    from counterplan.server.grpc.client import CounterplanClient  # noqa: PLC0415

    err = Console(stderr=True)
    live = not args.no_progress and not args.json and err.is_terminal
    final = None
    with (
        CounterplanClient(args.server, token=args.token, root_certificate=args.tls_ca) as client,
        err.status("planning...") if live else contextlib.nullcontext() as status,
    ):
        for message in client.plan_stream(request, timeout=None):
            if message.HasField("result"):
                final = message.result
            elif status is not None and message.front:
                status.update(
                    f"generation {message.generation}: {message.front_size} plans, cheapest {message.front[0].cost:.2f}"
                )
    return final


def _so_far(result: Any) -> str:
    """An interrupted plan search's line: the cheapest valid plan found by then, or none yet."""
    if result.already_met:
        return "the goal is already met: no action is needed"
    cheapest = result.cheapest
    if cheapest is None:
        return f"no plan yet (after {result.generations} generations)"
    from counterplan.planning.errors import one_line  # noqa: PLC0415

    steps = " -> ".join(s.action for s in cheapest.steps)
    return one_line(
        f"best so far after {result.generations} generations: {result.front_size} plans on the front, "
        f"the cheapest (cost {cheapest.total_cost:.2f}): {steps}"
    )


def _print(result: Any, label: str) -> None:
    """The front as a table, then each plan as numbered steps; ``label`` names the prediction each
    step reports (``probability of approved = 1``)."""
    from rich.console import Console  # noqa: PLC0415
    from rich.markup import escape  # noqa: PLC0415
    from rich.table import Table  # noqa: PLC0415

    from counterplan.server.cli.render import GOWER_NOTE, format_value, goal_line  # noqa: PLC0415

    console = Console()
    console.print(goal_line(result.goal, result.goal_default), markup=False, soft_wrap=True)
    if result.already_met:
        console.print(
            f"The goal is already met ({label}: {result.original_prediction:.3f}): no action is needed.",
            markup=False,
            soft_wrap=True,
        )
        return
    if not result.plans:
        console.print("No plan reaches the goal with these actions.", style="yellow")
        if result.failure:
            console.print(f"The model failed: {result.failure}", markup=False)
        _print_unpriced(result, console)  # why the front is empty may be the actions' costs, not the model
        return
    table = Table(title=f"{len(result.plans)} plans on the Pareto front (cheapest first)")
    for column in ("#", "actions in order", "cost", "distance (Gower)"):
        table.add_column(column, justify="left" if column == "actions in order" else "right")
    for i, p in enumerate(result.plans, 1):
        actions = escape(" -> ".join(s.action for s in p.steps))  # names from the caller's actions
        table.add_row(str(i), actions, f"{p.total_cost:.2f}", f"{p.distance:.3f}")
    console.print(table)
    if result.front_size > len(result.plans):  # stopped with a front too large to lay out in time
        console.print(
            f"Stopped: the cheapest {len(result.plans)} of the {result.front_size} plans on the front are laid out, "
            "the rest are not.",
            markup=False,
            soft_wrap=True,
        )
    _print_unpriced(result, console)
    console.print(GOWER_NOTE.format(features=len(result.original)), markup=False)
    console.print(f"Before any action: the {label} is {result.original_prediction:.3f}.", markup=False)
    for i, p in enumerate(result.plans[:PLANS_SHOWN], 1):
        console.print(f"\nPlan {i}: cost {p.total_cost:.2f}, distance {p.distance:.3f}", markup=False)
        for t, step in enumerate(p.steps, 1):
            flip = "  <- the goal is met" if step.goal_met else ""
            also = "".join(
                f", {name} {format_value(old)} -> {format_value(new)}" for name, (old, new) in step.consequences.items()
            )
            console.print(
                f"  {t}. {step.action}: {step.feature} {format_value(step.before)} -> {format_value(step.after)}{also} "
                f"(cost {step.cost:.2f}; {label} then {step.prediction:.3f}){flip}",
                markup=False,
                soft_wrap=True,
            )
    if result.short is not None:
        console.print(f"\nCheapest plan of at most two actions: cost {result.short.total_cost:.2f}", markup=False)


def _print_unpriced(result: Any, console: Any) -> None:
    """The result's ``cost_failure``, when candidate plans had no price (an effort that is
    negative, infinite or NaN): they are infeasible, so it may be why the front is small or empty.
    A server's result carries it in its own field, apart from the model's ``failure``."""
    unpriced = getattr(result, "cost_failure", None)
    if unpriced:
        console.print(f"Without a price: {unpriced}.", markup=False, soft_wrap=True)
