"""XGBoost and LightGBM models, trained the way their users do, on data with gaps (the ``boosting`` extra).

Both take NaN natively and are fitted on a DataFrame, so they get the decoded frame with NaN where
the instance has a gap; both use OpenMP, so their calls run under the native-thread limit.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from counterplan.planning import ClassGoal, CounterfactualProblem, FloatFeature, IntegerFeature
from counterplan.solver import explain
from tests.credit import credit_with_gaps


def _xgboost() -> Any:
    xgboost = pytest.importorskip("xgboost")
    return xgboost.XGBClassifier(n_estimators=60, max_depth=3, random_state=0, n_jobs=2)


def _lightgbm() -> Any:
    lightgbm = pytest.importorskip("lightgbm")
    return lightgbm.LGBMClassifier(n_estimators=60, random_state=0, verbose=-1)


@pytest.mark.parametrize("make", [_xgboost, _lightgbm], ids=["xgboost", "lightgbm"])
def test_boosted_trees_explain_a_row_with_a_gap(make: Any) -> None:
    data = credit_with_gaps()
    data["home"] = (data["home"] == "own").astype(np.int64)  # these libraries take numbers
    features = data.drop(columns=["ok"])
    model = make().fit(features, data["ok"])
    proba = model.predict_proba(features)[:, 1]
    row = int(np.flatnonzero((proba < 0.4) & features["income"].isna().to_numpy())[0])
    problem = CounterfactualProblem.from_dataframe(data, row, model, [ClassGoal(target=1)], target="ok")
    assert isinstance(problem.space["late"], IntegerFeature)  # whole-number floats
    ratio = problem.space["ratio"]
    assert isinstance(ratio, FloatFeature) and ratio.precision == 2
    result = explain(problem, seed=0)
    assert result.valid
    assert result.proposed["income"] is None  # the gap stays a gap
    for change in result.changes:
        assert change.feature != "income"
        if change.feature == "ratio":
            assert round(change.proposed, 2) == change.proposed
    shown = pd.DataFrame([{k: (np.nan if v is None else v) for k, v in result.proposed.items()}])
    p = model.predict_proba(shown[list(features.columns)])[0, 1]
    assert p == pytest.approx(result.predictions["ok"]["1"], rel=1e-6)  # the model agrees, as displayed


def _xgboost_categorical() -> Any:
    xgboost = pytest.importorskip("xgboost")
    return xgboost.XGBClassifier(n_estimators=30, max_depth=3, random_state=0, n_jobs=2, enable_categorical=True)


@pytest.mark.parametrize("make", [_xgboost_categorical, _lightgbm], ids=["xgboost", "lightgbm"])
def test_boosted_trees_fitted_on_a_category_column_get_one(make: Any) -> None:
    """Fitted on a pandas ``category`` column, both refuse a column of text: the model gets the
    column as a category, with the unused category of the training data left out, and the answer
    moving it is valid through the real model on the training data's dtype."""
    data = credit_with_gaps().dropna()
    data["ok"] = ((data["home"] == "own") | (data["ok"] == 1)).astype(int)  # owning a home is approved
    data["home"] = pd.Categorical(data["home"], categories=["own", "rent", "boat"])
    features = data.drop(columns=["ok"])
    model = make().fit(features, data["ok"])
    proba = model.predict_proba(features)[:, 1]
    row = int(np.flatnonzero((proba < 0.45) & (data["home"] == "rent").to_numpy())[0])
    immutable = ["income", "late", "ratio"]
    problem = CounterfactualProblem.from_dataframe(
        data, row, model, [ClassGoal(target=1)], target="ok", immutable=immutable
    )
    result = explain(problem, seed=0)
    assert result.valid and result.proposed["home"] == "own"
    shown = features.iloc[[row]].assign(home=pd.Categorical(["own"], categories=["own", "rent", "boat"]))
    assert model.predict_proba(shown)[0, 1] == pytest.approx(result.predictions["ok"]["1"], rel=1e-6)


@pytest.mark.parametrize("make", [_xgboost, _lightgbm], ids=["xgboost", "lightgbm"])
def test_boosted_trees_fitted_on_an_array_get_nan_for_a_gap(make: Any) -> None:
    """Fitted on ``features.to_numpy()``, the model reads a gap as NaN: it gets NaN, not the
    feature's missing code (a number below the domain, which it would read as a low income)."""
    data = credit_with_gaps()
    matrix = data[["income", "late", "ratio"]].to_numpy()
    model = make().fit(matrix, data["ok"])
    row = int(np.flatnonzero(np.isnan(matrix[:, 0]))[0])
    problem = CounterfactualProblem.from_dataframe(data.drop(columns=["home"]), row, model, target="ok")
    got = problem.model.predict(problem.original_row(), problem.space)["ok"]
    np.testing.assert_allclose(got, model.predict_proba(matrix[[row]]), rtol=1e-6)
