"""The boundary polish's trades and combinations (solver.core.trade): answers a bisection, which
only moves changed features back, cannot reach."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import make_classification
from sklearn.ensemble import GradientBoostingClassifier, HistGradientBoostingClassifier, RandomForestClassifier
from sklearn.linear_model import LogisticRegression

from counterplan.planning import CallableAdapter, ClassGoal, CounterfactualProblem, FloatFeature, OutputSpec
from counterplan.planning.space import FloatMatrix
from counterplan.solver import SolverConfig, TerminationConfig, explain
from counterplan.solver.core.phase import PhaseScope
from counterplan.solver.core.trade import pricer_for, recreate_candidates, trade_candidates
from counterplan.solver.counterfactual import CounterfactualSolver
from counterplan.solver.local import polish
from counterplan.solver.local.config import BoundaryPolishPhaseConfig, FeatureScanPhaseConfig
from counterplan.solver.local.scan import FeatureScanPhase
from tests.interactions import FEATURES, together_data


def _give_back_and_buy() -> CounterfactualProblem:
    """Approved when a + b >= 4 (a linear model). b reaches 2 at most but is cheap: a to 4 alone
    costs 0.4 (range-scaled), a to 2 with b to 2 costs 0.2 + 0.1."""

    def linear(X: FloatMatrix) -> FloatMatrix:
        p = 1.0 / (1.0 + np.exp(-20.0 * (X[:, 0] + X[:, 1] - 4.0)))
        return np.column_stack([1.0 - p, p])

    return CounterfactualProblem(
        [
            FloatFeature(name="a", value=0.0, low=0.0, high=10.0),
            FloatFeature(name="b", value=0.0, low=0.0, high=2.0, cost=0.1),
        ],
        [ClassGoal(target=1, margin=0.0)],
        CallableAdapter(linear, [OutputSpec("ok", (0, 1))]),
    )


def _scan_and_polish(polish: BoundaryPolishPhaseConfig) -> SolverConfig:
    """A coarse scan (one feature at a time, no greedy chain) and the polish: what the polish
    adds is all there is."""
    return SolverConfig(
        phases=(FeatureScanPhaseConfig(grid_size=4, greedy_steps=0), polish), termination=TerminationConfig()
    )


def test_a_trade_gives_back_an_expensive_change_and_buys_a_cheap_one() -> None:
    problem = _give_back_and_buy()
    alone = explain(problem, _scan_and_polish(BoundaryPolishPhaseConfig(trade_rounds=0, combos=False)), seed=0)
    assert alone.valid and alone.proposed["b"] == 0.0  # the bisection shaves a to 4 and stops there
    assert -alone.score_levels[3] == pytest.approx(0.4, abs=0.002)
    traded = explain(problem, _scan_and_polish(BoundaryPolishPhaseConfig()), seed=0)
    assert traded.valid
    assert traded.proposed["b"] == pytest.approx(2.0, abs=0.01) and traded.proposed["a"] == pytest.approx(2.0, abs=0.01)
    assert -traded.score_levels[3] == pytest.approx(0.3, abs=0.002)
    again = explain(problem, _scan_and_polish(BoundaryPolishPhaseConfig()), seed=0)
    assert again.proposed == traded.proposed  # the seeded sample of a round: the same seed, the same answer


def test_a_trade_round_holds_only_rows_predicted_nearer_and_is_seeded() -> None:
    problem = _give_back_and_buy()
    space = problem.space
    pricer = pricer_for(problem)
    assert pricer is not None
    best = np.array([4.0, 0.0])
    distance = float(pricer.cost(best, np.arange(2)).sum())

    def round_(seed: int, rows: int) -> FloatMatrix:
        return trade_candidates(
            best,
            distance,
            space,
            pricer,
            grid_size=24,
            max_rows=rows,
            rng=np.random.default_rng(seed),  # type: ignore[arg-type]
        )

    X = round_(0, 4096)
    assert X.shape[0] > 0
    predicted = np.array([pricer.cost(row, np.arange(2)).sum() for row in X])
    assert (predicted < distance).all()
    assert ((best != X).sum(axis=1) <= 2).all() and (X[:, 0] < best[0]).all()  # a given back, b bought
    few = round_(7, 16)
    assert few.shape[0] == 16 and np.array_equal(few, round_(7, 16))  # the sample follows the seed
    assert not np.array_equal(few, round_(8, 16))


def test_a_problem_whose_distance_is_no_per_feature_sum_has_no_pricer(linear_problem: CounterfactualProblem) -> None:
    assert pricer_for(linear_problem) is not None
    assert pricer_for(None) is None


@pytest.fixture(scope="module")
def together_problem() -> CounterfactualProblem:
    """A tree ensemble approving when a > 3 and b > 3 (together), or when c > 9; the original is
    all zeros. Alone, c to 9 is the cheapest single change (0.9 of the range); a and b to 3
    together cost 0.6."""
    grid = np.linspace(0.0, 10.0, 21)
    a, b, c = (v.ravel() for v in np.meshgrid(grid, grid, grid, indexing="ij"))
    data = pd.DataFrame({"a": a, "b": b, "c": c})
    data["y"] = (((data.a > 3) & (data.b > 3)) | (data.c > 9)).astype(int)
    model = GradientBoostingClassifier(n_estimators=60, max_depth=2, random_state=0).fit(data[["a", "b", "c"]], data.y)
    return CounterfactualProblem.from_dataframe(
        data, {"a": 0.0, "b": 0.0, "c": 0.0}, model, [ClassGoal(target=1, confidence=0.7)], target="y"
    )


def test_combinations_find_two_features_a_tree_needs_together(together_problem: CounterfactualProblem) -> None:
    off = BoundaryPolishPhaseConfig(trade_rounds=0, combos=False)
    alone = explain(together_problem, _scan_and_polish(off), seed=0)
    assert alone.valid and [c.feature for c in alone.changes] == ["c"]
    together = explain(together_problem, _scan_and_polish(BoundaryPolishPhaseConfig(trade_rounds=0)), seed=0)
    assert together.valid and sorted(c.feature for c in together.changes) == ["a", "b"]
    assert -together.score_levels[3] < -alone.score_levels[3]


def test_the_trees_pairs_find_two_changes_one_of_which_hurts_alone() -> None:
    """a past 3 alone all but rules approval out, b past 3 alone changes nothing, both approve;
    c past 9 approves alone at twice the cost. No added gains predict a and b (a's hurt, so it is on
    no front, and neither leads the beam): local search paid for c, 91% above the exact engine's
    proven optimum, which changes a and b. The trees' pairs (BoundaryPolishPhaseConfig.pair_rows)
    hold them, scored in the combinations' call."""
    data = together_data()
    model = HistGradientBoostingClassifier(max_iter=60, max_depth=3, random_state=0).fit(data[FEATURES], data.y)
    problem = CounterfactualProblem.from_dataframe(
        data, dict.fromkeys(FEATURES, 1.0), model, [ClassGoal(target=1, confidence=0.7)], target="y"
    )
    local = explain(problem, seed=0)
    exact = explain(problem, engine="exact", seed=0)
    assert exact.valid and exact.statistics.exact is not None and exact.statistics.exact.proven
    assert local.valid and sorted(c.feature for c in local.changes) == ["a", "b"]
    assert -local.score_levels[3] <= 1.02 * -exact.score_levels[3]


def test_a_linear_models_far_row_is_traded_to_within_two_percent_of_its_optimum() -> None:
    """A logistic regression on twelve whole-number features of different MADs, its least likely
    row to 0.9 (several features changed at once, some to their bounds, as heloc's rows at 0.9):
    the trades drew their buys at random from the pairs around the best and missed the exchanges
    of marginal rates that reach the optimum (+2.9% above the exact engine's); the single rows'
    fronts as buys, after the trades, reach it (+1.1%)."""
    X, y = make_classification(n_samples=600, n_features=12, n_informative=8, n_redundant=2, random_state=1)
    scale = np.random.default_rng(1).choice([1, 2, 5, 10], size=12)
    data = pd.DataFrame(np.round(X * scale + 3 * scale), columns=[f"f{i}" for i in range(12)])
    model = LogisticRegression(max_iter=2000).fit(data, y)
    data["y"] = y
    problem = CounterfactualProblem.from_dataframe(data, 311, model, [ClassGoal(target=1, confidence=0.9)], target="y")
    local = explain(problem, seed=0)
    exact = explain(problem, engine="exact", seed=0)
    assert local.valid and exact.valid and exact.statistics.exact is not None and exact.statistics.exact.proven
    assert -local.score_levels[3] <= 1.02 * -exact.score_levels[3]


@pytest.fixture(scope="module")
def one_large_or_three_small() -> CounterfactualProblem:
    """A tree ensemble approving when a > 50 (a is 0 or 100 in the data, so its MAD is 0 and it
    costs 1 a unit, as adult's capital-gain) or when b, c and d all exceed 0.2 (MAD about 0.25:
    about 2.4 together); the original is all zeros. No single give-back and buy gets from the
    one to the other, and a below 50 gains nothing."""
    rng = np.random.default_rng(0)
    n = 6000
    data = pd.DataFrame({"a": np.where(rng.random(n) < 0.05, 100.0, 0.0), "b": rng.uniform(0, 1, n)})
    data["c"], data["d"] = rng.uniform(0, 1, n), rng.uniform(0, 1, n)
    data["y"] = ((data.a > 50) | ((data.b > 0.2) & (data.c > 0.2) & (data.d > 0.2))).astype(int)
    model = GradientBoostingClassifier(n_estimators=100, max_depth=3, random_state=0)
    model.fit(data[["a", "b", "c", "d"]], data.y)
    return CounterfactualProblem.from_dataframe(
        data, {"a": 0.0, "b": 0.0, "c": 0.0, "d": 0.0}, model, [ClassGoal(target=1, confidence=0.7)], target="y"
    )


def test_ruin_and_recreate_replaces_one_large_change_by_several_small_ones(
    one_large_or_three_small: CounterfactualProblem,
) -> None:
    problem = one_large_or_three_small
    off = BoundaryPolishPhaseConfig(combos=False, recreate_steps=0)
    kept = explain(problem, _scan_and_polish(off), seed=0)
    assert kept.valid and [c.feature for c in kept.changes] == ["a"]  # trades alone keep the large one
    rebuilt = explain(problem, _scan_and_polish(BoundaryPolishPhaseConfig(combos=False)), seed=0)
    assert rebuilt.valid and sorted(c.feature for c in rebuilt.changes) == ["b", "c", "d"]
    assert -rebuilt.score_levels[3] < 0.8 * -kept.score_levels[3]


@pytest.fixture(scope="module")
def shave_past_nearly_free_crossings() -> tuple[CounterfactualProblem, RandomForestClassifier]:
    """A random forest approving when e >= 9 alone, e >= 6 with f, or e >= 4 with u, v and w all
    above 0 (heloc's forest row 3374 in small: e is the small-MAD feature, MAD 3; u, v and w have
    MADs near 30, so a unit step across their threshold at 0.5 costs about 0.03); the original
    is all zeros."""
    rng = np.random.default_rng(0)
    n = 4000
    data = pd.DataFrame({"e": rng.integers(0, 11, n).astype(float), "f": rng.integers(0, 2, n).astype(float)})
    for k in "uvw":
        data[k] = np.where(rng.random(n) < 0.3, 0.0, rng.integers(1, 101, n)).astype(float)
    cheap = (data.u >= 1) & (data.v >= 1) & (data.w >= 1)
    data["y"] = ((data.e >= 9) | ((data.e >= 6) & (data.f >= 1)) | ((data.e >= 4) & cheap)).astype(int)
    model = RandomForestClassifier(n_estimators=30, max_depth=6, random_state=0).fit(data[list("efuvw")], data.y)
    problem = CounterfactualProblem.from_dataframe(
        data, dict.fromkeys("efuvw", 0.0), model, [ClassGoal(target=1, confidence=0.7)], target="y"
    )
    return problem, model


def test_a_rebuild_goes_on_past_a_farther_feasible_step(
    shave_past_nearly_free_crossings: tuple[CounterfactualProblem, RandomForestClassifier],
) -> None:
    problem, model = shave_past_nearly_free_crossings
    polish_only = BoundaryPolishPhaseConfig(combos=False)
    ended = explain(problem, _scan_and_polish(polish_only.model_copy(update={"recreate_onward": 0})), seed=0)
    assert ended.valid and [c.feature for c in ended.changes] == ["e"]  # stopped at its first feasible step
    onward = explain(problem, _scan_and_polish(polish_only), seed=0)
    assert onward.valid and sorted(c.feature for c in onward.changes) == ["e", "u", "v", "w"]
    assert -onward.score_levels[3] < 0.6 * -ended.score_levels[3]
    # no row of a whole-number grid around the original does better (the exact engine proves it optimal)
    axes = np.meshgrid(np.arange(11.0), [0.0, 1.0], *[np.arange(11.0)] * 3, indexing="ij")
    grid = pd.DataFrame({k: a.ravel() for k, a in zip("efuvw", axes, strict=True)})
    approved = model.predict_proba(grid)[:, 1] >= 0.7
    cheapest = (grid.to_numpy()[approved] / problem.scales).sum(axis=1).min()
    assert -onward.score_levels[3] <= cheapest + 1e-9


def test_a_recreate_step_prices_each_row_and_caps_the_given_back_feature() -> None:
    problem = _give_back_and_buy()
    space, pricer = problem.space, pricer_for(problem)
    assert pricer is not None
    row = space.original.copy()
    X, owner = recreate_candidates(row, 0.0, 0.5, space, pricer, grid_size=8, caps={0: 0.3}, max_rows=1024)
    cost = pricer.cost(X[np.arange(owner.size), owner], owner)
    assert X.shape[0] > 0 and (cost < 0.5).all()  # only rows predicted nearer than the best
    assert (cost[owner == 0] < 0.3).all() and (owner == 0).any()  # a comes back only cheaper than it was
    assert ((row != X).sum(axis=1) == 1).all()
    few, _ = recreate_candidates(row, 0.0, 0.5, space, pricer, grid_size=8, caps={0: 0.3}, max_rows=5)
    assert few.shape[0] == 5


def test_the_combinations_take_the_scans_single_feature_rows_from_it(
    together_problem: CounterfactualProblem, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The polish's single-feature rows of the original that the feature scan scored already are
    not sent to the model again: their scores come from the scan."""
    scanned: list[FloatMatrix] = []
    sent: list[FloatMatrix] = []
    scan_solve = FeatureScanPhase.solve

    def solve(self: FeatureScanPhase, phase_scope: PhaseScope) -> None:
        scan_solve(self, phase_scope)
        known = phase_scope.solver_scope.scanned
        assert known is not None
        scanned.append(known[0])

    real_score = polish._score

    def score(phase_scope: PhaseScope, X: FloatMatrix) -> tuple[FloatMatrix, bool]:
        sent.append(X.copy())
        return real_score(phase_scope, X)

    monkeypatch.setattr(FeatureScanPhase, "solve", solve)
    monkeypatch.setattr(polish, "_score", score)
    config = SolverConfig(phases=(FeatureScanPhaseConfig(), BoundaryPolishPhaseConfig(trade_rounds=0)))
    result = explain(together_problem, config, seed=0)
    assert result.valid and scanned and sent
    seen = {row.tobytes() for row in scanned[0]}
    singles = sent[0]  # the combinations' first call: the original's single-feature rows
    assert singles.shape[0] > 0
    assert not any(row.tobytes() in seen for row in singles)


def test_a_rounds_recreate_chains_share_their_model_calls(
    one_large_or_three_small: CounterfactualProblem, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chains of a ruin-and-recreate round step together: each step's rows of every chain
    still going are one model call, so a round of several chains takes fewer calls than its
    chains take steps (one call a step each, one chain after the other, before)."""
    counts = {"steps": 0, "calls": 0}
    rebuilding = [False]
    real_candidates, real_score, real_rebuild = (
        polish.recreate_candidates,
        polish._score,
        polish.BoundaryPolishPhase._rebuild,
    )

    def candidates(*args: Any, **kwargs: Any) -> Any:
        counts["steps"] += 1  # one chain's step
        return real_candidates(*args, **kwargs)

    def score(phase_scope: PhaseScope, X: FloatMatrix) -> tuple[FloatMatrix, bool]:
        counts["calls"] += rebuilding[0]
        return real_score(phase_scope, X)

    def rebuild(*args: Any, **kwargs: Any) -> Any:
        rebuilding[0] = True
        try:
            return real_rebuild(*args, **kwargs)
        finally:
            rebuilding[0] = False

    monkeypatch.setattr(polish, "recreate_candidates", candidates)
    monkeypatch.setattr(polish, "_score", score)
    monkeypatch.setattr(polish.BoundaryPolishPhase, "_rebuild", rebuild)
    result = explain(one_large_or_three_small, _scan_and_polish(BoundaryPolishPhaseConfig(combos=False)), seed=0)
    assert result.valid and sorted(c.feature for c in result.changes) == ["b", "c", "d"]
    assert 0 < counts["calls"] < counts["steps"]  # b, c and d each given back in the second round


def test_no_trade_round_starts_from_a_row_the_solve_traded_from() -> None:
    """A row rebuilt by ruin and recreate often bisects back to the best (or to a route traded
    before): trading from it again would build much the same rows, so its trades end there."""
    rng = np.random.default_rng(0)
    data = pd.DataFrame(rng.normal(size=(3000, 6)), columns=list("abcdef"))
    data["y"] = (data.a + 0.5 * data.b + 0.3 * data.c * data.d - 0.4 * data.e > 0.8).astype(int)
    features = list("abcdef")
    model = GradientBoostingClassifier(n_estimators=60, max_depth=3, random_state=0).fit(data[features], data.y)
    row = data[model.predict(data[features]) == 0].iloc[0]
    problem = CounterfactualProblem.from_dataframe(
        data, {c: row[c] for c in features}, model, [ClassGoal(target=1, confidence=0.7)], target="y"
    )
    starts: list[bytes] = []
    real = polish.trade_candidates

    def spy(best: FloatMatrix, *args: Any, **kwargs: Any) -> FloatMatrix:
        starts.append(best.tobytes())
        return real(best, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(polish, "trade_candidates", spy)
        result = explain(problem, seed=0)
    assert result.valid and len(starts) >= 2
    assert len(set(starts)) == len(starts)


def _levels(goal: float, distance: float) -> list[float]:
    """A score row: the goal's hard level (0 when reached) and the distance's soft level."""
    return [goal, 0.0, 0.0, -distance, 0.0]


def test_each_recreate_chain_keeps_its_own_onward_state() -> None:
    """In a round's shared step, each chain goes on past its own farther feasible step
    (``recreate_onward``): it keeps its best farther row, counts its own steps left and then asks
    only for rows nearer than the best (no slack), while a chain whose feasible row is nearer than
    the best, or whose going on is hopeless, leaves the step."""
    rows = np.arange(8, dtype=float).reshape(8, 1)
    onward, near, hopeless = (polish._Chain(rows[0].copy(), {0: 1.0}) for _ in range(3))
    # best 2.0: a feasible row at 3.0 (farther), a short row at 1.2 that could still reach the goal at 1.4
    assert onward.step(rows[:3], np.array([_levels(-1, 1), _levels(0, 3), _levels(-0.5, 1.2)]), 2.0, 2)
    assert onward.left == 1 and onward.found is not None and onward.found[0][0] == 1.0
    assert (onward.row == rows[2]).all()
    assert not near.step(rows[:3], np.array([_levels(-1, 1), _levels(0, 1.5), _levels(-0.5, 1.2)]), 2.0, 2)
    assert near.left is None and near.found is not None and near.found[0][0] == 1.0
    # the short row's rate (0.5 for 0.75) would end the way at 2.5, no nearer than 2.0: hopeless
    assert not hopeless.step(rows[:3], np.array([_levels(-1, 1), _levels(0, 3), _levels(-0.5, 1.75)]), 2.0, 2)
    assert hopeless.found is not None and hopeless.left == 2
    # a second farther step, nearer than the first: kept; its last step left taken
    assert onward.step(rows[3:5], np.array([_levels(0, 2.5), _levels(-0.2, 1.3)]), 2.0, 2)
    assert onward.left == 0 and onward.found is not None and onward.found[0][0] == 3.0
    assert not onward.step(rows[5:6], np.array([_levels(-0.1, 1.35)]), 2.0, 2)  # no steps left
    assert onward.found[0][0] == 3.0


def test_a_recreate_rounds_rebuilt_rows_are_bisected_together(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bisections of a round's rebuilt rows step together, one model call an iteration for
    all, and each ends where it ends alone."""
    rng = np.random.default_rng(0)
    data = pd.DataFrame(rng.normal(size=(3000, 6)), columns=list("abcdef"))
    data["y"] = (data.a + 0.5 * data.b + 0.3 * data.c * data.d - 0.4 * data.e + 0.3 * data.f > 0.8).astype(int)
    features = list("abcdef")
    model = HistGradientBoostingClassifier(max_iter=60, random_state=0).fit(data[features], data.y)
    rows = data[model.predict(data[features]) == 0].iloc[[0, 7]]  # each with a round of two rebuilt rows
    real = polish.BoundaryPolishPhase._bisect_together
    counts = {"together": 0, "iterations": 0, "calls": 0}

    def together(self: Any, phase_scope: PhaseScope, starts: list[Any]) -> Any:
        if len(starts) < 2:
            return real(self, phase_scope, starts)
        scorer = phase_scope.solver_scope.scorer
        calls = scorer.calculator.model_call_count
        iterations = [0]
        candidates = polish.Bisection.candidates

        def counted(bisection: Any, row: FloatMatrix) -> Any:
            iterations[0] += 1
            return candidates(bisection, row)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(polish.Bisection, "candidates", counted)
            ends = real(self, phase_scope, starts)
        counts["together"] += 1
        counts["iterations"] += iterations[0]
        counts["calls"] += scorer.calculator.model_call_count - calls
        for (row, score), start in zip(ends, starts, strict=True):
            alone_row, alone_score = real(self, phase_scope, [start])[0]
            assert np.array_equal(row, alone_row) and np.array_equal(score, alone_score)
        return ends

    monkeypatch.setattr(polish.BoundaryPolishPhase, "_bisect_together", together)
    for _, row in rows.iterrows():
        problem = CounterfactualProblem.from_dataframe(
            data, {c: row[c] for c in features}, model, [ClassGoal(target=1, confidence=0.7)], target="y"
        )
        assert explain(problem, seed=0).valid
    assert counts["together"] > 0
    assert counts["calls"] < counts["iterations"]


def test_the_beam_is_not_built_once_the_solve_must_stop(
    together_problem: CounterfactualProblem, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The beam's pairs are pure computation (a second on a 300-tree forest of 30 features, past
    a time limit): the polish asks the clock before building them, as before every model call."""
    config = SolverConfig(phases=(FeatureScanPhaseConfig(), BoundaryPolishPhaseConfig(trade_rounds=0)))
    beams: list[bool] = []
    real_combos, real_beam = polish.combo_candidates, polish.beam_candidates

    def beam(*args: Any, **kwargs: Any) -> FloatMatrix:
        beams.append(True)
        return real_beam(*args, **kwargs)

    monkeypatch.setattr(polish, "beam_candidates", beam)
    explain(together_problem, config, seed=0)
    assert beams  # the beam runs on this problem

    beams.clear()
    solver = CounterfactualSolver(together_problem, config, seed=0)

    def combos(*args: Any, **kwargs: Any) -> FloatMatrix:
        solver.terminate_early()  # the time is up while the combinations are built
        return real_combos(*args, **kwargs)

    monkeypatch.setattr(polish, "combo_candidates", combos)
    result = solver.solve()
    assert not beams and result.stopped_early
