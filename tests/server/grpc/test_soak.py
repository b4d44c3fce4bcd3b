"""A short soak on a real server: concurrent clients mixing every method (Explain, ExplainStream,
ExplainBatch, Plan, heavy plans), invalid, cancelled and short-deadline calls, a slow model and
health checks see only the statuses each kind of call may end with, and the server still solves
afterwards (``benchmarks/soak.py`` runs it for minutes against a server process)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from benchmarks.soak import EXPECTED, SLOW_CALL_SECONDS, applicants, soak
from benchmarks.soak_server import slow_demo_model
from counterplan.planning.demo import rejected_applicant
from counterplan.server.grpc.app import RunningServer, start_server
from counterplan.server.grpc.client import CounterplanClient, class_goal
from counterplan.server.grpc.settings import ServerSettings
from counterplan.server.registry.registry import ModelRegistry, demo_model

pytestmark = pytest.mark.integration  # a real server on a loopback port (or a local Ray cluster)


@pytest.fixture(scope="module")
def running() -> Iterator[RunningServer]:
    registry = ModelRegistry([demo_model(), slow_demo_model(SLOW_CALL_SECONDS)])
    server = start_server(ServerSettings(port=0, max_solve_seconds=5.0), registry)
    try:
        yield server
    finally:
        server.stop(grace=0)


@pytest.mark.slow  # twelve seconds of sixteen clients
def test_a_short_soak_sees_no_unexpected_status(running: RunningServer) -> None:
    report = soak(running.target, clients=16, seconds=12.0, instances=applicants(8), seed=0)
    assert report.unexpected == []
    kinds = {kind for kind, _ in report.statuses}
    assert kinds == set(EXPECTED), report.statuses  # every kind of call was made
    assert report.statuses[("solve", "OK")] + report.statuses[("stream", "OK")] > 0
    assert report.statuses[("invalid", "INVALID_ARGUMENT")] > 0
    assert running.service.wait_idle(10), "every admitted solve gave its share back"
    with CounterplanClient(running.target) as client:
        request = CounterplanClient.request("loan-demo", rejected_applicant(), [class_goal(1, 0.7)], seed=0)
        assert client.explain(request, timeout=60).valid
