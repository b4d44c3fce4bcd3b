"""The trades' memo and partial sort (solver.core.trade): the polish's hot paths made cheap with
the very same rows, so no decision of a solve changes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import GradientBoostingClassifier

from counterplan.planning import ClassGoal, CounterfactualProblem
from counterplan.planning.space import FloatMatrix
from counterplan.solver.core.combinations import smallest
from counterplan.solver.core.trade import (
    SplitCells,
    TradeValues,
    _linspaces,
    one_per_cell,
    pricer_for,
    recreate_candidates,
    single_rows,
    trade_candidates,
    trade_values,
    undominated,
    unique_rows,
)
from counterplan.solver.local import polish


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


@pytest.fixture(scope="module")
def float_problem() -> CounterfactualProblem:
    """A boosted tree on five continuous features (no grid: a step from the original stays off
    every other value), one of them at 0.0."""
    rng = np.random.default_rng(1)
    data = pd.DataFrame(rng.uniform(-1.0, 1.0, size=(2000, 5)), columns=["a", "b", "c", "d", "e"])
    data["y"] = ((data.a + 0.5 * data.b > 0.4) | (data.c * data.d > 0.3)).astype(int)
    model = GradientBoostingClassifier(n_estimators=40, max_depth=3, random_state=0)
    model.fit(data[["a", "b", "c", "d", "e"]], data.y)
    row = {"a": 0.0, "b": -0.31, "c": 0.12, "d": -0.5, "e": 0.77}
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


def _reference_cells(space: Any, pricer: Any, j: int, at: float, grid: int) -> tuple[FloatMatrix, FloatMatrix]:
    """A feature's cells as the polish built them before the memo's tables: trade_values, then
    one_per_cell of the values other than ``at``, then their costs."""
    unit = float(pricer.unit(np.array([j]))[0])
    v = trade_values(space, j, grid, unit, at)
    v = one_per_cell(space, j, v[v != at])
    return v, pricer.cost(v, np.full(v.size, j, dtype=np.intp))


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("kind", ["integers", "floats"])
@pytest.mark.parametrize("cuts", ["all", "some", "none"])
def test_the_memos_tables_are_the_per_feature_functions_bit_for_bit(
    tree_problem: CounterfactualProblem, float_problem: CounterfactualProblem, cuts: str, kind: str
) -> None:
    """Every feature's values and cells, built for all features at once around the original and
    spliced for a row's moved ones, are trade_values' and one_per_cell's arrays: around the
    original, off the grid, at and past the bounds, -0.0; with each feature's cuts known, a
    feature without (the paired split values' rule) and none at all."""
    problem = tree_problem if kind == "integers" else float_problem
    space = problem.space.with_split_values(problem.split_values())
    if cuts != "all":
        space.split_cuts = {j: c for j, c in space.split_cuts.items() if cuts == "some" and j != 1}
    pricer = pricer_for(problem)
    assert pricer is not None
    columns = np.flatnonzero(space.mutable)
    n = columns.size
    rng = np.random.default_rng(4)
    for grid in (2, 16, 24):
        memo = TradeValues(space, pricer, grid)
        fronts = {
            int(j): rng.choice(trade_values(space, int(j), grid, 1.0, float(space.original[j])), 3)
            for j in columns[::2]
        }
        rows = [space.original.copy()]
        for _ in range(30):
            row = rows[-1].copy()
            j = int(rng.integers(0, n))
            low, high = float(space.lower[j]), float(space.upper[j])
            row[j] = rng.choice([float(rng.integers(-3, 45)), rng.uniform(low, high), -0.0, low, high, high + 1.0])
            rows.append(row)
        for row in rows:
            want = [_reference_cells(space, pricer, j, float(row[j]), grid) for j in columns.tolist()]
            owner, value, cost, sizes = memo.row_cells(row[columns])
            assert _same(value, np.concatenate([v for v, _ in want]))
            assert _same(cost, np.concatenate([c for _, c in want]))
            assert _same(owner, np.repeat(columns, [v.size for v, _ in want]))
            assert sizes.tolist() == [v.size for v, _ in want]
            values_owner, values, _ = memo.row_values(row[columns])
            plain = [trade_values(space, j, grid, float(pricer.unit(np.array([j]))[0]), float(row[j])) for j in columns]
            assert _same(values, np.concatenate(plain)) and _same(
                values_owner, np.repeat(columns, [v.size for v in plain])
            )
            for buys in (None, {}, fronts):
                chosen = [
                    np.isin(v, (buys or {}).get(j, np.empty(0))) for j, v in zip(columns.tolist(), plain, strict=True)
                ]
                assert _same(memo.in_buys(values_owner, values, buys), np.concatenate(chosen))


def test_split_cells_are_each_columns_search(tree_problem: CounterfactualProblem) -> None:
    space = tree_problem.space.with_split_values(tree_problem.split_values())
    assert space.split_cuts
    cells = SplitCells(space)
    rng = np.random.default_rng(5)
    columns = rng.choice(np.array(sorted(space.split_cuts)), 500)
    values = np.concatenate(
        [rng.uniform(-5, 45, 300), rng.choice(np.concatenate(list(space.split_cuts.values())), 200)]
    )
    want = np.array(
        [np.searchsorted(space.split_cuts[j], v, side="right") for j, v in zip(columns, values, strict=True)]
    )
    assert np.array_equal(cells.index(values, columns), want)
    starts = [np.concatenate([[-np.inf], space.split_cuts[j]])[i] for j, i in zip(columns, want, strict=True)]
    assert np.array_equal(cells.start(values, columns), np.array(starts))


def test_linspaces_are_numpys_rows() -> None:
    low = np.array([0.0, -3.5, 2.0, 1e-310, 0.1, -1e300, 0.0])
    high = np.array([1.0, 7.25, 2.0, 3e-310, 0.7, 1e300, 5e-324])  # the last: numpy's rule for a zero step
    for num in (2, 3, 24, 97):
        table = _linspaces(low, high, num)
        for i in range(low.size):
            assert _same(table[i].copy(), np.linspace(low[i], high[i], num))


def test_undominated_with_the_memos_cells_is_the_same(tree_problem: CounterfactualProblem) -> None:
    space = tree_problem.space.with_split_values(tree_problem.split_values())
    pricer = pricer_for(tree_problem)
    assert pricer is not None
    best = space.original.copy()
    best[[0, 1]] = [30.0, 22.0]
    X = trade_candidates(best, 8.0, space, pricer, grid_size=16, max_rows=400, rng=np.random.default_rng(8))
    assert X.shape[0] > 50
    kept = undominated(space, pricer, X, best, SplitCells(space))
    assert _same(kept, undominated(space, pricer, X, best)) and kept.shape[0] < X.shape[0]


@pytest.mark.parametrize("kind", ["integers", "floats"])
def test_one_per_cell_of_every_feature_at_once_is_each_features(
    tree_problem: CounterfactualProblem, float_problem: CounterfactualProblem, kind: str
) -> None:
    """Random few values of each feature (so that one feature's last cell and the next one's
    first often share a key): the memo's one pass keeps what one_per_cell keeps per feature."""
    problem = tree_problem if kind == "integers" else float_problem
    space = problem.space.with_split_values(problem.split_values())
    pricer = pricer_for(problem)
    assert pricer is not None
    memo = TradeValues(space, pricer, 16)
    columns = np.flatnonzero(space.mutable)
    rng = np.random.default_rng(9)
    for _ in range(200):
        parts = []
        for j in columns.tolist():
            v = trade_values(space, j, 16, 1.0, float(space.original[j]))
            cuts = space.split_cuts.get(j, np.empty(0))
            low = v[v <= cuts[min(int(rng.integers(0, 3)), cuts.size - 1)]] if cuts.size and rng.random() < 0.5 else v
            parts.append(np.sort(rng.choice(low, int(rng.integers(0, min(low.size, 6) + 1)), replace=False)))
        sizes = np.array([p.size for p in parts], dtype=np.intp)
        values = np.concatenate(parts)
        keep = memo._one_per_cell(columns, values, np.repeat(np.arange(columns.size), sizes), sizes)
        want = [np.isin(p, one_per_cell(space, j, p)) for j, p in zip(columns.tolist(), parts, strict=True)]
        assert np.array_equal(keep, np.concatenate(want))


def _reach_loop(C: FloatMatrix, singles: Any, original: FloatMatrix, deficit: float) -> bool:
    """The polish's _predicted_to_reach as a loop over the features (its definition)."""
    if C.shape[0] == 0:
        return False
    gained = np.zeros(C.shape[0])
    for j in np.unique(singles.owner).tolist():
        mine = np.flatnonzero(singles.owner == j)
        values = singles.X[mine, j]
        order = np.argsort(values, kind="stable")
        values, gains = values[order], singles.gain[mine][order]
        changed = C[:, j] != original[j]
        at = np.clip(np.searchsorted(values, C[changed, j]), 0, values.size - 1)
        gained[changed] += np.where(values[at] == C[changed, j], gains[at], 0.0)
    return bool((gained >= deficit).any())


def test_the_gains_a_combination_is_predicted_to_add_are_the_loops() -> None:
    rng = np.random.default_rng(10)
    original = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    for _ in range(300):
        owner = rng.integers(0, 4, int(rng.integers(1, 30)))
        X = np.repeat(original.reshape(1, -1), owner.size, axis=0)
        X[np.arange(owner.size), owner] = rng.integers(0, 6, owner.size) + 0.5
        singles = polish._Singles(X, owner, np.ones(owner.size), rng.normal(0.3, 0.3, owner.size))
        C = np.repeat(original.reshape(1, -1), int(rng.integers(0, 12)), axis=0)
        changed = rng.random(C.shape) < 0.5
        C[changed] = (rng.integers(0, 6, C.shape) + 0.5)[changed]
        for deficit in (0.2, 0.5, 1.0):
            assert polish._predicted_to_reach(C, singles, original, deficit) == _reach_loop(
                C, singles, original, deficit
            )


def test_unique_rows_are_numpys_unique_rows() -> None:
    """Rows that each change a few features of the original, repeated, below and above it: the
    same rows in the same order as np.unique(axis=0); with -0.0 or NaN, np.unique itself."""
    rng = np.random.default_rng(11)
    for trial in range(2000):
        m, n = int(rng.integers(1, 7)), int(rng.integers(0, 40))
        original = rng.integers(-2, 3, m).astype(float)
        X = np.repeat(original.reshape(1, -1), n, axis=0)
        changed = rng.random((n, m)) < rng.random()
        X[changed] = rng.integers(-4, 5, (n, m))[changed].astype(float)
        if n:
            X = np.vstack([X, X[rng.integers(0, n, 5)]])
            if trial % 7 == 0:
                X[rng.integers(0, X.shape[0]), rng.integers(0, m)] = -0.0 if trial % 2 else np.nan
        assert _same(unique_rows(X, original), np.unique(X, axis=0))
