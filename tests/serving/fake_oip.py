"""Tiny loopback servers that misbehave on purpose: scripted HTTP statuses, and a socket that
accepts connections and never answers."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

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
    """The statuses (and bodies) the infer route answers, in order; the last repeats."""

    def __init__(self, replies: list[tuple[int, Any]]) -> None:
        self.replies = replies
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

        def _send(self, status: int, body: Any) -> None:
            text = body if isinstance(body, str) else json.dumps(body)
            raw = text.encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json" if not isinstance(body, str) else "text/plain")
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
            status, reply = script.replies[i]
            rows = body["inputs"][0]["shape"][0]
            self._send(status, answer(rows) if reply is None else reply)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


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
