"""Learned constraints (CE-OCL): a loan's duration follows its amount through a fitted regressor.
Every engine keeps it: local search computes the duration of every candidate, the exact engine
encodes the regressor (linear, trees, a ReLU network) and proves the optimum, equal to brute
force; a relation the domain cannot hold breaks a rule; bad relations are refused by name."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sklearn.ensemble import RandomForestRegressor
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.neural_network import MLPRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import PolynomialFeatures

from counterplan.planning import ClassGoal, CounterfactualProblem, FloatFeature, IntegerFeature
from counterplan.planning.calculator import ScoreCalculator
from counterplan.planning.errors import ProblemError
from counterplan.planning.relations import LearnedConstraint
from counterplan.solver.counterfactual import explain
from tests.solver.exact.test_exact import _brute_force

pytest.importorskip("highspy")


def _loans(n: int = 800, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    amount = rng.integers(1, 31, n)
    duration = np.clip(np.rint(6 + 1.5 * amount + rng.normal(0, 3, n)), 6, 60)
    income = rng.integers(10, 61, n)
    approved = (0.15 * income - 0.12 * amount - 0.05 * duration + rng.normal(0, 0.5, n) > 2.0).astype(int)
    return np.column_stack([amount, duration, income]), approved, duration


def _relation_model(kind: str) -> Any:
    X, _, duration = _loans()
    amount = X[:, :1]
    if kind == "linear":
        return LinearRegression().fit(amount, duration)
    if kind == "forest":
        return RandomForestRegressor(n_estimators=5, max_depth=3, random_state=0).fit(amount, duration)
    return MLPRegressor(hidden_layer_sizes=(6,), max_iter=3000, random_state=0).fit(amount / 30.0 * 30.0, duration)


def _problem(relation: Any, **duration: Any) -> CounterfactualProblem:
    X, y, _ = _loans()
    model = LogisticRegression(max_iter=2000).fit(X, y)
    features = [
        IntegerFeature(name="amount", value=24, low=1, high=30),
        IntegerFeature(name="duration", value=42, low=duration.get("low", 6), high=duration.get("high", 60)),
        IntegerFeature(name="income", value=22, low=22, high=40),
    ]
    relations = [LearnedConstraint.of("duration", ["amount"], relation)] if relation is not None else []
    return CounterfactualProblem(features, [ClassGoal(target=1, confidence=0.6)], model, relations=relations)


def _follows(problem: CounterfactualProblem, relation: Any, proposed: dict[str, Any]) -> bool:
    """The answer's duration is 42 + f(amount) - f(24), rounded."""
    f = lambda a: float(np.asarray(relation.predict(np.array([[a]], dtype=float))).reshape(-1)[0])  # noqa: E731
    expected = 42 + f(proposed["amount"]) - f(24)
    return abs(proposed["duration"] - expected) <= 0.5 + 1e-9


@pytest.mark.parametrize("kind", ["linear", "forest", "network"])
def test_every_engine_keeps_a_learned_relation_and_the_exact_optimum_is_brute_forces(kind: str) -> None:
    relation = _relation_model(kind)
    problem = _problem(relation)
    local = explain(problem, engine="local", seed=0)
    exact = explain(problem, engine="exact", seed=0)
    assert local.valid and exact.valid
    assert _follows(problem, relation, local.proposed) and _follows(problem, relation, exact.proposed)
    assert exact.statistics.exact is not None and exact.statistics.exact.proven, exact.statistics.exact
    best = _brute_force(problem)  # every grid row, scored with its duration computed
    assert exact.score_levels[3] == pytest.approx(best[3], abs=1e-9)
    assert exact.score_levels[3] >= local.score_levels[3] - 1e-9
    if kind == "linear":  # a longer loan costs approval: the relation changes the answer
        free = explain(_problem(None), engine="exact", seed=0)
        assert free.proposed != exact.proposed


def test_a_relation_the_domain_cannot_hold_breaks_a_rule() -> None:
    relation = _relation_model("linear")
    problem = _problem(relation, low=40, high=44)  # the duration may hardly move: amount is stuck near 24
    result = explain(problem, engine="exact", seed=0)
    if result.feasible:
        assert _follows(problem, relation, result.proposed)
        assert 40 <= result.proposed["duration"] <= 44
    else:  # no answer keeps the relation: none is called feasible
        assert not _follows(problem, relation, result.proposed) or result.score_levels[0] < 0
    row = problem.space.original.copy()
    row[0] = 1  # amount 1: the relation wants a duration far below 40
    scores = ScoreCalculator(problem).calculate(row.reshape(1, -1)).scores
    assert scores[0, 1] <= -1.0


def test_bad_relations_are_refused_by_name() -> None:
    relation = _relation_model("linear")
    with pytest.raises(ProblemError, match="no feature 'term'"):
        CounterfactualProblem(
            _problem(None).space.features,
            [ClassGoal(target=1)],
            _problem(None).model,
            relations=[LearnedConstraint.of("term", ["amount"], relation)],
        )
    with pytest.raises(ProblemError, match="without the target itself"):
        LearnedConstraint.of("duration", ["duration"], relation)
    held = [
        IntegerFeature(name=f.name, value=int(f.value), low=6, high=60, constrained=f.name == "duration")
        for f in _problem(None).space.features
    ]
    with pytest.raises(ProblemError, match="must be mutable"):
        CounterfactualProblem(
            held,
            [ClassGoal(target=1)],
            _problem(None).model,
            relations=[LearnedConstraint.of("duration", ["amount"], relation)],
        )


class _FailsBelow:
    """A relation's regressor with no answer for amounts below 24: NaN, or it raises."""

    def __init__(self, fail: str) -> None:
        self.fail = fail

    def predict(self, X: np.ndarray) -> np.ndarray:
        amount = np.asarray(X, dtype=float)[:, 0]
        if self.fail == "raise" and (amount < 24).any():
            raise RuntimeError("no duration for that amount")
        return np.where(amount < 24, np.nan, 6 + 1.5 * amount)


@pytest.mark.parametrize("fail", ["nan", "raise"])
def test_a_relation_without_a_value_for_a_row_breaks_a_rule_there(fail: str) -> None:
    # found by fuzzing: a NaN was put back to the original duration and counted as held (an answer
    # called valid that no relation gave), and a raise ended the solve with the regressor's error
    problem = _problem(_FailsBelow(fail))
    rows = np.repeat(problem.space.original.reshape(1, -1), 3, axis=0)
    rows[0, 0], rows[1, 0], rows[2, 2] = 20, 28, 30  # amount down (no value), amount up, income up
    scores = ScoreCalculator(problem).calculate(rows).scores
    assert scores[0, 1] <= -1.0
    assert scores[1, 1] == 0.0 and scores[2, 1] == 0.0
    result = explain(problem, engine="local", seed=0)
    assert not result.feasible or result.proposed["amount"] >= 24


class _Gives:
    def __init__(self, value: Any) -> None:
        self.value = value

    def predict(self, X: np.ndarray) -> Any:
        if isinstance(self.value, Exception):
            raise self.value
        return self.value


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        (np.array([np.nan]), "one finite number per row"),
        (np.array([1.0, 2.0]), "one finite number per row"),
        (np.array([]), "one finite number per row"),
        (ValueError("X has 1 features, but it expects 2"), "failed on the original's inputs: X has 1 features"),
    ],
)
def test_a_relation_without_one_number_at_the_original_is_refused_by_name(answer: Any, words: str) -> None:
    # found by fuzzing: a NaN there kept every answer's duration as it was and called the relation
    # held; two numbers or none, or a raise, left a stack trace (IndexError, a broadcast error)
    with pytest.raises(ProblemError, match=f"relation of 'duration': its model .*{words}") as error:
        _problem(_Gives(answer))
    assert error.value.field == "relations"


def test_one_input_may_be_given_by_its_name() -> None:
    # found by fuzzing: "amount" was read as the features 'a', 'm', 'o', ... and refused as "no feature 'a'"
    relation = LearnedConstraint.of("duration", "amount", _relation_model("linear"))
    assert relation.inputs == ("amount",)


def _with_gap(name: str, fill: bool, form: str = "additive") -> CounterfactualProblem:
    base = _problem(None)
    features = [
        IntegerFeature(name=f.name, value=None, low=6, high=60, fill_missing=fill) if f.name == name else f
        for f in base.space.features
    ]
    relation = LearnedConstraint.of("duration", ["amount"], _relation_model("linear"), form=form)  # type: ignore[arg-type]
    return CounterfactualProblem(features, [ClassGoal(target=1)], base.model, relations=[relation])


@pytest.mark.parametrize(
    ("name", "fill", "form"),
    [("duration", True, "additive"), ("amount", True, "additive"), ("amount", False, "value")],
)
def test_a_relation_reading_a_missing_value_is_refused_by_name(name: str, fill: bool, form: str) -> None:
    # found by fuzzing: a missing value's code (a number outside the domain) was read as a value:
    # a filled amount moved the duration by f(filled) - f(code); a missing duration started from the code
    with pytest.raises(ProblemError, match=f"relation of 'duration': the instance has no value for '{name}'") as error:
        _with_gap(name, fill, form)
    assert error.value.field == "relations"


def test_a_missing_input_that_stays_missing_leaves_an_additive_relation_as_it_is() -> None:
    problem = _with_gap("amount", fill=False)  # f(code) - f(code): the duration moves only by itself
    assert problem.relations is not None
    row = problem.relations.apply(np.array([[problem.space.original[0], 42.0, 30.0]]))
    assert row[0, 1] == 42.0


def test_a_computed_feature_off_its_grid_stays_where_the_relation_leaves_it_within_half_a_step() -> None:
    # found by fuzzing: a duration of 42.04 on a grid of 0.1 was rounded to 42.0 (or, rising only,
    # to 42.1 and broken) when the relation moved it by less than half a step, while the exact
    # program kept 42.04: the real check rejected its optimum, and the answer was not proven
    X, y, _ = _loans()
    nudge = LinearRegression().fit(X[:, :1], 42.0 + 0.005 * X[:, 0])  # f(amount) - f(24) is tiny
    features = [
        IntegerFeature(name="amount", value=24, low=1, high=30),
        FloatFeature(name="duration", value=42.04, low=6.0, high=60.0, precision=1, monotone="increase"),
        IntegerFeature(name="income", value=22, low=22, high=40),
    ]
    problem = CounterfactualProblem(
        features,
        [ClassGoal(target=1, confidence=0.6)],
        LogisticRegression(max_iter=2000).fit(X, y),
        relations=[LearnedConstraint.of("duration", ["amount"], nudge)],
    )
    assert problem.relations is not None
    row = problem.relations.apply(np.array([[20.0, 0.0, 22.0]]))
    assert row[0, 1] == 42.04  # 42.04 - 0.02: within half a step of where it was
    assert ScoreCalculator(problem).calculate(row).scores[0, 1] == 0.0
    exact = explain(problem, engine="exact", seed=0)
    assert exact.valid and exact.feasible and exact.proposed["duration"] == 42.04
    assert exact.statistics.exact is not None and exact.statistics.exact.proven, exact.statistics.exact


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # its fit is beside the point
@pytest.mark.parametrize(
    ("regressor", "words"),
    [
        (MLPRegressor(hidden_layer_sizes=(3,), activation="tanh", max_iter=50, random_state=0), "activation 'tanh'"),
        (make_pipeline(PolynomialFeatures(2), LinearRegression()), "PolynomialFeatures"),
    ],
)
def test_a_relation_the_exact_engine_cannot_read_is_named_in_its_refusal(regressor: Any, words: str) -> None:
    # found by fuzzing: the refusal named a network's activation or a pipeline step, and not that
    # they were the relation's (the model is a logistic regression the engine reads)
    X, _, duration = _loans()
    problem = _problem(regressor.fit(X[:, :1], duration))
    with pytest.raises(ProblemError, match=f"relation of 'duration': .*{words}"):
        explain(problem, engine="exact", seed=0)
