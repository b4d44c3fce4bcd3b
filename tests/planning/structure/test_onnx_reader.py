"""The exact engine's reader of ONNX tree nodes against onnxruntime itself, on hand-built graphs:
every graph it accepts must answer as onnxruntime does (class probabilities, a regressor's value,
each split's side at float32 boundaries), and every variant it does not read exactly is refused
by name. The cases are the ONNX fuzz's findings (graphs converters do not write, but a hand-written
converter may)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from counterplan.planning import FloatFeature, IntegerFeature
from counterplan.planning.errors import ModelAdapterError
from counterplan.planning.space import FeatureSpace
from counterplan.planning.structure.errors import NotEncodableError

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402 - after the skip: needs the onnx extra

from counterplan.planning.onnx_model import OnnxModel  # noqa: E402
from counterplan.planning.structure.onnx import input_features, read_graph  # noqa: E402

pytestmark = pytest.mark.unit

LEAVES = {"nodes_modes": ["BRANCH_LEQ", "LEAF", "LEAF"], "nodes_featureids": [0, 0, 0], "nodes_values": [0.5, 0, 0]}
"""One split on x0 at 0.5: node 1 is the low side's leaf, node 2 the high side's."""


def _tree_attributes(mode: str = "BRANCH_LEQ", threshold: float = 0.5, tracks: int = 0) -> dict[str, Any]:
    return {
        "nodes_treeids": [0, 0, 0],
        "nodes_nodeids": [0, 1, 2],
        "nodes_modes": [mode, "LEAF", "LEAF"],
        "nodes_featureids": [0, 0, 0],
        "nodes_values": [threshold, 0.0, 0.0],
        "nodes_truenodeids": [1, 0, 0],
        "nodes_falsenodeids": [2, 0, 0],
        "nodes_missing_value_tracks_true": [tracks, 0, 0],
    }


def _graph(
    node: Any, outputs: list[Any], input_type: int = TensorProto.FLOAT, before: list[Any] | None = None
) -> bytes:
    inputs = [helper.make_tensor_value_info("X", input_type, [None, 2])]
    graph = helper.make_graph([*(before or []), node], "g", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)])
    model.ir_version = 8
    return bytes(model.SerializeToString())


def _classifier(leaves: list[tuple[int, int, float]], post: str = "NONE", **extra: Any) -> bytes:
    """A binary classifier of one tree; ``leaves``: (node, class, weight) entries."""
    node = helper.make_node(
        "TreeEnsembleClassifier",
        ["X"],
        ["label", "probabilities"],
        domain="ai.onnx.ml",
        name="T",
        class_treeids=[0] * len(leaves),
        class_nodeids=[n for n, _, _ in leaves],
        class_ids=[k for _, k, _ in leaves],
        class_weights=[w for _, _, w in leaves],
        classlabels_int64s=[0, 1],
        post_transform=post,
        **{**_tree_attributes(), **extra},
    )
    outputs = [
        helper.make_tensor_value_info("label", TensorProto.INT64, [None]),
        helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [None, 2]),
    ]
    return _graph(node, outputs)


def _onnxruntime(data: bytes, output: str, rows: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    feed = rows.astype(np.float32 if session.get_inputs()[0].type == "tensor(float)" else np.float64)
    return np.asarray(session.run([output], {"X": feed})[0], dtype=np.float64)


def _read(data: bytes, output: str, rows: np.ndarray) -> np.ndarray:
    """What the reader's trees say at ``rows``: both class probabilities, or the value."""
    ensemble = read_graph(data, output).estimator.ensemble  # type: ignore[union-attr]
    assert ensemble.offset is not None  # an ONNX node states its offset
    answers = []
    for row in rows:
        z = ensemble.offset + ensemble.total(row)
        if ensemble.link == "value":
            answers.append([z[0]])
            continue
        p = 1.0 / (1.0 + np.exp(-z[0])) if ensemble.link == "logit" else z[0]
        answers.append([1.0 - p, p])
    return np.asarray(answers)


ROWS = np.array([[0.0, 0.0], [1.0, 0.0], [np.nan, 0.0]])


def test_a_binary_graph_scoring_class_0_only_with_two_base_values_is_refused() -> None:
    """onnxruntime answers class 0's logistic score and a constant 0.5 for class 1: no logit."""
    data = _classifier([(1, 0, -2.0), (2, 0, 2.0)], post="LOGISTIC", base_values=[0.3, -0.2])
    assert np.allclose(_onnxruntime(data, "probabilities", ROWS)[:, 1], 0.5)
    with pytest.raises(NotEncodableError, match="class 0 only, with 2 base_values"):
        read_graph(data, "probabilities")
    one = _classifier([(1, 0, -2.0), (2, 0, 2.0)], post="LOGISTIC", base_values=[0.3])
    assert np.allclose(_read(one, "probabilities", ROWS), _onnxruntime(one, "probabilities", ROWS), atol=1e-6)


@pytest.mark.parametrize(
    "leaves",
    [
        [(1, 0, 1.0), (2, 0, 0.3), (2, 1, 0.7)],  # a pure leaf scoring class 0 alone: onnxruntime says class 1
        [(1, 0, 0.6), (1, 1, 0.6), (2, 0, 0.2), (2, 1, 0.8)],  # scores that add up to 1.2 on the low side
    ],
    ids=["a leaf without class 1", "not complements"],
)
def test_a_binary_graph_scoring_both_classes_is_read_only_when_they_are_complements(
    leaves: list[tuple[int, int, float]],
) -> None:
    data = _classifier(leaves)
    with pytest.raises(NotEncodableError, match="not complements"):
        read_graph(data, "probabilities")
    forest = _classifier([(1, 0, 0.7), (1, 1, 0.3), (2, 0, 0.0), (2, 1, 1.0)])
    assert np.allclose(_read(forest, "probabilities", ROWS), _onnxruntime(forest, "probabilities", ROWS), atol=1e-6)


def test_a_pure_leaf_scoring_class_0_alone_is_not_class_0_for_onnxruntime() -> None:
    """Why the check above: where no leaf reached scores class 1, onnxruntime answers class 0's
    sum as a one-column model's (-s, s), not the two sums (1, 0) the reader would have said."""
    data = _classifier([(1, 0, 1.0), (2, 0, 0.3), (2, 1, 0.7)])
    assert _onnxruntime(data, "probabilities", np.array([[0.0, 0.0]]))[0].tolist() == [-1.0, 1.0]


@pytest.mark.parametrize("mode", ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT"])
@pytest.mark.parametrize("tracks", [0, 1])
def test_every_split_mode_decides_as_onnxruntime_at_float32_boundaries_and_missing_values(
    mode: str, tracks: int
) -> None:
    threshold = float(np.float32(0.1))
    node = helper.make_node(
        "TreeEnsembleRegressor",
        ["X"],
        ["variable"],
        domain="ai.onnx.ml",
        n_targets=1,
        target_treeids=[0, 0],
        target_nodeids=[1, 2],
        target_ids=[0, 0],
        target_weights=[1.0, 2.0],
        base_values=[0.25],
        **_tree_attributes(mode, threshold, tracks),
    )
    data = _graph(node, [helper.make_tensor_value_info("variable", TensorProto.FLOAT, [None, 1])])
    below, above = np.nextafter(np.array([threshold] * 2, dtype=np.float32), np.array([-1.0, 1.0], dtype=np.float32))
    values = [threshold, float(below), float(above), 0.1, 0.1 + 1e-9, 0.1 - 1e-9, np.nan]
    rows = np.array([[v, 0.0] for v in values])
    assert np.allclose(_read(data, "variable", rows), _onnxruntime(data, "variable", rows), atol=1e-6)


def test_a_float_input_cast_to_double_is_compared_as_float32_by_a_tree_of_double_thresholds() -> None:
    """onnxruntime compares 0.1 rounded to float32 (0.100000001) with the double 0.1: right of it."""
    thresholds = helper.make_tensor("values", TensorProto.DOUBLE, [3], [0.1, 0.0, 0.0])
    attributes = {k: v for k, v in _tree_attributes().items() if k != "nodes_values"}
    node = helper.make_node(
        "TreeEnsembleRegressor",
        ["Xd"],
        ["variable"],
        domain="ai.onnx.ml",
        n_targets=1,
        target_treeids=[0, 0],
        target_nodeids=[1, 2],
        target_ids=[0, 0],
        target_weights=[0.0, 1.0],
        nodes_values_as_tensor=thresholds,
        **attributes,
    )
    cast = helper.make_node("Cast", ["X"], ["Xd"], to=TensorProto.DOUBLE)
    data = _graph(node, [helper.make_tensor_value_info("variable", TensorProto.FLOAT, [None, 1])], before=[cast])
    rows = np.array([[0.1, 0.0], [0.09999999, 0.0], [0.2, 0.0]])
    assert _onnxruntime(data, "variable", rows).ravel().tolist() == [1.0, 0.0, 1.0]
    tree = read_graph(data, "variable").estimator.ensemble.trees[0]  # type: ignore[union-attr]
    assert [tree.goes_left(0, float(v)) for v in rows[:, 0]] == [False, True, False]
    assert np.allclose(_read(data, "variable", rows), _onnxruntime(data, "variable", rows))


def _truncating_graph(per_column: bool) -> bytes:
    """A tree on x0 at 2.5 fed x0 as int64: by a ``Cast`` of the float matrix, or an int64 input."""
    attributes = {**_tree_attributes(threshold=2.5), "nodes_missing_value_tracks_true": [0, 0, 0]}
    node = helper.make_node(
        "TreeEnsembleRegressor",
        ["Xf"],
        ["variable"],
        domain="ai.onnx.ml",
        n_targets=1,
        target_treeids=[0, 0],
        target_nodeids=[1, 2],
        target_ids=[0, 0],
        target_weights=[0.0, 1.0],
        **attributes,
    )
    output = helper.make_tensor_value_info("variable", TensorProto.FLOAT, [None, 1])
    if per_column:
        inputs = [
            helper.make_tensor_value_info("x0", TensorProto.INT64, [None, 1]),
            helper.make_tensor_value_info("x1", TensorProto.FLOAT, [None, 1]),
        ]
        nodes = [
            helper.make_node("Cast", ["x0"], ["x0f"], to=TensorProto.FLOAT),
            helper.make_node("Concat", ["x0f", "x1"], ["Xf"], axis=1),
            node,
        ]
    else:
        inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 2])]
        nodes = [
            helper.make_node("Cast", ["X"], ["Xi"], to=TensorProto.INT64),
            helper.make_node("Cast", ["Xi"], ["Xf"], to=TensorProto.FLOAT),
            node,
        ]
    graph = helper.make_graph(nodes, "g", inputs, [output])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)])
    model.ir_version = 8
    return bytes(model.SerializeToString())


@pytest.mark.parametrize("per_column", [False, True], ids=["a cast to int64", "an int64 input"])
def test_a_float_feature_truncated_to_int64_is_refused_and_a_whole_number_is_read(per_column: bool) -> None:
    """onnxruntime truncates 2.9 to 2 (left of 2.5); the reader's identity said right of it."""
    data = _truncating_graph(per_column)
    rows = np.array([[2.9, 0.0]])
    if per_column:
        session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
        value = session.run(None, {"x0": np.array([[2]], np.int64), "x1": np.array([[0.0]], np.float32)})[0]
    else:
        value = _onnxruntime(data, "variable", rows)
    assert float(np.ravel(value)[0]) == 0.0  # the low side's leaf
    graph = read_graph(data, "variable")
    other = IntegerFeature(name="x1", value=0, low=0, high=6)
    with pytest.raises(NotEncodableError, match=r"x0.*not a whole number"):
        graph.describe(FeatureSpace([FloatFeature(name="x0", value=3.0, low=0.0, high=6.0), other]))
    columns = graph.describe(FeatureSpace([IntegerFeature(name="x0", value=3, low=0, high=6), other])).columns
    assert len(columns) == 2


def _linear(names: list[str], width: int, coefficients: list[float]) -> bytes:
    """A linear regressor of the inputs ``names`` (each ``[N, width]``), joined."""
    inputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, [None, width]) for name in names]
    nodes = [helper.make_node("Concat", names, ["joined"], axis=1)] if len(names) > 1 else []
    source = "joined" if len(names) > 1 else names[0]
    node = helper.make_node(
        "LinearRegressor", [source], ["variable"], domain="ai.onnx.ml", coefficients=coefficients, intercepts=[0.0]
    )
    output = helper.make_tensor_value_info("variable", TensorProto.FLOAT, [None, 1])
    graph = helper.make_graph([*nodes, node], "g", inputs, [output])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)])
    model.ir_version = 8
    return bytes(model.SerializeToString())


def _space(*names: str) -> FeatureSpace:
    return FeatureSpace([FloatFeature(name=name, value=float(k), low=-9.0, high=9.0) for k, name in enumerate(names)])


def test_a_matrix_input_named_after_a_feature_is_read_as_the_matrix_the_adapter_feeds() -> None:
    """The graph's one [N, 3] input is called ``x1``; the adapter feeds it the encoded matrix, so
    the node's column 0 is x0 (the reader took it for x1's column)."""
    data = _linear(["x1"], 3, [2.0, 0.0, 0.0])
    space = _space("x0", "x1", "x2")
    assert OnnxModel(data, "y").input_kind == "array"
    columns = read_graph(data, "variable").describe(space).columns
    assert [column.source for column in columns] == [0, 1, 2]


def test_an_input_whose_rewritten_name_is_two_features_is_fed_neither() -> None:
    """``a_b`` is ``a-b`` and ``a.b`` rewritten: the last one was fed, the other ignored."""
    assert input_features(["a_b"], ["a-b", "a.b"]) == ({}, ["a_b"])
    assert input_features(["a_b"], ["a-b", "c"]) == ({"a_b": "a-b"}, [])
    assert input_features(["a_b"], ["a-b", "a_b"]) == ({"a_b": "a_b"}, [])  # its own name first
    model = OnnxModel(_linear(["a_b"], 1, [1.0]), "y")
    space = _space("a-b", "a.b")
    with pytest.raises(ModelAdapterError, match=r"\['a_b'\] are not features, or name several"):
        model.predict(space.original.reshape(1, -1), space)
    with pytest.raises(NotEncodableError, match=r"\['a_b'\] are not features"):
        read_graph(_linear(["a_b"], 1, [1.0]), "variable").describe(space)
