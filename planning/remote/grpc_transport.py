"""The OIP over gRPC, with grpcio (a dependency of counterplan already; imported on first use).

Calls go through ``channel.unary_unary`` with the messages of
:mod:`counterplan.planning.remote.oip_grpc` (a private descriptor pool: no clash with kserve's
stubs). Every call has a deadline (the adapter's timeout). The channel is opened on the first
call, shared by threads (gRPC channels are thread-safe), never pickled, and opened again in a
forked child (a batch's worker process), which must not use its parent's.
"""

from __future__ import annotations

import math
import os
import threading
import time
from typing import TYPE_CHECKING, Any

from counterplan.planning.errors import one_line
from counterplan.planning.remote import oip_grpc
from counterplan.planning.remote.oip import InferRequest, ModelMetadata, Tensor
from counterplan.planning.remote.transport import (
    MAX_MESSAGE,
    METADATA_BYTES,
    CallTimeoutError,
    ModelRaisedError,
    NotFoundError,
    RefusedError,
    TransientError,
    answer_bound,
    too_large,
)
from counterplan.planning.remote.url import ModelAddress

if TYPE_CHECKING:
    import grpc


class GrpcTransport:
    """One served model over gRPC (``inference.GRPCInferenceService``)."""

    def __init__(self, address: ModelAddress, timeout: float, headers: dict[str, str] | None = None) -> None:
        self.address = address
        self.timeout = timeout
        self.headers = tuple((k.lower(), v) for k, v in (headers or {}).items())
        self._channel: grpc.Channel | None = None
        self._calls: dict[str, Any] = {}
        self._pid = os.getpid()
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_channel"] = None
        state["_calls"] = {}
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def _call(self, method: str) -> Any:
        """The channel's callable of ``method``, the channel opened on first use."""
        with self._lock:
            if self._channel is not None and self._pid != os.getpid():
                self._channel, self._calls = None, {}  # a forked child's copy of the parent's: not its own
            if self._channel is None:
                import grpc  # noqa: PLC0415

                options = [
                    ("grpc.max_send_message_length", MAX_MESSAGE),
                    ("grpc.max_receive_message_length", MAX_MESSAGE),
                ]
                target = self.address.base_url
                self._channel = (
                    grpc.secure_channel(target, grpc.ssl_channel_credentials(), options)
                    if self.address.tls
                    else grpc.insecure_channel(target, options)
                )
                self._pid = os.getpid()
            if method not in self._calls:  # the answer comes as bytes: parsed by _send, not by grpc
                serialize, _ = oip_grpc.codecs(method)
                self._calls[method] = self._channel.unary_unary(
                    oip_grpc.SERVICE + method, request_serializer=serialize, response_deserializer=None
                )
            return self._calls[method]

    def close(self) -> None:
        """Close the channel (a later call opens a new one)."""
        with self._lock:
            channel, self._channel, self._calls = self._channel, None, {}
        if channel is not None:
            channel.close()

    def metadata(self, ends: float = math.inf) -> ModelMetadata:
        """``ModelMetadata``."""
        message = oip_grpc.metadata_request(self.address.model_name, self.address.version)
        return oip_grpc.read_metadata(self._send("ModelMetadata", message, ends, (METADATA_BYTES, "the metadata")))

    def infer(self, request: InferRequest, ends: float = math.inf) -> tuple[Tensor, ...]:
        """``ModelInfer``."""
        message = oip_grpc.infer_request(request, self.address.model_name, self.address.version)
        return oip_grpc.read_outputs(self._send("ModelInfer", message, ends, answer_bound(request.rows)))

    def _send(self, method: str, message: Any, ends: float, bound: tuple[int, str]) -> Any:
        """The answer to ``message``, parsed here: grpc would report an answer that does not
        parse as the server's INTERNAL error, which reads as the model's own failure. An answer
        over ``bound``'s limit in bytes (of what it names, as over REST) is refused unparsed: the
        channel takes messages up to :data:`MAX_MESSAGE` for any call, and decoding one takes
        many times its size, after the call's deadline."""
        import grpc  # noqa: PLC0415

        call = self._call(method)
        left = min(self.timeout, ends - time.monotonic())  # the deadline: the timeout, or what is left of it
        if left <= 0:
            raise CallTimeoutError(f"no answer within the deadline of {self.timeout:g} s")
        try:
            answer = call(message, timeout=left, metadata=self.headers or None)
        except grpc.RpcError as exc:
            code = exc.code() if isinstance(exc, grpc.Call) else grpc.StatusCode.UNKNOWN
            details = one_line((exc.details() if isinstance(exc, grpc.Call) else None) or str(code))
            line = f"gRPC {code.name}: {details}"
            if code == grpc.StatusCode.UNAVAILABLE:
                raise TransientError(line) from None
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise CallTimeoutError(f"no answer within the deadline of {self.timeout:g} s") from None
            if code == grpc.StatusCode.NOT_FOUND:
                raise NotFoundError(line) from None
            if code in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN):
                raise ModelRaisedError(line) from None
            raise RefusedError(line) from None
        if len(answer) > bound[0]:
            raise too_large(*bound)
        return oip_grpc.parse_answer(method, answer)


__all__ = ["GrpcTransport"]
