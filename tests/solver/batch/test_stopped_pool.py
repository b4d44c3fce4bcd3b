"""A stopped pool of worker processes leaves nothing for the interpreter's exit to trip on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from counterplan.solver.batch.run import _stop_workers

KILLED_PARENT = """
import os, signal, sys
from concurrent.futures import ProcessPoolExecutor
from counterplan.solver.audit.proofs import _start_worker as audit_worker
from counterplan.solver.batch.run import _start_worker as batch_worker

start, args = {"batch": (batch_worker, (None,)), "audit": (audit_worker, (None, None))}[sys.argv[1]]
pool = ProcessPoolExecutor(max_workers=1, initializer=start, initargs=args)
print(pool.submit(os.getpid).result(), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""
"""A pool's parent that tells its worker's id and is killed at once, as ``kill -9`` or the OOM killer does."""


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


def _running(pid: int) -> bool:
    """Whether process ``pid`` runs (an ended one not yet reaped is a zombie: it does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the process itself
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.parametrize("pool", ["batch", "audit"])
def test_a_worker_ends_itself_when_its_parent_is_killed(pool: str, tmp_path: Path) -> None:
    """A parent killed at once (``kill -9``, the OOM killer) cannot stop its workers, and each
    waited for its next task for good: a batch on two workers killed so left both running,
    holding the model, the data and the job's output pipes. A worker now ends itself once its
    parent is gone."""
    told = tmp_path / "worker.txt"
    with told.open("w") as out:  # a file, not a pipe: a worker that lives on would hold a pipe open
        parent = subprocess.run([sys.executable, "-c", KILLED_PARENT, pool], stdout=out, timeout=120, check=False)
    assert parent.returncode == -signal.SIGKILL
    worker = int(told.read_text())
    deadline = time.monotonic() + 30.0
    try:
        while _running(worker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _running(worker), "the worker of a killed parent still runs"
    finally:
        if _running(worker):
            os.kill(worker, signal.SIGKILL)
