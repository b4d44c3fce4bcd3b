"""The local-search phase: walkers step in lockstep, sharing one batched score call per step.

Each step every walker samples its moves, the union is scored in one call, then each walker's
acceptor and the forager pick that walker's step. The solve's best is the best row scored so
far, by any walker. Walkers start from the best solution when the phase starts.
"""

from __future__ import annotations

import numpy as np

from solver.core.config import LocalSearchPhaseConfig
from solver.core.events import BestSolutionChanged, EngineListener
from solver.core.scope import Progress, SolverScope, Walker
from solver.core.termination import Termination
from solver.local.acceptors import StepContext
from solver.local.factory import build_acceptor
from solver.local.forager import Forager
from solver.local.moves import MoveSelector


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
        walkers = self._walkers(scope)
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
            if scope.offer(X, scores, [solver, phase]):
                announce(scope, listeners)
        for acceptor in acceptors:
            acceptor.phase_ended()

    def _walkers(self, scope: SolverScope) -> list[Walker]:
        """Walkers start from a construction phase's starting points, else from the best."""
        starts = scope.starts or [scope.best_row]
        scope.starts = []
        walkers = []
        for i in range(self.config.walkers):
            row = starts[i % len(starts)].copy()
            score = scope.best_score if row is scope.best_row else None
            walkers.append(Walker(i, row, score.copy() if score is not None else np.empty(0)))
        unscored = [w for w in walkers if w.current_score.size == 0]
        if unscored:
            scores = scope.scorer.score(np.vstack([w.current for w in unscored]))
            for walker, score in zip(unscored, scores, strict=True):
                walker.current_score = score.copy()
        return walkers


def announce(scope: SolverScope, listeners: list[EngineListener]) -> None:
    """Tell every listener about the scope's new best solution."""
    event = BestSolutionChanged(
        scope.best_row.copy(),
        scope.best_score.copy(),
        scope.time_spent(),
        scope.progress.step_count,
        scope.scorer.calculation_count,
    )
    for listener in listeners:
        listener(event)
