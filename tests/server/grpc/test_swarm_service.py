"""The particle swarm over gRPC, on the command line and in tuning: chosen by name or by auto,
configured as data, streamed like any engine, refused with the field named when misconfigured."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest

from counterplan.planning import CallableAdapter, OutputSpec
from counterplan.server._generated.counterplan.v1 import counterplan_pb2 as pb
from counterplan.server.grpc.app import RunningServer, start_server
from counterplan.server.grpc.client import CounterplanClient, class_goal, field_violations
from counterplan.server.grpc.settings import ServerSettings
from counterplan.server.registry.registry import FeatureSpec, ModelRegistry, RegisteredModel
from counterplan.solver.engines import SWARM_FROM_FEATURES
from tests.cli import run_cli as _run

pytestmark = pytest.mark.integration  # a real server on a loopback port (or a local Ray cluster)

WIDE = SWARM_FROM_FEATURES
FEATURES = [FeatureSpec(name=f"s{i}", kind="float", low=0.0, high=10.0) for i in range(WIDE)]
ORIGINAL = {f"s{i}": 2.0 for i in range(WIDE)}


def _sensor_model(X: Any) -> Any:
    """Approves when a few of the sensors read high: a black box with many inputs."""
    margin = X[:, 3] + X[:, 17] + 0.5 * X[:, 42] - 12.0
    p = 1.0 / (1.0 + np.exp(-margin))
    return np.column_stack([1.0 - p, p])


@pytest.fixture(scope="module")
def running() -> Iterator[RunningServer]:
    sensors = RegisteredModel(
        "sensors",
        "1",
        "a black box on many sensors",
        CallableAdapter(_sensor_model, [OutputSpec("ok", (0, 1))]),
        FEATURES,
    )
    server = start_server(ServerSettings(port=0), ModelRegistry([sensors]))
    try:
        yield server
    finally:
        server.stop(grace=0)


def _request(choice: int, config: str = "") -> pb.ExplainRequest:
    request = CounterplanClient.request("sensors", ORIGINAL, [class_goal(1, 0.7)], seed=0)
    request.solver.engine_choice = choice  # type: ignore[assignment]
    request.solver.config_json = config
    return request


def test_the_swarm_answers_over_grpc_and_streams_its_progress(running: RunningServer) -> None:
    with CounterplanClient(running.target) as client:
        response = client.explain(_request(pb.ENGINE_CHOICE_SWARM), timeout=120)
        events = list(client.explain_stream(_request(pb.ENGINE_CHOICE_SWARM), timeout=120))
    assert response.valid
    assert response.statistics.engine == "swarm"
    swarm = response.statistics.swarm
    assert swarm.particles == 50 and swarm.iterations == 100 and swarm.ranking == "sensitivity"
    assert {"s3", "s17", "s42"} <= set(swarm.searched_features)  # the sensors that matter were searched
    assert len(events) >= 2 and events[-1].stage == pb.STAGE_FINAL
    final = events[-1].result
    assert final.statistics.engine == "swarm" and final.proposed == response.proposed  # same seed, same answer


def test_auto_picks_the_swarm_for_many_features_of_a_black_box(running: RunningServer) -> None:
    with CounterplanClient(running.target) as client:
        auto = client.explain(_request(pb.ENGINE_CHOICE_AUTO), timeout=120)
    assert auto.valid
    assert auto.statistics.engine == "swarm"
    assert f"{WIDE} mutable features" in auto.statistics.engine_reason


def test_a_swarm_configuration_is_sent_as_data_and_bad_values_are_refused(running: RunningServer) -> None:
    config = json.dumps({"phases": [{"type": "swarm", "particles": 12, "iterations": 15, "top_features": 5}]})
    with CounterplanClient(running.target) as client:
        response = client.explain(_request(pb.ENGINE_CHOICE_UNSPECIFIED, config), timeout=120)
        assert response.statistics.swarm.particles == 12 and response.statistics.swarm.searched == 5
        with pytest.raises(grpc.RpcError) as info:
            client.explain(_request(pb.ENGINE_CHOICE_SWARM, json.dumps({"phases": [{"type": "swarm", "inertia": -1}]})))
    error: Any = info.value
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    ((field, description),) = field_violations(error)
    assert "inertia" in field and "greater than or equal to 0" in description


def test_the_command_line_runs_the_swarm_locally_and_on_the_server(
    capsys: pytest.CaptureFixture[str], running: RunningServer
) -> None:
    code, out, err = _run(capsys, "explain", "--engine", "swarm", "--json", "--seed", "1")
    assert code == 0, err
    local = json.loads(out)
    assert local["statistics"]["engine"] == "swarm" and local["valid"]
    assert local["statistics"]["swarm"]["searched"] >= 1
    code, out, err = _run(capsys, "explain", "--engine", "swarm", "--no-progress", "--seed", "1")
    assert code == 0, err
    assert "Swarm: 50 particles, 100 iterations" in out
    code, out, err = _run(capsys, "explain", "--server", running.target, "--model-id", "sensors", "--instance",
                          json.dumps(ORIGINAL), "--goal", "ok=class:1@0.7", "--engine", "swarm", "--json")  # fmt: skip
    assert code == 0, err
    remote = json.loads(out)["statistics"]
    assert remote["engine"] == "swarm" and remote["swarm"]["particles"] == 50  # the report crosses the wire
    assert {"s3", "s17", "s42"} <= set(remote["swarm"]["searched_features"])


def test_tune_with_the_swarm_tunes_its_settings(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    output = tmp_path / "tuned-swarm.yaml"
    storage = f"sqlite:///{tmp_path / 'tune.db'}"
    quick = ("--rows", "1", "--heldout", "1", "--trials", "2", "--budget", "0.5", "--storage", storage)
    code, out, err = _run(capsys, "tune", *quick, "--engine", "swarm", "--output", str(output))
    assert code == 0, err
    assert "type: swarm" in output.read_text()
    code, out, err = _run(capsys, "explain", "--config", str(output), "--json")
    statistics = json.loads(out)["statistics"]
    assert statistics["engine"] == "swarm" and statistics["engine_reason"] == "the configuration has a swarm phase"
    assert statistics["swarm"]["particles"] >= 10
