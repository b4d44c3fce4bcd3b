"""Requests whose bytes are not the method's message: INVALID_ARGUMENT, not grpcio's INTERNAL.

grpcio decodes a request before any handler runs; bytes that do not decode end the call with
INTERNAL "Exception deserializing request!" and a stack trace in the server log, which blames
the server for the client's bytes. :class:`DecodeRequests` hands the handlers the raw bytes and
decodes them itself: a unary request that does not decode is refused with INVALID_ARGUMENT
naming the message type; a streamed one raises :class:`UndecodableRequest` from the request
iterator, which the stream's reader turns into the same refusal once the instances read before
it are answered (``batch_stream``), or, where the handler lets it out, this interceptor does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import grpc

from counterplan.server.grpc.convert import BadRequestError
from counterplan.server.grpc.refusal import Refusal, bad_request

if TYPE_CHECKING:
    _Interceptor = grpc.ServerInterceptor[Any, Any]
else:
    _Interceptor = grpc.ServerInterceptor


class UndecodableRequest(Exception):  # noqa: N818 - named for what the client sent
    """A streamed request whose bytes are not the method's message (``index``: from 1)."""

    def __init__(self, message_type: str, index: int) -> None:
        super().__init__(f"message {index:,} is not a valid {message_type}")
        self.message_type = message_type
        self.index = index

    def refusal(self) -> Refusal:
        """INVALID_ARGUMENT naming the message and its place in the stream."""
        return undecodable(self.message_type, self.index)


def undecodable(message_type: str, index: int | None = None) -> Refusal:
    """INVALID_ARGUMENT for bytes that are not a ``message_type`` (the request, or a stream's
    ``index``-th message)."""
    where = "request" if index is None else f"request (message {index:,} of the stream)"
    return bad_request(
        BadRequestError(
            [(where, f"its bytes are not a valid {message_type} message; send the method's request message")]
        )
    )


def _message_type(method: str, decode: Callable[[bytes], Any]) -> str:
    """The request's message type for errors: the class whose ``FromString`` decodes it."""
    owner = getattr(decode, "__self__", None)
    descriptor = getattr(owner, "DESCRIPTOR", None)
    name = getattr(descriptor, "full_name", None)
    return name if isinstance(name, str) else f"request of {method}"


class DecodeRequests(_Interceptor):
    """Every handler gets its requests decoded here, so bytes that do not decode are the client's
    INVALID_ARGUMENT (see the module's docstring)."""

    def intercept_service(self, continuation: Callable[[Any], Any], details: grpc.HandlerCallDetails) -> Any:
        """The handler with raw bytes in and decoding inside."""
        handler = continuation(details)
        if handler is None or handler.request_deserializer is None:
            return handler
        decoder = _Decoder(
            handler.request_deserializer, _message_type(details.method or "", handler.request_deserializer)
        )
        serialize = handler.response_serializer
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                decoder.unary(handler.unary_unary), response_serializer=serialize
            )
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                decoder.unary_streamed(handler.unary_stream), response_serializer=serialize
            )
        if handler.stream_unary is not None:
            return grpc.stream_unary_rpc_method_handler(
                decoder.streamed(handler.stream_unary), response_serializer=serialize
            )
        return grpc.stream_stream_rpc_method_handler(
            decoder.streamed_streamed(handler.stream_stream), response_serializer=serialize
        )


_Behaviour = Callable[[Any, grpc.ServicerContext], Any]


class _Decoder:
    """Wraps a handler's behaviour of each kind so that it takes raw bytes."""

    def __init__(self, decode: Callable[[bytes], Any], message_type: str) -> None:
        self._decode = decode
        self._message_type = message_type

    def _one(self, raw: bytes, context: grpc.ServicerContext) -> Any:
        try:
            return self._decode(raw)
        except Exception:
            undecodable(self._message_type).abort(context)

    def _many(self, raws: Iterator[bytes]) -> Iterator[Any]:
        for index, raw in enumerate(raws, start=1):
            try:
                request = self._decode(raw)
            except Exception:
                raise UndecodableRequest(self._message_type, index) from None
            yield request

    def unary(self, behaviour: _Behaviour) -> _Behaviour:
        """A unary request, a unary response."""
        return lambda raw, context: behaviour(self._one(raw, context), context)

    def unary_streamed(self, behaviour: _Behaviour) -> _Behaviour:
        """A unary request, streamed responses."""

        def decoded(raw: bytes, context: grpc.ServicerContext) -> Iterator[Any]:
            yield from behaviour(self._one(raw, context), context)

        return decoded

    def streamed(self, behaviour: _Behaviour) -> _Behaviour:
        """Streamed requests, a unary response."""

        def decoded(raws: Iterator[bytes], context: grpc.ServicerContext) -> Any:
            try:
                return behaviour(self._many(raws), context)
            except UndecodableRequest as error:
                error.refusal().abort(context)

        return decoded

    def streamed_streamed(self, behaviour: _Behaviour) -> _Behaviour:
        """Streamed requests, streamed responses."""

        def decoded(raws: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[Any]:
            try:
                yield from behaviour(self._many(raws), context)
            except UndecodableRequest as error:
                error.refusal().abort(context)

        return decoded
