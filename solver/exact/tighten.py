"""A goal row over leaves, one of each group 1 (a scorecard's bins), tightened before the solver sees it.

A scorecard's goal is a sum of one contribution per variable: ``lower <= sum_g a_g,l x_g,l <=
upper``, the ``x`` of each group (a variable's bins, a tree's leaves) summing to 1. Written as
it is, a card whose points span 1e9 and 1 asks the solver to tell 1 point from a binary at
``1e-9``: inside its integrality and feasibility tolerances (1e-6, relative), so HiGHS and SCIP
returned answers 10 points short of the goal (rejected by the real model), called programs with
an answer infeasible, and, after the retries' wider margins (relative to a bound near 4e9:
400,000 points), proved a worse answer optimal (fuzzing). Three steps that keep every integer
solution, exactly:

- a leaf no choice of the other groups can bring within the bounds is fixed at 0 (to a fixed
  point: each fixing narrows the others' reach);
- each bound gets a row of its own, each group shifted by its least contribution for the lower
  bound (by its largest for the upper), the constant moved to the bound: a range's other end no
  longer puts 1e9 on the right side of the row that needs a point's precision;
- a coefficient beyond what its bound needs is cut to it (a leaf that alone reaches ``lower``
  counts as ``lower``): no coefficient exceeds the row's own scale.

Pruning keeps a slack of 1e-12 of the row's magnitude, so rounding never fixes a leaf a valid
answer needs; the answer is checked through the real model as always.
"""

from __future__ import annotations

from collections.abc import Sequence

from counterplan.solver.exact.milp import INF, Expr, Milp

SLACK = 1e-12
"""Relative to the row's magnitude: a leaf is fixed at 0 only when it misses a bound by more."""


def tightened_row(milp: Milp, groups: Sequence[Sequence[int]], terms: Expr, lower: float, upper: float) -> None:
    """Write ``lower <= terms <= upper``, tightened as the module says when every term is a leaf
    of ``groups`` (each group's variables sum to 1); else as it is."""
    member = {v for leaves in groups for v in leaves}
    if not terms or any(v not in member for v in terms):
        milp.row(terms, lower, upper)
        return
    values = [{v: terms.get(v, 0.0) for v in leaves if milp.upper[v] > 0.0} for leaves in groups]
    magnitude = max([1.0, *(abs(b) for b in (lower, upper) if b not in (-INF, INF))])
    slack = SLACK * (magnitude + sum(max(abs(a) for a in group.values()) for group in values if group))
    _prune(milp, values, lower, upper, slack)
    if not all(values):  # no leaf of a group can meet the goal: the program is infeasible as it is
        milp.row(terms, lower, upper)
        return
    if lower != -INF:
        _at_least(milp, values, lower, slack)
    if upper != INF:
        _at_most(milp, values, upper, slack)


def _prune(milp: Milp, values: list[dict[int, float]], lower: float, upper: float, slack: float) -> None:
    """Fix at 0 (and drop from ``values``) every leaf that misses a bound by more than ``slack``
    whatever the other groups choose, until none does."""
    while all(values):
        least = [min(group.values()) for group in values]
        most = [max(group.values()) for group in values]
        low_total, high_total = sum(least), sum(most)
        dropped = [
            (g, v)
            for g, group in enumerate(values)
            for v, a in group.items()
            if a + high_total - most[g] < lower - slack or a + low_total - least[g] > upper + slack
        ]
        if not dropped:
            return
        for g, v in dropped:
            del values[g][v]
            milp.upper[v] = 0.0


def _at_least(milp: Milp, values: list[dict[int, float]], lower: float, slack: float) -> None:
    """``sum >= lower``: each group shifted by its least contribution (all at least 0), and a
    coefficient beyond what the bound needs cut to it (no row when every choice is within
    ``slack`` of the bound: the shift's rounding, 5e-15, made a row that forced a leaf)."""
    least = [min(group.values()) for group in values]
    low = lower - sum(least)
    if low <= slack:
        return  # every choice left meets the lower bound
    row: Expr = {}
    for g, group in enumerate(values):
        for v, a in group.items():
            coefficient = min(a - least[g], low)
            if coefficient != 0.0:
                row[v] = coefficient
    milp.row(row, low, INF)


def _at_most(milp: Milp, values: list[dict[int, float]], upper: float, slack: float) -> None:
    """``sum <= upper``: :func:`_at_least` of the negated contributions, ``sum(-a) >= -upper``
    (each group shifted by its largest contribution, a coefficient below what the bound needs cut
    to it; negation is exact, so the row is the mirror's to the bit)."""
    _at_least(milp, [{v: -a for v, a in group.items()} for group in values], -upper, slack)
