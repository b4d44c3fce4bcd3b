"""The real ``counterplan kserve`` command: a process answering one explain request through a
real MLServer, then stopping cleanly on SIGTERM (as Kubernetes stops a pod)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pandas as pd
import pytest

from tests.server.kserve.conftest import REST_NAME, TARGET, free_port
from tests.serving.mlserver import MLServer

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
READY_SECONDS = 120.0


def test_the_command_answers_an_explain_request_and_stops_on_sigterm(
    tmp_path: Path, mlserver: MLServer, credit_data: pd.DataFrame
) -> None:
    data = tmp_path / "train.csv"
    credit_data.to_csv(data, index=False)
    port = free_port()
    argv = [
        sys.executable, "-m", "counterplan", "kserve",
        "--model-name", REST_NAME, "--predictor-host", f"127.0.0.1:{mlserver.http_port}",
        "--data", str(data), "--target", TARGET, "--immutable", "age",
        "--host", "127.0.0.1", "--http-port", str(port), "--max-instances", "2",
    ]  # fmt: skip
    log = tmp_path / "kserve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + READY_SECONDS
        while True:
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            try:
                if httpx.get(f"{base}/v1/models/{REST_NAME}", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        body = {"instances": [{"income": 40.0, "age": 30, "housing": "rent"}], "parameters": {"seed": 2}}
        response = httpx.post(f"{base}/v1/models/{REST_NAME}:explain", json=body, timeout=120)
        assert response.status_code == 200, response.text
        (answer,) = response.json()["explanations"]
        assert answer["valid"] and answer["changes"]
        assert "age" not in {change["feature"] for change in answer["changes"]}  # the command's --immutable
        too_many = httpx.post(f"{base}/v1/models/{REST_NAME}:explain", json={"instances": [body["instances"][0]] * 3})
        assert too_many.status_code == 400
        assert too_many.json() == {"error": "instances: at most 2 instances per request, given 3"}
        # the command's SDK context (its predictor protocol, v1 by the SDK's defaults) is the one a
        # request meets: the body is still checked by counterplan, naming the field (not the SDK's
        # 'Expected "instances" to be a list', which a runtime started on another thread never meets)
        not_a_list = httpx.post(f"{base}/v1/models/{REST_NAME}:explain", json={"instances": body["instances"][0]})
        assert not_a_list.status_code == 400
        assert not_a_list.json() == {"error": "instances: expected a list of instances, given an object"}
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0, log.read_text()
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
    assert "Traceback" not in log.read_text()
