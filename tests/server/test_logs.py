"""A logged exception stays small and says nothing a client sent through its frames' locals."""

from __future__ import annotations

import io
import json
from collections.abc import Callable

import pytest
import structlog

from counterplan.server.logs import (
    EXCEPTION_CHARS,
    TRACEBACK_FRAMES,
    configure_console_logs,
    configure_json_logs,
)

pytestmark = pytest.mark.unit
SECRET = "token-8f2c1e"


def _deep(n: int, payload: object) -> None:
    """Recurse ``n`` frames, each holding ``payload`` as a local, then fail with a long message."""
    if n == 0:
        raise ValueError("bad value " + "x" * 1_000_000)
    _deep(n - 1, payload)


@pytest.mark.parametrize("configure", [configure_json_logs, configure_console_logs], ids=["json", "console"])
def test_a_logged_exception_has_no_locals_few_frames_and_a_cut_message(configure: Callable[[int], None]) -> None:
    nested: object = [SECRET]
    for _ in range(1_000):  # as deep as a client's JSON may be (orjson reads 1,024 levels)
        nested = [nested]
    out = io.StringIO()
    configure(20)
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=out))
    try:
        _deep(200, {"row": nested, "header": SECRET})
    except ValueError:
        structlog.get_logger().exception("explain failed", model="m")
    text = out.getvalue()
    assert "ValueError" in text and "bad value xxx" in text
    assert SECRET not in text  # no frame's locals
    assert len(text) < EXCEPTION_CHARS + 400 * TRACEBACK_FRAMES  # was megabytes
    if configure is configure_json_logs:
        (stack,) = json.loads(text)["exception"]
        assert len(stack["frames"]) <= TRACEBACK_FRAMES + 1
        assert len(stack["exc_value"]) <= EXCEPTION_CHARS
