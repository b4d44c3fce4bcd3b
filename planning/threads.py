"""Native thread pools held to a few threads while a solve calls the model.

The engines already batch hundreds of candidates into each model call, so a model's own
OpenMP or BLAS threads buy little, and on a busy machine they cost a lot: OpenMP threads
spinning against another process's work made one HistGradientBoosting solve 100 times slower.
So a solve limits them (one thread by default), with threadpoolctl, which scikit-learn itself
uses.

Two kinds of pool, two rules:

* **OpenMP** (scikit-learn's histogram boosting, XGBoost, LightGBM): ``omp_set_num_threads``
  sets the calling thread's own limit, so each solving thread (the command line's, a server
  worker's) sets and restores its own, and concurrent solves cannot undo each other's.
* **BLAS** (OpenBLAS, MKL: linear models, neural networks): the limit is process-wide. The
  first solve to start sets it and the last one to end restores it (a reference count), so
  a solve that ends never lifts the limit from under one still running. While several run,
  the first one's limit holds.

Thread counts change speed, not answers: scikit-learn's predictions are computed row by row.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from threadpoolctl import ThreadpoolController

_lock = threading.Lock()
_blas_users = 0
_blas_limiter: Any = None


@contextmanager
def limited_threads(threads: int | None) -> Iterator[None]:
    """Hold native thread pools to ``threads`` threads in this block (None: leave them be).

    The controller is built here, not at import, so it sees the libraries the model loaded.
    Each limiter works on a controller narrowed to its own kind of pool: a limiter restores
    every library it holds when it ends, and the OpenMP one must not reset the shared BLAS limit.
    """
    if threads is None:
        yield
        return
    controller = ThreadpoolController()
    openmp = controller.select(user_api="openmp")
    with openmp.limit(limits=threads), _shared_blas_limit(controller.select(user_api="blas"), threads):
        yield


@contextmanager
def _shared_blas_limit(controller: ThreadpoolController, threads: int) -> Iterator[None]:
    global _blas_users, _blas_limiter  # noqa: PLW0603 - one process-wide pool, one count
    with _lock:
        if _blas_users == 0:
            _blas_limiter = controller.limit(limits=threads)
        _blas_users += 1
    try:
        yield
    finally:
        with _lock:
            _blas_users -= 1
            if _blas_users == 0 and _blas_limiter is not None:
                _blas_limiter.restore_original_limits()
                _blas_limiter = None


def active_blas_limits() -> int:
    """How many solves are holding the process-wide BLAS limit now (for tests and diagnostics)."""
    with _lock:
        return _blas_users
