"""The served-model adapter's parts without a server: addresses, requests, answers, retries."""

from __future__ import annotations

import pickle
import re
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from counterplan import CallableAdapter, Explainer, OutputSpec
from counterplan.planning.errors import ModelAdapterError
from counterplan.planning.remote import RemoteModel, oip_grpc
from counterplan.planning.remote.oip import (
    InferRequest,
    ModelMetadata,
    ProtocolFormError,
    Tensor,
    TensorMeta,
    metadata_from_json,
    outputs_from_json,
    request_json,
)
from counterplan.planning.remote.tensors import (
    LayoutError,
    _texts,
    build_request,
    choose_layout,
    probabilities,
    read_output,
    split_request,
)
from counterplan.planning.remote.transport import (
    RetryPolicy,
    TransientError,
    body_line,
    with_retries,
)
from counterplan.planning.remote.url import ModelAddressError, parse_model_address

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("url", "protocol", "base", "name", "version"),
    [
        ("http://h:8080/v2/models/pipe", "rest", "http://h:8080", "pipe", None),
        ("https://gw.example/ns/p/v2/models/m-1/versions/v2/", "rest", "https://gw.example:443/ns/p", "m-1", "v2"),
        ("grpc://127.0.0.1:8081/pipe", "grpc", "127.0.0.1:8081", "pipe", None),
        ("grpcs://h:443/m.x/versions/3", "grpc", "h:443", "m.x", "3"),
        ("http://[::1]:9000/v2/models/m", "rest", "http://[::1]:9000", "m", None),
        ("http://gw:80/v2/models/v2", "rest", "http://gw:80", "v2", None),
        ("http://gw:80/v2/p/v2/models/m", "rest", "http://gw:80/v2/p", "m", None),  # a prefix with a v2 step
        ("http://[fe80::1%25eth0]:80/v2/models/m", "rest", "http://[fe80::1%25eth0]:80", "m", None),
    ],
)
def test_addresses_are_read(url: str, protocol: str, base: str, name: str, version: str | None) -> None:
    address = parse_model_address(url)
    assert (address.protocol, address.base_url, address.model_name, address.version) == (protocol, base, name, version)
    assert parse_model_address(str(address)) == address


def test_a_bare_host_takes_the_model_name_apart() -> None:
    address = parse_model_address("http://pred.ns:80", model_name="m", version="1")
    assert str(address) == "http://pred.ns:80/v2/models/m/versions/1"


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("ftp://h:1/v2/models/m", "unknown scheme 'ftp'"),
        ("h:8080/v2/models/m", "unknown scheme"),
        ("grpc://h/m", "needs its port"),
        ("http://h:8080/v1/models/m:predict", "has no /v2/models/NAME"),
        ("http://h:8080/v2/models/a/b", "bad REST path"),
        ("http://h:8080/v2/models/m?x=1", "no query"),
        ("http://u:p@h:8080/v2/models/m", "credentials"),
        ("http://h:8080", "no model name"),
        ("http://h:99999/v2/models/m", "out of range"),
        ("grpc://h:1/a/b", "bad gRPC path"),
        ("http://h:1/v2/models/m%20x", "bad model name"),
        ("", "give the served model's address"),
        ("http://h:1/v2/models/..", "bad model name '..'"),  # the request went to /v2/infer
        ("http://h:1/v2/models/m/versions/..", "bad version '..'"),  # to /v2/models/m/infer: no version
        ("grpc://h:1/.", "bad model name '.'"),
        ("http://h:1/v2models/m", "has no /v2/models/NAME"),  # was read as /v2/models/m
        ("http://h\x00:1/v2/models/m", "bad host"),  # httpx's InvalidURL at the first call
        ("http://\uff48:1/v2/models/m", "bad host"),  # a fullwidth h: httpx's InvalidURL (IDNA)
        ("grpc://h x:1/m", "bad host"),
        ("http://h:0/v2/models/m", "port 0"),
    ],
)
def test_bad_addresses_are_refused_in_one_line(url: str, problem: str) -> None:
    with pytest.raises(ModelAddressError, match=problem) as info:
        parse_model_address(url)
    assert "\n" not in str(info.value) and "http(s)://HOST:PORT/v2/models/NAME" in str(info.value)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://user:s3cret@h:80/v2/models/m", "http://…@h:80/v2/models/m"),
        ("grpc://tok:s3cret@h:81/m", "grpc://…@h:81/m"),
        ("http://h:80/v2/models/m?token=s3cret", "http://h:80/v2/models/m?…"),
        ("https://h/v2/models/m#s3cret", "https://h/v2/models/m#…"),
        ("http://a@s3cret@h:x/v2/models/m", "http://…@h:x/v2/models/m"),  # the bad port's error
        ("user:s3cret@h:80/v2/models/m", "…@h:80/v2/models/m"),  # no '//': an unknown scheme
    ],
)
def test_an_address_is_refused_without_showing_its_secrets(url: str, shown: str) -> None:
    """An address with credentials, a query or a fragment is refused, and the refusal (which goes
    into logs, and a card's error) quoted the address whole: ``http://user:PASSWORD@...``."""
    with pytest.raises(ModelAddressError) as info:
        parse_model_address(url)
    assert "s3cret" not in str(info.value) and info.value.field == shown


@pytest.mark.parametrize(
    ("headers", "field", "problem"),
    [
        ({"Authorization": "Bearer s3cret\n"}, "headers.Authorization", r"given '\\n' at character 14 of 14"),
        ({"Authorization": "Bearer s3cret\u00e9"}, "headers.Authorization", r"given '\u00e9' at character 14 of 14"),
        ({"Authorization: Bearer s3cret": "x"}, "headers", "given ':' at character 14 of 28"),
        ({"Authorization": b"Bearer s3cret"}, "headers.Authorization", "given bytes, not text"),
        ({"": "s3cret"}, "headers", "given an empty text"),
    ],
)
def test_a_refused_header_never_shows_its_text(headers: dict[str, object], field: str, problem: str) -> None:
    """A header carries secrets (a token): its refusal said ``given 'Bearer TOKEN\\n'``."""
    with pytest.raises(ModelAdapterError) as info:
        RemoteModel("grpc://h:1/m", headers=headers)  # type: ignore[arg-type]
    assert info.value.field == field and re.search(problem, info.value.problem)
    assert "s3cret" not in str(info.value)


def test_given_names_and_protocols_must_agree_with_the_address() -> None:
    with pytest.raises(ModelAddressError, match="names model name 'a', but 'b'"):
        parse_model_address("grpc://h:1/a", model_name="b")
    with pytest.raises(ModelAddressError, match="is grpc, but protocol 'rest'"):
        parse_model_address("grpc://h:1/a", protocol="rest")


@pytest.fixture(scope="module")
def space() -> object:
    data = pd.DataFrame(
        {
            "income": [10.5, 20.25, 30.0, 40.0],
            "age": [30, 40, 50, 60],
            "home": ["own", "rent", "own", "mortgage"],
            "flag": [True, False, True, False],
            "y": [0, 1, 0, 1],
        }
    )
    never_called = CallableAdapter(lambda X: X, [OutputSpec("y", (0, 1))])
    return Explainer(never_called, data, target="y", check=False).problem(0).space


def test_the_columns_layout_sends_each_feature_as_its_own_datatype(space: object) -> None:
    X = np.array([[10.5, 30.0, 0.0, 1.0], [20.25, 40.0, 1.0, 0.0]])
    request = build_request(X, space, "columns", ModelMetadata("m"), ("predict_proba",))  # type: ignore[arg-type]
    body = request_json(request)
    assert body["parameters"] == {"content_type": "pd"} and body["outputs"] == [{"name": "predict_proba"}]
    inputs = {i["name"]: i for i in body["inputs"]}
    assert inputs["income"] == {"name": "income", "datatype": "FP64", "shape": [2], "data": [10.5, 20.25]}
    assert inputs["age"]["datatype"] == "INT64" and inputs["age"]["data"] == [30, 40]
    assert inputs["flag"]["datatype"] == "BOOL" and inputs["flag"]["data"] == [True, False]
    home = inputs["home"]
    assert home["datatype"] == "BYTES" and home["parameters"] == {"content_type": "str"}
    assert set(home["data"]) <= {"own", "rent", "mortgage"} and len(home["data"]) == 2


def test_declared_inputs_set_the_order_datatypes_and_shapes(space: object) -> None:
    declared = ModelMetadata(
        "m",
        inputs=(TensorMeta("age", "FP32", (-1, 1)), TensorMeta("income", "FP64", (-1,))),
        parameters={"content_type": "pd"},
    )
    X = np.array([[10.5, 30.0, 0.0, 1.0]])
    request = build_request(X, space, choose_layout(declared), declared, ())  # type: ignore[arg-type]
    assert [(t.name, t.datatype, t.shape) for t in request.inputs] == [
        ("age", "FP32", (1, 1)),
        ("income", "FP64", (1,)),
    ]
    unknown = ModelMetadata("m", inputs=(TensorMeta("nope", "FP64", (-1,)), TensorMeta("age", "FP64", (-1,))))
    with pytest.raises(LayoutError, match=r"declares inputs \['nope'\]"):
        build_request(X, space, "columns", unknown, ())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("declared", "row", "problem"),
    [
        (("age", "INT8"), [10.5, 300.0, 0.0, 1.0], "input 'age' is INT8, which cannot carry the value 300"),  # sent 44
        (("age", "UINT8"), [10.5, -1.0, 0.0, 1.0], "input 'age' is UINT8, which cannot carry the value -1"),  # 255
        (("income", "INT64"), [10.5, 30.0, 0.0, 1.0], "input 'income' is INT64, which cannot carry the value 10.5"),
        (("income", "INT64"), [np.nan, 30.0, 0.0, 1.0], "input 'income' is INT64, which cannot carry the value nan"),
        (("income", "FP16"), [1e6, 30.0, 0.0, 1.0], "input 'income' is FP16, which cannot carry the value 1000000.0"),
        (("home", "BOOL"), [10.5, 30.0, 0.0, 1.0], "input 'home' is BOOL, and the feature's values are text"),  # True
        (("home", "FP64"), [10.5, 30.0, 0.0, 1.0], "input 'home' is FP64, and the feature's values are text"),
    ],
)
def test_values_a_declared_input_cannot_carry_are_refused(
    space: object, declared: tuple[str, str], row: list[float], problem: str
) -> None:
    """numpy's casts are silent: the model would answer about values no candidate has."""
    metadata = ModelMetadata("m", inputs=(TensorMeta(*declared, (-1,)),), parameters={"content_type": "pd"})
    with pytest.raises(LayoutError, match=re.escape(problem)):
        build_request(np.array([row]), space, "columns", metadata, ())  # type: ignore[arg-type]


def test_a_declared_narrower_type_takes_the_values_it_can_carry(space: object) -> None:
    metadata = ModelMetadata(
        "m",
        inputs=(
            TensorMeta("age", "INT8", (-1,)),
            TensorMeta("income", "FP16", (-1,)),
            TensorMeta("flag", "INT8", (-1,)),
        ),
        parameters={"content_type": "pd"},
    )
    request = build_request(np.array([[10.5, 30.0, 0.0, 1.0]]), space, "columns", metadata, ())  # type: ignore[arg-type]
    assert [t.data.tolist() for t in request.inputs] == [[30], [10.5], [1]]
    nan = build_request(np.array([[np.nan, 30.0, 0.0, 1.0]]), space, "columns", ModelMetadata("m"), ())  # type: ignore[arg-type]
    assert request_json(nan)["inputs"][0]["data"] == [None]  # a missing number in a float input: null


def test_the_tensor_layout_sends_the_encoded_matrix(space: object) -> None:
    X = np.arange(8.0).reshape(2, 4)
    request = build_request(X, space, "tensor", ModelMetadata("m"), ())  # type: ignore[arg-type]
    assert request_json(request)["inputs"] == [
        {"name": "input-0", "datatype": "FP64", "shape": [2, 4], "data": [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]}
    ]
    narrow = ModelMetadata("m", inputs=(TensorMeta("x", "FP32", (-1, 3)),))
    with pytest.raises(LayoutError, match="has 3 columns; there are 4 features"):
        build_request(X, space, "tensor", narrow, ())  # type: ignore[arg-type]


def test_the_tensor_layout_sends_a_gap_as_null_and_codes_as_their_numbers() -> None:
    """The one tensor is the array a model fitted on one was trained on: a gap is NaN (null over
    REST), not the feature's missing code, and a category stored as numbers is its number."""
    data = pd.DataFrame({"income": [10.0, np.nan, 30.0], "grade": [1, 5, 9], "y": [0, 1, 0]})
    never_called = CallableAdapter(lambda X: X, [OutputSpec("y", (0, 1))])
    explainer = Explainer(never_called, data, target="y", check=False, overrides={"grade": {"kind": "categorical"}})
    space = explainer.problem(1).space
    X = np.array([[space.missing_code[0], 2.0], [20.0, 0.0]])
    request = build_request(X, space, "tensor", ModelMetadata("m"), ())
    assert request_json(request)["inputs"][0]["data"] == [None, 9.0, 20.0, 1.0]


def test_text_inputs_are_each_value_as_python_writes_it(space: object) -> None:
    """BYTES inputs turn each distinct value once; the values are what ``str`` makes of each one,
    a gap included (as the value-by-value loop wrote them), and the columns are the frame's."""
    X = np.array([[10.5, 30.0, 0.0, 1.0], [20.25, 40.0, 1.0, 0.0], [30.0, 50.0, 2.0, 1.0], [10.5, 60.0, 0.0, 0.0]])
    names = ("income", "age", "home", "flag")
    declared = ModelMetadata("m", inputs=tuple(TensorMeta(n, "BYTES", (-1,)) for n in names))
    request = build_request(X, space, "columns", declared, ())  # type: ignore[arg-type]
    frame = space.to_frame(X)  # type: ignore[attr-defined]
    for tensor in request.inputs:
        assert tensor.data.dtype == object
        assert tensor.data.tolist() == [str(v) for v in frame[tensor.name].tolist()]
    assert request.inputs[1].data.tolist() == ["30", "40", "50", "60"]
    assert request.inputs[3].data.tolist() == ["True", "False", "True", "False"]
    columns = space.to_columns(X)  # type: ignore[attr-defined]
    assert list(columns) == list(frame.columns)
    for name, values in columns.items():
        np.testing.assert_array_equal(values, frame[name].to_numpy())
    mixed = np.array(["own", None, 3, np.nan, "own"] * 200, dtype=object)  # gaps too, as str writes them
    assert _texts(mixed).tolist() == ["own", "None", "3", "nan", "own"] * 200  # past FEW_TEXTS: distinct ones once
    assert _texts(mixed[:5]).tolist() == ["own", "None", "3", "nan", "own"]


def test_a_missing_number_is_sent_as_null_over_rest() -> None:
    tensor = Tensor("x", "FP64", (3,), np.array([1.0, np.nan, np.inf]))
    assert request_json(InferRequest((tensor,)))["inputs"][0]["data"] == [1.0, None, None]
    with pytest.raises(ModelAdapterError, match="do not sort"):
        RemoteModel("grpc://h:1/m").for_target("y", np.array([1, "a"], dtype=object))


def test_the_layout_follows_the_metadata() -> None:
    assert choose_layout(ModelMetadata("m")) == "tensor"
    assert choose_layout(ModelMetadata("m", parameters={"content_type": "pd"})) == "columns"
    two = (TensorMeta("a", "FP64", (-1,)), TensorMeta("b", "BYTES", (-1,)))
    assert choose_layout(ModelMetadata("m", inputs=two)) == "columns"
    assert choose_layout(ModelMetadata("m", inputs=two[:1])) == "tensor"


def test_a_request_splits_by_rows_and_bytes_in_order() -> None:
    data = np.arange(20.0)
    request = InferRequest((Tensor("x", "FP64", (10, 2), data),), ("p",), {"content_type": "pd"})
    parts = list(split_request(request, max_rows=4, max_bytes=10**9))
    assert [p.rows for p in parts] == [4, 4, 2]
    assert np.concatenate([p.inputs[0].data for p in parts]).tolist() == data.tolist()
    assert all(p.outputs == ("p",) and p.parameters == {"content_type": "pd"} for p in parts)
    assert [p.rows for p in split_request(request, max_rows=100, max_bytes=48 * 3)] == [3, 3, 3, 1]
    assert [p.rows for p in split_request(request, max_rows=100, max_bytes=1)] == [1] * 10


def test_answers_are_reshaped_and_checked() -> None:
    body = {
        "outputs": [
            {"name": "predict", "datatype": "BYTES", "shape": [2, 1], "data": ["a", "b"]},
            {"name": "predict_proba", "datatype": "FP64", "shape": [2, 2], "data": [0.1, 0.9, 0.8, 0.2]},
        ]
    }
    outputs = outputs_from_json(body)
    proba = probabilities(read_output(outputs, "predict_proba", 2), 2, "predict_proba")
    np.testing.assert_array_equal(proba, [[0.1, 0.9], [0.8, 0.2]])
    with pytest.raises(LayoutError, match="for 3 rows"):
        read_output(outputs, "predict_proba", 3)
    with pytest.raises(LayoutError, match="no output 'x'"):
        read_output(outputs, "x", 2)
    with pytest.raises(LayoutError, match="output 'predict_proba' more than once"):  # the first was taken
        read_output((*outputs, outputs[1]), "predict_proba", 2)
    with pytest.raises(LayoutError, match="not probabilities"):
        probabilities(read_output(outputs, "predict", 2), 2, "predict")
    bad = {"outputs": [{"name": "p", "datatype": "FP64", "shape": [2, 2], "data": [0.1, 0.9, 0.8]}]}
    with pytest.raises(ProtocolFormError, match="3 values for shape"):
        outputs_from_json(bad)[0].array()
    with pytest.raises(ProtocolFormError, match="no outputs"):
        outputs_from_json({"outputs": []})


@pytest.mark.parametrize(
    ("datatype", "data", "problem"),
    [
        ("INT64", [0.3, 0.7], "not INT64: a value is not a whole number"),  # numpy read it as [0, 0]
        ("UINT8", [-1, 1], "not UINT8: Python integer -1 out of bounds"),  # numpy's OverflowError
        ("INT64", [10**30, 1], "not INT64: Python int too large"),
        ("FP64", ["a", 1], "not FP64: could not convert"),
    ],
)
def test_answer_values_not_of_their_datatype_are_refused(datatype: str, data: list[object], problem: str) -> None:
    body = {"outputs": [{"name": "p", "datatype": datatype, "shape": [1, 2], "data": data}]}
    with pytest.raises(ProtocolFormError, match=f"output 'p' has data that is {problem}"):
        outputs_from_json(body)


def test_grpc_answer_values_not_of_their_datatype_are_refused() -> None:
    _, parse = oip_grpc.codecs("ModelInfer")
    typed = parse(b"")
    typed.outputs.add(name="p", datatype="INT8", shape=[1, 2]).contents.int_contents.extend([1000, 0])
    with pytest.raises(ProtocolFormError, match="output 'p' has data that is not INT8"):
        oip_grpc.read_outputs(typed)
    raw = parse(b"")
    raw.outputs.add(name="p", datatype="FP64", shape=[1, 1])
    raw.raw_output_contents.append(b"\0" * 7)
    with pytest.raises(ProtocolFormError, match="7 raw bytes are no whole number of FP64 values"):
        oip_grpc.read_outputs(raw)
    with pytest.raises(ProtocolFormError, match="not a ModelInferResponse message"):
        oip_grpc.parse_answer("ModelInfer", b"\xff\xff\xff\xff\x0f")


def test_a_shape_that_cannot_hold_the_values_is_a_wrong_answer_never_numpys_error() -> None:
    """numpy's product of [2**32, 2**32] wraps to 0, so no values passed the size check and the
    reshape raised a plain ValueError, and gRPC's signed dimensions reached the reshape ("can only
    specify one unknown dimension"): either read as the model raising, and the calculator bisected
    the batch with more calls to the server, instead of a wrong answer stopping the solve."""
    body = {"outputs": [{"name": "p", "datatype": "FP64", "shape": [2**32, 2**32], "data": []}]}
    with pytest.raises(ProtocolFormError, match=r"output 'p' has 0 values for shape \[4294967296, 4294967296\]"):
        outputs_from_json(body)[0].array()
    _, parse = oip_grpc.codecs("ModelInfer")
    for shape in ([-1, -2], [-2, -1]):
        typed = parse(b"")
        typed.outputs.add(name="p", datatype="FP64", shape=shape).contents.fp64_contents.extend([0.5, 0.5])
        with pytest.raises(ProtocolFormError, match=r"output 'p' has a bad shape \[-"):
            oip_grpc.read_outputs(typed)[0].array()


def test_grpc_values_are_counted_against_their_shape_before_they_are_decoded() -> None:
    """Decoding a message's values into Python's takes up to ten times their bytes: a count the
    shape does not hold is refused first, and raw texts are read no further than the shape."""
    _, parse = oip_grpc.codecs("ModelInfer")
    typed = parse(b"")
    typed.outputs.add(name="p", datatype="BYTES", shape=[1, 2]).contents.bytes_contents.extend([b"a"] * 3)
    with pytest.raises(ProtocolFormError, match=r"output 'p' has 3 values for shape \[1, 2\]"):
        oip_grpc.read_outputs(typed)
    raw = parse(b"")
    raw.outputs.add(name="p", datatype="BYTES", shape=[1, 2])
    raw.raw_output_contents.append(struct.pack("<I", 1) + b"a" + struct.pack("<I", 1) + b"b" + b"\xff" * 10_000)
    with pytest.raises(ProtocolFormError, match=r"output 'p' has more than 2 values for shape \[1, 2\]"):
        oip_grpc.read_outputs(raw)


def test_metadata_is_read_from_json() -> None:
    metadata = metadata_from_json(
        {
            "name": "pipe",
            "inputs": [{"name": "income", "datatype": "fp64", "shape": [-1]}],
            "outputs": [{"name": "predict_proba", "datatype": "FP64", "shape": [-1, 2]}],
            "parameters": {"content_type": "pd", "n": 3},
        }
    )
    assert metadata.inputs == (TensorMeta("income", "FP64", (-1,)),)
    assert metadata.parameters == {"content_type": "pd"}


def test_grpc_messages_carry_typed_and_raw_contents() -> None:
    request = InferRequest(
        (
            Tensor("home", "BYTES", (2,), np.array(["own", "rent"], dtype=object), {"content_type": "str"}),
            Tensor("x", "FP64", (2, 1), np.array([1.5, 2.5])),
        ),
        ("predict_proba",),
        {"content_type": "pd"},
    )
    message = oip_grpc.infer_request(request, "m", "v1")
    assert message.model_version == "v1" and message.parameters["content_type"].string_param == "pd"
    assert list(message.inputs[0].contents.bytes_contents) == [b"own", b"rent"]
    assert list(message.inputs[1].contents.fp64_contents) == [1.5, 2.5]
    _, parse = oip_grpc.codecs("ModelInfer")
    response = parse(b"")
    response.outputs.add(name="p", datatype="FP64", shape=[2, 2])
    response.outputs.add(name="label", datatype="BYTES", shape=[2])
    response.raw_output_contents.append(np.array([0.1, 0.9, 0.7, 0.3], dtype="<f8").tobytes())
    response.raw_output_contents.append(b"".join(struct.pack("<I", len(s)) + s for s in (b"no", b"yes")))
    outputs = oip_grpc.read_outputs(response)
    np.testing.assert_array_equal(outputs[0].array(), [[0.1, 0.9], [0.7, 0.3]])
    assert outputs[1].data.tolist() == ["no", "yes"]


def test_the_grpc_messages_stay_out_of_the_default_descriptor_pool() -> None:
    """kserve's and MLServer's stubs register ``inference.*`` there; a second copy would not load."""
    from google.protobuf import descriptor_pool

    oip_grpc.codecs("ModelInfer")
    ours = oip_grpc._messages()["ModelInferRequest"].DESCRIPTOR.file.pool
    assert ours is not descriptor_pool.Default()
    if "kserve" not in sys.modules and "mlserver" not in sys.modules:  # theirs, imported by other tests, put it there
        with pytest.raises(KeyError):
            descriptor_pool.Default().FindMessageTypeByName("inference.ModelInferRequest")


def test_the_committed_descriptor_is_what_the_tool_generates(tmp_path: Path) -> None:
    out = tmp_path / "d.py"
    subprocess.run([sys.executable, str(ROOT / "tools" / "generate_oip_descriptor.py"), str(out)], check=True, cwd=ROOT)
    committed = ROOT / "planning" / "remote" / "_oip_descriptor.py"
    assert out.read_text() == committed.read_text(), "stale: run tools/generate_oip_descriptor.py"


def test_retries_wait_longer_each_time_within_the_budget() -> None:
    waits: list[float] = []
    now = [0.0]

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        now[0] += seconds

    def failing() -> int:
        raise TransientError("refused")

    policy = RetryPolicy(attempts=10, backoff=0.5, max_wait=3.0, budget=8.0)
    with pytest.raises(TransientError, match=r"refused \(after 5 attempts\)"):
        with_retries(failing, policy, sleep=sleep, clock=lambda: now[0])
    assert waits == [0.5, 1.0, 2.0, 3.0]  # the next 3.0 would end after the 8 s budget
    answers = iter([TransientError("x"), 7])

    def flaky() -> int:
        value = next(answers)
        if isinstance(value, Exception):
            raise value
        return value

    assert with_retries(flaky, policy, sleep=sleep, clock=lambda: now[0]) == 7


def test_no_retry_starts_once_the_calls_time_is_spent() -> None:
    """A call's attempts share its time (``ends``): each failing after 2 s, a call of 5 s makes
    three, where the budget alone allowed all ten, each with its whole timeout again."""
    now = [0.0]

    def slow_failure() -> int:
        now[0] += 2.0
        raise TransientError("reset")

    def sleep(seconds: float) -> None:
        now[0] += seconds

    policy = RetryPolicy(attempts=10, backoff=0.1, max_wait=0.1, budget=3600.0)
    with pytest.raises(TransientError, match=r"reset \(after 3 attempts\)"):
        with_retries(slow_failure, policy, sleep=sleep, clock=lambda: now[0], ends=5.0)


def test_error_bodies_become_one_line() -> None:
    assert body_line('{"error": "Model nope not found"}') == "Model nope not found"
    assert body_line('{"detail": [{"type": "json_invalid"}]}') == '[{"type": "json_invalid"}]'
    assert body_line("Traceback\n  File x\nValueError: bad\n\n") == "ValueError: bad"
    assert len(body_line("x" * 10**6)) <= 300


def test_a_remote_model_pickles_without_a_connection_and_binds_a_target() -> None:
    model = RemoteModel("http://127.0.0.1:1/v2/models/m", headers={"Authorization": "Bearer t"})
    bound = model.for_target("approved", np.array(["yes", "no", "yes"]))
    assert bound.outputs == (OutputSpec("approved", ("no", "yes")),) and model.output is None
    copy = pickle.loads(pickle.dumps(bound))
    assert copy.outputs == bound.outputs and copy.transport.headers == {"Authorization": "Bearer t"}  # type: ignore[attr-defined]
    assert RemoteModel("grpc://h:1/m", classes=["a", "b"]).outputs[0].classes == ("a", "b")
    regressor = RemoteModel("grpc://h:1/m", task="regression").for_target("price", np.array([1.0, 2.0]))
    assert regressor.outputs == (OutputSpec("price"),)
    with pytest.raises(ModelAdapterError, match="two distinct class names"):
        RemoteModel("grpc://h:1/m", classes=["a", "a"])
    with pytest.raises(ModelAdapterError, match="timeout"):
        RemoteModel("grpc://h:1/m", timeout=0)


@pytest.mark.parametrize(
    ("url", "option", "field"),
    [
        ("http://h:1/v2/models/m", {"timeout": float("inf")}, "timeout"),  # REST: an OverflowError at the call
        ("grpc://h:1/m", {"timeout": "5"}, "timeout"),
        ("http://h:1/v2/models/m", {"connect_timeout": 0}, "connect_timeout"),  # was named 'timeout', given 10
        ("http://h:1/v2/models/m", {"max_bytes": float("nan")}, "max_bytes"),  # a ValueError at the split
        ("http://h:1/v2/models/m", {"max_rows": "5"}, "max_rows"),
        ("grpc://h:1/m", {"headers": {"x-caller": "caf\u00e9"}}, "headers.x-caller"),  # gRPC INTERNAL: the model's?
        ("grpc://h:1/m", {"headers": {"token": "a\nb"}}, "headers.token"),
        ("http://h:1/v2/models/m", {"headers": {"a\n": "b"}}, "headers"),
        ("http://h:1/v2/models/m", {"headers": {"n": 1}}, "headers.n"),  # httpx's TypeError at the call
        ("grpc://h:1/m", {"headers": {"trace-bin": "x"}}, "headers.trace-bin"),
        ("https://h:1/v2/models/m", {"verify": "/no/such/ca.pem"}, "verify"),  # FileNotFoundError at the call
        ("grpcs://h:1/m", {"verify": False}, "verify"),  # was ignored: gRPC verified anyway
        ("http://h:1/v2/models/m", {"retry": {"attempts": 2}}, "retry"),  # AttributeError at the call
        ("http://h:1/v2/models/m", {"classes": [[0], [1]]}, "classes"),  # TypeError: unhashable
    ],
)
def test_bad_options_are_refused_naming_them(url: str, option: dict[str, object], field: str) -> None:
    with pytest.raises(ModelAdapterError) as info:
        RemoteModel(url, **option)  # type: ignore[arg-type]
    assert info.value.field == field


def test_a_ca_bundle_that_is_no_certificate_is_refused_when_the_model_is_built(tmp_path: Path) -> None:
    (tmp_path / "ca.pem").write_text("not a certificate")
    with pytest.raises(ModelAdapterError, match="cannot read the CA bundle"):
        RemoteModel("https://h:1/v2/models/m", verify=str(tmp_path / "ca.pem"))


def test_every_pool_of_a_rest_client_waits_by_the_call_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The deadline is set on the client's own pool and on its proxies' (here from the
    environment's HTTP_PROXY); a client whose pools are not where httpx keeps them (a mock
    transport stands for a future httpx) is refused with a clear error, never left unbounded."""
    import httpx

    from counterplan.planning.remote.rest_deadline import DeadlineBackend, bind_deadlines

    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    with httpx.Client() as client:
        bind_deadlines(client)
        bind_deadlines(client)  # twice: wrapped once
        transports = [client._transport, *(t for t in client._mounts.values() if t is not None)]
        backends = [t._pool._network_backend for t in transports]  # type: ignore[attr-defined]
    assert len(backends) == 2 and all(isinstance(b, DeadlineBackend) for b in backends)
    assert not any(isinstance(b._backend, DeadlineBackend) for b in backends)
    with (
        httpx.Client(transport=httpx.MockTransport(lambda request: httpx.Response(200))) as mocked,
        pytest.raises(ModelAdapterError, match=r"cannot bound a call's whole time .*pip install 'httpx>=0.27,<0.29'"),
    ):
        bind_deadlines(mocked)
