"""``tune`` tunes on rows a solve can score: a row the model fails on is skipped, not the run's end.

The rows are a seeded shuffle of those that miss the goal, and a row the selection cannot judge
(a gap) was kept for its solve to decide. With a model that takes no missing values, such a row
stopped the run with the model's own traceback (the study's fingerprint asked the model about
it), or did not, depending on ``--seed``.
"""

from __future__ import annotations

from pathlib import Path

import joblib
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder

from tests.cli import run_cli
from tests.credit import credit_with_gaps


@pytest.fixture(scope="module")
def no_gaps_model(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The credit table with gaps in income, and a logistic regression that refuses missing values."""
    folder = tmp_path_factory.mktemp("gaps")
    data = credit_with_gaps(n=400, seed=5)
    csv = folder / "credit.csv"
    data.to_csv(csv, index=False)
    complete = data.dropna()
    encode = ColumnTransformer(
        [("home", OneHotEncoder(), ["home"]), ("numbers", "passthrough", ["income", "late", "ratio"])],
        sparse_threshold=0.0,
    )
    model = Pipeline([("encode", encode), ("classify", LogisticRegression(max_iter=1000))])
    model.fit(complete.drop(columns=["ok"]), complete["ok"])
    joblib.dump(model, folder / "model.joblib")
    return {"csv": csv, "model": folder / "model.joblib", "dir": folder}


def _tune(capsys: pytest.CaptureFixture[str], files: dict[str, Path], *flags: str) -> tuple[int, str, str]:
    return run_cli(
        capsys,
        "tune",
        *("--model", str(files["model"]), "--data", str(files["csv"]), "--target", "ok"),
        *("--trials", "1", "--budget", "0.1", "--no-progress"),
        *("--storage", f"sqlite:///{files['dir'] / 'tune.db'}"),
        *flags,
    )


def test_rows_the_model_fails_on_are_skipped(
    capsys: pytest.CaptureFixture[str], no_gaps_model: dict[str, Path]
) -> None:
    code, out, err = _tune(capsys, no_gaps_model, "--rows", "6", "--heldout", "2", "--seed", "0")
    assert code == 0, err[-2000:]
    assert "Traceback" not in out + err and "Held-out gain over the default" in " ".join(out.split())


def test_too_few_solvable_rows_says_why_in_one_line(
    capsys: pytest.CaptureFixture[str], no_gaps_model: dict[str, Path]
) -> None:
    data = pd.read_csv(no_gaps_model["csv"])
    code, _, err = _tune(capsys, no_gaps_model, "--rows", str(len(data)), "--heldout", "0")
    assert code == 2 and err.count("\n") == 1 and err.startswith("counterplan: error: only "), err
    assert "skipped: the model fails on them" in err and "leaves income missing" in err, err
