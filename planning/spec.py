"""``ProblemSpec``: every option of a counterfactual problem as pure data, validated once.

A problem is a model, a data profile (what the training data, or a model card's schema, says of
each feature), one instance, and a spec: what the user asks beyond that. Python keywords
(:meth:`CounterfactualProblem.from_dataframe`, the :class:`~counterplan.solver.explainer.Explainer`),
every command-line command (one shared flag group), model cards and gRPC requests all convert into
a spec, and one function (:func:`counterplan.planning.problem.build_problem`) turns a spec, a
profile and a model into a :class:`~counterplan.planning.problem.CounterfactualProblem`. So a flag,
a default and an error message are the same everywhere, and a new option is added in one place.

A spec is layered: a model card's spec holds the model's own rules (its immutables, its default
goal), a request's spec adds to them (:meth:`ProblemSpec.over`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any, Self

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator, model_validator

from counterplan.planning._pydantic import a_scalar, excerpt, reraise
from counterplan.planning.distance import DistanceSettings
from counterplan.planning.errors import GoalError, InvalidInputError, echo
from counterplan.planning.features import Bound, FeatureKind, Monotone, category_text, yaml_number_hint
from counterplan.planning.goals import ClassGoal, RangeGoal, ValueGoal
from counterplan.planning.plausibility import PlausibilitySettings
from counterplan.planning.relations import LearnedConstraint
from counterplan.planning.trust_region import TrustRegionSettings

AnyGoal = ClassGoal | ValueGoal | RangeGoal
MAX_LISTED_VALUES = 10_000
"""Allowed or forbidden values per feature at most: a longer list of numbers is a grid (use a precision)."""
MAX_MARGIN = 0.5
RuleValue = Annotated[float | str | bool, BeforeValidator(a_scalar)]


class SpecError(InvalidInputError):
    """A problem spec is invalid: names the field and the problem."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__("problem", field, problem)


class _Spec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            reraise(exc, "", SpecError)


class FeatureRule(_Spec):
    """What a problem says of one feature beyond what the data says; ``None`` keeps what is inferred.

    ``allowed`` and ``forbidden`` restrict the values a *change* may reach: for a number, the
    list of values it may take (``allowed``, a grid of your own), for a category or a boolean the
    categories it may take or not (``forbidden`` keeps, say, a missing-data code such as
    ``not_known`` out of every answer). The original value always stays possible: not changing is
    never forbidden.
    """

    kind: FeatureKind | None = None
    """Read the column as this kind (``categorical`` for codes stored as numbers)."""
    low: Bound | None = None
    high: Bound | None = None
    categories: tuple[str, ...] | None = None
    """A categorical feature's whole domain (its categories, in their order)."""
    precision: Annotated[int, Field(ge=-9, le=12)] | None = None
    allowed: Annotated[tuple[RuleValue, ...], Field(min_length=1, max_length=MAX_LISTED_VALUES)] | None = None
    forbidden: Annotated[tuple[RuleValue, ...], Field(min_length=1, max_length=MAX_LISTED_VALUES)] | None = None
    immutable: bool | None = None
    monotone: Monotone | None = None
    cost: Annotated[float, Field(gt=0.0, le=1e6)] | None = None
    fill_missing: bool | None = None

    @field_validator("categories")
    @classmethod
    def _texts(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is not None and not value:
            raise ValueError("empty domain: give at least one category")
        return value

    @model_validator(mode="after")
    def _check(self) -> Self:
        if (self.low is None) != (self.high is None):
            raise SpecError("low" if self.low is None else "high", "give both low and high, or neither")
        if self.low is not None and self.high is not None and self.low > self.high:
            raise SpecError("high", f"empty domain: low {self.low} > high {self.high}")
        return self

    def over(self, below: FeatureRule) -> FeatureRule:
        """This rule's fields over ``below``'s (a request's rule over a model card's)."""
        own = self.model_dump(exclude_none=True)
        return below.model_copy(update=own) if own else below

    @property
    def inference_fields(self) -> dict[str, Any]:
        """The feature fields this rule sets directly (an inferred feature's fields are replaced)."""
        fields: dict[str, Any] = {}
        for name in ("kind", "low", "high", "precision", "monotone", "cost", "fill_missing"):
            value = getattr(self, name)
            if value is not None:
                fields[name] = value
        if self.categories is not None:
            fields["categories"] = list(self.categories)
        if self.immutable is not None:
            fields["constrained"] = self.immutable
        return fields


def name_list(names: Iterable[str] | str) -> tuple[str, ...]:
    """Feature names a caller gives (``immutable``, ``fill_missing``): a list of them, or one
    name as a text (read as a list, a text gave each of its letters as a name)."""
    return (names,) if isinstance(names, str) else tuple(str(n) for n in names)


def _rule_values(values: Iterable[Any]) -> tuple[RuleValue, ...]:
    """Listed values as a rule holds them: numbers as floats, the rest as text."""
    out: list[RuleValue] = []
    for value in values:
        if isinstance(value, bool):
            out.append(value)
        elif isinstance(value, int | float):
            out.append(float(value))
        else:
            out.append(str(value))
    return tuple(out)


class ProblemSpec(_Spec):
    """Every option of a counterfactual problem, as data (see the module docstring).

    Attributes
    ----------
    features:
        Per feature: a :class:`FeatureRule` (bounds, categories, precision, allowed and forbidden
        values, immutability, monotone direction, cost, whether a missing value may be filled).
    immutable:
        Features the search must never change (as ``FeatureRule(immutable=True)``).
    goals:
        What the answer must reach; None: the default question (a binary classifier's second
        class, :func:`counterplan.planning.defaults.default_goals`).
    goals_default:
        When ``goals`` are a default rather than asked by the user, which one (a model's own
        question: ``"the demo model's question"``); every output says it beside the goal
        (``Goal: ... (default: ...)``). Cleared whenever goals are asked (:meth:`asking`).
    margin:
        A class goal is met only this far past its threshold (every class goal, the default one
        too); None keeps each goal's own.
    distance:
        How proximity is measured (the metric, a per-change penalty, the scorecard's weights).
    max_changed_features:
        At most this many features may change.
    plausibility:
        Keep answers dense among real rows of the goal's class (needs data with its label column).
    trust_region:
        Keep answers inside the hull of real rows of the goal's class (needs data with its label
        column).
    fill_missing:
        Features whose missing instance value the search may fill (``True``: every feature).
    relations:
        Learned constraints: features computed from others by a fitted regressor (Python only:
        a fitted model is not data, so these are not part of a spec's text form).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False, arbitrary_types_allowed=True)

    features: dict[str, FeatureRule] = Field(default_factory=dict)
    immutable: tuple[str, ...] = ()
    goals: tuple[AnyGoal, ...] | None = None
    goals_default: Annotated[str, Field(max_length=200)] | None = None
    margin: Annotated[float, Field(ge=0.0, le=MAX_MARGIN)] | None = None
    distance: DistanceSettings = Field(default_factory=DistanceSettings)
    max_changed_features: Annotated[int, Field(ge=1)] | None = None
    plausibility: PlausibilitySettings | None = None
    trust_region: TrustRegionSettings | None = None
    fill_missing: tuple[str, ...] | bool = ()
    relations: tuple[LearnedConstraint, ...] = Field(default=(), exclude=True)

    @field_validator("relations", mode="before")
    @classmethod
    def _fitted_relations(cls, value: Any) -> Any:
        """Learned constraints hold fitted models, built in Python (``LearnedConstraint.of``): as
        data (a KServe request's spec, a card) the "model" is text, and the solve failed on it."""
        if isinstance(value, list | tuple) and all(isinstance(r, LearnedConstraint) for r in value):
            return tuple(value)
        raise ValueError("learned constraints are fitted models: build them in Python, not as data")

    @field_validator("fill_missing", mode="before")
    @classmethod
    def _fill_missing(cls, value: Any) -> Any:
        """True, false or feature names, refused in one message: pydantic's union would name each
        form it tried (``fill_missing.tuple[str, ...].0, fill_missing.bool``)."""
        if isinstance(value, bool) or (
            isinstance(value, list | tuple | set | frozenset) and all(isinstance(v, str) for v in value)
        ):
            return value
        raise ValueError(f"give true, false or a list of feature names, given {excerpt(value)}")

    @field_validator("goals", mode="before")
    @classmethod
    def _goal_list(cls, value: Any) -> Any:
        return tuple(_goal(i, item) for i, item in enumerate(value)) if isinstance(value, list | tuple) else value

    @classmethod
    def from_keywords(
        cls,
        *,
        goals: Sequence[AnyGoal] | None = None,
        immutable: Iterable[str] = (),
        overrides: Mapping[str, Mapping[str, Any]] | None = None,
        distance: DistanceSettings | None = None,
        max_changed_features: int | None = None,
        plausibility: PlausibilitySettings | None = None,
        fill_missing: Iterable[str] | bool = (),
        trust_region: TrustRegionSettings | None = None,
        relations: Sequence[LearnedConstraint] = (),
        margin: float | None = None,
    ) -> ProblemSpec:
        """The spec of the Python keyword arguments (``overrides``: ``{column: {field: value}}``
        with a feature's field names; ``constrained`` is ``immutable``). ``immutable`` and
        ``fill_missing`` may be one name: a text read as a list of names was read letter by
        letter (``immutable="ab"`` froze ``a`` and ``b``; ``"age"`` was refused as "no feature
        'a'")."""
        rules = {str(name): feature_rule(fields, str(name)) for name, fields in (overrides or {}).items()}
        return cls(
            features=rules,
            immutable=name_list(immutable),
            goals=tuple(goals) if goals is not None else None,
            margin=margin,
            distance=distance or DistanceSettings(),
            max_changed_features=max_changed_features,
            plausibility=plausibility,
            trust_region=trust_region,
            fill_missing=fill_missing if isinstance(fill_missing, bool) else name_list(fill_missing),
            relations=tuple(relations),
        )

    def over(self, below: ProblemSpec) -> ProblemSpec:
        """This spec (a request's) over ``below`` (a model's own): feature rules field by field,
        immutables together, and every option this spec sets in place of ``below``'s."""
        rules = dict(below.features)
        for name, rule in self.features.items():
            rules[name] = rule.over(rules[name]) if name in rules else rule
        own = self.model_dump(exclude={"features", "immutable", "relations", "fill_missing"}, exclude_unset=True)
        if "goals" in own:  # goals of its own: a default of the layer below no longer applies
            own.setdefault("goals_default", None)
        merged = below.model_copy(update={k: getattr(self, k) for k in own})
        below_fill, own_fill = below.fill_missing, self.fill_missing
        fill: tuple[str, ...] | bool = (
            True if below_fill is True or own_fill is True else tuple(dict.fromkeys([*below_fill, *own_fill]))  # type: ignore[misc]
        )
        return merged.model_copy(
            update={
                "features": rules,
                "immutable": tuple(dict.fromkeys([*below.immutable, *self.immutable])),
                "fill_missing": fill,
                "relations": (*below.relations, *self.relations),
            }
        )

    def asking(self, goals: Sequence[AnyGoal]) -> ProblemSpec:
        """This spec asking ``goals``: asked by the user, so no longer a default."""
        return self.model_copy(update={"goals": tuple(goals), "goals_default": None})

    def frozen_names(self) -> set[str]:
        """Every feature the spec holds still (``immutable``, and rules saying so)."""
        return set(self.immutable) | {n for n, r in self.features.items() if r.immutable}

    def goals_with_margin(self, goals: Sequence[AnyGoal]) -> list[AnyGoal]:
        """``goals`` with this spec's margin on every class goal that sets none of its own (as
        they are without a margin)."""
        if self.margin is None:
            return list(goals)
        return [
            g.model_copy(update={"margin": self.margin})
            if isinstance(g, ClassGoal) and "margin" not in g.model_fields_set
            else g
            for g in goals
        ]


def feature_rule(fields: Mapping[str, Any], name: str = "") -> FeatureRule:
    """A :class:`FeatureRule` from override fields (a feature's field names: ``constrained`` is
    ``immutable``; ``allowed`` may list numbers or categories); errors name ``features.NAME``."""
    data = dict(fields)
    if "constrained" in data:
        data["immutable"] = data.pop("constrained")
    for key in ("allowed", "forbidden", "categories"):
        if data.get(key) is not None and not isinstance(data[key], str | bytes):
            values = list(data[key])
            data[key] = tuple(category_text(v) for v in values) if key == "categories" else _rule_values(values)
    try:
        return FeatureRule(**data)
    except SpecError as exc:
        raise SpecError(f"features.{name}.{exc.field}" if name else exc.field, exc.problem) from None


def restrict_categories(categories: Sequence[str], value: str | None, rule: FeatureRule | None, name: str) -> list[str]:
    """``categories`` restricted by ``rule``'s allowed and forbidden values (the original kept:
    not changing is always possible); refused, naming the feature, when a listed value is no
    category of it."""
    if rule is None or (rule.allowed is None and rule.forbidden is None):
        return list(categories)
    known = set(categories)
    for key in ("allowed", "forbidden"):
        listed = getattr(rule, key)
        if listed is None:
            continue
        unknown = [category_text(v) for v in listed if category_text(v) not in known]
        if unknown:
            raise SpecError(
                f"features.{name}.{key}", f"{_few(unknown)} is not a category of {name}; categories: {_few(categories)}"
            )
    keep = list(categories)
    if rule.allowed is not None:
        allowed = {category_text(v) for v in rule.allowed}
        keep = [c for c in keep if c in allowed or c == value]
    if rule.forbidden is not None:
        forbidden = {category_text(v) for v in rule.forbidden}
        keep = [c for c in keep if c not in forbidden or c == value]
    return keep


def allowed_numbers(rule: FeatureRule | None, name: str) -> tuple[float, ...] | None:
    """A number's allowed values (``allowed`` minus ``forbidden``); None when the rule lists none."""
    if rule is None or (rule.allowed is None and rule.forbidden is None):
        return None
    if rule.allowed is None:
        raise SpecError(
            f"features.{name}.forbidden",
            "a number's values can only be forbidden from a list of allowed values: give allowed too",
        )
    numbers: list[float] = []
    for value in rule.allowed:
        if isinstance(value, str | bool) or not math.isfinite(float(value)):
            raise SpecError(
                f"features.{name}.allowed",
                f"{name} is a number: {value!r} is not a finite number{yaml_number_hint(value)}",
            )
        numbers.append(float(value))
    forbidden = {float(v) for v in rule.forbidden or () if not isinstance(v, str)}
    left = tuple(v for v in numbers if v not in forbidden)
    if not left:  # else "allowed values: give at least one", of a list the caller gave
        raise SpecError(
            f"features.{name}.forbidden",
            f"forbids every allowed value of {name} ({_few(numbers)}); to keep {name} as it is, make it immutable",
        )
    return left


_GOALS: dict[str, type[AnyGoal]] = {"class": ClassGoal, "value": ValueGoal, "range": RangeGoal}


def _goal(index: int, item: Any) -> Any:
    """A goal given as data, built as the goal its ``kind`` names (``class`` when it names none),
    a problem named ``INDEX.FIELD`` under ``goals``: pydantic's union would try every kind and
    name each one's complaints (``goals.0.ClassGoal.goal.confidence, goals.0.ValueGoal...``)."""
    if isinstance(item, ClassGoal | ValueGoal | RangeGoal):
        return item
    if not isinstance(item, Mapping):
        raise SpecError(
            str(index), f"expected a goal (an object with its kind: class, value or range), given {echo(item)}"
        )
    kind = item.get("kind", "class")
    model = _GOALS.get(kind) if isinstance(kind, str) else None
    if model is None:
        raise SpecError(f"{index}.kind", f"unknown goal kind {echo(kind)}; one of {', '.join(_GOALS)}")
    try:
        return model(**item)
    except GoalError as exc:  # its field is goal.NAME or goal[OUTPUT].NAME
        raise SpecError(f"{index}.{exc.field.partition('.')[2] or exc.field}", exc.problem) from None


def _few(values: Sequence[Any], most: int = 12) -> str:
    shown = ", ".join(echo(v) for v in list(values)[:most])
    return f"[{shown}{', ...' if len(values) > most else ''}]"
