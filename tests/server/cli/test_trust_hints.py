"""A model that needs trust says how to give it where the user is: a command's flag, or the server's.

The commands that load a model file (explain, batch, plan, tune) take ``--trust-model``; ``serve``
has none: a model card lists the skops types it trusts (``trusted_types``), and the directory of
cards is trusted with joblib files by ``serve --trust-pickle`` (``COUNTERPLAN_TRUST_PICKLE``).
"""

from __future__ import annotations

import json
from pathlib import Path

import joblib
import pandas as pd
import pytest
import skops.io as sio
from sklearn.pipeline import Pipeline

from counterplan.planning.demo import TARGET
from tests.cli import run_cli

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory, loan_data: pd.DataFrame, loan_model: Pipeline) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("trust")
    loan_data.to_csv(folder / "loans.csv", index=False)
    sio.dump(loan_model, folder / "loan.skops")
    joblib.dump(loan_model, folder / "loan.joblib")
    assert sio.get_untrusted_types(file=folder / "loan.skops"), "the test needs a type skops does not trust"
    return {"folder": folder, "csv": folder / "loans.csv", "skops": folder / "loan.skops"}


COMMANDS = {
    "explain": ["explain", "--row", "0", "--no-progress"],
    "batch": ["batch", "--output", "{folder}/out.csv", "--no-progress"],
    "plan": ["plan", "--row", "0", "--actions", str(ROOT / "examples" / "loan-demo-actions.yaml")],
    "tune": ["tune", "--trials", "1", "--rows", "1", "--heldout", "0", "--storage", "sqlite:///{folder}/t.db"],
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_command_names_its_own_flag(capsys: pytest.CaptureFixture[str], files: dict[str, Path], command: str) -> None:
    argv = [part.format(folder=files["folder"]) for part in COMMANDS[command]]
    model = ["--model", str(files["skops"]), "--data", str(files["csv"]), "--target", TARGET]
    code, _, err = run_cli(capsys, *argv, *model)
    line = err.strip()
    assert code == 2 and "sklearn.tree._tree.Tree" in line, line
    assert "--trust-model" in line, line
    assert "model card" not in line and "trusted_types" not in line, line


def _card(folder: Path, model_file: str) -> Path:
    models = folder / f"models-{model_file.replace('.', '-')}"
    models.mkdir(exist_ok=True)
    (models / model_file).write_bytes((folder / model_file).read_bytes())
    (models / "train.csv").write_bytes((folder / "loans.csv").read_bytes())
    card = {"id": "loan", "model_file": model_file, "outputs": [TARGET], "training_data": "train.csv", "target": TARGET}
    (models / "loan.json").write_text(json.dumps(card))
    return models


def test_serve_says_to_list_the_types_in_the_card(capsys: pytest.CaptureFixture[str], files: dict[str, Path]) -> None:
    """``serve`` used to suggest ``--trust-model``, a flag it does not have."""
    code, _, err = run_cli(capsys, "serve", "--port", "0", "--models-dir", str(_card(files["folder"], "loan.skops")))
    line = err.strip()
    assert code != 0 and "sklearn.tree._tree.Tree" in line, line
    assert "trusted_types" in line and "--trust-model" not in line, line


def test_serve_names_its_flag_and_variable_for_a_joblib_model(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path]
) -> None:
    code, _, err = run_cli(capsys, "serve", "--port", "0", "--models-dir", str(_card(files["folder"], "loan.joblib")))
    line = err.strip()
    assert code != 0 and "--trust-pickle" in line and "COUNTERPLAN_TRUST_PICKLE" in line, line
    assert "--trust-model" not in line, line
