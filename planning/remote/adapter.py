"""A model served over the Open Inference Protocol (KServe, MLServer, Triton) as a model adapter.

:class:`RemoteModel` follows :class:`~counterplan.planning.model_protocol.ModelAdapter`: all the
candidates of one ``predict`` go to the server in one inference request (split at ``max_rows``
rows and about ``max_bytes`` bytes), and the answer comes back as named outputs. The remote
model *is* the real model: ``predict_reference`` is ``predict``, so every answer is checked
through the server as any other adapter's through its model.

Errors keep the score calculator's contract. The model raising on a batch (HTTP 500, gRPC
INTERNAL) is a :class:`~counterplan.planning.errors.RemoteInferenceError`, a model failure the
calculator bisects as a local model's exception; a NaN answer is returned as NaN (the row counts
as failed). A server that is down, slow, does not know the model, or answers in another shape or
datatype is a :class:`~counterplan.planning.errors.RemoteModelError` (a ``ModelAdapterError``):
the solve stops at once with its one-line message. Only transient failures are retried
(:mod:`counterplan.planning.remote.transport`).

An adapter pickles without its connection (a batch worker or a Ray task opens its own) and is
safe to share between threads.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar

import numpy as np
import numpy.typing as npt

from counterplan.planning.errors import ModelAdapterError, RemoteInferenceError, RemoteModelError
from counterplan.planning.goals import OutputSpec
from counterplan.planning.model_protocol import Predictions
from counterplan.planning.remote import options
from counterplan.planning.remote.oip import InferRequest, ModelMetadata, ProtocolFormError, Tensor
from counterplan.planning.remote.tensors import (
    Layout,
    LayoutError,
    build_request,
    choose_layout,
    numbers,
    probabilities,
    read_output,
    split_request,
)
from counterplan.planning.remote.transport import (
    CallTimeoutError,
    ModelRaisedError,
    NotFoundError,
    RefusedError,
    RetryPolicy,
    TransientError,
    Transport,
    with_retries,
)
from counterplan.planning.remote.url import ModelAddress, Protocol, parse_model_address
from counterplan.planning.space import FeatureSpace, FloatMatrix

Task = Literal["classification", "regression"]
T = TypeVar("T")
PROBA_OUTPUT = "predict_proba"
LABEL_OUTPUT = "predict"
"""MLServer's scikit-learn runtime's output names (asked for by name in each request)."""


class RemoteModel:
    """A model served over the Open Inference Protocol v2 (REST or gRPC).

    Each option is checked when the model is built (:mod:`~counterplan.planning.remote.options`),
    a bad one refused with a :class:`~counterplan.planning.errors.ModelAdapterError` naming it.

    Parameters
    ----------
    url:
        ``http(s)://HOST:PORT/v2/models/NAME[/versions/V]`` or ``grpc(s)://HOST:PORT/NAME[/versions/V]``
        (:mod:`counterplan.planning.remote.url`); a bare ``http://HOST:PORT`` with ``model_name``.
    model_name, version, protocol:
        Complete the address (or must agree with it): ``protocol`` is ``"rest"`` or ``"grpc"``.
    timeout:
        Seconds (above 0, at most an hour) each call may wait for its whole answer (gRPC: the call's deadline; REST: the
        answer's head and body, each wait for their bytes ending by then); ``connect_timeout``
        for the connection (REST; default the smaller of ``timeout`` and 5 s).
    headers:
        Sent with every call (REST headers, gRPC metadata): an ``Authorization`` token, a
        KServe ``Host`` header.
    layout:
        ``"tensor"`` (the encoded matrix as one 2-D input) or ``"columns"`` (one input per
        feature, MLServer's pandas codec); None: from the metadata
        (:func:`~counterplan.planning.remote.tensors.choose_layout`; ``tensor`` when it declares
        nothing).
    task:
        ``"classification"`` (class probabilities) or ``"regression"`` (one number per row).
    classes:
        The class names in the order of the model's probability columns. None: the sorted labels
        of the training target when an explainer binds it (scikit-learn's ``classes_`` order,
        checked once against the server's ``predict`` where it has one), else ``0 .. C-1`` from
        the declared output shape.
    output:
        The name goals and answers use for the prediction (None: the target's name when an
        explainer binds it, else ``"prediction"``).
    served_output:
        The output tensor to ask for (None: the one the metadata declares when it declares one,
        else ``predict_proba`` for a classifier and ``predict`` for a regressor, MLServer's names).
    max_rows, max_bytes:
        A ``predict`` call's candidates go in one request, split into parts of at most this many
        rows and about this many bytes.
    retry:
        How transient failures are retried (:class:`~counterplan.planning.remote.transport.RetryPolicy`).
    verify:
        TLS: verify the server's certificate (or a CA bundle's path, a file or a directory; REST
        only: a gRPC channel verifies with gRPC's roots, ``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH``).
    """

    def __init__(
        self,
        url: str,
        model_name: str | None = None,
        version: str | None = None,
        protocol: Protocol | None = None,
        *,
        timeout: float = 10.0,
        connect_timeout: float | None = None,
        headers: dict[str, str] | None = None,
        layout: Layout | None = None,
        task: Task = "classification",
        classes: Sequence[Any] | None = None,
        output: str | None = None,
        served_output: str | None = None,
        max_rows: int = 4096,
        max_bytes: int = 8_000_000,
        retry: RetryPolicy | None = None,
        verify: bool | str = True,
    ) -> None:
        self.address: ModelAddress = parse_model_address(url, model_name, version, protocol)
        if layout not in (None, "tensor", "columns"):
            raise ModelAdapterError("layout", f"give 'tensor' or 'columns', given {layout!r}")
        if task not in ("classification", "regression"):
            raise ModelAdapterError("task", f"give 'classification' or 'regression', given {task!r}")
        if classes is not None and task != "classification":
            raise ModelAdapterError("classes", "only a classifier has class names")
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise ModelAdapterError("retry", f"give a RetryPolicy, given {type(retry).__name__}")
        rest = self.address.protocol == "rest"
        self.timeout = options.seconds("timeout", timeout)
        self.connect_timeout = (
            options.seconds("connect_timeout", connect_timeout)
            if connect_timeout is not None
            else min(self.timeout, 5.0)
        )
        self.headers = options.headers(headers, grpc=not rest)
        self.layout: Layout | None = layout
        self.task: Task = task
        self.classes: tuple[Any, ...] | None = options.classes(classes) if classes is not None else None
        self.output = output
        self.served_output = served_output
        self.max_rows = options.count("max_rows", max_rows)
        self.max_bytes = options.count("max_bytes", max_bytes)
        self.retry = retry or RetryPolicy()
        self.verify = options.verify(verify, rest)
        self.transport: Transport = self._transport()
        self._metadata: ModelMetadata | None = None
        self._labels_checked = classes is not None
        self._lock = threading.Lock()
        self.request_count = 0
        """Inference requests sent (each part of a split call counts)."""

    def _transport(self) -> Transport:
        if self.address.protocol == "grpc":
            from counterplan.planning.remote.grpc_transport import GrpcTransport  # noqa: PLC0415

            return GrpcTransport(self.address, self.timeout, self.headers)
        from counterplan.planning.remote.rest import RestTransport  # noqa: PLC0415

        return RestTransport(self.address, self.timeout, self.connect_timeout, self.headers, self.verify)

    def __repr__(self) -> str:
        return f"RemoteModel({str(self.address)!r})"

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    # -- what the model is -------------------------------------------------------------------

    def metadata(self) -> ModelMetadata:
        """The model's metadata, read once from the server (and kept, also when pickled)."""
        if self._metadata is None:
            found = self._call(self.transport.metadata)
            with self._lock:
                self._metadata = found
        return self._metadata

    @property
    def outputs(self) -> tuple[OutputSpec, ...]:
        """One output: class probabilities (with the class names) or a number."""
        name = self.output or "prediction"
        if self.task == "regression":
            return (OutputSpec(name),)
        return (OutputSpec(name, self.classes or self._declared_classes()),)

    def _declared_classes(self) -> tuple[Any, ...]:
        declared = self._declared_output()
        width = declared.shape[-1] if declared is not None and len(declared.shape) == 2 else -1
        if width < 2:
            raise RemoteModelError(
                str(self.address),
                "the server declares no class count: give classes= (in the model's order) or the training target",
            )
        return tuple(range(width))

    def _declared_output(self) -> Any:
        declared = self.metadata().outputs
        wanted = self._served_output()
        return next((o for o in declared if o.name == wanted), None)

    def _served_output(self) -> str:
        """The output tensor asked for: the given one, the one the metadata declares when it
        declares one, else MLServer's name for the task's output."""
        if self.served_output is not None:
            return self.served_output
        declared = self.metadata().outputs
        if len(declared) == 1:
            return declared[0].name
        return PROBA_OUTPUT if self.task == "classification" else LABEL_OUTPUT

    @property
    def feature_names_in_(self) -> list[str] | None:
        """The features in the model's order when it declares one input per column (the explainer
        takes its columns from here), else None."""
        metadata = self.metadata()
        if (self.layout or choose_layout(metadata)) == "columns" and metadata.inputs:
            return [m.name for m in metadata.inputs]
        return None

    def for_target(self, name: str, labels: npt.ArrayLike) -> RemoteModel:
        """This model with its output named after the training target and, for a classifier
        without ``classes``, the target's sorted labels as class names (scikit-learn's order);
        the served answer carries neither. Shares the connection."""
        bound = copy.copy(self)
        if bound.output is None:
            bound.output = name
        if bound.task == "classification" and bound.classes is None:
            try:
                values = np.unique(np.asarray(labels))
            except TypeError:  # labels of mixed types do not sort
                raise ModelAdapterError(
                    "classes", f"the target {name!r} has labels that do not sort: give classes="
                ) from None
            if values.size < 2:
                raise ModelAdapterError("classes", f"the target {name!r} has fewer than two labels")
            bound.classes = tuple(v.item() if isinstance(v, np.generic) else v for v in values)
            bound._labels_checked = False
        return bound

    # -- predictions ------------------------------------------------------------------------

    def predict(self, X: FloatMatrix, space: FeatureSpace) -> Predictions:
        """Every output for every row of ``X``: one request (or one per part of the split)."""
        spec = self.outputs[0]
        if X.shape[0] == 0:
            empty = np.empty((0, len(spec.classes)) if spec.classes is not None else (0,), dtype=np.float64)
            return {spec.name: empty}
        served = self._served_output()
        metadata = self.metadata()
        layout = self.layout or choose_layout(metadata)
        try:
            request = build_request(X, space, layout, metadata, (served,))
        except LayoutError as exc:
            raise RemoteModelError(str(self.address), str(exc)) from None
        parts = [self._answer(part, served, spec) for part in split_request(request, self.max_rows, self.max_bytes)]
        array = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)
        return {spec.name: array}

    def predict_reference(self, X: FloatMatrix, space: FeatureSpace) -> Predictions:
        """The served model is the real one: :meth:`predict`."""
        return self.predict(X, space)

    def _answer(self, request: InferRequest, served: str, spec: OutputSpec) -> npt.NDArray[np.float64]:
        check = spec.classes is not None and served == PROBA_OUTPUT and not self._labels_checked
        if check:
            asked = InferRequest(request.inputs, (served, LABEL_OUTPUT), request.parameters)
            try:
                outputs = self._infer(asked)
            except (RemoteModelError, RemoteInferenceError) as exc:
                if isinstance(exc, RemoteModelError) and exc.unavailable:
                    raise  # the server, not the output asked for: asking without it would fail alike
                # no `predict` output to check with (MLServer's gRPC cannot even send text labels),
                # if the same rows are answered without it: a model that raises on them leaves the
                # check to the next call
                outputs = self._infer(request)
                self._labels_checked = True
                check = False
        else:
            outputs = self._infer(request)
        try:
            array = read_output(outputs, served, request.rows)
            if spec.classes is None:
                return numbers(array, served)
            proba = probabilities(array, len(spec.classes), served)
        except (LayoutError, ProtocolFormError) as exc:
            raise RemoteModelError(str(self.address), f"wrong answer: {exc}") from None
        if check:
            self._check_labels(proba, outputs, spec.classes)
        return proba

    def _check_labels(self, proba: FloatMatrix, outputs: tuple[Tensor, ...], classes: tuple[Any, ...]) -> None:
        """The class of each row's largest probability is the label the server predicts (rows
        without a clear largest are skipped); else the class names are in another order."""
        labels = next((t for t in outputs if t.name == LABEL_OUTPUT), None)
        if labels is None or labels.data.size != proba.shape[0]:
            self._labels_checked = True  # the server sends no labels: nothing to check with
            return
        ordered = np.sort(proba, axis=1)
        clear = ordered[:, -1] - ordered[:, -2] > 1e-9
        if not clear.any():
            return  # no row whose class is clear (ties, NaN): the next call checks
        self._labels_checked = True
        named = np.array([str(c) for c in classes], dtype=object)[np.argmax(proba, axis=1)]
        said = np.array([str(v.item() if isinstance(v, np.generic) else v) for v in labels.data], dtype=object)
        wrong = np.flatnonzero(clear & (named != said))
        if wrong.size:
            i = int(wrong[0])
            raise RemoteModelError(
                str(self.address),
                f"the model predicts {said[i]!r} where its largest probability is that of class {named[i]!r} "
                f"(classes {list(classes)}): give classes= in the model's column order",
            )

    def _infer(self, request: InferRequest) -> tuple[Tensor, ...]:
        with self._lock:
            self.request_count += 1
        return self._call(lambda ends: self.transport.infer(request, ends))

    def _call(self, call: Callable[[float], T]) -> T:
        """``call(ends)`` with retries, all of them by ``ends``, ``timeout`` seconds from now (a
        retry gets what is left of it: a server failing transiently just before the timeout
        held a call of 10 s for 40, four attempts of 10 s each), its failures as counterplan's
        errors."""
        where = str(self.address)
        ends = time.monotonic() + self.timeout
        try:
            return with_retries(lambda: call(ends), self.retry, ends=ends)
        except ModelRaisedError as exc:
            # the hint before the server's text: a model's message is cut at MESSAGE_LIMIT
            # characters where it is shown, and a long one (every missing column) would cut it off
            raise RemoteInferenceError(
                f"served model {self.address.model_name!r} raised{self._hint()}: {exc}"
            ) from None
        except NotFoundError as exc:
            version = f" version {self.address.version!r}" if self.address.version else ""
            raise RemoteModelError(
                where, f"the server does not know model {self.address.model_name!r}{version} ({exc})"
            ) from None
        except CallTimeoutError as exc:
            raise RemoteModelError(where, f"too slow: {exc}", unavailable=True) from None
        except TransientError as exc:
            raise RemoteModelError(where, str(exc), unavailable=True) from None
        except RefusedError as exc:
            raise RemoteModelError(where, str(exc)) from None
        except ProtocolFormError as exc:
            raise RemoteModelError(where, f"wrong answer: {exc}") from None

    def _hint(self) -> str:
        metadata = self._metadata
        if self.layout is None and metadata is not None and not metadata.inputs:
            return (
                " (no inputs declared, so one tensor was sent: give layout='columns' if the model reads named columns)"
            )
        return ""


__all__ = ["RemoteModel", "Task"]
