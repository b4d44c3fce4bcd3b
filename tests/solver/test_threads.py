"""Native thread pools during model calls, and answers that do not depend on machine load."""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import HistGradientBoostingClassifier
from threadpoolctl import threadpool_info

from counterplan.planning import CallableAdapter, ClassGoal, CounterfactualProblem, OutputSpec
from counterplan.planning.threads import SHARED_POOLS, NativeThreadLimit
from counterplan.solver import SolverConfig, SolverManager, TerminationConfig, explain


def _threads(user_api: str) -> set[int]:
    return {int(pool["num_threads"]) for pool in threadpool_info() if pool["user_api"] == user_api}


class RecordingModel:
    """A HistGradientBoosting model (OpenMP) that records the pools' sizes inside every call."""

    def __init__(self) -> None:
        rng = np.random.default_rng(0)
        X = rng.uniform(0, 10, (600, 3))
        y = (X[:, 0] + X[:, 1] > 10).astype(int)
        self.model = HistGradientBoostingClassifier(max_iter=20, random_state=0).fit(X, y)
        self.seen: list[tuple[set[int], set[int]]] = []

    def __call__(self, X: Any) -> Any:
        self.seen.append((_threads("openmp"), _threads("blas")))
        return self.model.predict_proba(X)


def _problem(model: RecordingModel) -> CounterfactualProblem:
    from counterplan.planning import FloatFeature

    features = [FloatFeature(name=name, value=2.0, low=0.0, high=10.0) for name in ("a", "b", "c")]
    return CounterfactualProblem(features, [ClassGoal(target=1)], CallableAdapter(model, [OutputSpec("y", (0, 1))]))


def test_model_calls_run_on_one_native_thread_by_default_and_pools_are_restored() -> None:
    model = RecordingModel()
    before = (_threads("openmp"), _threads("blas"))
    result = explain(_problem(model), seed=0)
    assert result.valid and model.seen
    assert all(openmp == {1} for openmp, _ in model.seen)
    assert all(blas <= {1} for _, blas in model.seen)
    assert (_threads("openmp"), _threads("blas")) == before
    assert SHARED_POOLS.holders == 0


def test_model_threads_is_configurable_and_none_leaves_the_pools_alone() -> None:
    model = RecordingModel()
    explain(_problem(model), SolverConfig(model_threads=3), seed=0)
    assert all(openmp == {3} for openmp, _ in model.seen)
    untouched = _threads("openmp")
    model.seen.clear()
    explain(_problem(model), SolverConfig(model_threads=None), seed=0)
    assert all(openmp == untouched for openmp, _ in model.seen)
    assert SolverConfig.from_yaml(SolverConfig(model_threads=4).to_yaml()).model_threads == 4
    assert SolverConfig.from_yaml(SolverConfig(model_threads=None).to_yaml()).model_threads is None


def test_a_solver_managers_worker_threads_are_limited_too() -> None:
    model = RecordingModel()
    with SolverManager(max_workers=2) as manager:
        jobs = [manager.submit(_problem(model), seed=seed) for seed in (0, 1)]
        assert all(job.result(timeout=120).valid for job in jobs)
    assert model.seen and all(openmp == {1} for openmp, _ in model.seen)


def test_the_process_wide_blas_limit_lasts_until_the_last_solve_ends() -> None:
    if not _threads("blas"):
        pytest.skip("no BLAS library loaded")
    original = _threads("blas")
    entered, release = threading.Event(), threading.Event()

    def other_solve() -> None:
        with NativeThreadLimit(1):
            entered.set()
            release.wait(30)

    worker = threading.Thread(target=other_solve)
    with NativeThreadLimit(1):
        worker.start()
        assert entered.wait(30)
        assert SHARED_POOLS.holders == 2
    assert _threads("blas") == {1}  # this solve ended; the other still holds the limit
    release.set()
    worker.join(30)
    assert SHARED_POOLS.holders == 0
    assert _threads("blas") == original


def test_the_default_termination_reads_no_clock() -> None:
    def spent_limits(config: TerminationConfig) -> list[float]:
        own = [config.spent_limit_seconds, config.unimproved_spent_limit_seconds]
        return [x for x in own if x is not None] + [x for child in config.children for x in spent_limits(child)]

    config = SolverConfig()
    assert spent_limits(config.termination) == []
    for phase in config.phases:
        termination = getattr(phase, "termination", None)
        assert termination is None or spent_limits(termination) == []


def test_the_same_answer_whatever_the_load(loan_data: pd.DataFrame, loan_problem: CounterfactualProblem) -> None:
    idle = explain(loan_problem, seed=3)
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        busy = explain(loan_problem, seed=3)
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    assert busy.proposed == idle.proposed and busy.score == idle.score
    assert busy.statistics.steps == idle.statistics.steps
