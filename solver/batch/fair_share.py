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

import numpy as np
import numpy.typing as npt


class FairShare:
    """Each searched row's spent seconds: the time that passed, each stretch divided by the rows
    searched in it. Every row of a block starts with it and is charged alike while it searches,
    so one number (:attr:`spent`) serves the time limit; a row that finished is no longer
    charged, and :attr:`each` keeps what every row was charged (its ``seconds`` in the records,
    not the block's wall time)."""

    def __init__(self, rows: int, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._last = clock()
        self._sharing: npt.NDArray[np.intp] = np.arange(rows, dtype=np.intp)
        self.spent = 0.0
        """Seconds charged to each row that is still searching."""
        self.each = np.zeros(rows)
        """Seconds charged to each row so far."""

    def charge(self, sharing: npt.NDArray[np.intp]) -> float:
        """Charge the time since the last charge to the rows that shared it, and let the rows
        ``sharing`` (their indices) share the time from now on; the seconds each searching row
        has spent."""
        now = self._clock()
        share = (now - self._last) / max(1, self._sharing.size)
        self.spent += share
        self.each[self._sharing] += share
        self._last = now
        self._sharing = np.asarray(sharing, dtype=np.intp)
        return self.spent
