"""The particle swarm's configuration as pure data (MD-PSO's coefficients, the box, the searched features)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from counterplan.solver.core.config import PhaseConfig, TerminationConfig


class SwarmPhaseConfig(PhaseConfig):
    """A particle-swarm phase (MD-PSO, Shekhar et al.): every particle moves every searched feature.

    Positions live in min-max scaled coordinates ([0, 1] per feature's domain). Only the
    ``top_features`` most relevant features are searched (information value against the data's
    labels, else the model's sensitivity at the original; ``"all"``: every mutable one), each boxed
    to ``[z (1 - box_ratio), z (1 + box_ratio)]`` around its scaled original ``z`` (``[z - box_ratio,
    z + box_ratio]`` where ``z`` is 0), clipped to the domain. Every iteration scores the whole swarm
    in one model call. See :mod:`counterplan.solver.swarm`.
    """

    type: Literal["swarm"] = "swarm"
    particles: Annotated[int, Field(ge=2, le=4096)] = 50
    iterations: Annotated[int, Field(ge=1, le=100_000)] = 100
    inertia: Annotated[float, Field(ge=0.0, le=2.0)] = 0.7298
    """c0: how much of its velocity a particle keeps."""
    cognitive: Annotated[float, Field(ge=0.0, le=8.0)] = 1.49618
    """c1: the pull towards the particle's own best."""
    social: Annotated[float, Field(ge=0.0, le=8.0)] = 1.49618
    """c2: the pull towards the swarm's best."""
    diversity: Annotated[float, Field(ge=0.0, le=8.0)] = 0.3
    """c3: the push away from ``diversity_from`` (0: the plain PSO update)."""
    diversity_from: Literal["swarm_mean", "global_best"] = "swarm_mean"
    """What the diversity term pushes away from: the swarm's mean position (the paper's example)
    or the swarm's best (the original MD-PSO)."""
    top_features: Annotated[int, Field(ge=1, le=100_000)] | Literal["all"] = 20
    """h: how many features are searched, the most relevant first."""
    rank_by: Literal["information_value", "sensitivity"] = "information_value"
    """How features are ranked for ``top_features``: information value (10 bins, natural log,
    +0.5 count smoothing) against the training labels, when the problem was built from data with
    its label column; else, and with ``sensitivity``, how far moving the feature alone to either
    end of its box brings the goal (one model call)."""
    box_ratio: Annotated[float, Field(gt=0.0, le=1000.0)] = 1.0
    """eps: the box's half-width relative to the scaled original (additive where it is 0)."""
    snap_tolerance: Annotated[float, Field(ge=0.0, le=1.0)] = 0.05
    """A scaled change smaller than this snaps back to the original, so unchanged features count as
    unchanged (otherwise every particle changes all ``top_features``)."""
    objective: Literal["score", "paper"] = "score"
    """What guides the particles: the bendable score (compared level by level), or the paper's sum
    l1 + l2 + l3 (goal hinge + mean Gower distance + features changed; plus broken rules). The
    solve's answer is the best bendable score either way."""
    widen_when_infeasible: bool = True
    """When no particle has been valid by half the iterations, open the box to the whole domain
    and scatter the particles over it afresh for the rest (a relative box can keep the goal out of
    reach); their own bests are kept. The statistics say so."""
    answers_from: Literal["visited", "final_swarm"] = "visited"
    """When several answers are asked, what k-means clusters: every distinct valid row the swarm
    visited (default: no cluster is empty, so k answers come back whenever k distinct valid rows
    were seen), or the particles' own best positions at the end (the paper's final swarm: a
    cluster without a valid particle gives no answer)."""
    max_velocity: Annotated[float, Field(gt=0.0, le=1.0)] = 0.5
    """Velocity clamp per dimension, as a share of the box's width (keeps the swarm inside it)."""
    termination: TerminationConfig | None = None
