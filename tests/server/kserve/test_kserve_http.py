"""KServe's explain endpoint over HTTP: the SDK's REST server in this process, on loopback.

The explainer's model here is the scikit-learn model itself (test_kserve_mlserver.py has a real
MLServer as the predictor): what is tested is KServe's side, the routes, the status codes and
the JSON.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

import httpx
import pandas as pd
import pytest
from sklearn.pipeline import Pipeline

from counterplan.server.kserve.request import ExplainLimits
from counterplan.solver.explainer import Explainer
from tests.server.kserve.conftest import TARGET

if TYPE_CHECKING:
    from counterplan.server.kserve.runtime import KServeRuntime

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore:ORJSONResponse is deprecated")]

NAME = "credit-local"
ROWS = [{"income": 40.0, "age": 30, "housing": "rent"}, {"income": 45.5, "age": 52, "housing": "free"}]


@pytest.fixture(scope="module")
def explainer(credit_data: pd.DataFrame, credit_model: Pipeline) -> Explainer:
    return Explainer(credit_model, credit_data, target=TARGET)


@pytest.fixture(scope="module")
def client(kserve_runtime: tuple[KServeRuntime, str], explainer: Explainer) -> Any:
    from counterplan.server.kserve.runtime import CounterplanExplainer

    runtime, url = kserve_runtime
    runtime.add(CounterplanExplainer(NAME, lambda: explainer, ExplainLimits(max_instances=4)))
    with httpx.Client(base_url=url, timeout=60) as http:
        yield http


def explain(client: httpx.Client, body: Any, name: str = NAME) -> httpx.Response:
    return client.post(f"/v1/models/{name}:explain", json=body)


def test_an_explain_request_answers_the_explainers_counterfactuals(client: httpx.Client, explainer: Explainer) -> None:
    response = explain(client, {"instances": ROWS, "parameters": {"seed": 5}})
    assert response.status_code == 200, response.text
    explanations = response.json()["explanations"]
    assert len(explanations) == 2
    for row, got in zip(ROWS, explanations, strict=True):
        expected = explainer.explain(row, seed=5).model_dump(mode="json")
        assert got["valid"] and got["original"] == row
        assert [c["feature"] for c in got["changes"]] and got["predictions"][TARGET]["good"] > 0.5
        for key in ("proposed", "changes", "predictions", "score", "score_levels", "counterfactuals", "goal"):
            assert got[key] == expected[key], key


def test_the_model_is_listed_and_ready(client: httpx.Client) -> None:
    assert client.get(f"/v1/models/{NAME}").json() == {"name": NAME, "ready": True}
    assert client.get(f"/v2/models/{NAME}/ready").status_code == 200


def test_an_unknown_model_is_404(client: httpx.Client) -> None:
    response = explain(client, {"instances": ROWS}, name="nope")
    assert response.status_code == 404
    assert response.json() == {"error": "Model with name nope does not exist."}


def test_an_unknown_models_long_name_is_cut_in_its_404_and_its_log_has_no_traceback(client: httpx.Client) -> None:
    """The SDK answered the name whole (5,000 characters here, up to what uvicorn reads of a
    path) and logged each 404 as an error with its traceback: every echo is cut, and the log
    line is one."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    sdk_log = logging.getLogger("kserve")  # the SDK's own handlers, which do not propagate
    sdk_log.addHandler(handler)
    try:
        response = explain(client, {"instances": ROWS}, name="n" * 5000)
    finally:
        sdk_log.removeHandler(handler)
    assert response.status_code == 404
    error = response.json()["error"]
    assert error.startswith("Model with name nnn") and error.endswith("(5,000 characters) does not exist.")
    assert len(error) < 200
    assert not [r for r in records if r.exc_info], [r.getMessage() for r in records]


def test_kserve_has_no_v2_explain_path(client: httpx.Client) -> None:
    """KServe 0.21 routes explain only as v1's ``:explain`` (the docs say so)."""
    assert client.post(f"/v2/models/{NAME}/explain", json={"instances": ROWS}).status_code == 404


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (ROWS, "body: expected a JSON object with 'instances', given a list"),
        ({"instances": ROWS[0]}, "instances: expected a list of instances, given an object"),
        ({"instances": ROWS * 3}, "instances: at most 4 instances per request, given 6"),
        ({"instances": [{**ROWS[0], "debt": 1}]}, "instances[0].debt: not a feature of the model"),
        ({"instances": [ROWS[0], {**ROWS[1], "age": "old"}]}, "instances[1].age: numeric column given the text 'old'"),
        ({"instances": [ROWS[0], ["a", 1]]}, "instances[1]: expected an object of feature values, given a list"),
        ({"instances": ROWS, "parameters": {"seed": "x"}}, "parameters.seed: Input should be a valid integer"),
        ({"instances": ROWS, "parameters": []}, "parameters: Input should be a valid dictionary"),
        # a gap the logistic regression cannot take: the caller's, not the predictor's (was 500)
        ({"instances": [ROWS[0], {**ROWS[1], "income": None}]}, "instances[1].income: missing in the instance, and"),
    ],
)
def test_a_bad_request_is_400_naming_the_field(client: httpx.Client, body: Any, error: str) -> None:
    response = explain(client, body)
    assert response.status_code == 400, response.text
    text = response.json()["error"]
    assert text.startswith(error)
    assert "\n" not in text and "Traceback" not in text


def test_a_body_that_is_not_json_is_400(client: httpx.Client) -> None:
    response = client.post(
        f"/v1/models/{NAME}:explain", content=b"{instances", headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    assert response.json()["error"].startswith("Unrecognized request format")


@pytest.mark.parametrize(
    "content_type", ["application/json; charset=utf-8", "Application/JSON", "application/vnd.api+json;charset=UTF-8"]
)
def test_a_json_body_is_read_whatever_its_content_types_case_and_parameters(
    client: httpx.Client, explainer: Explainer, content_type: str
) -> None:
    """The SDK decodes a body only for three exact Content-Types: ``application/json;
    charset=utf-8`` (.NET's, many Java clients') reached the explainer as bytes, and a valid
    request was 400 ``body: expected a JSON object with 'instances', given bytes``."""
    body = json.dumps({"instances": ROWS[:1], "parameters": {"seed": 5}}).encode()
    response = client.post(f"/v1/models/{NAME}:explain", content=body, headers={"content-type": content_type})
    assert response.status_code == 200, response.text
    (got,) = response.json()["explanations"]
    assert got["proposed"] == explainer.explain(ROWS[0], seed=5).model_dump(mode="json")["proposed"]


@pytest.mark.parametrize(
    ("content", "content_type", "error"),
    [
        (
            json.dumps({"instances": ROWS}).encode(),
            "application/x-www-form-urlencoded",  # what curl -d sends without -H
            "body: Content-Type 'application/x-www-form-urlencoded' is not JSON: send the body as JSON with "
            "Content-Type: application/json",
        ),
        (b"{instances", "application/json; charset=utf-8", "body: not valid JSON: "),
        (b'{"instances": [{"income": NaN}]}', "application/json; charset=utf-8", "body: not valid JSON: "),
    ],
    ids=["a-form", "broken-json", "nan"],
)
def test_a_body_that_is_not_json_by_its_content_type_is_400_naming_it(
    client: httpx.Client, content: bytes, content_type: str, error: str
) -> None:
    response = client.post(f"/v1/models/{NAME}:explain", content=content, headers={"content-type": content_type})
    assert response.status_code == 400, response.text
    assert response.json()["error"].startswith(error)


class _Broken:
    """The credit model, failing on every call (a predictor that raises)."""

    def __init__(self, model: Pipeline) -> None:
        self.classes_ = model.classes_
        self.feature_names_in_ = model.feature_names_in_

    def predict_proba(self, rows: Any) -> Any:
        raise RuntimeError("the model broke\n  on this line too")


def test_a_model_failing_during_the_search_is_500_in_one_line(
    kserve_runtime: tuple[KServeRuntime, str], client: httpx.Client, credit_data: pd.DataFrame, credit_model: Pipeline
) -> None:
    from counterplan.server.kserve.runtime import CounterplanExplainer

    broken = Explainer(_Broken(credit_model), credit_data, target=TARGET, check=False)
    kserve_runtime[0].add(CounterplanExplainer("credit-broken", lambda: broken))
    response = explain(client, {"instances": ROWS[:1]}, name="credit-broken")
    assert response.status_code == 500, response.text
    text = response.json()["error"]
    assert "the model broke" in text and "\n" not in text and "Traceback" not in text


@pytest.mark.parametrize(
    ("reply", "status"),
    [((503, {"error": "loading"}), 503), ((200, {"outputs": []}), 502)],
    ids=["unavailable", "wrong-answer"],
)
def test_a_predictor_failing_during_the_search_is_a_gateways_status(
    kserve_runtime: tuple[KServeRuntime, str],
    client: httpx.Client,
    credit_data: pd.DataFrame,
    reply: tuple[int, Any],
    status: int,
) -> None:
    """A predictor that is down, or answers wrongly, was 500, as a model raising: the explainer
    is a gateway to it, so 503 (retry later) or 502, with the one-line error."""
    from counterplan.planning.remote import RemoteModel
    from counterplan.planning.remote.transport import RetryPolicy
    from counterplan.server.kserve.runtime import CounterplanExplainer
    from tests.serving.fake_oip import Script, scripted_server

    script = Script([reply])
    with scripted_server(script) as base:
        predictor = RemoteModel(f"{base}/v2/models/p", layout="columns", retry=RetryPolicy(attempts=1), timeout=5)
        served = Explainer(predictor, credit_data, target=TARGET, check=False)
        name = f"credit-predictor-{status}"
        kserve_runtime[0].add(CounterplanExplainer(name, lambda: served))
        response = explain(client, {"instances": ROWS[:1]}, name=name)
    assert response.status_code == status, response.text
    text = response.json()["error"]
    assert text.startswith(f"model '{base}/v2/models/p': ") and "\n" not in text


def test_the_time_a_request_waits_for_a_thread_counts_against_its_request_seconds(
    kserve_runtime: tuple[KServeRuntime, str], explainer: Explainer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Requests past the worker threads wait in the event loop's queue: one whose thread starts
    after its whole ``request_seconds`` gives each instance a millisecond (answering at once), not
    the whole time again (24 concurrent requests of 1 s each once took up to 3.9 s)."""
    import asyncio
    import time

    from counterplan.server.kserve import explaining, runtime

    seen: list[float] = []
    real_capped = explaining.capped

    def spy(config: Any, seconds: float) -> Any:
        seen.append(seconds)
        return real_capped(config, seconds)

    async def late_thread(function: Any, *args: Any, **kwargs: Any) -> Any:
        """The worker thread runs the solves 100 s after the request arrived."""
        return function(*args, clock=lambda: time.monotonic() + 100.0, **kwargs)

    monkeypatch.setattr(explaining, "capped", spy)
    monkeypatch.setattr(runtime.asyncio, "to_thread", late_thread)
    model = runtime.CounterplanExplainer("credit-queued", lambda: explainer, ExplainLimits(request_seconds=5))
    model.load()
    answer = asyncio.run(model.explain({"instances": ROWS, "parameters": {"seed": 5}}))
    assert seen == [1e-3, 1e-3]
    assert len(answer["explanations"]) == 2


def test_a_body_over_the_limit_is_413_before_it_is_read(client: httpx.Client) -> None:
    """uvicorn and the SDK read any body whole (a 200 MB one took 800 MB to refuse): one over
    16 MB is refused by its declared length, and a chunked one (no length) once its bytes pass it."""
    from counterplan.server.kserve.runtime import MAX_BODY_BYTES

    headers = {"content-type": "application/json"}
    declared = client.post(f"/v1/models/{NAME}:explain", content=b" " * (MAX_BODY_BYTES + 1), headers=headers)
    assert declared.status_code == 413
    assert declared.json() == {
        "error": f"body: at most {MAX_BODY_BYTES:,} bytes per request, given {MAX_BODY_BYTES + 1:,}"
    }

    def chunks() -> Any:
        for _ in range(MAX_BODY_BYTES // 2**20 + 1):
            yield b" " * 2**20

    chunked = client.post(f"/v1/models/{NAME}:explain", content=chunks(), headers=headers)
    assert chunked.status_code == 413 and chunked.json()["error"].endswith("per request, given more")
    small = client.post(f"/v1/models/{NAME}:explain", content=json.dumps({"instances": ROWS}).encode(), headers=headers)
    assert small.status_code == 200, small.text


def test_shutdown_stops_the_running_searches_and_answers_their_best_so_far(
    kserve_runtime: tuple[KServeRuntime, str], credit_data: pd.DataFrame, credit_model: Pipeline
) -> None:
    """uvicorn's shutdown waits for requests in flight only for its grace, then cancels them: a
    search longer than the grace (a minute's, under the default 30 s grace) gave its client a bare
    "Internal Server Error". Shutdown now stops the searches first: the request answers its best
    so far, marked stopped early."""
    import asyncio
    import threading

    from counterplan.server.kserve.runtime import CounterplanExplainer, KServeRuntime
    from counterplan.solver.core.config import SolverConfig, TerminationConfig
    from tests.server.kserve.conftest import free_port

    endless = SolverConfig(termination=TerminationConfig(spent_limit_seconds=600.0), phases=({"type": "local_search"},))  # type: ignore[arg-type]
    calls = threading.Semaphore(0)

    class Counted(_Broken):  # the pipeline's answers, each call counted
        def predict_proba(self, rows: Any) -> Any:
            calls.release()
            return credit_model.predict_proba(rows)

    explainer = Explainer(Counted(credit_model), credit_data, target=TARGET, config=endless, check=False)
    model = CounterplanExplainer("credit-endless", lambda: explainer, ExplainLimits(max_instance_seconds=600))
    runtime = KServeRuntime([model], free_port(), host="127.0.0.1")  # not started: only its shutdown runs
    body = {
        "instances": ROWS[:1],
        "parameters": {"spec": {"goals": [{"kind": "class", "target": "good", "confidence": 1}]}},
    }
    answers: list[dict[str, Any]] = []
    request = threading.Thread(target=lambda: answers.append(asyncio.run(model.explain(body))), daemon=True)
    request.start()
    for _ in range(5):  # the search is under way
        assert calls.acquire(timeout=60)
    serving = runtime._rest._server
    serving.servers, serving.force_exit = [], True  # no sockets, connections or lifespan to end
    asyncio.run(serving.shutdown())
    request.join(60)
    assert not request.is_alive()
    (answer,) = answers[0]["explanations"]
    assert answer["stopped_early"] and answer["statistics"]["termination_reason"] == "terminated early"


def test_a_request_past_the_models_max_requests_is_503_and_the_next_one_is_taken(
    kserve_runtime: tuple[KServeRuntime, str], client: httpx.Client, credit_data: pd.DataFrame, credit_model: Pipeline
) -> None:
    """The SDK queued every request without a bound, each holding its body: past ``max_requests``
    (searching or waiting for a thread) a request is 503 with Retry-After, and its place frees
    when a request ends."""
    import threading

    from counterplan.server.kserve.runtime import CounterplanExplainer

    calling, go = threading.Event(), threading.Event()

    class Held(_Broken):  # the pipeline's answers, once the test lets the first call through
        def predict_proba(self, rows: Any) -> Any:
            calling.set()
            assert go.wait(60)
            return credit_model.predict_proba(rows)

    held = Explainer(Held(credit_model), credit_data, target=TARGET, check=False)
    kserve_runtime[0].add(CounterplanExplainer("credit-held", lambda: held, ExplainLimits(max_requests=1)))
    first: list[httpx.Response] = []
    request = threading.Thread(target=lambda: first.append(explain(client, {"instances": ROWS[:1]}, "credit-held")))
    request.start()
    try:
        assert calling.wait(60)  # the first request is searching
        busy = explain(client, {"instances": ROWS[:1]}, "credit-held")
        assert busy.status_code == 503 and busy.headers["retry-after"] == "1"
        assert busy.json() == {"error": "1 requests of 'credit-held' are in the server; retry later"}
    finally:
        go.set()
        request.join(60)
    assert first[0].status_code == 200, first[0].text
    assert explain(client, {"instances": ROWS[:1]}, "credit-held").status_code == 200


def test_a_client_that_leaves_stops_its_search_and_its_later_instances_not_another_requests(
    kserve_runtime: tuple[KServeRuntime, str],
    client: httpx.Client,
    credit_data: pd.DataFrame,
    credit_model: Pipeline,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """uvicorn and Starlette do not cancel a handler whose client closed its connection (only a
    streaming answer listens): the search of a client that gave up ran on to its time limit, a
    worker thread and a core held for nobody. Its search now stops at its next step, its later
    instances never start, and a request whose client stays answers as before."""
    import socket
    import threading
    from urllib.parse import urlsplit

    from counterplan.server.kserve import explaining
    from counterplan.server.kserve.runtime import CounterplanExplainer
    from counterplan.solver.core.config import SolverConfig, TerminationConfig

    endless = SolverConfig(termination=TerminationConfig(spent_limit_seconds=600.0), phases=({"type": "local_search"},))
    calls = threading.Semaphore(0)
    searches: list[float] = []  # one time limit per instance whose search started
    real_capped = explaining.capped

    def counted_capped(config: Any, seconds: float) -> Any:
        searches.append(seconds)
        return real_capped(config, seconds)

    class Counted(_Broken):  # the pipeline's answers, each call counted
        def predict_proba(self, rows: Any) -> Any:
            calls.release()
            return credit_model.predict_proba(rows)

    ended = threading.Event()

    class Watched(CounterplanExplainer):
        async def explain(self, payload: Any, headers: dict[str, str] | None = None) -> dict[str, Any]:
            try:
                return await super().explain(payload, headers)
            finally:
                if payload["parameters"].get("time_limit") is None:
                    ended.set()

    monkeypatch.setattr(explaining, "capped", counted_capped)
    explainer = Explainer(Counted(credit_model), credit_data, target=TARGET, config=endless, check=False)
    limits = ExplainLimits(max_instance_seconds=600, request_seconds=1200)
    kserve_runtime[0].add(Watched("credit-left", lambda: explainer, limits))
    never = {"spec": {"goals": [{"kind": "class", "target": "good", "confidence": 1}]}}
    stays: list[httpx.Response] = []
    kept = {"instances": ROWS[:1], "parameters": {**never, "time_limit": 4}}
    staying = threading.Thread(target=lambda: stays.append(explain(client, kept, "credit-left")), daemon=True)
    staying.start()
    body = json.dumps({"instances": ROWS, "parameters": never}).encode()
    address = urlsplit(str(client.base_url))
    head = (
        f"POST /v1/models/credit-left:explain HTTP/1.1\r\nHost: {address.netloc}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    with socket.create_connection((address.hostname, address.port), timeout=60) as leaving:
        leaving.sendall(head + body)
        while len(searches) < 2:  # both requests' searches are under way
            assert calls.acquire(timeout=60)
        for _ in range(20):
            assert calls.acquire(timeout=60)
    # the client has gone: its search ends at its next step (it would run 600 s, then another 600 s)
    assert ended.wait(60), "the search of a client that left ran on"
    assert len(searches) == 2, "an instance of a client that left was started"
    staying.join(60)
    (kept_answer,) = stays[0].json()["explanations"]
    assert stays[0].status_code == 200
    assert kept_answer["statistics"]["termination_reason"] != "terminated early"


def raw_explain(netloc: str, name: str, body: Any) -> bytes:
    """One explain request as a client writes it on its socket (HTTP/1.1, kept alive)."""
    content = json.dumps(body).encode()
    head = (
        f"POST /v1/models/{name}:explain HTTP/1.1\r\nHost: {netloc}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(content)}\r\n\r\n"
    )
    return head.encode() + content


def read_answer(stream: Any) -> tuple[int, Any]:
    """The status and JSON body of the next answer on ``stream`` (a socket's file; a body with a
    Content-Length, as the SDK answers)."""
    status = int(stream.readline().split()[1])
    length = 0
    while (line := stream.readline()) not in (b"\r\n", b""):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return status, json.loads(stream.read(length))


@pytest.mark.parametrize("together", [True, False], ids=["in-one-write", "while-the-first-searches"])
def test_a_client_that_pipelines_and_leaves_stops_its_running_search(
    kserve_runtime: tuple[KServeRuntime, str],
    client: httpx.Client,
    credit_data: pd.DataFrame,
    credit_model: Pipeline,
    together: bool,
) -> None:
    """HTTP/1.1 pipelining: a client sends its next request on the connection before the answer,
    then closes it. uvicorn's httptools parser made the queued request the connection's current
    one and told only it that the client left: the running request's search ran on to its time
    limit (600 s here), a worker thread and a core held for nobody. Now it stops at its next step
    whether the next request came in the same write or while the first searched (uvicorn then
    stops reading the connection, the close unread), the queued request never starts, and a
    request on another connection answers as before."""
    import socket
    import threading
    from urllib.parse import urlsplit

    from counterplan.server.kserve.runtime import CounterplanExplainer
    from counterplan.solver.core.config import SolverConfig, TerminationConfig

    endless = SolverConfig(termination=TerminationConfig(spent_limit_seconds=600.0), phases=({"type": "local_search"},))
    calls = threading.Semaphore(0)

    class Counted(_Broken):  # the pipeline's answers, each call counted
        def predict_proba(self, rows: Any) -> Any:
            calls.release()
            return credit_model.predict_proba(rows)

    searching, ended = threading.Event(), threading.Event()
    endless_started: list[int] = []  # one per request without a time limit that reached the model

    class Watched(CounterplanExplainer):
        async def explain(self, payload: Any, headers: dict[str, str] | None = None) -> dict[str, Any]:
            timed = payload["parameters"].get("time_limit") is not None
            if not timed:
                endless_started.append(1)
                searching.set()
            try:
                return await super().explain(payload, headers)
            finally:
                if not timed:
                    ended.set()

    name = f"credit-piped-{together}".lower()
    explainer = Explainer(Counted(credit_model), credit_data, target=TARGET, config=endless, check=False)
    limits = ExplainLimits(max_instance_seconds=600, request_seconds=1200)
    kserve_runtime[0].add(Watched(name, lambda: explainer, limits))
    never = {"spec": {"goals": [{"kind": "class", "target": "good", "confidence": 1}]}}
    stays: list[httpx.Response] = []
    kept = {"instances": ROWS[:1], "parameters": {**never, "time_limit": 4}}
    staying = threading.Thread(target=lambda: stays.append(explain(client, kept, name)), daemon=True)
    staying.start()
    address = urlsplit(str(client.base_url))
    request = raw_explain(address.netloc, name, {"instances": ROWS[:1], "parameters": never})
    with socket.create_connection((address.hostname, address.port), timeout=60) as leaving:
        leaving.sendall(request * 2 if together else request)
        assert searching.wait(60)
        for _ in range(10):
            assert calls.acquire(timeout=60)
        if not together:
            leaving.sendall(request)  # the next request, while the first searches
        for _ in range(10):
            assert calls.acquire(timeout=60)
    # the client has gone: the first search ends at its next step (it would run 600 s)
    assert ended.wait(60), "the search of a pipelining client that left ran on"
    staying.join(60)
    (kept_answer,) = stays[0].json()["explanations"]
    assert stays[0].status_code == 200
    assert kept_answer["statistics"]["termination_reason"] != "terminated early"
    quick = explain(client, {"instances": ROWS[:1], "parameters": {"time_limit": 0.2}}, name)
    assert quick.status_code == 200, quick.text  # a queued request would have started by its answer
    assert len(endless_started) == 1, "the queued request of a client that left was started"


def test_a_client_that_pipelines_and_stays_has_its_answers_in_order(
    kserve_runtime: tuple[KServeRuntime, str], client: httpx.Client
) -> None:
    """The server parses HTTP with h11 (for the client that pipelines and leaves, above): a client
    that pipelines and waits has every answer, in the order it asked."""
    import socket
    from urllib.parse import urlsplit

    address = urlsplit(str(client.base_url))
    requests = [raw_explain(address.netloc, NAME, {"instances": [row], "parameters": {"seed": 5}}) for row in ROWS]
    with socket.create_connection((address.hostname, address.port), timeout=60) as pipelining:
        pipelining.sendall(b"".join(requests))
        stream = pipelining.makefile("rb")
        answers = [read_answer(stream) for _ in ROWS]
    for row, (status, answer) in zip(ROWS, answers, strict=True):
        assert status == 200, answer
        assert answer["explanations"][0]["original"] == row


DEEP = "[" * 1020 + "]" * 1020
"""A list nested 1,020 levels: KServe's decoder (orjson) reads JSON up to 1,024 levels deep."""


@pytest.mark.parametrize(
    ("place", "error"),
    [
        ("age", "instances[0].age: numeric column given list […] (nested too deep to show)"),
        ("housing", "instances[0].housing: '[…] (nested too deep to show)' is not one of its categories"),
        ("spec", "parameters.spec.immutable[0]: Input should be a valid string"),
    ],
)
def test_a_value_nested_as_deep_as_json_allows_is_400_naming_its_field(
    client: httpx.Client, place: str, error: str
) -> None:
    """A value nested as deep as the SDK's decoder allows is refused as any value of the wrong kind,
    naming its field: a number's quote (repr) and a category's text (str), which recurse per
    level, raised RecursionError, and its logged traceback (structlog's default rendering) held
    the server's event loop past the client's 30 s. A spec's value is pydantic's to check: that
    case is a guard that it stays so."""
    if place == "spec":
        body = json.dumps({"instances": ROWS[:1], "parameters": {"spec": {"immutable": "DEEP"}}})
    else:
        body = json.dumps({"instances": [{**ROWS[0], place: "DEEP"}]})
    response = client.post(
        f"/v1/models/{NAME}:explain",
        content=body.replace('"DEEP"', DEEP),
        headers={"content-type": "application/json"},
        timeout=30,
    )
    assert response.status_code == 400, response.text[:300]
    text = response.json()["error"]
    assert text.startswith(error), text[:300]
    assert "\n" not in text and "Traceback" not in text and len(text) < 300
