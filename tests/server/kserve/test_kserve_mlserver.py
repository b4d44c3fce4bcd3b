"""The KServe explainer over a real predictor: MLServer on loopback serving the credit pipeline,
asked over V2 REST and gRPC, the explainer in this process's KServe REST server, over HTTP."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx
import numpy as np
import pandas as pd
import pytest
from sklearn.pipeline import Pipeline

from counterplan.solver.explainer import Explainer
from tests.server.kserve.conftest import GRPC_NAME, INPUTS, REST_NAME, TARGET
from tests.serving.mlserver import MLServer

if TYPE_CHECKING:
    from counterplan.server.kserve.runtime import KServeRuntime

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore:ORJSONResponse is deprecated")]

ROWS = [{"income": 40.0, "age": 30, "housing": "rent"}, {"income": 45.5, "age": 52, "housing": "free"}]


@pytest.fixture(scope="module")
def client(kserve_runtime: tuple[KServeRuntime, str], mlserver: MLServer, credit_data: pd.DataFrame) -> Any:
    from counterplan.server.kserve.predictor import predictor_model
    from counterplan.server.kserve.runtime import CounterplanExplainer

    runtime, url = kserve_runtime
    for name, protocol, port in ((REST_NAME, "v2", mlserver.http_port), (GRPC_NAME, "grpc-v2", mlserver.grpc_port)):
        model = predictor_model(f"127.0.0.1:{port}", protocol, name, timeout=30)

        def build(model: Any = model) -> Explainer:
            return Explainer(model, credit_data, target=TARGET)

        runtime.add(CounterplanExplainer(name, build))
    with httpx.Client(base_url=url, timeout=120) as http:
        yield http


def served_proba(mlserver: MLServer, rows: list[dict[str, Any]]) -> np.ndarray:
    """The predictor's own answer for ``rows``, asked directly (not through counterplan)."""
    frame = pd.DataFrame(rows)
    inputs = [
        {"name": c["name"], "datatype": c["datatype"], "shape": [len(frame)], "data": frame[c["name"]].tolist()}
        for c in INPUTS
    ]
    body = {"parameters": {"content_type": "pd"}, "inputs": inputs, "outputs": [{"name": "predict_proba"}]}
    answer = httpx.post(f"{mlserver.rest}/v2/models/{REST_NAME}/infer", json=body, timeout=30).json()
    (output,) = answer["outputs"]
    return np.asarray(output["data"], dtype=np.float64).reshape(output["shape"])


@pytest.mark.parametrize("name", [REST_NAME, GRPC_NAME])
def test_explain_through_mlserver_equals_the_local_models_answers(
    client: httpx.Client, mlserver: MLServer, credit_data: pd.DataFrame, credit_model: Pipeline, name: str
) -> None:
    response = client.post(
        f"/v1/models/{name}:explain", json={"instances": ROWS, "parameters": {"seed": 9, "num_counterfactuals": 2}}
    )
    assert response.status_code == 200, response.text
    explanations = response.json()["explanations"]
    local = Explainer(credit_model, credit_data, target=TARGET)
    for row, got in zip(ROWS, explanations, strict=True):
        expected = local.explain(row, seed=9, num_counterfactuals=2).model_dump(mode="json")
        assert got["valid"] and got["original"] == row and len(got["counterfactuals"]) == 2
        for key in ("proposed", "changes", "score", "counterfactuals", "goal"):
            assert got[key] == expected[key], key
        # each answer's prediction is the predictor's own, and it reaches the goal (good by the margin)
        proposed = [answer["proposed"] for answer in got["counterfactuals"]]
        proba = served_proba(mlserver, proposed)
        for answer, (bad, good) in zip(got["counterfactuals"], proba, strict=True):
            assert answer["predictions"][TARGET] == pytest.approx({"bad": bad, "good": good}, abs=1e-12)
            assert good >= 0.5025 and answer["valid"]


def test_a_bad_instance_is_400_before_the_predictor_is_asked(
    client: httpx.Client, kserve_runtime: tuple[KServeRuntime, str]
) -> None:
    explainer = kserve_runtime[0].server.registered_models.get_model(REST_NAME).explainer
    asked = explainer.adapter.request_count
    response = client.post(
        f"/v1/models/{REST_NAME}:explain", json={"instances": [ROWS[0], {**ROWS[1], "income": "lots"}]}
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"].startswith("instances[1].income: numeric column given the text")
    assert explainer.adapter.request_count == asked
