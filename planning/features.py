"""Typed features: the planning entities of a counterfactual problem.

A feature holds the original value of one model input, the domain the search may move it in,
and whether it may move at all. As in TrustyAI, a feature given no domain is *constrained*
(immutable): the search never touches it. Every feature knows how to encode its value as one
float64 (integers as whole numbers, categories as their index, booleans as 0/1), which is how
candidates travel through the solver as rows of a matrix.

Two facts of real data shape every feature:

* **Values live on a grid.** Integers are whole; a float feature may carry a ``precision``
  (decimals; inferred from the data), and the search only proposes values on that grid, so
  the score is computed on the values the user will see. The original value is always
  allowed, on the grid or not.
* **A value may be missing** (``value=None``; NaN is read as missing). A missing value stays
  missing unless ``fill_missing`` is set: then the domain is "missing, or a value in
  ``[low, high]``", filling counts as one change, and the feature is encoded by a
  :attr:`missing_code` outside its domain, so the solver's matrices stay finite.
"""

from __future__ import annotations

import math
import numbers
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    model_validator,
)

from counterplan.planning._pydantic import excerpt, reraise
from counterplan.planning.errors import FeatureError, echo

FeatureKind = Literal["integer", "float", "categorical", "boolean"]
Monotone = Literal["increase", "decrease"]
CategoryType = Literal["text", "integer", "number"]
MAX_MAGNITUDE = 2**53
"""Numbers a feature may hold at most, in magnitude: float64 carries every whole number up to it
(and a delta near float64's limit would make a cost, its sum over steps, overflow to infinity)."""
MAX_PRECISION = 12
"""Decimals a float feature's grid may have at most (float64 holds about 15 significant digits)."""


def within_magnitude(value: float) -> float:
    """A number a caller gives as a bound or a value, held to +-2^53 (:data:`MAX_MAGNITUDE`)."""
    if abs(value) > MAX_MAGNITUDE:
        raise ValueError(f"must be between -2^53 and 2^53 ({MAX_MAGNITUDE:,}), given {excerpt(value)}")
    return value


def a_number(value: Any) -> Any:
    """A bound is a number as written: pydantic's lax floats would read ``true`` as 1 and ``'5'``
    as 5, and a file's typo would bound a feature or an action without a word."""
    if isinstance(value, bool) or type(value).__name__ == "bool_" or not isinstance(value, numbers.Real):
        raise ValueError(f"must be a number, given {excerpt(value)}{yaml_number_hint(value)}")
    return value


def yaml_number_hint(value: Any) -> str:
    """For a text that reads as a number in exponent form (``1e9``): why it is text. YAML 1.1,
    which PyYAML reads, takes an exponent only after a decimal point and with its sign
    (``1.0e+9``), so a card's or an action file's ``low: 1e9`` or ``allowed: [2.5e4]`` is a text,
    refused as no number without a word of why."""
    if not isinstance(value, str) or "e" not in value.lower():
        return ""
    try:
        number = float(value)
    except ValueError:
        return ""
    if not math.isfinite(number):
        return ""
    return f" (YAML reads {value} as text: write a decimal point and the exponent's sign, {_yaml_float(value)})"


def _yaml_float(text: str) -> str:
    """``1e9`` -> ``1.0e+9``, ``2.5E-3`` -> ``2.5e-3``: the exponent form YAML 1.1 reads as a number."""
    mantissa, _, exponent = text.strip().lower().partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    if exponent[:1] not in ("+", "-"):
        exponent = "+" + exponent
    return f"{mantissa}e{exponent}"


Bound = Annotated[float, BeforeValidator(a_number), AfterValidator(within_magnitude)]
"""A bound a caller gives (a feature's, an action's): a number (not a boolean or a text) within
+-2^53."""


def is_missing(value: Any) -> bool:
    """None, a float NaN, or pandas' NA/NaT: a value the data does not have."""
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    if type(value).__name__ in {"NAType", "NaTType"}:
        return True
    if not (hasattr(value, "dtype") and getattr(value, "shape", None) == ()):
        return False
    try:  # a numpy scalar: NaN if it is a float one
        return bool(math.isnan(value))
    except TypeError:  # a numpy string, say
        return False


class _Feature(BaseModel):
    """Fields and checks that every feature kind shares."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False, strict=False)

    name: Annotated[str, Field(min_length=1)]
    constrained: bool = False
    cost: Annotated[float, Field(gt=0.0)] = 1.0
    """Weight of this feature's change in the distance: 2 makes a change cost twice as much."""
    monotone: Monotone | None = None
    """The feature may only increase or only decrease (categories: along their listed order)."""
    fill_missing: bool = False
    """When the original value is missing: may the search fill it in? (By default it stays missing.)"""

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            reraise(exc, str(data.get("name", "<unnamed>")), FeatureError)

    @model_validator(mode="before")
    @classmethod
    def _missing_stays_missing(cls, data: Any) -> Any:
        if isinstance(data, dict) and is_missing(data.get("value")) and "value" in data:
            data = {**data, "value": None}
            if not data.get("fill_missing"):
                data["constrained"] = True
        return data

    @model_validator(mode="after")
    def _check_missing(self) -> Self:
        if self.value is None and self.fill_missing and self.monotone is not None:  # type: ignore[attr-defined]
            raise ValueError("a missing value has no direction to keep: drop monotone or fill_missing")
        return self

    @property
    def mutable(self) -> bool:
        """True when the search may change this feature."""
        return not self.constrained

    @property
    def missing(self) -> bool:
        """True when the original value is missing."""
        return self.value is None  # type: ignore[attr-defined]

    def _encode_missing(self) -> float:
        if not self.missing:
            raise FeatureError(
                self.name,
                "given a missing value; give a finite value (only a feature whose original value is missing "
                "may stay missing)",
            )
        return self.missing_code

    @property
    def missing_code(self) -> float:
        """The code of "missing" in a candidate row: outside the domain, so it never collides."""
        raise NotImplementedError


class _NumericFeature(_Feature):
    """A number with inclusive bounds; no bounds means constrained."""

    allowed: tuple[float, ...] | None = None
    """When set, a changed value must be one of these (say, loan amounts in steps of 1,000)."""
    low: float | None = None
    high: float | None = None

    @property
    def step(self) -> float:
        """Distance between neighbouring grid values; 0 for a float without a precision."""
        return 1.0

    @property
    def missing_code(self) -> float:
        """Below the domain by at least 1, and whole when ``low`` is (so integers stay whole)."""
        if self.low is None:
            return 0.0
        return float(self.low) - max(1.0, abs(float(self.low)))

    @property
    def bounds(self) -> tuple[float, float]:
        """Encoded inclusive bounds; a constrained feature's domain is its own value (or code)."""
        if self.low is None or self.high is None:
            own = self.missing_code if self.missing else float(self.value)  # type: ignore[attr-defined]
            return own, own
        if self.missing and not self.mutable:
            return self.missing_code, self.missing_code
        return float(self.low), float(self.high)

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

    def _check_domain(self, value: float | None, low: float | None, high: float | None) -> None:
        for name, number in (("value", value), ("low", low), ("high", high)):
            if number is not None and abs(number) > MAX_MAGNITUDE:
                raise ValueError(
                    f"{name} is beyond +-2^53 ({MAX_MAGNITUDE:,}), where float64 stops counting whole numbers"
                )
        if low is None or high is None:
            return
        if low > high:
            raise ValueError(f"inverted domain: low {low!r} is greater than high {high!r}")
        if value is not None and not low <= value <= high:
            raise ValueError(f"original value {value!r} is outside its domain [{low!r}, {high!r}]")
        if self.allowed is not None:
            if not self.allowed:
                raise FeatureError("allowed", "give at least one allowed value")
            outside = [v for v in self.allowed if not low <= v <= high]
            if outside:
                raise FeatureError("allowed", f"allowed values {outside} are outside the domain [{low!r}, {high!r}]")


class IntegerFeature(_NumericFeature):
    """A whole-number input (a count, an age in years); stays whole in every candidate."""

    kind: Literal["integer"] = "integer"
    value: int | None
    low: int | None = None
    high: int | None = None

    @model_validator(mode="after")
    def _check(self) -> Self:
        self._check_domain(self.value, self.low, self.high)
        fractional = [v for v in self.allowed or () if not float(v).is_integer()]
        if fractional:  # else refused later as a candidate "row 0" outside the domain, naming no rule
            raise FeatureError(
                "allowed", f"allowed values {fractional} are not whole numbers, as this integer feature's values are"
            )
        return self

    def encode(self, value: Any) -> float:
        """Encode one value of this feature (a whole number) as a float."""
        if is_missing(value):
            return self._encode_missing()
        number = _finite_number(self.name, value)
        if not float(number).is_integer():
            raise FeatureError(self.name, f"integer feature given a fractional value {value!r}")
        return float(number)

    def decode(self, code: float) -> int | None:
        """Decode one encoded value back to an ``int`` (None for the missing code)."""
        if self.missing and code == self.missing_code:
            return None
        return round(code)


class FloatFeature(_NumericFeature):
    """A real-valued input (income, a ratio)."""

    kind: Literal["float"] = "float"
    value: float | None
    precision: Annotated[int, Field(ge=-9, le=MAX_PRECISION)] | None = None
    """Decimals of the values the search may propose (2: cents; -3: thousands); None: any float."""

    @model_validator(mode="after")
    def _check(self) -> Self:
        self._check_domain(self.value, self.low, self.high)
        return self

    @property
    def step(self) -> float:
        """``10 ** -precision``, or 0 for a float without a precision."""
        return 0.0 if self.precision is None else float(10.0 ** (-self.precision))

    def encode(self, value: Any) -> float:
        """Encode one value of this feature as a float."""
        if is_missing(value):
            return self._encode_missing()
        return _finite_number(self.name, value)

    def decode(self, code: float) -> float | None:
        """Decode one encoded value back to a ``float``, rounded to the precision (None when missing).

        The original and an allowed value are shown as they are: an allowed value wins over the
        decimals (the search proposes it, the model is asked about it), so ``12.25`` among the
        allowed values of a 1-decimal feature is reported as ``12.25``, not ``12.2``."""
        if self.missing and code == self.missing_code:
            return None
        if self.precision is not None and code != self.value and (self.allowed is None or code not in self.allowed):
            return round(float(code), self.precision)
        return float(code)


class CategoricalFeature(_Feature):
    """An input from a fixed list of categories, encoded as the category's index."""

    kind: Literal["categorical"] = "categorical"
    value: str | None
    categories: tuple[str, ...] | None = None
    category_type: CategoryType = "text"
    """What the model takes: the category strings (``text``), or codes stored as numbers
    (``integer``, ``number``: a column of 0..k codes the user marked categorical)."""
    category_dtype: bool = False
    """The training column was a pandas ``category``: a model given a DataFrame gets one (its
    categories this feature's), as LightGBM and XGBoost fitted on one require."""

    @model_validator(mode="before")
    @classmethod
    def _no_domain_means_constrained(cls, data: Any) -> Any:
        if isinstance(data, dict):
            if data.get("categories") is None:
                data = {**data, "constrained": True}
            value = data.get("value")
            if value is not None and not isinstance(value, str) and not is_missing(value):
                data = {**data, "value": category_text(value)}
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
            if self.category_type != "text":
                try:
                    float(category)
                except ValueError:
                    raise ValueError(f"category {category!r} is not a number ({self.category_type} codes)") from None
        if self.value is not None and self.value not in seen:
            raise ValueError(f"original value {self.value!r} is not one of the categories {list(self.categories)}")
        return self

    @property
    def domain(self) -> tuple[str, ...]:
        """The allowed categories; a constrained feature's domain is its own value."""
        if self.categories is not None:
            return self.categories
        return () if self.value is None else (self.value,)

    @property
    def missing_code(self) -> float:
        """-1: before the first category's index."""
        return -1.0

    @property
    def bounds(self) -> tuple[float, float]:
        """Encoded inclusive bounds: category indices."""
        if self.missing and not self.mutable:
            return self.missing_code, self.missing_code
        return 0.0, float(len(self.domain) - 1)

    def model_values(self) -> tuple[Any, ...]:
        """The categories as the model takes them: strings, or the numbers they stand for."""
        if self.category_type == "integer":
            return tuple(int(float(c)) for c in self.domain)
        if self.category_type == "number":
            return tuple(float(c) for c in self.domain)
        return self.domain

    def encode(self, value: Any) -> float:
        """Encode a category as its index in :attr:`domain`."""
        if is_missing(value):
            return self._encode_missing()
        text = value if isinstance(value, str) else category_text(value)
        try:
            return float(self.domain.index(text))
        except ValueError:
            raise FeatureError(self.name, f"category {value!r} is not one of {list(self.domain)}") from None

    def decode(self, code: float) -> str | None:
        """Decode an index back to its category (None for the missing code)."""
        if code < 0 and self.missing:
            return None
        return self.domain[round(code)]


class BooleanFeature(_Feature):
    """A yes/no input; its domain is always ``{False, True}`` unless it is constrained."""

    kind: Literal["boolean"] = "boolean"
    value: bool | None

    @property
    def missing_code(self) -> float:
        """-1: below false."""
        return -1.0

    @property
    def bounds(self) -> tuple[float, float]:
        """Encoded inclusive bounds: 0 and 1."""
        if self.missing and not self.mutable:
            return self.missing_code, self.missing_code
        return 0.0, 1.0

    def encode(self, value: Any) -> float:
        """Encode ``False``/``True`` as 0/1."""
        if is_missing(value):
            return self._encode_missing()
        if is_boolean(value) or (isinstance(value, int | float) and value in (0, 1)):
            return float(bool(value))
        raise FeatureError(self.name, f"boolean feature given {value!r}; expected true or false")

    def decode(self, code: float) -> bool | None:
        """Decode 0/1 back to a ``bool`` (None for the missing code)."""
        if code < 0 and self.missing:
            return None
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


def is_boolean(value: Any) -> bool:
    """Python's or numpy's boolean: what a pandas column of booleans yields (``np.True_`` from
    a nullable ``boolean`` column, as a batch's records read back hold; numpy 2 names its type
    ``bool``, numpy 1 ``bool_``). Read by name: this module loads no numpy (``--help`` stays fast)."""
    kind = type(value)
    return kind is bool or (kind.__module__ == "numpy" and kind.__name__ in {"bool", "bool_"})


def category_text(value: Any) -> str:
    """A category's text: numbers as written (``3``, not ``3.0``; ``2.5``); anything else as
    :func:`value_text` writes it (a list a caller sent is no category, and is refused as one)."""
    if is_boolean(value):
        return str(bool(value))
    if isinstance(value, int | float) or hasattr(value, "dtype"):
        number = float(value)
        if math.isfinite(number) and number.is_integer():
            return str(int(number))
        return repr(number) if isinstance(value, float) else str(value)
    return value_text(value)


def value_text(value: Any) -> str:
    """``str(value)`` of a caller's value; a list or object nested too deep for it (``str``
    recurses per level, and KServe's decoder reads JSON 1,024 levels deep) as
    :func:`~counterplan.planning.errors.echo` shows it, ``[…] (nested too deep to show)``, never
    a RecursionError."""
    try:
        return str(value)
    except RecursionError:
        return echo(value)


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
