"""Model threads from the command line and on the server, where the operator's setting caps them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError
from threadpoolctl import threadpool_info

from counterplan.planning import CallableAdapter, OutputSpec
from counterplan.planning.threads import SHARED_POOLS
from counterplan.server.grpc.app import start_server
from counterplan.server.grpc.client import CounterplanClient, class_goal
from counterplan.server.grpc.settings import ServerSettings
from counterplan.server.registry.registry import FeatureSpec, ModelRegistry, RegisteredModel
from counterplan.solver.core.config import SolverConfig, TerminationConfig
from tests.cli import run_cli as _run

pytestmark = pytest.mark.integration  # a real server on a loopback port (or a local Ray cluster)


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--threads", "0"], "--threads must be from 1 to 256, given 0"),
        (["--threads", "257"], "--threads must be from 1 to 256, given 257"),
        (["--threads", "2", "--server", "127.0.0.1:1"], "serve --model-threads"),
    ],
)
def test_bad_threads_flags_give_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], args: list[str], fragment: str
) -> None:
    code, out, err = _run(capsys, "explain", "--no-progress", *args)
    assert code == 2
    assert err.startswith("counterplan: error:") and err.count("\n") == 1
    assert fragment in err and "Traceback" not in err + out


def test_the_threads_flag_reaches_the_solve(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[int] = []
    acquire = SHARED_POOLS.acquire

    def spy(pools: list[Any], threads: int) -> None:
        asked.append(threads)
        acquire(pools, threads)

    monkeypatch.setattr(SHARED_POOLS, "acquire", spy)
    code, _, err = _run(capsys, "explain", "--json", "--threads", "3")
    assert code == 0, err
    assert asked == [3]
    code, _, err = _run(capsys, "explain", "--json")
    assert code == 0, err
    assert asked == [3, 1]  # one thread by default


def test_model_threads_come_from_the_environment_and_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ServerSettings().model_threads == 1
    monkeypatch.setenv("COUNTERPLAN_MODEL_THREADS", "4")
    assert ServerSettings().model_threads == 4
    assert ServerSettings(model_threads=2).model_threads == 2  # flags win
    for bad in (0, 257):
        with pytest.raises(ValidationError, match="model_threads"):
            ServerSettings(model_threads=bad)


def test_serve_rejects_a_bad_model_threads_flag(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "serve", "--model-threads", "0")
    assert code == 2 and "--model-threads" in err  # the flag, not the setting


def test_the_server_setting_caps_what_a_request_asks_for() -> None:
    settings = ServerSettings(model_threads=2)
    assert [settings.threads_for(asked) for asked in (None, 1, 2, 3, 256)] == [2, 1, 2, 2, 2]


class ThreadRecorder:
    """p(yes) rises with x; records the OpenMP pool size inside every call."""

    def __init__(self) -> None:
        self.seen: list[int] = []

    def __call__(self, X: Any) -> Any:
        self.seen += [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "openmp"]
        p = 1.0 / (1.0 + np.exp(-(X[:, 0] - 5.0)))
        return np.column_stack([1.0 - p, p])

    def take(self) -> set[int]:
        seen, self.seen = set(self.seen), []
        return seen


def test_a_request_cannot_ask_the_server_for_more_threads_than_its_setting() -> None:
    import sklearn.ensemble  # noqa: F401 - loads scikit-learn's OpenMP runtime

    if not any(pool["user_api"] == "openmp" for pool in threadpool_info()):
        pytest.skip("no OpenMP runtime is loaded")
    recorder = ThreadRecorder()
    features = [
        FeatureSpec(name="x", kind="float", low=0.0, high=10.0),
        FeatureSpec(name="y", kind="float", low=0.0, high=10.0),
    ]
    quick = SolverConfig(termination=TerminationConfig(step_count_limit=5))
    adapter = CallableAdapter(recorder, [OutputSpec("label", ("no", "yes"))])
    model = RegisteredModel("threads", "1", "records threads", adapter, features, default_config=quick)
    running = start_server(ServerSettings(port=0, model_threads=2), ModelRegistry([model]))
    try:
        with CounterplanClient(running.target) as client:
            for config, expected in (("model_threads: 3", 2), ("model_threads: null", 2), ("model_threads: 1", 1)):
                yaml = f"termination: {{step_count_limit: 5}}\n{config}\n"
                request = CounterplanClient.request(
                    "threads", {"x": 1.0, "y": 1.0}, [class_goal("yes")], config_json=yaml
                )
                assert client.explain(request).valid
                assert recorder.take() == {expected}, config
    finally:
        running.stop(0)
