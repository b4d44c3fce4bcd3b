"""The flags that shape the question: one group for ``explain``, ``batch``, ``plan`` and ``tune``.

Each flag is declared once here (its name, its default, its help) and read once, into a
:class:`~counterplan.planning.spec.ProblemSpec` (:func:`problem_spec`), the object Python, model
cards and gRPC requests become too. So a flag means the same thing, with the same default, in every
command, and locally as on a server: ``--server`` sends the same spec as a request
(:mod:`counterplan.server.grpc.spec_request`). A command leaves out the flags that do not apply to
it (a plan's objectives are its own: no ``--distance``, ``--cost`` or ``--engine``).

A bad value is refused naming the flag, whether the flag's own syntax is wrong or the spec or
the built problem refuses it (:func:`flag_errors` maps a spec's field to the flag that set it).
Only light modules load here: ``--help`` answers at once.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from counterplan.planning.errors import InvalidInputError
from counterplan.server.cli.flags import UsageError
from counterplan.server.cli.help_text import GOAL_HELP

if TYPE_CHECKING:
    from counterplan.planning.spec import ProblemSpec
    from counterplan.solver.core.config import SolverConfig

DISTANCES = ("auto", "mad_l1", "range_l1", "sd_squared", "scorecard")
ENGINES = ("local", "exact", "swarm", "auto")

_FIELD_FLAGS = (
    # (a spec field's path, or its end for a feature's rule), the flag that sets it
    ("goals", "--goal"),
    ("margin", "--margin"),
    ("immutable", "--immutable"),
    (".immutable", "--immutable"),
    (".monotone", "--monotone"),
    (".allowed", "--allowed"),
    (".forbidden", "--forbid"),
    (".cost", "--cost"),
    (".precision", "--precision"),
    (".kind", "--categorical"),
    (".fill_missing", "--fill-missing"),
    ("fill_missing", "--fill-missing"),
    ("max_changed_features", "--max-changes"),
    ("distance.change_penalty", "--change-penalty"),
    ("distance.alpha", "--alpha"),
    ("distance.beta", "--beta"),
    ("distance", "--distance"),
    ("plausibility", "--plausible"),
    ("trust_region.nearest", "--trust-nearest"),
    ("trust_region.slack", "--trust-slack"),
    ("trust_region", "--trust-region"),
)


def add_problem_flags(parser: argparse.ArgumentParser, *, leave_out: Collection[str] = ()) -> None:
    """The question's flags, in the order ``--help`` shows them; ``leave_out``: flags (``"--cost"``)
    that do not apply to the command."""
    group = parser.add_argument_group("the question (the same in every command)")

    def add(flag: str, **options: Any) -> None:
        if flag not in leave_out:
            group.add_argument(flag, **options)

    add("--goal", action="append", default=[], help=GOAL_HELP)
    add("--margin", type=float, metavar="M", help="a class goal is met only M past its threshold (default 0.005)")
    add("--immutable", action="append", default=[], metavar="COLUMNS", help="comma-separated columns never to change")
    add(
        "--monotone",
        action="append",
        default=[],
        metavar="NAME=DIR",
        help="NAME may only increase or decrease (categories along their order): income=increase",
    )
    add(
        "--allowed",
        action="append",
        default=[],
        metavar="NAME=V1,V2,...",
        help="a change of NAME may only reach these values: numbers (loan=10000,20000) or categories "
        "(savings=little,moderate); keeping the original value stays possible",
    )
    add(
        "--forbid",
        action="append",
        default=[],
        metavar="NAME=V1,V2,...",
        help="a change of NAME may never reach these values (a missing-data code: savings=not_known)",
    )
    add("--cost", action="append", default=[], metavar="NAME=W", help="weight of a change to NAME (default 1)")
    add(
        "--categorical",
        action="append",
        default=[],
        metavar="COLUMNS",
        help="comma-separated numeric columns that hold category codes (0..k), not quantities",
    )
    add(
        "--precision",
        action="append",
        default=[],
        metavar="NAME=DECIMALS",
        help="decimals of a float's proposed values (default: as the data has them): ratio=2",
    )
    add(
        "--fill-missing",
        action="append",
        default=[],
        metavar="COLUMNS",
        help="comma-separated columns (or 'all') whose missing value the search may fill in",
    )
    add("--max-changes", type=int, metavar="N", help="change at most N features")
    add(
        "--change-penalty",
        type=float,
        default=0.0,
        metavar="P",
        help="add P (in distance units) per changed feature: larger P, fewer changes (default 0)",
    )
    add(
        "--distance",
        choices=DISTANCES,
        default="auto",
        help="feature distance (default auto: MAD-scaled when the data gives every mutable number a MAD); "
        "scorecard: the scorecard paper's objective, --alpha x WoE proximity + --beta x closeness to the data",
    )
    add("--alpha", type=float, default=1.0, help="scorecard distance: weight of proximity (default 1)")
    add("--beta", type=float, default=1.0, help="scorecard distance: weight of closeness (default 1)")
    add("--plausible", action="store_true", help="only answers near real rows of the desired class (needs data)")
    add(
        "--trust-region",
        action="store_true",
        help="answers in the convex hull of the data's rows with the target outcome (needs --target)",
    )
    add("--trust-nearest", type=int, metavar="K", help="trust region: only the K rows nearest the row")
    add("--trust-slack", type=float, metavar="S", help="trust region: allowed L1 distance outside the hull")


def add_search_flags(parser: argparse.ArgumentParser, *, leave_out: Collection[str] = ()) -> Any:
    """How the search runs: the engine, its configuration, seed and time limit, the model's
    threads, the live display; ``leave_out`` as for :func:`add_problem_flags`. Returns the group,
    for a command's own search flags."""
    group = parser.add_argument_group("the search")

    def add(flag: str, **options: Any) -> None:
        if flag not in leave_out:
            group.add_argument(flag, **options)

    add(
        "--engine",
        choices=ENGINES,
        help="local search (the default), the exact engine (a proven optimum for linear models and tree "
        "ensembles; needs counterplan[exact]), the particle swarm (MD-PSO, for many features), or auto "
        "(chosen by the model and the number of features; the answer says which and why)",
    )
    add(
        "--auto-budget",
        type=float,
        metavar="SECONDS",
        help="--engine auto: take the exact engine only when it is expected to finish within this per row (default 2)",
    )
    add(
        "--auto-improve",
        type=float,
        metavar="SECONDS",
        help="--engine auto: when it runs local search, then the exact engine for at most this long from its "
        "answer (reported with the proof's bound and gap)",
    )
    add("--config", help="solver configuration file (YAML or JSON)")
    add("--seed", type=int, help="random seed, 0 to 2**63 - 1 (default: the configuration's, 0)")
    add("--time-limit", type=float, metavar="SECONDS", help="cap the search time")
    add(
        "--threads",
        type=int,
        metavar="N",
        help="native (OpenMP/BLAS) threads per model call (default 1: the search already batches)",
    )
    add("--no-progress", action="store_true", help="no live progress display")
    return group


def comma_names(items: list[str]) -> list[str]:
    """Comma-separated names of a repeatable flag, in order, blanks dropped."""
    return [name.strip() for item in items for name in item.split(",") if name.strip()]


def problem_spec(args: argparse.Namespace) -> ProblemSpec:
    """The spec the flags ask for, every value checked; refused naming the flag."""
    from counterplan.planning.plausibility import PlausibilitySettings  # noqa: PLC0415 - only once a command runs
    from counterplan.planning.spec import ProblemSpec  # noqa: PLC0415

    options: dict[str, Any] = {
        "features": _feature_rules(args),
        "immutable": tuple(comma_names(_flag(args, "immutable", []))),
        "goals": _goals(args),
        "margin": _flag(args, "margin"),
        "distance": _distance(args),
        "max_changed_features": _flag(args, "max_changes"),
        "plausibility": PlausibilitySettings() if _flag(args, "plausible", False) else None,
        "trust_region": _trust_region(args),
        "fill_missing": _fill_missing(args),
    }
    with flag_errors():  # only what a flag sets: a spec laid over a model's keeps the rest of the model's
        return ProblemSpec(**{name: value for name, value in options.items() if value is not None and value != ()})


def solver_config(args: argparse.Namespace) -> SolverConfig:
    """``--config`` with ``--threads``, ``--time-limit`` (it caps the configuration's own
    termination), ``--auto-budget`` and ``--auto-improve`` applied, each checked by its flag."""
    from counterplan.planning.threads import MAX_MODEL_THREADS  # noqa: PLC0415
    from counterplan.server.cli.bounds import check_seconds, check_seed  # noqa: PLC0415
    from counterplan.solver.core.config import (  # noqa: PLC0415
        MAX_AUTO_BUDGET_SECONDS,
        AutoConfig,
        SolverConfig,
        TerminationConfig,
    )

    check_seconds("--time-limit", _flag(args, "time_limit"), UsageError)
    auto = {"budget_seconds": _flag(args, "auto_budget"), "exact_improvement_seconds": _flag(args, "auto_improve")}
    for flag, value in zip(("--auto-budget", "--auto-improve"), auto.values(), strict=True):
        check_seconds(flag, value, UsageError, MAX_AUTO_BUDGET_SECONDS)
    check_seed("--seed", _flag(args, "seed"), UsageError)
    threads = _flag(args, "threads")
    if threads is not None and not 1 <= threads <= MAX_MODEL_THREADS:
        raise UsageError(f"--threads must be from 1 to {MAX_MODEL_THREADS}, given {threads}")
    config = SolverConfig.load(args.config) if _flag(args, "config") else SolverConfig()
    if threads is not None:
        config = config.model_copy(update={"model_threads": threads})
    asked = {name: value for name, value in auto.items() if value is not None}
    if asked:
        config = config.model_copy(update={"auto": AutoConfig(**{**config.auto.model_dump(), **asked})})
    limit = _flag(args, "time_limit")
    if limit is not None:
        capped = TerminationConfig(spent_limit_seconds=limit, children=(config.termination,))
        config = config.model_copy(update={"termination": capped})
    return config


@contextmanager
def flag_errors(instance_flag: str = "--instance") -> Iterator[None]:
    """Within the block, a spec's or a problem's refusal names the flag that set the field
    (``--allowed savings: 'lots' is not a category of savings; categories: [...]``); a bad value
    of the instance names ``instance_flag``."""
    from counterplan.planning.profile import InstanceError  # noqa: PLC0415

    try:
        yield
    except InstanceError as exc:  # the instance's values, and rules that do not fit their feature
        field, problem = exc.problems[0]
        more = f" (and {len(exc.problems) - 1} more)" if len(exc.problems) > 1 else ""
        flag = flag_of(field)
        if flag is None:
            raise UsageError(f"{instance_flag}: {field}: {problem}{more}") from None
        raise UsageError(_flag_text(flag, field, problem) + more) from None
    except UsageError:
        raise
    except InvalidInputError as exc:
        flag = flag_of(exc.field)
        if flag is None:
            raise
        raise UsageError(_flag_text(flag, exc.field, exc.problem)) from None


def _flag_text(flag: str, field: str, problem: str) -> str:
    """``--allowed savings: ...``: the flag, the feature it names (for a rule), the problem."""
    name = _feature_of(field)
    return f"{flag}{f' {name}' if name else ''}: {problem}"


def flag_of(field: str) -> str | None:
    """The flag that sets a spec's ``field`` (``features.income.cost`` -> ``--cost``), or None."""
    for path, flag in _FIELD_FLAGS:
        if path.startswith("."):
            if field.startswith("features.") and field.endswith(path):
                return flag
        elif field == path or field.startswith(path + ".") or field.startswith(path + "["):
            return flag
    return None


def _feature_of(field: str) -> str:
    """The feature a ``features.NAME.field`` path names, or ``""``."""
    if not field.startswith("features."):
        return ""
    return field[len("features.") :].rsplit(".", 1)[0]


def _flag(args: argparse.Namespace, name: str, default: Any = None) -> Any:
    """A flag's value, or ``default`` for a flag the command leaves out."""
    return getattr(args, name, default)


def _feature_rules(args: argparse.Namespace) -> dict[str, Any]:
    """``{feature: FeatureRule}`` from the per-feature flags (a feature named twice by one flag:
    the last wins, as with any repeated flag)."""
    from counterplan.planning.spec import feature_rule  # noqa: PLC0415

    fields: dict[str, dict[str, Any]] = {}
    for name in comma_names(_flag(args, "categorical", [])):
        fields.setdefault(name, {})["kind"] = "categorical"
    for flag, key, form, read in _RULE_FLAGS:
        for text in _flag(args, flag.lstrip("-").replace("-", "_"), []):
            name, value = _named(text, flag, form)
            fields.setdefault(name, {})[key] = read(value, f"{flag} {_echo(text)}: expected {form}")
    with flag_errors():
        return {name: feature_rule(values, name) for name, values in fields.items()}


def _direction(text: str, usage: str) -> str:
    if text not in ("increase", "decrease"):
        raise UsageError(usage)
    return text


def _decimals(text: str, usage: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise UsageError(usage + ", a whole number") from None


def _number(text: str, usage: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise UsageError(usage + ", a number") from None


def _values(text: str, usage: str) -> list[float | str]:
    """Comma-separated values: a number where one reads as a number, else a category's text."""
    listed = [_listed_value(v.strip()) for v in text.split(",") if v.strip()]
    if not listed:
        raise UsageError(usage + " with at least one value")
    return listed


_RULE_FLAGS: tuple[tuple[str, str, str, Any], ...] = (
    ("--monotone", "monotone", "NAME=increase or NAME=decrease", _direction),
    ("--cost", "cost", "NAME=WEIGHT", _number),
    ("--precision", "precision", "NAME=DECIMALS", _decimals),
    ("--allowed", "allowed", "NAME=V1,V2,...", _values),
    ("--forbid", "forbidden", "NAME=V1,V2,...", _values),
)
"""Each per-feature ``NAME=VALUE`` flag: the rule field it sets, its form and its value's reader."""


def _named(text: str, flag: str, form: str) -> tuple[str, str]:
    """``NAME=VALUE`` split; refused naming the flag and its form when it is not."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise UsageError(f"{flag} {_echo(text)}: expected {form}")
    return name.strip(), value.strip()


def _listed_value(text: str) -> float | str:
    """A listed value: a number when it reads as one, else a category's text."""
    try:
        number = float(text)
    except ValueError:
        return text
    return number if math.isfinite(number) else text


def _echo(text: str, most: int = 80) -> str:
    """A flag's text as given, cut when long (an error never echoes unbounded input)."""
    return repr(text if len(text) <= most else text[:most] + "...")


def _goals(args: argparse.Namespace) -> tuple[Any, ...] | None:
    """``--goal`` (repeatable, one per output); None: the default question."""
    from counterplan.server.cli.goal_text import parse_goal_text  # noqa: PLC0415

    texts = _flag(args, "goal", [])
    if isinstance(texts, str):  # a command whose --goal is given once
        texts = [texts]
    return tuple(parse_goal_text(text) for text in texts) if texts else None


_DISTANCE_DEFAULTS = {"distance": "auto", "change_penalty": 0.0, "alpha": 1.0, "beta": 1.0}
_DISTANCE_FIELDS = {"distance": "metric", "change_penalty": "change_penalty", "alpha": "alpha", "beta": "beta"}


def _distance(args: argparse.Namespace) -> dict[str, Any] | None:
    """``--distance``, ``--change-penalty``, ``--alpha`` and ``--beta`` (the spec checks their
    bounds, and an error names the flag); None when all are left at their defaults."""
    given = {flag: _flag(args, flag, default) for flag, default in _DISTANCE_DEFAULTS.items()}
    if given == _DISTANCE_DEFAULTS:
        return None
    return {_DISTANCE_FIELDS[flag]: value for flag, value in given.items()}


def _trust_region(args: argparse.Namespace) -> dict[str, Any] | None:
    """The trust region the flags ask for (``--trust-nearest``/``--trust-slack`` imply it), or None."""
    fields = {k: v for k in ("nearest", "slack") if (v := _flag(args, f"trust_{k}")) is not None}
    return fields if fields or _flag(args, "trust_region", False) else None


def _fill_missing(args: argparse.Namespace) -> tuple[str, ...] | bool:
    """``--fill-missing``: the columns named, or True for ``all``."""
    names = comma_names(_flag(args, "fill_missing", []))
    return True if "all" in names else tuple(names)
