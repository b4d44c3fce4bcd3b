"""Throttled streams: a worker's updates sent at most so often, the newest one winning, the last always.

A solve or a plan search reports every improvement from its own thread onto a queue; a stream
forwards them to the client. Sending each one could flood a slow client, so an update that
arrives within ``interval`` of the last one sent waits, and a newer update replaces it. When the
worker is done, the update still waiting is sent at once: the client always sees the last.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Iterator
from typing import Any

_NOTHING = object()


def throttled(events: queue.Queue[Any], interval: float, done: object) -> Iterator[Any]:
    """The items of ``events`` until ``done``: at most one per ``interval`` seconds, the newest
    replacing one that waits, the last one always (``done`` itself is not yielded)."""
    last_sent = 0.0
    pending: Any = _NOTHING
    while True:
        timeout = None if pending is _NOTHING else max(interval - (time.perf_counter() - last_sent), 0.0)
        try:
            item = events.get(timeout=timeout)
        except queue.Empty:
            item = _NOTHING
        finished = item is done
        if item is not _NOTHING and not finished:
            pending = item
        if pending is not _NOTHING and (finished or time.perf_counter() - last_sent >= interval):
            yield pending
            last_sent, pending = time.perf_counter(), _NOTHING
        if finished:
            return
