"""Linear models in the exact engine: the output is ``coef . columns + intercept``, exactly.

A classifier with probabilities (logistic regression, ``SGDClassifier(loss='log_loss')``) gives
the logit of class 1 (a multinomial one: every class's score, the softmax's inputs); one without
(``LinearSVC``, ``RidgeClassifier``) gives the side of its hyperplane (link ``label``); a
regressor gives the value.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from counterplan.planning.structure.errors import NotEncodableError
from counterplan.planning.structure.kind import LABEL_ONLY, LINEAR_CLASSIFIERS, ONNX_LINEAR_CLASSIFIERS, kind_name
from counterplan.solver.exact.milp import Expr, add
from counterplan.solver.exact.program import Formulation, Lin, ModelInputs, Output

MULTINOMIAL = ("LogisticRegression", "LogisticRegressionCV", *ONNX_LINEAR_CLASSIFIERS)
"""Linear classifiers whose several classes share one softmax."""


def encode_linear(
    formulation: Formulation, estimator: Any, inputs: ModelInputs, original: npt.NDArray[np.float64]
) -> Output:
    """The linear model's output (see the module)."""
    kind = kind_name(estimator)
    classifier = kind in LINEAR_CLASSIFIERS + ONNX_LINEAR_CLASSIFIERS
    if classifier and len(estimator.classes_) > 2:
        if kind not in MULTINOMIAL:
            raise NotEncodableError(f"a multi-class {kind}")
        coefs = np.asarray(estimator.coef_, dtype=np.float64)
        scores = [
            affine_output(coefs[k], float(estimator.intercept_[k]), inputs, original) for k in range(coefs.shape[0])
        ]
        return Output(scores[0], "logit", kind, classes=scores)
    if kind == "SGDClassifier" and estimator.loss != "log_loss":
        raise NotEncodableError(f"SGDClassifier with loss {estimator.loss!r} has no logistic link")
    coef = np.asarray(estimator.coef_, dtype=np.float64).reshape(-1)
    if coef.size != len(inputs.columns):
        raise NotEncodableError(f"{kind} has several outputs")
    intercept = float(np.asarray(estimator.intercept_, dtype=np.float64).reshape(-1)[0])
    link = "value" if not classifier else "label" if kind in LABEL_ONLY else "logit"
    return Output(affine_output(coef, intercept, inputs, original), link, kind)


def affine_output(coef: npt.NDArray[np.float64], intercept: float, inputs: ModelInputs, original: Any) -> Lin:
    """``coef . columns + intercept`` as a linear expression (constant columns folded in at their
    value at the original, as the real preprocessing computes it)."""
    terms: Expr = {}
    constant = intercept
    for c, (lin, value) in enumerate(zip(inputs.columns, original, strict=True)):
        if not lin[0]:
            constant += float(coef[c]) * float(value)
            continue
        terms = add(terms, lin[0], float(coef[c]))
        constant += float(coef[c]) * lin[1]
    return terms, constant


__all__ = ["affine_output", "encode_linear"]
