"""counterplan: counterfactual explanations for tabular models, solved as a constraint-planning problem.

The front door: ``import counterplan`` gives what a user needs from the layers below (at most 40
names, listed once in ``__init__.pyi``), ``python -m counterplan`` is the ``counterplan`` command.
It defines nothing of its own, and like the layers it loads each name on first use, so
``python -m counterplan --help`` answers at once.

>>> import counterplan
>>> spec = counterplan.ProblemSpec.from_keywords(immutable=["age"], max_changed_features=2)
>>> explainer = counterplan.Explainer(model, data, target="approved", spec=spec)  # build once
>>> result = explainer.explain(row, seed=0)                                        # explain many
>>> results = explainer.explain_batch("rejected")          # a DataFrame, one row per row
>>> problem = counterplan.CounterfactualProblem.from_dataframe(data, row, model, target="approved")
>>> result = counterplan.explain(problem, seed=0)          # one problem, built by hand

The layers are subpackages: ``counterplan.planning`` (the domain), ``counterplan.solver`` (the
engines), ``counterplan.server`` (command line and gRPC service); ``counterplan.demo`` is the
embedded demo.
"""

from __future__ import annotations

from counterplan.planning._lazy import attach_stub

__getattr__, __dir__, __all__ = attach_stub(__name__, __file__)
