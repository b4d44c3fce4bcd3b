"""``counterplan kserve``: its flags, refused naming the flag before anything loads.

The command serving a real explain request is tested in tests/server/kserve/test_kserve_command_run.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
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
        (("--request-seconds", "nan"), "--request-seconds: Input should be a finite number (given nan)"),
        (("--max-instance-seconds", "inf"), "--max-instance-seconds: Input should be a finite number (given inf)"),
        (("--max-counterfactuals", "101"), "--max-counterfactuals: Input should be less than or equal to 100"),
        (("--data", "train.csv"), "give --predictor-host, --data and --target"),
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
            ("--predictor-host", "user:s3cret@p:80"),
            "--predictor-host: give HOST or HOST:PORT (no scheme, no path), given '…@p:80'",
        ),
        (
            ("--predictor-host", "p", "--predictor-protocol", "grpc-v2"),
            "--predictor-host: a gRPC address needs its port\n",
        ),
        (("--predictor-host", "p", "--model-name", "a b"), "--model-name: bad model name 'a b'"),
        (("--predictor-host", "p:80", "--predictor-timeout", "0"), "--predictor-timeout must be a finite number"),
        (("--predictor-host", "p:80", "--predictor-timeout", "7200"), "--predictor-timeout must be a finite number"),
        (("--predictor-host", "p:80", "--predictor-timeout", "inf"), "--predictor-timeout must be a finite number"),
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


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (("--card", "c.yaml", "--data", "x.csv"), "--data: with --card, the card holds the model"),
        (("--card", "c.yaml", "--predictor-host", "p:80"), "--predictor-host: with --card"),
        (("--card", "c.yaml", "--seed", "3"), "--seed: with --card"),
        (("--card", "c.yaml", "--immutable", "age"), "the question's flags: with --card"),
        ((), "give --predictor-host, --data and --target"),
        (("--predictor-host", "p:80", "--data", "x.csv", "--target", "y", "--trust-pickle"), "--trust-pickle: only"),
    ],
)
def test_a_card_or_a_predictor_with_its_data(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], line: str
) -> None:
    code, _, err = run_cli(capsys, "kserve", "--model-name", "m", *argv)
    assert code == 2, err
    assert err.startswith(f"counterplan: error: {line}"), err


def test_a_cards_explainer_is_the_one_serve_builds(tmp_path: Path) -> None:
    """``--card``: the card's model, data and rules, as ``counterplan serve`` loads them."""
    import argparse

    import numpy as np
    import skops.io as sio
    from sklearn.linear_model import LogisticRegression

    from counterplan.server.cli.kserve import _card_build
    from counterplan.solver.explainer import Explainer

    rng = np.random.default_rng(3)
    data = pd.DataFrame({"income": rng.normal(50, 10, 200).round(1), "age": rng.integers(18, 70, 200)})
    data["ok"] = (data["income"] + 0.3 * data["age"] + rng.normal(0, 3, 200) > 62).astype(int)
    model = LogisticRegression().fit(data[["income", "age"]], data["ok"])
    sio.dump(model, tmp_path / "model.skops")
    data.to_csv(tmp_path / "train.csv", index=False)
    card = "id: credit\nmodel_file: model.skops\ntraining_data: train.csv\ntarget: ok\nimmutable: [age]\n"
    (tmp_path / "credit.yaml").write_text(card, encoding="utf-8")
    explainer = _card_build(argparse.Namespace(card=str(tmp_path / "credit.yaml"), trust_pickle=False))()
    row = {"income": 35.0, "age": 40}
    got = explainer.explain(row, seed=4)
    expected = Explainer(model, data, target="ok", immutable=["age"]).explain(row, seed=4)
    assert got.valid and [c.feature for c in got.changes] == ["income"]
    assert got.proposed == expected.proposed
