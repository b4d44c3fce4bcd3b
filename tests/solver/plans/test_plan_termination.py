"""The plan search under the solver's termination and events: a generation is a step, a
generation that changed the front improved it, and each changed front is a best-solution event."""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest

from counterplan.planning import scored_rows
from counterplan.planning.actions import ActionSet
from counterplan.solver.core.config import ConfigError, TerminationConfig
from counterplan.solver.core.events import BestSolutionChanged
from counterplan.solver.plans.planner import PlanSolver, plan
from counterplan.solver.plans.search import COST_DECIMALS, MAX_GENERATIONS, PlanConfig, PlanSearch, plan_termination
from tests.toy_person import TOY, toy_space

pytest.importorskip("pymoo")


def _toy_model(X: np.ndarray) -> np.ndarray:
    """Approves a developer in the US, or a developer with a degree (the CSCF paper's toy)."""
    developer, degree, us = X[:, 0] == 1, X[:, 1] == 1, X[:, 2] == 1
    p = np.where(developer & (us | degree), 0.9, 0.1)
    return np.column_stack([1.0 - p, p])


def _toy(model=_toy_model):  # type: ignore[no-untyped-def]
    from counterplan.planning import CallableAdapter, ClassGoal, CounterfactualProblem, OutputSpec

    space = toy_space()
    return CounterfactualProblem(
        space.features, [ClassGoal(target=1)], CallableAdapter(model, [OutputSpec("ok", (0, 1))])
    )


def _search(termination: TerminationConfig, problem=None, population: int = 40, seed: int = 0) -> PlanSearch:  # type: ignore[no-untyped-def]
    problem = problem or _toy()
    actions, graph = ActionSet.from_data(TOY).compile(problem.space)
    return PlanSearch(
        problem, actions, graph, PlanConfig(population=population, termination=termination, random_seed=seed)
    )


def test_unimproved_generations_end_the_search_the_same_way_every_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The toy's front is found in generation 0 and never changes: five unimproved generations
    after it, the search ends, having searched exactly what a six-generation search searches."""
    monkeypatch.setattr(scored_rows, "MAX_REMEMBERED_BYTES", 0)  # every generation asks the model, as counted here
    search = _search(plan_termination(150, unimproved_generations=5))
    keys, objectives = search.run()
    assert search.generations_run == 6 and not search.stopped_early
    assert search.termination_reason == "unimproved step count limit"
    six = _search(plan_termination(6))
    assert [np.array_equal(a, b) for a, b in zip(six.run(), (keys, objectives), strict=True)] == [True, True]
    assert search.calculator.model_call_count == 6


def test_a_generation_count_ends_the_search_and_an_and_tree_waits_for_every_limit() -> None:
    counted = _search(TerminationConfig(step_count_limit=7))
    counted.run()
    assert counted.generations_run == 7 and not counted.stopped_early
    assert counted.termination_reason == "step count limit"
    # once the front holds a plan (generation 0) and three generations left it unchanged
    stable = _search(TerminationConfig(composition="and", best_score_feasible=True, unimproved_step_count_limit=3))
    stable.run()
    assert stable.generations_run == 4 and not stable.stopped_early
    assert stable.termination_reason == "unimproved step count limit and best score feasible"


def test_a_time_limit_ends_the_search_early_and_says_so() -> None:
    def slow(X: np.ndarray) -> np.ndarray:
        time.sleep(0.02)
        return _toy_model(X)

    started = time.perf_counter()
    timed = _search(plan_termination(10_000, time_limit_seconds=0.2), _toy(slow))
    keys, _ = timed.run()
    assert time.perf_counter() - started < 5.0
    assert timed.stopped_early and timed.termination_reason == "spent time limit"
    assert 1 <= timed.generations_run < 10_000 and keys.shape[0] > 0
    # the clock and the count end it at the same generation: the count alone would have, so the
    # front is the deterministic one, not one cut short
    both = _search(TerminationConfig(step_count_limit=1, spent_limit_seconds=1e-9))
    both.run()
    assert both.generations_run == 1 and not both.stopped_early


def test_listeners_hear_each_changed_front_with_its_cheapest_plan_as_the_best() -> None:
    from counterplan.planning.demo import (
        DEMO_ACTIONS,
        IMMUTABLE,
        TARGET,
        demo_goals,
        make_loan_data,
        rejected_applicant,
        train_loan_model,
    )
    from counterplan.planning.problem import CounterfactualProblem
    from counterplan.planning.score import BendableScore

    data = make_loan_data()
    problem = CounterfactualProblem.from_dataframe(
        data, rejected_applicant(), train_loan_model(data), demo_goals(), target=TARGET, immutable=list(IMMUTABLE)
    )
    heard: list[BestSolutionChanged] = []
    config = PlanConfig(population=100, termination=plan_termination(20), random_seed=3)
    solver = PlanSolver(problem, ActionSet.from_data(DEMO_ACTIONS), config=config, listeners=[heard.append])
    result = solver.solve()
    assert len(heard) > 1  # the demo's front changes as the search goes
    steps = [event.step_index for event in heard]
    assert steps == sorted(set(steps)) and steps[0] >= 1 and steps[-1] <= result.generations
    for before, after in itertools.pairwise(heard):
        assert before.front is not None and after.front is not None
        assert not np.array_equal(before.front.objectives, after.front.objectives)  # only changes are heard
    for event in heard:
        assert event.front is not None
        objectives = event.front.objectives
        cheapest = np.lexsort((objectives[:, 1], objectives[:, 0]))[0]
        assert np.array_equal(event.row, event.front.rows[cheapest])
        score = BendableScore.of(event.score)
        assert score.is_feasible and score.soft == (-objectives[cheapest, 0], -objectives[cheapest, 1])
    last = heard[-1].front
    assert last is not None
    assert sorted(last.objectives[:, 0].tolist()) == sorted(round(p.total_cost, COST_DECIMALS) for p in result.plans)
    # the same seed: the same events
    again: list[BestSolutionChanged] = []
    plan(problem, ActionSet.from_data(DEMO_ACTIONS), config=config, listeners=[again.append])
    assert [e.step_index for e in again] == steps
    assert all(np.array_equal(a.front.objectives, b.front.objectives) for a, b in zip(again, heard, strict=True))  # type: ignore[union-attr]


def test_a_plan_config_speaks_the_solvers_names_and_refuses_what_a_front_cannot_mean() -> None:
    config = PlanConfig()
    assert config.termination == TerminationConfig(step_count_limit=150)
    assert (config.random_seed, config.model_threads) == (0, 1)
    custom = PlanConfig(
        termination=TerminationConfig(
            composition="and", best_score_feasible=True, children=(plan_termination(50, time_limit_seconds=3.0),)
        )
    )
    assert PlanConfig.model_validate_json(custom.model_dump_json()) == custom
    with pytest.raises(ConfigError) as info:
        PlanConfig(termination=TerminationConfig())
    assert info.value.field == "termination" and "never ends" in info.value.problem
    with pytest.raises(ConfigError) as info:
        PlanConfig(
            termination=TerminationConfig(
                step_count_limit=5, children=(TerminationConfig(best_score_limit="[0/0/0]hard/[-1/0]soft"),)
            )
        )
    assert info.value.field == "termination.children[0].best_score_limit"
    with pytest.raises(ConfigError) as info:
        plan_termination(0)
    assert info.value.field == "generations"
    assert plan_termination(MAX_GENERATIONS).step_count_limit == MAX_GENERATIONS
    with pytest.raises(ConfigError) as info:  # was bounded only by the solver's 10**9 steps
        plan_termination(MAX_GENERATIONS + 1)
    assert info.value.field == "generations" and f"at most {MAX_GENERATIONS:,}" in info.value.problem
    with pytest.raises(ConfigError) as info:
        plan_termination(10, time_limit_seconds=-1.0)
    assert info.value.field == "time_limit_seconds"
    with pytest.raises(ConfigError) as info:
        PlanConfig(seed=1)  # type: ignore[call-arg]
    assert info.value.field == "seed"


def test_each_bad_limit_of_a_plan_termination_is_named_on_its_own() -> None:
    """plan_termination renamed the termination's fields in one joined error and dropped its
    parts, so a caller had to split its text (the gRPC service's _split, the command line's):
    a value holding "; " made the two bad fields one, named after the first."""
    with pytest.raises(ConfigError) as info:
        plan_termination(0, time_limit_seconds=-1.0, unimproved_generations=-2)
    assert info.value.parts == (
        ("time_limit_seconds", "Input should be greater than 0 (given -1.0)"),
        ("generations", "Input should be greater than 0 (given 0)"),
        ("unimproved_generations", "Input should be greater than 0 (given -2)"),
    )
    with pytest.raises(ConfigError) as info:
        plan_termination(0, time_limit_seconds="1; 2")  # type: ignore[arg-type]
    assert [field for field, _ in info.value.parts] == ["time_limit_seconds", "generations"]
    assert "'1; 2'" in info.value.parts[0][1]


def test_the_memory_estimate_is_the_solvers() -> None:
    from counterplan.solver.plans.budget import BYTES_PER_STATE_VALUE, estimate_bytes

    # a generation's states: its genomes (the population and at most half as many elites) x
    # (actions + 1) x features, held about four times over
    assert estimate_bytes(PlanConfig(population=500), 3, 4) == 750 * 4 * 4 * BYTES_PER_STATE_VALUE == 384_000


def test_a_generation_holds_the_population_and_at_most_half_as_many_elites() -> None:
    """The elites (the generation's first front) came on top of the population's children and
    mutants, uncapped: a front that grew made every generation larger (a population of 40 over
    16 actions held 170 genomes by its 12th generation; of 500 over 32 actions, 12,949 by its
    40th), past the memory and the work a server admits a search by."""
    from counterplan.planning import CallableAdapter, ClassGoal, CounterfactualProblem, IntegerFeature, OutputSpec
    from counterplan.solver.plans.search import Generation

    def model(X: np.ndarray) -> np.ndarray:
        p = np.where(X.sum(axis=1) > 30, 0.9, 0.1)  # many ways there: a large front
        return np.column_stack([1.0 - p, p])

    features = [IntegerFeature(name=f"x{i}", value=0, low=0, high=100) for i in range(16)]
    problem = CounterfactualProblem(features, [ClassGoal(target=1)], CallableAdapter(model, [OutputSpec("ok", (0, 1))]))
    data = {"actions": [{"name": f"a{i}", "feature": f"x{i}", "low": 1, "high": 20} for i in range(16)]}
    actions, graph = ActionSet.from_data(data).compile(problem.space)
    sizes: list[int] = []

    class Counted(PlanSearch):
        def evaluate(self, keys: np.ndarray) -> Generation:
            sizes.append(keys.shape[0])
            return super().evaluate(keys)

    config = PlanConfig(population=40, termination=plan_termination(12))
    _, objectives = Counted(problem, actions, graph, config).run()
    assert max(sizes) == 60  # 40 and at most 20 elites (generation_size)
    assert len(objectives) > 60  # the archive keeps the whole front


def test_a_termination_given_whole_keeps_the_generations_bound() -> None:
    """``plan_termination`` refuses more than 10,000 generations (a count that is a typo for a
    time limit would run for days), but ``PlanConfig(termination=TerminationConfig(...))`` took
    a million, anywhere in its tree."""
    for termination, path in (
        (TerminationConfig(step_count_limit=10**6), "termination.step_count_limit"),
        (
            TerminationConfig(
                composition="and", children=(plan_termination(10), TerminationConfig(step_count_limit=10**6))
            ),
            "termination.children[1].step_count_limit",
        ),
    ):
        with pytest.raises(ConfigError) as info:
            PlanConfig(termination=termination)
        assert info.value.field == path and f"at most {MAX_GENERATIONS:,} generations" in info.value.problem
    assert PlanConfig(termination=TerminationConfig(step_count_limit=MAX_GENERATIONS)).termination.step_count_limit
