"""Build once, explain many: an explainer made from a model, its training data and settings.

Users of DiCE (``Dice(data, model)``) and TrustyAI make one explainer and ask it about row after
row. Building a :class:`~planning.CounterfactualProblem` from a training DataFrame reads every
column (kinds, domains, grids, statistics); for a data set of thousands of rows that cost more
than the search. An :class:`Explainer` reads the data once (:class:`counterplan.planning.inference.DataProfile`),
adapts the model once (its fast path compiled once, :mod:`counterplan.planning.fast_path`), checks its
settings once against the first row, and then ``explain(row)`` costs the search and little else.
``explain_batch(rows)`` explains many rows together (:mod:`counterplan.solver.batch`, which sits
below the explainer and knows it only as a :class:`~counterplan.solver.batch.protocol.RowExplainer`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from counterplan.planning.distance import DistanceSettings
from counterplan.planning.errors import ProblemError
from counterplan.planning.inference import DataProfile, training_frame
from counterplan.planning.model_protocol import bind_target
from counterplan.planning.models import ModelAdapter, adapt_sklearn
from counterplan.planning.plausibility import PlausibilitySettings
from counterplan.planning.problem import AnyGoal, CounterfactualProblem, build_problem, instance_row, model_columns_of
from counterplan.planning.profile import FeatureSource
from counterplan.planning.relations import LearnedConstraint
from counterplan.planning.shared_builds import SharedBuilds
from counterplan.planning.spec import ProblemSpec
from counterplan.planning.trust_region import TrustRegionSettings
from counterplan.solver.batch.records import question_of
from counterplan.solver.batch.rows import probe_row
from counterplan.solver.batch.run import explain_batch
from counterplan.solver.core.config import SolverConfig
from counterplan.solver.counterfactual import CounterfactualSolver, Listener
from counterplan.solver.engines import EngineChoice
from counterplan.solver.result import CounterfactualResult

if TYPE_CHECKING:
    from counterplan.planning.calculator import ModelCalls
    from counterplan.solver.batch.rows import RowSelection

Row = Mapping[str, Any] | pd.Series | pd.DataFrame | int
"""A row to explain: a mapping, a Series, a one-row DataFrame, or a position in the data."""


class Explainer:
    """Explains rows of one model, with the training data (or a model card's schema) and the
    problem's settings read once.

    Parameters
    ----------
    model:
        A fitted scikit-learn model or pipeline, a scorecard, or a model adapter.
    data:
        Training data: domains, statistics and (for ``explain_batch``) the rows to explain by
        position come from it. Or give ``profile`` instead (a model card's
        :class:`~counterplan.planning.profile.SchemaProfile`).
    goals:
        What each answer must reach; None: for a binary classifier, its second class (as
        :class:`~counterplan.planning.CounterfactualProblem`).
    spec:
        Every option of the problem as data (:class:`~counterplan.planning.spec.ProblemSpec`): the
        same object a command line, a model card or a gRPC request builds. Or give the options
        as keywords: ``immutable``, ``overrides``, ``distance``, ``max_changed_features``,
        ``plausibility``, ``fill_missing``, ``trust_region``, ``relations`` (as for
        :meth:`counterplan.planning.CounterfactualProblem.from_dataframe`), not both.
    target:
        The label column, left out of the features; names a bare model's output.
    columns:
        The features in model order (default: the model's own, else every column but ``target``).
    config, engine, num_counterfactuals, seed:
        As for :func:`counterplan.solver.explain`; each ``explain`` may override them.
    check:
        Check the settings now on the data's first row (a batch then fails before any work
        starts); a caller about to explain one row may leave it to that row.
    """

    def __init__(
        self,
        model: Any,
        data: pd.DataFrame | None = None,
        goals: Sequence[AnyGoal] | None = None,
        *,
        profile: FeatureSource | None = None,
        spec: ProblemSpec | None = None,
        target: str | None = None,
        columns: Sequence[str] | None = None,
        immutable: Iterable[str] = (),
        overrides: Mapping[str, Mapping[str, Any]] | None = None,
        distance: DistanceSettings | None = None,
        max_changed_features: int | None = None,
        plausibility: PlausibilitySettings | None = None,
        fill_missing: Iterable[str] | bool = (),
        trust_region: TrustRegionSettings | None = None,
        relations: Sequence[LearnedConstraint] = (),
        config: SolverConfig | None = None,
        engine: EngineChoice | None = None,
        num_counterfactuals: int = 1,
        seed: int | None = None,
        check: bool = True,
    ) -> None:
        self.source, self.data = _source(data, profile)
        target = None if target is None else str(target)  # named by text, as the data's columns are
        self.model = model = bind_target(model, self.data, target)  # a served model learns its class names
        self.adapter: ModelAdapter = (
            model if isinstance(model, ModelAdapter) else adapt_sklearn(model, target or "prediction")
        )
        if target is not None and self.data is not None and target not in self.data.columns:
            raise ProblemError("target", f"no column {target!r} in the data; columns: {_listed(self.data.columns)}")
        keywords = ProblemSpec.from_keywords(
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
        if spec is not None and keywords != ProblemSpec.from_keywords(goals=goals):
            raise ProblemError("spec", "give the problem's options as a spec or as keywords, not both")
        self.spec = spec.asking(goals) if spec is not None and goals else spec or keywords
        self.target = target
        self.columns = list(columns) if columns is not None else self._columns(model)
        self.config = config or SolverConfig()
        self.engine = engine
        self.num_counterfactuals = num_counterfactuals
        self.seed = seed
        self._cache = SharedBuilds()
        """What its problems share (plausibility models...), for a bounded number of specs."""
        if num_counterfactuals < 1:
            raise ProblemError("num_counterfactuals", f"must be at least 1, given {num_counterfactuals}")
        if check:  # bad settings fail here, before any row is explained
            self.check()

    def check(self) -> None:
        """Check the settings on the data's first readable row (:func:`~counterplan.solver.batch.rows.probe_row`):
        its problem and a solver for it are built (an engine that cannot take the model is
        refused here), so a batch fails before any work starts. Nothing to check without data."""
        if self.data is not None:
            probe = self.problem(probe_row(self), trust_region=False)
            CounterfactualSolver(probe, self.config, self.seed, self.num_counterfactuals, self.engine)

    @property
    def profile(self) -> FeatureSource:
        """What the features are built from: the training data's profile, or a schema."""
        return self.source

    @property
    def question(self) -> str:
        """A fingerprint of what every row is asked: the spec (goals, rules, distance), the solver
        configuration but its seed (a record holds its own), the engine and the number of answers.
        Each batch record holds it, so a resumed job can tell an output that answered another
        question (:func:`counterplan.solver.batch.records.question_of`)."""
        return question_of(self.spec, self.config, self.engine, self.num_counterfactuals)

    @property
    def goals(self) -> list[AnyGoal] | None:
        """The goals every row is asked (None: the default question)."""
        return list(self.spec.goals) if self.spec.goals is not None else None

    def _columns(self, model: Any) -> list[str]:
        """The features in model order: the schema's, the model's own, else the data's columns
        (a scorecard says which variables it reads)."""
        if self.source.columns is not None:
            return list(self.source.columns)
        assert self.data is not None
        return model_columns(model, self.data, self.target) or model_columns_of(self.adapter, self.data, self.target)

    def problem(
        self,
        row: Row,
        goals: Sequence[AnyGoal] | None = None,
        *,
        spec: ProblemSpec | None = None,
        trust_region: bool = True,
    ) -> CounterfactualProblem:
        """The counterfactual problem of ``row`` (a mapping, a Series, a one-row DataFrame, or a
        position in ``data``), under the explainer's spec (``spec``: a request's options over it;
        ``goals`` replace its goals); ``trust_region=False`` leaves the trust region out (checking
        settings only)."""
        asked = self.spec if spec is None else spec.over(self.spec)
        if goals is not None:
            asked = asked.asking(goals)
        if not trust_region:
            asked = asked.model_copy(update={"trust_region": None})
        return build_problem(
            asked,
            self.source,
            self.adapter,
            instance_row(self.data, row),
            columns=self.columns,
            target=self.target,
            cache=self._cache,
            check_instance=not isinstance(row, int | pd.Series | pd.DataFrame),
        )

    def solver(
        self,
        row: Row,
        *,
        seed: int | None = None,
        goals: Sequence[AnyGoal] | None = None,
        calls: ModelCalls | None = None,
        engine: EngineChoice | None = None,
        num_counterfactuals: int | None = None,
        spec: ProblemSpec | None = None,
    ) -> CounterfactualSolver:
        """A solver for ``row``, ready to run (listeners may be added first); ``engine``,
        ``num_counterfactuals`` and ``seed`` override the explainer's for this row."""
        return CounterfactualSolver(
            self.problem(row, goals, spec=spec),
            self.config,
            seed if seed is not None else self.seed,
            num_counterfactuals if num_counterfactuals is not None else self.num_counterfactuals,
            engine if engine is not None else self.engine,
            calls=calls,
        )

    def explain(
        self,
        row: Row,
        *,
        seed: int | None = None,
        goals: Sequence[AnyGoal] | None = None,
        engine: EngineChoice | None = None,
        num_counterfactuals: int | None = None,
        spec: ProblemSpec | None = None,
        listeners: Iterable[Listener] = (),
    ) -> CounterfactualResult:
        """The best counterfactual of ``row``: only the search is paid for. ``engine``,
        ``num_counterfactuals``, ``seed`` and ``goals`` (or a whole ``spec`` over the explainer's)
        apply to this row only."""
        solver = self.solver(
            row, seed=seed, goals=goals, engine=engine, num_counterfactuals=num_counterfactuals, spec=spec
        )
        for listener in listeners:
            solver.add_listener(listener)
        return solver.solve()

    def explain_batch(
        self,
        rows: pd.DataFrame | RowSelection | str | Sequence[int] | None = None,
        *,
        seed: int | None = None,
        only_rejected: bool = False,
        workers: int = 1,
        window: int | None = None,
        on_record: Callable[[dict[str, Any]], None] | None = None,
        skip: Iterable[Any] = (),
        ray: str | None = None,
        vectorised: bool | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> pd.DataFrame:
        """Explain many rows together, one model call per step for all of them: by default
        with the vectorised engine where it can go, ``vectorised=False`` on the threads path.

        See :func:`counterplan.solver.batch.explain_batch` for the parameters and the result's columns.
        """
        return explain_batch(
            self,
            rows,
            seed=seed,
            only_rejected=only_rejected,
            workers=workers,
            window=window,
            on_record=on_record,
            skip=skip,
            ray=ray,
            vectorised=vectorised,
            stop=stop,
        )


def model_columns(model: Any, data: pd.DataFrame, target: str | None) -> list[str] | None:
    """The columns a model reads, in its order: a scorecard's own variables (None: it says),
    a model fitted on a DataFrame's ``feature_names_in_``, else every column but ``target``."""
    from counterplan.planning.scorecard import PointsTable, ScorecardAdapter, is_optbinning_scorecard  # noqa: PLC0415

    if isinstance(model, PointsTable | ScorecardAdapter) or is_optbinning_scorecard(model):
        return None
    inner = getattr(model, "model", model) if isinstance(model, ModelAdapter) else model
    names = getattr(inner, "feature_names_in_", None)
    if names is not None:
        return [str(n) for n in names]
    return [str(c) for c in data.columns if c != target]


def _source(data: pd.DataFrame | None, profile: FeatureSource | None) -> tuple[FeatureSource, pd.DataFrame | None]:
    """The profile the features come from, and the training data when there is some."""
    if profile is not None:
        if data is not None:
            raise ProblemError("profile", "give the training data or a profile, not both")
        reference = profile.reference
        return profile, reference
    if not isinstance(data, pd.DataFrame) or data.empty:
        raise ProblemError("data", "give the training data as a DataFrame with at least one row")
    frame = training_frame(data)
    return DataProfile(frame), frame


def _listed(columns: Iterable[Any], most: int = 30) -> str:
    """Column names for an error message, at most ``most`` of them."""
    names = [str(c) for c in columns]
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")
