"""``counterplan audit``, run in-process on a small CSV and a real scikit-learn tree."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import joblib
import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder
from sklearn.tree import DecisionTreeClassifier

from tests.cli import run_cli

pytest.importorskip("highspy")

FEATURES = ["a", "b", "c", "kind"]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The grid of a, b in 0..3, c in 0..2 and kind (108 rows), approved when a + b >= 4 and
    c >= 1; ``region`` is a column the model does not read."""
    folder = tmp_path_factory.mktemp("audit-inputs")
    data = pd.DataFrame(list(itertools.product(range(4), range(4), range(3), ("x", "y", "z"))), columns=FEATURES)
    data["approved"] = ((data.a + data.b >= 4) & (data.c >= 1)).astype(int)
    data["region"] = np.where(np.arange(len(data)) % 3 == 0, "north", "south")
    encode = ColumnTransformer([("kind", OneHotEncoder(), ["kind"])], remainder="passthrough")
    model = make_pipeline(encode, DecisionTreeClassifier(random_state=0)).fit(data[FEATURES], data["approved"])
    data.to_csv(folder / "data.csv", index=False)
    joblib.dump(model, folder / "model.joblib")
    return {"data": folder / "data.csv", "model": folder / "model.joblib"}


def _argv(files: dict[str, Path], out: Path, *extra: str) -> list[str]:
    return [
        "audit",
        "--model",
        str(files["model"]),
        "--data",
        str(files["data"]),
        "--target",
        "approved",
        "--immutable",
        "c",
        "--out",
        str(out),
        "--no-progress",
        *extra,
    ]


def test_audit_writes_the_report_and_the_rows(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "audit"
    code, printed, err = run_cli(capsys, *_argv(files, out, "--group", "region,kind", "--bootstrap", "100"))
    assert code == 0, err
    report = json.loads((out / "audit.json").read_text())
    for key in ("recourse_rate", "no_recourse_proven", "no_recourse_unproven", "with_recourse", "groups", "burden"):
        assert key in report
    assert {"features", "rules", "settings", "timing"} <= set(report)
    data = pd.read_csv(files["data"])
    rejected = data.index[data["approved"] == 0]
    assert sorted(report["no_recourse_proven"]) == [int(i) for i in rejected if data.c[i] == 0]
    assert report["recourse_rate"] == pytest.approx(len(report["with_recourse"]) / len(rejected))
    assert set(report["groups"]) == {"region", "kind"} and set(report["groups"]["region"]) == {"north", "south"}
    rows = pd.read_parquet(out / "rows.parquet")
    assert len(rows) == len(rejected) and {"audit_status", "region", "kind", "cf_a"} <= set(rows.columns)
    for words in ("recourse rate", "no recourse, proven", "By region", "audit.json", "rows.parquet"):
        assert words in printed
    code, _, err = run_cli(capsys, *_argv(files, out))  # the directory holds an audit: --resume or a new one
    assert code == 2 and "--out" in err and "--resume" in err
    code, _, err = run_cli(capsys, *_argv(files, out, "--resume", "--group", "region", "--json"))
    assert code == 0, err


@pytest.mark.parametrize(
    ("extra", "flag"),
    [
        (("--group", "nowhere"), "--group"),
        (("--rows", "50:10"), "--rows"),
        (("--rows", "most"), "--rows"),
        (("--bootstrap", "-3"), "--bootstrap"),
        (("--retrain", "-1"), "--retrain"),
        (("--rules", "-1"), "--rules"),
        (("--rule-validity", "1.5"), "--rule-validity"),
    ],
)
def test_bad_flags_are_refused_naming_the_flag(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path], tmp_path: Path, extra: tuple[str, ...], flag: str
) -> None:
    code, _, err = run_cli(capsys, *_argv(files, tmp_path / "out", *extra))
    assert code == 2
    assert f"error: {flag}:" in err
    assert not (tmp_path / "out" / "audit.json").exists()


def test_an_out_name_the_file_system_refuses_is_one_line_naming_the_flag(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path], tmp_path: Path
) -> None:
    code, printed, err = run_cli(capsys, *_argv(files, tmp_path / ("a" * 300)))  # over NAME_MAX
    assert code == 2 and err.count("\n") == 1 and "error: --out: cannot use" in err
    assert "Traceback" not in printed + err


def test_screen_flags(capsys: pytest.CaptureFixture[str], files: dict[str, Path], tmp_path: Path) -> None:
    """The screen is on by default for a tree (the exact engine encodes it), off with
    --no-screen, and the proven rows are the same; --screen with --no-proof is refused naming it."""
    reports = {}
    for name, extra in (("default", ()), ("off", ("--no-screen",)), ("on", ("--screen",))):
        code, _, err = run_cli(capsys, *_argv(files, tmp_path / name, *extra))
        assert code == 0, err
        reports[name] = json.loads((tmp_path / name / "audit.json").read_text())
    assert [reports[n]["settings"]["screen"] for n in ("default", "off", "on")] == [True, False, True]
    assert reports["default"]["timing"]["rows_screened"] > 0 == reports["off"]["timing"]["rows_screened"]
    assert reports["default"]["no_recourse_proven"] == reports["off"]["no_recourse_proven"] != []
    code, _, err = run_cli(capsys, *_argv(files, tmp_path / "refused", "--screen", "--no-proof"))
    assert code == 2 and "--screen" in err


def test_an_infinite_value_in_the_first_row_is_that_rows_error_not_the_audits(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path], tmp_path: Path
) -> None:
    """The settings are checked (and the screen's encoding asked) on a row that can be read: an
    ``inf`` in the data's first row, the one they were checked on, refused the whole audit."""
    data = pd.read_csv(files["data"]).astype({"a": float})
    data.loc[0, "a"] = np.inf
    bad = {**files, "data": tmp_path / "inf.csv"}
    data.to_csv(bad["data"], index=False)
    code, _, err = run_cli(capsys, *_argv(bad, tmp_path / "out", "--rows", "0:12"))
    assert code == 0, err
    rows = pd.read_parquet(tmp_path / "out" / "rows.parquet").set_index("row_id")
    assert rows.loc[0, "status"] == "error" and "finite" in rows.loc[0, "error"]
    assert (rows.drop(index=0)["status"] != "error").all()


def test_an_audit_whose_every_row_fails_exits_1_quoting_the_first_error(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path], tmp_path: Path
) -> None:
    """Every audited row an error (an ``inf`` in each) exited 0 with a recourse rate of 0%: the
    rows stay written, the summary printed, and one line says every row failed (exit 1). Without
    proofs: the screen's check of the first row refuses such a selection before any search."""
    data = pd.read_csv(files["data"]).astype({"a": float})
    data.loc[:3, "a"] = np.inf
    bad = {**files, "data": tmp_path / "inf.csv"}
    data.to_csv(bad["data"], index=False)
    code, _, err = run_cli(capsys, *_argv(bad, tmp_path / "out", "--rows", "0:4", "--no-proof"))
    assert code == 1, err
    assert err.count("\n") == 1 and err.startswith("counterplan: error: every row failed (4 error records, kept in")
    assert "the first, row 0: " in err and "finite" in err
    rows = pd.read_parquet(tmp_path / "out" / "rows.parquet")
    assert rows["status"].tolist() == ["error"] * 4


def test_group_values_that_look_like_markup_are_printed_as_they_are(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path], tmp_path: Path
) -> None:
    """The summary's tables are rich tables, which read ``[...]`` as markup: a group value
    ``[/]`` ended the command with a stack trace after the audit was written, and ``[red]p``
    was shown as ``p``. Every text from the data is printed as it is."""
    data = pd.read_csv(files["data"])
    data["[b]team"] = np.where(np.arange(len(data)) % 2 == 0, "[/]", "[red]p")
    marked = {**files, "data": tmp_path / "marked.csv"}
    data.to_csv(marked["data"], index=False)
    code, printed, err = run_cli(capsys, *_argv(marked, tmp_path / "out", "--rows", "0:40", "--group", "[b]team"))
    assert code == 0, err
    assert "Traceback" not in printed + err
    for words in ("By [b]team", "[/]", "[red]p"):
        assert words in printed


def test_the_summary_states_the_intervals_level_as_given(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path], tmp_path: Path
) -> None:
    """``--confidence 0.995`` was printed as a 99% (or 100%) interval: the level was rounded to a
    whole percent, another level than the one computed."""
    argv = _argv(files, tmp_path / "out", "--rows", "0:40", "--group", "region", "--confidence", "0.995")
    code, printed, err = run_cli(capsys, *argv, "--bootstrap", "100")
    assert code == 0, err
    assert "(99.5% CI " in printed and "99.5% CI" in printed.split("By region")[1]
    assert "99% CI" not in printed and "100% CI" not in printed
