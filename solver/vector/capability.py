"""Where the vectorised engine can go, and why not elsewhere: one check with a reason.

The engine scores a block's candidates with one array program that knows only what every
instance of the block shares (the model, the goals, the grids, the distance's scales) plus each
instance's own original row and its layout's domains. So it runs a problem whose score is that program: no relations
(computed features), plausibility, trust region, scorecard objective, allowed-value lists,
monotone rules or missing originals, the same features, grids and scales as the block's first problem
(each instance's domains may differ: :func:`same_program`), one answer, the local engine of the
default phases. Everything else keeps the threads-sharing-calls path
(:mod:`counterplan.solver.batch.block`), and the reason is said.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from counterplan.planning.features import CategoricalFeature
from counterplan.planning.problem import CounterfactualProblem
from counterplan.planning.space import FeatureSpace


def problem_refusal(problem: CounterfactualProblem) -> str | None:
    """Why one problem cannot be searched by the vectorised engine, or None when it can."""
    if problem.relations is not None:
        return "relations compute features from others"
    if problem.plausibility is not None:
        return "a plausibility model judges the candidates"
    if problem.trust_region is not None:
        return "a trust region judges the candidates"
    if problem.scorecard_distance is not None:
        return "the scorecard distance is not a per-feature sum"
    space = problem.space
    if space.allowed:
        return "allowed values are checked per candidate"
    if space.missing.any():
        return "the row has missing values"
    if (space.monotone != 0.0).any():
        return "monotone rules narrow the domains per row"
    return None


LAYOUT_FIELDS = ("domain_lower", "domain_upper", "lower", "upper", "grid_lower", "grid_upper", "integral")
"""What may differ between the instances of one program (a value beyond the data's range widens a
row's domain, an imputed decimal makes a whole-number column a decimal one): the search holds
these per layout and each instance indexes its own."""


def same_program(problem: CounterfactualProblem, reference: CounterfactualProblem) -> str | None:
    """Why ``problem`` cannot share a block's program with ``reference``, or None when it can
    (its domains and whole-number kinds may differ: :data:`LAYOUT_FIELDS`)."""
    a, b = problem.space, reference.space
    if a.names != b.names:
        return "the features differ"
    for name in ("costs", "step", "grid_scale"):
        if not np.array_equal(getattr(a, name), getattr(b, name)):
            return f"the domains differ ({name})"
    for name in ("mutable", "graded", "nominal", "rounded"):
        if not np.array_equal(getattr(a, name), getattr(b, name)):
            return f"the features' kinds differ ({name})"
    if _categories(a) != _categories(b):
        return "the categories differ (a rule on a category keeps each row's own value)"
    if not np.array_equal(problem.scales, reference.scales) or problem.distance != reference.distance:
        return "the distance differs"
    if problem.goal_text != reference.goal_text or problem.max_changed_features != reference.max_changed_features:
        return "the goals differ"
    return None


def _categories(space: FeatureSpace) -> list[list[Any]]:
    """Each categorical column's categories as the model takes them, by code. The block's model
    calls decode every instance's codes with one space, so instances must agree on what each
    code means: an allowed or forbidden category keeps each row's own original, and two rows
    whose originals differ (codes 0-2 as a, c, d for one, b, c, d for the other) were scored as
    each other's categories (fuzzing: a valid answer reported not found, and another answer in
    another batch)."""
    return [list(f.model_values()) for f in space.features if isinstance(f, CategoricalFeature)]


def same_layout(problem: CounterfactualProblem, reference: CounterfactualProblem) -> bool:
    """Whether two problems of one program have the same domains and kinds (:data:`LAYOUT_FIELDS`)."""
    return all(np.array_equal(getattr(problem.space, n), getattr(reference.space, n)) for n in LAYOUT_FIELDS)
