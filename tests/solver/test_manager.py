from __future__ import annotations

import threading

import pytest

from counterplan.planning import CounterfactualProblem
from counterplan.solver import SolverConfig, SolverManager, SolveStatus, TerminationConfig
from counterplan.solver.manager import UnknownJobError


def test_jobs_run_in_the_background_on_a_bounded_pool(linear_problem: CounterfactualProblem) -> None:
    quick = SolverConfig(termination=TerminationConfig(step_count_limit=15))
    endless = SolverConfig(termination=TerminationConfig(spent_limit_seconds=120.0))
    heard = threading.Event()
    with SolverManager(max_workers=1) as manager:
        long_job = manager.submit(linear_problem, endless, listener=lambda event: heard.set())
        queued = manager.submit(linear_problem, quick, seed=4, job_id="mine")
        assert heard.wait(30)
        assert long_job.status is SolveStatus.SOLVING
        assert queued.status is SolveStatus.SCHEDULED  # one worker: it waits
        assert [s.job_id for s in manager.list_jobs()] == [long_job.job_id, "mine"]
        manager.terminate_early(long_job.job_id)
        stopped = long_job.result(timeout=30)
        assert stopped.statistics.termination_reason == "terminated early"
        assert queued.result(timeout=60).valid
        assert queued.status is SolveStatus.DONE and long_job.status is SolveStatus.DONE
        summary = manager.get("mine").summary()
        assert summary.best_score == queued.result().score
        with pytest.raises(UnknownJobError):
            manager.get("nope")
        with pytest.raises(ValueError, match="already in use"):
            manager.submit(linear_problem, quick, job_id="mine")
        manager.forget("mine")
        assert [s.job_id for s in manager.list_jobs()] == [long_job.job_id]


def test_a_failing_solve_is_reported(linear_problem: CounterfactualProblem) -> None:
    from counterplan.planning import CallableAdapter, ClassGoal, OutputSpec

    def broken(X: object) -> object:
        raise RuntimeError("no model today")

    problem = CounterfactualProblem(
        linear_problem.space.features, [ClassGoal(target=1)], CallableAdapter(broken, [OutputSpec("y", (0, 1))])
    )
    with SolverManager() as manager:
        job = manager.submit(problem)
        with pytest.raises(Exception, match="no model today"):
            job.result(timeout=30)
        assert job.status is SolveStatus.FAILED
