from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np
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


def _slow_toy(X: np.ndarray) -> np.ndarray:
    """The CSCF paper's toy (a developer in the US, or with a degree, is approved), 20 ms a call."""
    time.sleep(0.02)
    developer, degree, us = X[:, 0] == 1, X[:, 1] == 1, X[:, 2] == 1
    p = np.where(developer & (us | degree), 0.9, 0.1)
    return np.column_stack([1.0 - p, p])


def _toy(model: Callable[[np.ndarray], np.ndarray]) -> CounterfactualProblem:
    from counterplan.planning import CallableAdapter, ClassGoal, OutputSpec
    from tests.toy_person import toy_space

    space = toy_space()
    return CounterfactualProblem(
        space.features, [ClassGoal(target=1)], CallableAdapter(model, [OutputSpec("ok", (0, 1))])
    )


def test_a_plan_search_is_a_job_like_a_solve(linear_problem: CounterfactualProblem) -> None:
    """One numbering, one listing, the same status and early end: a terminated plan search
    answers with its front so far."""
    pytest.importorskip("pymoo")
    from counterplan.planning.actions import ActionSet
    from counterplan.planning.score import BendableScore
    from counterplan.solver.plans.search import MAX_GENERATIONS, PlanConfig, plan_termination
    from tests.toy_person import TOY

    endless = PlanConfig(population=40, termination=plan_termination(MAX_GENERATIONS))  # 20 ms a call: minutes
    heard = threading.Event()
    with SolverManager(max_workers=2) as manager:
        solve = manager.submit(linear_problem, SolverConfig(termination=TerminationConfig(step_count_limit=15)))
        job = manager.submit_plan(
            _toy(_slow_toy), ActionSet.from_data(TOY), config=endless, listener=lambda e: heard.set()
        )
        assert heard.wait(30)  # the front holds a plan
        assert [s.job_id for s in manager.list_jobs()] == [solve.job_id, job.job_id] == ["job-1", "job-2"]
        summary = manager.get(job.job_id).summary()
        assert summary.kind == "plan" and summary.status is SolveStatus.SOLVING
        assert summary.best_score is not None and BendableScore.parse(summary.best_score).soft[0] == -10.0
        manager.terminate_early(job.job_id)
        result = job.result(timeout=30)
        assert result.stopped_early and 1 <= result.generations < MAX_GENERATIONS
        assert result.cheapest is not None and result.cheapest.total_cost == pytest.approx(10.0)
        assert job.status is SolveStatus.DONE and manager.get(job.job_id).summary().status is SolveStatus.DONE
        assert solve.result(timeout=60).valid and manager.get(solve.job_id).summary().kind == "explain"
        with pytest.raises(ValueError, match="already in use"):
            manager.submit_plan(_toy(_slow_toy), ActionSet.from_data(TOY), config=endless, job_id=job.job_id)


def test_a_failing_plan_search_is_reported() -> None:
    pytest.importorskip("pymoo")
    from counterplan.planning.actions import ActionSet
    from counterplan.planning.errors import ModelFailureError
    from tests.toy_person import TOY

    def broken(X: np.ndarray) -> np.ndarray:
        raise RuntimeError("no model today")

    with SolverManager() as manager:
        job = manager.submit_plan(_toy(broken), ActionSet.from_data(TOY))
        with pytest.raises(ModelFailureError, match="no model today"):
            job.result(timeout=30)
        assert job.status is SolveStatus.FAILED
