"""Tree ensembles in the exact engine: each feature's distance is bounded over its threshold
intervals (one row per feature, OCEAN's piecewise distance), which cuts off fractional points the
older one-row-per-threshold cuts let through, and keeps the optimum: on small forests it equals
an independent enumeration of the trees' cells, and the older encoding's."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import sparse
from scipy.optimize import linprog
from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier
from sklearn.linear_model import LogisticRegression

from counterplan.planning import ClassGoal, CounterfactualProblem, FloatFeature, IntegerFeature
from counterplan.planning.calculator import ScoreCalculator
from counterplan.planning.models import adapt_sklearn
from counterplan.solver.core.config import SolverConfig
from counterplan.solver.counterfactual import explain
from counterplan.solver.exact import phase
from counterplan.solver.exact.backend import solve
from counterplan.solver.exact.config import ExactPhaseConfig
from counterplan.solver.exact.encoders import leaf_costs
from counterplan.solver.exact.formulation import build
from counterplan.solver.exact.program import Formulation

pytest.importorskip("highspy")

NUMBERS = ["income", "tenure", "debt"]


def _data(n: int = 500) -> tuple[pd.DataFrame, pd.Series]:
    rng = np.random.default_rng(3)
    frame = pd.DataFrame(
        {
            "income": np.round(rng.uniform(0.0, 10.0, n), 1),
            "tenure": rng.integers(0, 15, n),
            "debt": np.round(rng.uniform(0.0, 5.0, n), 1),
        }
    )
    score = frame.income + 0.4 * frame.tenure - frame.debt + rng.normal(0, 0.5, n)
    return frame, (score > 6.0).astype(int)


def _problem(estimator: Any) -> CounterfactualProblem:
    frame, label = _data()
    model = estimator.fit(frame, label)
    features = [
        FloatFeature(name="income", value=2.0, low=0.0, high=10.0, precision=1),
        IntegerFeature(name="tenure", value=3, low=0, high=14),
        FloatFeature(name="debt", value=3.0, low=0.0, high=5.0, precision=1),
    ]
    return CounterfactualProblem(features, [ClassGoal(target=1, confidence=0.7)], adapt_sklearn(model, "ok"))


MODELS = {
    "random forest": lambda: RandomForestClassifier(n_estimators=20, max_depth=4, random_state=0),
    "gradient boosting": lambda: GradientBoostingClassifier(n_estimators=20, max_depth=3, random_state=0),
}


def _cells(problem: CounterfactualProblem) -> np.ndarray:
    """Every cell of the trees' thresholds: per feature, the grid value nearest the original in
    each interval between two consecutive thresholds (as the trees compare: float32, ``<=`` goes
    left); the rows of the product of those, one per cell."""
    estimator: Any = problem.model.model  # type: ignore[attr-defined]
    trees = list(np.ravel(estimator.estimators_))
    space = problem.space
    axes = []
    for j in range(space.n_features):
        thresholds = np.unique(
            np.concatenate([t.tree_.threshold[t.tree_.feature == j] for t in trees]).astype(np.float32)
        )
        per_unit = space.grid_scale[j]
        grid = np.arange(round(space.grid_lower[j] * per_unit), round(space.grid_upper[j] * per_unit) + 1) / per_unit
        cell = (grid.astype(np.float32)[:, None] > thresholds[None, :]).sum(axis=1)
        o = float(space.original[j])
        nearest = {}
        for value, k in zip(grid, cell, strict=True):
            if k not in nearest or abs(value - o) < abs(nearest[k] - o):
                nearest[k] = float(value)
        axes.append(sorted(nearest.values()))
    return np.array(list(itertools.product(*axes)), dtype=np.float64)


@pytest.mark.parametrize("name", list(MODELS))
def test_the_optimum_equals_an_enumeration_of_the_trees_cells(name: str) -> None:
    problem = _problem(MODELS[name]())
    scores = ScoreCalculator(problem).calculate(_cells(problem)).scores
    feasible = scores[(scores[:, :3] >= 0.0).all(axis=1)]
    best = feasible[np.lexsort(feasible.T[::-1])[-1]]
    result = explain(problem, engine="exact", seed=0)
    exact = result.statistics.exact
    assert exact is not None and exact.proven and result.valid
    assert result.score_levels[3] == pytest.approx(best[3], rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("name", list(MODELS))
def test_the_interval_rows_keep_the_optimum_of_the_threshold_rows(name: str) -> None:
    problem = _problem(MODELS[name]())
    optima = []
    for interval in (True, False):
        formulation = build(problem, interval_distance=interval)
        result, _ = solve(formulation.milp, "highs", time_limit=None, relative_gap=1e-9)
        assert result.status == "optimal"
        optima.append(result.objective)
    assert optima[0] == pytest.approx(optima[1], rel=1e-7, abs=1e-9)


def _rows_of(formulation: Formulation, variables: set[int]) -> list[tuple[dict[int, float], float, float]]:
    """The program's rows that read only ``variables``."""
    return [(dict(t), lo, hi) for t, lo, hi in formulation.milp.rows if t and set(t) <= variables]


def test_crossing_two_thresholds_halfway_costs_both_intervals() -> None:
    """A fractional point crossing the first threshold above income's original fully and the
    second halfway, at the distance the per-threshold cuts allow (the larger of the two), is
    cut off: the interval row asks for the first interval plus half the second."""
    problem = _problem(MODELS["random forest"]())
    formulation = build(problem)
    j = 0
    f = formulation.features[j]
    assert f.distance is not None and f.changed is not None
    o = float(problem.space.original[j])
    up = sorted((key, var) for var, feature, key in formulation.thresholds if feature == j and key > o)
    assert len(up) >= 2
    (_, first), (_, second) = up[0], up[1]
    far_first = formulation.bands[first][1] - o
    far_second = formulation.bands[second][1] - o
    x = formulation.assignment_of_original()
    x[f.changed] = 1.0
    x[first], x[second] = 1.0, 0.5
    x[f.distance] = max(far_first, 0.5 * far_second)
    rows = _rows_of(formulation, {f.distance, f.changed, *(var for var, g, _ in formulation.thresholds if g == j)})
    assert rows

    def violated(at: np.ndarray) -> bool:
        return any(not (lo - 1e-9 <= sum(c * at[v] for v, c in t.items()) <= hi + 1e-9) for t, lo, hi in rows)

    assert violated(x), "the fractional point is cut off"
    x[f.distance] = far_first + 0.5 * (far_second - far_first)
    assert not violated(x), "the interval sum itself is allowed"


@pytest.mark.parametrize("name", list(MODELS))
def test_narrowed_to_the_warm_starts_distance_the_program_is_smaller_and_keeps_the_optimum(name: str) -> None:
    """Local search's distance bounds how far each feature may move in a better answer: the
    narrowed program drops the splits beyond it, and its optimum is the whole program's."""
    problem = _problem(MODELS[name]())
    local = explain(problem, seed=0)
    assert local.valid
    reach = -float(local.score_levels[3])
    whole = build(problem)
    narrowed = build(problem, reach=reach)
    assert narrowed.milp.n_vars < whole.milp.n_vars
    assert len(narrowed.thresholds) < len(whole.thresholds)
    optima = []
    for formulation in (whole, narrowed):
        result, _ = solve(formulation.milp, "highs", time_limit=None, relative_gap=1e-9)
        assert result.status == "optimal"
        optima.append(result.objective)
    assert optima[1] == pytest.approx(optima[0], rel=1e-7, abs=1e-9)
    assert optima[1] <= reach * (1 + 1e-7) + 1e-7


def test_a_reach_below_the_optimum_sends_the_phase_to_the_whole_program(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reach the program cannot meet (here a tenth of the optimum) leaves nothing within it:
    the narrowed optimum is above it (or there is none), and the phase solves the whole program,
    which proves the same optimum as without narrowing."""
    problem = _problem(MODELS["gradient boosting"]())
    whole, _ = solve(build(problem).milp, "highs", time_limit=None, relative_gap=1e-9)
    narrowed, _ = solve(build(problem, reach=whole.objective / 10).milp, "highs", time_limit=None, relative_gap=1e-9)
    assert narrowed.status == "infeasible" or narrowed.objective > whole.objective / 10
    assert phase._within_reach(_run(narrowed), whole.objective / 10) is None
    assert phase._within_reach(_run(whole), whole.objective) is not None
    reaches: list[float | None] = []
    real_build = phase.build

    def recording_build(*args: Any, **kwargs: Any) -> Any:
        reaches.append(kwargs.get("reach"))
        return real_build(*args, **kwargs)

    monkeypatch.setattr(phase, "build", recording_build)
    monkeypatch.setattr(phase.ExactPhase, "_reach", lambda self, scope: whole.objective / 10)
    config = SolverConfig(phases=(*SolverConfig().phases, ExactPhaseConfig()))
    result = explain(problem, config, engine="exact", seed=0)
    exact = result.statistics.exact
    assert exact is not None and exact.proven and result.valid
    assert exact.objective == pytest.approx(whole.objective, rel=1e-7)
    assert reaches[:2] == [whole.objective / 10, None], "narrowed first, then the whole program"


def _run(result: Any) -> Any:
    return phase._Run(result, result.nodes, "HiGHS", result.bound, result.gap, 0.0, None, ({}, 0.0))


@pytest.mark.parametrize(
    ("model", "solver"),
    [
        (MODELS["random forest"], "CP-SAT"),
        (MODELS["gradient boosting"], "CP-SAT"),
        (lambda: LogisticRegression(max_iter=1000), "HiGHS"),
    ],
)
def test_auto_takes_cpsat_for_tree_ensembles_and_highs_for_linear_models(model: Any, solver: str) -> None:
    """The backend chosen per model family by measurement (``benchmarks/exact_trees.py``)."""
    pytest.importorskip("ortools")
    result = explain(_problem(model()), engine="exact", seed=0)
    exact = result.statistics.exact
    assert exact is not None and exact.proven and result.valid
    assert exact.backend.startswith(solver), exact.backend


def test_a_scaled_number_off_its_grid_is_encoded() -> None:
    """Numbers with many decimals behind a ``StandardScaler``: a row whose original lies off the
    number's inferred grid has column terms whose ratios to the feature's differ in the last bits;
    the encoder compared them for equality and refused the row ("not an affine function of one
    feature"). Every rejected row of this model is now encoded, proven and valid."""
    import warnings

    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    from counterplan.planning.distance import DistanceSettings

    rng = np.random.default_rng(5)
    n = 400
    frame = pd.DataFrame(
        {
            "income": rng.uniform(0.0, 10.0, n),
            "tenure": rng.integers(0, 15, n),
            "debt": rng.uniform(0.0, 5.0, n),
            "plan": rng.choice(["basic", "silver", "gold"], n),
        }
    )
    score = frame.income + 0.4 * frame.tenure - frame.debt + 1.5 * (frame.plan == "gold")
    frame["ok"] = (score + rng.normal(0.0, 0.5, n) > 6.0).astype(int)
    columns = ["income", "tenure", "debt", "plan"]
    encode = ColumnTransformer(
        [("plan", OneHotEncoder(sparse_output=False), ["plan"]), ("numbers", StandardScaler(), columns[:3])]
    )
    model = Pipeline([("encode", encode), ("model", GradientBoostingClassifier(n_estimators=20, random_state=0))])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(frame[columns], frame["ok"])
    rejected = np.flatnonzero(model.predict(frame[columns]) == 0)[:8]
    for row in rejected:
        problem = CounterfactualProblem.from_dataframe(
            frame,
            int(row),
            model,
            [ClassGoal(target=1)],
            target="ok",
            columns=columns,
            distance=DistanceSettings(metric="mad_l1"),
        )
        result = explain(problem, engine="exact", seed=0)
        exact = result.statistics.exact
        assert exact is not None and exact.status == "optimal", (int(row), exact)
        assert exact.proven and result.valid


@pytest.mark.parametrize("name", list(MODELS))
def test_every_cell_within_reach_meets_the_leaf_bounds(name: str) -> None:
    """A leaf whose path alone costs more than local search's distance is fixed at 0
    (:mod:`counterplan.solver.exact.encoders.leaf_costs`): some leaves are, and every cell of the
    trees (the enumeration, independent of the encoding) within that distance meets every bound
    and every row of one tree's leaves (the goal's rows, over every tree, are the model's: a cell
    need not meet them)."""
    problem = _problem(MODELS[name]())
    local = explain(problem, seed=0)
    reach = -float(local.score_levels[3])
    narrowed = build(problem, reach=reach)
    milp = narrowed.milp
    tree_of = {v: t for t, leaves in enumerate(narrowed.leaves) for v in leaves.values()}
    assert sum(milp.upper[v] == 0.0 for v in tree_of) > 0, "leaves beyond the reach are fixed"
    rows = [(t, lo, hi) for t, lo, hi in milp.rows if len({tree_of[v] for v in t if v in tree_of}) <= 1]
    matrix = np.zeros((len(rows), milp.n_vars))
    for k, (terms, _, _) in enumerate(rows):
        for v, c in terms.items():
            matrix[k, v] = c
    low = np.array([lo for _, lo, _ in rows])
    high = np.array([hi for _, _, hi in rows])
    cells = _cells(problem)
    near = -ScoreCalculator(problem).calculate(cells).scores[:, 3] <= reach * (1 + 1e-6)  # the distance
    x = np.array([narrowed.assignment(row) for row in cells[near]])
    objective = np.array([milp.value(milp.objective, at, milp.objective_offset) for at in x])
    x = x[objective <= reach * (1 + 1e-7) + 1e-7]
    assert len(x) > 0
    assert np.all(x >= np.asarray(milp.lower) - 1e-9) and np.all(x <= np.asarray(milp.upper) + 1e-9)
    totals = x @ matrix.T
    assert np.all(totals >= low - 1e-7) and np.all(totals <= high + 1e-7)


def _lp_bound(formulation: Formulation) -> float:
    """The LP relaxation's optimum of ``formulation``'s MILP (HiGHS through SciPy, integrality
    dropped)."""
    milp = formulation.milp
    rows, columns, values = [], [], []
    for k, (terms, _, _) in enumerate(milp.rows):
        for v, c in terms.items():
            rows.append(k)
            columns.append(v)
            values.append(c)
    matrix = sparse.csr_matrix((values, (rows, columns)), shape=(len(milp.rows), milp.n_vars))
    low = np.array([lo for _, lo, _ in milp.rows])
    high = np.array([hi for _, _, hi in milp.rows])
    cost = np.zeros(milp.n_vars)
    for v, c in milp.objective.items():
        cost[v] = c
    upper, lower = np.isfinite(high), np.isfinite(low)
    result = linprog(
        cost,
        A_ub=sparse.vstack([matrix[upper], -matrix[lower]]),
        b_ub=np.concatenate([high[upper], -low[lower]]),
        bounds=list(zip(milp.lower, milp.upper, strict=True)),
        method="highs",
    )
    assert result.status == 0
    return float(result.fun) + milp.objective_offset


def test_threshold_rows_raise_the_lp_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """A forest's leaves that cross a threshold under different splits of one tree sum to at
    most the threshold's crossing (:func:`~counterplan.solver.exact.encoders.leaf_costs.threshold_rows`):
    rows are written, the LP relaxation's bound rises on some row and falls on none, and the
    optimum stays (every cell within reach meets them: the test above)."""
    frame, label = _data()
    model = MODELS["random forest"]().fit(frame, label)
    raised = 0
    for income, tenure, debt in [(2.0, 3, 3.0), (1.0, 2, 4.0), (3.0, 1, 4.5), (0.5, 5, 2.5)]:
        features = [
            FloatFeature(name="income", value=income, low=0.0, high=10.0, precision=1),
            IntegerFeature(name="tenure", value=tenure, low=0, high=14),
            FloatFeature(name="debt", value=debt, low=0.0, high=5.0, precision=1),
        ]
        problem = CounterfactualProblem(features, [ClassGoal(target=1, confidence=0.7)], adapt_sklearn(model, "ok"))
        reach = -float(explain(problem, seed=0).score_levels[3])
        monkeypatch.setattr(leaf_costs, "THRESHOLD_ROWS", False)
        before = build(problem, reach=reach)
        monkeypatch.setattr(leaf_costs, "THRESHOLD_ROWS", True)
        after = build(problem, reach=reach)
        assert len(after.milp.rows) > len(before.milp.rows)
        low_before, low_after = _lp_bound(before), _lp_bound(after)
        assert low_after >= low_before - 1e-9
        raised += low_after > low_before * (1 + 1e-6) + 1e-9
        optima = [solve(f.milp, "highs", time_limit=60.0, relative_gap=1e-9)[0] for f in (before, after)]
        assert [r.status for r in optima] == ["optimal", "optimal"]
        assert optima[1].objective == pytest.approx(optima[0].objective, rel=1e-7, abs=1e-9)
    assert raised > 0


def test_a_forest_of_single_leaves_is_encoded_and_proven_infeasible() -> None:
    """A forest fitted where no column varies has no split at all: its arrays hold no split key,
    and the row's reach indexed their keys and raised IndexError out of the exact engine (found by
    fuzzing: a constant training column, depth-1 trees). Now the program is the leaves alone: the
    goal above the leaves' averaged probability is proven out of reach."""
    frame, label = _data()
    constant = pd.DataFrame({name: np.full(len(frame), 1.0) for name in NUMBERS})
    model = RandomForestClassifier(n_estimators=3, max_depth=1, random_state=0).fit(constant, label)
    assert all(tree.tree_.node_count == 1 for tree in model.estimators_)
    features = [
        FloatFeature(name="income", value=2.0, low=0.0, high=10.0, precision=1),
        IntegerFeature(name="tenure", value=3, low=0, high=14),
        FloatFeature(name="debt", value=3.0, low=0.0, high=5.0, precision=1),
    ]
    problem = CounterfactualProblem(features, [ClassGoal(target=1, confidence=0.9)], adapt_sklearn(model, "ok"))
    result = explain(problem, seed=0, engine="exact")
    assert not result.valid
    assert result.statistics.exact is not None
    assert result.statistics.exact.status == "infeasible" and result.statistics.exact.proven


@pytest.mark.parametrize("offset", [0.0, -1e-9, -1.2e-7], ids=["on it", "1e-9 below", "a float32 step below"])
def test_an_original_on_a_threshold_or_inside_its_margin_is_where_the_model_puts_it(offset: float) -> None:
    """The margin on the original's side ends at the original, the other side keeps all of it:
    both shrank to half the original's distance, none for an original on the threshold, so the
    program put it on either side and the model rejected every retry's answer (the ONNX fuzz: a
    hand-built split at 1.4 with an original 1.4; the same here for scikit-learn's 1.5)."""
    from sklearn.tree import DecisionTreeClassifier

    model = DecisionTreeClassifier().fit(np.array([[0.0], [1.0], [2.0], [3.0]]), np.array([0, 0, 1, 1]))
    threshold = float(model.tree_.threshold[0])
    features = [FloatFeature(name="x", value=threshold + offset, low=0.0, high=3.0)]
    problem = CounterfactualProblem(features, [ClassGoal(target=1)], adapt_sklearn(model, "y"))
    result = explain(problem, SolverConfig(phases=(ExactPhaseConfig(),)), seed=0)
    exact = result.statistics.exact
    assert exact is not None and result.valid and exact.proven and exact.retries == 0, exact
    assert threshold < result.proposed["x"] < threshold + 1e-5


@pytest.mark.parametrize(
    ("low", "high", "value", "cut", "stride"),
    [(-74.0015, -73.9985, -74.0012, -74.0000031, 61), (198.975434, 198.976334, 198.976134, 198.9755853, 37)],
)
def test_a_grid_finer_than_float32_keeps_the_values_beside_a_split(
    low: float, high: float, value: float, cut: float, stride: int
) -> None:
    """Six decimals near 74 or 199, where float32 steps by 7.6e-6 or 1.5e-5: the turn of a split
    lay beyond the 3 grid steps looked at around its threshold, so the split took a margin of 16
    float32 steps on each side and the grid values within it left the program: the proven optimum
    lay a margin past the real one (-73.999866 where -74.000003 turns the split: 137 grid steps),
    and on a domain narrower than the margin the program was proven infeasible where local search
    found an answer (the rules fuzz). The optimum is the enumerated grid's."""
    from sklearn.tree import DecisionTreeClassifier

    grid = np.round(np.arange(round(low * 1e6), round(high * 1e6) + 1) / 1e6, 6)
    sample = grid[::stride]  # rows far apart: the threshold, their midpoint, lies anywhere between float32 values
    model = DecisionTreeClassifier(max_depth=1, random_state=0).fit(
        pd.DataFrame({"x": sample}), (sample > cut).astype(int)
    )
    frame = pd.DataFrame({"x": grid})
    label = model.predict(frame).astype(int)
    feature = FloatFeature(name="x", value=value, low=low, high=high, precision=6)
    problem = CounterfactualProblem(
        [feature], [ClassGoal(target=int(label[grid == value][0] == 0))], adapt_sklearn(model, "y")
    )
    turns = label != label[grid == value][0]
    best = grid[turns][np.argmin(np.abs(grid[turns] - value))]
    for backend in ("highs", "ortools"):
        result = explain(problem, SolverConfig(phases=(ExactPhaseConfig(backend=backend),)), seed=0)
        assert result.statistics.exact is not None and result.statistics.exact.proven, backend
        assert result.valid and result.proposed["x"] == pytest.approx(float(best), abs=1e-9), (backend, result.proposed)


def test_a_split_of_the_missing_values_alone_is_decided() -> None:
    """scikit-learn's trees trained on data with gaps split the missing values from the rest with
    a threshold of inf: the exact engine looked for its grid step (math.floor of infinity) and
    the solve ended in an OverflowError (the rules fuzz: a forest on data with gaps). Every value
    goes left there; the optimum is found."""
    from sklearn.tree import DecisionTreeClassifier

    rng = np.random.default_rng(0)
    x = rng.integers(0, 10, 300).astype(float)
    z = rng.integers(0, 10, 300).astype(float)
    x[rng.random(300) < 0.4] = np.nan
    label = np.where(np.isnan(x), z > 3, z > 7).astype(int)
    data = pd.DataFrame({"x": x, "z": z, "y": label})
    model = DecisionTreeClassifier(max_depth=3, random_state=0).fit(data[["x", "z"]], label)
    assert np.isinf(model.tree_.threshold).any()
    problem = CounterfactualProblem.from_dataframe(data, {"x": 5.0, "z": 2.0}, model, [ClassGoal(target=1)], target="y")
    for backend in ("highs", "ortools"):
        result = explain(problem, SolverConfig(phases=(ExactPhaseConfig(backend=backend),)), seed=0)
        assert result.statistics.exact is not None and result.statistics.exact.proven, backend
        assert result.valid and result.proposed == {"x": 5, "z": 8}, (backend, result.proposed)
