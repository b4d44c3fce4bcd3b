"""A REST call's deadline on every wait for bytes, the answer's head included.

httpx's read timeout bounds each wait for bytes, not the answer: a server that trickles its
answer a byte every (timeout - epsilon) seconds holds a call for as long as it likes, through
the body and through the head too (the status line and headers, which httpcore reads up to
100 KiB: a byte a second, 28 hours), and with the call the KServe or gRPC request and the
worker thread behind it. So every connection of a REST client reads and writes through a
:class:`DeadlineStream`, which cuts each wait to what is left of the calling thread's deadline
(:data:`CALL`, which :class:`~counterplan.planning.remote.rest.RestTransport` sets around a
call) and, once it is past, fails at once as httpcore's read (or write) timeout: httpx raises
it as its own, and httpcore closes that one connection (its answer is left unfinished), the
client's other connections, other threads' calls on the shared client, untouched.

Why not a watchdog that shuts the call's socket at its deadline: which of the pool's
connections a call gets is not known before its head has arrived, and a timer per call costs
a thread; this costs a thread-local attribute and a clock read per socket read or write, and
nothing outside a call.

httpx does not let its caller give httpcore a network backend (encode/httpx#3749, open), so
:func:`bind_deadlines` sets one on the connection pools the client has built, through httpx's
private attributes; a client whose pools are not found is refused with a clear error, never
left to run unbounded.
"""

from __future__ import annotations

import math
import ssl
import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import httpcore

from counterplan.planning.errors import ModelAdapterError

if TYPE_CHECKING:
    import httpx


class CallDeadline(threading.local):
    """The calling thread's deadline, ``time.monotonic()``'s; ``math.inf`` outside a call."""

    at: float = math.inf


CALL = CallDeadline()
"""Set by a call around its request and its answer's reading, for its own thread alone."""


def time_left(timeout: float | None, error: type[httpcore.TimeoutException]) -> float | None:
    """``timeout`` (httpx's, for one wait; None: none) cut to what is left of the calling
    thread's deadline; past it, ``error`` at once (a timeout of 0 would mean "do not wait" to
    the socket, a read error, not a timeout)."""
    at = CALL.at
    if at == math.inf:
        return timeout
    left = at - time.monotonic()
    if left <= 0:
        raise error("the call's deadline has passed")
    return left if timeout is None or left < timeout else timeout


class DeadlineStream(httpcore.NetworkStream):
    """A connection's stream whose every wait ends by the calling thread's deadline."""

    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, time_left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, time_left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        return DeadlineStream(self._stream.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's network backend whose connections are :class:`DeadlineStream`\\ s."""

    def __init__(self, backend: httpcore.NetworkBackend) -> None:
        self._backend = backend

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        wait = time_left(timeout, httpcore.ConnectTimeout)
        return DeadlineStream(self._backend.connect_tcp(host, port, wait, local_address, socket_options))

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        wait = time_left(timeout, httpcore.ConnectTimeout)
        return DeadlineStream(self._backend.connect_unix_socket(path, wait, socket_options))

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


def bind_deadlines(client: httpx.Client) -> None:
    """Every connection ``client`` opens (its own and its proxies' pools) waits by :data:`CALL`;
    a client whose pools are not where httpx 0.27 and 0.28 keep them raises
    :class:`~counterplan.planning.errors.ModelAdapterError`, and nothing is changed."""
    transports = [client._transport, *(t for t in client._mounts.values() if t is not None)]
    pools: list[Any] = [getattr(transport, "_pool", None) for transport in transports]
    if not all(isinstance(getattr(pool, "_network_backend", None), httpcore.NetworkBackend) for pool in pools):
        import httpx  # noqa: PLC0415 - the caller's, loaded

        raise ModelAdapterError(
            "protocol",
            f"httpx {httpx.__version__} keeps its connections where counterplan cannot bound a call's whole time "
            "(its deadline); install an httpx counterplan supports: pip install 'httpx>=0.27,<0.29'",
        )
    for pool in pools:
        if not isinstance(pool._network_backend, DeadlineBackend):
            pool._network_backend = DeadlineBackend(pool._network_backend)
