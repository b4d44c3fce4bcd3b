"""What the particle swarm reports about its flight: the particles, the searched features, the clusters."""

from __future__ import annotations

from pydantic import Field

from counterplan.solver.core.phase import PhaseReport


class SwarmStatistics(PhaseReport):
    """What the particle swarm did (:mod:`counterplan.solver.swarm.phase` fills it in)."""

    particles: int
    iterations: int
    """Iterations flown: one model call each."""
    searched: int
    """Features searched (h)."""
    searchable: int
    """Features the swarm could have searched (mutable, with a domain)."""
    ranking: str
    """How the searched features were chosen: ``all``, ``information_value`` or ``sensitivity``."""
    searched_features: list[str] = Field(default_factory=list)
    """The searched features (at most 50 named)."""
    objective: str = "score"
    widened: bool = False
    """No particle was valid by half the iterations, so the box was opened to the whole domain."""
    answers_from: str = ""
    """When several answers were asked: what k-means clustered, ``visited`` (every distinct valid
    row the swarm visited) or ``final_swarm`` (the particles' own bests)."""
    clusters: int = 0
    """When several answers were asked: the k-means clusters."""
    empty_clusters: int = 0
    """Clusters without a valid particle: each is one answer fewer."""
