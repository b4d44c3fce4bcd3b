"""What reaching a tree's leaf costs at least, and the leaves out of the warm start's reach.

A leaf's path fixes threshold binaries (right of a split on a number: its binary 1, left: 0).
Each fixed binary that lies across the feature's original forces a change at least to the
threshold's far side, so a solution that picks the leaf pays at least, per feature, its change
weight plus its distance to the farthest threshold its path crosses (the program's own
objective coefficients: :attr:`~counterplan.solver.exact.program.Formulation.distance`); a
path that crosses a feature's thresholds on both sides of its original reaches no solution.
Splits of categories and allowed values (sums of indicators) add nothing: the cost is a lower
bound.

Narrowed to the warm start's distance (``reach``), a leaf that costs more is fixed at 0. The
narrowing by domains (:func:`~counterplan.solver.exact.formulation.narrowed_domains`) drops a
leaf only when one feature alone goes beyond the reach; a random forest's leaves mostly need two
or three features changed at once, each within reach alone and together beyond it (heloc's
100-tree forest: 9-45% of the leaves left after the domains' narrowing, its LP relaxation's
bound 14-32% higher, ``docs/benchmarks/engines.md``). Every solution at most ``reach`` away
keeps its leaves, so the narrowing's promise holds. (A row per tree, ``distance >= sum_leaf
cost(leaf) * leaf``, was measured too: it added under 0.3% to the LP's bound and slowed CP-SAT's
presolve, so it is not written.)
"""

from __future__ import annotations

import math

from counterplan.solver.exact.program import Formulation, Lin, reach_limit

Path = list[tuple[Lin, bool]]
"""A leaf's undecided splits: the expression that is 1 when the split sends the row right, and
whether the leaf lies right of it."""


def crossing(formulation: Formulation, var: int, j: int) -> tuple[bool, float]:
    """Threshold binary ``var`` of feature ``j``: whether the original lies above it (then 0
    crosses it; else 1 does), and the distance from the original to its far side."""
    below, above = formulation.bands[var]
    o = float(formulation.problem.space.original[j])
    right = formulation.original_sides.get(var, o > (below + above) / 2.0)
    return right, (o - below) if right else (above - o)


def leaf_costs(formulation: Formulation, paths: dict[int, Path]) -> dict[int, float]:
    """Leaf variable -> the least objective of a solution that picks it (``inf``: none does), for
    each leaf of ``paths`` (a leaf without undecided splits costs nothing)."""
    crossings: dict[int, tuple[int, int, float]] = {}
    """Threshold binary -> its feature, the value that crosses it, the distance it forces."""
    weights: dict[int, tuple[float, float]] = {}
    """Feature -> its change weight and its cost per unit of distance, in the objective."""
    for f in formulation.features:
        if f.changed is not None:
            per_unit = formulation.distance.get(f.distance, 0.0) if f.distance is not None else 0.0
            weights[f.index] = (formulation.distance.get(f.changed, 0.0), per_unit)
    for var, j, _ in formulation.thresholds:
        if j in weights:
            right, far = crossing(formulation, var, j)
            crossings[var] = (j, 0 if right else 1, far)
    return {leaf: _cost(path, crossings, weights) for leaf, path in paths.items()}


def _cost(path: Path, crossings: dict[int, tuple[int, int, float]], weights: dict[int, tuple[float, float]]) -> float:
    fixed: dict[int, int] = {}
    for (terms, constant), right in path:
        if len(terms) != 1:
            continue
        ((var, c),) = terms.items()
        if (c, constant) == (1.0, 0.0):
            value = int(right)
        elif (c, constant) == (-1.0, 1.0):
            value = int(not right)
        else:
            continue
        if fixed.setdefault(var, value) != value:
            return math.inf
    farthest: dict[int, tuple[float, int]] = {}
    """Feature -> the distance its crossed thresholds force, and the side (1 up, 0 down)."""
    for var, value in fixed.items():
        if var not in crossings:
            continue
        j, crosses, far = crossings[var]
        if value != crosses:
            continue
        side = crosses  # a binary crossed at 1 lies above the original
        reached, was = farthest.get(j, (0.0, side))
        if was != side:
            return math.inf  # above the original and below it at once
        farthest[j] = (max(reached, far), side)
    return math.fsum(weights[j][0] + weights[j][1] * far for j, (far, _) in farthest.items())


def bound_leaves(formulation: Formulation, paths: dict[int, Path]) -> int:
    """Fix at 0 each leaf of ``paths`` no solution within the formulation's reach picks (with no
    reach, only those no solution picks at all); returns how many were fixed."""
    milp = formulation.milp
    limit = math.inf if formulation.reach is None else reach_limit(formulation.reach)
    fixed = 0
    for leaf, cost in leaf_costs(formulation, paths).items():
        if cost > limit:
            milp.upper[leaf] = 0.0
            fixed += 1
    return fixed


__all__ = ["Path", "bound_leaves", "crossing", "leaf_costs"]
