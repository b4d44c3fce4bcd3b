"""Solving counterfactual problems: the bridge from the engines to the planning domain.

``explain(problem, config)`` runs the engines on a :class:`planning.CounterfactualProblem`
and returns a decoded :class:`~counterplan.solver.core.result.CounterfactualResult`; listeners hear decoded
:class:`~counterplan.solver.core.result.BestSolutionEvent` s.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from counterplan.planning.calculator import Evaluation, ModelCalls, ScoreCalculator
from counterplan.planning.distance import gower
from counterplan.planning.errors import ModelCallError, ProblemError
from counterplan.planning.problem import CounterfactualProblem
from counterplan.planning.score import BendableScore
from counterplan.planning.threads import NativeThreadLimit
from counterplan.solver.core.budget import check_budget, swarm_coordinates
from counterplan.solver.core.config import (
    MAX_SEED,
    ExactPhaseConfig,
    FeatureScanPhaseConfig,
    SolverConfig,
    SwarmPhaseConfig,
)
from counterplan.solver.core.diversity import best_per_change_set, select_diverse, undominated
from counterplan.solver.core.engine import Solver
from counterplan.solver.core.events import BestSolutionChanged
from counterplan.solver.core.protocol import FloatMatrix
from counterplan.solver.core.refine import refine_rows
from counterplan.solver.core.result import (
    BestSolutionEvent,
    Change,
    Counterfactual,
    CounterfactualResult,
    SolveStatistics,
)
from counterplan.solver.core.scores import is_better
from counterplan.solver.core.termination import wall_limit
from counterplan.solver.diagnosis import Diagnosis, blocking_immutables
from counterplan.solver.engines import EngineChoice, choose
from counterplan.solver.local.routes import successive_routes

Listener = Callable[[BestSolutionEvent], None]

SHORTLIST_FACTOR = 3
"""k answers are chosen from this many times k refined candidates..."""
SHORTLIST_MAX = 96
"""...but at most this many."""
ROUTES_MAX = 128
"""At most this many pool rows (up to 3 per set of changed features) have their needless changes dropped."""
AVOID_MAX = 6
"""Other routes are looked for by avoiding each of at most this many of the best answer's features
(and, in each next round, each of at most this many routes found by the last one)."""
ROUTE_ROUNDS = 3
"""Rounds of other routes: those avoiding the best's features, then routes avoiding those too, twice."""
REFINE_GRID = 16
REFINE_ROUNDS = 5
"""The shortlist's refinement: a bracket is cut 16 ways per round, 16^5 ~ 10^6 after five."""


def best_valid(evaluation: Evaluation) -> bool:
    """The first row of ``evaluation`` meets every goal and its prediction did not fail."""
    return bool(evaluation.scores[0, 0] == 0.0 and evaluation.scores[0, 2] == 0.0 and evaluation.failures[0] is None)


class ModelFailureError(ModelCallError):
    """The model fails on the original instance itself: there is nothing to search from."""


class CalculatorScorer:
    """Adapts :class:`planning.ScoreCalculator` to the engines' batch-scorer protocol."""

    def __init__(
        self,
        calculator: ScoreCalculator,
        original: Evaluation | None = None,
        on_give_up: Callable[[], None] | None = None,
    ) -> None:
        self.calculator = calculator
        self._original = original
        self._on_give_up = on_give_up

    @property
    def calculation_count(self) -> int:
        """Candidates scored so far."""
        return self.calculator.calculation_count

    @property
    def model_call_count(self) -> int:
        """Model calls made so far."""
        return self.calculator.model_call_count

    def score_final(self, X: FloatMatrix) -> FloatMatrix:
        """Score a batch with one model call even when the solve is stopping (final answers)."""
        return self.calculator.check(X).scores

    def score(self, X: FloatMatrix) -> FloatMatrix:
        """Score a batch with one model call (the original row alone is already scored)."""
        space = self.calculator.problem.space
        if self._original is not None and X.shape[0] == 1 and np.array_equal(X[0], space.original):
            return self._original.scores.copy()
        relations = self.calculator.problem.relations
        if relations is not None:  # the engines keep the rows as scored: computed features set
            X[...] = relations.apply(X)
        scores = self.calculator.calculate(X).scores
        if self.calculator.gave_up is not None and self._on_give_up is not None:
            self._on_give_up()  # the model keeps failing: end the solve with what it found
        return scores


class CounterfactualSolver:
    """Finds the best counterfactual of one problem.

    Parameters
    ----------
    problem:
        The problem to solve.
    config:
        Engine configuration; the default is a tabu search with an early-stopping termination.
    seed:
        Overrides ``config.random_seed``; the same problem, config and seed give the same answer.
    num_counterfactuals:
        How many distinct valid answers to return (see :mod:`counterplan.solver.core.diversity`).
    engine:
        ``"local"``, ``"exact"`` or ``"auto"`` (see :func:`counterplan.solver.engines.choose`); None runs
        ``config`` as it is.
    calls:
        How model calls are made; default the problem's adapter directly. The batch engine
        passes calls shared with other solves of the same model (:mod:`counterplan.solver.batch`).
    """

    def __init__(
        self,
        problem: CounterfactualProblem,
        config: SolverConfig | None = None,
        seed: int | None = None,
        num_counterfactuals: int = 1,
        engine: EngineChoice | None = None,
        *,
        calls: ModelCalls | None = None,
    ):
        config = config or SolverConfig()
        self.engine, self.engine_reason = "local", ""
        if engine is not None:
            config, self.engine, self.engine_reason = choose(problem, config, engine)
            if self.engine == "local" and any(isinstance(p, SwarmPhaseConfig) for p in config.phases):
                self.engine = "swarm"  # the configuration's own swarm phase runs
                self.engine_reason += "; the configuration has a swarm phase"
        elif any(isinstance(p, ExactPhaseConfig) for p in config.phases):
            self.engine, self.engine_reason = "exact", "the configuration has an exact phase"
        elif any(isinstance(p, SwarmPhaseConfig) for p in config.phases):
            self.engine, self.engine_reason = "swarm", "the configuration has a swarm phase"
        if seed is not None:
            if not 0 <= seed <= MAX_SEED:
                raise ProblemError("seed", f"must be a whole number from 0 to {MAX_SEED}, given {seed}")
            config = config.model_copy(update={"random_seed": seed})
        space = problem.space
        check_budget(config, space.n_features, int(space.mutable.sum()), swarm_coordinates(space.features))
        if num_counterfactuals < 1:
            raise ProblemError("num_counterfactuals", f"must be at least 1, given {num_counterfactuals}")
        self.problem = problem
        self.config = config
        self.num_counterfactuals = num_counterfactuals
        self.calls = calls
        self.listeners: list[Listener] = []
        self._solver = Solver(config, collect_pool=num_counterfactuals > 1, answers=num_counterfactuals)

    def add_listener(self, listener: Listener) -> None:
        """Hear every new best solution (decoded), in the solving thread."""
        self.listeners.append(listener)

    def terminate_early(self) -> None:
        """Stop the running solve at its next step; the best so far comes back."""
        self._solver.terminate_early()

    def solve(self) -> CounterfactualResult:
        """Run the search and decode its answer, native thread pools limited (``model_threads``)."""
        started = time.perf_counter()  # a time limit covers everything from here on
        with NativeThreadLimit(self.config.model_threads):
            return self._solve(started)

    def _solve(self, started: float) -> CounterfactualResult:
        limit = wall_limit(self.config.termination)

        def should_stop() -> bool:  # choosing k answers stays within the solve's limits
            late = limit is not None and time.perf_counter() - started > limit
            return late or self._solver.terminate_requested

        problem = self.problem
        calculator = ScoreCalculator(problem, stop=should_stop, calls=self.calls)
        # the search's own path (a verified fast path) scores the original; only an answer, here
        # "nothing to change", is called valid on the real model's word
        original = calculator.check(problem.original_row(), reference=False)
        if original.failures[0] is not None or best_valid(original):
            original = calculator.check(problem.original_row())
        if original.failures[0] is not None:
            raise ModelFailureError(f"the model fails on the original instance: {original.failures[0]}")
        if best_valid(original):
            return self._already_met(original, time.perf_counter() - started)
        if any(isinstance(p, FeatureScanPhaseConfig) and p.split_values for p in self.config.phases):
            _find_split_values(problem)
        scorer = CalculatorScorer(calculator, original, on_give_up=self._solver.terminate_early)
        self._solver.listeners = [self._forward] if self.listeners else []
        outcome = self._solver.solve(problem.space, scorer, started, problem=problem)
        if problem.relations is not None:  # every row reported with its computed features
            outcome = dataclasses.replace(
                outcome,
                best_row=problem.relations.apply(outcome.best_row.reshape(1, -1))[0],
                answer_rows=None if outcome.answer_rows is None else problem.relations.apply(outcome.answer_rows),
                pool=None if outcome.pool is None else (problem.relations.apply(outcome.pool[0]), outcome.pool[1]),
            )
        if calculator.gave_up is not None:
            outcome = dataclasses.replace(outcome, termination_reason=calculator.gave_up)
        final = self._final_check(calculator, outcome.best_row, stopping=should_stop())
        before = (calculator.calculation_count, calculator.model_call_count)
        choosing = time.perf_counter()
        alternatives = self._alternatives(
            calculator,
            outcome.pool,
            outcome.best_row,
            final,
            original,
            should_stop=should_stop,
            chosen=outcome.answer_rows,
            chosen_by=outcome.answer_source,
        )
        spent = outcome.time_spent + (time.perf_counter() - choosing)  # the search, then choosing k answers
        calculations = outcome.score_calculation_count + calculator.calculation_count - before[0]
        model_calls = outcome.model_call_count + calculator.model_call_count - before[1]
        score = BendableScore.of(outcome.best_score)
        levels = list(score.levels)
        speed = calculations / spent if spent > 0 else 0.0
        best: Counterfactual = Counterfactual(
            proposed=problem.space.decode(outcome.best_row),
            changes=self._changes(outcome.best_row),
            predictions=self._predictions(final),
            score=str(score),
            score_levels=levels,
            valid=levels[0] == 0.0 and levels[2] == 0.0 and final.failures[0] is None,
            feasible=score.is_feasible and final.failures[0] is None,
        )
        failure = final.failures[0]
        if calculator.gave_up is not None and not best_valid(final):
            failure = f"{calculator.gave_up}; the last: {calculator.last_failure}"
        found_at = (outcome.best_step_index, outcome.best_time)
        if alternatives and is_better(np.array(alternatives[0].score_levels), outcome.best_score):
            best, failure = alternatives[0], None  # refining the pool beat the search's own best
            found_at = (outcome.step_count, spent)
        diagnosis = Diagnosis([], False, [])
        if not best.valid and not should_stop():
            diagnosis = blocking_immutables(calculator, outcome.best_row, outcome.best_score)
        return CounterfactualResult(
            original=problem.space.decode(problem.space.original),
            proposed=best.proposed,
            changes=best.changes,
            predictions=best.predictions,
            original_predictions=self._predictions(original),
            score=best.score,
            score_levels=best.score_levels,
            valid=best.valid,
            feasible=best.feasible,
            statistics=SolveStatistics(
                steps=outcome.step_count,
                score_calculation_count=calculations,
                model_call_count=model_calls,
                score_calculation_speed=speed,
                time_spent_seconds=spent,
                best_found_at_step=found_at[0],
                best_found_after_seconds=found_at[1],
                termination_reason=outcome.termination_reason,
                engine=self.engine,
                engine_reason=self.engine_reason,
                exact=outcome.exact,
                swarm=outcome.swarm,
            ),
            failure=failure,
            counterfactuals=alternatives,
            requested=self.num_counterfactuals,
            blocked_by=diagnosis.blocked_by,
            reaches=diagnosis.reaches,
            held_fixed=diagnosis.held_fixed,
        )

    @staticmethod
    def _final_check(calculator: ScoreCalculator, row: FloatMatrix, *, stopping: bool) -> Evaluation:
        """The answer re-checked through the model on its own. A solve that is stopping (its time
        is up, it was cancelled, the model keeps failing) keeps the model's prediction of the row
        from the batch it was found in, so it ends within one model call of its limit; only a row
        the calculator did not keep costs one more call."""
        kept = calculator.evaluation_of(row) if stopping or calculator.gave_up is not None else None
        return kept if kept is not None else calculator.check(row)

    def _already_met(self, original: Evaluation, spent: float) -> CounterfactualResult:
        """The instance meets every goal as it is: nothing to change, no search."""
        space = self.problem.space
        score = BendableScore.of(original.scores[0])
        values = space.decode(space.original)
        answer = Counterfactual(
            proposed=values,
            changes=[],
            predictions=self._predictions(original),
            score=str(score),
            score_levels=list(score.levels),
            valid=True,
            feasible=score.is_feasible,
        )
        return CounterfactualResult(
            original=values,
            proposed=values,
            changes=[],
            predictions=answer.predictions,
            original_predictions=answer.predictions,
            score=answer.score,
            score_levels=answer.score_levels,
            valid=True,
            feasible=answer.feasible,
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
            requested=self.num_counterfactuals,
            already_met=True,
        )

    def _alternatives(
        self,
        calculator: ScoreCalculator,
        pool: tuple[FloatMatrix, FloatMatrix] | None,
        best: FloatMatrix,
        final: Evaluation,
        original: Evaluation,
        *,
        should_stop: Callable[[], bool],
        chosen: FloatMatrix | None = None,
        chosen_by: str = "",
    ) -> list[Counterfactual]:
        """The best and up to k - 1 diverse others, re-scored in one call (none for k = 1); with
        ``chosen`` (an engine's own set of answers), those: the exact engine's set as it is, the
        swarm's picks per cluster with the best answer in place of the swarm's own best and the
        others refined (:meth:`_swarm_answers`), topped up as local search chooses when refined
        picks fell onto one another."""
        if not (final.scores[0, :3] >= 0.0).all():
            return []  # the best is not feasible: no answer
        evaluation: Evaluation | None
        if chosen is not None and chosen_by == "swarm" and self.num_counterfactuals > 1:
            evaluation = None
            rows = self._swarm_answers(calculator, chosen, best, should_stop)
            if rows.shape[0] < self.num_counterfactuals and pool is not None and not should_stop():
                # refined picks that fell onto one another: the rest as local search would choose them
                more = self._diverse_refined(calculator, pool, (best, final.scores[0]), original, should_stop)
                both = np.vstack([rows, more])
                _, first = np.unique(both, axis=0, return_index=True)
                rows = both[np.sort(first)][: self.num_counterfactuals]
        elif chosen is not None and chosen.shape[0] > 1:  # the exact engine's set, solved at once
            evaluation = None
            rows = chosen
        elif self.num_counterfactuals == 1 or pool is None:
            rows = best.reshape(1, -1)
            evaluation = final  # already scored: no second model call
        else:
            evaluation = None
            rows = self._diverse_refined(calculator, pool, (best, final.scores[0]), original, should_stop)
        if rows.shape[0] == 0:
            return []
        if evaluation is None:
            evaluation = calculator.check(rows)  # every answer checked, even when the time is up
        out = []
        for i in range(rows.shape[0]):
            score = evaluation.score(i)
            levels = list(score.levels)
            fine = evaluation.failures[i] is None
            single = Evaluation(
                evaluation.scores[i : i + 1], {k: v[i : i + 1] for k, v in evaluation.predictions.items()}
            )
            out.append(
                Counterfactual(
                    proposed=self.problem.space.decode(rows[i]),
                    changes=self._changes(rows[i]),
                    predictions=self._predictions(single),
                    score=str(score),
                    score_levels=levels,
                    valid=levels[0] == 0.0 and levels[2] == 0.0 and fine,
                    feasible=score.is_feasible and fine,
                )
            )
        # best first, as documented: chosen by diversity, listed by score; on a tie the search's
        # own best leads (it is the result's answer unless a refined row beats it)
        is_best = [bool((rows[i] == best).all()) for i in range(rows.shape[0])]
        order = sorted(range(len(out)), key=lambda i: (tuple(out[i].score_levels), is_best[i]), reverse=True)
        return [out[i] for i in order]

    def _swarm_answers(
        self, calculator: ScoreCalculator, picks: FloatMatrix, best: FloatMatrix, should_stop: Callable[[], bool]
    ) -> FloatMatrix:
        """The swarm's picks (one per k-means cluster, best first) as answers: the solve's best in
        place of the pick nearest to it (its cluster's, which later phases polished or moved on
        from), the others without their needless changes and shaved to the boundary, as the best
        was; each row once."""
        space = self.problem.space
        gap = gower(picks, best, space.nominal, space.domain_width)
        others = np.delete(picks, int(np.argmin(gap)), axis=0)
        others = others[~(others == best).all(axis=1)]
        if others.shape[0] and not should_stop():
            scorer = CalculatorScorer(calculator)
            others, _ = self._refine_others(
                others,
                scorer.score(others.copy()),
                best,
                scorer,
                grid_size=REFINE_GRID,
                max_rounds=REFINE_ROUNDS,
                should_stop=should_stop,
            )
        rows = np.vstack([best.reshape(1, -1), others])
        _, first = np.unique(rows, axis=0, return_index=True)
        return np.asarray(rows[np.sort(first)][: self.num_counterfactuals], dtype=np.float64)

    def _diverse_refined(
        self,
        calculator: ScoreCalculator,
        pool: tuple[FloatMatrix, FloatMatrix],
        best_and_score: tuple[FloatMatrix, FloatMatrix],
        original: Evaluation,
        should_stop: Callable[[], bool],
    ) -> FloatMatrix:
        """k diverse answers, each without changes it does not need.

        0. Other routes added to the pool (:mod:`counterplan.solver.local.routes`): greedy chains that avoid each
           feature the best answer changes, and one that avoids all of them; then, twice,
           chains that also avoid the features of each route the last round found.
        1. A few rows per distinct set of changed features (the best-scored), at most
           ``ROUTES_MAX``, best first, plus those of the other routes.
        2. Their needless changes dropped: rounds of batched single reverts
           (:func:`counterplan.solver.core.refine.refine_rows` without a grid), so a route that only adds changes
           to a shorter one collapses onto it; then a few rows per change set again.
        3. A diverse shortlist of ``SHORTLIST_FACTOR`` times k of those, refined to the boundary
           (reverts and grid moves).
        4. Among the refined rows and the unrefined routes, rows that another one dominates
           (the same changes, in the same directions, none of them smaller) are dropped, and
           the final diverse choice of k is made.

        The best row keeps its place and value: the boundary-polish phase already refined it,
        and it is the result's ``proposed`` unless a refined row scores better. When the solve's
        time is up or it was cancelled (``should_stop``), the steps that cost model calls stop:
        the answers then come from what was found so far.
        """
        space = self.problem.space
        k = self.num_counterfactuals
        scorer = CalculatorScorer(calculator)
        best, best_score = best_and_score[0], best_and_score[1].reshape(1, -1)

        def choose(rows: FloatMatrix, scores: FloatMatrix, k: int) -> list[int]:
            return select_diverse(
                rows, scores, original=space.original, scales=self.problem.scales, nominal=~space.graded, k=k
            )

        def with_best_first(rows: FloatMatrix, scores: FloatMatrix) -> tuple[FloatMatrix, FloatMatrix]:
            others = ~(rows == best).all(axis=1)
            return np.vstack([best.reshape(1, -1), rows[others]]), np.vstack([best_score, scores[others]])

        used = np.flatnonzero((best != space.original) & space.mutable)
        avoid = [np.isin(np.arange(space.n_features), [j]) for j in used[:AVOID_MAX]]
        if used.size > 1:
            avoid.append(np.isin(np.arange(space.n_features), used))
        extra = (pool[0][:0], pool[1][:0])
        if avoid and not should_stop():
            extra = successive_routes(
                space, scorer, original.scores[0], avoid, rounds=ROUTE_ROUNDS, width=AVOID_MAX, should_stop=should_stop
            )
        found = best_per_change_set(pool[0], pool[1], space.original, ROUTES_MAX)
        others = best_per_change_set(extra[0], extra[1], space.original, ROUTES_MAX)
        rows, scores = self._refine_others(
            np.vstack([pool[0][found], extra[0][others]]),
            np.vstack([pool[1][found], extra[1][others]]),
            best,
            scorer,
            grid_size=1,
            max_rounds=space.n_features,
            should_stop=should_stop,
        )
        routes = best_per_change_set(rows, scores, space.original, ROUTES_MAX)
        rows, scores = with_best_first(rows[routes], scores[routes])
        shortlist = choose(rows, scores, min(SHORTLIST_FACTOR * k, SHORTLIST_MAX))
        refined, refined_scores = self._refine_others(
            rows[shortlist],
            scores[shortlist],
            best,
            scorer,
            grid_size=REFINE_GRID,
            max_rounds=REFINE_ROUNDS,
            should_stop=should_stop,
        )
        rows, scores = with_best_first(np.vstack([refined, rows]), np.vstack([refined_scores, scores]))
        keep = undominated(rows, space.original, ~space.graded, protect=0)
        rows, scores = rows[keep], scores[keep]
        chosen = choose(rows, scores, k)
        return np.asarray(rows[chosen], dtype=np.float64)

    def _refine_others(
        self,
        rows: FloatMatrix,
        scores: FloatMatrix,
        best: FloatMatrix,
        scorer: CalculatorScorer,
        *,
        grid_size: int,
        max_rounds: int,
        should_stop: Callable[[], bool],
    ) -> tuple[FloatMatrix, FloatMatrix]:
        """``rows`` refined, except the best row itself."""
        rows, scores = rows.copy(), scores.copy()
        others = ~(rows == best).all(axis=1)
        if others.any():
            rows[others], scores[others] = refine_rows(
                rows[others],
                scores[others],
                self.problem.space,
                scorer,
                grid_size=grid_size,
                max_rounds=max_rounds,
                should_stop=should_stop,
            )
        return rows, scores

    def _forward(self, event: BestSolutionChanged) -> None:
        score = BendableScore.of(event.score)
        decoded = BestSolutionEvent(
            score=str(score),
            score_levels=list(score.levels),
            feasible=score.is_feasible,
            values=self.problem.space.decode(
                event.row
                if self.problem.relations is None
                else self.problem.relations.apply(event.row.reshape(1, -1))[0]
            ),
            time_spent_seconds=event.time_spent,
            step_index=event.step_index,
            score_calculation_count=event.score_calculation_count,
        )
        for listener in self.listeners:
            listener(decoded)

    def _changes(self, row: FloatMatrix) -> list[Change]:
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

    def _predictions(self, evaluation: Evaluation) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for spec in self.problem.model.outputs:
            values = evaluation.predictions[spec.name][0]
            if spec.classes is not None:
                out[spec.name] = {str(label): float(p) for label, p in zip(spec.classes, values, strict=True)}
            else:
                out[spec.name] = float(values)
        return out


def _find_split_values(problem: CounterfactualProblem) -> None:
    """Fill in the problem's split values once (the feature scan tries them)."""
    space = problem.space
    if getattr(space, "_splits_read", False):
        return
    from counterplan.planning.structure.splits import split_points  # noqa: PLC0415 - reads tree models only

    space.split_values = split_points(problem)
    space._splits_read = True  # type: ignore[attr-defined]


def explain(
    problem: CounterfactualProblem,
    config: SolverConfig | None = None,
    *,
    seed: int | None = None,
    listeners: Iterable[Listener] = (),
    num_counterfactuals: int = 1,
    engine: EngineChoice | None = None,
) -> CounterfactualResult:
    """Find the best counterfactual of ``problem`` (or several); see :class:`CounterfactualSolver`.

    ``engine``: ``"local"`` (local search), ``"exact"`` (the exact engine: a proven optimum) or
    ``"auto"`` (exact when the model can be encoded); None runs ``config`` as it is."""
    solver = CounterfactualSolver(problem, config, seed, num_counterfactuals, engine)
    for listener in listeners:
        solver.add_listener(listener)
    return solver.solve()
