"""Typed features: the planning entities of a counterfactual problem.

A feature holds the original value of one model input, the domain the search may move it in,
and whether it may move at all. As in TrustyAI, a feature given no domain is *constrained*
(immutable): the search never touches it. Every feature knows how to encode its value as one
float64 (integers as whole numbers, categories as their index, booleans as 0/1), which is how
candidates travel through the solver as rows of a matrix.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from planning._pydantic import reraise
from planning.errors import FeatureError

FeatureKind = Literal["integer", "float", "categorical", "boolean"]
Monotone = Literal["increase", "decrease"]


class _Feature(BaseModel):
    """Fields and checks that every feature kind shares."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False, strict=False)

    name: Annotated[str, Field(min_length=1)]
    constrained: bool = False
    cost: Annotated[float, Field(gt=0.0)] = 1.0
    """Weight of this feature's change in the distance: 2 makes a change cost twice as much."""
    monotone: Monotone | None = None
    """The feature may only increase or only decrease (categories: along their listed order)."""

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            reraise(exc, str(data.get("name", "<unnamed>")), FeatureError)

    @property
    def mutable(self) -> bool:
        """True when the search may change this feature."""
        return not self.constrained


class _NumericFeature(_Feature):
    """A number with inclusive bounds; no bounds means constrained."""

    allowed: tuple[float, ...] | None = None
    """When set, a changed value must be one of these (say, loan amounts in steps of 1,000)."""

    @model_validator(mode="before")
    @classmethod
    def _no_domain_means_constrained(cls, data: Any) -> Any:
        if isinstance(data, dict):
            low, high = data.get("low"), data.get("high")
            if (low is None) != (high is None):
                missing = "high" if high is None else "low"
                raise ValueError(f"give both bounds or neither; {missing} is missing")
            if low is None and high is None:
                data = {**data, "constrained": True}
        return data

    def _check_domain(self, value: float, low: float | None, high: float | None) -> None:
        if low is None or high is None:
            return
        if low > high:
            raise ValueError(f"inverted domain: low {low!r} is greater than high {high!r}")
        if not low <= value <= high:
            raise ValueError(f"original value {value!r} is outside its domain [{low!r}, {high!r}]")
        if self.allowed is not None:
            if not self.allowed:
                raise ValueError("allowed values: give at least one")
            outside = [v for v in self.allowed if not low <= v <= high]
            if outside:
                raise ValueError(f"allowed values {outside} are outside the domain [{low!r}, {high!r}]")


class IntegerFeature(_NumericFeature):
    """A whole-number input (a count, an age in years); stays whole in every candidate."""

    kind: Literal["integer"] = "integer"
    value: int
    low: int | None = None
    high: int | None = None

    @model_validator(mode="after")
    def _check(self) -> Self:
        self._check_domain(self.value, self.low, self.high)
        return self

    @property
    def bounds(self) -> tuple[float, float]:
        """Encoded inclusive bounds; a constrained feature's domain is its own value."""
        if self.low is None or self.high is None:
            return float(self.value), float(self.value)
        return float(self.low), float(self.high)

    def encode(self, value: Any) -> float:
        """Encode one value of this feature (a whole number) as a float."""
        number = _finite_number(self.name, value)
        if not float(number).is_integer():
            raise FeatureError(self.name, f"integer feature given a fractional value {value!r}")
        return float(number)

    def decode(self, code: float) -> int:
        """Decode one encoded value back to an ``int``."""
        return round(code)


class FloatFeature(_NumericFeature):
    """A real-valued input (income, a ratio)."""

    kind: Literal["float"] = "float"
    value: float
    low: float | None = None
    high: float | None = None

    @model_validator(mode="after")
    def _check(self) -> Self:
        self._check_domain(self.value, self.low, self.high)
        return self

    @property
    def bounds(self) -> tuple[float, float]:
        """Encoded inclusive bounds; a constrained feature's domain is its own value."""
        if self.low is None or self.high is None:
            return self.value, self.value
        return self.low, self.high

    def encode(self, value: Any) -> float:
        """Encode one value of this feature as a float."""
        return _finite_number(self.name, value)

    def decode(self, code: float) -> float:
        """Decode one encoded value back to a ``float``."""
        return float(code)


class CategoricalFeature(_Feature):
    """An input from a fixed list of categories, encoded as the category's index."""

    kind: Literal["categorical"] = "categorical"
    value: str
    categories: tuple[str, ...] | None = None

    @model_validator(mode="before")
    @classmethod
    def _no_domain_means_constrained(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("categories") is None:
            data = {**data, "constrained": True}
        return data

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.categories is None:
            return self
        if not self.categories:
            raise ValueError("empty domain: give at least one category")
        seen: set[str] = set()
        for category in self.categories:
            if category in seen:
                raise ValueError(f"category {category!r} is listed twice")
            seen.add(category)
        if self.value not in seen:
            raise ValueError(f"original value {self.value!r} is not one of the categories {list(self.categories)}")
        return self

    @property
    def domain(self) -> tuple[str, ...]:
        """The allowed categories; a constrained feature's domain is its own value."""
        return self.categories if self.categories is not None else (self.value,)

    @property
    def bounds(self) -> tuple[float, float]:
        """Encoded inclusive bounds: category indices."""
        return 0.0, float(len(self.domain) - 1)

    def encode(self, value: Any) -> float:
        """Encode a category as its index in :attr:`domain`."""
        try:
            return float(self.domain.index(str(value)))
        except ValueError:
            raise FeatureError(self.name, f"category {value!r} is not one of {list(self.domain)}") from None

    def decode(self, code: float) -> str:
        """Decode an index back to its category."""
        return self.domain[round(code)]


class BooleanFeature(_Feature):
    """A yes/no input; its domain is always ``{False, True}`` unless it is constrained."""

    kind: Literal["boolean"] = "boolean"
    value: bool

    @property
    def bounds(self) -> tuple[float, float]:
        """Encoded inclusive bounds: 0 and 1."""
        return 0.0, 1.0

    def encode(self, value: Any) -> float:
        """Encode ``False``/``True`` as 0/1."""
        if isinstance(value, bool | int | float) and value in (0, 1):
            return float(bool(value))
        raise FeatureError(self.name, f"boolean feature given {value!r}; expected true or false")

    def decode(self, code: float) -> bool:
        """Decode 0/1 back to a ``bool``."""
        return bool(round(code))


Feature = Annotated[
    IntegerFeature | FloatFeature | CategoricalFeature | BooleanFeature,
    Field(discriminator="kind"),
]
"""Any feature kind; pydantic picks the class by the ``kind`` field."""

_FEATURE_ADAPTER: TypeAdapter[IntegerFeature | FloatFeature | CategoricalFeature | BooleanFeature] = TypeAdapter(
    Feature
)


def parse_feature(data: Any) -> IntegerFeature | FloatFeature | CategoricalFeature | BooleanFeature:
    """Build a feature from plain data (a dict with a ``kind``), raising ``FeatureError``."""
    try:
        return _FEATURE_ADAPTER.validate_python(data)
    except ValidationError as exc:
        owner = str(data.get("name", "<unnamed>")) if isinstance(data, dict) else "<unnamed>"
        reraise(exc, owner, FeatureError)


def _finite_number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise FeatureError(name, f"expected a number, given {value!r}") from None
    else:
        number = float(value)
    if not math.isfinite(number):
        raise FeatureError(name, f"value must be finite, given {value!r}")
    return number
