"""Run a batch: rows in, one record per row out, in blocks, in this process or in others.

In one process, up to ``window`` rows are solved at once as one block
(:func:`counterplan.solver.batch.block.run_blocks`): by default searched together by the vectorised
engine, or (``vectorised=False``, and for the rows that engine cannot search) each row in its own
thread, all sharing one :class:`~counterplan.solver.batch.shared_calls.SharedCalls`, so every step of
every running solve is scored in one model call. With ``workers`` > 1 the rows are cut into
blocks of ``window`` and each block runs in a worker process the same way; the explainer is sent
to each worker once. With ``ray`` the blocks run on a Ray cluster
(:mod:`counterplan.solver.batch.on_ray`). Records come back through ``on_record`` as rows finish
(so a job can write them as it goes) and, at the end, as a DataFrame in the order of the rows.

The explainer is what :class:`~counterplan.solver.batch.protocol.RowExplainer` says it is: the
explainer's ``explain_batch`` calls this module, never the other way round.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import pandas as pd

from counterplan.planning.errors import CounterplanError, ProblemError, echo
from counterplan.planning.inference import repeated_name
from counterplan.solver.batch.block import STOP_POLL_SECONDS, Item, Record, run_blocks, usable_cores
from counterplan.solver.batch.on_ray import connect, run_on_ray
from counterplan.solver.batch.protocol import RowExplainer
from counterplan.solver.batch.records import batch_question, records_frame
from counterplan.solver.batch.rows import RowSelection, id_text, meeting_the_goal, model_rows, probe_row
from counterplan.solver.core.config import check_seed

DEFAULT_WINDOW = 64
"""Rows solved at once in one process: enough that a model call serves many solves, few enough
that the threads' own work stays in the caches."""
MAX_WINDOW = 1024
"""The most rows one process solves at once."""
SKIPPED = "already_met_skipped"
"""The key of the result's ``attrs`` that counts the rows left out because they meet the goal
already (``only_rejected``): they have no record."""


class WorkerLostError(CounterplanError):
    """A worker process ended without handing back its rows (killed by a signal, such as the
    out-of-memory killer's or ``kill -9``, or crashed): the rows it held, and the rows queued,
    have no records; the records handed back before are kept."""


def explain_batch(
    explainer: RowExplainer,
    rows: pd.DataFrame | RowSelection | str | Sequence[int] | None = None,
    *,
    seed: int | None = None,
    only_rejected: bool = False,
    workers: int = 1,
    window: int | None = None,
    on_record: Callable[[Record], None] | None = None,
    skip: Iterable[Any] = (),
    ray: str | None = None,
    vectorised: bool | None = None,
    stop: Callable[[], bool] | None = None,
) -> pd.DataFrame:
    """Explain many rows of ``explainer``'s model; one record per row.

    Parameters
    ----------
    explainer:
        The model, data and settings.
    rows:
        A DataFrame of rows to explain (ids: its index labels), or a selection of the
        explainer's training data by position (``"all"``, ``"rejected"``, ``"0:500"``, a list of
        positions; ids: the index labels, positions for a CSV); None: every training row.
        Only the columns the model reads are read (``explainer.columns``): an id or a group
        column in the rows is left out.
    seed:
        The batch's seed (default :func:`batch_seed`: the explainer's, else its configuration's
        ``random_seed``, 0 unless set); each row's own comes from it and the row's id
        (:func:`counterplan.solver.batch.rows.row_seed`).
    only_rejected:
        Leave out rows that already meet the goal (``rows="rejected"`` sets it). They are found
        before any solve with one call of the real model per group of rows whose problems read
        their columns alike (one call in all for most data;
        :func:`counterplan.solver.batch.rows.meeting_the_goal`), get no record, and are counted
        in the result's ``attrs["already_met_skipped"]``; a row that call cannot judge (a gap, a
        failing prediction) is solved and left out if its solve finds it meets the goal.
    workers:
        Worker processes (1: this process only).
    window:
        Rows solved at once per process (default 64).
    on_record:
        Called with each row's record as soon as the row is done (in this thread).
    skip:
        Row ids already done (a resumed job): they are not explained again.
    ray:
        Run the blocks on Ray instead of local processes: ``"auto"`` starts a local Ray for the
        job, an address (``ray://host:10001``, ``host:6379``) joins a running cluster
        (:mod:`counterplan.solver.batch.on_ray`; needs the ``ray`` extra).
    vectorised:
        True or None (the default): search each block's rows together as array operations
        (:mod:`counterplan.solver.vector`) where the vectorised engine can go, in this process, on
        workers and on Ray alike; rows it cannot search keep the threads path
        (:func:`counterplan.solver.batch.vectorised.vector_refusal` says why). False: every row
        on the threads path, each row's answer then that of ``Explainer.explain`` with its seed.
    stop:
        A deadline's check (a function of no arguments), asked before every model call of a
        block searched together, and before each row and every
        :data:`~counterplan.solver.batch.block.STOP_POLL_SECONDS` on the threads path (in this
        process only: ``workers`` 1, no Ray): once True, the rows searching and every later one
        answer with their best so far, cut as a stop request cuts a solve. A time limit in the
        configuration is each row's own (a block's rows share it fairly:
        :mod:`counterplan.solver.batch.fair_share`), so a caller with a deadline for the whole
        batch gives it here; ``on_record`` may raise to end the batch between rows.

    Returns
    -------
    DataFrame
        Columns ``row_id, status, valid, score, distance, changed, changes, seconds,
        model_calls, seed, question, error`` and ``cf_<feature>`` per feature, one row per explained row in
        the order of ``rows``. ``status`` is ``ok``, ``not_found``, ``already_met`` or ``error``
        (``already_met`` only without ``only_rejected``: such a row's record is its own solve's,
        with the original's score).
    """
    if seed is not None:
        check_seed(seed)
    base = int(seed) if seed is not None else batch_seed(explainer)
    size = _window(window)
    vector = _checked_engine(workers, vectorised)
    check_forked_threads(workers, explainer.config.model_threads, ray)
    _check_callbacks(on_record, stop, in_process=workers == 1 and ray is None)
    if ray is not None:
        connect(ray)  # an address that does not answer is refused before any work starts
    frame, only_rejected, skipped = _rows_to_explain(explainer, rows, only_rejected, skip)
    items = _items(frame)
    records: list[Record] = []
    question = batch_question(explainer.question, vectorised=vector)

    def keep(record: Record) -> None:
        nonlocal skipped
        if only_rejected and record["status"] == "already_met":  # a row the selection could not judge
            skipped += 1
            return
        record["question"] = question
        records.append(record)
        if on_record is not None:
            on_record(record)

    if ray is not None:
        run_on_ray(explainer, items, base, window=size, on_record=keep, vectorised=vector)
    elif workers == 1:
        run_blocks(explainer, items, base, size, keep, vectorised=vector, stop=stop)
    else:
        _run_processes(explainer, items, base, window=size, workers=workers, on_record=keep, vectorised=vector)
    order = {id_text(item[0]): i for i, item in enumerate(items)}
    records.sort(key=lambda r: order[id_text(r["row_id"])])
    result = records_frame(records, _features(explainer))
    result.attrs[SKIPPED] = skipped
    return result


def batch_seed(explainer: RowExplainer) -> int:
    """A batch's seed when none is given: the explainer's, else its configuration's ``random_seed``
    (``counterplan batch --config`` with ``random_seed: 5`` and no ``--seed``), as one solve takes
    it. The configuration's was left out: such a batch ran with seed 0 whatever it said."""
    return explainer.seed if explainer.seed is not None else explainer.config.random_seed


def _frame(
    explainer: RowExplainer, rows: pd.DataFrame | RowSelection | str | Sequence[int] | None, only_rejected: bool
) -> tuple[pd.DataFrame, bool]:
    """The rows to explain (the columns the model reads: :func:`~counterplan.solver.batch.rows.model_rows`),
    and whether to leave out the ones that meet the goal already."""
    if isinstance(rows, pd.DataFrame):
        frame = rows
    else:
        if explainer.data is None:
            raise ProblemError("rows", "this explainer has no training data to select rows from: give the rows")
        selection = rows if isinstance(rows, RowSelection) else RowSelection.parse(rows, len(explainer.data))
        only_rejected = only_rejected or selection.only_rejected
        frame = selection.apply(explainer.data)
    if frame.index.has_duplicates:
        raise ProblemError("rows", "the rows' index has duplicate labels: row ids must be unique")
    texts = {id_text(label) for label in frame.index}  # 5 and "5" get one seed and read alike in the records
    if len(texts) != len(frame):
        raise ProblemError("rows", "the rows' index has labels that read alike (5 and '5'): row ids must be unique")
    frame = model_rows(explainer, frame)
    repeated = repeated_name(frame.columns)
    if repeated is not None:  # a row's record would keep one of them without a word
        raise ProblemError("rows", f"the rows have two columns {echo(repeated)}: give each column one name")
    return frame, only_rejected


def _items(frame: pd.DataFrame) -> list[Item]:
    """Each row's id and values. A frame of none of the model's columns (an id column alone) gives
    each row no values, for its problem to refuse as it refuses a missing feature (pandas gives
    such a frame no records at all: the batch ended on a bare ``ValueError`` of ``zip``)."""
    records = frame.to_dict(orient="records") if len(frame.columns) else [{} for _ in range(len(frame))]
    return [(label, {str(k): v for k, v in record.items()}) for label, record in zip(frame.index, records, strict=True)]


def _checked_engine(workers: int, vectorised: bool | None) -> bool:
    """Whether the blocks go to the vectorised engine, once ``workers`` and ``vectorised`` are
    checked (a bad value is refused naming its field)."""
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= (os.cpu_count() or 1) * 8:
        raise ProblemError("workers", f"must be from 1 to {(os.cpu_count() or 1) * 8}, given {workers!r}")
    if vectorised is not None and not isinstance(vectorised, bool):
        raise ProblemError("vectorised", f"must be true, false or none, given {vectorised!r}")
    return vectorised is not False


def check_forked_threads(workers: int, model_threads: int | None, ray: str | None = None) -> None:
    """Refuse worker processes whose model calls would run on several native threads.

    The workers are forked, and a fork does not copy the parent's OpenMP threads: once the parent
    has run OpenMP on several threads (fitting a model does), a worker's call of an OpenMP model
    (HistGradientBoosting, LightGBM, XGBoost) on more than one thread waits for them for good. A
    batch of ``workers=2`` with ``model_threads`` None or 2 hung so (the determinism fuzz's
    finding); on one thread a call starts none. Ray's workers are no forks of this process."""
    if workers > 1 and ray is None and model_threads != 1:
        raise ProblemError(
            "model_threads",
            f"must be 1 with worker processes (workers={workers}), given {model_threads}: a forked worker's "
            "call of an OpenMP model (HistGradientBoosting, LightGBM, XGBoost) on several threads hangs; "
            "more workers use more cores",
        )


def _rows_to_explain(
    explainer: RowExplainer,
    rows: pd.DataFrame | RowSelection | str | Sequence[int] | None,
    only_rejected: bool,
    skip: Iterable[Any],
) -> tuple[pd.DataFrame, bool, int]:
    """The rows left to explain, whether rows meeting the goal are left out, and how many were:
    the rows a resumed job did (``skip``) go first, then (``only_rejected``) those that meet the
    goal already, found with model calls over the rows, not a solve per approved row."""
    frame, only_rejected = _frame(explainer, rows, only_rejected)
    done = _done(skip)
    if done:
        frame = frame[[id_text(label) not in done for label in frame.index]]
    if not only_rejected:
        return frame, False, 0
    met = meeting_the_goal(explainer, frame)
    return frame[~met], True, int(met.sum())


def _check_callbacks(on_record: Any, stop: Any, *, in_process: bool) -> None:
    """Refuse an ``on_record`` or ``stop`` that is no function (``on_record`` was only called once
    the first row was solved: a bare ``TypeError`` after the work), and a stop check for rows run
    in other processes."""
    if on_record is not None and not callable(on_record):
        given = type(on_record).__name__
        raise ProblemError("on_record", f"must be a function that takes each row's record (given a {given})")
    if stop is not None and not callable(stop):
        given = type(stop).__name__
        raise ProblemError("stop", f"must be a function of no arguments that returns True to stop (given a {given})")
    if stop is not None and not in_process:
        raise ProblemError("stop", "a stop check runs in this process only: give workers=1 and no ray")


def _done(skip: Iterable[Any]) -> set[str]:
    """The row ids ``skip`` names, as text. A string is refused: it is iterable, so ``skip="12"``
    skipped rows 1 and 2; and so is anything that is not a collection of ids (``5``, ``None``)."""
    if isinstance(skip, str | bytes) or not isinstance(skip, Iterable):
        given = f"the {type(skip).__name__} {echo(skip)}"
        raise ProblemError("skip", f"give the row ids already done as a list or set, given {given}")
    return {id_text(s) for s in skip}


def _window(window: int | None) -> int:
    if window is None:
        return DEFAULT_WINDOW
    if isinstance(window, bool) or not isinstance(window, int) or not 1 <= window <= MAX_WINDOW:
        raise ProblemError("window", f"must be from 1 to {MAX_WINDOW}, given {window!r}")
    return window


def _features(explainer: RowExplainer) -> list[str]:
    return [f.name for f in explainer.problem(probe_row(explainer), trust_region=False).space.features]


ORPHAN_POLL_SECONDS = 0.5
"""How often a worker process asks whether the process that started it is still there."""

_WORKER: RowExplainer | None = None


def worker_started() -> None:
    """What every worker process of a pool (:func:`_run_processes`, the audit's proofs) does first.

    A forked worker inherits the command line's SIGTERM handler, which raises KeyboardInterrupt:
    the pool would take that as its task's error and go on to the next (an audit's proof worker
    did, and a stopped audit's exit waited 18-21 s for proofs no one would read); its parent ends
    it, so SIGTERM gets its default back. And a worker ends itself once its parent is gone: a parent
    killed at once (``kill -9``, the OOM killer) cannot stop its workers, and each waited for its
    next task for good, holding the model and the data (a batch on two workers killed so left
    both running, idle, with the job's output pipes open). Whether the parent is there is asked
    every :data:`ORPHAN_POLL_SECONDS` by a daemon thread: a worker whose parent died is
    re-parented, so its parent's id changes."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(ORPHAN_POLL_SECONDS)
        os._exit(1)  # nobody is left to take the task's answer

    threading.Thread(target=watch, name="counterplan-parent-watch", daemon=True).start()


def _start_worker(explainer: RowExplainer) -> None:
    global _WORKER  # noqa: PLW0603 - one explainer per worker process, sent once
    _WORKER = explainer
    worker_started()


def _worker_block(items: list[Item], seed: int, window: int, vectorised: bool, cores: int) -> list[Record]:
    assert _WORKER is not None
    out: list[Record] = []
    run_blocks(_WORKER, items, seed, window, out.append, vectorised=vectorised, cores=cores)
    return out


def _run_processes(
    explainer: RowExplainer,
    items: list[Item],
    seed: int,
    *,
    window: int,
    workers: int,
    on_record: Callable[[Record], None],
    vectorised: bool = True,
) -> None:
    """Blocks of ``window`` rows on ``workers`` processes; each block's records as it finishes."""
    blocks = [items[i : i + window] for i in range(0, len(items), window)]
    pool = ProcessPoolExecutor(max_workers=workers, initializer=_start_worker, initargs=(explainer,))
    cores = max(1, usable_cores() // workers)  # each worker's share (rows under a time limit: one a core)
    futures = [pool.submit(_worker_block, block, seed, window, vectorised, cores) for block in blocks]

    def each(records: list[Record]) -> None:
        for record in records:
            on_record(record)

    gather(pool, futures, each)


def gather(
    pool: ProcessPoolExecutor,
    futures: Iterable[Future[Any]],
    on_result: Callable[[Any], object],
    stop: Callable[[], bool] | None = None,
) -> bool:
    """Each of ``futures``' results to ``on_result`` as it finishes; the pool shut down after the
    last. True when ``stop`` said stop first (asked every
    :data:`~counterplan.solver.batch.block.STOP_POLL_SECONDS`): the pool's queued work is dropped
    and its workers ended then, not after the tasks they run (an audit's 4 s stop took 11 s on
    two workers, each finishing its task of up to 8 proofs). Any exception (Ctrl-C, SIGTERM,
    ``on_result``'s, a task's) ends them the same way and is raised: the queued tasks are dropped,
    not run first (a pool's ``with`` would wait for every one of them, hours of a large job), and
    the running ones stopped (a SIGTERM reaches this process alone, and its exit would wait for
    the workers' tasks; a terminal's Ctrl-C reaches them too, and they end by themselves). A
    worker that ended abruptly (the OOM killer) raises :class:`WorkerLostError`: the pool's
    ``BrokenProcessPool`` ended the command with a traceback."""
    pending = set(futures)
    try:
        while pending:
            if stop is not None and stop():
                _stop_workers(pool)
                return True
            poll = None if stop is None else STOP_POLL_SECONDS
            finished, pending = wait(pending, timeout=poll, return_when=FIRST_COMPLETED)
            for future in finished:
                on_result(future.result())
    except BrokenProcessPool:  # one line for the user, not the pool's traceback
        _stop_workers(pool)
        raise WorkerLostError(
            "a worker process ended abruptly (killed by a signal, such as the out-of-memory killer's, or "
            "crashed): the rows it and the others had left have no records"
        ) from None
    except BaseException:
        _stop_workers(pool)
        raise
    pool.shutdown()
    return False


MANAGER_JOIN_SECONDS = 1.0
"""How long a stopped pool's manager thread is waited for, at most: it ends once it has seen its
ended workers, in a few milliseconds, unless its queue's feeder thread is stuck writing a task no
worker will read (an audit's proofs: it did not end in 10 s, and the audit's stop, a promise, was
kept 10 s late)."""


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    """Drop ``pool``'s queued work and end its worker processes now (found in the pool's own
    table of its processes: no public call does it before Python 3.14's ``terminate_workers``),
    then wait for the pool's manager thread to close its wakeup pipe. Python 3.11's exit wakes
    every pool's manager through that pipe without the pool's lock: closed by the manager at that
    moment, the write printed a traceback after the command's one line (``OSError: [Errno 9] Bad
    file descriptor``, a fresh clone's CI, Ctrl-C during a batch on two workers). Once the manager
    has ended, its pipe is marked closed and the exit passes it by."""
    workers = list((getattr(pool, "_processes", None) or {}).values())
    manager = getattr(pool, "_executor_manager_thread", None)
    pool.shutdown(wait=False, cancel_futures=True)
    for process in workers:
        if process.is_alive():
            process.terminate()
    if manager is not None:
        manager.join(MANAGER_JOIN_SECONDS)
