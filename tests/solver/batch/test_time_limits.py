"""A time limit in a batch is each row's own: a vectorised block's rows share its time fairly
(:mod:`counterplan.solver.batch.fair_share`), the threads path runs at most a core's worth of
rows at once under a limit (:func:`counterplan.solver.batch.block.rows_at_once`), and a deadline
for the whole batch is a stop check asked before every model call of a block (an audit's)."""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier
from sklearn.pipeline import Pipeline

from counterplan.planning import ClassGoal
from counterplan.planning.demo import IMMUTABLE, TARGET
from counterplan.planning.errors import ProblemError
from counterplan.planning.models import SklearnClassifierAdapter
from counterplan.solver.audit.runner import AuditOptions, run_audit
from counterplan.solver.batch.block import (
    BATCH_MAX_WAIT_SECONDS,
    EXACT_MAX_WAIT_SECONDS,
    rows_at_once,
    shared_wait,
    usable_cores,
)
from counterplan.solver.batch.fair_share import FairShare
from counterplan.solver.batch.run import explain_batch
from counterplan.solver.batch.vectorised import vector_refusal
from counterplan.solver.core.config import AutoConfig, SolverConfig, TerminationConfig
from counterplan.solver.counterfactual import CounterfactualSolver
from counterplan.solver.exact.config import ExactPhaseConfig
from counterplan.solver.explainer import Explainer
from counterplan.solver.local.config import LocalSearchPhaseConfig
from counterplan.solver.vector.search import VectorSearch

GOAL = [ClassGoal(target=1, confidence=0.7)]
CUT = "stopped before a valid answer was found (spent time limit)"
SECONDS_A_ROW = 2e-4
"""The slow model's wall time per scored row: its calls sleep, so the time a search takes is
the rows it scores, whatever else the machine is doing."""


class SlowModel(SklearnClassifierAdapter):
    """The real model, as slow as a large one: every search call sleeps in proportion to its rows."""

    def __init__(self, model: Any) -> None:
        super().__init__(model, TARGET)
        self.calls = 0

    def predict(self, X: Any, space: Any) -> Any:
        self.calls += 1
        time.sleep(SECONDS_A_ROW * len(X))
        return super().predict(X, space)


def _limited(seconds: float) -> SolverConfig:
    default = SolverConfig().termination
    return SolverConfig(termination=TerminationConfig(spent_limit_seconds=seconds, children=(default,)))


def _answers(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[["row_id", "status", "distance"] + [c for c in frame.columns if c.startswith("cf_")]]


def test_a_row_is_charged_its_share_of_the_time_it_shares() -> None:
    now = [10.0]
    clock = FairShare(4, clock=lambda: now[0])
    now[0] = 12.0  # 2 s among 4 rows
    assert clock.charge(np.arange(4)) == pytest.approx(0.5)
    now[0] = 14.0  # 2 s more among the same 4, then 2 of them finish
    assert clock.charge(np.array([1, 3])) == pytest.approx(1.0)
    now[0] = 15.0  # 1 s between the 2 left
    assert clock.charge(np.array([3])) == pytest.approx(1.5)
    now[0] = 16.0  # 1 s of the last row's own
    assert clock.charge(np.array([], dtype=np.intp)) == pytest.approx(2.5)
    # each row's own: what it shared, not the block's 6 s
    np.testing.assert_allclose(clock.each, [1.0, 1.5, 1.0, 2.5])
    assert clock.each.sum() == pytest.approx(6.0)


def test_a_vectorised_row_s_seconds_are_its_share_of_the_block_s_time(
    loan_data: pd.DataFrame, loan_model: Pipeline, rejected_loans: pd.DataFrame
) -> None:
    """A row's ``seconds`` is the time charged to it (the time limit's own measure), so a block's
    rows add up to no more than the block's wall time; each row said the whole block's time."""
    explainer = Explainer(loan_model, loan_data, GOAL, target=TARGET, immutable=IMMUTABLE)
    started = time.perf_counter()
    frame = explain_batch(explainer, rejected_loans.iloc[:8], seed=0, vectorised=True)
    wall = time.perf_counter() - started
    assert (frame["status"] == "ok").all() and len(frame) == 8
    assert (frame["seconds"] > 0.0).all()
    assert frame["seconds"].sum() <= wall


def test_each_row_of_a_vectorised_block_has_the_time_limit(
    loan_data: pd.DataFrame, loan_model: Pipeline, rejected_loans: pd.DataFrame
) -> None:
    """Eight rows whose searches take about 0.3 s each alone take about 2.5 s as one block. Under
    a limit of 1.5 s a row they are not cut: each has the answer it has without a limit. (The
    block's limit was the block's wall time: every row was cut.)"""
    rows = rejected_loans.iloc[:8]
    free = Explainer(SlowModel(loan_model), loan_data, GOAL, target=TARGET, immutable=IMMUTABLE)
    started = time.perf_counter()
    unlimited = explain_batch(free, rows, seed=1)
    took = time.perf_counter() - started
    assert took > 1.5, "the block takes longer than one row's limit"
    slow = SlowModel(loan_model)
    limited = Explainer(slow, loan_data, GOAL, target=TARGET, immutable=IMMUTABLE, config=_limited(1.5))
    kept = explain_batch(limited, rows, seed=1)
    assert (kept["status"] == "ok").all() and kept["error"].isna().all()
    pd.testing.assert_frame_equal(_answers(kept), _answers(unlimited))
    # a limit below a row's share still holds: every row is cut, and says so
    short = Explainer(SlowModel(loan_model), loan_data, GOAL, target=TARGET, immutable=IMMUTABLE, config=_limited(0.02))
    cut = explain_batch(short, rows, seed=1)
    assert (cut["status"] == "not_found").all() and (cut["error"] == CUT).all()


def test_the_threads_path_runs_a_core_s_worth_of_rows_under_a_time_limit() -> None:
    """Rows that read the clock run at most one per core at once; the window holds otherwise."""
    clock_free = [
        SolverConfig(),
        SolverConfig(auto=AutoConfig(exact_improvement_seconds=5.0)),  # read by `auto` only
    ]
    for config in clock_free:
        assert rows_at_once(_Stub(config, "local"), 64) == 64
    cores = usable_cores()
    reading = [
        (_limited(30.0), "local"),
        (SolverConfig(termination=TerminationConfig(unimproved_spent_limit_seconds=3.0)), None),
        (SolverConfig(phases=(LocalSearchPhaseConfig(termination=TerminationConfig(spent_limit_seconds=9.0)),)), None),
        (SolverConfig(phases=(ExactPhaseConfig(time_limit_seconds=1.0),)), "exact"),
        (SolverConfig(auto=AutoConfig(exact_improvement_seconds=5.0)), "auto"),
    ]
    for config, engine in reading:
        assert rows_at_once(_Stub(config, engine), 64) == min(64, cores), (config, engine)
        assert rows_at_once(_Stub(config, engine), 1) == 1
        # a worker process's share of the cores (workers, a Ray actor's one CPU)
        assert rows_at_once(_Stub(config, engine), 64, cores=1) == 1
        assert rows_at_once(_Stub(config, engine), 64, cores=3) == 3
    assert rows_at_once(_Stub(SolverConfig(), None), 64, cores=1) == 64


def test_under_a_time_limit_a_shared_call_waits_only_briefly_for_the_other_rows() -> None:
    """A wait for the other rows' calls is time charged to a row's own limit. With a model taking
    0.4 s a call under a 1 s limit, each call waited up to 0.25 s more on the threads path, so 8
    of 20 loan rows stopped after one call (``not_found``) where each alone finds its answer in
    two (fuzzing); they all find it with the brief wait. Without a limit the wait stays."""
    for config, engine in [
        (_limited(1.0), "local"),
        (SolverConfig(auto=AutoConfig(exact_improvement_seconds=5.0)), "auto"),
    ]:
        assert shared_wait(_Stub(config, engine)) == EXACT_MAX_WAIT_SECONDS, (config, engine)
    assert shared_wait(_Stub(SolverConfig(), "local")) == BATCH_MAX_WAIT_SECONDS
    assert shared_wait(_Stub(SolverConfig(), "exact")) == EXACT_MAX_WAIT_SECONDS


def test_a_time_limit_the_vectorised_engine_cannot_keep_takes_the_threads_path(
    loan_data: pd.DataFrame, loan_model: Pipeline, rejected_loans: pd.DataFrame
) -> None:
    """The vectorised engine keeps the solve's time limit only: an unimproved time limit, a
    phase's own or one joined by 'and' would be ignored there (every row searched to its end), so
    those rows go to the threads path, where each holds as in a single solve."""
    default = SolverConfig()
    local = default.phases[1]
    refused = {
        "unimproved time limit": default.model_copy(
            update={
                "termination": TerminationConfig(unimproved_spent_limit_seconds=1e-6, children=(default.termination,))
            }
        ),
        "phase's own time limit": default.model_copy(
            update={
                "phases": (
                    default.phases[0],
                    local.model_copy(update={"termination": TerminationConfig(spent_limit_seconds=1e-6)}),
                    default.phases[2],
                )
            }
        ),
        "joined by 'and'": default.model_copy(
            update={
                "termination": TerminationConfig(
                    composition="and", spent_limit_seconds=1e-6, children=(default.termination,)
                )
            }
        ),
    }
    rows = rejected_loans.iloc[:3]
    for words, config in refused.items():
        explainer = Explainer(loan_model, loan_data, GOAL, target=TARGET, immutable=IMMUTABLE, config=config)
        assert words in (vector_refusal(explainer) or ""), words
        asked = explain_batch(explainer, rows, seed=3)
        pd.testing.assert_frame_equal(
            _answers(asked), _answers(explain_batch(explainer, rows, seed=3, vectorised=False))
        )
    plain = Explainer(loan_model, loan_data, GOAL, target=TARGET, immutable=IMMUTABLE, config=_limited(1e-6))
    assert vector_refusal(plain) is None  # the solve's own time limit: the vectorised engine keeps it


class _Stub:
    """What :func:`rows_at_once` reads of an explainer."""

    def __init__(self, config: SolverConfig, engine: str | None) -> None:
        self.config = config
        self.engine = engine


class _Watched(Explainer):
    """An explainer that counts the solves running at once."""

    lock = threading.Lock()
    running = 0
    most = 0

    def solver(self, row: Any, **kwargs: Any) -> CounterfactualSolver:
        solver = super().solver(row, **kwargs)
        solve = solver.solve

        def watched() -> Any:
            with _Watched.lock:
                _Watched.running += 1
                _Watched.most = max(_Watched.most, _Watched.running)
            try:
                return solve()
            finally:
                with _Watched.lock:
                    _Watched.running -= 1

        solver.solve = watched  # type: ignore[method-assign]
        return solver


def test_rows_on_the_threads_path_under_a_time_limit_do_not_share_a_core(
    loan_data: pd.DataFrame, loan_model: Pipeline, rejected_loans: pd.DataFrame
) -> None:
    rows = rejected_loans.iloc[:12]
    explainer = _Watched(loan_model, loan_data, GOAL, target=TARGET, immutable=IMMUTABLE, config=_limited(60.0))
    _Watched.most = 0
    limited = explain_batch(explainer, rows, seed=2, vectorised=False, window=64)
    assert 1 <= _Watched.most <= min(usable_cores(), len(rows) - 1)
    # the rows' answers are each row's own solve's, as they were side by side
    alone = Explainer(loan_model, loan_data, GOAL, target=TARGET, immutable=IMMUTABLE, config=_limited(60.0))
    pd.testing.assert_frame_equal(_answers(limited), _answers(explain_batch(alone, rows, seed=2, vectorised=False)))


def test_a_stop_check_cuts_a_block_before_its_next_model_call(
    loan_data: pd.DataFrame, loan_model: Pipeline, rejected_loans: pd.DataFrame
) -> None:
    model = SlowModel(loan_model)
    explainer = Explainer(model, loan_data, GOAL, target=TARGET, immutable=IMMUTABLE)
    frame = explain_batch(explainer, rejected_loans.iloc[:8], seed=1, stop=lambda: model.calls >= 3)
    assert model.calls == 3
    assert len(frame) == 8 and (frame["error"].isna() | frame["error"].str.contains("terminated early")).all()
    with pytest.raises(ProblemError) as refused:
        explain_batch(explainer, rejected_loans.iloc[:2], workers=2, stop=lambda: False)
    assert refused.value.field == "stop"


def test_an_audit_s_stop_is_asked_within_a_block(
    loan_data: pd.DataFrame, loan_model: Pipeline, rejected_loans: pd.DataFrame
) -> None:
    """A server's deadline reaches an audit as its stop check: a block of 16 rows must not run to
    its end (rows' limits are their own: the block may run for 16 of them) before it is asked."""
    model = SlowModel(loan_model)
    explainer = Explainer(model, loan_data, GOAL, target=TARGET, immutable=IMMUTABLE)
    options = AuditOptions(bootstrap=0, prove=False, rules=0, stop=lambda: model.calls >= 3)
    report, _ = run_audit(explainer, rejected_loans.iloc[:16], options)
    assert report.partial
    assert model.calls == 3


def _wide_forest() -> tuple[Explainer, list[int]]:
    """A 100-tree forest of depth 8 on 60 features (2,000 synthetic rows) and its 16 rows furthest
    from approval: their combinations of single moves are many (each feature has many splits)."""
    rng = np.random.default_rng(0)
    data = pd.DataFrame(rng.normal(size=(2000, 60)).round(2), columns=[f"f{j}" for j in range(60)])
    z = data.to_numpy() @ rng.normal(size=60)
    data["y"] = (z + rng.normal(0.0, 1.0, z.size) > np.median(z)).astype(int)
    features = data.drop(columns="y")
    model = RandomForestClassifier(n_estimators=100, max_depth=8, random_state=0, n_jobs=1).fit(features, data["y"])
    rows = np.argsort(model.predict_proba(features)[:, 1])[:16]
    return Explainer(model, data, target="y"), [int(i) for i in rows]


@pytest.mark.slow  # a forest fitted, then a block of 16 rows scanned: about 10 s
def test_a_stop_reaches_a_block_while_it_weighs_its_combinations(monkeypatch: pytest.MonkeyPatch) -> None:
    """A block's combinations and beam pairs call no model: the stop check was asked before model
    calls only, so a stop (an audit's deadline, a server's shutdown, Ctrl-C) that came as they
    began waited for them, 13 s here (18 s for 64 rows). Now it is asked between their lots."""
    explainer, rows = _wide_forest()
    began: list[float] = []
    weigh = VectorSearch._combos

    def spied(self: VectorSearch, *args: Any, **kwargs: Any) -> Any:
        began.append(time.perf_counter())
        return weigh(self, *args, **kwargs)

    monkeypatch.setattr(VectorSearch, "_combos", spied)
    frame = explain_batch(explainer, rows, seed=0, stop=lambda: bool(began))
    assert began, "the block weighed no combinations"
    assert time.perf_counter() - began[0] < 3.0
    assert len(frame) == 16 and frame["status"].isin(["ok", "not_found"]).all()  # each row's best so far
    assert (frame["error"].isna() | frame["error"].str.contains("terminated early")).all()


class GatedModel(SklearnClassifierAdapter):
    """The real model, whose calls after the ``free``-th wait until the stop check has said stop:
    a row in flight then cannot finish before the batch's stop reaches it (a row of a large model
    whose own time limit is far off). A call that waits in vain (the stop never reached it) lets
    the rest through and says so in ``late``."""

    def __init__(self, model: Any, free: int) -> None:
        super().__init__(model, TARGET)
        self.free = free
        self.calls = 0
        self.stopped = threading.Event()
        self.late = False

    def stop(self) -> bool:
        if self.calls >= self.free:
            self.stopped.set()
        return self.stopped.is_set()

    def predict(self, X: Any, space: Any) -> Any:
        self.calls += 1
        if self.calls > self.free and not self.late:
            self.late = not self.stopped.wait(timeout=20.0)
        return super().predict(X, space)


def test_a_stop_check_reaches_the_rows_of_the_threads_path(
    loan_data: pd.DataFrame, loan_model: Pipeline, rejected_loans: pd.DataFrame
) -> None:
    """A deadline for the whole batch holds on the threads path too (``vectorised=False``, an
    engine of its own, rows the vectorised engine refuses): the rows in flight stop at their
    next step and the later ones start stopped. (It was never asked there: every row ran to its
    own end, one core's worth at a time under a time limit, so a deadline passed by a row's limit.)"""
    model = GatedModel(loan_model, free=3)
    explainer = Explainer(model, loan_data, GOAL, target=TARGET, immutable=IMMUTABLE, config=_limited(60.0))
    frame = explain_batch(explainer, rejected_loans.iloc[:6], seed=1, stop=model.stop, vectorised=False, window=1)
    assert not model.late, "the row in flight was not stopped"
    # the first row stopped with its best so far (valid or not), the later ones before a search
    assert len(frame) == 6 and (frame["error"].isna() | frame["error"].str.contains("terminated early")).all()
    assert (frame["status"].iloc[1:] == "not_found").all()


def test_an_audit_s_stop_reaches_the_rows_of_the_threads_path(
    loan_data: pd.DataFrame, loan_model: Pipeline, rejected_loans: pd.DataFrame
) -> None:
    """The server's audit sets each row's time limit to the audit's own; its rows on the threads
    path start one core's worth at a time, so a row started late would end past the audit's
    deadline unless the stop check reaches it while it runs."""
    model = GatedModel(loan_model, free=3)
    explainer = Explainer(model, loan_data, GOAL, target=TARGET, immutable=IMMUTABLE, config=_limited(60.0))
    options = AuditOptions(bootstrap=0, prove=False, rules=0, stop=model.stop, vectorised=False)
    report, _ = run_audit(explainer, rejected_loans.iloc[:6], options)
    assert not model.late, "the rows in flight were not stopped"
    assert report.partial


@pytest.mark.parametrize("stop", [5, "deadline"])
@pytest.mark.parametrize("vectorised", [True, False])
def test_a_stop_check_must_be_a_function(
    loan_data: pd.DataFrame, loan_model: Pipeline, rejected_loans: pd.DataFrame, stop: Any, vectorised: bool
) -> None:
    """A stop that is no function is refused on the field, before any work (it failed with a
    TypeError from inside a vectorised block, and was taken without a word on the threads path)."""
    explainer = Explainer(loan_model, loan_data, GOAL, target=TARGET, immutable=IMMUTABLE)
    with pytest.raises(ProblemError) as refused:
        explain_batch(explainer, rejected_loans.iloc[:2], stop=stop, vectorised=vectorised)
    assert refused.value.field == "stop" and type(stop).__name__ in str(refused.value)
