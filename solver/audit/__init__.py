"""Recourse audits: who among many rows can get a different decision, at what cost, by group,
with a proof where there is none (:func:`counterplan.solver.audit.audit`).

The audit sits above the explainer and the batch: it runs the bulk engine over the rows, asks the
exact engine to prove "no recourse" for the rows left without an answer, and sums the records up
by group (:mod:`counterplan.solver.audit.stats`) into an :class:`AuditReport`.
"""

from __future__ import annotations

from counterplan.planning._lazy import attach_stub

# Bound now, not on first use: the function shares its name with its module, and importing the
# module by name (the server's Audit call, the command line) sets the package's attribute to the
# module, which a lazy lookup never replaces: ``from counterplan.solver.audit import audit`` would
# then give a module.
from counterplan.solver.audit.audit import audit as audit

__getattr__, __dir__, __all__ = attach_stub(__name__, __file__)
