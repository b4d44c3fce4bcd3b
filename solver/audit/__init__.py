"""Recourse audits: who among many rows can get a different decision, at what cost, by group,
with a proof where there is none (:func:`counterplan.solver.audit.audit`).

The audit sits above the explainer and the batch: it runs the bulk engine over the rows, asks the
exact engine to prove "no recourse" for the rows left without an answer, and sums the records up
by group (:mod:`counterplan.solver.audit.stats`) into an :class:`AuditReport`.
"""

from __future__ import annotations

from counterplan.planning._lazy import attach_stub

__getattr__, __dir__, __all__ = attach_stub(__name__, __file__)
