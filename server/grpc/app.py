"""Build and run the gRPC server: the service, health, reflection, auth, TLS and shutdown.

Health says SERVING once the models are loaded and NOT_SERVING as soon as shutdown starts;
running solves are told to stop at their next step, and the server is gone within
``grace_seconds``: a call whose solve is still inside a model call near the grace's end answers
with its best so far, and the solve is abandoned (see :meth:`RunningServer.stop`). With
``auth_token`` set, every call but health and reflection needs ``authorization: Bearer <token>``
(UNAUTHENTICATED otherwise).
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import grpc
import structlog
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from counterplan.server._generated.counterplan.v1 import counterplan_pb2 as pb, counterplan_pb2_grpc as pb_grpc
from counterplan.server.grpc.decoding import DecodeRequests
from counterplan.server.grpc.service import CounterfactualService
from counterplan.server.grpc.settings import ServerSettings
from counterplan.server.registry.registry import ModelRegistry
from counterplan.solver.core.abandoned import still_running

log = structlog.get_logger("counterplan.server")

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["CounterfactualService"].full_name
_CLIENT_STREAMING = {
    f"/{SERVICE_NAME}/{m.name}"
    for m in pb.DESCRIPTOR.services_by_name["CounterfactualService"].methods
    if m.client_streaming
}
"""Methods whose client streams (ExplainBatch): denied with a handler of their own kind."""
_OPEN_PREFIXES = ("/grpc.health.",)
"""Open without the token: health checks (an orchestrator's probe carries none). Reflection
describes the service, so it needs the token when one is set."""
_REFLECTION = "/grpc.reflection."


if TYPE_CHECKING:
    _Interceptor = grpc.ServerInterceptor[Any, Any]
else:
    _Interceptor = grpc.ServerInterceptor


class ReflectionStreamLimit(_Interceptor):
    """At most ``limit`` reflection streams at once; more are refused with RESOURCE_EXHAUSTED.

    A reflection stream holds a worker thread for as long as the client keeps it open, idle or
    not: eight idle ones once took all eight workers, so solves and health checks timed out.
    """

    def __init__(self, limit: int) -> None:
        self._slots = threading.BoundedSemaphore(limit)
        self._limit = limit

    def intercept_service(self, continuation: Callable[[Any], Any], details: grpc.HandlerCallDetails) -> Any:
        """Wrap reflection's stream so it takes a slot while it runs."""
        handler = continuation(details)
        if handler is None or not (details.method or "").startswith(_REFLECTION) or handler.stream_stream is None:
            return handler
        inner = handler.stream_stream
        slots, limit = self._slots, self._limit

        def limited(requests: Any, context: grpc.ServicerContext) -> Any:
            if not slots.acquire(blocking=False):
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, f"{limit} reflection streams are open; retry later")
            try:
                yield from inner(requests, context)
            finally:
                slots.release()

        return grpc.stream_stream_rpc_method_handler(
            limited, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer
        )


class BearerTokenInterceptor(_Interceptor):
    """Refuses calls without ``authorization: Bearer <token>`` (health checks are open)."""

    def __init__(self, token: str) -> None:
        self._expected = f"Bearer {token}".encode()

        def deny(request: Any, context: grpc.ServicerContext) -> Any:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")

        self._deny_unary = grpc.unary_unary_rpc_method_handler(deny)
        self._deny_stream = grpc.unary_stream_rpc_method_handler(deny)
        self._deny_bidi = grpc.stream_stream_rpc_method_handler(deny)

    def intercept_service(self, continuation: Callable[[Any], Any], details: grpc.HandlerCallDetails) -> Any:
        """Pass authorised calls on; deny the rest."""
        method = details.method or ""
        if method.startswith(_OPEN_PREFIXES):
            return continuation(details)
        given = dict(details.invocation_metadata or ()).get("authorization", "")
        given_bytes = given.encode() if isinstance(given, str) else bytes(given)
        if hmac.compare_digest(given_bytes, self._expected):
            return continuation(details)
        if method.startswith(_REFLECTION) or method in _CLIENT_STREAMING:
            return self._deny_bidi
        return self._deny_stream if method.endswith("Stream") else self._deny_unary


_SEND_SECONDS = 1.0
"""The answers get this long, within the grace, to go out: after the last solve ended, or after
the cut that answers without the solves still running (shutdown's grace minus this)."""


@dataclass
class RunningServer:
    """A started server: stop it with :meth:`stop`."""

    server: grpc.Server
    port: int
    health: health.HealthServicer
    service: CounterfactualService
    settings: ServerSettings

    def stop(self, grace: float | None = None) -> None:
        """Shut down gracefully, within ``grace`` seconds (the setting by default).

        Health says NOT_SERVING first, and still answers while solves wind down; new solves are
        refused (UNAVAILABLE); running solves are told to stop at their next step and answer
        with their best so far. A solve inside a model call cannot stop before the call ends, so
        when the grace is nearly up (:data:`_SEND_SECONDS` before its end) every call still
        waiting answers without its solve, with the best it has scored so far, and the solve is
        abandoned (it makes no model call more; its thread ends after the call it is in, in the
        background). Then the server stops, giving those answers the rest of the grace to be
        sent, and cuts what is left: this returns within the grace, whatever the model does.
        """
        grace = self.settings.grace_seconds if grace is None else grace
        started = time.monotonic()
        self.health.enter_graceful_shutdown()
        self.service.begin_shutdown()
        finished = self.service.wait_idle(max(grace - _SEND_SECONDS, 0.0))
        if not finished:  # the grace is nearly up: answer with the best so far, now
            self.service.cut_calls()
        idle = finished or self.service.wait_idle(max(grace - (time.monotonic() - started), 0.0))
        # the answers only need sending now; open watch or reflection streams would hold the rest
        remaining = max(grace - (time.monotonic() - started), 0.0)
        self.server.stop(min(_SEND_SECONDS, remaining) if idle else 0.0).wait()
        self.service.shutdown()
        log.info(
            "server stopped",
            port=self.port,
            solves_finished=finished,
            abandoned=self.abandoned,
            seconds=round(time.monotonic() - started, 3),
        )

    @property
    def abandoned(self) -> int:
        """Solves abandoned at shutdown: their threads may still be inside a model call."""
        return self.service.admission.abandoned

    @property
    def target(self) -> str:
        """``host:port`` to dial."""
        return f"{self.settings.address}:{self.port}"


def start_server(settings: ServerSettings, registry: ModelRegistry | None = None) -> RunningServer:
    """Load the models, start serving, and return at once."""
    if registry is None:
        registry = (
            ModelRegistry.from_directory(settings.models_dir, settings.trust_pickle)
            if settings.models_dir is not None
            else ModelRegistry.demo()
        )
    # the first wraps the others: the token is checked before anything is decoded
    interceptors: list[grpc.ServerInterceptor[Any, Any]] = [
        ReflectionStreamLimit(settings.max_reflection_streams),
        DecodeRequests(),
    ]
    if settings.auth_token:
        interceptors.insert(0, BearerTokenInterceptor(settings.auth_token))
    options = [
        ("grpc.max_receive_message_length", settings.max_message_bytes),
        ("grpc.max_send_message_length", settings.max_message_bytes),
    ]
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=settings.workers, thread_name_prefix="counterplan-grpc"),
        interceptors=interceptors,
        options=options,
    )
    service = CounterfactualService(registry, settings)
    pb_grpc.add_CounterfactualServiceServicer_to_server(service, server)  # type: ignore[no-untyped-call]
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        (SERVICE_NAME, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME), server
    )
    address = f"{settings.address}:{settings.port}"
    if settings.tls_cert is not None and settings.tls_key is not None:
        credentials = grpc.ssl_server_credentials([(settings.tls_key.read_bytes(), settings.tls_cert.read_bytes())])
        port = server.add_secure_port(address, credentials)
    else:
        port = server.add_insecure_port(address)
    server.start()
    for name in ("", SERVICE_NAME):
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    log.info(
        "server started",
        address=settings.address,
        port=port,
        models=[m.id for m in registry.list()],
        tls=settings.tls_cert is not None,
        auth=settings.auth_token is not None,
    )
    return RunningServer(server, port, health_servicer, service, settings)


def serve(settings: ServerSettings, registry: ModelRegistry | None = None) -> None:
    """Run until SIGINT or SIGTERM, then shut down gracefully, within the grace.

    A solve abandoned at shutdown (its thread inside a model call that outlasts the grace) would
    keep the process alive: a ``ThreadPoolExecutor`` joins its workers at interpreter exit, daemon
    or not, and a thread inside a model's native code cannot be stopped from Python. Its call has
    been answered, so the process then ends at once with ``os._exit(0)``, after its log and output
    are flushed (nothing else is left to clean up: the server and the pools are stopped). Only
    then: a shutdown that abandoned nothing exits normally. An exact search abandoned by its own
    time limit (:mod:`counterplan.solver.core.abandoned`) counts too: a normal exit would wait for
    it, well past the grace. Whatever else holds the exit up (a thread a model's library left
    running), the process ends :data:`EXIT_MARGIN_SECONDS` after the grace (:func:`_exit_by`).
    ``registry``: the models to serve (default: the settings' models directory, or the demo).
    """
    running = start_server(settings, registry)
    stopping = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        log.info("shutdown requested", signal=signal.Signals(signum).name)
        stopping.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    print(f"counterplan serving on {running.target}", flush=True)
    stopping.wait()
    _exit_by(settings.grace_seconds + EXIT_MARGIN_SECONDS)
    running.stop()
    native = still_running()  # an exact search given up on (HiGHS's root cuts look at no clock)
    if running.abandoned or native:
        log.info("exiting without waiting for abandoned solves", abandoned=running.abandoned, searches=native)
        _flush()
        os._exit(0)


EXIT_MARGIN_SECONDS = 10.0
"""How long past the grace a stopped server's exit may take before it is cut short
(:func:`_exit_by`)."""


def _exit_by(seconds: float) -> None:
    """End the process ``seconds`` from now if it has not ended by then: a shutdown's promise
    (gone within the grace) held whatever else the process runs. A thread that is not a daemon
    (one a model's library started and never ends) kept a stopped server's process alive for
    good, its calls all answered: the interpreter's exit waits for every such thread. The exit
    is logged with the threads still running, and its code is 0, as an exit past abandoned
    solves (:func:`serve`)."""

    def cut() -> None:
        time.sleep(seconds)
        names = sorted(t.name for t in threading.enumerate() if t is not threading.current_thread())
        log.warning("exit stalled past the grace: ending the process", seconds=round(seconds, 3), threads=names[:20])
        _flush()
        os._exit(0)

    threading.Thread(target=cut, name="counterplan-exit-by", daemon=True).start()


def _flush() -> None:
    """Flush what the process has written, before an exit that runs no cleanup."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    logging.shutdown()
