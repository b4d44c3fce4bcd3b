"""The safe expression language of actions declared as data: what it computes, what it refuses."""

from __future__ import annotations

import numpy as np
import pytest

from counterplan.planning.expressions import MAX_LENGTH, Expression, ExpressionError, Vocabulary

WORDS = Vocabulary(
    features=("age", "education", "hours", "occupation", "capital_gain"),
    categories={"occupation": ("Sales", "Tech-support", "Armed-Forces")},
    extras=("delta", "value"),
)


def parse(text: str | float) -> Expression:
    return Expression.parse(text, WORDS, "actions[0].effort")


def test_arithmetic_functions_and_conditionals_run_on_whole_arrays() -> None:
    env = {
        "age": np.array([30.0, 40.0, 50.0]),
        "delta": np.array([1.0, -2.0, 0.0]),
        "hours": np.array([10.0, 25.0, 45.0]),
    }
    assert parse("age + 2 * delta")(env).tolist() == [32.0, 36.0, 50.0]
    assert parse("abs(delta) / 10")(env).tolist() == [0.1, 0.2, 0.0]
    tau = parse("0.5 if hours < 20 else (0.6 if hours < 30 else (0.7 if hours <= 40 else 1))")
    assert tau(env).tolist() == [0.5, 0.6, 1.0]
    # clip(-5 | 5 | 15 to 0..10) + max(delta, 0, -1) + 1
    assert parse("clip(age - 35, 0, 10) + max(delta, 0, -1) + min(1, 2)")(env).tolist() == [2.0, 6.0, 11.0]
    assert parse(3)(env).tolist() == 3.0


def test_conditions_compare_states_and_categories() -> None:
    env = {
        "occupation": np.array([0.0, 2.0]),
        "capital_gain": np.array([0.0, 5.0]),
        "before.education": np.array([13.0, 16.0]),
        "after.education": np.array([15.0, 16.0]),
    }
    assert parse('occupation != "Armed-Forces" and capital_gain < 1').holds(env).tolist() == [True, False]
    assert parse("after.education > before.education").holds(env).tolist() == [True, False]
    assert parse("0 < capital_gain < 5 or not (occupation == 'Sales')").holds(env).tolist() == [False, True]
    assert bool(parse("true").holds(env)) and not bool(parse("false").holds(env))
    names = parse("after.education - before.education + delta").names
    assert names == {"after.education", "before.education", "delta"}


def test_failing_arithmetic_is_nan_and_a_nan_condition_is_false() -> None:
    env = {"age": np.array([0.0, -1.0]), "hours": np.array([1.0, 1.0])}
    assert np.isinf(parse("hours / age")(env)[0])
    assert np.isnan(parse("log(age)")(env)[1])
    assert parse("log(age) > -100").holds(env).tolist() == [False, False]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("__import__('os').system('true')", "only these functions may be called"),
        ("age.__class__", "attribute other than before.<feature> or after.<feature>"),
        ("[age][0]", "Subscript is not allowed"),
        ("(lambda: 1)()", "only these functions may be called"),
        ("abs(x=age)", "keyword argument"),
        ("salary * 2", "unknown name 'salary'"),
        ("before.salary", "unknown name 'before.salary'"),
        ('occupation == "Astronaut"', "'occupation' may not take the category 'Astronaut'"),
        ('age == "old"', "text value may only be compared with a categorical feature"),
        ("age +", "not a formula"),
        ("age // 2", "operator FloorDiv"),
        ("age in (1, 2)", "Tuple is not allowed"),
        ("clip(age, 1)", "clip takes 3 arguments"),
        ("age if", "not a formula"),
        ("", "give a formula"),
        ("1" * 400, "too large"),
        ("age\x00", "not a formula"),
    ],
)
def test_anything_outside_the_language_is_refused_naming_the_field(text: str, fragment: str) -> None:
    with pytest.raises(ExpressionError, match=r"actions\[0\]\.effort") as info:
        parse(text)
    assert fragment in info.value.problem


def test_sizes_are_bounded_and_errors_do_not_echo_long_input() -> None:
    with pytest.raises(ExpressionError, match=f"at most {MAX_LENGTH} characters"):
        parse("age + " * 100 + "1")
    with pytest.raises(ExpressionError, match="at most 200 parts"):
        parse("+".join(["1"] * 120))
    long_name = "x" * 400
    with pytest.raises(ExpressionError) as info:
        parse(long_name)
    assert len(info.value.problem) < 150


def test_a_feature_whose_name_is_not_an_identifier_is_written_with_underscores() -> None:
    words = Vocabulary(
        features=("capital-gain", "education-num", "native country"), categories={"native country": ("US", "Other")}
    )
    formula = Expression.parse(
        'capital_gain / 10000 + before.education_num if native_country == "US" else 0', words, "f"
    )
    env = {
        "capital-gain": np.array([10000.0]),
        "before.education-num": np.array([13.0]),
        "native country": np.array([0.0]),
    }
    assert formula(env).tolist() == [14.0]
    assert formula.names == {"capital-gain", "before.education-num", "native country"}
    clash = Vocabulary(features=("a-b", "a b"), categories={})
    with pytest.raises(ExpressionError, match="unknown name 'a_b'"):
        Expression.parse("a_b", clash, "f")  # two features would be a_b: neither is guessed


@pytest.mark.parametrize(
    "text",
    [
        "education == 1",
        "1 != education",
        "education + 1",
        "abs(education)",
        "-education",
        "education",
        "1 if education else 0",
        "education and True",
        "0 < before.education < 2",
        "after.education == age",
        "education == job",  # another feature's codes
    ],
)
def test_a_category_is_compared_only_with_its_names(text: str) -> None:
    categories = {"education": ("HS", "BSc", "MSc"), "job": ("Seller", "Developer", "Boss")}
    vocabulary = Vocabulary(("education", "age", "job"), categories, ("delta",))
    with pytest.raises(ExpressionError) as info:  # before: accepted, comparing or adding the code
        Expression.parse(text, vocabulary, "actions[2].pre")
    assert info.value.field == "actions[2].pre"
    assert info.value.problem == "education is a category: compare it with one of its categories ['HS', 'BSc', 'MSc']"
    for fine in ('education == "BSc"', 'before.education != "HS" and age > 3', "before.education == after.education"):
        Expression.parse(fine, vocabulary, "actions[2].pre")


def test_a_boolean_feature_still_counts_as_0_or_1() -> None:
    vocabulary = Vocabulary(("married", "age"), {"married": ("False", "True")}, ("delta",), frozenset({"married"}))
    for fine in ("married == 1", "married + delta", 'married == "True"', "not married"):
        Expression.parse(fine, vocabulary, "actions[0].pre")
