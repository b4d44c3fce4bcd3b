"""Where a tree ensemble's decisions change: each split threshold, in the feature's own units.

What the exact engine's answers teach local search: the optimal changes land just past split
thresholds, often far from the original (a value the model's trees single out), where a search
that walks step by step sees no gain until it crosses. :func:`split_points` gives, per mutable
number, the values on each side of each threshold (on the feature's grid, or a hair past it),
so the feature scan can try them in its one batched call. It reads the model as the exact engine
does; a model it cannot read (or a linear one) has none.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from planning.models import SklearnClassifierAdapter, SklearnRegressorAdapter
from planning.problem import CounterfactualProblem
from solver.exact.formulation import (
    FLOAT32_MARGIN,
    FLOAT64_MARGIN,
    Formulation,
    Output,
    _affine_in_feature,
    _feature,
    _owner,
    base_columns,
)
from solver.exact.inputs import NotEncodableError, decompose
from solver.exact.milp import Milp
from solver.exact.trees import read_ensemble

MAX_PER_FEATURE = 256
"""At most this many split values per feature (an even sample of them beyond)."""


def split_points(problem: CounterfactualProblem) -> dict[int, npt.NDArray[np.float64]]:
    """Per mutable numeric feature: sorted values just on each side of the model's split thresholds."""
    if not isinstance(problem.model, SklearnClassifierAdapter | SklearnRegressorAdapter):
        return {}
    try:
        return _split_points(problem)
    except (NotEncodableError, ValueError, KeyError, AttributeError, IndexError, TypeError, OverflowError):
        return {}  # a model the exact engine cannot read: the scan keeps its plain grid


def _split_points(problem: CounterfactualProblem) -> dict[int, npt.NDArray[np.float64]]:
    space = problem.space
    milp = Milp()
    features = [_feature(milp, problem, j) for j in range(space.n_features)]
    formulation = Formulation(problem, milp, features, Output(({}, 0.0), "value", ""), {}, {})
    adapter: Any = problem.model
    inputs = decompose(adapter.model, base_columns(formulation))
    kind = type(inputs.estimator).__name__
    if hasattr(inputs.estimator, "coef_") and not kind.endswith(("Tree", "Forest", "Trees", "Boosting")):
        return {}
    ensemble = read_ensemble(inputs.estimator)
    found: dict[int, set[float]] = {}
    for tree in ensemble.trees:
        for node in np.flatnonzero(tree.feature >= 0):
            lin = inputs.columns[int(tree.feature[node])]
            if not lin[0]:
                continue
            owner = _owner(formulation, set(lin[0]))
            if owner is None or features[owner].categories is not None or features[owner].allowed is not None:
                continue
            a, b = _affine_in_feature(lin, features[owner].value)
            if a == 0.0:
                continue
            t = float(tree.threshold[node])
            raw = (t - b) / a
            if not math.isfinite(raw):
                continue
            per_unit = float(space.grid_scale[owner])
            if per_unit > 0:
                below = math.floor(raw * per_unit + 1e-9)
                found.setdefault(owner, set()).update({below / per_unit, (below + 1) / per_unit})
            else:
                margin = 2.0 * max(abs(t), 1.0) * (FLOAT32_MARGIN if tree.float32 else FLOAT64_MARGIN) / abs(a)
                found.setdefault(owner, set()).update({raw - margin, raw + margin})
    out = {}
    for j, values in found.items():
        array = np.array(sorted(values))
        array = array[(array >= space.lower[j]) & (array <= space.upper[j])]
        if array.size > MAX_PER_FEATURE:
            array = array[np.unique(np.linspace(0, array.size - 1, MAX_PER_FEATURE).astype(int))]
        if array.size:
            out[j] = array
    return out
