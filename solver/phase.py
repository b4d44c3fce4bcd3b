"""The local-search phase: walkers step in lockstep, sharing one batched score call per step.

Each step every walker samples its moves, the union is scored in one call, then each walker's
acceptor and the forager pick that walker's step. The solve's best is the best row scored so
far, by any walker. Walkers start from the best solution when the phase starts.
"""

from __future__ import annotations

import time

import numpy as np

from solver.acceptors import StepContext
from solver.config import LocalSearchPhaseConfig
from solver.events import BestSolutionChanged, EngineListener
from solver.factory import build_acceptor
from solver.forager import Forager
from solver.moves import MoveSelector
from solver.scope import Progress, SolverScope, Walker
from solver.scores import best_row, is_better
from solver.termination import Termination


class LocalSearchPhase:
    """Runs one local-search phase of a solve."""

    def __init__(self, config: LocalSearchPhaseConfig) -> None:
        self.config = config

    def solve(self, scope: SolverScope, solver_termination: Termination, listeners: list[EngineListener]) -> None:
        """Step until the phase's or the solver's termination says stop."""
        config = self.config
        space = scope.space
        mutable_count = int(np.count_nonzero(space.mutable))
        selector = MoveSelector(config.move_selector, space)
        forager = Forager(config.forager)
        walkers = [Walker(i, scope.best_row.copy(), scope.best_score.copy()) for i in range(config.walkers)]
        acceptors = [build_acceptor(config.acceptor, mutable_count) for _ in walkers]
        for walker, acceptor in zip(walkers, acceptors, strict=True):
            acceptor.phase_started(walker)
        phase_termination = Termination(config.termination) if config.termination is not None else None
        phase = Progress.starting(scope.best_score)
        solver = scope.progress
        while True:
            done, gradient, reason = solver_termination.evaluate(solver)
            if phase_termination is not None and not done:
                phase_done, phase_gradient, phase_reason = phase_termination.evaluate(phase)
                gradient = max(gradient, phase_gradient)
                if phase_done:
                    scope.termination_reason = f"phase {scope.phase_index}: {phase_reason}"
                    break
            if done:
                scope.termination_reason = reason
                break
            if scope.terminate_flag.is_set():
                scope.termination_reason = "terminated early"
                break
            batches = [selector.sample(w.current, config.move_selector.moves_per_step, scope.rng) for w in walkers]
            X = np.vstack([b.candidates for b in batches])
            if X.shape[0] == 0:
                scope.termination_reason = "no moves: every feature is constrained"
                break
            scores = scope.scorer.score(X)
            best_before = scope.best_score.copy()
            offset = 0
            for walker, acceptor, batch in zip(walkers, acceptors, batches, strict=True):
                own = scores[offset : offset + len(batch)]
                offset += len(batch)
                if len(batch) == 0:
                    continue
                context = StepContext(own, batch, walker, best_before, gradient, scope.rng)
                pick = forager.pick(own, acceptor.is_accepted(context), walker.current_score, best_before)
                previous = walker.current.copy()
                taken = None
                if pick is not None:
                    walker.current = batch.candidates[pick].copy()
                    walker.current_score = own[pick].copy()
                    taken = batch.select(np.arange(len(batch)) == pick)
                acceptor.step_ended(walker, taken, previous)
                walker.step_count += 1
            for counters in (solver, phase):
                counters.step_count += 1
                counters.score_calculation_count += X.shape[0]
                counters.move_count += X.shape[0]
            top = best_row(scores)
            if is_better(scores[top], best_before):
                scope.best_row = X[top].copy()
                scope.best_score = scores[top].copy()
                now = time.perf_counter()
                for counters in (solver, phase):
                    counters.best_score = scope.best_score.copy()
                    counters.best_step_index = counters.step_count
                    counters.last_improvement_time = now
                event = BestSolutionChanged(
                    scope.best_row.copy(),
                    scope.best_score.copy(),
                    scope.time_spent(),
                    solver.step_count,
                    scope.scorer.calculation_count,
                )
                for listener in listeners:
                    listener(event)
        for acceptor in acceptors:
            acceptor.phase_ended()
