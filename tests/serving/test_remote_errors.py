"""RemoteModel against servers that are down, silent or failing: one-line errors, retries only
on transient failures, never a hang."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from counterplan import CallableAdapter, Explainer, OutputSpec
from counterplan.planning.errors import ModelFailureError, RemoteInferenceError, RemoteModelError
from counterplan.planning.remote import RemoteModel
from counterplan.planning.remote.transport import (
    ERROR_BODY_BYTES,
    MAX_MESSAGE,
    METADATA_BYTES,
    RetryPolicy,
    answer_limit,
)
from tests.serving.fake_oip import (
    Flood,
    Script,
    SlowHead,
    answer,
    closed_port,
    flooding_server,
    grpc_server,
    scripted_server,
    silent_socket,
    slow_head_server,
)
from tests.tls import self_signed

pytestmark = pytest.mark.integration

QUICK_RETRY = RetryPolicy(attempts=3, backoff=0.01, max_wait=0.02)
NEVER = 30.0
"""A call that does not fail within this many seconds counts as hanging (the timeouts are 0.5 s, a flood's 10 s)."""
SLACK = 64 * 1024 * 1024
"""What a flood may send past what the client read: the loopback socket's kernel buffers (a few MB
by Linux's defaults; more where they are raised)."""


@pytest.fixture(scope="module")
def space_and_rows() -> tuple[object, np.ndarray]:
    data = pd.DataFrame({"x": np.linspace(0.0, 1.0, 20), "z": np.arange(20) % 3, "y": [0, 1] * 10})
    never_called = CallableAdapter(lambda X: X, [OutputSpec("y", (0, 1))])
    explainer = Explainer(never_called, data, target="y", check=False)
    space = explainer.problem(0).space
    return space, np.stack([explainer.problem(i).space.original for i in range(5)])


FLOOD_TIMEOUT = 10.0
"""The timeout of a call that reads up to its size limit before the limit stops it (16 MiB for the
metadata): the whole answer is under the call's deadline, and that (or its gzip decoding) may take over 0.5 s on a busy
machine; the size limit, not the deadline, is what such a test checks."""


def model(url: str, timeout: float = 0.5, **options: object) -> RemoteModel:
    return RemoteModel(url, classes=[0, 1], retry=QUICK_RETRY, timeout=timeout, **options)  # type: ignore[arg-type]


def test_transient_statuses_are_retried_until_an_answer(space_and_rows: tuple[object, np.ndarray]) -> None:
    space, X = space_and_rows
    script = Script([(503, {"error": "loading"}), (503, {"error": "loading"}), (200, None)])
    with scripted_server(script) as base:
        answer_ = model(f"{base}/v2/models/m").predict(X, space)  # type: ignore[arg-type]
    assert script.infer_calls == 3
    np.testing.assert_array_equal(answer_["prediction"], [[0.75, 0.25]] * 5)


def test_retries_share_the_calls_timeout(space_and_rows: tuple[object, np.ndarray]) -> None:
    """A server failing transiently just before the timeout: each retry had the whole timeout
    again, so a call of 2 s took four attempts of 1.2 s (a call of 10 s, 40, and a KServe request
    past its deadline by as much); a retry gets what is left of the call's timeout."""
    space, X = space_and_rows
    script = Script([(503, "Service Unavailable")], delay=1.2)
    patient = RetryPolicy(attempts=4, backoff=0.01, max_wait=0.02, budget=60.0)
    started = time.monotonic()
    with scripted_server(script) as base, pytest.raises(RemoteModelError) as info:
        remote = RemoteModel(f"{base}/v2/models/m", classes=[0, 1], retry=patient, timeout=2.0)
        remote.predict(X, space)  # type: ignore[arg-type]
    took = time.monotonic() - started
    assert took < 4.0 and script.infer_calls <= 2  # 4 calls and 4.8 s without it
    assert "too slow" in str(info.value) or "after 1 attempt" in str(info.value)


def test_transient_statuses_give_up_after_the_attempts(space_and_rows: tuple[object, np.ndarray]) -> None:
    space, X = space_and_rows
    script = Script([(502, "Bad Gateway")])
    with scripted_server(script) as base, pytest.raises(RemoteModelError, match=r"HTTP 502.*after 3 attempts"):
        model(f"{base}/v2/models/m").predict(X, space)  # type: ignore[arg-type]
    assert script.infer_calls == 3


def test_a_model_exception_is_not_retried_and_reads_as_one_line(space_and_rows: tuple[object, np.ndarray]) -> None:
    space, X = space_and_rows
    traceback = "Traceback (most recent call last):\n  File 'x.py'\n" * 5000 + "ValueError: X has 3 features\n"
    script = Script([(500, traceback)])
    with scripted_server(script) as base, pytest.raises(RemoteInferenceError) as info:
        model(f"{base}/v2/models/m").predict(X, space)  # type: ignore[arg-type]
    assert script.infer_calls == 1
    message = str(info.value)
    assert "\n" not in message and "HTTP 500: ValueError: X has 3 features" in message
    assert "raised (no inputs declared, so one tensor was sent: give layout='columns'" in message
    assert len(message) < 500


def test_the_layout_hint_survives_a_long_message_of_the_model() -> None:
    """A pipeline served without declared inputs gets one tensor and names every column it misses
    (MLServer: "columns are missing: {...}"); the hint to give layout='columns' is what the caller
    needs, and the line the caller sees (the model's message cut at MESSAGE_LIMIT characters) keeps it."""
    columns = ", ".join(f"'feature_number_{i}'" for i in range(40))
    script = Script([(500, f"ValueError: columns are missing: {{{columns}}}")])
    data = pd.DataFrame({"x": np.linspace(0.0, 1.0, 20), "y": [0, 1] * 10})
    with scripted_server(script) as base:
        explainer = Explainer(model(f"{base}/v2/models/m"), data, target="y", check=False)
        with pytest.raises(ModelFailureError) as info:
            explainer.explain(0)
    assert "give layout='columns' if the model reads named columns" in str(info.value)


@pytest.mark.parametrize("status", [400, 404, 422])
def test_refusals_are_not_retried(space_and_rows: tuple[object, np.ndarray], status: int) -> None:
    space, X = space_and_rows
    script = Script([(status, {"error": "no " * 10_000})])
    with scripted_server(script) as base, pytest.raises(RemoteModelError) as info:
        model(f"{base}/v2/models/m").predict(X, space)  # type: ignore[arg-type]
    assert script.infer_calls == 1
    assert f"HTTP {status}" in str(info.value) and len(str(info.value)) < 1100


def test_an_error_body_cannot_act_on_the_terminal(space_and_rows: tuple[object, np.ndarray]) -> None:
    """A server's error text reaches the command line's stderr and the logs: its escape sequences
    (clear the screen, set the window's title) and bidirectional overrides went there as they were."""
    space, X = space_and_rows
    script = Script([(400, {"error": "bad \x1b[2J\x1b]0;owned\x07 \u202eevil"})])
    with scripted_server(script) as base, pytest.raises(RemoteModelError) as info:
        model(f"{base}/v2/models/m").predict(X, space)  # type: ignore[arg-type]
    message = str(info.value)
    assert message.isprintable() and "HTTP 400: bad \\x1b[2J\\x1b]0;owned\\x07 \\u202eevil" in message


def test_a_redirect_is_said_with_where_it_points_not_followed(space_and_rows: tuple[object, np.ndarray]) -> None:
    """A gateway answering http with 308 to https read 'HTTP 308: (empty body)'."""
    space, X = space_and_rows
    script = Script([(308, "", {"Location": "https://gw.example/v2/models/m/infer"})])
    with scripted_server(script) as base, pytest.raises(RemoteModelError) as info:
        model(f"{base}/v2/models/m").predict(X, space)  # type: ignore[arg-type]
    assert "HTTP 308: redirected to 'https://gw.example/v2/models/m/infer'; redirects are not followed" in str(
        info.value
    )
    assert script.infer_calls == 1


def test_a_nan_answer_comes_back_as_nan(space_and_rows: tuple[object, np.ndarray]) -> None:
    """The calculator counts a row with a non-finite output as failed, as for a local model."""
    space, X = space_and_rows
    with scripted_server(Script([(200, answer(5, "NaN"))])) as base:
        proba = model(f"{base}/v2/models/m").predict(X, space)["prediction"]  # type: ignore[arg-type]
    assert proba.shape == (5, 2) and np.isnan(proba).all()


def test_a_wrong_number_of_rows_is_refused(space_and_rows: tuple[object, np.ndarray]) -> None:
    space, X = space_and_rows
    with scripted_server(Script([(200, answer(4))])) as base, pytest.raises(RemoteModelError, match="for 5 rows"):
        model(f"{base}/v2/models/m").predict(X, space)  # type: ignore[arg-type]


def test_a_grpc_answer_that_is_no_message_is_a_wrong_answer_not_the_models_failure(
    space_and_rows: tuple[object, np.ndarray],
) -> None:
    """grpc reports an answer its deserializer cannot parse as INTERNAL, which read as the model
    raising: the calculator bisected the batch, and the rows counted as the model's failures."""
    space, X = space_and_rows
    calls: list[int] = []

    def infer(request: object) -> bytes:
        calls.append(1)
        return b"\xff\xff\xff\xff\x0f"

    with grpc_server(infer) as target, pytest.raises(RemoteModelError, match="wrong answer: the answer is not a"):
        model(f"grpc://{target}/m").predict(X, space)  # type: ignore[arg-type]
    assert calls == [1]


def test_a_batch_the_model_raises_on_leaves_the_class_order_check_to_the_next_call(
    space_and_rows: tuple[object, np.ndarray],
) -> None:
    """The class names from the training target are checked once against the server's labels.
    A first batch the model raised on (both with and without ``predict``) counted as checked,
    and class names in the wrong order went on unnoticed: every probability read for the
    wrong class."""
    space, X = space_and_rows
    swapped = answer(5, 0.1)  # the largest probability is column 0's ...
    swapped["outputs"].append({"name": "predict", "datatype": "INT64", "shape": [5], "data": [1] * 5})  # ... class 1
    script = Script([(500, "ValueError: bad rows"), (500, "ValueError: bad rows"), (200, swapped)])
    with scripted_server(script) as base:
        bound = RemoteModel(f"{base}/v2/models/m", retry=QUICK_RETRY, timeout=0.5).for_target("y", [0, 1])
        with pytest.raises(RemoteInferenceError):
            bound.predict(X, space)  # type: ignore[arg-type]
        with pytest.raises(RemoteModelError, match="the model predicts '1' where its largest probability is"):
            bound.predict(X, space)  # type: ignore[arg-type]
    assert [len(body.get("outputs", [])) for body in script.bodies] == [2, 1, 2]


@pytest.mark.parametrize("scheme", ["http", "grpc"])
def test_a_server_that_is_down_fails_at_once(space_and_rows: tuple[object, np.ndarray], scheme: str) -> None:
    space, X = space_and_rows
    port = closed_port()
    url = f"http://127.0.0.1:{port}/v2/models/m" if scheme == "http" else f"grpc://127.0.0.1:{port}/m"
    started = time.monotonic()
    with pytest.raises(RemoteModelError, match="after 3 attempts") as info:
        model(url).predict(X, space)  # type: ignore[arg-type]
    assert time.monotonic() - started < NEVER and "\n" not in str(info.value)
    assert str(port) in str(info.value)


@pytest.mark.parametrize("scheme", ["http", "grpc"])
def test_a_server_that_never_answers_times_out(space_and_rows: tuple[object, np.ndarray], scheme: str) -> None:
    space, X = space_and_rows
    with silent_socket() as port:
        url = f"http://127.0.0.1:{port}/v2/models/m" if scheme == "http" else f"grpc://127.0.0.1:{port}/m"
        started = time.monotonic()
        with pytest.raises(RemoteModelError, match="too slow"):
            model(url).predict(X, space)  # type: ignore[arg-type]
        assert time.monotonic() - started < NEVER


def test_an_explainer_on_a_server_that_is_down_fails_before_any_search() -> None:
    data = pd.DataFrame({"x": np.linspace(0.0, 1.0, 20), "y": [0, 1] * 10})
    down = model(f"http://127.0.0.1:{closed_port()}/v2/models/m")
    with pytest.raises(RemoteModelError, match="cannot reach the server"):
        Explainer(down, data, target="y")


def test_a_solve_whose_server_goes_down_stops_with_the_one_line_error() -> None:
    """The first calls work, then every call fails: the solve stops, no bisection."""
    data = pd.DataFrame({"x": np.linspace(0.0, 1.0, 20), "y": [0, 1] * 10})
    script = Script([(200, answer(1, 0.25)), (503, "Service Unavailable")])
    with scripted_server(script) as base:
        explainer = Explainer(model(f"{base}/v2/models/m"), data, target="y", check=False)
        with pytest.raises(RemoteModelError, match=r"HTTP 503: Service Unavailable \(after 3 attempts\)"):
            explainer.explain(0)
    assert script.infer_calls == 4  # the instance, then one call tried three times


def test_a_rest_request_asks_for_an_uncompressed_answer_in_compact_json(
    space_and_rows: tuple[object, np.ndarray],
) -> None:
    """MLServer gzips every answer over 500 bytes for a client that accepts it (at level 9: longer
    than the model for thousands of rows); the client asks for none, unless its caller says."""
    space, X = space_and_rows
    script = Script([(200, None)])
    with scripted_server(script) as base:
        model(f"{base}/v2/models/m", headers={"x-caller": "t"}).predict(X, space)  # type: ignore[arg-type]
        model(f"{base}/v2/models/m", headers={"accept-encoding": "gzip"}).predict(X, space)  # type: ignore[arg-type]
    ours, theirs = script.headers
    assert ours["accept-encoding"] == "identity" and ours["x-caller"] == "t"
    assert ours["content-type"] == "application/json"
    assert theirs["accept-encoding"] == "gzip"  # the caller's own header wins, whatever its case
    assert b", " not in script.raw_bodies[0] and b'": ' not in script.raw_bodies[0]
    assert script.bodies[0]["inputs"][0]["shape"] == [5, 2]


@pytest.mark.parametrize(
    ("framing", "metadata"), [("close", False), ("chunked", False), ("chunked", True)], ids=["close", "chunked", "get"]
)
def test_an_endless_answer_fails_at_the_limit_unread(
    space_and_rows: tuple[object, np.ndarray], framing: str, metadata: bool
) -> None:
    """An answer with no length (ended by the server's close) or chunked, that never ends, to the
    infer POST or to the metadata GET: the call fails once the answer passes the limit, with the
    limit in the error, not the body, and hangs up without reading on (the server counts what it
    could send; it stops 256 MiB past the limit, so a client that reads it all ends too). The
    limit is the request's: 1 MiB and 8 KiB a row for an answer, where 256 MiB once let each call
    in flight hold gigabytes while its JSON was decoded."""
    space, X = space_and_rows
    limit, what = (METADATA_BYTES, "the metadata") if metadata else (answer_limit(len(X)), "an answer to 5 rows")
    flood = Flood(cap=limit + 4 * SLACK, framing=framing, metadata=metadata)  # type: ignore[arg-type]
    started = time.monotonic()
    with flooding_server(flood) as base, pytest.raises(RemoteModelError) as info:
        model(f"{base}/v2/models/m", timeout=FLOOD_TIMEOUT).predict(X, space)  # type: ignore[arg-type]
    assert time.monotonic() - started < NEVER
    message = str(info.value)
    assert f"the answer is larger than {limit:,} bytes ({limit / 2**20:.3g} MiB), the limit of {what}" in message
    assert "0.25" not in message and len(message) < 300
    assert flood.ends == ["hung up"] and flood.sent[0] < limit + SLACK  # not retried, the rest unread


def test_an_answer_declared_over_the_limit_is_not_read(space_and_rows: tuple[object, np.ndarray]) -> None:
    """A ``Content-Length`` over the limit fails the call before any of the body is read."""
    space, X = space_and_rows
    flood = Flood(cap=4 * SLACK, framing="declared")
    with (
        flooding_server(flood) as base,
        pytest.raises(RemoteModelError, match=f"larger than {answer_limit(5):,} bytes"),
    ):
        model(f"{base}/v2/models/m").predict(X, space)  # type: ignore[arg-type]
    assert flood.ends == ["hung up"] and flood.sent[0] < SLACK


def test_a_compressed_answer_counts_at_its_decoded_size(space_and_rows: tuple[object, np.ndarray]) -> None:
    """A gzip answer of a few MB that decodes to more than the limit (what its bytes on the wire,
    or a ``Content-Length`` of them, would never show): the call fails at the limit, counted on
    what the client decodes."""
    space, X = space_and_rows
    limit = answer_limit(len(X))
    flood = Flood(cap=limit + 4 * SLACK, framing="gzip")
    started = time.monotonic()
    with flooding_server(flood) as base, pytest.raises(RemoteModelError) as info:
        model(f"{base}/v2/models/m", timeout=FLOOD_TIMEOUT).predict(X, space)  # type: ignore[arg-type]
    assert time.monotonic() - started < NEVER
    assert f"the answer is larger than {limit:,} bytes (1.04 MiB), the limit of an answer to 5 rows" in str(info.value)
    assert len(flood.ends) == 1  # not retried


def test_an_endless_error_body_gives_a_short_line(space_and_rows: tuple[object, np.ndarray]) -> None:
    """An HTTP 500 whose body never ends (a traceback looping on): the status, told in one short
    line that says the body was too long, after reading no more than the error body's limit."""
    space, X = space_and_rows
    flood = Flood(cap=4 * SLACK, status=500, chunk=b"  File 'x.py', line 1\nValueError: again\n" * 1600)
    with flooding_server(flood) as base, pytest.raises(RemoteInferenceError) as info:
        model(f"{base}/v2/models/m").predict(X, space)  # type: ignore[arg-type]
    message = str(info.value)
    assert f"HTTP 500: (an error body over {ERROR_BODY_BYTES:,} bytes (1 MiB), not read)" in message
    assert "ValueError" not in message and len(message) < 300
    assert flood.ends == ["hung up"] and flood.sent[0] < ERROR_BODY_BYTES + SLACK


def test_a_grpc_answer_over_the_rows_limit_is_refused_before_it_is_decoded(
    space_and_rows: tuple[object, np.ndarray],
) -> None:
    """The gRPC channel takes messages up to 256 MiB for any call, and decoding one's values into
    Python's took many times its size after the call's deadline (240 MB of empty texts for 5 rows:
    2.6 GB and 16 s under a 5 s timeout): an answer is held to the request's limit, as over REST,
    and refused unparsed, not retried."""
    space, X = space_and_rows
    from counterplan.planning.remote.oip_grpc import _messages

    limit = answer_limit(len(X))
    flood = _messages()["ModelInferResponse"](model_name="m")
    flood.outputs.add(name="predict_proba", datatype="BYTES", shape=[5, 2])
    flood.raw_output_contents.append(b"\0\0\0\0" * (limit // 4 + 1))  # 272,385 empty texts
    raw = bytes(flood.SerializeToString())
    calls: list[int] = []

    def infer(request: object) -> bytes:
        calls.append(1)
        return raw

    with grpc_server(infer) as target, pytest.raises(RemoteModelError) as info:
        model(f"grpc://{target}/m").predict(X, space)  # type: ignore[arg-type]
    assert f"the answer is larger than {limit:,} bytes (1.04 MiB), the limit of an answer to 5 rows" in str(info.value)
    assert calls == [1]


@pytest.mark.parametrize("status", [200, 500])
def test_an_answer_nested_too_deep_is_a_one_line_error(space_and_rows: tuple[object, np.ndarray], status: int) -> None:
    """A short body of 100,000 ``[``: JSON's decoder recurses per level, so it raises RecursionError,
    which is no ValueError: a wrong answer (200) or the status's error (500), never a stack trace."""
    space, X = space_and_rows
    error = RemoteModelError if status == 200 else RemoteInferenceError
    with scripted_server(Script([(status, "[" * 100_000)])) as base, pytest.raises(error) as info:
        model(f"{base}/v2/models/m").predict(X, space)  # type: ignore[arg-type]
    message = str(info.value)
    assert ("wrong answer: the answer's JSON is nested too deep" if status == 200 else "HTTP 500: [[[") in message
    assert len(message) < 1100


@pytest.mark.parametrize("status", [200, 500])
def test_a_trickled_answer_fails_once_the_timeout_is_past(
    space_and_rows: tuple[object, np.ndarray], status: int
) -> None:
    """An answer whose bytes come 0.4 s apart, each within the 0.5 s read timeout (httpx's bounds
    each read, not the answer; the whole would take 16 s): the call fails as too slow once the
    answer is not whole 0.5 s after the request was sent, naming the timeout, not retried (a
    timeout never is), the rest unread. An error body (500) is read by the same deadline."""
    space, X = space_and_rows
    body = json.dumps(answer(5) if status == 200 else {"error": "ValueError: again"}).encode()
    flood = Flood(cap=40, status=status, chunk=b" ", pause=0.4, tail=body)
    with flooding_server(flood) as base:
        started = time.monotonic()
        with pytest.raises(RemoteModelError) as info:
            model(f"{base}/v2/models/m").predict(X, space)  # type: ignore[arg-type]
        elapsed = time.monotonic() - started
    assert 0.5 <= elapsed < 8.0  # about the timeout, and one read's wait: 0.8 s on an idle machine
    assert "too slow: the answer did not arrive within the read timeout of 0.5 s (the rest not read)" in str(info.value)
    assert flood.ends == ["hung up"] and flood.sent[0] < 40


def test_an_answer_in_pieces_within_the_timeout_is_read_whole(space_and_rows: tuple[object, np.ndarray]) -> None:
    """The deadline costs a normal answer nothing: one that comes in pieces (0.1 s apart) well
    within the timeout is read whole."""
    space, X = space_and_rows
    flood = Flood(cap=4, chunk=b" ", pause=0.1, tail=json.dumps(answer(5)).encode())
    with flooding_server(flood) as base:
        remote = RemoteModel(f"{base}/v2/models/m", classes=[0, 1], retry=QUICK_RETRY, timeout=10.0)
        got = remote.predict(X, space)  # type: ignore[arg-type]
    np.testing.assert_array_equal(got["prediction"], [[0.75, 0.25]] * 5)
    assert flood.ends == ["cap"]


@pytest.mark.parametrize(
    ("metadata", "tls"), [(False, False), (True, False), (False, True)], ids=["infer", "metadata", "tls"]
)
def test_a_trickled_head_fails_once_the_timeout_is_past(
    space_and_rows: tuple[object, np.ndarray], tmp_path: Path, metadata: bool, tls: bool
) -> None:
    """An answer whose status line and headers come a byte every 0.2 s, each well within the 1 s
    read timeout (httpx's bounds each wait for bytes, and httpcore reads a head of up to 100 KiB:
    this one would take 20 s): the call fails as too slow once the timeout is past, its head
    unfinished, not retried, the connection closed; over TLS too, after a whole answer."""
    space, X = space_and_rows
    slow = SlowHead(trickled=100, pause=0.2, metadata=metadata)
    certificate = self_signed(tmp_path) if tls else None
    with slow_head_server(slow, certificate) as base:
        verify = str(certificate[0]) if certificate else True
        remote = RemoteModel(f"{base}/v2/models/m", classes=[0, 1], retry=QUICK_RETRY, timeout=1.0, verify=verify)
        if tls:  # a whole answer first: the handshake, and the connection the slow call reuses
            np.testing.assert_array_equal(remote.predict(X[:2], space)["prediction"], [[0.75, 0.25]] * 2)  # type: ignore[arg-type]
        started = time.monotonic()
        with pytest.raises(RemoteModelError) as info:
            remote.metadata() if metadata else remote.predict(X, space)  # type: ignore[arg-type]
        elapsed = time.monotonic() - started
    assert 1.0 <= elapsed < 8.0  # about the timeout: 1.0 s on an idle machine; 20 s without the deadline
    assert "too slow: no answer within the read timeout of 1 s" in str(info.value)
    assert slow.ends == ["hung up"] and slow.sent[0] < 50  # not retried, the head cut short


def test_a_trickled_head_leaves_the_other_connections_of_its_client_working(
    space_and_rows: tuple[object, np.ndarray],
) -> None:
    """The client is shared between threads: while one thread's call waits on a trickled head,
    the other's calls on the same client go on, and when it fails at its timeout only its own
    connection is closed; the client's keep-alive connection serves the calls after it."""
    space, X = space_and_rows
    slow = SlowHead(trickled=100, pause=0.2, slow_rows=5)
    failures: list[BaseException] = []
    with slow_head_server(slow) as base:
        remote = RemoteModel(f"{base}/v2/models/m", classes=[0, 1], retry=QUICK_RETRY, timeout=1.0)
        remote.predict(X[:2], space)  # type: ignore[arg-type]  # a keep-alive connection, idle
        timing: list[float] = []

        def slow_call() -> None:
            started = time.monotonic()
            try:
                remote.predict(X, space)  # type: ignore[arg-type]
            except RemoteModelError as exc:
                failures.append(exc)
            timing.append(time.monotonic() - started)

        caller = threading.Thread(target=slow_call)
        caller.start()
        during = 0
        while caller.is_alive() and during < 1_000:  # the other thread's calls, on the same client
            remote.predict(X[:2], space)  # type: ignore[arg-type]
            during += 1
            time.sleep(0.01)
        caller.join(30.0)
        opened = slow.connections
        after = [remote.predict(X[:3], space)["prediction"] for _ in range(20)]  # type: ignore[arg-type]
        remote.transport.close()
    assert timing[0] < 8.0 and during > 0 and slow.ends == ["hung up"]  # 20 s without the deadline
    assert len(failures) == 1 and "too slow: no answer within the read timeout of 1 s" in str(failures[0])
    assert slow.connections == opened <= 2  # the calls after reuse a connection the failure left open
    assert slow.normal == 2 + during + 20  # the metadata, the first call, the others': all answered
    np.testing.assert_array_equal(after[-1], [[0.75, 0.25]] * 3)


def test_an_honest_answer_of_many_rows_and_classes_fits_its_limit() -> None:
    """The limit grows with the rows asked: 4,096 rows of 200 classes' probabilities, written as
    a server writes them (17 significant digits), fit; the limit never passes gRPC's 256 MiB."""
    rng = np.random.default_rng(0)
    rows, classes = 4096, 200
    outputs = {"name": "predict_proba", "datatype": "FP64", "shape": [rows, classes]}
    body = json.dumps({"model_name": "m", "outputs": [{**outputs, "data": rng.random(rows * classes).tolist()}]})
    assert len(body.encode()) < answer_limit(rows) < MAX_MESSAGE
    assert answer_limit(10**9) == MAX_MESSAGE
