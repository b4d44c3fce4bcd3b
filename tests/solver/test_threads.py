"""Native thread pools during model calls, and answers that do not depend on machine load."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
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
from counterplan.solver.explainer import Explainer


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


def _table(model: RecordingModel, threads: int | None) -> Explainer:
    """An explainer of ``model`` over a table like its training data, calls on ``threads`` threads."""
    rng = np.random.default_rng(1)
    data = pd.DataFrame(rng.uniform(0, 10, (60, 3)), columns=["a", "b", "c"]).assign(y=0)
    adapter = CallableAdapter(model, [OutputSpec("y", (0, 1))])
    return Explainer(adapter, data, [ClassGoal(target=1)], target="y", config=SolverConfig(model_threads=threads))


@pytest.mark.parametrize("threads", [1, 3])
def test_a_vectorised_batch_calls_the_model_on_model_threads_too(threads: int) -> None:
    """The vectorised engine's calls (its search's and the final check's) are limited as a solve's
    are: they were not, and a worker process forked after its parent's OpenMP pool started then
    waited in its first call for good (the next test)."""
    model = RecordingModel()
    explainer = _table(model, threads)
    assert explainer.data is not None
    rows = explainer.data.iloc[:12]
    model.seen.clear()
    frame = explainer.explain_batch(rows[rows.a + rows.b < 9], seed=0, vectorised=True)
    assert (frame["status"] == "ok").all() and model.seen
    assert [o for o, _ in model.seen] == [{threads}] * len(model.seen)
    assert SHARED_POOLS.holders == 0


_FORKED_WORKERS = textwrap.dedent(
    """
    import numpy as np, pandas as pd
    from sklearn.ensemble import HistGradientBoostingClassifier
    from threadpoolctl import threadpool_limits
    from counterplan.planning import ClassGoal
    from counterplan.solver.explainer import Explainer

    rng = np.random.default_rng(0)
    data = pd.DataFrame(rng.normal(size=(400, 2)), columns=["a", "b"])
    data["y"] = (data.a + data.b > 0).astype(int)
    with threadpool_limits(2, user_api="openmp"):  # the parent's OpenMP pool starts, as a fit starts it
        model = HistGradientBoostingClassifier(max_iter=10, random_state=0).fit(data[["a", "b"]], data.y)
        model.predict_proba(data[["a", "b"]])
    explainer = Explainer(model, data, [ClassGoal(target=1, confidence=0.6)], target="y")
    frame = explainer.explain_batch("0:6", seed=0, workers=2, window=3)
    print(len(frame), sorted(set(frame.status)))
    """
)


def test_worker_processes_forked_after_openmp_ran_answer() -> None:
    """A HistGradientBoosting model (OpenMP) on two worker processes: each forked worker's first
    model call on the vectorised engine waited for OpenMP threads the fork did not copy, for good.
    In its own session, so a hang is ended whole (the workers too) after a generous bound."""
    process = subprocess.Popen(
        [sys.executable, "-c", _FORKED_WORKERS],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail("explain_batch(workers=2) on an OpenMP model hung")
    assert process.returncode == 0, err
    assert out.split("\n")[-2].startswith("6 ")


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
