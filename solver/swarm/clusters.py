"""Several answers from one swarm: k-means over the particles, one valid particle per cluster.

The MD-PSO paper clusters the final swarm with k-means (k = the answers wanted) and takes one
particle per cluster. Here the points are the particles' own best positions (where each one's
search ended up best; the final positions are often mid-flight and invalid), the seeding is
k-means++ from the solve's generator (so the same seed gives the same clusters), and each
cluster gives its best-scored feasible particle rather than a random one. A cluster without a
feasible particle gives none, and the result says how many clusters came back empty.
"""

from __future__ import annotations

import numpy as np

from counterplan.planning.score import best_first
from counterplan.solver.core.protocol import BoolArray, FloatMatrix

KMEANS_ROUNDS = 50


def kmeans(points: FloatMatrix, k: int, rng: np.random.Generator, rounds: int = KMEANS_ROUNDS) -> np.ndarray:
    """Cluster labels (0..k-1) of ``points`` by Lloyd's algorithm from a k-means++ seeding."""
    n = points.shape[0]
    k = min(k, n)
    centres = np.empty((k, points.shape[1]))
    centres[0] = points[rng.integers(n)]
    nearest = np.sum((points - centres[0]) ** 2, axis=1)
    for c in range(1, k):
        total = nearest.sum()
        pick = rng.choice(n, p=nearest / total) if total > 0.0 else rng.integers(n)
        centres[c] = points[pick]
        nearest = np.minimum(nearest, np.sum((points - centres[c]) ** 2, axis=1))
    labels = np.zeros(n, dtype=np.intp)
    for _ in range(rounds):
        # |p - c|^2 = |p|^2 - 2 p.c + |c|^2: an (n, k) matrix, never (n, k, dimensions)
        distances = (centres**2).sum(axis=1)[None, :] - 2.0 * points @ centres.T
        new = np.argmin(distances, axis=1)
        if _ > 0 and np.array_equal(new, labels):
            break
        labels = new
        for c in range(k):
            members = labels == c
            if members.any():
                centres[c] = points[members].mean(axis=0)
    return labels


def pick_per_cluster(labels: np.ndarray, scores: FloatMatrix, feasible: BoolArray) -> tuple[list[int], int]:
    """Per cluster, the best-scored feasible member; the picks best first, and how many
    clusters had none."""
    picks: list[int] = []
    empty = 0
    for c in np.unique(labels).tolist():
        members = np.flatnonzero((labels == c) & feasible)
        if members.size == 0:
            empty += 1
            continue
        picks.append(int(members[best_first(scores[members])[0]]))
    picks.sort(key=lambda i: tuple(-scores[i]))
    return picks, empty
