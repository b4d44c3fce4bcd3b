"""The feature scan spends rows only where they can tell: no row is scored twice, a chain with a
tree's split values rescans one value per cell and side of the original, and a rescan leaves
out the rows that can be neither its best nor the chain's next step, all without changing
what the scan finds (the same best row, starting points and row set aside)."""

from __future__ import annotations

import functools
import importlib.util
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder

from counterplan.planning import (
    CallableAdapter,
    CategoricalFeature,
    ClassGoal,
    CounterfactualProblem,
    FloatFeature,
    IntegerFeature,
    OutputSpec,
)
from counterplan.planning.calculator import ScoreCalculator
from counterplan.planning.models import adapt_sklearn
from counterplan.planning.relations import LearnedConstraint
from counterplan.planning.space import FloatMatrix, SplitValues
from counterplan.solver.core.config import TerminationConfig
from counterplan.solver.core.phase import PhaseScope
from counterplan.solver.core.pool import Pool
from counterplan.solver.core.scope import Progress, SolverScope
from counterplan.solver.core.termination import Termination
from counterplan.solver.core.trade import one_per_cell
from counterplan.solver.local.config import FeatureScanPhaseConfig
from counterplan.solver.local.scan import (
    FeatureScanPhase,
    ScanGrid,
    _Distances,
    _nearest_in_cells,
    _Scans,
    _verified,
    split_cells,
)
from counterplan.solver.scoring import CalculatorScorer

PLANS = ("basic", "silver", "gold")


@functools.cache
def _model(kind: str = "hgb") -> Pipeline:
    """Boosted trees over a number on a 0.1 grid, a whole number and a category (fitted once)."""
    rng = np.random.default_rng(0)
    n = 800
    frame = pd.DataFrame(
        {
            "income": np.round(rng.uniform(0.0, 10.0, n), 1),
            "tenure": rng.integers(0, 30, n),
            "debt": np.round(rng.uniform(0.0, 5.0, n), 1),
            "plan": rng.choice(PLANS, n),
        }
    )
    score = frame.income + 0.3 * frame.tenure - frame.debt + 1.5 * (frame.plan == "gold") + rng.normal(0, 0.5, n)
    encode = ColumnTransformer(
        [
            ("plan", OneHotEncoder(handle_unknown="ignore"), ["plan"]),
            ("numbers", "passthrough", ["income", "tenure", "debt"]),
        ]
    )
    estimator: Any = HistGradientBoostingClassifier(max_iter=40, random_state=0)
    if kind == "xgboost":
        from xgboost import XGBClassifier

        estimator = XGBClassifier(n_estimators=40, max_depth=3, random_state=0)
    model = Pipeline([("encode", encode), ("model", estimator)])
    return model.fit(frame, (score > 8.0).astype(int))


def _tree_problem(
    income: float, tenure: int, debt: float, kind: str = "hgb", *, cuts: bool = False
) -> CounterfactualProblem:
    """A problem of :func:`_model`'s trees, with their split values (and their cuts with ``cuts``)."""
    features: list[Any] = [
        FloatFeature(name="income", value=income, low=0.0, high=10.0, precision=1),
        IntegerFeature(name="tenure", value=tenure, low=0, high=29),
        FloatFeature(name="debt", value=debt, low=0.0, high=5.0, precision=1),
        CategoricalFeature(name="plan", value="basic", categories=PLANS),
    ]
    problem = CounterfactualProblem(features, [ClassGoal(target=1, confidence=0.7)], adapt_sklearn(_model(kind), "ok"))
    found = problem.split_values()
    problem.space.split_values = found
    assert problem.space.split_values, "the trees' split values are known"
    if cuts:
        assert isinstance(found, SplitValues) and found.cuts, "the trees' cuts are known"
        problem.space.split_cuts = found.cuts
    return problem


def _scope(problem: CounterfactualProblem, scorer: CalculatorScorer, *, pool: bool = False) -> SolverScope:
    """A solve's scope at the original; with ``pool``, as when every feasible row is wanted."""
    start = problem.space.original.reshape(1, -1).copy()
    start_score = scorer.score(start)[0]
    return SolverScope(
        space=problem.space,
        scorer=scorer,
        rng=np.random.default_rng(0),
        best_row=start[0].copy(),
        best_score=start_score.copy(),
        progress=Progress.starting(start_score),
        pool=Pool(problem.space.original) if pool else None,
    )


def _scan(problem: CounterfactualProblem, *, pool: bool) -> tuple[SolverScope, list[FloatMatrix]]:
    """One feature scan from the original (see :func:`_scope`): the scope after it, and every
    matrix the model scored."""
    scorer = CalculatorScorer(ScoreCalculator(problem))
    scope = _scope(problem, scorer, pool=pool)
    scored: list[FloatMatrix] = []
    score = scorer.score

    def recording(X: FloatMatrix) -> FloatMatrix:
        scored.append(X.copy())
        return score(X)

    scorer.score = recording  # type: ignore[method-assign]
    FeatureScanPhase(FeatureScanPhaseConfig()).solve(PhaseScope(scope, 0, Termination(TerminationConfig())))
    return scope, scored


INSTANCES = [(2.0, 3, 3.0), (1.2, 0, 4.5), (4.0, 10, 2.0), (0.5, 25, 4.9)]


def test_a_scan_takes_the_rows_it_shares_with_an_earlier_one_from_it() -> None:
    """At the same base, the rows of the grid's values; a step later, the moved feature's rows and
    the base before: the model sees each of them once."""
    problem = _tree_problem(2.0, 3, 3.0)
    space = problem.space
    scorer = CalculatorScorer(ScoreCalculator(problem))
    scope = _scope(problem, scorer)
    plain = ScanGrid(space, space.mutable, 24, splits=False)
    joined = ScanGrid.joined(plain, space.mutable)
    assert np.array_equal(joined.values, ScanGrid(space, space.mutable, 24).values)
    assert np.array_equal(plain.values[joined.origin[joined.origin >= 0]], joined.values[joined.origin >= 0])
    scans = _Scans(space.n_features)
    base, base_score = scope.best_row, scope.best_score
    X, _, fresh = scans.score(scope, plain, base, base_score, plain.entries(base))
    assert fresh == len(X)
    entries = joined.entries(base)
    Y, y_scores, fresh = scans.score(scope, joined, base, base_score, entries)
    assert fresh == np.count_nonzero(joined.origin[entries] < 0)  # only the split values are new
    assert np.array_equal(y_scores, scorer.score(joined.build(base, entries)))
    step = np.flatnonzero(joined.owners[entries] == 1)[4]  # tenure moved
    moved, moved_score = Y[step], y_scores[step]
    around = joined.entries(moved)
    Z, z_scores, fresh = scans.score(scope, joined, moved, moved_score, around)
    assert fresh == np.count_nonzero(joined.owners[around] != 1)  # tenure's rows, and the original, known
    assert np.array_equal(z_scores, scorer.score(joined.build(moved, around)))
    assert np.array_equal(Z, joined.build(moved, around))


@pytest.mark.parametrize(("income", "tenure", "debt"), INSTANCES)
def test_the_scan_scores_hardly_any_row_twice(income: float, tenure: int, debt: float) -> None:
    """Only where the two chains took each other's step (bases two features apart) may a row come twice."""
    problem = _tree_problem(income, tenure, debt)
    for pool in (False, True):
        _, scored = _scan(problem, pool=pool)
        rows = np.vstack(scored)
        assert np.unique(rows, axis=0).shape[0] >= 0.97 * rows.shape[0]


@pytest.mark.parametrize(("income", "tenure", "debt"), INSTANCES)
def test_the_lean_scan_finds_what_scoring_every_row_finds(income: float, tenure: int, debt: float) -> None:
    """Without a pool the chains rescan the cells' nearest values and leave out rows that can
    matter neither as a best nor as a step; with one (every feasible row wanted) they rescan all."""
    problem = _tree_problem(income, tenure, debt)
    lean, lean_rows = _scan(problem, pool=False)
    full, full_rows = _scan(problem, pool=True)
    assert np.array_equal(lean.best_row, full.best_row) and np.array_equal(lean.best_score, full.best_score)
    assert len(lean.starts) == len(full.starts)
    assert all(np.array_equal(a, b) for a, b in zip(lean.starts, full.starts, strict=True))
    assert len(lean.deferred) == len(full.deferred) == 1
    assert np.array_equal(lean.deferred[0][0], full.deferred[0][0])
    assert np.array_equal(lean.deferred[0][1], full.deferred[0][1])
    assert sum(len(X) for X in lean_rows) <= sum(len(X) for X in full_rows)


@pytest.mark.parametrize(("income", "tenure", "debt"), INSTANCES)
def test_the_two_chains_step_together(income: float, tenure: int, debt: float, monkeypatch: Any) -> None:
    """The scan's chain and the split values' chain share each round's model call: fewer calls
    than scans after the first two (one a rescan alone), with or without a pool."""
    made: list[_Scans] = []
    init = _Scans.__init__

    def recording(self: _Scans, n_features: int) -> None:
        init(self, n_features)
        made.append(self)

    monkeypatch.setattr(_Scans, "__init__", recording)
    problem = _tree_problem(income, tenure, debt)
    for pool in (False, True):
        made.clear()
        _, scored = _scan(problem, pool=pool)
        assert len(made) == 1
        assert len(scored) <= len(made[0].done) - 3


def test_the_lean_scan_scores_fewer_rows() -> None:
    counts = []
    for instance in INSTANCES:
        problem = _tree_problem(*instance)
        counts.append([sum(len(X) for X in _scan(problem, pool=pool)[1]) for pool in (False, True)])
    lean, full = np.array(counts).sum(axis=0)
    assert lean < 0.8 * full


def _space(feature: Any, splits: list[float]) -> Any:
    problem = CounterfactualProblem(
        [feature, IntegerFeature(name="other", value=0, low=0, high=3)],
        [ClassGoal(target=1)],
        CallableAdapter(lambda X: np.column_stack([np.ones(len(X)), np.zeros(len(X))]), [OutputSpec("ok", (0, 1))]),
    )
    space = problem.space
    space.split_values = {0: np.array(splits)}
    return space


def test_split_cells_join_the_values_between_split_values() -> None:
    """Thresholds at 3.5, 9.5 and 10.5 give the split values 3, 4, 9, 10, 11; each is a cell,
    and so is each run of values between them (a threshold lies next to a split value)."""
    space = _space(IntegerFeature(name="t", value=5, low=0, high=20), [3.0, 4.0, 9.0, 10.0, 11.0])
    grid = ScanGrid(space, space.mutable, 24)
    mine = grid.owners == 0
    assert np.array_equal(grid.values[mine], np.arange(21.0))
    assert np.array_equal(grid.split[mine], np.isin(np.arange(21), [3, 4, 9, 10, 11]))
    cells = split_cells(space, grid)[mine]
    expected = np.array([0, 0, 0, 1, 2, 3, 3, 3, 3, 4, 5, 6] + [7] * 9)
    assert np.array_equal(cells - cells[0], expected)
    assert (split_cells(space, grid)[~mine] == -1).all(), "a feature without split values has no cells"
    keep = _nearest_in_cells(space, grid, split_cells(space, grid))
    # of each cell, the value nearest the original on each side; the original's own cell: 5, 6
    assert grid.values[mine][keep[mine]].tolist() == [2.0, 3.0, 4.0, 5.0, 6.0, 9.0, 10.0, 11.0, 12.0]
    assert keep[~mine].all()


def test_split_cells_are_unknown_where_thresholds_may_be_missing() -> None:
    lone = _space(IntegerFeature(name="t", value=5, low=0, high=20), [3.0, 4.0, 9.0])  # 9 has no partner
    assert (split_cells(lone, ScanGrid(lone, lone.mutable, 24)) == -1).all()
    at_bounds = _space(IntegerFeature(name="t", value=5, low=0, high=20), [0.0, 20.0])  # partners past the bounds
    assert (split_cells(at_bounds, ScanGrid(at_bounds, at_bounds.mutable, 24))[:21] >= 0).all()
    floats = _space(FloatFeature(name="f", value=5.0, low=0.0, high=20.0), [3.0, 3.0001])
    assert (split_cells(floats, ScanGrid(floats, floats.mutable, 24)) == -1).all()


def test_split_cells_hold_for_the_trees_of_each_library() -> None:
    """Every value of a cell scores alike, wherever the trees put their thresholds: scikit-learn
    sends ``x <= t`` left, XGBoost ``x < t`` (its split values lie one step off the boundary)."""
    kinds = ["hgb"] + (["xgboost"] if importlib.util.find_spec("xgboost") is not None else [])
    for kind in kinds:
        problem = _tree_problem(2.0, 3, 3.0, kind)
        space = problem.space
        grid = ScanGrid(space, space.mutable, 24)
        cells = split_cells(space, grid)
        j = 1  # tenure: whole numbers 0..29
        assert (cells[grid.owners == j] >= 0).all()
        values = np.arange(30.0)
        X = np.repeat(space.original.reshape(1, -1), values.size, axis=0)
        X[:, j] = values
        scores = ScoreCalculator(problem).calculate(X).scores
        entry = np.searchsorted(grid.values[grid.owners == j], values, side="right") - 1
        cell_of = cells[grid.owners == j][entry]
        for cell in np.unique(cell_of):
            assert np.unique(scores[cell_of == cell, 0]).size == 1, kind


def test_cells_a_scan_finds_scoring_unalike_are_dropped() -> None:
    space = _space(IntegerFeature(name="t", value=5, low=0, high=20), [3.0, 4.0, 9.0, 10.0, 11.0])
    grid = ScanGrid(space, space.mutable, 24)
    cells = split_cells(space, grid)
    entries = grid.entries(space.original)
    scores = np.zeros((entries.size, 5))
    assert np.array_equal(_verified(cells, grid, entries, scores), cells)
    scores[(grid.owners[entries] == 0) & (grid.values[entries] == 15.0), 0] = -0.5  # cell 12..20 is not one
    verified = _verified(cells, grid, entries, scores)
    assert (verified[grid.owners == 0] == -1).all()


def test_predicted_distances_are_checked() -> None:
    problem = _tree_problem(2.0, 3, 3.0)
    space = problem.space
    scorer = CalculatorScorer(ScoreCalculator(problem))
    grid = ScanGrid(space, space.mutable, 24)
    base0 = space.original.copy()
    base0_score = scorer.score(base0.reshape(1, -1))[0]
    entries = grid.entries(base0)
    distances = _Distances(grid, base0, base0_score, entries, scorer.score(grid.build(base0, entries)))
    one = grid.build(base0, entries[[5]])[0]  # income moved
    one_score = scorer.score(one.reshape(1, -1))[0]
    own = grid.entries(one, keep=grid.owners == 0)
    predicted = distances.predict(one, one_score, own)
    assert predicted is not None
    assert not distances.can_vouch(own)
    assert not distances.check(predicted, scorer.score(grid.build(one, own)), own), "one feature: the sum unseen"
    assert distances.trusted and not distances.vouched
    two = grid.build(one, grid.entries(one, keep=grid.owners == 2)[[3]])[0]  # and debt
    two_score = scorer.score(two.reshape(1, -1))[0]
    around = grid.entries(two)
    scores = scorer.score(grid.build(two, around))
    predicted = distances.predict(two, two_score, around)
    assert predicted is not None
    np.testing.assert_allclose(predicted, -scores[:, 3], rtol=1e-12, atol=1e-12)
    assert distances.check(predicted, scores, around)
    assert not distances.check(predicted + 0.01, scores, around)  # a distance that is no sum over features
    assert distances.predict(two, two_score, around) is None


def test_with_computed_features_the_chains_rescan_every_row() -> None:
    """A learned relation computes a feature from others: a row then changes more than the one
    feature its entry sets, so neither cells nor predicted distances hold, and nothing is left out."""
    rng = np.random.default_rng(0)
    amount = rng.integers(1, 31, 600)
    duration = np.clip(np.rint(6 + 1.5 * amount + rng.normal(0, 3, 600)), 6, 60)
    income = rng.integers(10, 61, 600)
    approved = (0.15 * income - 0.12 * amount - 0.05 * duration + rng.normal(0, 0.5, 600) > 2.0).astype(int)
    model = LogisticRegression(max_iter=2000).fit(np.column_stack([amount, duration, income]), approved)
    relation = LinearRegression().fit(amount.reshape(-1, 1), duration)
    features = [
        IntegerFeature(name="amount", value=24, low=1, high=30),
        IntegerFeature(name="duration", value=42, low=6, high=60),
        IntegerFeature(name="income", value=22, low=22, high=40),
    ]
    problem = CounterfactualProblem(
        features,
        [ClassGoal(target=1, confidence=0.6)],
        adapt_sklearn(model, "ok"),
        relations=[LearnedConstraint.of("duration", ["amount"], relation)],
    )
    lean, lean_rows = _scan(problem, pool=False)
    full, full_rows = _scan(problem, pool=True)
    assert np.array_equal(lean.best_row, full.best_row) and np.array_equal(lean.best_score, full.best_score)
    assert all(np.array_equal(a, b) for a, b in zip(lean.starts, full.starts, strict=True))
    assert sum(len(X) for X in lean_rows) == sum(len(X) for X in full_rows)
    for computed, case in ((True, problem), (False, _tree_problem(2.0, 3, 3.0))):
        space = case.space
        scope = _scope(case, CalculatorScorer(ScoreCalculator(case)))
        scans = _Scans(space.n_features)
        grid = ScanGrid(space, space.mutable, 24)
        scans.score(scope, grid, scope.best_row, scope.best_score, grid.entries(scope.best_row))
        assert scans.computed is computed


def _scan_rows(
    problem: CounterfactualProblem, config: FeatureScanPhaseConfig, *, pool: bool
) -> tuple[SolverScope, int]:
    """As :func:`_scan` with ``config``: the scope after it and the rows the model scored."""
    scorer = CalculatorScorer(ScoreCalculator(problem))
    scope = _scope(problem, scorer, pool=pool)
    rows = [0]
    score = scorer.score

    def counting(X: FloatMatrix) -> FloatMatrix:
        rows[0] += X.shape[0]
        return score(X)

    scorer.score = counting  # type: ignore[method-assign]
    FeatureScanPhase(config).solve(PhaseScope(scope, 0, Termination(TerminationConfig())))
    return scope, rows[0]


def test_a_chains_last_rescan_sends_no_row_that_could_only_be_a_next_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """A chain takes no step after its last rescan: the rows left out there (no nearer than the
    best feasible row) get no second call, even were every one of them a possible next step;
    and the scan still finds what scoring every row finds."""
    from counterplan.solver.local import scan

    could_step = scan._could_step
    asked: list[int] = []

    def every_row_could_step(added: FloatMatrix, far: np.ndarray, *args: Any) -> np.ndarray:
        asked.append(far.size)
        return far  # the worst case for rows: each left-out row could be the next step

    config = FeatureScanPhaseConfig(greedy_steps=1)  # every rescan is its chain's last
    for instance in INSTANCES:
        problem = _tree_problem(*instance)
        monkeypatch.setattr(scan, "_could_step", could_step)
        _, plain_rows = _scan_rows(problem, config, pool=False)
        full, _ = _scan_rows(problem, config, pool=True)
        monkeypatch.setattr(scan, "_could_step", every_row_could_step)
        lean, lean_rows = _scan_rows(problem, config, pool=False)
        assert lean_rows == plain_rows  # what could step does not matter at the last rescan
        assert np.array_equal(lean.best_row, full.best_row) and np.array_equal(lean.best_score, full.best_score)
        assert np.array_equal(lean.deferred[0][0], full.deferred[0][0])
    assert asked == []


def test_cut_cells_need_one_value_a_side() -> None:
    """Thresholds at 3.5, 9.5 and 10.5 with their sides known (cuts 4, 10, 11): the cells are
    0..3, 4..9, 10 and 11..20, so a scan needs the last value below each threshold going down
    and the first past it going up, where without the cuts each split value is a cell of its own
    and the values beside them one more."""
    space = _space(IntegerFeature(name="t", value=5, low=0, high=20), [3.0, 4.0, 9.0, 10.0, 11.0])
    space.split_cuts = {0: np.array([4.0, 10.0, 11.0])}
    grid = ScanGrid(space, space.mutable, 24)
    mine = grid.owners == 0
    cells = split_cells(space, grid)[mine]
    assert np.array_equal(cells - cells[0], np.repeat([0, 1, 2, 3], [4, 6, 1, 10]))
    keep = _nearest_in_cells(space, grid, split_cells(space, grid))
    assert grid.values[mine][keep[mine]].tolist() == [3.0, 4.0, 5.0, 6.0, 10.0, 11.0]
    # the trades' values, one per cell and side of the original alike
    assert one_per_cell(space, 0, np.delete(np.arange(21.0), 5)).tolist() == [3.0, 4.0, 6.0, 10.0, 11.0]
    space.split_cuts = {}
    assert one_per_cell(space, 0, np.delete(np.arange(21.0), 5)).tolist() == [2.0, 3.0, 4.0, 6.0, 9.0, 10.0, 11.0, 12.0]


@pytest.mark.parametrize("kind", ["hgb", "xgboost"])
def test_cut_cells_hold_for_fitted_trees_and_are_fewer(kind: str) -> None:
    """Every value of a cut cell scores alike through the real model, with fewer cells than a
    cell per split value: scikit-learn's ``x <= t`` and XGBoost's ``x < t`` (its whole-number
    thresholds on grid values) alike."""
    if kind == "xgboost" and importlib.util.find_spec("xgboost") is None:
        pytest.skip("xgboost is not installed")
    problem = _tree_problem(2.0, 3, 3.0, kind, cuts=True)
    space = problem.space
    grid = ScanGrid(space, space.mutable, 24)
    cells = split_cells(space, grid)
    calculator = ScoreCalculator(problem)
    for j in space.split_cuts:
        mine = grid.owners == j
        assert (cells[mine] >= 0).all()
        X = np.repeat(space.original.reshape(1, -1), np.count_nonzero(mine), axis=0)
        X[:, j] = grid.values[mine]
        scores = calculator.calculate(X).scores
        for cell in np.unique(cells[mine]):
            assert np.unique(scores[cells[mine] == cell, :3], axis=0).shape[0] == 1
    without = problem.space.with_split_values(dict(space.split_values))
    assert not without.split_cuts
    assert np.unique(cells).size < np.unique(split_cells(without, ScanGrid(without, without.mutable, 24))).size


@pytest.mark.parametrize(("income", "tenure", "debt"), INSTANCES)
def test_with_cuts_the_scan_scores_fewer_rows_and_finds_the_same(income: float, tenure: int, debt: float) -> None:
    """With the trees' cuts the chains rescan one value per cut cell and side: fewer rows than
    with a cell per split value, and the same best row, starting points and row set aside as
    scoring every row (a pool: every feasible row wanted)."""
    cut = _tree_problem(income, tenure, debt, cuts=True)
    lean, lean_rows = _scan(cut, pool=False)
    full, _ = _scan(cut, pool=True)
    assert np.array_equal(lean.best_row, full.best_row) and np.array_equal(lean.best_score, full.best_score)
    assert all(np.array_equal(a, b) for a, b in zip(lean.starts, full.starts, strict=True))
    assert len(lean.starts) == len(full.starts)
    assert np.array_equal(lean.deferred[0][0], full.deferred[0][0])
    plain, plain_rows = _scan(_tree_problem(income, tenure, debt), pool=False)
    assert np.array_equal(lean.best_row, plain.best_row)
    assert sum(len(X) for X in lean_rows) < sum(len(X) for X in plain_rows)
