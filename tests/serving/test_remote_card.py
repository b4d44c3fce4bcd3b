"""A model card naming a served model (``model_url``): our gRPC server explains the model MLServer
serves, with the answer a card naming the same pipeline's file gives; a card that names its model
twice, not at all, or at an address that does not answer is refused naming the card's field."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import joblib
import pytest
import yaml

from counterplan.planning.demo import TARGET, rejected_applicant
from counterplan.server._generated.counterplan.v1 import counterplan_pb2 as pb
from counterplan.server.grpc.app import RunningServer, start_server
from counterplan.server.grpc.client import CounterplanClient, class_goal
from counterplan.server.grpc.convert import plain_value
from counterplan.server.grpc.settings import ServerSettings
from counterplan.server.registry.registry import RegistryError, load_card
from tests.serving.conftest import Served, loan_table
from tests.serving.fake_oip import Script, scripted_server

QUICK = {"termination": {"step_count_limit": 40}}


def card(card_id: str, **fields: Any) -> dict[str, Any]:
    return {
        "id": card_id,
        "outputs": [TARGET],
        "training_data": "train.csv",
        "target": TARGET,
        "default_solver_config": QUICK,
        **fields,
    }


@pytest.fixture(scope="module")
def models_dir(served: Served, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("cards")
    served.data.to_csv(folder / "train.csv", index=False)
    joblib.dump(served.pipe, folder / "pipe.joblib")
    cards = {
        "local": card("local", model_file="pipe.joblib"),
        "rest": card("rest", model_url=f"{served.server.rest}/v2/models/pipe"),
        "grpc": card(
            "grpc",
            model_url=f"{served.server.grpc}/pipe",
            remote={"timeout": 20, "headers": {"x-caller": "counterplan-test"}, "protocol": "grpc"},
        ),
    }
    for name, fields in cards.items():
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(fields))
    return folder


@pytest.fixture(scope="module")
def client(models_dir: Path) -> Iterator[CounterplanClient]:
    running: RunningServer = start_server(
        ServerSettings(port=0, models_dir=models_dir, trust_pickle=True, max_solve_seconds=60)
    )
    try:
        with CounterplanClient(running.target) as c:
            yield c
    finally:
        running.stop(grace=0)


def answer(response: pb.ExplainResponse) -> dict[str, Any]:
    return {
        "valid": response.valid,
        "proposed": {k: plain_value(v) for k, v in response.proposed.items()},
        "score": str(response.score),
        "changes": sorted(c.feature for c in response.changes),
        "predictions": [(p.output, dict(p.probabilities)) for p in response.predictions],
    }


@pytest.mark.integration  # our gRPC server and a real MLServer on loopback
@pytest.mark.parametrize("card_id", ["rest", "grpc"])
def test_the_server_explains_a_served_model_as_the_models_file(client: CounterplanClient, card_id: str) -> None:
    request = {"instance": rejected_applicant(), "goals": [class_goal("yes", 0.7)], "seed": 3}
    local = client.explain(client.request("local", **request), timeout=120)
    remote = client.explain(client.request(card_id, **request), timeout=120)
    assert local.valid and local.changes
    assert answer(remote) == answer(local)
    assert remote.statistics.model_call_count == local.statistics.model_call_count
    listed = client.get_model(card_id)
    assert [f.name for f in listed.features] == [f.name for f in client.get_model("local").features]
    assert [(o.name, list(o.classes)) for o in listed.outputs] == [(TARGET, ["no", "yes"])]


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"model_file": "pipe.joblib", "model_url": "http://127.0.0.1:1/v2/models/pipe"}, "exactly one of model_file"),
        ({}, "exactly one of model_file"),
        ({"model_file": "pipe.joblib", "remote": {"timeout": 3}}, "remote: only with model_url"),
        ({"model_url": "ftp://127.0.0.1:1/v2/models/pipe"}, r"model_url.*unknown scheme 'ftp'"),
        ({"model_url": "http://127.0.0.1:1/v2/models/pipe", "remote": {"timeout": -1}}, "remote.timeout"),
        ({"model_url": "http://127.0.0.1:1/v2/models/pipe", "remote": {"tiemout": 3}}, "remote.tiemout"),
        ({"model_url": "http://127.0.0.1:1/v2/models/pipe", "trusted_types": ["x"]}, "trusted_types: only with"),
        ({"model_url": "grpc://127.0.0.1:1/pipe", "remote": {"protocol": "rest"}}, "protocol 'rest' was asked"),
        ({"model_url": "grpc://127.0.0.1:1/pipe", "remote": {"classes": ["a"]}}, r"remote\.classes.*two distinct"),
        ({"model_url": "grpc://127.0.0.1:1/pipe", "remote": {"headers": {"x": "caf\u00e9"}}}, r"remote\.headers\.x"),
    ],
    ids=[
        "both",
        "neither",
        "remote-without-url",
        "scheme",
        "timeout",
        "unknown-option",
        "trusted-types",
        "protocol",
        "classes",
        "header",
    ],
)
def test_a_card_names_its_model_once_and_readably(tmp_path: Path, fields: dict[str, Any], fragment: str) -> None:
    loan_table().to_csv(tmp_path / "train.csv", index=False)
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(card("m", **fields)))
    with pytest.raises(RegistryError, match=fragment) as info:
        load_card(tmp_path / "m.yaml", trust_pickle=True)
    assert "\n" not in str(info.value) and "m.yaml" in str(info.value)


def test_a_served_model_that_does_not_answer_is_refused_when_the_card_loads(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    loan_table().to_csv(tmp_path / "train.csv", index=False)
    url = f"http://127.0.0.1:{port}/v2/models/pipe"
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(card("m", model_url=url, remote={"timeout": 2})))
    with pytest.raises(RegistryError, match=r"m\.yaml:model_url.*cannot reach the server") as info:
        load_card(tmp_path / "m.yaml")
    assert "\n" not in str(info.value)


@pytest.mark.integration  # our gRPC server and a scripted OIP server on loopback
@pytest.mark.parametrize(
    ("reply", "code"),
    [
        ((503, {"error": "loading"}), grpc.StatusCode.UNAVAILABLE),
        ((200, {"outputs": []}), grpc.StatusCode.FAILED_PRECONDITION),
    ],
    ids=["unreachable", "wrong-answer"],
)
def test_a_served_model_failing_in_a_solve_is_not_the_callers_bad_request(
    tmp_path: Path, reply: tuple[int, Any], code: grpc.StatusCode
) -> None:
    """A card's served model that goes down, or answers wrongly, after the card loaded: the
    caller's request is fine, so not INVALID_ARGUMENT (it was, with the server's address and
    answer in the message): UNAVAILABLE or FAILED_PRECONDITION, the details in the server log."""
    loan_table().to_csv(tmp_path / "train.csv", index=False)
    script = Script([(200, None)])
    with scripted_server(script) as base:
        url = f"{base}/v2/models/m"
        fields = card("m", model_url=url, remote={"timeout": 5, "layout": "columns", "classes": ["no", "yes"]})
        (tmp_path / "m.yaml").write_text(yaml.safe_dump(fields))
        running = start_server(ServerSettings(port=0, models_dir=tmp_path, max_solve_seconds=30))
        try:
            script.replies = [reply]
            with CounterplanClient(running.target) as c, pytest.raises(grpc.RpcError) as info:
                c.explain(c.request("m", instance=rejected_applicant(), goals=[class_goal("yes", 0.7)]), timeout=60)
        finally:
            running.stop(grace=0)
    assert info.value.code() == code
    assert "request id" in str(info.value.details()) and base not in str(info.value.details())
