"""Goals written on the command line: ``[OUTPUT=]class:LABEL[@CONFIDENCE]``,
``[OUTPUT=]value:VALUE[~TOLERANCE]`` and ``[OUTPUT=]range:LOW..HIGH``."""

from __future__ import annotations

import math

from counterplan.planning.errors import GoalError, cut, echo
from counterplan.planning.goals import ClassGoal, RangeGoal, ValueGoal
from counterplan.server.cli.help_text import GOAL_HELP


def parse_goal_text(text: str) -> ClassGoal | ValueGoal | RangeGoal:
    """Parse one goal from its command-line form."""
    output: str | None = None
    body = text.strip()
    if "=" in body.split(":", 1)[0]:
        output, body = body.split("=", 1)
        output = output.strip() or None
    kind, _, spec = body.partition(":")
    kind = kind.strip().lower()
    try:
        if kind == "class":
            label, _, confidence = spec.partition("@")
            # the label stays text: binding matches it to the model's own label ("1" names the
            # class 1 or 1.0), and a class whose label is the text "01" is not the class "1"
            target = label.strip()
            if target == "":
                raise ValueError("empty class label")
            return ClassGoal(output=output, target=target, confidence=float(confidence) if confidence else None)
        if kind == "value":
            value, _, tolerance = spec.partition("~")
            return ValueGoal(output=output, value=float(value), tolerance=float(tolerance) if tolerance else 0.0)
        if kind == "range":
            low, sep, high = spec.partition("..")
            if not sep:
                raise ValueError("expected LOW..HIGH")
            # an open end: "600.." is at least 600, "..600" at most 600
            return RangeGoal(
                output=output,
                low=float(low) if low.strip() else -math.inf,
                high=float(high) if high.strip() else math.inf,
            )
    except GoalError:
        raise
    except ValueError as exc:
        raise GoalError(text, f"{cut(str(exc))}; {GOAL_HELP}") from None  # float() quotes the text whole
    raise GoalError(text, f"unknown goal kind {echo(kind)}; {GOAL_HELP}")
