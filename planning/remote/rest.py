"""The OIP over REST, with httpx (the ``remote`` extra, imported on first use).

One keep-alive client per transport, opened on the first call and never pickled (a copy sent to
a batch worker or a Ray task opens its own, and so does a forked worker); httpx's client is safe
to share between threads.
Every call has a connect and a read timeout: a server that accepts and never answers fails
after the read timeout, never hangs. httpx's read timeout bounds each wait for bytes, not the
answer, so the whole answer, its head (status line and headers) and its body, is also read by a
deadline: it must have arrived within ``timeout`` of sending the request (the whole call's bound,
as gRPC's deadline is, and what ``--predictor-timeout`` promises), else the call fails as a
timeout, the rest unread and that connection closed; every wait for bytes ends by the deadline
(:mod:`~counterplan.planning.remote.rest_deadline`), so a server that trickles its head or its
body a byte at a time cannot hold a call, and the KServe or gRPC request and worker thread behind
it, past its timeout. Every answer is streamed and read within a size limit (an inference
answer's grows with the rows asked, :func:`~counterplan.planning.remote.transport.answer_limit`;
the metadata's is :data:`~counterplan.planning.remote.transport.METADATA_BYTES`; an error body's
:data:`~counterplan.planning.remote.transport.ERROR_BODY_BYTES`): a larger or endless body fails
the call once the limit is passed (or at once, by its ``Content-Length``), and the response is
closed without reading the rest, so a broken or hostile server cannot exhaust the client's memory.

What a call costs is mostly the server's (decoding the inputs, the model); the client keeps its
own share small. It asks for answers uncompressed (``Accept-Encoding: identity``): MLServer's
gzip middleware otherwise compresses every answer over 500 bytes at level 9, which doubled the
server's CPU time for 4,000 rows (46 against 21 ms, docs/how-to/serving.md). The body is written
once, compact, as bytes, and sent with headers and URL merged once per client, past httpx's
per-request building.
"""

from __future__ import annotations

import json
import math
import os
import ssl
import threading
import time
from typing import TYPE_CHECKING, Any

from counterplan.planning.errors import ModelAdapterError, echo, one_line
from counterplan.planning.remote.oip import (
    InferRequest,
    ModelMetadata,
    ProtocolFormError,
    Tensor,
    metadata_from_json,
    outputs_from_json,
    request_json,
)
from counterplan.planning.remote.transport import (
    ERROR_BODY_BYTES,
    METADATA_BYTES,
    CallTimeoutError,
    ModelRaisedError,
    NotFoundError,
    RefusedError,
    TransientError,
    answer_bound,
    body_line,
    too_large,
)
from counterplan.planning.remote.url import ModelAddress

if TYPE_CHECKING:
    import httpx

TRANSIENT_STATUS = frozenset({502, 503, 504})
DEFAULT_HEADERS = {"Accept-Encoding": "identity"}
"""Sent unless the caller's headers say otherwise: no compressed answers (see the module's text)."""


class RestTransport:
    """One served model over REST (``/v2/models/NAME[/versions/V]``)."""

    def __init__(
        self,
        address: ModelAddress,
        timeout: float,
        connect_timeout: float,
        headers: dict[str, str] | None = None,
        verify: bool | str = True,
    ) -> None:
        self.address = address
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.headers = dict(headers or {})
        self.verify = verify
        self._client: httpx.Client | None = None
        self._post_headers: httpx.Headers | None = None
        self._urls: dict[str, httpx.URL] = {}
        self._pid = os.getpid()
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_client"] = None
        state["_post_headers"] = None
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def client(self) -> httpx.Client:
        """The keep-alive client, opened on first use (and again in a forked child: a batch's
        worker processes start as copies of the parent, whose connections are not theirs)."""
        return self._opened()[0]

    def _opened(self) -> tuple[httpx.Client, httpx.Headers]:
        """The client and the headers of a POST (the client's, with the JSON content type)."""
        with self._lock:
            if self._client is not None and self._pid != os.getpid():
                self._client = None  # the parent's: left to it, not closed
            if self._client is None:
                try:
                    import httpx  # noqa: PLC0415 - the remote extra, loaded when a served model is called
                except ImportError:
                    raise ModelAdapterError(
                        "protocol", "a REST model needs httpx: pip install 'counterplan[remote]'"
                    ) from None
                headers = httpx.Headers(DEFAULT_HEADERS)
                headers.update(self.headers)  # the caller's win, whatever their case
                from counterplan.planning.remote.rest_deadline import bind_deadlines  # noqa: PLC0415 - needs httpx

                client = httpx.Client(
                    base_url=self.address.base_url,
                    headers=headers,
                    timeout=httpx.Timeout(self.timeout, connect=self.connect_timeout),
                    verify=tls_verify(self.verify),
                    follow_redirects=False,
                )
                try:
                    bind_deadlines(client)
                except ModelAdapterError:
                    client.close()
                    raise
                self._client = client
                self._post_headers = httpx.Headers(self._client.headers)
                self._post_headers["Content-Type"] = "application/json"
                self._urls = {}
                self._pid = os.getpid()
            assert self._post_headers is not None
            return self._client, self._post_headers

    def close(self) -> None:
        """Close the client (a later call opens a new one)."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    def metadata(self, ends: float = math.inf) -> ModelMetadata:
        """``GET /v2/models/NAME[/versions/V]``."""
        return metadata_from_json(
            self._call("GET", self.address.model_path, None, ends, (METADATA_BYTES, "the metadata"))
        )

    def infer(self, request: InferRequest, ends: float = math.inf) -> tuple[Tensor, ...]:
        """``POST .../infer``."""
        body = request_json(request)
        return outputs_from_json(
            self._call("POST", self.address.model_path + "/infer", body, ends, answer_bound(request.rows))
        )

    def _call(self, method: str, path: str, body: dict[str, Any] | None, ends: float, bound: tuple[int, str]) -> Any:
        """The JSON of a 200 answer; any other status, or a body over ``bound``'s limit in bytes (of
        what it names: :func:`~counterplan.planning.remote.transport.answer_bound`), as a transport error."""
        limit, what = bound
        status, raw, charset, location = self._exchange(method, path, body, ends, limit)
        if status == 200:
            if raw is None:
                raise too_large(limit, what)
            try:
                return json.loads(raw)
            except ValueError:
                raise ProtocolFormError("the answer is not JSON") from None
            except RecursionError:  # "[[[[...": the decoder recurses per level
                raise ProtocolFormError("the answer's JSON is nested too deep") from None
        if raw is None:
            line = f"(an error body over {ERROR_BODY_BYTES:,} bytes ({ERROR_BODY_BYTES >> 20} MiB), not read)"
        else:
            line = body_line(decoded(raw, charset))
        if 300 <= status < 400:  # a gateway sending http to https, a moved route: said, not followed
            where = f" to {echo(location)}" if location else ""
            raise RefusedError(f"HTTP {status}: redirected{where}; redirects are not followed: give the address")
        if status == 404:
            raise NotFoundError(f"HTTP 404: {line}")
        if status in TRANSIENT_STATUS:
            raise TransientError(f"HTTP {status}: {line}")
        if status == 500:
            raise ModelRaisedError(f"HTTP 500: {line}")
        raise RefusedError(f"HTTP {status}: {line}")

    def _exchange(
        self, method: str, path: str, body: dict[str, Any] | None, ends: float, limit: int
    ) -> tuple[int, bytes | None, str | None, str | None]:
        """One request: the answer's status, its body (None when over ``limit``: :func:`read_within`),
        its charset and its ``Location``; httpx's failures as transport errors, and so an answer, head or body, not
        whole ``timeout`` seconds after the request was sent, or by ``ends`` when that comes first
        (:class:`CallTimeoutError`, as a read timeout: every wait for its bytes, and for the
        connection, ends by then, :mod:`~counterplan.planning.remote.rest_deadline`)."""
        import httpx  # noqa: PLC0415

        from counterplan.planning.remote.rest_deadline import CALL  # noqa: PLC0415 - needs httpx

        client, post_headers = self._opened()
        try:
            if body is None:
                request = client.build_request(method, path)
            else:  # built here, not by client.request: its URL and header merging cost more than the JSON
                content = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
                url = self._urls.get(path) or self._urls.setdefault(path, client.build_request(method, path).url)
                request = httpx.Request(method, url, headers=post_headers, content=content)
            CALL.at = min(time.monotonic() + self.timeout, ends)  # the whole call's, as gRPC's deadline
            response = client.send(request, stream=True)
            try:  # closed however the read ends: an unread rest closes the connection, never drained
                status = response.status_code
                raw = read_within(response, limit if status == 200 else ERROR_BODY_BYTES)
                return status, raw, response.charset_encoding, response.headers.get("Location")
            except httpx.TimeoutException:  # a wait for the body's bytes, cut short by the deadline
                raise CallTimeoutError(
                    f"the answer did not arrive within the read timeout of {self.timeout:g} s (the rest not read)"
                ) from None
            finally:
                response.close()
        except httpx.TimeoutException as exc:
            kind = "connect" if isinstance(exc, httpx.ConnectTimeout) else "read"
            waited = self.connect_timeout if kind == "connect" else self.timeout
            raise CallTimeoutError(f"no answer within the {kind} timeout of {waited:g} s") from None
        except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
            raise TransientError(f"cannot reach the server: {one_line(str(exc) or type(exc).__name__)}") from None
        except httpx.HTTPError as exc:
            raise RefusedError(one_line(f"{type(exc).__name__}: {exc}")) from None
        finally:
            CALL.at = math.inf


def tls_verify(verify: bool | str) -> bool | ssl.SSLContext:
    """httpx's ``verify`` for ours: a CA bundle's path (a file, or a directory of certificates)
    as an SSL context of it, as httpx itself read a path before 0.28 deprecated passing one."""
    if not isinstance(verify, str):
        return verify
    if os.path.isdir(verify):
        return ssl.create_default_context(capath=verify)
    return ssl.create_default_context(cafile=verify)


def read_within(response: httpx.Response, limit: int) -> bytes | None:
    """The body of a streamed ``response`` (decoded, as httpx gives it), or None once it is over
    ``limit`` bytes: by its declared ``Content-Length`` before reading any, else as soon as the
    bytes read pass the limit (a lying or missing length, an endless body), the rest unread.

    Its time is the call's: every wait for bytes ends by the call's deadline (httpx's read
    timeout bounds each wait, not the body, so a body trickled a byte at a time, each within
    it, would otherwise be read for as long as the server likes), and a wait past it raises
    httpx's read timeout (:mod:`~counterplan.planning.remote.rest_deadline`)."""
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > limit and "Content-Encoding" not in response.headers:
        return None
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def decoded(raw: bytes, charset: str | None) -> str:
    """``raw`` as text in ``charset`` (UTF-8 when there is none or it is unknown), bad bytes replaced."""
    try:
        return raw.decode(charset or "utf-8", errors="replace")
    except LookupError:
        return raw.decode("utf-8", errors="replace")


__all__ = ["RestTransport"]
