"""The fast path of model calls: compiled preprocessing and forests give the real pipeline's answers."""

from __future__ import annotations

import dataclasses
import pickle
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import (
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    HistGradientBoostingClassifier,
    HistGradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
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
from sklearn.tree import DecisionTreeClassifier
from threadpoolctl import threadpool_limits

import counterplan.planning.fast_path.cache
import counterplan.planning.fast_path.probe
from counterplan.planning import (
    ClassGoal,
    CounterfactualProblem,
    ModelAdapterError,
    RangeGoal,
    ScoreCalculator,
    SklearnClassifierAdapter,
    SklearnRegressorAdapter,
)
from counterplan.planning.fast_path import quickscorer
from counterplan.planning.fast_path.cache import space_signature
from counterplan.planning.fast_path.inputs import compile_inputs
from counterplan.planning.fast_path.probe import probe_rows
from counterplan.planning.fast_path.quickscorer import SMALL_MASK_CELLS
from counterplan.planning.fast_path.trees import BaggedTrees, compile_trees
from counterplan.planning.space import FeatureSpace, FloatMatrix

FEATURES = ["age", "income", "debt", "city", "grade", "member"]
NUMBERS = ["age", "income", "debt"]
OVERRIDES = {"grade": {"kind": "categorical"}}  # codes 1..3 stored as numbers, marked categorical


@pytest.fixture(autouse=True, scope="module")
def _one_thread() -> Iterator[None]:
    """Fits and calls on one native thread: OpenMP threads fighting a busy core cost far more."""
    with threadpool_limits(1):
        yield


@pytest.fixture(scope="module")
def data() -> pd.DataFrame:
    """Integers, floats, text and number-coded categories, a boolean; three targets."""
    rng = np.random.default_rng(0)
    n = 400
    frame = pd.DataFrame(
        {
            "age": rng.integers(18, 80, n),
            "income": np.round(rng.normal(50_000, 15_000, n), 2),
            "debt": np.round(rng.uniform(0, 20_000, n), 2),
            "city": rng.choice(["north", "south", "east", "west"], n),
            "grade": rng.choice([1, 2, 3], n),
            "member": rng.random(n) < 0.4,
        }
    )
    score = (
        (frame.age - 40) / 10
        + (frame.income - 50_000) / 15_000
        - frame.debt / 10_000
        + (frame.city == "north")
        + frame.member
        + 0.3 * frame.grade
    )
    frame["approved"] = (score + rng.normal(0, 0.5, n) > 0.5).astype(int)
    frame["tier"] = np.digitize(score, [0.0, 1.0])
    frame["amount"] = score * 1000 + rng.normal(0, 100, n)
    return frame


@pytest.fixture(scope="module")
def gappy(data: pd.DataFrame) -> pd.DataFrame:
    """``data`` with income missing in one row of six (the first row too)."""
    frame = data.copy()
    frame.loc[frame.index % 6 == 0, "income"] = np.nan
    return frame


def candidates(space: FeatureSpace, n: int = 300, seed: int = 0) -> FloatMatrix:
    """Random candidates over the whole domain of every column, missing where the space allows."""
    rng = np.random.default_rng(seed)
    X = np.empty((n, space.n_features))
    for j in range(space.n_features):
        low, high = space.domain_lower[j], space.domain_upper[j]
        if space.integral[j]:
            X[:, j] = rng.integers(int(low), int(high) + 1, n)
        else:
            X[:, j] = rng.uniform(low, high, n)
        if space.missing[j]:
            X[rng.random(n) < 0.3, j] = space.missing_code[j]
    X[0] = space.original
    return X


def problem_for(data: pd.DataFrame, model: Any, row: int = 1, **kwargs: Any) -> CounterfactualProblem:
    kwargs.setdefault("target", "approved")
    kwargs.setdefault("columns", FEATURES)
    kwargs.setdefault("overrides", OVERRIDES)
    goals = kwargs.pop("goals", [ClassGoal(target=1)])
    return CounterfactualProblem.from_dataframe(data, row, model, goals, **kwargs)


def assert_fast_equals_real(problem: CounterfactualProblem, exact: bool = False) -> None:
    """The fast path is used, its inputs are the pipeline's, and its predictions the pipeline's."""
    adapter = problem.model
    assert isinstance(adapter, SklearnClassifierAdapter | SklearnRegressorAdapter)
    space = problem.space
    assert adapter.fast_path(space) is not None, "the model should compile"
    X = candidates(space)
    fast, real = adapter.predict(X, space), adapter.predict_reference(X, space)
    for name, expected in real.items():
        if exact:
            np.testing.assert_array_equal(fast[name], expected)
        else:
            np.testing.assert_allclose(fast[name], expected, rtol=0, atol=1e-12)


def assert_inputs_exact(problem: CounterfactualProblem, model: Pipeline) -> None:
    """The compiled preprocessing gives exactly the matrix the estimator gets."""
    inputs = compile_inputs(model, problem.space)
    assert inputs is not None
    X = candidates(problem.space)
    real = model[:-1].transform(problem.space.to_frame(X))
    real = real.toarray() if hasattr(real, "toarray") else np.asarray(real, dtype=np.float64)
    np.testing.assert_array_equal(inputs.transform(X, problem.space.missing_code), real)


def onehot(**kwargs: Any) -> OneHotEncoder:
    kwargs.setdefault("sparse_output", False)
    return OneHotEncoder(**kwargs)


def logistic(encode: Any) -> Pipeline:
    return Pipeline([("encode", encode), ("classify", LogisticRegression(max_iter=2000))])


PREPROCESSING: dict[str, Callable[[], Any]] = {
    "standard scaler, dense one-hot": lambda: ColumnTransformer(
        [("cats", onehot(), ["city", "grade", "member"]), ("nums", StandardScaler(), NUMBERS)]
    ),
    "min-max scaler, sparse one-hot, sparse output": lambda: ColumnTransformer(
        [("cats", OneHotEncoder(), ["city", "grade"]), ("nums", MinMaxScaler(), NUMBERS)], sparse_threshold=1.0
    ),
    "robust scaler, one-hot dropping the first": lambda: ColumnTransformer(
        [("cats", onehot(drop="first"), ["city", "grade"]), ("nums", RobustScaler(), NUMBERS)]
    ),
    "max-abs scaler with clip, one-hot dropping binaries": lambda: ColumnTransformer(
        [("cats", onehot(drop="if_binary"), ["city", "member"]), ("nums", MaxAbsScaler(clip=True), NUMBERS)]
    ),
    "min-max scaler with clip, then a standard scaler": lambda: ColumnTransformer(
        [
            ("cats", onehot(), ["city"]),
            ("nums", Pipeline([("a", MinMaxScaler(clip=True)), ("b", StandardScaler(with_mean=False))]), NUMBERS),
        ]
    ),
    "a category the encoder does not know, ignored": lambda: ColumnTransformer(
        [("cats", onehot(categories=[["north", "south", "east"]], handle_unknown="ignore"), ["city"])],
        remainder=StandardScaler(),
    ),
    "infrequent_if_exist without infrequent categories": lambda: ColumnTransformer(
        [("cats", onehot(handle_unknown="infrequent_if_exist"), ["city"]), ("nums", StandardScaler(), NUMBERS)]
    ),
    "passthrough, drop and a pass-through remainder": lambda: ColumnTransformer(
        [("cats", onehot(), ["city"]), ("skip", "drop", ["debt", "income"]), ("keep", "passthrough", ["age"])],
        remainder="passthrough",
    ),
    "nested pipelines with imputers": lambda: ColumnTransformer(
        [
            ("cats", Pipeline([("fill", SimpleImputer(strategy="most_frequent")), ("code", onehot())]), ["city"]),
            ("nums", Pipeline([("fill", SimpleImputer()), ("scale", StandardScaler())]), NUMBERS),
        ]
    ),
    "columns by position, slice and mask": lambda: ColumnTransformer(
        [
            ("cats", onehot(), [3]),
            ("nums", StandardScaler(), slice(0, 3)),
            ("flag", "passthrough", [False, False, False, False, False, True]),
        ]
    ),
    "ordinal encoder, identity function, scaled codes": lambda: ColumnTransformer(
        [
            ("codes", Pipeline([("code", OrdinalEncoder()), ("scale", StandardScaler())]), ["city", "grade"]),
            ("nums", FunctionTransformer(), NUMBERS),
        ]
    ),
}


@pytest.mark.parametrize("name", list(PREPROCESSING))
def test_every_supported_step_gives_the_pipelines_predictions(name: str, data: pd.DataFrame) -> None:
    model = logistic(PREPROCESSING[name]()).fit(data[FEATURES], data["approved"])
    problem = problem_for(data, model)
    assert_inputs_exact(problem, model)
    assert_fast_equals_real(problem)


def test_a_pipeline_fitted_on_arrays_gets_the_encoded_matrix(data: pd.DataFrame) -> None:
    numbers = data[NUMBERS]
    model = Pipeline([("scale", StandardScaler()), ("classify", LogisticRegression())])
    model.fit(numbers.to_numpy(), data["approved"])
    problem = CounterfactualProblem.from_dataframe(numbers, 3, model, [ClassGoal(target=1)])
    assert problem.model.input_kind == "array"  # type: ignore[attr-defined]
    assert_fast_equals_real(problem)


def hgb_pipeline(estimator: Any) -> Pipeline:
    encode = ColumnTransformer(
        [("cats", onehot(handle_unknown="ignore"), ["city", "grade", "member"]), ("nums", "passthrough", NUMBERS)]
    )
    return Pipeline([("encode", encode), ("model", estimator)])


def test_boosted_trees_with_missing_values_are_bit_identical(gappy: pd.DataFrame) -> None:
    model = hgb_pipeline(HistGradientBoostingClassifier(max_iter=25, random_state=0))
    model.fit(gappy[FEATURES], gappy["approved"])
    assert np.isnan(gappy["income"].iloc[0])
    filled = problem_for(gappy, model, row=0, fill_missing=["income"])  # candidates: missing or a number
    assert filled.space.missing.any()
    assert_fast_equals_real(filled, exact=True)
    assert_fast_equals_real(problem_for(gappy, model, row=1), exact=True)


def test_multiclass_boosted_trees_are_bit_identical(data: pd.DataFrame) -> None:
    model = hgb_pipeline(HistGradientBoostingClassifier(max_iter=10, random_state=0))
    model.fit(data[FEATURES], data["tier"])
    assert_fast_equals_real(problem_for(data, model, target="tier", goals=[ClassGoal(target=2)]), exact=True)


def test_boosted_regression_trees_are_bit_identical(gappy: pd.DataFrame) -> None:
    model = hgb_pipeline(HistGradientBoostingRegressor(max_iter=20, random_state=0))
    model.fit(gappy[FEATURES], gappy["amount"])
    goals = [RangeGoal(low=0.0, high=500.0)]
    problem = problem_for(gappy, model, row=0, target="amount", goals=goals, fill_missing=True)
    assert isinstance(problem.model, SklearnRegressorAdapter)
    assert_fast_equals_real(problem, exact=True)


def test_classic_gradient_boosting_is_bit_identical(loan_problem: CounterfactualProblem, data: pd.DataFrame) -> None:
    assert_fast_equals_real(loan_problem, exact=True)
    three = hgb_pipeline(GradientBoostingClassifier(n_estimators=10, random_state=0))
    three.fit(data[FEATURES], data["tier"])
    assert_fast_equals_real(problem_for(data, three, target="tier", goals=[ClassGoal(target=2)]), exact=True)
    regressor = hgb_pipeline(GradientBoostingRegressor(n_estimators=10, random_state=0))
    regressor.fit(data[FEATURES], data["amount"])
    goals = [RangeGoal(low=0.0, high=500.0)]
    assert_fast_equals_real(problem_for(data, regressor, target="amount", goals=goals), exact=True)


def test_a_pandas_output_pipeline_still_uses_the_forest(data: pd.DataFrame) -> None:
    model = hgb_pipeline(HistGradientBoostingClassifier(max_iter=10, random_state=0))
    model[0].set_output(transform="pandas")
    model.fit(data[FEATURES], data["approved"])
    problem = problem_for(data, model)
    path = problem.model.fast_path(problem.space)  # type: ignore[attr-defined]
    assert path is not None and path.trees is not None
    assert_fast_equals_real(problem, exact=True)


def test_the_forest_alone_matches_the_estimator_on_arrays_with_nan() -> None:
    rng = np.random.default_rng(1)
    X = rng.normal(size=(600, 4))
    X[rng.random(X.shape) < 0.1] = np.nan
    y = (np.nan_to_num(X[:, 0]) * np.nan_to_num(X[:, 1]) + rng.normal(0, 0.3, 600) > 0).astype(int)
    estimator = HistGradientBoostingClassifier(max_iter=5, max_leaf_nodes=40, min_samples_leaf=2, random_state=0)
    estimator.fit(X, y)
    trees = compile_trees(estimator)
    assert trees is not None and trees.word_bits == 64  # more than 32 leaves: 64-bit masks
    np.testing.assert_array_equal(trees.predict(X), estimator.predict_proba(X))


@pytest.mark.parametrize("classes", [2, 3])
@pytest.mark.parametrize("small_cells", [0, SMALL_MASK_CELLS], ids=["reference rows", "small in one gather"])
def test_batches_of_moves_around_a_row_are_bit_identical(
    classes: int, small_cells: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search's batches change one row in one column or a few (a scan, a walker): a batch of
    mostly one-column moves takes each row's leaves from the other columns' AND once, a batch of
    several-column moves goes column by column, a small batch (``SMALL_MASK_CELLS``; 0: none)
    ANDs all its table rows in one gather; small and large batches sum the trees each their
    way. Every way gives the estimator's predictions bit for bit, with and without NaN."""
    monkeypatch.setattr(quickscorer, "SMALL_MASK_CELLS", small_cells)
    rng = np.random.default_rng(2)
    X = rng.normal(size=(800, 6))
    X[rng.random(X.shape) < 0.05] = np.nan
    y = (np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) * np.nan_to_num(X[:, 2]) > 0).astype(int)
    if classes == 3:
        y = y + (np.nan_to_num(X[:, 3]) > 1.0)
    estimator = HistGradientBoostingClassifier(max_iter=15, random_state=0).fit(X, y)
    trees = compile_trees(estimator)
    assert trees is not None and not isinstance(trees, BaggedTrees)
    by_column = type(trees)._masks_by_column
    calls: list[int] = []

    def counted(self: Any, rows: Any) -> Any:
        calls.append(rows.shape[1])
        return by_column(self, rows)

    monkeypatch.setattr(type(trees), "_masks_by_column", counted)
    for n in (1, 2, 40, 64, 65, 300):
        for changes in (1, 3):
            batch = np.repeat(X[7:8], n, axis=0)
            for row in batch:
                columns = rng.choice(6, size=rng.integers(0, changes + 1), replace=False)
                row[columns] = X[rng.integers(0, 800, columns.size), columns]
            calls.clear()
            np.testing.assert_array_equal(trees.predict(batch), estimator.predict_proba(batch))
            if n * trees.columns.size <= small_cells:  # one gather: never column by column
                assert not calls
            elif n >= 40:  # the row's own values are the most common: one-column moves skip the column loop
                assert (len(calls) == 0) == (changes == 1)


def test_values_are_ranked_by_one_search_among_every_threshold() -> None:
    """The table rows of a batch's values come from one search among all columns' thresholds and
    one lookup (:func:`~counterplan.planning.fast_path.quickscorer._rank_table`), the same as a
    search of each column's own thresholds: at each threshold, a hair either side of it, past
    them all, NaN; and the predictions are the estimator's bit for bit."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(600, 5))
    X[:, 4] = rng.integers(0, 3, 600)  # few thresholds: once ranked by one comparison each
    X[rng.random(X.shape) < 0.05] = np.nan
    y = (np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) * np.nan_to_num(X[:, 4]) > 0).astype(int)
    estimator = HistGradientBoostingClassifier(max_iter=20, random_state=0).fit(X, y)
    trees = compile_trees(estimator)
    assert trees is not None and not isinstance(trees, BaggedTrees)
    assert trees.rank_rows is not None and trees.every_threshold is not None
    column_by_column = dataclasses.replace(trees, rank_rows=None, every_threshold=None, rank_base=None)
    every = trees.every_threshold
    values = np.concatenate([every, np.nextafter(every, np.inf), np.nextafter(every, -np.inf), [np.inf, -np.inf]])
    batch = np.repeat(X[:1], values.size + 1, axis=0)
    for c in range(5):
        batch[:, c] = np.append(values, np.nan)
    XT = np.ascontiguousarray(batch[:, trees.columns].T)
    np.testing.assert_array_equal(trees._rows(XT), column_by_column._rows(XT))
    np.testing.assert_array_equal(trees.predict(X), estimator.predict_proba(X))
    np.testing.assert_array_equal(trees.predict(batch), column_by_column.predict(batch))


@pytest.mark.parametrize(
    "estimator",
    [
        RandomForestClassifier(n_estimators=12, random_state=0),
        ExtraTreesClassifier(n_estimators=12, random_state=0),
        DecisionTreeClassifier(max_depth=8, random_state=0),
    ],
    ids=["random forest", "extra trees", "decision tree"],
)
def test_bagged_trees_in_a_pipeline_are_bit_identical(estimator: Any, data: pd.DataFrame) -> None:
    model = hgb_pipeline(estimator).fit(data[FEATURES], data["tier"])  # three classes
    problem = problem_for(data, model, target="tier", goals=[ClassGoal(target=2)])
    path = problem.model.fast_path(problem.space)  # type: ignore[attr-defined]
    assert path is not None and isinstance(path.trees, BaggedTrees)
    assert_fast_equals_real(problem, exact=True)


def test_a_bare_forest_fitted_on_a_dataframe_is_called_without_one(data: pd.DataFrame) -> None:
    forest = RandomForestClassifier(n_estimators=10, random_state=0).fit(data[NUMBERS], data["approved"])
    problem = CounterfactualProblem.from_dataframe(data[[*NUMBERS, "approved"]], 2, forest, target="approved")
    assert problem.model.input_kind == "dataframe"  # type: ignore[attr-defined]
    assert_fast_equals_real(problem, exact=True)
    regressor = RandomForestRegressor(n_estimators=10, random_state=0).fit(data[NUMBERS], data["amount"])
    frame = data[[*NUMBERS, "amount"]]
    problem = CounterfactualProblem.from_dataframe(
        frame, 2, regressor, [RangeGoal(low=0.0, high=500.0)], target="amount"
    )
    assert_fast_equals_real(problem, exact=True)
    two = ExtraTreesRegressor(n_estimators=5, random_state=0).fit(data[NUMBERS], data[["amount", "debt"]])
    trees = compile_trees(two)
    assert isinstance(trees, BaggedTrees)
    X = data[NUMBERS].to_numpy(dtype=np.float64)
    np.testing.assert_array_equal(trees.predict(X, two), two.predict(data[NUMBERS]))  # two outputs


def test_a_forest_refit_in_place_is_seen_and_a_bare_tree_is_freed(data: pd.DataFrame) -> None:
    import gc
    import weakref

    forest = RandomForestClassifier(n_estimators=5, warm_start=True, random_state=0)
    forest.fit(data[NUMBERS], data["approved"])
    problem = CounterfactualProblem.from_dataframe(data[[*NUMBERS, "approved"]], 2, forest, target="approved")
    assert_fast_equals_real(problem, exact=True)
    forest.set_params(n_estimators=20)
    forest.fit(data[NUMBERS], data["approved"])  # more trees in the same list: the same object ids
    assert_fast_equals_real(problem, exact=True)
    tree = DecisionTreeClassifier(max_depth=4, random_state=0).fit(data[NUMBERS], data["approved"])
    problem = CounterfactualProblem.from_dataframe(data[[*NUMBERS, "approved"]], 2, tree, target="approved")
    assert_fast_equals_real(problem, exact=True)
    gone = weakref.ref(tree)
    del tree, problem
    gc.collect()
    assert gone() is None  # the cache of compiled paths does not keep the model alive


def test_a_forest_that_learned_missing_values_is_bit_identical_with_gaps(gappy: pd.DataFrame) -> None:
    model = hgb_pipeline(RandomForestClassifier(n_estimators=10, random_state=0))
    model.fit(gappy[FEATURES], gappy["approved"])
    filled = problem_for(gappy, model, row=0, fill_missing=["income"])  # candidates: missing or a number
    assert filled.space.missing.any()
    assert_fast_equals_real(filled, exact=True)


def test_forests_that_cannot_be_compiled_give_none() -> None:
    rng = np.random.default_rng(2)
    X = np.column_stack([rng.integers(0, 4, 200), rng.normal(size=200)])
    y = (X[:, 0] > 1).astype(int)
    categorical = HistGradientBoostingClassifier(max_iter=5, categorical_features=[0]).fit(X, y)
    assert compile_trees(categorical) is None
    assert compile_trees(LogisticRegression().fit(X, y)) is None


@pytest.mark.parametrize(
    "step",
    [PolynomialFeatures(degree=2), FunctionTransformer(np.log1p)],
    ids=["polynomial features", "a function"],
)
def test_an_unsupported_step_falls_back_to_the_pipeline(step: Any, data: pd.DataFrame) -> None:
    encode = ColumnTransformer(
        [("cats", onehot(), ["city"]), ("nums", Pipeline([("x", step), ("s", StandardScaler())]), ["age"])]
    )
    model = logistic(encode).fit(data[FEATURES], data["approved"])
    problem = problem_for(data, model)
    adapter = problem.model
    assert adapter.fast_path(problem.space) is None  # type: ignore[attr-defined]
    X = candidates(problem.space)
    np.testing.assert_array_equal(
        adapter.predict(X, problem.space)["approved"], model.predict_proba(problem.space.to_frame(X))
    )


def test_an_encoder_that_raises_on_a_known_category_is_not_compiled(data: pd.DataFrame) -> None:
    known = data[data["city"] != "west"]
    model = logistic(ColumnTransformer([("cats", onehot(handle_unknown="error"), ["city"])], remainder="drop"))
    model.fit(known[FEATURES], known["approved"])
    problem = problem_for(data, model)  # the space knows "west"; the encoder would raise on it
    assert problem.model.fast_path(problem.space) is None  # type: ignore[attr-defined]


def corrupt(adapter: Any, space: FeatureSpace) -> None:
    """Swap the space's compiled plan for one whose one-hot table is off by one."""
    path = adapter.fast_path(space)
    inputs = dataclasses.replace(path.inputs, table_values=path.inputs.table_values + 1.0)
    adapter._fast_paths._by_space[space] = dataclasses.replace(path, inputs=inputs)


def test_the_debug_check_catches_a_corrupted_plan(
    data: pd.DataFrame, loan_model: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = logistic(PREPROCESSING["standard scaler, dense one-hot"]()).fit(data[FEATURES], data["approved"])
    checked = problem_for(data, SklearnClassifierAdapter(model, "approved", check_fast=True))
    space = checked.space
    X = candidates(space)
    checked.model.predict(X, space)  # a sound plan passes the check
    corrupt(checked.model, space)
    with pytest.raises(ModelAdapterError, match=r"'approved'.*differs from the pipeline by up to"):
        checked.model.predict(X, space)

    quiet = problem_for(data, SklearnClassifierAdapter(model, "approved"))
    corrupt(quiet.model, quiet.space)
    quiet.model.predict(X, quiet.space)  # not checked: the corrupted plan goes unnoticed
    monkeypatch.setenv("COUNTERPLAN_CHECK_FAST", "1")
    with pytest.raises(ModelAdapterError, match="fast path differs"):
        quiet.model.predict(X, quiet.space)


def test_a_fast_path_that_raises_leaves_the_answer_to_the_pipeline(loan_problem: CounterfactualProblem) -> None:
    adapter: Any = pickle.loads(pickle.dumps(loan_problem.model))  # a private cache to break
    space = loan_problem.space
    path = adapter.fast_path(space)

    class Broken:
        def predict(self, X: FloatMatrix) -> FloatMatrix:
            raise FloatingPointError("a bug")

    adapter._fast_paths._by_space[space] = dataclasses.replace(path, trees=Broken())
    X = candidates(space, n=32)
    np.testing.assert_array_equal(
        adapter.predict(X, space)["approved"], adapter.predict_reference(X, space)["approved"]
    )


def test_problems_of_one_data_set_share_one_compiled_path(data: pd.DataFrame, monkeypatch: pytest.MonkeyPatch) -> None:
    model = logistic(PREPROCESSING["robust scaler, one-hot dropping the first"]()).fit(data[FEATURES], data["approved"])
    adapter = SklearnClassifierAdapter(model, "approved")
    compiled: list[FeatureSpace] = []
    compile_fast_path = counterplan.planning.fast_path.probe.compile_fast_path

    def counting(model: Any, space: FeatureSpace, *args: Any) -> Any:
        compiled.append(space)
        return compile_fast_path(model, space, *args)

    monkeypatch.setattr(counterplan.planning.fast_path.probe, "compile_fast_path", counting)
    first = problem_for(data, adapter, row=1)
    second = problem_for(data, adapter, row=7, immutable=["age"])
    assert first.space is not second.space
    assert adapter.fast_path(first.space) is adapter.fast_path(second.space) is not None
    assert_fast_equals_real(second)
    assert len(compiled) == 1


def test_adapters_of_one_model_share_the_cache_and_a_refit_drops_it(
    data: pd.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = logistic(PREPROCESSING["standard scaler, dense one-hot"]()).fit(data[FEATURES], data["approved"])
    compiled: list[FeatureSpace] = []
    compile_fast_path = counterplan.planning.fast_path.probe.compile_fast_path

    def counting(model: Any, space: FeatureSpace, *args: Any) -> Any:
        compiled.append(space)
        return compile_fast_path(model, space, *args)

    monkeypatch.setattr(counterplan.planning.fast_path.probe, "compile_fast_path", counting)
    first, second = problem_for(data, model, row=1), problem_for(data, model, row=2)  # an adapter each
    assert first.model is not second.model
    X = candidates(second.space)
    first.model.predict(X, first.space)
    before = second.model.predict(X, second.space)["approved"]
    assert len(compiled) == 1
    half = data.iloc[::2]
    model.fit(half[FEATURES], half["approved"])  # refitted in place
    after = second.model.predict(X, second.space)["approved"]
    assert len(compiled) == 2
    assert not np.allclose(before, after)
    np.testing.assert_allclose(after, model.predict_proba(second.space.to_frame(X)), rtol=0, atol=1e-12)


def test_a_solve_checks_the_fitted_state_once_and_the_next_solve_sees_a_refit(
    data: pd.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A score calculator (one solve) looks its space's fast path up, checking the model's fitted
    state, at its first call only; a model refitted in place between two solves gives the next
    solve the refitted model's predictions."""
    model = hgb_pipeline(HistGradientBoostingClassifier(max_iter=10, random_state=0))
    model.fit(data[FEATURES], data["approved"])
    problem = problem_for(data, model)
    checks: list[int] = []
    fitted_state = counterplan.planning.fast_path.cache.fitted_state

    def counting(model: Any) -> Any:
        checks.append(1)
        return fitted_state(model)

    monkeypatch.setattr(counterplan.planning.fast_path.cache, "fitted_state", counting)
    X = candidates(problem.space, n=40)
    calculator = ScoreCalculator(problem, remember_bytes=0)
    for rows in (X[:10], X[10:20], X[20:]):
        calculator.calculate(rows)
    assert calculator.model_call_count == 3 and len(checks) == 1
    before = calculator.calculate(X).predictions["approved"]
    half = data.iloc[::2]
    model.fit(half[FEATURES], half["approved"])  # refitted in place
    after = ScoreCalculator(problem, remember_bytes=0).calculate(X).predictions["approved"]
    assert len(checks) == 2 and not np.array_equal(before, after)
    np.testing.assert_array_equal(after, model.predict_proba(problem.space.to_frame(X)))


def test_leaf_indices_wider_than_the_mask_word_are_bit_identical() -> None:
    """The leaf of a mask is found in the mask's own word (8, 16, 32 or 64 bits) when every
    tree's index fits it, and in a wider integer when it does not (8-bit masks of more than 31
    trees): both give the estimator's predictions bit for bit."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(400, 4))
    y = (X[:, 0] + X[:, 1] * X[:, 2] > 0).astype(int)
    for leaves, iterations, bits in ((8, 40, 8), (8, 20, 8), (16, 40, 16)):
        estimator = HistGradientBoostingClassifier(
            max_iter=iterations, max_leaf_nodes=leaves, early_stopping=False, random_state=0
        ).fit(X, y)
        trees = compile_trees(estimator)
        assert trees is not None and not isinstance(trees, BaggedTrees) and trees.word_bits == bits
        for batch in (X, X[:3]):
            np.testing.assert_array_equal(trees.predict(batch), estimator.predict_proba(batch))


def test_a_new_pattern_of_missing_values_is_checked_before_the_plan_is_reused(
    gappy: pd.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    frame = gappy.copy()
    frame["age"] = frame["age"].astype(float)
    frame.loc[frame.index % 5 == 0, "age"] = np.nan  # trained on floats: the imputer wants floats
    encode = ColumnTransformer(
        [("cats", onehot(), ["city"]), ("age", SimpleImputer(strategy="constant", fill_value=0.0), ["age"])]
    )
    model = logistic(encode).fit(frame[FEATURES], frame["approved"])
    compiled: list[FeatureSpace] = []
    compile_fast_path = counterplan.planning.fast_path.probe.compile_fast_path

    def counting(model: Any, space: FeatureSpace, *args: Any) -> Any:
        compiled.append(space)
        return compile_fast_path(model, space, *args)

    monkeypatch.setattr(counterplan.planning.fast_path.probe, "compile_fast_path", counting)
    both = problem_for(frame, model, row=0, fill_missing=True)  # age and income missing
    age = problem_for(frame, model, row=5, fill_missing=True)  # age missing
    whole = problem_for(frame, model, row=1)  # nothing missing: age reaches the pipeline as int64
    path = both.model.fast_path(both.space)  # type: ignore[attr-defined]
    assert path is not None
    assert age.model.fast_path(age.space) is path  # type: ignore[attr-defined]
    assert_fast_equals_real(age)
    with pytest.raises(ValueError, match="filling value"):  # the real pipeline fails on every row
        whole.model.predict_reference(whole.space.original.reshape(1, -1), whole.space)  # type: ignore[attr-defined]
    assert whole.model.fast_path(whole.space) is None  # type: ignore[attr-defined]
    assert len(compiled) == 1


def test_fast_off_always_calls_the_pipeline(data: pd.DataFrame, monkeypatch: pytest.MonkeyPatch) -> None:
    model = logistic(PREPROCESSING["standard scaler, dense one-hot"]()).fit(data[FEATURES], data["approved"])
    monkeypatch.setattr(counterplan.planning.fast_path.probe, "compile_fast_path", None)  # calling it would fail
    problem = problem_for(data, SklearnClassifierAdapter(model, "approved", fast=False))
    X = candidates(problem.space)
    np.testing.assert_array_equal(
        problem.model.predict(X, problem.space)["approved"], model.predict_proba(problem.space.to_frame(X))
    )


def test_an_adapter_pickles_and_threads_share_it(loan_problem: CounterfactualProblem) -> None:
    adapter: Any = pickle.loads(pickle.dumps(loan_problem.model))
    space = loan_problem.space
    X = candidates(space, n=64)
    expected = adapter.predict_reference(X, space)["approved"]
    results: list[Any] = []
    threads = [threading.Thread(target=lambda: results.append(adapter.predict(X, space))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 4
    for result in results:
        np.testing.assert_array_equal(result["approved"], expected)
    assert adapter.fast_path(space) is not None


def test_probe_rows_cover_the_original_every_category_and_missing(gappy: pd.DataFrame) -> None:
    model = hgb_pipeline(HistGradientBoostingClassifier(max_iter=5)).fit(gappy[FEATURES], gappy["approved"])
    space = problem_for(gappy, model, row=0, fill_missing=True).space
    probe = probe_rows(space)
    np.testing.assert_array_equal(probe[0], space.original)
    city = space.index["city"]
    assert set(probe[:, city]) == {0.0, 1.0, 2.0, 3.0}
    income = space.index["income"]
    assert space.missing_code[income] in probe[:, income]
    assert space.domain_upper[income] in probe[:, income]


def test_the_compiled_plans_kept_per_encoding_are_bounded(data: pd.DataFrame) -> None:
    """A request's spec may narrow a category to its allowed values, and each narrowing is a new
    encoding with its own compiled plan: the plans were kept per encoding without a bound (the
    paths beside them were bounded), so a server's stream of specs grew them without end."""
    model = logistic(ColumnTransformer([("cats", onehot(), ["city"])], remainder="passthrough"))
    model.fit(data[FEATURES], data["approved"])
    cities = ["north", "south", "east", "west"]
    narrowed = [
        problem_for(data, model, overrides={**OVERRIDES, "city": {"allowed": [city, other]}})
        for city, other in zip(cities, cities[1:] + cities[:1], strict=True)
    ]
    cache = narrowed[0].model._fast_paths  # type: ignore[attr-defined]
    cache.size = 2
    for problem in narrowed:
        assert problem.model.fast_path(problem.space) is not None  # type: ignore[attr-defined]
        assert_fast_equals_real(problem)
    assert len({space_signature(problem.space) for problem in narrowed}) == 4  # four encodings
    assert len(cache._plans) <= 2 and len(cache._paths) <= 2
