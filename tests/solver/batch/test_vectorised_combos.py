"""The vectorised engine's combinations and beam (:mod:`counterplan.solver.vector.combos`): each
rule gives every instance of a block the rows the per-row polish's rule
(:mod:`counterplan.solver.core.trade`) gives it alone, the stage brings answers nearer without
making any worse, a row keeps its answer whatever its block, and a stop is kept before the stage's
calls."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.pipeline import Pipeline

from counterplan.planning import ClassGoal
from counterplan.planning.demo import IMMUTABLE, TARGET
from counterplan.planning.models import SklearnClassifierAdapter
from counterplan.solver.batch.vectorised import run_vector_block
from counterplan.solver.core.combinations import segmented_smallest
from counterplan.solver.core.trade import (
    COMBO_FEATURES,
    COMBO_SLACK,
    beam_candidates,
    combo_candidates,
    extend_candidates,
    pareto_front,
    trade_values,
)
from counterplan.solver.explainer import Explainer
from counterplan.solver.vector.combos import (
    Singles,
    beam_keep,
    beam_pairs,
    cheaper_ranges,
    combination_rows,
    combinations,
    extend_rows,
    pair_rows,
    pareto_fronts,
    thinned,
)
from counterplan.solver.vector.scoring import BlockScorer
from counterplan.solver.vector.search import Outcome, VectorSearch, VectorSettings, hopeless

pytestmark = pytest.mark.unit
GOAL = [ClassGoal(target=1, confidence=0.7)]
D = 6


def _block(seed: int, count: int) -> tuple[np.ndarray, Singles]:
    """``count`` instances of ``D`` features, each with 3-9 single rows per feature (random
    values, costs and goal gains, a few of them repeated or without gain), grouped by instance
    and feature as the scan lists them."""
    rng = np.random.default_rng(seed)
    originals = rng.integers(0, 50, size=(count, D)).astype(float)
    inst, feature, value, cost, gain = [], [], [], [], []
    for i in range(count):
        for j in range(D):
            k = int(rng.integers(3, 10))
            v = originals[i, j] + np.round(rng.uniform(-20, 20, size=k), 1)
            v[v == originals[i, j]] += 0.5
            c = np.round(np.abs(v - originals[i, j]) * rng.uniform(0.05, 0.3), 3)
            g = np.round(rng.uniform(-0.2, 1.0, size=k), 3)
            inst += [i] * k
            feature += [j] * k
            value.append(v)
            cost.append(c)
            gain.append(g)
    singles = Singles(
        np.array(inst, dtype=np.intp),
        np.array(feature, dtype=np.intp),
        np.concatenate(value),
        np.concatenate(cost),
        np.concatenate(gain),
    )
    return originals, singles


def _rows_of(originals: np.ndarray, singles: Singles, i: int) -> tuple[np.ndarray, np.ndarray, Singles]:
    """Instance ``i``'s single rows as the per-row rules take them (rows of the original with one
    feature set, and each row's feature), and as an instance of its own."""
    mine = np.flatnonzero(singles.inst == i)
    own = singles.take(mine)
    X = np.repeat(originals[i : i + 1], mine.size, axis=0)
    X[np.arange(mine.size), own.feature] = own.value
    alone = Singles(np.zeros(mine.size, dtype=np.intp), own.feature, own.value, own.cost, own.gain)
    return X, own.feature, alone


def _as_set(rows: np.ndarray) -> set[tuple[float, ...]]:
    return {tuple(r) for r in rows.tolist()}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_each_instance_of_a_block_gets_the_per_row_rules_rows(seed: int) -> None:
    count = 5
    originals, singles = _block(seed, count)
    deficit = np.linspace(0.8, 2.0, count)
    best = np.linspace(2.0, 6.0, count)
    group = singles.inst * D + singles.feature
    front = pareto_fronts(group, singles.cost, singles.gain)
    entries = thinned(front, group, 4)
    inst, chosen, _ = combinations(
        singles,
        entries,
        deficit=deficit,
        best=best,
        max_features=COMBO_FEATURES,
        slack=COMBO_SLACK,
        max_rows=12,
        max_states=40,
    )
    combos = combination_rows(originals, singles, inst, chosen)
    a, b = beam_pairs(singles, best=best, width=2, max_rows=10)
    pairs = pair_rows(originals, singles, a, b)
    pair_inst = singles.inst[a]
    row_cost = np.abs(pairs - originals[pair_inst]).sum(axis=1) * 0.1
    row_gain = np.linspace(0.0, 1.0, pairs.shape[0])
    extended, extended_inst = extend_rows(
        pairs, pair_inst, row_cost, row_gain, singles, originals=originals, best=best, max_rows=7
    )
    for i in range(count):
        X, owner, _ = _rows_of(originals, singles, i)
        mine = np.flatnonzero(singles.inst == i)
        per_row_front = mine[pareto_front(owner, singles.cost[mine], singles.gain[mine])]
        np.testing.assert_array_equal(front[singles.inst[front] == i], per_row_front)
        theirs = combo_candidates(
            originals[i],
            X,
            owner,
            singles.cost[mine],
            singles.gain[mine],
            deficit=float(deficit[i]),
            best_distance=float(best[i]),
            max_rows=12,
            max_states=40,
            per_feature=4,
        )
        assert theirs.shape[0] > 0  # the case is not empty
        assert _as_set(combos[inst == i]) == _as_set(theirs)
        theirs = beam_candidates(
            originals[i],
            X,
            owner,
            singles.cost[mine],
            singles.gain[mine],
            best_distance=float(best[i]),
            width=2,
            max_rows=10,
        )
        assert _as_set(pairs[pair_inst == i]) == _as_set(theirs)
        here = pair_inst == i
        theirs = extend_candidates(
            originals[i],
            pairs[here],
            row_cost[here],
            row_gain[here],
            X,
            owner,
            singles.cost[mine],
            singles.gain[mine],
            best_distance=float(best[i]),
            max_rows=7,
        )
        assert _as_set(extended[extended_inst == i]) == _as_set(theirs)


def test_an_instance_gets_the_same_rows_alone_as_in_its_block() -> None:
    count = 4
    originals, singles = _block(7, count)
    best = np.full(count, 4.0)
    deficit = np.ones(count)

    def rows(o: np.ndarray, s: Singles, n: int, b: np.ndarray, f: np.ndarray) -> tuple[Any, ...]:
        group = s.inst * D + s.feature
        entries = thinned(pareto_fronts(group, s.cost, s.gain), group, 16)
        inst, chosen, _ = combinations(
            s, entries, deficit=f, best=b, max_features=4, slack=0.5, max_rows=9, max_states=30
        )
        a, c = beam_pairs(s, best=b, width=3, max_rows=8)
        return combination_rows(o, s, inst, chosen), inst, pair_rows(o, s, a, c), s.inst[a]

    together = rows(originals, singles, count, best, deficit)
    for i in range(count):
        _, _, alone = _rows_of(originals, singles, i)
        one = rows(originals[i : i + 1], alone, 1, best[i : i + 1], deficit[i : i + 1])
        np.testing.assert_array_equal(together[0][together[1] == i], one[0])
        np.testing.assert_array_equal(together[2][together[3] == i], one[2])


def test_segmented_caps_and_the_beam_s_rows_are_per_instance() -> None:
    values = np.array([3.0, 1.0, 2.0, 1.0, 5.0, 0.0, 4.0])
    group = np.array([0, 0, 0, 0, 2, 2, 2])
    np.testing.assert_array_equal(segmented_smallest(values, group, 2), [1, 3, 5, 6])
    scores = np.array([[-1.0, 0, 0, -2, -1], [-0.5, 0, 0, -3, -1], [0.0, 0, 0, -1, -1], [-0.2, 0, 0, -1, -1]])
    np.testing.assert_array_equal(beam_keep(scores, np.array([0, 0, 0, 1]), 1), [1, 3])


class CountingAdapter(SklearnClassifierAdapter):
    """The real model, counting the search's calls."""

    def __init__(self, model: Any) -> None:
        super().__init__(model, TARGET)
        self.calls = 0
        self._lock = threading.Lock()

    def predict(self, X: Any, space: Any) -> Any:
        with self._lock:
            self.calls += 1
        return super().predict(X, space)


def _items(rows: pd.DataFrame) -> list[tuple[Any, dict[str, Any]]]:
    return [(i, {str(k): v for k, v in row.items()}) for i, row in rows.iterrows()]


def _solve(explainer: Explainer, items: Any, seed: int, **settings: Any) -> pd.DataFrame:
    records: list[dict[str, Any]] = []
    run_vector_block(explainer, items, seed, records.append, settings=VectorSettings(**settings))
    return pd.DataFrame(records).set_index("row_id").loc[[i for i, _ in items]]


def test_the_combinations_bring_answers_nearer_and_none_farther(
    loan_explainer: Explainer, rejected_loans: pd.DataFrame
) -> None:
    items = _items(rejected_loans.iloc[:32])
    without = _solve(loan_explainer, items, 11, combos=False, trade_rounds=0, recreate_steps=0)
    ours = _solve(loan_explainer, items, 11)
    assert ours["valid"].all() and without["valid"].all()
    assert (ours["distance"] <= without["distance"] + 1e-9).all()
    assert (ours["distance"] < without["distance"] - 1e-9).sum() >= 3
    assert ours["distance"].mean() <= 0.99 * without["distance"].mean()


def test_a_row_keeps_its_combination_whatever_its_block(
    loan_explainer: Explainer, rejected_loans: pd.DataFrame
) -> None:
    items = _items(rejected_loans.iloc[:24])
    columns = ["score", "distance", "changes"]
    together = _solve(loan_explainer, items, 3)[columns]
    without = _solve(loan_explainer, items, 3, combos=False, trade_rounds=0, recreate_steps=0)[columns]
    changed = [i for i, _ in items if together.loc[i, "score"] != without.loc[i, "score"]]
    assert len(changed) >= 2  # the stage found these rows' answers: each must be found alone too
    for i in changed[:3]:
        alone = _solve(loan_explainer, [item for item in items if item[0] == i], 3)[columns]
        pd.testing.assert_frame_equal(together.loc[[i]], alone)
    for part in (items[::-1], items[5:17]):
        again = _solve(loan_explainer, part, 3)[columns]
        pd.testing.assert_frame_equal(together.loc[again.index], again)


@pytest.mark.parametrize(
    "before_the",
    [
        {"combos": False, "trade_rounds": 0, "recreate_steps": 0},
        {"trade_rounds": 0, "recreate_steps": 0},
        {"recreate_steps": 0},
    ],
    ids=["combinations", "trades", "recreate"],
)
def test_a_stop_is_kept_before_the_stage_s_calls(
    before_the: dict[str, Any], loan_data: pd.DataFrame, loan_model: Pipeline, rejected_loans: pd.DataFrame
) -> None:
    adapter = CountingAdapter(loan_model)
    explainer = Explainer(adapter, loan_data, GOAL, target=TARGET, immutable=IMMUTABLE)
    items = _items(rejected_loans.iloc[:8])
    without = _solve(explainer, items, 5, **before_the)
    before = adapter.calls
    adapter.calls = 0
    full = _solve(explainer, items, 5)
    assert adapter.calls > before  # the stage makes calls of its own
    adapter.calls = 0
    records: list[dict[str, Any]] = []
    run_vector_block(explainer, items, 5, records.append, stop=lambda: adapter.calls >= before)
    assert adapter.calls == before
    stopped = pd.DataFrame(records).set_index("row_id").loc[[i for i, _ in items]]
    assert stopped["valid"].all()
    assert stopped["score"].tolist() == without["score"].tolist()
    assert (full["distance"] <= stopped["distance"] + 1e-9).all()


def _search(explainer: Explainer, rows: pd.DataFrame) -> tuple[list[Any], VectorSearch]:
    problems = [explainer.problem({str(k): v for k, v in row.items()}) for _, row in rows.iterrows()]
    seeds = np.asarray([100 + int(i) for i in rows.index], dtype=np.uint64)  # a row's seed follows the row
    return problems, VectorSearch(BlockScorer(problems, explainer.adapter), seeds, VectorSettings())


def test_each_instance_trades_the_per_row_rule_s_values(
    loan_explainer: Explainer, rejected_loans: pd.DataFrame
) -> None:
    problems, search = _search(loan_explainer, rejected_loans.iloc[:4])
    trades = search.trades()
    rng = np.random.default_rng(0)
    idx = np.arange(len(problems))
    best = search.originals.copy()
    numbers = np.flatnonzero(problems[0].space.mutable & problems[0].space.graded)
    for i in idx:  # a best a few numbers away from the original
        j = rng.choice(numbers, 2, replace=False)
        best[i, j] = problems[i].space.to_grid(
            np.clip(best[i, j] * 1.3 + 1.0, problems[i].space.lower[j], problems[i].space.upper[j]), j
        )
    V = trades.values(best, search.originals, idx)
    for i, problem in enumerate(problems):
        space = problem.space.with_split_values(problem.split_values())
        for j in np.flatnonzero(space.mutable).tolist():
            mine = V[i, trades.feature == j]
            theirs = trade_values(space, j, 24, float(trades.unit[j]), float(best[i, j]))
            assert set(mine[~np.isnan(mine)].tolist()) == set(theirs.tolist()) | {float(space.original[j])}


def test_a_trade_gives_one_feature_back_and_buys_another_nearer_than_the_best(
    loan_explainer: Explainer, rejected_loans: pd.DataFrame
) -> None:
    problems, search = _search(loan_explainer, rejected_loans.iloc[:6])
    outcome = search.run(np.ones(len(problems), dtype=bool))  # each instance's answer: where its trades start
    best, distance = outcome.best, -outcome.scores[:, 3]
    assert (outcome.scores[:, :3] == 0).all()
    idx = np.arange(len(problems))
    X, inst = search.trades().candidates(best, distance, search.originals, idx, front=None, rows=16, round_number=0)
    assert X.shape[0] > 0 and (np.bincount(inst, minlength=idx.size) <= 16).all()
    moved = best[inst] != X
    assert (moved.sum(axis=1) <= 2).all()
    assert (-search.scorer.distance(X, inst) < distance[inst]).all()
    back = moved & (best[inst] != search.originals[inst])
    assert back.any(axis=1).all()  # each gives back a changed feature (to the original or part of the way)
    # an instance's trades are its own, whatever the block
    _, one = _search(loan_explainer, rejected_loans.iloc[[3]])
    Y, _ = one.trades().candidates(
        best[3:4], distance[3:4], one.originals, np.array([0]), front=None, rows=16, round_number=0
    )
    np.testing.assert_array_equal(X[inst == 3], Y)


def test_a_recreate_step_changes_one_feature_within_the_slack_and_the_ruined_one_only_cheaper(
    loan_explainer: Explainer, rejected_loans: pd.DataFrame
) -> None:
    problems, search = _search(loan_explainer, rejected_loans.iloc[:5])
    outcome = search.run(np.ones(len(problems), dtype=bool))
    best, original = outcome.best, search.originals
    changed = (best != original) & problems[0].space.mutable
    k = changed.argmax(axis=1)  # each instance's first changed feature, ruined
    rows = best.copy()
    rows[np.arange(len(problems)), k] = original[np.arange(len(problems)), k]
    cap = np.full(len(problems), 0.5)
    inst = np.arange(len(problems))
    distance = -outcome.scores[:, 3]
    X, chain = search.trades().recreate(
        rows, inst, originals=original, best=distance, caps=(k, cap), slack=0.1, max_rows=24
    )
    assert X.shape[0] > 0 and (np.bincount(chain, minlength=inst.size) <= 24).all()
    moved = rows[chain] != X
    assert (moved.sum(axis=1) == 1).all()
    assert (-search.scorer.distance(X, chain) < distance[chain] * 1.1).all()
    ruined = moved[np.arange(chain.size), k[chain]]
    price = np.abs(X - original[chain])[np.arange(chain.size), k[chain]] / problems[0].scales[k[chain]]
    assert (price[ruined] * problems[0].space.costs[k[chain][ruined]] < 0.5).all()
    # a chain's rows are its own, whatever the block
    _, one = _search(loan_explainer, rejected_loans.iloc[[2]])
    Y, _ = one.trades().recreate(
        rows[2:3],
        np.array([0]),
        originals=one.originals,
        best=distance[2:3],
        caps=(k[2:3], cap[2:3]),
        slack=0.1,
        max_rows=24,
    )
    np.testing.assert_array_equal(X[chain == 2], Y)


def test_routes_polish_as_their_instances_do(loan_explainer: Explainer, rejected_loans: pd.DataFrame) -> None:
    problems, search = _search(loan_explainer, rejected_loans.iloc[:5])
    outcome = search.run(np.ones(len(problems), dtype=bool))
    idx = np.arange(len(problems))
    far = outcome.best + (outcome.best - search.originals) * 0.5  # feasible rows farther out
    far = search.layouts.to_grid(far, idx[:, None], np.arange(far.shape[1])[None, :])
    scores = search.scorer.score(far, idx)
    own = Outcome(far.copy(), scores.copy(), np.zeros(idx.size, dtype=np.intp))
    search._polish(own, np.ones(idx.size, dtype=bool))
    routes = Outcome(far[::-1].copy(), scores[::-1].copy(), np.zeros(idx.size, dtype=np.intp))
    search._polish(routes, np.ones(idx.size, dtype=bool), idx[::-1].copy())
    np.testing.assert_array_equal(routes.best[::-1], own.best)
    assert (own.scores[:, 3] >= scores[:, 3]).all() and (own.scores[:, 3] > scores[:, 3]).any()


def test_a_segmented_cap_is_the_sort_s_whatever_the_groups_sizes() -> None:
    rng = np.random.default_rng(5)
    for trial in range(60):
        n, k = int(rng.integers(1, 3000)), int(rng.integers(1, 150))
        group = np.sort(rng.integers(0, int(rng.integers(1, 40)), n))
        values = rng.integers(0, 12, n).astype(float) if trial % 2 else rng.random(n)  # ties, or none
        values[rng.integers(0, n, 3)] = np.inf
        order = np.lexsort((values, group))
        first = np.searchsorted(group[order], group[order])
        np.testing.assert_array_equal(segmented_smallest(values, group, k), order[np.arange(n) - first < k])


def test_a_query_s_cheap_rows_do_not_depend_on_the_other_queries() -> None:
    inst = np.array([0, 0, 0, 1, 1])
    cost = np.array([1.0, 1.001, 0.5, 3.0, 2.0])
    order, start, end = cheaper_ranges(inst, cost, np.array([0]), np.array([1.0005]))
    alone = order[start[0] : end[0]]
    # beside a query with a large budget (a shared key of instance and cost rounded by it)
    order, start, end = cheaper_ranges(inst, cost, np.array([0, 1]), np.array([1.0005, 1.0e5]))
    np.testing.assert_array_equal(order[start[0] : end[0]], alone)
    np.testing.assert_array_equal(np.sort(alone), [0, 2])
    np.testing.assert_array_equal(np.sort(order[start[1] : end[1]]), [3, 4])


def test_trades_and_rebuilds_take_a_tree_cell_s_value_nearest_the_original(
    loan_explainer: Explainer, rejected_loans: pd.DataFrame
) -> None:
    problems, search = _search(loan_explainer, rejected_loans.iloc[:5])
    trades = search.trades()
    grid = trades.feature[: trades.nearest.shape[1]]
    owner, table = search._scan_rows(np.arange(len(problems)))
    scanned = search._nearest_in_cells(owner, table)
    assert scanned.sum() < 0.8 * scanned.size  # the model's cells hold several values
    for i in range(len(problems)):
        layout = search.layout[i]
        values = trades.grid[layout]
        kept = {(int(j), float(v)) for j, v in zip(grid[trades.nearest[i]], values[trades.nearest[i]], strict=True)}
        mine = (owner == i) & scanned & (search.values[table] != search.originals[i, search.columns[table]])
        assert kept == {  # the scan's values, less the original's own (a slot of its own)
            (int(j), float(v)) for j, v in zip(search.columns[table[mine]], search.values[table[mine]], strict=True)
        }
    # a rebuild step's rows: one value a cell of each feature
    outcome = search.run(np.ones(len(problems), dtype=bool))
    best, original = outcome.best, search.originals
    k = ((best != original) & problems[0].space.mutable).argmax(axis=1)
    rows = best.copy()
    rows[np.arange(len(problems)), k] = original[np.arange(len(problems)), k]
    inst = np.arange(len(problems))
    X, chain = trades.recreate(
        rows,
        inst,
        originals=original,
        best=-outcome.scores[:, 3],
        caps=(k, np.full(inst.size, np.inf)),
        slack=0.5,
        max_rows=10_000,
    )
    feature = (rows[chain] != X).argmax(axis=1)
    value = X[np.arange(chain.size), feature]
    cell = {}
    for i in range(len(problems)):
        mine = owner == i
        for j, v, c in zip(
            search.columns[table[mine]], search.values[table[mine]], search.cells[table[mine]], strict=True
        ):
            cell[(i, int(j), float(v))] = int(c)
    taken = [
        (int(c), cell.get((int(c), int(j), float(v)), (int(j), float(v))))
        for c, j, v in zip(chain, feature, value, strict=True)
    ]
    assert len(taken) == len(set(taken))  # one value a cell, and an original's value once


def test_a_chain_whose_rate_cannot_reach_the_goal_in_time_is_hopeless() -> None:
    base = np.array([[-1.0, 0, 0, -2.0, -1], [-1.0, 0, 0, -2.0, -1], [-1.0, 0, 0, -2.0, -1]])
    # a step of 0.5 distance for 0.5 goal: the rest (0.5) at that rate ends at 3.0
    step = np.array([[-0.5, 0, 0, -2.5, -2], [-0.5, 0, 0, -2.5, -2], [-1.5, 0, 0, -2.5, -2]])
    np.testing.assert_array_equal(hopeless(step, base, np.array([3.0, 3.1, 1.0])), [True, False, False])


def test_a_chain_goes_on_past_a_farther_feasible_step_and_ends_at_a_nearer_one(
    loan_explainer: Explainer, rejected_loans: pd.DataFrame
) -> None:
    _, search = _search(loan_explainer, rejected_loans.iloc[:3])
    d = search.originals.shape[1]
    X = np.arange(5 * d, dtype=float).reshape(5, d)
    chain = np.array([0, 0, 1, 1, 2])
    short = [-0.5, 0, 0, -1.2, -2]  # gains 0.5 for 0.2: at that rate the goal at 1.4
    scores = np.array([[0, 0, 0, -2.5, -2], short, [0, 0, 0, -1.5, -2], short, short], dtype=float)
    base = np.tile([-1.0, 0, 0, -1.0, -1], (3, 1))
    before = np.full(3, 2.0)
    left = np.array([-1, -1, 0])  # chain 2 has gone on as far as it may
    found = Outcome(np.zeros((3, d)), np.full((3, 5), -np.inf), np.zeros(3, dtype=np.intp))
    goes, pick = search._chain_steps(found, X=X, chain=chain, scores=scores, base=base, before=before, left=left)
    # chain 0's feasible row is farther than the best: it goes on from its short row, without slack
    np.testing.assert_array_equal(goes, [True, False, False])
    assert pick[0] == 1 and left[0] == search.settings.recreate_onward - 1
    np.testing.assert_array_equal(found.best[:2], X[[0, 2]])  # each chain keeps its feasible row
    # at a rate that would reach the goal no nearer than the best, it stops
    left = np.array([-1, -1, -1])
    slow = scores.copy()
    slow[1] = [-0.9, 0, 0, -1.2, -2]  # gains 0.1 for 0.2: the goal at 3.0
    goes, _ = search._chain_steps(found, X=X, chain=chain, scores=slow, base=base, before=before, left=left)
    assert not goes[0]
