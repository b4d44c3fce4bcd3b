"""The trust region in the program (CE-OCL's data manifold): the answer is a convex combination
of the reference rows, up to the slack.

One weight ``lambda_i`` in [0, 1] per reference point of :class:`counterplan.planning.trust_region.TrustRegion`,
``sum lambda = 1``, and per column of the region's scaled space (a number's ``(x - low) / range``,
a category's indicator at weight 1/2)::

    sum_i lambda_i r_ij = column_j(x) + s_j

with ``s = 0`` for the plain hull, else ``-u_j <= s_j <= u_j`` and ``sum u_j <= slack``. The
column's constant is folded into the weights' coefficients through ``sum lambda = 1``, so a column
of an immutable feature (a constant) that no reference row matches leaves a row HiGHS proves
infeasible rather than an empty one. The slack in force is the region's: the settings', or the
enlarged one every engine scores against (see :mod:`counterplan.planning.trust_region`), so the program's
answers are inside for :meth:`~counterplan.planning.trust_region.TrustRegion.inside` too.

Size: ``reference_rows`` continuous weights, one dense row per column of the scaled space (two and
a slack variable each when ``slack > 0``) and the two sums. What it costs HiGHS, measured on a
busy 2-core machine (load average about 5):

- 600 rows, 4 features (one categorical), 25 boosted trees: 268 variables and 663 rows, 0.25 s,
  without the region; with the plain hull of the 298 approved rows 566 variables and 670 rows,
  0.5 s; with its 20 nearest rows 288 variables, 0.2 s;
- the demo loan table (1,500 rows, 11 features, 21 scaled columns), boosting: 895 variables,
  2.4 s and 1 node without the region; the plain hull of 500 (of 560) approved rows: 1,395
  variables, 32 s, 356 nodes; with slack 0.2: 17 s, 10 nodes; the 50 nearest rows: 17 s, 160
  nodes; 200 subsampled rows: 81 s, 2,853 nodes. The hull binds the answer and weakens the
  relaxation, and node counts vary from one point set to another (fewer rows were slower here),
  so give the exact phase a time limit on large hulls.
"""

from __future__ import annotations

import structlog

from counterplan.planning.problem import CounterfactualProblem
from counterplan.planning.structure.errors import NotEncodableError
from counterplan.planning.trust_region import ONE_HOT
from counterplan.solver.exact.milp import INF, Expr, add
from counterplan.solver.exact.program import Formulation, Lin

log = structlog.get_logger(__name__)


def check_trust_region(problem: CounterfactualProblem) -> None:
    """Refuse a region the program cannot state for this problem, naming why."""
    region = problem.trust_region
    if region is None:
        return
    if region.space.names != problem.space.names:
        raise NotEncodableError("the trust region was built for other features")


def hull_columns(formulation: Formulation) -> list[Lin]:
    """Each column of the region's scaled space as a linear expression of the program's variables."""
    region = formulation.problem.trust_region
    assert region is not None
    out: list[Lin] = []
    for column in region.columns:
        f = formulation.features[column.feature]
        if column.category is None:
            terms, constant = f.value
            scale = float(region.scale[column.feature])
            offset = float(region.offset[column.feature])
            out.append(({v: c / scale for v, c in terms.items()}, (constant - offset) / scale))
            continue
        if f.categories is None:
            raise NotEncodableError(f"feature {column.feature}: a category without indicators")
        indicator_terms, indicator_constant = f.categories[column.category][1]
        out.append(({v: ONE_HOT * c for v, c in indicator_terms.items()}, ONE_HOT * indicator_constant))
    return out


def encode_trust_region(formulation: Formulation) -> None:
    """Add the region's hull rows to the program (nothing without a region)."""
    problem = formulation.problem
    region = problem.trust_region
    if region is None:
        return
    milp = formulation.milp
    points = region.points
    weights = [milp.var(f"hull/lambda[{i}]", 0.0, 1.0) for i in range(region.reference_rows)]
    milp.row(dict.fromkeys(weights, 1.0), 1.0, 1.0)
    slack = region.slack
    budget: Expr = {}
    for j, (terms, constant) in enumerate(hull_columns(formulation)):
        # sum_i lambda_i (r_ij - constant) - terms = s_j
        row: Expr = {w: float(points[i, j]) - constant for i, w in enumerate(weights)}
        row = add(row, terms, -1.0)
        if slack == 0.0:
            milp.row(row, 0.0, 0.0)
            continue
        u = milp.var(f"hull/slack[{j}]", 0.0, slack)
        budget[u] = 1.0
        milp.row(add(row, {u: -1.0}), -INF, 0.0)
        milp.row(add(row, {u: 1.0}), 0.0, INF)
    if budget:
        milp.row(budget, -INF, slack)
    if region.note:
        log.info("trust region enlarged", note=region.note)


__all__ = ["check_trust_region", "encode_trust_region", "hull_columns"]
