"""The trades' memo and partial sort (solver.core.trade): the polish's hot paths made cheap with
the very same rows, so no decision of a solve changes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import GradientBoostingClassifier

from counterplan.planning import ClassGoal, CounterfactualProblem
from counterplan.solver.core.trade import (
    TradeValues,
    pricer_for,
    recreate_candidates,
    single_rows,
    smallest,
    trade_candidates,
)


@pytest.fixture(scope="module")
def tree_problem() -> CounterfactualProblem:
    """A boosted tree on four integer features (split values, cells), the default distance."""
    rng = np.random.default_rng(0)
    data = pd.DataFrame(rng.integers(0, 40, size=(2000, 4)).astype(float), columns=["a", "b", "c", "d"])
    data["y"] = ((data.a + 2 * data.b > 60) | (data.c > 35)).astype(int)
    model = GradientBoostingClassifier(n_estimators=30, max_depth=2, random_state=0)
    model.fit(data[["a", "b", "c", "d"]], data.y)
    row = {"a": 5.0, "b": 5.0, "c": 5.0, "d": 20.0}
    return CounterfactualProblem.from_dataframe(data, row, model, [ClassGoal(target=1, confidence=0.7)], target="y")


def test_smallest_is_the_stable_argsort_head() -> None:
    rng = np.random.default_rng(1)
    for trial in range(400):
        n, k = int(rng.integers(0, 200)), int(rng.integers(0, 60))
        values = rng.integers(0, 4, n).astype(float) if trial % 2 else rng.normal(size=n)
        if trial % 3 == 0 and n:
            values[rng.integers(0, n, n // 3)] = np.nan
            values[rng.integers(0, n, n // 4)] = -0.0
        assert np.array_equal(smallest(values, k), np.argsort(values, kind="stable")[:k])


def test_the_memo_gives_the_rows_built_without_it(tree_problem: CounterfactualProblem) -> None:
    space = tree_problem.space.with_split_values(tree_problem.split_values())  # as the feature scan does
    pricer = pricer_for(tree_problem)
    assert pricer is not None and space.split_values
    memo = TradeValues(space, pricer, 16)
    X, owner = single_rows(space, pricer, 16, memo)
    plain_X, plain_owner = single_rows(space, pricer, 16)
    assert np.array_equal(X, plain_X) and np.array_equal(owner, plain_owner) and X.shape[0] > 0
    buys = {0: X[owner == 0, 0][:3], 2: X[owner == 2, 2][-2:]}
    rng = np.random.default_rng(2)
    row = space.original.copy()
    for _ in range(12):  # a chain of rows, each one feature on from the last: the memo's hits
        j = int(rng.integers(0, 4))
        row[j] = float(rng.choice(plain_X[plain_owner == j, j]))
        distance = float(pricer.cost(row, np.arange(4)).sum())
        kwargs = {"grid_size": 16, "caps": {j: 2.0}, "max_rows": 40, "slack": 0.1}
        got = recreate_candidates(row, distance, 3.0, space, pricer, memo=memo, **kwargs)  # type: ignore[arg-type]
        want = recreate_candidates(row, distance, 3.0, space, pricer, **kwargs)  # type: ignore[arg-type]
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
        trades = [
            trade_candidates(
                row,
                distance,
                space,
                pricer,
                grid_size=16,
                max_rows=64,
                rng=np.random.default_rng(3),
                buys=buys,
                memo=shared,
            )
            for shared in (memo, None)
        ]
        assert np.array_equal(trades[0], trades[1])
    v, cost = memo.cells(0, float(row[0]))
    assert memo.cells(0, float(row[0]))[0] is v  # kept, not rebuilt
    assert not v.flags.writeable and not cost.flags.writeable
