"""A real MLServer on loopback, serving scikit-learn models trained in the test process.

MLServer runs from its own virtual environment (it cannot share one with kserve; see
``tools/mlserver_env.py``), found at ``COUNTERPLAN_MLSERVER`` or ``<repo>/.venv-mlserver/bin/mlserver``.
That environment must have the test process's scikit-learn version: a joblib pickle does not
carry across versions. Without the binary the tests skip, unless ``COUNTERPLAN_REQUIRE_MLSERVER=1``
(CI), where they fail.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import joblib
import pytest

ROOT = Path(__file__).resolve().parents[2]
BINARY_ENV = "COUNTERPLAN_MLSERVER"
REQUIRE_ENV = "COUNTERPLAN_REQUIRE_MLSERVER"
READY_SECONDS = 120.0
HOW_TO = "create it with: .venv/bin/python tools/mlserver_env.py (or set COUNTERPLAN_MLSERVER=/path/to/bin/mlserver)"


def mlserver_binary() -> Path:
    """The mlserver executable, or a skip (a failure when MLServer is required)."""
    given = os.environ.get(BINARY_ENV)
    path = Path(given) if given else ROOT / ".venv-mlserver" / "bin" / "mlserver"
    if path.is_file() and os.access(path, os.X_OK):
        return path
    message = f"no MLServer at {path}; {HOW_TO}"
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(message)
    pytest.skip(message)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class ServedModel:
    """One model folder: the fitted estimator and its model-settings.json."""

    name: str
    estimator: Any
    inputs: list[dict[str, Any]] | None = None
    outputs: list[dict[str, Any]] | None = None
    content_type: str | None = None

    def write(self, root: Path) -> None:
        folder = root / self.name
        folder.mkdir(parents=True)
        joblib.dump(self.estimator, folder / "model.joblib")
        parameters: dict[str, Any] = {"uri": "./model.joblib", "version": "v1"}
        if self.content_type:
            parameters["content_type"] = self.content_type
        settings: dict[str, Any] = {
            "name": self.name,
            "implementation": "mlserver_sklearn.SKLearnModel",
            "parameters": parameters,
        }
        if self.inputs is not None:
            settings["inputs"] = self.inputs
        if self.outputs is not None:
            settings["outputs"] = self.outputs
        (folder / "model-settings.json").write_text(json.dumps(settings), encoding="utf-8")


class MLServer:
    """An MLServer process in its own process group, on free loopback ports."""

    def __init__(self, binary: Path, root: Path) -> None:
        self.http_port, self.grpc_port = free_port(), free_port()
        self.log_path = root.parent / "mlserver.log"
        env = dict(
            os.environ,
            MLSERVER_HOST="127.0.0.1",
            MLSERVER_HTTP_PORT=str(self.http_port),
            MLSERVER_GRPC_PORT=str(self.grpc_port),
            MLSERVER_METRICS_PORT=str(free_port()),
            MLSERVER_PARALLEL_WORKERS="0",
            OMP_NUM_THREADS="1",  # the suite's machine has two busy cores
        )
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [str(binary), "start", str(root)],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=root,
            )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    @property
    def rest(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def grpc(self) -> str:
        return f"grpc://127.0.0.1:{self.grpc_port}"

    def _wait_ready(self) -> None:
        """Poll ``/v2/health/ready`` (400 while the models load) until 200, within a deadline."""
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"MLServer exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.rest}/v2/health/ready", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.2)
        raise RuntimeError(f"MLServer not ready within {READY_SECONDS:g} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(encoding="utf-8", errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """SIGTERM to the process group, SIGKILL after 15 s."""
        if self.process.poll() is not None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(15)
        except ProcessLookupError:
            pass


def start(binary: Path, root: Path, models: list[ServedModel]) -> MLServer:
    for model in models:
        model.write(root)
    return MLServer(binary, root)
