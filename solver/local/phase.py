"""The local-search phase: walkers step in lockstep, sharing one batched score call per step.

Each step samples every walker's moves at once (:meth:`MoveSelector.sample_many`), scores
them in one call, then the acceptors (:meth:`Acceptor.accept_lockstep`) and the forager
(:meth:`Forager.pick_lockstep`) pick every walker's step in one vectorised pass each. The
walkers' solutions and scores live in two matrices, one row per walker (each
:class:`~counterplan.solver.core.scope.Walker` holds views of its rows), so a step is the same few dozen
numpy operations whatever the number of walkers. The solve's best is the best row scored so
far, by any walker. Walkers start from the best solution when the phase starts.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from counterplan.planning.score import PRUNED, is_feasible
from counterplan.solver.core.phase import PhaseBase, PhaseScope
from counterplan.solver.core.scope import SolverScope, Walker
from counterplan.solver.core.trade import pricer_for
from counterplan.solver.local.acceptors import Acceptor, LockstepContext
from counterplan.solver.local.config import LocalSearchPhaseConfig
from counterplan.solver.local.forager import Forager
from counterplan.solver.local.moves import MoveBatch, MoveSelector


class LocalSearchPhase(PhaseBase[LocalSearchPhaseConfig]):
    """Runs one local-search phase of a solve.

    ``new_acceptor(mutable_count)`` makes one walker's acceptor (the factory's
    :func:`~counterplan.solver.local.factory.build_acceptor` for the config's acceptor).
    """

    def __init__(self, config: LocalSearchPhaseConfig, new_acceptor: Callable[[int], Acceptor]) -> None:
        super().__init__(config)
        self.new_acceptor = new_acceptor

    def solve(self, phase_scope: PhaseScope) -> None:
        """Step until the phase's or the solver's termination says stop."""
        config = self.config
        scope = phase_scope.solver_scope
        space = scope.space
        mutable_count = int(np.count_nonzero(space.mutable))
        pricer = pricer_for(scope.problem)
        unit = None if pricer is None else pricer.unit(np.arange(space.n_features))
        selector = MoveSelector(config.move_selector, space, unit)
        forager = Forager(config.forager)
        walkers, currents, current_scores = self._walkers(scope)
        acceptors = [self.new_acceptor(mutable_count) for _ in walkers]
        lockstep = type(acceptors[0])
        for walker, acceptor in zip(walkers, acceptors, strict=True):
            acceptor.phase_started(walker)
        phase_scope.start()  # the phase's counters start once its walkers stand
        count = config.move_selector.moves_per_step
        every = np.arange(len(walkers) + 1)
        while True:
            verdict = phase_scope.verdict()
            if verdict.done:
                phase_scope.end(verdict)
                break
            gradient = verdict.gradient
            moves = _sample(selector, currents, count, scope.rng)
            if len(moves) == 0:
                scope.termination_reason = "no moves: every feature is constrained"
                break
            X = moves.candidates
            owner = moves.owner
            assert owner is not None
            # once the best is feasible, a move that cannot beat it whatever the model says costs no
            # model call, and no walker steps onto it (unless every feasible row is wanted: a pool)
            beat = scope.best_score if scope.pool is None and is_feasible(scope.best_score) else None
            scores = scope.scorer.score(X, beat)  # the scorer may set computed features in X: walkers keep them
            best_before = scope.best_score.copy()
            bounds = np.searchsorted(owner, every)
            context = LockstepContext(scores, moves, walkers, current_scores, best_before, gradient, scope.rng, bounds)
            accepted = lockstep.accept_lockstep(acceptors, context)
            if beat is not None:
                accepted &= scores[:, 0] != PRUNED
            picks = forager.pick_lockstep(scores, accepted, owner, current_scores, best_before)
            previous = currents.copy()
            took = picks >= 0
            chosen = picks[took]
            currents[took] = X[chosen]  # in place: each walker's row views see it
            current_scores[took] = scores[chosen]
            stepped = bounds[1:] > bounds[:-1]  # a walker whose moves were all no-ops did not step
            lockstep.step_ended_lockstep(acceptors, walkers, stepped, moves.select(chosen), previous)
            for i in np.flatnonzero(stepped).tolist():
                walkers[i].step_count += 1
            if scope.offer(X, scores, phase_scope.counters):
                scope.announce()
        for acceptor in acceptors:
            acceptor.phase_ended()

    def _walkers(self, scope: SolverScope) -> tuple[list[Walker], np.ndarray, np.ndarray]:
        """Walkers start from a construction phase's starting points, else from the best.

        Returns the walkers and the matrices of their solutions and scores; each walker's
        ``current`` and ``current_score`` are views of its rows.
        """
        starts = scope.starts or [scope.best_row]
        scope.starts = []
        count = self.config.walkers
        picked = [starts[i % len(starts)] for i in range(count)]
        currents = np.vstack(picked)
        current_scores = np.empty((count, scope.best_score.size))
        known = np.array([row is scope.best_row for row in picked])
        current_scores[known] = scope.best_score
        if not known.all():
            unscored = currents[~known]
            current_scores[~known] = scope.scorer.score(unscored)
            currents[~known] = unscored  # as scored (the scorer may set computed features)
        walkers = [Walker(i, currents[i], current_scores[i]) for i in range(count)]
        return walkers, currents, current_scores


def _sample(selector: MoveSelector, currents: np.ndarray, count: int, rng: np.random.Generator) -> MoveBatch:
    """Every walker's moves, but one set for walkers standing on the same row: the first of them
    samples, the others rest this step (a twin would walk the chain its twin walks, and score
    rows of the same neighbourhood); once the first has moved on, they sample again."""
    bits = np.ascontiguousarray(currents).view(np.dtype((np.void, currents.dtype.itemsize * currents.shape[1])))
    _, first = np.unique(bits.ravel(), return_index=True)
    if first.size == currents.shape[0]:
        return selector.sample_many(currents, count, rng)
    first.sort()
    moves = selector.sample_many(currents[first], count, rng)
    assert moves.owner is not None
    moves.owner = first[moves.owner]
    return moves
