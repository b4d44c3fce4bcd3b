"""Acceptors: which sampled moves a walker may take, decided for a whole batch at once.

Every acceptor follows one lifecycle (``phase_started``, ``step_ended``, ``phase_ended``,
no-ops by default) plus one decision, ``is_accepted``, which returns a boolean mask over the
batch. One acceptor instance serves one walker, so its state (tabu lists, late-acceptance
history, water level) is that walker's own. Parameters and defaults follow OptaPlanner.

Walkers step in lockstep, so the phase asks all of them at once: the class methods
:meth:`Acceptor.accept_lockstep` and :meth:`Acceptor.step_ended_lockstep` take every walker's
acceptor and the whole step's batch. By default they ask each acceptor in turn (any acceptor
works); the built-in ones override them with one vectorised pass over every walker's moves,
which gives the same masks as asking each one but costs a few numpy operations per step
instead of a few per walker. A subclass that redefines ``is_accepted`` (or ``step_ended``)
without its lockstep form is asked walker by walker again (``__init_subclass__``), so a
custom rule is never bypassed.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import structlog

from counterplan.planning.score import BendableScore, better, compare_to, not_worse
from counterplan.solver.core.protocol import BoolArray, FloatMatrix
from counterplan.solver.core.scope import Walker
from counterplan.solver.local.config import (
    GreatDelugeAcceptorConfig,
    LateAcceptanceAcceptorConfig,
    SimulatedAnnealingAcceptorConfig,
    StepCountingHillClimbingAcceptorConfig,
    TabuSearchAcceptorConfig,
)
from counterplan.solver.local.moves import MoveBatch

log = structlog.get_logger(__name__)


@dataclass
class StepContext:
    """What an acceptor may look at when deciding: scores, the best so far, progress."""

    scores: FloatMatrix
    moves: MoveBatch
    walker: Walker
    best_score: FloatMatrix
    time_gradient: float
    rng: np.random.Generator


@dataclass
class LockstepContext:
    """What the acceptors of walkers stepping in lockstep look at: every walker's moves at once.

    ``moves.owner`` says whose each move is; rows are grouped by walker, in walker order, and
    ``bounds[i] : bounds[i + 1]`` are walker ``i``'s rows.
    """

    scores: FloatMatrix
    moves: MoveBatch
    walkers: Sequence[Walker]
    current_scores: FloatMatrix
    """Row ``i``: walker ``i``'s current score."""
    best_score: FloatMatrix
    time_gradient: float
    rng: np.random.Generator
    bounds: np.ndarray

    @property
    def owner(self) -> np.ndarray:
        """The walker of each move."""
        assert self.moves.owner is not None
        return self.moves.owner

    def own(self, i: int) -> slice:
        """Walker ``i``'s rows of the batch."""
        return slice(int(self.bounds[i]), int(self.bounds[i + 1]))

    def step_context(self, i: int) -> StepContext:
        """Walker ``i``'s own view, as :meth:`Acceptor.is_accepted` takes it."""
        rows = self.own(i)
        return StepContext(
            self.scores[rows],
            self.moves.select(rows),
            self.walkers[i],
            self.best_score,
            self.time_gradient,
            self.rng,
        )


class Acceptor:
    """Base acceptor: lifecycle no-ops; subclasses decide with :meth:`is_accepted`."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A subclass that redefines a per-walker method but not its lockstep form inherits the
        base's lockstep form, which asks each walker's acceptor, so its own rule holds."""
        super().__init_subclass__(**kwargs)
        for single, lockstep in (("is_accepted", "accept_lockstep"), ("step_ended", "step_ended_lockstep")):
            if single in vars(cls) and lockstep not in vars(cls):
                setattr(cls, lockstep, vars(Acceptor)[lockstep])

    @classmethod
    def accept_lockstep(cls, acceptors: Sequence[Acceptor], context: LockstepContext) -> BoolArray:
        """The accepted mask over every walker's moves; ``acceptors[i]`` is walker ``i``'s.

        This form asks each walker's acceptor about its own moves; vectorised overrides must
        give the same mask.
        """
        accepted = np.zeros(len(context.moves), dtype=bool)
        for i, acceptor in enumerate(acceptors):
            rows = context.own(i)
            if rows.stop > rows.start:
                accepted[rows] = acceptor.is_accepted(context.step_context(i))
        return accepted

    @classmethod
    def step_ended_lockstep(
        cls,
        acceptors: Sequence[Acceptor],
        walkers: Sequence[Walker],
        stepped: BoolArray,
        taken: MoveBatch,
        previous: FloatMatrix,
    ) -> None:
        """Every walker that stepped (``stepped``: it had moves) ends its step.

        ``taken`` holds the move each walker took, ``taken.owner`` whose it is (a walker that
        took none is not in it); ``previous[i]`` is walker ``i``'s solution before the step.
        """
        if all(type(a).step_ended is Acceptor.step_ended for a in acceptors):
            return  # nothing to remember: skip building each walker's view
        assert taken.owner is not None
        row_of = np.full(len(walkers), -1, dtype=np.intp)
        row_of[taken.owner] = np.arange(len(taken))
        for i in np.flatnonzero(stepped).tolist():
            row = int(row_of[i])
            acceptors[i].step_ended(walkers[i], taken.select(slice(row, row + 1)) if row >= 0 else None, previous[i])

    def phase_started(self, walker: Walker) -> None:
        """Create per-phase state."""

    def is_accepted(self, context: StepContext) -> BoolArray:
        """Mask of acceptable moves in ``context.moves``."""
        raise NotImplementedError

    def step_ended(self, walker: Walker, taken: MoveBatch | None, previous: FloatMatrix) -> None:
        """Update state after the walker's step (``taken`` is the one move taken, or None)."""

    def phase_ended(self) -> None:
        """Drop per-phase state."""


class HillClimbingAcceptor(Acceptor):
    """Accept moves not worse than the walker's current score."""

    def is_accepted(self, context: StepContext) -> BoolArray:
        """Not worse than the current step score."""
        return not_worse(context.scores, context.walker.current_score)

    @classmethod
    def accept_lockstep(cls, acceptors: Sequence[Acceptor], context: LockstepContext) -> BoolArray:
        """Each move against its own walker's current score, all at once."""
        return not_worse(context.scores, context.current_scores[context.owner])


class TabuSearchAcceptor(Acceptor):
    """Entity, value and move tabu, with aspiration.

    A move is tabu when it touches a feature changed in the last ``entity_tabu_size`` steps,
    sets a (feature, value) pair assigned in the last ``value_tabu_size`` steps, or repeats
    or undoes one of the last ``move_tabu_size`` moves. Non-tabu moves are accepted whatever
    their score (the forager takes the best of them); a tabu move is accepted only when
    aspiration is on and it beats the best score so far.

    Entity tabu is kept as, per feature, the number of the taken move after which it is free
    again (a feature is tabu while that number exceeds the moves taken): the same rule as a
    list of the last ``entity_tabu_size`` moves' features, read with one comparison.
    """

    def __init__(self, config: TabuSearchAcceptorConfig, entity_tabu_size: int) -> None:
        self.config = config
        self.entity_size = entity_tabu_size
        self.value_size = config.value_tabu_size or 0
        self.move_size = config.move_tabu_size or 0
        self._taken = 0
        """Moves this walker has taken in the phase."""
        self._entity_until = np.zeros(0, dtype=np.int64)
        """Per feature: the taken-move count at which it stops being tabu."""
        self._values: deque[tuple[np.ndarray, np.ndarray]] = deque()
        self._moves: deque[tuple[np.ndarray, np.ndarray, np.ndarray]] = deque()

    def phase_started(self, walker: Walker) -> None:
        """Empty tabu lists."""
        self._taken = 0
        self._entity_until = np.zeros(walker.current.size, dtype=np.int64)
        self._values = deque(maxlen=self.value_size or None)
        self._moves = deque(maxlen=self.move_size or None)

    def tabu_features(self) -> BoolArray:
        """The features changed by one of the last ``entity_tabu_size`` moves taken."""
        return np.asarray(self._entity_until > self._taken, dtype=bool)

    def _listed(self, moves: MoveBatch) -> BoolArray:
        """Moves tabu by the value or move tabu lists."""
        tabu = np.zeros(len(moves), dtype=bool)
        for columns, values in self._values:
            tabu |= (moves.touched[:, columns] & (moves.candidates[:, columns] == values)).any(axis=1)
        for columns, before, after in self._moves:
            same_columns = (moves.touched.sum(axis=1) == columns.size) & moves.touched[:, columns].all(axis=1)
            result = moves.candidates[:, columns]
            tabu |= same_columns & ((result == after).all(axis=1) | (result == before).all(axis=1))
        return tabu

    def is_accepted(self, context: StepContext) -> BoolArray:
        """Non-tabu moves, and tabu moves that beat the best (aspiration)."""
        moves = context.moves
        tabu = self._listed(moves)
        if self.entity_size and self._entity_until.size:
            tabu |= (moves.touched & self.tabu_features()).any(axis=1)
        if self.config.aspiration_enabled:
            return ~tabu | better(context.scores, context.best_score)
        return ~tabu

    @classmethod
    def accept_lockstep(cls, acceptors: Sequence[Acceptor], context: LockstepContext) -> BoolArray:
        """Every walker's tabu features as one ``(walkers, features)`` mask, read for all moves at once."""
        tabu_acceptors = [a for a in acceptors if isinstance(a, TabuSearchAcceptor)]
        d = context.moves.touched.shape[1]
        if len(tabu_acceptors) < len(acceptors) or any(a._entity_until.size != d for a in tabu_acceptors):
            return super().accept_lockstep(acceptors, context)  # not started (or mixed): walker by walker
        owner = context.owner
        until = np.stack([a._entity_until for a in tabu_acceptors])
        free_after = np.array([a._taken if a.entity_size else np.iinfo(np.int64).max for a in tabu_acceptors])
        tabu = (context.moves.touched & (until > free_after[:, None])[owner]).any(axis=1)
        for i, acceptor in enumerate(tabu_acceptors):
            if acceptor._values or acceptor._moves:
                own = context.own(i)
                tabu[own] |= acceptor._listed(context.moves.select(own))
        aspiring = np.array([a.config.aspiration_enabled for a in tabu_acceptors])[owner] & tabu
        if aspiring.any():  # aspiration: a tabu move that beats the best is accepted
            candidates = np.flatnonzero(aspiring)
            tabu[candidates[better(context.scores[candidates], context.best_score)]] = False
        return np.asarray(~tabu, dtype=bool)

    def step_ended(self, walker: Walker, taken: MoveBatch | None, previous: FloatMatrix) -> None:
        """Make the taken move's features, values and the move itself tabu."""
        if taken is None or len(taken) == 0:
            return
        self._remember(taken.touched[0], taken.candidates[0], previous)

    @classmethod
    def step_ended_lockstep(
        cls,
        acceptors: Sequence[Acceptor],
        walkers: Sequence[Walker],
        stepped: BoolArray,
        taken: MoveBatch,
        previous: FloatMatrix,
    ) -> None:
        """Each walker that took a move remembers it (no per-walker view of the batch is built)."""
        if not all(isinstance(a, TabuSearchAcceptor) for a in acceptors):
            super().step_ended_lockstep(acceptors, walkers, stepped, taken, previous)
            return
        assert taken.owner is not None
        for row, i in enumerate(taken.owner.tolist()):
            acceptor = acceptors[i]
            assert isinstance(acceptor, TabuSearchAcceptor)
            acceptor._remember(taken.touched[row], taken.candidates[row], previous[i])

    def _remember(self, touched: BoolArray, candidate: FloatMatrix, previous: FloatMatrix) -> None:
        """One taken move: the features it touched, and (when listed) its values and itself."""
        self._taken += 1
        if self.entity_size:
            if self._entity_until.size != touched.size:  # used without phase_started
                self._entity_until = np.zeros(touched.size, dtype=np.int64)
            self._entity_until[touched] = self._taken + self.entity_size
        if self.value_size or self.move_size:
            columns = np.flatnonzero(touched)
            after = candidate[columns]
            if self.value_size:
                self._values.append((columns, after))
            if self.move_size:
                self._moves.append((columns, previous[columns], after))


class LateAcceptanceAcceptor(Acceptor):
    """Accept a move not worse than the step score ``size`` steps ago, or the current one."""

    def __init__(self, config: LateAcceptanceAcceptorConfig) -> None:
        self.size = config.late_acceptance_size
        self._history: FloatMatrix = np.empty((0, 0))
        self._index = 0

    def phase_started(self, walker: Walker) -> None:
        """Fill the history with the starting score."""
        self._history = np.repeat(walker.current_score.reshape(1, -1), self.size, axis=0)
        self._index = 0

    def is_accepted(self, context: StepContext) -> BoolArray:
        """Not worse than the late score, or than the current score."""
        late = self._history[self._index]
        return not_worse(context.scores, late) | not_worse(context.scores, context.walker.current_score)

    @classmethod
    def accept_lockstep(cls, acceptors: Sequence[Acceptor], context: LockstepContext) -> BoolArray:
        """Every walker's late score stacked, each move compared with its own walker's."""
        if not all(isinstance(a, LateAcceptanceAcceptor) and a._history.size for a in acceptors):
            return super().accept_lockstep(acceptors, context)
        late = np.stack([a._history[a._index] for a in acceptors if isinstance(a, LateAcceptanceAcceptor)])
        owner = context.owner
        return not_worse(context.scores, late[owner]) | not_worse(context.scores, context.current_scores[owner])

    def step_ended(self, walker: Walker, taken: MoveBatch | None, previous: FloatMatrix) -> None:
        """Record this step's score in place of the oldest."""
        self._history[self._index] = walker.current_score
        self._index = (self._index + 1) % self.size


class SimulatedAnnealingAcceptor(Acceptor):
    """Accept worse moves with chance ``prod(exp(diff_level / temperature_level))``.

    The temperature of each level falls linearly from ``starting_temperature`` to 0 with the
    termination's progress (the time gradient). A level with temperature 0 never accepts a
    loss on that level. Moves not worse than the current score are always accepted.
    """

    def __init__(self, config: SimulatedAnnealingAcceptorConfig) -> None:
        self.start = BendableScore.parse(config.starting_temperature).to_array()

    def is_accepted(self, context: StepContext) -> BoolArray:
        """Improving moves always; worse moves by chance, cooling with progress."""
        return _annealing(context.scores, context.walker.current_score, self.start, context)

    @classmethod
    def accept_lockstep(cls, acceptors: Sequence[Acceptor], context: LockstepContext) -> BoolArray:
        """Every move against its own walker's current score and temperature, one draw per move."""
        if not all(isinstance(a, SimulatedAnnealingAcceptor) for a in acceptors):
            return super().accept_lockstep(acceptors, context)
        starts = np.stack([a.start for a in acceptors if isinstance(a, SimulatedAnnealingAcceptor)])
        owner = context.owner
        return _annealing(context.scores, context.current_scores[owner], starts[owner], context)


def _annealing(
    scores: FloatMatrix, current: FloatMatrix, start: FloatMatrix, context: StepContext | LockstepContext
) -> BoolArray:
    """Simulated annealing's mask: ``current`` and ``start`` are one row, or one per move."""
    diff = scores - current
    temperature = start * max(1.0 - context.time_gradient, 0.0)
    hot = temperature > 0.0
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        exponent = np.where(hot, diff / np.where(hot, temperature, 1.0), np.where(diff < 0.0, -np.inf, 0.0))
    chance = np.exp(np.minimum(exponent.sum(axis=1), 0.0))
    draw = context.rng.random(diff.shape[0])
    return np.asarray(not_worse(scores, current) | (draw < chance), dtype=bool)


class GreatDelugeAcceptor(Acceptor):
    """Accept moves above a water level that rises towards 0 by a ratio every step."""

    def __init__(self, config: GreatDelugeAcceptorConfig) -> None:
        self.ratio = config.water_level_increment_ratio
        self._level: FloatMatrix = np.empty(0)

    def phase_started(self, walker: Walker) -> None:
        """Start the water at the walker's starting score."""
        self._level = walker.current_score.copy()

    def is_accepted(self, context: StepContext) -> BoolArray:
        """Not below the water level, or better than the current score."""
        return not_worse(context.scores, self._level) | better(context.scores, context.walker.current_score)

    @classmethod
    def accept_lockstep(cls, acceptors: Sequence[Acceptor], context: LockstepContext) -> BoolArray:
        """Every walker's water level stacked, each move compared with its own walker's."""
        if not all(isinstance(a, GreatDelugeAcceptor) and a._level.size for a in acceptors):
            return super().accept_lockstep(acceptors, context)
        levels = np.stack([a._level for a in acceptors if isinstance(a, GreatDelugeAcceptor)])
        owner = context.owner
        return not_worse(context.scores, levels[owner]) | better(context.scores, context.current_scores[owner])

    def step_ended(self, walker: Walker, taken: MoveBatch | None, previous: FloatMatrix) -> None:
        """Raise the water."""
        self._level = self._level + np.abs(self._level) * self.ratio


class StepCountingHillClimbingAcceptor(Acceptor):
    """Accept moves not worse than a threshold set to the step score every ``size`` steps."""

    def __init__(self, config: StepCountingHillClimbingAcceptorConfig) -> None:
        self.size = config.step_counting_hill_climbing_size
        self._threshold: FloatMatrix = np.empty(0)
        self._count = 0

    def phase_started(self, walker: Walker) -> None:
        """The first threshold is the starting score."""
        self._threshold = walker.current_score.copy()
        self._count = 0

    def is_accepted(self, context: StepContext) -> BoolArray:
        """Not worse than the threshold, or than the current score."""
        scores = context.scores
        return (compare_to(scores, self._threshold) >= 0) | not_worse(scores, context.walker.current_score)

    @classmethod
    def accept_lockstep(cls, acceptors: Sequence[Acceptor], context: LockstepContext) -> BoolArray:
        """Every walker's threshold stacked, each move compared with its own walker's."""
        if not all(isinstance(a, StepCountingHillClimbingAcceptor) and a._threshold.size for a in acceptors):
            return super().accept_lockstep(acceptors, context)
        thresholds = np.stack([a._threshold for a in acceptors if isinstance(a, StepCountingHillClimbingAcceptor)])
        owner = context.owner
        scores = context.scores
        return (compare_to(scores, thresholds[owner]) >= 0) | not_worse(scores, context.current_scores[owner])

    def step_ended(self, walker: Walker, taken: MoveBatch | None, previous: FloatMatrix) -> None:
        """Every ``size`` steps, the threshold becomes the current score."""
        self._count += 1
        if self._count >= self.size:
            self._threshold = walker.current_score.copy()
            self._count = 0
