"""Abandoned threads are counted until they end, so a server's shutdown can tell whether a
normal exit would wait for one (and end the process at once instead)."""

from __future__ import annotations

import threading

from counterplan.solver.core.abandoned import abandon, still_running


def test_an_abandoned_thread_counts_until_it_ends() -> None:
    release = threading.Event()
    thread = threading.Thread(target=release.wait, daemon=True)
    thread.start()
    before = still_running()
    abandon(thread)
    assert still_running() == before + 1
    release.set()
    thread.join(10)
    assert still_running() == before
