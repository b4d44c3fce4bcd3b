"""No row goes to the model twice in a solve (issue 29): a batch's repeats and the rows earlier
batches had predicted take the kept prediction, with the same scores as calling the model on
every row; the final check of answers still asks the real model."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.pipeline import Pipeline

from counterplan.planning import (
    CallableAdapter,
    ClassGoal,
    CounterfactualProblem,
    FloatFeature,
    IntegerFeature,
    OutputSpec,
    ScoreCalculator,
    ValueGoal,
    scored_rows as scored_rows_module,
)
from counterplan.planning.calculator import PRUNED_REASON, DirectCalls
from counterplan.planning.demo import IMMUTABLE, TARGET
from counterplan.planning.model_protocol import Predictions
from counterplan.planning.score import PRUNED, better
from counterplan.planning.scored_rows import ScoredRows
from counterplan.planning.space import FeatureSpace, FloatMatrix
from counterplan.solver import explain


class CountingCalls:
    """The problem's own way to the model, recording every row each path is sent."""

    def __init__(self, model: Any) -> None:
        self._direct = DirectCalls(model)
        self.rows: list[FloatMatrix] = []
        self.reference_rows: list[FloatMatrix] = []

    def predict(self, X: FloatMatrix, space: FeatureSpace) -> Predictions:
        self.rows.append(X.copy())
        return self._direct.predict(X, space)

    def predict_reference(self, X: FloatMatrix, space: FeatureSpace) -> Predictions:
        self.reference_rows.append(X.copy())
        return self._direct.predict_reference(X, space)

    def repeats(self) -> int:
        """Rows the search path was sent more than once."""
        seen = Counter(row.tobytes() for batch in self.rows for row in batch)
        return sum(n - 1 for n in seen.values())


def _batch(problem: CounterfactualProblem, rng: np.random.Generator, n: int) -> FloatMatrix:
    """``n`` rows of the problem's space: the original with its numbers moved within their domains."""
    space = problem.space
    X = np.repeat(problem.original_row(), n, axis=0)
    numbers = np.flatnonzero(space.graded & space.mutable)
    low, high = space.domain_lower[numbers], space.domain_upper[numbers]
    X[:, numbers] = np.clip(X[:, numbers] + rng.normal(0, 0.2, (n, numbers.size)) * (high - low), low, high)
    X[:, numbers] = space.to_grid(X[:, numbers], numbers)
    return X


def test_a_repeated_row_goes_to_the_model_once_and_scores_as_if_it_went_every_time(
    loan_problem: CounterfactualProblem,
) -> None:
    rng = np.random.default_rng(0)
    fresh = _batch(loan_problem, rng, 40)
    first = fresh[[0, 1, 2, 1, 0, 3, 3, 4]]  # repeats within a batch
    second = np.vstack([fresh[[4, 2]], fresh[5:9], fresh[[5]]])  # earlier rows, new ones, a repeat
    calls = CountingCalls(loan_problem.model)
    calculator = ScoreCalculator(loan_problem, calls=calls)
    plain = ScoreCalculator(loan_problem, remember_bytes=0)
    for X in (first, second):
        evaluation = calculator.calculate(X.copy())
        expected = plain.calculate(X.copy())
        np.testing.assert_array_equal(evaluation.scores, expected.scores)
        for name, values in expected.predictions.items():
            np.testing.assert_array_equal(evaluation.predictions[name], values)
    assert [batch.shape[0] for batch in calls.rows] == [5, 4]  # rows 0-4, then 5-8
    assert calls.repeats() == 0
    assert calculator.calculation_count == first.shape[0] + second.shape[0]  # candidates scored, all
    assert calculator.model_row_count == 9
    assert calculator.model_call_count == 2


def test_a_batch_of_known_rows_makes_no_model_call(loan_problem: CounterfactualProblem) -> None:
    X = _batch(loan_problem, np.random.default_rng(1), 6)
    calculator = ScoreCalculator(loan_problem)
    before = calculator.calculate(X.copy()).scores
    again = calculator.calculate(X[::-1].copy()).scores
    assert calculator.model_call_count == 1
    np.testing.assert_array_equal(again, before[::-1])


def test_the_final_check_asks_the_real_model_every_time(loan_problem: CounterfactualProblem) -> None:
    X = _batch(loan_problem, np.random.default_rng(2), 3)
    calls = CountingCalls(loan_problem.model)
    calculator = ScoreCalculator(loan_problem, calls=calls)
    scored = calculator.calculate(X.copy()).scores
    checked = calculator.check(X[1]).scores
    calculator.check(X[1])
    assert [batch.shape[0] for batch in calls.reference_rows] == [1, 1]
    np.testing.assert_array_equal(checked[0], scored[1])
    calculator.calculate(X[1:2].copy())  # a check leaves nothing behind, and takes nothing
    assert calculator.model_call_count == 3


def test_missing_values_are_rows_like_any_other() -> None:
    memory = ScoredRows(3, {"y": ()})
    X = np.array([[1.0, np.nan, 2.0], [1.0, np.nan, 2.0], [1.0, 0.0, 2.0]])
    split = memory.split(X)
    assert split is not None
    assert split.first.tolist() == [0, 2] and split.inverse.tolist() == [0, 0, 1]
    memory.add(X[split.first], split.keys, {"y": np.array([0.5, 0.25])})
    again = memory.split(X[::-1])
    assert again is not None and not again.new.any()
    assert memory.known(again)["y"].tolist() == [0.25, 0.5]


def test_a_hash_shared_by_two_rows_costs_a_call_and_never_a_wrong_prediction(
    loan_problem: CounterfactualProblem, monkeypatch: pytest.MonkeyPatch
) -> None:
    X = _batch(loan_problem, np.random.default_rng(3), 12)
    expected = ScoreCalculator(loan_problem, remember_bytes=0).calculate(X.copy()).scores
    monkeypatch.setattr(ScoredRows, "_hashes", lambda self, bits: np.zeros(bits.shape[0], dtype=np.uint64))
    calculator = ScoreCalculator(loan_problem)
    for rows in (X[:1], X[1:2], X[2:7], X):  # one at a time (every row collides with the first), then many
        calculator.calculate(rows.copy())
    np.testing.assert_array_equal(calculator.calculate(X.copy()).scores, expected)


def test_the_memory_is_bounded(loan_problem: CounterfactualProblem) -> None:
    n = loan_problem.space.n_features
    calculator = ScoreCalculator(loan_problem, remember_bytes=8 * (n + 2) * 5)  # five rows and two classes
    memory = calculator.scored_rows
    assert memory is not None and memory.capacity == 5
    X = _batch(loan_problem, np.random.default_rng(4), 8)
    calculator.calculate(X.copy())
    assert memory.size == 5
    calculator.calculate(X.copy())  # the first five are known; the other three go again
    assert calculator.model_row_count == 8 + 3


def _spy(model: Pipeline, rows: list[tuple[Any, ...]]) -> Any:
    class Spy:
        """The fitted pipeline, recording every row it predicts."""

        classes_ = model.classes_
        feature_names_in_ = model.feature_names_in_

        def predict_proba(self, frame: pd.DataFrame) -> Any:
            rows.extend(tuple(r) for r in frame.itertuples(index=False))
            return model.predict_proba(frame)

    return Spy()


def _solve(data: pd.DataFrame, model: Pipeline, row: pd.Series) -> tuple[Any, Counter[tuple[Any, ...]]]:
    rows: list[tuple[Any, ...]] = []
    problem = CounterfactualProblem.from_dataframe(
        data, row, _spy(model, rows), [ClassGoal(target=1, confidence=0.7)], target=TARGET, immutable=IMMUTABLE
    )
    return explain(problem, seed=0), Counter(rows)


def test_a_solve_sends_no_row_twice_but_for_its_final_checks_and_answers_as_before(
    loan_data: pd.DataFrame, loan_model: Pipeline, rejected_loans: pd.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    for _, row in rejected_loans.iloc[:3].iterrows():
        result, sent = _solve(loan_data, loan_model, row)
        repeats = sum(n - 1 for n in sent.values())
        assert repeats <= 2  # the original's first score, the answer's final check: the real model's
        with monkeypatch.context() as patch:
            patch.setattr(scored_rows_module, "MAX_REMEMBERED_BYTES", 0)
            before, sent_before = _solve(loan_data, loan_model, row)
        assert sum(n - 1 for n in sent_before.values()) > repeats
        assert result.valid == before.valid
        assert result.score_levels == before.score_levels
        assert result.proposed == before.proposed
        assert result.statistics.score_calculation_count == before.statistics.score_calculation_count
        assert sum(sent.values()) < sum(sent_before.values())


def test_failed_rows_fail_wherever_they_repeat_and_are_asked_again() -> None:
    sent: list[int] = []

    def fragile(X: FloatMatrix) -> FloatMatrix:
        sent.append(X.shape[0])
        if (X[:, 0] > 9.0).any():
            raise ValueError("x too large for this model")
        return np.where(X[:, 0] == 7.0, np.nan, X[:, 0] * 10.0)

    features = [FloatFeature(name="x", value=2.0, low=0.0, high=10.0), IntegerFeature(name="n", value=1, low=0, high=5)]
    problem = CounterfactualProblem(
        features, [ValueGoal(output="y", value=95.0, tolerance=0.2)], CallableAdapter(fragile, [OutputSpec("y")])
    )
    X = np.repeat(problem.original_row(), 8, axis=0)
    X[:, 0] = [8.0, 7.0, 9.5, 8.0, 7.0, 9.5, 8.5, 8.0]
    plain = ScoreCalculator(problem, remember_bytes=0).calculate(X.copy())
    sent.clear()
    calculator = ScoreCalculator(problem)
    evaluation = calculator.calculate(X.copy())
    np.testing.assert_array_equal(evaluation.scores, plain.scores)
    assert evaluation.failures == plain.failures
    assert [i for i, r in enumerate(evaluation.failures) if r is not None] == [1, 2, 4, 5]
    assert sent[0] == 4  # 8.0, 7.0, 9.5, 8.5: each once
    sent.clear()
    again = calculator.calculate(X[[1, 2, 6]].copy())  # the failed rows are not kept: asked again
    assert sum(sent) >= 2 and again.failures[2] is None


def test_rows_that_cannot_beat_the_best_go_to_no_model_and_none_could_have(
    loan_problem: CounterfactualProblem,
) -> None:
    """With ``beat`` (a feasible best), rows no nearer than it are left out of the model call;
    scored in full, none of them beats it, and the rows sent score as they would anyway."""
    X = _batch(loan_problem, np.random.default_rng(5), 200)
    plain = ScoreCalculator(loan_problem, remember_bytes=0).calculate(X.copy()).scores
    feasible = np.flatnonzero((plain[:, :3] >= 0.0).all(axis=1))
    assert feasible.size >= 2
    beat = plain[feasible[np.argsort(-plain[feasible, 3])[feasible.size // 2]]]  # a middling feasible row
    calls = CountingCalls(loan_problem.model)
    calculator = ScoreCalculator(loan_problem, calls=calls, remember_bytes=0)
    evaluation = calculator.calculate(X.copy(), beat)
    pruned = evaluation.scores[:, 0] == PRUNED
    assert pruned.any() and not pruned.all()
    assert sum(batch.shape[0] for batch in calls.rows) == np.count_nonzero(~pruned)
    assert not better(plain[pruned], beat).any()  # none of them could have improved the best
    np.testing.assert_array_equal(evaluation.scores[~pruned], plain[~pruned])
    np.testing.assert_array_equal(evaluation.scores[pruned][:, 1:], plain[pruned][:, 1:] * [1, 0, 1, 1] + [0, -1, 0, 0])
    assert all(evaluation.failures[i] == PRUNED_REASON for i in np.flatnonzero(pruned))
    assert calculator.failing_batches == 0 and calculator.best is not None
    assert not np.array_equal(calculator.best[0], X[np.flatnonzero(pruned)[0]])


def test_row_index_finds_each_rows_equal_by_its_bytes() -> None:
    """:func:`row_index` tells rows apart as the memory does (NaN equals NaN; a hash is checked
    value by value), for the polish's rows the feature scan scored."""
    rows = np.array([[0.0, 1.0], [2.0, np.nan], [3.0, 4.0], [0.0, 1.0]])
    X = np.array([[3.0, 4.0], [5.0, 6.0], [2.0, np.nan], [0.0, 1.0]])
    assert scored_rows_module.row_index(rows, X).tolist() == [2, -1, 1, 0]
    assert scored_rows_module.row_index(rows[:0], X).tolist() == [-1] * 4


def test_a_hash_shared_by_rows_never_matches_another_row(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scored_rows_module, "_row_hashes", lambda bits: np.zeros(bits.shape[0], dtype=np.uint64))
    rows = np.array([[0.0, 1.0], [3.0, 4.0]])
    assert scored_rows_module.row_index(rows, np.array([[3.0, 4.0], [0.0, 1.0]])).tolist() == [-1, 0]


def test_a_rows_hash_is_the_documented_sum_of_its_columns_modulo_2_64() -> None:
    """Each value's bytes folded and mixed, times its column's odd multiplier, summed modulo
    2**64 and mixed again (:func:`_row_hashes`): the same keys whatever the batch, so the memory
    finds the same rows, with NaN, -0.0 and huge values among them."""
    X = np.array([[0.0, 1.5, -2.0, 1e300], [np.nan, -0.0, 3.0, 7.0], [0.0, 1.5, -2.0, 1e300]])
    mask = 2**64 - 1
    mix = int(scored_rows_module._MIX)
    multipliers = [int(m) for m in scored_rows_module._multipliers(X.shape[1])]

    def expected(row: FloatMatrix) -> int:
        total = 0
        for value, multiplier in zip(row.view(np.uint64).tolist(), multipliers, strict=True):
            v = ((value ^ (value >> 32)) * mix) & mask
            v ^= v >> 29
            total = (total + v * multiplier) & mask
        total ^= total >> 31
        total = (total * mix) & mask
        return total ^ (total >> 29)

    keys = scored_rows_module._row_hashes(scored_rows_module._bits(X))
    assert keys.dtype == np.uint64
    assert [int(k) for k in keys] == [expected(row) for row in X]
    assert keys[0] == keys[2] != keys[1]
