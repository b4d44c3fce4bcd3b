"""What kind of model an estimator is, answered in one place.

The engine chooser asks "is it linear?" (a linear model's program is small, so ``auto`` tries the
exact engine whatever its size), the exact engine's registry asks which encoder reads it, the fast
path asks which evaluator can run its trees, and the split values ask whether it has thresholds.
The families are named by class name, so asking never imports XGBoost or LightGBM.
"""

from __future__ import annotations

import inspect
from typing import Any

LINEAR_CLASSIFIERS = (
    "LogisticRegression",
    "LogisticRegressionCV",
    "SGDClassifier",
    "LinearSVC",
    "RidgeClassifier",
)
"""Linear classifiers the exact engine encodes."""
LABEL_ONLY = ("LinearSVC", "RidgeClassifier")
"""Linear classifiers without probabilities: the predicted label is the side of the hyperplane."""
LINEAR_REGRESSORS = (
    "LinearRegression",
    "Ridge",
    "RidgeCV",
    "Lasso",
    "LassoCV",
    "ElasticNet",
    "ElasticNetCV",
    "SGDRegressor",
    "HuberRegressor",
    "BayesianRidge",
)
"""Linear regressors the exact engine encodes."""
ONNX_LINEAR_CLASSIFIERS = ("OnnxLinearClassifier",)
ONNX_LINEAR_REGRESSORS = ("OnnxLinearRegressor",)
"""An ONNX graph's ``LinearClassifier``/``LinearRegressor`` node, read by
:mod:`counterplan.planning.structure.onnx` into scikit-learn's ``coef_`` and ``intercept_``."""
NETWORKS = ("MLPClassifier", "MLPRegressor")
"""scikit-learn's feed-forward networks."""
BAGGED_TREES = (
    "RandomForestClassifier",
    "RandomForestRegressor",
    "ExtraTreesClassifier",
    "ExtraTreesRegressor",
    "DecisionTreeClassifier",
    "DecisionTreeRegressor",
    "ExtraTreeClassifier",
    "ExtraTreeRegressor",
)
"""Averaged trees (and single trees): each tree's leaf values are the prediction's parts."""
HIST_GRADIENT_BOOSTING = ("HistGradientBoostingClassifier", "HistGradientBoostingRegressor")
GRADIENT_BOOSTING = ("GradientBoostingClassifier", "GradientBoostingRegressor")
XGBOOST = ("XGBClassifier", "XGBRegressor")
LIGHTGBM = ("LGBMClassifier", "LGBMRegressor")
ONNX_TREES = ("OnnxTreeEnsemble",)
"""An ONNX graph's ``TreeEnsemble*`` node, read by :mod:`counterplan.planning.structure.onnx`."""
TREE_ENSEMBLES = BAGGED_TREES + HIST_GRADIENT_BOOSTING + GRADIENT_BOOSTING + XGBOOST + LIGHTGBM + ONNX_TREES
"""Every tree family :func:`counterplan.planning.structure.trees.read_ensemble` reads."""


def kind_name(estimator: Any) -> str:
    """The estimator's class name: what the families above are keyed by."""
    return type(estimator).__name__


PREDICTION_METHODS = ("predict", "predict_proba", "decision_function")
"""How a model is asked (the adapters call the first two): a pipeline class that writes its own
is no composition of its steps."""
LIBRARY_MODULES = ("sklearn.", "imblearn.")
"""Where the pipeline classes whose predictions are their steps' come from."""


def pipeline_steps(model: Any) -> list[Any] | None:
    """The ``(name, step)`` list of a pipeline whose predictions are its steps': a scikit-learn
    ``Pipeline``, or a subclass that keeps its prediction methods (:data:`PREDICTION_METHODS`).
    None for a bare estimator, and for a subclass that writes one of them (a calibration, a rule
    put over the estimator's answer): the readers would describe its steps, not what it answers,
    so the fast path and the exact engine would search another model than the one asked."""
    steps = getattr(model, "steps", None)
    if not steps:
        return None
    kind = type(model)
    stock = next((c for c in kind.__mro__ if c.__module__.startswith(LIBRARY_MODULES)), None)
    if stock is None or stock is kind:
        return list(steps)
    for method in PREDICTION_METHODS:
        if inspect.getattr_static(kind, method, None) is not inspect.getattr_static(stock, method, None):
            return None
    return list(steps)


def final_estimator(model: Any) -> Any:
    """The last step of a pipeline (:func:`pipeline_steps`), or the model itself."""
    steps = pipeline_steps(model)
    return steps[-1][1] if steps else model


def model_estimator(adapter: Any) -> Any:
    """The estimator the structure readers read for a model adapter: the final estimator of a
    scikit-learn adapter's model, the node of an ONNX graph (an adapter with ``structure()``,
    :class:`counterplan.planning.onnx_model.OnnxModel`; None when the graph cannot be read), else
    None."""
    structure = getattr(adapter, "structure", None)
    if callable(structure):
        try:
            return structure().estimator
        except (ValueError, ImportError):  # NotEncodableError: a graph the reader refuses; onnx missing
            return None
    return final_estimator(getattr(adapter, "model", None))


def is_linear(estimator: Any) -> bool:
    """Linear coefficients and no hidden layers: its output is an affine function of its input
    columns (through a link). Any such estimator, not only the ones the exact engine encodes."""
    return hasattr(estimator, "coef_") and not hasattr(estimator, "coefs_")


def is_network(estimator: Any) -> bool:
    """A scikit-learn feed-forward network."""
    return kind_name(estimator) in NETWORKS


def is_tree_ensemble(estimator: Any) -> bool:
    """A tree or an ensemble of trees of a family the tree reader knows."""
    return kind_name(estimator) in TREE_ENSEMBLES


__all__ = [
    "BAGGED_TREES",
    "GRADIENT_BOOSTING",
    "HIST_GRADIENT_BOOSTING",
    "LABEL_ONLY",
    "LIGHTGBM",
    "LINEAR_CLASSIFIERS",
    "LINEAR_REGRESSORS",
    "NETWORKS",
    "ONNX_LINEAR_CLASSIFIERS",
    "ONNX_LINEAR_REGRESSORS",
    "ONNX_TREES",
    "TREE_ENSEMBLES",
    "XGBOOST",
    "final_estimator",
    "is_linear",
    "is_network",
    "is_tree_ensemble",
    "kind_name",
    "model_estimator",
]
