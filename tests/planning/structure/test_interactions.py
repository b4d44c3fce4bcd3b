"""Pairs of changes a tree ensemble rewards only together (planning.structure.interactions): read
from the trees at the original, crossing one split and then one under it on the new way."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor, RandomForestClassifier
from sklearn.linear_model import LogisticRegression

from counterplan.planning import ClassGoal, CounterfactualProblem, RangeGoal
from tests.interactions import FEATURES, together_data


@pytest.fixture(scope="module")
def data() -> pd.DataFrame:
    return together_data()


def _problem(data: pd.DataFrame, model: object, goal: object | None = None) -> CounterfactualProblem:
    goals = [goal if goal is not None else ClassGoal(target=1, confidence=0.7)]
    return CounterfactualProblem.from_dataframe(data, dict.fromkeys(FEATURES, 1.0), model, goals, target="y")


def _rows(problem: CounterfactualProblem, limit: int) -> tuple[np.ndarray, np.ndarray]:
    moves = problem.pair_moves(limit)
    X = np.repeat(problem.original_row(), len(moves), axis=0)
    at = np.arange(len(moves))
    X[at, moves.first] = moves.first_value
    X[at, moves.second] = moves.second_value
    return X, np.column_stack([moves.first, moves.second])


@pytest.mark.unit
@pytest.mark.parametrize(
    "model",
    [
        HistGradientBoostingClassifier(max_iter=60, max_depth=3, random_state=0),
        RandomForestClassifier(n_estimators=20, max_depth=6, random_state=0),
    ],
    ids=["boosting", "forest"],
)
def test_the_pair_only_the_trees_see_is_read_from_them(data: pd.DataFrame, model: object) -> None:
    """Neither a nor b gains alone (a hurts); the trees' pairs hold a and b, the model approves
    the best of them, each just past 3."""
    fitted = model.fit(data[FEATURES], data.y)  # type: ignore[attr-defined]
    problem = _problem(data, fitted)
    X, features = _rows(problem, 64)
    a, b = problem.space.names.index("a"), problem.space.names.index("b")
    both = np.flatnonzero((features[:, 0] == a) & (features[:, 1] == b))
    assert both.size
    p = fitted.predict_proba(problem.space.to_frame(X[both]))[:, 1]
    best = both[np.argmax(p)]
    assert p.max() >= 0.7 and X[best, a] > 3 and X[best, b] > 3
    single = problem.original_row()
    single[0, a] = X[best, a]
    assert fitted.predict_proba(problem.space.to_frame(single))[0, 1] < 0.3  # a alone hurts
    again = problem.pair_moves(64)
    assert np.array_equal(again.first_value, problem.pair_moves(64).first_value)  # the same every time


@pytest.mark.unit
def test_the_other_class_and_models_without_readable_trees(data: pd.DataFrame) -> None:
    """Toward class 0 the gains turn round: a and b both past 3 (approval) is no pair for it, while
    it is the first for class 1; a linear model and a regressor have none."""
    boosting = HistGradientBoostingClassifier(max_iter=60, max_depth=3, random_state=0).fit(data[FEATURES], data.y)
    a, b = FEATURES.index("a"), FEATURES.index("b")

    def approving(problem: CounterfactualProblem) -> np.ndarray:
        X, features = _rows(problem, 256)
        return (features[:, 0] == a) & (features[:, 1] == b) & (X[:, a] > 3) & (X[:, b] > 3)

    assert approving(_problem(data, boosting))[:4].any()
    down = _problem(data, boosting, ClassGoal(target=0, confidence=0.9))
    assert len(down.pair_moves(256)) and not approving(down).any()
    linear = LogisticRegression(max_iter=500).fit(data[FEATURES], data.y)
    assert len(_problem(data, linear).pair_moves(16)) == 0
    regressor = HistGradientBoostingRegressor(max_iter=20).fit(data[FEATURES], data.y.astype(float))
    assert len(_problem(data, regressor, RangeGoal(low=0.8, high=1.0)).pair_moves(16)) == 0
