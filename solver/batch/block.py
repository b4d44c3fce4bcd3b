"""One block of rows solved in one process: by the vectorised engine, or by threads sharing calls.

A block is the unit every way of running a batch hands out: :mod:`counterplan.solver.batch.run`
runs one in this process or one per worker process, :mod:`counterplan.solver.batch.on_ray` one per
Ray actor call, each through :func:`run_blocks`. By default a block's rows go to the vectorised
engine (:mod:`counterplan.solver.batch.vectorised`); the rows it cannot search, or every row when
the threads path is asked for, take the threads path (:func:`run_block`): up to ``window`` rows
solved at once, each in its own thread, all sharing one
:class:`~counterplan.solver.batch.shared_calls.SharedCalls`, so every step of every running solve is
scored in one model call and a row that finishes makes room for the next (continuous batching).
Under a time limit the threads path runs at most one row per core at once (:func:`rows_at_once`),
and a vectorised block's rows share its time fairly
(:mod:`counterplan.solver.batch.fair_share`): either way a time limit is each row's own.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager, nullcontext
from typing import Any

import structlog

from counterplan.solver.batch.protocol import RowExplainer, RowSolve
from counterplan.solver.batch.records import error_record, record_of
from counterplan.solver.batch.rows import id_text, row_seed
from counterplan.solver.batch.shared_calls import SharedCalls
from counterplan.solver.batch.vectorised import run_vector_block, vector_refusal
from counterplan.solver.core.abandoned import abandon
from counterplan.solver.engines import runs_exact

_log = structlog.get_logger(__name__)

BATCH_MAX_WAIT_SECONDS = 0.25
"""In a batch every member is a solve stepping towards its next model call, so a call waits
longer for the others than a server's (a late one only means a smaller call, never a different
answer)..."""
EXACT_MAX_WAIT_SECONDS = 0.005
"""...except when solves may spend seconds in a MIP without calling the model (the exact engine
makes few model calls, and the others must not wait on its program)."""

STOP_POLL_SECONDS = 0.05
"""How often the threads path asks a batch's stop check while its rows run (a row's own steps
cannot ask it: its solve runs in a thread of its own), and a solve under :func:`stop_watched`
asks its caller's (an audit's proof, a tuning trial's row)."""

ABANDON_SECONDS = 2.0
"""How long a batch that ends early (Ctrl-C, SIGTERM, ``on_record`` raising) waits for the rows
in flight on the threads path to stop at their next step before it lets their threads go."""

Record = dict[str, Any]
Item = tuple[Any, dict[str, Any]]


def run_block(
    explainer: RowExplainer,
    items: Sequence[Item],
    seed: int,
    window: int,
    on_record: Callable[[Record], None],
    *,
    stop: Callable[[], bool] | None = None,
    cores: int | None = None,
) -> None:
    """Solve ``items`` in this process, ``window`` at a time (fewer under a time limit:
    :func:`rows_at_once`), sharing model calls. ``stop`` (a deadline for the whole batch) is
    asked before each row starts and every :data:`STOP_POLL_SECONDS` while rows run: once it
    says stop, the rows in flight and every later row answer with their best so far, cut as a
    stop request cuts a solve. A row started late keeps its own time limit (:func:`rows_at_once`
    runs them one per core), so without this a deadline would hold only between rows. Rows in
    flight are stopped too when the batch ends early (``on_record`` raising, Ctrl-C), rather
    than run to their own ends while the caller waits."""
    window = rows_at_once(explainer, window, cores)
    calls = SharedCalls(explainer.adapter, max_wait=shared_wait(explainer))
    running = _Running()
    poll = STOP_POLL_SECONDS if stop is not None else None

    def asked() -> None:
        if stop is not None and not running.stopped and stop():
            running.stop()

    def settle(pending: set[Future[Record]], *, every: bool) -> set[Future[Record]]:
        """Hand on the rows that finish (all of them with ``every``, else at least one)."""
        while pending:
            finished, pending = wait(pending, timeout=poll, return_when=FIRST_COMPLETED)
            asked()
            for future in finished:
                on_record(future.result())
            if finished and not every:
                break
        return pending

    pending: set[Future[Record]] = set()
    threads = max(1, min(window, len(items)))
    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="counterplan-batch")
    try:
        for row_id, row in items:
            if len(pending) >= window:
                pending = settle(pending, every=False)
            asked()
            pending.add(pool.submit(solve_row, explainer, row_id, row, seed, calls, running=running))
        settle(pending, every=True)
    except BaseException:  # the batch ends here: the rows in flight stop at their next step
        running.stop()
        _let_go(pool, pending, running)
        raise
    pool.shutdown()


def _let_go(pool: ThreadPoolExecutor, pending: set[Future[Record]], running: _Running) -> None:
    """End ``pool`` after a stop: its rows in flight (at most one a thread) have
    :data:`ABANDON_SECONDS` to stop at their next step; a row still running then is inside a model
    call that does not return (a hung remote model), and waiting for it (a pool's ``with``) hung
    Ctrl-C and SIGTERM for good. Its thread is abandoned (:mod:`counterplan.solver.core.abandoned`):
    the caller goes on, and the command line ends the process without it."""
    _, stuck = wait(pending, timeout=ABANDON_SECONDS)
    pool.shutdown(wait=False, cancel_futures=True)
    if stuck:
        for thread in running.threads():
            abandon(thread)


class _Running:
    """The solves of the rows in flight, so a stop ends them; one that starts after is stopped
    as it starts (it answers with what it has then: nothing searched)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._solvers: dict[RowSolve, threading.Thread] = {}
        self.stopped = False

    def stop(self) -> None:
        with self._lock:
            self.stopped = True
            for solver in self._solvers:
                solver.terminate_early()

    def threads(self) -> list[threading.Thread]:
        """The threads of the solves still running."""
        with self._lock:
            return list(self._solvers.values())

    @contextmanager
    def member(self, solver: RowSolve) -> Iterator[None]:
        with self._lock:
            self._solvers[solver] = threading.current_thread()
            if self.stopped:
                solver.terminate_early()
        try:
            yield
        finally:
            with self._lock:
                self._solvers.pop(solver, None)


@contextmanager
def stop_watched(solver: RowSolve, stop: Callable[[], bool] | None) -> Iterator[threading.Event]:
    """While the block runs, a helper thread asks ``stop`` every :data:`STOP_POLL_SECONDS` and
    ends ``solver`` early once it says stop (at its next step: within one model call); the
    event is set then. For a caller whose stop check the solve's own loops cannot ask (a
    deadline's, a Ctrl-C's) and that must not wait out the solve's whole limit."""
    stopped = threading.Event()
    if stop is None:
        yield stopped
        return
    done = threading.Event()

    def watch() -> None:
        while not done.wait(STOP_POLL_SECONDS):
            if stop():
                stopped.set()
                solver.terminate_early()
                return

    watcher = threading.Thread(target=watch, name="counterplan-solve-stop", daemon=True)
    watcher.start()
    try:
        yield stopped
    finally:
        done.set()
        watcher.join()


def solve_row(
    explainer: RowExplainer,
    row_id: Any,
    row: dict[str, Any],
    seed: int,
    calls: SharedCalls | None,
    *,
    running: _Running | None = None,
) -> Record:
    """One row's record: its solve, or the reason it has none (never an exception); a member of
    ``running`` while it solves, so the batch can stop it."""
    own = row_seed(seed, row_id)
    started = time.perf_counter()
    try:
        solver = explainer.solver(row, seed=own, calls=calls)
        if explainer.engine == "auto":  # auto chooses per row (its estimate reads the row's program size)
            engine, reason = getattr(solver, "engine", None), getattr(solver, "engine_reason", "")
            _log.info("batch.auto_engine", row_id=id_text(row_id), engine=engine, reason=reason)
        member = running.member(solver) if running is not None else nullcontext()
        with member, calls.member() if calls is not None else nullcontext():
            result = solver.solve()
    except Exception as exc:  # a bad row or a failing model: an error row, the job goes on
        return error_record(row_id, exc, own, time.perf_counter() - started)
    return record_of(row_id, result, own, time.perf_counter() - started)


def rows_at_once(explainer: RowExplainer, window: int, cores: int | None = None) -> int:
    """How many rows the threads path solves at once: ``window``, or, when a time limit may cut
    a row's solve short (:meth:`~counterplan.solver.core.config.SolverConfig.reads_the_clock`),
    at most one per core this process may use (``cores``: its share when it is one of several
    workers; default every core it may run on). Each row then has about a core for its time
    limit, as ``explainer.explain`` has; run ``window`` at a time, the rows would share the
    process's CPU within their limits (64 exact rows of a 100-tree forest under a 0.3 s limit:
    61 of the 63 rows to solve not found, where each alone finds an answer). Without a time
    limit a row's answer does not depend on how many run at once, and the window stays."""
    if not explainer.config.reads_the_clock(explainer.engine):
        return window
    return max(1, min(window, usable_cores() if cores is None else cores))


def usable_cores() -> int:
    """The cores this process may run on (its affinity where the system tells it)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


def shared_wait(explainer: RowExplainer) -> float:
    """How long a model call waits for the other solves of its block: briefly when a solve may
    spend long without calling the model (the exact engine's programs), or when a time limit may
    cut it (:func:`rows_at_once` runs one row a core then, and a wait for the other rows' calls is
    time charged to the row's own limit: with a model taking 0.4 s a call under a 1 s limit, 8 of
    20 rows stopped after one call where each alone finds its answer in two)."""
    if runs_exact(explainer.config, explainer.engine) or explainer.config.reads_the_clock(explainer.engine):
        return EXACT_MAX_WAIT_SECONDS
    return BATCH_MAX_WAIT_SECONDS


def run_blocks(
    explainer: RowExplainer,
    items: Sequence[Item],
    seed: int,
    window: int,
    on_record: Callable[[Record], None],
    *,
    vectorised: bool = True,
    stop: Callable[[], bool] | None = None,
    cores: int | None = None,
) -> None:
    """Solve ``items`` in this process: with ``vectorised`` (the default), ``window`` rows at a
    time through the vectorised engine (:mod:`counterplan.solver.batch.vectorised`) where it can
    go, the rest (and every row, when it cannot run this explainer at all) on the threads path
    (:func:`run_block`); without it, every row on the threads path. ``stop`` is asked before
    every model call of a vectorised block, and by :func:`run_block` while its rows run;
    ``cores``: this process's share of the cores (:func:`rows_at_once`)."""
    refusal = vector_refusal(explainer) if vectorised else "the threads path was asked for"
    if refusal is not None:
        if vectorised:
            _log.info("batch.threads_path", reason=refusal)
        run_block(explainer, items, seed, window, on_record, stop=stop, cores=cores)
        return
    for start in range(0, len(items), window):
        run_vector_block(
            explainer,
            items[start : start + window],
            seed,
            on_record,
            stop=stop,
            fallback=lambda rest: run_block(explainer, rest, seed, window, on_record, stop=stop, cores=cores),
        )
