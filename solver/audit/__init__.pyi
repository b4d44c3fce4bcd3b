"""The audit package's public names, each with the module that defines it: the one listing.

Type checkers read this stub; at run time ``__init__.py`` reads it too and loads each name on first
use (:func:`counterplan.planning._lazy.attach_stub`)."""

from counterplan.solver.audit.report import (
    AuditReport as AuditReport,
    AuditRule as AuditRule,
)
from counterplan.solver.audit.runner import (
    AuditOptions as AuditOptions,
    audit as audit,
    run_audit as run_audit,
)
