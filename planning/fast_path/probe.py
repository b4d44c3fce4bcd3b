"""A compiled fast path, and its check against the real pipeline before it is used.

The compiled preprocessing and trees are trusted only after they reproduce the real pipeline on
probe rows built from the space (the original, every category of every nominal column, numbers at
their domain bounds, the missing code where the space has one): the preprocessing exactly, the
predictions within ``rtol=1e-9, atol=1e-12``. The same tolerance is the debug mode's
(:func:`check_predictions`, every fast call compared with the real pipeline).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from counterplan.planning.errors import ModelAdapterError
from counterplan.planning.fast_path.inputs import FastInputs, build_inputs
from counterplan.planning.fast_path.quickscorer import TreePredictor
from counterplan.planning.fast_path.trees import BaggedTrees, compile_trees
from counterplan.planning.features import BooleanFeature, CategoricalFeature
from counterplan.planning.space import FeatureSpace, FloatMatrix
from counterplan.planning.structure.errors import NotEncodableError
from counterplan.planning.structure.kind import final_estimator, pipeline_steps

logger = logging.getLogger(__name__)

Method = Literal["predict_proba", "predict"]
Trees = TreePredictor | BaggedTrees | None

CHECK_RTOL = 1e-9
CHECK_ATOL = 1e-12
"""How close a fast prediction must be to the real pipeline's (in the probe check and in debug mode)."""

UNKNOWN: Any = object()
"""Trees not compiled yet (None means: compiled, and there is no fast evaluator)."""


@dataclass(frozen=True)
class FastPath:
    """Compiled preprocessing (None: the estimator takes the array, ``FeatureSpace.to_array``) and how the final
    estimator is called: a compiled forest, or its own ``method`` on the compiled input.

    It holds no reference to the model (the model is given at every call), so a cache of paths
    keyed by the model never keeps the model alive.
    """

    inputs: FastInputs | None
    trees: Trees
    method: Method

    def __call__(self, X: FloatMatrix, space: FeatureSpace, model: Any) -> Any:
        """The final estimator's answer for the encoded candidates ``X``."""
        data = space.to_array(X) if self.inputs is None else self.inputs.transform(X, space.missing_code)
        if isinstance(self.trees, BaggedTrees):
            return self.trees.predict(data, final_estimator(model))
        if self.trees is not None:
            return self.trees.predict(data)
        return getattr(final_estimator(model), self.method)(data)


def compile_fast_path(
    model: Any,
    space: FeatureSpace,
    input_kind: str,
    method: Method,
    trees: Trees = UNKNOWN,
) -> FastPath | None:
    """The fast path of ``model.<method>`` for candidates of ``space``, checked, or None.

    ``input_kind`` is what the real path gives the model (``"dataframe"``: decoded columns,
    ``"array"``: :meth:`~counterplan.planning.space.FeatureSpace.to_array`); ``trees``, when
    given, is the final estimator's compiled forest. The path must reproduce the real pipeline on
    probe rows (every category, bounds, missing values where the space has them): its
    preprocessing exactly, its predictions within ``rtol=1e-9, atol=1e-12``; anything else gives None.
    """
    estimator = final_estimator(model)
    decoded = input_kind == "dataframe"
    try:
        inputs = build_inputs(model, space, decoded) if pipeline_steps(model) or decoded else None
    except NotEncodableError as exc:
        logger.debug("fast path: %s", exc)
        return None
    if trees is UNKNOWN:
        trees = compile_trees(estimator)
    if trees is not None and hasattr(estimator, "classes_") and method != "predict_proba":
        trees = None  # the forest gives probabilities; a labels-only call wants labels
    if trees is None and (inputs is None or hasattr(estimator, "feature_names_in_")):
        return None  # nothing to gain, or the estimator wants a DataFrame (it would warn on an array)
    path = FastPath(inputs, trees, method)
    return path if agrees(path, model, space, input_kind) else None


def probe_rows(space: FeatureSpace) -> FloatMatrix:
    """Candidates that exercise a compiled plan: the original first, then every category of every
    nominal column, numbers at their domain bounds, and the missing code where the space has one."""
    counts = [_category_count(f) for f in space.features]
    n = max(3, *counts) + 2
    rows = np.tile(space.original, (n, 1))
    for j, count in enumerate(counts):
        if space.nominal[j]:
            if count:
                rows[1:, j] = np.arange(n - 1) % count
        else:
            rows[1:, j] = np.resize([space.domain_lower[j], space.domain_upper[j], space.original[j]], n - 1)
        if space.missing[j]:
            rows[-1, j] = space.missing_code[j]
    return rows


def _category_count(feature: Any) -> int:
    if isinstance(feature, CategoricalFeature):
        return len(feature.domain)
    return 2 if isinstance(feature, BooleanFeature) else 0


def agrees(path: FastPath, model: Any, space: FeatureSpace, input_kind: str) -> bool:
    """Does ``path`` reproduce the real model on the probe rows?"""
    probe = probe_rows(space)
    steps = pipeline_steps(model)
    try:
        data = space.to_frame(probe) if input_kind == "dataframe" else space.to_array(probe)
        real_inputs = model[:-1].transform(data) if steps and len(steps) > 1 else data
        expected = getattr(final_estimator(model), path.method)(real_inputs)
        if path.inputs is not None:
            fast_inputs = path.inputs.transform(probe, space.missing_code)
            if not _same_matrix(fast_inputs, real_inputs):
                logger.debug("fast path: the compiled preprocessing differs from the pipeline's")
                return False
        got = path(probe, space, model)
    except Exception as exc:  # any failure means: keep the real pipeline
        logger.debug("fast path: the probe failed: %s", exc)
        return False
    return _close(got, expected)


def _same_matrix(fast: FloatMatrix, real: Any) -> bool:
    """Are the values of ``fast`` exactly what the estimator gets? (The estimator converts its
    input to float itself: an object matrix of numbers and booleans is fine. A float32 matrix
    would give other predictions; the prediction check catches that.)"""
    if hasattr(real, "toarray"):
        real = real.toarray()
    try:
        array = real.to_numpy(dtype=np.float64) if hasattr(real, "columns") else np.asarray(real, dtype=np.float64)
    except (TypeError, ValueError):
        return False
    return fast.shape == array.shape and bool(np.array_equal(fast, array, equal_nan=True))


def _close(got: Any, expected: Any) -> bool:
    got_array, expected_array = np.asarray(got), np.asarray(expected)
    if got_array.shape != expected_array.shape:
        return False
    if got_array.dtype.kind not in "fiub" or expected_array.dtype.kind not in "fiub":
        return bool(np.array_equal(got_array, expected_array))
    return bool(np.allclose(got_array, expected_array, rtol=CHECK_RTOL, atol=CHECK_ATOL, equal_nan=True))


def check_predictions(fast: dict[str, FloatMatrix], reference: dict[str, FloatMatrix]) -> None:
    """Raise :class:`ModelAdapterError` unless every output of the fast path matches the reference
    (``rtol=1e-9, atol=1e-12``, and the same most likely class for class probabilities)."""
    for name, expected in reference.items():
        got = fast.get(name)
        if got is None or got.shape != expected.shape:
            shape = None if got is None else got.shape
            raise ModelAdapterError(name, f"the fast path gave shape {shape}, the pipeline {expected.shape}")
        close = np.allclose(got, expected, rtol=CHECK_RTOL, atol=CHECK_ATOL, equal_nan=True)
        same_class = expected.ndim != 2 or bool((np.argmax(got, axis=1) == np.argmax(expected, axis=1)).all())
        if not (close and same_class):
            difference = float(np.nanmax(np.abs(got - expected))) if got.size else 0.0
            raise ModelAdapterError(
                name,
                f"the fast path differs from the pipeline by up to {difference:.3g}"
                + ("" if same_class else " and predicts another class"),
            )


__all__ = ["FastPath", "Method", "agrees", "check_predictions", "compile_fast_path", "probe_rows"]
