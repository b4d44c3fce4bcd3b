"""counterplan's search engines: local-search phases, termination, events, the solver manager.

The engines know a problem only through :mod:`counterplan.solver.core.protocol`;
:mod:`counterplan.solver.counterfactual` bridges them to :mod:`counterplan.planning`.

Names load on first use (PEP 562), as in :mod:`planning`, so importing one engine module
does not load them all.
"""

from __future__ import annotations

from counterplan.planning._lazy import attach_stub
from counterplan.solver import phases as _phases  # noqa: F401 - registers the phase types counterplan ships

__getattr__, __dir__, __all__ = attach_stub(__name__, __file__)
