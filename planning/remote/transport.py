"""What a transport does (metadata, infer), how its failures are told apart, and the retries.

A transport (REST: :mod:`counterplan.planning.remote.rest`; gRPC:
:mod:`counterplan.planning.remote.grpc_transport`) raises one of the :class:`TransportError`
kinds below, each with a one-line text; the adapter turns them into counterplan's errors. Only
a :class:`TransientError` failure is retried (refused or reset connections, HTTP 502/503/504, gRPC
UNAVAILABLE): a timeout is not (the caller's time is already spent), nor a refusal (400, 404,
422) or the model's own exception (500, gRPC INTERNAL), which would fail the same way again.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from typing import Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from counterplan.planning.errors import one_line
from counterplan.planning.remote.oip import InferRequest, ModelMetadata, Tensor

T = TypeVar("T")
MAX_MESSAGE = 256 * 1024 * 1024
"""The largest message sent to or read from a served model over gRPC (the channel's limit, one
for all its calls), and the ceiling of an answer's limit (:func:`answer_limit`): gRPC's own
default receive limit (4 MB) is too small for answers of many rows or classes, and 256 MiB is
about 1,700 times the JSON answer of 4,096 rows of two classes (160 KB). A larger answer from a
broken or hostile server fails the call (gRPC RESOURCE_EXHAUSTED; over REST, a
:class:`RefusedError` once the body passes its limit, the rest never read), so it cannot make
the client hold more."""
ANSWER_BYTES = 1024 * 1024
"""What an answer may take whatever its rows (:func:`answer_limit`)."""
ANSWER_BYTES_PER_ROW = 8 * 1024
"""What an answer may take more per row asked: about 400 numbers a row in JSON, where a row's
probabilities of two classes take about 40 bytes (16 in a gRPC message)."""
METADATA_BYTES = 16 * 1024 * 1024
"""The largest metadata answer read: 300,000 inputs' names, datatypes and shapes."""


def answer_limit(rows: int) -> int:
    """The largest answer read (REST) or decoded (gRPC) for a request of ``rows`` rows.

    Decoding JSON takes about eight times the answer's size (a 32 MiB answer of numbers took 257 MiB
    more), and decoding a gRPC message's values into Python's up to ten times (240 MB of empty
    texts took 2.6 GB and 16 s, past the call's deadline), so :data:`MAX_MESSAGE` alone let a
    hostile server make each call in flight hold 2 GiB or more. A limit that grows with the rows
    asked keeps an answer to what the request could need: 1 MiB and 8 KiB a row (3 MiB for 256
    rows, 33 MiB for 4,096), never past :data:`MAX_MESSAGE`."""
    return min(MAX_MESSAGE, ANSWER_BYTES + ANSWER_BYTES_PER_ROW * max(rows, 0))


def answer_bound(rows: int) -> tuple[int, str]:
    """The size limit of an answer to ``rows`` rows (:func:`answer_limit`) and what errors call it."""
    return answer_limit(rows), f"an answer to {rows:,} rows"


def too_large(limit: int, what: str) -> RefusedError:
    """The error of an answer over ``limit`` bytes, the limit of ``what`` (not retried: the server
    would answer the same)."""
    return RefusedError(f"the answer is larger than {limit:,} bytes ({limit / 2**20:.3g} MiB), the limit of {what}")


BODY_CHARS = 65_536
"""An error body is read by at most its last this many characters."""
ERROR_BODY_BYTES = 1024 * 1024
"""An error body (REST) longer than this is not read to its end: the error gives its status alone
(a longer traceback's last line, what :func:`body_line` shows, is past where reading stops)."""


class TransportError(Exception):
    """A call to the server failed; the text is one line."""


class TransientError(TransportError):
    """The server could not be reached or was briefly unavailable: worth another try."""


class CallTimeoutError(TransportError):
    """The server did not answer within the timeout."""


class NotFoundError(TransportError):
    """The server does not know the model (or version)."""


class RefusedError(TransportError):
    """The server refused the request (a 4xx other than 404, or another status)."""


class ModelRaisedError(TransportError):
    """The model raised on the request (HTTP 500, gRPC INTERNAL)."""


class Transport(Protocol):
    """One served model over one protocol."""

    def metadata(self, ends: float = math.inf) -> ModelMetadata:
        """The model's metadata, by ``ends`` (``time.monotonic()``'s) at the latest."""
        ...

    def infer(self, request: InferRequest, ends: float = math.inf) -> tuple[Tensor, ...]:
        """The answer's output tensors, by ``ends`` at the latest."""
        ...

    def close(self) -> None:
        """Release the connection (a later call opens a new one)."""
        ...


class RetryPolicy(BaseModel):
    """Retries of transient failures: at most ``attempts`` calls, waiting ``backoff`` seconds
    after the first failure and twice as long after each next (at most ``max_wait``), and no
    wait that would end after ``budget`` seconds from the first call, nor after the call's
    timeout (a :class:`~counterplan.planning.remote.RemoteModel`'s attempts share its timeout)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    attempts: int = Field(4, ge=1, le=20)
    backoff: float = Field(0.1, ge=0.0, le=60.0)
    max_wait: float = Field(2.0, ge=0.0, le=600.0)
    budget: float = Field(10.0, ge=0.0, le=3600.0)


def with_retries(
    call: Callable[[], T],
    policy: RetryPolicy,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    ends: float = math.inf,
) -> T:
    """``call()``, again after a :class:`TransientError` failure as ``policy`` allows, and never
    once ``ends`` (by ``clock``) has come or would come during the wait: a call's attempts share
    its time, they do not each get it; the last failure says how many attempts were made."""
    start = clock()
    wait = policy.backoff
    attempt = 1
    while True:
        try:
            return call()
        except TransientError as exc:
            now = clock()
            if attempt >= policy.attempts or now - start + wait > policy.budget or now + wait >= ends:
                raise TransientError(f"{exc} (after {attempt} attempt{'s' if attempt > 1 else ''})") from None
        sleep(wait)
        wait = min(wait * 2.0, policy.max_wait)
        attempt += 1


def body_line(text: str) -> str:
    """One line of an error body: a JSON body's ``error`` (MLServer, KServe) or ``detail``
    (FastAPI), else the body's last non-blank line (a Python traceback ends with the exception)."""
    if len(text) > BODY_CHARS:  # the end of a long body: where a traceback says what was raised
        text = text[-BODY_CHARS:]
    try:
        body = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested too deep for the decoder
        body = None
    if isinstance(body, dict):
        for key in ("error", "detail", "message"):
            if key in body:
                value = body[key]
                return one_line(value if isinstance(value, str) else json.dumps(value))
    lines = [line for line in text.splitlines() if line.strip()]
    return one_line(lines[-1] if lines else "(empty body)")


__all__ = [
    "ERROR_BODY_BYTES",
    "ANSWER_BYTES",
    "ANSWER_BYTES_PER_ROW",
    "MAX_MESSAGE",
    "METADATA_BYTES",
    "answer_bound",
    "answer_limit",
    "too_large",
    "CallTimeoutError",
    "ModelRaisedError",
    "NotFoundError",
    "RefusedError",
    "RetryPolicy",
    "TransientError",
    "Transport",
    "TransportError",
    "body_line",
    "with_retries",
]
