"""Small problems with known answers for the engine tests."""

from __future__ import annotations

import numpy as np
import pytest

from counterplan.planning import (
    BooleanFeature,
    CallableAdapter,
    CategoricalFeature,
    ClassGoal,
    CounterfactualProblem,
    FloatFeature,
    IntegerFeature,
    OutputSpec,
)
from counterplan.planning.space import FloatMatrix


def linear_score(X: FloatMatrix) -> FloatMatrix:
    """A transparent classifier: approve when 2 x + n + 3 [plan is gold] - debt > 4."""
    margin = 2.0 * X[:, 0] + X[:, 1] + 3.0 * (X[:, 2] == 2) - X[:, 3] - 4.0
    p = 1.0 / (1.0 + np.exp(-3.0 * margin))
    return np.column_stack([1.0 - p, p])


@pytest.fixture
def linear_problem() -> CounterfactualProblem:
    """Rejected at x=0.5, n=1, plan=basic, debt=1: margin -3.

    The goal has no margin, so the boundary is exact. The cheapest valid change (range-scaled
    L1) is to raise x alone to just past 2.0
    (distance 1.5/10 = 0.15); x to 1.5 with debt to 0 costs 0.2; n needs +3 (0.3); gold costs
    1 plus more.
    """
    features = [
        FloatFeature(name="x", value=0.5, low=0.0, high=10.0),
        IntegerFeature(name="n", value=1, low=0, high=10),
        CategoricalFeature(name="plan", value="basic", categories=("basic", "silver", "gold")),
        FloatFeature(name="debt", value=1.0, low=0.0, high=10.0),
        BooleanFeature(name="frozen_flag", value=True, constrained=True),
        IntegerFeature(name="age", value=40, low=18, high=90, constrained=True),
    ]
    model = CallableAdapter(linear_score, [OutputSpec("approved", (0, 1))])
    return CounterfactualProblem(features, [ClassGoal(target=1, margin=0.0)], model)
