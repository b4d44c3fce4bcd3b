"""Where a tree ensemble's decisions change: each split threshold, in the feature's own units.

What the exact engine's answers teach local search: the optimal changes land just past split
thresholds, often far from the original (a value the model's trees single out), where a search
that walks step by step sees no gain until it crosses. :func:`split_points` gives, per mutable
number, the values on each side of each threshold (on the feature's grid, or a hair past it),
so the feature scan can try them in its one batched call. It reads the model as the exact engine
does; a model it cannot read (or a linear one) has none.
"""

from __future__ import annotations

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
    # per model column, once: the numeric feature it is an affine function of, and how
    n_columns = len(inputs.columns)
    owner_of = np.full(n_columns, -1, dtype=np.intp)
    slope = np.zeros(n_columns)
    shift = np.zeros(n_columns)
    for c, lin in enumerate(inputs.columns):
        owner = _owner(formulation, set(lin[0])) if lin[0] else None
        if owner is None or features[owner].categories is not None or features[owner].allowed is not None:
            continue
        a, b = _affine_in_feature(lin, features[owner].value)
        if a != 0.0:
            owner_of[c], slope[c], shift[c] = owner, a, b
    # every split of every tree at once: thresholds in their feature's own units
    columns = np.concatenate([t.feature[t.feature >= 0] for t in ensemble.trees])
    thresholds = np.concatenate([t.threshold[t.feature >= 0] for t in ensemble.trees])
    float32 = np.concatenate([np.full(int((t.feature >= 0).sum()), t.float32) for t in ensemble.trees])
    keep = owner_of[columns] >= 0
    columns, thresholds, float32 = columns[keep], thresholds[keep], float32[keep]
    owners = owner_of[columns]
    with np.errstate(all="ignore"):
        raw = (thresholds - shift[columns]) / slope[columns]
    finite = np.isfinite(raw)
    owners, raw, thresholds, columns, float32 = (
        owners[finite],
        raw[finite],
        thresholds[finite],
        columns[finite],
        float32[finite],
    )
    per_unit = space.grid_scale[owners]
    gridded = per_unit > 0
    units = np.where(gridded, per_unit, 1.0)
    steps = np.floor(raw * units + 1e-9)
    below, above = steps / units, (steps + 1.0) / units  # the grid values either side, as the grid has them
    relative = np.where(float32, FLOAT32_MARGIN, FLOAT64_MARGIN)
    margin = 2.0 * np.maximum(np.abs(thresholds), 1.0) * relative / np.abs(slope[columns])
    low_side = np.where(gridded, below, raw - margin)
    high_side = np.where(gridded, above, raw + margin)
    found: dict[int, npt.NDArray[np.float64]] = {}
    for j in np.unique(owners):
        mine = owners == j
        found[int(j)] = np.unique(np.concatenate([low_side[mine], high_side[mine]]))
    out = {}
    for j, values in found.items():
        array = values[(values >= space.lower[j]) & (values <= space.upper[j])]
        if array.size > MAX_PER_FEATURE:
            array = array[np.unique(np.linspace(0, array.size - 1, MAX_PER_FEATURE).astype(int))]
        if array.size:
            out[j] = array
    return out
