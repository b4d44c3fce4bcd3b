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

from counterplan.solver.core.config import ConfigError, SolverConfig
from counterplan.solver.core.phase import SpaceSize, factory_for
from counterplan.solver.core.pool import POOL_MAX_VALUES

MAX_CELLS_PER_STEP = 32_000_000
"""Candidate values one step may hold: 256 MB of float64 (a 1,000-feature problem's default
feature scan needs 24 million)."""


def one_hot_width(features: Iterable[Any]) -> int:
    """The one-hot width of ``features`` (planning features): one coordinate per mutable number,
    one per category (two per boolean) of each mutable categorical. A particle of the swarm
    carries one coordinate each."""
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
    config: SolverConfig, n_features: int, n_mutable: int, one_hot: int | None = None
) -> list[tuple[str, int]]:
    """Per phase: the field that sizes its largest step, and the candidate values that step holds
    (each phase type's factory says; ``one_hot`` is :func:`one_hot_width`, default one per mutable
    feature)."""
    size = SpaceSize(n_features, n_mutable, one_hot)
    out: list[tuple[str, int]] = []
    for i, phase in enumerate(config.phases):
        cells = factory_for(phase).step_cells(phase, size)
        if cells is not None:
            out.append((f"phases[{i}].{cells[0]}", cells[1]))
    return out


def check_budget(config: SolverConfig, n_features: int, n_mutable: int, one_hot: int | None = None) -> None:
    """Raise :class:`ConfigError` for the first phase whose step would exceed :data:`MAX_CELLS_PER_STEP`."""
    for field, cells in step_cells(config, n_features, n_mutable, one_hot):
        if cells > MAX_CELLS_PER_STEP:
            raise ConfigError(
                field,
                f"a step would hold {cells:,} candidate values for {n_features} features; "
                f"at most {MAX_CELLS_PER_STEP:,}: lower it (or the walkers / grid)",
            )


COPIES_PER_STEP = 4
"""The candidate matrix and the copies a model call makes of it (a DataFrame, a pipeline's
encoded matrix, its scores): a step's memory is this many times its float64 candidate values."""
BASE_BYTES = 8 * 1024 * 1024
"""A solve's fixed overhead: the problem, scopes, walkers and result."""


def estimate_bytes(
    config: SolverConfig,
    n_features: int,
    n_mutable: int,
    *,
    several: bool = False,
    one_hot: int | None = None,
) -> int:
    """A solve's peak memory, estimated from its largest step (and the pool of feasible rows
    when ``several`` answers are asked for or a phase reads the pool)."""
    cells = max((c for _, c in step_cells(config, n_features, n_mutable, one_hot)), default=0)
    pooled = several or any(factory_for(p).collects_pool(p) for p in config.phases)
    return BASE_BYTES + 8 * COPIES_PER_STEP * cells + (8 * POOL_MAX_VALUES if pooled else 0)
