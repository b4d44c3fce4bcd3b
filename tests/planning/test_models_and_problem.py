"""Model adapters and building a problem from a training DataFrame."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pytest
from sklearn.datasets import make_regression
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from counterplan.planning import (
    CallableAdapter,
    ClassGoal,
    CounterfactualProblem,
    FeatureError,
    ModelAdapterError,
    OutputSpec,
    ProblemError,
    RangeGoal,
    ScoreCalculator,
    SklearnClassifierAdapter,
    SklearnRegressorAdapter,
    ValueGoal,
    adapt_sklearn,
)
from counterplan.planning.demo import IMMUTABLE, TARGET, rejected_applicant
from counterplan.planning.profile import InstanceError
from counterplan.solver import explain
from counterplan.solver.explainer import Explainer


def test_pipeline_fitted_on_a_dataframe_gets_names_and_category_strings(
    loan_data: pd.DataFrame, loan_model: Pipeline
) -> None:
    seen: list[Any] = []

    class Spy:
        classes_ = loan_model.classes_
        feature_names_in_ = loan_model.feature_names_in_

        def predict_proba(self, frame: Any) -> Any:
            seen.append(frame)
            return loan_model.predict_proba(frame)

    problem = CounterfactualProblem.from_dataframe(loan_data, 0, Spy(), [ClassGoal(target=1)], target=TARGET)
    ScoreCalculator(problem, remember_bytes=0).calculate(np.repeat(problem.original_row(), 3, axis=0))
    (frame,) = seen
    assert isinstance(frame, pd.DataFrame) and frame.shape == (3, len(loan_model.feature_names_in_))
    assert list(frame.columns) == list(loan_model.feature_names_in_)
    assert frame["education"].iloc[0] == loan_data["education"].iloc[0]
    assert frame["has_guarantor"].dtype == bool


def test_bare_estimator_gets_the_encoded_array() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    model = LogisticRegression().fit(X, y)
    adapter = adapt_sklearn(model, "label")
    assert isinstance(adapter, SklearnClassifierAdapter) and adapter.input_kind == "array"
    assert adapter.outputs == (OutputSpec("label", (0, 1)),)
    data = pd.DataFrame(X, columns=["a", "b", "c"])
    problem = CounterfactualProblem.from_dataframe(data, 0, adapter, [ClassGoal(target=1)])
    evaluation = ScoreCalculator(problem).calculate(X[:5])
    np.testing.assert_allclose(evaluation.predictions["label"], model.predict_proba(X[:5]))


def _gaps_and_codes() -> tuple[pd.DataFrame, npt.NDArray[np.float64]]:
    """Training data whose matrix a model is fitted on: income with gaps (a gap means approved),
    and a grade stored as the codes 1, 5 and 9 (9 means approved)."""
    rng = np.random.default_rng(0)
    income = rng.normal(50.0, 15.0, 400).round(1)
    grade = rng.choice([1, 5, 9], 400)
    gap = rng.random(400) < 0.3
    income[gap] = np.nan
    data = pd.DataFrame({"income": income, "grade": grade})
    data["approved"] = (gap | (income > 55.0) | (grade == 9)).astype(int)
    return data, data[["income", "grade"]].to_numpy(dtype=np.float64)


@pytest.mark.parametrize("fast", [True, False])
def test_a_model_fitted_on_an_array_gets_nan_for_a_gap_and_the_numbers_of_codes(fast: bool) -> None:
    """A model fitted without column names is asked on the array it was trained on: a gap is NaN
    (not the feature's missing code, a number below the domain) and a category stored as numbers
    is its number (not its code, its position among the categories), in the fast path and the
    real one alike; so an instance the model approves is not explained as rejected."""
    data, matrix = _gaps_and_codes()
    model = HistGradientBoostingClassifier(max_iter=20, random_state=0).fit(matrix, data["approved"])
    adapter = adapt_sklearn(model, "approved", fast=fast)
    row = int(np.flatnonzero(np.isnan(matrix[:, 0]) & (matrix[:, 1] != 9))[0])
    overrides = {"grade": {"kind": "categorical"}}
    problem = CounterfactualProblem.from_dataframe(data, row, adapter, target="approved", overrides=overrides)
    grades = np.repeat(problem.original_row(), 3, axis=0)
    grades[:, 1] = [0.0, 1.0, 2.0]  # the codes of grades 1, 5 and 9
    asked = np.repeat(matrix[[row]], 3, axis=0)
    asked[:, 1] = [1.0, 5.0, 9.0]
    got = ScoreCalculator(problem, remember_bytes=0).calculate(grades).predictions["approved"]
    np.testing.assert_allclose(got, model.predict_proba(asked))
    assert explain(problem, seed=0).already_met  # the model approves a gap


def _numbers_frame() -> pd.DataFrame:
    rng = np.random.default_rng(1)
    data = pd.DataFrame({"income": rng.normal(50.0, 15.0, 200).round(1), "age": rng.integers(18, 70, 200)})
    return data.assign(approved=(data["income"] > 55.0).astype(int))


def test_columns_named_by_numbers_are_the_features_of_their_text() -> None:
    """A DataFrame whose columns are named 0 and 1 (``pd.DataFrame(matrix)``) has the features
    "0" and "1", as every flag, card and result names features; the label column may be named
    by a number too. It was refused as "column missing from the training data"."""
    data = _numbers_frame().set_axis([0, 1, 2], axis=1)
    model = LogisticRegression().fit(data[[0, 1]], data[2])  # no feature_names_in_: numbers are no names
    for problem in (
        CounterfactualProblem.from_dataframe(data, 0, model, target=2),  # type: ignore[arg-type]
        Explainer(model, data, target=2).problem(0),  # type: ignore[arg-type]
    ):
        assert problem.space.names == ("0", "1")
        np.testing.assert_allclose(
            problem.model.predict(problem.original_row(), problem.space)["2"],
            model.predict_proba(data[[0, 1]].iloc[[0]].to_numpy()),
        )


def test_two_columns_of_one_name_are_refused_naming_it() -> None:
    data = _numbers_frame()
    twice = pd.concat([data[["income", "age"]], data[["age", "approved"]]], axis=1)
    model = LogisticRegression().fit(twice.iloc[:, :3].to_numpy(), twice["approved"])
    for build in (
        lambda: CounterfactualProblem.from_dataframe(twice, 0, model, target="approved"),
        lambda: Explainer(model, twice, target="approved"),
    ):
        with pytest.raises(ProblemError, match="the training data has two columns 'age': give each column one name"):
            build()


def test_a_one_row_dataframe_is_the_row_and_more_rows_are_refused() -> None:
    data = _numbers_frame()
    model = LogisticRegression().fit(data[["income", "age"]], data["approved"])
    one = data[["income", "age"]].iloc[[3]]
    problem = CounterfactualProblem.from_dataframe(data, one, model, target="approved")
    assert problem.space.decode(problem.space.original) == {"income": data["income"][3], "age": data["age"][3]}
    other = Explainer(model, data, target="approved").problem(one)
    assert other.space.decode(other.space.original) == problem.space.decode(problem.space.original)
    with pytest.raises(ProblemError, match="a DataFrame of 2 rows; give one row"):
        CounterfactualProblem.from_dataframe(data, data.iloc[:2], model, target="approved")


def test_a_model_fitted_on_fewer_columns_than_the_data_gives_is_refused_naming_them() -> None:
    """A model fitted on an array reads its columns by position: the label column left among the
    features (no target named) is refused up front, naming the columns, not left to fail on the
    instance as though its gaps were the cause."""
    data = _numbers_frame()
    model = LogisticRegression().fit(data[["income", "age"]].to_numpy(), data["approved"])
    with pytest.raises(
        ProblemError, match=r"fitted on 2 columns, the data gives 3: income, age, approved \(is the label"
    ):
        CounterfactualProblem.from_dataframe(data, 0, model)
    with pytest.raises(ProblemError, match="fitted on 2 columns, the data gives 3"):
        Explainer(model, data)
    assert CounterfactualProblem.from_dataframe(data, 0, model, target="approved").space.names == ("income", "age")


def test_single_and_multi_output_regressors() -> None:
    X, y = make_regression(n_samples=100, n_features=3, n_targets=2, random_state=0)
    data = pd.DataFrame(X, columns=["a", "b", "c"])
    multi = LinearRegression().fit(X, y)
    adapter = adapt_sklearn(multi, ["first", "second"])
    assert isinstance(adapter, SklearnRegressorAdapter)
    goals = [ValueGoal(output="second", value=0.0, tolerance=0.1), RangeGoal(output="first", low=-1, high=1)]
    problem = CounterfactualProblem.from_dataframe(data, 3, adapter, goals)
    evaluation = ScoreCalculator(problem, assert_mode=True).calculate(X[:4])
    np.testing.assert_allclose(evaluation.predictions["first"], multi.predict(X[:4])[:, 0])
    np.testing.assert_allclose(evaluation.predictions["second"], multi.predict(X[:4])[:, 1])
    single = LinearRegression().fit(X, y[:, 0])
    problem = CounterfactualProblem.from_dataframe(data, 3, single, [ValueGoal(value=1.0)])
    assert problem.model.outputs == (OutputSpec("prediction"),)
    with pytest.raises(ModelAdapterError, match="expected"):
        CounterfactualProblem.from_dataframe(
            data, 3, adapt_sklearn(multi, "only"), [ValueGoal(value=1.0)]
        ).model.predict(X[:2], problem.space)


def test_adapter_errors_name_the_problem() -> None:
    with pytest.raises(ModelAdapterError, match="predict_proba"):
        SklearnClassifierAdapter(object())
    with pytest.raises(ModelAdapterError, match="not fitted"):
        SklearnClassifierAdapter(LogisticRegression())
    with pytest.raises(ModelAdapterError, match="unique output names"):
        SklearnRegressorAdapter(LinearRegression(), ["a", "a"])
    with pytest.raises(ModelAdapterError, match="callable"):
        CallableAdapter(42, [OutputSpec("y")])  # type: ignore[arg-type]


def test_from_dataframe_infers_kinds_domains_and_statistics(loan_data: pd.DataFrame, loan_model: Pipeline) -> None:
    problem = CounterfactualProblem.from_dataframe(
        loan_data,
        rejected_applicant(),
        loan_model,
        [ClassGoal(target=1, confidence=0.7)],
        target=TARGET,
        immutable=IMMUTABLE,
        overrides={"income": {"low": 0.0, "high": 500_000.0}},
    )
    space = problem.space
    kinds = {f.name: f.kind for f in space.features}
    assert kinds["age"] == "integer" and kinds["income"] == "float"
    assert kinds["education"] == "categorical" and kinds["has_guarantor"] == "boolean"
    assert not space["age"].mutable and not space["has_prior_default"].mutable
    assert space["income"].bounds == (0.0, 500_000.0)
    assert space["credit_cards"].bounds == (
        float(loan_data["credit_cards"].min()),
        float(loan_data["credit_cards"].max()),
    )
    education = space["education"]
    assert isinstance(education, ack := type(education)) and ack.__name__ == "CategoricalFeature"
    assert set(education.domain) == set(loan_data["education"])  # type: ignore[union-attr]
    debt = loan_data["debt"].to_numpy()
    stats = problem.statistics["debt"]
    assert stats.std == pytest.approx(debt.std())
    assert stats.mad == pytest.approx(np.median(np.abs(debt - np.median(debt))))
    assert stats.range == pytest.approx(debt.max() - debt.min())
    assert problem.model.outputs[0].name == TARGET


def test_domains_widen_to_hold_the_instance(loan_data: pd.DataFrame, loan_model: Pipeline) -> None:
    applicant = {**rejected_applicant(), "income": 1_000_000.0}
    problem = CounterfactualProblem.from_dataframe(
        loan_data, applicant, loan_model, [ClassGoal(target=1)], target=TARGET
    )
    assert problem.space["income"].bounds[1] == 1_000_000.0


def test_a_category_the_data_never_has_is_refused_unless_the_categories_are_given(
    loan_data: pd.DataFrame, loan_model: Pipeline
) -> None:
    """A misspelt category would explain another row: it is refused, naming the feature and its
    categories; a user who means a new category lists the categories."""
    applicant = {**rejected_applicant(), "purpose": "wedding"}
    with pytest.raises(FeatureError) as refused:
        CounterfactualProblem.from_dataframe(loan_data, applicant, loan_model, [ClassGoal(target=1)], target=TARGET)
    assert refused.value.field == "purpose"
    assert "'wedding' is not one of its categories" in refused.value.problem and "'car'" in refused.value.problem
    categories = sorted({*loan_data["purpose"].astype(str), "wedding"})
    problem = CounterfactualProblem.from_dataframe(
        loan_data,
        applicant,
        loan_model,
        [ClassGoal(target=1)],
        target=TARGET,
        overrides={"purpose": {"categories": categories}},
    )
    assert "wedding" in problem.space["purpose"].domain  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("kwargs", "error", "fragment"),
    [
        ({"immutable": ["height"]}, ProblemError, "not a feature column"),
        ({"columns": ["age", TARGET], "target": TARGET}, ProblemError, "label column"),
        ({"instance": 10**9}, ProblemError, "outside"),
        ({"instance": {**rejected_applicant(), "income": float("inf")}}, FeatureError, "finite"),
        ({"instance": {**rejected_applicant(), "credit_cards": 2.5}}, FeatureError, "fractional"),
        ({"overrides": {"income": {"low": 50_000.0, "high": 60_000.0}}}, FeatureError, "outside its domain"),
    ],
)
def test_from_dataframe_errors(
    loan_data: pd.DataFrame,
    loan_model: Pipeline,
    kwargs: dict[str, Any],
    error: type[Exception],
    fragment: str,
) -> None:
    arguments: dict[str, Any] = {"instance": rejected_applicant(), "target": TARGET, **kwargs}
    instance = arguments.pop("instance")
    with pytest.raises(error, match=fragment):
        CounterfactualProblem.from_dataframe(loan_data, instance, loan_model, [ClassGoal(target=1)], **arguments)


def test_no_goal_asks_for_a_binary_classifiers_second_class(loan_data: pd.DataFrame, loan_model: Pipeline) -> None:
    """One default for every way in: the second class (approved). An approved instance already
    meets it (nothing to change); it is never explained how to be rejected."""
    from counterplan.planning import CallableAdapter, GoalError, OutputSpec
    from counterplan.planning.defaults import default_goals
    from counterplan.solver.counterfactual import explain

    problem = CounterfactualProblem.from_dataframe(loan_data, rejected_applicant(), loan_model, target=TARGET)
    (bound,) = problem.goals
    assert isinstance(bound.goal, ClassGoal) and bound.goal.target == 1  # rejected now: ask for approval
    approved = loan_model.predict_proba(loan_data.drop(columns=[TARGET]))[:, 1] > 0.8
    row = int(np.flatnonzero(approved)[0])
    other = CounterfactualProblem.from_dataframe(loan_data, row, loan_model, target=TARGET)
    assert other.goals[0].goal.target == 1  # type: ignore[union-attr]
    assert explain(other, seed=0).already_met
    again = problem.with_goals([ClassGoal(target=1, confidence=0.9)])
    assert again.goals[0].goal.confidence == 0.9 and again.space is not problem.space  # type: ignore[union-attr]
    regressor = CallableAdapter(lambda X: X[:, 0], [OutputSpec("price")])
    with pytest.raises(GoalError, match=r"give a goal: .*; output 'price' is a number \(give a value or a range\)$"):
        default_goals(regressor)
    three = CallableAdapter(lambda X: X, [OutputSpec("grade", ("low", "mid", "high"))])
    with pytest.raises(GoalError, match=r"; output 'grade' has 3 classes \['low', 'mid', 'high'\]$"):
        default_goals(three)  # it named the outputs only: "...needs a binary classifier; ['grade']"


def test_a_boolean_feature_takes_a_boolean_or_0_or_1_never_a_texts_truth() -> None:
    """JSON's ``"false"`` (an instance from ``--instance`` or a KServe request) was read by its
    Python truth, True, and another row was explained; it is refused naming the feature."""
    rng = np.random.default_rng(0)
    data = pd.DataFrame({"x": rng.normal(0, 1, 60), "flag": rng.random(60) > 0.5})
    data["y"] = (data["x"] + data["flag"] > 0.8).astype(int)
    model = LogisticRegression().fit(data[["x", "flag"]], data["y"])

    def problem(flag: Any) -> CounterfactualProblem:
        return CounterfactualProblem.from_dataframe(
            data, {"x": 0.0, "flag": flag}, model, [ClassGoal(target=1)], target="y"
        )

    for given, read in [(True, True), (np.bool_(False), False), (0, False), (1.0, True)]:
        assert problem(given).space.features[1].value is read
    for given in ["false", "no", 2, 0.5, [1]]:
        with pytest.raises(InstanceError, match=r"flag.*boolean feature given .*; give true or false"):
            problem(given)


def test_one_feature_name_given_as_a_text_is_one_name() -> None:
    """``immutable="ab"`` froze the features ``a`` and ``b``, letter by letter, and a longer name
    was refused as "'i' is not a feature column" (the rules fuzz's finding): a text is one name,
    for ``immutable`` and ``fill_missing``, in ``from_dataframe``, the explainer, the feature
    inference and the gRPC client's request."""
    from counterplan.planning.inference import infer_features
    from counterplan.server.grpc.client import CounterplanClient

    rng = np.random.default_rng(0)
    data = pd.DataFrame({"a": rng.integers(0, 10, 80), "b": rng.integers(0, 10, 80), "ab": rng.integers(0, 10, 80)})
    data["y"] = (data["a"] + data["b"] + data["ab"] > 13).astype(int)
    model = LogisticRegression().fit(data[["a", "b", "ab"]], data["y"])
    row = {"a": 1, "b": 2, "ab": float("nan")}
    problem = CounterfactualProblem.from_dataframe(
        data, row, model, target="y", immutable="ab", fill_missing="ab", columns=["a", "b", "ab"]
    )
    assert dict(zip(problem.space.names, problem.space.mutable, strict=True)) == {"a": True, "b": True, "ab": False}
    assert problem.space["ab"].fill_missing and not problem.space["a"].fill_missing
    explainer = Explainer(model, data, target="y", immutable="ab", columns=["a", "b", "ab"])
    assert list(explainer.problem({"a": 1, "b": 2, "ab": 3}).space.mutable) == [True, True, False]
    features = infer_features(data, {"a": 1, "b": 2, "ab": 3}, ["a", "b", "ab"], immutable="ab")
    assert [f.mutable for f in features] == [True, True, False]
    request = CounterplanClient.request("m", {"a": 1, "b": 2, "ab": 3}, [], immutable="ab")
    assert [(o.name, o.constrained) for o in request.overrides] == [("ab", True)]


def test_a_model_writing_into_its_input_does_not_change_the_search_s_candidates() -> None:
    """A pipeline fitted on an array got the search's candidate matrix itself (``to_array`` gave
    ``X`` when no column needed changing): a ``StandardScaler(copy=False)`` scaled the candidates
    in place, and every explain ended in a CandidateError on a scaled value ('c': row 0 holds
    -0.018, outside the domain [0, 4]). The model now gets a copy; so does a callable."""
    rng = np.random.default_rng(0)
    n = 600
    data = pd.DataFrame({"a": rng.uniform(0, 100, n).round(1), "b": rng.uniform(0, 10, n).round(2)})
    data["c"] = rng.integers(0, 5, n).astype(float)
    data["y"] = ((data.a / 50 + data.b / 5 - data.c / 3 + rng.normal(0, 0.3, n)) > 2).astype(int)
    X = data[["a", "b", "c"]].to_numpy()
    model = Pipeline([("scale", StandardScaler(copy=False)), ("classify", LogisticRegression())]).fit(X.copy(), data.y)
    row = data[["a", "b", "c"]].iloc[int(np.flatnonzero(model.predict(X.copy()) == 0)[0])]
    goal = [ClassGoal(target=1, confidence=0.7)]
    result = explain(CounterfactualProblem.from_dataframe(data, row, model, goal, target="y"), seed=0)
    assert result.valid
    assert model.predict_proba(np.array([[result.proposed[k] for k in "abc"]], dtype=float))[0, 1] >= 0.7

    def zeroing(matrix: Any) -> Any:  # answers, then writes into its input
        answer = model.predict_proba(matrix.copy())
        matrix[:] = 0.0
        return answer

    problem = CounterfactualProblem.from_dataframe(
        data, row, CallableAdapter(zeroing, [OutputSpec("y", (0, 1))]), goal, target="y"
    )
    candidates = np.repeat(problem.space.original.reshape(1, -1), 3, axis=0)
    problem.model.predict(candidates, problem.space)
    assert (candidates == problem.space.original).all()
