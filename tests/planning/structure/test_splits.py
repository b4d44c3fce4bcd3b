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
from sklearn.tree import DecisionTreeClassifier
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


def test_a_float32_trees_split_values_lie_on_each_side_of_its_thresholds_as_it_compares() -> None:
    """scikit-learn's trees compare float32 inputs: the grid value one cent past a threshold can
    round back onto it (the demo's income 69,587.05 is 69,587.047 to its trees, on the left). Each
    threshold has a split value the model sends left and one it sends right."""
    rng = np.random.default_rng(0)
    # two float32 values two ulps apart either side of the boundary: the tree's threshold is their
    # midpoint, 69,587.046875, which is what 69,587.05 (the grid value just above it) becomes
    low = float(np.float32(69_587.04))
    high = float(np.nextafter(np.nextafter(np.float32(low), np.float32(np.inf)), np.float32(np.inf)))
    cents = np.round(rng.uniform(20_000.0, 120_000.0, 2_000), 2)
    frame = pd.DataFrame({"income": np.concatenate([cents[np.abs(cents - low) > 1.0], [low, high] * 20])})
    frame["ok"] = (frame.income > low).astype(int)
    model = DecisionTreeClassifier(max_depth=6, random_state=0).fit(frame[["income"]], frame.ok)
    problem = CounterfactualProblem.from_dataframe(
        frame, {"income": 30_000.0}, model, [ClassGoal(target=1)], target="ok"
    )
    values = problem.split_values()[0]
    seen = values.astype(np.float32).astype(np.float64)
    thresholds = model.tree_.threshold[model.tree_.feature >= 0]
    assert float(np.float32(69_587.05)) == (low + high) / 2 in thresholds
    for threshold in thresholds:
        assert (seen <= threshold).any() and (seen > threshold).any()
        below = values[seen <= threshold].max()
        above = values[seen > threshold].min()
        assert above - below <= 1.0  # still next to the threshold (within float32's margin, 16 ulps a side)
        assert (values[(values > below) & (values < above)]).size == 0
        assert above - below == pytest.approx(0.01), "one grid step: the threshold between a pair"
    steps = np.diff(np.sort(values)) / 0.01
    assert np.isclose(values * 100.0, np.round(values * 100.0), rtol=0.0, atol=1e-6).all(), "on the grid"
    paired = splits.paired_split_values(
        np.zeros(values.size, dtype=np.intp), np.sort(values), np.array([0.01]), np.array([0.0]), np.array([1e9])
    )
    assert paired.all() and (steps > 0.5).all(), "a complete list pairs up: the scans' cells are known"
