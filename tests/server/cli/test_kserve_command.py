"""``counterplan kserve``: its flags, refused naming the flag before anything loads.

The command serving a real explain request is tested in tests/server/kserve/test_kserve_command_run.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli import run_cli

ROOT = Path(__file__).resolve().parents[3]
BASE = ("kserve", "--model-name", "credit", "--predictor-host", "127.0.0.1:9")


def test_help_loads_neither_kserve_nor_an_http_client() -> None:
    code = (
        "import sys\nfrom counterplan.server.cli.main import main\n"
        "try:\n    main(['kserve', '--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = ('kserve', 'httpx', 'fastapi', 'pandas')\n"
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert "--predictor-host" in done.stdout
    assert done.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (("--max-instances", "0"), "--max-instances: Input should be greater than or equal to 1 (given 0)"),
        (("--max-instance-seconds", "-1"), "--max-instance-seconds: Input should be greater than 0"),
        (("--request-seconds", "0"), "--request-seconds: Input should be greater than 0"),
        (("--max-counterfactuals", "101"), "--max-counterfactuals: Input should be less than or equal to 100"),
        (("--data", "train.csv"), "give --data and --target"),
        (("--data", "train.csv", "--target", "y", "--http-port", "70000"), "--http-port must be from 0 to 65535"),
        (("--data", "train.csv", "--target", "y", "--seed", "-1"), "--seed must be a whole number"),
        (("--data", "train.csv", "--target", "y", "--margin", "2"), "--margin"),
    ],
)
def test_a_bad_flag_is_refused_naming_it(capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], line: str) -> None:
    code, out, err = run_cli(capsys, *BASE, *argv)
    assert code == 2, err
    assert err.strip().splitlines() == [err.strip()]
    assert err.startswith(f"counterplan: error: {line}"), err
    assert out == ""


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (("--predictor-host", "http://p:80/v2"), "--predictor-host: give HOST or HOST:PORT (no scheme, no path), "),
        (("--predictor-host", "p/v2/models/x"), "--predictor-host: give HOST or HOST:PORT"),
        (
            ("--predictor-host", "p", "--predictor-protocol", "grpc-v2"),
            "--predictor-host: a gRPC address needs its port\n",
        ),
        (("--predictor-host", "p", "--model-name", "a b"), "--model-name: bad model name 'a b'"),
        (("--predictor-host", "p:80", "--predictor-timeout", "0"), "--predictor-timeout must be above 0 seconds"),
    ],
)
def test_a_predictor_is_a_host_and_port_not_a_url(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], line: str
) -> None:
    code, _, err = run_cli(capsys, "kserve", "--model-name", "m", "--data", "x.csv", "--target", "y", *argv)
    assert code == 2, err
    assert err.startswith(f"counterplan: error: {line}"), err
    assert "http(s)://" not in err


def test_the_predictor_is_asked_over_the_protocol_for_the_model_name() -> None:
    from counterplan.server.kserve.predictor import predictor_model

    rest = predictor_model("credit-predictor.models", "v2", "credit", timeout=3)
    assert str(rest.address) == "http://credit-predictor.models:80/v2/models/credit"
    assert rest.timeout == 3
    grpc = predictor_model("10.0.0.1:8081", "grpc-v2", "credit", timeout=3)
    assert str(grpc.address) == "grpc://10.0.0.1:8081/credit"
