"""What the problems of one data set share, kept for a bounded number of settings.

Building a problem can cost seconds that do not depend on the row: a plausibility model reads up to
every training row, a scorecard's objective reads the data's statistics. An explainer keeps them
between builds, keyed by what they depend on (the features' domains, the goals, the settings). A
server's explainer builds for every request's spec, and a spec is the caller's: each distinct one (a
bound, a ``k``, a quantile) built and kept its own model for good, so a stream of requests grew the
server's memory without end (60 KServe requests of one plausibility setting each kept 110 MB more).
:class:`SharedBuilds` keeps the newest :data:`SHARED_BUILDS`; a setting asked again after it went
is built again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")

SHARED_BUILDS = 16
"""Settings kept at most: more than a server's usual few specs, few enough that the largest builds
(a plausibility model of every training row) stay a small multiple of the data."""


class SharedBuilds:
    """Builds kept by key, the oldest dropped past ``size``; safe to share between threads (two
    threads may build the same key at once; the last is kept). A copy (pickled to a worker) starts
    empty: everything here is rebuilt on demand."""

    def __init__(self, size: int = SHARED_BUILDS) -> None:
        self.size = size
        self._kept: dict[Hashable, Any] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable, build: Callable[[], T]) -> T:
        """The build kept under ``key``, else ``build()``, kept (the oldest dropped past ``size``)."""
        with self._lock:
            if key in self._kept:
                value: T = self._kept[key]
                return value
        value = build()
        with self._lock:
            self._kept[key] = value
            while len(self._kept) > self.size:
                del self._kept[next(iter(self._kept))]
        return value

    def __len__(self) -> int:
        with self._lock:
            return len(self._kept)

    def __reduce__(self) -> tuple[Any, ...]:
        return (SharedBuilds, (self.size,))
