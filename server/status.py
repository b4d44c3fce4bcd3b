"""Map counterplan's errors to gRPC statuses with ``google.rpc.Status`` details.

Bad requests become INVALID_ARGUMENT with a ``google.rpc.BadRequest`` naming every bad field;
a model that fails while scoring becomes INTERNAL with a message and no stack trace; a solve
that does not fit now becomes RESOURCE_EXHAUSTED with a ``google.rpc.RetryInfo``.
"""

from __future__ import annotations

from typing import NoReturn

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from server.convert import BadRequestError


def abort_bad_request(context: grpc.ServicerContext, error: BadRequestError) -> NoReturn:
    """Abort with INVALID_ARGUMENT and a BadRequest detail per violation."""
    detail = any_pb2.Any()
    detail.Pack(
        error_details_pb2.BadRequest(
            field_violations=[
                error_details_pb2.BadRequest.FieldViolation(field=field, description=description)
                for field, description in error.violations
            ]
        )
    )
    status = status_pb2.Status(code=code_pb2.INVALID_ARGUMENT, message=error.problem, details=[detail])
    context.abort_with_status(rpc_status.to_status(status))
    raise AssertionError("unreachable")  # abort_with_status raises


def abort(context: grpc.ServicerContext, code: grpc.StatusCode, message: str) -> NoReturn:
    """Abort with a plain status and message."""
    context.abort(code, message)
    raise AssertionError("unreachable")


def abort_retry_later(context: grpc.ServicerContext, message: str, retry_after: float) -> NoReturn:
    """Abort with RESOURCE_EXHAUSTED and a ``google.rpc.RetryInfo`` saying when to try again."""
    detail = any_pb2.Any()
    delay = duration_pb2.Duration()
    delay.FromMilliseconds(max(int(retry_after * 1000), 1))
    detail.Pack(error_details_pb2.RetryInfo(retry_delay=delay))
    status = status_pb2.Status(code=code_pb2.RESOURCE_EXHAUSTED, message=message, details=[detail])
    context.abort_with_status(rpc_status.to_status(status))
    raise AssertionError("unreachable")  # abort_with_status raises
