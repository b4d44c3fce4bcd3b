"""Factories: turn local search's pure-data configs into runtime phases and plug-ins.

The phase factories are what the phase registry (:mod:`counterplan.solver.core.registry`) asks
to build a phase for one solve and to size its largest step before the solve starts. The
acceptor factory is where a config meets a problem: a tabu size that would make every mutable
feature tabu is capped here, with a warning, since only now is the number of mutable features
known.
"""

from __future__ import annotations

import structlog

from counterplan.solver.core.phase import SpaceSize
from counterplan.solver.local.acceptors import (
    Acceptor,
    GreatDelugeAcceptor,
    HillClimbingAcceptor,
    LateAcceptanceAcceptor,
    SimulatedAnnealingAcceptor,
    StepCountingHillClimbingAcceptor,
    TabuSearchAcceptor,
)
from counterplan.solver.local.config import (
    BoundaryPolishPhaseConfig,
    FeatureScanPhaseConfig,
    GreatDelugeAcceptorConfig,
    HillClimbingAcceptorConfig,
    LateAcceptanceAcceptorConfig,
    LocalSearchPhaseConfig,
    SimulatedAnnealingAcceptorConfig,
    StepCountingHillClimbingAcceptorConfig,
    TabuSearchAcceptorConfig,
)
from counterplan.solver.local.phase import LocalSearchPhase
from counterplan.solver.local.polish import BoundaryPolishPhase
from counterplan.solver.local.scan import FeatureScanPhase

log = structlog.get_logger(__name__)


class LocalSearchPhaseFactory:
    """Local search: walkers x moves per step candidates a step."""

    def build(self, config: LocalSearchPhaseConfig) -> LocalSearchPhase:
        """The phase for one solve, making each walker's acceptor from the config's."""
        return LocalSearchPhase(config, lambda mutable_count: build_acceptor(config.acceptor, mutable_count))

    def step_cells(self, config: LocalSearchPhaseConfig, size: SpaceSize) -> tuple[str, int]:
        """A step's candidates: every walker's sampled moves."""
        rows = config.walkers * config.move_selector.moves_per_step
        return "move_selector.moves_per_step", rows * size.n_features

    def collects_pool(self, config: LocalSearchPhaseConfig) -> bool:
        """Local search reads no pool."""
        return False


class FeatureScanPhaseFactory:
    """The feature scan: a grid of values per mutable feature, in one call."""

    def build(self, config: FeatureScanPhaseConfig) -> FeatureScanPhase:
        """The phase for one solve."""
        return FeatureScanPhase(config)

    def step_cells(self, config: FeatureScanPhaseConfig, size: SpaceSize) -> tuple[str, int]:
        """The scan's rows: the grid of every mutable feature."""
        return "grid_size", config.grid_size * size.n_mutable * size.n_features

    def collects_pool(self, config: FeatureScanPhaseConfig) -> bool:
        """The scan reads no pool."""
        return False


class BoundaryPolishPhaseFactory:
    """The boundary polish: a grid per changed number, for the best and its other starts."""

    def build(self, config: BoundaryPolishPhaseConfig) -> BoundaryPolishPhase:
        """The phase for one solve."""
        return BoundaryPolishPhase(config)

    def step_cells(self, config: BoundaryPolishPhaseConfig, size: SpaceSize) -> tuple[str, int]:
        """An iteration's rows: a grid per mutable number (and the reverts) for every start; or a
        batch of trades or of combinations with the beam's pairs (``trade_rows``, twice
        ``combo_rows``), where larger."""
        rows = config.grid_size * (size.n_mutable + 1) * config.starts
        trades = max(config.trade_rows, 2 * config.combo_rows) if config.trade_rounds or config.combos else 0
        if trades > rows:  # the single-feature rows are skipped where they would not fit a step
            return "trade_rows", trades * size.n_features
        return "starts", rows * size.n_features

    def collects_pool(self, config: BoundaryPolishPhaseConfig) -> bool:
        """Several starts are the best rows of the pool's other routes."""
        return config.starts > 1


AnyAcceptorConfig = (
    HillClimbingAcceptorConfig
    | TabuSearchAcceptorConfig
    | LateAcceptanceAcceptorConfig
    | SimulatedAnnealingAcceptorConfig
    | GreatDelugeAcceptorConfig
    | StepCountingHillClimbingAcceptorConfig
)


def entity_tabu_size(config: TabuSearchAcceptorConfig, mutable_count: int) -> int:
    """The entity tabu size to use: the configured one capped, or a default.

    With no tabu size configured at all, a third of the mutable features (1 to 7). A size
    that would leave no mutable feature free is capped at ``mutable_count - 1``.
    """
    size = config.entity_tabu_size
    if size is None:
        if config.value_tabu_size is not None or config.move_tabu_size is not None:
            return 0
        size = min(max(mutable_count // 3, 1), 7)
    if size >= mutable_count:
        capped = max(mutable_count - 1, 0)
        if config.entity_tabu_size is not None:
            log.warning(
                "entity tabu size capped",
                configured=config.entity_tabu_size,
                capped=capped,
                mutable_features=mutable_count,
            )
        size = capped
    return size


def build_acceptor(config: AnyAcceptorConfig, mutable_count: int) -> Acceptor:
    """A fresh acceptor for one walker."""
    if isinstance(config, HillClimbingAcceptorConfig):
        return HillClimbingAcceptor()
    if isinstance(config, TabuSearchAcceptorConfig):
        return TabuSearchAcceptor(config, entity_tabu_size(config, mutable_count))
    if isinstance(config, LateAcceptanceAcceptorConfig):
        return LateAcceptanceAcceptor(config)
    if isinstance(config, SimulatedAnnealingAcceptorConfig):
        return SimulatedAnnealingAcceptor(config)
    if isinstance(config, GreatDelugeAcceptorConfig):
        return GreatDelugeAcceptor(config)
    return StepCountingHillClimbingAcceptor(config)
