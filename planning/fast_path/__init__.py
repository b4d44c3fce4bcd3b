"""A fast path for model calls on scikit-learn pipelines: preprocessing as index arrays, trees as bit masks.

Why: a search spends its time in model calls, and a pipeline call costs milliseconds whatever the
row count. Most of it is overhead, not arithmetic: decoding the candidates into a DataFrame, the
``ColumnTransformer`` validating and splitting it, and (for ``HistGradientBoosting``) one Cython
call per tree. The fast path compiles, once per search-space encoding, what the pipeline does into
numpy operations on the encoded candidate matrix, from the model's structure as
:mod:`counterplan.planning.structure` reads it:

* :mod:`~counterplan.planning.fast_path.inputs` evaluates the walker's column descriptions: number
  columns through the scalers' own floating-point operations in their order, lookups on category
  codes as one gather, so the estimator's input is bit for bit the pipeline's;
* :mod:`~counterplan.planning.fast_path.quickscorer` compiles boosted trees into bit masks and
  evaluates all rows and trees at once (QuickScorer); :mod:`~counterplan.planning.fast_path.trees`
  picks the evaluator of a final estimator (QuickScorer, or bagged trees called one by one);
* :mod:`~counterplan.planning.fast_path.probe` checks a compiled path against the real pipeline
  on probe rows before it is used;
* :mod:`~counterplan.planning.fast_path.cache` keeps the checked paths per model and space encoding
  (all problems of one data set share them).

Anything not understood compiles to None and the caller keeps the real pipeline.
"""
