"""Admission by estimated memory, and what a client learns when the model fails on candidates:
on a real server with real clients."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import grpc
import numpy as np
import pytest
from structlog.testing import capture_logs

from counterplan.planning import CallableAdapter, OutputSpec
from counterplan.planning.demo import rejected_applicant
from counterplan.server.grpc.app import RunningServer, start_server
from counterplan.server.grpc.client import CounterplanClient, class_goal, field_violations, retry_after
from counterplan.server.grpc.settings import ServerSettings
from counterplan.server.registry.registry import DEMO_ID, FeatureSpec, ModelRegistry, RegisteredModel, demo_model
from counterplan.solver.core.budget import estimate_bytes
from counterplan.solver.core.config import SolverConfig, TerminationConfig

pytestmark = pytest.mark.integration  # a real server on a loopback port (or a local Ray cluster)

ORIGINAL = {"x": 1.0, "y": 1.0}


def _slow_yes(X: Any) -> Any:
    time.sleep(0.05)
    p = 1.0 / (1.0 + np.exp(-(X[:, 0] - 5.0)))
    return np.column_stack([1.0 - p, p])


def _secretive(X: Any) -> Any:
    """Answers the original instance only; its error text holds what must not leave the server."""
    if not np.all(X == [1.0, 1.0]):
        raise RuntimeError("password=hunter2 at /srv/secret/model.py")
    return _slow_yes(X)


def _toy(model_id: str, fn: Any) -> RegisteredModel:
    features = [
        FeatureSpec(name="x", kind="float", low=0.0, high=10.0),
        FeatureSpec(name="y", kind="float", low=0.0, high=10.0),
    ]
    adapter = CallableAdapter(fn, [OutputSpec("label", ("no", "yes"))])
    endless = SolverConfig(termination=TerminationConfig(spent_limit_seconds=60.0))
    return RegisteredModel(model_id, "1", "toy", adapter, features, default_config=endless)


@pytest.fixture(scope="module")
def running() -> Iterator[RunningServer]:
    registry = ModelRegistry([demo_model(), _toy("slow", _slow_yes), _toy("secretive", _secretive)])
    server = start_server(ServerSettings(port=0, max_solve_memory_mb=64, max_concurrent_solves=4), registry)
    try:
        yield server
    finally:
        server.stop(grace=0)


@pytest.fixture
def client(running: RunningServer) -> Iterator[CounterplanClient]:
    with CounterplanClient(running.target) as c:
        yield c


def test_a_solve_that_could_never_fit_is_invalid_argument(client: CounterplanClient) -> None:
    config = '{"phases": [{"type": "local_search", "walkers": 64, "move_selector": {"moves_per_step": 4096}}]}'
    parsed = SolverConfig.model_validate_json(config)
    features = len(rejected_applicant())
    assert estimate_bytes(parsed, features, features) > 64 * 1024 * 1024  # the case is what it claims
    request = CounterplanClient.request(DEMO_ID, rejected_applicant(), [class_goal(1, 0.7)], seed=0)
    request.solver.config_json = config
    with pytest.raises(grpc.RpcError) as info:
        client.explain(request, timeout=30)
    error: Any = info.value
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    ((field, description),) = field_violations(error)
    assert field == "solver.config_json"
    assert "the server allows 64 MB" in description


def test_a_solve_that_does_not_fit_beside_the_running_ones_gets_a_retry_hint(client: CounterplanClient) -> None:
    """Several answers keep a pool of feasible rows (32 MB at most): two such solves do not fit in
    64 MB although two solve slots are free."""
    request = CounterplanClient.request("slow", ORIGINAL, [class_goal("yes")], seed=0)
    request.num_counterfactuals = 2
    running = client.stub.ExplainStream(request, timeout=60)
    next(running)  # the first solve holds its share
    try:
        with pytest.raises(grpc.RpcError) as info:
            client.explain(request, timeout=30)
        error: Any = info.value
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "the running solves hold about" in error.details() and "of 64 MB" in error.details()
        delay = retry_after(error)
        assert delay is not None and delay > 0
        small = CounterplanClient.request(DEMO_ID, rejected_applicant(), [class_goal(1, 0.7)], seed=0)
        assert client.explain(small, timeout=60).valid  # a small solve still fits beside it
    finally:
        running.cancel()


def test_the_models_text_about_candidates_stays_in_the_log(client: CounterplanClient) -> None:
    """The model answers the original and raises on every candidate: the solve gives up after a
    bounded number of calls and says so; the model's message (a password, a path) is only logged."""
    request = CounterplanClient.request("secretive", ORIGINAL, [class_goal("yes")], seed=0)
    request.request_id = "secretive-1"
    started = time.perf_counter()
    with capture_logs() as logs:
        response = client.explain(request, timeout=60)
    assert time.perf_counter() - started < 30
    assert not response.valid
    assert "hunter2" not in str(response) and "/srv/secret" not in str(response)
    assert "request id secretive-1" in response.failure
    assert response.statistics.termination_reason.startswith("the model failed on every candidate")
    (entry,) = [e for e in logs if e.get("event") == "model failed on candidates"]
    assert entry["request_id"] == "secretive-1" and "hunter2" in entry["error"]
