"""The KServe model: ``POST /v1/models/NAME:explain`` answered with counterfactuals.

:class:`CounterplanExplainer` is a ``kserve.Model`` whose :meth:`~CounterplanExplainer.explain`
reads the request (:mod:`~counterplan.server.kserve.request`), solves it off the event loop
(:mod:`~counterplan.server.kserve.explaining`, in a worker thread: a search is CPU work and would
block every other request) and answers the results as ``counterplan explain --json`` prints them.
The explainer (the data's profile, the model adapter, the rules) is built once, at ``load``.

A client that leaves (closes its connection) before its answer stops its request's searches at
their next step, and its later instances never start (:class:`_ClientWatch`): no worker thread
and core searches on for nobody. That holds for a client that pipelines (sends its next requests
on the connection before the answer) too, which is why the server parses HTTP with uvicorn's
``h11`` implementation, not ``httptools`` (see :class:`_ClientWatch`).

Errors: a request that breaks its form, its limits or the model's schema is KServe's
``InvalidInput`` (HTTP 400, ``{"error": "instances[0].income: ..."}``); a predictor that cannot be
reached or is too slow is HTTP 503, one that refuses or answers wrongly 502
(:class:`PredictorError`, a gateway's statuses); another failure of the model while the search
runs is ``InferenceError`` (HTTP 500); one line each, never a traceback.

:class:`KServeRuntime` serves one such model with the SDK's ``ModelServer`` (its model repository
and data plane) and ``RESTServer`` on a chosen host: ``ModelServer.start`` binds ``0.0.0.0``
(hard-coded in ``RESTServer``) and runs only on the main thread, so the runtime starts the REST
server itself, the same way on the command line (main thread, uvicorn stops on SIGTERM/SIGINT)
and in tests (a thread, stopped with :meth:`KServeRuntime.stop`). It loads the ``kserve`` SDK:
only ``counterplan kserve`` imports it, after :func:`counterplan.server.kserve.sdk.import_kserve`.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

import orjson
import structlog
from kserve import Model, ModelServer
from kserve.errors import InferenceError, InvalidInput, ModelNotFound
from kserve.protocol.rest.server import RESTServer

from counterplan.planning.errors import TEXT_CHARS, CounterplanError, RemoteModelError, cut, echo, one_line
from counterplan.server.kserve.explaining import SolveStops, explain_instances
from counterplan.server.kserve.request import ExplainLimits, RequestError, read_request
from counterplan.solver.explainer import Explainer

log = structlog.get_logger(__name__)

MAX_BODY_BYTES = 16 * 2**20
"""A request body at most (16 MB: a request of the most instances a runtime may allow is far
smaller). uvicorn and the SDK set no limit: a 200 MB body was read, parsed and refused as a 400
with 800 MB of memory."""
FASTAPI_APP = "kserve.model_server:app"
"""The SDK's one FastAPI app (module-global): one runtime per process."""
HTTP_IMPLEMENTATION = "h11"
"""uvicorn's HTTP/1.1 parser: ``h11``, not the ``httptools`` it picks when installed. With
pipelined requests ``httptools`` tells only the newest, queued request that its client left, and
the running one never learns (:class:`_ClientWatch`); ``h11`` reads no further request until the
running one is answered, so the running one is told."""
WATCH_SECONDS = (0.5, 1.0, 2.0, 4.0, 8.0)
"""How long :class:`_ClientWatch` waits for a disconnect before it asks again, then the last
one for ever: asking lets uvicorn read on a connection it paused (the client pipelined), where
its close waits; each ask reads at most one chunk of what the client sent on."""
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
JSON_MEDIA_TYPE = re.compile(r"application/(?:[\w.+-]+\+)?json")
"""The Content-Types read as JSON (RFC 8259's, and RFC 6839's ``+json`` suffix), matched on the
media type alone, lower-cased: its parameters (``; charset=utf-8``) say nothing a JSON reader needs."""
_REQUEST_STOPS: ContextVar[SolveStops | None] = ContextVar("counterplan_kserve_request_stops", default=None)
"""The searches of the explain request served in this context, stopped when its client leaves:
set by :class:`_ClientWatch`, read by :meth:`CounterplanExplainer.explain` (``None`` outside a
served request, as when a test calls it)."""


class CounterplanExplainer(Model):  # type: ignore[misc]  # kserve ships no type hints: its Model is Any
    """A KServe model answering ``:explain`` with counterfactuals of ``build()``'s explainer.

    Parameters
    ----------
    name:
        The model's name in the URL; by KServe's convention the InferenceService's, which is also
        the predictor's model name.
    build:
        Builds the explainer (reads the data, connects the model); called once, by :meth:`load`.
    limits:
        The bounds of every request.
    """

    def __init__(self, name: str, build: Callable[[], Explainer], limits: ExplainLimits | None = None) -> None:
        super().__init__(name)
        self._build = build
        self.limits = limits or ExplainLimits()
        self.explainer: Explainer | None = None
        self.stops = SolveStops()
        """Its running searches, stopped when the server shuts down (each answers its best so far)."""
        self._open = 0
        """Its requests in the server now (``limits.max_requests`` at most; guarded by ``_lock``)."""
        self._lock = threading.Lock()

    def load(self) -> bool:
        """Build the explainer; the model is ready once it is."""
        self.explainer = self._build()
        self.ready = True
        log.info("kserve explainer loaded", model=self.name, features=len(self.explainer.columns))
        return True

    def validate(self, payload: Any) -> Any:
        """The body as it came: :func:`~counterplan.server.kserve.request.read_request` checks it in
        :meth:`explain`, naming the field. The SDK's own check, which follows the predictor protocol
        its argument parser defaults to (v1, whatever ``--predictor-protocol`` says), would answer
        ``{"instances": {...}}`` first with its own ``Expected "instances" to be a list``."""
        return payload

    async def explain(self, payload: Any, headers: dict[str, str] | None = None) -> dict[str, Any]:
        """KServe's explain verb: ``{"explanations": [...]}`` for ``{"instances": [...]}``."""
        arrived = time.monotonic()  # the wait for a worker thread is part of the request's time
        explainer = self.explainer
        if explainer is None:  # KServe answers 503 for a model not ready before it calls this
            raise InferenceError("the explainer is not loaded")
        with self._lock:
            busy = self._open >= self.limits.max_requests
            self._open += 0 if busy else 1
        if busy:
            log.info("explain request refused", model=self.name, error="busy", open=self.limits.max_requests)
            raise BusyError(f"{self.limits.max_requests} requests of {self.name!r} are in the server; retry later")
        cancelled = _REQUEST_STOPS.get()
        try:
            request = read_request(json_body(payload, headers), self.limits)
            answer = await asyncio.to_thread(
                explain_instances,
                explainer,
                request,
                self.limits,
                arrived=arrived,
                stops=self.stops,
                cancelled=cancelled,
            )
        except RequestError as exc:
            raise InvalidInput(exc.text) from None
        except RemoteModelError as exc:  # the predictor down, too slow, or answering wrongly: a gateway's status
            log.warning("predictor failed", model=self.name, error=one_line(str(exc)))
            raise PredictorError(one_line(str(exc), TEXT_CHARS), unavailable=exc.unavailable) from None
        except CounterplanError as exc:  # the model failed during the search: the predictor's fault
            raise InferenceError(one_line(str(exc), TEXT_CHARS)) from None
        except Exception as exc:  # never a traceback in an answer; the log has the details
            log.exception("explain failed", model=self.name)
            raise InferenceError(one_line(f"{type(exc).__name__}: {exc}", TEXT_CHARS)) from None
        finally:
            with self._lock:
                self._open -= 1
        if cancelled is not None and cancelled.stopped:  # the answer goes nowhere: said in the log
            done = len(answer["explanations"])
            log.info("explain request abandoned", model=self.name, explained=done, instances=len(request.instances))
        return answer


def json_body(payload: Any, headers: Mapping[str, str] | None) -> Any:
    """The body as the SDK decoded it, or decoded here when the SDK left it as bytes.

    The SDK decodes a body only when its Content-Type is one of three exact strings
    (``application/json``, ...), so ``application/json; charset=utf-8`` (as .NET's and many Java
    clients send it) or ``Application/JSON`` reached :meth:`CounterplanExplainer.explain` as bytes,
    and a valid request was refused with ``given bytes``. A JSON media type (:data:`JSON_MEDIA_TYPE`)
    is decoded here as the SDK decodes (orjson: no NaN, 1,024 levels at most); another is refused
    naming it (``curl -d`` without a header sends a form).
    """
    if not isinstance(payload, bytes | bytearray):
        return payload
    given = (headers or {}).get("content-type", "")
    if not JSON_MEDIA_TYPE.fullmatch(given.partition(";")[0].strip().lower()):
        raise RequestError(
            "body", f"Content-Type {echo(given)} is not JSON: send the body as JSON with Content-Type: application/json"
        )
    try:
        return orjson.loads(payload)
    except orjson.JSONDecodeError as exc:
        raise RequestError("body", f"not valid JSON: {exc}") from None


class BusyError(Exception):
    """A model has ``max_requests`` requests in the server: HTTP 503 with ``Retry-After``."""


class PredictorError(Exception):
    """The predictor failed the explainer's calls as a gateway's upstream does: HTTP 503 when it
    could not be reached or answered too slowly (``unavailable``), 502 when it refused or
    answered in a form that cannot be read; its one-line error either way. (The model raising
    on the candidates is not this: the search counts those rows as failed.)"""

    def __init__(self, text: str, *, unavailable: bool) -> None:
        super().__init__(text)
        self.unavailable = unavailable


class KServeRuntime:
    """Explainers served over KServe's REST protocol on ``host:port``.

    ``run()`` blocks until the server stops: on the main thread, at SIGTERM or SIGINT (uvicorn's
    handlers, which wait for the requests in flight within ``grace_seconds``); on any thread, at
    :meth:`stop`. Either way the running searches are told to stop first, so those requests answer
    their best so far rather than being cut by the grace. The SDK's FastAPI app is module-global
    and takes its routes and middleware once: one runtime per process (it may serve several
    models, added before or while it runs).
    """

    def __init__(
        self, models: Sequence[CounterplanExplainer], port: int, host: str = "0.0.0.0", grace_seconds: int = 30
    ) -> None:
        self.server = ModelServer(http_port=port, enable_grpc=False, workers=1, grace_period=grace_seconds)
        self.models: list[CounterplanExplainer] = []
        self.names: list[str] = []
        for model in models:
            self.add(model)
        self._rest = _RESTServer(
            FASTAPI_APP,
            self.server.dataplane,
            self.server.model_repository_extension,
            port,
            grace_period=grace_seconds,
        )
        self._rest.config.host = host
        self._rest.config.http = HTTP_IMPLEMENTATION
        serving = self._rest._server
        shutdown = serving.shutdown

        async def stop_searches_first(sockets: Any = None) -> None:
            """uvicorn's shutdown (a signal's or :meth:`stop`'s), the running searches told to stop
            first: the requests in flight answer their best so far within the grace."""
            for model in self.models:
                model.stops.stop()
            await shutdown(sockets)

        serving.shutdown = stop_searches_first

    def add(self, model: CounterplanExplainer) -> None:
        """Load ``model`` (build its explainer) and serve it under its name."""
        model.load()
        self.server.register_model(model)
        self.models.append(model)
        self.names.append(model.name)

    def run(self) -> None:
        """Serve until stopped. On the main thread, SIGTERM and SIGINT stop it and ``run``
        returns: uvicorn handles them while it serves, then raises them again for the handlers
        it found, which here only log (the default ones would end the process by the signal)."""
        config = self._rest.config
        log.info("kserve explainer serving", models=self.names, host=config.host, port=config.port)
        if threading.current_thread() is not threading.main_thread():
            asyncio.run(self._rest.start())
            return
        found = {sig: signal.signal(sig, _stopped) for sig in STOP_SIGNALS}
        try:
            asyncio.run(self._rest.start())
        finally:
            for sig, handler in found.items():
                signal.signal(sig, handler)

    def stop(self) -> None:
        """Ask the server to stop (from any thread); ``run()`` returns once it has."""
        self._rest._server.should_exit = True  # uvicorn's stop switch (its signal handler's)

    @property
    def started(self) -> bool:
        """True once the server listens."""
        return bool(self._rest._server.started)


class _RESTServer(RESTServer):  # type: ignore[misc]  # kserve ships no type hints: its RESTServer is Any
    """The SDK's REST server, refusing a bad request in one log line (the SDK's own handler logs
    each 400 with its traceback, and a client sending bad input would fill the log), and a body
    over :data:`MAX_BODY_BYTES` before it is read whole."""

    def _add_middlewares(self, app: Any) -> None:
        super()._add_middlewares(app)
        app.add_middleware(_BodyLimit, limit=MAX_BODY_BYTES)  # the last added runs first
        app.add_middleware(_ClientWatch)  # first: it sees the body's last bytes as the server gives them

    def _add_exception_handlers(self, app: Any) -> None:
        super()._add_exception_handlers(app)
        app.add_exception_handler(InvalidInput, _refused)
        app.add_exception_handler(ModelNotFound, _not_found)  # replaces the SDK's
        app.add_exception_handler(BusyError, _busy)
        app.add_exception_handler(PredictorError, _predictor_failed)


async def _refused(request: Any, exc: InvalidInput) -> Any:
    """HTTP 400 with ``{"error": "..."}``, as the SDK answers it, logged in one line."""
    from fastapi.responses import JSONResponse  # noqa: PLC0415 - the SDK's web framework

    log.info("explain request refused", path=request.url.path, error=str(exc))
    return JSONResponse(status_code=400, content={"error": str(exc)})


_NOT_FOUND = re.compile(r"Model with name (.*) does not exist\.", re.DOTALL)
"""The SDK's text of an unknown model (:class:`ModelNotFound` keeps only its text)."""


async def _not_found(request: Any, exc: ModelNotFound) -> Any:
    """HTTP 404 with ``{"error": "Model with name NAME does not exist."}``, as the SDK answers it,
    the name cut as every echo of a caller's input is (a 5,000-character name in the path was
    answered whole), and logged in one line (the SDK logs each 404 as an error with its
    traceback, and the name in it: a client asking for unknown models filled the log)."""
    from fastapi.responses import JSONResponse  # noqa: PLC0415 - the SDK's web framework

    named = _NOT_FOUND.fullmatch(str(exc))
    error = f"Model with name {cut(named[1])} does not exist." if named else one_line(str(exc))
    log.info("model not found", path=cut(request.url.path), error=error)
    return JSONResponse(status_code=404, content={"error": error})


async def _busy(request: Any, exc: BusyError) -> Any:
    """HTTP 503 with ``{"error": "..."}`` and ``Retry-After: 1``: the client backs off and retries."""
    from fastapi.responses import JSONResponse  # noqa: PLC0415 - the SDK's web framework

    return JSONResponse(status_code=503, content={"error": str(exc)}, headers={"Retry-After": "1"})


async def _predictor_failed(request: Any, exc: PredictorError) -> Any:
    """HTTP 503 (the predictor unavailable: retry later) or 502 (it answered wrongly), with
    ``{"error": "..."}``."""
    from fastapi.responses import JSONResponse  # noqa: PLC0415 - the SDK's web framework

    return JSONResponse(status_code=503 if exc.unavailable else 502, content={"error": str(exc)})


class _BodyTooLargeError(Exception):
    """A body grew past the limit while the app read it (a chunked body declares no length)."""


class _BodyLimit:
    """ASGI middleware: HTTP 413 for a body over ``limit`` bytes, by its declared length before a
    byte is read, else (chunked) as soon as the bytes read pass it."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.limit:
            await self._refuse(scope, send, f"given {int(declared):,}")
            return
        read = 0

        async def counted() -> Any:
            nonlocal read
            message = await receive()
            read += len(message.get("body", b""))
            if read > self.limit:
                raise _BodyTooLargeError
            return message

        try:
            await self.app(scope, counted, send)
        except _BodyTooLargeError:
            await self._refuse(scope, send, "given more")

    async def _refuse(self, scope: Any, send: Any, given: str) -> None:
        from fastapi.responses import JSONResponse  # noqa: PLC0415 - the SDK's web framework

        error = f"body: at most {self.limit:,} bytes per request, {given}"
        log.info("explain request refused", path=scope.get("path"), error=error)
        await JSONResponse(status_code=413, content={"error": error})(scope, _no_body, send)


class _ClientWatch:
    """ASGI middleware: an explain request's searches stopped when its client leaves.

    uvicorn tells an app that its client left only through ``receive`` (``http.disconnect``), and
    neither it nor Starlette cancels a handler that does not read (only a streaming answer listens):
    the searches of a client that gave up ran on to their time limit, a worker thread and a core
    held for nobody. Once the app has read the whole body, this reads on for it (the ASGI spec:
    after the body, ``receive`` waits for the disconnect) and on a disconnect stops the request's
    :class:`SolveStops`, handed to :meth:`CounterplanExplainer.explain` in a context variable
    (the SDK calls it in the request's own task). A client that stays sees no change.

    A client that pipelines (sends its next request on the connection before the answer), then
    leaves, needs two more things (read in uvicorn 0.54's source; either alone leaves a case of
    its test failing):

    - :data:`HTTP_IMPLEMENTATION` ``h11``. ``httptools`` parses the next request at once and
      makes it the connection's current one, queued (its app runs only once the running one has
      answered, and not at all once the connection is closed); ``connection_lost`` marks only the
      current one disconnected, so the running request's ``receive`` never returns, and nothing
      ASGI gives an app is per connection (scope, ``receive``, ``send``) to learn it another way.
      ``h11`` parses no next request until the answer: the running one is marked.
    - Asking again. While a pipelined request waits, uvicorn stops reading the connection (both
      parsers), so a close that comes after it is never read; each ``receive`` call resumes
      reading. The watch cancels its ``receive`` and calls it again after each of
      :data:`WATCH_SECONDS` (a cancelled ``receive`` loses nothing: Starlette's
      ``Request.is_disconnected`` asks the same way): the close is read within the last of them,
      and a client that pipelines on and on has one read of it buffered per ask, not all of it.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope.get("path", "").endswith(":explain"):
            await self.app(scope, receive, send)
            return
        stops = SolveStops()
        watch: asyncio.Task[None] | None = None

        async def until_gone() -> None:
            for seconds in _watch_seconds():
                try:
                    message = await asyncio.wait_for(receive(), seconds)
                except TimeoutError:
                    continue
                if message["type"] == "http.disconnect":
                    stops.stop()
                    return

        async def read() -> Any:
            nonlocal watch
            message = await receive()
            if watch is None and message["type"] == "http.request" and not message.get("more_body", False):
                watch = asyncio.create_task(until_gone())
            return message

        token = _REQUEST_STOPS.set(stops)
        try:
            await self.app(scope, read, send)
        finally:
            _REQUEST_STOPS.reset(token)
            if watch is not None:
                watch.cancel()


def _watch_seconds() -> Iterator[float]:
    """:data:`WATCH_SECONDS`, the last repeated for ever."""
    yield from WATCH_SECONDS
    yield from itertools.repeat(WATCH_SECONDS[-1])


async def _no_body() -> dict[str, Any]:
    """An ASGI ``receive`` with nothing more to read (the refusal does not read the body)."""
    return {"type": "http.request", "body": b"", "more_body": False}


def _stopped(sig: int, frame: Any) -> None:
    """A stop signal raised again once the server has stopped: logged; ``run`` then returns."""
    log.info("kserve explainer stopped", signal=signal.Signals(sig).name)
