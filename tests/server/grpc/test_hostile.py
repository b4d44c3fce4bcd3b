"""Hostile requests against a real server: each is refused at the boundary, fast, and the server
stays healthy (the issue's cases: YAML bombs, deep nesting, huge sizes, out-of-range values,
floods of bad fields)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from counterplan.planning.demo import rejected_applicant
from counterplan.server._generated.counterplan.v1 import counterplan_pb2 as pb
from counterplan.server.grpc.app import RunningServer, start_server
from counterplan.server.grpc.client import CounterplanClient, class_goal, field_violations
from counterplan.server.grpc.settings import ServerSettings
from counterplan.server.registry.registry import ModelRegistry, demo_model

pytestmark = pytest.mark.integration  # a real server on a loopback port (or a local Ray cluster)

BOMB = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8)
)


@pytest.fixture(scope="module")
def running() -> Iterator[RunningServer]:
    server = start_server(ServerSettings(port=0), ModelRegistry([demo_model()]))
    try:
        yield server
    finally:
        server.stop(grace=0)


@pytest.fixture
def client(running: RunningServer) -> Iterator[CounterplanClient]:
    with CounterplanClient(running.target) as c:
        yield c


def _request(**instance: Any) -> pb.ExplainRequest:
    return CounterplanClient.request("loan-demo", {**rejected_applicant(), **instance}, [class_goal(1, 0.7)], seed=0)


def _with_config(text: str) -> pb.ExplainRequest:
    request = _request()
    request.solver.config_json = text
    return request


def _refused(client: CounterplanClient, request: pb.ExplainRequest) -> tuple[list[str], list[str], float]:
    started = time.perf_counter()
    with pytest.raises(grpc.RpcError) as info:
        client.explain(request, timeout=60)
    spent = time.perf_counter() - started
    error: Any = info.value
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error.details()
    violations = field_violations(error)
    assert violations, "a BadRequest detail names the fields"
    return [f for f, _ in violations], [d for _, d in violations], spent


def _healthy(running: RunningServer) -> bool:
    with grpc.insecure_channel(running.target) as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
        return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


@pytest.mark.parametrize(
    ("name", "build", "field"),
    [
        ("yaml billion laughs", lambda: _with_config(BOMB), "solver.config_json.yaml"),
        ("deep nesting", lambda: _with_config("[" * 20_000), "solver.config_json.yaml"),
        ("deep phases", lambda: _with_config('{"phases": ' + "[" * 5000 + "]" * 5000 + "}"), "solver.config_json.yaml"),
        ("huge config", lambda: _with_config("# " + "x" * 200_000), "solver.config_json.yaml"),
        (
            "a billion moves per step",
            lambda: _with_config('{"phases": [{"move_selector": {"moves_per_step": 1000000000}}]}'),
            "solver.config_json.phases.0.local_search.move_selector.moves_per_step",
        ),
        (
            "a trillion late acceptances",
            lambda: _with_config(
                '{"phases": [{"acceptor": {"type": "late_acceptance", "late_acceptance_size": 1000000000000}}]}'
            ),
            "solver.config_json.phases.0.local_search.acceptor.late_acceptance.late_acceptance_size",
        ),
        ("int64 max integer", lambda: _request(credit_cards=2**63 - 1), "instance[credit_cards]"),
        # 400,000 of them (a 3.5 MB request) were taken, and the solve held 2.5 GB (the grpc fuzz)
        ("a domain of 10,001 categories", lambda: _categories(10_001), "overrides[0].domain.categories"),
        ("negative seed", lambda: _seed(-1), "solver.seed"),
    ],
)
def test_hostile_requests_are_refused_fast_and_the_server_stays_healthy(
    client: CounterplanClient, running: RunningServer, name: str, build: Any, field: str
) -> None:
    fields, descriptions, spent = _refused(client, build())
    assert any(f.startswith(field) for f in fields), (name, fields)
    assert all(len(d) <= 300 for d in descriptions)
    assert spent < 10.0, f"{name} took {spent:.1f} s"  # generous for a busy machine; a bomb took minutes
    assert _healthy(running)
    assert client.explain(_request(), timeout=60).valid  # and it still solves


def _categories(count: int) -> pb.ExplainRequest:
    request = _request()
    request.overrides.add(name="purpose").domain.categories.extend(
        ["debt-consolidation", *(f"c{i}" for i in range(count - 1))]
    )
    return request


def _seed(seed: int) -> pb.ExplainRequest:
    request = _request()
    request.solver.seed = seed
    return request


def test_floods_of_bad_fields_fit_the_error_details(client: CounterplanClient, running: RunningServer) -> None:
    request = _request()
    for i in range(10_000):
        request.instance[f"unknown_{i}"].CopyFrom(pb.FeatureValue(number_value=1.0))
    request.instance["x" * 1_000_000].CopyFrom(pb.FeatureValue(number_value=1.0))
    request.overrides.append(pb.FeatureOverride(name="income", allowed_values=[float(v) for v in range(200_000)]))
    fields, descriptions, _ = _refused(client, request)
    assert len(fields) <= 21 and any("more bad fields" in d for d in descriptions)
    capped = _request()
    capped.overrides.append(pb.FeatureOverride(name="income", allowed_values=[float(v) for v in range(200_000)]))
    assert _refused(client, capped)[0] == ["overrides[0].allowed_values"]
    assert max(len(f) for f in fields) <= 100 and max(len(d) for d in descriptions) <= 300
    assert _healthy(running)


_SERVICE = "/counterplan.v1.CounterfactualService"
_NOT_A_MESSAGE = b"\xff\xff\xff\xff\x0f"  # a varint that never ends: no protobuf message decodes from it


def _undecodable(error: Any, message_type: str) -> str:
    """The one field violation of a request whose bytes do not decode: INVALID_ARGUMENT naming the type."""
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, (error.code(), error.details())
    violations = field_violations(error)
    assert len(violations) == 1 and f"not a valid counterplan.v1.{message_type} message" in violations[0][1]
    return violations[0][0]


@pytest.mark.parametrize(
    ("method", "message_type", "streams"),
    [
        ("Explain", "ExplainRequest", False),
        ("ExplainStream", "ExplainRequest", True),
        ("ListModels", "ListModelsRequest", False),
        ("Audit", "AuditRequest", True),
    ],
)
def test_bytes_that_are_not_the_request_message_are_the_clients_invalid_argument(
    running: RunningServer, method: str, message_type: str, streams: bool
) -> None:
    """grpcio answered INTERNAL "Exception deserializing request!" for them (and logged a stack
    trace): the server's fault, where the bytes are the client's."""
    with grpc.insecure_channel(running.target) as channel, pytest.raises(grpc.RpcError) as info:
        if streams:
            list(channel.unary_stream(f"{_SERVICE}/{method}")(_NOT_A_MESSAGE, timeout=30))
        else:
            channel.unary_unary(f"{_SERVICE}/{method}")(_NOT_A_MESSAGE, timeout=30)
    assert _undecodable(info.value, message_type) == "request"
    assert _healthy(running)


def test_an_undecodable_message_in_a_batch_stream_ends_it_after_the_rows_before_it(running: RunningServer) -> None:
    """The rows read before the bad message are answered; then the stream ends with
    INVALID_ARGUMENT naming the message's place (it was INTERNAL, with no answers)."""
    first = pb.ExplainBatchRequest(row_id="first", request=_request()).SerializeToString()
    with grpc.insecure_channel(running.target) as channel:
        batch = channel.stream_stream(
            f"{_SERVICE}/ExplainBatch", response_deserializer=pb.ExplainBatchResponse.FromString
        )
        responses = batch(iter([first, _NOT_A_MESSAGE]), timeout=60)
        answered = []
        with pytest.raises(grpc.RpcError) as info:
            for response in responses:
                answered.append(response)
    assert [r.row_id for r in answered] == ["first"] and answered[0].response.valid
    assert _undecodable(info.value, "ExplainBatchRequest") == "request (message 2 of the stream)"
    assert _healthy(running)


def test_the_token_is_checked_before_the_bytes_are_decoded() -> None:
    """A caller without the token learns nothing about the service, not even that its bytes are wrong."""
    server = start_server(ServerSettings(port=0, auth_token="s3cret"), ModelRegistry([demo_model()]))
    try:
        with grpc.insecure_channel(server.target) as channel, pytest.raises(grpc.RpcError) as info:
            channel.unary_unary(f"{_SERVICE}/Explain")(_NOT_A_MESSAGE, timeout=30)
        assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with grpc.insecure_channel(server.target) as channel, pytest.raises(grpc.RpcError) as info:
            metadata = (("authorization", "Bearer s3cret"),)
            channel.unary_unary(f"{_SERVICE}/Explain")(_NOT_A_MESSAGE, timeout=30, metadata=metadata)
        assert _undecodable(info.value, "ExplainRequest") == "request"
    finally:
        server.stop(grace=0)
