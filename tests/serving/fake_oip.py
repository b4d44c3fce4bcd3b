"""Tiny loopback servers that misbehave on purpose: scripted HTTP statuses, answers that never
end or trickle (their body or their head), a gRPC server answering what a test gives, and a
socket that accepts connections and never answers."""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from io import BufferedIOBase
from pathlib import Path
from typing import Any, Literal

METADATA = {"name": "m", "versions": [], "platform": "", "inputs": [], "outputs": [], "parameters": {}}


def answer(rows: int, proba: float | str = 0.25) -> dict[str, Any]:
    """An OIP answer of ``rows`` rows of ``[1 - p, p]`` (``p`` may be "NaN")."""
    data: list[Any] = []
    for _ in range(rows):
        data += [1 - proba, proba] if isinstance(proba, float) else [proba, proba]
    return {
        "model_name": "m",
        "outputs": [{"name": "predict_proba", "datatype": "FP64", "shape": [rows, 2], "data": data}],
    }


class Script:
    """The statuses (and bodies, and headers) the infer route answers, in order; the last repeats;
    each ``delay`` seconds after the request came."""

    def __init__(
        self, replies: list[tuple[int, Any]] | list[tuple[int, Any, dict[str, str]]], delay: float = 0.0
    ) -> None:
        self.replies = replies
        self.delay = delay
        self.infer_calls = 0
        self.bodies: list[Any] = []
        self.raw_bodies: list[bytes] = []
        self.headers: list[dict[str, str]] = []
        """Each infer request's headers, names in lower case."""


@contextmanager
def scripted_server(script: Script) -> Iterator[str]:
    """An HTTP server answering metadata with :data:`METADATA` and infer by ``script``; yields its
    base URL."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
            text = body if isinstance(body, str) else json.dumps(body)
            raw = text.encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json" if not isinstance(body, str) else "text/plain")
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self) -> None:
            self._send(200, METADATA)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length)
            body = json.loads(raw)
            script.bodies.append(body)
            script.raw_bodies.append(raw)
            script.headers.append({k.lower(): v for k, v in self.headers.items()})
            i = min(script.infer_calls, len(script.replies) - 1)
            script.infer_calls += 1
            status, reply, *headers = script.replies[i]
            rows = body["inputs"][0]["shape"][0]
            time.sleep(script.delay)
            try:
                self._send(status, answer(rows) if reply is None else reply, *headers)
            except OSError:  # the client left before the answer
                self.close_connection = True

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Flood:
    """An answer that goes on: ``status`` and a body of ``chunk``s framed by ``framing`` (no
    length, ended by closing the connection; chunked; a declared ``Content-Length`` of 1 TB; or
    gzip-compressed with no length, which the client decodes as it reads), sent to every POST
    (and GET too when ``metadata``) until the client hangs up or ``cap`` bytes of body are sent,
    so that a client which reads it all ends too; then ``tail`` (with the close framing, whitespace
    chunks and a JSON ``tail`` are a whole answer). A ``pause`` between chunks makes it a trickle:
    each chunk comes well within the client's read timeout, the whole never does. ``sent`` counts
    each answer's body bytes written, before compression (what the client's socket took: at most
    its kernel buffers more than it read), and ``ends`` how each ended: "hung up" (the client
    closed the connection), "cap" or "stalled" (a write blocked for 10 s: the client neither read
    nor closed)."""

    cap: int
    status: int = 200
    framing: Literal["close", "chunked", "declared", "gzip"] = "close"
    metadata: bool = False
    chunk: bytes = b"0.25," * 13_107
    pause: float = 0.0
    tail: bytes = b""
    sent: list[int] = field(default_factory=list)
    ends: list[str] = field(default_factory=list)

    def headers(self) -> dict[str, str]:
        """The answer's headers of its framing."""
        return {
            "close": {},
            "chunked": {"Transfer-Encoding": "chunked"},
            "declared": {"Content-Length": str(10**12)},
            "gzip": {"Content-Encoding": "gzip"},
        }[self.framing]

    def framer(self) -> Callable[[bytes], bytes]:
        """What one answer writes for each chunk of its body (a new compressor per answer)."""
        if self.framing == "chunked":
            return lambda chunk: b"%x\r\n%s\r\n" % (len(chunk), chunk)
        if self.framing == "gzip":
            return zlib.compressobj(1, zlib.DEFLATED, 31).compress
        return lambda chunk: chunk


def pour(
    out: BufferedIOBase,
    chunk: bytes,
    frame: Callable[[bytes], bytes],
    cap: int,
    pause: float = 0.0,
    tail: bytes = b"",
) -> tuple[int, str]:
    """Write ``frame(chunk)`` to ``out`` again and again (``pause`` seconds apart) until ``cap``
    bytes of ``chunk`` are sent, then ``frame(tail)``, or until a write fails: the body's bytes
    sent and why it ended (see :class:`Flood`)."""
    sent = 0
    try:
        while sent < cap:
            if pause and sent:
                time.sleep(pause)
            out.write(frame(chunk))
            sent += len(chunk)
        if tail:
            out.write(frame(tail))
            sent += len(tail)
    except TimeoutError:
        return sent, "stalled"
    except OSError:
        return sent, "hung up"
    return sent, "cap"


@contextmanager
def flooding_server(flood: Flood) -> Iterator[str]:
    """An HTTP server answering as ``flood`` says (GET otherwise with :data:`METADATA`); yields its
    base URL."""

    class Handler(BaseHTTPRequestHandler):
        timeout = 10.0  # a write blocked this long ends the answer (as "stalled")

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            if flood.metadata:
                self._flood()
                return
            raw = json.dumps(METADATA).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self._flood()

        def _flood(self) -> None:
            self.protocol_version = "HTTP/1.1" if flood.framing == "chunked" else "HTTP/1.0"
            self.send_response(flood.status)
            self.send_header("Content-Type", "application/json")
            for name, value in flood.headers().items():
                self.send_header(name, value)
            self.end_headers()
            sent, end = pour(self.wfile, flood.chunk, flood.framer(), flood.cap, flood.pause, flood.tail)
            flood.sent.append(sent)
            flood.ends.append(end)
            self.close_connection = True

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = False  # closing the server waits for its answers: their counts are complete
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class SlowHead:
    """Answers whose head (status line and headers) trickles: one byte every ``pause`` seconds
    for its first ``trickled`` bytes (each wait well within the client's read timeout, the whole
    never), then the rest of the head and a whole answer at once, so that a client which waits
    for it all ends too. Slow are the infer POSTs of ``slow_rows`` rows (and the metadata GET
    when ``metadata``); every other request is answered at once, over HTTP/1.1 keep-alive.
    ``sent`` counts each slow answer's bytes written, ``ends`` how each ended ("hung up": the
    client closed the connection; "whole"; leaving the server waits for them), ``started`` the slow
    answers begun, ``connections`` the connections accepted and ``normal`` the requests answered at
    once."""

    trickled: int = 100
    pause: float = 0.2
    slow_rows: int = 5
    metadata: bool = False
    sent: list[int] = field(default_factory=list)
    ends: list[str] = field(default_factory=list)
    started: int = 0
    connections: int = 0
    normal: int = 0


def trickle(out: BufferedIOBase, answer: bytes, trickled: int, pause: float) -> tuple[int, str]:
    """Write ``answer``'s first ``trickled`` bytes one at a time, ``pause`` seconds apart, then
    the rest at once: the bytes written and how it ended ("whole", or "hung up" when a write
    failed)."""
    sent = 0
    try:
        for byte in answer[:trickled]:
            if sent:
                time.sleep(pause)
            out.write(bytes([byte]))
            sent += 1
        out.write(answer[trickled:])
    except OSError:
        return sent, "hung up"
    return len(answer), "whole"


@contextmanager
def slow_head_server(slow: SlowHead, tls: tuple[Path, Path] | None = None) -> Iterator[str]:
    """An HTTP/1.1 keep-alive server answering as ``slow`` says (infer with :func:`answer`, GET
    with :data:`METADATA`), over TLS with ``tls``'s certificate and key (for "localhost"); yields
    its base URL."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = 30.0  # an idle keep-alive connection is dropped after this long

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def setup(self) -> None:
            super().setup()
            slow.connections += 1

        def do_GET(self) -> None:
            self._answer(METADATA, slow.metadata)

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            rows = body["inputs"][0]["shape"][0]
            self._answer(answer(rows), rows == slow.slow_rows)

        def _answer(self, reply: dict[str, Any], slowly: bool) -> None:
            raw = json.dumps(reply).encode()
            head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            head += b"X-Slow: " + b"." * slow.trickled + b"\r\n"
            whole = head + b"Content-Length: %d\r\n\r\n" % len(raw) + raw
            if not slowly:
                slow.normal += 1
                self.wfile.write(whole)
                return
            slow.started += 1
            sent, end = trickle(self.wfile, whole, slow.trickled, slow.pause)
            self.close_connection = end == "hung up"
            slow.sent.append(sent)
            slow.ends.append(end)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)  # its threads are daemons: keep-alive ones idle
    if tls is not None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(*tls)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        yield f"https://localhost:{port}" if tls is not None else f"http://127.0.0.1:{port}"
    finally:
        ends = time.monotonic() + slow.trickled * slow.pause + 10.0
        while len(slow.ends) < slow.started and time.monotonic() < ends:  # the slow answers' counts complete
            time.sleep(0.05)
        server.shutdown()
        server.server_close()


@contextmanager
def grpc_server(infer: Callable[[Any], Any]) -> Iterator[str]:
    """A gRPC OIP server on loopback: ``ModelMetadata`` declares nothing, ``ModelInfer`` answers
    ``infer(request)``, a ``ModelInferResponse`` or raw bytes sent as they are (an answer that is
    no message). Yields the server's ``HOST:PORT``."""
    from concurrent import futures

    import grpc

    from counterplan.planning.remote.oip_grpc import _messages

    messages = _messages()

    def metadata(request: Any, context: Any) -> Any:
        return messages["ModelMetadataResponse"](name=request.name)

    def serialize(answer: Any) -> bytes:
        return answer if isinstance(answer, bytes) else bytes(answer.SerializeToString())

    methods = {
        "ModelMetadata": grpc.unary_unary_rpc_method_handler(
            metadata,
            request_deserializer=messages["ModelMetadataRequest"].FromString,
            response_serializer=serialize,
        ),
        "ModelInfer": grpc.unary_unary_rpc_method_handler(
            lambda request, context: infer(request),
            request_deserializer=messages["ModelInferRequest"].FromString,
            response_serializer=serialize,
        ),
    }
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("inference.GRPCInferenceService", methods),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(0)


@contextmanager
def silent_socket() -> Iterator[int]:
    """A listening socket whose connections are accepted (by the kernel) and never answered."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield int(listener.getsockname()[1])


def closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
