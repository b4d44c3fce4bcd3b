"""Every plan of a population applied step by step to the original state, as array operations.

At step t, the plans whose t-th action is a are applied together with one call of
:func:`counterplan.planning.actions.apply`, so a generation costs (plan length x actions) numpy passes, never
one Python call per plan. A step that breaks a condition, leaves the domain or changes nothing
is counted as a violation and leaves the state as it was (the paper's constraint g3); its cost
is not added. Computed features (learned relations) follow each step through ``settle``, so the
next action's conditions and costs read them as the model will. What comes out is what the
search and the answer need: the state after every step, each step's cost, the total, the
violations, and per feature the number of steps that changed it (the paper's per-feature
sparsity objectives).

Heavy formulas (long efforts, conditions and consequences over many actions) make a generation's
unrolling cost far more than its one model call, so ``should_stop`` is asked before every action
pass: a search that must stop (its deadline, a cancel, a shutdown) raises :class:`Interrupted`
there instead of finishing a generation nobody will read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from counterplan.planning.actions import Action, CostGraph, apply
from counterplan.planning.space import FeatureSpace, FloatMatrix
from counterplan.solver.plans.genome import Decoded

IntMatrix = npt.NDArray[np.intp]


class Interrupted(Exception):  # noqa: N818 - a control-flow signal, not an error
    """The search must stop in the middle of a generation: its work so far is dropped."""


@dataclass(frozen=True)
class Unrolled:
    """A population's plans played out from the original state."""

    states: FloatMatrix
    """``(n, T + 1, features)``: the state before the first step, then after each step (a plan
    shorter than T keeps its last state)."""
    step_costs: FloatMatrix
    """``(n, T)``: each step's cost (0 past the plan's end and for a violating step)."""
    violations: IntMatrix
    """Per plan: steps that broke a condition, left the domain or changed nothing."""
    changes: IntMatrix
    """``(n, features)``: per plan and feature, the steps that changed it."""
    unpriced: npt.NDArray[np.bool_]
    """``(n, T)``: the steps whose cost is not a finite number (an infinite or NaN effort or tau):
    counted among the violations too, kept apart so the answer can say why."""

    @property
    def final(self) -> FloatMatrix:
        """The state each plan ends in."""
        return np.asarray(self.states[:, -1, :])

    @property
    def cost(self) -> FloatMatrix:
        """Each plan's total cost (infinite where the steps' costs add up past the largest float:
        the search refuses such a plan, and says why, without numpy's overflow warning)."""
        with np.errstate(over="ignore"):
            return np.asarray(self.step_costs.sum(axis=1))


def unroll(
    decoded: Decoded,
    actions: list[Action],
    graph: CostGraph,
    space: FeatureSpace,
    start: FloatMatrix,
    *,
    settle: Callable[[FloatMatrix], FloatMatrix] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> Unrolled:
    """Play every plan of ``decoded`` from ``start`` (the encoded original row); ``settle`` sets
    the computed features of the states after each step (``LearnedRelations.apply``);
    ``should_stop`` is asked before each action's pass (:class:`Interrupted` when it says stop)."""
    n, steps = decoded.order.shape
    state = np.repeat(start.reshape(1, -1), n, axis=0)
    states = np.empty((n, steps + 1, state.shape[1]))
    states[:, 0] = state
    step_costs = np.zeros((n, steps))
    violations = np.zeros(n, dtype=np.intp)
    changes = np.zeros(state.shape, dtype=np.intp)
    unpriced = np.zeros((n, steps), dtype=bool)
    for t in range(steps):
        column = decoded.order[:, t]
        for a, action in enumerate(actions):
            rows = np.flatnonzero(column == a)
            if rows.size == 0:
                continue
            if should_stop is not None and should_stop():
                raise Interrupted
            result = apply(action, graph, space, state[rows], decoded.values[rows, a])
            if settle is not None:
                result = replace(result, after=settle(result.after))
            changes[rows] += (result.after != state[rows]).astype(np.intp)
            step_costs[rows, t] = np.where(result.ok, result.cost, 0.0)
            violations[rows] += ~result.ok
            unpriced[rows, t] = ~result.priced
            state[rows] = result.after
        states[:, t + 1] = state
    return Unrolled(states=states, step_costs=step_costs, violations=violations, changes=changes, unpriced=unpriced)
