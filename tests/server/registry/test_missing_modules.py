"""A model file whose library is not installed names the extra that installs it.

A joblib file is a pickle: loading it imports the modules of the classes it holds. An optbinning
scorecard needs optbinning (``counterplan[scorecard]``), an XGBoost model xgboost
(``counterplan[boosting]``); the message used to blame the skops extra whatever was missing.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import joblib
import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression

from counterplan.server.registry import loading
from counterplan.server.registry.loading import LoadError, load_model

WITHOUT_OPTBINNING = """
import sys
sys.modules["optbinning"] = None  # as though it were not installed: importing it fails
from counterplan.server.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.fixture(scope="module")
def scorecard(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A fitted optbinning scorecard as a .joblib file, and its data."""
    optbinning = pytest.importorskip("optbinning")
    folder = tmp_path_factory.mktemp("scorecard")
    rng = np.random.default_rng(0)
    features = pd.DataFrame({"income": rng.integers(0, 81, 300), "cards": rng.integers(0, 10, 300)})
    label = (rng.random(300) < 1 / (1 + np.exp(0.06 * (features.income - 40)))).astype(int)
    process = optbinning.BinningProcess(list(features.columns))
    card = optbinning.Scorecard(binning_process=process, estimator=LogisticRegression()).fit(features, label)
    joblib.dump(card, folder / "scorecard.joblib")
    features.assign(default=label).to_csv(folder / "applicants.csv", index=False)
    return folder / "scorecard.joblib", folder / "applicants.csv"


def test_an_optbinning_scorecard_without_optbinning_names_the_scorecard_extra(scorecard: tuple[Path, Path]) -> None:
    model, data = scorecard
    argv = ["explain", "--model", str(model), "--data", str(data), "--row", "0", "--target", "default"]
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_OPTBINNING, *argv], capture_output=True, text=True, timeout=120, check=False
    )
    line = done.stderr.strip()
    assert done.returncode == 2 and len(line.splitlines()) == 1, done.stderr[-2000:]
    assert "optbinning" in line and "pip install 'counterplan[scorecard]'" in line, line
    assert "skops" not in line, line


@pytest.mark.parametrize(
    ("missing", "extra"),
    [
        ("optbinning", "'counterplan[scorecard]'"),
        ("optbinning.scorecard.scorecard", "'counterplan[scorecard]'"),
        ("xgboost.sklearn", "'counterplan[boosting]'"),
        ("lightgbm", "'counterplan[boosting]'"),
        ("skops", "'counterplan[skops]'"),
    ],
)
def test_a_missing_library_names_its_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, missing: str, extra: str
) -> None:
    path = tmp_path / "model.joblib"
    joblib.dump(LogisticRegression(), path)

    def fails(*_: object, **__: object) -> None:
        raise ModuleNotFoundError(f"No module named {missing!r}", name=missing)

    monkeypatch.setattr(loading.joblib, "load", fails)
    with pytest.raises(LoadError) as error:
        load_model(path)
    assert f"pip install {extra}" in str(error.value)
    assert missing.partition(".")[0] in str(error.value)


def test_a_library_of_no_extra_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "model.joblib"
    joblib.dump(LogisticRegression(), path)

    def fails(*_: object, **__: object) -> None:
        raise ModuleNotFoundError("No module named 'catboost'", name="catboost")

    monkeypatch.setattr(loading.joblib, "load", fails)
    with pytest.raises(LoadError, match="needs the module 'catboost', which is not installed") as error:
        load_model(path)
    assert "skops" not in str(error.value)


def test_a_skops_file_without_skops_still_names_the_skops_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "model.skops"
    path.write_bytes(b"not read")
    monkeypatch.setitem(sys.modules, "skops.io", None)
    monkeypatch.setitem(sys.modules, "skops", None)
    with pytest.raises(LoadError, match=r"pip install 'counterplan\[skops\]'"):
        load_model(path)
