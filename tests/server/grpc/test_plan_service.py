"""Action plans over gRPC: ``Plan`` and ``PlanStream`` with the actions sent as data, the same
answer as in Python, the same refusals naming the field, and the server's limits (deadline,
cancel, shutdown, sizes) ending a search with what it found."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import numpy as np
import pytest

from counterplan.planning import CallableAdapter, OutputSpec
from counterplan.server._generated.counterplan.v1 import counterplan_pb2 as pb
from counterplan.server.grpc.app import RunningServer, start_server
from counterplan.server.grpc.client import CounterplanClient, class_goal, field_violations
from counterplan.server.grpc.convert import plain_value
from counterplan.server.grpc.settings import ServerSettings
from counterplan.server.registry.registry import FeatureSpec, ModelRegistry, RegisteredModel
from tests.toy_person import TOY, bad_everywhere, toy_space

pytestmark = pytest.mark.integration  # a real server on a loopback port (or a local Ray cluster)

pytest.importorskip("pymoo")

FEATURES = [
    FeatureSpec(name="job", kind="categorical", categories=("Seller", "Developer")),
    FeatureSpec(name="education", kind="categorical", categories=("HS", "BSc")),
    FeatureSpec(name="location", kind="categorical", categories=("Germany", "US")),
    FeatureSpec(name="age", kind="integer", low=18, high=90),
]
PERSON = {"job": "Seller", "education": "HS", "location": "Germany", "age": 30}


def _toy_model(X: Any) -> Any:
    """Approves a developer in the US, or a developer with a degree (the CSCF paper's toy)."""
    developer, degree, us = X[:, 0] == 1, X[:, 1] == 1, X[:, 2] == 1
    p = np.where(developer & (us | degree), 0.9, 0.1)
    return np.column_stack([1.0 - p, p])


def _slow_model(X: Any) -> Any:
    time.sleep(0.05)
    return _toy_model(X)


def _fails_off_the_original(X: Any) -> Any:
    """The toy, but it raises (with a secret in its message) for any state but the original."""
    if (X[:, 0] != 0).any() or (X[:, 1] != 0).any() or (X[:, 2] != 0).any():
        raise RuntimeError("cannot open /secret/credentials")
    return _toy_model(X)


def _registry() -> ModelRegistry:
    outputs = [OutputSpec("ok", (0, 1))]
    return ModelRegistry(
        [
            RegisteredModel("toy", "1", "the CSCF toy person", CallableAdapter(_toy_model, outputs), FEATURES),
            RegisteredModel("slow", "1", "the toy, 50 ms a call", CallableAdapter(_slow_model, outputs), FEATURES),
            RegisteredModel(
                "brittle", "1", "fails off the original", CallableAdapter(_fails_off_the_original, outputs), FEATURES
            ),
        ]
    )


@pytest.fixture(scope="module")
def running() -> Iterator[RunningServer]:
    server = start_server(
        ServerSettings(port=0, max_plan_population=1000, max_plan_generations=LONG_SEARCH), _registry()
    )
    try:
        yield server
    finally:
        server.stop(grace=0)


LONG_SEARCH = 10_000
"""Generations of a search that must still run when a deadline or a shutdown comes: about 10 s."""


def _request(model: str = "toy", **options: Any) -> pb.PlanRequest:
    options = {"seed": 0, "population": 40, "generations": 15, **options}
    return CounterplanClient.plan_request(model, PERSON, TOY, [class_goal(1, 0.7)], **options)


def _steps(plan: pb.ActionPlan) -> list[tuple[str, Any, Any]]:
    return [(s.action, plain_value(s.before), plain_value(s.after)) for s in plan.steps]


def test_plan_answers_over_grpc_as_in_python_step_by_step(running: RunningServer) -> None:
    from counterplan.planning.actions import ActionSet
    from counterplan.solver.plans.planner import plan
    from counterplan.solver.plans.search import PlanConfig, plan_termination

    with CounterplanClient(running.target) as client:
        response = client.plan(_request())
    assert response.front_size == len(response.plans) > 0 and response.HasField("cheapest")
    cheapest = response.plans[response.cheapest]
    assert cheapest.valid and cheapest.total_cost == pytest.approx(10.0)
    assert _steps(cheapest) == [("degree", "HS", "BSc"), ("job", "Seller", "Developer")]
    first, second = cheapest.steps
    assert plain_value(first.state["age"]) == 34 and not first.goal_met and first.prediction == pytest.approx(0.1)
    (aged,) = first.consequences
    assert (aged.feature, plain_value(aged.original), plain_value(aged.proposed)) == ("age", 30, 34)
    assert second.goal_met and second.prediction == pytest.approx(0.9)
    assert list(response.feature_names) == [f.name for f in FEATURES]
    assert response.generations == 15 and not response.stopped_early
    # the same problem, actions and seed in Python give the same front
    from counterplan.server.grpc.convert import check_request

    registered = _registry().get("toy")
    assert registered is not None
    checked = check_request(CounterplanClient.request("toy", PERSON, [class_goal(1, 0.7)]), registered, 100)
    problem = registered.problem(checked.instance, checked.spec)
    local = plan(
        problem,
        ActionSet.from_data(TOY),
        config=PlanConfig(population=40, termination=plan_termination(15), random_seed=0),
    )
    assert [p.total_cost for p in local.plans] == [p.total_cost for p in response.plans]
    assert [[s.action for s in p.steps] for p in local.plans] == [[s.action for s in p.steps] for p in response.plans]


def test_plan_stream_sends_the_front_as_it_improves_then_the_same_result(running: RunningServer) -> None:
    with CounterplanClient(running.target) as client:
        messages = list(client.plan_stream(_request()))
        unary = client.plan(_request())
    *fronts, final = messages
    assert fronts and all(m.stage == pb.STAGE_INTERMEDIATE for m in fronts)
    assert [m.sequence_id for m in messages] == list(range(1, len(messages) + 1))
    assert final.stage == pb.STAGE_FINAL
    generations = [m.generation for m in fronts]
    assert generations == sorted(generations) and generations[-1] <= 14
    for m in fronts:
        costs = [p.cost for p in m.front]
        assert costs == sorted(costs) and m.front_size == len(m.front)
    assert fronts[-1].front[0].cost == pytest.approx(10.0)
    result = final.result
    assert [p.cost for p in final.front] == [p.total_cost for p in result.plans]
    last = fronts[-1].front  # the archive is the answer
    assert [(p.cost, p.feature_changes) for p in final.front] == [(p.cost, p.feature_changes) for p in last]
    assert [p.total_cost for p in result.plans] == [p.total_cost for p in unary.plans]
    assert [_steps(p) for p in result.plans] == [_steps(p) for p in unary.plans]


def _message(spec: dict[str, Any]) -> pb.Action:
    """An action message as a client might send it: nothing checked on the way."""
    message = pb.Action(name=spec["name"], feature=spec["feature"], effort=str(spec.get("effort", "")))
    message.kind = pb.ACTION_KIND_SET if spec.get("kind", "add") == "set" else pb.ACTION_KIND_ADD
    for bound in ("low", "high"):
        if spec.get(bound) is not None:
            setattr(message, bound, spec[bound])
    for value in spec.get("values") or ():
        if isinstance(value, str):
            message.values.add().category_value = value
        else:
            message.values.add().number_value = value
    message.pre = spec.get("pre", "")
    message.post = spec.get("post", "")
    message.consequences.update(spec.get("consequences") or {})
    return message


@pytest.mark.parametrize(
    ("change", "field", "fragment"),
    [
        ({"feature": "salary"}, "actions[0].feature", "no feature 'salary'"),
        ({"feature": "location"}, "actions[0].feature", "'location' is immutable"),
        ({"pre": "salary > 2"}, "actions[0].pre", "unknown name 'salary'"),
        ({"effort": "__import__('os').system('true')"}, "actions[0].effort", "only these functions"),
        ({"kind": "add", "feature": "age", "low": 5, "high": 1, "values": None}, "actions[0].low", "above high"),
        ({"values": ["Astronaut"]}, "actions[0].values[0]", "not a value of 'job'"),
        ({"name": ""}, "actions[0].name", "at least 1 character"),
    ],
)
def test_bad_actions_are_invalid_argument_naming_the_field(
    running: RunningServer, change: dict[str, Any], field: str, fragment: str
) -> None:
    request = _request()
    del request.actions[:]
    request.actions.append(_message({**TOY["actions"][0], **change}))  # type: ignore[dict-item]
    request.overrides.add(name="location", constrained=True)
    with CounterplanClient(running.target) as client, pytest.raises(grpc.RpcError) as info:
        client.plan(request)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    violations = field_violations(info.value)
    assert violations and violations[0][0] == field and fragment in violations[0][1], violations


def test_every_bad_field_of_a_plan_request_is_named_at_once(running: RunningServer) -> None:
    request = _request(population=5000)
    request.instance["age"].integer_value = 200
    request.max_plans = 0
    request.search.bias = 0.2
    request.graph.add(source="location", target="nowhere", tau="1")
    with CounterplanClient(running.target) as client, pytest.raises(grpc.RpcError) as info:
        client.plan(request)
    fields = [f for f, _ in field_violations(info.value)]
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert {"instance[age]", "search.bias", "max_plans"} <= set(fields), fields
    request = _request(population=5000)
    with CounterplanClient(running.target) as client, pytest.raises(grpc.RpcError) as info:
        client.plan(request)
    assert field_violations(info.value) == [("search.population", "at most 1,000 on this server, given 5,000")]
    request = _request()
    request.graph.add(source="location", target="nowhere", tau="1")
    with CounterplanClient(running.target) as client, pytest.raises(grpc.RpcError) as info:
        client.plan(request)
    assert field_violations(info.value)[0][0] == "graph[3].target"


def test_errors_never_echo_unbounded_input(running: RunningServer) -> None:
    request = _request()
    request.actions[0].feature = "x" * 100_000
    request.actions[1].pre = "age > " + "1" * 100_000
    with CounterplanClient(running.target) as client, pytest.raises(grpc.RpcError) as info:
        client.plan(request)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    details = info.value.details() or ""
    assert len(details) < 2_000 and "x" * 200 not in details
    assert {f for f, _ in field_violations(info.value)} >= {"actions[0].feature", "actions[1].pre"}


def test_the_deadline_ends_the_search_with_the_front_so_far(running: RunningServer) -> None:
    """10,000 generations asked, a 2 s deadline: the answer comes in time, with the front so far.
    (The toy's few states are soon all in the search's memory of scored rows, so the slow model is
    called only in the first generations: 1,000 generations took about 1 s on a quiet machine, and
    the deadline no longer cut them. 10,000 take about 10 s.)"""
    started = time.perf_counter()
    with CounterplanClient(running.target) as client:
        response = client.plan(_request("slow", generations=LONG_SEARCH), timeout=2.0)
    assert time.perf_counter() - started < 2.0
    assert response.stopped_early and 1 <= response.generations < LONG_SEARCH
    assert response.HasField("cheapest") and response.plans[response.cheapest].valid


def test_a_cancelled_stream_stops_its_search(running: RunningServer) -> None:
    service = running.service
    with CounterplanClient(running.target) as client:
        call = client.stub.PlanStream(_request("slow", generations=1000), timeout=60)
        first = next(call)
        assert first.stage == pb.STAGE_INTERMEDIATE
        call.cancel()
    assert service.wait_idle(10.0)  # the slot came back: the search stopped within a generation


def test_shutdown_answers_a_running_plan_with_its_front_so_far() -> None:
    server = start_server(ServerSettings(port=0, max_plan_generations=LONG_SEARCH), _registry())
    answers: list[pb.PlanResponse] = []
    with CounterplanClient(server.target) as client:
        request = _request("slow", generations=LONG_SEARCH)
        thread = threading.Thread(target=lambda: answers.append(client.plan(request)))
        thread.start()
        deadline = time.monotonic() + 10
        while not server.service.manager.list_jobs() and time.monotonic() < deadline:  # the search started
            time.sleep(0.01)
        time.sleep(0.3)
        server.stop(grace=10)
        thread.join(10)
    assert answers and answers[0].stopped_early and answers[0].generations < LONG_SEARCH


def test_the_response_holds_at_most_max_plans_and_fits_the_message_limit() -> None:
    from counterplan.server.grpc.plan_convert import plan_message
    from counterplan.solver.plans.planner import ActionPlan, PlanResult, PlanStep

    def one(cost: float, steps: int) -> ActionPlan:
        state = {f"f{i}": float(i) for i in range(200)}
        step = PlanStep(
            action="a", feature="f0", before=0.0, after=1.0, cost=cost, state=state, prediction=0.9, goal_met=True
        )
        return ActionPlan(steps=[step] * steps, total_cost=cost, distance=0.1, valid=True)

    plans = [one(float(i), 3) for i in range(1, 50)] + [one(100.0, 1)]
    result = PlanResult(
        original={},
        original_prediction=0.1,
        plans=plans,
        cheapest=plans[0],
        short=plans[-1],
        generations=1,
        model_calls=1,
        seconds=0.0,
    )
    few = plan_message(result, "r", "m", [], max_plans=5)
    assert len(few.plans) == 6 and few.front_size == 50 and few.cheapest == 0 and few.short_plan == 5
    small = plan_message(result, "r", "m", [], max_plans=50, max_bytes=40_000)
    assert small.ByteSize() <= 40_000 and 1 <= len(small.plans) < 50 and small.HasField("short_plan")


def test_a_failing_model_is_reported_without_its_message(running: RunningServer) -> None:
    with CounterplanClient(running.target) as client:
        response = client.plan(_request("brittle", request_id="brittle-1"))
        assert response.front_size == 0 and not response.HasField("cheapest")
        assert "brittle-1" in response.failure and "secret" not in response.failure
        moved = _request("brittle")
        moved.instance["job"].category_value = "Developer"  # now the original itself fails
        with pytest.raises(grpc.RpcError) as info:
            client.plan(moved)
    assert info.value.code() == grpc.StatusCode.INTERNAL and "secret" not in (info.value.details() or "")


def test_an_instance_that_already_meets_the_goal_gets_no_plan(running: RunningServer) -> None:
    request = _request()
    request.instance["job"].category_value = "Developer"
    request.instance["location"].category_value = "US"
    with CounterplanClient(running.target) as client:
        response = client.plan(request)
    assert response.already_met and response.front_size == 0 and response.original_prediction == pytest.approx(0.9)


def test_plan_stream_sends_the_fronts_a_listener_hears() -> None:
    """The stream's front messages are the search's best-solution events: unthrottled, a
    listener on the same search in Python hears the same fronts at the same generations."""
    from counterplan.planning.actions import ActionSet
    from counterplan.planning.demo import DEMO_ACTIONS, rejected_applicant
    from counterplan.server.grpc.convert import check_request
    from counterplan.server.grpc.plan_convert import front_message
    from counterplan.server.registry.registry import DEMO_ID
    from counterplan.solver.core.events import BestSolutionChanged
    from counterplan.solver.plans.planner import plan
    from counterplan.solver.plans.search import PlanConfig, plan_termination

    server = start_server(ServerSettings(port=0, stream_max_per_second=1e6))
    try:
        request = CounterplanClient.plan_request(
            DEMO_ID, rejected_applicant(), DEMO_ACTIONS, seed=3, population=100, generations=20
        )
        with CounterplanClient(server.target) as client:
            *streamed, final = list(client.plan_stream(request))
        registered = server.service.registry.get(DEMO_ID)
        assert registered is not None
        checked = check_request(CounterplanClient.request(DEMO_ID, rejected_applicant(), []), registered, 100)
        problem = registered.problem(checked.instance, checked.spec)
    finally:
        server.stop(grace=0)
    heard: list[BestSolutionChanged] = []
    config = PlanConfig(population=100, termination=plan_termination(20), random_seed=3)
    local = plan(problem, ActionSet.from_data(DEMO_ACTIONS), config=config, listeners=[heard.append])
    assert len(heard) > 1 and final.stage == pb.STAGE_FINAL
    expected = [front_message(event, 0.0, i) for i, event in enumerate(heard, 1)]
    assert [(m.generation, m.front_size, list(m.front)) for m in streamed] == [
        (m.generation, m.front_size, list(m.front)) for m in expected
    ]
    assert [p.total_cost for p in final.result.plans] == [p.total_cost for p in local.plans]


def test_a_plan_runs_as_a_job_of_the_services_solver_manager(running: RunningServer) -> None:
    """Listed with the solves while it runs, terminated early when the call is cancelled, then
    forgotten, its slot given back."""
    service = running.service
    with CounterplanClient(running.target) as client:
        call = client.stub.PlanStream(_request("slow", generations=1000, request_id="listed-1"), timeout=60)
        assert next(call).stage == pb.STAGE_INTERMEDIATE
        (job,) = service.manager.list_jobs()
        assert job.kind == "plan" and job.job_id.startswith("listed-1-") and job.best_score is not None
        call.cancel()
    assert service.wait_idle(10.0)  # the slot comes back after the job is forgotten
    assert service.manager.list_jobs() == []


def _refused(running: RunningServer, request: pb.PlanRequest) -> grpc.RpcError:
    with CounterplanClient(running.target) as client, pytest.raises(grpc.RpcError) as info:
        client.plan(request)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT, info.value.details()
    return info.value


def test_a_plan_without_a_finite_cost_is_infeasible_and_the_response_says_why(running: RunningServer) -> None:
    """The issue's case: an effort of 1e999 discounted by a tau of 0 (inf * 0). Every plan that
    reaches the goal needs that action, so none is feasible; the rest of the front stays finite."""
    unpriced = {
        "actions": [{**TOY["actions"][0], "effort": "1e999"}, *TOY["actions"][1:]],
        "graph": [*TOY["graph"][:1], {"source": "location", "target": "job", "tau": "0"}],
    }
    request = CounterplanClient.plan_request("toy", PERSON, unpriced, [class_goal(1, 0.7)], seed=0, population=40)
    request.search.generations = 15
    with CounterplanClient(running.target) as client:
        response = client.plan(request)
        *fronts, final = list(client.plan_stream(request))
    # before: NaN costs on the front, a "cheapest" plan costing NaN, and no word why
    assert all(np.isfinite(p.total_cost) and all(np.isfinite(s.cost) for s in p.steps) for p in response.plans)
    assert not any(s.action == "job" for p in response.plans for s in p.steps)
    assert not response.HasField("cheapest")  # only the unpriced action makes a developer
    assert "candidate plans had no finite cost (the first: action 'job'" in response.cost_failure
    assert "infeasible" in response.cost_failure
    assert not response.failure  # the model did not fail: a client must not say it did
    assert all(np.isfinite(point.cost) for m in [*fronts, final] for point in m.front)
    assert final.result.cost_failure == response.cost_failure and not final.result.HasField("cheapest")
    # with a price the same request plans through that action: its cost alone kept it off
    priced = {**unpriced, "actions": [TOY["actions"][0], *TOY["actions"][1:]]}
    request = CounterplanClient.plan_request("toy", PERSON, priced, [class_goal(1, 0.7)], seed=0, population=40)
    request.search.generations = 15
    with CounterplanClient(running.target) as client:
        fine = client.plan(request)
    assert fine.HasField("cheapest") and np.isfinite(fine.plans[fine.cheapest].total_cost)
    assert not fine.failure and not fine.cost_failure


def test_action_bounds_and_set_values_are_held_to_2_to_the_53(running: RunningServer) -> None:
    request = _request()
    request.actions.append(_message({"name": "wait", "feature": "age", "low": -1e308, "high": 1e308}))
    request.actions.append(_message({"name": "claim", "feature": "age", "kind": "set", "values": [40, 1e300]}))
    violations = field_violations(_refused(running, request))  # before: OK, a plan of infinite cost the cheapest
    assert [f for f, _ in violations] == ["actions[3].low", "actions[3].high", "actions[4].values[1]"]
    assert all("between -2^53 and 2^53" in problem for _, problem in violations), violations
    fine = _request()
    fine.actions.append(_message({"name": "wait", "feature": "age", "low": -(2.0**53), "high": 2.0**53}))
    with CounterplanClient(running.target) as client:
        assert client.plan(fine).HasField("cheapest")


def test_every_bad_field_of_every_action_and_edge_comes_in_one_refusal(running: RunningServer) -> None:
    """32 actions with 6 bad fields each and 32 edges with 3: 288 violations, of which the error
    details name the first 20 (the documented cap) and count the rest; the message says how many."""
    from counterplan.planning.actions import ActionError, ActionSet
    from counterplan.server.grpc.convert import MAX_VIOLATIONS

    data = bad_everywhere(32, 32)
    request = CounterplanClient.plan_request("toy", PERSON, data, [class_goal(1, 0.7)])
    error = _refused(running, request)
    violations = field_violations(error)
    assert len(violations) == MAX_VIOLATIONS + 1 == 21, violations  # before: one, actions[0].feature
    assert violations[-1] == ("request", "and 268 more bad fields (288 in all)")
    assert [f for f, _ in violations[:6]] == [
        "actions[0].feature",
        "actions[0].consequences.age",
        "actions[0].consequences",
        "actions[0].effort",
        "actions[0].pre",
        "actions[0].post",
    ]
    with pytest.raises(ActionError) as local:  # the same person in Python: the same violations
        ActionSet.from_data(data).compile(toy_space())
    assert len(local.value.violations) == 288 and violations[:20] == local.value.violations[:20]
    assert not any("Tuple" in problem for _, problem in local.value.violations)  # no min-length noise
    details = error.details() or ""
    assert details.startswith("288 bad fields, the first 20 named: actions[0].feature: no feature 'nowhere0'")
    assert len(details) <= 2_000 and "Tuple" not in details


def test_a_nan_value_and_a_long_formula_each_give_one_precise_violation(running: RunningServer) -> None:
    request = _request()
    request.actions[0].values.add().number_value = float("nan")
    request.actions[1].effort = "1 + " * 200 + "1"
    request.actions[2].consequences["age"] = "1 + " * 200 + "1"
    violations = field_violations(_refused(running, request))
    # before: three union branches for the NaN, "at most 500 items" and a "Tuple should have at least 1 item"
    assert violations == [
        ("actions[0].values[1]", "a value must be a text or a finite number, given nan"),
        ("actions[1].effort", "a formula has at most 500 characters, given 801"),
        ("actions[2].consequences.age", "a formula has at most 500 characters, given 801"),
    ]


@pytest.mark.parametrize(
    ("where", "text"),
    [
        ("actions[0].pre", "education == 3"),
        ("actions[1].effort", "education + 1"),
        ("actions[2].post", "1 != education"),
        ("actions[2].consequences.age", "age + education"),
        ("graph[0].tau", "0.5 if education else 1"),
    ],
)
def test_a_category_is_compared_only_with_its_names_over_grpc(running: RunningServer, where: str, text: str) -> None:
    request = _request()
    if where.startswith("graph"):
        request.graph[0].tau = text
    elif where.endswith(".age"):
        request.actions[2].consequences["age"] = text
    else:
        setattr(request.actions[int(where[8])], where.rsplit(".", 1)[1], text)
    violations = field_violations(_refused(running, request))  # before: accepted, the code compared or added
    assert violations == [(where, "education is a category: compare it with one of its categories ['HS', 'BSc']")]
    request = _request()
    request.actions[0].pre = 'education == "BSc" or age > 40'
    with CounterplanClient(running.target) as client:
        assert client.plan(request).front_size > 0  # a category's names are fine


@pytest.mark.parametrize(
    ("where", "text", "named", "written"),
    [
        ("actions[1].consequences.age", "after.age + 4", "after.age", "age or before.age"),
        ("graph[0].tau", '1 if after.location == "US" else 0.5', "after.location", "location"),
        ("graph[0].tau", '1 if before.location == "US" else 0.5', "before.location", "location"),
    ],
)
def test_a_formula_naming_a_state_it_is_not_given_is_refused(
    running: RunningServer, where: str, text: str, named: str, written: str
) -> None:
    """Found by fuzzing the service: a consequence computes the state after its action and a tau
    reads the state before by the features' names, yet both accepted ``after.x`` (and a tau
    ``before.x``), and the first plan that took the action failed on the missing name: INTERNAL.
    Now refused up front, naming the field and what to write."""
    request = _request()
    if where.startswith("graph"):
        request.graph[0].tau = text
    else:
        request.actions[1].consequences["age"] = text
    violations = field_violations(_refused(running, request))
    reads = "this formula reads the state before the action"
    assert violations == [(where, f"{named} is not available here: {reads} (write {written})")]
    request = _request()
    request.actions[1].consequences["age"] = "before.age + 4"  # the state before, by either name
    request.actions[1].effort = "5 if after.age > before.age else 6"  # an effort reads both states
    request.actions[2].post = "after.location != before.location"
    with CounterplanClient(running.target) as client:
        assert client.plan(request).front_size > 0
