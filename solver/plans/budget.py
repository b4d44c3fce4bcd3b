"""What a plan search will hold in memory, estimated before it starts.

A generation unrolls every plan of its population (and its elites: at most
:func:`~counterplan.solver.plans.search.generation_size` genomes) step by step from the original
(:mod:`~counterplan.solver.plans.unroll`): a ``genomes x (actions + 1) x features`` float64
array of states, then the applied copies and the final rows the model scores. That product is
what fills memory, so a server admits a plan search by it beside the solves it runs, as it admits
a solve by :func:`counterplan.solver.core.budget.estimate_bytes`: the sizing is the solver's,
the server only compares it with its limit.
"""

from __future__ import annotations

from counterplan.solver.plans.search import PlanConfig, generation_size

BYTES_PER_STATE_VALUE = 8 * 4
"""A generation's states (genomes x (actions + 1) x features) are held about four times over,
as float64: the states, the applied copies and the scored final rows."""


def estimate_bytes(config: PlanConfig, n_actions: int, n_features: int) -> int:
    """A plan search's memory, about: one generation's states, held a few times over."""
    return generation_size(config) * (n_actions + 1) * n_features * BYTES_PER_STATE_VALUE
