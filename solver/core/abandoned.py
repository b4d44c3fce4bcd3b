"""Work a solve gave up waiting for, still running in a thread of its own: a native search that
looks at no clock (HiGHS's root cuts) or a model call that outlasts a server's grace.

Such a thread cannot be stopped from Python; it is told to stop and left to end at its next look
at a clock. Two things then need to know about it, and this module is where they ask:

- the interpreter's exit: a thread still inside native code when the interpreter finalizes aborts
  the process ("terminate called without an active exception") instead of exiting with its
  code, so :func:`_join_at_exit` waits for them (up to :data:`EXIT_WAIT` seconds);
- a server whose shutdown has a grace to hold: it must not wait that long, so it asks
  :func:`still_running` and ends the process at once when any is left (its calls were answered).
"""

from __future__ import annotations

import atexit
import threading
import time

EXIT_WAIT = 60.0
"""Seconds a normal exit waits for abandoned threads to end (see :func:`_join_at_exit`)."""

_threads: list[threading.Thread] = []
_lock = threading.Lock()


def abandon(thread: threading.Thread) -> None:
    """Note ``thread`` as abandoned: nobody waits for it, but an exit does (those that have
    ended since are forgotten)."""
    with _lock:
        _threads[:] = [*(t for t in _threads if t.is_alive()), thread]


def still_running() -> int:
    """How many abandoned threads have not ended yet."""
    return len(alive())


def alive() -> list[threading.Thread]:
    """The abandoned threads that have not ended yet (a command compares them before and after it
    runs: only the ones it left end its process at once)."""
    with _lock:
        return [t for t in _threads if t.is_alive()]


@atexit.register
def _join_at_exit() -> None:
    """At exit, wait for the abandoned threads (each was told to stop)."""
    with _lock:
        threads = list(_threads)
    end = time.perf_counter() + EXIT_WAIT
    for thread in threads:
        thread.join(max(end - time.perf_counter(), 0.0))


__all__ = ["EXIT_WAIT", "abandon", "alive", "still_running"]
