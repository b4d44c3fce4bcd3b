"""The vectorised score calculator: a candidate matrix in, a score matrix out, one model call.

``ScoreCalculator.calculate(X)`` returns an ``(n, 5)`` score matrix (hard 0..2, soft 0..1, as
in :mod:`counterplan.planning.score`) and the predictions it made. A model that raises or returns NaN/inf
for a candidate makes that candidate infeasible: hard 0 becomes :data:`FAILED_PREDICTION`,
and the reason is kept. When the whole batch call raises, the batch is bisected to find the
rows that fail, so one bad candidate costs O(log n) extra calls, not n.

A solve must end within one model call of its limit and must not retry a broken model forever,
so the calculator takes a ``stop`` check (asked before every model call: once it says stop, rows
are left unscored, counted as failed, and no model call is made), spends at most
:data:`MAX_FAILED_MODEL_CALLS` calls finding failing rows, and says when the model has failed on
every candidate of :data:`MAX_FAILING_BATCHES` batches in a row (:attr:`ScoreCalculator.gave_up`).
It also keeps the best row it has scored with its predictions, so the answer of a solve cut by
its time limit need not wait for one more model call, and it times its model calls
(:attr:`ScoreCalculator.call_seconds`): a solve near its limit (a client's deadline) does not start a
call that cannot end before it, so a slow model is stopped *before* the limit, not one call after,
and a solve that must end at once (a server's grace running out while a model call is in flight)
can answer with its best from another thread: :meth:`ScoreCalculator.abandon` then makes sure the
solve calls the model no more.

The model sees each row once a solve (:mod:`counterplan.planning.scored_rows`): a batch's
repeated rows, and rows an earlier batch of the solve had predicted, take the prediction kept
then; only new rows go to the model. A tree model predicts row by row, so the scores are those of
calling it on every row (a matrix product's may differ in the last bits, the first call's kept:
:mod:`counterplan.planning.scored_rows`). The final check of answers (:meth:`ScoreCalculator.check`, the
reference path) asks the real model every time and keeps nothing, about each row as it is
reported: the row its decoded values stand for (:meth:`FeatureSpace.as_reported`), not a float a
hair off its grid that the report would show rounded.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from counterplan.planning import scored_rows
from counterplan.planning.distance import feature_distance
from counterplan.planning.errors import CounterplanError, ModelAdapterError, one_line
from counterplan.planning.goals import BoundGoal, scored_goal_distance
from counterplan.planning.halving import Run, call_in_halves
from counterplan.planning.model_protocol import Predictions, check_rows
from counterplan.planning.problem import CounterfactualProblem
from counterplan.planning.score import LEVELS, PRUNED, BendableScore, better, last_best_row
from counterplan.planning.scored_rows import ScoredRows, Split
from counterplan.planning.space import FeatureSpace, FloatMatrix

MAX_BISECTION_DEPTH = 6
"""A batch the model raises on is halved at most this many times (at most 127 calls for it);
blocks still failing then count as failed. A model that raises on many candidates once cost
hundreds of calls per step; the search only needs to keep the rows that work."""
MAX_FAILED_MODEL_CALLS = 64
"""Model calls that may raise in one solve before failing batches stop being bisected (each then
costs one call and counts wholly as failed)."""
MAX_FAILING_BATCHES = 8
"""Batches in a row on which every candidate's prediction failed before the calculator gives up."""
NOT_SCORED = "not scored: the solve was stopping"
"""The failure of a row left unscored because the ``stop`` check said stop."""
FAILED_PREDICTION = -1.0e15
"""Hard 0 of a candidate whose prediction failed: worse than any real goal distance."""
PRUNED_REASON = "not scored: it could not beat the best"
"""The failure of a candidate left out so."""
_FAR = 1.0e12
"""The scorecard objective of a value in no bin: farther than any real answer."""


class ModelCalls(Protocol):
    """How a calculator reaches the model: directly (:class:`DirectCalls`), or through calls
    shared with other solves of the same model (:mod:`counterplan.solver.batch.shared_calls`)."""

    def predict(self, X: FloatMatrix, space: FeatureSpace) -> Predictions:
        """The search's predictions (an adapter may take a verified fast path)."""
        ...

    def predict_reference(self, X: FloatMatrix, space: FeatureSpace) -> Predictions:
        """The real model's predictions, for the final check of answers."""
        ...


class DirectCalls:
    """Calls the problem's model adapter itself; the reference is the adapter's real path when it
    has a fast one (``predict_reference``), else its only one. One solve's calls: an adapter with
    a fast path gives its per-solve predict (``solve_predict``: the path looked up once a solve)."""

    def __init__(self, model: Any) -> None:
        solve_predict = getattr(model, "solve_predict", None)
        self.predict = solve_predict() if solve_predict is not None else model.predict
        self.predict_reference = getattr(model, "predict_reference", model.predict)


class GivenCalls:
    """Model calls answered from predictions already made: one reference call made for many
    problems' rows (a batch block's originals, an audit rule's action applied to every row), each
    problem's own calculator then scoring its rows from its slice of that call."""

    def __init__(self, predictions: Predictions) -> None:
        self.predictions = predictions

    def predict(self, X: FloatMatrix, space: FeatureSpace) -> Predictions:
        return self.predictions

    def predict_reference(self, X: FloatMatrix, space: FeatureSpace) -> Predictions:
        return self.predictions


class SolveAbandoned(BaseException):
    """Raised in a solve's own thread by a model call asked for after the solve was abandoned
    (:meth:`ScoreCalculator.abandon`): its caller has already answered with the best so far (a
    server shutting down within its grace), so no one reads what the solve would have found.
    A :class:`BaseException`, so that no ``except Exception`` of the search takes it for the
    model's own failure (and bisects, or retries): it unwinds the solve to its end."""


class _AbandonedCalls:
    """The calls of an abandoned solve: none reaches the model."""

    def predict(self, X: FloatMatrix, space: FeatureSpace) -> Predictions:
        raise SolveAbandoned

    def predict_reference(self, X: FloatMatrix, space: FeatureSpace) -> Predictions:
        raise SolveAbandoned


class ScoreMismatchError(CounterplanError, AssertionError):
    """Assert mode found the vectorised score differing from the per-row reference."""


@dataclass
class Evaluation:
    """Scores and predictions of one batch of candidates."""

    scores: FloatMatrix
    """``(n, 5)``: hard 0, hard 1, hard 2, soft 0, soft 1."""
    predictions: Predictions
    """Per output name: ``(n, n_classes)`` probabilities or ``(n,)`` values; NaN where failed."""
    failures: list[str | None] = field(default_factory=list)
    """Per row: why its prediction failed, or None."""
    rows: FloatMatrix | None = None
    """The rows scored (not a copy), computed features set; from :meth:`ScoreCalculator.check`, the rows as
    reported (:meth:`~counterplan.planning.space.FeatureSpace.as_reported`): an answer's result
    is built from these, never from the rows given, so the valid flag is the reported row's."""

    @property
    def feasible(self) -> npt.NDArray[np.bool_]:
        """Rows whose every hard level is 0."""
        return np.asarray((self.scores[:, :3] >= 0.0).all(axis=1))

    def score(self, row: int) -> BendableScore:
        """The score of one row as a :class:`BendableScore`."""
        return BendableScore.of(self.scores[row])

    @classmethod
    def joined(cls, parts: Sequence[Evaluation]) -> Evaluation:
        """The evaluations of consecutive batches as one, rows in order (at least one part)."""
        rows = [part.rows for part in parts]
        return cls(
            np.vstack([part.scores for part in parts]),
            {name: np.concatenate([part.predictions[name] for part in parts]) for name in parts[0].predictions},
            [reason for part in parts for reason in part.failures],
            None if any(r is None for r in rows) else np.vstack([r for r in rows if r is not None]),
        )


class ScoreCalculator:
    """Scores candidate matrices of one problem; counts what it spends.

    Parameters
    ----------
    problem:
        The problem whose candidates to score.
    assert_mode:
        Also score every row with the slow per-row reference and raise
        :class:`ScoreMismatchError` on any difference (tests only: one model call per row).
    remember_bytes:
        The most bytes of rows and predictions kept so that no row goes to the model twice
        (:class:`~counterplan.planning.scored_rows.ScoredRows`; default
        :data:`~counterplan.planning.scored_rows.MAX_REMEMBERED_BYTES`); 0 sends every row.
    """

    def __init__(
        self,
        problem: CounterfactualProblem,
        assert_mode: bool = False,
        stop: Callable[[], bool] | None = None,
        calls: ModelCalls | None = None,
        remember_bytes: int | None = None,
    ) -> None:
        self.problem = problem
        self.assert_mode = assert_mode
        self.calls: ModelCalls = calls if calls is not None else DirectCalls(problem.model)
        """The way to the model; answers are checked on its reference path (:meth:`check`)."""
        self._reference = False
        self.stop = stop
        """Asked before every model call; once True, rows are left unscored (failed) instead."""
        self.calculation_count = 0
        self.model_call_count = 0
        self.model_row_count = 0
        """Rows sent to the model (the reference path's included)."""
        self.failed_model_call_count = 0
        self.failing_batches = 0
        """Batches in a row whose every row the model failed on."""
        self.gave_up: str | None = None
        """Why the calculator stopped calling the model (it failed on too many batches in a row)."""
        self.last_failure: str | None = None
        """With :attr:`gave_up`: the model's last failure (its own message: it may hold paths)."""
        self._bisect_reason = ""
        self._batch_failed: bool | None = None
        """Whether the model failed on every row of the batch it was last asked about (None: it
        was asked about none: every row was known, or left unscored)."""
        self.best: tuple[FloatMatrix, Evaluation] | None = None
        """The best-scored row with a prediction so far, and its one-row evaluation."""
        self._call_seconds = 0.0
        space = problem.space
        self._original = space.original
        self._frozen = ~space.mutable
        self._confidence_goals = sum(1 for g in problem.goals if getattr(g.goal, "confidence", None) is not None)
        # What every batch needs of the space, once (a space never changes): per row, one product
        # counts the changed features and the changed immutables (0/1 sums: exact in any order).
        self._count_weights = np.column_stack([np.ones(space.n_features), self._frozen.astype(np.float64)])
        self._monotone_columns = np.flatnonzero(space.monotone)
        self._monotone_original = self._original[self._monotone_columns]
        self._monotone_signs = space.monotone[self._monotone_columns]
        self._checks_grid = space.checks_grid
        self._integral = space.integral if not space.integral.all() else None
        self._bounded = bool(np.isfinite(space.domain_lower).all() and np.isfinite(space.domain_upper).all())
        self._nominal = ~space.graded
        self._costs = None if (space.costs == 1.0).all() else space.costs  # x * 1.0 is x: skipped
        shapes: dict[str, tuple[int, ...]] = {
            o.name: (len(o.classes),) if o.classes is not None else () for o in problem.model.outputs
        }
        limit = scored_rows.MAX_REMEMBERED_BYTES if remember_bytes is None else remember_bytes
        self.scored_rows: ScoredRows | None = ScoredRows(space.n_features, shapes, limit) if limit > 0 else None
        """The rows of this solve the model has predicted (None: every row goes to the model)."""

    @property
    def call_seconds(self) -> float:
        """How long the next model call is expected to take (0 before the first): the last call's
        duration or a running average leaning on recent calls, whichever is longer, so one fast
        call after slow ones does not make a stop check think it has time it has not."""
        return self._call_seconds

    def _timed(self, seconds: float) -> None:
        """Fold one model call's duration into :attr:`call_seconds`."""
        average = seconds if self.model_call_count <= 1 else 0.5 * (self._call_seconds + seconds)
        self._call_seconds = max(seconds, average)

    def abandon(self) -> None:
        """Make no model call more, from any thread: each later one raises :class:`SolveAbandoned`
        in the solve's thread (a call already in flight runs to its end; its rows are kept). What
        the calculator has kept (:attr:`best`) stays readable."""
        self.calls = _AbandonedCalls()

    def calculate(self, X: FloatMatrix, beat: FloatMatrix | None = None) -> Evaluation:
        """Score every row of ``X`` (shape ``(n, n_features)``) with one model call.

        With ``beat`` (a score row, the best so far), a row whose levels known without the model
        (its broken rules, its distance, its changes) cannot make it better than ``beat`` whatever
        the model says is not sent to the model: it scores :data:`PRUNED` on hard level 0 (its
        other levels as they are) and fails as :data:`PRUNED_REASON`. Only a search that looks
        for a better best alone may ask so."""
        problem = self.problem
        X = self._checked(X)
        if problem.relations is not None:  # a row stands for itself with its computed features
            X = problem.relations.apply(X)
        n = X.shape[0]
        if n == 0:
            return Evaluation(np.zeros((0, LEVELS), dtype=np.float64), _empty_predictions(problem, 0), [], X)
        # Whole columns at a time; where nothing failed, no Python runs per row. Every level is
        # computed as the plain formulas would (same operations on the same values), bit for bit.
        scores = np.empty((n, LEVELS), dtype=np.float64)
        changed = self._original != X
        counts = changed.astype(np.float64) @ self._count_weights  # changed features, changed immutables
        np.negative(self._broken_rules(X, changed, counts), out=scores[:, 1])
        if problem.scorecard_distance is not None:
            np.negative(self._scorecard_objective(X, changed), out=scores[:, 3])
        else:
            np.negative(
                feature_distance(
                    X,
                    self._original,
                    self._nominal,
                    problem.scales,
                    problem.distance.metric,
                    costs=self._costs,
                    change_penalty=problem.distance.change_penalty,
                    changed=changed,
                ),
                out=scores[:, 3],
            )
        np.negative(counts[:, 0], out=scores[:, 4])
        hopeful = self._hopeful(scores, beat)
        predictions, failures = self._predict(X) if hopeful is None else self._predict_hopeful(X, hopeful)
        goal_distance: FloatMatrix | None = None
        scores[:, 2] = 0.0
        with np.errstate(invalid="ignore", over="ignore"):
            for bound in problem.goals:
                column = predictions[bound.output.name]
                distance = bound.distance(column)
                goal_distance = distance if goal_distance is None else np.add(goal_distance, distance)
                if getattr(bound.goal, "confidence", None) is not None:
                    scores[:, 2] -= bound.below_confidence(column)
        assert goal_distance is not None  # a problem has at least one goal
        np.negative(scored_goal_distance(goal_distance), out=scores[:, 0])
        if failures.any:
            scores[failures.failed, 0] = FAILED_PREDICTION
            scores[failures.failed, 2] = -max(self._confidence_goals, 1)
            if hopeful is not None:
                scores[~hopeful, 0] = PRUNED
        scores += 0.0  # fold -0.0 into 0.0
        self.calculation_count += n
        evaluation = Evaluation(scores, predictions, failures.reasons, X)
        if self.assert_mode and hopeful is None:
            self._assert_matches_reference(X, evaluation)
        self._remember(X, evaluation, failures)
        return evaluation

    def _hopeful(self, scores: FloatMatrix, beat: FloatMatrix | None) -> npt.NDArray[np.bool_] | None:
        """The rows that could beat ``beat``: with the hard levels the model decides at their best
        (0), their known levels make them better. None when every row could (or no ``beat``)."""
        if beat is None:
            return None
        upper = scores.copy()
        upper[:, 0] = 0.0
        upper[:, 2] = 0.0
        hopeful = better(upper, beat)
        return None if hopeful.all() else np.asarray(hopeful, dtype=bool)

    def _predict_hopeful(self, X: FloatMatrix, hopeful: npt.NDArray[np.bool_]) -> tuple[Predictions, _Failures]:
        """The predictions of the hopeful rows; the others failed as :data:`PRUNED_REASON`."""
        n = X.shape[0]
        predictions = _empty_predictions(self.problem, n)
        failures = _Failures(n)
        self._batch_failed = None
        if hopeful.any():
            some, failed = self._predict(X[hopeful])
            for name, array in some.items():
                predictions[name][hopeful] = array
            failures.take(failed, np.flatnonzero(hopeful))
        failures.mark_rows(~hopeful, PRUNED_REASON)
        failures.unscored |= ~hopeful
        return predictions, failures

    def _checked(self, X: Any) -> FloatMatrix:
        """``X`` as a float matrix, checked as :meth:`FeatureSpace.check_candidates` checks it: a
        quick test that every value is in its domain and whole where it must be, and the full
        check (which names the offending value) only when the quick one finds anything."""
        space = self.problem.space
        matrix = np.asarray(X, dtype=np.float64)
        if matrix.ndim == 2 and matrix.shape[1] == space.n_features and matrix.shape[0] and self._bounded:
            # within finite bounds means finite (NaN compares false)
            inside = matrix >= space.domain_lower
            inside &= matrix <= space.domain_upper
            if inside.all():
                whole = matrix if self._integral is None else matrix[:, self._integral]
                if (np.rint(whole) == whole).all():
                    return matrix
        return space.check_candidates(matrix)

    def _scorecard_objective(self, X: FloatMatrix, changed: npt.NDArray[np.bool_]) -> FloatMatrix:
        """The scorecard paper's objective (a value in no bin: infinitely far), plus the change
        penalty."""
        problem = self.problem
        assert problem.scorecard_distance is not None
        space = problem.space
        objective = problem.scorecard_distance(space.to_frame(X), space.to_frame(self._original.reshape(1, -1)))
        objective = np.where(np.isfinite(objective), objective, _FAR)
        penalty = problem.distance.change_penalty
        if penalty:
            objective = objective + penalty * (changed * space.costs).sum(axis=1)
        return np.asarray(objective, dtype=np.float64)

    def check(self, rows: FloatMatrix, *, reference: bool = True, originals: FloatMatrix | None = None) -> Evaluation:
        """Rows (one row, or a matrix) scored by a model call of their own, whatever ``stop`` and
        :attr:`gave_up` say; through the real model (the reference path, never a fast path)
        unless ``reference`` is False: the final check of the answers.

        Every row is checked as it is reported: replaced first by the row its decoded values
        stand for (:meth:`~counterplan.planning.space.FeatureSpace.as_reported`), which the
        evaluation's :attr:`~Evaluation.rows` hold. ``originals``: each row's own original (rows
        of many instances judged in one problem's space), else the problem's."""
        space = self.problem.space
        reported = space.as_reported(np.asarray(rows, dtype=np.float64).reshape(-1, space.n_features), originals)
        stop, gave_up = self.stop, self.gave_up
        self.stop, self.gave_up, self._reference = None, None, reference
        try:
            return self.calculate(reported)
        finally:
            self.stop, self.gave_up, self._reference = stop, gave_up, False

    def evaluation_of(self, row: FloatMatrix) -> Evaluation | None:
        """The kept evaluation of ``row`` as reported (:meth:`check`) when that is the best row
        scored so far, else None: a row a hair off its grid was scored as held, not as shown."""
        if self.best is None:
            return None
        reported = self.problem.space.as_reported(row.reshape(1, -1))
        if not np.array_equal(self.best[0], reported[0]):
            return None
        return self.best[1]

    def _remember(self, X: FloatMatrix, evaluation: Evaluation, failures: _Failures) -> None:
        """Count a batch the model failed on wholly; keep the best row that has a prediction."""
        rows: npt.NDArray[np.intp] | None = None  # the rows with a prediction; None: every row
        if self._batch_failed is True:  # every row the model was asked about failed
            self.failing_batches += 1
            if self.failing_batches >= MAX_FAILING_BATCHES and self.gave_up is None:
                self.last_failure = next(r for r in evaluation.failures if r is not None and r != NOT_SCORED)
                self.gave_up = f"the model failed on every candidate of {self.failing_batches} batches in a row"
        elif self._batch_failed is False:
            self.failing_batches = 0
        if failures.any:
            rows = np.flatnonzero(~failures.failed)
            if not rows.size:
                return
        scores = evaluation.scores
        top = last_best_row(scores if rows is None else scores[rows])
        if rows is not None:
            top = int(rows[top])
        if self.best is not None and tuple(scores[top].tolist()) <= tuple(self.best[1].scores[0].tolist()):
            return
        row = X[top].copy()
        one = Evaluation(
            scores[top : top + 1].copy(),
            {k: v[top : top + 1].copy() for k, v in evaluation.predictions.items()},
            [None],
            row.reshape(1, -1),
        )
        self.best = (row, one)

    def _broken_rules(self, X: FloatMatrix, changed: npt.NDArray[np.bool_], counts: FloatMatrix) -> FloatMatrix:
        """Actionability rules each row breaks: immutables changed, monotone rules, too many changes.

        ``counts``: per row, the changed features and the changed immutables."""
        space = self.problem.space
        broken = counts[:, 1].copy()
        monotone = self._monotone_columns
        if monotone.size:  # elsewhere the product is 0, never below it
            broken += ((X[:, monotone] - self._monotone_original) * self._monotone_signs < 0.0).sum(axis=1)
        if self._checks_grid:
            broken += space.off_grid(X)
        limit = self.problem.max_changed_features
        if limit is not None:
            broken += np.maximum(counts[:, 0] - limit, 0)
        plausibility = self.problem.plausibility
        if plausibility is not None:
            broken += ~plausibility.plausible(X)
        relations = self.problem.relations
        if relations is not None:  # a relation whose value the domain cannot hold
            broken += relations.broken(X)
        region = self.problem.trust_region
        if region is not None:  # the original is no counterfactual: it is not judged
            moved = np.flatnonzero(counts[:, 0] > 0)
            broken[moved] += ~region.inside(X[moved])
        return np.asarray(broken, dtype=np.float64)

    def _predict(self, X: FloatMatrix) -> tuple[Predictions, _Failures]:
        """The predictions of ``X``'s rows: from the model for rows this solve has not had
        predicted (each once), else as kept (never on the reference path)."""
        self._batch_failed = None
        memory = None if self._reference else self.scored_rows
        split = memory.split(X) if memory is not None else None
        if memory is None or split is None:  # (None: two distinct rows share a hash; kept out)
            return self._predict_new(X)
        predictions, failures = self._predict_distinct(X, memory, split)
        if split.first.size == X.shape[0]:  # no row repeated in the batch
            return predictions, failures
        return {name: array[split.inverse] for name, array in predictions.items()}, failures.expanded(split.inverse)

    def _predict_distinct(self, X: FloatMatrix, memory: ScoredRows, split: Split) -> tuple[Predictions, _Failures]:
        """The predictions of the split's distinct rows: the model's for the new ones (kept for
        later unless they failed), the kept ones for the others."""
        new = split.new
        if new.all():  # every row new (most batches): the model's own arrays, nothing copied
            rows = X if split.first.size == X.shape[0] else X[split.first]
            predicted, failed = self._predict_new(rows)
            self._keep(memory, rows, split.keys, predicted, failed)
            return predicted, failed
        distinct: Predictions = _empty_predictions(self.problem, split.first.size)
        failures = _Failures(split.first.size)
        if new.any():
            rows = X[split.first[new]]
            predicted, failed = self._predict_new(rows)
            for name, array in predicted.items():
                distinct[name][new] = array
            if failed.any:
                failures.take(failed, np.flatnonzero(new))
            self._keep(memory, rows, split.keys[new], predicted, failed)
        for name, array in memory.known(split).items():
            distinct[name][~new] = array
        return distinct, failures

    @staticmethod
    def _keep(
        memory: ScoredRows, rows: FloatMatrix, keys: npt.NDArray[np.uint64], predicted: Predictions, failed: _Failures
    ) -> None:
        """Keep the new rows' predictions but the failed ones' (a failed row is asked again)."""
        if failed.any:
            kept = ~failed.failed
            rows, keys, predicted = rows[kept], keys[kept], {k: v[kept] for k, v in predicted.items()}
        memory.add(rows, keys, predicted)

    def _predict_new(self, X: FloatMatrix) -> tuple[Predictions, _Failures]:
        """The model's predictions of ``X`` (a row whose output is implausible counts as failed)."""
        n = X.shape[0]
        predictions = _empty_predictions(self.problem, n)
        failures = _Failures(n)
        self._predict_into(X, predictions, failures)
        for name, array in predictions.items():
            implausible = _implausible_rows(array)
            if implausible is None:
                continue
            for mask, reason in zip(implausible, _implausible_reasons(name), strict=True):
                failures.mark_rows(mask, reason)  # the first reason of a row stays
        modelled = ~failures.unscored
        if modelled.any():
            self._batch_failed = not (modelled & ~failures.failed).any()
        return predictions, failures

    def _predict_into(self, X: FloatMatrix, out: Predictions, failures: _Failures) -> None:
        """Every row's prediction into ``out``; a call the model raises on is halved
        (:func:`~counterplan.planning.halving.call_in_halves`) to find the rows it fails on, at most
        :data:`MAX_BISECTION_DEPTH` times while the solve's budget of failed calls lasts."""
        calls = call_in_halves(X.shape[0], lambda run: self._call(X, run, out), self._split_failed)
        for run, result in calls:
            if isinstance(result, Exception):  # a run left unresolved counts as failed
                failures.mark(run.start, run.stop, _failure_reason(result))

    def _call(self, X: FloatMatrix, run: Run, out: Predictions) -> None:
        """One model call on ``run``'s rows, its outputs written into ``out``; raises
        :class:`_NotCalled` when the solve stops or the budget of failed calls is spent."""
        if self.gave_up is not None or (self.stop is not None and self.stop()):
            raise _NotCalled(NOT_SCORED)
        if run.depth > 0 and self.failed_model_call_count >= MAX_FAILED_MODEL_CALLS:
            raise _NotCalled(self._bisect_reason)  # the rest of a failing batch: not bisected further
        self.model_call_count += 1
        self.model_row_count += run.size
        called = time.perf_counter()
        try:
            call = self.calls.predict_reference if self._reference else self.calls.predict
            result = call(X[run.rows], self.problem.space)
        finally:
            self._timed(time.perf_counter() - called)
        for spec in self.problem.model.outputs:
            if spec.name not in result:
                raise ModelAdapterError("outputs", f"the model returned no output {spec.name!r}")
            values = np.asarray(result[spec.name], dtype=np.float64)
            target = out[spec.name][run.rows]
            if values.shape != target.shape:
                raise ModelAdapterError(
                    f"outputs.{spec.name}",
                    f"the model returned shape {values.shape}; expected {target.shape}",
                )
            target[...] = values

    def _split_failed(self, run: Run, error: Exception) -> tuple[Run, Run] | None:
        """Where a failed call's rows are called again: its halves, unless it is one row, deep
        enough or the budget is spent (the model's own failure; a run not called stays so)."""
        if isinstance(error, _NotCalled):
            return None
        self.failed_model_call_count += 1
        self._bisect_reason = _failure_reason(error)
        spent = self.failed_model_call_count >= MAX_FAILED_MODEL_CALLS
        if run.size == 1 or run.depth >= MAX_BISECTION_DEPTH or spent:
            return None
        return run.halves()

    def _assert_matches_reference(self, X: FloatMatrix, evaluation: Evaluation) -> None:
        for i in range(X.shape[0]):
            expected = reference_score(self.problem, X[i])
            if not np.allclose(expected, evaluation.scores[i], rtol=1e-9, atol=1e-12):
                raise ScoreMismatchError(
                    f"row {i}: vectorised {evaluation.scores[i].tolist()} != reference {expected.tolist()}"
                )


PROBABILITY_TOLERANCE = 1e-6
"""Class probabilities must lie in [0, 1] and sum to 1 within this (float rounding, not more)."""


class _NotCalled(Exception):  # noqa: N818 - a run the calculator chose not to call
    """A run not sent to the model (the solve is stopping, or the failed calls' budget is
    spent); its message is the rows' failure reason."""


def _failure_reason(error: Exception) -> str:
    """Why a run's rows failed: the model's exception, or why the run was not called."""
    return str(error) if isinstance(error, _NotCalled) else one_line(f"model raised {type(error).__name__}: {error}")


class _Failures:
    """Why the rows of a batch failed: a per-row list of reasons (None where the prediction
    worked), with masks beside it, so a batch where nothing failed costs no Python per row."""

    __slots__ = ("any", "failed", "reasons", "unscored")

    def __init__(self, n: int) -> None:
        self.reasons: list[str | None] = [None] * n
        self.failed = np.zeros(n, dtype=bool)
        self.unscored = np.zeros(n, dtype=bool)
        """Rows left unscored because the solve was stopping (:data:`NOT_SCORED`)."""
        self.any = False

    def mark(self, start: int, stop: int, reason: str) -> None:
        """Rows ``start:stop`` failed for ``reason``."""
        self.reasons[start:stop] = [reason] * (stop - start)
        self.failed[start:stop] = True
        if reason == NOT_SCORED:
            self.unscored[start:stop] = True
        self.any = self.any or stop > start

    def take(self, other: _Failures, rows: npt.NDArray[np.intp]) -> None:
        """The failures of ``other``, whose row ``i`` is row ``rows[i]`` here."""
        for i in np.flatnonzero(other.failed).tolist():
            self.reasons[int(rows[i])] = other.reasons[i]
        self.failed[rows] |= other.failed
        self.unscored[rows] |= other.unscored
        self.any = self.any or other.any

    def expanded(self, inverse: npt.NDArray[np.intp]) -> _Failures:
        """The failures of rows ``inverse`` (row ``i`` of the result is row ``inverse[i]`` here)."""
        out = _Failures(inverse.size)
        if self.any:
            out.failed, out.unscored = self.failed[inverse], self.unscored[inverse]
            out.reasons = [self.reasons[i] for i in inverse.tolist()]
            out.any = True
        return out

    def mark_rows(self, rows: npt.NDArray[np.bool_], reason: str) -> None:
        """The rows of the mask that have not failed yet failed for ``reason``."""
        new = rows & ~self.failed
        for row in np.flatnonzero(new).tolist():
            self.reasons[row] = reason
        self.failed |= new
        self.any = self.any or bool(new.any())


def _implausible_reasons(name: str) -> tuple[str, str]:
    return (
        f"output {name!r} is not finite",
        f"output {name!r} is not a probability distribution (values in [0, 1] summing to 1)",
    )


def _implausible_rows(array: FloatMatrix) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]] | None:
    """Per row: the output is not finite; the output (class probabilities) is finite but outside
    [0, 1] or does not sum to 1. None when no row is either (decided by whole-array reductions
    first: the per-row masks are computed only when some value is out of place)."""
    if array.ndim == 1:
        finite = np.isfinite(array)
        if finite.all():
            return None
        return ~finite, np.zeros(array.shape[0], dtype=bool)
    k = array.shape[1]
    if k and array.size and array.min() >= -PROBABILITY_TOLERANCE and array.max() <= 1.0 + PROBABILITY_TOLERANCE:
        # Every value is finite and within [0, 1]; only a sum can be off, and the largest
        # |sum - 1| is that of the smallest or the largest sum (x - 1.0 rounds monotonically).
        # Two columns sum as the row sum below does.
        total = array[:, 0] + array[:, 1] if k == 2 else array.sum(axis=1)
        low, high = float(total.min()), float(total.max())
        if max(abs(low - 1.0), abs(high - 1.0)) <= PROBABILITY_TOLERANCE * k:
            return None
    with np.errstate(invalid="ignore"):
        finite_rows = np.asarray(np.isfinite(array).all(axis=1))
        outside = ((array < -PROBABILITY_TOLERANCE) | (array > 1.0 + PROBABILITY_TOLERANCE)).any(axis=1)
        unsummed = np.abs(array.sum(axis=1) - 1.0) > PROBABILITY_TOLERANCE * max(k, 1)
    return ~finite_rows, finite_rows & (outside | unsummed)


def implausible_predictions(predictions: Predictions, n: int) -> npt.NDArray[np.bool_]:
    """Per row of ``n``: some output of ``predictions`` is implausible (not finite; class
    probabilities outside [0, 1] or not summing to 1), so the calculator counts the row as a failed
    prediction. A search that scores rows its own way (the vectorised engine) marks the same rows,
    or it would chase a row the final check then refuses."""
    failed = np.zeros(n, dtype=bool)
    for array in predictions.values():
        masks = _implausible_rows(np.asarray(array, dtype=np.float64))
        if masks is not None:
            failed |= masks[0] | masks[1]
    return failed


def _implausible_outputs(name: str, array: FloatMatrix) -> list[tuple[int, str]]:
    """Rows whose output cannot be what the model's kind promises: not finite, or for class
    probabilities outside [0, 1] or not summing to 1. Such a row is never a valid answer."""
    masks = _implausible_rows(array)
    if masks is None:
        return []
    out: list[tuple[int, str]] = []
    for mask, reason in zip(masks, _implausible_reasons(name), strict=True):
        out += [(int(row), reason) for row in np.flatnonzero(mask)]
    return out


def reference_score(problem: CounterfactualProblem, row: FloatMatrix) -> FloatMatrix:
    """The score of one candidate, computed plainly, one feature and goal at a time.

    This is the specification the vectorised calculator is tested against; it calls the
    model once for this row alone. Each helper below computes its levels in the order the
    calculator's definition states them.
    """
    space = problem.space
    if problem.relations is not None:
        row = problem.relations.apply(row.reshape(1, -1))[0]
    hard0, below, failed = _reference_goals(problem, row)
    n_confidence = sum(1 for g in problem.goals if getattr(g.goal, "confidence", None) is not None)
    hard1, soft0, soft1 = _reference_changes(problem, row)
    if problem.scorecard_distance is not None:  # the paper's objective replaces the per-feature sum
        costs = [f.cost for i, f in enumerate(space.features) if row[i] != space.original[i]]
        soft0 = -problem.distance.change_penalty * float(sum(costs))
        frames = space.to_frame(row.reshape(1, -1)), space.to_frame(space.original.reshape(1, -1))
        objective = float(problem.scorecard_distance(*frames)[0])
        soft0 -= objective if math.isfinite(objective) else _FAR
    hard1 = _reference_rules(problem, row, hard1, soft1)
    if failed:
        return np.array([FAILED_PREDICTION, hard1, -max(n_confidence, 1), soft0, soft1]) + 0.0
    return np.array([hard0, hard1, -below, soft0, soft1], dtype=np.float64) + 0.0


def _reference_goals(problem: CounterfactualProblem, row: FloatMatrix) -> tuple[float, int, bool]:
    """Hard level 0 (minus the goals' distances), the goals below their confidence, and whether
    the prediction failed (raised, or gave an implausible output)."""
    try:
        predictions: Predictions | None = problem.model.predict(row.reshape(1, -1), problem.space)
    except ModelAdapterError:
        raise
    except Exception:
        predictions = None
    total = 0.0
    below = 0
    if predictions is None:
        return 0.0, below, True
    failed = any(
        _implausible_outputs(spec.name, np.asarray(predictions[spec.name], dtype=np.float64)[:1])
        for spec in problem.model.outputs
    )
    for bound in problem.goals:
        if failed:
            break
        value = np.asarray(predictions[bound.output.name], dtype=np.float64)[:1]
        with np.errstate(over="ignore"):
            total += float(bound.distance(value)[0])
        below += int(bound.below_confidence(value)[0])
    return -float(scored_goal_distance(np.array([total]))[0]), below, failed


def _reference_changes(problem: CounterfactualProblem, row: FloatMatrix) -> tuple[float, float, float]:
    """Feature by feature: hard level 1's immutable and monotone breaks, soft level 0 (the
    feature distance) and soft level 1 (minus the changed features)."""
    space = problem.space
    hard1 = 0.0
    soft0 = 0.0
    soft1 = 0.0
    for i, feature in enumerate(space.features):
        delta = float(row[i] - space.original[i])
        if delta == 0.0:
            continue
        soft1 -= 1.0
        soft0 -= feature.cost * problem.distance.change_penalty
        if not feature.mutable:
            hard1 -= 1.0
        if (feature.monotone == "increase" and delta < 0) or (feature.monotone == "decrease" and delta > 0):
            hard1 -= 1.0
        if not space.graded[i]:  # a category, a boolean, a filled missing value: 1 when changed
            soft0 -= feature.cost
        elif problem.distance.metric == "sd_squared":
            soft0 -= feature.cost * (delta / problem.scales[i]) ** 2
        else:
            soft0 -= feature.cost * abs(delta) / problem.scales[i]
    return hard1, soft0, soft1


def _reference_rules(problem: CounterfactualProblem, row: FloatMatrix, hard1: float, soft1: float) -> float:
    """Hard level 1 (``hard1`` so far) with the problem's other rules: allowed values, precision,
    the most changed features (``-soft1`` changed), relations, the trust region, plausibility."""
    space = problem.space
    for column, grid in space.allowed.items():
        if row[column] not in grid:
            hard1 -= 1.0
    for i, feature in enumerate(space.features):
        precision = getattr(feature, "precision", None)
        moved = precision is not None and feature.mutable and row[i] != space.original[i] and i not in space.allowed
        if moved and not np.isclose(round(float(row[i]), precision), row[i], rtol=1e-12, atol=0.0):
            hard1 -= 1.0
    if problem.max_changed_features is not None:
        hard1 -= max(-soft1 - problem.max_changed_features, 0.0)
    if problem.relations is not None:
        hard1 -= float(problem.relations.broken(row.reshape(1, -1))[0])
    region = problem.trust_region
    if region is not None and (row != space.original).any() and not region.inside(row.reshape(1, -1))[0]:
        hard1 -= 1.0
    if problem.plausibility is not None and not problem.plausibility.plausible(row.reshape(1, -1))[0]:
        hard1 -= 1.0
    return hard1


def check_shared(problems: Sequence[CounterfactualProblem], candidates: FloatMatrix, model: Any) -> list[Evaluation]:
    """Each problem's rows checked as :meth:`ScoreCalculator.check` checks them, from one call
    of ``model``'s reference path for all: ``candidates[i]`` (a row, or a matrix of rows) are
    ``problems[i]``'s, and every problem decodes a candidate matrix for the model alike (a batch
    block's rows of one layout, an audit's rows of one encoding).

    The rows are put as reported first, each with its own problem's original, in one pass when
    the problems report alike (:meth:`FeatureSpace.reports_like`), so the shared call predicts
    the rows each calculator then checks (from that call's predictions: :class:`GivenCalls`).
    A call that raises (not the adapter's own error) leaves each problem's calculator to find
    its failing rows with calls of its own."""
    m, d = len(problems), problems[0].space.n_features
    per_problem = np.asarray(candidates, dtype=np.float64).reshape(m, -1, d)
    k = per_problem.shape[1]
    flat = per_problem.reshape(m * k, d)
    first = problems[0].space
    if all(p.space.reports_like(first) for p in problems):
        originals = np.repeat(np.stack([p.space.original for p in problems]), k, axis=0)
        flat = first.as_reported(flat, originals)
    else:
        flat = np.vstack([p.space.as_reported(per_problem[i]) for i, p in enumerate(problems)])
    try:
        predictions = getattr(model, "predict_reference", model.predict)(flat, first)
    except ModelAdapterError:
        raise
    except Exception:  # the model fails on some row: each problem's own calculator finds which
        return [ScoreCalculator(p, remember_bytes=0).check(flat[i * k : (i + 1) * k]) for i, p in enumerate(problems)]
    check_rows(predictions, m * k)  # else a problem's slice holds another's rows, or is short and blamed
    out = []
    for i, problem in enumerate(problems):
        mine = {name: np.asarray(values)[i * k : (i + 1) * k] for name, values in predictions.items()}
        out.append(ScoreCalculator(problem, calls=GivenCalls(mine), remember_bytes=0).check(flat[i * k : (i + 1) * k]))
    return out


def _empty_predictions(problem: CounterfactualProblem, n: int) -> Predictions:
    out: Predictions = {}
    for spec in problem.model.outputs:
        shape = (n, len(spec.classes)) if spec.classes is not None else (n,)
        out[spec.name] = np.full(shape, np.nan, dtype=np.float64)
    return out


__all__ = [
    "FAILED_PREDICTION",
    "MAX_FAILED_MODEL_CALLS",
    "MAX_FAILING_BATCHES",
    "NOT_SCORED",
    "PRUNED_REASON",
    "BoundGoal",
    "Evaluation",
    "ScoreCalculator",
    "ScoreMismatchError",
    "SolveAbandoned",
    "check_shared",
    "implausible_predictions",
    "reference_score",
]
