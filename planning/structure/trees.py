"""One reader of tree ensembles (scikit-learn, XGBoost, LightGBM) into plain arrays.

Every supported ensemble predicts ``offset + sum_t weight * value_t(leaf_t(x))``, where a tree
sends ``x`` left when ``x[feature] <= threshold`` (``<`` for XGBoost), and a missing value follows
the node's missing direction. A :class:`Tree` holds one tree in that form: per node its feature
(-1 at a leaf), threshold, children (-1 at a leaf), missing direction and leaf values.

* :func:`read_boosting` reads scikit-learn's boosted trees in scikit-learn's own order and leaf
  values, for the fast path's QuickScorer, which must add them up exactly as scikit-learn does.
* :func:`read_ensemble` reads the trees behind one model output and says what their sum means (a
  probability, a logit or a value), for the exact engine and the split values; the offset is left
  to the caller (the real model's prediction at one row minus the trees' sum there), so baselines
  and initial estimators need no special cases. A model whose output the sum does not give (a
  loss with another link, categorical splits, several outputs) is refused by name.

XGBoost and LightGBM are read from their estimators' own dumps, never imported.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from counterplan.planning.structure.errors import NotEncodableError
from counterplan.planning.structure.kind import (
    BAGGED_TREES,
    GRADIENT_BOOSTING,
    HIST_GRADIENT_BOOSTING,
    LIGHTGBM,
    ONNX_TREES,
    XGBOOST,
    kind_name,
)

Link = Literal["probability", "logit", "value"]

FLOAT32_MARGIN = 2.0**-19
"""Relative margin on each side of a float32 threshold: 16 units in the last place, so rounding
the input to float32 never crosses the threshold."""
FLOAT64_MARGIN = 1e-9
"""Relative margin on each side of a float64 threshold."""


@dataclass(frozen=True)
class Tree:
    """One tree: per node its feature (-1 at a leaf), threshold, children (-1 at a leaf), missing
    direction and leaf values."""

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

    @property
    def splits(self) -> npt.NDArray[np.bool_]:
        """Which nodes split (the others are leaves)."""
        return self.feature >= 0


@dataclass(frozen=True)
class Ensemble:
    """Trees of one output, each weighted; ``link`` says what their sum (plus an offset) is."""

    trees: list[Tree]
    weight: float
    link: Link
    description: str
    offset: npt.NDArray[np.float64] | None = None
    """Per output, what the model adds to the trees' sum, when the model states it (an ONNX
    graph's ``base_values``); None: the caller computes it from the real model at one row."""

    def total(self, row: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """Per output, ``weight * sum of leaf values`` at ``row``, without the offset."""
        total: npt.NDArray[np.float64] = self.weight * np.sum([t.value[t.leaf(row)] for t in self.trees], axis=0)
        return total

    @property
    def outputs(self) -> int:
        """1, or the number of classes of a multi-class model."""
        return int(self.trees[0].value.shape[1])


@dataclass(frozen=True)
class Boosting:
    """scikit-learn's boosted trees in its own order: iteration by iteration, ``per_iteration``
    trees each (one per class of a multi-class model), each leaf adding ``rate * value[:, 0]``."""

    trees: list[Tree]
    per_iteration: int
    rate: float


def sklearn_tree(tree: Any, columns: list[int] | None = None, normalise: bool = False) -> Tree:
    """A fitted scikit-learn decision tree (``tree.tree_``): the value columns ``columns`` (all
    when None), normalised to class probabilities when ``normalise``."""
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


def _hist_tree(predictor: Any) -> Tree:
    nodes = predictor.nodes
    if nodes["is_categorical"].any():
        raise NotEncodableError("a HistGradientBoosting tree with native categorical splits")
    leaf = nodes["is_leaf"].astype(bool)
    return Tree(
        feature=np.where(leaf, -1, nodes["feature_idx"].astype(np.intp)),
        threshold=nodes["num_threshold"].astype(np.float64),
        left=np.where(leaf, -1, nodes["left"].astype(np.intp)),
        right=np.where(leaf, -1, nodes["right"].astype(np.intp)),
        missing_left=nodes["missing_go_to_left"].astype(bool),
        value=nodes["value"].astype(np.float64).reshape(-1, 1),
    )


def read_boosting(estimator: Any) -> Boosting:
    """The trees of a ``HistGradientBoosting*`` or ``GradientBoosting*`` model, in scikit-learn's
    order, with their raw leaf values and the learning rate that scales them."""
    kind = kind_name(estimator)
    if kind in HIST_GRADIENT_BOOSTING:
        if getattr(estimator, "is_categorical_", None) is not None and np.any(estimator.is_categorical_):
            raise NotEncodableError(f"{kind} with native categorical splits")
        iterations = estimator._predictors
        trees = [_hist_tree(predictor) for predictors in iterations for predictor in predictors]
        return Boosting(trees, len(iterations[0]) if iterations else 1, 1.0)
    if kind in GRADIENT_BOOSTING:
        stages = estimator.estimators_
        trees = [sklearn_tree(e, [0]) for row in stages for e in row]
        return Boosting(trees, int(stages.shape[1]), float(estimator.learning_rate))
    raise NotEncodableError(f"{kind} is not one of scikit-learn's boosted ensembles")


def read_ensemble(estimator: Any) -> Ensemble:
    """The trees of ``estimator``'s output: class 1's probability or logit (one output), every
    class's (one output per class of a multi-class model), or the value."""
    try:
        return _read_ensemble(estimator)
    except NotEncodableError:
        raise
    except (AttributeError, IndexError, KeyError, TypeError, ValueError) as exc:  # a fitted layout not known here
        raise NotEncodableError(f"{kind_name(estimator)}: its trees are not understood ({exc})") from None


def _read_ensemble(estimator: Any) -> Ensemble:
    kind = kind_name(estimator)
    if kind in ONNX_TREES:  # read from the graph already (planning.structure.onnx)
        ensemble: Ensemble = estimator.ensemble
        return ensemble
    classifier = hasattr(estimator, "classes_")
    n_classes = _classes(estimator)
    if kind in BAGGED_TREES:
        return _bagged(estimator, kind, classifier, None if n_classes > 2 else [1])
    if kind in GRADIENT_BOOSTING or kind in HIST_GRADIENT_BOOSTING:
        _check_loss(estimator, kind, classifier)
        boosting = read_boosting(estimator)
        return _boosted(boosting, "logit" if classifier else "value", kind)
    if n_classes > 2:
        raise NotEncodableError(f"a multi-class {kind}: the exact engine reads scikit-learn's multi-class ensembles")
    if kind in XGBOOST:
        return _xgboost(estimator, kind, classifier)
    if kind in LIGHTGBM:
        return _lightgbm(estimator, kind, classifier)
    raise NotEncodableError(f"{kind} is not a tree ensemble the exact engine reads")


def _classes(estimator: Any) -> int:
    classes = getattr(estimator, "classes_", None)
    return 0 if classes is None else len(classes)


def _single_output(estimator: Any) -> None:
    if getattr(estimator, "n_outputs_", 1) != 1:
        raise NotEncodableError(f"{kind_name(estimator)} has several outputs")


def _bagged(estimator: Any, kind: str, classifier: bool, columns: list[int] | None) -> Ensemble:
    """A forest averages its trees (a single tree is a forest of one): class probabilities (the
    columns ``columns``, all when None) or the value."""
    if not classifier:
        _single_output(estimator)
    single = not hasattr(estimator, "estimators_")
    members = [estimator] if single else list(estimator.estimators_)
    trees = [sklearn_tree(e, columns if classifier else [0], classifier) for e in members]
    description = kind if single else f"{kind} ({len(trees)} trees)"
    return Ensemble(trees, 1.0 if single else 1.0 / len(trees), "probability" if classifier else "value", description)


IDENTITY_LOSSES = {
    "GradientBoostingRegressor": ("squared_error", "absolute_error", "huber", "quantile"),
    "HistGradientBoostingRegressor": ("squared_error", "absolute_error", "quantile"),
}
"""Regression losses whose raw prediction is the prediction (an identity link)."""


def _check_loss(estimator: Any, kind: str, classifier: bool) -> None:
    """Refuse a boosted model whose raw sum is not a logit (classifier) or the value (regressor)."""
    if (
        classifier
        and kind in GRADIENT_BOOSTING
        and getattr(estimator, "loss", "log_loss") not in ("log_loss", "deviance")
    ):
        raise NotEncodableError(f"{kind} with loss {estimator.loss!r}: only log_loss has a logistic link")
    if not classifier and getattr(estimator, "loss", "squared_error") not in IDENTITY_LOSSES[kind]:
        reason = " (its link is not the identity)" if kind in HIST_GRADIENT_BOOSTING else ""
        raise NotEncodableError(f"{kind} with loss {estimator.loss!r}{reason}")


def _boosted(boosting: Boosting, link: Link, kind: str) -> Ensemble:
    """Boosted trees as one ensemble: a multi-class model's trees each add to their class's output."""
    n = boosting.per_iteration
    trees = boosting.trees if n == 1 else [_one_hot_value(t, k % n, n) for k, t in enumerate(boosting.trees)]
    return Ensemble(trees, boosting.rate, link, f"{kind} ({len(trees)} trees)")


def _one_hot_value(tree: Tree, k: int, n: int) -> Tree:
    """``tree``'s one output as column ``k`` of ``n`` (a boosted tree of one class)."""
    value = np.zeros((tree.value.shape[0], n))
    value[:, k] = tree.value[:, 0]
    return replace(tree, value=value)


def _xgboost(estimator: Any, kind: str, classifier: bool) -> Ensemble:
    booster = estimator.get_booster()
    if classifier and getattr(estimator, "objective", "binary:logistic") != "binary:logistic":
        raise NotEncodableError(f"{kind} with objective {estimator.objective!r}")
    names = booster.feature_names
    trees = [_xgboost_tree(json.loads(text), names) for text in booster.get_dump(dump_format="json", with_stats=False)]
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
    """A LightGBM tree (nodes numbered depth first, left before right)."""
    columns: dict[str, list[Any]] = {
        "feature": [],
        "threshold": [],
        "left": [],
        "right": [],
        "missing": [],
        "value": [],
    }

    def visit(node: dict[str, Any]) -> int:
        i = len(columns["feature"])
        for name, empty in (("feature", -1), ("threshold", 0.0), ("left", -1), ("right", -1), ("missing", False)):
            columns[name].append(empty)
        columns["value"].append(float(node.get("leaf_value", 0.0)))
        if "split_feature" in node:
            if node.get("decision_type", "<=") != "<=":
                raise NotEncodableError("LightGBM categorical splits")
            columns["feature"][i] = int(node["split_feature"])
            columns["threshold"][i] = float(node["threshold"])
            columns["missing"][i] = bool(node.get("default_left", True)) and node.get("missing_type") != "None"
            columns["left"][i] = visit(node["left_child"])
            columns["right"][i] = visit(node["right_child"])
        return i

    visit(root)
    return Tree(
        np.array(columns["feature"], dtype=np.intp),
        np.array(columns["threshold"]),
        np.array(columns["left"], dtype=np.intp),
        np.array(columns["right"], dtype=np.intp),
        np.array(columns["missing"], dtype=bool),
        np.array(columns["value"]).reshape(-1, 1),
    )


__all__ = [
    "FLOAT32_MARGIN",
    "FLOAT64_MARGIN",
    "Boosting",
    "Ensemble",
    "Link",
    "Tree",
    "read_boosting",
    "read_ensemble",
    "sklearn_tree",
]
