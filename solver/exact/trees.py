"""Tree ensembles as plain arrays, read from scikit-learn (and XGBoost/LightGBM) models.

Every supported ensemble predicts ``offset + sum_t weight * value_t(leaf_t(x))``, where a tree
sends ``x`` left when ``x[feature] <= threshold`` (``<`` for XGBoost); a missing value follows the
node's missing direction. :func:`read_ensemble` returns the trees of one output, in that
form, and what the output means (a probability, a logit or a value); the offset is found
by the caller from the real model's prediction at the original instance, so baselines and
initial estimators need no special cases.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from counterplan.solver.exact.inputs import NotEncodableError

Link = Literal["probability", "logit", "value"]


@dataclass(frozen=True)
class Tree:
    """One tree: per node its feature (-1 at a leaf), threshold, children, missing direction and
    leaf value."""

    feature: npt.NDArray[np.intp]
    threshold: npt.NDArray[np.float64]
    left: npt.NDArray[np.intp]
    right: npt.NDArray[np.intp]
    missing_left: npt.NDArray[np.bool_]
    value: npt.NDArray[np.float64]
    """``(n_nodes, n_outputs)``: each leaf's contribution to each output (one output, or one per
    class of a multi-class model)."""
    strict: bool = False
    """True when ``x < threshold`` goes left (XGBoost), else ``x <= threshold``."""
    float32: bool = False
    """True when the model compares float32 inputs (scikit-learn's trees, XGBoost)."""

    def goes_left(self, node: int, x: float) -> bool:
        """The model's own decision at ``node`` for input value ``x``."""
        if np.isnan(x):
            return bool(self.missing_left[node])
        value = float(np.float32(x)) if self.float32 else x
        t = self.threshold[node]
        return bool(value < t) if self.strict else bool(value <= t)

    def leaf(self, row: npt.NDArray[np.float64]) -> int:
        """The leaf ``row`` (the model's input row) reaches."""
        node = 0
        while self.feature[node] >= 0:
            node = self.left[node] if self.goes_left(node, row[self.feature[node]]) else self.right[node]
        return int(node)


@dataclass(frozen=True)
class Ensemble:
    """Trees of one output, each weighted; ``link`` says what their sum (plus an offset) is."""

    trees: list[Tree]
    weight: float
    link: Link
    description: str

    def total(self, row: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """Per output, ``weight * sum of leaf values`` at ``row``, without the offset."""
        total: npt.NDArray[np.float64] = self.weight * np.sum([t.value[t.leaf(row)] for t in self.trees], axis=0)
        return total

    @property
    def outputs(self) -> int:
        """1, or the number of classes of a multi-class model."""
        return int(self.trees[0].value.shape[1])


def _sklearn_tree(tree: Any, columns: list[int] | None, normalise: bool) -> Tree:
    t = tree.tree_
    values = np.asarray(t.value, dtype=np.float64)[:, 0, :]
    if normalise:
        totals = values.sum(axis=1, keepdims=True)
        values = np.divide(values, totals, out=np.zeros_like(values), where=totals > 0)
    missing = getattr(t, "missing_go_to_left", None)
    n = t.node_count
    return Tree(
        feature=np.where(t.children_left < 0, -1, t.feature).astype(np.intp),
        threshold=np.asarray(t.threshold, dtype=np.float64),
        left=np.asarray(t.children_left, dtype=np.intp),
        right=np.asarray(t.children_right, dtype=np.intp),
        missing_left=np.asarray(missing, dtype=bool) if missing is not None else np.zeros(n, dtype=bool),
        value=(values if columns is None else values[:, columns]).copy(),
        float32=True,
    )


def _classes(estimator: Any) -> int:
    classes = getattr(estimator, "classes_", None)
    return 0 if classes is None else len(classes)


def _one_hot_value(tree: Tree, k: int, n: int) -> Tree:
    """``tree``'s one output as column ``k`` of ``n`` (a boosted tree of one class)."""
    value = np.zeros((tree.value.shape[0], n))
    value[:, k] = tree.value[:, 0]
    return Tree(
        tree.feature, tree.threshold, tree.left, tree.right, tree.missing_left, value, tree.strict, tree.float32
    )


def read_ensemble(estimator: Any) -> Ensemble:
    """The trees of ``estimator``'s output: class 1's probability or logit (one output), every
    class's (one output per class of a multi-class model), or the value."""
    kind = type(estimator).__name__
    classifier = hasattr(estimator, "classes_")
    n_classes = _classes(estimator)
    columns = None if n_classes > 2 else [1]  # binary: class 1's probability
    if kind in ("DecisionTreeClassifier", "ExtraTreeClassifier"):
        return Ensemble([_sklearn_tree(estimator, columns, True)], 1.0, "probability", kind)
    if kind in ("DecisionTreeRegressor", "ExtraTreeRegressor"):
        _single_output(estimator)
        return Ensemble([_sklearn_tree(estimator, [0], False)], 1.0, "value", kind)
    if kind in ("RandomForestClassifier", "ExtraTreesClassifier"):
        trees = [_sklearn_tree(e, columns, True) for e in estimator.estimators_]
        return Ensemble(trees, 1.0 / len(trees), "probability", f"{kind} ({len(trees)} trees)")
    if kind in ("RandomForestRegressor", "ExtraTreesRegressor"):
        _single_output(estimator)
        trees = [_sklearn_tree(e, [0], False) for e in estimator.estimators_]
        return Ensemble(trees, 1.0 / len(trees), "value", f"{kind} ({len(trees)} trees)")
    if kind in ("GradientBoostingClassifier", "GradientBoostingRegressor"):
        if classifier and getattr(estimator, "loss", "log_loss") not in ("log_loss", "deviance"):
            raise NotEncodableError(f"{kind} with loss {estimator.loss!r}: only log_loss has a logistic link")
        if not classifier and getattr(estimator, "loss", "squared_error") not in (
            "squared_error",
            "absolute_error",
            "huber",
            "quantile",
        ):
            raise NotEncodableError(f"{kind} with loss {estimator.loss!r}")
        stages = estimator.estimators_
        if stages.shape[1] > 1:  # one tree per class per stage
            trees = [
                _one_hot_value(_sklearn_tree(e, [0], False), k, stages.shape[1])
                for row in stages
                for k, e in enumerate(row)
            ]
        else:
            trees = [_sklearn_tree(e, [0], False) for e in stages[:, 0]]
        link: Link = "logit" if classifier else "value"
        return Ensemble(trees, float(estimator.learning_rate), link, f"{kind} ({len(trees)} trees)")
    if kind in ("HistGradientBoostingClassifier", "HistGradientBoostingRegressor"):
        return _hist(estimator, kind, classifier)
    if n_classes > 2:
        raise NotEncodableError(f"a multi-class {kind}: the exact engine reads scikit-learn's multi-class ensembles")
    if kind in ("XGBClassifier", "XGBRegressor"):
        return _xgboost(estimator, kind, classifier)
    if kind in ("LGBMClassifier", "LGBMRegressor"):
        return _lightgbm(estimator, kind, classifier)
    raise NotEncodableError(f"{kind} is not a tree ensemble the exact engine reads")


def _single_output(estimator: Any) -> None:
    if getattr(estimator, "n_outputs_", 1) != 1:
        raise NotEncodableError(f"{type(estimator).__name__} has several outputs")


def _hist(estimator: Any, kind: str, classifier: bool) -> Ensemble:
    if getattr(estimator, "is_categorical_", None) is not None and np.any(estimator.is_categorical_):
        raise NotEncodableError(f"{kind} with native categorical splits")
    if not classifier and getattr(estimator, "loss", "squared_error") not in (
        "squared_error",
        "absolute_error",
        "quantile",
    ):
        raise NotEncodableError(f"{kind} with loss {estimator.loss!r} (its link is not the identity)")
    trees = []
    for predictors in estimator._predictors:
        for k, predictor in enumerate(predictors):
            nodes = predictor.nodes
            leaf = nodes["is_leaf"].astype(bool)
            tree = Tree(
                feature=np.where(leaf, -1, nodes["feature_idx"]).astype(np.intp),
                threshold=nodes["num_threshold"].astype(np.float64),
                left=nodes["left"].astype(np.intp),
                right=nodes["right"].astype(np.intp),
                missing_left=nodes["missing_go_to_left"].astype(bool),
                value=nodes["value"].astype(np.float64).reshape(-1, 1),
            )
            trees.append(_one_hot_value(tree, k, len(predictors)) if len(predictors) > 1 else tree)
    return Ensemble(trees, 1.0, "logit" if classifier else "value", f"{kind} ({len(trees)} trees)")


def _xgboost(estimator: Any, kind: str, classifier: bool) -> Ensemble:
    booster = estimator.get_booster()
    if classifier and getattr(estimator, "objective", "binary:logistic") != "binary:logistic":
        raise NotEncodableError(f"{kind} with objective {estimator.objective!r}")
    names = booster.feature_names
    trees = []
    for text in booster.get_dump(dump_format="json", with_stats=False):
        trees.append(_xgboost_tree(json.loads(text), names))
    return Ensemble(trees, 1.0, "logit" if classifier else "value", f"{kind} ({len(trees)} trees)")


def _xgboost_tree(root: dict[str, Any], names: list[str] | None) -> Tree:
    nodes: dict[int, dict[str, Any]] = {}
    stack = [root]
    while stack:
        node = stack.pop()
        nodes[int(node["nodeid"])] = node
        stack.extend(node.get("children", []))
    n = max(nodes) + 1
    feature = np.full(n, -1, dtype=np.intp)
    threshold = np.zeros(n)
    left = np.full(n, -1, dtype=np.intp)
    right = np.full(n, -1, dtype=np.intp)
    missing_left = np.zeros(n, dtype=bool)
    value = np.zeros(n)
    for i, node in nodes.items():
        if "leaf" in node:
            value[i] = float(node["leaf"])
            continue
        split = node["split"]
        feature[i] = names.index(split) if names is not None and split in names else int(str(split).lstrip("f"))
        threshold[i] = float(np.float32(node["split_condition"]))  # the dump prints float32 values rounded
        left[i], right[i] = int(node["yes"]), int(node["no"])
        missing_left[i] = int(node["missing"]) == int(node["yes"])
    return Tree(feature, threshold, left, right, missing_left, value.reshape(-1, 1), strict=True, float32=True)


def _lightgbm(estimator: Any, kind: str, classifier: bool) -> Ensemble:
    dump = estimator.booster_.dump_model()
    if classifier and dump.get("objective", "binary").split()[0] != "binary":
        raise NotEncodableError(f"{kind} with objective {dump.get('objective')!r}")
    trees = [_lightgbm_tree(info["tree_structure"]) for info in dump["tree_info"]]
    return Ensemble(trees, 1.0, "logit" if classifier else "value", f"{kind} ({len(trees)} trees)")


def _lightgbm_tree(root: dict[str, Any]) -> Tree:
    feature: list[int] = []
    threshold: list[float] = []
    left: list[int] = []
    right: list[int] = []
    missing_left: list[bool] = []
    value: list[float] = []

    def visit(node: dict[str, Any]) -> int:
        i = len(feature)
        feature.append(-1)
        threshold.append(0.0)
        left.append(-1)
        right.append(-1)
        missing_left.append(False)
        value.append(float(node.get("leaf_value", 0.0)))
        if "split_feature" in node:
            if node.get("decision_type", "<=") != "<=":
                raise NotEncodableError("LightGBM categorical splits")
            feature[i] = int(node["split_feature"])
            threshold[i] = float(node["threshold"])
            missing_left[i] = bool(node.get("default_left", True)) and node.get("missing_type") != "None"
            left[i] = visit(node["left_child"])
            right[i] = visit(node["right_child"])
        return i

    visit(root)
    return Tree(
        np.array(feature, dtype=np.intp),
        np.array(threshold),
        np.array(left, dtype=np.intp),
        np.array(right, dtype=np.intp),
        np.array(missing_left, dtype=bool),
        np.array(value).reshape(-1, 1),
    )
