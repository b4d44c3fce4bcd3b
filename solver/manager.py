"""The solver manager: runs solves and plan searches in the background on a bounded pool.

Submit a problem (or a problem and its actions, for a plan search) and get a job back at once;
list jobs, ask their status, listen to their best solutions (a plan search's: each change of its
front), wait for results, or terminate one early (its best solution, or its front, so far comes
back as its result). Both kinds of job share the pool, the ids, the listing and the early end. It
knows nothing of gRPC: the service is a thin layer on it.

Solves of one model may share their model calls (dynamic batching): pass the model's
:class:`~counterplan.solver.batch.shared_calls.SharedCalls` to :meth:`SolverManager.submit`, and the job is
its member while it runs (not while it waits in the queue, where it would hold up the others),
so whatever way the solve ends (done, failed, terminated early) it leaves the shared calls. A
plan search calls its model on its own (one call per generation).
"""

from __future__ import annotations

import enum
import itertools
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from counterplan.planning.actions import Action, ActionSet, CostGraph
from counterplan.planning.errors import CounterplanError
from counterplan.planning.problem import CounterfactualProblem
from counterplan.planning.score import BendableScore
from counterplan.solver.batch.shared_calls import SharedCalls
from counterplan.solver.core.config import SolverConfig
from counterplan.solver.core.events import BestSolutionChanged, BestSolutionListener
from counterplan.solver.core.termination import TERMINATED_EARLY
from counterplan.solver.counterfactual import CounterfactualSolver, Listener
from counterplan.solver.engines import EngineChoice
from counterplan.solver.plans.planner import PlanResult, PlanSolver
from counterplan.solver.plans.search import PlanConfig
from counterplan.solver.result import BestSolutionEvent, CounterfactualResult

R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


class SolveStatus(enum.Enum):
    """Where a job is in its life."""

    SCHEDULED = "scheduled"
    SOLVING = "solving"
    DONE = "done"
    FAILED = "failed"


class UnknownJobError(CounterplanError, KeyError):
    """No job has that id."""


@dataclass(frozen=True)
class JobSummary:
    """A job as :meth:`SolverManager.list_jobs` shows it."""

    job_id: str
    status: SolveStatus
    best_score: str | None
    kind: str = "explain"
    """``explain`` (a solve) or ``plan`` (a plan search)."""


class Solving(Protocol[R_co]):
    """What the manager runs: a solve or a plan search, stoppable from another thread."""

    def solve(self) -> R_co: ...

    def terminate_early(self) -> None: ...

    def abandon(self) -> None: ...


class Job(Generic[R]):
    """One submitted piece of work: its status, its best score so far and its result's future."""

    kind = "explain"

    def __init__(self, job_id: str, work: Solving[R]) -> None:
        self.job_id = job_id
        self.status = SolveStatus.SCHEDULED
        self.future: Future[R] | None = None
        self._work = work
        self._best_score: str | None = None
        self._lock = threading.Lock()
        self.answer_by: float | None = None
        """When its caller answers at the latest (``time.monotonic()``), done or not, with
        :meth:`so_far`: a server's backstop before its client's deadline. None: no such time."""

    def _note_best(self, score: str) -> None:
        with self._lock:
            self._best_score = score

    def run(self) -> R:
        """Do the work (on the manager's pool)."""
        return self._work.solve()

    def terminate_early(self) -> None:
        """Stop at the next step (or before it starts); the best so far comes back."""
        self._work.terminate_early()

    def abandon(self) -> None:
        """Stop now and make no model call more: the caller answers with :meth:`so_far` and
        never reads this job's result (its thread may still be inside a model call; it ends
        after it, without another)."""
        self._work.abandon()

    def so_far(self) -> R | None:
        """The best so far, without waiting for the work (a thread inside a model call cannot
        be waited for): see each kind of job. None when there is nothing to answer with yet."""
        raise NotImplementedError

    def result(self, timeout: float | None = None) -> R:
        """Wait for the result; re-raises the work's error if it failed."""
        assert self.future is not None
        return self.future.result(timeout)

    def summary(self) -> JobSummary:
        """Id, status and best score so far."""
        with self._lock:
            best = self._best_score
        return JobSummary(self.job_id, self.status, best, self.kind)


class SolverJob(Job[CounterfactualResult]):
    """One submitted solve."""

    def __init__(self, job_id: str, solver: CounterfactualSolver, calls: SharedCalls | None = None) -> None:
        super().__init__(job_id, solver)
        self.solver = solver
        self.calls = calls
        """The model calls it shares with other solves of its model, or None."""
        self.best: BestSolutionEvent | None = None
        solver.add_listener(self._remember)

    def _remember(self, event: BestSolutionEvent) -> None:
        self.best = event
        self._note_best(event.score)

    def so_far(self) -> CounterfactualResult | None:
        """The best answer scored so far (:meth:`CounterfactualSolver.so_far`), as a solve that
        was terminated early reports it."""
        return self.solver.so_far(TERMINATED_EARLY)

    def run(self) -> CounterfactualResult:
        """Solve, a member of the shared model calls while it runs (left however it ends, so no
        one waits for it)."""
        if self.calls is None:
            return self.solver.solve()
        with self.calls.member():
            return self.solver.solve()


class PlanJob(Job[PlanResult]):
    """One submitted plan search; its best score is its front's cheapest plan's (every hard
    level 0, the soft levels minus its cost and minus its distance)."""

    kind = "plan"

    def __init__(self, job_id: str, solver: PlanSolver) -> None:
        super().__init__(job_id, solver)
        self.solver = solver
        self.best: BestSolutionChanged | None = None
        solver.add_listener(self._remember)

    def _remember(self, event: BestSolutionChanged) -> None:
        self.best = event
        self._note_best(str(BendableScore.of(event.score)))

    def so_far(self) -> PlanResult | None:
        """The front last announced, laid out without a model call (:meth:`PlanSolver.so_far`)."""
        best = self.best
        return self.solver.so_far(None if best is None else best.front)


class SolverManager:
    """Runs up to ``max_workers`` solves and plan searches at once; more wait in a queue.

    Parameters
    ----------
    max_workers:
        Jobs (solves and plan searches) that run at the same time.
    """

    def __init__(self, max_workers: int = 2) -> None:
        if max_workers < 1:
            raise ValueError("max_workers must be at least 1")
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="counterplan-solve")
        self._jobs: dict[str, Job[Any]] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def submit(
        self,
        problem: CounterfactualProblem,
        config: SolverConfig | None = None,
        *,
        seed: int | None = None,
        listener: Listener | None = None,
        job_id: str | None = None,
        num_counterfactuals: int = 1,
        engine: EngineChoice | None = None,
        calls: SharedCalls | None = None,
    ) -> SolverJob:
        """Schedule a solve; returns its job at once.

        ``calls``: model calls shared with the other solves of the problem's model (the same
        answer as without them, in fewer model calls); None calls the model directly.
        """
        solver = CounterfactualSolver(problem, config, seed, num_counterfactuals, engine, calls=calls)
        if listener is not None:
            solver.add_listener(listener)
        with self._lock:
            job = SolverJob(self._new_id(job_id), solver, calls)
            self._jobs[job.job_id] = job
        job.future = self._pool.submit(self._run, job)
        return job

    def submit_plan(
        self,
        problem: CounterfactualProblem,
        actions: Sequence[Action] | ActionSet,
        graph: CostGraph | None = None,
        config: PlanConfig | None = None,
        *,
        listener: BestSolutionListener | None = None,
        job_id: str | None = None,
        deadline_seconds: float | None = None,
    ) -> PlanJob:
        """Schedule a plan search (:class:`~counterplan.solver.plans.planner.PlanSolver`); returns
        its job at once. A bad action is refused here, naming its field. ``listener`` hears each
        change of the front; ``deadline_seconds`` binds the search as a time limit does, its first
        generation included (a server's stop before its client's deadline)."""
        solver = PlanSolver(problem, actions, graph, config, deadline_seconds=deadline_seconds)
        if listener is not None:
            solver.add_listener(listener)
        with self._lock:
            job = PlanJob(self._new_id(job_id), solver)
            self._jobs[job.job_id] = job
        job.future = self._pool.submit(self._run, job)
        return job

    def _new_id(self, job_id: str | None) -> str:
        """``job_id``, or the next free ``job-N``; the caller holds the lock."""
        job_id = job_id or f"job-{next(self._ids)}"
        if job_id in self._jobs:
            raise ValueError(f"job id {job_id!r} is already in use")
        return job_id

    @staticmethod
    def _run(job: Job[R]) -> R:
        job.status = SolveStatus.SOLVING
        try:
            result = job.run()
        except BaseException:
            job.status = SolveStatus.FAILED
            raise
        job.status = SolveStatus.DONE
        return result

    def get(self, job_id: str) -> Job[Any]:
        """The job with this id."""
        try:
            return self._jobs[job_id]
        except KeyError:
            raise UnknownJobError(job_id) from None

    def list_jobs(self) -> list[JobSummary]:
        """Every job, in submission order."""
        with self._lock:
            jobs = list(self._jobs.values())
        return [job.summary() for job in jobs]

    def terminate_early(self, job_id: str) -> None:
        """Stop one job early."""
        self.get(job_id).terminate_early()

    def forget(self, job_id: str) -> None:
        """Drop a finished job from the list."""
        with self._lock:
            self._jobs.pop(job_id, None)

    def shutdown(self, wait: bool = True) -> None:
        """Terminate every running job early and stop the pool."""
        with self._lock:
            jobs = list(self._jobs.values())
        for job in jobs:
            job.terminate_early()
        self._pool.shutdown(wait=wait, cancel_futures=False)

    def __enter__(self) -> SolverManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


__all__ = ["Job", "JobSummary", "PlanJob", "SolveStatus", "SolverJob", "SolverManager", "UnknownJobError"]
