"""The fast evaluator of a final estimator made of trees, or None.

Boosted trees compile to bit masks (:mod:`counterplan.planning.fast_path.quickscorer`). A random
forest, extra trees or a decision tree is called tree by tree through scikit-learn's own traversal
(:class:`BaggedTrees`), without the per-call validation and thread-pool dispatch. Anything else
keeps the estimator's own predict.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from counterplan.planning.fast_path.quickscorer import TreePredictor, compile_boosting
from counterplan.planning.space import FloatMatrix
from counterplan.planning.structure.kind import BAGGED_TREES, kind_name

logger = logging.getLogger(__name__)


class BaggedTrees:
    """A random forest or extra-trees ensemble (or a single decision tree), called tree by tree
    through scikit-learn's own traversal with ``check_input=False``.

    What the estimator's ``predict_proba`` / ``predict`` costs besides the trees is validating the
    input (a DataFrame of hundreds of columns takes milliseconds), dispatching every tree through
    joblib and, on the real path, building that DataFrame; this skips them. The trees' outputs are
    summed in the estimators' order and divided by their count, exactly as the forest does with
    ``n_jobs=None``, so the result is bit-identical (with ``n_jobs`` set, the forest's own order
    varies and the probe check's tolerance applies).
    """

    def predict(self, X: FloatMatrix, estimator: Any) -> FloatMatrix:
        """Class probabilities (a classifier) or predictions (a regressor) of ``estimator`` for
        every row. The trees are read from the estimator at every call, never kept: a forest refit
        in place (``warm_start``) is seen, and the path holds no reference to the model."""
        data = np.ascontiguousarray(X, dtype=np.float32)
        trees = list(getattr(estimator, "estimators_", [estimator]))
        outputs = int(getattr(estimator, "n_outputs_", 1))
        if hasattr(estimator, "classes_"):
            out = np.zeros((data.shape[0], int(np.atleast_1d(estimator.n_classes_)[0])), dtype=np.float64)
            for tree in trees:
                out += tree.predict_proba(data, check_input=False)
        else:
            out = np.zeros((data.shape[0], outputs) if outputs > 1 else data.shape[0], dtype=np.float64)
            for tree in trees:
                out += tree.predict(data, check_input=False)
        out /= len(trees)
        return out


def compile_trees(estimator: Any) -> TreePredictor | BaggedTrees | None:
    """A faster evaluator for a fitted tree ensemble, or None when it cannot be built.

    ``HistGradientBoosting*`` and ``GradientBoosting*`` models compile to a :class:`TreePredictor`
    (see :func:`~counterplan.planning.fast_path.quickscorer.compile_boosting` for what gives None);
    random forests, extra trees and decision trees with one classification output (any number of
    regression outputs) are :class:`BaggedTrees`.
    """
    kind = kind_name(estimator)
    if kind in BAGGED_TREES:
        if hasattr(estimator, "classes_") and int(getattr(estimator, "n_outputs_", 1)) != 1:
            return None  # a multi-output classifier: the adapters refuse it anyway
        return BaggedTrees()
    try:
        return compile_boosting(estimator)
    except (AttributeError, TypeError, ValueError, IndexError) as exc:  # a fitted layout we do not know
        logger.debug("fast path: no tree evaluator for %s: %s", kind, exc)
    return None


__all__ = ["BaggedTrees", "compile_trees"]
