"""What kind of model an estimator is, answered in one place: linear, network, tree ensemble, by
class name (never importing XGBoost or LightGBM to ask)."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pytest
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestRegressor
from sklearn.linear_model import LinearRegression, LogisticRegression, Perceptron
from sklearn.neighbors import KNeighborsClassifier
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC, LinearSVC
from sklearn.utils import all_estimators

from counterplan.planning.structure import kind

pytestmark = pytest.mark.unit

X = np.random.default_rng(0).normal(size=(60, 3))
Y = (X[:, 0] > 0).astype(int)


@pytest.mark.parametrize(
    ("estimator", "linear", "network", "trees"),
    [
        (LogisticRegression(), True, False, False),
        (LinearSVC(), True, False, False),
        (Perceptron(), True, False, False),
        (SVC(kernel="linear"), True, False, False),
        (SVC(kernel="rbf"), False, False, False),
        (MLPClassifier(hidden_layer_sizes=(3,), max_iter=20), False, True, False),
        (HistGradientBoostingClassifier(max_iter=3), False, False, True),
        (KNeighborsClassifier(3), False, False, False),
    ],
    ids=lambda value: type(value).__name__ if not isinstance(value, bool) else str(value),
)
def test_the_kind_of_a_fitted_estimator(estimator: Any, linear: bool, network: bool, trees: bool) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        estimator.fit(X, Y)
    assert kind.is_linear(estimator) is linear
    assert kind.is_network(estimator) is network
    assert kind.is_tree_ensemble(estimator) is trees


def test_the_final_estimator_of_a_pipeline_or_a_bare_model() -> None:
    model = Pipeline([("scale", StandardScaler()), ("model", LinearRegression())]).fit(X, X[:, 0])
    assert kind.final_estimator(model) is model[-1]
    forest = RandomForestRegressor(n_estimators=2)
    assert kind.final_estimator(forest) is forest
    assert kind.final_estimator(None) is None and not kind.is_linear(None)


def test_every_scikit_learn_family_name_is_a_real_estimator() -> None:
    names = {name for name, _ in all_estimators()}
    scikit = (
        kind.LINEAR_CLASSIFIERS
        + kind.LINEAR_REGRESSORS
        + kind.NETWORKS
        + kind.BAGGED_TREES
        + kind.HIST_GRADIENT_BOOSTING
        + kind.GRADIENT_BOOSTING
    )
    assert set(scikit) <= names
    assert set(kind.LABEL_ONLY) <= set(kind.LINEAR_CLASSIFIERS)
    assert set(kind.TREE_ENSEMBLES) == set(
        kind.BAGGED_TREES
        + kind.HIST_GRADIENT_BOOSTING
        + kind.GRADIENT_BOOSTING
        + kind.XGBOOST
        + kind.LIGHTGBM
        + kind.ONNX_TREES  # an ONNX graph's trees (issue 30), read from the graph
    )


def test_asking_never_imports_the_boosting_libraries() -> None:
    code = (
        "import sys; from counterplan.planning.structure import kind, trees, pipeline, cache;"
        " kind.is_tree_ensemble(object()); print('xgboost' in sys.modules, 'lightgbm' in sys.modules)"
    )
    import subprocess

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
