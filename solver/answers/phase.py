"""The answers phase: the last phase of every solve, choosing what the solve returns.

It runs even when a termination ended the search (it is a *closing* phase), after every row a
phase set aside has competed for the best. It checks the search's best through the real model,
then, when several answers are asked for, chooses them by what the search left:

* an engine's own final set (the exact engine's, solved as a whole and verified): without the
  changes an answer does not need (:func:`~.choose.from_set`);
* an engine's picks (the swarm's, one per k-means cluster): the best in place of the nearest
  pick, the others refined, topped up from the pool when refined picks fell onto one another;
* otherwise the pool of feasible rows the search scored (:func:`~.choose.from_pool`).

Every chosen row is checked through the real model in one call, as it is reported: a row is
replaced by the row its decoded values stand for before the model sees it, and the answers are
those rows. What it leaves (:attr:`AnswersPhase.chosen`) is read by whoever built the phase,
which decodes the result.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from counterplan.planning.distinct_rows import first_of_each
from counterplan.solver.answers.choose import Answering, from_picks, from_pool, from_set
from counterplan.solver.core.phase import PhaseScope
from counterplan.solver.core.protocol import BatchScorer, Checked, FloatMatrix
from counterplan.solver.core.scope import SolverScope


@dataclass(frozen=True)
class ChosenAnswers:
    """What the answers phase chose."""

    best_row: FloatMatrix
    """The search's best row, with the features computed from others set, as it is reported
    (the row :attr:`best_check` checked)."""
    best_check: Checked
    """The best row checked through the real model (or its prediction kept, when stopping)."""
    best_check_cost: tuple[int, int]
    """The score calculations and model calls that check cost (not the search's own)."""
    rows: FloatMatrix
    """The answers as they are reported (the rows :attr:`checked` checked), best first by the
    search's choice (empty when the best is not feasible)."""
    checked: Checked | None
    """``rows`` checked through the real model (None when there are none)."""


class AnswersPhase:
    """Chooses the solve's answers (see the module docstring).

    Parameters
    ----------
    wanted:
        How many answers the caller asked for.
    scorer:
        Scores the refinement's rows and checks the answers (a scorer of its own: work after
        the search does not count as the search's steps).
    scales, domain_width:
        The distance's per-feature scales and the features' domain widths, for choosing among
        answers and matching picks.
    """

    closing = True

    def __init__(self, wanted: int, scorer: BatchScorer, scales: FloatMatrix, domain_width: FloatMatrix) -> None:
        self.wanted = wanted
        self.scorer = scorer
        self.scales = scales
        self.domain_width = domain_width
        self.chosen: ChosenAnswers | None = None

    def solving_started(self, scope: SolverScope) -> None:
        """Nothing to prepare."""

    def phase_started(self, phase_scope: PhaseScope) -> None:
        """Rows an earlier phase set aside compete for the best first."""
        phase_scope.solver_scope.offer_deferred()

    def phase_ended(self, phase_scope: PhaseScope) -> None:
        """Nothing to drop."""

    def solving_ended(self, scope: SolverScope) -> None:
        """Nothing to finish."""

    def solve(self, phase_scope: PhaseScope) -> None:
        """Check the best, then choose and check the answers."""
        scope = phase_scope.solver_scope
        scorer = self.scorer
        best = scorer.complete(scope.best_row.reshape(1, -1))[0]
        before = (scorer.calculation_count, scorer.model_call_count)
        best_check = scorer.check_best(best, stopping=scope.stop_requested())
        best = _as_checked(best_check)[0]
        cost = (scorer.calculation_count - before[0], scorer.model_call_count - before[1])
        rows, checked = self._answers(scope, best, best_check)
        self.chosen = ChosenAnswers(best, best_check, cost, rows, checked)

    def _answers(
        self, scope: SolverScope, best: FloatMatrix, best_check: Checked
    ) -> tuple[FloatMatrix, Checked | None]:
        """The answer rows and their check; none when the best is not feasible."""
        final_score = best_check.scores[0]
        none = np.empty((0, best.size))
        if not (final_score[:3] >= 0.0).all():
            return none, None  # the best is not feasible: no answer
        answering = Answering(
            space=scope.space,
            scorer=self.scorer,
            original_score=scope.original_score if scope.original_score is not None else final_score,
            scales=self.scales,
            domain_width=self.domain_width,
            wanted=self.wanted,
            should_stop=scope.stop_requested,
        )
        pool = self._pool(scope)
        found = scope.answer_set
        if found is not None and found.kind == "picks" and self.wanted > 1:
            rows = from_picks(answering, self.scorer.complete(found.rows), best)
            if rows.shape[0] < self.wanted and pool is not None and not scope.stop_requested():
                # refined picks that fell onto one another: the rest as local search would choose them
                more = from_pool(answering, pool, best, final_score)
                both = np.vstack([rows, more])
                rows = both[first_of_each(both)][: self.wanted]
        elif found is not None and found.rows.shape[0] > 1:  # a set solved at once (the exact engine's)
            rows = from_set(answering, self.scorer.complete(found.rows))
        elif self.wanted == 1 or pool is None:
            return best.reshape(1, -1), best_check  # already checked: no second model call
        else:
            rows = from_pool(answering, pool, best, final_score)
        if rows.shape[0] == 0:
            return none, None
        checked = self.scorer.check(rows)  # every answer checked, even when the time is up
        return _as_checked(checked), checked

    def _pool(self, scope: SolverScope) -> tuple[FloatMatrix, FloatMatrix] | None:
        """The distinct feasible rows scored (the original too, when feasible), as the problem
        sees them; None when the solve kept no pool or only one answer is wanted."""
        if scope.pool is None or self.wanted == 1:
            return None
        start = scope.space.original
        start_score = scope.original_score if scope.original_score is not None else scope.best_score
        rows, scores = scope.pool.merged(start, start_score)
        return self.scorer.complete(rows), scores


def _as_checked(checked: Checked) -> FloatMatrix:
    """The rows a check checked: the rows given as their reports stand for them, which the
    answers are then built from (never a valid flag on a row other than the one reported)."""
    assert checked.rows is not None  # a check keeps its rows
    return checked.rows
