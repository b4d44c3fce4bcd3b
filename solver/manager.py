"""The solver manager: runs solves in the background on a bounded pool.

Submit a problem and get a :class:`SolverJob` back at once; list jobs, ask their status,
listen to their best solutions, wait for results, or terminate one early (its best solution
so far comes back as its result). It knows nothing of gRPC: the service is a thin layer on it.

Solves of one model may share their model calls (dynamic batching): pass the model's
:class:`~counterplan.solver.batch.shared_calls.SharedCalls` to :meth:`SolverManager.submit`, and the job is
its member while it runs (not while it waits in the queue, where it would hold up the others),
so whatever way the solve ends (done, failed, terminated early) it leaves the shared calls.
"""

from __future__ import annotations

import enum
import itertools
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from counterplan.planning.errors import CounterplanError
from counterplan.planning.problem import CounterfactualProblem
from counterplan.solver.batch.shared_calls import SharedCalls
from counterplan.solver.core.config import SolverConfig
from counterplan.solver.counterfactual import CounterfactualSolver, Listener
from counterplan.solver.engines import EngineChoice
from counterplan.solver.result import BestSolutionEvent, CounterfactualResult


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


class SolverJob:
    """One submitted solve."""

    def __init__(self, job_id: str, solver: CounterfactualSolver, calls: SharedCalls | None = None) -> None:
        self.job_id = job_id
        self.solver = solver
        self.calls = calls
        """The model calls it shares with other solves of its model, or None."""
        self.status = SolveStatus.SCHEDULED
        self.best: BestSolutionEvent | None = None
        self.future: Future[CounterfactualResult] | None = None
        self._lock = threading.Lock()
        solver.add_listener(self._remember)

    def _remember(self, event: BestSolutionEvent) -> None:
        with self._lock:
            self.best = event

    def terminate_early(self) -> None:
        """Stop the solve at its next step (or before it starts); its best so far comes back."""
        self.solver.terminate_early()

    def result(self, timeout: float | None = None) -> CounterfactualResult:
        """Wait for the result; re-raises the solve's error if it failed."""
        assert self.future is not None
        return self.future.result(timeout)

    def summary(self) -> JobSummary:
        """Id, status and best score so far."""
        with self._lock:
            best = self.best.score if self.best is not None else None
        return JobSummary(self.job_id, self.status, best)


class SolverManager:
    """Runs up to ``max_workers`` solves at once; more wait in a queue.

    Parameters
    ----------
    max_workers:
        Solves that run at the same time.
    """

    def __init__(self, max_workers: int = 2) -> None:
        if max_workers < 1:
            raise ValueError("max_workers must be at least 1")
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="counterplan-solve")
        self._jobs: dict[str, SolverJob] = {}
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
            job_id = job_id or f"job-{next(self._ids)}"
            if job_id in self._jobs:
                raise ValueError(f"job id {job_id!r} is already in use")
            job = SolverJob(job_id, solver, calls)
            self._jobs[job_id] = job
        job.future = self._pool.submit(self._run, job)
        return job

    def _run(self, job: SolverJob) -> CounterfactualResult:
        job.status = SolveStatus.SOLVING
        try:
            if job.calls is None:
                result = job.solver.solve()
            else:
                with job.calls.member():  # left however the solve ends, so no one waits for it
                    result = job.solver.solve()
        except BaseException:
            job.status = SolveStatus.FAILED
            raise
        job.status = SolveStatus.DONE
        return result

    def get(self, job_id: str) -> SolverJob:
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


__all__ = ["JobSummary", "SolveStatus", "SolverJob", "SolverManager", "UnknownJobError"]
