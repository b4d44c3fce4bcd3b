"""The exact engine's factory: what the phase registry asks to build an exact phase.

Light on purpose: sizing a configuration loads no MILP solver; the phase (and HiGHS or OR-Tools
behind it) is imported only when a solve builds it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from counterplan.solver.core.phase import SpaceSize
from counterplan.solver.exact.config import ExactPhaseConfig

if TYPE_CHECKING:
    from counterplan.solver.exact.phase import ExactPhase


class ExactPhaseFactory:
    """Builds the exact phase; its program's size is bounded by its node and time limits."""

    def build(self, config: ExactPhaseConfig) -> ExactPhase:
        """The phase for one solve (the MILP machinery loads here)."""
        from counterplan.solver.exact.phase import ExactPhase  # noqa: PLC0415 - HiGHS loads only when asked

        return ExactPhase(config)

    def step_cells(self, config: ExactPhaseConfig, size: SpaceSize) -> None:
        """The program holds no candidate matrix."""
        return None

    def collects_pool(self, config: ExactPhaseConfig) -> bool:
        """A set of answers is the program's own (``answer_set: pool`` reads the answers phase's pool)."""
        return False
