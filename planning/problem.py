"""The counterfactual problem: features, goals, a model adapter and distance settings.

It is everything the score calculator needs, and it is built once: validation happens here,
at the boundary, so the hot loop can trust its inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import numpy.typing as npt
import pandas as pd

from counterplan.planning.defaults import DEFAULT_GOALS_NOTE, default_goals
from counterplan.planning.distance import DistanceSettings, FeatureStatistics, feature_scales, resolve_metric
from counterplan.planning.errors import ModelAdapterError, ProblemError
from counterplan.planning.goals import (
    BoundGoal,
    ClassGoal,
    OutputSpec,
    RangeGoal,
    ValueGoal,
    as_number,
    bind_goals,
    describe_goals,
)
from counterplan.planning.inference import DataProfile, training_frame
from counterplan.planning.model_protocol import SplitReader, bind_target
from counterplan.planning.models import ModelAdapter, SklearnClassifierAdapter, adapt_sklearn
from counterplan.planning.plausibility import PlausibilityModel, PlausibilitySettings, encode_frame
from counterplan.planning.profile import FeatureSource, InstanceError, check_names
from counterplan.planning.relations import LearnedConstraint, LearnedRelations
from counterplan.planning.relevance import FeatureRelevance
from counterplan.planning.shared_builds import SharedBuilds
from counterplan.planning.space import AnyFeature, FeatureSpace, FloatMatrix
from counterplan.planning.spec import ProblemSpec
from counterplan.planning.structure.interactions import PairMoves
from counterplan.planning.trust_region import TrustRegion, TrustRegionSettings

if TYPE_CHECKING:
    from counterplan.planning.scorecard import ScorecardDistance

AnyGoal = ClassGoal | ValueGoal | RangeGoal
Shared = SharedBuilds | MutableMapping[Any, Any]
"""What problems of one data set share between builds: an explainer's bounded kept builds, or a
caller's own mapping (``from_dataframe``'s ``plausibility_cache``)."""
T = TypeVar("T")


class CounterfactualProblem:
    """A question "what is the smallest change to this input that reaches these goals?".

    Parameters
    ----------
    features:
        The typed features with their original values and domains, in model-input order.
    goals:
        One goal per model output to steer (matched by output name). None: for a binary
        classifier, its second class (:func:`counterplan.planning.defaults.default_goals`).
    model:
        A :class:`~counterplan.planning.models.ModelAdapter`, or a fitted scikit-learn estimator (adapted
        with :func:`~counterplan.planning.models.adapt_sklearn`, output named ``"prediction"``).
    distance:
        How soft level 0 measures proximity; by default MAD-scaled L1 where the statistics
        give every mutable number a MAD, else range-scaled (see :mod:`counterplan.planning.distance`).
    statistics:
        Per-feature normalisation statistics (range, SD, MAD); needed for the MAD and SD
        metrics, inferred by :meth:`from_dataframe`.
    max_changed_features:
        At most this many features may change; each one more breaks a rule (hard level 1).
    plausibility:
        A :class:`~counterplan.planning.plausibility.PlausibilityModel`: an implausible candidate breaks a
        rule (hard level 1). Built by :meth:`from_dataframe` when asked.
    trust_region:
        A :class:`~counterplan.planning.trust_region.TrustRegion` (CE-OCL): a candidate outside the convex
        hull of the target outcome's rows breaks a rule (hard level 1); the original is never
        judged. The exact engine keeps it as constraints. Built by :meth:`from_dataframe` when asked.
    relations:
        :class:`~counterplan.planning.relations.LearnedConstraint` s: features computed from others by a
        fitted regressor (CE-OCL's learned constraints), in every engine.
    """

    def __init__(
        self,
        features: Iterable[AnyFeature],
        goals: Sequence[AnyGoal] | None,
        model: ModelAdapter | Any,
        distance: DistanceSettings | None = None,
        statistics: Mapping[str, FeatureStatistics] | None = None,
        *,
        max_changed_features: int | None = None,
        plausibility: PlausibilityModel | None = None,
        scorecard_distance: ScorecardDistance | None = None,
        trust_region: TrustRegion | None = None,
        relations: Sequence[LearnedConstraint] = (),
    ) -> None:
        if max_changed_features is not None and max_changed_features < 1:
            raise ProblemError("max_changed_features", f"must be at least 1, given {max_changed_features}")
        self.max_changed_features = max_changed_features
        self.plausibility = plausibility
        self.space = FeatureSpace(features)
        if trust_region is not None and trust_region.space.names != self.space.names:
            raise ProblemError("trust_region", "it was built for other features than this problem's")
        self.trust_region = trust_region
        self.model: ModelAdapter = model if isinstance(model, ModelAdapter) else adapt_sklearn(model)
        self.goals_default: str | None = DEFAULT_GOALS_NOTE if goals is None else None
        """When the goals are a default rather than asked, which one (every output says it)."""
        if goals is None:
            goals = default_goals(self.model)
        self.goals: tuple[BoundGoal, ...] = bind_goals(list(goals), self.model.outputs)
        self.statistics: dict[str, FeatureStatistics] = dict(statistics or {})
        self.distance = resolve_metric(self.space, distance or DistanceSettings(), self.statistics)
        self.scales: FloatMatrix = feature_scales(self.space, self.distance, self.statistics)
        self.relations = LearnedRelations(self.space, relations) if relations else None
        """Learned constraints: features computed from others (:mod:`counterplan.planning.relations`)."""
        self.scorecard_distance = scorecard_distance
        """With the ``scorecard`` metric: the objective soft level 0 measures."""
        self.relevance: FeatureRelevance | None = None
        """When built from data with its label column: the features' information values against
        the goal's outcome (:mod:`counterplan.planning.relevance`), which the swarm ranks features by."""
        if self.distance.metric == "scorecard" and scorecard_distance is None:
            self.scorecard_distance = _scorecard_distance(self.model, None, self.distance)

    @classmethod
    def from_dataframe(
        cls,
        data: pd.DataFrame,
        instance: Mapping[str, Any] | pd.Series | pd.DataFrame | int,
        model: ModelAdapter | Any,
        goals: Sequence[AnyGoal] | None = None,
        *,
        columns: Sequence[str] | None = None,
        target: str | None = None,
        immutable: Iterable[str] = (),
        overrides: Mapping[str, Mapping[str, Any]] | None = None,
        distance: DistanceSettings | None = None,
        max_changed_features: int | None = None,
        plausibility: PlausibilitySettings | None = None,
        fill_missing: Iterable[str] | bool = (),
        trust_region: TrustRegionSettings | None = None,
        relations: Sequence[LearnedConstraint] = (),
        profile: DataProfile | None = None,
        plausibility_cache: MutableMapping[Any, Any] | None = None,
    ) -> CounterfactualProblem:
        """Build a problem the way data scientists work: training data plus one row.

        Parameters
        ----------
        data:
            Training DataFrame; domains and statistics are inferred from it. Its columns are
            named by text (a column ``0`` is the feature ``"0"``), each name once.
        instance:
            The row to explain: a mapping, a Series, a one-row DataFrame, or a positional row
            index into ``data``.
        model:
            As in the constructor. A bare scikit-learn model gets its output named ``target``.
        goals:
            As in the constructor (None: a binary classifier's second class).
        columns:
            Feature columns in model-input order; default the model's ``feature_names_in_``,
            else every column but ``target``.
        target:
            The label column, left out of the features.
        immutable:
            Columns the search must never change.
        overrides:
            ``{column: {field: value}}`` replacing inferred feature fields.
        distance:
            As in the constructor.
        max_changed_features:
            As in the constructor.
        plausibility:
            Judge candidates against the training rows of the desired class (the first class
            goal's target, read from the ``target`` column).
        fill_missing:
            Columns whose missing instance value the search may fill in (``True``: all of them).
            Otherwise a missing value stays missing.
        trust_region:
            Keep candidates in the convex hull of the training rows with the target outcome (the
            first class goal's class in the ``target`` column; for a numeric goal, the rows whose
            label meets it); see :mod:`counterplan.planning.trust_region`.
        relations:
            As in the constructor.
        profile:
            The facts of ``data``'s columns kept from an earlier build
            (:class:`counterplan.planning.inference.DataProfile`): building problems for many rows of
            one data set reads the data once.
        plausibility_cache:
            A cache of plausibility models by their features' domains, kept between builds for
            the same reason (rows whose domains agree share one).
        """
        data = training_frame(data)
        target = None if target is None else str(target)  # named by text, as the columns are
        if target is not None and target not in data.columns:
            raise ProblemError("target", f"no column {target!r} in the data; columns: {_listed(data.columns)}")
        row = instance_row(data, instance)
        model = bind_target(model, data, target)
        if columns is None:
            columns = model_columns_of(model, data, target)
        spec = ProblemSpec.from_keywords(
            goals=goals,
            immutable=immutable,
            overrides=overrides,
            distance=distance,
            max_changed_features=max_changed_features,
            plausibility=plausibility,
            fill_missing=fill_missing,
            trust_region=trust_region,
            relations=relations,
        )
        source = profile if profile is not None and profile.data is data else DataProfile(data)
        return build_problem(
            spec, source, model, row, columns=columns, target=target, cache=plausibility_cache, check_instance=False
        )

    @property
    def goal_text(self) -> str:
        """The goals in words (``approved = 1 with p >= 0.705``), as every output states them."""
        return describe_goals(self.goals)

    def with_goals(self, goals: Sequence[AnyGoal]) -> CounterfactualProblem:
        """The same problem asking other goals (nothing is inferred again; information values are
        read against the new goals' outcomes when first asked for)."""
        problem = CounterfactualProblem(
            self.space.features,
            goals,
            self.model,
            self.distance,
            self.statistics,
            max_changed_features=self.max_changed_features,
            plausibility=self.plausibility,
            scorecard_distance=self.scorecard_distance,
            trust_region=self.trust_region,
            relations=self.relations.relations if self.relations is not None else (),
        )
        if self.relevance is not None:
            chosen = _outcome_rows(goals, self.relevance.label)
            if chosen is not None:
                problem.relevance = self.relevance.for_goals((self.relevance.label, repr(list(goals))), chosen)
        return problem

    def split_values(self) -> dict[int, FloatMatrix]:
        """Where the model's decisions change, per mutable number: the values just on each side of
        each split threshold of a tree model (what the feature scan tries); none for a model that
        cannot say (a linear model, a callable, a scorecard)."""
        return self.model.split_values(self.space) if isinstance(self.model, SplitReader) else {}

    def pair_moves(self, limit: int, split_values: Mapping[int, FloatMatrix] | None = None) -> PairMoves:
        """At most ``limit`` pairs of changes of the original that the model's trees reward only
        together (:mod:`counterplan.planning.structure.interactions`), crossing to ``split_values``
        (a solve's, as its feature scan searched them; default: the model's): for a scikit-learn
        classifier with one class goal whose trees can be read, none for another."""
        goals = self.goals
        if len(goals) != 1 or goals[0].class_index < 0 or not isinstance(self.model, SklearnClassifierAdapter):
            return PairMoves.none()
        return self.model.pair_moves(self.space, goals[0].class_index, limit, split_values)

    def original_row(self) -> FloatMatrix:
        """The encoded original instance as a ``(1, n_features)`` matrix."""
        return self.space.original.reshape(1, -1).copy()


def _scorecard_distance(model: Any, data: pd.DataFrame | None, settings: DistanceSettings) -> ScorecardDistance:
    """The scorecard paper's objective for ``model`` (closeness statistics from ``data``)."""
    from counterplan.planning.scorecard import ScorecardAdapter, ScorecardDistance  # noqa: PLC0415

    if not isinstance(model, ScorecardAdapter):
        raise ProblemError("distance.metric", "the 'scorecard' metric needs a scorecard model")
    try:
        return ScorecardDistance.from_data(model.table, data, settings.alpha, settings.beta)
    except ModelAdapterError as exc:
        raise ProblemError(exc.field, exc.problem) from None


def _scorecard_variables(model: Any) -> list[str] | None:
    """The variables a scorecard (table, optbinning Scorecard or its adapter) reads, else None."""
    from counterplan.planning.scorecard import PointsTable, ScorecardAdapter, is_optbinning_scorecard  # noqa: PLC0415

    if isinstance(model, ScorecardAdapter):
        return list(model.feature_names)
    if isinstance(model, PointsTable):
        return [v.name for v in model.variables]
    if is_optbinning_scorecard(model) and hasattr(model, "binning_process_"):
        return [str(n) for n in model.binning_process_.get_support(names=True)]
    return None


def instance_row(
    data: pd.DataFrame | None, instance: Mapping[str, Any] | pd.Series | pd.DataFrame | int
) -> Mapping[str, Any]:
    """The row to explain as a mapping: given so, a Series, a one-row DataFrame, or the row of
    ``data`` at that position (refused when there is no data, or no such row)."""
    if isinstance(instance, int | np.integer):
        if data is None:
            raise ProblemError("row", "a row by position needs the training data: give the row's values")
        if not 0 <= int(instance) < len(data):
            raise ProblemError("instance", f"row {instance} is outside the data's {len(data)} rows")
        return {str(k): v for k, v in data.iloc[int(instance)].items()}
    if isinstance(instance, pd.DataFrame):
        if len(instance) != 1:
            raise ProblemError(
                "instance", f"a DataFrame of {len(instance)} rows; give one row (explain_batch explains many)"
            )
        instance = instance.iloc[0]
    if isinstance(instance, pd.Series):
        return {str(k): v for k, v in instance.items()}
    return instance


def model_columns_of(model: Any, data: pd.DataFrame, target: str | None) -> list[str]:
    """The feature columns when none are named: a scorecard's own variables, a bare model's
    ``feature_names_in_``, else every column but ``target``."""
    names = getattr(model, "feature_names_in_", None)
    read = _scorecard_variables(model)
    if read is not None:  # a scorecard reads only its own variables
        return read
    if names is not None and not isinstance(model, ModelAdapter):
        return [str(c) for c in names]
    return [str(c) for c in data.columns if c != target]


def _shared_plausibility(
    cache: Shared,
    data: pd.DataFrame,
    features: list[AnyFeature],
    goals: Sequence[AnyGoal],
    *,
    target: str | None,
    settings: PlausibilitySettings,
) -> PlausibilityModel:
    """The plausibility model of these features' domains, goals and settings: from ``cache`` when
    an earlier row of the data built it (rows whose domains agree share one), else built now."""
    key = ("plausibility", _domains(features), repr(goals), target, settings.model_dump_json())
    return _shared(cache, key, lambda: plausibility_model(data, features, goals, target, settings))


def _domains(features: list[AnyFeature]) -> tuple[Hashable, ...]:
    """What the data's encoded rows depend on: each feature but its value, and the domain it
    gives (a feature without a range or categories takes its own value for its domain, so two
    rows of it differ there)."""
    return tuple((f.model_dump_json(exclude={"value"}), f.bounds, getattr(f, "domain", None)) for f in features)


def _shared(cache: Shared, key: Hashable, build: Callable[[], T]) -> T:
    """What ``cache`` keeps under ``key``, else ``build()``, kept: an explainer's bounded
    :class:`~counterplan.planning.shared_builds.SharedBuilds`, or a caller's own mapping."""
    if isinstance(cache, SharedBuilds):
        return cache.get(key, build)
    if key not in cache:
        cache[key] = build()
    value: T = cache[key]
    return value


def _relevance(
    data: pd.DataFrame,
    profile: DataProfile | None,
    features: Sequence[AnyFeature],
    goals: Sequence[AnyGoal],
    target: str,
) -> FeatureRelevance | None:
    """The features' information values against the goals' outcome in the ``target`` column, or
    None when the goals name no outcome there."""
    known = profile if profile is not None and profile.data is data else DataProfile(data)
    chosen = _outcome_rows(goals, target)
    if chosen is None:
        return None
    return FeatureRelevance(known, [f.name for f in features], (target, repr(list(goals))), chosen)


def _listed(columns: Iterable[Any], most: int = 30) -> str:
    """Column names for an error message, at most ``most`` of them."""
    names = [str(c) for c in columns]
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def plausibility_model(
    data: pd.DataFrame,
    features: list[AnyFeature],
    goals: Sequence[AnyGoal],
    target: str | None,
    settings: PlausibilitySettings,
) -> PlausibilityModel:
    """Plausibility against the rows of ``data`` whose ``target`` is the first class goal's."""
    goal = next((g for g in goals if isinstance(g, ClassGoal)), None)
    if goal is None or target is None or target not in data.columns:
        raise ProblemError("plausibility", "needs a class goal and the label column given as target")
    space = FeatureSpace(features)
    return PlausibilityModel(space, encode_frame(space, data[_class_rows(data[target], goal)]), settings)


def _class_rows(labels: pd.Series, goal: ClassGoal) -> pd.Series:
    """Where ``labels`` hold the goal's class."""
    chosen = labels.astype(str) == str(goal.target)
    number = as_number(goal.target)
    if not chosen.any() and number is not None:  # class 1 of a label column pandas read as 1.0
        chosen = pd.to_numeric(labels, errors="coerce") == number
    return chosen


def _outcome_rows(goals: Sequence[AnyGoal], target: str) -> Callable[[pd.DataFrame], npt.NDArray[np.bool_]] | None:
    """Which rows of a data set have the target outcome: the first class goal's class in the
    ``target`` column; without a class goal, the rows whose label meets the (one) numeric goal.
    None when the goals do not say (several numeric goals)."""
    goal = next((g for g in goals if isinstance(g, ClassGoal)), None)
    if goal is not None:
        chosen = goal

        def of_class(data: pd.DataFrame) -> npt.NDArray[np.bool_]:
            return _class_rows(data[target], chosen).to_numpy(dtype=bool)

        return of_class
    if len(goals) != 1:
        return None
    bound = BoundGoal(goals[0], OutputSpec(target))

    def meeting(data: pd.DataFrame) -> npt.NDArray[np.bool_]:
        labels = pd.to_numeric(data[target], errors="coerce").to_numpy(dtype=np.float64)
        return np.asarray(bound.met(labels) & np.isfinite(labels), dtype=bool)

    return meeting


def trust_region_model(
    data: pd.DataFrame,
    features: list[AnyFeature],
    goals: Sequence[AnyGoal],
    target: str | None,
    settings: TrustRegionSettings,
    *,
    cache: Shared | None = None,
) -> TrustRegion:
    """The trust region of the rows of ``data`` with the target outcome: the first class goal's
    class in the ``target`` column; without a class goal, the rows whose label meets the (one)
    numeric goal. The region reads the original, so each row builds its own; the encoded rows
    are shared through ``cache`` by rows whose domains agree (encoding 20,000 rows' categories
    took 30 of a build's 49 ms: 32 KServe instances built for 1.5 s before their first search)."""
    if target is None or target not in data.columns:
        raise ProblemError("trust_region", "needs the label column given as target")
    select = _outcome_rows(goals, target)
    if select is None:
        raise ProblemError("trust_region", "needs a class goal, or exactly one numeric goal to select rows by")
    chosen = pd.Series(select(data), index=data.index)
    if not chosen.any():
        raise ProblemError("trust_region", f"no row of the data has the target outcome in column {target!r}")
    space = FeatureSpace(features)

    def encoded() -> FloatMatrix:
        rows = encode_frame(space, data[chosen])
        rows.setflags(write=False)
        return rows

    key = ("trust region rows", _domains(features), repr(goals), target)
    return TrustRegion(space, encoded() if cache is None else _shared(cache, key, encoded), settings)


def build_problem(
    spec: ProblemSpec,
    source: FeatureSource,
    model: ModelAdapter | Any,
    instance: Mapping[str, Any],
    *,
    columns: Sequence[str],
    target: str | None = None,
    cache: Shared | None = None,
    check_instance: bool = True,
) -> CounterfactualProblem:
    """The one way a problem is built: a spec, a data profile, a model and one instance.

    ``source`` builds the features (a :class:`~counterplan.planning.inference.DataProfile` of
    training data, or a model card's :class:`~counterplan.planning.profile.SchemaProfile`);
    ``columns`` are the features in model order; ``target`` is the label column of the source's
    data (plausibility, the trust region and the features' relevance read it). ``cache`` keeps
    what rows of one data set share (plausibility models, a scorecard's objective) between
    builds. With ``check_instance``, a key of ``instance`` that is no feature is refused (the
    label column is let through), as a category the feature does not have always is.
    """
    if target is not None and target in columns:
        raise ProblemError("target", f"the label column {target!r} cannot also be a feature")
    if check_instance:
        unknown = check_names(instance, columns, target)
        if unknown:
            raise InstanceError(unknown)
    features = source.features(instance, columns, spec)
    if not isinstance(model, ModelAdapter):
        model = adapt_sklearn(model, target or "prediction")
    _check_width(model, columns, target)
    statistics = source.statistics_of(features)
    goals: Sequence[AnyGoal] = spec.goals if spec.goals is not None else default_goals(model)
    goals = spec.goals_with_margin(goals)
    data = source.reference
    cache = cache if cache is not None else SharedBuilds()
    judge, region = _data_rules(spec, data, features, goals, target=target, cache=cache)
    objective = None
    if spec.distance.metric == "scorecard":
        objective = _shared_objective(cache, model, data, spec.distance)
    problem = CounterfactualProblem(
        features,
        goals,
        model,
        spec.distance,
        statistics,
        max_changed_features=spec.max_changed_features,
        plausibility=judge,
        scorecard_distance=objective,
        trust_region=region,
        relations=spec.relations,
    )
    problem.goals_default = spec.goals_default if spec.goals is not None else DEFAULT_GOALS_NOTE
    if target is not None and isinstance(source, DataProfile):
        problem.relevance = _relevance(source.data, source, features, goals, target)
    return problem


def _check_width(model: ModelAdapter, columns: Sequence[str], target: str | None) -> None:
    """A scikit-learn model fitted on an array takes its columns by position: as many features as
    it was fitted on (``n_features_in_``), or it fails on every row, which would read as the
    instance's fault. The label column left among the features is the usual cause."""
    fitted: Any = getattr(model, "model", None)
    width = getattr(fitted, "n_features_in_", None)
    if getattr(model, "input_kind", None) != "array" or not isinstance(width, int) or width == len(columns):
        return
    hint = "" if target is not None else " (is the label column among them? name it as the target)"
    raise ProblemError(
        "columns",
        f"the model was fitted on {width} columns, the data gives {len(columns)}: {_listed(columns)}{hint}",
    )


def _data_rules(
    spec: ProblemSpec,
    data: pd.DataFrame | None,
    features: list[AnyFeature],
    goals: Sequence[AnyGoal],
    *,
    target: str | None,
    cache: Shared,
) -> tuple[PlausibilityModel | None, TrustRegion | None]:
    """The rules that judge a candidate against the data's rows: plausibility (shared by rows whose
    domains agree) and the trust region (it reads the original: its encoded rows alone shared)."""
    judge = region = None
    if spec.plausibility is not None:
        if data is None:
            raise ProblemError("plausibility", "needs training data with its label column")
        judge = _shared_plausibility(cache, data, features, goals, target=target, settings=spec.plausibility)
    if spec.trust_region is not None:
        if data is None:
            raise ProblemError("trust_region", "needs training data with its label column")
        region = trust_region_model(data, features, goals, target, spec.trust_region, cache=cache)
    return judge, region


def _shared_objective(
    cache: Shared, model: ModelAdapter, data: pd.DataFrame | None, settings: DistanceSettings
) -> ScorecardDistance:
    """The scorecard paper's objective with these weights: its closeness statistics computed once
    per data set (``cache``)."""
    key = ("scorecard", settings.alpha, settings.beta)
    return _shared(cache, key, lambda: _scorecard_distance(model, data, settings))
