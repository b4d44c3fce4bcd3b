"""Factories: turn pure-data configs into runtime plug-ins, filling defaults and checking them.

This is where a config meets a problem: a tabu size that would make every mutable feature
tabu is capped here, with a warning, since only now is the number of mutable features known.
"""

from __future__ import annotations

import structlog

from counterplan.solver.core.config import (
    GreatDelugeAcceptorConfig,
    HillClimbingAcceptorConfig,
    LateAcceptanceAcceptorConfig,
    SimulatedAnnealingAcceptorConfig,
    StepCountingHillClimbingAcceptorConfig,
    TabuSearchAcceptorConfig,
)
from counterplan.solver.local.acceptors import (
    Acceptor,
    GreatDelugeAcceptor,
    HillClimbingAcceptor,
    LateAcceptanceAcceptor,
    SimulatedAnnealingAcceptor,
    StepCountingHillClimbingAcceptor,
    TabuSearchAcceptor,
)

log = structlog.get_logger(__name__)

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
