"""Action plans: random keys decoded into sequences, and whole populations unrolled."""

from __future__ import annotations

import numpy as np
import pytest

from counterplan.planning import scored_rows
from counterplan.planning.actions import ActionSet, total_cost
from counterplan.planning.problem import CounterfactualProblem
from counterplan.solver.plans.genome import decode
from counterplan.solver.plans.search import COST_DECIMALS
from counterplan.solver.plans.unroll import unroll
from tests.toy_person import TOY, toy_space


def test_the_papers_figure_3_keys_give_a3_then_a2() -> None:
    space = toy_space()
    actions, _ = ActionSet.from_data(TOY).compile(space)
    keys = np.array(
        [
            [0.70, 0.45, 0.02, 0.1, 0.9, 0.5],  # Figure 3: a1 inactive, then a3, a2
            [0.60, 0.51, 0.99, 0.1, 0.1, 0.1],  # every key above 0.5: the empty plan
            [0.10, 0.30, 0.20, 0.1, 0.1, 0.1],  # all three: a1, a3, a2
        ]
    )
    decoded = decode(keys, actions, space)
    assert decoded.order.tolist() == [[2, 1, -1], [-1, -1, -1], [0, 2, 1]]
    assert decoded.lengths.tolist() == [2, 0, 3]
    assert decoded.empty.tolist() == [False, True, False]
    assert decoded.values[0].tolist() == [1.0, 1.0, 1.0]  # each set action's one value
    with pytest.raises(ValueError, match="6 keys"):
        decode(keys[:, :5], actions, space)


def test_add_values_interpolate_into_the_delta_range_and_round_for_whole_numbers() -> None:
    from counterplan.planning import IntegerFeature
    from counterplan.planning.space import FeatureSpace

    space = FeatureSpace([IntegerFeature(name="education", value=10, low=1, high=16)])
    actions, _ = ActionSet.from_data(
        {"actions": [{"name": "study", "feature": "education", "low": -2, "high": 4}]}
    ).compile(space)
    decoded = decode(np.array([[0.1, 0.0], [0.1, 0.5], [0.1, 1.0], [0.1, 0.55]]), actions, space)
    assert decoded.values[:, 0].tolist() == [-2.0, 1.0, 4.0, 1.0]  # -2 + 0.55 * 6 = 1.3 -> 1


def test_a_population_unrolls_to_the_same_costs_as_one_plan_at_a_time() -> None:
    space = toy_space()
    actions, graph = ActionSet.from_data(TOY).compile(space)
    keys = np.array(
        [
            [0.20, 0.30, 0.10, 0.5, 0.5, 0.5],  # move, job, degree: 15 + 7.5 + 5
            [0.30, 0.10, 0.20, 0.5, 0.5, 0.5],  # degree, move, job: 2.5 + 15 + 5
            [0.70, 0.45, 0.02, 0.5, 0.5, 0.5],  # move, degree: 15 + 5
            [0.90, 0.90, 0.90, 0.5, 0.5, 0.5],  # nothing
        ]
    )
    decoded = decode(keys, actions, space)
    played = unroll(decoded, actions, graph, space, space.original)
    assert played.cost.tolist() == pytest.approx([27.5, 22.5, 20.0, 0.0])
    assert played.step_costs[0].tolist() == pytest.approx([15.0, 7.5, 5.0])
    for row in range(3):
        steps = [(int(a), float(decoded.values[row, a])) for a in decoded.order[row] if a >= 0]
        assert total_cost(actions, graph, space, space.original, steps)[0] == pytest.approx(played.cost[row])
    assert played.violations.tolist() == [0, 0, 0, 0]
    # job, education, location, age: the degree also ages the person by 4 years
    assert played.changes.tolist() == [[1, 1, 1, 1], [1, 1, 1, 1], [0, 1, 1, 1], [0, 0, 0, 0]]
    assert played.final[2].tolist() == [0.0, 1.0, 1.0, 34.0]
    assert played.states[2, 1].tolist() == [0.0, 0.0, 1.0, 30.0]  # after the move, before the degree
    assert played.final[3].tolist() == space.original.tolist()


def test_a_step_that_cannot_run_is_a_violation_and_leaves_the_state() -> None:
    space = toy_space()
    data = {"actions": [*TOY["actions"][:2], {**TOY["actions"][2], "pre": 'education == "BSc"'}], "graph": TOY["graph"]}
    actions, graph = ActionSet.from_data(data).compile(space)
    keys = np.array([[0.9, 0.9, 0.1, 0.5, 0.5, 0.5], [0.9, 0.1, 0.2, 0.5, 0.5, 0.5]])  # move alone; degree then move
    played = unroll(decode(keys, actions, space), actions, graph, space, space.original)
    assert played.violations.tolist() == [1, 0]
    assert played.final[0].tolist() == space.original.tolist() and played.cost[0] == 0.0
    assert played.cost[1] == pytest.approx(2.5 + 15.0)


def _toy_problem(**options):  # type: ignore[no-untyped-def]
    """The toy person asks for a better-paid life: the model approves a developer in the US, or a
    developer with a degree."""
    from counterplan.planning import CallableAdapter, ClassGoal, CounterfactualProblem, OutputSpec

    space = toy_space()
    return CounterfactualProblem(
        space.features, [ClassGoal(target=1)], CallableAdapter(_toy_model, [OutputSpec("ok", (0, 1))]), **options
    )


def _toy_model(X: np.ndarray) -> np.ndarray:
    developer, degree, us = X[:, 0] == 1, X[:, 1] == 1, X[:, 2] == 1
    p = np.where(developer & (us | degree), 0.9, 0.1)
    return np.column_stack([1.0 - p, p])


def test_the_search_finds_the_cheapest_plans_front_with_one_model_call_per_generation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("pymoo")
    monkeypatch.setattr(scored_rows, "MAX_REMEMBERED_BYTES", 0)  # every generation asks the model, as counted here
    from counterplan.planning.actions import ActionSet
    from counterplan.solver.plans.search import PlanConfig, PlanSearch, plan_termination

    problem = _toy_problem()
    actions, graph = ActionSet.from_data(TOY).compile(problem.space)
    fronts: list[int] = []
    config = PlanConfig(population=40, termination=plan_termination(15))
    search = PlanSearch(problem, actions, graph, config, [lambda event: fronts.append(len(event.front.objectives))])
    keys, objectives = search.run()
    # the listener hears each generation that changed the front (the toy's: generation 0 only)
    assert search.generations_run == 15 and fronts[-1] == keys.shape[0] > 0
    assert search.calculator.model_call_count == 15  # one call per generation, whatever the population
    # every plan on the front replays to the goal; the cheapest is degree then job (2.5 + 7.5 = 10:
    # the degree is discounted in Germany, the job after the degree), cheaper than job then degree
    # (10 + 2.5) or any route through the US (the move alone costs 15)
    played = search.evaluate(keys)
    assert (played.violation == 0).all()
    assert objectives[:, 0].min() == pytest.approx(10.0)
    cheapest = keys[int(np.argmin(objectives[:, 0]))]
    decoded = decode(cheapest.reshape(1, -1), actions, problem.space)
    assert [actions[a].name for a in decoded.order[0] if a >= 0] == ["degree", "job"]
    again = PlanSearch(problem, actions, graph, PlanConfig(population=40, termination=plan_termination(15))).run()
    assert np.array_equal(again[1], objectives)  # the same seed, the same front
    monkeypatch.undo()  # remembering the rows scored: the same front, each state asked once
    remembering = PlanSearch(problem, actions, graph, PlanConfig(population=40, termination=plan_termination(15)))
    assert np.array_equal(remembering.run()[1], objectives)
    assert remembering.calculator.model_call_count < 15
    assert remembering.calculator.model_row_count < search.calculator.model_row_count


def test_plan_lays_out_the_front_step_by_step_checked_through_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pymoo")
    monkeypatch.setattr(scored_rows, "MAX_REMEMBERED_BYTES", 0)  # every generation asks the model, as counted here
    from counterplan.planning.actions import ActionSet
    from counterplan.solver.plans.planner import plan
    from counterplan.solver.plans.search import PlanConfig, plan_termination

    problem = _toy_problem()
    result = plan(problem, ActionSet.from_data(TOY), config=PlanConfig(population=40, termination=plan_termination(15)))
    assert result.plans and all(p.valid for p in result.plans)
    assert [p.total_cost for p in result.plans] == sorted(p.total_cost for p in result.plans)
    cheapest = result.cheapest
    assert cheapest is not None and cheapest.total_cost == pytest.approx(10.0)
    assert [s.action for s in cheapest.steps] == ["degree", "job"]
    first, second = cheapest.steps
    assert (first.before, first.after, first.cost) == ("HS", "BSc", pytest.approx(2.5))
    assert first.state["age"] == 34 and not first.goal_met and first.prediction == pytest.approx(0.1)
    assert first.consequences == {"age": (30, 34)} and second.consequences == {}
    assert second.state["job"] == "Developer" and second.goal_met and second.prediction == pytest.approx(0.9)
    assert result.short is not None and len(result.short.steps) <= 2
    assert result.original_prediction == pytest.approx(0.1)
    assert result.model_calls == 15 + 2  # the generations, the front's check, the original (its replay calls no model)


def test_a_plans_total_cost_is_the_sum_of_its_steps_costs() -> None:
    """The total was the search's objective, rounded to 4 decimals: degree then job, steps of
    0.8333... and 2.5, said 3.3333."""
    pytest.importorskip("pymoo")
    from counterplan.solver.plans.planner import plan
    from counterplan.solver.plans.search import PlanConfig, plan_termination

    thirds = {**TOY, "actions": [{**a, "effort": f"{a['effort']} / 3"} for a in TOY["actions"]]}
    result = plan(
        _toy_problem(), ActionSet.from_data(thirds), config=PlanConfig(population=40, termination=plan_termination(5))
    )
    assert result.plans
    for p in result.plans:
        assert p.total_cost == sum(step.cost for step in p.steps)


def test_the_shipped_adult_actions_compile_and_cost_as_the_paper_says() -> None:
    from pathlib import Path

    import yaml

    from counterplan.planning import CategoricalFeature, IntegerFeature
    from counterplan.planning.actions import ActionError, ActionSet, total_cost
    from counterplan.planning.space import FeatureSpace

    space = FeatureSpace(
        [
            IntegerFeature(name="age", value=30, low=17, high=120),
            IntegerFeature(name="education-num", value=10, low=1, high=16),
            CategoricalFeature(name="occupation", value="Other", categories=("Managerial-Specialist", "Other")),
            IntegerFeature(name="capital-gain", value=0, low=0, high=99_999),
            IntegerFeature(name="capital-loss", value=0, low=0, high=4_356),
            IntegerFeature(name="hours-per-week", value=40, low=1, high=99),
        ]
    )
    text = (Path(__file__).parents[3] / "examples" / "adult-actions.yaml").read_text()
    actions, graph = ActionSet.from_data(yaml.safe_load(text)).compile(space)
    names = [a.name for a in actions]
    study, gain, loss, occupation = (
        names.index(n) for n in ("add education", "change capital gain", "change capital loss", "change occupation")
    )
    # two levels of education at 40 hours a week: effort 2, discounted by 0.7; the person ages 4 years
    total, _ = total_cost(actions, graph, space, space.original, [(study, 2.0)])
    assert total == pytest.approx(1.4)
    # then a capital gain of 10,000: effort 1, discounted by 1 - 12/32 (education is now 12)
    total, steps = total_cost(actions, graph, space, space.original, [(study, 2.0), (gain, 10_000.0)])
    assert steps[1] == pytest.approx(1 - 12 / 32)
    manager = 0.0
    assert total_cost(actions, graph, space, space.original, [(occupation, manager)])[0] == pytest.approx(
        5 * (1 - 10 / 32)
    )
    with pytest.raises(ActionError, match="cannot run here"):  # no capital loss once there is a gain
        total_cost(actions, graph, space, space.original, [(gain, 10_000.0), (loss, 100.0)])


def test_plans_keep_the_problems_actionability_rules() -> None:
    """At most two features may change: the degree (which also ages the person) and the job
    change three, so the cheapest plan becomes the move and the job, though it costs more."""
    pytest.importorskip("pymoo")
    from counterplan.solver.plans.planner import plan
    from counterplan.solver.plans.search import PlanConfig, plan_termination

    limited = _toy_problem(max_changed_features=2)
    result = plan(limited, ActionSet.from_data(TOY), config=PlanConfig(population=40, termination=plan_termination(15)))
    assert result.plans and all(p.valid for p in result.plans)
    for p in result.plans:
        final = p.steps[-1].state
        assert sum(final[n] != result.original[n] for n in final) <= 2
    assert result.cheapest is not None and result.cheapest.total_cost == pytest.approx(22.5)
    assert sorted(s.action for s in result.cheapest.steps) == ["job", "move"]


def test_a_time_limit_or_a_stop_request_answers_with_the_front_so_far(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pymoo")
    monkeypatch.setattr(scored_rows, "MAX_REMEMBERED_BYTES", 0)  # every generation asks the model, as counted here
    from counterplan.solver.plans.planner import PlanSolver, plan
    from counterplan.solver.plans.search import PlanConfig, plan_termination

    problem = _toy_problem()
    asked: list[int] = []

    def toy_asked_to_stop(X: np.ndarray) -> np.ndarray:
        """The toy, asked about the original first, then once a generation until the third asks
        the search to stop (as a cancelled call or a shutdown would, from another thread)."""
        searching = calls[0] > 0 and not solver.search.terminate_requested
        calls[0] += 1
        if searching:
            asked.append(solver.search.generations_run)
            if len(asked) >= 3:
                solver.terminate_early()
        return _toy_model(X)

    calls = [0]
    config = PlanConfig(population=40, termination=plan_termination(15))
    solver = PlanSolver(_toy_with(toy_asked_to_stop), ActionSet.from_data(TOY), config=config)
    stopped = solver.solve()
    assert stopped.generations == 3 and stopped.stopped_early and asked == [0, 1, 2]
    assert stopped.plans and all(p.valid for p in stopped.plans)
    config = PlanConfig(population=40, termination=plan_termination(15, time_limit_seconds=1e-9))
    timed = plan(problem, ActionSet.from_data(TOY), config=config)
    assert timed.generations == 1 and timed.stopped_early
    whole = plan(problem, ActionSet.from_data(TOY), config=PlanConfig(population=40, termination=plan_termination(15)))
    assert whole.generations == 15 and not whole.stopped_early


def test_computed_features_follow_every_step_and_no_action_may_set_them() -> None:
    """y is learned as 2 x: raising x raises y at each step, and a post-condition reads it."""
    pytest.importorskip("pymoo")
    from sklearn.linear_model import LinearRegression

    from counterplan.planning import (
        CallableAdapter,
        ClassGoal,
        CounterfactualProblem,
        FloatFeature,
        IntegerFeature,
        OutputSpec,
    )
    from counterplan.planning.actions import ActionError
    from counterplan.planning.relations import LearnedConstraint
    from counterplan.solver.plans.planner import plan
    from counterplan.solver.plans.search import PlanConfig, plan_termination

    xs = np.arange(0, 11, dtype=float).reshape(-1, 1)
    relation = LearnedConstraint.of("y", ["x"], LinearRegression().fit(xs, 2 * xs[:, 0]))

    def model(X: np.ndarray) -> np.ndarray:
        p = np.where(X[:, 1] >= 10, 0.9, 0.1)
        return np.column_stack([1.0 - p, p])

    problem = CounterfactualProblem(
        [IntegerFeature(name="x", value=2, low=0, high=10), FloatFeature(name="y", value=4.0, low=0.0, high=20.0)],
        [ClassGoal(target=1)],
        CallableAdapter(model, [OutputSpec("ok", (0, 1))]),
        relations=[relation],
    )
    raise_x = {"name": "raise x", "feature": "x", "low": 1, "high": 8, "post": "after.y <= 12"}
    result = plan(
        problem,
        ActionSet.from_data({"actions": [raise_x]}),
        config=PlanConfig(population=20, termination=plan_termination(5)),
    )
    assert result.cheapest is not None
    assert {p.steps[-1].state["x"] for p in result.plans} <= {5, 6}  # y = 2 x reaches 10 and stays within 12
    assert result.cheapest.steps[0].state["y"] == pytest.approx(10.0)
    with pytest.raises(ActionError) as info:
        plan(problem, ActionSet.from_data({"actions": [{**raise_x, "feature": "y"}]}), config=PlanConfig(population=4))
    assert info.value.field == "actions[0].feature" and "computed" in info.value.problem


def _toy_with(model):  # type: ignore[no-untyped-def]
    from counterplan.planning import CallableAdapter, ClassGoal, CounterfactualProblem, OutputSpec

    space = toy_space()
    return CounterfactualProblem(
        space.features, [ClassGoal(target=1)], CallableAdapter(model, [OutputSpec("ok", (0, 1))])
    )


def test_a_failing_model_never_makes_a_plan_and_says_why() -> None:
    pytest.importorskip("pymoo")
    from counterplan.planning.errors import ModelCallError
    from counterplan.solver.plans.planner import plan
    from counterplan.solver.plans.search import PlanConfig, plan_termination

    calls = [0]

    def breaks_after_the_first_call(X: np.ndarray) -> np.ndarray:
        calls[0] += 1
        if calls[0] > 1:
            raise RuntimeError("boom")
        return np.column_stack([np.full(len(X), 0.9), np.full(len(X), 0.1)])

    config = PlanConfig(population=20, termination=plan_termination(50))
    broken = plan(_toy_with(breaks_after_the_first_call), ActionSet.from_data(TOY), config=config)
    assert broken.plans == [] and broken.cheapest is None
    assert broken.stopped_early and broken.generations < 50  # it stopped calling a model that always fails
    assert broken.failure is not None and "boom" in broken.failure

    def answers_only_for_the_original(X: np.ndarray) -> np.ndarray:
        out = np.column_stack([np.full(len(X), 0.9), np.full(len(X), 0.1)])
        out[(toy_space().original != X).any(axis=1)] = np.nan  # NaN for every changed state
        return out

    silent = plan(
        _toy_with(answers_only_for_the_original),
        ActionSet.from_data(TOY),
        config=PlanConfig(population=20, termination=plan_termination(5)),
    )
    assert silent.plans == [] and silent.failure is not None and "not finite" in silent.failure

    def always_fails(X: np.ndarray) -> np.ndarray:
        raise RuntimeError("no")

    with pytest.raises(ModelCallError, match="original instance"):
        plan(_toy_with(always_fails), ActionSet.from_data(TOY), config=config)


def test_an_original_that_already_meets_the_goal_needs_no_plan() -> None:
    pytest.importorskip("pymoo")
    from counterplan.solver.plans.planner import plan
    from counterplan.solver.plans.search import PlanConfig, plan_termination

    def approves(X: np.ndarray) -> np.ndarray:
        return np.column_stack([np.full(len(X), 0.1), np.full(len(X), 0.9)])

    result = plan(
        _toy_with(approves), ActionSet.from_data(TOY), config=PlanConfig(population=20, termination=plan_termination(5))
    )
    assert result.already_met and result.plans == [] and result.cheapest is None
    assert result.model_calls == 1 and result.generations == 0


UNPRICED = {
    "actions": [
        {"name": "earn more", "feature": "income", "low": 1000, "high": 40000, "effort": "1e999"},
        {"name": "close cards", "feature": "credit_cards", "low": -5, "high": -1, "effort": "abs(delta) / 2"},
    ],
    "graph": [{"source": "debt", "target": "income", "tau": "0"}],
}
"""The only action that reaches the loan goal costs infinity, discounted by a tau of 0: inf * 0."""


def test_a_plan_without_a_finite_cost_is_infeasible_and_the_result_says_why(
    loan_problem: CounterfactualProblem,
) -> None:
    pytest.importorskip("pymoo")
    import warnings

    from counterplan.solver.plans.planner import plan
    from counterplan.solver.plans.search import PlanConfig, plan_termination

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no inf * 0 on the way either
        result = plan(
            loan_problem,
            ActionSet.from_data(UNPRICED),
            config=PlanConfig(population=60, termination=plan_termination(15)),
        )
    # before: 16 plans on the front, every one costing NaN, and a NaN "cheapest"
    assert all(np.isfinite(p.total_cost) for p in result.plans)
    assert not any(s.action == "earn more" for p in result.plans for s in p.steps)
    assert result.cheapest is None or np.isfinite(result.cheapest.total_cost)
    assert result.cost_failure is not None and "'earn more'" in result.cost_failure
    assert "infeasible" in result.cost_failure and result.failure is None  # the model did not fail
    # with a price the same action plans: the cost alone kept it off
    priced = {**UNPRICED, "actions": [{**UNPRICED["actions"][0], "effort": "abs(delta) / 5000"}]}
    config = PlanConfig(population=60, termination=plan_termination(15))
    fine = plan(loan_problem, ActionSet.from_data(priced), config=config)
    assert fine.cheapest is not None and np.isfinite(fine.cheapest.total_cost) and fine.cost_failure is None


def test_an_unpriced_step_is_a_violation_of_its_plan_in_the_population() -> None:
    space = toy_space()
    data = {**TOY, "actions": [{**TOY["actions"][0], "effort": "1e999"}, *TOY["actions"][1:]]}
    data["graph"] = [*TOY["graph"], {"source": "age", "target": "job", "tau": "0"}]
    actions, graph = ActionSet.from_data(data).compile(space)
    keys = np.array([[0.1, 0.9, 0.9, 0.5, 0.5, 0.5], [0.9, 0.1, 0.9, 0.5, 0.5, 0.5]])  # job first; degree alone
    decoded = decode(keys, actions, space)
    played = unroll(decoded, actions, graph, space, space.original)
    assert np.isfinite(played.step_costs).all() and np.isfinite(played.cost).all()
    job_plans = (decoded.order == 0).any(axis=1)
    assert played.unpriced.any(axis=1).tolist() == job_plans.tolist()
    assert (played.violations[job_plans] > 0).all()


def test_a_stopped_search_lays_out_its_cheapest_plans_in_time() -> None:
    """A front of 2,000 plans of about 50 steps over 300 features: laid out whole after a stop
    (every step's state decoded feature by feature) it took 12 s, and so did the server's answer
    at its deadline (:meth:`PlanSolver.so_far`). A search that must end now lays out its cheapest
    plans for at most ``LAY_OUT_SECONDS``; ``front_size`` counts the rest."""
    pytest.importorskip("pymoo")
    import time

    from counterplan.planning import CallableAdapter, ClassGoal, FloatFeature, OutputSpec
    from counterplan.planning.actions import Action
    from counterplan.solver.core.events import BestSolutionChanged
    from counterplan.solver.plans.planner import PlanSolver
    from counterplan.solver.plans.search import PlanConfig, plan_termination

    stopped: list[float] = []

    def model(X: np.ndarray) -> np.ndarray:
        """Approves when the first 100 features add up past 5; stops the search at its first
        generation's call, as a cancel, a shutdown or Ctrl-C would (from another thread)."""
        if len(X) > 1 and not stopped:
            solver.terminate_early()
            stopped.append(time.perf_counter())
        p = 1.0 / (1.0 + np.exp(-(X[:, :100].sum(axis=1) - 5.0)))
        return np.column_stack([1.0 - p, p])

    features = [FloatFeature(name=f"x{j}", value=0.0, low=-100.0, high=100.0) for j in range(300)]
    problem = CounterfactualProblem(features, [ClassGoal(target=1)], CallableAdapter(model, [OutputSpec("ok", (0, 1))]))
    actions = [Action(name=f"raise x{j}", feature=f"x{j}", kind="add", low=0.5, high=2.0) for j in range(100)]
    config = PlanConfig(population=2000, termination=plan_termination(10))
    fronts: list[BestSolutionChanged] = []
    solver = PlanSolver(problem, actions, config=config, listeners=[fronts.append])
    result = solver.solve()
    assert time.perf_counter() - stopped[0] < 3.0
    assert result.stopped_early and result.generations == 1
    (event,) = fronts
    assert event.front is not None
    size = event.front.rows.shape[0]
    assert result.front_size == size > 1000 and 1 <= len(result.plans) < size
    assert round(result.plans[0].total_cost, COST_DECIMALS) == event.front.objectives[:, 0].min()
    assert result.cheapest is result.plans[0]
    started = time.perf_counter()
    answered = solver.so_far(event.front)  # what a server answers by its deadline
    assert time.perf_counter() - started < 3.0
    assert answered is not None and answered.front_size == size and 1 <= len(answered.plans) < size


def test_a_front_is_checked_in_lots_of_whole_plans_and_a_stop_ends_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """A front's states go to the real model in calls of at most ``CHECK_LOT_ROWS`` rows of whole
    plans (a front of 1,820 plans of 150 steps over 150 features was one call of 273,000 rows),
    with the same plans as one call; a stop arriving while they are checked ends the check after
    the lot in flight: the plans checked are laid out, ``front_size`` counts the rest."""
    pytest.importorskip("pymoo")
    import time

    from counterplan.planning import CallableAdapter, ClassGoal, CounterfactualProblem, OutputSpec
    from counterplan.planning.actions import ActionSet
    from counterplan.solver.plans import planner
    from counterplan.solver.plans.planner import PlanResult, PlanSolver
    from counterplan.solver.plans.search import PlanConfig, plan_termination

    monkeypatch.setattr(scored_rows, "MAX_REMEMBERED_BYTES", 0)  # every generation asks the model
    sizes: list[int] = []
    stop_at_check: list[bool] = []

    def model(X: np.ndarray) -> np.ndarray:
        sizes.append(len(X))
        if stop_at_check and len(X) == 2:  # a lot of the front's check (a generation asks about 60 rows)
            solver.terminate_early()
            time.sleep(2 * planner.LAY_OUT_SECONDS)
        return _toy_model(X)

    space = toy_space()
    adapter = CallableAdapter(model, [OutputSpec("ok", (0, 1))])
    problem = CounterfactualProblem(space.features, [ClassGoal(target=1)], adapter)
    config = PlanConfig(population=60, termination=plan_termination(15))

    def layout(result: PlanResult) -> list[tuple[object, ...]]:
        return [(p.total_cost, p.valid, [(s.action, s.after, s.prediction) for s in p.steps]) for p in result.plans]

    solver = PlanSolver(problem, ActionSet.from_data(TOY), config=config)
    whole = solver.solve()
    assert len(whole.plans) == whole.front_size >= 2 and all(p.valid for p in whole.plans)
    longest = max(len(p.steps) for p in whole.plans)
    monkeypatch.setattr(planner, "CHECK_LOT_ROWS", 2)  # a lot a plan
    sizes.clear()
    solver = PlanSolver(problem, ActionSet.from_data(TOY), config=config)
    in_lots = solver.solve()
    assert layout(in_lots) == layout(whole)
    lots = sizes[-(len(sizes) - 16) :]  # after the original's check and the 15 generations
    assert len(lots) == whole.front_size and max(lots) <= max(2, longest)
    stop_at_check.append(True)
    solver = PlanSolver(problem, ActionSet.from_data(TOY), config=config)
    stopped = solver.solve()
    assert stopped.front_size == whole.front_size and 1 <= len(stopped.plans) < whole.front_size
    assert layout(stopped) == layout(whole)[: len(stopped.plans)]  # the cheapest, as checked


def test_actions_built_in_python_are_checked_naming_every_bad_field() -> None:
    """Runtime ``Action`` s went unchecked: an unknown feature raised ``KeyError: 'nope'``, an
    empty list numpy's 'need at least one array to concatenate', a 'set' without values an
    IndexError, and inverted or NaN bounds or two actions of one name ran a search that found
    nothing. They are checked as an actions file is, every bad field in one ActionError."""
    pytest.importorskip("pymoo")
    import math

    from counterplan.planning.actions import Action, ActionError, CostGraph
    from counterplan.solver.plans.planner import plan

    problem = _toy_problem()
    age = Action(name="age", feature="age", kind="add", low=1, high=2)
    cases = {
        "actions[0].feature": [Action(name="x", feature="nope", kind="add", low=0, high=1)],
        "actions[0].low": [Action(name="x", feature="age", kind="add", low=5, high=1)],
        "actions[0].high": [Action(name="x", feature="age", kind="add", low=0, high=math.nan)],
        "actions[0].values": [Action(name="x", feature="job", kind="set")],
        "actions[0].values[0]": [Action(name="x", feature="job", kind="set", values=("Pilot",))],
        "actions[0].kind": [Action(name="x", feature="age", kind="mul", low=0, high=1)],  # type: ignore[arg-type]
        "actions[0].consequences": [
            Action(name="x", feature="age", kind="add", low=1, high=2, consequences={"nope": len})
        ],
        "actions[0].effort": [Action(name="x", feature="age", kind="add", low=1, high=2, effort=3)],  # type: ignore[arg-type]
        "actions": [],
        "actions[1].name": [age, age],
        "actions[1]": [age, "study"],
        "graph[0].target": ([age], CostGraph((("age", "height", len),))),
    }
    for field, given in cases.items():
        actions, graph = given if isinstance(given, tuple) else (given, None)
        with pytest.raises(ActionError) as caught:
            plan(problem, actions, graph)
        assert field in [f for f, _ in caught.value.violations], (field, caught.value.violations)
    with pytest.raises(ActionError, match="an ActionSet holds its own graph"):
        plan(problem, ActionSet.from_data(TOY), CostGraph((("age", "age", len),)))


def test_a_huge_finite_cost_keeps_its_value_and_warns_of_nothing() -> None:
    """Costs past about 1e304 were rounded to 4 decimals by scaling them by 10^4: numpy printed
    'RuntimeWarning: overflow encountered in multiply' (on the command line's stderr too) and
    the objective was infinite, so a plan costing 1e305 and one costing 5e305, alike otherwise,
    were one objective vector and the front kept either; steps adding up past the largest float
    warned 'overflow encountered in reduce'. The cheaper stays, and nothing is printed."""
    pytest.importorskip("pymoo")
    import warnings

    from counterplan.solver.plans.search import PlanConfig, PlanSearch, plan_termination

    problem = _toy_problem()
    data = {
        "actions": [
            {"name": "cheap", "feature": "job", "kind": "set", "values": ["Developer"], "effort": 1.0e305},
            {"name": "dear", "feature": "job", "kind": "set", "values": ["Developer"], "effort": 5.0e305},
            {"name": "dearer", "feature": "education", "kind": "set", "values": ["BSc"], "effort": 1.7e308},
            {"name": "move", "feature": "location", "kind": "set", "values": ["US"], "effort": 1.7e308},
        ]
    }
    actions, graph = ActionSet.from_data(data).compile(problem.space)
    search = PlanSearch(problem, actions, graph, PlanConfig(population=40, termination=plan_termination(10)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, objectives = search.run()
    assert len(objectives) and np.isfinite(objectives).all()
    assert (objectives[:, 0] == 1.7e308 + 1.0e305).all()  # the job the cheap way, then a move or a degree
