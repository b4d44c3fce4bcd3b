"""ReLU networks in the exact engine: the proven optimum equals brute force on a small grid, every
answer passes the real model, the pre-activation bounds hold for every input in the domains, and
what is not encodable (another activation, too many unstable units) is refused by name."""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network import MLPClassifier, MLPRegressor
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from counterplan.planning import (
    CategoricalFeature,
    ClassGoal,
    CounterfactualProblem,
    FloatFeature,
    IntegerFeature,
    RangeGoal,
)
from counterplan.planning.calculator import ScoreCalculator
from counterplan.planning.errors import ProblemError
from counterplan.planning.models import adapt_sklearn
from counterplan.planning.structure.errors import NotEncodableError
from counterplan.solver.core.config import AutoConfig, SolverConfig
from counterplan.solver.counterfactual import explain
from counterplan.solver.engines import choose
from counterplan.solver.exact.encoders import network as networks
from counterplan.solver.exact.encoders.network import MAX_HIDDEN_UNITS, MAX_UNSTABLE_UNITS, NetworkOutput
from counterplan.solver.exact.formulation import build, check

pytest.importorskip("highspy")

PLANS = ("basic", "silver", "gold")


@pytest.fixture(autouse=True)
def _quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        yield


def _loans(n: int = 400, seed: int = 0) -> tuple[pd.DataFrame, pd.Series, pd.Series]:
    """Approval rises with income and tenure, falls with debt, with a bend; gold plans help."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "income": np.round(rng.uniform(0.0, 10.0, n), 1),
            "tenure": rng.integers(0, 15, n),
            "debt": np.round(rng.uniform(0.0, 5.0, n), 1),
            "plan": rng.choice(PLANS, n),
        }
    )
    score = (
        frame.income
        + 0.4 * frame.tenure
        - frame.debt
        - 0.15 * np.maximum(frame.income - 6.0, 0.0) ** 2
        + 1.5 * (frame.plan == "gold")
        + rng.normal(0, 0.3, n)
    )
    return frame, (score > 5.0).astype(int), score


def _pipeline(estimator: Any) -> Pipeline:
    encode = ColumnTransformer(
        [
            ("plan", OneHotEncoder(handle_unknown="ignore"), ["plan"]),
            ("numbers", StandardScaler(), ["income", "tenure", "debt"]),
        ]
    )
    return Pipeline([("encode", encode), ("model", estimator)])


def _features(**changes: Any) -> list[Any]:
    base: dict[str, Any] = {
        "income": {"value": 2.0, "low": 0.0, "high": 10.0, "precision": 1},
        "tenure": {"value": 3, "low": 0, "high": 14},
        "debt": {"value": 3.0, "low": 0.0, "high": 5.0, "precision": 1},
        "plan": {"value": "basic", "categories": PLANS},
    }
    for name, update in changes.items():
        base[name] = {**base[name], **update}
    return [
        FloatFeature(name="income", **base["income"]),
        IntegerFeature(name="tenure", **base["tenure"]),
        FloatFeature(name="debt", **base["debt"]),
        CategoricalFeature(name="plan", **base["plan"]),
    ]


@pytest.fixture(scope="module")
def loans() -> tuple[pd.DataFrame, pd.Series, pd.Series]:
    return _loans()


@pytest.fixture(scope="module")
def classifiers(loans: tuple[pd.DataFrame, pd.Series, pd.Series]) -> dict[tuple[int, ...], Pipeline]:
    frame, label, _ = loans
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return {
            hidden: _pipeline(MLPClassifier(hidden_layer_sizes=hidden, max_iter=400, random_state=0)).fit(frame, label)
            for hidden in [(12,), (8, 8)]
        }


def _grid() -> np.ndarray:
    """Every point of the tiny problem: two integers, 0..12 each."""
    return np.array(list(itertools.product(range(13), range(13))), dtype=np.float64)


def _tiny_features(a: int, b: int) -> list[Any]:
    return [IntegerFeature(name="a", value=a, low=0, high=12), IntegerFeature(name="b", value=b, low=0, high=12)]


@pytest.fixture(scope="module")
def tiny() -> dict[str, Pipeline]:
    """Networks on two numbers in 0..12: class 1 in a disc around (8, 7), and a bumpy value."""
    rng = np.random.default_rng(1)
    X = rng.uniform(0.0, 12.0, (500, 2))
    label = ((X[:, 0] - 8.0) ** 2 + (X[:, 1] - 7.0) ** 2 < 10.0).astype(int)
    value = np.sin(X[:, 0] / 2.0) * 3.0 + 0.5 * X[:, 1]

    def scaled(estimator: Any) -> Pipeline:
        return Pipeline([("scale", StandardScaler()), ("model", estimator)])

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return {
            "16": scaled(MLPClassifier(hidden_layer_sizes=(16,), solver="lbfgs", max_iter=500, random_state=0)).fit(
                X, label
            ),
            "8x8": scaled(MLPClassifier(hidden_layer_sizes=(8, 8), solver="lbfgs", max_iter=500, random_state=0)).fit(
                X, label
            ),
            "regressor": scaled(
                MLPRegressor(hidden_layer_sizes=(16,), solver="lbfgs", max_iter=500, random_state=0)
            ).fit(X, value),
        }


def _best_by_brute_force(problem: CounterfactualProblem, valid: np.ndarray) -> float:
    """The least distance over the valid grid points (the score's soft level 0 is minus the distance)."""
    scores = ScoreCalculator(problem).calculate(_grid()).scores
    assert valid.any(), "the case has an answer"
    return float(-scores[valid, 3].max())


@pytest.mark.parametrize("hidden", [(12,), (8, 8)])
def test_a_binary_network_behind_a_pipeline_is_solved_exactly(
    hidden: tuple[int, ...], classifiers: dict[tuple[int, ...], Pipeline]
) -> None:
    model = classifiers[hidden]
    problem = CounterfactualProblem(_features(), [ClassGoal(target=1, confidence=0.7)], adapt_sklearn(model, "ok"))
    result = explain(problem, engine="exact", seed=0)
    exact = result.statistics.exact
    assert exact is not None and exact.status == "optimal" and exact.proven and exact.verified, exact
    assert exact.model.startswith("MLPClassifier") and "unstable" in exact.model
    formulation = build(problem)
    assert isinstance(formulation.output, NetworkOutput)
    assert sum(layer.unstable for layer in formulation.output.layers) > 0, "a case with binaries"
    frame = problem.space.to_frame(problem.space.encode(result.proposed).reshape(1, -1))
    assert model.predict_proba(frame)[0, 1] >= 0.705  # the real model, on the proposed row
    local = explain(problem, engine="local", seed=0)
    assert -result.score_levels[3] <= -local.score_levels[3] + 1e-12


@pytest.mark.parametrize(("network", "original"), [("16", (1, 2)), ("8x8", (2, 11)), ("8x8", (12, 0))])
def test_the_proven_optimum_equals_brute_force(
    network: str, original: tuple[int, int], tiny: dict[str, Pipeline]
) -> None:
    model = tiny[network]
    problem = CounterfactualProblem(
        _tiny_features(*original), [ClassGoal(target=1, confidence=0.7, margin=0.0)], adapt_sklearn(model, "ok")
    )
    result = explain(problem, engine="exact", seed=0)
    exact = result.statistics.exact
    assert exact is not None and exact.status == "optimal" and exact.proven, exact
    best = _best_by_brute_force(problem, model.predict_proba(_grid())[:, 1] >= 0.7)
    assert -result.score_levels[3] == pytest.approx(best, rel=1e-9, abs=1e-12), (result.proposed, best)


def test_a_regressor_meets_a_range_at_the_brute_force_optimum(tiny: dict[str, Pipeline]) -> None:
    model = tiny["regressor"]
    problem = CounterfactualProblem(_tiny_features(1, 2), [RangeGoal(low=6.5, high=7.5)], adapt_sklearn(model, "value"))
    result = explain(problem, engine="exact", seed=0)
    exact = result.statistics.exact
    assert exact is not None and exact.status == "optimal" and exact.proven, exact
    assert exact.model.startswith("MLPRegressor")
    row = problem.space.encode(result.proposed).reshape(1, -1)
    assert 6.5 <= model.predict(row)[0] <= 7.5
    predicted = model.predict(_grid())
    best = _best_by_brute_force(problem, (predicted >= 6.5) & (predicted <= 7.5))
    assert -result.score_levels[3] == pytest.approx(best, rel=1e-9, abs=1e-12)


def test_a_multi_class_network_gets_a_valid_answer(loans: tuple[pd.DataFrame, pd.Series, pd.Series]) -> None:
    """Three classes: the softmax's inputs are the outputs, with the conservative goal."""
    frame, _, score = loans
    label = pd.Series(np.select([score > 7.0, score > 4.0], ["premium", "standard"], "basic"))
    model = _pipeline(MLPClassifier(hidden_layer_sizes=(10,), max_iter=400, random_state=0)).fit(frame, label)
    problem = CounterfactualProblem(
        _features(), [ClassGoal(target="premium", confidence=0.6)], adapt_sklearn(model, "plan")
    )
    result = explain(problem, engine="exact", seed=0)
    exact = result.statistics.exact
    assert result.valid and exact is not None and exact.verified and exact.model.startswith("MLPClassifier")
    assert not exact.proven and "softmax" in exact.reason
    frame_row = problem.space.to_frame(problem.space.encode(result.proposed).reshape(1, -1))
    proba = model.predict_proba(frame_row)[0]
    assert model.classes_[np.argmax(proba)] == "premium" and proba.max() >= 0.6
    assert tuple(result.score_levels) >= tuple(explain(problem, engine="local", seed=0).score_levels)


@pytest.mark.parametrize("activation", ["logistic", "tanh"])
def test_a_smooth_activation_is_refused_by_name(
    activation: str, loans: tuple[pd.DataFrame, pd.Series, pd.Series]
) -> None:
    frame, label, _ = loans
    model = _pipeline(MLPClassifier(hidden_layer_sizes=(6,), activation=activation, max_iter=50, random_state=0)).fit(
        frame, label
    )
    problem = CounterfactualProblem(_features(), [ClassGoal(target=1, confidence=0.7)], adapt_sklearn(model, "ok"))
    with pytest.raises(ProblemError, match=f"activation '{activation}'"):
        explain(problem, engine="exact", seed=0)
    _, engine, reason = choose(problem, SolverConfig(), "auto")
    assert engine == "local" and activation in reason


def test_too_many_unstable_units_are_refused_and_auto_takes_local_search(
    loans: tuple[pd.DataFrame, pd.Series, pd.Series], monkeypatch: pytest.MonkeyPatch
) -> None:
    frame, label, _ = loans
    model = _pipeline(MLPClassifier(hidden_layer_sizes=(MAX_UNSTABLE_UNITS + 80,), max_iter=30, random_state=0)).fit(
        frame, label
    )
    problem = CounterfactualProblem(_features(), [ClassGoal(target=1, confidence=0.7)], adapt_sklearn(model, "ok"))
    with monkeypatch.context() as patched:  # the same network under a larger limit: how many binaries it needs
        patched.setattr(networks, "MAX_UNSTABLE_UNITS", 10**6)
        output = build(problem).output
        assert isinstance(output, NetworkOutput) and output.layers[0].unstable > MAX_UNSTABLE_UNITS
    with pytest.raises(ProblemError, match=f"too large for the exact engine: more than {MAX_UNSTABLE_UNITS}"):
        explain(problem, engine="exact", seed=0)
    # a roomy budget: auto's estimate lets it try the program, which is refused (by default the
    # estimate alone says local search: the network is far over the 2 s budget)
    roomy = SolverConfig(auto=AutoConfig(budget_seconds=3600.0))
    chosen = explain(problem, roomy, engine="auto", seed=0)
    assert chosen.statistics.engine == "local" and chosen.valid
    assert "too large" in chosen.statistics.engine_reason and "binary" in chosen.statistics.engine_reason
    _, engine, reason = choose(problem, SolverConfig(), "auto")
    assert engine == "local" and "280 hidden units" in reason and "more than the 2 s budget" in reason
    huge = _pipeline(MLPClassifier(hidden_layer_sizes=(MAX_HIDDEN_UNITS + 1,), max_iter=1, random_state=0)).fit(
        frame, label
    )
    huge_problem = CounterfactualProblem(_features(), [ClassGoal(target=1)], adapt_sklearn(huge, "ok"))
    with pytest.raises(ProblemError, match=f"{MAX_HIDDEN_UNITS + 1} hidden units"):
        explain(huge_problem, engine="exact", seed=0)


def _random_rows(problem: CounterfactualProblem, n: int, rng: np.random.Generator) -> np.ndarray:
    """Rows anywhere in the domains: grid values (the original too), any category."""
    space = problem.space
    rows = np.repeat(space.original.reshape(1, -1), n, axis=0)
    for j in range(space.n_features):
        if not space.mutable[j]:
            continue
        per_unit = float(space.grid_scale[j])
        if space.nominal[j]:
            rows[:, j] = rng.integers(round(space.lower[j]), round(space.upper[j]) + 1, n)
        elif per_unit > 0:
            steps = rng.integers(round(space.grid_lower[j] * per_unit), round(space.grid_upper[j] * per_unit) + 1, n)
            rows[:, j] = np.where(rng.random(n) < 0.1, space.original[j], steps / per_unit)
        else:
            rows[:, j] = rng.uniform(space.lower[j], space.upper[j], n)
        rows[:2, j] = (space.lower[j], space.upper[j])  # the corners as well
    return rows


def _pre_activations(output: NetworkOutput, inputs: np.ndarray) -> list[np.ndarray]:
    """Every hidden unit's pre-activation as scikit-learn computes it (numpy matmul, float64)."""
    out = []
    values = inputs
    estimator = output.estimator
    for w, b in zip(estimator.coefs_[:-1], estimator.intercepts_[:-1], strict=True):
        pre = values @ w + b
        out.append(pre)
        values = np.maximum(pre, 0.0)
    return out


def _model_inputs(problem: CounterfactualProblem, rows: np.ndarray) -> np.ndarray:
    """What the network reads for each row, through the real preprocessing."""
    adapter: Any = problem.model
    frame = problem.space.to_frame(rows) if adapter.input_kind == "dataframe" else rows
    return np.asarray(adapter.model[:-1].transform(frame), dtype=np.float64)


@pytest.mark.parametrize("hidden", [(12,), (8, 8)])
def test_every_pre_activation_lies_within_its_bounds(
    hidden: tuple[int, ...], classifiers: dict[tuple[int, ...], Pipeline], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Random rows in the domains (income off its grid, so it may stay at 2.05): numpy's
    pre-activations lie within the bounds the program uses; the linear programs after the first
    layer only ever tighten interval arithmetic's bounds."""
    model = classifiers[hidden]
    problem = CounterfactualProblem(
        _features(income={"value": 2.05}, tenure={"monotone": "increase"}),
        [ClassGoal(target=1, confidence=0.7)],
        adapt_sklearn(model, "ok"),
    )
    output = build(problem).output
    assert isinstance(output, NetworkOutput)
    rows = _random_rows(problem, 3000, np.random.default_rng(0))
    assert (rows[:, 1] >= 3).all(), "tenure only increases"
    inputs = _model_inputs(problem, rows)
    for layer, pre in zip(output.layers, _pre_activations(output, inputs), strict=True):
        assert (pre >= layer.lower).all() and (pre <= layer.upper).all()
        assert (layer.upper - layer.lower <= 5.0 * (pre.max(axis=0) - pre.min(axis=0)) + 1e-6).all(), "tight"
    with monkeypatch.context() as patched:
        patched.setattr(networks, "MAX_TIGHTENED_UNITS", 0)
        interval = build(problem).output
    assert isinstance(interval, NetworkOutput)
    for tight, loose in zip(output.layers, interval.layers, strict=True):
        assert (tight.lower >= loose.lower).all() and (tight.upper <= loose.upper).all()
    if len(hidden) > 1:
        assert (output.layers[1].upper < interval.layers[1].upper).any(), "the linear programs tighten"


def test_first_layer_bounds_are_the_exact_range_over_the_domain(tiny: dict[str, Pipeline]) -> None:
    """On the tiny grid the first layer's range is reached at the corners: the bounds are it (a
    fixed big M, or plain boxes around a wrong expression, would not be)."""
    model = tiny["16"]
    problem = CounterfactualProblem(_tiny_features(1, 2), [ClassGoal(target=1)], adapt_sklearn(model, "ok"))
    formulation = build(problem)
    output = formulation.output
    assert isinstance(output, NetworkOutput)
    (first,) = _pre_activations(output, model[:-1].transform(_grid()))
    layer = output.layers[0]
    assert np.allclose(layer.lower, first.min(axis=0), rtol=0.0, atol=1e-6)
    assert np.allclose(layer.upper, first.max(axis=0), rtol=0.0, atol=1e-6)
    # each unstable unit's variable and binary use exactly these bounds: no fixed big M
    milp = formulation.milp
    for j, v, s in layer.units:
        assert milp.upper[v] == layer.upper[j] and milp.integer[s]
        coefficients = [terms[s] for terms, _, _ in milp.rows if s in terms]
        assert sorted(coefficients) == sorted([-layer.upper[j], -layer.lower[j]])


def test_the_check_before_a_solve_tightens_bounds_only_when_the_network_needs_it(
    loans: tuple[pd.DataFrame, pd.Series, pd.Series], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check (``formulation.check``, before every solve's clock) reads a network with its
    interval bounds first: tighter bounds only make fewer units unstable, so one that fits them
    needs no linear program (two a unit: 1.3 s for a (100, 100) network of 20 features, and
    ``--time-limit 0.5`` took 1.8 s). A network over the limit with interval bounds is checked
    again with the programs' bounds, and refused only if it is still over."""
    frame, label, _ = loans
    model = _pipeline(MLPClassifier(hidden_layer_sizes=(8, 8, 8, 8), max_iter=300, random_state=0)).fit(frame, label)
    problem = CounterfactualProblem(_features(), [ClassGoal(target=1, confidence=0.7)], adapt_sklearn(model, "ok"))
    runs: list[int] = []
    real = networks._tighten

    def counted(*args: Any, **kwargs: Any) -> None:
        runs.append(1)
        real(*args, **kwargs)

    monkeypatch.setattr(networks, "_tighten", counted)
    build(problem)
    assert runs, "the program itself tightens the second layer's bounds"
    runs.clear()
    check(problem)
    assert not runs, "the network fits with its interval bounds: no linear program in the check"
    # over the limit with interval bounds only: checked again with the programs' bounds
    tightened = sum(layer.unstable for layer in build(problem).output.layers)
    untightened = sum(layer.unstable for layer in build(problem, tighten_bounds=False).output.layers)
    assert untightened > tightened, "the programs' bounds make units stable"
    monkeypatch.setattr(networks, "MAX_UNSTABLE_UNITS", tightened)
    runs.clear()
    check(problem)  # fits once tightened: accepted, after the programs ran
    assert runs
    monkeypatch.setattr(networks, "MAX_UNSTABLE_UNITS", tightened - 1)
    with pytest.raises(NotEncodableError, match="too large"):
        check(problem)
