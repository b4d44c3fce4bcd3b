"""ExplainBatch and dynamic batching, on a real gRPC server on a free loopback port."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import numpy as np
import pytest
from google.rpc import status_pb2
from pydantic import ValidationError

from counterplan.planning import CallableAdapter, OutputSpec
from counterplan.planning.demo import rejected_applicant
from counterplan.server._generated.counterplan.v1 import counterplan_pb2 as pb
from counterplan.server.grpc.app import RunningServer, start_server
from counterplan.server.grpc.client import CounterplanClient, class_goal, field_violations, row_error
from counterplan.server.grpc.settings import ServerSettings
from counterplan.server.registry.registry import DEMO_ID, FeatureSpec, ModelRegistry, RegisteredModel, demo_model
from counterplan.solver.core.config import SolverConfig, TerminationConfig

pytestmark = pytest.mark.integration  # a real server on a loopback port (or a local Ray cluster)

ENDLESS = SolverConfig(termination=TerminationConfig(spent_limit_seconds=120.0), phases=({"type": "local_search"},))
SHORT = SolverConfig(termination=TerminationConfig(step_count_limit=12), phases=({"type": "local_search"},))
MAX_INSTANCES = 8
IN_FLIGHT = 3


class SlowModel:
    """p(yes) rises with x; every call sleeps; counts its calls (thread-safe)."""

    def __init__(self, delay: float = 0.02) -> None:
        self.delay = delay
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self, X: Any) -> Any:
        with self._lock:
            self.calls += 1
        time.sleep(self.delay)
        p = 1.0 / (1.0 + np.exp(-(X[:, 0] - 5.0)))
        return np.column_stack([1.0 - p, p])


def _toy(model_id: str, model: SlowModel, config: SolverConfig) -> RegisteredModel:
    features = [
        FeatureSpec(name="x", kind="float", low=0.0, high=10.0),
        FeatureSpec(name="y", kind="float", low=0.0, high=10.0),
    ]
    adapter = CallableAdapter(model, [OutputSpec("label", ("no", "yes"))])
    return RegisteredModel(model_id, "1", "toy", adapter, features, default_config=config)


@pytest.fixture(scope="module")
def demo() -> RegisteredModel:
    return demo_model()


@pytest.fixture(scope="module")
def models() -> dict[str, SlowModel]:
    return {"endless": SlowModel(), "short": SlowModel(delay=0.01)}


@pytest.fixture(scope="module")
def server(demo: RegisteredModel, models: dict[str, SlowModel]) -> Iterator[RunningServer]:
    registry = ModelRegistry([demo, _toy("endless", models["endless"], ENDLESS), _toy("short", models["short"], SHORT)])
    settings = ServerSettings(
        port=0,
        workers=16,
        max_concurrent_solves=8,
        batch_max_instances=MAX_INSTANCES,
        batch_max_in_flight=IN_FLIGHT,
        max_batch_streams=2,
        grace_seconds=0.5,
    )
    running = start_server(settings, registry)
    yield running
    running.stop(0)


@pytest.fixture
def client(server: RunningServer) -> Iterator[CounterplanClient]:
    with CounterplanClient(server.target) as c:
        yield c
    assert server.service.wait_idle(10), "every solve gave its slot back"


def _demo(i: int, **changes: Any) -> pb.ExplainRequest:
    """A different rejected applicant per ``i``, with its own seed."""
    instance = {**rejected_applicant(), "income": 30_000 + 1_500 * i, "debt": 18_000 - 500 * i, **changes}
    return CounterplanClient.request(DEMO_ID, instance, [class_goal(1, 0.7)], seed=i)


def _toy_request(model_id: str, x: float = 1.0) -> pb.ExplainRequest:
    return CounterplanClient.request(model_id, {"x": x, "y": 1.0}, [class_goal("yes")], seed=0)


def _answer(response: pb.ExplainResponse) -> tuple[Any, ...]:
    """What must not depend on batching: the answer and the work that found it."""
    s = response.statistics
    return (
        response.score.text,
        sorted((k, v.SerializeToString()) for k, v in response.proposed.items()),
        [c.SerializeToString() for c in response.changes],
        response.valid,
        (s.steps, s.score_calculation_count, s.model_call_count),
    )


def test_a_batch_answers_every_row_once_as_unary_explain_does(client: CounterplanClient) -> None:
    rows = [(f"row-{i}", _demo(i)) for i in range(5)]
    results = list(client.explain_batch(rows, timeout=60))
    assert sorted(r.row_id for r in results) == sorted(row_id for row_id, _ in rows)
    by_id = {r.row_id: r for r in results}
    for row_id, request in rows:
        batched = by_id[row_id]
        assert batched.WhichOneof("outcome") == "response"
        assert batched.response.valid and batched.response.model_id == DEMO_ID
        assert _answer(batched.response) == _answer(client.explain(request, timeout=60))  # same seed, same answer


def test_a_bad_instance_gets_its_own_error_and_the_others_succeed(client: CounterplanClient) -> None:
    wrong_type = _demo(1)
    wrong_type.instance["income"].CopyFrom(pb.FeatureValue(category_value="lots"))
    unknown_model = _demo(2)
    unknown_model.model_id = "nope"
    rows = [("good-a", _demo(0)), ("wrong-type", wrong_type), ("unknown-model", unknown_model), ("good-b", _demo(3))]
    results = {r.row_id: r for r in client.explain_batch(rows, timeout=60)}
    assert set(results) == {row_id for row_id, _ in rows}
    assert results["good-a"].response.valid and results["good-b"].response.valid
    error = row_error(results["wrong-type"])
    assert error is not None and error[0] == grpc.StatusCode.INVALID_ARGUMENT
    assert [field for field, _ in error[2]] == ["instance[income]"]  # named as in Explain's request
    error = row_error(results["unknown-model"])
    assert error is not None and error[0] == grpc.StatusCode.NOT_FOUND
    assert row_error(results["good-a"]) is None
    # the error has google.rpc.Status's fields: its bytes parse as one
    status = status_pb2.Status.FromString(results["wrong-type"].error.SerializeToString())
    assert status.code == grpc.StatusCode.INVALID_ARGUMENT.value[0] and status.details


def test_too_many_instances_end_the_call(client: CounterplanClient) -> None:
    rows = [(f"r{i}", _toy_request("short", x=1.0 + i / 10)) for i in range(MAX_INSTANCES + 1)]
    seen: list[str] = []
    with pytest.raises(grpc.RpcError) as info:
        seen.extend(r.row_id for r in client.explain_batch(rows, timeout=60))
    error: Any = info.value
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    ((field, description),) = field_violations(error)
    assert field == "row_id" and f"at most {MAX_INSTANCES} instances" in description
    assert sorted(seen) == sorted(f"r{i}" for i in range(MAX_INSTANCES))  # every row read is answered first


@pytest.mark.parametrize(("row_ids", "problem"), [(["a", "b", "a"], "already sent"), (["a", ""], "required")])
def test_a_row_id_that_cannot_tag_its_result_ends_the_call(
    client: CounterplanClient, row_ids: list[str], problem: str
) -> None:
    rows = [(row_id, _toy_request("short")) for row_id in row_ids]
    with pytest.raises(grpc.RpcError) as info:
        list(client.explain_batch(rows, timeout=60))
    error: Any = info.value
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert any(field == "row_id" and problem in text for field, text in field_violations(error))


@pytest.mark.parametrize("bad", ["a", "", "x" * 300])
def test_the_rows_read_before_a_bad_row_id_get_their_results_before_the_call_ends(
    client: CounterplanClient, bad: str
) -> None:
    """The rows in flight when the bad id is read are valid requests: the client learns which
    rows were explained (their solves take a few model calls; the bad id is read at once)."""
    rows = [("a", _toy_request("short")), ("b", _toy_request("short", x=2.0)), (bad, _toy_request("short"))]
    seen: dict[str, pb.ExplainBatchResponse] = {}
    with pytest.raises(grpc.RpcError) as info:
        for result in client.explain_batch(rows, timeout=60):
            seen[result.row_id] = result
    error: Any = info.value
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert sorted(seen) == ["a", "b"]
    assert all(r.WhichOneof("outcome") == "response" and r.response.valid for r in seen.values())


def test_a_stream_runs_at_most_its_in_flight_limit_at_once(client: CounterplanClient, server: RunningServer) -> None:
    most = [0]
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            solving = sum(job.status.value == "solving" for job in server.service.manager.list_jobs())
            most[0] = max(most[0], solving)
            time.sleep(0.005)

    watcher = threading.Thread(target=watch)
    watcher.start()
    rows = [(f"r{i}", _toy_request("short", x=1.0 + i / 10)) for i in range(7)]
    try:
        results = list(client.explain_batch(rows, timeout=60))
    finally:
        done.set()
        watcher.join()
    assert sorted(r.row_id for r in results) == sorted(row_id for row_id, _ in rows)
    assert all(r.HasField("response") for r in results)
    assert 1 <= most[0] <= IN_FLIGHT


def test_cancelling_the_stream_stops_its_solves(
    client: CounterplanClient, server: RunningServer, models: dict[str, SlowModel]
) -> None:
    release = threading.Event()

    def rows() -> Iterator[tuple[str, pb.ExplainRequest]]:
        yield "endless-1", _toy_request("endless")
        yield "endless-2", _toy_request("endless", x=2.0)
        yield "quick", _demo(0)
        release.wait(30)  # a client with more to send, later

    results = client.explain_batch(rows(), timeout=60)
    try:
        first = next(results)  # the quick one; the endless ones run on (their limit is 120 s)
        assert first.row_id == "quick" and first.response.valid
        assert sum(job.status.value == "solving" for job in server.service.manager.list_jobs()) == 2
        results.close()  # stop iterating: the client helper cancels the call
        assert server.service.wait_idle(5), "the cancelled solves gave their slots back"
        calls = models["endless"].calls
        time.sleep(0.3)
        assert models["endless"].calls == calls  # no orphaned work
    finally:
        release.set()


def test_idle_streams_cannot_take_every_worker(client: CounterplanClient, server: RunningServer) -> None:
    release = threading.Event()

    def idle() -> Iterator[pb.ExplainBatchRequest]:
        release.wait(30)  # a client that opens a stream and sends nothing
        return
        yield

    held = [client.stub.ExplainBatch(idle(), timeout=30) for _ in range(2)]
    try:
        deadline = time.monotonic() + 10
        while server.service.open_batch_streams < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        with pytest.raises(grpc.RpcError) as info:
            list(client.explain_batch([("a", _demo(0))], timeout=10))
        error: Any = info.value
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "2 ExplainBatch streams" in error.details()
        assert client.explain(_demo(0), timeout=60).valid  # unary calls still get workers
    finally:
        release.set()
    for call in held:
        assert list(call) == []  # the idle streams end normally once their clients are done
    (result,) = client.explain_batch([("a", _demo(0))], timeout=60)  # the stream slots came back
    assert result.response.valid


def test_batches_leave_solve_slots_for_interactive_callers(demo: RegisteredModel) -> None:
    """The default settings (4 slots, 8 instances in flight per stream, 2 streams): two streams
    of endless rows hold at most half the slots together, and an Explain is admitted beside them
    (it was refused, "4 solves are running", when the batch rows took every slot)."""
    settings = ServerSettings(port=0, grace_seconds=0.5)
    assert (settings.max_concurrent_solves, settings.batch_max_in_flight, settings.batch_solves) == (4, 8, 2)
    running = start_server(settings, ModelRegistry([demo, _toy("endless", SlowModel(), ENDLESS)]))
    release = threading.Event()

    def rows(stream: int) -> Iterator[pb.ExplainBatchRequest]:
        for i in range(4):
            request = _toy_request("endless", x=1.0 + i / 10)
            request.request_id = f"batch-{stream}-{i}"
            yield pb.ExplainBatchRequest(row_id=f"r{i}", request=request)
        release.wait(60)  # a client with more to send, later

    def batch_solving() -> int:
        jobs = running.service.manager.list_jobs()
        return sum(job.status.value == "solving" and job.job_id.startswith("batch-") for job in jobs)

    most = [0]
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            most[0] = max(most[0], batch_solving())
            time.sleep(0.005)

    client = CounterplanClient(running.target)
    watcher = threading.Thread(target=watch)
    watcher.start()
    calls = [client.stub.ExplainBatch(rows(stream), timeout=60) for stream in range(2)]
    try:
        deadline = time.monotonic() + 20
        while most[0] < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(1.0)  # room for more rows to start, were they allowed to
        assert client.explain(_demo(0), timeout=60).valid  # admitted, not RESOURCE_EXHAUSTED
        assert most[0] == settings.batch_solves  # the batch rows reached their share, never more
    finally:
        done.set()
        watcher.join()
        release.set()
        for call in calls:
            call.cancel()
        assert running.service.wait_idle(10), "the cancelled rows gave their slots back"
        client.close()
        running.stop(0)


def test_the_deadline_caps_every_solve(client: CounterplanClient) -> None:
    rows = [("a", _toy_request("endless")), ("b", _toy_request("endless", x=2.0))]
    started = time.perf_counter()
    results = list(client.explain_batch(rows, timeout=1.5))
    assert time.perf_counter() - started < 1.5
    assert sorted(r.row_id for r in results) == ["a", "b"]
    assert all(r.response.valid and "spent time" in r.response.statistics.termination_reason for r in results)


def test_concurrent_explains_on_one_model_share_model_calls_and_answer_as_alone(
    client: CounterplanClient, server: RunningServer
) -> None:
    requests = [_demo(i) for i in range(8)]
    alone = [_answer(client.explain(request, timeout=60)) for request in requests]
    stats = server.service.batching_statistics()[DEMO_ID]
    before = (stats.calls, stats.requests)
    together: list[Any] = [None] * len(requests)
    start = threading.Barrier(len(requests))

    def call(i: int) -> None:
        with CounterplanClient(server.target) as own:
            grpc.channel_ready_future(own.channel).result(timeout=10)
            start.wait(10)
            together[i] = _answer(own.explain(requests[i], timeout=60))

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(requests))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert together == alone
    calls, shared = stats.calls - before[0], stats.requests - before[1]
    assert shared / calls > 1.0, f"{shared} requests in {calls} model calls"


def test_shutdown_sends_each_running_rows_best_so_far(demo: RegisteredModel) -> None:
    slow = SlowModel()
    running = start_server(ServerSettings(port=0, grace_seconds=5.0), ModelRegistry([_toy("endless", slow, ENDLESS)]))
    release = threading.Event()

    def rows() -> Iterator[tuple[str, pb.ExplainRequest]]:
        yield "a", _toy_request("endless")
        yield "b", _toy_request("endless", x=2.0)
        release.wait(30)  # more to send: the server will not read it

    client = CounterplanClient(running.target)
    results: list[pb.ExplainBatchResponse] = []
    outcome: dict[str, Any] = {}

    def consume() -> None:
        try:
            results.extend(client.explain_batch(rows(), timeout=60))
        except grpc.RpcError as exc:
            outcome["error"] = exc

    consumer = threading.Thread(target=consume)
    consumer.start()
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # until both solves run
            if sum(job.status.value == "solving" for job in running.service.manager.list_jobs()) == 2:
                break
            time.sleep(0.02)
        time.sleep(0.1)
        started = time.perf_counter()
        running.stop()
        consumer.join(10)
        assert time.perf_counter() - started < 5  # the solves stopped at their next step
        assert sorted(r.row_id for r in results) == ["a", "b"]
        assert all(r.response.score.text for r in results)  # the best so far, not an error
        assert outcome["error"].code() == grpc.StatusCode.UNAVAILABLE  # unread rows: resend them elsewhere
    finally:
        release.set()
        client.close()


def test_batch_needs_the_token_and_works_with_dynamic_batching_off(demo: RegisteredModel) -> None:
    settings = ServerSettings(port=0, auth_token="s3cret", dynamic_batching_max_wait_ms=0)
    running = start_server(settings, ModelRegistry([demo]))
    try:
        with CounterplanClient(running.target) as c, pytest.raises(grpc.RpcError) as info:
            list(c.explain_batch([("a", _demo(0))], timeout=10))
        error: Any = info.value
        assert error.code() == grpc.StatusCode.UNAUTHENTICATED
        with CounterplanClient(running.target, token="s3cret") as c:
            (result,) = c.explain_batch([("a", _demo(0))], timeout=60)
            assert result.row_id == "a" and result.response.valid
        assert running.service.shared_calls == {} and running.service.batching_statistics() == {}
    finally:
        running.stop(0)


def test_dynamic_batching_settings() -> None:
    assert ServerSettings().dynamic_batching_max_wait == pytest.approx(0.005)
    assert ServerSettings(dynamic_batching_max_wait_ms=0).dynamic_batching_max_wait is None  # off
    for bad in (-1.0, 101.0):
        with pytest.raises(ValidationError):
            ServerSettings(dynamic_batching_max_wait_ms=bad)
    with pytest.raises(ValidationError):
        ServerSettings(batch_max_in_flight=0)
    with pytest.raises(ValidationError, match="max_batch_streams"):
        ServerSettings(workers=2, max_reflection_streams=1, max_batch_streams=2)
    with pytest.raises(ValidationError, match="max_batch_streams"):  # together they would hold every worker
        ServerSettings(workers=4, max_reflection_streams=2, max_batch_streams=2)
    assert ServerSettings(workers=5, max_reflection_streams=2, max_batch_streams=2).max_batch_streams == 2


def test_the_batch_share_of_the_solve_slots() -> None:
    assert [ServerSettings(max_concurrent_solves=n).batch_solves for n in (1, 2, 3, 4, 9)] == [1, 1, 1, 2, 4]
    assert ServerSettings(max_concurrent_solves=4, max_batch_solves=4).batch_solves == 4  # the operator's choice
    with pytest.raises(ValidationError, match=r"max_batch_solves \(5\) must be at most max_concurrent_solves \(4\)"):
        ServerSettings(max_concurrent_solves=4, max_batch_solves=5)
    with pytest.raises(ValidationError, match="max_batch_solves"):
        ServerSettings(max_batch_solves=0)
