"""The one tree reader, tested directly: for every family (scikit-learn's forests, trees and
boosting, XGBoost, LightGBM) the arrays it reads, evaluated leaf by leaf, give the model's own
output up to one constant offset (the baseline); scikit-learn's boosting read in its own order adds
up to its raw prediction exactly; what the sum cannot give is refused by name."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
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
from sklearn.neighbors import KNeighborsClassifier
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor, ExtraTreeRegressor
from threadpoolctl import threadpool_limits

from counterplan.planning.structure.errors import NotEncodableError
from counterplan.planning.structure.trees import Ensemble, read_boosting, read_ensemble

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Four numbers (the second with gaps for the models that learn them), a binary label, three
    classes and a value."""
    rng = np.random.default_rng(11)
    X = rng.normal(size=(400, 4))
    value = X[:, 0] * 2.0 - X[:, 1] + np.sin(X[:, 2]) + rng.normal(0.0, 0.1, 400)
    binary = (value > 0).astype(int)
    three = np.digitize(value, [-1.0, 1.0])
    return X, binary, three, value


def _raw(model: Any, X: np.ndarray, link: str) -> np.ndarray:
    """The model's own output in the ensemble's link (class 1's, or every class's)."""
    kind = type(model).__name__
    if link == "probability":
        proba = model.predict_proba(X)
        return proba if proba.shape[1] > 2 else proba[:, 1:]
    if link == "logit":
        if kind.startswith("XGB"):
            raw = model.predict(X, output_margin=True)
        elif kind.startswith("LGBM"):
            raw = model.predict(X, raw_score=True)
        else:
            raw = model.decision_function(X)
        return np.asarray(raw, dtype=np.float64).reshape(X.shape[0], -1)
    return np.asarray(model.predict(X), dtype=np.float64).reshape(-1, 1)


def _assert_read(model: Any, X: np.ndarray, link: str, rtol: float = 1e-9) -> Ensemble:
    """The trees' sum differs from the model's output by the same offset on every row."""
    ensemble = read_ensemble(model)
    assert ensemble.link == link
    totals = np.array([ensemble.total(row) for row in X])
    offsets = _raw(model, X, link) - totals
    np.testing.assert_allclose(offsets, np.broadcast_to(offsets[:1], offsets.shape), rtol=rtol, atol=rtol)
    for tree in ensemble.trees:  # the arrays' contract: -1 for a leaf's feature and children
        leaves = tree.feature < 0
        assert (tree.left[leaves] == -1).all() and (tree.right[leaves] == -1).all()
        assert (tree.left[~leaves] > 0).all() and (tree.right[~leaves] > 0).all()
    return ensemble


@pytest.mark.parametrize(
    ("make", "target", "link"),
    [
        (lambda: DecisionTreeClassifier(max_depth=5, random_state=0), "binary", "probability"),
        (lambda: RandomForestClassifier(n_estimators=8, max_depth=5, random_state=0), "binary", "probability"),
        (lambda: ExtraTreesClassifier(n_estimators=8, max_depth=5, random_state=0), "three", "probability"),
        (lambda: DecisionTreeRegressor(max_depth=5, random_state=0), "value", "value"),
        (lambda: ExtraTreeRegressor(max_depth=5, random_state=0), "value", "value"),
        (lambda: RandomForestRegressor(n_estimators=8, max_depth=5, random_state=0), "value", "value"),
        (lambda: ExtraTreesRegressor(n_estimators=8, max_depth=5, random_state=0), "value", "value"),
        (lambda: GradientBoostingClassifier(n_estimators=15, random_state=0), "binary", "logit"),
        (lambda: GradientBoostingClassifier(n_estimators=8, random_state=0), "three", "logit"),
        (lambda: GradientBoostingRegressor(n_estimators=15, random_state=0), "value", "value"),
        (lambda: HistGradientBoostingClassifier(max_iter=15, random_state=0), "binary", "logit"),
        (lambda: HistGradientBoostingClassifier(max_iter=8, random_state=0), "three", "logit"),
        (lambda: HistGradientBoostingRegressor(max_iter=15, random_state=0), "value", "value"),
    ],
    ids=[
        "decision tree",
        "random forest",
        "extra trees (three classes)",
        "regression tree",
        "extra tree regressor",
        "forest regressor",
        "extra trees regressor",
        "gradient boosting",
        "gradient boosting (three classes)",
        "gradient boosting regressor",
        "hist gradient boosting",
        "hist gradient boosting (three classes)",
        "hist gradient boosting regressor",
    ],
)
def test_each_scikit_learn_family_read_gives_the_models_output(make: Any, target: str, link: str, data: Any) -> None:
    X, binary, three, value = data
    y = {"binary": binary, "three": three, "value": value}[target]
    with threadpool_limits(1):
        model = make().fit(X, y)
        ensemble = _assert_read(model, X, link)
    assert ensemble.outputs == (3 if target == "three" else 1)


def test_missing_values_follow_each_nodes_direction(data: Any) -> None:
    X, binary, _, _ = data
    gappy = X.copy()
    gappy[np.random.default_rng(1).random(gappy.shape) < 0.15] = np.nan
    with threadpool_limits(1):
        boosted = HistGradientBoostingClassifier(max_iter=10, random_state=0).fit(gappy, binary)
        _assert_read(boosted, gappy, "logit")
        forest = RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0).fit(gappy, binary)
        _assert_read(forest, gappy, "probability")


def test_xgboost_reads_as_the_model_predicts(data: Any) -> None:
    xgboost = pytest.importorskip("xgboost")
    X, binary, _, value = data
    classifier = xgboost.XGBClassifier(n_estimators=12, max_depth=3, n_jobs=1).fit(X, binary)
    _assert_read(classifier, X, "logit", rtol=1e-5)  # XGBoost sums its float32 leaves in float32
    regressor = xgboost.XGBRegressor(n_estimators=12, max_depth=3, n_jobs=1).fit(X, value)
    ensemble = _assert_read(regressor, X, "value", rtol=1e-5)
    assert all(tree.strict and tree.float32 for tree in ensemble.trees)


def test_lightgbm_reads_as_the_model_predicts(data: Any) -> None:
    lightgbm = pytest.importorskip("lightgbm")
    X, binary, _, value = data
    classifier = lightgbm.LGBMClassifier(n_estimators=12, num_leaves=8, n_jobs=1, verbose=-1).fit(X, binary)
    _assert_read(classifier, X, "logit")
    regressor = lightgbm.LGBMRegressor(n_estimators=12, num_leaves=8, n_jobs=1, verbose=-1).fit(X, value)
    _assert_read(regressor, X, "value")


@pytest.mark.parametrize(
    "make",
    [
        lambda: HistGradientBoostingClassifier(max_iter=10, random_state=0),
        lambda: HistGradientBoostingClassifier(max_iter=6, random_state=0),
        lambda: GradientBoostingClassifier(n_estimators=10, random_state=0),
        lambda: GradientBoostingRegressor(n_estimators=10, learning_rate=0.3, random_state=0),
    ],
    ids=["hist binary", "hist three classes", "gradient boosting", "gradient boosting regressor"],
)
def test_boosting_read_in_scikit_learns_order_adds_up_to_its_raw_prediction(make: Any, data: Any) -> None:
    X, binary, three, value = data
    model = make()
    y = value if "Regressor" in type(model).__name__ else three if getattr(model, "max_iter", 0) == 6 else binary
    with threadpool_limits(1):
        model.fit(X, y)
    boosting = read_boosting(model)
    inputs = X if hasattr(model, "_baseline_prediction") else X.astype(np.float32)  # GradientBoosting: float32
    raw = np.asarray(model._raw_predict(inputs), dtype=np.float64)
    baseline = raw - raw  # the trees' sum, tree by tree in order, after the model's own baseline
    if hasattr(model, "_baseline_prediction"):
        baseline += np.asarray(model._baseline_prediction, dtype=np.float64).reshape(1, -1)
    else:
        baseline += np.asarray(model._raw_predict_init(inputs), dtype=np.float64)
    total = baseline.copy()
    for t, tree in enumerate(boosting.trees):
        leaves = np.array([tree.leaf(row) for row in X])
        total[:, t % boosting.per_iteration] += boosting.rate * tree.value[leaves, 0]
    np.testing.assert_allclose(total, raw, rtol=1e-12, atol=1e-12)
    assert boosting.per_iteration == raw.shape[1]


def test_what_the_sum_cannot_give_is_refused_by_name(data: Any) -> None:
    X, binary, _, value = data
    rng = np.random.default_rng(0)
    codes = np.column_stack([rng.integers(0, 4, 200), rng.normal(size=200)])
    with threadpool_limits(1):
        categorical = HistGradientBoostingClassifier(max_iter=3, categorical_features=[0]).fit(codes, codes[:, 0] > 1)
        exponential = GradientBoostingClassifier(n_estimators=3, loss="exponential").fit(X, binary)
        poisson = HistGradientBoostingRegressor(max_iter=3, loss="poisson").fit(X, np.abs(value))
        two = RandomForestRegressor(n_estimators=2).fit(X, np.column_stack([value, value]))
    cases = [
        (categorical, "HistGradientBoostingClassifier with native categorical splits"),
        (exponential, "GradientBoostingClassifier with loss 'exponential': only log_loss has a logistic link"),
        (poisson, "HistGradientBoostingRegressor with loss 'poisson'"),
        (two, "RandomForestRegressor has several outputs"),
        (KNeighborsClassifier().fit(X, binary), "KNeighborsClassifier is not a tree ensemble"),
    ]
    for model, message in cases:
        with pytest.raises(NotEncodableError, match=message):
            read_ensemble(model)
    with pytest.raises(NotEncodableError, match="KNeighborsClassifier is not one of scikit-learn's boosted"):
        read_boosting(KNeighborsClassifier().fit(X, binary))


def test_multi_class_xgboost_is_refused_by_name(data: Any) -> None:
    xgboost = pytest.importorskip("xgboost")
    X, _, three, _ = data
    model = xgboost.XGBClassifier(n_estimators=3, max_depth=2, n_jobs=1).fit(X, three)
    with pytest.raises(NotEncodableError, match="a multi-class XGBClassifier"):
        read_ensemble(model)


def test_a_fitted_layout_the_reader_does_not_know_is_refused_not_raised(data: Any) -> None:
    X, binary, _, _ = data
    with threadpool_limits(1):
        model = HistGradientBoostingClassifier(max_iter=3, random_state=0).fit(X, binary)
    del model._predictors  # a layout of another scikit-learn version, say
    with pytest.raises(NotEncodableError, match="HistGradientBoostingClassifier: its trees are not understood"):
        read_ensemble(model)
