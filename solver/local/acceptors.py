"""Acceptors: which sampled moves a walker may take, decided for a whole batch at once.

Every acceptor follows one lifecycle (``phase_started``, ``step_ended``, ``phase_ended``,
no-ops by default) plus one decision, ``is_accepted``, which returns a boolean mask over the
batch. One acceptor instance serves one walker, so its state (tabu lists, late-acceptance
history, water level) is that walker's own. Parameters and defaults follow OptaPlanner.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np
import structlog

from planning.score import BendableScore
from solver.core.config import (
    GreatDelugeAcceptorConfig,
    LateAcceptanceAcceptorConfig,
    SimulatedAnnealingAcceptorConfig,
    StepCountingHillClimbingAcceptorConfig,
    TabuSearchAcceptorConfig,
)
from solver.core.protocol import BoolArray, FloatMatrix
from solver.core.scope import Walker
from solver.core.scores import better, compare_to, not_worse
from solver.local.moves import MoveBatch

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


class Acceptor:
    """Base acceptor: lifecycle no-ops; subclasses decide with :meth:`is_accepted`."""

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


class TabuSearchAcceptor(Acceptor):
    """Entity, value and move tabu, with aspiration.

    A move is tabu when it touches a feature changed in the last ``entity_tabu_size`` steps,
    sets a (feature, value) pair assigned in the last ``value_tabu_size`` steps, or repeats
    or undoes one of the last ``move_tabu_size`` moves. Non-tabu moves are accepted whatever
    their score (the forager takes the best of them); a tabu move is accepted only when
    aspiration is on and it beats the best score so far.
    """

    def __init__(self, config: TabuSearchAcceptorConfig, entity_tabu_size: int) -> None:
        self.config = config
        self.entity_size = entity_tabu_size
        self.value_size = config.value_tabu_size or 0
        self.move_size = config.move_tabu_size or 0
        self._entities: deque[np.ndarray] = deque()
        self._values: deque[tuple[np.ndarray, np.ndarray]] = deque()
        self._moves: deque[tuple[np.ndarray, np.ndarray, np.ndarray]] = deque()

    def phase_started(self, walker: Walker) -> None:
        """Empty tabu lists."""
        self._entities = deque(maxlen=self.entity_size or None)
        self._values = deque(maxlen=self.value_size or None)
        self._moves = deque(maxlen=self.move_size or None)

    def is_accepted(self, context: StepContext) -> BoolArray:
        """Non-tabu moves, and tabu moves that beat the best (aspiration)."""
        moves = context.moves
        tabu = np.zeros(len(moves), dtype=bool)
        if self.entity_size and self._entities:
            columns = np.unique(np.concatenate(list(self._entities)))
            tabu |= moves.touched[:, columns].any(axis=1)
        for columns, values in self._values:
            tabu |= (moves.touched[:, columns] & (moves.candidates[:, columns] == values)).any(axis=1)
        for columns, before, after in self._moves:
            same_columns = (moves.touched.sum(axis=1) == columns.size) & moves.touched[:, columns].all(axis=1)
            result = moves.candidates[:, columns]
            tabu |= same_columns & ((result == after).all(axis=1) | (result == before).all(axis=1))
        if self.config.aspiration_enabled:
            return ~tabu | better(context.scores, context.best_score)
        return ~tabu

    def step_ended(self, walker: Walker, taken: MoveBatch | None, previous: FloatMatrix) -> None:
        """Make the taken move's features, values and the move itself tabu."""
        if taken is None or len(taken) == 0:
            return
        columns = np.flatnonzero(taken.touched[0])
        after = taken.candidates[0, columns]
        if self.entity_size:
            self._entities.append(columns)
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
        current = context.walker.current_score
        diff = context.scores - current
        temperature = self.start * max(1.0 - context.time_gradient, 0.0)
        hot = temperature > 0.0
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            exponent = np.where(hot, diff / np.where(hot, temperature, 1.0), np.where(diff < 0.0, -np.inf, 0.0))
        chance = np.exp(np.minimum(exponent.sum(axis=1), 0.0))
        draw = context.rng.random(diff.shape[0])
        return np.asarray(not_worse(context.scores, current) | (draw < chance), dtype=bool)


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

    def step_ended(self, walker: Walker, taken: MoveBatch | None, previous: FloatMatrix) -> None:
        """Every ``size`` steps, the threshold becomes the current score."""
        self._count += 1
        if self._count >= self.size:
            self._threshold = walker.current_score.copy()
            self._count = 0
