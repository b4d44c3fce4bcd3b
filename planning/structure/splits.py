"""Where a tree ensemble's decisions change: each split threshold, in the feature's own units.

What the exact engine's answers teach local search: the optimal changes land just past split
thresholds, often far from the original (a value the model's trees single out), where a search
that walks step by step sees no gain until it crosses. :func:`split_points` gives, per mutable
number, the values on each side of each threshold (on the feature's grid, or a hair past it),
so the feature scan can try them in its one batched call. It reads the model with the one tree
reader and the one pipeline walker of this package; a model they cannot read (or a linear one)
has none.

Every problem has a space of its own, but the problems of one model share its trees and, nearly
always, the way features reach them; so what costs is kept per fitted estimator (in the shared
memo, :mod:`counterplan.planning.structure.cache`: it goes with the estimator, and a refit in place
drops it): its thresholds, read once, and the split values for each way of reading the features
(which column is which feature through which affine map, the grids), keyed by exactly what they are
computed from. Only the problem's own bounds are applied per problem.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from counterplan.planning.grid import GRID_TOLERANCE, Grid
from counterplan.planning.space import FeatureSpace, SplitValues
from counterplan.planning.structure.cache import MEMO
from counterplan.planning.structure.columns import EstimatorColumn, NumberColumn
from counterplan.planning.structure.errors import NotEncodableError
from counterplan.planning.structure.kind import final_estimator, is_linear
from counterplan.planning.structure.pipeline import describe_model
from counterplan.planning.structure.trees import FLOAT32_MARGIN, FLOAT64_MARGIN, read_ensemble

MAX_PER_FEATURE = 256
"""At most this many split values per feature (an even sample of them beyond)."""
MAX_KEPT_READINGS = 64
"""Split values kept per estimator for at most this many ways of reading the features."""
THRESHOLDS = "split thresholds"
"""The memo key of an estimator's :class:`Thresholds`."""
READ_ERRORS = (NotEncodableError, ValueError, KeyError, AttributeError, IndexError, TypeError, OverflowError)
"""What reading a model's trees or columns may raise: such a model has no split values (or pairs)."""

FloatArray = npt.NDArray[np.float64]


def split_points(model: Any, space: FeatureSpace, *, dataframe: bool) -> SplitValues:
    """Per mutable numeric feature of ``space``: sorted values just on each side of the split
    thresholds of ``model`` (a fitted scikit-learn estimator or pipeline, called with a DataFrame
    when ``dataframe``), with the cuts between them where they are sure (:class:`SplitValues`).
    A problem asks through its model adapter
    (:meth:`counterplan.planning.problem.CounterfactualProblem.split_values`)."""
    try:
        return _split_points(model, space, dataframe)
    except READ_ERRORS:
        return SplitValues()  # a model the readers cannot read: the scan keeps its plain grid


@dataclass
class Thresholds:
    """Every split of every tree of one fitted estimator: the model column it reads, its
    threshold, and whether the model compares float32 inputs; or that reading them raised."""

    columns: npt.NDArray[np.intp] | None = None
    thresholds: FloatArray | None = None
    float32: npt.NDArray[np.bool_] | None = None
    strict: npt.NDArray[np.bool_] | None = None
    """Per split: whether ``x < threshold`` goes left (XGBoost), else ``x <= threshold``."""
    unreadable: bool = False
    """Reading the trees raised (the error is not kept: its traceback would hold the estimator)."""
    readings: dict[tuple[Any, ...], SplitValues] = field(default_factory=dict)
    """Split values before the problem's bounds, per way of reading the features."""


_LOCK = threading.Lock()


def thresholds(estimator: Any) -> Thresholds:
    """The estimator's splits, read once per fitted state."""
    return MEMO.get(estimator, THRESHOLDS, lambda: _read_thresholds(estimator))


def _read_thresholds(estimator: Any) -> Thresholds:
    try:
        ensemble = read_ensemble(estimator)
        columns = np.concatenate([t.feature[t.splits] for t in ensemble.trees])
        values = np.concatenate([t.threshold[t.splits] for t in ensemble.trees])
        float32 = np.concatenate([np.full(int(t.splits.sum()), t.float32) for t in ensemble.trees])
        strict = np.concatenate([np.full(int(t.splits.sum()), t.strict) for t in ensemble.trees])
    except READ_ERRORS:
        return Thresholds(unreadable=True)
    return Thresholds(columns, values, float32, strict)


def graph_split_points(graph: Any, space: FeatureSpace) -> SplitValues:
    """:func:`split_points` of an ONNX graph read by :mod:`counterplan.planning.structure.onnx`
    (its node's trees, the columns its operators make)."""
    try:
        if is_linear(graph.estimator):
            return SplitValues()
        return _points(graph.estimator, graph.describe(space).columns, space)
    except READ_ERRORS:
        return SplitValues()


def _split_points(model: Any, space: FeatureSpace, dataframe: bool) -> SplitValues:
    estimator = final_estimator(model)
    if is_linear(estimator):
        return SplitValues()
    return _points(estimator, describe_model(model, space, dataframe).columns, space)


def _points(estimator: Any, columns: Sequence[EstimatorColumn], space: FeatureSpace) -> SplitValues:
    owner_of, slope, shift = affine_columns(columns, space)
    splits = thresholds(estimator)
    if splits.unreadable:
        return SplitValues()  # a model the tree reader cannot read, as split_points says
    # a feature that also reaches the model some other way (a clipped or looked-up column) has
    # thresholds the affine reading does not see: its cells are not known
    other_routes = {column.source for c, column in enumerate(columns) if owner_of[c] < 0}
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
        found = _values(splits, owner_of, slope, shift, space.grid)
        with _LOCK:
            while len(splits.readings) >= MAX_KEPT_READINGS:
                splits.readings.pop(next(iter(splits.readings)))
            splits.readings[reading] = found
    return _within_bounds(found, space, other_routes)


def affine_columns(
    columns: Sequence[EstimatorColumn], space: FeatureSpace
) -> tuple[npt.NDArray[np.intp], FloatArray, FloatArray]:
    """Per model column: the movable number it is an affine function of (-1: none), and how
    (``column = slope * value + shift``). A category, a number restricted to allowed values, a
    constant and a clipped column have none."""
    owner_of = np.full(len(columns), -1, dtype=np.intp)
    slope = np.zeros(len(columns))
    shift = np.zeros(len(columns))
    for c, column in enumerate(columns):
        if not isinstance(column, NumberColumn) or not _movable_number(space, column.source):
            continue
        a, b = 1.0, 0.0
        try:
            for layer in column.layers:
                for factor, offset in layer.affine():
                    a, b = a * factor, b * factor + offset
        except NotEncodableError:
            continue  # clipped: not affine
        if a != 0.0:
            owner_of[c], slope[c], shift[c] = column.source, a, b
    return owner_of, slope, shift


def _movable_number(space: FeatureSpace, j: int) -> bool:
    """A number that may take more than one value of a range (not a category or boolean, not one
    of allowed values, not constant or missing)."""
    feature = space.features[j]
    movable = feature.mutable and space.lower[j] != space.upper[j] and not space.missing[j]
    return bool(movable and not space.nominal[j] and j not in space.allowed)


def _values(
    splits: Thresholds,
    owner_of: npt.NDArray[np.intp],
    slope: FloatArray,
    shift: FloatArray,
    grid: Grid,
) -> SplitValues:
    """Per feature: the sorted values on each side of its thresholds, before the problem's bounds,
    and its cuts where every threshold's pair is sure (:func:`_sure_sides`)."""
    assert splits.columns is not None and splits.thresholds is not None
    assert splits.float32 is not None and splits.strict is not None
    # every split of every tree at once: thresholds in their feature's own units
    columns, values, float32, strict = splits.columns, splits.thresholds, splits.float32, splits.strict
    keep = owner_of[columns] >= 0
    columns, values, float32, strict = columns[keep], values[keep], float32[keep], strict[keep]
    owners = owner_of[columns]
    with np.errstate(all="ignore"):
        raw = (values - shift[columns]) / slope[columns]
    finite = np.isfinite(raw)
    owners, raw, values, columns, float32, strict = (
        owners[finite],
        raw[finite],
        values[finite],
        columns[finite],
        float32[finite],
        strict[finite],
    )
    gridded = grid.gridded[owners]
    units = (grid, owners)  # a column without a grid counts in units of 1
    relative = np.where(float32, FLOAT32_MARGIN, FLOAT64_MARGIN)
    margin = 2.0 * np.maximum(np.abs(values), 1.0) * relative / np.abs(slope[columns])
    steps = np.floor(grid.steps(raw, owners) + GRID_TOLERANCE)
    below, above = grid.values(steps, owners), grid.values(steps + 1.0, owners)  # either side, as the grid has them
    below, above = _float32_sides(below, above, values, slope[columns], shift[columns], float32 & gridded, units)
    low_side = np.where(gridded, below, raw - margin)
    high_side = np.where(gridded, above, raw + margin)
    a, b = slope[columns], shift[columns]
    sure = gridded & _sure_sides(below, above, values, a, b, float32, strict)
    # a threshold on a grid value that the trees send right (XGBoost's x < t): the boundary lies
    # one grid step lower, and the value on it is the first past it
    lower = _grid_step(below, units, -1.0)
    on_it = gridded & ~sure & _sure_sides(lower, below, values, a, b, float32, strict)
    cut = np.where(on_it, below, high_side)
    sure |= on_it
    found = SplitValues()
    for j in np.unique(owners):
        mine = owners == j
        sides = np.unique(np.concatenate([low_side[mine], high_side[mine]]))
        sides.setflags(write=False)  # kept for later problems: never changed in place
        found[int(j)] = sides
        if sure[mine].all():
            cuts = np.unique(cut[mine])
            cuts.setflags(write=False)
            found.cuts[int(j)] = cuts
    return found


def _sure_sides(  # noqa: PLR0917 - the sides and what they are measured by, as _values has them
    below: FloatArray,
    above: FloatArray,
    thresholds: FloatArray,
    slope: FloatArray,
    shift: FloatArray,
    float32: npt.NDArray[np.bool_],
    strict: npt.NDArray[np.bool_],
) -> npt.NDArray[np.bool_]:
    """Per threshold: whether its lower side value goes one way and its higher the other, as the
    trees see them: each value reaches the model at least a margin clear of the threshold, on
    its own side (a float32 model's margin is many float32 steps, so rounding cannot bring a
    value onto it; a float64 margin covers a pipeline's affine map computed in another order).
    Where the column is the value itself (no map to round), the model's own comparison decides
    instead, exactly: the value as it sees it (float32 or not) against the threshold, ``x <= t``
    or XGBoost's ``x < t`` going left, so a value on the threshold is sure too."""
    relative = np.where(float32, FLOAT32_MARGIN, FLOAT64_MARGIN)
    margin = 2.0 * np.maximum(np.abs(thresholds), 1.0) * relative
    with np.errstate(all="ignore"):
        low, high = below * slope + shift, above * slope + shift
    rising = slope > 0
    left, right = np.where(rising, low, high), np.where(rising, high, low)
    itself = (slope == 1.0) & (shift == 0.0)

    def goes_left(x: FloatArray) -> npt.NDArray[np.bool_]:
        seen = np.where(float32, x.astype(np.float32).astype(np.float64), x)
        return np.asarray(np.where(strict, seen < thresholds, seen <= thresholds))

    left_sure = (left < thresholds - margin) | (itself & goes_left(left))
    right_sure = (right > thresholds + margin) | (itself & ~goes_left(right))
    return np.asarray(left_sure & right_sure)


_FLOAT32_STEPS = 64
"""Grid steps a side may move to get past a float32 threshold (float32's spacing at 10^7 is 1)."""


def _float32_sides(  # noqa: PLR0917 - the sides and what they are measured by, as _values has them
    below: FloatArray,
    above: FloatArray,
    thresholds: FloatArray,
    slope: FloatArray,
    shift: FloatArray,
    float32: npt.NDArray[np.bool_],
    units: tuple[Grid, npt.NDArray[np.intp]],
) -> tuple[FloatArray, FloatArray]:
    """The grid values either side of each threshold as a model comparing float32 inputs sees
    them: a grid value rounds onto the threshold's float32 (the demo's income 69,587.05 is
    69,587.047 to its trees, on the threshold's left, not past it), so a side on the wrong one
    moves a grid step outwards until it is not, and the other side follows to one step from it (the
    value it moved from is on the other side as the trees see it). So the two sides stay one grid
    step apart with the threshold, as the trees see it, between them: a complete list's values
    pair up (:func:`paired_split_values`), and the cells the scans cut stay right."""
    first_below, first_above = below, above
    for _ in range(_FLOAT32_STEPS):
        seen_above = (above * slope + shift).astype(np.float32).astype(np.float64) > thresholds
        seen_below = (below * slope + shift).astype(np.float32).astype(np.float64) > thresholds
        wrong_above = float32 & (seen_above != (slope > 0))
        wrong_below = float32 & (seen_below != (slope < 0))
        if not (wrong_above.any() or wrong_below.any()):
            break
        above = np.where(wrong_above, _grid_step(above, units, 1.0), above)
        below = np.where(wrong_below, _grid_step(below, units, -1.0), below)
    moved_above, moved_below = above != first_above, below != first_below
    below = np.where(moved_above & ~moved_below, _grid_step(above, units, -1.0), below)
    above = np.where(moved_below & ~moved_above, _grid_step(below, units, 1.0), above)
    return below, above


def _grid_step(values: FloatArray, units: tuple[Grid, npt.NDArray[np.intp]], steps: float) -> FloatArray:
    """``values`` (on the grid of ``units``: a grid and each value's column) moved ``steps`` grid
    steps, written as the grid writes its values (a whole count of steps: no sum's rounding error)."""
    grid, columns = units
    return grid.values(np.round(grid.steps(values, columns)) + steps, columns)


def _within_bounds(found: SplitValues, space: FeatureSpace, other_routes: set[int]) -> SplitValues:
    """The kept values inside the problem's bounds (a copy), an even sample beyond :data:`MAX_PER_FEATURE`;
    the cuts of the features that have values left and reach the model by no other route than
    the thresholds read (a cut's cells hold whatever the bounds and the sample keep)."""
    out = SplitValues()
    for j, values in found.items():
        array = values[(values >= space.lower[j]) & (values <= space.upper[j])]
        if array.size > MAX_PER_FEATURE:
            array = array[np.unique(np.linspace(0, array.size - 1, MAX_PER_FEATURE).astype(int))]
        if array.size:
            out[j] = array  # a copy: indexing never hands out the kept array
            cuts = found.cuts.get(j)
            if cuts is not None and j not in other_routes:
                out.cuts[j] = cuts  # read only, shared
    return out


__all__ = [
    "MAX_PER_FEATURE",
    "READ_ERRORS",
    "THRESHOLDS",
    "Thresholds",
    "affine_columns",
    "graph_split_points",
    "split_points",
    "thresholds",
]


PAIR_TOLERANCE = 1e-6
"""How far (in grid steps) two split values may be from exactly one step apart and still pair."""


def paired_split_values(
    owners: npt.NDArray[np.intp], values: FloatArray, step: FloatArray, lower: FloatArray, upper: FloatArray
) -> npt.NDArray[np.bool_]:
    """Per split value (``values`` of the columns ``owners``, sorted by column then value; ``step``,
    ``lower`` and ``upper`` per column): whether it pairs up, one grid step from another split value
    of its column or within a step of a bound.

    :func:`split_points` lists the grid values on each side of each threshold, so in a complete
    list every value pairs up and a threshold lies only between the two of a pair: the values
    between two pairs are one cell, where the trees decide alike. A lone value means some
    thresholds were left out (a sampled list), and the column's cells are not known. The local
    search's scan and the vectorised engine both cut cells by this one rule."""
    if owners.size == 0:
        return np.zeros(0, dtype=bool)
    col_step = step[owners]
    tolerance = PAIR_TOLERANCE * col_step
    apart = (owners[1:] == owners[:-1]) & (np.abs(np.diff(values) - col_step[1:]) <= tolerance[1:])
    paired = np.zeros(owners.size, dtype=bool)
    paired[1:] = apart
    paired[:-1] |= apart
    near_bound = (values - lower[owners] < col_step + tolerance) | (upper[owners] - values < col_step + tolerance)
    return np.asarray(paired | near_bound)
