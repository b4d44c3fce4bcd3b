from __future__ import annotations

import math

import pytest

from counterplan.planning import (
    BooleanFeature,
    CategoricalFeature,
    FeatureError,
    FeatureSpace,
    FloatFeature,
    IntegerFeature,
    parse_feature,
)


def test_each_kind_holds_its_domain() -> None:
    age = IntegerFeature(name="age", value=30, low=18, high=90)
    income = FloatFeature(name="income", value=1.5, low=0.0, high=10.0)
    color = CategoricalFeature(name="color", value="red", categories=("red", "blue"))
    flag = BooleanFeature(name="flag", value=True)
    assert age.bounds == (18.0, 90.0) and age.mutable
    assert income.bounds == (0.0, 10.0)
    assert color.bounds == (0.0, 1.0) and color.encode("blue") == 1.0
    assert flag.bounds == (0.0, 1.0) and flag.encode(True) == 1.0


@pytest.mark.parametrize(
    "feature",
    [
        IntegerFeature(name="a", value=3),
        FloatFeature(name="b", value=2.5),
        CategoricalFeature(name="c", value="x"),
    ],
)
def test_a_feature_without_domain_is_constrained(
    feature: IntegerFeature | FloatFeature | CategoricalFeature,
) -> None:
    assert feature.constrained
    assert not feature.mutable
    low, high = feature.bounds
    assert low == high


def test_boolean_is_mutable_unless_constrained() -> None:
    assert BooleanFeature(name="b", value=False).mutable
    assert not BooleanFeature(name="b", value=False, constrained=True).mutable


def test_numpy_booleans_are_booleans() -> None:
    """A pandas column of booleans yields numpy's (``np.True_`` from a nullable ``boolean``
    column, as a batch's records read back hold); numpy 2 names their type ``bool``."""
    import numpy as np

    from counterplan.planning.features import category_text

    flag = BooleanFeature(name="flag", value=False)
    assert flag.encode(np.True_) == 1.0 and flag.encode(np.False_) == 0.0
    assert category_text(np.True_) == "True" and category_text(np.False_) == "False"  # not "1" / "0"


def test_nan_or_none_is_a_missing_value_that_stays_missing_by_default() -> None:
    for value in (math.nan, None):
        feature = FloatFeature(name="income", value=value, low=0.0, high=1.0)
        assert feature.missing and feature.value is None
        assert not feature.mutable  # stays missing unless asked
        assert feature.bounds == (feature.missing_code, feature.missing_code)
    fillable = FloatFeature(name="income", value=math.nan, low=0.0, high=1.0, fill_missing=True)
    assert fillable.mutable
    assert fillable.bounds == (0.0, 1.0)
    assert fillable.missing_code < 0.0  # outside the domain: never a real value
    assert fillable.decode(fillable.encode(None)) is None
    assert fillable.decode(0.5) == 0.5
    with pytest.raises(FeatureError, match="given a missing value"):
        FloatFeature(name="income", value=0.5, low=0.0, high=1.0).encode(math.nan)
    with pytest.raises(FeatureError, match="no direction"):
        FloatFeature(name="income", value=None, low=0.0, high=1.0, fill_missing=True, monotone="increase")


def test_float_precision_decodes_on_its_grid_and_keeps_the_original() -> None:
    feature = FloatFeature(name="ratio", value=0.123456, low=0.0, high=1.0, precision=2)
    assert feature.step == pytest.approx(0.01)
    assert feature.decode(0.5) == 0.5
    assert feature.decode(0.123456) == 0.123456  # the original, off the grid, is kept as it is
    with pytest.raises(FeatureError):
        FloatFeature(name="ratio", value=0.5, low=0.0, high=1.0, precision=13)


def test_categories_stored_as_numbers_reach_the_model_as_numbers() -> None:
    feature = CategoricalFeature(name="grade", value=2, categories=("1", "2", "3"), category_type="integer")
    assert feature.value == "2"
    assert feature.model_values() == (1, 2, 3)
    assert feature.encode(3) == 2.0
    with pytest.raises(FeatureError, match="not a number"):
        CategoricalFeature(name="grade", value="a", categories=("a", "b"), category_type="integer")


@pytest.mark.parametrize(
    ("build", "fragment"),
    [
        (lambda: IntegerFeature(name="age", value=100, low=18, high=90), "outside its domain"),
        (lambda: FloatFeature(name="income", value=-1.0, low=0.0, high=5.0), "outside its domain"),
        (lambda: FloatFeature(name="income", value=1.0, low=5.0, high=0.0), "inverted domain"),
        (lambda: IntegerFeature(name="age", value=1, low=1), "high is missing"),
        (lambda: FloatFeature(name="income", value=math.inf, low=0.0, high=1.0), "finite"),
        (lambda: FloatFeature(name="income", value=1.0, low=0.0, high=math.inf), "finite"),
        (lambda: IntegerFeature(name="age", value=30.5, low=18, high=90), "fractional"),
        (lambda: IntegerFeature(name="age", value=30, low=18, high=90, allowed=(20, 30.5)), "[30.5] are not whole"),
        (lambda: CategoricalFeature(name="color", value="red", categories=()), "empty domain"),
        (lambda: CategoricalFeature(name="color", value="pink", categories=("red",)), "not one of"),
        (lambda: CategoricalFeature(name="color", value="red", categories=("red", "red")), "twice"),
    ],
)
def test_bad_features_raise_feature_error_naming_the_feature(build: object, fragment: str) -> None:
    with pytest.raises(FeatureError) as info:
        build()  # type: ignore[operator]
    assert isinstance(info.value, ValueError)
    name = info.value.field.split(".")[0]
    assert name in {"age", "income", "color"}
    assert name in str(info.value)
    assert fragment in str(info.value)


def test_duplicate_names_are_rejected() -> None:
    with pytest.raises(FeatureError, match="duplicate feature name") as info:
        FeatureSpace([FloatFeature(name="x", value=1.0), IntegerFeature(name="x", value=1)])
    assert info.value.field == "x"


def test_encoding_rejects_values_of_the_wrong_kind() -> None:
    space = FeatureSpace(
        [
            IntegerFeature(name="n", value=1, low=0, high=5),
            CategoricalFeature(name="c", value="a", categories=("a", "b")),
            BooleanFeature(name="b", value=False),
        ]
    )
    with pytest.raises(FeatureError, match="fractional"):
        space.encode({"n": 1.5, "c": "a", "b": False})
    with pytest.raises(FeatureError, match="not one of"):
        space.encode({"n": 1, "c": "z", "b": False})
    with pytest.raises(FeatureError, match="boolean"):
        space.encode({"n": 1, "c": "a", "b": "yes"})
    with pytest.raises(FeatureError, match="missing"):
        space.encode({"n": 1, "c": "a"})
    with pytest.raises(FeatureError, match="unknown feature"):
        space.encode({"n": 1, "c": "a", "b": True, "extra": 2})
    with pytest.raises(FeatureError, match="finite"):
        space.encode({"n": math.nan, "c": "a", "b": True})


def test_parse_feature_builds_by_kind_and_names_bad_fields() -> None:
    feature = parse_feature({"kind": "float", "name": "x", "value": 1.0, "low": 0.0, "high": 2.0})
    assert isinstance(feature, FloatFeature)
    with pytest.raises(FeatureError) as info:
        parse_feature({"kind": "integer", "name": "n", "value": "lots", "low": 0, "high": 2})
    assert info.value.field.startswith("n")
    with pytest.raises(FeatureError):
        parse_feature({"kind": "complex", "name": "z", "value": 1})


def test_what_counts_as_missing() -> None:
    import numpy as np
    import pandas as pd

    from counterplan.planning.features import is_missing

    assert all(is_missing(v) for v in (None, math.nan, np.float64("nan"), pd.NA, pd.NaT, np.float32("nan")))
    assert not any(is_missing(v) for v in (0, 0.0, "", "nan", np.str_("a"), np.int64(3), np.bool_(False), False))
