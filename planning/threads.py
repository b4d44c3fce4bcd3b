"""Native thread pools limited while a solve calls the model (threadpoolctl).

Why: the engines already batch (one model call scores a whole neighbourhood), and calls come
one at a time, so native threads inside a call add little. On a busy machine they cost a lot:
OpenMP threads (HistGradientBoosting, for one) spin and wait for each other on cores that
another process holds, and the same solve took up to 100 times longer. A solve therefore
limits the pools to ``SolverConfig.model_threads`` (1 by default) for its whole duration.

Two kinds of pool, handled differently:

- **Per calling thread**: OpenMP (``omp_set_num_threads`` sets the calling thread's own
  setting; a new thread starts from the process default), and OpenBLAS built on OpenMP. The
  limit is set in the thread that solves and restored there when the solve ends, so it must be
  applied inside that thread (the solver manager's workers, not the thread that submits).
- **Process-wide**: OpenBLAS on pthreads, MKL, BLIS, FlexiBLAS. One setting for every thread,
  so concurrent solves share it through :class:`SharedPoolLimit`, reference-counted: the first
  solve in sets it, the last one out restores what was there before, and while several run the
  smallest limit any of them asked for holds. A solve that ends never restores the setting
  under another that is still running.

:class:`threadpoolctl.ThreadpoolController` scans the loaded libraries: 15-35 ms the first time
in a process, 3-4 ms after (``threadpool_limits()`` scans on every call). So the scan is kept
and reused (25-50 us per solve to limit and restore), and redone only when a module was
imported since (a new import may have loaded a new native library).
"""

from __future__ import annotations

import sys
import threading
from collections import Counter
from types import TracebackType
from typing import Any, Protocol, Self

from counterplan.planning.errors import InvalidInputError

MAX_MODEL_THREADS = 256
"""The most native threads a model call may be given."""


class NativePool(Protocol):
    """What counterplan uses of a threadpoolctl library controller."""

    user_api: str
    filepath: str

    def get_num_threads(self) -> int | None:
        """The pool's current size (for a per-thread pool: the calling thread's)."""

    def set_num_threads(self, num_threads: int) -> Any:
        """Resize the pool (for a per-thread pool: the calling thread's)."""


def check_threads(threads: int | None, field: str = "model_threads") -> int | None:
    """``threads`` if it is None or a whole number from 1 to :data:`MAX_MODEL_THREADS`."""
    if threads is not None and (
        isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= MAX_MODEL_THREADS
    ):
        raise InvalidInputError("threads", field, f"must be from 1 to {MAX_MODEL_THREADS} or None, given {threads!r}")
    return threads


def is_per_thread(pool: NativePool) -> bool:
    """True for a pool whose size each calling thread sets for itself (OpenMP-based)."""
    return pool.user_api == "openmp" or getattr(pool, "threading_layer", None) == "openmp"


class _LoadedPools:
    """The native pools loaded in this process, scanned once and again after new imports."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pools: list[NativePool] = []
        self._modules = -1

    def current(self) -> list[NativePool]:
        """The pools of the last scan, scanned again when a module was imported since. Only the
        first scan is waited for: a solve that starts while another thread rescans takes the
        last scan's pools (a library loaded since is limited from the next solve on, as one
        loaded during a solve always was). A batch's window starts its rows together, and their
        first solves import modules lazily: each rescan (15-35 ms alone, over 100 ms among 64
        busy threads) held every other row's solve at its start, its clock running (64 rows of
        an exact batch under a 0.3 s limit waited 0.7 s on average, up to 1.7 s)."""
        if len(sys.modules) == self._modules:
            return self._pools
        if not self._lock.acquire(blocking=self._modules < 0):
            return self._pools  # another thread rescans
        try:
            if len(sys.modules) != self._modules:
                # threadpoolctl loads ctypes and scans libraries: only when a solve first needs it
                from threadpoolctl import ThreadpoolController  # noqa: PLC0415

                pools = list(ThreadpoolController().lib_controllers)
                self._pools, self._modules = pools, len(sys.modules)
            return self._pools
        finally:
            self._lock.release()


def _set_shared(pool: NativePool, threads: int) -> None:
    """Resize a process-wide pool from whichever thread holds :class:`SharedPoolLimit`'s lock.

    threadpoolctl (3.8+) lets only the first thread that resized a process-wide OpenBLAS pool
    resize it again and silently ignores the others. The solve that restores the setting is
    often not the one that set it, so the claim is released before and after each change; the
    reference count already keeps concurrent solves from fighting.
    """
    release = getattr(type(pool), "clear_controlling_thread", None)
    if release is not None:
        release(force=True)
    pool.set_num_threads(threads)
    if release is not None:
        release()


class SharedPoolLimit:
    """Reference-counted limit on process-wide pools, shared by every running solve.

    :meth:`acquire` and :meth:`release` come in pairs, one pair per solve, from any thread.
    While at least one solve holds it, every process-wide pool it has seen is at the smallest
    limit asked for by a running solve; when the last one releases, each pool goes back to the
    size it had when it was first seen.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active: Counter[int] = Counter()
        self._original: dict[str, tuple[NativePool, int]] = {}
        self._applied: int | None = None
        """The limit every pool of :attr:`_original` was last given (None: none yet, or a pool
        seen since): held again, nothing is asked of the pools under the lock."""

    @property
    def holders(self) -> int:
        """Solves that hold the limit now."""
        with self._lock:
            return self._active.total()

    def acquire(self, pools: list[NativePool], threads: int) -> None:
        """One more solve limits ``pools`` to ``threads`` (or to a smaller running limit)."""
        with self._lock:
            for pool in pools:
                if pool.filepath not in self._original:
                    size = pool.get_num_threads()
                    if size is not None:
                        self._original[pool.filepath] = (pool, size)
                        self._applied = None
            self._active[threads] += 1
            try:
                self._apply()
            except BaseException:  # a library refused: this solve does not hold the limit
                self._drop(threads)
                raise

    def release(self, threads: int) -> None:
        """A solve that acquired with ``threads`` is done; the last one out restores."""
        with self._lock:
            self._drop(threads)

    def _drop(self, threads: int) -> None:
        self._active[threads] -= 1
        if self._active[threads] <= 0:
            del self._active[threads]
        if self._active:
            self._apply()
            return
        original, self._original, self._applied = list(self._original.values()), {}, None
        failures = []
        for pool, size in original:  # every pool gets its size back, even when one refuses
            try:
                _set_shared(pool, size)
            except Exception as exc:
                failures.append(exc)
        if failures:
            raise failures[0]

    def _apply(self) -> None:
        """Every pool at the smallest running limit. A limit already applied asks nothing of
        the pools: a call into a native library lets go of the GIL, and with a batch window's
        64 solves starting and ending together, each call made under the lock queued every
        other solve behind its wait for the GIL (about 0.1 s a solve, on its clock)."""
        limit = min(self._active)
        if limit == self._applied:
            return
        self._applied = None  # until every pool has it (one may refuse)
        for pool, _ in self._original.values():
            if pool.get_num_threads() != limit:
                _set_shared(pool, limit)
        self._applied = limit


_LOADED = _LoadedPools()
SHARED_POOLS = SharedPoolLimit()
"""The process's one guard of process-wide pools: it must be shared to be reference-counted."""


class NativeThreadLimit:
    """Context manager: native pools limited to ``threads`` in this thread while it is open.

    Enter it in the thread that calls the model. ``threads=None`` leaves every pool as it is.
    Per-thread pools (OpenMP) are set for the calling thread and restored on exit; process-wide
    pools go through :data:`SHARED_POOLS`. Nest freely in one thread (last in, first out);
    open one per thread for concurrent solves.

    Parameters
    ----------
    threads:
        Native threads per model call, 1 to :data:`MAX_MODEL_THREADS`, or None.
    shared:
        The guard of process-wide pools; the process's own by default.
    """

    def __init__(self, threads: int | None, shared: SharedPoolLimit | None = None) -> None:
        self.threads = check_threads(threads)
        self.shared = shared if shared is not None else SHARED_POOLS
        self._restore: list[tuple[NativePool, int]] = []
        self._holds = False

    def __enter__(self) -> Self:
        if self.threads is None:
            return self
        pools = _LOADED.current()
        own = [pool for pool in pools if is_per_thread(pool)]
        self._restore = [(pool, size) for pool in own if (size := pool.get_num_threads()) is not None]
        for pool, _ in self._restore:
            pool.set_num_threads(self.threads)
        try:
            self.shared.acquire([pool for pool in pools if not is_per_thread(pool)], self.threads)
        except BaseException:
            self._restore_own()
            raise
        self._holds = True
        return self

    def _restore_own(self) -> None:
        for pool, size in reversed(self._restore):
            pool.set_num_threads(size)
        self._restore = []

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if not self._holds or self.threads is None:
            return
        self._holds = False
        self.shared.release(self.threads)
        self._restore_own()


__all__ = [
    "MAX_MODEL_THREADS",
    "SHARED_POOLS",
    "NativePool",
    "NativeThreadLimit",
    "SharedPoolLimit",
    "check_threads",
    "is_per_thread",
]
