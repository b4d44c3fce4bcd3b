"""The one per-estimator memo and its one refit detector: a value is built once per fitted state,
a refit in place (a new fit, or a warm start growing a list in place) drops it, a call that only
predicts does not, and keeping never keeps the estimator alive."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder

from counterplan.planning.structure.cache import MEMO, Memo, fitted_state

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    rng = np.random.default_rng(5)
    out = pd.DataFrame({"x": rng.normal(size=200), "z": rng.normal(size=200), "city": rng.choice(["a", "b"], 200)})
    out["y"] = (out.x + (out.city == "a") > 0.5).astype(int)
    return out


def _pipeline(frame: pd.DataFrame) -> Pipeline:
    encode = ColumnTransformer(
        [("city", OneHotEncoder(sparse_output=False), ["city"]), ("nums", "passthrough", ["x", "z"])]
    )
    model = Pipeline([("encode", encode), ("model", HistGradientBoostingClassifier(max_iter=5, random_state=0))])
    return model.fit(frame[["x", "z", "city"]], frame["y"])


def test_the_state_changes_on_a_refit_and_not_on_a_prediction(frame: pd.DataFrame) -> None:
    model = _pipeline(frame)
    model[0].set_output(transform="pandas")  # its transform caches names in a private attribute
    before = fitted_state(model)
    model.predict_proba(frame[["x", "z", "city"]].head(5))
    assert fitted_state(model) == before
    model.fit(frame[["x", "z", "city"]], frame["y"])
    assert fitted_state(model) != before


def test_a_warm_start_growing_a_list_in_place_changes_the_state(frame: pd.DataFrame) -> None:
    forest = RandomForestClassifier(n_estimators=3, warm_start=True, random_state=0).fit(frame[["x", "z"]], frame["y"])
    trees = forest.estimators_
    before = fitted_state(forest)
    forest.set_params(n_estimators=6).fit(frame[["x", "z"]], frame["y"])
    assert forest.estimators_ is trees  # the same list, longer
    assert fitted_state(forest) != before


def test_the_state_holds_the_fitted_attributes_so_no_identity_is_reused(frame: pd.DataFrame) -> None:
    model = LogisticRegression().fit(frame[["x", "z"]], frame["y"])
    state = fitted_state(model)
    assert any(value is model.coef_ for value in state.held)
    assert not any(value is model for value in state.held)


def test_a_value_is_built_once_per_fitted_state(frame: pd.DataFrame) -> None:
    memo = Memo()
    model = LogisticRegression().fit(frame[["x", "z"]], frame["y"])
    built: list[int] = []

    def build() -> int:
        built.append(1)
        return len(built)

    assert memo.get(model, "key", build) == 1
    assert memo.get(model, "key", build) == 1
    assert memo.get(model, "other", build) == 2
    assert memo.peek(model, "key") == 1
    model.fit(frame[["x", "z"]].iloc[::2], frame["y"].iloc[::2])  # refitted in place
    assert memo.peek(model, "key") is None
    assert memo.get(model, "key", build) == 3


def test_what_is_kept_goes_with_the_estimator(frame: pd.DataFrame) -> None:
    memo = Memo()
    model = _pipeline(frame)
    memo.get(model, "key", lambda: np.zeros(3))
    MEMO.get(model, "test", lambda: "kept")
    gone = weakref.ref(model)
    del model
    gc.collect()
    assert gone() is None


def test_an_estimator_that_cannot_be_kept_is_built_every_time() -> None:
    class Unhashable:
        __hash__ = None  # type: ignore[assignment]

        def __init__(self) -> None:
            self.coef_ = np.ones(2)

    class Slotted:
        __slots__ = ("coef_",)

    memo = Memo()
    for estimator in (Unhashable(), Slotted()):
        built: list[Any] = []
        memo.get(estimator, "key", lambda built=built: built.append(1))
        memo.get(estimator, "key", lambda built=built: built.append(1))
        assert len(built) == 2
        assert memo.kept(estimator) is None


def test_the_fast_path_and_the_split_values_share_one_memo(frame: pd.DataFrame) -> None:
    from counterplan.planning import ClassGoal, CounterfactualProblem
    from counterplan.planning.structure.splits import THRESHOLDS

    model = _pipeline(frame)
    problem = CounterfactualProblem.from_dataframe(frame, 0, model, [ClassGoal(target=1)], target="y")
    assert problem.model.fast_path(problem.space) is not None  # type: ignore[attr-defined]
    assert problem.split_values()
    assert MEMO.peek(model, ("fast paths", "dataframe", "predict_proba")) is not None
    assert MEMO.peek(model[-1], THRESHOLDS) is not None
