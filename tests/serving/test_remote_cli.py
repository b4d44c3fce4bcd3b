"""The command line with a served model: ``--model http://HOST:PORT/v2/models/NAME`` or
``grpc://HOST:PORT/NAME`` gives the answer ``--model local.joblib`` gives (a real MLServer serving
the same pipeline), and an address that does not answer is one line, not a traceback."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import joblib
import pytest

from counterplan.planning.demo import TARGET, rejected_applicant
from tests.cli import run_cli
from tests.serving.conftest import Served, loan_table
from tests.serving.mlserver import ROOT

pytestmark = pytest.mark.integration

QUICK = "termination:\n  step_count_limit: 40\n"
COMPARED = ("valid", "proposed", "score", "changes", "original")


@dataclass
class Files:
    data: str
    local: str
    config: str
    instance: str


@pytest.fixture(scope="module")
def files(served: Served, tmp_path_factory: pytest.TempPathFactory) -> Files:
    folder = tmp_path_factory.mktemp("cli")
    served.data.to_csv(folder / "train.csv", index=False)
    joblib.dump(served.pipe, folder / "local.joblib")
    (folder / "quick.yaml").write_text(QUICK)
    (folder / "row.json").write_text(json.dumps(rejected_applicant()))
    names = ("train.csv", "local.joblib", "quick.yaml")
    return Files(*(str(folder / name) for name in names), instance="@" + str(folder / "row.json"))


def address(served: Served, protocol: str) -> str:
    return f"{served.server.rest}/v2/models/pipe" if protocol == "rest" else f"{served.server.grpc}/pipe"


def explain(capsys: pytest.CaptureFixture[str], files: Files, model: str, *extra: str) -> tuple[int, Any, str]:
    code, out, err = run_cli(
        capsys,
        "explain",
        "--model",
        model,
        "--data",
        files.data,
        "--target",
        TARGET,
        "--instance",
        files.instance,
        "--goal",
        "class:yes@0.7",
        "--config",
        files.config,
        "--seed",
        "3",
        "--json",
        "--no-progress",
        *extra,
    )
    return code, json.loads(out) if code in (0, 3) and out else None, err


@pytest.mark.parametrize("protocol", ["rest", "grpc"])
def test_explain_by_address_gives_the_local_files_answer(
    served: Served, files: Files, protocol: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, local, _ = explain(capsys, files, files.local)
    assert code == 0 and local["valid"] and local["changes"]
    code, remote, err = explain(
        capsys, files, address(served, protocol), "--model-timeout", "20", "--model-header", "X-Caller=counterplan-test"
    )
    assert code == 0, err
    assert {k: remote[k] for k in COMPARED} == {k: local[k] for k in COMPARED}
    assert remote["statistics"]["model_call_count"] == local["statistics"]["model_call_count"]


def test_batch_by_address_gives_the_local_files_records(
    served: Served, files: Files, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import pandas as pd

    outputs = {}
    for name, model in (("local", files.local), ("rest", address(served, "rest"))):
        output = tmp_path / f"{name}.csv"
        code, _, err = run_cli(
            capsys,
            "batch",
            *("--model", model, "--data", files.data, "--target", TARGET, "--rows", "0:12"),
            *("--goal", "class:yes@0.7", "--config", files.config, "--seed", "4", "--output", str(output)),
        )
        assert code == 0, err
        outputs[name] = pd.read_csv(output).drop(columns=["seconds"])
    pd.testing.assert_frame_equal(outputs["rest"], outputs["local"])
    assert (outputs["rest"]["status"] == "ok").any()


def test_plan_by_address_gives_the_local_files_plans(
    served: Served, files: Files, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("pymoo")
    fronts = []
    for model in (files.local, address(served, "grpc")):
        code, out, err = run_cli(
            capsys,
            "plan",
            *("--model", model, "--data", files.data, "--target", TARGET, "--instance", files.instance),
            *("--goal", "class:yes@0.7", "--actions", str(ROOT / "examples" / "loan-demo-actions.yaml")),
            *("--population", "40", "--generations", "15", "--seed", "2", "--json"),
        )
        assert code in (0, 3), err
        fronts.append({k: v for k, v in json.loads(out).items() if k not in ("seconds", "statistics")})
    assert fronts[0]["plans"] and not fronts[0]["already_met"]
    assert fronts[1] == fronts[0]  # the same plans, costs and model calls


def test_tune_by_address_runs_its_trials(
    served: Served, files: Files, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """tune finds the rows that miss the goal through the served model too (not by predict_proba)."""
    pytest.importorskip("optuna")
    code, out, err = run_cli(
        capsys,
        "tune",
        *("--model", address(served, "rest"), "--data", files.data, "--target", TARGET, "--goal", "class:yes@0.7"),
        *("--trials", "2", "--rows", "2", "--heldout", "2", "--budget", "0.3"),
        *("--storage", f"sqlite:///{tmp_path / 'tune.db'}"),
    )
    assert code == 0, err
    assert "Held-out gain over the default" in out


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize(
    ("model", "expected", "exit_code"),
    [
        ("http://127.0.0.1:{port}/v2/models/pipe", "127.0.0.1:{port}", 1),
        ("grpc://127.0.0.1:{port}/pipe", "127.0.0.1:{port}", 1),
        ("http://127.0.0.1:{port}/models/pipe", "has no /v2/models/NAME", 2),
        ("grpc://127.0.0.1/pipe", "a gRPC address needs its port", 2),
    ],
    ids=["rest-down", "grpc-down", "bad-path", "no-port"],
)
def test_an_address_that_does_not_answer_is_one_line_and_no_traceback(
    tmp_path: Path, model: str, expected: str, exit_code: int
) -> None:
    """Through the real entry point (a new process), no MLServer needed: nothing listens. A bad
    address is a bad argument (exit code 2, as a missing model file); a server that is down is a
    failure to try again (1, as a counterplan server that is down), not the caller's mistake."""
    loan_table().to_csv(tmp_path / "train.csv", index=False)
    port = closed_port()
    model, expected = model.format(port=port), expected.format(port=port)
    args = ["explain", "--model", model, "--data", str(tmp_path / "train.csv"), "--target", TARGET, "--row", "0"]
    done = subprocess.run(
        [sys.executable, "-m", "counterplan", *args], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == exit_code
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("counterplan: error: model "), done.stderr
    assert expected in lines[0] and "Traceback" not in done.stderr
    assert done.stdout == ""


def test_an_unknown_served_model_and_misplaced_flags_are_refused(
    served: Served, files: Files, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = explain(capsys, files, f"{served.server.rest}/v2/models/nope")
    assert code == 2 and "does not know model 'nope'" in err and len(err.strip().splitlines()) == 1
    code, _, err = explain(capsys, files, files.local, "--model-timeout", "5")
    assert code == 2 and "--model-timeout: only for a served --model" in err
    code, _, err = explain(capsys, files, address(served, "rest"), "--model-header", "no-equals")
    assert code == 2 and "--model-header: give KEY=VALUE, given a text without '='" in err
    code, _, err = explain(capsys, files, address(served, "grpc"), "--model-header", "x-caller=caf\u00e9")
    assert code == 2 and "--model-header x-caller: give printable ASCII text; given '\u00e9' at character 4 of 4" in err
    for bad in ("Authorization: Bearer s3cret", "Authorization=Bearer s3cret\u00e9", "Authorization: Bearer s3cret=="):
        code, _, err = explain(capsys, files, address(served, "rest"), "--model-header", bad)
        assert code == 2 and "--model-header" in err and "s3cret" not in err  # a token is never shown
    code, _, err = explain(capsys, files, address(served, "rest"), "--model-timeout", "0")
    assert code == 2 and "--model-timeout must be a finite number of seconds above 0 and at most 3600" in err
    code, _, err = explain(capsys, files, address(served, "rest"), "--trust-model")
    assert code == 2 and "--trust-model is for a model file" in err
