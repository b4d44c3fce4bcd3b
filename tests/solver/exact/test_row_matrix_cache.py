"""The cache of programs' row matrices (``intervals._matrix``) under garbage collection.

A program is forgotten by a weakref callback. The collector runs that callback on whichever thread
happens to allocate, and may do so while that thread is inside the cache's own locked block:
the callback then waited for the lock its own thread held, for good. CP-SAT's solution callbacks
check every answer through the cache from several solver threads, so a whole ``explain`` hung
(a fresh clone's CI, in ``explain --engine auto`` on the demo: every CP-SAT thread idle).
"""

from __future__ import annotations

import gc
import threading

import numpy as np

from counterplan.solver.exact import intervals
from counterplan.solver.exact.milp import Milp


def _program() -> Milp:
    milp = Milp()
    x = milp.var("x", 0.0, 10.0)
    milp.row({x: 1.0}, 1.0, 5.0)
    return milp


def test_a_program_collected_while_the_cache_is_locked_does_not_hang_its_thread() -> None:
    cyclic = _program()
    cyclic.__dict__["itself"] = cyclic  # only the collector frees it
    assert intervals.meets_rows(cyclic, np.array([2.0]))  # cached, with its weakref callback
    del cyclic
    done = threading.Event()

    def collect_inside_the_lock() -> None:
        with intervals._matrices_lock:  # as _matrix holds it when an allocation starts a collection
            gc.collect()
        done.set()

    was_enabled = gc.isenabled()
    gc.disable()  # no collection before the one inside the lock
    try:
        worker = threading.Thread(target=collect_inside_the_lock, daemon=True)
        worker.start()
        finished = done.wait(timeout=30.0)
    finally:
        if was_enabled:
            gc.enable()
    if not finished:  # the worker waits for the lock it holds: free it, so later tests do not hang too
        intervals._matrices_lock.release()
    assert finished, "the weakref callback waited for the lock its own thread held"
    fresh = _program()
    assert intervals.meets_rows(fresh, np.array([2.0])) and not intervals.meets_rows(fresh, np.array([7.0]))
