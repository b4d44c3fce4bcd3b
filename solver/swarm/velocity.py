"""One MD-PSO move of the whole swarm: the velocity update and the box, as array operations.

    V <- c0 V + c1 r1 (P_i - X) + c2 r2 (P_g - X) + c3 r3 V_div
    X <- X + V, clipped to the box

``r1, r2, r3 ~ U(0, 1)`` per particle and dimension (the paper prints U[0, c1], U[0, c2],
U[c1, c2], which multiplies the coefficients in twice; we read it as the usual per-dimension
uniform draws). ``V_div`` pushes away from the swarm's mean position (the paper's example of its
divergence term) or from the swarm's best (the original MD-PSO's repulsion). Each velocity
component is clamped to ``max_velocity`` times the box's width; a particle that reaches a wall
stops there with that component of its velocity set to 0 (an absorbing wall, so it does not keep
pushing against it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from counterplan.solver.core.protocol import FloatMatrix


@dataclass(frozen=True)
class Coefficients:
    """c0 (inertia), c1 (cognitive), c2 (social), c3 (diversity)."""

    inertia: float
    cognitive: float
    social: float
    diversity: float


def diversity_term(positions: FloatMatrix, swarm_best: FloatMatrix, away_from: str) -> FloatMatrix:
    """``X - mean(X)`` (``swarm_mean``) or ``X - P_g`` (``global_best``)."""
    centre = swarm_best.reshape(1, -1) if away_from == "global_best" else positions.mean(axis=0, keepdims=True)
    return np.asarray(positions - centre, dtype=np.float64)


def move(
    positions: FloatMatrix,
    velocities: FloatMatrix,
    *,
    own_best: FloatMatrix,
    swarm_best: FloatMatrix,
    draws: FloatMatrix,
    coefficients: Coefficients,
    box: tuple[FloatMatrix, FloatMatrix],
    max_velocity: float,
    away_from: str = "swarm_mean",
) -> tuple[FloatMatrix, FloatMatrix]:
    """The swarm's next positions and velocities.

    ``draws`` holds ``r1, r2, r3`` stacked: shape ``(3, particles, dimensions)``. ``box`` is the
    per-dimension lower and upper bound.
    """
    low, high = box
    c = coefficients
    r1, r2, r3 = draws
    velocities = (
        c.inertia * velocities
        + c.cognitive * r1 * (own_best - positions)
        + c.social * r2 * (swarm_best.reshape(1, -1) - positions)
        + c.diversity * r3 * diversity_term(positions, swarm_best, away_from)
    )
    limit = max_velocity * (high - low)
    velocities = np.clip(velocities, -limit, limit)
    moved = positions + velocities
    walled = (moved < low) | (moved > high)
    moved = np.clip(moved, low, high)
    velocities = np.where(walled, 0.0, velocities)
    return moved, velocities
