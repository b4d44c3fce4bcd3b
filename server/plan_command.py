"""``counterplan plan``: the Pareto front of action plans for one row, as a table and numbered steps.

The actions come from a YAML (or JSON) file read within the configuration reader's limits
(``solver.core.safe_yaml``) and checked against the row's features (:class:`planning.actions.ActionSet`);
a bad action is refused naming its field, before any search.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from server.flags import EXIT_NOT_FOUND
from server.help_text import GOAL_HELP

PLANS_SHOWN = 10
"""Plans printed step by step at most (``--json`` gives them all)."""


def add_parser(commands: Any) -> None:
    """The ``plan`` subcommand's flags."""
    plan = commands.add_parser(
        "plan",
        help="ordered actions with their costs that reach a goal (consequence-aware plans)",
        description="Find the Pareto front of action plans (cost against distance and touched features) that "
        "take one row of --data to the goal, with the actions of --actions (a YAML file; see "
        "examples/adult-actions.yaml). Needs counterplan[plans].",
    )
    plan.add_argument("--model", help="fitted scikit-learn model (.skops or .joblib)")
    plan.add_argument("--trust-model", action="store_true", help="load skops types not trusted by default")
    plan.add_argument("--data", help="CSV of training data")
    plan.add_argument("--target", help="label column of --data, left out of the features")
    plan.add_argument("--row", type=int, help="row of --data to plan for (0-based)")
    plan.add_argument("--actions", help="the actions and cost graph (YAML or JSON)")
    plan.add_argument("--goal", action="append", default=[], help=GOAL_HELP)
    plan.add_argument(
        "--immutable", action="append", default=[], metavar="COLUMNS", help="comma-separated columns no action may set"
    )
    plan.add_argument("--population", type=int, default=500, help="genomes per generation (default 500)")
    plan.add_argument("--generations", type=int, default=150, help="generations (default 150)")
    plan.add_argument("--seed", type=int, default=0)
    plan.add_argument("--json", action="store_true", help="every plan with its steps and the state after each")


def run(args: argparse.Namespace, usage: Callable[[str], Exception]) -> int:
    """Check the flags and the actions, search, print; 0 with a valid plan, 3 without."""
    from pydantic import ValidationError  # noqa: PLC0415

    from planning.actions import ActionSet  # noqa: PLC0415
    from planning.models import adapt_sklearn  # noqa: PLC0415
    from server.goal_text import parse_goal_text  # noqa: PLC0415
    from server.loading import load_csv, load_model  # noqa: PLC0415
    from solver.core.safe_yaml import ConfigTextError, load_config_text  # noqa: PLC0415
    from solver.explainer import Explainer, model_columns  # noqa: PLC0415

    if args.model is None or args.data is None or args.row is None or args.actions is None:
        raise usage("give --model, --data, --row and --actions")
    try:
        from solver.plans.planner import plan  # noqa: PLC0415
        from solver.plans.search import PlanConfig  # noqa: PLC0415

        config = PlanConfig(population=args.population, generations=args.generations, seed=args.seed)
    except ImportError:
        raise usage("plans need pymoo: pip install 'counterplan[plans]'") from None
    except ValidationError as exc:
        error = exc.errors()[0]
        raise usage(f"--{error['loc'][0]}: {error['msg']}") from None
    try:
        text = Path(args.actions).read_text(encoding="utf-8")
    except OSError as exc:
        raise usage(f"--actions: cannot read {args.actions!r}: {exc.strerror}") from None
    try:
        actions = ActionSet.from_data(load_config_text(text))
    except ConfigTextError as exc:
        raise usage(f"--actions: {exc.problem}") from None
    data = load_csv(args.data)
    if not 0 <= args.row < len(data):
        raise usage(f"--row: row {args.row} is outside the data's {len(data)} rows")
    model = load_model(args.model, trust=args.trust_model)
    immutable = [name.strip() for item in args.immutable for name in item.split(",") if name.strip()]
    explainer = Explainer(
        adapt_sklearn(model, args.target or "prediction"),
        data,
        [parse_goal_text(goal) for goal in args.goal] or None,
        target=args.target,
        immutable=immutable,
        columns=model_columns(model, data, args.target),
        check=False,
    )
    problem = explainer.problem(args.row)
    actions.compile(problem.space)  # a bad action is refused before the search
    result = plan(problem, actions, config=config)
    if args.json:
        print(result.model_dump_json(indent=2))
    else:
        _print(result)
    return 0 if result.cheapest is not None else EXIT_NOT_FOUND


def _print(result: Any) -> None:
    """The front as a table, then each plan as numbered steps."""
    from rich.console import Console  # noqa: PLC0415
    from rich.table import Table  # noqa: PLC0415

    console = Console()
    if not result.plans:
        console.print("No plan reaches the goal with these actions.", style="yellow")
        return
    table = Table(title=f"{len(result.plans)} plans on the Pareto front (cheapest first)")
    for column in ("#", "actions in order", "cost", "distance"):
        table.add_column(column, justify="right" if column in ("#", "cost", "distance") else "left")
    for i, p in enumerate(result.plans, 1):
        table.add_row(str(i), " -> ".join(s.action for s in p.steps), f"{p.total_cost:.2f}", f"{p.distance:.3f}")
    console.print(table)
    console.print(f"Before any action: the goal output is {result.original_prediction:.3f}.", markup=False)
    for i, p in enumerate(result.plans[:PLANS_SHOWN], 1):
        console.print(f"\nPlan {i}: cost {p.total_cost:.2f}, distance {p.distance:.3f}", markup=False)
        for t, step in enumerate(p.steps, 1):
            flip = "  <- the goal is met" if step.goal_met else ""
            console.print(
                f"  {t}. {step.action}: {step.feature} {step.before} -> {step.after} "
                f"(cost {step.cost:.2f}; goal output then {step.prediction:.3f}){flip}",
                markup=False,
            )
    if result.short is not None:
        console.print(f"\nCheapest plan of at most two actions: cost {result.short.total_cost:.2f}", markup=False)
