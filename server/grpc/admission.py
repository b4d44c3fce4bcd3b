"""Admission: whether a call may start solving now, and for how long; written once for every method.

Explain, ExplainStream, each ExplainBatch instance, Plan and PlanStream all solve under the same
rules: a solve slot (``max_concurrent_solves``) with room for the solve's estimated memory beside
the running ones (``max_solve_memory_mb``; RESOURCE_EXHAUSTED with a retry hint beyond them, or a
wait for a batch instance), batch instances holding at most ``max_batch_solves`` of the slots
together (so an interactive call is not refused because a batch took every slot), a time limit
from the server's maximum and the client's deadline, and nothing new once shutdown has begun.
When shutdown's grace is nearly up (the *cut*), every call still waiting for its solve answers at
once with the solve's best so far, and the solve is abandoned: one inside a model call cannot
stop before the call ends, and the grace is a promise. One :class:`Admission` per server holds
that state, and each method's module is handed it: the servicer modules then share it without
importing each other.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import grpc
import structlog

from counterplan.planning.errors import cut
from counterplan.server.grpc.refusal import Refusal, refused, retry_later
from counterplan.server.grpc.settings import ServerSettings

if TYPE_CHECKING:
    from counterplan.solver.manager import Job

log = structlog.get_logger("counterplan.server")
R = TypeVar("R")

MB = 1024 * 1024
MIN_SOLVE_SECONDS = 0.01
"""A time limit below this is no time to solve: the call ends with DEADLINE_EXCEEDED."""
NO_DEADLINE_SECONDS = 86_400.0
"""A time left past a day is no deadline: gRPC's ``time_remaining()`` is about 9e18 s for a call
without one, a timeout no wait accepts (``OverflowError``)."""
SOLVE_SHARE = 0.8
SOLVE_MARGIN_SECONDS = 0.15
"""A solve's own stop: ``SOLVE_SHARE`` of its deadline's time left less this (see
:meth:`Admission.time_limit`): with a 2 s deadline, 1.45 s."""
ANSWER_SHARE = 0.9
ANSWER_MARGIN_SECONDS = 0.1
"""A call answers by ``ANSWER_SHARE`` of its deadline's time left less this (see
:meth:`Admission.answer_by`): with a 2 s deadline, at 1.7 s at the latest. The rest is for the
answer's own work and sending it: in a soak of 64 clients on 2 cores, laying out a heavy plan's
front and sending it took up to 0.25 s after the backstop at 95 % less 0.1 s, past the deadline."""
_MIN_RETRY_SECONDS = 0.1
_SLOT_POLL_SECONDS = 0.25
"""A batch instance waiting for a solve slot looks again at least this often (a release wakes it
at once; this only bounds how late it sees the call end or the server shut down)."""


@dataclass(frozen=True)
class CallClock:
    """One call's time, reckoned from its deadline as read when it began (:meth:`Admission.clock`):
    building its problem is part of it. A trust region's linear programs, a first plausibility
    model or an action set's compilation can take most of a second, and a solve given its whole
    time limit from the end of the build, and an answer time reckoned from there, answered after
    the deadline (the client's bare DEADLINE_EXCEEDED, the grpc fuzz). Explain's solves and Plan's
    searches take their time here."""

    admission: Admission
    time_remaining: float | None
    read_at: float
    answer_by: float | None
    """When the call answers at the latest (:meth:`Admission.answer_by` of the deadline as read)."""
    doing: str

    def limit(self) -> float:
        """The solve's time limit from what the build left of the deadline (:meth:`Admission.time_limit`
        of :meth:`Admission.left`): DEADLINE_EXCEEDED when it left none."""
        return self.admission.time_limit(self.admission.left(self.time_remaining, self.read_at), self.doing)


@dataclass(frozen=True)
class _Admitted:
    """A running solve's share: its estimated memory, when its time limit ends it at the latest,
    and whether a batch instance holds it (those count against ``max_batch_solves``)."""

    estimate: int
    ends_at: float
    batch: bool = False


def shutting_down() -> Refusal:
    """UNAVAILABLE: the server is shutting down and starts nothing new."""
    return refused(grpc.StatusCode.UNAVAILABLE, "the server is shutting down; retry on another instance")


class Admission:
    """Solve slots and their memory shares, the deadline rule and the shutdown switch of one server."""

    def __init__(self, settings: ServerSettings) -> None:
        self.settings = settings
        self._running: dict[int, _Admitted] = {}
        self._tickets = itertools.count()
        self._idle = threading.Condition()
        self._closing = threading.Event()
        self._stops: set[threading.Event] = set()
        self._stops_lock = threading.Lock()
        self._cut = threading.Event()
        self._on_cut: dict[int, Callable[[], None]] = {}
        self._cut_ids = itertools.count()
        self._abandoned: set[str] = set()

    # -- slots ----------------------------------------------------------------------------------
    def take_slot(self, estimate: int) -> int:
        """A solve slot's ticket for ``estimate`` bytes, or RESOURCE_EXHAUSTED with a retry hint."""
        ticket, why, retry_after = self._take_slot(estimate)
        if ticket is None:
            raise retry_later(f"{why}; retry in {retry_after:.1f} s", retry_after)
        return ticket

    def wait_for_slot(self, estimate: int, give_up: Callable[[], Refusal | None]) -> int:
        """A batch instance's solve slot's ticket, waiting for one to come free (a batch instance
        queues where an interactive call is refused) and for the batch instances to hold fewer
        than ``max_batch_solves`` (:attr:`ServerSettings.batch_solves`); raises what ``give_up``
        returns once it returns a refusal."""
        with self._idle:
            while True:
                ticket, _, _ = self._take_slot(estimate, batch=True)
                if ticket is not None:
                    return ticket
                refusal = give_up()
                if refusal is not None:
                    raise refusal
                self._idle.wait(_SLOT_POLL_SECONDS)

    def release_slot(self, ticket: int) -> None:
        """Give a solve slot (and its memory share) back."""
        with self._idle:
            del self._running[ticket]
            self._idle.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no solve holds a slot, at most ``timeout`` seconds; True when idle."""
        with self._idle:
            return self._idle.wait_for(lambda: not self._running, timeout=timeout)

    def _take_slot(self, estimate: int, batch: bool = False) -> tuple[int | None, str, float]:
        """A ticket when a solve slot is free and ``estimate`` bytes fit beside the running solves
        (for a ``batch`` instance, also when the batch instances hold fewer than their share of the
        slots); else why not and, as a retry hint, when the first running solve must end."""
        settings = self.settings
        now = time.monotonic()
        with self._idle:
            running = list(self._running.values())
            full = len(running) >= settings.max_concurrent_solves
            if batch and sum(a.batch for a in running) >= settings.batch_solves:
                return None, f"batch instances hold {settings.batch_solves} solve slots", 0.0
            used = sum(a.estimate for a in running)
            if full or used + estimate > settings.max_solve_memory_mb * MB:
                why = (
                    f"{len(running)} solves are running"
                    if full
                    else f"the running solves hold about {used // MB:,} of {settings.max_solve_memory_mb:,} MB"
                )
                first_end = min((a.ends_at for a in running), default=now + 1.0)
                return None, why, min(max(first_end - now, _MIN_RETRY_SECONDS), settings.max_solve_seconds)
            ticket = next(self._tickets)
            self._running[ticket] = _Admitted(estimate, now + settings.max_solve_seconds, batch)
            return ticket, "", 0.0

    # -- time -----------------------------------------------------------------------------------
    def time_limit(self, time_remaining: float | None, doing: str) -> float:
        """Seconds a solve may take: the server's maximum, capped by the client's deadline
        (``time_remaining``) with room to answer; DEADLINE_EXCEEDED ("no time to ``doing``")
        when that leaves none."""
        limit = self.settings.max_solve_seconds
        if time_remaining is not None:
            limit = min(limit, time_remaining * SOLVE_SHARE - SOLVE_MARGIN_SECONDS)
        if limit < MIN_SOLVE_SECONDS:
            raise refused(grpc.StatusCode.DEADLINE_EXCEEDED, f"the deadline leaves no time to {doing}")
        return limit

    def left(self, time_remaining: float | None, since: float) -> float | None:
        """``time_remaining`` (None: no deadline), read at ``since`` (``time.monotonic()``), less
        the time passed since: what a call did after reading it (building its problem) is spent."""
        return None if time_remaining is None else time_remaining - (time.monotonic() - since)

    def clock(self, time_remaining: float | None, doing: str) -> CallClock:
        """The time of a call that builds its problem before it solves, from its deadline's
        ``time_remaining`` as just read: DEADLINE_EXCEEDED ("no time to ``doing``") before the
        build when the deadline leaves no time at all."""
        read_at = time.monotonic()
        self.time_limit(time_remaining, doing)
        return CallClock(self, time_remaining, read_at, self.answer_by(time_remaining), doing)

    def answer_by(self, time_remaining: float | None) -> float | None:
        """When a call answers at the latest, whatever its solve is doing (``time.monotonic()``;
        None without a deadline): :data:`ANSWER_SHARE` of the time left less
        :data:`ANSWER_MARGIN_SECONDS`, room to send the answer. The solve's own stop
        (:meth:`time_limit`) comes before it; this one holds when it is late: a model call longer
        than the ones before, or a machine so busy that the answer's own work overruns."""
        if time_remaining is None or time_remaining > NO_DEADLINE_SECONDS:  # gRPC: ~9e18 without one
            return None
        return time.monotonic() + time_remaining * ANSWER_SHARE - ANSWER_MARGIN_SECONDS

    def answer_now(self, job: Job[R], request_id: str) -> R:
        """The answer of a job still running when its caller stops waiting (:meth:`wait_done`
        said so): at shutdown's cut, :meth:`abandon`; at the job's ``answer_by``, its best so far
        too (the job is abandoned: nobody will read its result), DEADLINE_EXCEEDED when it has
        none yet (the only case a deadline gives no answer)."""
        if self._cut.is_set():
            return self.abandon(job, request_id)
        self.give_up(job, request_id)
        result = job.so_far()
        if result is None:
            raise refused(grpc.StatusCode.DEADLINE_EXCEEDED, "the deadline came before this request had an answer")
        return result

    def give_up(self, job: Job[Any], request_id: str) -> None:
        """Stop waiting for a job still running when its caller answered without it (at
        shutdown's cut: :meth:`abandon_job`; at its deadline: abandoned, no model call more)."""
        if self._cut.is_set():
            self.abandon_job(job, request_id)
            return
        job.abandon()
        log.info("answered by its deadline without waiting for its solve", request_id=cut(request_id))

    # -- shutdown -------------------------------------------------------------------------------
    @property
    def closing(self) -> bool:
        """True once shutdown has begun: no new solve starts."""
        return self._closing.is_set()

    def stop_switch(self) -> threading.Event:
        """A stop switch for work that the solver manager does not run, set by
        :meth:`begin_shutdown` (or at once, when shutdown has already begun)."""
        stop = threading.Event()
        with self._stops_lock:
            self._stops.add(stop)
        if self._closing.is_set():
            stop.set()
        return stop

    def drop_stop_switch(self, stop: threading.Event) -> None:
        """The work with this stop switch has ended."""
        with self._stops_lock:
            self._stops.discard(stop)

    @property
    def stop_switches(self) -> int:
        """Stop switches held by running work now."""
        with self._stops_lock:
            return len(self._stops)

    def begin_shutdown(self) -> None:
        """Admit nothing more, and set every stop switch: each such search answers with what it has."""
        self._closing.set()
        with self._stops_lock:
            for stop in self._stops:
                stop.set()

    # -- the cut: shutdown's grace running out -----------------------------------------------------
    @property
    def cut(self) -> bool:
        """True once shutdown's grace is nearly up: every call answers now with its best so far."""
        return self._cut.is_set()

    def on_cut(self, callback: Callable[[], None]) -> int:
        """Call ``callback`` at the cut (at once when it has come); returns its key for
        :meth:`drop_on_cut`. A call that waits for its solve wakes up by it."""
        with self._stops_lock:
            key = next(self._cut_ids)
            if not self._cut.is_set():
                self._on_cut[key] = callback
                return key
        callback()
        return key

    def drop_on_cut(self, key: int) -> None:
        """The call that registered this callback no longer waits."""
        with self._stops_lock:
            self._on_cut.pop(key, None)

    def wait_done(self, future: Future[Any], answer_by: float | None = None) -> bool:
        """Wait until ``future`` is done (True), or the cut or ``answer_by`` (``time.monotonic()``)
        has come (False, ``future`` not done)."""
        woken = threading.Event()
        future.add_done_callback(lambda _: woken.set())
        key = self.on_cut(woken.set)
        try:
            woken.wait(
                None if answer_by is None else min(max(answer_by - time.monotonic(), 0.0), threading.TIMEOUT_MAX)
            )
        finally:
            self.drop_on_cut(key)
        return future.done()

    def abandon_job(self, job: Job[Any], request_id: str) -> None:
        """Abandon a job still running at the cut: it makes no model call more, and its thread,
        counted in :attr:`abandoned`, ends after the call it is in."""
        job.abandon()
        with self._stops_lock:
            if job.job_id in self._abandoned:
                return
            self._abandoned.add(job.job_id)
        log.warning("abandoned at shutdown", request_id=request_id, job_id=job.job_id)

    @property
    def abandoned(self) -> int:
        """Solves abandoned at the cut (their threads may still be inside a model call)."""
        with self._stops_lock:
            return len(self._abandoned)

    def abandon(self, job: Job[R], request_id: str) -> R:
        """The best so far of a job still running at the cut, which is abandoned
        (:meth:`abandon_job`); UNAVAILABLE when it has no answer yet (the server shut down before
        its first candidate was scored)."""
        self.abandon_job(job, request_id)
        result = job.so_far()
        if result is None:
            raise refused(
                grpc.StatusCode.UNAVAILABLE,
                "the server shut down before this request had an answer; retry on another instance",
            )
        return result

    def cut_calls(self) -> None:
        """Shutdown's grace is nearly up: wake every call waiting for its solve, to answer now
        with its best so far (a solve inside a model call cannot stop sooner than the call ends,
        and the grace is a promise)."""
        with self._stops_lock:
            self._cut.set()
            callbacks = list(self._on_cut.values())
            self._on_cut.clear()
        for callback in callbacks:
            callback()
