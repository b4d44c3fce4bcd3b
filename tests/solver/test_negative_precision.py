"""A feature with a negative precision: every engine searches the grid its answers show.

``x`` is counted in hundred-thousands (precision -5): its grid values are multiples of 100,000,
shown as ``round(value, -5)``. The engines computed them as ``k / 1e-5`` (``4 / 1e-5`` is
``399999.99999999994``, ``3 / 1e-5`` is ``300000.00000000006``): a model approving ``x`` below
400,000 approved the value held for 400,000, which the final check (made on the value shown)
rejected, and the valid answer at 300,000 was never proposed. Now every grid value is the float
decode shows (:mod:`counterplan.planning.grid`): each engine finds 300,000, and every value any
engine asks the model about is its own decoded value, bit for bit."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import pandas as pd
import pytest
from sklearn.tree import DecisionTreeClassifier

from counterplan.planning import CallableAdapter, ClassGoal, CounterfactualProblem, FloatFeature, OutputSpec
from counterplan.planning.models import adapt_sklearn
from counterplan.solver.core.config import SolverConfig
from counterplan.solver.counterfactual import explain
from counterplan.solver.exact.config import ExactPhaseConfig
from counterplan.solver.exact.formulation import build
from counterplan.solver.explainer import Explainer

GOAL = [ClassGoal(target=1, confidence=0.7)]
LAKH = 400000.0
"""The model approves ``x`` strictly below it."""
ANSWER = 300000.0
"""The nearest value below it on the grid of hundred-thousands, from the original 700,000."""
ROW = {"x": 700000.0, "z": 1.0}


class _Recording:
    """A plain callable model approving ``x < LAKH`` that keeps every ``x`` it is asked about."""

    def __init__(self) -> None:
        self.asked: list[float] = []

    def __call__(self, X: Any) -> np.ndarray:
        x = np.asarray(X["x"], dtype=np.float64)
        self.asked.extend(x.tolist())
        approve = np.where(x < LAKH, 0.9, 0.1)
        return np.column_stack([1.0 - approve, approve])

    def off_the_shown_grid(self) -> list[float]:
        """The values asked about that decode shows otherwise (``round(value, -5)``)."""
        return sorted({x for x in self.asked if float(round(x, -5)) != x})


def _data() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({"x": rng.integers(0, 10, 300) * 100000.0, "z": rng.uniform(0, 5, 300).round(3)})


def _explainer() -> tuple[Explainer, _Recording]:
    model = _Recording()
    data = _data()
    adapter = CallableAdapter(model, [OutputSpec("y", (0, 1))], input_kind="dataframe")
    explainer = Explainer(
        adapter,
        data.assign(y=(data["x"] < LAKH).astype(int)),
        GOAL,
        target="y",
        immutable=["z"],
        overrides={"x": {"precision": -5}},
    )
    return explainer, model


@pytest.mark.parametrize("engine", [None, "swarm"])
def test_explain_finds_the_valid_value_on_the_grid_it_shows(engine: Literal["swarm"] | None) -> None:
    explainer, model = _explainer()
    result = explainer.explain(ROW, seed=0, engine=engine)
    # before: 400000 reported not valid (the engine held 399999.99999999994), 300000 never proposed
    assert result.valid and result.proposed["x"] == ANSWER
    assert model.off_the_shown_grid() == []  # before: 299999.99999999994, 399999.99999999994, ...


@pytest.mark.parametrize("vectorised", [True, False])
def test_explain_batch_finds_the_valid_value_on_the_grid_it_shows(vectorised: bool) -> None:
    explainer, model = _explainer()
    rows = pd.DataFrame({"x": [500000.0, 700000.0, 900000.0], "z": 1.0})
    frame = explainer.explain_batch(rows, seed=0, vectorised=vectorised)
    assert frame["valid"].tolist() == [True, True, True]  # before: none valid
    assert frame["cf_x"].tolist() == [ANSWER] * 3
    assert model.off_the_shown_grid() == []


def test_a_plan_finds_the_valid_value_on_the_grid_it_shows() -> None:
    pytest.importorskip("pymoo")
    from counterplan.planning.actions import ActionSet
    from counterplan.solver.plans.planner import plan
    from counterplan.solver.plans.search import PlanConfig, plan_termination

    explainer, model = _explainer()
    problem = explainer.problem(ROW)
    # an amount drawn from a range and put on the grid (snap), not given as exact values
    actions = ActionSet.from_data(
        {"actions": [{"name": "sell", "feature": "x", "kind": "add", "low": -700000.0, "high": 0.0}]}
    )
    result = plan(problem, actions, config=PlanConfig(population=20, termination=plan_termination(10)))
    valid = [p for p in result.plans if p.valid]
    assert valid  # before: every state held a hair off the grid, 300000 among them judged as 300000.00000000006
    assert max(float(p.steps[-1].state["x"]) for p in valid) == ANSWER
    assert model.off_the_shown_grid() == []


def test_the_exact_engine_finds_the_valid_value_on_the_grid_it_shows() -> None:
    pytest.importorskip("highspy")
    data = _data()
    label = (data["x"] < 350000.0).astype(int)
    tree = DecisionTreeClassifier(max_depth=1, random_state=0).fit(data, label)
    explainer = Explainer(
        tree, data.assign(y=label), GOAL, target="y", immutable=["z"], overrides={"x": {"precision": -5}}
    )
    result = explainer.explain(ROW, seed=0, engine="exact")
    assert result.valid and result.proposed["x"] == ANSWER
    assert result.statistics.exact is not None and result.statistics.exact.proven


@pytest.mark.parametrize("backend", ["highs", "cpsat"])
def test_the_exact_programs_grid_values_are_what_decode_shows(backend: str) -> None:
    """Every grid value the exact engine's program stands for (its decoded rows, the values
    either side of a tree's split) is the float decode shows, for hundred-thousands and billions;
    each backend (CP-SAT decodes its numbers itself) proves the answer on that grid."""
    pytest.importorskip("highspy")
    if backend == "cpsat":
        pytest.importorskip("ortools")
    config = SolverConfig(phases=(*SolverConfig().phases, ExactPhaseConfig(backend=backend)))
    for places, unit in ((-5, 1e5), (-9, 1e9)):
        rng = np.random.default_rng(0)
        frame = pd.DataFrame({"x": rng.integers(0, 40, 400) * unit, "z": rng.uniform(0, 1, 400)})
        label = ((frame["x"] > 12.5 * unit) & (frame["x"] < 27.5 * unit)).astype(int)
        tree = DecisionTreeClassifier(max_depth=3, random_state=0).fit(frame, label)
        features = [
            FloatFeature(name="x", value=35 * unit, low=0.0, high=39 * unit, precision=places),
            FloatFeature(name="z", value=0.5, low=0.0, high=1.0, precision=2, constrained=True),
        ]
        problem = CounterfactualProblem(features, GOAL, adapt_sklearn(tree, "ok"))
        formulation = build(problem)
        for k in range(40):
            row = np.array([float(round(k * unit, places)), 0.5])  # the value decode shows
            decoded = formulation.decode(formulation.assignment(row))
            assert decoded[0].tobytes() == row[0].tobytes(), (places, k, decoded[0])  # before: 3 / 1e-5 ...
        sides = [value for var, _, _ in formulation.thresholds for value in formulation.bands[var]]
        assert sides and all(float(round(v, places)) == v for v in sides)
        result = explain(problem, config, engine="exact", seed=0)
        assert result.valid and result.proposed["x"] == 27 * unit
        assert result.statistics.exact is not None and result.statistics.exact.proven
