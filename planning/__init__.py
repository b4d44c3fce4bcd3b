"""counterplan's planning domain: what a counterfactual problem is and how a candidate scores.

``import counterplan.planning`` loads numpy, pandas, pydantic and scikit-learn only; it never
imports the solver, the server, grpc or optuna.

Names load on first use (PEP 562), so ``import counterplan.planning.errors`` or the command line's
``--help`` does not pay for scikit-learn and pandas; ``from counterplan.planning import X`` works as before.
"""

from __future__ import annotations

from counterplan.planning._lazy import attach_stub

__getattr__, __dir__, __all__ = attach_stub(__name__, __file__)
