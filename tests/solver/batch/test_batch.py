"""The explainer (build once, explain many) and the batch engine (many rows, shared model calls)."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from counterplan.planning import ClassGoal, CounterfactualProblem
from counterplan.planning.demo import IMMUTABLE, TARGET
from counterplan.planning.errors import ModelAdapterError, ProblemError
from counterplan.planning.models import SklearnClassifierAdapter
from counterplan.planning.spec import FeatureRule, ProblemSpec
from counterplan.solver import explain
from counterplan.solver.batch.rows import RowSelection, row_seed
from counterplan.solver.batch.shared_calls import SharedCalls
from counterplan.solver.core.config import SolverConfig
from counterplan.solver.explainer import Explainer

GOAL = [ClassGoal(target=1, confidence=0.7)]


class CountingAdapter(SklearnClassifierAdapter):
    """The real model, counting its calls and rows (thread-safe)."""

    def __init__(self, model: Any) -> None:
        super().__init__(model, TARGET)
        self.calls = 0
        self.rows = 0
        self._lock = threading.Lock()

    def predict(self, X: Any, space: Any) -> Any:
        with self._lock:
            self.calls += 1
            self.rows += X.shape[0]
        return super().predict(X, space)


@pytest.fixture(scope="module")
def explainer(loan_explainer: Explainer) -> Explainer:
    return loan_explainer


@pytest.fixture(scope="module")
def rejected(rejected_loans: pd.DataFrame) -> pd.DataFrame:
    return rejected_loans.iloc[:12]


def test_the_explainer_answers_as_a_problem_built_from_the_data(
    explainer: Explainer, loan_data: pd.DataFrame, loan_model: Pipeline, rejected: pd.DataFrame
) -> None:
    for _, row in rejected.iloc[:3].iterrows():
        problem = CounterfactualProblem.from_dataframe(
            loan_data, row, loan_model, GOAL, target=TARGET, immutable=IMMUTABLE
        )
        alone = explain(problem, seed=4)
        ours = explainer.explain(row, seed=4)
        assert ours.proposed == alone.proposed
        assert ours.score == alone.score
        assert [f.model_dump() for f in explainer.problem(row).space.features] == [
            f.model_dump() for f in problem.space.features
        ]


def test_a_batch_gives_each_row_its_single_answer_whatever_the_window(
    explainer: Explainer, rejected: pd.DataFrame
) -> None:
    """On the threads path (asked for: the default is the vectorised engine, whose answers are its
    own, see test_vectorised.py) every row's record is ``explain``'s answer."""
    singles = [explainer.explain(row, seed=row_seed(7, row_id)) for row_id, row in rejected.iterrows()]
    for window in (1, 5, 12):
        frame = explainer.explain_batch(rejected, seed=7, window=window, vectorised=False)
        assert frame["row_id"].tolist() == rejected.index.tolist()
        assert frame["score"].tolist() == [s.score for s in singles]
        for (_, record), single in zip(frame.iterrows(), singles, strict=True):
            assert record["valid"] == single.valid
            assert record["changed"] == len(single.changes)
            for name, value in single.proposed.items():
                assert record[f"cf_{name}"] == pytest.approx(value) if not isinstance(value, str) else value
    assert frame["valid"].all()
    assert (frame["status"] == "ok").all()


def test_worker_processes_give_the_same_records(explainer: Explainer, rejected: pd.DataFrame) -> None:
    one = explainer.explain_batch(rejected.iloc[:6], seed=3, window=3, vectorised=False)
    two = explainer.explain_batch(rejected.iloc[:6], seed=3, window=2, workers=2, vectorised=False)
    columns = [c for c in one.columns if c != "seconds"]
    pd.testing.assert_frame_equal(one[columns], two[columns])


def test_solves_that_run_together_share_model_calls(
    loan_data: pd.DataFrame, loan_model: Pipeline, rejected: pd.DataFrame
) -> None:
    adapter = CountingAdapter(loan_model)
    explainer = Explainer(adapter, loan_data, GOAL, target=TARGET, immutable=IMMUTABLE)
    adapter.calls = 0
    alone = explainer.explain_batch(rejected, seed=1, window=1, vectorised=False)
    calls_alone = adapter.calls
    adapter.calls = 0
    together = explainer.explain_batch(rejected, seed=1, window=12, vectorised=False)
    assert together["score"].tolist() == alone["score"].tolist()
    assert calls_alone >= together["model_calls"].sum() - len(rejected)  # each solve's own calls, one at a time
    assert adapter.calls * 3 < calls_alone  # lockstep: one call serves many solves


@pytest.mark.parametrize("vectorised", [False, True])
def test_a_row_the_model_fails_on_gets_an_error_record_and_the_rest_go_on(
    vectorised: bool, loan_data: pd.DataFrame, loan_model: Pipeline, rejected: pd.DataFrame
) -> None:
    bad = float(rejected["income"].iloc[2])

    class Failing(CountingAdapter):
        def predict(self, X: Any, space: Any) -> Any:
            income = space.names.index("income")
            if np.any(X[:, income] == bad):
                raise RuntimeError("the scoring service is down for this applicant")
            return super().predict(X, space)

        def predict_reference(self, X: Any, space: Any) -> Any:
            return self.predict(X, space)

    explainer = Explainer(Failing(loan_model), loan_data, GOAL, target=TARGET, immutable=IMMUTABLE)
    frame = explainer.explain_batch(rejected.iloc[:5], seed=0, window=5, vectorised=vectorised)
    assert frame.loc[2, "status"] == "error"
    assert not frame.loc[2, "valid"]
    assert "scoring service is down" in frame.loc[2, "error"]
    others = frame.drop(index=2)
    assert others["valid"].all()


def test_rejected_rows_only_skip_and_seed(explainer: Explainer, loan_data: pd.DataFrame, loan_model: Pipeline) -> None:
    features = loan_data.drop(columns=[TARGET]).iloc[:20]
    approved = loan_model.predict_proba(features)[:, 1] >= 0.7
    assert approved.any() and (~approved).any()
    frame = explainer.explain_batch("0:20", only_rejected=True, seed=0, window=20)
    assert frame["row_id"].tolist() == features.index[~approved].tolist()
    every = explainer.explain_batch("0:20", seed=0, window=20)
    assert set(every.loc[every["status"] == "already_met", "row_id"]) == set(features.index[approved])
    rest = explainer.explain_batch("0:20", only_rejected=True, seed=0, skip=frame["row_id"].tolist()[:3])
    assert rest["row_id"].tolist() == frame["row_id"].tolist()[3:]
    assert row_seed(0, 5) == row_seed(0, np.int64(5)) == row_seed(0, 5.0) != row_seed(1, 5)


def test_a_batch_without_a_seed_takes_the_configurations(loan_data: pd.DataFrame, loan_model: Pipeline) -> None:
    """``counterplan batch --config`` with ``random_seed: 5`` and no ``--seed`` ran with seed 0, as
    if the configuration said nothing (``explain`` takes it); the rows now get seed 5's."""
    config = SolverConfig(random_seed=5)
    seeded = Explainer(loan_model, loan_data, GOAL, target=TARGET, immutable=IMMUTABLE, config=config)
    frame = seeded.explain_batch("0:6")
    assert frame["seed"].tolist() == [row_seed(5, i) for i in range(6)]
    given = seeded.explain_batch("0:6", seed=5)
    pd.testing.assert_frame_equal(frame.drop(columns="seconds"), given.drop(columns="seconds"))
    own = Explainer(loan_model, loan_data, GOAL, target=TARGET, immutable=IMMUTABLE, config=config, seed=2)
    assert own.explain_batch("0:2")["seed"].tolist() == [row_seed(2, i) for i in range(2)]  # the explainer's first


@pytest.mark.parametrize("skip", ["12", 5, None], ids=["a string", "a number", "none"])
def test_a_skip_that_is_no_collection_of_row_ids_is_refused(explainer: Explainer, skip: Any) -> None:
    """``skip="12"`` skipped rows 1 and 2 (a string is iterable), and ``5`` or ``None`` raised a
    bare ``TypeError``."""
    with pytest.raises(ProblemError, match="give the row ids already done as a list or set") as caught:
        explainer.explain_batch("0:14", seed=0, skip=skip)
    assert caught.value.field == "skip"


def test_an_on_record_that_is_no_function_is_refused_before_any_row(explainer: Explainer) -> None:
    """``on_record="out.csv"`` raised a bare ``TypeError`` once the first row was solved."""
    with pytest.raises(ProblemError, match="must be a function that takes each row's record") as caught:
        explainer.explain_batch("0:4", seed=0, on_record="out.csv")  # type: ignore[arg-type]
    assert caught.value.field == "on_record"


def test_row_ids_that_read_alike_are_refused(explainer: Explainer, rejected: pd.DataFrame) -> None:
    """Labels 5 and "5" are two labels to pandas but one row id to a batch (its seed, its records,
    a resume's skip): both rows ran with one seed and came back as two records of row 5."""
    rows = rejected.iloc[:2].copy()
    rows.index = pd.Index([5, "5"], dtype=object)
    with pytest.raises(ProblemError, match="labels that read alike") as caught:
        explainer.explain_batch(rows, seed=0)
    assert caught.value.field == "rows"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("0:5000", "not a range of positions"),
        ("7000", "give all, rejected"),
        ([3, 1500], "position 1500 is outside"),
        ([3, 8, 3], "position 3 is given twice"),  # was "the rows' index has duplicate labels"
        ([3.7], "a position is a whole number, given 3.7"),  # was row 3
        ([True], "a position is a whole number, given True"),  # was row 1
        (["a"], "a position is a whole number, given 'a'"),  # was a bare ValueError
        ([None], "a position is a whole number, given None"),  # was a TypeError
        (5, "list of positions; given the int 5"),  # was a TypeError
    ],
)
def test_a_bad_row_selection_is_refused_naming_the_field(text: Any, problem: str) -> None:
    with pytest.raises(ProblemError, match=problem) as caught:
        RowSelection.parse(text, 1500)
    assert caught.value.field == "rows"


def test_requests_are_merged_only_within_one_encoding(
    loan_model: Pipeline, loan_problem: CounterfactualProblem
) -> None:
    adapter = CountingAdapter(loan_model)
    shared = SharedCalls(adapter, max_wait=5.0)
    space = loan_problem.space
    X = np.repeat(space.original.reshape(1, -1), 4, axis=0)
    results: list[Any] = [None, None]
    with shared.member(), shared.member():

        def ask(i: int) -> None:
            results[i] = shared.predict(X[: i + 1], space)

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
    assert adapter.calls == 1
    assert shared.statistics.requests_per_call == 2.0
    expected = adapter.predict(X[:2], space)[TARGET]
    np.testing.assert_array_equal(results[1][TARGET], expected)
    np.testing.assert_array_equal(results[0][TARGET], expected[:1])


def _asked_together(
    adapter: CountingAdapter, parts: tuple[Any, ...], space: Any, reference: bool
) -> tuple[list[Any], SharedCalls]:
    """Each part's predictions asked by its own member of one SharedCalls at the same time."""
    shared = SharedCalls(adapter, max_wait=5.0)
    results: list[Any] = [None] * len(parts)

    def ask(i: int) -> None:
        call = shared.predict_reference if reference else shared.predict
        results[i] = call(parts[i], space)[TARGET]

    with shared.member(), shared.member():
        threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(parts))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
    return results, shared


@pytest.mark.parametrize("reference", [False, True])
def test_a_linear_models_solves_get_their_own_predictions_bit_for_bit(
    loan_model: Pipeline, loan_data: pd.DataFrame, loan_problem: CounterfactualProblem, reference: bool
) -> None:
    """A matrix product gives a row other last bits among other rows (BLAS sums a row's terms in
    an order that depends on the rows around it), so the requests of a logistic regression are
    not merged: each gets its rows' predictions as its solve alone would (the server's concurrent
    requests answered 0.04095011139279679 for an original whose probability was
    0.04095011139279683 alone); a tree model's still are."""
    features = loan_data.drop(columns=[TARGET])
    linear = clone(loan_model).set_params(encode__numbers=StandardScaler(), classify=LogisticRegression())
    space = loan_problem.space
    X = np.repeat(space.original.reshape(1, -1), 40, axis=0)
    X[:, space.names.index("income")] = np.linspace(20_000.0, 90_000.0, 40) + 0.37
    parts = (X[:7], X[7:])
    for model, merged in ((linear.fit(features, loan_data[TARGET]), False), (loan_model, True)):
        adapter = CountingAdapter(model)
        results, shared = _asked_together(adapter, parts, space, reference)
        alone = adapter.predict_reference if reference else adapter.predict
        for part, result in zip(parts, results, strict=True):
            np.testing.assert_array_equal(result, alone(part, space)[TARGET])
        assert shared.statistics.requests == 2 and shared.statistics.calls == (1 if merged else 2)


def test_a_first_row_outside_a_rules_bounds_is_that_rows_error_not_the_explainers() -> None:
    """The settings are checked on a row the rules can take: ``low: 2, high: 20`` on data whose
    first row holds 25 refused the explainer itself (and, unchecked, every batch), for a value of
    one row; that row is now its own error record and the others are explained."""
    rng = np.random.default_rng(0)
    n = 200
    data = pd.DataFrame({"i0": rng.integers(0, 30, n), "f0": np.round(rng.uniform(0, 10, n), 2)})
    data["y"] = (0.1 * data.i0 - 0.3 * data.f0 + rng.normal(0, 1, n) > 0).astype(int)
    model = LogisticRegression().fit(data[["i0", "f0"]], data.y)
    assert not 2 <= data.i0.iloc[0] <= 20, "the first row lies outside the rule"
    spec = ProblemSpec(features={"i0": FeatureRule(low=2, high=20)})
    explainer = Explainer(model, data, target="y", spec=spec)
    inside = [i for i in range(1, n) if 2 <= data.i0.iloc[i] <= 20][:3]
    frame = explainer.explain_batch([0, *inside], seed=0).set_index("row_id")
    assert frame.loc[0, "status"] == "error" and "outside its domain [2, 20]" in frame.loc[0, "error"]
    assert (frame.loc[inside, "status"] != "error").all(), frame.loc[inside].to_dict()


@pytest.mark.parametrize("threads", [None, 2])
def test_worker_processes_with_several_native_threads_are_refused_naming_the_field(
    loan_model: Pipeline, loan_data: pd.DataFrame, threads: int | None
) -> None:
    """A forked worker's call of an OpenMP model on several threads hangs for good once the parent
    ran OpenMP (the determinism fuzz: ``workers=2`` with ``model_threads`` None or 2 never
    answered); one thread starts none. So the pair is refused before any work, naming the field;
    the audit (its batch and its proofs on the workers) refuses it as well."""
    from counterplan.solver.audit.runner import AuditOptions, run_audit

    config = SolverConfig(model_threads=threads)
    explainer = Explainer(loan_model, loan_data, target=TARGET, immutable=IMMUTABLE, config=config)
    with pytest.raises(ProblemError) as caught:
        explainer.explain_batch(loan_data.iloc[:4], workers=2)
    assert caught.value.field == "model_threads" and "must be 1 with worker processes" in caught.value.problem
    with pytest.raises(ProblemError, match="model_threads"):
        run_audit(explainer, "0:4", AuditOptions(workers=2, bootstrap=10))
    assert len(explainer.explain_batch(loan_data.iloc[:2], workers=1)) == 2  # in this process: any threads


class _PrependingAdapter(SklearnClassifierAdapter):
    """The real model, but a call of several rows answers one more: the first row's answer twice."""

    def predict(self, X: Any, space: Any) -> Any:
        answer = super().predict_reference(X, space)
        if X.shape[0] == 1:
            return answer
        return {name: np.concatenate([values[:1], values]) for name, values in answer.items()}


def test_a_merged_call_answering_another_number_of_rows_gives_no_request_anothers_rows(
    loan_model: Pipeline, loan_problem: CounterfactualProblem
) -> None:
    """A merged call's answer is cut back into its requests by position: a model answering one
    row more than asked handed the second request the first's rows (a silent wrong answer); each
    request now gets its own rows' answers, or the model's error for them."""
    adapter = _PrependingAdapter(loan_model, TARGET, fast=False)
    shared = SharedCalls(adapter, max_wait=5.0)
    space = loan_problem.space
    X = np.repeat(space.original.reshape(1, -1), 3, axis=0)
    X[:, space.index["income"]] = [20_000.0, 60_000.0, 150_000.0]  # three different answers
    asked = [X[:1], X[1:]]
    results: list[Any] = [None, None]
    with shared.member(), shared.member():

        def ask(i: int) -> None:
            try:
                results[i] = shared.predict(asked[i], space)[TARGET]
            except ModelAdapterError as error:
                results[i] = error

        threads = [threading.Thread(target=ask, args=(i,), daemon=True) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(20)
    assert shared.statistics.requests >= 2
    for rows, result in zip(asked, results, strict=True):
        if isinstance(result, ModelAdapterError):  # its rows alone: the model answers too many
            assert rows.shape[0] > 1 and "the model returned shape (3, 2); expected (2, ...)" in str(result)
        else:
            np.testing.assert_array_equal(result, adapter.predict_reference(rows, space)[TARGET])


def test_a_model_answering_a_scalar_ends_each_row_of_a_threads_batch_in_its_error(
    loan_data: pd.DataFrame, loan_model: Pipeline, rejected: pd.DataFrame
) -> None:
    """A model answering a scalar for any rows: cutting a merged call's answer raised outside the
    call, which left the other group's requests (the final checks', or the searches') waiting for
    good: the batch never ended. Each row is now an error record naming the shape, as explain is."""

    class Scalar(SklearnClassifierAdapter):  # the search's calls on the fast path, as they were
        def predict_reference(self, X: Any, space: Any) -> Any:
            return {TARGET: np.float64(0.9)}

    explainer = Explainer(Scalar(loan_model, TARGET), loan_data, GOAL, target=TARGET, immutable=IMMUTABLE)
    frames: list[pd.DataFrame] = []
    worker = threading.Thread(
        target=lambda: frames.append(explainer.explain_batch(rejected.iloc[:6], seed=0, vectorised=False)),
        daemon=True,
    )
    worker.start()
    worker.join(120)  # a few seconds; without the fix, never
    assert frames, "the batch did not end"
    assert (frames[0]["status"] == "error").all()
    assert frames[0]["error"].str.contains("the model returned shape ()", regex=False).all()


class _InterruptedAdapter(SklearnClassifierAdapter):
    """The real model, but its search calls end in a BaseException (not an Exception)."""

    def predict(self, X: Any, space: Any) -> Any:
        raise KeyboardInterrupt


def test_a_merged_call_ending_in_a_base_exception_leaves_no_request_of_another_group_waiting(
    loan_model: Pipeline, loan_problem: CounterfactualProblem
) -> None:
    """A flush scores its requests by group (the search's, the final check's); a group ending
    in a BaseException left the next groups' requests taken from the queue and never answered:
    their solves waited forever."""
    shared = SharedCalls(_InterruptedAdapter(loan_model, TARGET, fast=False), max_wait=60.0)
    space = loan_problem.space
    X = space.original.reshape(1, -1)
    outcome: list[Any] = [None, None, None]

    def ask(i: int, reference: bool) -> None:
        try:
            outcome[i] = (shared.predict_reference if reference else shared.predict)(X, space)
        except BaseException as error:  # the outcome is what the test reads
            outcome[i] = error

    threads = []
    with shared.member(), shared.member(), shared.member():
        # a search's request, a final check's, then a search's, which scores all three: the
        # searches' group first (its call raises), the final check's group next
        for i, reference in enumerate([False, True, False]):
            threads.append(threading.Thread(target=ask, args=(i, reference), daemon=True))
            threads[-1].start()
            while i < 2 and len(shared._pending) < i + 1:  # the third's request scores all three
                threads[-1].join(0.001)
        for thread in threads:
            thread.join(20)
    assert not any(thread.is_alive() for thread in threads)
    assert all(isinstance(result, KeyboardInterrupt) for result in outcome), outcome
