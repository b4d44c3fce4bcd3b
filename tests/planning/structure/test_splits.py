"""Split values are read once per fitted estimator and way of reading the features: what a later
problem gets from the cache equals what a fresh read gives, bit for bit, whatever its row,
immutables, monotone bounds or missing values; refitting the estimator in place drops the cache."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler
from threadpoolctl import threadpool_limits

from counterplan.planning import ClassGoal, CounterfactualProblem
from counterplan.planning.structure import splits
from counterplan.planning.structure.cache import MEMO


def _data(n: int = 500, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "income": np.round(rng.uniform(0.0, 10.0, n), 1),
            "tenure": rng.integers(0, 15, n),
            "debt": np.round(rng.uniform(0.0, 5.0, n), 2),
            "plan": rng.choice(["basic", "silver", "gold"], n),
        }
    )
    score = frame.income + 0.4 * frame.tenure - frame.debt + 1.5 * (frame.plan == "gold") + rng.normal(0, 0.5, n)
    frame["ok"] = (score > 6.0).astype(int)
    return frame


def _pipeline(estimator: Any) -> Pipeline:
    columns = ColumnTransformer(
        [
            ("plan", OneHotEncoder(handle_unknown="ignore"), ["plan"]),
            ("numbers", StandardScaler(), ["income", "tenure", "debt"]),  # affine: slope and shift
        ]
    )
    return Pipeline([("encode", columns), ("model", estimator)])


def _fit(model: Pipeline, frame: pd.DataFrame) -> Pipeline:
    with threadpool_limits(1):  # OpenMP threads on a busy machine cost many times more
        return model.fit(frame.drop(columns="ok"), frame.ok)


def _problems(frame: pd.DataFrame, model: Pipeline) -> list[CounterfactualProblem]:
    """Problems of one model with other rows, immutables, monotone bounds and a missing value."""
    features = frame.drop(columns="ok")
    out = []
    for i, (immutable, overrides) in enumerate(
        [
            ((), None),
            (("tenure",), None),
            ((), {"income": {"monotone": "increase"}}),
            (("plan",), {"debt": {"monotone": "decrease"}}),
            ((), None),
        ]
    ):
        out.append(
            CounterfactualProblem.from_dataframe(
                frame,
                features.iloc[i * 7],
                model,
                [ClassGoal(target=1)],
                target="ok",
                immutable=immutable,
                overrides=overrides,
            )
        )
    gappy = frame.copy()
    gappy.loc[gappy.index[3], "income"] = np.nan  # a missing original: a feature that cannot move
    out.append(CounterfactualProblem.from_dataframe(gappy, 3, model, [ClassGoal(target=1)], target="ok"))
    return out


def _fresh(problem: CounterfactualProblem) -> dict[int, np.ndarray]:
    MEMO.clear()
    return problem.split_values()


def _assert_same(got: dict[int, np.ndarray], expected: dict[int, np.ndarray]) -> None:
    assert list(got) == list(expected)
    for j, values in expected.items():
        assert got[j].dtype == values.dtype and got[j].tobytes() == values.tobytes()


@pytest.mark.parametrize(
    "estimator",
    [
        HistGradientBoostingClassifier(max_iter=30, random_state=0),
        RandomForestClassifier(n_estimators=8, random_state=0),
    ],
    ids=["hist-gradient-boosting", "random-forest"],
)
def test_cached_split_values_equal_a_fresh_read_for_every_problem_of_a_model(estimator: Any) -> None:
    frame = _data()
    model = _fit(_pipeline(estimator), frame)
    problems = _problems(frame, model)
    fresh = [_fresh(problem) for problem in problems]
    assert any(fresh), "the trees split on the numbers"
    MEMO.clear()
    for problem, expected in zip(problems * 2, fresh * 2, strict=True):  # the second round: all from the cache
        _assert_same(problem.split_values(), expected)
    kept = MEMO.peek(model[-1], splits.THRESHOLDS)
    assert len(kept.readings) < len(problems), "problems that read the features alike share their values"


def test_the_values_handed_out_are_the_callers_own() -> None:
    frame = _data()
    model = _fit(_pipeline(HistGradientBoostingClassifier(max_iter=20, random_state=0)), frame)
    problem = _problems(frame, model)[0]
    expected = _fresh(problem)
    first = problem.split_values()
    for values in first.values():
        values[:] = -1.0  # a caller changing its copy changes nothing kept
    _assert_same(problem.split_values(), expected)


def test_refitting_the_estimator_in_place_drops_what_was_read() -> None:
    frame = _data()
    model = _fit(_pipeline(HistGradientBoostingClassifier(max_iter=20, random_state=0)), frame)
    stale = _problems(frame, model)[0].split_values()
    other = _data(seed=5)
    other["ok"] = 1 - other.ok  # other trees, other thresholds
    _fit(model, other)  # the same estimator object, refitted
    problem = _problems(other, model)[0]
    got = problem.split_values()
    _assert_same(got, _fresh(problem))
    assert any(not np.array_equal(got.get(j, np.empty(0)), stale[j]) for j in stale)


@pytest.mark.parametrize("trees", [True, False], ids=["trees", "unreadable"])
def test_what_is_kept_goes_with_the_estimator(trees: bool) -> None:
    frame = _data()
    estimator = HistGradientBoostingClassifier(max_iter=10, random_state=0) if trees else KNeighborsClassifier(3)
    model = _fit(_pipeline(estimator), frame)
    problem = _problems(frame, model)[0]
    first = problem.split_values()
    assert problem.split_values().keys() == first.keys()
    assert bool(first) == trees  # no trees: no split values
    gone = weakref.ref(estimator)
    del model, problem, estimator
    gc.collect()
    assert gone() is None
