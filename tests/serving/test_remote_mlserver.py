"""RemoteModel against a real MLServer: the served answers are the local model's answers."""

from __future__ import annotations

import pickle
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from counterplan import (
    CallableAdapter,
    ClassGoal,
    CounterfactualProblem,
    Explainer,
    OutputSpec,
    SolverConfig,
    TerminationConfig,
)
from counterplan.planning.demo import TARGET, rejected_applicant
from counterplan.planning.errors import RemoteInferenceError, RemoteModelError
from counterplan.planning.remote import RemoteModel
from tests.serving.conftest import NUMBERS, Served

pytestmark = pytest.mark.integration

PROTOCOLS = ["rest", "grpc"]
QUICK = SolverConfig(termination=TerminationConfig(step_count_limit=40))


def url(served: Served, protocol: str, name: str) -> str:
    return f"{served.server.rest}/v2/models/{name}" if protocol == "rest" else f"{served.server.grpc}/{name}"


def rows(served: Served, n: int = 7) -> np.ndarray:
    explainer = Explainer(served.pipe, served.data, target=TARGET, check=False)
    space = explainer.problem(0).space
    return space, np.stack([explainer.problem(i).space.original for i in range(n)])


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_served_pipeline_answers_equal_the_local_predict_proba(served: Served, protocol: str) -> None:
    space, X = rows(served)
    model = RemoteModel(url(served, protocol, "pipe")).for_target(TARGET, served.data[TARGET])
    answer = model.predict(X, space)[TARGET]
    assert model.outputs[0].classes == ("no", "yes")
    np.testing.assert_array_equal(answer, served.pipe.predict_proba(space.to_frame(X)))
    # one request; over gRPC MLServer cannot send the text labels the first call checks with: one more
    assert model.request_count == (1 if protocol == "rest" else 2)
    model.predict(X, space)
    assert model.request_count == (2 if protocol == "rest" else 3)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_served_bare_estimator_gets_one_tensor(served: Served, protocol: str) -> None:
    model = RemoteModel(url(served, protocol, "gb"), classes=["no", "yes"], output=TARGET)
    explainer = Explainer(served.gb, served.numbers, target=TARGET, check=False)
    space = explainer.problem(0).space
    X = np.stack([explainer.problem(i).space.original for i in range(9)])
    np.testing.assert_array_equal(model.predict(X, space)[TARGET], served.gb.predict_proba(X))
    assert model.metadata().inputs == ()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_an_explainer_on_the_served_pipeline_gives_the_local_answer(served: Served, protocol: str) -> None:
    goal = [ClassGoal(target="yes", confidence=0.7)]
    local = Explainer(served.pipe, served.data, goal, target=TARGET, config=QUICK, seed=3)
    remote = Explainer(
        RemoteModel(url(served, protocol, "pipe")), served.data, goal, target=TARGET, config=QUICK, seed=3
    )
    assert remote.columns == local.columns
    want, got = local.explain(rejected_applicant()), remote.explain(rejected_applicant())
    assert want.valid and got.valid and want.changes
    assert got.proposed == want.proposed and got.score == want.score
    assert got.statistics.model_call_count == want.statistics.model_call_count
    assert remote.adapter.request_count >= got.statistics.model_call_count  # one request per model call


def test_an_explainer_on_the_served_bare_estimator_gives_the_local_answer(served: Served) -> None:
    """A served tree model is a black box (no split values reach the search): its twin is the
    local model behind a plain function."""
    goal = [ClassGoal(target="yes", confidence=0.6)]
    row = {k: v for k, v in rejected_applicant().items() if k in NUMBERS}
    black_box = CallableAdapter(served.gb.predict_proba, [OutputSpec(TARGET, ("no", "yes"))])
    local = Explainer(black_box, served.numbers, goal, target=TARGET, config=QUICK, seed=5)
    remote = Explainer(
        RemoteModel(url(served, "rest", "gb")), served.numbers, goal, target=TARGET, config=QUICK, seed=5
    )
    want, got = local.explain(row), remote.explain(row)
    assert want.valid and got.valid and want.changes
    assert got.proposed == want.proposed and got.score == want.score


def test_a_large_call_is_split_at_the_size_limit(served: Served) -> None:
    space, X = rows(served, 10)
    model = RemoteModel(url(served, "rest", "pipe"), classes=["no", "yes"], max_rows=4)
    model._labels_checked = True
    answer = model.predict(X, space)["prediction"]
    assert model.request_count == 3  # 4 + 4 + 2 rows
    np.testing.assert_array_equal(answer, served.pipe.predict_proba(space.to_frame(X)))
    by_bytes = RemoteModel(url(served, "rest", "pipe"), classes=["no", "yes"], max_bytes=600)
    by_bytes._labels_checked = True
    by_bytes.predict(X, space)
    assert by_bytes.request_count == 5  # about 250 bytes a row: 2 rows a request


def test_class_names_in_another_order_are_refused_and_given_ones_are_used(served: Served) -> None:
    space, X = rows(served)
    wrong = RemoteModel(url(served, "rest", "pipe"), classes=["yes", "no"])
    wrong._labels_checked = False  # check the given order against the server's own labels
    with pytest.raises(RemoteModelError, match="give classes= in the model's column order"):
        wrong.predict(X, space)
    numbered = RemoteModel(url(served, "rest", "pipe"))  # no target, no classes: the declared width
    assert numbered.outputs[0].classes == (0, 1)
    undeclared = RemoteModel(url(served, "rest", "gb"))
    with pytest.raises(RemoteModelError, match="give classes="):
        _ = undeclared.outputs


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_an_unknown_model_is_one_line_naming_it(served: Served, protocol: str) -> None:
    model = RemoteModel(url(served, protocol, "nope"), classes=["no", "yes"])
    with pytest.raises(RemoteModelError, match="does not know model 'nope'") as info:
        model.metadata()
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_model_that_raises_is_a_model_failure_in_one_line(served: Served, protocol: str) -> None:
    """The bare estimator sent the pipeline's 11 features: scikit-learn raises in the server."""
    space, X = rows(served)
    model = RemoteModel(url(served, protocol, "gb"), classes=["no", "yes"])
    with pytest.raises(RemoteInferenceError, match="features") as info:
        model.predict(X, space)
    assert "\n" not in str(info.value) and "Traceback" not in str(info.value)


def test_a_wrong_answer_shape_is_refused(served: Served) -> None:
    space, X = rows(served)
    three = RemoteModel(url(served, "rest", "pipe"), classes=["a", "b", "c"])
    with pytest.raises(RemoteModelError, match=r"expected \[rows, 3\]"):
        three.predict(X, space)
    labels = RemoteModel(url(served, "rest", "pipe"), classes=["no", "yes"], served_output="predict")
    with pytest.raises(RemoteModelError, match="not probabilities"):
        labels.predict(X, space)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_pickled_model_and_threads_share_nothing_live(served: Served, protocol: str) -> None:
    space, X = rows(served)
    model = RemoteModel(url(served, protocol, "pipe")).for_target(TARGET, served.data[TARGET])
    first = model.predict(X, space)[TARGET]
    copy = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(copy.predict(X, space)[TARGET], first)
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda _: model.predict(X, space)[TARGET], range(8)))
    for answer in answers:
        np.testing.assert_array_equal(answer, first)


def test_a_problem_from_a_dataframe_binds_the_target_and_the_declared_columns(served: Served) -> None:
    """The target names the output and its labels the classes; the declared inputs are the features
    (an identifier column the model does not read is left out)."""
    data = served.data.assign(applicant_id=range(len(served.data)))
    goal = [ClassGoal(target="yes", confidence=0.7)]
    problem = CounterfactualProblem.from_dataframe(
        data, 0, RemoteModel(url(served, "rest", "pipe")), goal, target=TARGET
    )
    assert problem.model.outputs == (OutputSpec(TARGET, ("no", "yes")),)
    explainer = Explainer(RemoteModel(url(served, "rest", "pipe")), data, goal, target=TARGET)
    assert "applicant_id" not in explainer.columns and len(explainer.columns) == 11


def test_mlserver_answers_a_rest_request_uncompressed(served: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    """MLServer's gzip middleware compresses an answer over 500 bytes when the client accepts it;
    the client does not, and the answers stay the local model's."""
    import httpx

    encodings: list[str | None] = []
    send = httpx.Client.send

    def recording(self: httpx.Client, request: httpx.Request, **kwargs: object) -> httpx.Response:
        response = send(self, request, **kwargs)  # type: ignore[arg-type]
        encodings.append(response.headers.get("content-encoding"))
        return response

    monkeypatch.setattr(httpx.Client, "send", recording)
    space, X = rows(served, 40)
    X = np.repeat(X, 5, axis=0)  # 200 rows: an answer of some kilobytes
    model = RemoteModel(url(served, "rest", "pipe"), classes=["no", "yes"], output=TARGET)
    np.testing.assert_array_equal(model.predict(X, space)[TARGET], served.pipe.predict_proba(space.to_frame(X)))
    assert encodings and encodings[-1] is None
