"""Named solver presets: what a front end may ask for by name without knowing the engines' configs.

The gRPC service's ``Engine`` enum (which, for wire compatibility, still names local search's
acceptor) maps to one of :data:`ACCEPTORS`; :func:`with_acceptor_preset` applies it. So the server
names a preset and the solver builds it: no front end touches an engine's config classes.
"""

from __future__ import annotations

from pydantic import TypeAdapter

from counterplan.solver.core.config import SolverConfig
from counterplan.solver.engines import with_acceptor
from counterplan.solver.local.config import AcceptorConfig

ACCEPTORS: tuple[str, ...] = (
    "tabu_search",
    "hill_climbing",
    "late_acceptance",
    "simulated_annealing",
    "great_deluge",
    "step_counting_hill_climbing",
)
"""The acceptor presets: each local search acceptor with its default settings."""

_ACCEPTOR: TypeAdapter[AcceptorConfig] = TypeAdapter(AcceptorConfig)


def with_acceptor_preset(config: SolverConfig, name: str) -> SolverConfig:
    """``config`` with every local-search phase using the acceptor preset ``name`` (one of
    :data:`ACCEPTORS`, with its default settings)."""
    if name not in ACCEPTORS:
        raise ValueError(f"unknown acceptor preset {name!r}; one of {list(ACCEPTORS)}")
    return with_acceptor(config, _ACCEPTOR.validate_python({"type": name}))
