"""Solving counterfactual problems: the thin bridge from the solver to the planning domain.

``explain(problem, config)`` scores the original (an instance that already meets its goals needs
no search), runs the :class:`~counterplan.solver.core.solver.Solver` with the engine
:func:`~counterplan.solver.engines.plan_engine` chose and the answers phase last
(:mod:`counterplan.solver.answers`), and has the result built in one place
(:class:`~counterplan.solver.result_builder.ResultBuilder`). Listeners hear decoded
:class:`~counterplan.solver.result.BestSolutionEvent` s. Nothing here changes the problem.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable

from counterplan.planning.calculator import Evaluation, ModelCalls, ScoreCalculator
from counterplan.planning.errors import ModelFailureError, ProblemError
from counterplan.planning.problem import CounterfactualProblem
from counterplan.planning.score import BendableScore
from counterplan.planning.threads import NativeThreadLimit
from counterplan.solver.answers.phase import AnswersPhase
from counterplan.solver.core.budget import check_budget, one_hot_width
from counterplan.solver.core.config import SolverConfig, check_seed
from counterplan.solver.core.events import BestSolutionChanged
from counterplan.solver.core.protocol import FloatMatrix
from counterplan.solver.core.scope import no_time_for_a_call
from counterplan.solver.core.solver import Solver
from counterplan.solver.core.termination import wall_limit
from counterplan.solver.diagnosis import Diagnosis, blocking_immutables
from counterplan.solver.engines import EngineChoice, plan_engine
from counterplan.solver.result import BestSolutionEvent, CounterfactualResult
from counterplan.solver.result_builder import ResultBuilder, Spent
from counterplan.solver.scoring import CalculatorScorer

Listener = Callable[[BestSolutionEvent], None]


def best_valid(evaluation: Evaluation) -> bool:
    """The first row of ``evaluation`` meets every goal and its prediction did not fail."""
    return bool(evaluation.scores[0, 0] == 0.0 and evaluation.scores[0, 2] == 0.0 and evaluation.failures[0] is None)


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
        How many distinct valid answers to return (see :mod:`counterplan.solver.answers`).
    engine:
        ``"local"``, ``"exact"``, ``"swarm"`` or ``"auto"`` (see :func:`counterplan.solver.engines.choose`);
        None runs ``config`` as it is.
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
        plan = plan_engine(problem, config or SolverConfig(), engine)
        config = plan.config
        if seed is not None:
            check_seed(seed)  # model_copy does not validate: 1.5 or True became the config's seed
            config = config.model_copy(update={"random_seed": int(seed)})
        space = problem.space
        check_budget(config, space.n_features, int(space.mutable.sum()), one_hot_width(space.features))
        if num_counterfactuals < 1:
            raise ProblemError("num_counterfactuals", f"must be at least 1, given {num_counterfactuals}")
        self.problem = problem
        self.config = config
        self.engine, self.engine_reason = plan.name, plan.reason
        self.num_counterfactuals = num_counterfactuals
        self.calls = calls
        self.listeners: list[Listener] = []
        self._result = ResultBuilder(problem, plan, num_counterfactuals)
        self._solver = Solver(config, collect_pool=num_counterfactuals > 1, answers=num_counterfactuals)
        self._abandoned = False
        self._calculator: ScoreCalculator | None = None
        """The running solve's score calculator (set as the solve starts)."""
        self._searching: tuple[Evaluation, float] | None = None
        """Once the search runs: the original's evaluation and when the solve started."""
        self._found_at = (0, 0.0)
        """The step and the seconds of the last best solution heard."""

    def add_listener(self, listener: Listener) -> None:
        """Hear every new best solution (decoded), in the solving thread."""
        self.listeners.append(listener)

    def terminate_early(self) -> None:
        """Stop the running solve at its next step; the best so far comes back."""
        self._solver.terminate_early()

    def abandon(self) -> None:
        """Stop now and make no model call more, from any thread: the caller answers with
        :meth:`so_far` and will not read this solve's result (a model call in flight runs to its
        end; then the solve unwinds with :class:`~counterplan.planning.calculator.SolveAbandoned`)."""
        self._abandoned = True
        self._solver.terminate_early()
        if self._calculator is not None:  # else the solve sees the flag as it sets its calculator
            self._calculator.abandon()

    def so_far(self, reason: str) -> CounterfactualResult | None:
        """The best answer scored so far, read from any thread without a model call (None before
        the original was scored): the best row the score calculator kept, with the prediction it
        was scored with (valid only if it met every goal then); ``reason`` is its termination
        reason. For a caller that cannot wait for the solve's own end (see :meth:`abandon`)."""
        calculator, searching = self._calculator, self._searching
        best = calculator.best if calculator is not None else None
        if calculator is None or searching is None or best is None:
            return None
        original, started = searching
        spent = Spent(calculator.calculation_count, calculator.model_call_count, time.perf_counter() - started)
        return self._result.so_far(best, original=original, spent=spent, found_at=self._found_at, reason=reason)

    def solve(self) -> CounterfactualResult:
        """Run the search and decode its answer, native thread pools limited (``model_threads``)."""
        started = time.perf_counter()  # a time limit covers everything from here on
        with NativeThreadLimit(self.config.model_threads):
            return self._solve(started)

    def _solve(self, started: float) -> CounterfactualResult:
        limit = wall_limit(self.config.termination)

        def should_stop() -> bool:  # no model call that would end after the solve's limits
            late = no_time_for_a_call(time.perf_counter() - started, limit, calculator.call_seconds)
            return late or self._solver.terminate_requested

        problem = self.problem
        calculator = ScoreCalculator(problem, stop=should_stop, calls=self.calls)
        self._calculator = calculator
        if self._abandoned:  # abandoned while it started: no model call at all
            calculator.abandon()
        # the search's own path (a verified fast path) scores the original; only an answer, here
        # "nothing to change", is called valid on the real model's word
        original = calculator.check(problem.original_row(), reference=False)
        if original.failures[0] is not None or best_valid(original):
            original = calculator.check(problem.original_row())
        if original.failures[0] is not None:
            raise ModelFailureError.on_original(original.failures[0], problem.space.missing_names)
        if best_valid(original):
            return self._result.already_met(original, time.perf_counter() - started)
        self._searching = (original, started)
        answers = AnswersPhase(
            self.num_counterfactuals, CalculatorScorer(calculator), problem.scales, problem.space.domain_width
        )
        self._solver.closing = [answers]
        self._solver.listeners = [self._forward] if self.listeners else []
        scorer = CalculatorScorer(calculator, original, on_give_up=self._solver.terminate_early)
        outcome = self._solver.solve(problem.space, scorer, started, problem=problem)
        chosen = answers.chosen
        assert chosen is not None and isinstance(chosen.best_check, Evaluation)  # the answers phase always runs
        failure = chosen.best_check.failures[0]
        if calculator.gave_up is not None:  # the model kept failing: that is why the search ended
            outcome = dataclasses.replace(outcome, termination_reason=calculator.gave_up)
            if not best_valid(chosen.best_check):
                failure = f"{calculator.gave_up}; the last: {calculator.last_failure}"
        spent = Spent(
            calculations=calculator.calculation_count - chosen.best_check_cost[0],
            model_calls=calculator.model_call_count - chosen.best_check_cost[1],
            seconds=time.perf_counter() - started,
        )
        return self._result.solved(
            outcome,
            chosen,
            original=original,
            spent=spent,
            failure=failure,
            diagnose=self._diagnose(calculator, should_stop),
        )

    @staticmethod
    def _diagnose(calculator: ScoreCalculator, should_stop: Callable[[], bool]) -> Callable[..., Diagnosis | None]:
        def diagnose(row: FloatMatrix, score: FloatMatrix) -> Diagnosis | None:
            return None if should_stop() else blocking_immutables(calculator, row, score)

        return diagnose

    def _forward(self, event: BestSolutionChanged) -> None:
        self._found_at = (event.step_index, event.time_spent)
        score = BendableScore.of(event.score)
        problem = self.problem
        row = event.row if problem.relations is None else problem.relations.apply(event.row.reshape(1, -1))[0]
        decoded = BestSolutionEvent(
            score=str(score),
            score_levels=list(score.levels),
            feasible=score.is_feasible,
            values=problem.space.decode(row),
            time_spent_seconds=event.time_spent,
            step_index=event.step_index,
            score_calculation_count=event.score_calculation_count,
        )
        for listener in self.listeners:
            listener(decoded)


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

    ``engine``: ``"local"`` (local search), ``"exact"`` (the exact engine: a proven optimum),
    ``"swarm"`` (the particle swarm) or ``"auto"`` (chosen by the model and the problem); None runs
    ``config`` as it is."""
    solver = CounterfactualSolver(problem, config, seed, num_counterfactuals, engine)
    for listener in listeners:
        solver.add_listener(listener)
    return solver.solve()
