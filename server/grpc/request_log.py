"""One JSON log line per call: the same fields for Explain, ExplainStream, each ExplainBatch instance,
Plan and PlanStream (request id, model, duration, final score and status, and whether a clock or a
stop ended it early), so a log search finds a request whichever method served it."""

from __future__ import annotations

import time
from typing import Any

import structlog

from counterplan.planning.errors import cut

log = structlog.get_logger("counterplan.server")


def log_request(
    method: str, request_id: str, model_id: str, started: float, outcome: dict[str, Any], **extra: Any
) -> None:
    """Log a finished call: ``started`` is its ``time.perf_counter()`` at the start, ``outcome``
    holds its ``status`` (UNKNOWN when missing), ``score`` and ``stopped_early`` (an OK call
    that answered with its best so far: a deadline, a time limit, a cancel or a shutdown cut it).
    The ids are the client's: logged cut (:func:`~counterplan.planning.errors.cut`), as a megabyte
    id would make a megabyte line."""
    log.info(
        "request",
        method=method,
        request_id=cut(request_id),
        model_id=cut(model_id),
        duration_ms=round((time.perf_counter() - started) * 1e3, 2),
        score=outcome.get("score"),
        status=outcome.get("status", "UNKNOWN"),
        stopped_early=bool(outcome.get("stopped_early")),
        **extra,
    )
