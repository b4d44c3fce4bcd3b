"""The problem-shaping flags of ``counterplan explain``, read once for both local and ``--server`` solves.

``--monotone``, ``--cost`` and ``--allowed`` become per-feature overrides; ``-k``,
``--time-limit``, ``--max-changes`` and ``--change-penalty`` are checked here, so a bad value
gives the same one-line error whether the search runs in this process or on a server.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from counterplan.planning.errors import CounterplanError
from counterplan.planning.threads import MAX_MODEL_THREADS

if TYPE_CHECKING:
    from counterplan.planning.goals import ClassGoal, RangeGoal, ValueGoal

EXIT_NOT_FOUND = 3
"""Exit code of an explain that ran and found no valid counterfactual (its note says what blocks it)."""


class UsageError(CounterplanError, ValueError):
    """A command-line flag has a bad value (exit code 2)."""


def feature_overrides(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """``{feature: {field: value}}`` from ``--monotone``, ``--cost`` and ``--allowed``."""
    overrides: dict[str, dict[str, Any]] = {}
    for text in args.monotone:
        name, _, direction = text.partition("=")
        if direction not in ("increase", "decrease"):
            raise UsageError(f"--monotone {text!r}: expected NAME=increase or NAME=decrease")
        overrides.setdefault(name.strip(), {})["monotone"] = direction
    for text in args.cost:
        name, weight = _named_value(text, float, f"--cost {text!r}: expected NAME=WEIGHT")
        overrides.setdefault(name, {})["cost"] = weight
    for item in args.categorical:
        for name in (n.strip() for n in item.split(",") if n.strip()):
            overrides.setdefault(name, {})["kind"] = "categorical"
    for text in args.precision:
        name, decimals = _named_value(text, int, f"--precision {text!r}: expected NAME=DECIMALS, a whole number")
        overrides.setdefault(name, {})["precision"] = decimals
    for text in args.allowed:
        name, values = _named_value(text, _numbers, f"--allowed {text!r}: expected NAME=V1,V2,...")
        overrides.setdefault(name, {})["allowed"] = values
    return overrides


def _named_value(text: str, parse: Callable[[str], Any], usage: str) -> tuple[str, Any]:
    """``NAME=VALUE`` as the name and the parsed value; ``usage`` when the value does not parse."""
    name, _, value = text.partition("=")
    try:
        return name.strip(), parse(value)
    except ValueError:
        raise UsageError(usage) from None


def _numbers(text: str) -> tuple[float, ...]:
    """Comma-separated numbers (empty items skipped)."""
    return tuple(float(v) for v in text.split(",") if v.strip())


def fill_missing_columns(args: argparse.Namespace) -> list[str] | bool:
    """``--fill-missing``: the columns named, or True for ``all``."""
    names = [n.strip() for item in args.fill_missing for n in item.split(",") if n.strip()]
    return True if "all" in names else names


def with_margin(
    goals: list[ClassGoal | ValueGoal | RangeGoal], margin: float | None
) -> list[ClassGoal | ValueGoal | RangeGoal]:
    """``goals`` with ``--margin`` on every class goal (checked: 0 to 0.5)."""
    from counterplan.planning.goals import ClassGoal  # noqa: PLC0415 - numpy and pydantic: only once a command runs

    if margin is None:
        return goals
    if not (math.isfinite(margin) and 0.0 <= margin <= 0.5):
        raise UsageError(f"--margin must be a number from 0 to 0.5, given {margin}")
    return [ClassGoal(**{**g.model_dump(), "margin": margin}) if isinstance(g, ClassGoal) else g for g in goals]


def checked_limits(args: argparse.Namespace) -> tuple[int | None, float]:
    """``--max-changes`` and ``--change-penalty`` (returned), ``-k``, ``--time-limit``, ``--seed`` and
    ``--threads``, checked."""
    from counterplan.planning.distance import MAX_CHANGE_PENALTY  # noqa: PLC0415 - loads numpy: only once a command runs
    from counterplan.server.cli.bounds import check_seconds, check_seed  # noqa: PLC0415

    if args.num_counterfactuals < 1:
        raise UsageError(f"-k must be at least 1, given {args.num_counterfactuals}")
    check_seconds("--time-limit", args.time_limit, UsageError)  # as the configuration bounds them, by the flag
    check_seed("--seed", args.seed, UsageError)
    threads = getattr(args, "threads", None)
    if threads is not None and not 1 <= threads <= MAX_MODEL_THREADS:
        raise UsageError(f"--threads must be from 1 to {MAX_MODEL_THREADS}, given {threads}")
    if threads is not None and getattr(args, "server", None):  # the server's operator sets them
        raise UsageError("--threads sets this process's model threads; a server's are set by serve --model-threads")
    if args.max_changes is not None and args.max_changes < 1:
        raise UsageError("--max-changes must be at least 1")
    if not (math.isfinite(args.change_penalty) and 0.0 <= args.change_penalty <= MAX_CHANGE_PENALTY):
        raise UsageError(
            f"--change-penalty must be a number from 0 to {MAX_CHANGE_PENALTY:g}, given {args.change_penalty}"
        )
    return args.max_changes, float(args.change_penalty)
