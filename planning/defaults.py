"""The default question: for a binary classifier, the class it does not predict now.

Asked only after the features are built and checked, so a bad row, a missing column or an
incomplete instance fails with its own one-line error before the model runs, and the model
sees the instance exactly as a search would (decoded by the feature space, gaps as NaN).
"""

from __future__ import annotations

import numpy as np

from counterplan.planning.errors import GoalError, ModelCallError, one_line
from counterplan.planning.goals import ClassGoal
from counterplan.planning.models import ModelAdapter
from counterplan.planning.space import FeatureSpace


def default_goals(model: ModelAdapter, space: FeatureSpace) -> list[ClassGoal]:
    """``[ClassGoal(the other class)]`` for a binary classifier (a scorecard's class output beside
    its score); otherwise ask for a goal."""
    outputs = model.outputs
    classifying = [o for o in outputs if o.classes is not None]
    if len(classifying) != 1 or classifying[0].classes is None or len(classifying[0].classes) != 2:
        names = [o.name for o in outputs]
        raise GoalError("goals", f"give a goal: the default (the other class) needs a binary classifier; {names}")
    spec = classifying[0]
    assert spec.classes is not None
    try:
        proba = np.asarray(model.predict(space.original.reshape(1, -1), space)[spec.name], dtype=np.float64)
    except Exception as exc:  # the model's own failure on this instance (say, NaN it cannot take)
        raise ModelCallError(one_line(f"the model fails on the instance: {type(exc).__name__}: {exc}")) from None
    if proba.shape != (1, 2) or not np.isfinite(proba).all():
        raise GoalError("goals", "give a goal: the model gave no usable prediction for the instance")
    predicted = int(np.argmax(proba[0]))
    return [ClassGoal(output=spec.name, target=spec.classes[1 - predicted])]
