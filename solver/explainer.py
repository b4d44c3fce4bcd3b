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
from counterplan.planning.inference import DataProfile
from counterplan.planning.models import ModelAdapter, adapt_sklearn
from counterplan.planning.plausibility import PlausibilityModel, PlausibilitySettings
from counterplan.planning.problem import AnyGoal, CounterfactualProblem
from counterplan.planning.relations import LearnedConstraint
from counterplan.planning.trust_region import TrustRegionSettings
from counterplan.solver.batch.run import explain_batch
from counterplan.solver.core.config import SolverConfig
from counterplan.solver.counterfactual import CounterfactualSolver, Listener
from counterplan.solver.engines import EngineChoice
from counterplan.solver.result import CounterfactualResult

if TYPE_CHECKING:
    from counterplan.planning.calculator import ModelCalls
    from counterplan.solver.batch.rows import RowSelection


class Explainer:
    """Explains rows of one model, with the training data and settings read once.

    Parameters
    ----------
    model:
        A fitted scikit-learn model or pipeline, a scorecard, or a model adapter.
    data:
        Training data: domains, statistics and (for ``explain_batch``) the rows to explain by
        position come from it.
    goals:
        What each answer must reach; None: for a binary classifier, the class it does not predict
        for the row (as :class:`~planning.CounterfactualProblem`).
    target:
        The label column, left out of the features; names a bare model's output.
    columns, immutable, overrides, distance, max_changed_features, plausibility, fill_missing,
    trust_region, relations:
        As for :meth:`planning.CounterfactualProblem.from_dataframe`.
    config, engine, num_counterfactuals, seed:
        As for :func:`solver.explain`; each call may override ``seed``.
    check:
        Check the settings now on the data's first row (a batch then fails before any work
        starts); a caller about to explain one row may leave it to that row.
    """

    def __init__(
        self,
        model: Any,
        data: pd.DataFrame,
        goals: Sequence[AnyGoal] | None = None,
        *,
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
        if not isinstance(data, pd.DataFrame) or data.empty:
            raise ProblemError("data", "give the training data as a DataFrame with at least one row")
        self.model = model
        self.adapter: ModelAdapter = (
            model if isinstance(model, ModelAdapter) else adapt_sklearn(model, target or "prediction")
        )
        self.data = data
        self.goals = list(goals) if goals is not None else None
        self.target = target
        self.columns = list(columns) if columns is not None else model_columns(model, data, target)
        self.immutable = list(immutable)
        self.overrides = {k: dict(v) for k, v in (overrides or {}).items()}
        self.distance = distance
        self.max_changed_features = max_changed_features
        self.plausibility = plausibility
        self.fill_missing: Iterable[str] | bool = fill_missing if isinstance(fill_missing, bool) else list(fill_missing)
        self.trust_region = trust_region
        self.relations = list(relations)
        self.config = config or SolverConfig()
        self.engine = engine
        self.num_counterfactuals = num_counterfactuals
        self.seed = seed
        self.profile = DataProfile(data)
        self._plausibility: dict[Any, PlausibilityModel] = {}
        if num_counterfactuals < 1:
            raise ProblemError("num_counterfactuals", f"must be at least 1, given {num_counterfactuals}")
        if check:  # bad settings fail here, before any row is explained (the trust region is built per row)
            probe = self.problem(0, trust_region=False)
            CounterfactualSolver(probe, self.config, seed, num_counterfactuals, engine)

    def problem(
        self,
        row: Mapping[str, Any] | pd.Series | int,
        goals: Sequence[AnyGoal] | None = None,
        *,
        trust_region: bool = True,
    ) -> CounterfactualProblem:
        """The counterfactual problem of ``row`` (a mapping, a Series, or a position in ``data``);
        ``trust_region=False`` leaves the trust region out (checking settings only)."""
        return CounterfactualProblem.from_dataframe(
            self.data,
            row,
            self.adapter,
            goals if goals is not None else self.goals,
            columns=self.columns,
            target=self.target,
            immutable=self.immutable,
            overrides=self.overrides,
            distance=self.distance,
            max_changed_features=self.max_changed_features,
            plausibility=self.plausibility,
            fill_missing=self.fill_missing,
            trust_region=self.trust_region if trust_region else None,
            relations=self.relations,
            profile=self.profile,
            plausibility_cache=self._plausibility,
        )

    def solver(
        self,
        row: Mapping[str, Any] | pd.Series | int,
        *,
        seed: int | None = None,
        goals: Sequence[AnyGoal] | None = None,
        calls: ModelCalls | None = None,
    ) -> CounterfactualSolver:
        """A solver for ``row``, ready to run (listeners may be added first)."""
        return CounterfactualSolver(
            self.problem(row, goals),
            self.config,
            seed if seed is not None else self.seed,
            self.num_counterfactuals,
            self.engine,
            calls=calls,
        )

    def explain(
        self,
        row: Mapping[str, Any] | pd.Series | int,
        *,
        seed: int | None = None,
        goals: Sequence[AnyGoal] | None = None,
        listeners: Iterable[Listener] = (),
    ) -> CounterfactualResult:
        """The best counterfactual of ``row``: only the search is paid for."""
        solver = self.solver(row, seed=seed, goals=goals)
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
    ) -> pd.DataFrame:
        """Explain many rows together, one model call per step for all of them.

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
