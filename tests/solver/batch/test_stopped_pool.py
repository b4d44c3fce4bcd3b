"""A stopped pool of worker processes leaves nothing for the interpreter's exit to trip on."""

from __future__ import annotations

import time
from concurrent.futures import ProcessPoolExecutor

from counterplan.solver.batch.run import _stop_workers


def test_a_stopped_pool_has_closed_its_wakeup_before_the_exit_writes_to_it() -> None:
    """Python 3.11's exit wakes every pool's manager thread through a pipe, without the pool's
    lock; a pool stopped on Ctrl-C had its manager close that pipe at the same moment, and the
    write printed a traceback after the command's one line (``OSError: [Errno 9] Bad file
    descriptor``). Once stopped, the manager has ended and the pipe is marked closed, which the
    exit's write checks first."""
    pool = ProcessPoolExecutor(max_workers=2)
    futures = [pool.submit(time.sleep, 30.0) for _ in range(4)]
    while not any(f.running() for f in futures):
        time.sleep(0.01)
    manager = pool._executor_manager_thread
    wakeup = pool._executor_manager_thread_wakeup
    assert manager is not None and wakeup is not None
    started = time.monotonic()
    _stop_workers(pool)
    assert not manager.is_alive() and wakeup._closed
    assert time.monotonic() - started < 20.0, "the sleeping tasks were waited for"
