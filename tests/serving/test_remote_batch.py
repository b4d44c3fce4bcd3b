"""``explain_batch`` with a served model: in this process, on two worker processes and on Ray, with
the vectorised engine and with threads, every row's record is the one the local model gives; the
vectorised engine sends one request per model call of a block, and a server that fails in a
worker stops the job with its one-line error."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from counterplan import ClassGoal, Explainer, SolverConfig, TerminationConfig
from counterplan.planning.demo import TARGET
from counterplan.planning.errors import RemoteModelError
from counterplan.planning.models import adapt_sklearn
from counterplan.planning.remote import RemoteModel
from tests.serving.conftest import Served
from tests.serving.fake_oip import Script, scripted_server

pytestmark = pytest.mark.integration  # a real MLServer on loopback (and a local Ray)

GOAL = [ClassGoal(target="yes", confidence=0.7)]
QUICK = SolverConfig(termination=TerminationConfig(step_count_limit=40))


def url(served: Served, protocol: str) -> str:
    return f"{served.server.rest}/v2/models/pipe" if protocol == "rest" else f"{served.server.grpc}/pipe"


class Counted:
    """The local pipeline's adapter, counting its model calls (everything else passes through)."""

    def __init__(self, adapter: Any) -> None:
        self.inner = adapter
        self.calls = 0

    def predict(self, X: Any, space: Any) -> Any:
        self.calls += 1
        return self.inner.predict(X, space)

    def predict_reference(self, X: Any, space: Any) -> Any:
        self.calls += 1
        return self.inner.predict_reference(X, space)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.fixture(scope="module")
def rows(served: Served) -> pd.DataFrame:
    return served.data[served.data[TARGET] == "no"].iloc[:8]


@pytest.fixture(scope="module")
def local(served: Served) -> Explainer:
    return Explainer(served.pipe, served.data, GOAL, target=TARGET, config=QUICK, seed=3)


def remote(served: Served, protocol: str) -> Explainer:
    return Explainer(RemoteModel(url(served, protocol)), served.data, GOAL, target=TARGET, config=QUICK, seed=3)


def same_records(got: pd.DataFrame, want: pd.DataFrame) -> None:
    columns = [c for c in want.columns if c != "seconds"]
    pd.testing.assert_frame_equal(got[columns], want[columns])
    assert (got["status"] == "ok").all()


@pytest.mark.parametrize("protocol", ["rest", "grpc"])
@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("vectorised", [True, False], ids=["vector", "threads"])
def test_a_batch_on_the_served_model_gives_the_local_records(
    served: Served, local: Explainer, rows: pd.DataFrame, protocol: str, workers: int, vectorised: bool
) -> None:
    """Two workers: each forked process opens its own connection (the parent's is not its own)."""
    want = local.explain_batch(rows, seed=5, window=4, vectorised=vectorised)
    explainer = remote(served, protocol)
    explainer.explain(0)  # the parent's connection is open when the workers fork
    same_records(explainer.explain_batch(rows, seed=5, window=4, workers=workers, vectorised=vectorised), want)


@pytest.mark.parametrize("vectorised", [True, False], ids=["vector", "threads"])
def test_a_batch_sends_one_request_per_model_call(served: Served, rows: pd.DataFrame, vectorised: bool) -> None:
    """Every model call is one request: as many requests as the local model has calls. The
    vectorised engine's one call per step for a whole block: far fewer than the rows' own calls
    added up. The threads path merges its solves' calls only for a model known to predict row by
    row, and this one (a logistic regression, served) is not: a call per solve and step."""
    counted = Counted(adapt_sklearn(served.pipe, TARGET))
    local = Explainer(counted, served.data, GOAL, target=TARGET, config=QUICK, seed=3)
    explainer = remote(served, "rest")
    explainer.explain(0)  # the class names checked once, before counting
    want = local.explain_batch(rows, seed=5, window=4, vectorised=vectorised)
    before, calls = explainer.adapter.request_count, counted.calls  # type: ignore[attr-defined]
    got = explainer.explain_batch(rows, seed=5, window=4, vectorised=vectorised)
    same_records(got, want)
    requests = explainer.adapter.request_count - before  # type: ignore[attr-defined]
    assert requests == calls
    if vectorised:
        assert requests < got["model_calls"].sum() / 2


@pytest.mark.slow  # a local Ray cluster starts
@pytest.mark.parametrize("protocol", ["rest", "grpc"])
def test_a_batch_on_ray_gives_the_local_records(
    local_ray: Any, served: Served, local: Explainer, rows: pd.DataFrame, protocol: str
) -> None:
    want = local.explain_batch(rows, seed=5, window=4)
    same_records(remote(served, protocol).explain_batch(rows, seed=5, window=4, ray="auto"), want)


def test_a_server_failing_in_a_worker_stops_the_job_with_its_one_line_error() -> None:
    """The error crosses back from the worker process whole (not a broken pool)."""
    data = pd.DataFrame({"x": np.linspace(0.0, 1.0, 20), "y": [0, 1] * 10})
    with scripted_server(Script([(503, "Service Unavailable")])) as base:
        explainer = Explainer(RemoteModel(f"{base}/v2/models/m", classes=[0, 1]), data, target="y", check=False)
        with pytest.raises(RemoteModelError, match=r"HTTP 503: Service Unavailable \(after \d attempts\)") as info:
            explainer.explain_batch(data.iloc[:6], workers=2, window=3)
    assert "\n" not in str(info.value)
