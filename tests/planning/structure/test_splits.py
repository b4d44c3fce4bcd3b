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
from sklearn.preprocessing import MinMaxScaler, OneHotEncoder, StandardScaler
from sklearn.tree import DecisionTreeClassifier
from threadpoolctl import threadpool_limits

from counterplan.planning import ClassGoal, CounterfactualProblem
from counterplan.planning.space import SplitValues
from counterplan.planning.structure import splits
from counterplan.planning.structure.cache import MEMO
from counterplan.planning.structure.trees import read_ensemble


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


def _float32_income_tree() -> tuple[DecisionTreeClassifier, CounterfactualProblem, float, float]:
    """A tree on incomes in cents whose one boundary lies between two float32 values two ulps
    apart: its threshold is their midpoint, 69,587.046875, which is what 69,587.05 (the grid
    value just above it) becomes as float32. Returns the tree, a problem on it, and the two values."""
    rng = np.random.default_rng(0)
    low = float(np.float32(69_587.04))
    high = float(np.nextafter(np.nextafter(np.float32(low), np.float32(np.inf)), np.float32(np.inf)))
    cents = np.round(rng.uniform(20_000.0, 120_000.0, 2_000), 2)
    frame = pd.DataFrame({"income": np.concatenate([cents[np.abs(cents - low) > 1.0], [low, high] * 20])})
    frame["ok"] = (frame.income > low).astype(int)
    model = DecisionTreeClassifier(max_depth=6, random_state=0).fit(frame[["income"]], frame.ok)
    problem = CounterfactualProblem.from_dataframe(
        frame, {"income": 30_000.0}, model, [ClassGoal(target=1)], target="ok"
    )
    return model, problem, low, high


def test_a_float32_trees_split_values_lie_on_each_side_of_its_thresholds_as_it_compares() -> None:
    """scikit-learn's trees compare float32 inputs: the grid value one cent past a threshold can
    round back onto it (the demo's income 69,587.05 is 69,587.047 to its trees, on the left). Each
    threshold has a split value the model sends left and one it sends right."""
    model, problem, low, high = _float32_income_tree()
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


@pytest.mark.parametrize("scaled", [False, True], ids=["passthrough", "standard-scaler"])
def test_the_cuts_split_each_feature_where_its_trees_decide_and_nowhere_else(scaled: bool) -> None:
    """Where the reader is sure of each threshold's sides, its cuts are the first grid value past
    each threshold: every value from one cut up to the next goes the same way at every split of
    every tree, and every cut changes some decision."""
    frame = _data()
    numbers = StandardScaler() if scaled else "passthrough"
    encode = ColumnTransformer(
        [("plan", OneHotEncoder(handle_unknown="ignore"), ["plan"]), ("n", numbers, ["income", "tenure", "debt"])]
    )
    model = _fit(
        Pipeline([("encode", encode), ("model", HistGradientBoostingClassifier(max_iter=30, random_state=0))]), frame
    )
    problem = CounterfactualProblem.from_dataframe(frame, 0, model, [ClassGoal(target=1)], target="ok")
    found = problem.split_values()
    assert isinstance(found, SplitValues)
    space = problem.space
    numeric = {space.index["income"], space.index["tenure"], space.index["debt"]}
    # scaled, a grid value may land on a threshold (a value of the data), where a rounding decides
    assert set(found.cuts) == numeric if not scaled else found.cuts and set(found.cuts) <= numeric
    for name, column in (("income", 3), ("tenure", 4), ("debt", 5)):
        j = space.index[name]
        if j not in found.cuts:
            continue
        scale = space.grid_scale[j]  # every value of the grid, written as the grid writes them
        values = np.arange(round(space.lower[j] * scale), round(space.upper[j] * scale) + 1) / scale
        X = np.repeat(frame.drop(columns="ok").iloc[[0]].to_numpy(dtype=object), values.size, axis=0)
        seen = model[:-1].transform(
            pd.DataFrame({**{c: X[:, i] for i, c in enumerate(frame.columns[:-1])}, name: values})
        )
        x = np.asarray(seen[:, column], dtype=np.float64)
        sides = np.array(  # how each value goes at each split of each tree, as the model compares
            [
                [tree.goes_left(node, value) for value in x.tolist()]
                for tree in read_ensemble(model[-1]).trees
                for node in np.flatnonzero(tree.splits & (tree.feature == column)).tolist()
            ]
        ).T
        cell = np.searchsorted(found.cuts[j], values, side="right")
        for c in np.unique(cell):
            assert (sides[cell == c] == sides[cell == c][0]).all(), f"{name}: a cell the trees split"
        starts = np.flatnonzero(np.diff(cell)) + 1
        assert (sides[starts] != sides[starts - 1]).any(axis=1).all(), f"{name}: a cut no threshold makes"


def test_a_feature_the_model_also_reads_another_way_has_no_cuts() -> None:
    """A clipped copy of income reaches the trees too: its thresholds are not read as income's,
    so income's cells are not known (its split values still are)."""
    frame = _data().drop(columns="plan")
    encode = ColumnTransformer(
        [("n", "passthrough", ["income", "tenure", "debt"]), ("clipped", MinMaxScaler(clip=True), ["income"])]
    )
    model = _fit(
        Pipeline([("encode", encode), ("model", HistGradientBoostingClassifier(max_iter=30, random_state=0))]), frame
    )
    problem = CounterfactualProblem.from_dataframe(frame, 0, model, [ClassGoal(target=1)], target="ok")
    found = problem.split_values()
    income, tenure = problem.space.index["income"], problem.space.index["tenure"]
    assert income in found and tenure in found
    assert income not in found.cuts and tenure in found.cuts


def test_a_threshold_on_a_grid_value_cuts_where_the_comparison_sends_it() -> None:
    """XGBoost sends ``x < t`` left, so a grid value on its threshold goes right: the pair the
    reader lists around it (the value and the next) does not straddle it, and the cut is the
    value itself, the first the trees send right."""
    xgboost = pytest.importorskip("xgboost")
    frame = _data().drop(columns="plan")
    encode = ColumnTransformer([("n", "passthrough", ["income", "tenure", "debt"])])
    model = _fit(Pipeline([("encode", encode), ("model", xgboost.XGBClassifier(n_estimators=20, max_depth=3))]), frame)
    problem = CounterfactualProblem.from_dataframe(frame, 0, model, [ClassGoal(target=1)], target="ok")
    found = problem.split_values()
    tenure = problem.space.index["tenure"]
    assert tenure in found.cuts
    cuts = found.cuts[tenure]
    values = np.arange(problem.space.lower[tenure], problem.space.upper[tenure] + 1.0)
    sides = np.array(
        [
            [tree.goes_left(node, value) for value in values.tolist()]
            for tree in read_ensemble(model[-1]).trees
            for node in np.flatnonzero(tree.splits & (tree.feature == 1)).tolist()
        ]
    ).T
    assert any(tree.threshold[tree.splits & (tree.feature == 1)].size for tree in read_ensemble(model[-1]).trees)
    assert np.isin(cuts, values).all(), "whole-number thresholds: each cut is the value on it"
    cell = np.searchsorted(cuts, values, side="right")
    for c in np.unique(cell):
        assert (sides[cell == c] == sides[cell == c][0]).all()
    starts = np.flatnonzero(np.diff(cell)) + 1
    assert (sides[starts] != sides[starts - 1]).any(axis=1).all()


def test_a_float32_trees_cuts_follow_its_own_comparison() -> None:
    """A column that is the value itself is judged by the model's own comparison of the value as
    it sees it (float32 here): the cents either side of 69,587.046875 are far inside float32's
    margin of a threshold that large, yet the cuts are known, and each is the first cent the
    trees send right."""
    model, problem, _, _ = _float32_income_tree()
    found = problem.split_values()
    assert 0 in found.cuts
    tree = read_ensemble(model).trees[0]
    for node in np.flatnonzero(tree.splits).tolist():
        t = tree.threshold[node]
        first = found.cuts[0][np.searchsorted(found.cuts[0], t)]  # the first cut past the threshold
        assert not tree.goes_left(node, first) and tree.goes_left(node, round(first - 0.01, 2))
