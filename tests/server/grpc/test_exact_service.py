"""The engine choice over gRPC and on the command line: exact answers with their proof, auto's
fallback said, and a refusal naming the field when the exact engine cannot take the model."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import grpc
import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from counterplan.planning import CallableAdapter, OutputSpec
from counterplan.planning.models import adapt_sklearn
from counterplan.server._generated.counterplan.v1 import counterplan_pb2 as pb
from counterplan.server.cli.main import main
from counterplan.server.grpc.app import RunningServer, start_server
from counterplan.server.grpc.client import CounterplanClient, class_goal, field_violations
from counterplan.server.grpc.settings import ServerSettings
from counterplan.server.registry.registry import FeatureSpec, ModelRegistry, RegisteredModel

pytestmark = pytest.mark.integration  # a real server on a loopback port (or a local Ray cluster)

pytest.importorskip("highspy")

FEATURES = [
    FeatureSpec(name="x", kind="float", low=0.0, high=10.0, precision=1),
    FeatureSpec(name="n", kind="integer", low=0, high=20),
]
ORIGINAL = {"x": 1.0, "n": 2}


def _linear() -> Any:
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.uniform(0, 10, 400), rng.integers(0, 21, 400)])
    y = (X[:, 0] + 0.5 * X[:, 1] > 8).astype(int)
    return LogisticRegression(max_iter=1000).fit(X, y)


def _black_box(X: Any) -> Any:
    p = 1.0 / (1.0 + np.exp(-(X[:, 0] + 0.5 * X[:, 1] - 8.0)))
    return np.column_stack([1.0 - p, p])


@pytest.fixture(scope="module")
def running() -> Iterator[RunningServer]:
    linear = RegisteredModel("linear", "1", "logistic regression", adapt_sklearn(_linear(), "ok"), FEATURES)
    box = RegisteredModel("box", "1", "a callable", CallableAdapter(_black_box, [OutputSpec("ok", (0, 1))]), FEATURES)
    server = start_server(ServerSettings(port=0), ModelRegistry([linear, box]))
    try:
        yield server
    finally:
        server.stop(grace=0)


def _request(model_id: str, choice: int) -> pb.ExplainRequest:
    request = CounterplanClient.request(model_id, ORIGINAL, [class_goal(1, 0.7)], seed=0)
    request.solver.engine_choice = choice  # type: ignore[assignment]
    return request


def test_the_exact_engine_answers_with_its_proof(running: RunningServer) -> None:
    with CounterplanClient(running.target) as client:
        response = client.explain(_request("linear", pb.ENGINE_CHOICE_EXACT), timeout=60)
        local = client.explain(_request("linear", pb.ENGINE_CHOICE_LOCAL), timeout=60)
    assert response.valid
    assert response.statistics.engine == "exact"
    exact = response.statistics.exact
    assert exact.status == "optimal" and exact.proven and exact.verified
    assert exact.model == "LogisticRegression" and exact.HasField("gap")
    levels = (*response.score.hard_levels, *response.score.soft_levels)
    assert levels >= (*local.score.hard_levels, *local.score.soft_levels)
    assert local.statistics.engine == "local" and not local.statistics.HasField("exact")


def test_auto_says_what_it_chose_and_exact_is_refused_where_it_cannot_run(running: RunningServer) -> None:
    with CounterplanClient(running.target) as client:
        auto = client.explain(_request("box", pb.ENGINE_CHOICE_AUTO), timeout=60)
        assert auto.statistics.engine == "local"
        assert "CallableAdapter is a black box" in auto.statistics.engine_reason
        with pytest.raises(grpc.RpcError) as info:
            client.explain(_request("box", pb.ENGINE_CHOICE_EXACT), timeout=60)
    error: Any = info.value
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    ((field, description),) = field_violations(error)
    assert field == "solver.engine_choice"
    assert "the exact engine cannot take this problem" in description


def test_the_command_line_takes_the_engine(capsys: pytest.CaptureFixture[str], running: RunningServer) -> None:
    assert main(["explain", "--server", running.target, "--model-id", "linear", "--instance",
                 json.dumps(ORIGINAL), "--goal", "ok=class:1@0.7", "--engine", "exact", "--json"]) == 0  # fmt: skip
    remote = json.loads(capsys.readouterr().out)
    assert remote["statistics"]["engine"] == "exact" and remote["statistics"]["exact"]["proven"]
