"""The one pipeline walker, tested directly: every ColumnTransformer selector resolves to the
columns scikit-learn picks, every supported step is described so that evaluating the description
gives exactly the pipeline's output, and anything else is refused by name."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer, make_column_selector
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import (
    FunctionTransformer,
    MaxAbsScaler,
    MinMaxScaler,
    OneHotEncoder,
    OrdinalEncoder,
    PolynomialFeatures,
    RobustScaler,
    StandardScaler,
)

from counterplan.planning import CounterfactualProblem
from counterplan.planning.space import FeatureSpace, FloatMatrix
from counterplan.planning.structure.columns import (
    MISSING,
    CategoryColumn,
    EstimatorColumn,
    Layer,
    LookupColumn,
    NumberColumn,
    run_layer,
)
from counterplan.planning.structure.errors import NotEncodableError
from counterplan.planning.structure.pipeline import STEPS, describe, describe_model, entry_columns
from counterplan.planning.structure.selection import select

pytestmark = pytest.mark.unit

NAMES = ["a", "b", "c", "d", "city", "flag"]


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    n = 240
    out = pd.DataFrame(
        {
            "a": rng.integers(0, 50, n),
            "b": np.round(rng.normal(10.0, 3.0, n), 2),
            "c": np.round(rng.uniform(-5.0, 5.0, n), 1),
            "d": rng.integers(1, 9, n),
            "city": rng.choice(["north", "south", "east"], n),
            "flag": rng.random(n) < 0.5,
        }
    )
    out["y"] = ((out.a > 25) ^ (out.city == "north")).astype(int)
    return out


def _evaluate(columns: tuple[EstimatorColumn, ...], space: FeatureSpace, X: FloatMatrix) -> FloatMatrix:
    """A slow reference evaluation of a description: per column, per row."""
    out = np.empty((X.shape[0], len(columns)))
    for c, column in enumerate(columns):
        codes = X[:, column.source]
        if isinstance(column, NumberColumn):
            values = np.where(
                space.missing[column.source] & (codes == space.missing_code[column.source]), np.nan, codes
            )
            for layer in column.layers:
                values = run_layer(values, layer.ops, layer.constants())
        else:
            values = np.asarray(column.folded())[np.rint(codes).astype(int) + 1]
        out[:, c] = values
    return out


def _check_exact(model: Pipeline, frame: pd.DataFrame) -> tuple[EstimatorColumn, ...]:
    """The description of ``model``'s preprocessing evaluates to exactly what the pipeline gives."""
    model.fit(frame[NAMES], frame["y"])
    problem = CounterfactualProblem.from_dataframe(frame, 0, model, target="y")
    space = problem.space
    described = describe_model(model, space, decoded=True)
    rng = np.random.default_rng(0)
    X = np.tile(space.original, (50, 1))
    for j in range(space.n_features):
        X[:, j] = rng.integers(int(space.domain_lower[j]), int(space.domain_upper[j]) + 1, 50)
    real = model[:-1].transform(space.to_frame(X))
    real = real.toarray() if hasattr(real, "toarray") else np.asarray(real, dtype=np.float64)
    np.testing.assert_array_equal(_evaluate(described.columns, space, X), real)
    return described.columns


def _logistic(encode: Any) -> Pipeline:
    return Pipeline([("encode", encode), ("model", LogisticRegression(max_iter=500))])


def _sources(columns: tuple[EstimatorColumn, ...]) -> list[int]:
    return [column.source for column in columns]


# ---------------------------------------------------------------------------------------------
# selectors


@pytest.mark.parametrize(
    ("selection", "expected"),
    [
        (["a", "c"], [0, 2]),
        ("b", [1]),
        (2, [2]),
        (np.int64(3), [3]),
        (np.int32(-1), [5]),
        ([0, np.int32(2)], [0, 2]),
        (np.array([4, 1]), [4, 1]),
        (np.array(["city", "a"]), [4, 0]),
        ([True, False, True, False, False, True], [0, 2, 5]),
        (np.array([False, True, False, False, False, False]), [1]),
        (slice("b", "d"), [1, 2, 3]),
        (slice("c", None), [2, 3, 4, 5]),
        (slice(None, "b"), [0, 1]),
        (slice(1, 3), [1, 2]),
        (slice(None), [0, 1, 2, 3, 4, 5]),
        (slice(None, None, 2), [0, 2, 4]),
        ([], []),
    ],
    ids=repr,
)
def test_every_selector_kind_resolves_to_its_positions(selection: Any, expected: list[int]) -> None:
    assert select(selection, NAMES, len(NAMES), "transformer 't'") == expected


def test_a_label_slice_includes_its_end_as_pandas_loc_does() -> None:
    frame = pd.DataFrame(np.zeros((1, len(NAMES))), columns=NAMES)
    assert select(slice("b", "d"), NAMES, 6, "t") == [NAMES.index(c) for c in frame.loc[:, "b":"d"].columns]


def test_callables_and_column_selectors_use_what_they_picked_when_fitted() -> None:
    picked = make_column_selector(dtype_include=object)
    assert select(picked, NAMES, 6, "t", fitted=[4]) == [4]
    assert select(lambda X: ["a"], NAMES, 6, "t", fitted=[0]) == [0]
    with pytest.raises(NotEncodableError, match="transformer 'f': a column selector that is a function"):
        select(lambda X: ["a"], NAMES, 6, "transformer 'f'")


@pytest.mark.parametrize(
    ("selection", "message"),
    [
        (["zz"], "unknown column 'zz'"),
        (7, "column 7 of 6 columns"),
        ([True, False], "a mask of 2 columns for 6 columns"),
        (slice("a", 3), "a slice mixing names and positions"),
        (slice("a", "c", 2), "a slice of names with a step"),
        ([1.5], "neither a name nor a position"),
        (object(), "is not understood"),
    ],
    ids=["unknown name", "out of range", "short mask", "mixed slice", "stepped label slice", "float", "object"],
)
def test_a_bad_selector_is_refused_naming_the_transformer(selection: Any, message: str) -> None:
    with pytest.raises(NotEncodableError, match=f"transformer 'bad'.*{message}"):
        select(selection, NAMES, 6, "transformer 'bad'")


def test_a_label_slice_without_column_names_is_refused() -> None:
    with pytest.raises(NotEncodableError, match="unknown column 'a'"):
        select(slice("a", "c"), [], 6, "t")


# ---------------------------------------------------------------------------------------------
# the walk


def test_a_label_slice_numpy_int_and_mask_in_one_column_transformer(frame: pd.DataFrame) -> None:
    encode = ColumnTransformer(
        [
            ("range", StandardScaler(), slice("a", "c")),
            ("one", MinMaxScaler(), [np.int64(3)]),
            ("mask", "passthrough", [False, False, False, False, False, True]),
            ("cats", OneHotEncoder(sparse_output=False), ["city"]),
        ]
    )
    columns = _check_exact(_logistic(encode), frame)
    assert _sources(columns) == [0, 1, 2, 3, 5, 4, 4, 4]
    scaled = columns[0]
    assert isinstance(scaled, NumberColumn) and scaled.layers[0].ops == frozenset({"sub", "div"})


def test_callables_and_make_column_selector(frame: pd.DataFrame) -> None:
    encode = ColumnTransformer(
        [
            ("text", OneHotEncoder(sparse_output=False), make_column_selector(dtype_include=object)),
            ("picked", RobustScaler(), lambda X: ["b", "d"]),
        ]
    )
    columns = _check_exact(_logistic(encode), frame)
    assert _sources(columns) == [4, 4, 4, 1, 3]


@pytest.mark.parametrize(
    ("remainder", "expected"),
    [
        ("drop", [4, 4, 4]),
        ("passthrough", [4, 4, 4, 0, 1, 2, 3, 5]),
        (StandardScaler(), [4, 4, 4, 0, 1, 2, 3, 5]),
    ],
    ids=["drop", "passthrough", "a transformer"],
)
def test_the_remainder(remainder: Any, expected: list[int], frame: pd.DataFrame) -> None:
    encode = ColumnTransformer([("cats", OneHotEncoder(sparse_output=False), ["city"])], remainder=remainder)
    columns = _check_exact(_logistic(encode), frame)
    assert _sources(columns) == expected
    if not isinstance(remainder, str):
        assert all(isinstance(c, NumberColumn) and c.layers for c in columns[3:])


def test_nested_pipelines_imputers_and_every_scaler(frame: pd.DataFrame) -> None:
    encode = ColumnTransformer(
        [
            (
                "cats",
                Pipeline([("fill", SimpleImputer(strategy="most_frequent")), ("code", OrdinalEncoder())]),
                ["city"],
            ),
            ("a", Pipeline([("fill", SimpleImputer()), ("scale", MaxAbsScaler(clip=True))]), ["a"]),
            ("b", Pipeline([("clip", MinMaxScaler(clip=True)), ("centre", StandardScaler(with_std=False))]), ["b"]),
            ("rest", FunctionTransformer(), ["c", "d"]),
            ("flag", OneHotEncoder(drop="if_binary", sparse_output=False), ["flag"]),
        ]
    )
    columns = _check_exact(_logistic(encode), frame)
    code, a, b = columns[0], columns[1], columns[2]
    assert isinstance(code, LookupColumn) and code.read == "code"
    assert isinstance(a, NumberColumn) and [layer.ops for layer in a.layers] == [
        frozenset({"fill"}),
        frozenset({"div", "clip"}),
    ]
    assert isinstance(b, NumberColumn) and len(b.layers) == 2
    flag = columns[-1]
    assert isinstance(flag, LookupColumn) and flag.read == "indicator" and flag.source == 5


def test_a_pipeline_of_steps_without_a_column_transformer(frame: pd.DataFrame) -> None:
    numbers = ["a", "b", "c", "d"]
    model = Pipeline([("fill", SimpleImputer()), ("scale", StandardScaler()), ("model", LogisticRegression())])
    model.fit(frame[numbers], frame["y"])
    space = CounterfactualProblem.from_dataframe(frame[[*numbers, "y"]], 0, model, target="y").space
    columns = describe_model(model, space, decoded=True).columns
    assert _sources(columns) == [0, 1, 2, 3]
    assert all(isinstance(c, NumberColumn) and len(c.layers) == 2 for c in columns)


@pytest.mark.parametrize(
    ("step", "message"),
    [
        (
            PolynomialFeatures(),
            r"pipeline step 'encode' transformer 'nums' step 'odd': PolynomialFeatures is not supported",
        ),
        (FunctionTransformer(np.log1p), r"transformer 'nums' step 'odd': a FunctionTransformer with a function"),
        (SimpleImputer(add_indicator=True), r"step 'odd': a SimpleImputer with indicators"),
    ],
    ids=["unknown step", "a function", "imputer indicators"],
)
def test_an_unknown_step_is_refused_by_name(step: Any, message: str, frame: pd.DataFrame) -> None:
    encode = ColumnTransformer([("nums", Pipeline([("odd", step), ("s", StandardScaler())]), ["a", "b"])])
    model = _logistic(encode).fit(frame[NAMES], frame["y"])
    space = CounterfactualProblem.from_dataframe(frame, 0, model, target="y").space
    with pytest.raises(NotEncodableError, match=message):
        describe_model(model, space, decoded=True)


def test_transformer_weights_and_text_without_an_encoder_are_refused(frame: pd.DataFrame) -> None:
    weighted = ColumnTransformer([("nums", StandardScaler(), ["a"])], transformer_weights={"nums": 2.0})
    model = _logistic(weighted).fit(frame[NAMES], frame["y"])
    space = CounterfactualProblem.from_dataframe(frame, 0, model, target="y").space
    with pytest.raises(NotEncodableError, match="pipeline step 'encode': transformer weights"):
        describe_model(model, space, decoded=True)
    entry = entry_columns(space, decoded=True)
    with pytest.raises(NotEncodableError, match="LogisticRegression reads feature 'city' of text categories"):
        describe(LogisticRegression(), entry, space.names)


def test_an_encoder_that_raises_on_a_category_says_where(frame: pd.DataFrame) -> None:
    known = frame[frame["city"] != "east"]
    model = _logistic(ColumnTransformer([("cats", OneHotEncoder(handle_unknown="error"), ["city"])]))
    model.fit(known[NAMES], known["y"])
    space = CounterfactualProblem.from_dataframe(frame, 0, model, target="y").space
    described = describe_model(model, space, decoded=True)
    city = space.index["city"]
    east = space.features[city].model_values().index("east") + 1
    assert described.raises == ((city, east),)
    assert all(isinstance(c, LookupColumn) and east in c.errors for c in described.columns)


def test_a_model_fitted_on_other_columns_is_refused(frame: pd.DataFrame) -> None:
    model = _logistic(ColumnTransformer([("nums", StandardScaler(), ["a"])])).fit(frame[NAMES], frame["y"])
    space = CounterfactualProblem.from_dataframe(frame, 0, model, target="y").space
    reversed_model = _logistic(ColumnTransformer([("nums", StandardScaler(), ["a"])]))
    reversed_model.fit(frame[NAMES[::-1]], frame["y"])
    with pytest.raises(NotEncodableError, match="fitted on columns"):
        describe_model(reversed_model, space, decoded=True)


def test_entry_columns_decoded_and_as_codes(frame: pd.DataFrame) -> None:
    model = _logistic(ColumnTransformer([("nums", StandardScaler(), ["a"])])).fit(frame[NAMES], frame["y"])
    space = CounterfactualProblem.from_dataframe(frame, 0, model, target="y").space
    decoded = entry_columns(space, decoded=True)
    city = space.index["city"]
    assert decoded[city] == CategoryColumn(city, (MISSING, *space.features[city].model_values()))
    assert decoded[space.index["flag"]] == NumberColumn(space.index["flag"], boolean=True)
    codes = entry_columns(space, decoded=False)  # the array a model fitted on one gets (FeatureSpace.to_array)
    assert codes[city] == CategoryColumn(city, (MISSING, 0.0, 1.0, 2.0))  # a text category as its code, a gap NaN
    assert codes[space.index["flag"]] == NumberColumn(space.index["flag"], boolean=True)  # 0 or 1, a gap NaN
    assert codes[0] == NumberColumn(0)


def test_a_layer_as_affine_maps_in_scikit_learns_order() -> None:
    standard = Layer(frozenset({"sub", "div"}), sub=2.0, div=4.0, where="s")
    assert standard.affine() == ((0.25, -0.5),)
    minmax = Layer(frozenset({"mul", "add"}), mul=3.0, add=1.0)
    assert minmax.affine() == ((3.0, 1.0),)
    assert Layer(frozenset({"fill"}), fill=1.0).affine() == ()
    with pytest.raises(NotEncodableError, match=r"step 'x': MinMaxScaler\(clip=True\) is not affine"):
        Layer(frozenset({"mul", "add", "clip"}), where="step 'x': MinMaxScaler").affine()


def test_every_supported_step_is_listed() -> None:
    assert set(STEPS) == {
        "Pipeline",
        "ColumnTransformer",
        "FunctionTransformer",
        "StandardScaler",
        "RobustScaler",
        "MinMaxScaler",
        "MaxAbsScaler",
        "OneHotEncoder",
        "OrdinalEncoder",
        "SimpleImputer",
    }


def test_a_fitted_layout_the_walker_does_not_know_is_refused_not_raised(frame: pd.DataFrame) -> None:
    model = _logistic(ColumnTransformer([("nums", StandardScaler(), ["a", "b"])])).fit(frame[NAMES], frame["y"])
    space = CounterfactualProblem.from_dataframe(frame, 0, model, target="y").space
    del model[0].named_transformers_["nums"].mean_  # a layout of another scikit-learn version, say
    with pytest.raises(NotEncodableError, match="transformer 'nums': StandardScaler is not understood"):
        describe_model(model, space, decoded=True)
