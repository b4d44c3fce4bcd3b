"""Infer features and normalisation statistics from a training DataFrame.

This is how data scientists build a problem: a training DataFrame and one row. Column dtypes
decide the feature kind (bool, integer, float, anything else categorical); domains are the
observed min/max or categories (widened to include the instance's own value); statistics are
range, standard deviation and MAD, over the values the data has (missing values are skipped).
Overrides replace any inferred field.

Values are inferred as the data has them:

* a numeric column whose observed values are whole numbers is an **integer** feature, even when
  pandas holds it as float (a CSV column with a gap, a column after a join);
* a float column gets a **precision**: the most decimals its values use, capped (as DiCE does),
  so the search proposes values on the data's own grid;
* a handful of values with many more decimals than the rest (at most 3 distinct values, and at
  most a quarter of the distinct values) are read as imputation artifacts, not as the column's
  grid: CARLA's heloc fills each gap with a class mean such as 70.2104219767771 in an otherwise
  whole-number column;
* a missing instance value stays missing unless the column is listed in ``fill_missing``.

Codes stored as numbers (0..k) stay numeric unless an override says ``kind: categorical``.

A column pandas could not type as numbers is categorical, unless all but a few of its values
(at least 95% of those present) are numbers (finite numbers, or text that reads as one) and not
all of them are text: such a column is a column of numbers with a stray value (``"lots"`` in one
row of an income column read from a CSV; numbers held as objects in a DataFrame), and searched
as categories it would move income from one value seen in the data to another. It is refused,
naming the column, how many values are not numbers and the first one; fix the data, or say
``kind: categorical`` for a column that really holds categories. A column whose every value is
the text of a number (codes kept as text, such as ``"02134"``) stays categorical, and so does one
with more text than a few strays (``"0"``, ``"1"``, ``"2"``, ``"3+"``, the last one row in ten).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from counterplan.planning.distance import FeatureStatistics
from counterplan.planning.errors import FeatureError, InvalidInputError, ProblemError, cut, echo
from counterplan.planning.features import (
    MAX_PRECISION,
    CategoricalFeature,
    FloatFeature,
    IntegerFeature,
    category_text,
    is_missing,
    parse_feature,
)
from counterplan.planning.profile import (
    FeatureSpec,
    InstanceError,
    apply_rule,
    check_spec_names,
    gap_rules,
    problem_field,
)
from counterplan.planning.space import AnyFeature
from counterplan.planning.spec import FeatureRule, ProblemSpec, name_list

MAX_INFERRED_DECIMALS = 6
"""A column whose values need more decimals than this is continuous: its grid is this fine
(finer for a column whose whole range is tiny)."""
MAX_ARTIFACTS = 3
"""At most this many distinct values with excess decimals are ignored as imputation artifacts..."""
ARTIFACT_SHARE = 0.25
"""...and only while they are at most this share of the column's distinct values."""
NUMBERS_SHARE = 0.95
"""A column pandas did not type as numbers, at least this share of whose values are numbers, is
a column of numbers with stray values: refused unless declared categorical (module docstring)."""


def infer_features(
    data: pd.DataFrame,
    instance: Mapping[str, Any],
    columns: Sequence[str],
    immutable: Iterable[str] = (),
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    fill_missing: Iterable[str] | bool = (),
    profile: DataProfile | None = None,
) -> list[AnyFeature]:
    """One feature per column, typed and bounded by the data.

    Parameters
    ----------
    data:
        Training data with at least ``columns``.
    instance:
        The row to explain, ``{column: value}``; a missing value (None, NaN) is allowed.
    columns:
        The feature columns, in model-input order.
    immutable:
        Columns the search must never change.
    overrides:
        ``{column: {field: value}}`` replacing inferred fields (``low``, ``high``,
        ``categories``, ``precision``, ``constrained``, ...). ``kind`` re-infers the column as
        that kind (``categorical`` for codes stored as numbers, ``float`` for a whole-number
        column that is really continuous); a ``precision`` on an inferred integer makes it a
        float with that precision.
    fill_missing:
        Columns whose missing instance value the search may fill (``True``: every column).
    profile:
        The facts of ``data``'s columns, kept from an earlier call (default: read them now).
    """
    profile = profile if profile is not None and profile.data is data else DataProfile(data)
    overrides = dict(overrides or {})
    frozen = set(name_list(immutable))
    fillable = set(columns) if fill_missing is True else set(name_list(fill_missing or ()))
    for name in sorted((frozen | set(overrides) | fillable) - set(columns)):
        raise ProblemError(name, f"not a feature column; columns: {list(columns)}")
    features: list[AnyFeature] = []
    for name in columns:
        if name not in data.columns:
            raise ProblemError(name, "column missing from the training data")
        if name not in instance:
            raise FeatureError(name, "the instance has no value for this feature")
        features.append(
            parse_feature(
                _fields(name, profile.facts(name), instance[name], overrides, fillable=fillable, frozen=frozen)
            )
        )
    return features


def _fields(
    name: str,
    facts: ColumnFacts,
    value: Any,
    overrides: Mapping[str, Mapping[str, Any]],
    *,
    fillable: set[str],
    frozen: set[str],
) -> dict[str, Any]:
    """One feature's fields: inferred from its column, then the overrides'."""
    override = dict(overrides.get(name, {}))
    spec = _infer_one(name, facts, value, override.pop("kind", None), "precision" in override)
    if spec.get("value") is None and name in fillable:
        spec["fill_missing"] = True
    if name in frozen:
        spec["constrained"] = True
    spec.update(override)
    return gap_rules(spec)


def infer_statistics(
    data: pd.DataFrame, features: Sequence[AnyFeature], profile: DataProfile | None = None
) -> dict[str, FeatureStatistics]:
    """Range, standard deviation and MAD of every numeric feature's column (missing values skipped)."""
    profile = profile if profile is not None and profile.data is data else DataProfile(data)
    stats: dict[str, FeatureStatistics] = {}
    for feature in features:
        if feature.kind not in ("integer", "float"):
            continue
        found = profile.statistics(feature.name)
        if found is not None:
            stats[feature.name] = found
    return stats


def infer_precision(values: npt.ArrayLike) -> int | None:
    """Decimals a column's values use: 0 for whole numbers; None when there are no values.

    The most decimals any value needs, ignoring a few imputation artifacts (see the module
    docstring), capped at :data:`MAX_INFERRED_DECIMALS` (more for a column whose range is tiny).
    """
    distinct = np.unique(np.asarray(values, dtype=np.float64))
    distinct = distinct[np.isfinite(distinct)]
    if distinct.size == 0:
        return None
    span = float(distinct[-1] - distinct[0])
    cap = MAX_INFERRED_DECIMALS
    if 0.0 < span < 1.0:
        cap = min(MAX_PRECISION, MAX_INFERRED_DECIMALS - math.floor(math.log10(span)))
    needed = decimals_needed(distinct, cap)
    excess = needed > cap
    if 0 < excess.sum() <= min(MAX_ARTIFACTS, ARTIFACT_SHARE * distinct.size):
        needed = needed[~excess]
    return int(min(needed.max(), cap))


def decimals_needed(values: npt.NDArray[np.float64], cap: int) -> npt.NDArray[np.int64]:
    """Per value: the fewest decimals that write it exactly (``cap + 1`` when more than ``cap``)."""
    needed = np.full(values.size, cap + 1, dtype=np.int64)
    for decimals in range(cap, -1, -1):
        exact = np.isclose(np.round(values, decimals), values, rtol=1e-12, atol=0.0)
        needed = np.where(exact, decimals, needed)
    return needed


def _numbers(column: pd.Series) -> npt.NDArray[np.float64]:
    values = pd.to_numeric(column, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    return np.asarray(values[np.isfinite(values)], dtype=np.float64)


def training_frame(data: pd.DataFrame) -> pd.DataFrame:
    """``data`` with its columns named as features are everywhere (a flag, a card, a request and a
    result name them by text): ``data`` itself when they are, else a copy naming column ``0``
    ``"0"``. Two columns of one name (``age`` twice after a concat, or ``0`` and ``"0"``) are
    refused naming it, where reading the one name would give both columns at once."""
    refuse_repeated_columns(data)
    names = [str(c) for c in data.columns]
    if all(isinstance(c, str) for c in data.columns):
        return data
    return data.set_axis(names, axis=1)


class ColumnFacts:
    """What inference reads off one training column, computed once.

    Building a problem for another row of the same data needs the same facts (the observed range,
    the grid, the categories); only the row's own value is new. :class:`DataProfile` keeps these
    so that an explainer made once (:class:`counterplan.solver.explainer.Explainer`) builds each row's
    problem without scanning the training data again.
    """

    def __init__(self, column: pd.Series) -> None:
        self.is_bool = bool(pd.api.types.is_bool_dtype(column)) or _object_booleans(column)
        self.declared_categorical = isinstance(column.dtype, pd.CategoricalDtype)
        """A pandas ``category`` column: categorical whatever its categories are (numbers too)."""
        kind = column.dtype.categories.dtype if isinstance(column.dtype, pd.CategoricalDtype) else column.dtype
        self.is_integer_dtype = bool(pd.api.types.is_integer_dtype(kind))
        self.numeric = bool(pd.api.types.is_numeric_dtype(kind)) and not pd.api.types.is_bool_dtype(kind)
        """Numbers (a ``category`` column's categories may be numbers too: the model takes those)."""
        observed = column.dropna()
        self.numbers = _numbers(observed) if self.numeric else np.empty(0)
        self.low = float(self.numbers.min()) if self.numbers.size else None
        self.high = float(self.numbers.max()) if self.numbers.size else None
        self.precision = infer_precision(self.numbers)
        self.whole = infer_precision(_numbers(column)) == 0 if self.numeric else False
        self.unique_numbers = np.unique(self.numbers) if self.numeric else np.empty(0)
        self.texts: frozenset[str] = frozenset() if self.numeric else frozenset(observed.astype(str).unique().tolist())
        self.strays = None if self.numeric or self.is_bool or self.declared_categorical else _strays(observed)
        """For a column of numbers pandas could not type: (values that are not numbers, values, the
        first of them); None for any other column."""


def _object_booleans(column: pd.Series) -> bool:
    """A column of objects holding only booleans and gaps (``True``, ``False``, ``None``: what a
    concat with gaps or a JSON file leaves): a boolean column, not the categories "True" and
    "False", which a model fitted on it (it read them as 1 and 0) cannot take."""
    return column.dtype == object and pd.api.types.infer_dtype(column, skipna=True) == "boolean"


def _strays(observed: pd.Series) -> tuple[int, int, object] | None:
    """The values of a column that are not numbers, when at least :data:`NUMBERS_SHARE` of its
    values are numbers and not all are text (see the module docstring); None otherwise. Values
    are read in growing blocks until too many are not numbers, so a column of text stops after a
    twentieth of its rows."""
    values = observed.to_numpy(dtype=object)
    most = (1.0 - NUMBERS_SHARE) * values.size
    number = np.zeros(values.size, dtype=bool)
    start, size, wrong = 0, 1024, 0
    while start < values.size:
        part = slice(start, start + size)
        number[part] = _are_numbers(values[part])
        wrong += int((~number[part]).sum())
        if wrong > most:
            return None
        start, size = start + size, 2 * size
    if wrong == 0 and all(isinstance(v, str) for v in values):  # codes kept as text
        return None
    strays = values[~number]
    return wrong, int(values.size), (strays[0] if strays.size else None)


def _are_numbers(values: npt.NDArray[np.object_]) -> npt.NDArray[np.bool_]:
    """Per value: a finite number, or text that reads as one (as :func:`pandas.to_numeric` reads it)."""
    text = np.fromiter((isinstance(v, str) for v in values), dtype=bool, count=values.size)
    number = np.zeros(values.size, dtype=bool)
    parsed = pd.to_numeric(pd.Series(values[text], dtype=object), errors="coerce")
    number[text] = np.isfinite(parsed.to_numpy(dtype=np.float64, na_value=np.nan))
    number[~text] = [_is_number(v) for v in values[~text]]
    return number


def _is_number(value: object) -> bool:
    """A finite real number (not a boolean)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_) and math.isfinite(value)


def repeated_name(names: Iterable[Any]) -> str | None:
    """A name ``names`` hold twice, or None. pandas allows a frame two columns of one name: read by
    name, such a column is a frame of both (a stack trace deep in the profile), and a row made a
    record keeps one of them without a word."""
    seen: set[str] = set()
    for name in names:
        text = str(name)
        if text in seen:
            return text
        seen.add(text)
    return None


def refuse_repeated_columns(data: pd.DataFrame) -> None:
    """Refuse training data with two columns of one name (``age`` twice after a concat, or ``0``
    and ``"0"``): a column read by name would be a frame of both, and no error said why."""
    repeated = repeated_name(data.columns)
    if repeated is not None:
        raise ProblemError("data", f"the training data has two columns {echo(repeated)}: give each column one name")


class DataProfile:
    """The :class:`ColumnFacts` of a training DataFrame's columns, each computed on first use."""

    def __init__(self, data: pd.DataFrame) -> None:
        refuse_repeated_columns(data)
        self.data = data
        self._facts: dict[str, ColumnFacts] = {}
        self._statistics: dict[str, FeatureStatistics | None] = {}
        self.relevance: dict[tuple[object, ...], dict[str, float]] = {}
        """Information values by columns, label column and goal (:mod:`counterplan.planning.relevance`)."""

    def facts(self, name: str) -> ColumnFacts:
        """The facts of column ``name``."""
        if name not in self._facts:
            self._facts[name] = ColumnFacts(self.data[name])
        return self._facts[name]

    @property
    def columns(self) -> list[str] | None:
        """None: the columns a model reads are its own to say (its ``feature_names_in_``)."""
        return None

    @property
    def reference(self) -> pd.DataFrame:
        """The training data itself (with its label column, when it has one)."""
        return self.data

    def features(
        self,
        instance: Mapping[str, Any],
        columns: Sequence[str],
        spec: ProblemSpec,
        *,
        check_categories: bool = True,
    ) -> list[AnyFeature]:
        """One feature per column for ``instance`` under ``spec`` (see :func:`infer_features`): the
        spec's rules replace inferred fields, its allowed and forbidden values restrict a change,
        and a category the column has never seen is refused (with ``check_categories``), naming
        the feature and listing its categories. Every bad feature is named at once."""
        check_spec_names(spec, columns)
        overrides = {name: rule.inference_fields for name, rule in spec.features.items()}
        frozen = spec.frozen_names()
        fill = spec.fill_missing
        fillable = set(columns) if fill is True else set(fill or ())
        problems: list[tuple[str, str]] = []
        features: list[AnyFeature] = []
        for name in columns:
            if name not in self.data.columns:
                raise ProblemError(name, "column missing from the training data")
            if name not in instance:
                problems.append((name, "the instance has no value for this feature"))
                continue
            facts = self.facts(name)
            rule = spec.features.get(name)
            try:
                fields = _fields(name, facts, instance[name], overrides, fillable=fillable, frozen=frozen)
                if check_categories:
                    _check_category(name, facts, fields, rule)
                features.append(parse_feature(apply_rule(fields, rule, name)))
            except ColumnKindError:  # the data's fault, whichever row is explained
                raise
            except InvalidInputError as exc:  # a rule's problem keeps its path (features.NAME.field)
                problems.append((problem_field(name, exc.field), exc.problem))
        if problems:
            raise InstanceError(problems)
        return features

    def statistics_of(self, features: Sequence[AnyFeature]) -> dict[str, FeatureStatistics]:
        """Range, standard deviation and MAD of every numeric feature's column."""
        return infer_statistics(self.data, features, self)

    def statistics(self, name: str) -> FeatureStatistics | None:
        """Range, standard deviation and MAD of a numeric column (None without values)."""
        if name not in self._statistics:
            column = _numbers(self.data[name])
            stats = None
            if column.size:
                median = float(np.median(column))
                stats = FeatureStatistics(
                    range=float(column.max() - column.min()),
                    std=float(column.std()),
                    mad=float(np.median(np.abs(column - median))),
                )
            self._statistics[name] = stats
        return self._statistics[name]


def _infer_one(name: str, facts: ColumnFacts, value: Any, kind: str | None, precision_given: bool) -> dict[str, Any]:
    value = value.item() if isinstance(value, np.generic) else value
    missing = is_missing(value)
    if not missing and isinstance(value, float) and not math.isfinite(value):
        raise FeatureError(name, f"the instance's value must be finite or missing, given {value!r}")
    if kind is None:
        _refuse_strays(name, facts)
        kind = _inferred_kind(facts, value, precision_given)
    if kind == "boolean":
        return {"kind": "boolean", "name": name, "value": None if missing else _boolean(name, value)}
    if kind == "categorical":
        return _categorical(name, facts, value)
    if kind not in ("integer", "float"):
        raise FeatureError(f"{name}.kind", f"unknown kind {kind!r}; one of integer, float, categorical, boolean")
    if not facts.numeric and not facts.is_bool and facts.texts:  # declared a number: no column of numbers
        _refuse_strays(name, facts)
        raise ColumnKindError(
            name,
            f"declared {kind}, but the training data's column holds text (such as {echo(min(facts.texts))}): "
            "a number has no domain there; declare it categorical, or fix the data",
        )
    return _numeric(name, facts, value, kind)


def _boolean(name: str, value: Any) -> bool:
    """A boolean feature's value: a boolean, or the number 1 or 0 (a flag stored as a number).
    Anything else is refused rather than read by its truth: the text ``"false"`` is true in
    Python, and would explain another row than the caller's."""
    if isinstance(value, numbers.Real) and value in (0, 1):
        return bool(value)
    raise FeatureError(name, f"boolean feature given {echo(value)}; give true or false")


class ColumnKindError(ProblemError):
    """A training column holds numbers with a few values that are not: no kind fits it until the
    data is fixed or the column is declared categorical. A fault of the data, not of the row being
    explained (never collected into an :class:`InstanceError`)."""


def _refuse_strays(name: str, facts: ColumnFacts) -> None:
    """A column of numbers with values that are not numbers is no column of categories: refused,
    saying how many values, the first, and what to do."""
    if facts.strays is None:
        return
    wrong, total, first = facts.strays
    if wrong == 0:
        found = f"holds only numbers ({total:,}), but as objects, not a numeric type"
        fix = "convert it to numbers (astype(float))"
    else:
        verb = "is" if wrong == 1 else "are"
        found = f"holds numbers, but {wrong:,} of its {total:,} values {verb} not a number (first: {echo(first)})"
        fix = "fix the data"
    raise ColumnKindError(
        name,
        f"the training data's column {found}; {fix}, or declare the column categorical if it holds "
        f"categories (kind: categorical; on the command line --categorical {cut(name, 60)})",
    )


def _inferred_kind(facts: ColumnFacts, value: Any, precision_given: bool) -> str:
    """The kind of a column no one named: boolean, a number's kind, or categorical."""
    if facts.is_bool:
        return "boolean"
    if facts.declared_categorical:
        return "categorical"
    if facts.numeric:
        return _numeric_kind(facts, value, precision_given)
    return "categorical"


def _numeric(name: str, facts: ColumnFacts, value: Any, kind: str) -> dict[str, Any]:
    """An integer or float feature: the instance's value, and the domain the data (and it) span."""
    missing = is_missing(value)
    if not missing and isinstance(value, str):
        raise FeatureError(name, f"numeric column given the text {echo(value)}")
    if not missing and (isinstance(value, bool) or not isinstance(value, numbers.Real)):
        raise FeatureError(name, f"numeric column given {type(value).__name__} {echo(value)}")
    if kind == "integer" and not missing and not float(value).is_integer():
        raise FeatureError(name, f"integer feature given a fractional value {value!r}")
    cast = int if kind == "integer" else float
    spec: dict[str, Any] = {"kind": kind, "name": name, "value": None if missing else cast(value)}
    if facts.low is not None and facts.high is not None:
        low, high = facts.low, facts.high
        if not missing:
            low, high = min(low, float(value)), max(high, float(value))
        spec["low"], spec["high"] = cast(low), cast(high)
        if kind == "float":
            spec["precision"] = facts.precision
    return spec


def _numeric_kind(facts: ColumnFacts, value: Any, precision_given: bool) -> str:
    """Integer for an integer dtype, or a float column of whole numbers; otherwise float."""
    if facts.is_integer_dtype:
        return "integer"
    if precision_given:
        return "float"
    fractional_instance = not is_missing(value) and isinstance(value, numbers.Real) and not float(value).is_integer()
    return "integer" if facts.whole and not fractional_instance else "float"


def _categorical(name: str, facts: ColumnFacts, value: Any) -> dict[str, Any]:
    """Categories as text; codes stored as numbers keep their numeric type for the model."""
    missing = is_missing(value)
    spec: dict[str, Any] = {"kind": "categorical", "name": name, "value": None if missing else category_text(value)}
    if facts.declared_categorical:
        spec["category_dtype"] = True
    if facts.numeric:
        numbers = facts.unique_numbers
        if not missing:
            numbers = np.unique(np.append(numbers, float(value)))
        spec["categories"] = [category_text(float(v)) for v in numbers]
        spec["category_type"] = "integer" if facts.is_integer_dtype else "number"
        return spec
    categories = set(facts.texts)
    if not missing:
        categories.add(spec["value"])  # as the value reads (5.0 is "5", as the check reads it)
    spec["categories"] = sorted(categories)
    return spec


def _check_category(name: str, facts: ColumnFacts, fields: Mapping[str, Any], rule: FeatureRule | None) -> None:
    """A category the column has never seen (nor the rule's own categories list) is no value of it:
    refused, naming the feature and listing its categories (a misspelt value would otherwise
    explain another row)."""
    value = fields.get("value")
    if fields.get("kind") != "categorical" or value is None:
        return
    if rule is not None and rule.categories is not None:
        known = list(rule.categories)
    elif facts.numeric:
        known = [category_text(float(v)) for v in facts.unique_numbers]
    else:
        known = sorted(facts.texts)
    if category_text(value) not in known:
        shown = ", ".join(repr(k) for k in known[:12]) + (", ..." if len(known) > 12 else "")
        raise FeatureError(name, f"{echo(category_text(value))} is not one of its categories [{shown}]")


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


def schema_of(
    data: pd.DataFrame, columns: Sequence[str], spec: ProblemSpec
) -> tuple[list[FeatureSpec], dict[str, FeatureStatistics]]:
    """A feature schema and statistics inferred from training data, under ``spec``'s rules (what
    a model's ``GetModel`` lists, and what a request's values are typed by)."""
    profile = DataProfile(data)
    fill = spec.fill_missing
    if not isinstance(fill, bool):  # a rule's fill_missing is the schema's, not the typical row's
        fill = (*fill, *(n for n, r in spec.features.items() if r.fill_missing))
    rules = {n: r.model_copy(update={"fill_missing": None}) for n, r in spec.features.items()}
    inference_spec = spec.model_copy(update={"fill_missing": (), "features": rules})
    inferred = profile.features(typical_row(data, columns), columns, inference_spec, check_categories=False)
    specs = []
    for feature in inferred:
        fields: dict[str, Any] = {"name": feature.name, "kind": feature.kind, "immutable": feature.constrained}
        fields["fill_missing"] = fill is True or (not isinstance(fill, bool) and feature.name in fill)
        fields["stored_as_float"] = feature.kind == "integer" and pd.api.types.is_float_dtype(data[feature.name])
        fields["monotone"], fields["cost"] = feature.monotone, feature.cost
        if isinstance(feature, IntegerFeature | FloatFeature) and feature.allowed is not None:
            fields["allowed"] = feature.allowed
        if isinstance(feature, IntegerFeature | FloatFeature) and feature.low is not None:
            fields["low"], fields["high"] = feature.low, feature.high
            fields["precision"] = getattr(feature, "precision", None)
        elif isinstance(feature, CategoricalFeature):
            fields["categories"], fields["category_type"] = feature.domain, feature.category_type
        specs.append(FeatureSpec(**fields))
    return specs, profile.statistics_of(inferred)
