"""Building a :class:`~counterplan.solver.result.CounterfactualResult`: the one place a result is made.

A solve's outcome (the best row, the answers phase's choice, the engines' reports) and the planning
problem go in; decoded values, changes, predictions, scores and statistics come out. An instance
that already meets its goals gets its result here too, from the same parts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from counterplan.planning.calculator import Evaluation
from counterplan.planning.problem import CounterfactualProblem
from counterplan.planning.score import BendableScore, is_better
from counterplan.solver.answers.phase import ChosenAnswers
from counterplan.solver.core.protocol import FloatMatrix
from counterplan.solver.core.solver import SolveOutcome
from counterplan.solver.diagnosis import Diagnosis
from counterplan.solver.engines import EnginePlan
from counterplan.solver.exact.report import ExactStatistics
from counterplan.solver.result import Change, Counterfactual, CounterfactualResult, SolveStatistics
from counterplan.solver.swarm.report import SwarmStatistics


@dataclass(frozen=True)
class Spent:
    """What a solve spent, as its statistics report it: the search's calculations and model calls
    (the best row's own check left out) and the seconds from the solve's start."""

    calculations: int
    model_calls: int
    seconds: float


class ResultBuilder:
    """Decodes solves of one problem into results.

    Parameters
    ----------
    problem:
        The planning problem (its space decodes rows; its model names the outputs).
    engine:
        The engine that ran and why (:func:`~counterplan.solver.engines.plan_engine`).
    requested:
        How many answers were asked for.
    """

    def __init__(self, problem: CounterfactualProblem, engine: EnginePlan, requested: int) -> None:
        self.problem = problem
        self.engine = engine
        self.requested = requested

    def already_met(self, original: Evaluation, spent: float) -> CounterfactualResult:
        """The instance meets every goal as it is: nothing to change, no search."""
        space = self.problem.space
        score = BendableScore.of(original.scores[0])
        values = space.decode(space.original)
        answer = Counterfactual(
            proposed=values,
            changes=[],
            predictions=self.predictions(original),
            score=str(score),
            score_levels=list(score.levels),
            valid=True,
            feasible=score.is_feasible,
        )
        return self._result(
            answer,
            original,
            statistics=SolveStatistics(
                steps=0,
                score_calculation_count=1,
                model_call_count=1,
                score_calculation_speed=1.0 / spent if spent > 0 else 0.0,
                time_spent_seconds=spent,
                best_found_at_step=0,
                best_found_after_seconds=0.0,
                termination_reason="the instance already meets the goal",
            ),
            counterfactuals=[answer],
            already_met=True,
        )

    def solved(
        self,
        outcome: SolveOutcome,
        chosen: ChosenAnswers,
        *,
        original: Evaluation,
        spent: Spent,
        failure: str | None,
        diagnose: Any,
    ) -> CounterfactualResult:
        """The result of a solve: the search's best (or a refined answer that beats it), the
        answers, the statistics. ``failure`` is the best's prediction failure (or why the model
        was given up on); ``diagnose(best_row, best_score)`` says which immutables block an
        invalid answer (a :class:`~counterplan.solver.diagnosis.Diagnosis`, or None to skip)."""
        final = _evaluation(chosen.best_check)
        alternatives = self.answers(chosen)
        # the best's score as checked: its row as reported, through the real model (the search
        # scored the row it held, which for a row a hair off its grid is another row); the
        # search's when the check failed (the answer is not valid either way)
        fine = final.failures[0] is None
        score = final.scores[0] if fine else outcome.best_score
        best = self.counterfactual(chosen.best_row, final, BendableScore.of(score), fine=fine)
        found_at = (outcome.best_step_index, outcome.best_time)
        if alternatives and is_better(np.array(alternatives[0].score_levels), score):
            best, failure = alternatives[0], None  # refining the pool beat the search's own best
            found_at = (outcome.step_count, spent.seconds)
        diagnosis = diagnose(chosen.best_row, score) if not best.valid else None
        diagnosis = diagnosis if diagnosis is not None else Diagnosis([], False, [])
        statistics = self._statistics(
            spent,
            steps=outcome.step_count,
            found_at=found_at,
            reason=outcome.termination_reason,
            exact=_report(outcome, "exact", ExactStatistics),
            swarm=_report(outcome, "swarm", SwarmStatistics),
        )
        return self._result(
            best,
            original,
            statistics,
            failure=failure,
            counterfactuals=alternatives,
            blocked_by=diagnosis.blocked_by,
            reaches=diagnosis.reaches,
            held_fixed=diagnosis.held_fixed,
        )

    def so_far(
        self,
        best: tuple[FloatMatrix, Evaluation],
        *,
        original: Evaluation,
        spent: Spent,
        found_at: tuple[int, float],
        reason: str,
    ) -> CounterfactualResult:
        """The answer of a solve that must end at once, its thread still inside a model call (a
        server whose grace is running out): ``best`` is the best row the score calculator kept
        and its prediction from the batch it was scored in, so no model call is made. It is
        valid only if it met every goal when it was scored, as it is reported (a row a hair off
        its grid was scored as held, not as its record shows it); ``found_at`` is the step and
        the seconds of the last best solution heard, ``reason`` the termination reason."""
        scored, evaluation = best
        row = self.problem.space.as_reported(scored.reshape(1, -1))[0]
        fine = evaluation.failures[0] is None and bool(np.array_equal(row, scored))
        answer = self.counterfactual(row, evaluation, evaluation.score(0), fine=fine)
        statistics = self._statistics(spent, steps=found_at[0], found_at=found_at, reason=reason)
        listed = [answer] if answer.valid and answer.feasible else []  # the answers keep every rule
        return self._result(answer, original, statistics, counterfactuals=listed)

    def _result(
        self, answer: Counterfactual, original: Evaluation, statistics: SolveStatistics, **rest: Any
    ) -> CounterfactualResult:
        """The result whose answer is ``answer``: the problem's goal and original, the original's
        predictions, ``statistics`` and the ``rest`` of the result's fields."""
        return CounterfactualResult(
            goal=self.problem.goal_text,
            goal_default=self.problem.goals_default,
            original=self.problem.space.decode(self.problem.space.original),
            proposed=answer.proposed,
            changes=answer.changes,
            predictions=answer.predictions,
            original_predictions=self.predictions(original),
            score=answer.score,
            score_levels=answer.score_levels,
            valid=answer.valid,
            feasible=answer.feasible,
            statistics=statistics,
            requested=self.requested,
            **rest,
        )

    def _statistics(
        self, spent: Spent, *, steps: int, found_at: tuple[int, float], reason: str, **reports: Any
    ) -> SolveStatistics:
        """A search's statistics: ``spent``, the steps, when the best was found, why it ended, the
        engine and the engines' ``reports``."""
        return SolveStatistics(
            steps=steps,
            score_calculation_count=spent.calculations,
            model_call_count=spent.model_calls,
            score_calculation_speed=spent.calculations / spent.seconds if spent.seconds > 0 else 0.0,
            time_spent_seconds=spent.seconds,
            best_found_at_step=found_at[0],
            best_found_after_seconds=found_at[1],
            termination_reason=reason,
            engine=self.engine.name,
            engine_reason=self.engine.reason,
            **reports,
        )

    def answers(self, chosen: ChosenAnswers) -> list[Counterfactual]:
        """The chosen rows decoded, best first: chosen by diversity, listed by score; on a tie the
        search's own best leads (it is the result's answer unless a refined row beats it)."""
        if chosen.checked is None or chosen.rows.shape[0] == 0:
            return []
        rows, evaluation = chosen.rows, _evaluation(chosen.checked)
        out = []
        for i in range(rows.shape[0]):
            single = Evaluation(
                evaluation.scores[i : i + 1], {k: v[i : i + 1] for k, v in evaluation.predictions.items()}
            )
            out.append(self.counterfactual(rows[i], single, evaluation.score(i), fine=evaluation.failures[i] is None))
        is_best = [bool((rows[i] == chosen.best_row).all()) for i in range(rows.shape[0])]
        order = sorted(range(len(out)), key=lambda i: (tuple(out[i].score_levels), is_best[i]), reverse=True)
        return [out[i] for i in order]

    def counterfactual(
        self, row: FloatMatrix, evaluation: Evaluation, score: BendableScore, *, fine: bool
    ) -> Counterfactual:
        """One answer: ``row`` decoded with its changes, the predictions of ``evaluation``'s first
        row and ``score``; valid when every goal is met and the model did not fail on it (``fine``)."""
        levels = list(score.levels)
        return Counterfactual(
            proposed=self.problem.space.decode(row),
            changes=self.changes(row),
            predictions=self.predictions(evaluation),
            score=str(score),
            score_levels=levels,
            valid=levels[0] == 0.0 and levels[2] == 0.0 and fine,
            feasible=score.is_feasible and fine,
        )

    def changes(self, row: FloatMatrix) -> list[Change]:
        """Each feature ``row`` changes, decoded (a scorecard names the bins too)."""
        space = self.problem.space
        changed = np.flatnonzero(row != space.original)
        label = getattr(self.problem.model, "bin_label", None)  # a scorecard names the bins
        out = []
        for i in changed:
            original = space.features[i].decode(float(space.original[i]))
            proposed = space.features[i].decode(float(row[i]))
            bins = (label(space.names[i], original), label(space.names[i], proposed)) if label else (None, None)
            out.append(
                Change(
                    feature=space.names[i],
                    original=original,
                    proposed=proposed,
                    original_bin=bins[0],
                    proposed_bin=bins[1],
                )
            )
        return out

    def predictions(self, evaluation: Evaluation) -> dict[str, Any]:
        """The first row's predictions per output: ``{class: probability}`` or the value."""
        out: dict[str, Any] = {}
        for spec in self.problem.model.outputs:
            values = evaluation.predictions[spec.name][0]
            if spec.classes is not None:
                out[spec.name] = {str(label): float(p) for label, p in zip(spec.classes, values, strict=True)}
            else:
                out[spec.name] = float(values)
        return out


def _evaluation(checked: Any) -> Evaluation:
    """A check made by :class:`~counterplan.solver.scoring.CalculatorScorer`: an evaluation."""
    assert isinstance(checked, Evaluation)
    return checked


def _report(outcome: SolveOutcome, name: str, kind: type[Any]) -> Any:
    """The report a phase type left, when it is of ``kind``."""
    report = outcome.reports.get(name)
    return report if isinstance(report, kind) else None
