"""The command line prints the data's own text as it is: rich reads ``[...]`` as markup, so a
feature named ``[b]a`` or a category ``[/]`` in a table or a title ended ``counterplan batch``
with a stack trace after its answers were written, and ``[red]p`` was shown as ``p``."""

from __future__ import annotations

import itertools
from pathlib import Path

import joblib
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder
from sklearn.tree import DecisionTreeClassifier

from tests.cli import run_cli

MARKED = "[b]a"
"""A feature's name that rich would read as a bold tag."""
KINDS = ("[/]", "[red]p", "plain")
"""A category's values: a closing tag (an error for rich), a colour tag, and plain text."""


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A grid of ``[b]a``, b in 0..4 and a kind, approved when the kind is ``[/]`` and the sum
    is at least 5; saved in a folder whose name holds brackets too (the batch's title shows it)."""
    folder = tmp_path_factory.mktemp("inputs") / "[red]runs"
    folder.mkdir()
    data = pd.DataFrame(list(itertools.product(range(5), range(5), KINDS)), columns=[MARKED, "b", "kind"])
    data["approved"] = ((data[MARKED] + data.b >= 5) & (data.kind == "[/]")).astype(int)
    encode = ColumnTransformer([("kind", OneHotEncoder(), ["kind"])], remainder="passthrough")
    model = make_pipeline(encode, DecisionTreeClassifier(random_state=0))
    model.fit(data[[MARKED, "b", "kind"]], data.approved)
    data.to_csv(folder / "data.csv", index=False)
    joblib.dump(model, folder / "model.joblib")
    return {"data": folder / "data.csv", "model": folder / "model.joblib", "folder": folder}


def _common(files: dict[str, Path]) -> list[str]:
    return ["--model", str(files["model"]), "--data", str(files["data"]), "--target", "approved", "--seed", "0"]


def test_explain_prints_names_and_categories_as_they_are(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path]
) -> None:
    row = 3 * (5 * 1 + 1) + 1  # [b]a = 1, b = 1 (kept), kind [red]p: approved with [b]a = 4 and kind [/]
    args = ("--row", str(row), "--immutable", "b", "--no-progress")
    code, printed, err = run_cli(capsys, "explain", *_common(files), *args)
    assert code == 0, err
    assert "Traceback" not in printed + err
    for words in (MARKED, "[red]p", "[/]"):
        assert words in printed, (words, printed)


def test_batch_prints_names_categories_and_its_output_as_they_are(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path]
) -> None:
    output = files["folder"] / "answers.csv"
    code, printed, err = run_cli(
        capsys, "batch", *_common(files), "--rows", "0:30", "--output", str(output), "--no-progress"
    )
    assert code == 0, err
    assert "Traceback" not in printed + err
    assert output.exists()
    assert "[red]runs" in printed.replace("\n", "").replace(" ", "").replace("│", ""), printed
    assert MARKED in printed and "[/]" in printed, printed
