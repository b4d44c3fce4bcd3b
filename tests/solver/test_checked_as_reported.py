"""Every answer is checked through the real model as it is reported.

A result shows a row decoded (a float rounded to its precision): a row a hair off its grid was
checked as held, valid, and reported as a value a threshold between the two decides otherwise.
Two ways an engine holds such a row: a 3-decimal step taken as a plain sum (2.788 + 0.001 is
2.7889999999999997, shown as 2.789: hand-made rows here, the engine's own source was fixed), and
the grid of a feature rounded to hundred-thousands (precision -5), whose values the engines compute
as ``k / 1e-5``: 4 / 1e-5 is 399999.99999999994, shown as 400000. The models are plain callables
that approve a value strictly below the shown one."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from counterplan.planning import CallableAdapter, ClassGoal, OutputSpec
from counterplan.planning.calculator import ScoreCalculator
from counterplan.planning.problem import CounterfactualProblem
from counterplan.solver.audit.rules import _scored
from counterplan.solver.batch.rows import meeting_the_goal
from counterplan.solver.batch.vectorised import _checked_alike
from counterplan.solver.engines import EnginePlan
from counterplan.solver.explainer import Explainer
from counterplan.solver.result_builder import ResultBuilder, Spent
from counterplan.solver.scoring import CalculatorScorer

GOAL = [ClassGoal(target=1, confidence=0.7)]
LAKH = 400000.0
"""The first model approves ``x`` below it; the engines hold 4 / 1e-5 = 399999.99999999994 for it."""
HELD = 2.788 + 0.001
"""2.7889999999999997: shown as 2.789, which the second model rejects."""
SHOWN = 2.789


def _approves(X: Any, threshold: float) -> np.ndarray:
    approve = np.where(np.asarray(X["x"], dtype=np.float64) < threshold, 0.9, 0.1)
    return np.column_stack([1.0 - approve, approve])


def _explainer(threshold: float, data: pd.DataFrame, **options: Any) -> Explainer:
    adapter = CallableAdapter(lambda X: _approves(X, threshold), [OutputSpec("y", (0, 1))], input_kind="dataframe")
    return Explainer(adapter, data.assign(y=(data["x"] < threshold).astype(int)), GOAL, target="y", **options)


@pytest.fixture(scope="module")
def lakhs() -> Explainer:
    """``x`` in hundred-thousands (precision -5), ``z`` held."""
    rng = np.random.default_rng(0)
    data = pd.DataFrame({"x": rng.integers(0, 10, 300) * 100000.0, "z": rng.uniform(0, 5, 300).round(3)})
    return _explainer(LAKH, data, immutable=["z"], overrides={"x": {"precision": -5}})


@pytest.fixture(scope="module")
def thousandths() -> Explainer:
    """``x`` with 3 decimals, ``z`` held."""
    rng = np.random.default_rng(0)
    data = pd.DataFrame({"x": rng.uniform(0, 5, 300).round(3), "z": rng.uniform(0, 5, 300).round(3)})
    return _explainer(SHOWN, data, immutable=["z"])


def _model_says(x: float, threshold: float) -> float:
    """The model's probability of approval for the value ``x`` as a user would enter it."""
    return float(_approves(pd.DataFrame({"x": [x]}), threshold)[0, 1])


@pytest.mark.parametrize("engine", [None, "swarm"])
def test_explain_reports_the_models_word_on_the_values_it_shows(lakhs: Explainer, engine: str | None) -> None:
    result = lakhs.explain({"x": 500000.0, "z": 1.0}, seed=0, engine=engine)
    shown = float(result.proposed["x"])
    # before: 400000 reported valid with the approval 0.9 of 399999.99999999994; the model says 0.1
    assert result.predictions["y"]["1"] == _model_says(shown, LAKH)
    assert not result.valid or _model_says(shown, LAKH) >= 0.7
    for answer in result.counterfactuals:
        assert answer.predictions["y"]["1"] == _model_says(float(answer.proposed["x"]), LAKH)


@pytest.mark.parametrize("vectorised", [True, False])
def test_explain_batch_calls_valid_only_what_the_model_approves_as_shown(lakhs: Explainer, vectorised: bool) -> None:
    rows = pd.DataFrame({"x": [500000.0, 700000.0, 900000.0], "z": 1.0})
    frame = lakhs.explain_batch(rows, seed=0, vectorised=vectorised)
    assert len(frame) == len(rows) and (frame["status"] != "error").all()
    for _, record in frame.iterrows():
        # before: every row valid at 400000, which the model rejects
        assert not record["valid"] or _model_says(float(record["cf_x"]), LAKH) >= 0.7


def test_plan_steps_are_checked_as_their_states_show(lakhs: Explainer) -> None:
    pytest.importorskip("pymoo")
    from counterplan.planning.actions import ActionSet
    from counterplan.solver.plans.planner import plan
    from counterplan.solver.plans.search import PlanConfig, plan_termination

    problem = lakhs.problem({"x": 500000.0, "z": 1.0})
    actions = ActionSet.from_data(
        {"actions": [{"name": "sell", "feature": "x", "kind": "set", "values": [LAKH, 300000.0], "effort": 1}]}
    )
    result = plan(problem, actions, config=PlanConfig(population=20, termination=plan_termination(5)))
    assert result.plans
    for laid_out in result.plans:
        for step in laid_out.steps:
            # before: the state 400000 met the goal (the model asked about 399999.99999999994)
            assert step.prediction == _model_says(float(step.state["x"]), LAKH)
        assert not laid_out.valid or _model_says(float(laid_out.steps[-1].state["x"]), LAKH) >= 0.7


def _problems(explainer: Explainer, n: int) -> list[CounterfactualProblem]:
    return [explainer.problem({"x": 2.9 + 0.1 * i, "z": 1.0}) for i in range(n)]


def test_the_batch_final_check_checks_its_rows_as_reported(thousandths: Explainer) -> None:
    problems = _problems(thousandths, 2)
    rows = np.array([[HELD, 1.0], [HELD, 1.0]])
    evaluations = _checked_alike(problems, rows, thousandths.adapter)
    # before: both valid (the model approves 2.7889999999999997), each record then showing 2.789
    assert [bool(e.feasible[0]) for e in evaluations] == [False, False]
    assert [e.rows.tolist() for e in evaluations if e.rows is not None] == [[[SHOWN, 1.0]]] * 2


def test_an_audit_rules_candidates_are_checked_as_reported(thousandths: Explainer) -> None:
    problems = _problems(thousandths, 2)
    candidates = np.array([[[HELD, 1.0], [2.5, 1.0]]] * 2)  # (rows, actions, features)
    helps = [e.feasible.tolist() for e in _scored(problems, candidates)]
    assert helps == [[False, True], [False, True]]  # before: [True, True] each


def test_the_best_is_checked_as_reported_even_when_the_solve_is_stopping(thousandths: Explainer) -> None:
    problem = _problems(thousandths, 1)[0]
    calculator = ScoreCalculator(problem)
    scorer = CalculatorScorer(calculator)
    row = np.array([HELD, 1.0])
    assert calculator.calculate(row.reshape(1, -1)).feasible[0]  # the search scored the row it held
    calls = calculator.model_call_count
    checked = scorer.check_best(row, stopping=True)
    # before: the prediction kept for 2.7889999999999997 answered for it, valid, shown as 2.789
    assert not checked.feasible[0] and calculator.model_call_count == calls + 1
    assert checked.rows is not None and checked.rows.tolist() == [[SHOWN, 1.0]]
    again = scorer.check_best(np.array([SHOWN, 1.0]), stopping=True)
    assert again is not None and not again.feasible[0]


def test_a_best_so_far_is_valid_only_as_it_is_reported(thousandths: Explainer) -> None:
    """A solve that must answer at once (its thread inside a model call) answers with the row its
    calculator kept, scored as held: shown otherwise, it is not called valid."""
    problem = _problems(thousandths, 1)[0]
    calculator = ScoreCalculator(problem)
    original = calculator.check(problem.original_row())
    builder = ResultBuilder(problem, EnginePlan(thousandths.config, "local", "test"), 1)

    def so_far(x: float) -> Any:
        row = np.array([x, 1.0])
        kept = calculator.calculate(row.reshape(1, -1))  # scored as held, by the search
        return builder.so_far((row, kept), original=original, spent=Spent(1, 1, 0.0), found_at=(1, 0.0), reason="")

    held = so_far(HELD)
    assert held.proposed["x"] == SHOWN and not held.valid  # before: valid
    assert so_far(2.788).valid


def test_already_met_rows_are_judged_with_their_own_originals(thousandths: Explainer) -> None:
    """The batch's selection judges many rows' originals in one problem's space: each row is its
    own original, reported as it is (2.7889 meets the goal), not rounded to 2.789."""
    frame = pd.DataFrame({"x": [3.5, 2.7889], "z": [1.0, 1.0]})
    assert meeting_the_goal(thousandths, frame).tolist() == [False, True]
    assert thousandths.explain({"x": 2.7889, "z": 1.0}).already_met
