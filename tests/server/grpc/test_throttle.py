"""Stream throttling: the first update at once, then at most one per interval, the last always."""

from __future__ import annotations

import queue

from counterplan.server.grpc.throttle import throttled

DONE = object()


def _queued(*items: object) -> queue.Queue[object]:
    events: queue.Queue[object] = queue.Queue()
    for item in items:
        events.put(item)
    return events


def test_updates_within_the_interval_collapse_to_the_newest_and_the_last_is_always_sent() -> None:
    assert list(throttled(_queued(*range(1, 101), DONE), 10.0, DONE)) == [1, 100]
    assert list(throttled(_queued(*range(1, 6), DONE), 0.0, DONE)) == [1, 2, 3, 4, 5]
    assert list(throttled(_queued(DONE), 10.0, DONE)) == []
