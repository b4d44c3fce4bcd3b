"""Every echo of a client's input is capped on the wire: a 1 MB model id is NOT_FOUND on every
method, its message at most 1 KB with the id cut at 100 characters (issue 28). Uncapped, the
status message travelled whole in trailing metadata: a default client saw RESOURCE_EXHAUSTED
"Stream removed" instead of NOT_FOUND, and an ExplainBatch row error held the megabyte."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from google.rpc import status_pb2

from counterplan.planning.demo import DEMO_ACTIONS, rejected_applicant
from counterplan.server._generated.counterplan.v1 import counterplan_pb2 as pb
from counterplan.server.grpc.app import RunningServer, start_server
from counterplan.server.grpc.client import CounterplanClient, class_goal, field_violations, row_error
from counterplan.server.grpc.settings import ServerSettings
from counterplan.server.registry.registry import ModelRegistry, demo_model

pytestmark = pytest.mark.integration  # a real server on a loopback port

ECHO_CHARS = 100
"""An echoed id or value at most (``planning.errors.ECHO_CHARS``: the issue's number, written out)."""
TEXT_CHARS = 1024
"""An error text at most (``planning.errors.TEXT_CHARS``)."""
HUGE_ID = "m" * 1_000_000
"""A model id of 1 MB: four times what a default client accepts as trailing metadata."""
LONG_IDS = {"20 KB id": "m" * 20_000, "1 MB id": HUGE_ID}
"""Ids the probe sent: echoed whole, 20 KB already reached a default client as RESOURCE_EXHAUSTED."""


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


def _explain(model_id: str) -> pb.ExplainRequest:
    return CounterplanClient.request(model_id, rejected_applicant(), [class_goal(1, 0.7)], seed=0)


def _plan(model_id: str) -> pb.PlanRequest:
    return CounterplanClient.plan_request(model_id, rejected_applicant(), DEMO_ACTIONS, seed=0)


CALLS: dict[str, Callable[[CounterplanClient, str], Any]] = {
    "Explain": lambda c, model_id: c.explain(_explain(model_id), timeout=60),
    "ExplainStream": lambda c, model_id: list(c.explain_stream(_explain(model_id), timeout=60)),
    "Plan": lambda c, model_id: c.plan(_plan(model_id), timeout=60),
    "PlanStream": lambda c, model_id: list(c.plan_stream(_plan(model_id), timeout=60)),
    "GetModel": lambda c, model_id: c.get_model(model_id, timeout=60),
}


def _assert_capped_not_found(message: str, length: int = len(HUGE_ID)) -> None:
    """The message names the id, cut at 100 characters (in quotes) with its length, and is at most 1 KB."""
    assert len(message) <= TEXT_CHARS, len(message)
    assert message.startswith("no model 'mmm") and message.endswith("; see ListModels"), message[:200]
    shown = message.removeprefix("no model '").removesuffix("'; see ListModels")
    assert len(shown) <= ECHO_CHARS and shown.endswith(f"… ({length:,} characters)"), shown


@pytest.mark.parametrize("model_id", list(LONG_IDS.values()), ids=list(LONG_IDS))
@pytest.mark.parametrize("method", list(CALLS))
def test_a_long_model_id_is_not_found_with_a_capped_message(
    client: CounterplanClient, method: str, model_id: str
) -> None:
    if method.startswith("Plan"):
        pytest.importorskip("pymoo")
    with pytest.raises(grpc.RpcError) as info:
        CALLS[method](client, model_id)
    error: Any = info.value
    assert error.code() == grpc.StatusCode.NOT_FOUND, (error.code(), error.details()[:200])
    _assert_capped_not_found(error.details(), len(model_id))
    trailing = dict(error.trailing_metadata() or ())
    status = status_pb2.Status.FromString(trailing["grpc-status-details-bin"])
    _assert_capped_not_found(status.message, len(model_id))  # the rich status says the same, as small


@pytest.mark.parametrize("model_id", list(LONG_IDS.values()), ids=list(LONG_IDS))
def test_a_long_model_id_in_an_explain_batch_row_is_its_capped_not_found(
    client: CounterplanClient, model_id: str
) -> None:
    rows = [("long", _explain(model_id)), ("good", _explain("loan-demo"))]
    results = {r.row_id: r for r in client.explain_batch(rows, timeout=120)}
    error = row_error(results["long"])
    assert error is not None and error[0] == grpc.StatusCode.NOT_FOUND
    _assert_capped_not_found(error[1], len(model_id))
    assert results["long"].ByteSize() < 2 * TEXT_CHARS  # the row's whole error, not the id
    assert results["good"].response.valid  # and the stream goes on


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("k" * 1_000_000, pb.FeatureValue(number_value=1.0)),
        ("home_ownership", pb.FeatureValue(category_value="c" * 1_000_000)),
    ],
    ids=["megabyte key", "megabyte category"],
)
def test_field_violations_cut_names_and_descriptions(client: CounterplanClient, key: str, value: Any) -> None:
    """A bad field is named by at most 100 characters; its description and the message are at
    most 1 KB, and a cut says how long the original was."""
    request = _explain("loan-demo")
    request.instance[key].CopyFrom(value)
    with pytest.raises(grpc.RpcError) as info:
        client.explain(request, timeout=60)
    error: Any = info.value
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert len(error.details()) <= TEXT_CHARS
    violations = field_violations(error)
    assert violations and all(len(f) <= ECHO_CHARS and len(d) <= TEXT_CHARS for f, d in violations)
    assert any("1,0" in f + d and "characters)" in f + d for f, d in violations), violations


def _with_request_id(request: Any, request_id: str) -> Any:
    request.request_id = request_id
    return request


REQUEST_ID_CALLS: dict[str, Callable[[CounterplanClient, str], Any]] = {
    "Explain": lambda c, rid: c.explain(_with_request_id(_explain("loan-demo"), rid), timeout=60),
    "ExplainStream": lambda c, rid: list(c.explain_stream(_with_request_id(_explain("loan-demo"), rid), timeout=60)),
    "Plan": lambda c, rid: c.plan(_with_request_id(_plan("loan-demo"), rid), timeout=60),
    "Audit": lambda c, rid: list(
        c.audit(pb.AuditRequest(model_id="loan-demo", selection="0:2", request_id=rid), timeout=60)
    ),
}


@pytest.mark.parametrize("method", list(REQUEST_ID_CALLS))
def test_a_long_request_id_is_refused_not_echoed(client: CounterplanClient, method: str) -> None:
    """A request id comes back whole in the answer (and in an INTERNAL status and the log): a
    1 MB one came back as a 1 MB response field; it is refused naming ``request_id``."""
    if method == "Plan":
        pytest.importorskip("pymoo")
    with pytest.raises(grpc.RpcError) as info:
        REQUEST_ID_CALLS[method](client, "r" * 1_000_000)
    error: Any = info.value
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, (error.code(), error.details()[:200])
    assert ("request_id", "at most 256 characters, given 1,000,000") in field_violations(error)
    answer = client.explain(_with_request_id(_explain("loan-demo"), "r" * 256), timeout=60)
    assert answer.request_id == "r" * 256


def test_an_unknown_override_name_is_quoted_cut(client: CounterplanClient) -> None:
    request = _explain("loan-demo")
    request.overrides.add(name="n" * 1_000_000)
    with pytest.raises(grpc.RpcError) as info:
        client.explain(request, timeout=60)
    (field, description), *_ = field_violations(info.value)
    assert field == "overrides[0].name"
    assert description.startswith("unknown feature 'nnn") and len(description) <= len("unknown feature ''") + ECHO_CHARS
    assert description.endswith("… (1,000,000 characters)'")
