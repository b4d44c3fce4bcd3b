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
from typing import Any, cast

import pandas as pd
import structlog
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from counterplan.planning._pydantic import describe
from counterplan.planning.distance import FeatureStatistics
from counterplan.planning.errors import InvalidInputError
from counterplan.planning.goals import OutputSpec
from counterplan.planning.inference import schema_of
from counterplan.planning.model_protocol import bind_target
from counterplan.planning.models import ModelAdapter, adapt_sklearn
from counterplan.planning.onnx_model import OnnxModel
from counterplan.planning.problem import CounterfactualProblem, model_columns_of
from counterplan.planning.profile import FeatureSpec, SchemaProfile
from counterplan.planning.safe_yaml import ConfigTextError, load_config_text, load_file_text
from counterplan.planning.scorecard import MAX_TABLE_BYTES, PointsTable, ScorecardAdapter
from counterplan.planning.space import AnyFeature
from counterplan.planning.spec import ProblemSpec, feature_rule
from counterplan.server.registry.fitted_categories import CategoriesError, with_fitted_categories
from counterplan.server.registry.loading import CARD_TRUST, LoadError, load_csv, load_model
from counterplan.server.registry.served import ServedModelOptions, load_served_model
from counterplan.solver.core.config import SolverConfig
from counterplan.solver.explainer import Explainer, model_columns

log = structlog.get_logger(__name__)

DEMO_ID = "loan-demo"
MAX_CARD_BYTES = 4 * 1024 * 1024
"""A model card may list a thousand features with their categories; more is not a card."""


class RegistryError(InvalidInputError):
    """A model card or model file cannot be loaded."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__("model registry", field, problem)


class ModelCard(BaseModel):
    """What a model card file holds."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9._-]+$")
    version: str = "1"
    description: str = ""
    model_file: str | None = None
    """The model file (relative to the card), or:"""
    model_url: str | None = None
    """A served model's address (``http://HOST:PORT/v2/models/NAME``, ``grpc://HOST:PORT/NAME``),
    called over the Open Inference Protocol (:class:`~counterplan.planning.remote.RemoteModel`)."""
    remote: ServedModelOptions | None = None
    """With ``model_url``: how to call it (timeout, headers, protocol, classes, layout...)."""
    outputs: list[str] = Field(default_factory=lambda: ["prediction"], min_length=1)
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

    @field_validator("model_url")
    @classmethod
    def _readable_address(cls, value: str | None) -> str | None:
        if value is not None:
            from counterplan.planning.remote.url import parse_model_address  # noqa: PLC0415

            parse_model_address(value)  # the one parser: its error names the address and the forms
        return value

    @field_validator("features")
    @classmethod
    def _usable_schema(cls, features: list[FeatureSpec] | None) -> list[FeatureSpec] | None:
        """A schema every request could be read by: such a card used to load and then have every
        request refused as if the request were wrong (``instance[income]: given nan``)."""
        if features is None:
            return None
        names = [f.name for f in features]
        for i, spec in enumerate(features):
            where = f"features[{i}] ({spec.name!r})"
            if not spec.name:
                raise ValueError(f"features[{i}]: a feature needs a name")
            if spec.name in names[:i]:
                raise ValueError(f"{where}: the name is given twice")
            if any(b is not None and not math.isfinite(b) for b in (spec.low, spec.high)):
                raise ValueError(f"{where}: low and high must be finite numbers")
            if spec.low is not None and spec.high is not None and spec.low > spec.high:
                raise ValueError(f"{where}: empty domain, low {spec.low:g} > high {spec.high:g}")
            if spec.kind == "categorical" and spec.categories is not None and not spec.categories:
                raise ValueError(f"{where}: a categorical feature needs at least one category")
        return features

    @model_validator(mode="after")
    def _one_model(self) -> ModelCard:
        if (self.model_file is None) == (self.model_url is None):
            raise ValueError("give exactly one of model_file (a file) and model_url (a served model's address)")
        if self.model_url is None and self.remote is not None:
            raise ValueError("remote: only with model_url (how to call a served model)")
        if self.model_url is not None and self.trusted_types:
            raise ValueError("trusted_types: only with model_file (a served model loads no types)")
        return self


@dataclass
class RegisteredModel:
    """A loaded model: its adapter, feature schema, statistics, default solver config, and the
    :class:`~counterplan.solver.explainer.Explainer` every request's problem is built by (the same
    object the command line and Python use: from the card's training data when it gives some, else
    from its schema).

    ``spec`` holds the card's own rules (its immutables and overrides, a default goal); a request's
    options are laid over it.
    """

    id: str
    version: str
    description: str
    adapter: ModelAdapter
    features: list[FeatureSpec]
    """The schema: what ``GetModel`` lists, and what a request's values are typed by."""
    statistics: dict[str, FeatureStatistics] = field(default_factory=dict)
    default_config: SolverConfig = field(default_factory=SolverConfig)
    reference: pd.DataFrame | None = None
    """Training data with its label column, for plausibility; None when the card gave none."""
    target: str | None = None
    training: pd.DataFrame | None = None
    """The card's training data, for a scorecard's closeness statistics."""
    spec: ProblemSpec = field(default_factory=ProblemSpec)
    explainer: Explainer | None = None
    """Built from the schema when the loader gives none (a card without training data)."""

    def __post_init__(self) -> None:
        if self.explainer is None:
            profile = SchemaProfile(self.features, self.statistics, self.training)
            self.explainer = Explainer(
                self.adapter, profile=profile, spec=self.spec, target=self.target, config=self.default_config
            )

    @property
    def scorecard(self) -> bool:
        """True for a credit scorecard (an optbinning Scorecard or a points table)."""
        return isinstance(self.adapter, ScorecardAdapter)

    @property
    def outputs(self) -> tuple[OutputSpec, ...]:
        """The model's outputs."""
        return self.adapter.outputs

    def feature(self, name: str) -> FeatureSpec | None:
        """The schema of one feature, or None."""
        return next((f for f in self.features if f.name == name), None)

    @property
    def ready_explainer(self) -> Explainer:
        """The explainer (always built by ``__post_init__``)."""
        assert self.explainer is not None
        return self.explainer

    def features_of(self, instance: Mapping[str, Any], spec: ProblemSpec) -> list[AnyFeature]:
        """The checked features of ``instance`` under ``spec`` over the model's own (cheap: what a
        request is admitted by; the problem itself is built once the request holds a slot)."""
        explainer = self.ready_explainer
        return explainer.source.features(instance, explainer.columns, spec.over(explainer.spec))

    def problem(self, instance: Mapping[str, Any], spec: ProblemSpec) -> CounterfactualProblem:
        """The counterfactual problem of ``instance`` under ``spec`` over the model's own."""
        return self.ready_explainer.problem(instance, spec=spec)


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
            names = ", ".join(card.name for card, m in zip(cards, models, strict=True) if m.id == duplicate)
            raise RegistryError(f"{duplicate}", f"two model cards use this id: {names}")
        return cls(models)


_TABLE_KEYS = frozenset(PointsTable.model_fields)


def _names_a_table(path: Path) -> bool:
    """True for a points table (a YAML/JSON file whose top level has ``variables`` and only a
    table's keys), which a card names as its ``model_file``. A file with any other key is read as
    a card, so a card that says ``variables`` by mistake is refused naming the key, not skipped."""
    if not path.is_file():  # a named pipe would block the read forever: read as a card, refused
        return False
    try:
        # a table's own limit, not a card's: a 5 MB table was taken for a card and refused the directory
        data = load_file_text(path.read_text(encoding="utf-8"), path, max_bytes=MAX_TABLE_BYTES)  # json: fast
    except (ConfigTextError, OSError, UnicodeDecodeError):
        return False  # read again as a card, which reports the problem
    return isinstance(data, dict) and "variables" in data and set(data) <= _TABLE_KEYS


def _inside(card: Path, field: str, name: str) -> Path:
    """``name``, relative to the card, must stay inside the card's directory (no ``..``, no
    absolute path, no link out): a card names files the server reads, and nothing else."""
    folder = card.parent.resolve()
    try:
        target = (folder / name).resolve()
    except (ValueError, OSError) as exc:  # a NUL byte in the name, a link loop
        raise RegistryError(f"{card.name}:{field}", f"not a usable path: {exc}") from None
    if not target.is_relative_to(folder):
        raise RegistryError(f"{card.name}:{field}", f"{name!r} is outside the models directory")
    return target


def load_card(path: Path, trust_pickle: bool = False) -> RegisteredModel:
    """Load one model card and the model it names; its explainer reads the card's training data
    (as a local explain reads ``--data``) or, without any, the card's feature schema.

    Every refusal names the card: in a directory of many cards, an error from the layers below
    (a classifier's ``outputs``, a ``target`` not in the data) would not say which card it is."""
    try:
        return _load_card(path, trust_pickle)
    except RegistryError:
        raise
    except InvalidInputError as exc:
        raise RegistryError(f"{path.name}:{exc.field}", exc.problem) from None


def _load_card(path: Path, trust_pickle: bool) -> RegisteredModel:
    """:func:`load_card`'s work, its errors not yet naming the card."""
    card = _read_card(path)
    if card.target is not None and card.training_data is None:  # it names a column of that data
        raise RegistryError(f"{path.name}:target", "names a column of the training data: give training_data too")
    # every path checked before anything loads
    model_path = _inside(path, "model_file", card.model_file) if card.model_file is not None else None
    data_path = _inside(path, "training_data", card.training_data) if card.training_data is not None else None
    if isinstance(card.default_solver_config, str):
        _inside(path, "default_solver_config", card.default_solver_config)
    model: Any = None
    adapter: ModelAdapter
    if model_path is not None:
        model = _model_file(path, card, model_path, trust_pickle)
        names = card.outputs if len(card.outputs) > 1 else card.outputs[0]
        adapter = model.renamed(names) if isinstance(model, OnnxModel) else adapt_sklearn(model, names)
    spec = _card_spec(path, card)
    training = _training_data(path, data_path) if data_path is not None else None
    if training is not None and model_path is not None:  # a CSV's columns of a model's fitted categories
        try:
            training = with_fitted_categories(model, training, "training_data")
        except CategoriesError as exc:
            raise RegistryError(f"{path.name}:training_data", exc.problem) from None
    if model_path is None:  # a served model learns its class names from the training target
        model = adapter = _served_model(path, card, training)
    config = _card_config(path, card)
    explainer: Explainer | None = None
    if card.features is not None:
        _covers_the_model(path, card.features, model)
        features, statistics = card.features, dict(card.statistics)
    elif training is None:
        raise RegistryError(f"{path.name}:features", "give features or training_data to infer them from")
    else:
        columns = model_columns(model, training, card.target) or model_columns_of(adapter, training, card.target)
        absent = [c for c in columns if c not in training.columns]
        if absent:  # the model reads columns the data lacks: its schema cannot be inferred
            raise RegistryError(f"{path.name}:training_data", f"lacks the model's columns {', '.join(absent)}")
        features, inferred = _card_schema(path, training, columns, spec)
        statistics = {**inferred, **card.statistics}
        explainer = Explainer(
            adapter, training, spec=spec, target=card.target, columns=columns, config=config, check=False
        )
    log.info("model loaded", model_id=card.id, version=card.version, features=len(features))
    return RegisteredModel(
        card.id,
        card.version,
        card.description,
        adapter,
        features,
        statistics,
        config,
        training if training is not None and card.target is not None else None,
        card.target,
        training=training,
        spec=spec,
        explainer=explainer,
    )


def _covers_the_model(path: Path, features: list[FeatureSpec], model: Any) -> None:
    """A card's schema names every column its model reads (when the model says which, as one
    fitted on a DataFrame does): else every request would be refused as naming unknown features."""
    columns = model_columns(model, pd.DataFrame(), None) or []
    absent = [c for c in columns if c not in {f.name for f in features}]
    if absent:
        raise RegistryError(f"{path.name}:features", f"lacks the model's columns {', '.join(absent)}")


def _training_data(path: Path, data_path: Path) -> pd.DataFrame:
    """The CSV the card's ``training_data`` names, a refusal naming the card's field and the file."""
    try:
        return load_csv(data_path)
    except LoadError as exc:
        raise RegistryError(f"{path.name}:training_data", f"{exc.field}: {exc.problem}") from None


def _model_file(path: Path, card: ModelCard, model_path: Path, trust_pickle: bool) -> Any:
    """The fitted model the card's ``model_file`` names (a pickle only in a trusted directory)."""
    if model_path.suffix.lower() in {".joblib", ".pkl", ".pickle"} and not trust_pickle:
        raise RegistryError(
            f"{path.name}:model_file",
            "joblib/pickle files run code while loading; for a trusted directory, start serve with --trust-pickle "
            "(or COUNTERPLAN_TRUST_PICKLE=true; from Python, trust_pickle=True)",
        )
    try:
        return load_model(model_path, trusted_types=card.trusted_types, how_to_trust=CARD_TRUST)
    except LoadError as exc:
        raise RegistryError(f"{path.name}:model_file", exc.problem) from None


def _served_model(path: Path, card: ModelCard, training: pd.DataFrame | None) -> ModelAdapter:
    """The served model the card's ``model_url`` names, its output named as a model file's
    (``outputs``) and, with training data and a target, its class names the target's labels; a
    server that does not answer or does not know the model is refused naming the card."""
    assert card.model_url is not None
    if len(card.outputs) != 1:
        raise RegistryError(f"{path.name}:outputs", f"a served model has one output, given {card.outputs}")
    try:
        model = load_served_model(card.model_url, card.remote, output=card.outputs[0])
        return cast(ModelAdapter, bind_target(model, training, card.target))
    except InvalidInputError as exc:  # an option the adapter refuses is named in the remote block
        option = exc.field.partition(".")[0]  # headers.NAME: the header's
        field = f"remote.{exc.field}" if option in ServedModelOptions.model_fields else "model_url"
        raise RegistryError(f"{path.name}:{field}", exc.problem) from None


def _card_spec(path: Path, card: ModelCard) -> ProblemSpec:
    """The card's own rules: its immutables and per-feature overrides."""
    try:
        rules = {name: feature_rule(fields, name) for name, fields in card.overrides.items()}
        return ProblemSpec(features=rules, immutable=tuple(card.immutable))
    except InvalidInputError as exc:
        field = exc.field.removeprefix("features.")
        raise RegistryError(f"{path.name}:overrides.{field}", exc.problem) from None


def _read_card(path: Path) -> ModelCard:
    """The card at ``path``, read within the configuration text's limits and checked (only a
    regular file: reading a named pipe would hang the server's start)."""
    if not path.is_file():
        raise RegistryError(path.name, "cannot read: not a regular file")
    try:
        data = load_config_text(path.read_text(encoding="utf-8"), max_bytes=MAX_CARD_BYTES)
        return ModelCard.model_validate(data)
    except OSError as exc:  # a directory named like a card, a dangling link
        raise RegistryError(path.name, f"cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:  # a binary or UTF-16 file: a ValueError, not an OSError
        raise RegistryError(path.name, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except ConfigTextError as exc:
        raise RegistryError(path.name, exc.problem) from None
    except ValidationError as exc:
        loc, msg = describe(exc)[0]
        raise RegistryError(f"{path.name}:{loc}", msg) from None


def _card_schema(
    path: Path, data: pd.DataFrame, columns: list[str], spec: ProblemSpec
) -> tuple[list[FeatureSpec], dict[str, FeatureStatistics]]:
    """A card without features: its schema and statistics inferred from its training data."""
    try:
        return schema_of(data, columns, spec)
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


def demo_model() -> RegisteredModel:
    """The embedded demo: the loan model trained on the data counterplan generates, explained as
    ``counterplan explain`` explains it (its own immutables and question)."""
    from counterplan.planning import demo  # noqa: PLC0415 - trains a model: only when the demo is served

    data = demo.make_loan_data()
    model = demo.train_loan_model(data)
    adapter = adapt_sklearn(model, demo.TARGET)
    spec = demo.demo_spec()
    columns = model_columns(model, data, demo.TARGET) or []
    features, statistics = schema_of(data, columns, spec)
    return RegisteredModel(
        DEMO_ID,
        "1",
        "Demo loan approval: gradient boosting on synthetic applicants (approved = 1)",
        adapter,
        features,
        statistics,
        reference=data,
        target=demo.TARGET,
        spec=spec,
        explainer=Explainer(adapter, data, spec=spec, target=demo.TARGET, columns=columns, check=False),
    )
