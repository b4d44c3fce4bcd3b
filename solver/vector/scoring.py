"""Scoring a block's candidates: one model call for every instance, distances against each
instance's own original, and a memory of the rows each instance has scored.

:class:`BlockScorer` computes the five score levels of :mod:`counterplan.planning.calculator` for
rows of many instances at once (``owner[k]`` is row ``k``'s instance): the goals' distances
from one prediction of the whole matrix (the model adapter's verified fast path where it has
one), the changed features and the feature distance against ``originals[owner]``. Rows an
instance has scored before are answered from its memory: 34-82% of the rows a local search
scores are repeats. The search's scores guide it; every answer is checked afterwards through
the real model by each instance's own :class:`~counterplan.planning.calculator.ScoreCalculator`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from counterplan.planning.calculator import (
    FAILED_PREDICTION,
    MAX_BISECTION_DEPTH,
    MAX_FAILED_MODEL_CALLS,
    implausible_predictions,
)
from counterplan.planning.distance import feature_distance
from counterplan.planning.goals import scored_goal_distance
from counterplan.planning.halving import Run, call_in_halves
from counterplan.planning.model_protocol import ModelAdapter, Predictions
from counterplan.planning.problem import CounterfactualProblem
from counterplan.planning.score import LEVELS
from counterplan.solver.core.protocol import FloatMatrix
from counterplan.solver.vector.draws import key, mix
from counterplan.solver.vector.layouts import Layouts

IntArray = npt.NDArray[np.intp]


class SearchStoppedError(Exception):
    """The block's stop check said stop before a model call: the search ends with its bests."""


class BlockScorer:
    """Scores rows of the instances of one block (problems of one program, see
    :func:`~counterplan.solver.vector.capability.same_program`; their domains may differ,
    :class:`~counterplan.solver.vector.layouts.Layouts`).

    ``stop`` is asked before every model call (and by the search between lots of its longest work
    that calls no model, :meth:`check_stop`); once it says stop, :class:`SearchStoppedError` is
    raised and no call is made.
    """

    def __init__(
        self, problems: Sequence[CounterfactualProblem], model: ModelAdapter, stop: Callable[[], bool] | None = None
    ) -> None:
        first = problems[0]
        self.problem = first
        self.space = first.space
        self.model = model
        self.stop = stop
        self.originals: FloatMatrix = np.vstack([p.space.original for p in problems])
        self.nominal = ~self.space.graded
        self.frozen = ~self.space.mutable
        self.costs = None if (self.space.costs == 1.0).all() else self.space.costs
        self.layouts = Layouts(problems)
        self.layout = self.layouts.layout
        # numbers with a decimal precision: a value off their grid breaks a rule (the original's own
        # is kept); per layout, as an imputed decimal makes a column of whole numbers one of them
        decimal = np.array(
            [
                [
                    getattr(f, "precision", None) is not None and not p.space.integral[i] and p.space.mutable[i]
                    for i, f in enumerate(p.space.features)
                ]
                for p in self.layouts.problems
            ],
            dtype=bool,
        )
        self.decimals = np.flatnonzero(decimal.any(axis=0)).astype(np.intp)
        self.decimal_mask = decimal[:, self.decimals]
        self.model_calls = 0
        self.rows_scored = 0
        self.rows_remembered = 0
        self.calls_per_instance = np.zeros(len(problems), dtype=np.int64)
        self.failed_calls_per_instance = np.zeros(len(problems), dtype=np.int64)
        """Per instance: the model calls on its rows alone that raised (its bisection's budget,
        :data:`~counterplan.planning.calculator.MAX_FAILED_MODEL_CALLS`, as a solve's)."""
        self.calling: IntArray = np.arange(len(problems), dtype=np.intp)
        """The instances whose rows the model call about to start scores (set before ``stop``
        is asked, so a clock can share the call's time among them)."""
        self.rows_per_instance = np.zeros(len(problems), dtype=np.int64)
        self._memory: list[tuple[npt.NDArray[np.uint64], FloatMatrix]] = []
        """Sorted runs of the scored rows' keys and their scores, each at least twice the next
        (a new call's rows are a run of their own, merged into the one before while it is at
        least half its size): merging every call's rows into one sorted array copied the whole
        memory each call (a block of 64 heloc rows keeps about 100,000 of them, over 35 calls)."""

    def score(self, X: FloatMatrix, owner: IntArray) -> FloatMatrix:
        """The ``(n, 5)`` scores of rows ``X`` of instances ``owner``, one model call for the new ones."""
        n = X.shape[0]
        out = np.empty((n, LEVELS))
        if n == 0:
            return out
        # each distinct row once (several walkers may draw one row in a step), looked up by its
        # key in sorted order (a search of sorted keys walks each run of the memory once)
        contents = _row_contents(X)
        keys, first, inverse = np.unique(key(owner, contents.view(np.int64)), return_index=True, return_inverse=True)
        scores = np.empty((keys.size, LEVELS))
        known = np.zeros(keys.size, dtype=bool)
        for run_keys, run_scores in self._memory:
            ask = np.flatnonzero(~known)
            if ask.size == 0:
                break
            at = np.minimum(np.searchsorted(run_keys, keys[ask]), run_keys.size - 1)
            hit = run_keys[at] == keys[ask]
            scores[ask[hit]] = run_scores[at[hit]]
            known[ask[hit]] = True
        fresh = np.flatnonzero(~known)
        if fresh.size:
            rows = first[fresh]
            # grouped by instance, each instance's rows in an order of their own (by their values'
            # hash, not their key: the key holds the instance's place in the block), so a failing
            # model's bisection of an instance's rows is the same in any block
            order = np.lexsort((contents[rows], owner[rows]))
            new = np.empty((rows.size, LEVELS))
            new[order] = self._fresh(X[rows[order]], owner[rows[order]])
            scores[fresh] = new
            self._remember(keys[fresh], new)
            self.calls_per_instance[np.unique(owner[rows])] += 1
            self.rows_per_instance += np.bincount(owner[rows], minlength=self.rows_per_instance.size)
        self.rows_remembered += n - int(fresh.size)
        out[:] = scores[inverse.reshape(-1)]
        return out

    def _remember(self, keys: npt.NDArray[np.uint64], scores: FloatMatrix) -> None:
        """Add new rows' sorted ``keys`` and ``scores`` to the memory as a run, merging the last
        runs while the newer is at least half the older (two sorted runs: a linear merge)."""
        self._memory.append((keys, scores))
        while len(self._memory) > 1 and 2 * self._memory[-1][0].size >= self._memory[-2][0].size:
            (older, older_scores), (newer, newer_scores) = self._memory[-2], self._memory.pop()
            merged = np.concatenate([older, newer])
            order = np.argsort(merged, kind="stable")
            self._memory[-1] = (merged[order], np.vstack([older_scores, newer_scores])[order])

    def distance(self, X: FloatMatrix, owner: IntArray) -> FloatMatrix:
        """Soft level 0 of each row without a model call: minus its feature distance."""
        problem = self.problem
        original = self.originals[owner]
        return -feature_distance(
            X,
            original,
            self.nominal,
            problem.scales,
            problem.distance.metric,
            costs=self.costs,
            change_penalty=problem.distance.change_penalty,
        )

    def stopping(self) -> bool:
        """Whether the block's stop check says stop: asked before every model call, and between
        the lots of long work that calls no model (a block's combinations and beam pairs)."""
        return self.stop is not None and self.stop()

    def check_stop(self) -> None:
        """Raise :class:`SearchStoppedError` when the block's stop check says stop."""
        if self.stopping():
            raise SearchStoppedError

    def _fresh(self, X: FloatMatrix, owner: IntArray) -> FloatMatrix:
        self.calling = np.unique(owner).astype(np.intp)  # the instances this call serves
        self.check_stop()
        problem = self.problem
        n = X.shape[0]
        self.rows_scored += n
        scores = np.zeros((n, LEVELS))
        failed = np.zeros(n, dtype=bool)
        goal = np.zeros(n)
        for rows, predictions in self._predict(X, owner):
            if predictions is None:
                failed[rows] = True
                continue
            failed[rows] |= implausible_predictions(predictions, rows.stop - rows.start)  # as the final check
            with np.errstate(invalid="ignore", over="ignore"):
                for bound in problem.goals:
                    column = np.asarray(predictions[bound.output.name], dtype=np.float64)
                    goal[rows] += bound.distance(column)
                    if getattr(bound.goal, "confidence", None) is not None:
                        scores[rows, 2] -= bound.below_confidence(column)
        scores[:, 0] = -scored_goal_distance(goal)
        scores[failed, 0] = FAILED_PREDICTION
        scores[failed, 2] = -1.0
        original = self.originals[owner]
        changed = original != X
        count = changed.sum(axis=1).astype(np.float64)
        broken = (changed & self.frozen).sum(axis=1).astype(np.float64)
        if self.decimals.size:
            block = X[:, self.decimals]
            rounded = self.layouts.grid.round(block, self.decimals)
            off = ~np.isclose(rounded, block, rtol=1e-12, atol=0.0) & (block != original[:, self.decimals])
            off &= self.decimal_mask[self.layout[owner]]
            broken += off.sum(axis=1)
        if problem.max_changed_features is not None:
            broken += np.maximum(count - problem.max_changed_features, 0.0)
        scores[:, 1] = -broken
        scores[:, 3] = -feature_distance(
            X,
            original,
            self.nominal,
            problem.scales,
            problem.distance.metric,
            costs=self.costs,
            change_penalty=problem.distance.change_penalty,
            changed=changed,
        )
        scores[:, 4] = -count
        scores += 0.0
        return scores

    def _predict(self, X: FloatMatrix, owner: IntArray) -> list[tuple[slice, Predictions | None]]:
        """The model's predictions of ``X`` by runs of rows: one call when it answers; when it
        raises, the rows are halved at an instance's boundary until the instances it fails on are
        found, so one failing instance costs the others nothing; then an instance's own rows are
        halved as a solve's calculator halves a batch (at most
        :data:`~counterplan.planning.calculator.MAX_BISECTION_DEPTH` times, while the instance's
        budget of failed calls lasts), so the rows the model answers keep their predictions and
        only the rest count as failed. Both depend on the instance's own rows only: its scores
        are the same in any block."""

        def call(run: Run) -> Predictions:
            self.model_calls += 1
            return self.model.predict(X[run.rows], self.layouts.model_space)

        def split(run: Run, _: Exception) -> tuple[Run, Run] | None:
            cut = _instance_cut(owner, run.start, run.stop)
            if cut is not None:  # the instances it fails on first: each starts its own halving
                return Run(run.start, cut), Run(cut, run.stop)
            instance = owner[run.start]
            self.failed_calls_per_instance[instance] += 1
            spent = self.failed_calls_per_instance[instance] >= MAX_FAILED_MODEL_CALLS
            if run.size == 1 or run.depth >= MAX_BISECTION_DEPTH or spent:
                return None
            return run.halves()

        return [
            (run.rows, None if isinstance(result, Exception) else result)
            for run, result in call_in_halves(X.shape[0], call, split)
        ]


def _instance_cut(owner: IntArray, start: int, stop: int) -> int | None:
    """The instance boundary nearest the middle of rows ``start:stop``; None within one instance."""
    if owner[start] == owner[stop - 1]:
        return None
    boundaries = start + 1 + np.flatnonzero(owner[start + 1 : stop] != owner[start : stop - 1])
    middle = (start + stop) / 2
    return int(boundaries[np.argmin(np.abs(boundaries - middle))])


def _row_contents(X: FloatMatrix) -> npt.NDArray[np.uint64]:
    """A 64-bit hash of each row's values: every value's bits hashed with its column at once, the
    columns' hashes summed with odd weights (a few whole-matrix operations, whatever the number of
    columns). A row's key is this hashed with its instance."""
    bits = np.ascontiguousarray(X + 0.0).view(np.uint64)
    d = bits.shape[1]
    with np.errstate(over="ignore"):
        columns = mix(np.arange(1, d + 1, dtype=np.uint64)) | np.uint64(1)
        hashed = mix(bits ^ columns.reshape(1, -1)) * columns.reshape(1, -1)
        return np.asarray(np.add.reduce(hashed, axis=1, dtype=np.uint64), dtype=np.uint64)
