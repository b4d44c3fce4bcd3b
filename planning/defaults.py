"""The default question: for a binary classifier, its second class (``1`` of ``0``/``1``).

One default for every way in (Python, every command, the server): the class a user usually wants
(approved, not defaulted) is a binary classifier's second. An instance that is in it already
meets the goal (nothing to change), rather than being explained how to leave it. Any other model
needs a goal.
"""

from __future__ import annotations

from counterplan.planning.errors import GoalError
from counterplan.planning.goals import ClassGoal
from counterplan.planning.models import ModelAdapter

DEFAULT_GOALS_NOTE = "a binary classifier's second class"
"""What every output says of the default question: ``Goal: approved = 1 with p >= 0.5025 (default:
a binary classifier's second class)``."""


def default_goals(model: ModelAdapter) -> list[ClassGoal]:
    """``[ClassGoal(the second class)]`` for a binary classifier (a scorecard's class output beside
    its score); otherwise ask for a goal. The instance is not read: the question is the model's."""
    outputs = model.outputs
    classifying = [o for o in outputs if o.classes is not None]
    if len(classifying) != 1 or classifying[0].classes is None or len(classifying[0].classes) != 2:
        raise GoalError(
            "goals", f"give a goal: the default (the second class) needs a binary classifier; {_outputs(model)}"
        )
    spec = classifying[0]
    assert spec.classes is not None
    return [ClassGoal(output=spec.name, target=spec.classes[1])]


def _outputs(model: ModelAdapter) -> str:
    """What the model answers, for the refusal: each output with its classes, or numeric."""
    told = []
    for output in model.outputs:
        if output.classes is None:
            told.append(f"output {output.name!r} is a number (give a value or a range)")
        else:
            count = len(output.classes)
            shown = ", ".join(repr(c) for c in output.classes[:12]) + (", ..." if count > 12 else "")
            told.append(f"output {output.name!r} has {count} class{'' if count == 1 else 'es'} [{shown}]")
    return "; ".join(told)
