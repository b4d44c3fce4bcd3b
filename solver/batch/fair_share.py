"""The time each row of a block has spent, when the block's rows are searched together.

The vectorised engine searches a block's rows as one program: one model call scores the
candidates of every row still searching. A time limit is a limit on each row's search, so a row
must not be charged the whole time of a call it shares with 63 others: alone, it would have
had the limit to itself. :class:`FairShare` charges each of the ``k`` rows searched at once
``1/k`` of the time that passes, as a processor shared fairly would. A row then gets at least
the search it gets alone within its limit (a shared call costs each row less than a call of its
own), and a block of ``n`` rows never runs longer than ``n`` times the limit.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class FairShare:
    """Each searched row's spent seconds: the time that passed, each stretch divided by the rows
    searched in it. Every row of a block starts with it and is charged alike while it searches,
    so one number serves them all; a row that finished is no longer charged."""

    def __init__(self, rows: int, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._last = clock()
        self._sharing = max(1, rows)
        self.spent = 0.0
        """Seconds charged to each row that is still searching."""

    def charge(self, sharing: int) -> float:
        """Charge the time since the last charge to the rows that shared it, and let ``sharing``
        rows share the time from now on; the seconds each searching row has spent."""
        now = self._clock()
        self.spent += (now - self._last) / self._sharing
        self._last = now
        self._sharing = max(1, sharing)
        return self.spent
