"""ONNX models through onnxruntime: a model adapter like the scikit-learn ones, one batched call.

:class:`OnnxModel` runs any ONNX classifier or regressor (scikit-learn through skl2onnx, XGBoost
and LightGBM through onnxmltools) with one ``InferenceSession`` on one thread (the batch workers
and the swarm are the parallelism: on a busy 2-core machine more threads were slower). It feeds
the inputs as the graph declares them:

* one tensor ``[N, n_features]`` (float or double): the encoded candidate matrix;
* one ``[N, 1]`` input per feature, named after it (float, double, int64 or string): the decoded
  columns (:meth:`~counterplan.planning.space.FeatureSpace.to_frame`), category strings as text.

A classifier's probabilities (a ``[N, C]`` tensor, or ZipMap's list of maps) come back in the
order of its class labels (read from the graph's ML node or ZipMap); a regressor's value(s), one
output per column. An ONNX model is a float32 model: its answers are checked with onnxruntime, not
with the model it was converted from. The session is built on first use and again after
unpickling (the adapter keeps the model's bytes), so batch workers and Ray can ship it.

The exact engine reads the graph through :mod:`counterplan.planning.structure.onnx`
(:meth:`OnnxModel.structure`). onnxruntime and onnx load on first use, never on
``import counterplan``.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from counterplan.planning.errors import ModelAdapterError
from counterplan.planning.goals import OutputSpec
from counterplan.planning.model_protocol import Predictions
from counterplan.planning.space import FeatureSpace, FloatMatrix
from counterplan.planning.structure.onnx import input_features, matrix_input

InputKind = Literal["dataframe", "array"]
ELEMENT_TYPES = {1: np.float32, 11: np.float64, 7: np.int64, 8: object}
"""ONNX element type -> the numpy type fed to it (FLOAT, DOUBLE, INT64, STRING)."""
CLASSIFIER_NODES = ("TreeEnsembleClassifier", "LinearClassifier", "SVMClassifier", "ZipMap")
"""Nodes whose class label attributes name the probability columns."""


def _onnxruntime() -> Any:
    try:
        import onnxruntime  # noqa: PLC0415 - optional dependency, loaded on first use
    except ImportError:
        raise ModelAdapterError("model", "ONNX models need onnxruntime: pip install 'counterplan[onnx]'") from None
    return onnxruntime


class OnnxModel:
    """An ONNX classifier or regressor, run by onnxruntime.

    Parameters
    ----------
    model:
        A ``.onnx`` file, its bytes, or a loaded ``onnx.ModelProto``.
    output:
        The output's name (a classifier's, or a regressor's: one name per column of its output).
    probabilities:
        The graph output to read (default: a classifier's probability output, else the first
        numeric output).
    """

    def __init__(
        self,
        model: str | Path | bytes | Any,
        output: str | Sequence[str] = "prediction",
        *,
        probabilities: str | None = None,
    ) -> None:
        self._bytes = _model_bytes(model)
        self._lock = threading.Lock()
        self._session: Any = None
        self._graph: Any = None
        self._prefix: Any = None
        session = self._get_session()
        self._inputs = [(i.name, _element(i.type), i.shape) for i in session.get_inputs()]
        self._batch = _fixed_batch([shape for _, _, shape in self._inputs])
        self._read, self._zipmap, classes = self._pick_output(session, probabilities)
        self._numeric = tuple(
            f"{o.name} {o.shape}" for o in session.get_outputs() if o.type in ("tensor(float)", "tensor(double)")
        )
        names = [output] if isinstance(output, str) else list(output)
        if not names or len(set(names)) != len(names):
            raise ModelAdapterError("outputs", f"give unique output names, given {names}")
        if classes is not None:
            if len(names) != 1:
                raise ModelAdapterError("outputs", f"a classifier has one output, given {names}")
            self._outputs: tuple[OutputSpec, ...] = (OutputSpec(names[0], classes),)
        else:
            self._outputs = tuple(OutputSpec(name) for name in names)
        self.input_kind: InputKind = "array" if self._tensor_input() else "dataframe"

    # -- what the calculator calls ---------------------------------------------------------

    @property
    def outputs(self) -> tuple[OutputSpec, ...]:
        """One classification output, or one numeric output per name."""
        return self._outputs

    def renamed(self, output: str | Sequence[str]) -> OnnxModel:
        """This model with its output(s) named ``output`` (the target column's name, a model
        card's outputs); the session is shared."""
        names = [output] if isinstance(output, str) else list(output)
        copy = object.__new__(OnnxModel)
        copy.__dict__.update(self.__dict__)
        if self._outputs[0].is_classification:
            if len(names) != 1:
                raise ModelAdapterError("outputs", f"a classifier has one output, given {names}")
            copy._outputs = (OutputSpec(names[0], self._outputs[0].classes),)
        elif len(names) != len(self._outputs):
            raise ModelAdapterError("outputs", f"the model has {len(self._outputs)} outputs, given {names}")
        else:
            copy._outputs = tuple(OutputSpec(name) for name in names)
        return copy

    def for_target(self, name: str, labels: Any) -> OnnxModel:
        """This model with its output named after the training target ``name`` (the Explainer
        binds it: :func:`~counterplan.planning.model_protocol.bind_target`); the class names stay
        the graph's own (``labels`` is not needed). A regressor of several outputs keeps its names."""
        return self.renamed(name) if len(self._outputs) == 1 else self

    def predict(self, X: FloatMatrix, space: FeatureSpace) -> Predictions:
        """Every output for every row of ``X``, in one ``session.run``. A graph that raises on
        some rows raises onnxruntime's error (the calculator finds the rows); inputs the graph
        wants that the space does not have are a configuration error (``ModelAdapterError``)."""
        feeds = self.feeds(X, space)
        raw = _run(self._get_session(), self._read, feeds, self._batch)
        return self._predictions(raw, X.shape[0])

    def feeds(self, X: FloatMatrix, space: FeatureSpace) -> dict[str, Any]:
        """The graph's inputs for the candidate rows ``X``."""
        if self.input_kind == "array":
            name, dtype, _ = self._inputs[0]
            return {name: np.ascontiguousarray(space.to_array(X), dtype=dtype)}
        return self._column_feeds(space.to_frame(X), space.names)

    def _column_feeds(self, frame: Any, names: Sequence[str]) -> dict[str, Any]:
        """One ``[N, 1]`` input per feature, matched by name (:func:`input_features`)."""
        found, missing = input_features([name for name, _, _ in self._inputs], list(names))
        if missing:
            raise ModelAdapterError(
                "inputs",
                f"the ONNX model's inputs {missing} are not features, or name several (features: {list(names)})",
            )
        return {name: _column(frame[found[name]], dtype) for name, dtype, _ in self._inputs}

    def _predictions(self, raw: Any, n: int) -> Predictions:
        spec = self._outputs[0]
        if self._zipmap:
            classes = spec.classes or ()
            array = np.array([[float(row[c]) for c in classes] for row in raw], dtype=np.float64).reshape(n, -1)
        else:
            array = np.asarray(raw, dtype=np.float64)
        if spec.is_classification:
            if array.shape != (n, len(spec.classes or ())):
                raise ModelAdapterError(
                    "outputs", f"the ONNX model returned shape {array.shape}; expected ({n}, {len(spec.classes or ())})"
                )
            return {spec.name: array}
        array = array.reshape(n, -1) if array.size == n * len(self._outputs) else array
        if array.shape != (n, len(self._outputs)):
            raise ModelAdapterError("outputs", self._width_error(array.shape, n))
        return {o.name: array[:, j] for j, o in enumerate(self._outputs)}

    def _width_error(self, shape: tuple[int, ...], n: int) -> str:
        """Why a regressor's output does not fit its names: one name per column of the output
        read, and which numeric outputs the graph has (a graph of two ``[N, 1]`` outputs given two
        names, or one ``[N, 2]`` output given one, said only 'the ONNX model returned shape (1, 1);
        expected (1, 2)', naming neither the output nor what to give)."""
        names = [o.name for o in self._outputs]
        if n and len(shape) and shape[0] == n:
            width = int(np.prod(shape[1:], dtype=np.int64))
            text = (
                f"the ONNX model's output {self._read!r} returns {width} column{'' if width == 1 else 's'} a row "
                f"(shape {shape} for {n} rows): give one output name per column, given {names}"
            )
        else:
            text = (
                f"the ONNX model's output {self._read!r} returned shape {shape} for {n} rows; expected "
                f"({n}, {len(names)}): one column per output name {names}"
            )
        if len(self._numeric) > 1:
            text += f" (the graph's numeric outputs: {', '.join(self._numeric)}; probabilities= names the one to read)"
        return text

    # -- the exact engine's view ---------------------------------------------------------------

    def structure(self) -> Any:
        """The graph as the exact engine reads it
        (:func:`counterplan.planning.structure.onnx.read_graph`), read once; raises
        :class:`~counterplan.planning.structure.errors.NotEncodableError` naming the op it
        cannot read."""
        from counterplan.planning.structure.onnx import read_graph  # noqa: PLC0415

        with self._lock:
            if self._graph is None:
                try:
                    self._graph = read_graph(self._bytes, self._read)
                except Exception as exc:  # kept: the graph is refused the same way every time
                    self._graph = exc
            graph = self._graph
        if isinstance(graph, Exception):
            raise graph
        return graph

    def split_values(self, space: FeatureSpace) -> dict[int, FloatMatrix]:
        """Where the graph's trees change their decision, per mutable number of ``space`` (none
        for a linear node or a graph the reader refuses): what local search's scan tries, as for a
        scikit-learn model (:func:`~counterplan.planning.structure.splits.graph_split_points`)."""
        from counterplan.planning.structure.splits import graph_split_points  # noqa: PLC0415

        try:
            graph = self.structure()
        except ValueError:  # NotEncodableError: a graph the reader cannot read has none
            return {}
        return graph_split_points(graph, space)

    def transform(self, data: Any) -> npt.NDArray[np.float64]:
        """What the graph's ML node reads for ``data`` (the encoded matrix or the decoded frame,
        as :attr:`input_kind` says), computed by onnxruntime: the real preprocessing, which the
        exact engine's description of it is checked against."""
        node_input = self.structure().node_input
        with self._lock:
            if self._prefix is None:
                self._prefix = _prefix_session(self._bytes, node_input)
            prefix = self._prefix
        if self.input_kind == "array":
            name, dtype, _ = self._inputs[0]
            feeds = {name: np.ascontiguousarray(np.asarray(data), dtype=dtype)}
        else:
            feeds = self._column_feeds(data, list(data.columns))
        return np.asarray(_run(prefix, node_input, feeds, self._batch), dtype=np.float64)

    # -- the session -----------------------------------------------------------------------------

    def _get_session(self) -> Any:
        with self._lock:
            if self._session is None:
                self._session = _session(self._bytes)
            return self._session

    def _tensor_input(self) -> bool:
        """One float input of more than one column: the encoded matrix (a single ``[N, 1]``
        input is read as a feature's column, by name)."""
        return matrix_input([(dtype in (np.float32, np.float64), shape) for _, dtype, shape in self._inputs])

    def _pick_output(self, session: Any, asked: str | None) -> tuple[str, bool, tuple[Any, ...] | None]:
        """The output to read, whether it is ZipMap's list of maps, and the class labels (None:
        a regressor)."""
        outputs = session.get_outputs()
        names = [o.name for o in outputs]
        if asked is not None and asked not in names:
            raise ModelAdapterError("probabilities", f"the ONNX model has no output {asked!r} (outputs: {names})")
        labels = _class_labels(self._bytes)
        label_output = any(o.type in ("tensor(int64)", "tensor(string)") for o in outputs)
        numeric = [o for o in outputs if o.type in ("tensor(float)", "tensor(double)") or o.type.startswith("seq(map")]
        if asked is not None:
            chosen = next(o for o in outputs if o.name == asked)
        elif numeric:
            chosen = numeric[-1] if label_output else numeric[0]
        else:
            raise ModelAdapterError("model", f"the ONNX model has no numeric output (outputs: {names})")
        zipmap = chosen.type.startswith("seq(map")
        classifier = zipmap or (label_output and chosen.type.startswith("tensor("))
        if not classifier:
            return chosen.name, False, None
        if labels is None:
            width = chosen.shape[1] if len(chosen.shape) == 2 and isinstance(chosen.shape[1], int) else None
            if width == 1:  # one number beside an integer output (a value and its rounding): a regressor's
                return chosen.name, False, None
            if width is None:
                raise ModelAdapterError("model", "the ONNX classifier names no class labels")
            labels = tuple(range(width))
        return chosen.name, zipmap, labels

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_session"] = state["_prefix"] = state["_graph"] = None
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"OnnxModel({len(self._bytes):,} bytes, inputs {[n for n, _, _ in self._inputs]}, read {self._read!r})"


def _fixed_batch(shapes: Sequence[Sequence[Any]]) -> int | None:
    """The batch size the graph's inputs fix (an export's ``[1, F]``), or None when it is free."""
    sizes = {shape[0] for shape in shapes if len(shape) and isinstance(shape[0], int) and shape[0] > 0}
    return sizes.pop() if len(sizes) == 1 else None


def _run(session: Any, output: str, feeds: dict[str, Any], batch: int | None) -> Any:
    """``output`` for the rows of ``feeds``; a graph of a fixed batch size gets chunks of that
    size, the last one filled up with copies of its last row (their answers dropped). Fuzzing: a
    GradientBoosting graph exported as ``[1, 8]`` failed on every batch the search sent, and the
    solve stopped without an answer."""
    n = len(next(iter(feeds.values()))) if feeds else 0
    if batch is None or n in (0, batch):
        return session.run([output], feeds)[0]
    parts = []
    for start in range(0, n, batch):
        chunk = {name: values[start : start + batch] for name, values in feeds.items()}
        size = len(next(iter(chunk.values())))
        if size < batch:
            chunk = {name: np.concatenate([v, np.repeat(v[-1:], batch - size, axis=0)]) for name, v in chunk.items()}
        parts.append(session.run([output], chunk)[0][:size])
    return [row for part in parts for row in part] if isinstance(parts[0], list) else np.concatenate(parts)


def _column(values: Any, dtype: Any) -> Any:
    """One decoded column as an ``[N, 1]`` input of type ``dtype`` (text: the values as strings)."""
    column = values.to_numpy()
    array = np.array([str(v) for v in column], dtype=object) if dtype is object else column.astype(dtype)
    return array.reshape(-1, 1)


def _model_bytes(model: Any) -> bytes:
    if isinstance(model, bytes | bytearray):
        return bytes(model)
    if isinstance(model, str | Path):
        file = Path(model)
        if not file.is_file():
            raise ModelAdapterError("model", f"no such file: {str(file)[:200]}")
        return file.read_bytes()
    serialize = getattr(model, "SerializeToString", None)
    if callable(serialize):
        return bytes(serialize())
    raise ModelAdapterError("model", f"give an ONNX file, its bytes or a ModelProto, given {type(model).__name__}")


def _options() -> Any:
    ort = _onnxruntime()
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    # fatal only: LightGBM's label shape warning is harmless, and a row the graph raises on is an
    # error the calculator handles (the exception says why), logged to stderr once per failing
    # call at the default (the ONNX fuzz: a few hundred lines for one explanation)
    options.log_severity_level = 4
    return options


def _session(data: bytes) -> Any:
    ort = _onnxruntime()
    if _external_data(data):  # refused before onnxruntime sees it: no path the file names is read
        raise ModelAdapterError(
            "model",
            "the ONNX model keeps tensors in external data files, which counterplan does not read "
            "(a model is loaded from its own bytes, never from paths it names): save it as one file "
            "(onnx.save_model(model, path, save_as_external_data=False))",
        )
    try:
        return ort.InferenceSession(data, _options(), providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise ModelAdapterError("model", f"onnxruntime cannot load the model: {type(exc).__name__}: {exc}") from None


def _external_data(data: bytes) -> bool:
    """Whether any tensor of the graph (an initializer, a ``Constant``, a subgraph's) names an
    external data file. onnxruntime 1.32 refuses them in a model loaded from bytes, with a message
    about paths and working directories (the ONNX fuzz: ``../../etc/passwd``, ``/etc/passwd``, a
    file beside the model); counterplan refuses them itself, whatever the version does."""
    import onnx  # noqa: PLC0415

    try:
        proto = onnx.load_from_string(data)
    except Exception:  # not a model at all: onnxruntime's own message says so
        return False
    graphs = [proto.graph]
    while graphs:
        graph = graphs.pop()
        tensors = list(graph.initializer)
        for node in graph.node:
            for attribute in node.attribute:
                tensors += [attribute.t, *attribute.tensors]
                graphs += [attribute.g, *attribute.graphs] if attribute.HasField("g") else list(attribute.graphs)
        if any(t.data_location == onnx.TensorProto.EXTERNAL for t in tensors):
            return True
    return False


def _prefix_session(data: bytes, tensor: str) -> Any:
    """A session of the same graph that also outputs ``tensor`` (the ML node's input)."""
    import onnx  # noqa: PLC0415

    proto = onnx.load_from_string(data)
    elem: int = onnx.TensorProto.FLOAT
    try:
        inferred = onnx.shape_inference.infer_shapes(proto)
        elem = next(
            (
                i.type.tensor_type.elem_type
                for i in (*inferred.graph.value_info, *inferred.graph.input)
                if i.name == tensor
            ),
            elem,
        )
    except Exception:
        pass
    if tensor not in {o.name for o in proto.graph.output}:
        proto.graph.output.append(onnx.helper.make_tensor_value_info(tensor, elem, None))
    return _session(proto.SerializeToString())


def _element(type_name: str) -> Any:
    """The numpy type fed to an input of ONNX type ``tensor(float)`` etc."""
    table = {
        "tensor(float)": np.float32,
        "tensor(double)": np.float64,
        "tensor(int64)": np.int64,
        "tensor(string)": object,
    }
    if type_name not in table:
        raise ModelAdapterError(
            "model",
            f"the ONNX model has an input of type {type_name}; counterplan feeds float, double, int64 or string",
        )
    return table[type_name]


def _class_labels(data: bytes) -> tuple[Any, ...] | None:
    """The class labels of the graph's classifier node (or ZipMap, or the constant the label is
    picked from), or None."""
    import onnx  # noqa: PLC0415
    from onnx import helper, numpy_helper  # noqa: PLC0415

    proto = onnx.load_from_string(data)
    for node in proto.graph.node:
        if node.op_type in CLASSIFIER_NODES:
            for attribute in node.attribute:
                if attribute.name in ("classlabels_strings", "classlabels_int64s", "classlabels_ints"):
                    values = helper.get_attribute_value(attribute)
                    if len(values):
                        return tuple(v.decode() if isinstance(v, bytes) else int(v) for v in values)
    initial = {t.name: t for t in proto.graph.initializer}
    for node in proto.graph.node:
        if node.op_type == "ArrayFeatureExtractor" and node.input[0] in initial:
            values = numpy_helper.to_array(initial[node.input[0]]).reshape(-1)
            return tuple(
                v.decode() if isinstance(v, bytes) else v.item() if isinstance(v, np.generic) else v for v in values
            )
    return None


__all__ = ["OnnxModel"]
