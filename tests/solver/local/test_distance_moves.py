"""Moves sized in the distance's units: local steps per feature, split jumps weighted by their cost."""

from __future__ import annotations

import numpy as np

from counterplan.planning import CounterfactualProblem
from counterplan.solver.local.config import MoveSelectorConfig
from counterplan.solver.local.moves import MoveSelector


def _steps_of_x(problem: CounterfactualProblem, config: MoveSelectorConfig, unit: np.ndarray | None) -> np.ndarray:
    space = problem.space
    selector = MoveSelector(config, space, unit)
    batch = selector.sample(space.original.copy(), 4000, np.random.default_rng(0))
    moved = batch.touched[:, 0]
    return np.abs(batch.candidates[moved, 0] - space.original[0])


def test_local_steps_are_sized_in_units_of_the_distance(linear_problem: CounterfactualProblem) -> None:
    """x spans 10; say one unit of the distance moves it 0.05: its local steps stay within 4 units
    (0.2), not 10 % of its range (1.0)."""
    only_local = {"pair_change_weight": 0, "revert_weight": 0, "toward_original_weight": 0, "shrink_weight": 0}
    config = MoveSelectorConfig(local_step_ratio=1.0, split_jump_ratio=0.0, distance_step_share=1.0, **only_local)
    unit = np.full(linear_problem.space.n_features, 0.05)
    steps = _steps_of_x(linear_problem, config, unit)
    assert steps.size > 100 and steps.max() <= 0.2 + 1e-9 and steps.min() < 0.01
    by_range = _steps_of_x(linear_problem, config.model_copy(update={"distance_step_share": 0.0}), unit)
    assert by_range.max() > 0.5  # the old sizing
    mixed = _steps_of_x(linear_problem, config.model_copy(update={"distance_step_share": 0.25}), unit)
    assert 0.1 < (mixed > 0.2).mean() < 0.9  # the default: a quarter by distance


def test_split_jumps_prefer_the_cheap_thresholds(linear_problem: CounterfactualProblem) -> None:
    """Of 20 thresholds of x (0.5 to 10), a jump drawing 3 lands nearer the original (x = 0.5) on
    average than a uniform one."""
    space = linear_problem.space.with_split_values({0: np.linspace(0.5, 10.0, 20)})
    problem = CounterfactualProblem.__new__(CounterfactualProblem)
    problem.space = space  # type: ignore[misc]
    only_jumps = {"pair_change_weight": 0, "revert_weight": 0, "toward_original_weight": 0, "shrink_weight": 0}
    config = MoveSelectorConfig(split_jump_ratio=1.0, **only_jumps)
    weighted = _steps_of_x(problem, config.model_copy(update={"split_jump_draws": 3}), None)
    uniform = _steps_of_x(problem, config, None)  # the default: uniform
    assert weighted.mean() < 0.7 * uniform.mean()
