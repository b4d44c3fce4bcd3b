"""What the score calculator needs from a model: one batched call, named outputs.

Every model adapter (:mod:`counterplan.planning.models` for scikit-learn and plain functions,
:mod:`counterplan.planning.scorecard` for points tables) follows this protocol and returns
:data:`Predictions`. It sits in a module of its own, below every adapter, so that an adapter
module names the protocol without importing the others: ``models.adapt_sklearn`` picks the
scorecard adapter for a scorecard, and the scorecard adapter needs only this.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from counterplan.planning.errors import ModelAdapterError
from counterplan.planning.goals import OutputSpec
from counterplan.planning.space import FeatureSpace, FloatMatrix

Predictions = dict[str, npt.NDArray[np.float64]]
"""Per output name: an ``(n, n_classes)`` probability matrix for a classification output, an
``(n,)`` vector for a numeric one."""


@runtime_checkable
class ModelAdapter(Protocol):
    """What the score calculator needs from a model."""

    @property
    def outputs(self) -> tuple[OutputSpec, ...]:
        """The model's named outputs."""
        ...

    def predict(self, X: FloatMatrix, space: FeatureSpace) -> Predictions:
        """Predict every output for every row of the encoded matrix ``X``, in one call."""
        ...


@runtime_checkable
class SplitReader(Protocol):
    """A model adapter that can say where its model's decisions change (a scikit-learn adapter:
    the split thresholds of its trees)."""

    def split_values(self, space: FeatureSpace) -> dict[int, FloatMatrix]:
        """Per mutable number of ``space``: the values just on each side of each split threshold."""
        ...


@runtime_checkable
class RowByRow(Protocol):
    """A model adapter that can say whether it predicts row by row: each row's predictions the
    same, bit for bit, whatever other rows share the call."""

    def predicts_row_by_row(self, space: FeatureSpace) -> bool:
        """Whether every row of ``space``'s candidates gets the same predictions alone as among
        any other rows (both paths: :meth:`ModelAdapter.predict` and, where the adapter has one,
        ``predict_reference``)."""
        ...


def predicts_row_by_row(model: Any, space: FeatureSpace) -> bool:
    """Whether ``model`` (an adapter) predicts the candidates of ``space`` row by row, so that the
    rows of several solves may share one model call and each still gets its own predictions.

    Trees compare each row on its own; a matrix product does not: BLAS kernels sum a row's terms
    in an order that depends on the rows around it (a logistic regression's or a network's
    probabilities differed in the last bits for about one row in 80 between a 300-row call and
    calls of 1 to 255 of its rows, OpenBLAS on one thread). An adapter that does not say
    (:class:`RowByRow`) is taken not to."""
    return isinstance(model, RowByRow) and bool(model.predicts_row_by_row(space))


@runtime_checkable
class TargetBinding(Protocol):
    """A model adapter that learns its output's name and class names from the training target
    (a served model: its answers carry neither)."""

    def for_target(self, name: str, labels: Any) -> ModelAdapter:
        """The adapter with its output named ``name`` and, where it has none, class names from
        the target's ``labels``."""
        ...


def check_rows(predictions: Predictions, n: int) -> Predictions:
    """``predictions`` when every output holds one answer per row of the ``n`` asked, else a
    :class:`~counterplan.planning.errors.ModelAdapterError` naming the output and the shape given.
    A call made of several callers' rows is cut back into each caller's by position, so a model
    answering another number of rows would hand one caller's answers to another."""
    for name, values in predictions.items():
        shape = np.shape(values)
        if not shape or shape[0] != n:
            raise ModelAdapterError(
                f"outputs.{name}", f"the model returned shape {shape}; expected ({n}, ...) for {n} rows"
            )
    return predictions


def bind_target(model: Any, data: Any, target: str | None) -> Any:
    """``model`` bound to the training target ``target`` of the DataFrame ``data`` when it is a
    :class:`TargetBinding` and the column is there; else ``model`` itself."""
    if isinstance(model, TargetBinding) and target is not None and data is not None and target in data.columns:
        return model.for_target(target, data[target].dropna().to_numpy())
    return model


__all__ = [
    "ModelAdapter",
    "Predictions",
    "RowByRow",
    "SplitReader",
    "TargetBinding",
    "bind_target",
    "check_rows",
    "predicts_row_by_row",
]
