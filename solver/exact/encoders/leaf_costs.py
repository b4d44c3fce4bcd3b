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

The same paths give a stronger row per tree and threshold (:func:`threshold_rows`): a threshold
is crossed at least as often as the tree picks a leaf that crosses it or a farther one.
"""

from __future__ import annotations

import math

from counterplan.solver.exact.program import Formulation, Lin, reach_limit

LEAVES_PER_CHECK = 1024
"""Leaves costed between two stop checks (:meth:`~counterplan.solver.exact.program.Formulation.check_stop`):
a 200-tree depth-10 forest's leaves took 1.5-2 s to cost and bound, past a 3.5 s limit."""

THRESHOLD_ROWS = True
"""Write :func:`threshold_rows` with the leaves' bounds (off: the program before them, for
``benchmarks/exact_trees.py``'s comparison)."""

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
    weights: dict[int, tuple[float, float]] = {}
    """Feature -> its change weight and its cost per unit of distance, in the objective."""
    for f in formulation.features:
        if f.changed is not None:
            per_unit = formulation.distance.get(f.distance, 0.0) if f.distance is not None else 0.0
            weights[f.index] = (formulation.distance.get(f.changed, 0.0), per_unit)
    crossings = _crossings(formulation, set(weights))
    costs: dict[int, float] = {}
    for done, (leaf, path) in enumerate(paths.items()):
        if done % LEAVES_PER_CHECK == 0:
            formulation.check_stop()
        farthest = _farthest(path, crossings)
        costs[leaf] = (
            math.inf
            if farthest is None
            else math.fsum(weights[j][0] + weights[j][1] * far for j, (far, _, _) in farthest.items())
        )
    return costs


def _crossings(formulation: Formulation, features: set[int]) -> dict[int, tuple[int, int, float]]:
    """Threshold binary -> its feature, the value that crosses it, the distance it forces; for
    the thresholds of ``features``."""
    crossings: dict[int, tuple[int, int, float]] = {}
    for var, j, _ in formulation.thresholds:
        if j in features:
            right, far = crossing(formulation, var, j)
            crossings[var] = (j, 0 if right else 1, far)
    return crossings


Farthest = dict[int, tuple[float, int, int]]
"""Feature -> the distance a leaf's crossed thresholds force, the side (1 up, 0 down) and the
threshold binary that forces it."""


def _farthest(path: Path, crossings: dict[int, tuple[int, int, float]]) -> Farthest | None:
    """Per feature, the farthest threshold ``path`` crosses; None when no solution follows it (a
    binary both 0 and 1, or a feature above its original and below it at once)."""
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
            return None
    farthest: Farthest = {}
    for var, value in fixed.items():
        if var not in crossings:
            continue
        j, crosses, far = crossings[var]
        if value != crosses:
            continue
        side = crosses  # a binary crossed at 1 lies above the original
        reached, was, at = farthest.get(j, (-1.0, side, var))
        if was != side:
            return None  # above the original and below it at once
        farthest[j] = (far, side, var) if far > reached else (reached, was, at)
    return farthest


def threshold_rows(formulation: Formulation, paths: dict[int, Path]) -> int:
    """Per tree and threshold that one of its leaves crosses farthest for a feature: the
    threshold crossed (its binary, or one minus it below the original) at least the sum of the
    tree's leaves that cross it or a farther one on its side (they pick at most one leaf, and
    each forces the crossing); returns how many rows were written.

    Each leaf's split rows bound it by the binaries of its own path, and a threshold's binary by
    the leaves under each split on it, one split at a time; in the LP relaxation a tree can then
    spread its one leaf over subtrees that cross a feature's thresholds under different splits,
    each within its own split's binary, and pay a fraction of the distance. These rows close
    that: on heloc's 100-tree forest (8 rows) they raise the LP relaxation's bound 8-30% and
    CP-SAT proves the optimum in fewer deterministic seconds (``docs/benchmarks/engines.md``).
    Valid at every solution, whatever the reach (a relation's trees and a scorecard's, which
    keep no paths, get none)."""
    milp = formulation.milp
    crossings = _crossings(formulation, {f.index for f in formulation.features})
    written = 0
    for leaves in formulation.leaves:
        formulation.check_stop()  # a tree at a time, as the trees were written
        groups: dict[tuple[int, int], list[tuple[float, int, int]]] = {}
        """(feature, side) -> (distance, threshold binary, leaf) of the leaves that cross it."""
        for leaf in leaves.values():
            if leaf not in paths or milp.upper[leaf] <= 0.0:
                continue
            for j, (far, side, var) in (_farthest(paths[leaf], crossings) or {}).items():
                groups.setdefault((j, side), []).append((far, var, leaf))
        for (_, side), crossed in groups.items():
            crossed.sort(key=lambda item: -item[0])
            under: list[int] = []
            for k, (far, var, leaf) in enumerate(crossed):
                under.append(leaf)
                if k + 1 < len(crossed) and crossed[k + 1][0] == far:
                    continue  # the same threshold's other leaves first
                if len(under) < 2:  # one leaf: its own split rows say as much
                    continue
                if side == 1:  # var >= sum(under)
                    milp.row({var: 1.0, **dict.fromkeys(under, -1.0)}, 0.0, math.inf)
                else:  # 1 - var >= sum(under)
                    milp.row({var: 1.0, **dict.fromkeys(under, 1.0)}, -math.inf, 1.0)
                written += 1
    return written


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


def leaf_rows(formulation: Formulation, paths: dict[int, Path]) -> None:
    """The leaves of ``paths`` out of reach fixed at 0 (:func:`bound_leaves`) and, unless
    :data:`THRESHOLD_ROWS` is off, the rows of the thresholds they cross (:func:`threshold_rows`)."""
    bound_leaves(formulation, paths)
    if THRESHOLD_ROWS:
        threshold_rows(formulation, paths)


__all__ = ["Path", "bound_leaves", "crossing", "leaf_costs", "leaf_rows", "threshold_rows"]
