"""What a model is made of, read once, for every engine that needs to look inside it.

Three consumers read a fitted model's structure: the fast path of model calls
(:mod:`counterplan.planning.fast_path`), the exact engine's encoders (:mod:`counterplan.solver.exact`)
and local search's split values (:mod:`counterplan.planning.structure.splits`). Each used to carry its
own pipeline walker, tree reader and cache, and the copies drifted apart (a selector one understood
crashed the other). Here each concept exists once, after gurobi-machinelearning's predictor
registry:

* :mod:`~counterplan.planning.structure.pipeline`: one scikit-learn pipeline walker, describing each
  column the final estimator reads in neutral terms (:mod:`~counterplan.planning.structure.columns`);
* :mod:`~counterplan.planning.structure.trees`: one tree-ensemble reader (scikit-learn, XGBoost, LightGBM)
  into plain arrays;
* :mod:`~counterplan.planning.structure.cache`: one per-estimator memo with one refit detector;
* :mod:`~counterplan.planning.structure.kind`: what kind of model an estimator is.

What is not understood is refused by name with
:class:`~counterplan.planning.structure.errors.NotEncodableError`, never with a stray ``TypeError``.
Nothing here imports the solver; XGBoost and LightGBM are read through their estimators' own
methods, never imported.
"""
