"""The pool of feasible rows: its distinct rows are found without holding the GIL."""

from __future__ import annotations

import threading
import time

import numpy as np

from counterplan.solver.core.pool import POOL_MAX_VALUES, Pool


def test_merging_a_full_pool_lets_the_other_threads_run() -> None:
    """np.unique sorted a full pool's 363,000 rows as records holding the GIL for 1.4 s, so a
    server's call could not answer by its deadline meanwhile (the grpc fuzz: a 2 s deadline
    answered by the client's own DEADLINE_EXCEEDED). Another thread now runs all along: its
    longest wait is a small part of the merge, not the whole of it."""
    rng = np.random.default_rng(1)
    n, m = POOL_MAX_VALUES // 11, 11
    rows = rng.integers(0, 40, size=(n, m)).astype(np.float64)
    pool = Pool(rows[0])
    pool.parts = [(rows, -rng.random((n, 5)))]
    gaps: list[float] = []
    done = threading.Event()

    def tick() -> None:
        last = time.perf_counter()
        while not done.is_set():
            time.sleep(0.002)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    ticker = threading.Thread(target=tick)
    ticker.start()
    time.sleep(0.05)
    started = time.perf_counter()
    merged, _ = pool.merged(rows[0], np.zeros(5))
    seconds = time.perf_counter() - started
    done.set()
    ticker.join()
    assert merged.shape[0] == np.unique(rows, axis=0).shape[0]
    assert max(gaps) < 0.5 * seconds, (max(gaps), seconds)
