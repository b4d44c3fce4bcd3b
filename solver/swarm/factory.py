"""The particle swarm's factory: what the phase registry asks to build and size a swarm phase."""

from __future__ import annotations

from counterplan.solver.core.phase import SpaceSize
from counterplan.solver.swarm.config import SwarmPhaseConfig
from counterplan.solver.swarm.phase import SwarmPhase

SWARM_ARRAYS = 8
"""Arrays of a swarm's coordinates alive in one iteration: positions, velocities, own bests, the
three random draws and two temporaries of the update."""


class SwarmPhaseFactory:
    """Builds the swarm phase; an iteration holds its particles' rows and their coordinates."""

    def build(self, config: SwarmPhaseConfig) -> SwarmPhase:
        """The phase for one solve."""
        return SwarmPhase(config)

    def step_cells(self, config: SwarmPhaseConfig, size: SpaceSize) -> tuple[str, int]:
        """An iteration's values: every particle's row, plus :data:`SWARM_ARRAYS` arrays of its
        coordinates (the one-hot width of the mutable features)."""
        return "particles", config.particles * (size.n_features + SWARM_ARRAYS * size.coordinates)

    def collects_pool(self, config: SwarmPhaseConfig) -> bool:
        """The swarm keeps its own archive of valid rows."""
        return False
