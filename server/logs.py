"""Structured JSON logs for the server and the command line (only they configure output).

A logged exception is rendered without the frames' local variables and with at most
:data:`TRACEBACK_FRAMES` frames and :data:`EXCEPTION_CHARS` characters of its message: locals
hold what a client sent (a row, a nested JSON value, a secret in a header), and rendering them is
unbounded. A KServe request whose value was nested 1,020 levels deep made a 3.9 MB JSON log line,
and 7.4 s of the console renderer's time on the event loop, per request.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any

import structlog
from structlog.tracebacks import ExceptionDictTransformer

from counterplan.planning.errors import cut

TRACEBACK_FRAMES = 20
"""Frames a logged traceback keeps at most (the JSON log: the outermost and innermost halves; the
console: the innermost), so a deep recursion's middle is dropped."""
EXCEPTION_CHARS = 2_000
"""Characters of a logged exception's message."""


def configure_console_logs(level: int = logging.WARNING) -> None:
    """Readable warnings on stderr, so stdout holds only the command's output."""
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.dev.ConsoleRenderer(colors=False, exception_formatter=_plain_traceback),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


def configure_json_logs(level: int = logging.INFO) -> None:
    """One JSON object per line on stderr, with ISO timestamps."""
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.ExceptionRenderer(
                ExceptionDictTransformer(show_locals=False, max_frames=TRACEBACK_FRAMES)
            ),
            _bounded_messages,
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


def _bounded_messages(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Each rendered exception's message cut to :data:`EXCEPTION_CHARS`."""
    for stack in event.get("exception", ()) if isinstance(event.get("exception"), list) else ():
        if isinstance(stack, dict) and isinstance(stack.get("exc_value"), str):
            stack["exc_value"] = cut(stack["exc_value"], EXCEPTION_CHARS)
    return event


def _plain_traceback(sio: Any, exc_info: Any) -> None:
    """The standard library's traceback (repeated frames collapsed, no locals), at most
    :data:`TRACEBACK_FRAMES` frames, its message cut to :data:`EXCEPTION_CHARS`."""
    import traceback  # noqa: PLC0415 - only when an exception is logged

    exc_type, exc, tb = exc_info
    lines = traceback.format_exception(exc_type, exc, tb, limit=-TRACEBACK_FRAMES)
    sio.write("\n" + cut("".join(lines), EXCEPTION_CHARS + 200 * TRACEBACK_FRAMES))
