"""Where a tree ensemble's decisions change: each split threshold, in the feature's own units.

What the exact engine's answers teach local search: the optimal changes land just past split
thresholds, often far from the original (a value the model's trees single out), where a search
that walks step by step sees no gain until it crosses. :func:`split_points` gives, per mutable
number, the values on each side of each threshold (on the feature's grid, or a hair past it),
so the feature scan can try them in its one batched call. It reads the model as the exact engine
does; a model it cannot read (or a linear one) has none.

Every problem has a space of its own, but the problems of one model share its trees and, nearly
always, the way features reach them; so what costs is kept per fitted estimator (weakly: it goes
with the estimator): its thresholds, read once, and the split values for each way of reading the
features (which column is which feature through which affine map, the grids), keyed by exactly
what they are computed from. Only the problem's own bounds are applied per problem. Refitting the
estimator in place (new fitted attributes) drops what was kept.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from counterplan.planning.models import SklearnClassifierAdapter, SklearnRegressorAdapter
from counterplan.planning.problem import CounterfactualProblem
from counterplan.solver.exact.formulation import (
    FLOAT32_MARGIN,
    FLOAT64_MARGIN,
    Formulation,
    Output,
    _affine_in_feature,
    _feature,
    _owner,
    base_columns,
)
from counterplan.solver.exact.inputs import NotEncodableError, decompose
from counterplan.solver.exact.milp import Milp
from counterplan.solver.exact.trees import read_ensemble

MAX_PER_FEATURE = 256
"""At most this many split values per feature (an even sample of them beyond)."""
MAX_KEPT_READINGS = 64
"""Split values kept per estimator for at most this many ways of reading the features."""
_READ_ERRORS = (NotEncodableError, ValueError, KeyError, AttributeError, IndexError, TypeError, OverflowError)

FloatArray = npt.NDArray[np.float64]


def split_points(problem: CounterfactualProblem) -> dict[int, FloatArray]:
    """Per mutable numeric feature: sorted values just on each side of the model's split thresholds."""
    if not isinstance(problem.model, SklearnClassifierAdapter | SklearnRegressorAdapter):
        return {}
    try:
        return _split_points(problem)
    except _READ_ERRORS:
        return {}  # a model the exact engine cannot read: the scan keeps its plain grid


@dataclass
class _Thresholds:
    """Every split of every tree of one fitted estimator: the model column it reads, its
    threshold, and whether the model compares float32 inputs; or that reading them raised."""

    state: tuple[Any, ...]
    """The estimator's attributes when read (held, so compared by identity: a refit replaces them)."""
    columns: npt.NDArray[np.intp] | None = None
    thresholds: FloatArray | None = None
    float32: npt.NDArray[np.bool_] | None = None
    unreadable: bool = False
    """Reading the trees raised (the error is not kept: its traceback would hold the estimator)."""
    readings: dict[tuple[Any, ...], dict[int, FloatArray]] = field(default_factory=dict)
    """Split values before the problem's bounds, per way of reading the features."""


_KEPT: weakref.WeakKeyDictionary[Any, _Thresholds] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def _state(estimator: Any) -> tuple[Any, ...]:
    """What reading ``estimator`` depends on: its attributes (fitted ones and parameters), and the
    length of each list (a warm start may grow one in place)."""
    values = getattr(estimator, "__dict__", {})
    return tuple((key, value, len(value) if isinstance(value, list) else -1) for key, value in values.items())


def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return len(a) == len(b) and all(x[0] == y[0] and x[1] is y[1] and x[2] == y[2] for x, y in zip(a, b, strict=True))


def _thresholds(estimator: Any) -> _Thresholds:
    """The estimator's splits, read once per fitted state."""
    state = _state(estimator)
    try:
        with _LOCK:
            kept = _KEPT.get(estimator)
        if kept is not None and _same(kept.state, state):
            return kept
    except TypeError:  # not hashable or not weakly referable: read every time
        return _read_thresholds(estimator, state)
    kept = _read_thresholds(estimator, state)
    with _LOCK:
        _KEPT[estimator] = kept
    return kept


def _read_thresholds(estimator: Any, state: tuple[Any, ...]) -> _Thresholds:
    try:
        ensemble = read_ensemble(estimator)
        columns = np.concatenate([t.feature[t.feature >= 0] for t in ensemble.trees])
        thresholds = np.concatenate([t.threshold[t.feature >= 0] for t in ensemble.trees])
        float32 = np.concatenate([np.full(int((t.feature >= 0).sum()), t.float32) for t in ensemble.trees])
    except _READ_ERRORS:
        return _Thresholds(state, unreadable=True)
    return _Thresholds(state, columns, thresholds, float32)


def _split_points(problem: CounterfactualProblem) -> dict[int, FloatArray]:
    space = problem.space
    milp = Milp()
    features = [_feature(milp, problem, j) for j in range(space.n_features)]
    formulation = Formulation(problem, milp, features, Output(({}, 0.0), "value", ""), {}, {})
    adapter: Any = problem.model
    inputs = decompose(adapter.model, base_columns(formulation))
    kind = type(inputs.estimator).__name__
    if hasattr(inputs.estimator, "coef_") and not kind.endswith(("Tree", "Forest", "Trees", "Boosting")):
        return {}
    splits = _thresholds(inputs.estimator)
    if splits.unreadable:
        return {}  # a model the exact engine cannot read, as split_points says
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
    # what the values are computed from, besides the estimator's splits and the problem's bounds
    reading = (
        owner_of.tobytes(),
        slope.tobytes(),
        shift.tobytes(),
        space.grid_scale.tobytes(),
        space.n_features,
        FLOAT32_MARGIN,
        FLOAT64_MARGIN,
    )
    with _LOCK:
        found = splits.readings.get(reading)
    if found is None:
        found = _values(splits, owner_of, slope, shift, space.grid_scale)
        with _LOCK:
            while len(splits.readings) >= MAX_KEPT_READINGS:
                splits.readings.pop(next(iter(splits.readings)))
            splits.readings[reading] = found
    out = {}
    for j, values in found.items():
        array = values[(values >= space.lower[j]) & (values <= space.upper[j])]
        if array.size > MAX_PER_FEATURE:
            array = array[np.unique(np.linspace(0, array.size - 1, MAX_PER_FEATURE).astype(int))]
        if array.size:
            out[j] = array  # a copy: indexing never hands out the kept array
    return out


def _values(
    splits: _Thresholds,
    owner_of: npt.NDArray[np.intp],
    slope: FloatArray,
    shift: FloatArray,
    grid_scale: FloatArray,
) -> dict[int, FloatArray]:
    """Per feature: the sorted values on each side of its thresholds, before the problem's bounds."""
    assert splits.columns is not None and splits.thresholds is not None and splits.float32 is not None
    # every split of every tree at once: thresholds in their feature's own units
    columns, thresholds, float32 = splits.columns, splits.thresholds, splits.float32
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
    per_unit = grid_scale[owners]
    gridded = per_unit > 0
    units = np.where(gridded, per_unit, 1.0)
    steps = np.floor(raw * units + 1e-9)
    below, above = steps / units, (steps + 1.0) / units  # the grid values either side, as the grid has them
    relative = np.where(float32, FLOAT32_MARGIN, FLOAT64_MARGIN)
    margin = 2.0 * np.maximum(np.abs(thresholds), 1.0) * relative / np.abs(slope[columns])
    low_side = np.where(gridded, below, raw - margin)
    high_side = np.where(gridded, above, raw + margin)
    found: dict[int, FloatArray] = {}
    for j in np.unique(owners):
        mine = owners == j
        values = np.unique(np.concatenate([low_side[mine], high_side[mine]]))
        values.setflags(write=False)  # kept for later problems: never changed in place
        found[int(j)] = values
    return found
