"""Feature distance d(x, x'): how far a candidate moved from the original instance.

Options, each per feature and summed:

* ``auto`` (default): ``mad_l1`` when every mutable number has a MAD (a problem built from
  training data), else ``range_l1``;
* ``mad_l1``: ``|x - x'| / MAD``, the median absolute deviation of the training data (DiCE,
  CARLA, Wachter et al.); as in DiCE, a MAD of 0 (a column that is mostly one value) counts as
  1, so changing such a feature is costly in its own units;
* ``range_l1`` (Gower-style): ``|x - x'| / range``, range from the data or the domain;
* ``sd_squared``: ``((x - x') / SD)^2``, the original constraint-solver design's choice;
* ``scorecard`` (credit scorecards only): the scorecard paper's objective, ``alpha`` x the WoE
  change weighted by 1 / each variable's points range + ``beta`` x the L1-Mahalanobis closeness
  of the candidate's WoE to the training data (:class:`counterplan.planning.scorecard.ScorecardDistance`).

Why MAD by default: a range treats a move across a long-tailed column as cheap. On adult,
capital-gain spans 0-99,999, so under ``range_l1`` "add $5,000 of capital gain" costs 0.05 and
becomes the answer for nearly every rejected row; its MAD is 0 (most people have none), so
under ``mad_l1`` each dollar counts and answers move what people can move (hours, education).
``benchmarks/real_data.py`` compares the three on adult, compas and heloc.

Categorical and boolean features count 1 when changed, 0 otherwise. A range or SD of 0 (a
column with one value) falls back to the domain range, then to 1.

``change_penalty`` adds a fixed amount for every changed feature, in the metric's own units
(with ``mad_l1``, "touching one more feature is worth this many MADs of movement"): an L0
term beside the L1 one. With 0 (TrustyAI's score) two small changes beat one slightly larger
change; with a penalty an answer changes fewer features unless spreading the change saves
more than the penalty. Sparsity stays on soft level 1 as the tie-breaker either way. Like the
movement, the penalty is weighted by the feature's change cost.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field

from counterplan.planning.errors import ProblemError
from counterplan.planning.space import BoolArray, FeatureSpace, FloatMatrix

DistanceMetric = Literal["auto", "mad_l1", "range_l1", "sd_squared", "scorecard"]
MAX_CHANGE_PENALTY = 1.0e6
"""Above this, the penalty would drown the movement term in float64 and polishing could not
tell a closer answer from a farther one; 1e6 already ranks fewer changes first for any
distance below it."""


class DistanceSettings(BaseModel):
    """How soft level 0 measures the distance of a candidate from the original."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    metric: DistanceMetric = "auto"
    change_penalty: Annotated[float, Field(ge=0.0, le=MAX_CHANGE_PENALTY, allow_inf_nan=False)] = 0.0
    """Added to the distance once per changed feature, in the metric's units (an L0 term)."""
    alpha: Annotated[float, Field(ge=0.0, le=1e6, allow_inf_nan=False)] = 1.0
    """``scorecard`` metric: the weight of proximity (the WoE change)."""
    beta: Annotated[float, Field(ge=0.0, le=1e6, allow_inf_nan=False)] = 1.0
    """``scorecard`` metric: the weight of closeness to the training data."""


class FeatureStatistics(BaseModel):
    """Normalisation statistics of one numeric feature, usually inferred from training data."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    range: Annotated[float, Field(ge=0.0)] | None = None
    std: Annotated[float, Field(ge=0.0)] | None = None
    mad: Annotated[float, Field(ge=0.0)] | None = None


def resolve_metric(
    space: FeatureSpace, settings: DistanceSettings, statistics: Mapping[str, FeatureStatistics]
) -> DistanceSettings:
    """``settings`` with ``auto`` replaced by the metric it means for this problem."""
    if settings.metric != "auto":
        return settings
    numbers = [f.name for i, f in enumerate(space.features) if space.graded[i] and f.mutable]
    known = all(statistics.get(name, FeatureStatistics()).mad is not None for name in numbers)
    return settings.model_copy(update={"metric": "mad_l1" if known else "range_l1"})


def feature_scales(
    space: FeatureSpace,
    settings: DistanceSettings,
    statistics: Mapping[str, FeatureStatistics],
) -> FloatMatrix:
    """The divisor of each numeric column for ``settings.metric`` (1 for nominal columns)."""
    unknown = sorted(set(statistics) - set(space.names))
    if unknown:
        raise ProblemError(f"statistics.{unknown[0]}", "statistics given for an unknown feature")
    scales = np.ones(space.n_features, dtype=np.float64)
    if settings.metric == "scorecard":  # measured in WoE space, not per feature
        return scales
    needed = {"auto": "range", "range_l1": "range", "mad_l1": "mad", "sd_squared": "std"}[settings.metric]
    for i, feature in enumerate(space.features):
        if not space.graded[i]:  # categories, booleans, missing originals: 1 per change
            continue
        stats = statistics.get(feature.name, FeatureStatistics())
        value = getattr(stats, needed)
        if value is None and needed != "range":
            if feature.mutable:
                raise ProblemError(
                    f"statistics.{feature.name}.{needed}",
                    f"distance metric {settings.metric!r} needs the feature's {needed}; "
                    "give statistics or build the problem from training data",
                )
            continue
        if not value:
            value = 1.0 if needed == "mad" else stats.range or float(space.domain_upper[i] - space.domain_lower[i])
        scales[i] = value if value else 1.0
    return scales


def feature_costs(
    X: FloatMatrix,
    original: FloatMatrix,
    nominal: npt.NDArray[np.bool_],
    scales: FloatMatrix,
    metric: DistanceMetric,
    *,
    costs: FloatMatrix | None = None,
    change_penalty: float = 0.0,
    changed: npt.NDArray[np.bool_] | None = None,
) -> FloatMatrix:
    """What each value of ``X`` adds to d(x, original): the one place a feature's share is priced.

    Every argument broadcasts against ``X``, so the same function prices whole rows (``X`` of
    shape ``(m, n)`` against the ``(n,)`` original, as :func:`feature_distance` does) and
    scattered single values (``X``, ``original[columns]``, ``scales[columns]`` ... all of one
    shape: what a local search's trade or move of feature ``columns[i]`` to ``X[i]`` costs).
    Not for ``scorecard``, which is measured in WoE space, not per feature.
    ``changed`` (``X != original``), when the caller has it already."""
    # One work matrix, each step in place (the score calculator calls this on every batch).
    per_feature = np.subtract(X, original)
    if changed is None:
        changed = per_feature != 0.0
    np.divide(per_feature, scales, out=per_feature)
    if metric == "sd_squared":
        np.square(per_feature, out=per_feature)
    else:
        np.abs(per_feature, out=per_feature)
    np.copyto(per_feature, changed, where=nominal)  # a category, a boolean: 1 when changed
    if change_penalty:
        per_feature += change_penalty * changed
    if costs is not None:
        per_feature *= costs
    return per_feature


def feature_distance(
    X: FloatMatrix,
    original: FloatMatrix,
    nominal: npt.NDArray[np.bool_],
    scales: FloatMatrix,
    metric: DistanceMetric,
    *,
    costs: FloatMatrix | None = None,
    change_penalty: float = 0.0,
    changed: npt.NDArray[np.bool_] | None = None,
) -> FloatMatrix:
    """d(x, original) for every row of ``X``, each feature weighted by its change cost: the sum
    of :func:`feature_costs` over the features.

    ``changed`` (``X != original``), when the caller has it already."""
    per_feature = feature_costs(
        X, original, nominal, scales, metric, costs=costs, change_penalty=change_penalty, changed=changed
    )
    return np.asarray(np.add.reduce(per_feature, axis=1), dtype=np.float64)


SUMMED_METRICS = ("mad_l1", "range_l1", "sd_squared")
"""The metrics that are a sum of per-feature shares (:func:`feature_costs`); ``scorecard`` is not."""


class FeaturePricer:
    """What setting feature ``j`` to a value adds to the distance, exactly as the score
    calculator sums it (:func:`feature_costs`): local search prices trades and steps in the
    distance's own units with it, before scoring anything.

    Built from a problem's resolved metric, scales, change costs and penalty; only for
    :data:`SUMMED_METRICS`."""

    def __init__(
        self,
        original: FloatMatrix,
        nominal: npt.NDArray[np.bool_],
        scales: FloatMatrix,
        metric: DistanceMetric,
        *,
        costs: FloatMatrix | None = None,
        change_penalty: float = 0.0,
    ) -> None:
        if metric not in SUMMED_METRICS:
            raise ValueError(f"metric {metric!r} is not a sum of per-feature shares")
        self.original = np.asarray(original, dtype=np.float64)
        self.nominal = np.asarray(nominal, dtype=bool)
        self.scales = np.asarray(scales, dtype=np.float64)
        self.metric: DistanceMetric = metric
        self.costs = np.ones_like(self.scales) if costs is None else np.asarray(costs, dtype=np.float64)
        self.change_penalty = float(change_penalty)

    def cost(self, values: FloatMatrix, columns: npt.NDArray[np.intp]) -> FloatMatrix:
        """What feature ``columns[i]`` at ``values[i]`` adds to the distance (0 at its original)."""
        values = np.asarray(values, dtype=np.float64)
        return feature_costs(
            values,
            self.original[columns],
            self.nominal[columns],
            self.scales[columns],
            self.metric,
            costs=self.costs[columns],
            change_penalty=self.change_penalty,
        )

    def unit(self, columns: npt.NDArray[np.intp]) -> FloatMatrix:
        """How far feature ``columns[i]`` moves for one unit of distance (before the penalty):
        its scale, divided by its change cost (a costlier feature moves less per unit)."""
        costs = np.where(self.costs[columns] > 0.0, self.costs[columns], 1.0)
        return np.asarray(self.scales[columns] / costs, dtype=np.float64)


def gower(rows: FloatMatrix, original: FloatMatrix, nominal: BoolArray, width: FloatMatrix) -> FloatMatrix:
    """Mean Gower distance of each row from ``original``: numbers by ``width`` (a space's
    :attr:`~counterplan.planning.space.FeatureSpace.domain_width`), categories and booleans 1 when changed.
    The MD-PSO paper's l2 and the CSCF paper's distance objective."""
    changed = np.where(nominal, rows != original, np.abs(rows - original) / width)
    return np.asarray(changed.mean(axis=1), dtype=np.float64)
