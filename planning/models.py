"""Model adapters: one batched model call for a whole matrix of candidates.

An adapter turns an encoded candidate matrix into what the model takes (a DataFrame with the
original column names and category strings for a pipeline fitted on a DataFrame; for a model
fitted on an array, the array it was trained on: the encoded matrix with NaN for a gap and codes
stored as numbers as their numbers, :func:`model_input`) and the model's answer into named outputs: an
``(n, n_classes)`` probability matrix per classification output, an ``(n,)`` vector per
numeric output. It is called once per batch, never once per row.

The scikit-learn adapters take a fast path when they can (:mod:`counterplan.planning.fast_path`): the
pipeline's preprocessing compiled to numpy operations on the encoded matrix, and a boosted
forest evaluated for all rows and trees at once, checked against the real pipeline first. Their
``predict_reference`` always runs the real model on its real input; answers are checked with it.

The protocol every adapter follows, :class:`ModelAdapter`, and :data:`Predictions` are defined in
:mod:`counterplan.planning.model_protocol` (below the scorecard adapter, which this module picks
for a scorecard) and importable from here too.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from sklearn.base import is_classifier

from counterplan.planning.errors import ModelAdapterError
from counterplan.planning.fast_path.cache import FastPathCache, shared_cache
from counterplan.planning.fast_path.probe import FastPath, Method, check_predictions
from counterplan.planning.goals import OutputSpec
from counterplan.planning.model_protocol import ModelAdapter, Predictions
from counterplan.planning.scorecard import PointsTable, ScorecardAdapter, adapt_scorecard, is_optbinning_scorecard
from counterplan.planning.space import FeatureSpace, FloatMatrix
from counterplan.planning.structure.interactions import PairMoves, pair_moves
from counterplan.planning.structure.splits import split_points

InputKind = Literal["dataframe", "array"]
CHECK_FAST_ENV = "COUNTERPLAN_CHECK_FAST"
"""Set to 1 to run every fast-path call through the real pipeline too and compare (debugging)."""


def model_input(X: FloatMatrix, space: FeatureSpace, kind: InputKind) -> Any:
    """What a scikit-learn model takes for the candidates ``X``: the decoded DataFrame (a model
    fitted on one), else the array a model fitted on an array was trained on, NaN for a gap and
    codes stored as numbers as their numbers (:meth:`~counterplan.planning.space.FeatureSpace.to_array`)."""
    return space.to_frame(X) if kind == "dataframe" else space.to_array(X)


class _FastCalls:
    """The fast path shared by the scikit-learn adapters: compiled once per space encoding (see
    :mod:`counterplan.planning.fast_path`), the real pipeline when it cannot be compiled, and the debug check.
    """

    model: Any
    input_kind: InputKind
    fast: bool
    check_fast: bool
    _fast_paths: FastPathCache

    def _init_fast(self, method: Method, fast: bool, check_fast: bool) -> None:
        self.fast = fast
        self.check_fast = check_fast
        self._fast_paths = shared_cache(self.model, self.input_kind, method)

    def predict(self, X: FloatMatrix, space: FeatureSpace) -> Predictions:
        """Predictions for every candidate, in one call: the fast path when the model compiles,
        else the real pipeline (:meth:`predict_reference`)."""
        return self._predict_on(self.fast_path(space) if self.fast else None, X, space)

    def solve_predict(self) -> Callable[[FloatMatrix, FeatureSpace], Predictions]:
        """:meth:`predict` for the calls of one solve (a score calculator's): a space's fast path
        is looked up, and the model's fitted state checked, at the solve's first call for it and
        kept for its other calls (a solve's dozens of calls once cost a refit check each). A model
        refitted in place drops its compiled paths at the next solve's first call; a refit in the
        middle of a solve is left to the real model, which checks every answer."""
        kept: list[tuple[FeatureSpace, FastPath | None]] = []

        def predict(X: FloatMatrix, space: FeatureSpace) -> Predictions:
            if not self.fast:
                return self.predict_reference(X, space)
            if not kept or kept[0][0] is not space:
                kept[:] = [(space, self.fast_path(space))]
            return self._predict_on(kept[0][1], X, space)

        return predict

    def _predict_on(self, path: FastPath | None, X: FloatMatrix, space: FeatureSpace) -> Predictions:
        """``path``'s predictions (the real pipeline's when it is None, or when it raises), with
        the debug check."""
        if path is None:
            return self.predict_reference(X, space)
        try:
            raw = path(X, space, self.model)
        except Exception:  # the model fails on some row: let the real pipeline raise its own error
            return self.predict_reference(X, space)
        predictions = self._predictions(raw, X.shape[0])
        if self.check_fast or os.environ.get(CHECK_FAST_ENV, "") == "1":
            check_predictions(predictions, self.predict_reference(X, space))
        return predictions

    def fast_path(self, space: FeatureSpace) -> FastPath | None:
        """The compiled fast path for candidates of ``space`` (compiled and checked on first use),
        or None when this model keeps the real pipeline."""
        return self._fast_paths.get(self.model, space)

    def predicts_row_by_row(self, space: FeatureSpace) -> bool:
        """Whether the model predicts ``space``'s candidates row by row
        (:func:`~counterplan.planning.model_protocol.predicts_row_by_row`): a final estimator of
        trees behind preprocessing the fast path compiles (scalers and encoders, column by
        column), on either path; not a linear model or a network (a matrix product), nor a
        pipeline the fast path does not understand."""
        path = self.fast_path(space)
        return path is not None and path.trees is not None

    def split_values(self, space: FeatureSpace) -> dict[int, FloatMatrix]:
        """Where the model's decisions change, per mutable number of ``space``: the values just on
        each side of each split threshold of a tree model (none for a linear model, or one the
        readers cannot read; see :mod:`counterplan.planning.structure.splits`)."""
        return split_points(self.model, space, dataframe=self.input_kind == "dataframe")

    def __setstate__(self, state: dict[str, Any]) -> None:
        """After unpickling (or a deep copy), join the cache every adapter of the model shares."""
        self.__dict__.update(state)
        self._fast_paths = shared_cache(self.model, self.input_kind, self._fast_paths.method)

    def predict_reference(self, X: FloatMatrix, space: FeatureSpace) -> Predictions:
        """The real model on its real input (the decoded DataFrame or the matrix): what answers are
        finally checked with, whatever the fast path does."""
        return self._predictions(self._call(model_input(X, space, self.input_kind)), X.shape[0])

    def _call(self, data: Any) -> Any:
        raise NotImplementedError

    def _predictions(self, raw: Any, n: int) -> Predictions:
        raise NotImplementedError


class SklearnClassifierAdapter(_FastCalls):
    """A fitted scikit-learn classifier (or pipeline ending in one), via ``predict_proba``.

    A classifier without probabilities (``LinearSVC``, ``RidgeClassifier``) gives its predicted
    label as certainty (1 for the predicted class, 0 for the others): a class goal is met exactly
    when the model predicts the class, whatever the confidence asked.

    Parameters
    ----------
    model:
        Fitted estimator with ``predict_proba`` and ``classes_``.
    output:
        Name of the output (the target column's name is a good choice).
    input_kind:
        ``"dataframe"`` to pass decoded columns with their names and category strings,
        ``"array"`` to pass the values as an array (:func:`model_input`: the encoded matrix, NaN
        for a gap, codes stored as numbers as their numbers). Default: a DataFrame when the model was fitted
        on one (it has ``feature_names_in_``), else the array.
    fast:
        Compile the pipeline's preprocessing (and a boosted forest) into numpy operations on the
        encoded matrix, checked against the real pipeline, and use them for :meth:`predict`;
        models that do not compile keep the real path. :meth:`predict_reference` is always real.
    check_fast:
        Also run every fast call through the real pipeline and raise ``ModelAdapterError`` on
        any difference (debugging; the environment variable ``COUNTERPLAN_CHECK_FAST=1`` too).
    """

    def pair_moves(
        self,
        space: FeatureSpace,
        class_index: int,
        limit: int,
        split_values: Mapping[int, FloatMatrix] | None = None,
    ) -> PairMoves:
        """Pairs of changes of ``space``'s original that the trees reward only together, toward
        class number ``class_index``, crossing to ``split_values`` (default: the model's; see
        :mod:`counterplan.planning.structure.interactions`): for a model whose trees the fast path
        evaluates, none for another."""
        path = self.fast_path(space) if self.fast else None
        if path is None or path.trees is None:
            return PairMoves.none()
        row = space.original.reshape(1, -1)
        inputs = space.to_array(row) if path.inputs is None else path.inputs.transform(row, space.missing_code)
        return pair_moves(
            self.model,
            space,
            np.asarray(inputs, dtype=np.float64)[0],
            dataframe=self.input_kind == "dataframe",
            class_index=class_index,
            limit=limit,
            split_values=split_values,
        )

    def __init__(
        self,
        model: Any,
        output: str = "prediction",
        input_kind: InputKind | None = None,
        *,
        fast: bool = True,
        check_fast: bool = False,
    ) -> None:
        self.labels_only = not hasattr(model, "predict_proba")
        if self.labels_only and not hasattr(model, "predict"):
            raise ModelAdapterError("model", f"{type(model).__name__} has neither predict_proba nor predict")
        classes = getattr(model, "classes_", None)
        if classes is None:
            raise ModelAdapterError("model", f"{type(model).__name__} is not fitted (no classes_)")
        if np.ndim(classes) != 1:
            raise ModelAdapterError("model", "multi-output classifiers are not supported; use a callable adapter")
        self.model = model
        self.input_kind: InputKind = input_kind or _default_input_kind(model)
        self._outputs = (OutputSpec(output, tuple(_plain(c) for c in classes)),)
        self._init_fast("predict" if self.labels_only else "predict_proba", fast, check_fast)

    @property
    def outputs(self) -> tuple[OutputSpec, ...]:
        """One classification output."""
        return self._outputs

    def _call(self, data: Any) -> Any:
        return self.model.predict(data) if self.labels_only else self.model.predict_proba(data)

    def _predictions(self, raw: Any, n: int) -> Predictions:
        """Class probabilities (a labels-only classifier's label as certainty)."""
        if self.labels_only:
            labels = np.asarray(raw)
            classes = np.asarray(self.model.classes_)
            proba = (labels.reshape(-1, 1) == classes.reshape(1, -1)).astype(np.float64)
            return {self._outputs[0].name: proba}
        return {self._outputs[0].name: np.asarray(raw, dtype=np.float64)}


class SklearnRegressorAdapter(_FastCalls):
    """A fitted scikit-learn regressor, single- or multi-output, via ``predict``.

    Parameters
    ----------
    model:
        Fitted estimator with ``predict``.
    outputs:
        One name per output column (``["price"]``, or ``["low", "high"]`` for a
        multi-output regressor). Their count must match what the model returns.
    input_kind, fast, check_fast:
        As for :class:`SklearnClassifierAdapter`.
    """

    def __init__(
        self,
        model: Any,
        outputs: Sequence[str] = ("prediction",),
        input_kind: InputKind | None = None,
        *,
        fast: bool = True,
        check_fast: bool = False,
    ) -> None:
        if not hasattr(model, "predict"):
            raise ModelAdapterError("model", f"{type(model).__name__} has no predict")
        names = list(outputs)
        if not names or len(set(names)) != len(names):
            raise ModelAdapterError("outputs", f"give unique output names, given {names}")
        self.model = model
        self.input_kind: InputKind = input_kind or _default_input_kind(model)
        self._outputs = tuple(OutputSpec(name) for name in names)
        self._init_fast("predict", fast, check_fast)

    @property
    def outputs(self) -> tuple[OutputSpec, ...]:
        """One numeric output per name."""
        return self._outputs

    def _call(self, data: Any) -> Any:
        return self.model.predict(data)

    def _predictions(self, raw: Any, n: int) -> Predictions:
        """Numeric predictions, one vector per output."""
        return _split_columns(np.asarray(raw, dtype=np.float64), self._outputs, n)


class CallableAdapter:
    """A plain vectorised Python function: a matrix (or DataFrame) in, outputs out.

    Parameters
    ----------
    function:
        Called once per batch. Returns either a dict ``{output name: array}`` or an array of
        shape ``(n,)`` / ``(n, n_outputs)`` for numeric outputs, ``(n, n_classes)`` for a
        single classification output.
    outputs:
        The output specifications, in column order.
    input_kind:
        ``"array"`` (default) for the encoded float matrix, ``"dataframe"`` for decoded columns.
    row_by_row:
        Whether the function computes each row on its own, so that its answer for a row is the
        same, bit for bit, whatever other rows are in the batch (elementwise numpy, trees); then
        solves running together (a batch's threads, a server's requests) share its calls. Leave
        it False for a function with a matrix product (a linear model, a network): its answer
        for a row may change in the last bits with the rows around it.
    """

    def __init__(
        self,
        function: Callable[[Any], Any],
        outputs: Sequence[OutputSpec],
        input_kind: InputKind = "array",
        *,
        row_by_row: bool = False,
    ) -> None:
        if not callable(function):
            raise ModelAdapterError("function", "must be callable")
        self.function = function
        self._outputs = tuple(outputs)
        if not self._outputs:
            raise ModelAdapterError("outputs", "give at least one output")
        self.input_kind: InputKind = input_kind
        self.row_by_row = bool(row_by_row)

    def predicts_row_by_row(self, space: FeatureSpace) -> bool:
        """``row_by_row`` as given (:func:`~counterplan.planning.model_protocol.predicts_row_by_row`)."""
        return self.row_by_row

    @property
    def outputs(self) -> tuple[OutputSpec, ...]:
        """The outputs given at construction."""
        return self._outputs

    def predict(self, X: FloatMatrix, space: FeatureSpace) -> Predictions:
        """Call the function once on the whole batch and name its outputs."""
        # a copy of the matrix: a function may write into what it is given, and X holds the search's rows
        raw = self.function(space.to_frame(X) if self.input_kind == "dataframe" else X.copy())
        if isinstance(raw, dict):
            missing = [spec.name for spec in self._outputs if spec.name not in raw]
            if missing:
                raise ModelAdapterError("outputs", f"the function returned no {missing}")
            return {spec.name: np.asarray(raw[spec.name], dtype=np.float64) for spec in self._outputs}
        array = np.asarray(raw, dtype=np.float64)
        if len(self._outputs) == 1 and self._outputs[0].is_classification:
            return {self._outputs[0].name: array}
        return _split_columns(array, self._outputs, X.shape[0])


def adapt_sklearn(
    model: Any,
    outputs: str | Sequence[str] = "prediction",
    input_kind: InputKind | None = None,
    *,
    fast: bool = True,
    check_fast: bool = False,
) -> SklearnClassifierAdapter | SklearnRegressorAdapter | ScorecardAdapter:
    """Pick the adapter for a fitted model: classifier or regressor; a scorecard (an
    ``optbinning.Scorecard`` or a :class:`~counterplan.planning.scorecard.PointsTable`) gets its own, with a
    class output named ``outputs`` and a score output named ``score``. ``fast`` and ``check_fast``
    are the scikit-learn adapters' (:mod:`counterplan.planning.fast_path`)."""
    names = [outputs] if isinstance(outputs, str) else list(outputs)
    if isinstance(model, PointsTable) or is_optbinning_scorecard(model):
        if len(names) != 1:
            raise ModelAdapterError("outputs", f"a scorecard has one class output (and 'score'), given {names}")
        return adapt_scorecard(model, names[0])
    if _looks_like_classifier(model):
        if len(names) != 1:
            raise ModelAdapterError("outputs", f"a classifier has one output, given {names}")
        return SklearnClassifierAdapter(model, names[0], input_kind, fast=fast, check_fast=check_fast)
    return SklearnRegressorAdapter(model, names, input_kind, fast=fast, check_fast=check_fast)


def _looks_like_classifier(model: Any) -> bool:
    if hasattr(model, "predict_proba") and hasattr(model, "classes_"):
        return True
    try:
        return bool(is_classifier(model))
    except AttributeError:  # not a scikit-learn estimator at all
        return False


def _default_input_kind(model: Any) -> InputKind:
    return "dataframe" if hasattr(model, "feature_names_in_") else "array"


def _split_columns(array: npt.NDArray[np.float64], outputs: tuple[OutputSpec, ...], n: int) -> Predictions:
    if array.ndim == 1:
        array = array.reshape(-1, 1)
    if array.ndim != 2 or array.shape != (n, len(outputs)):
        raise ModelAdapterError(
            "outputs",
            f"the model returned shape {array.shape}; expected ({n}, {len(outputs)}) for outputs "
            f"{[o.name for o in outputs]}",
        )
    return {spec.name: array[:, j] for j, spec in enumerate(outputs)}


def _plain(value: Any) -> Any:
    """numpy scalars to Python scalars, so class labels compare and print plainly."""
    return value.item() if isinstance(value, np.generic) else value


__all__ = [
    "CallableAdapter",
    "ModelAdapter",
    "Predictions",
    "SklearnClassifierAdapter",
    "SklearnRegressorAdapter",
    "adapt_sklearn",
]
