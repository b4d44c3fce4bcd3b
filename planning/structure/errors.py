"""The one refusal of model structure: a part of a model (or of the problem) that cannot be read.

It lives in the planning layer because the pipeline walker and the tree reader raise it, and every
consumer relies on it: the fast path keeps the real pipeline, the exact engine refuses the problem
naming the part, and ``engine="auto"`` falls back to local search. A ``ValueError`` too, so callers
that catch bad input catch it.
"""

from __future__ import annotations

from counterplan.planning.errors import CounterplanError


class NotEncodableError(CounterplanError, ValueError):
    """A model, a step of its pipeline, or the problem cannot be read or encoded; the message
    names what (the step, the transformer, the estimator, the column) and why."""


__all__ = ["NotEncodableError"]
