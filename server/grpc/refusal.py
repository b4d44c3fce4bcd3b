"""Why a solve is refused, as one ``google.rpc.Status`` for every way the service answers.

A unary or server-streaming call that is refused ends with the status (``Refusal.abort``); an
instance of an ExplainBatch stream that is refused gets the same status as its own result
(``Refusal.message``) while the stream goes on. Raising one value from the shared checks, and
choosing only at the edge how to send it, keeps a batch instance's error exactly what Explain
would have said about the same request.

Every status built here is capped (:mod:`counterplan.planning.errors`): its message at 1 KB, a
bad field's name at 100 characters and its description at 1 KB. The message travels in trailing
metadata, which a default client caps: an uncapped echo of a 20 KB model id reached the client
as RESOURCE_EXHAUSTED "Stream removed" instead of NOT_FOUND.
"""

from __future__ import annotations

from typing import NoReturn

import grpc
import structlog
from google.protobuf import any_pb2, duration_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from counterplan.planning.calculator import SolveAbandoned
from counterplan.planning.errors import (
    MISSING_THE_MODEL_FAILS_ON,
    TEXT_CHARS,
    InvalidInputError,
    ModelAdapterError,
    ModelCallError,
    ModelFailureError,
    RemoteModelError,
    cut,
    echo,
    one_line,
)
from counterplan.server.grpc.convert import BadRequestError
from counterplan.server.registry.registry import ModelRegistry, RegisteredModel

_log = structlog.get_logger("counterplan.server")


class Refusal(Exception):  # noqa: N818 - a refusal is the outcome, not a failure of the server
    """A request refused with a status (code, message and ``google.rpc`` details)."""

    def __init__(self, status: status_pb2.Status) -> None:
        status.message = one_line(status.message, TEXT_CHARS)  # every way out passes here
        super().__init__(status.message)
        self.status = status

    @property
    def code(self) -> grpc.StatusCode:
        """The gRPC status code."""
        return status_code(self.status.code)

    def abort(self, context: grpc.ServicerContext) -> NoReturn:
        """End the call with this status (``abort_with_status`` raises)."""
        context.abort_with_status(rpc_status.to_status(self.status))
        raise AssertionError("unreachable")

    def message(self) -> status_pb2.Status:
        """The status as one batch instance's error."""
        return self.status


def status_code(code: int) -> grpc.StatusCode:
    """The ``grpc.StatusCode`` of a ``google.rpc.Code`` number (UNKNOWN for one it does not know)."""
    return next((c for c in grpc.StatusCode if c.value[0] == code), grpc.StatusCode.UNKNOWN)


def refused(code: grpc.StatusCode, message: str) -> Refusal:
    """A plain refusal: a code and a message, no details."""
    return Refusal(status_pb2.Status(code=code.value[0], message=message))


def no_model(model_id: str) -> Refusal:
    """NOT_FOUND for a model id the registry does not serve; the id is echoed cut (:func:`echo`)."""
    return refused(grpc.StatusCode.NOT_FOUND, f"no model {echo(model_id)}; see ListModels")


def registered_model(registry: ModelRegistry, model_id: str) -> RegisteredModel:
    """The model a request names: INVALID_ARGUMENT when it names none, NOT_FOUND when the
    registry does not serve it (every service that takes a ``model_id`` asks here)."""
    if not model_id:
        raise bad_request(BadRequestError([("model_id", "required")]))
    model = registry.get(model_id)
    if model is None:
        raise no_model(model_id)
    return model


def bad_request(error: BadRequestError) -> Refusal:
    """INVALID_ARGUMENT with a ``google.rpc.BadRequest`` naming every bad field."""
    detail = any_pb2.Any()
    detail.Pack(
        error_details_pb2.BadRequest(
            field_violations=[
                error_details_pb2.BadRequest.FieldViolation(field=cut(f), description=one_line(d, TEXT_CHARS))
                for f, d in error.violations
            ]
        )
    )
    return Refusal(
        status_pb2.Status(code=grpc.StatusCode.INVALID_ARGUMENT.value[0], message=error.problem, details=[detail])
    )


def retry_later(message: str, retry_after: float) -> Refusal:
    """RESOURCE_EXHAUSTED with a ``google.rpc.RetryInfo`` saying when to try again."""
    detail = any_pb2.Any()
    delay = duration_pb2.Duration()
    delay.FromMilliseconds(max(int(retry_after * 1000), 1))
    detail.Pack(error_details_pb2.RetryInfo(retry_delay=delay))
    return Refusal(
        status_pb2.Status(code=grpc.StatusCode.RESOURCE_EXHAUSTED.value[0], message=message, details=[detail])
    )


def served_model_failure(error: RemoteModelError, request_id: str, what: str = "request") -> Refusal:
    """A card's served model failing during a solve: not the caller's bad input. UNAVAILABLE
    when its server could not be reached or was too slow (a later try may work), else
    FAILED_PRECONDITION (it answered wrongly or refused: its operator must fix it); its text,
    which names the server and may quote what it said, in the server log only."""
    _log.warning("served model failed", request_id=request_id, error=one_line(str(error)))
    code = grpc.StatusCode.UNAVAILABLE if error.unavailable else grpc.StatusCode.FAILED_PRECONDITION
    problem = (
        "could not be reached, or answered too slowly,"
        if error.unavailable
        else "refused its calls, or answered in a form that cannot be read,"
    )
    where = f"during this {what} (request id {request_id}); its message is in the server log"
    return refused(code, f"the served model {problem} {where}")


def solve_failure(error: BaseException, request_id: str, what: str = "request") -> Refusal:
    """How a solve that ended in ``error`` is told to its caller, the same for every method that
    awaits one (Explain's steps, Plan, Audit): a refusal as it is; the model's failure as INTERNAL
    with its text in the server log only (a model's message may quote data), a served model's
    failure as :func:`served_model_failure` says; bad input as
    INVALID_ARGUMENT naming the field (a model failing on an instance with gaps too: the gaps are
    named); an abandoned solve as CANCELLED; anything else as INTERNAL.
    Call it inside the ``except`` block, so an unexpected error is logged with its traceback."""
    if isinstance(error, Refusal):  # no answer by the deadline or at shutdown: said as it is
        return error
    if isinstance(error, ModelFailureError) and error.missing:  # the caller's gaps, not the model's fault
        _log.info("model failed on an instance with gaps", request_id=request_id, error=one_line(str(error)))
        gaps = [(f"instance[{name}]", MISSING_THE_MODEL_FAILS_ON) for name in error.missing]
        return bad_request(BadRequestError(gaps))
    if isinstance(error, RemoteModelError):
        return served_model_failure(error, request_id, what)
    if isinstance(error, ModelCallError | ModelAdapterError):
        _log.warning("model failed", request_id=request_id, error=one_line(str(error)))
        return refused(
            grpc.StatusCode.INTERNAL,
            f"the model failed on this {what} (request id {request_id}); its message is in the server log",
        )
    if isinstance(error, InvalidInputError):
        return bad_request(BadRequestError([(error.field, one_line(error.problem))]))
    if isinstance(error, SolveAbandoned):  # abandoned while it was awaited: its call has ended
        return refused(grpc.StatusCode.CANCELLED, "the call ended; its solve was abandoned")
    _log.exception("internal error", request_id=request_id)
    return refused(grpc.StatusCode.INTERNAL, f"internal error (request id {request_id}); see the server log")
