"""ONNX models (issue 30): converted scikit-learn, XGBoost and LightGBM models explained through
onnxruntime by local search, the swarm and the exact engine. Every answer is valid through a
session the test runs itself, and the exact engine's distance on the graph equals the optimum on
the original model (integer and one-decimal features: float32 moves no threshold between them)."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import GradientBoostingClassifier, GradientBoostingRegressor, RandomForestClassifier
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from counterplan.planning import (
    CategoricalFeature,
    ClassGoal,
    CounterfactualProblem,
    FloatFeature,
    IntegerFeature,
    RangeGoal,
)
from counterplan.planning.errors import ModelAdapterError
from counterplan.planning.models import adapt_sklearn
from counterplan.solver.counterfactual import explain
from tests.cli import run_cli

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
skl2onnx = pytest.importorskip("skl2onnx")
pytest.importorskip("highspy")

from counterplan.planning import OnnxModel  # noqa: E402 - after the skip: needs the onnx extra

NUMBERS = ["income", "tenure", "debt"]


def _data(n: int = 400) -> tuple[pd.DataFrame, pd.Series, pd.Series]:
    rng = np.random.default_rng(3)
    frame = pd.DataFrame(
        {
            "income": np.round(rng.uniform(0.0, 10.0, n), 1),
            "tenure": rng.integers(0, 15, n).astype(float),
            "debt": np.round(rng.uniform(0.0, 5.0, n), 1),
        }
    )
    score = frame.income + 0.4 * frame.tenure - frame.debt + rng.normal(0, 0.5, n)
    return frame, (score > 6.0).astype(int), score


def _features() -> list[Any]:
    return [
        FloatFeature(name="income", value=2.0, low=0.0, high=10.0, precision=1),
        IntegerFeature(name="tenure", value=3, low=0, high=14),
        FloatFeature(name="debt", value=3.0, low=0.0, high=5.0, precision=1),
    ]


def _session(model: OnnxModel) -> Any:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    return ort.InferenceSession(model._bytes, options, providers=["CPUExecutionProvider"])


def _proba_by_hand(model: OnnxModel, row: dict[str, Any], columns: list[str]) -> np.ndarray:
    """Class probabilities of ``row`` by our own onnxruntime session (not the adapter's)."""
    session = _session(model)
    inputs = session.get_inputs()
    if len(inputs) == 1 and inputs[0].name not in columns:
        feeds = {inputs[0].name: np.array([[row[c] for c in columns]], dtype=np.float32)}
    else:
        feeds = {
            i.name: np.array([[row[i.name]]], dtype=object if i.type == "tensor(string)" else np.float32)
            for i in inputs
        }
    outputs = [o.name for o in session.get_outputs()]
    return np.asarray(session.run([outputs[-1]], feeds)[0], dtype=np.float64).reshape(-1)


def _to_onnx(estimator: Any, X: np.ndarray) -> Any:
    options = {id(estimator): {"zipmap": False}} if hasattr(estimator, "classes_") else None
    return skl2onnx.to_onnx(estimator, X[:1].astype(np.float32), options=options)


CLASSIFIERS = {
    "gradient boosting": lambda: GradientBoostingClassifier(n_estimators=20, max_depth=3, random_state=0),
    "random forest": lambda: RandomForestClassifier(n_estimators=20, max_depth=4, random_state=0),
    "logistic regression": lambda: LogisticRegression(max_iter=1000),
}


def _external(name: str, X: np.ndarray, y: pd.Series) -> tuple[Any, Any]:
    """An XGBoost or LightGBM classifier and its conversion by onnxmltools (opset 15)."""
    convert = pytest.importorskip("onnxmltools.convert")
    from onnxmltools.convert.common.data_types import FloatTensorType

    types = [("input", FloatTensorType([None, X.shape[1]]))]
    if name == "xgboost":
        xgboost = pytest.importorskip("xgboost")
        model = xgboost.XGBClassifier(n_estimators=20, max_depth=3, random_state=0).fit(X, y)
        return model, convert.convert_xgboost(model, initial_types=types, target_opset=15)
    lightgbm = pytest.importorskip("lightgbm")
    model = lightgbm.LGBMClassifier(n_estimators=20, num_leaves=8, verbose=-1, random_state=0).fit(X, y)
    return model, convert.convert_lightgbm(model, initial_types=types, target_opset=15, zipmap=False)


def _pair(name: str) -> tuple[Any, OnnxModel]:
    frame, label, _ = _data()
    X = frame.to_numpy()
    if name in ("xgboost", "lightgbm"):
        model, proto = _external(name, X, label)
    else:
        model = CLASSIFIERS[name]().fit(X, label)
        proto = _to_onnx(model, X)
    return model, OnnxModel(proto, "ok")


def _problem(adapter: Any) -> CounterfactualProblem:
    return CounterfactualProblem(_features(), [ClassGoal(target=1, confidence=0.7)], adapter)


@pytest.mark.parametrize("name", [*CLASSIFIERS, "xgboost", "lightgbm"])
def test_every_engine_answers_validly_through_onnxruntime_and_exact_equals_the_original_optimum(name: str) -> None:
    original, onnx_model = _pair(name)
    optimum = explain(_problem(adapt_sklearn(original, "ok")), engine="exact", seed=0)
    assert optimum.valid and optimum.statistics.exact is not None and optimum.statistics.exact.proven
    for engine in ("local", "swarm", "exact"):
        result = explain(_problem(onnx_model), engine=engine, seed=0)
        assert result.valid, engine
        assert _proba_by_hand(onnx_model, result.proposed, NUMBERS)[1] >= 0.7, engine
        assert result.score_levels[3] >= optimum.score_levels[3] - 1e-9, engine  # nothing beats the optimum
    exact = explain(_problem(onnx_model), engine="exact", seed=0)
    assert exact.statistics.exact is not None and exact.statistics.exact.proven
    assert exact.score_levels[3] == pytest.approx(optimum.score_levels[3], rel=1e-9, abs=1e-9)
    # auto chooses as for the original model (a scikit-learn family's for the same reason: the same
    # program size and family; XGBoost's and LightGBM's graphs are estimated as boosting)
    auto = [explain(_problem(m), engine="auto", seed=0).statistics for m in (adapt_sklearn(original, "ok"), onnx_model)]
    assert auto[0].engine == auto[1].engine == "exact"
    assert auto[0].engine_reason == auto[1].engine_reason or name not in CLASSIFIERS


def test_a_regressor_graph_is_read_on_the_exact_path() -> None:
    frame, _, score = _data()
    X = frame.to_numpy()
    model = GradientBoostingRegressor(n_estimators=20, max_depth=3, random_state=0).fit(X, score)
    onnx_model = OnnxModel(_to_onnx(model, X), "score")
    goal = [RangeGoal(low=6.0, high=20.0)]
    optimum = explain(CounterfactualProblem(_features(), goal, adapt_sklearn(model, "score")), engine="exact", seed=0)
    result = explain(CounterfactualProblem(_features(), goal, onnx_model), engine="exact", seed=0)
    assert result.valid and result.statistics.exact is not None and result.statistics.exact.proven
    assert result.score_levels[3] == pytest.approx(optimum.score_levels[3], rel=1e-9, abs=1e-9)
    value = _session(onnx_model).run(None, {"X": np.array([[result.proposed[c] for c in NUMBERS]], np.float32)})[0]
    assert 6.0 <= float(np.ravel(value)[0]) <= 20.0


def _pipeline_data(n: int = 400) -> tuple[pd.DataFrame, pd.Series]:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "income": rng.integers(10, 100, n).astype(float),
            "age": rng.integers(18, 70, n).astype(float),
            "housing": rng.choice(["own", "rent", "free"], n),
        }
    )
    return frame, ((frame.income + (frame.housing == "own") * 20 + rng.normal(0, 5, n)) > 70).astype(int)


def _pipeline(classifier: Any, scale: bool) -> tuple[Pipeline, OnnxModel]:
    from skl2onnx.common.data_types import FloatTensorType, StringTensorType

    frame, label = _pipeline_data()
    numbers = StandardScaler() if scale else "passthrough"
    encode = ColumnTransformer(
        [("num", numbers, ["income", "age"]), ("cat", OneHotEncoder(handle_unknown="ignore"), ["housing"])]
    )
    pipe = Pipeline([("pre", encode), ("clf", classifier)]).fit(frame, label)
    types = [
        ("income", FloatTensorType([None, 1])),
        ("age", FloatTensorType([None, 1])),
        ("housing", StringTensorType([None, 1])),
    ]
    proto = skl2onnx.convert_sklearn(
        pipe, initial_types=types, options={id(pipe): {"zipmap": False}}, target_opset={"": 17, "ai.onnx.ml": 3}
    )
    return pipe, OnnxModel(proto, "approved")


def _pipeline_features() -> list[Any]:
    return [
        FloatFeature(name="income", value=40.0, low=10, high=100, precision=0),
        FloatFeature(name="age", value=30.0, low=18, high=70, precision=0),
        CategoricalFeature(name="housing", value="rent", categories=["own", "rent", "free"]),
    ]


@pytest.mark.parametrize("scale", [False, True])
@pytest.mark.parametrize("classifier", ["gradient boosting", "logistic regression"])
def test_a_pipeline_with_one_input_per_column_is_read_through_its_one_hot_encoder(classifier: str, scale: bool) -> None:
    pipe, onnx_model = _pipeline(CLASSIFIERS[classifier](), scale)
    assert onnx_model.input_kind == "dataframe"
    goal = [ClassGoal(target=1, confidence=0.6)]
    original = CounterfactualProblem(_pipeline_features(), goal, adapt_sklearn(pipe, "approved"))
    optimum = explain(original, engine="exact", seed=0)
    onnx_problem = CounterfactualProblem(_pipeline_features(), goal, pickle.loads(pickle.dumps(onnx_model)))
    for engine in ("local", "exact"):
        result = explain(onnx_problem, engine=engine, seed=0)
        assert result.valid, engine
        assert _proba_by_hand(onnx_model, result.proposed, ["income", "age", "housing"])[1] >= 0.6
    exact = explain(onnx_problem, engine="exact", seed=0)
    assert exact.statistics.exact is not None and exact.statistics.exact.proven
    assert exact.score_levels[3] == pytest.approx(optimum.score_levels[3], rel=1e-6, abs=1e-9)


def test_graphs_the_exact_engine_cannot_read_are_refused_by_op_name_and_local_search_still_works() -> None:
    frame, label, _ = _data()
    X = frame.to_numpy()
    mlp = MLPClassifier(hidden_layer_sizes=(5,), max_iter=300, random_state=0).fit(X, label)
    onnx_model = OnnxModel(_to_onnx(mlp, X), "ok")
    with pytest.raises(ValueError, match=r"cannot read ONNX op 'MatMul' \(node 'MatMul'\)"):
        explain(_problem(onnx_model), engine="exact", seed=0)
    assert explain(_problem(onnx_model), engine="local", seed=0).valid
    auto = explain(_problem(onnx_model), engine="auto", seed=0)
    assert auto.valid and auto.statistics.exact is None
    # an unknown op between the input and the trees (a made-up Sqrt)
    gb = GradientBoostingClassifier(n_estimators=5, max_depth=2, random_state=0).fit(X, label)
    proto = _to_onnx(gb, X)
    node = next(n for n in proto.graph.node if n.op_type == "TreeEnsembleClassifier")
    node.input[0] = "rooted"
    proto.graph.node.insert(0, onnx.helper.make_node("Abs", ["X"], ["rooted"], name="my_abs"))
    with pytest.raises(ValueError, match=r"cannot read ONNX op 'Abs' \(node 'my_abs'\)"):
        explain(_problem(OnnxModel(proto, "ok")), engine="exact", seed=0)


def test_the_adapter_reads_zipmap_names_classes_and_refuses_missing_inputs() -> None:
    frame, label, _ = _data()
    X = frame.to_numpy()
    text = label.map({0: "no", 1: "yes"})
    model = LogisticRegression(max_iter=1000).fit(X, text)
    zipped = OnnxModel(skl2onnx.to_onnx(model, X[:1].astype(np.float32)).SerializeToString(), "ok")
    assert zipped.outputs[0].classes == ("no", "yes")
    problem = CounterfactualProblem(_features(), [ClassGoal(target="yes", confidence=0.7)], zipped)
    proba = zipped.predict(problem.space.original.reshape(1, -1), problem.space)["ok"]
    assert proba == pytest.approx(model.predict_proba(np.array([[2.0, 3.0, 3.0]])), abs=1e-6)
    _, onnx_model = _pipeline(LogisticRegression(max_iter=1000), scale=False)
    wrong = CounterfactualProblem(_features(), [ClassGoal(target=1)], onnx_model)
    with pytest.raises(ValueError, match=r"inputs \['age', 'housing'\] are not features"):
        onnx_model.predict(wrong.space.original.reshape(1, -1), wrong.space)


def _onnx_files(tmp_path: Path) -> OnnxModel:
    _, onnx_model = _pipeline(GradientBoostingClassifier(n_estimators=20, max_depth=3, random_state=0), False)
    frame, label = _pipeline_data()
    (tmp_path / "model.onnx").write_bytes(onnx_model._bytes)
    frame.assign(approved=label).to_csv(tmp_path / "train.csv", index=False)
    return onnx_model


def test_the_command_line_explains_an_onnx_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    onnx_model = _onnx_files(tmp_path)
    instance = json.dumps({"income": 40.0, "age": 30.0, "housing": "rent"})
    base = ["--model", str(tmp_path / "model.onnx"), "--data", str(tmp_path / "train.csv"), "--target", "approved"]
    for engine in ("local", "exact"):
        argv = [*base, "--instance", instance, "--goal", "class:1@0.6", "--engine", engine, "--seed", "0", "--json"]
        code, out, err = run_cli(capsys, "explain", *argv)
        assert code == 0, err
        result = json.loads(out)
        assert result["valid"] and "approved" in result["predictions"]
        assert _proba_by_hand(onnx_model, result["proposed"], ["income", "age", "housing"])[1] >= 0.6


@pytest.mark.parametrize("name", ["gradient boosting", "random forest"])
def test_local_search_scans_the_graphs_split_values_as_the_original_models(name: str) -> None:
    original, onnx_model = _pair(name)
    problem = _problem(onnx_model)
    mine, theirs = onnx_model.split_values(problem.space), adapt_sklearn(original).split_values(problem.space)
    assert mine.keys() == theirs.keys() and len(mine) == 3
    for j, values in theirs.items():
        assert mine[j] == pytest.approx(values, abs=1e-9)


def test_a_model_card_names_an_onnx_file(tmp_path: Path) -> None:
    import yaml

    from counterplan.server.registry.registry import ModelRegistry

    onnx_model = _onnx_files(tmp_path)
    card = {"id": "m", "model_file": "model.onnx", "outputs": ["approved"], "training_data": "train.csv"}
    (tmp_path / "m.yaml").write_text(yaml.safe_dump({**card, "target": "approved"}))
    registered = ModelRegistry.from_directory(tmp_path).get("m")
    assert registered is not None and isinstance(registered.adapter, OnnxModel)
    assert registered.adapter.outputs[0].name == "approved" and registered.explainer is not None
    result = registered.explainer.explain({"income": 40.0, "age": 30.0, "housing": "rent"}, seed=0)
    assert result.valid and _proba_by_hand(onnx_model, result.proposed, ["income", "age", "housing"])[1] >= 0.5


def test_batch_explains_an_onnx_file_in_worker_processes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    onnx_model = _onnx_files(tmp_path)
    output = tmp_path / "results.csv"
    argv = ["--model", str(tmp_path / "model.onnx"), "--data", str(tmp_path / "train.csv"), "--target", "approved"]
    argv += ["--rows", "0:12", "--workers", "2", "--goal", "class:1@0.6", "--seed", "0", "--output", str(output)]
    code, _, err = run_cli(capsys, "batch", *argv, "--no-progress")
    assert code == 0, err
    records = pd.read_csv(output)
    assert len(records) > 0 and records["valid"].all()
    for _, record in records.iterrows():
        proposed = {c: record[f"cf_{c}"] for c in ("income", "age", "housing")}
        assert _proba_by_hand(onnx_model, proposed, ["income", "age", "housing"])[1] >= 0.6


@pytest.mark.parametrize("name", ["gradient boosting", "random forest"])
def test_a_three_class_tree_graph_is_read_with_its_softmax_or_averaged_probabilities(name: str) -> None:
    frame, _, score = _data()
    X = frame.to_numpy()
    model = CLASSIFIERS[name]().fit(X, np.digitize(score, [4.0, 8.0]))
    onnx_model = OnnxModel(_to_onnx(model, X), "band")
    goal = [ClassGoal(target=2, confidence=0.5)]
    optimum = explain(CounterfactualProblem(_features(), goal, adapt_sklearn(model, "band")), engine="exact", seed=0)
    result = explain(CounterfactualProblem(_features(), goal, onnx_model), engine="exact", seed=0)
    assert result.valid and result.score_levels[3] == pytest.approx(optimum.score_levels[3], rel=1e-9, abs=1e-9)
    assert int(np.argmax(_proba_by_hand(onnx_model, result.proposed, NUMBERS))) == 2


def test_a_graph_of_one_tensor_gets_nan_for_a_gap() -> None:
    """A graph whose one input is the feature matrix (a model fitted on an array) gets NaN where
    the instance has a gap, as the model it was converted from was trained on, not the feature's
    missing code: here the imputer fills a gap with 200, which the model approves."""
    frame, labels, _ = _data()
    frame.loc[frame.index % 4 == 0, "income"] = np.nan
    labels = (labels.astype(bool) | frame.income.isna()).astype(int)
    matrix = frame.to_numpy(dtype=np.float32)
    model = Pipeline([("fill", SimpleImputer(strategy="constant", fill_value=200.0)), ("lr", LogisticRegression())])
    model.fit(matrix, labels)
    graph = OnnxModel(skl2onnx.to_onnx(model, matrix[:1]).SerializeToString(), "approved")
    problem = CounterfactualProblem.from_dataframe(frame.assign(approved=labels), 0, graph, target="approved")
    got = graph.predict(problem.original_row(), problem.space)["approved"]
    np.testing.assert_allclose(got, model.predict_proba(matrix[[0]]), atol=1e-5)
    assert explain(problem, seed=0).already_met


def _gather_graph() -> bytes:
    """y = [0, 5, 10][int(x0)]: a graph that raises on a row whose x0 is out of the table."""
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node("Slice", ["X", "start", "end", "axis"], ["x0"]),
        helper.make_node("Cast", ["x0"], ["index"], to=TensorProto.INT64),
        helper.make_node("Gather", ["table", "index"], ["picked"], axis=0),
        helper.make_node("Reshape", ["picked", "shape"], ["y"]),
    ]
    constants = [
        helper.make_tensor("start", TensorProto.INT64, [1], [0]),
        helper.make_tensor("end", TensorProto.INT64, [1], [1]),
        helper.make_tensor("axis", TensorProto.INT64, [1], [1]),
        helper.make_tensor("table", TensorProto.FLOAT, [3], [0.0, 5.0, 10.0]),
        helper.make_tensor("shape", TensorProto.INT64, [2], [-1, 1]),
    ]
    inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 2])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 1])]
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=constants)
    return bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())


def test_rows_the_graph_raises_on_fail_quietly_and_the_others_are_scored(capfd: pytest.CaptureFixture[str]) -> None:
    """onnxruntime logged each failing call to stderr (a few hundred lines for one explanation);
    the exception already says why, and the calculator fails those rows only."""
    features = [
        FloatFeature(name="x0", value=0.0, low=-5.0, high=5.0),
        FloatFeature(name="x1", value=0.0, low=-3.0, high=3.0),
    ]
    problem = CounterfactualProblem(features, [RangeGoal(low=4.0, high=6.0)], OnnxModel(_gather_graph(), "y"))
    result = explain(problem, engine="local", seed=0)
    assert result.valid and result.predictions["y"] == 5.0
    assert "onnxruntime" not in capfd.readouterr().err


def test_a_regressor_graph_that_also_outputs_an_integer_is_a_regressor() -> None:
    """A value and its rounding (an int64 output beside it): the int64 output made the graph a
    classifier of one class 0, which no goal could use."""
    from onnx import TensorProto, helper

    node = helper.make_node(
        "LinearRegressor", ["X"], ["value"], domain="ai.onnx.ml", coefficients=[1.0, 0.0, 0.0], intercepts=[0.0]
    )
    outputs = [
        helper.make_tensor_value_info("value", TensorProto.FLOAT, [None, 1]),
        helper.make_tensor_value_info("rounded", TensorProto.INT64, [None, 1]),
    ]
    inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 3])]
    cast = helper.make_node("Cast", ["value"], ["rounded"], to=TensorProto.INT64)
    graph = helper.make_graph([node, cast], "g", inputs, outputs)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)])
    model = OnnxModel(proto, "score")
    assert not model.outputs[0].is_classification
    goal = [RangeGoal(low=6.0, high=8.0)]
    for engine in ("local", "exact"):
        result = explain(CounterfactualProblem(_features(), goal, model), engine=engine, seed=0)
        assert result.valid and 6.0 <= result.predictions["score"] <= 8.0, engine


def _two_regressions(wide: bool) -> Any:
    """A graph of two linear regressions of the 3 features: one ``[N, 2]`` output, or two ``[N, 1]``."""
    from onnx import TensorProto, helper

    weights = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0]
    if wide:
        nodes = [
            helper.make_node("LinearRegressor", ["X"], ["both"], domain="ai.onnx.ml", coefficients=weights, targets=2)
        ]
        outputs = [helper.make_tensor_value_info("both", TensorProto.FLOAT, [None, 2])]
    else:
        nodes = [
            helper.make_node("LinearRegressor", ["X"], [name], domain="ai.onnx.ml", coefficients=part)
            for name, part in (("first", weights[:3]), ("second", weights[3:]))
        ]
        outputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, [None, 1]) for name in ("first", "second")]
    inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 3])]
    graph = helper.make_graph(nodes, "g", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)])


@pytest.mark.parametrize(
    ("wide", "names", "fragment"),
    [
        (
            True,
            ["score"],
            "output 'both' returns 2 columns a row (shape (1, 2) for 1 rows): give one output name per column",
        ),
        (
            False,
            ["a", "b"],
            "output 'first' returns 1 column a row (shape (1, 1) for 1 rows): give one output name per",
        ),
    ],
    ids=["one name for two columns", "two names for one of two outputs"],
)
def test_output_names_that_do_not_fit_a_regressors_output_say_what_to_give(
    wide: bool, names: list[str], fragment: str
) -> None:
    """A regressor's output takes one name per column. Given too few or too many, every call said
    only 'the ONNX model returned shape (1, 2); expected (1, 1)', naming neither the output read,
    nor its columns, nor the graph's other outputs."""
    model = OnnxModel(_two_regressions(wide), names)
    problem = CounterfactualProblem(_features(), [RangeGoal(low=6.0, high=8.0, output=names[0])], model)
    with pytest.raises(ModelAdapterError) as caught:
        model.predict(problem.original_row(), problem.space)
    assert fragment in str(caught.value) and f"given {names}" in str(caught.value)
    assert ("first [None, 1], second [None, 1]; probabilities= names the one to read" in str(caught.value)) != wide
    named = OnnxModel(_two_regressions(wide), ["a", "b"] if wide else ["b"], probabilities=None if wide else "second")
    result = explain(CounterfactualProblem(_features(), [RangeGoal(low=3.0, high=4.0, output="b")], named), seed=0)
    assert result.valid and 3.0 <= result.predictions["b"] <= 4.0  # tenure: the second regression


@pytest.mark.parametrize("location", ["../../../../etc/passwd", "/etc/passwd", "weights.bin"])
def test_a_graph_naming_external_data_files_is_refused_before_onnxruntime_reads_any(
    tmp_path: Path, location: str
) -> None:
    """A model is loaded from its own bytes, never from the paths it names: a file beside it, or
    one outside (a model card's file must not read the server's files)."""
    from onnx import TensorProto, helper, numpy_helper

    weights = numpy_helper.from_array(np.ones((3, 1), np.float32), "W")
    weights.ClearField("raw_data")
    weights.data_location = TensorProto.EXTERNAL
    for key, value in {"location": location, "offset": "0", "length": "12"}.items():
        entry = weights.external_data.add()
        entry.key, entry.value = key, value
    (tmp_path / "weights.bin").write_bytes(np.ones(3, np.float32).tobytes())
    inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 3])]
    outputs = [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, 1])]
    graph = helper.make_graph([helper.make_node("MatMul", ["X", "W"], ["Y"])], "g", inputs, outputs, [weights])
    path = tmp_path / "model.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    with pytest.raises(ValueError, match="keeps tensors in external data files"):
        OnnxModel(path, "y")


@pytest.mark.parametrize("mode", ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GT", "BRANCH_GTE"])
@pytest.mark.parametrize("scale", [1.0, -1.0])
def test_an_original_on_a_split_of_every_mode_is_moved_off_it_and_proven(mode: str, scale: float) -> None:
    """A hand-built split at 1.5 (through a Scaler of either sign) and an original 1.5: the exact
    engine alone answered 1.5 itself, rejected by the graph, after every retry."""
    from onnx import TensorProto, helper

    from counterplan.solver.core.config import SolverConfig
    from counterplan.solver.exact.config import ExactPhaseConfig

    scaler = helper.make_node("Scaler", ["X"], ["scaled"], domain="ai.onnx.ml", offset=[0.0, 0.0], scale=[scale, 1.0])
    split = {
        "nodes_treeids": [0, 0, 0],
        "nodes_nodeids": [0, 1, 2],
        "nodes_modes": [mode, "LEAF", "LEAF"],
        "nodes_featureids": [0, 0, 0],
        "nodes_values": [1.5 * scale, 0.0, 0.0],
        "nodes_truenodeids": [1, 0, 0],
        "nodes_falsenodeids": [2, 0, 0],
    }
    node = helper.make_node(
        "TreeEnsembleClassifier",
        ["scaled"],
        ["label", "probabilities"],
        domain="ai.onnx.ml",
        class_treeids=[0, 0],
        class_nodeids=[1, 2],
        class_ids=[0, 0],
        class_weights=[-3.0, 3.0],
        post_transform="LOGISTIC",
        classlabels_int64s=[0, 1],
        **split,
    )
    inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 2])]
    outputs = [
        helper.make_tensor_value_info("label", TensorProto.INT64, [None]),
        helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [None, 2]),
    ]
    graph = helper.make_graph([scaler, node], "g", inputs, outputs)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)])
    model = OnnxModel(proto, "y")
    features = [
        FloatFeature(name="x0", value=1.5, low=0.0, high=3.0),
        FloatFeature(name="x1", value=0.0, low=0.0, high=1.0),
    ]
    problem = CounterfactualProblem(features, [ClassGoal(target=1, confidence=0.9)], model)
    target = 1 if model.predict(problem.space.original.reshape(1, -1), problem.space)["y"][0, 1] < 0.5 else 0
    problem = CounterfactualProblem(features, [ClassGoal(target=target, confidence=0.9)], model)
    result = explain(problem, SolverConfig(phases=(ExactPhaseConfig(),)), seed=0)
    exact = result.statistics.exact
    assert exact is not None and result.valid and exact.proven and exact.retries == 0, exact
    assert 0.0 < abs(result.proposed["x0"] - 1.5) < 1e-5


def _one_split_classifier(
    leaves: tuple[float, float], post: str, *, threshold: float = 0.5, offset: float | None = None, base: float = 0.0
) -> OnnxModel:
    """A binary graph of one split on x0 (its two leaves score class 0 only, plus ``base``),
    behind a Scaler subtracting ``offset`` from x0 when given."""
    from onnx import TensorProto, helper

    nodes = []
    source = "X"
    if offset is not None:
        scaler = helper.make_node(
            "Scaler", ["X"], ["scaled"], domain="ai.onnx.ml", offset=[offset, 0.0], scale=[1.0, 1.0]
        )
        nodes.append(scaler)
        source = "scaled"
    split = {
        "nodes_treeids": [0, 0, 0],
        "nodes_nodeids": [0, 1, 2],
        "nodes_modes": ["BRANCH_LEQ", "LEAF", "LEAF"],
        "nodes_featureids": [0, 0, 0],
        "nodes_values": [threshold, 0.0, 0.0],
        "nodes_truenodeids": [1, 0, 0],
        "nodes_falsenodeids": [2, 0, 0],
    }
    node = helper.make_node(
        "TreeEnsembleClassifier",
        [source],
        ["label", "probabilities"],
        domain="ai.onnx.ml",
        class_treeids=[0, 0],
        class_nodeids=[1, 2],
        class_ids=[0, 0],
        class_weights=list(leaves),
        post_transform=post,
        classlabels_int64s=[0, 1],
        base_values=[base],
        **split,
    )
    inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 2])]
    outputs = [
        helper.make_tensor_value_info("label", TensorProto.INT64, [None]),
        helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [None, 2]),
    ]
    graph = helper.make_graph([*nodes, node], "g", inputs, outputs)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)])
    return OnnxModel(proto, "y")


def _exact_alone(problem: CounterfactualProblem) -> Any:
    from counterplan.solver.core.config import SolverConfig
    from counterplan.solver.exact.config import ExactPhaseConfig

    return explain(problem, SolverConfig(phases=(ExactPhaseConfig(),)), seed=0)


def test_a_probability_the_graph_sums_outside_zero_and_one_is_no_answer_of_the_program() -> None:
    """Class 1's probability is the leaf plus -0.5: -0.4 left of the split (a row the calculator
    fails), 0.4 right of it. Class 0 at 0.9 is out of reach: proven so, where the program answered
    the left side and the graph rejected it after every retry."""
    model = _one_split_classifier((0.1, 0.9), "NONE", base=-0.5)
    features = [
        FloatFeature(name="x0", value=1.0, low=0.0, high=2.0),
        FloatFeature(name="x1", value=0.0, low=0.0, high=1.0),
    ]
    problem = CounterfactualProblem(features, [ClassGoal(target=0, confidence=0.9)], model)
    result = _exact_alone(problem)
    exact = result.statistics.exact
    assert exact is not None and not result.valid
    assert exact.status == "infeasible" and exact.proven, exact


def test_an_optimum_the_graph_rejects_after_every_retry_says_so() -> None:
    """x0 near 1e6 is rounded to float32 (steps of 0.0625) before the Scaler subtracts 999999.5:
    the margins (relative to the split at 1) are too narrow, and the report said ``optimal``, not
    proven, with no reason."""
    model = _one_split_classifier((-3.0, 3.0), "LOGISTIC", threshold=1.0, offset=999999.5)
    features = [
        FloatFeature(name="x0", value=1e6, low=999000.0, high=1001000.0),
        FloatFeature(name="x1", value=0.0, low=0.0, high=1.0),
    ]
    result = _exact_alone(CounterfactualProblem(features, [ClassGoal(target=1, confidence=0.9)], model))
    exact = result.statistics.exact
    assert exact is not None and not exact.proven
    assert "the real model rejected the program's answer" in exact.reason, exact


@pytest.mark.parametrize("batch", [1, 3])
def test_a_graph_of_a_fixed_batch_size_is_run_in_chunks_of_it(batch: int) -> None:
    """An export's ``[1, F]`` (or ``[3, F]``) input: the graph failed on every batch the search
    sent, and the solve stopped without an answer."""
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import FloatTensorType

    frame, label, _ = _data()
    X = frame.to_numpy()
    model = GradientBoostingClassifier(n_estimators=10, max_depth=3, random_state=0).fit(X, label)
    options = {id(model): {"zipmap": False}}
    fixed = OnnxModel(convert_sklearn(model, initial_types=[("X", FloatTensorType([batch, 3]))], options=options), "ok")
    free = OnnxModel(_to_onnx(model, X), "ok")
    problem = _problem(fixed)
    rows = X[:7]  # not a multiple of 3: the last chunk is filled up
    np.testing.assert_array_equal(fixed.predict(rows, problem.space)["ok"], free.predict(rows, problem.space)["ok"])
    result = explain(problem, engine="local", seed=0)
    assert result.valid and _proba_by_hand(free, result.proposed, NUMBERS)[1] >= 0.7
