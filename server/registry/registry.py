"""The model registry: the models a server explains, each with its feature schema.

A registry is a directory of *model cards* (``*.yaml``, ``*.yml`` or ``*.json``), each naming a
model file (``.skops``, or ``.joblib``/``.pkl`` only when the directory is trusted, since
pickle runs code while loading) and its feature schema, outputs and default solver config;
the schema can be inferred from a training CSV the card names. With no directory the embedded
demo loan model is served, so a server works out of the box.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
import structlog
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from counterplan.planning._pydantic import describe
from counterplan.planning.distance import DistanceSettings, FeatureStatistics
from counterplan.planning.errors import InvalidInputError, ModelAdapterError, ProblemError
from counterplan.planning.features import CategoricalFeature, FloatFeature, IntegerFeature, parse_feature
from counterplan.planning.goals import ClassGoal, OutputSpec, RangeGoal, ValueGoal
from counterplan.planning.inference import infer_features, infer_precision, infer_statistics
from counterplan.planning.models import ModelAdapter, adapt_sklearn
from counterplan.planning.plausibility import PlausibilitySettings
from counterplan.planning.problem import CounterfactualProblem, plausibility_model, trust_region_model
from counterplan.planning.safe_yaml import ConfigTextError, load_config_text
from counterplan.planning.scorecard import (
    PointsTable,
    ScorecardAdapter,
    ScorecardDistance,
    adapt_scorecard,
    is_optbinning_scorecard,
)
from counterplan.planning.space import AnyFeature
from counterplan.planning.trust_region import TrustRegionSettings
from counterplan.server.registry.loading import CARD_TRUST, LoadError, load_csv, load_model
from counterplan.solver.core.config import SolverConfig

log = structlog.get_logger(__name__)

DEMO_ID = "loan-demo"
MAX_CARD_BYTES = 4 * 1024 * 1024
"""A model card may list a thousand features with their categories; more is not a card."""


class RegistryError(InvalidInputError):
    """A model card or model file cannot be loaded."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__("model registry", field, problem)


class FeatureSpec(BaseModel):
    """One feature of a model's schema: its kind, default domain and immutability."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    kind: Literal["integer", "float", "categorical", "boolean"]
    low: float | None = None
    high: float | None = None
    categories: tuple[str, ...] | None = None
    immutable: bool = False
    monotone: Literal["increase", "decrease"] | None = None
    cost: float = Field(default=1.0, gt=0.0)
    allowed: tuple[float, ...] | None = None
    """For numbers: the only values a change may reach."""
    precision: int | None = Field(default=None, ge=-9, le=12)
    """For floats: the decimals of proposed values (inferred from training data)."""
    category_type: Literal["text", "integer", "number"] = "text"
    """For categories stored as numbers: the model takes the numbers."""
    fill_missing: bool = False
    """A missing instance value may be filled in (by default it stays missing)."""
    stored_as_float: bool = False
    """An integer inferred from a float column of whole numbers: an instance may still hold one of
    the column's few fractional values (an imputed mean), kept as it is on a whole-number grid,
    as a local explain keeps it."""


class ModelCard(BaseModel):
    """What a model card file holds."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9._-]+$")
    version: str = "1"
    description: str = ""
    model_file: str
    outputs: list[str] = Field(default_factory=lambda: ["prediction"])
    features: list[FeatureSpec] | None = None
    training_data: str | None = None
    target: str | None = None
    immutable: list[str] = Field(default_factory=list)
    overrides: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """With ``training_data``: per-feature fields replacing inferred ones (``kind: categorical``
    for codes stored as numbers, ``precision``, ``fill_missing``, ``low``/``high``, ...)."""
    statistics: dict[str, FeatureStatistics] = Field(default_factory=dict)
    default_solver_config: dict[str, Any] | str | None = None
    """A SolverConfig as a mapping, or the path (relative to the card) of a file such as
    ``counterplan tune`` writes."""
    trusted_types: list[str] = Field(default_factory=list)
    """For skops files: types beyond skops's defaults that may load (e.g. sklearn.tree._tree.Tree)."""


@dataclass
class RegisteredModel:
    """A loaded model: its adapter, feature schema, statistics and default solver config."""

    id: str
    version: str
    description: str
    adapter: ModelAdapter
    features: list[FeatureSpec]
    statistics: dict[str, FeatureStatistics] = field(default_factory=dict)
    default_config: SolverConfig = field(default_factory=SolverConfig)
    reference: pd.DataFrame | None = None
    """Training data with its label column, for plausibility; None when the card gave none."""
    target: str | None = None
    default_goals: list[ClassGoal | ValueGoal | RangeGoal] | None = None
    """The question of a request that gives no goal; None: the class a binary classifier does
    not predict for the instance now."""
    training: pd.DataFrame | None = None
    """The card's training data, for a scorecard's closeness statistics."""
    _objectives: dict[tuple[float, float], ScorecardDistance] = field(default_factory=dict)

    @property
    def scorecard(self) -> bool:
        """True for a credit scorecard (an optbinning Scorecard or a points table)."""
        return isinstance(self.adapter, ScorecardAdapter)

    def scorecard_distance(self, distance: DistanceSettings) -> ScorecardDistance:
        """The scorecard paper's objective with these weights (its statistics computed once)."""
        assert isinstance(self.adapter, ScorecardAdapter)
        key = (distance.alpha, distance.beta)
        if key not in self._objectives:
            try:
                self._objectives[key] = ScorecardDistance.from_data(self.adapter.table, self.training, *key)
            except ModelAdapterError as exc:
                raise ProblemError(exc.field, f"model {self.id!r}: {exc.problem}") from None
        return self._objectives[key]

    @property
    def outputs(self) -> tuple[OutputSpec, ...]:
        """The model's outputs."""
        return self.adapter.outputs

    def feature(self, name: str) -> FeatureSpec | None:
        """The schema of one feature, or None."""
        return next((f for f in self.features if f.name == name), None)

    def build_feature(self, spec: FeatureSpec, value: Any, override: Mapping[str, Any]) -> AnyFeature:
        """A planning feature for ``value`` with this schema and a request's override."""
        kind = spec.kind
        if kind == "integer" and isinstance(value, float) and not value.is_integer():
            kind = "float"  # only a stored_as_float integer lets such a value through (convert._value)
        data: dict[str, Any] = {"kind": kind, "name": spec.name, "value": value}
        data["cost"] = override.get("cost", spec.cost)
        data["monotone"] = override.get("monotone", spec.monotone)
        data["fill_missing"] = bool(override.get("fill_missing", spec.fill_missing)) and value is None
        if spec.kind == "float":
            data["precision"] = override.get("precision", spec.precision)
        elif kind == "float":
            data["precision"] = 0
        if spec.kind == "categorical":
            data["category_type"] = spec.category_type
        constrained = bool(override.get("constrained", spec.immutable))
        if constrained and not override:  # never moves; its domain is for the diagnosis of an unreachable goal
            return parse_feature({**data, **_held_domain(spec, kind, value), "constrained": True})
        if spec.kind in ("integer", "float"):
            data |= _number_domain(spec, kind, override)
        elif spec.kind == "categorical":
            categories = override.get("categories") or spec.categories
            if categories is not None:
                data["categories"] = list(categories)
        data["constrained"] = constrained or (value is None and not data["fill_missing"])
        return parse_feature(data)

    def problem(
        self,
        features: list[AnyFeature],
        goals: list[ClassGoal | ValueGoal | RangeGoal],
        distance: DistanceSettings,
        max_changed_features: int | None = None,
        plausible: bool = False,
        *,
        trust_region: TrustRegionSettings | None = None,
    ) -> CounterfactualProblem:
        """The counterfactual problem for checked features and goals."""
        judge = None
        if plausible and self.reference is not None and self.target is not None:
            judge = plausibility_model(self.reference, features, goals, self.target, PlausibilitySettings())
        region = None
        if trust_region is not None:
            if self.reference is None:
                raise ProblemError("trust_region", f"model {self.id!r} has no training data with its label column")
            region = trust_region_model(self.reference, features, goals, self.target, trust_region)
        return CounterfactualProblem(
            features,
            goals,
            self.adapter,
            distance,
            self.statistics,
            max_changed_features=max_changed_features,
            plausibility=judge,
            scorecard_distance=self.scorecard_distance(distance) if distance.metric == "scorecard" else None,
            trust_region=region,
        )


def _number_domain(spec: FeatureSpec, kind: str, override: Mapping[str, Any]) -> dict[str, Any]:
    """A number's allowed values and bounds: the override's, else the schema's."""
    fields: dict[str, Any] = {}
    allowed = override.get("allowed", spec.allowed)
    if allowed is not None:
        fields["allowed"] = tuple(allowed)
    cast = int if kind == "integer" else float
    low = override.get("low", spec.low)
    high = override.get("high", spec.high)
    if low is not None and high is not None:
        fields["low"], fields["high"] = cast(low), cast(high)
        if kind == "integer" and (float(low) != int(low) or float(high) != int(high)):
            fields["low"], fields["high"] = low, high  # let the feature report the fraction
    return fields


def _held_domain(spec: FeatureSpec, kind: str, value: Any) -> dict[str, Any]:
    """An immutable feature's schema domain, widened to hold the instance's value (as a local
    explain infers it): the feature never moves, but when a goal is unreachable the diagnosis
    (:mod:`counterplan.solver.diagnosis`) scans it to say whether changing it would reach the goal."""
    if spec.kind in ("integer", "float") and spec.low is not None and spec.high is not None:
        low, high = float(spec.low), float(spec.high)
        if value is not None:
            low, high = min(low, float(value)), max(high, float(value))
        if kind == "integer":
            return {"low": math.floor(low), "high": math.ceil(high)}
        return {"low": low, "high": high}
    if spec.kind == "categorical" and spec.categories is not None:
        categories = list(spec.categories)
        if value is not None and str(value) not in categories:
            categories.append(str(value))
        return {"categories": categories}
    return {}


class ModelRegistry:
    """The served models, by id."""

    def __init__(self, models: Iterable[RegisteredModel]) -> None:
        self._models = {m.id: m for m in models}

    def get(self, model_id: str) -> RegisteredModel | None:
        """The model with this id, or None."""
        return self._models.get(model_id)

    def list(self) -> list[RegisteredModel]:
        """Every model, by id."""
        return [self._models[k] for k in sorted(self._models)]

    def __len__(self) -> int:
        return len(self._models)

    @classmethod
    def demo(cls) -> ModelRegistry:
        """A registry holding only the embedded demo loan model."""
        return cls([demo_model()])

    @classmethod
    def from_directory(cls, directory: str | Path, trust_pickle: bool = False) -> ModelRegistry:
        """Load every model card in ``directory``."""
        folder = Path(directory)
        if not folder.is_dir():
            raise RegistryError(str(folder), "not a directory")
        cards = sorted(p for p in folder.iterdir() if p.suffix.lower() in {".yaml", ".yml", ".json"})
        cards = [p for p in cards if not _names_a_table(p)]  # a scorecard's points table is a model file
        if not cards:
            raise RegistryError(str(folder), "holds no model card (*.yaml, *.yml, *.json)")
        models = [load_card(card, trust_pickle) for card in cards]
        ids = [m.id for m in models]
        duplicate = next((i for i in ids if ids.count(i) > 1), None)
        if duplicate is not None:
            raise RegistryError(duplicate, "two model cards use this id")
        return cls(models)


def _names_a_table(path: Path) -> bool:
    """True for a points table (a YAML/JSON file whose top level has ``variables``), which a card
    names as its ``model_file``; cards have ``model_file``."""
    try:
        data = load_config_text(path.read_text(encoding="utf-8"), max_bytes=MAX_CARD_BYTES)
    except (ConfigTextError, OSError, UnicodeDecodeError):
        return False  # read again as a card, which reports the problem
    return isinstance(data, dict) and "variables" in data and "model_file" not in data


def _inside(card: Path, field: str, name: str) -> Path:
    """``name``, relative to the card, must stay inside the card's directory (no ``..``, no
    absolute path, no link out): a card names files the server reads, and nothing else."""
    folder = card.parent.resolve()
    target = (folder / name).resolve()
    if not target.is_relative_to(folder):
        raise RegistryError(f"{card.name}:{field}", f"{name!r} is outside the models directory")
    return target


def load_card(path: Path, trust_pickle: bool = False) -> RegisteredModel:
    """Load one model card and the model it names."""
    card = _read_card(path)
    model_path = _inside(path, "model_file", card.model_file)  # every path checked before anything loads
    data_path = _inside(path, "training_data", card.training_data) if card.training_data is not None else None
    if isinstance(card.default_solver_config, str):
        _inside(path, "default_solver_config", card.default_solver_config)
    if model_path.suffix.lower() in {".joblib", ".pkl", ".pickle"} and not trust_pickle:
        raise RegistryError(
            f"{path.name}:model_file",
            "joblib/pickle files run code while loading; for a trusted directory, start serve with --trust-pickle "
            "(or COUNTERPLAN_TRUST_PICKLE=true; from Python, trust_pickle=True)",
        )
    try:
        model = load_model(model_path, trusted_types=card.trusted_types, how_to_trust=CARD_TRUST)
    except LoadError as exc:
        raise RegistryError(f"{path.name}:model_file", exc.problem) from None
    adapter = adapt_sklearn(model, card.outputs if len(card.outputs) > 1 else card.outputs[0])
    features = card.features
    statistics = dict(card.statistics)
    if features is None:
        features, inferred = _card_schema(path, card, model, data_path)
        statistics = {**inferred, **statistics}
    reference = None
    training = load_csv(data_path) if data_path is not None else None
    if training is not None and card.target is not None:
        reference = training
    config = _card_config(path, card)
    log.info("model loaded", model_id=card.id, version=card.version, features=len(features))
    return RegisteredModel(
        card.id,
        card.version,
        card.description,
        adapter,
        features,
        statistics,
        config,
        reference,
        card.target,
        training=training,
    )


def _read_card(path: Path) -> ModelCard:
    """The card at ``path``, read within the configuration text's limits and checked."""
    try:
        data = load_config_text(path.read_text(encoding="utf-8"), max_bytes=MAX_CARD_BYTES)
        return ModelCard.model_validate(data)
    except ConfigTextError as exc:
        raise RegistryError(path.name, exc.problem) from None
    except ValidationError as exc:
        loc, msg = describe(exc)[0]
        raise RegistryError(f"{path.name}:{loc}", msg) from None


def _card_schema(
    path: Path, card: ModelCard, model: Any, data_path: Path | None
) -> tuple[list[FeatureSpec], dict[str, FeatureStatistics]]:
    """A card without features: its schema and statistics inferred from its training data."""
    if data_path is None:
        raise RegistryError(f"{path.name}:features", "give features or training_data to infer them from")
    data = load_csv(data_path)
    try:
        return schema_from_data(data, model, card.target, card.immutable, card.overrides)
    except InvalidInputError as exc:
        raise RegistryError(f"{path.name}:overrides.{exc.field}", exc.problem) from None


def _card_config(path: Path, card: ModelCard) -> SolverConfig:
    """The card's default solver configuration: a file beside it, inline, or the default."""
    try:
        if isinstance(card.default_solver_config, str):
            return SolverConfig.load(_inside(path, "default_solver_config", card.default_solver_config))
        if card.default_solver_config:
            return SolverConfig.from_dict(card.default_solver_config)
        return SolverConfig()
    except InvalidInputError as exc:
        raise RegistryError(f"{path.name}:default_solver_config.{exc.field}", exc.problem) from None


def typical_row(data: pd.DataFrame, columns: Iterable[str]) -> dict[str, Any]:
    """A row of values the data has, each on its column's grid, so the kinds inferred from it are
    the column's own (not those of one imputed value, or a gap)."""
    row: dict[str, Any] = {}
    for name in columns:
        column = data[name].dropna()
        if column.empty:
            row[name] = None
            continue
        if pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column):
            values = column.to_numpy(dtype=np.float64)
            precision = infer_precision(values)
            on_grid = np.isclose(np.round(values, precision or 0), values, rtol=1e-12, atol=0.0)
            row[name] = values[np.argmax(on_grid)]
        else:
            row[name] = column.iloc[0]
    return row


def schema_from_data(
    data: pd.DataFrame,
    model: Any,
    target: str | None,
    immutable: Iterable[str],
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> tuple[list[FeatureSpec], dict[str, FeatureStatistics]]:
    """Infer a feature schema and statistics from training data (``overrides`` as in ``from_dataframe``)."""
    names = getattr(model, "feature_names_in_", None)
    columns = [str(c) for c in names] if names is not None else [str(c) for c in data.columns if c != target]
    if isinstance(model, PointsTable) or is_optbinning_scorecard(model):  # a scorecard reads its variables
        columns = list(adapt_scorecard(model).feature_names)
    overrides = dict(overrides or {})
    fill = {name for name, fields in overrides.items() if fields.get("fill_missing")}
    for_inference = {n: {k: v for k, v in f.items() if k != "fill_missing"} for n, f in overrides.items()}
    inferred = infer_features(data, typical_row(data, columns), columns, immutable, for_inference)
    specs = []
    for feature in inferred:
        spec: dict[str, Any] = {"name": feature.name, "kind": feature.kind, "immutable": feature.constrained}
        spec["fill_missing"] = feature.name in fill
        column = data[feature.name]
        spec["stored_as_float"] = feature.kind == "integer" and pd.api.types.is_float_dtype(column)
        spec["monotone"], spec["cost"] = feature.monotone, feature.cost
        if isinstance(feature, IntegerFeature | FloatFeature) and feature.allowed is not None:
            spec["allowed"] = feature.allowed
        if isinstance(feature, IntegerFeature | FloatFeature) and feature.low is not None:
            spec["low"], spec["high"] = feature.low, feature.high
            spec["precision"] = getattr(feature, "precision", None)
        elif isinstance(feature, CategoricalFeature):
            spec["categories"], spec["category_type"] = feature.domain, feature.category_type
        specs.append(FeatureSpec(**spec))
    return specs, infer_statistics(data, inferred)


def demo_model() -> RegisteredModel:
    """The embedded demo: the loan model trained on the data counterplan generates."""
    from counterplan.planning import demo  # noqa: PLC0415 - trains a model: only when the demo is served

    data = demo.make_loan_data()
    model = demo.train_loan_model(data)
    features, statistics = schema_from_data(data, model, demo.TARGET, demo.IMMUTABLE)
    return RegisteredModel(
        DEMO_ID,
        "1",
        "Demo loan approval: gradient boosting on synthetic applicants (approved = 1)",
        adapt_sklearn(model, demo.TARGET),
        features,
        statistics,
        reference=data,
        target=demo.TARGET,
        default_goals=demo.demo_goals(),
    )
