"""The exact engine's encoders, one per model family, behind one registry.

After gurobi-machinelearning's registered predictors: each family of estimators is encoded by one
module (:mod:`~counterplan.solver.exact.encoders.linear`, :mod:`~counterplan.solver.exact.encoders.trees`,
:mod:`~counterplan.solver.exact.encoders.network`), registered here under the estimators' class names
(the families of :mod:`counterplan.planning.structure.kind`) and loaded on first use. A whole model
that is not an estimator behind a pipeline (a credit scorecard) has its own entry
(:mod:`~counterplan.solver.exact.encoders.scorecard`); learned constraints reuse the estimators'
encoders (:mod:`~counterplan.solver.exact.encoders.relations`).

An estimator no encoder is registered for is refused by name with
:class:`~counterplan.planning.structure.errors.NotEncodableError`, so ``engine="auto"`` falls back to
local search and ``engine="exact"`` says why. Adding a family is one encoder module and one line here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from counterplan.planning.structure.errors import NotEncodableError
from counterplan.planning.structure.kind import (
    LINEAR_CLASSIFIERS,
    LINEAR_REGRESSORS,
    NETWORKS,
    ONNX_LINEAR_CLASSIFIERS,
    ONNX_LINEAR_REGRESSORS,
    TREE_ENSEMBLES,
    kind_name,
)
from counterplan.solver.exact.program import Formulation, ModelInputs, Output

EstimatorEncoder = Callable[[Formulation, Any, ModelInputs, npt.NDArray[np.float64]], Output]
"""``encode(formulation, estimator, inputs, original)``: the estimator's output as linear
expressions, given the columns it reads (``inputs``) and their values at the original."""
ModelEncoder = Callable[[Formulation, Any], Output]
"""``encode(formulation, adapter)``: a whole model's output."""

_PACKAGE = "counterplan.solver.exact.encoders"
ESTIMATOR_ENCODERS: dict[str, str] = {
    **dict.fromkeys(
        LINEAR_CLASSIFIERS + LINEAR_REGRESSORS + ONNX_LINEAR_CLASSIFIERS + ONNX_LINEAR_REGRESSORS,
        f"{_PACKAGE}.linear:encode_linear",
    ),
    **dict.fromkeys(NETWORKS, f"{_PACKAGE}.network:encode_network"),
    **dict.fromkeys(TREE_ENSEMBLES, f"{_PACKAGE}.trees:encode_trees"),
}
"""Estimator class name -> ``"module:function"`` of its encoder."""
MODEL_ENCODERS: dict[str, str] = {"ScorecardAdapter": f"{_PACKAGE}.scorecard:encode_scorecard"}
"""Model adapter class name -> ``"module:function"`` of the encoder of the whole model."""


def _load(target: str) -> Any:
    module, name = target.split(":")
    return getattr(importlib.import_module(module), name)


def estimator_encoder(estimator: Any) -> EstimatorEncoder:
    """The encoder of ``estimator``'s family; refuses an estimator no encoder reads, naming it."""
    kind = kind_name(estimator)
    target = ESTIMATOR_ENCODERS.get(kind)
    if target is None:
        raise NotEncodableError(f"{kind} is not a tree ensemble, linear model or network the exact engine reads")
    encoder: EstimatorEncoder = _load(target)
    return encoder


def model_encoder(adapter: Any) -> ModelEncoder | None:
    """The encoder of a whole model (a scorecard), or None: the model is an estimator behind a
    pipeline, encoded by :func:`estimator_encoder`."""
    for cls in type(adapter).__mro__:  # a subclass of a registered adapter is encoded as it
        target = MODEL_ENCODERS.get(cls.__name__)
        if target is not None:
            encoder: ModelEncoder = _load(target)
            return encoder
    return None


__all__ = [
    "ESTIMATOR_ENCODERS",
    "MODEL_ENCODERS",
    "EstimatorEncoder",
    "ModelEncoder",
    "estimator_encoder",
    "model_encoder",
]
