"""The KServe runtime's fixtures: a small credit model, and one in-process KServe REST server.

The SDK's FastAPI app is module-global and takes its routes and middleware once, so the tests
share one server for the whole session (on a free loopback port), and each test module adds
the models it asks about to it.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from tests.serving.mlserver import MLServer, ServedModel, mlserver_binary, start

if TYPE_CHECKING:
    from counterplan.server.kserve.runtime import KServeRuntime

TARGET = "credit"
REST_NAME, GRPC_NAME = "credit", "credit-grpc"
"""The predictor's model names (KServe names the explainer and the predictor's model alike)."""
INPUTS = [
    {"name": "income", "datatype": "FP64", "shape": [-1]},
    {"name": "age", "datatype": "INT64", "shape": [-1]},
    {"name": "housing", "datatype": "BYTES", "shape": [-1]},
]
OUTPUTS = [{"name": "predict_proba", "datatype": "FP64", "shape": [-1, 2]}]


@pytest.fixture(scope="session")
def credit_data() -> pd.DataFrame:
    """Applicants with a number, a whole number and a category, labelled good or bad."""
    rng = np.random.default_rng(7)
    n = 400
    frame = pd.DataFrame(
        {
            "income": rng.normal(50, 10, n).round(1),
            "age": rng.integers(18, 70, n),
            "housing": rng.choice(["own", "rent", "free"], n),
        }
    )
    score = frame["income"] + 0.3 * frame["age"] + 5 * (frame["housing"] == "own") + rng.normal(0, 4, n)
    return frame.assign(**{TARGET: np.where(score > 66, "good", "bad")})


@pytest.fixture(scope="session")
def credit_model(credit_data: pd.DataFrame) -> Pipeline:
    """A scaled and one-hot logistic regression, as a KServe sklearn predictor would serve it."""
    columns = ColumnTransformer(
        [("num", StandardScaler(), ["income", "age"]), ("cat", OneHotEncoder(handle_unknown="ignore"), ["housing"])]
    )
    model = Pipeline([("ct", columns), ("clf", LogisticRegression())])
    return model.fit(credit_data.drop(columns=[TARGET]), credit_data[TARGET])


@pytest.fixture(scope="session")
def mlserver(tmp_path_factory: pytest.TempPathFactory, credit_model: Pipeline) -> Iterator[MLServer]:
    """The credit pipeline under two names (one per protocol: KServe names the explainer and the
    predictor's model alike), per-column inputs with the pandas codec, as KServe's sklearn runtime."""
    binary = mlserver_binary()
    models = [ServedModel(name, credit_model, INPUTS, OUTPUTS, "pd") for name in (REST_NAME, GRPC_NAME)]
    server = start(binary, Path(tmp_path_factory.mktemp("kserve-predictor")), models)
    yield server
    server.stop()


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="session")
def kserve_runtime() -> Iterator[tuple[KServeRuntime, str]]:
    """The runtime (no models yet) serving on 127.0.0.1, and its base URL; stopped at the end."""
    from counterplan.server.kserve.sdk import import_kserve

    import_kserve()
    from counterplan.server.kserve.runtime import KServeRuntime

    port = free_port()
    runtime = KServeRuntime([], port, host="127.0.0.1", grace_seconds=1)
    thread = threading.Thread(target=runtime.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not runtime.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the KServe runtime did not start"
        time.sleep(0.02)
    yield runtime, f"http://127.0.0.1:{port}"
    runtime.stop()
    thread.join(15)
    assert not thread.is_alive()
