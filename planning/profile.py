"""Data profiles: what is known of a model's features before an instance comes, in two forms.

A problem's features are built from a *profile* and an instance, under a
:class:`~counterplan.planning.spec.ProblemSpec`:

* :class:`~counterplan.planning.inference.DataProfile`: a training DataFrame (kinds, domains,
  grids, categories and statistics inferred from its columns, each domain widened to hold the
  instance's own value);
* :class:`SchemaProfile`: a model card's feature schema (:class:`FeatureSpec`: each feature's
  kind, domain, precision and rules written out), with its statistics and, when the card gives
  them, reference rows with their label column (for plausibility and the trust region).

Both check the instance the same way: every feature needs a value, a name that is no feature is
refused, and so is a category the feature does not have (naming the feature and listing its
categories), so a misspelt value is never explained as another row. Every bad feature is named
at once (:class:`InstanceError`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from counterplan.planning.distance import FeatureStatistics
from counterplan.planning.errors import FeatureError, InvalidInputError, ProblemError, cut, echo
from counterplan.planning.features import category_text, is_missing, parse_feature, value_text
from counterplan.planning.space import AnyFeature
from counterplan.planning.spec import FeatureRule, ProblemSpec, allowed_numbers, restrict_categories

MAX_NAMED = 20
"""Bad features an :class:`InstanceError` names at most; the rest are counted."""


class InstanceError(FeatureError):
    """One or more features of an instance are bad; ``problems`` holds ``(feature, problem)`` each."""

    def __init__(self, problems: Sequence[tuple[str, str]]) -> None:
        self.problems = [(cut(name), problem) for name, problem in problems]  # a key may be a megabyte
        shown = self.problems[:MAX_NAMED]
        text = "; ".join(f"{name}: {problem}" for name, problem in shown)
        if len(self.problems) > MAX_NAMED:
            text += f"; and {len(self.problems) - MAX_NAMED:,} more"
        field = shown[0][0] if len(shown) == 1 else ", ".join(n for n, _ in shown)
        super().__init__(field, shown[0][1] if len(shown) == 1 else text)


RULE_FIELDS = ("allowed",)
"""A feature's own fields that a spec's rule sets as it is (``features.NAME.allowed``)."""


def problem_field(name: str, field: str) -> str:
    """The field an instance's problem with feature ``name`` is named by: a rule's path as it is
    (``features.NAME.forbidden``), a feature's field a rule sets as the rule's
    (``NAME.allowed`` -> ``features.NAME.allowed``: the command line's ``--allowed``, not
    ``--instance``), else the feature."""
    if field.startswith("features."):
        return field
    own = field.startswith(f"{name}.") and field.rsplit(".", 1)[-1]  # NAME.allowed, NAME.float.NAME.allowed
    if own in RULE_FIELDS:
        return f"features.{name}.{own}"
    return name


class FeatureSource(Protocol):
    """What builds a problem's features and statistics for an instance."""

    @property
    def columns(self) -> list[str] | None:
        """The feature columns in model order, when the profile knows them (a schema does)."""
        ...

    @property
    def reference(self) -> pd.DataFrame | None:
        """Rows with their label column (plausibility, the trust region, relevance), when known."""
        ...

    def features(self, instance: Mapping[str, Any], columns: Sequence[str], spec: ProblemSpec) -> list[AnyFeature]:
        """One checked feature per column for ``instance`` under ``spec``."""
        ...

    def statistics_of(self, features: Sequence[AnyFeature]) -> dict[str, FeatureStatistics]:
        """Normalisation statistics of the numeric features."""
        ...


def check_names(instance: Mapping[str, Any], columns: Sequence[str], target: str | None) -> list[tuple[str, str]]:
    """The instance's keys that are no feature (the label column, when named, is let through)."""
    known = set(columns)
    return [
        (str(key), f"not a feature of the model; features: {_few(columns)}")
        for key in instance
        if str(key) not in known and str(key) != target
    ]


def check_spec_names(spec: ProblemSpec, columns: Sequence[str]) -> None:
    """Every feature the spec names must be a column; refused naming where the spec names it
    (``immutable``, ``fill_missing``, or the rule's field: ``features.NAME.cost``)."""
    fillable = set(spec.fill_missing) if not isinstance(spec.fill_missing, bool) else set()
    named = set(spec.immutable) | set(spec.features) | fillable
    for name in sorted(named - set(columns)):
        if name in spec.features:
            fields = sorted(spec.features[name].model_fields_set)
            where = f"features.{name}" + (f".{fields[0]}" if fields else "")
        else:
            where = "immutable" if name in spec.immutable else "fill_missing"
        raise ProblemError(where, f"{echo(name)} is not a feature column; columns: {_few_names(columns)}")


def _few_names(columns: Sequence[str], most: int = 30) -> str:
    """The columns, at most ``most`` of them (an error never lists unbounded input)."""
    shown = ", ".join(repr(c) for c in list(columns)[:most])
    return f"[{shown}{', ...' if len(columns) > most else ''}]"


def gap_rules(fields: dict[str, Any]) -> dict[str, Any]:
    """A feature's fields with a rule's ``fill_missing`` and ``monotone`` read for its value:
    ``fill_missing`` only for a gap, and no ``monotone`` for a gap the search may fill.

    A direction is kept from the instance's value, and a gap has none: a gap to fill may take any
    value of the domain. Why here: a spec's rules (a model card's, an explainer's, a request's
    overrides) span instances, and refusing every instance missing such a feature ("a missing
    value has no direction to keep") left a card's user no way to explain it. A single feature
    built by hand with both is still refused (:class:`~counterplan.planning.features.FloatFeature`).
    A request's ``fill_missing`` arrives as each feature's rule, and set ``fill_missing`` on a
    feature with a value where the same spec run locally did not.
    """
    if fields.get("value") is not None:
        return {**fields, "fill_missing": False} if fields.get("fill_missing") else fields
    if fields.get("fill_missing") and fields.get("monotone") is not None:
        return {**fields, "monotone": None}
    return fields


def apply_rule(fields: dict[str, Any], rule: FeatureRule | None, name: str) -> dict[str, Any]:
    """A feature's fields with ``rule``'s allowed/forbidden values applied (categories restricted,
    a number's allowed list set); the other rule fields are set by the profile."""
    if rule is None:
        return fields
    kind = fields.get("kind")
    if kind == "categorical" and fields.get("categories") is not None:
        fields["categories"] = restrict_categories(fields["categories"], fields.get("value"), rule, name)
    elif kind == "boolean" and (rule.allowed is not None or rule.forbidden is not None):
        fields = _boolean_rule(fields, rule, name)
    elif kind in ("integer", "float"):
        numbers = allowed_numbers(rule, name)
        if numbers is not None:
            fields["allowed"] = numbers
    return fields


_BOOLEAN_TEXT = {"true": "True", "false": "False", "1": "True", "0": "False"}
"""A boolean's allowed or forbidden value as a flag, a card or the wire writes it."""


def _boolean_rule(fields: dict[str, Any], rule: FeatureRule, name: str) -> dict[str, Any]:
    """A boolean whose other value is not allowed (or forbidden) cannot change."""
    for key in ("allowed", "forbidden"):
        unknown = [v for v in getattr(rule, key) or () if category_text(v).lower() not in _BOOLEAN_TEXT]
        if unknown:
            raise ProblemError(f"features.{name}.{key}", f"{unknown[0]!r} is not true or false ({name} is a boolean)")
    values = {_BOOLEAN_TEXT[category_text(v).lower()] for v in rule.allowed or (True, False)} - {
        _BOOLEAN_TEXT[category_text(v).lower()] for v in rule.forbidden or ()
    }
    value = fields.get("value")
    if value is not None and str(not bool(value)) not in values:
        fields["constrained"] = True
    return fields


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


class SchemaProfile:
    """A model card's feature schema as a profile (see the module docstring).

    Parameters
    ----------
    schema:
        The features, in model order.
    statistics:
        Per numeric feature: range, standard deviation, MAD (for the MAD and SD distances).
    reference:
        Rows with their label column, when the card gives training data.
    """

    def __init__(
        self,
        schema: Sequence[FeatureSpec],
        statistics: Mapping[str, FeatureStatistics] | None = None,
        reference: pd.DataFrame | None = None,
    ) -> None:
        self.schema = list(schema)
        self.statistics = dict(statistics or {})
        self._reference = reference
        self._by_name = {spec.name: spec for spec in self.schema}

    @property
    def columns(self) -> list[str]:
        """The schema's features, in model order."""
        return [spec.name for spec in self.schema]

    @property
    def reference(self) -> pd.DataFrame | None:
        """The card's training rows with their label column, when it gives them."""
        return self._reference

    def feature(self, name: str) -> FeatureSpec | None:
        """The schema of one feature, or None."""
        return self._by_name.get(name)

    def features(self, instance: Mapping[str, Any], columns: Sequence[str], spec: ProblemSpec) -> list[AnyFeature]:
        """One feature per schema feature, its value the instance's, under ``spec``'s rules."""
        check_spec_names(spec, self.columns)
        problems: list[tuple[str, str]] = []
        frozen = spec.frozen_names()
        fill = spec.fill_missing
        out: list[AnyFeature] = []
        for feature in self.schema:
            if feature.name not in instance:
                problems.append((feature.name, "missing: every model feature needs a value"))
                continue
            rule = spec.features.get(feature.name)
            value = instance[feature.name]
            if feature.kind == "categorical" and feature.categories is not None:
                unknown = _unknown_category(feature.name, value, feature.categories, rule)
                if unknown is not None:
                    problems.append((feature.name, unknown))
                    continue
            fills = fill is True or (not isinstance(fill, bool) and feature.name in fill)
            try:
                out.append(build_feature(feature, value, rule, frozen=feature.name in frozen, fill=fills))
            except InvalidInputError as exc:  # a rule's problem keeps its path (features.NAME.field)
                problems.append((problem_field(feature.name, exc.field), exc.problem))
        if problems:
            raise InstanceError(problems)
        return out

    def statistics_of(self, features: Sequence[AnyFeature]) -> dict[str, FeatureStatistics]:
        """The schema's statistics."""
        return dict(self.statistics)


def _unknown_category(name: str, value: Any, categories: Sequence[str], rule: FeatureRule | None) -> str | None:
    """Why ``value`` is no category of the feature (None when it is one, or missing)."""
    if is_missing(value):
        return None
    known = rule.categories if rule is not None and rule.categories is not None else tuple(categories)
    if category_text(value) in known:
        return None
    return f"{echo(category_text(value))} is not one of its categories {_few(known)}"


def build_feature(
    spec: FeatureSpec, value: Any, rule: FeatureRule | None, *, frozen: bool = False, fill: bool = False
) -> AnyFeature:
    """A planning feature for ``value`` with this schema and a spec's rule for it."""
    override = rule.inference_fields if rule is not None else {}
    if value is not None and is_missing(value):
        value = None
    kind = spec.kind
    if kind == "integer" and isinstance(value, float) and not value.is_integer():
        kind = "float"  # only a stored_as_float integer lets such a value through
    data: dict[str, Any] = {"kind": kind, "name": spec.name, "value": value}
    data["cost"] = override.get("cost", spec.cost)
    data["monotone"] = override.get("monotone", spec.monotone)
    data["fill_missing"] = bool(override.get("fill_missing", spec.fill_missing or fill)) and value is None
    if spec.kind == "float":
        data["precision"] = override.get("precision", spec.precision)
    elif kind == "float":
        data["precision"] = 0
    if spec.kind == "categorical":
        data["category_type"] = spec.category_type
    constrained = bool(override.get("constrained", spec.immutable or frozen))
    if constrained and rule is None:  # never moves; its domain is for the diagnosis of an unreachable goal
        return parse_feature({**data, **_held_domain(spec, kind, value), "constrained": True})
    if spec.kind in ("integer", "float"):
        data |= _number_domain(spec, kind, override, rule)
    else:
        data = _choice_domain(data, spec, override, rule, value)
    data["constrained"] = constrained or data.get("constrained", False) or (value is None and not data["fill_missing"])
    return parse_feature(gap_rules(data))


def _choice_domain(
    data: dict[str, Any], spec: FeatureSpec, override: Mapping[str, Any], rule: FeatureRule | None, value: Any
) -> dict[str, Any]:
    """A category's domain (the rule's categories, else the schema's, restricted by the rule's
    allowed and forbidden ones), or a boolean's rule."""
    if spec.kind == "categorical":
        categories = override.get("categories") or spec.categories
        if categories is not None:
            text = None if value is None else category_text(value)
            data["categories"] = restrict_categories(list(categories), text, rule, spec.name)
    elif spec.kind == "boolean" and rule is not None:
        data = apply_rule(data, rule, spec.name)
    return data


def _number_domain(
    spec: FeatureSpec, kind: str, override: Mapping[str, Any], rule: FeatureRule | None
) -> dict[str, Any]:
    """A number's allowed values and bounds: the rule's, else the schema's."""
    fields: dict[str, Any] = {}
    allowed = allowed_numbers(rule, spec.name) if rule is not None else None
    if allowed is None:
        allowed = spec.allowed
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
        if value is not None and value_text(value) not in categories:
            categories.append(value_text(value))
        return {"categories": categories}
    return {}


def _few(values: Sequence[Any], most: int = 12) -> str:
    listed = list(values)
    shown = ", ".join(repr(v) for v in listed[:most])
    return f"[{shown}{', ...' if len(listed) > most else ''}]"
