"""A solver's search in a thread of its own, watched from the caller's: the one rule by which
every exact backend keeps its time limit and its stop (HiGHS, OR-Tools' SCIP, CP-SAT).

Solvers look at their clock and their interrupt only between their own steps (a presolve round,
a node, a cut round), and one step can overrun a limit by seconds under load. So the search runs
in a daemon thread while the calling thread polls: the first time ``should_stop`` says stop it
calls ``on_stop`` (the solver's own interrupt, where it has one), and a search still running
:data:`GRACE` seconds after the deadline or the stop is given ``on_late`` and then abandoned
(:func:`counterplan.solver.core.abandoned.abandon`: an exit waits for it, a server's shutdown
does not). The calling thread stays in Python meanwhile, so a Ctrl-C reaches its handler.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

from counterplan.solver.core.abandoned import abandon

T = TypeVar("T")

GRACE = 0.25
"""Seconds a search is given past its time limit (or a stop request) to stop by itself before it
is abandoned; the solvers stop within milliseconds wherever they check their clock."""
POLL_SECONDS = 0.02
"""Seconds between two looks at a search running in its own thread."""


class Watched(Generic[T]):
    """What a watched search gave: ``finished`` with its ``value``, or abandoned (``value`` None)."""

    __slots__ = ("finished", "value")

    def __init__(self, finished: bool, value: T | None) -> None:
        self.finished = finished
        self.value = value


def run_watched(
    search: Callable[[], T],
    *,
    name: str,
    deadline: float | None,
    should_stop: Callable[[], bool] | None,
    on_stop: Callable[[], None] | None = None,
    on_late: Callable[[], None] | None = None,
    always_thread: bool = False,
) -> Watched[T]:
    """``search()`` watched against ``deadline`` (a ``time.perf_counter`` instant) and
    ``should_stop``; an exception it raises is raised again here. With neither (and not
    ``always_thread``) it simply runs in this thread."""
    if deadline is None and should_stop is None and not always_thread:
        return Watched(True, search())
    done = threading.Event()
    outcome: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            outcome.append(search())
        except BaseException as exc:  # raised again in the caller's thread
            failure.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=run, name=f"counterplan-{name}", daemon=True)
    thread.start()
    stop_asked: float | None = None
    while not done.wait(POLL_SECONDS):
        now = time.perf_counter()
        if stop_asked is None and should_stop is not None and should_stop():
            stop_asked = now
            if on_stop is not None:
                on_stop()
        late = (deadline is not None and now >= deadline + GRACE) or (
            stop_asked is not None and now >= stop_asked + GRACE
        )
        if late:
            if on_late is not None:
                on_late()
            abandon(thread)
            return Watched(False, None)
    if failure:
        raise failure[0]
    return Watched(True, outcome[0])
