"""What the exact engine reports about its run: the proof (status, bound, gap) and the program's size."""

from __future__ import annotations

from counterplan.solver.core.phase import PhaseReport


class ExactStatistics(PhaseReport):
    """What the exact engine proved (:mod:`counterplan.solver.exact.phase` fills it in)."""

    status: str
    """``optimal``, ``feasible``, ``infeasible``, ``no solution`` or ``not encodable``."""
    proven: bool
    """The optimum (or that no answer exists) is proven, and the answer verified by the model."""
    model: str = ""
    objective: float | None = None
    bound: float | None = None
    gap: float | None = None
    nodes: int = 0
    seconds: float = 0.0
    variables: int = 0
    constraints: int = 0
    verified: bool = False
    retries: int = 0
    reason: str = ""
    backend: str = ""
    """The MILP solver that ran: ``HiGHS 1.16.0 (highspy)``, ``SCIP 10.0.0 (OR-Tools 9.15)``."""
    answer_set: str = ""
    """When several answers were asked: the set program's status (empty when none ran)."""
    answer_set_reason: str = ""
    """Why the set has fewer answers than asked (``no 5 counterfactuals with at most 3 changes
    differ in their features``)."""
