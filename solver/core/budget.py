"""What a configuration will allocate per step, checked before a solve starts.

Each step builds a candidate matrix: rows (walkers x moves per step; a scan's grid values per
mutable feature; a polish's grid per changed number) times the problem's features, as float64,
plus the model's copy of it. Every field of a configuration is bounded on its own
(:mod:`counterplan.solver.core.config`), but their product is what fills memory, so it is checked against the
problem here and an expensive configuration is refused, naming the field and the limit, before
anything is allocated.

:func:`estimate_bytes` turns the same sizes into a per-solve memory estimate, which a server
admits solves by (it refuses one whose estimate does not fit beside those running, with a retry
hint, instead of letting several large solves fill its memory together).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from counterplan.solver.core.config import (
    BoundaryPolishPhaseConfig,
    ConfigError,
    FeatureScanPhaseConfig,
    LocalSearchPhaseConfig,
    SolverConfig,
    SwarmPhaseConfig,
)

MAX_CELLS_PER_STEP = 32_000_000
"""Candidate values one step may hold: 256 MB of float64 (a 1,000-feature problem's default
feature scan needs 24 million)."""


SWARM_ARRAYS = 8
"""Arrays of a swarm's coordinates alive in one iteration: positions, velocities, own bests, the
three random draws and two temporaries of the update."""


def swarm_coordinates(features: Iterable[Any]) -> int:
    """The coordinates of a swarm particle over ``features`` (planning features): one per mutable
    number, one per category (two per boolean) of each mutable categorical: the one-hot groups."""
    total = 0
    for feature in features:
        if not getattr(feature, "mutable", False):
            continue
        domain = getattr(feature, "domain", None)
        if isinstance(domain, tuple | list):
            total += len(domain)
        elif getattr(feature, "kind", "") == "boolean":
            total += 2
        else:
            total += 1
    return total


def step_cells(
    config: SolverConfig, n_features: int, n_mutable: int, swarm_coordinates: int | None = None
) -> list[tuple[str, int]]:
    """Per phase: the field that sizes its largest step, and the candidate values that step holds.

    ``swarm_coordinates`` (:func:`swarm_coordinates`; default one per mutable feature) sizes a
    swarm's own arrays: its particles' rows, plus :data:`SWARM_ARRAYS` arrays of their coordinates."""
    out: list[tuple[str, int]] = []
    for i, phase in enumerate(config.phases):
        if isinstance(phase, LocalSearchPhaseConfig):
            rows = phase.walkers * phase.move_selector.moves_per_step
            out.append((f"phases[{i}].move_selector.moves_per_step", rows * n_features))
        elif isinstance(phase, FeatureScanPhaseConfig):
            out.append((f"phases[{i}].grid_size", phase.grid_size * n_mutable * n_features))
        elif isinstance(phase, BoundaryPolishPhaseConfig):
            rows = phase.grid_size * (n_mutable + 1) * phase.starts
            out.append((f"phases[{i}].starts", rows * n_features))
        elif isinstance(phase, SwarmPhaseConfig):
            coordinates = n_mutable if swarm_coordinates is None else swarm_coordinates
            out.append((f"phases[{i}].particles", phase.particles * (n_features + SWARM_ARRAYS * coordinates)))
    return out


def check_budget(config: SolverConfig, n_features: int, n_mutable: int, swarm_coordinates: int | None = None) -> None:
    """Raise :class:`ConfigError` for the first phase whose step would exceed :data:`MAX_CELLS_PER_STEP`."""
    for field, cells in step_cells(config, n_features, n_mutable, swarm_coordinates):
        if cells > MAX_CELLS_PER_STEP:
            raise ConfigError(
                field,
                f"a step would hold {cells:,} candidate values for {n_features} features; "
                f"at most {MAX_CELLS_PER_STEP:,}: lower it (or the walkers / grid)",
            )


COPIES_PER_STEP = 4
"""The candidate matrix and the copies a model call makes of it (a DataFrame, a pipeline's
encoded matrix, its scores): a step's memory is this many times its float64 candidate values."""
POOL_MAX_VALUES = 4_000_000
"""Values the pool of feasible rows kept for several answers may hold (32 MB); see
:func:`counterplan.solver.core.scope.SolverScope.offer`."""
BASE_BYTES = 8 * 1024 * 1024
"""A solve's fixed overhead: the problem, scopes, walkers and result."""


def estimate_bytes(
    config: SolverConfig,
    n_features: int,
    n_mutable: int,
    *,
    several: bool = False,
    swarm_coordinates: int | None = None,
) -> int:
    """A solve's peak memory, estimated from its largest step (and the pool of feasible rows
    when ``several`` answers are asked for or a polish has several starts)."""
    cells = max((c for _, c in step_cells(config, n_features, n_mutable, swarm_coordinates)), default=0)
    pooled = several or any(isinstance(p, BoundaryPolishPhaseConfig) and p.starts > 1 for p in config.phases)
    return BASE_BYTES + 8 * COPIES_PER_STEP * cells + (8 * POOL_MAX_VALUES if pooled else 0)
