"""``counterplan batch``, run in-process on a small CSV and a real scikit-learn pipeline."""

from __future__ import annotations

import io
import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import joblib
import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import Pipeline

from counterplan.planning.demo import TARGET
from counterplan.server.cli.main import main
from counterplan.solver.batch import writer

SMALL_ROWS = 40
"""Rows of the small data file: the default ``--rows rejected`` solves all of them."""


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        code = main(["batch", *args])
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory, loan_data: pd.DataFrame, loan_model: Pipeline) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("batch-inputs")
    loan_data.to_csv(folder / "loans.csv", index=False)
    loan_data.iloc[:SMALL_ROWS].to_parquet(folder / "small.parquet", index=False)
    loan_data.iloc[:SMALL_ROWS].to_csv(folder / "small.csv", index=False)
    joblib.dump(loan_model, folder / "model.joblib")
    quick = folder / "quick.yaml"
    quick.write_text("termination:\n  unimproved_step_count_limit: 15\n  spent_limit_seconds: 30\n")
    return {
        "csv": folder / "loans.csv",
        "small_csv": folder / "small.csv",
        "small_parquet": folder / "small.parquet",
        "model": folder / "model.joblib",
        "config": quick,
    }


def _flags(files: dict[str, Path], output: Path | str, data: str = "csv") -> dict[str, str | None]:
    return {
        "--model": str(files["model"]),
        "--data": str(files[data]),
        "--target": TARGET,
        "--immutable": "age,has_prior_default",
        "--config": str(files["config"]),
        "--seed": "3",
        "--output": str(output),
    }


def _argv(flags: dict[str, str | None]) -> list[str]:
    return [part for flag, value in flags.items() if value is not None for part in (flag, value)]


def _job(files: dict[str, Path], output: Path, *extra: str, data: str = "csv") -> list[str]:
    return [*_argv(_flags(files, output, data)), "--no-progress", *extra]


def _rejected(loan_data: pd.DataFrame, loan_model: Pipeline) -> list[int]:
    """Rows of the small file the model does not approve (default goal: class 1, 0.005 ahead)."""
    proba = loan_model.predict_proba(loan_data.drop(columns=[TARGET]).iloc[:SMALL_ROWS])[:, 1]
    assert not ((proba > 0.497) & (proba < 0.508)).any()  # no row on the edge of the margin
    return [i for i, p in enumerate(proba) if p < 0.5025]


def test_csv_output_has_a_valid_record_per_rejected_row_a_summary_and_a_plot(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    files: dict[str, Path],
    loan_data: pd.DataFrame,
    loan_model: Pipeline,
) -> None:
    output, plot = tmp_path / "results.csv", tmp_path / "shares.png"
    code, out, err = _run(capsys, *_job(files, output, "--plot", str(plot), data="small_csv"))
    assert code == 0, err
    records = pd.read_csv(output)
    assert sorted(records["row_id"]) == _rejected(loan_data, loan_model)
    assert records["valid"].all() and (records["status"] == "ok").all()
    assert (records["cf_age"] == loan_data["age"].iloc[records["row_id"]].to_numpy()).all()
    assert "Batch summary" in out and "Features changed by the" in out
    assert "valid" in out and "100.0%" in out and "income" in out
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_parquet_output_is_combined_from_its_parts_and_json_summarises_it(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    files: dict[str, Path],
    loan_data: pd.DataFrame,
    loan_model: Pipeline,
) -> None:
    output = tmp_path / "results.parquet"
    code, out, err = _run(capsys, *_job(files, output, "--json", data="small_parquet"))
    assert code == 0, err
    records = pd.read_parquet(output)
    assert sorted(records["row_id"]) == _rejected(loan_data, loan_model)
    assert records["valid"].all()
    assert not writer.parts_directory(output).exists()
    figures = json.loads(out)
    assert figures["valid"] == figures["explained"] == len(records)
    assert figures["already_met_skipped"] == SMALL_ROWS - len(records)
    assert figures["rows_this_run"] == len(records)  # rows/s counts the rows explained, not the ones skipped
    assert figures["selection_seconds"] >= 0.0
    assert figures["features"][0]["share"] > 0


def test_resume_skips_the_rows_a_csv_holds_and_appends_the_rest(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, files: dict[str, Path]
) -> None:
    output = tmp_path / "results.csv"
    assert _run(capsys, *_job(files, output, "--rows", "0:8"))[0] == 0
    first = pd.read_csv(output)
    code, _, err = _run(capsys, *_job(files, output, "--rows", "0:16"))
    assert code == 2 and "pass --resume" in err
    pd.testing.assert_frame_equal(pd.read_csv(output), first)  # refused: untouched
    with output.open("a", encoding="utf-8") as handle:
        handle.write("9,ok,True,[0/0/0]hard/[-0.5")  # a line a crash cut short: dropped on resume
    code, out, err = _run(capsys, *_job(files, output, "--rows", "0:16", "--resume", "--json"))
    assert code == 0, err
    records = pd.read_csv(output)
    assert records["row_id"].tolist()[:8] == first["row_id"].tolist()
    assert sorted(records["row_id"]) == list(range(16))
    assert json.loads(out)["rows_this_run"] == 8
    pd.testing.assert_frame_equal(records.iloc[:8], first)


def _comma(line: str, n: int) -> int:
    """The position just past the ``n``-th comma of ``line``."""
    at = -1
    for _ in range(n):
        at = line.index(",", at + 1)
    return at + 1


TORN_LAST_LINES: dict[str, Callable[[str], str]] = {
    # each: how a crash (or a probe) leaves the last record, given that record whole (no newline)
    "cut mid-field": lambda line: line[: _comma(line, 2) + 2],
    "cut after a comma": lambda line: line[: _comma(line, 6)],
    "the newline missing only": lambda line: line,
    "a row beyond the data, cut short": lambda line: "999999," + line[_comma(line, 1) : _comma(line, 4) + 5],
    "a row beyond the data, every field": lambda line: "999999," + line[_comma(line, 1) :] + "\n",
    "too few fields, with a newline": lambda line: line[: _comma(line, 3) - 1] + "\n",
    "too many fields": lambda line: line + ",0\n",
    "a value of no type": lambda line: line[: _comma(line, 2)] + "Tru," + line[_comma(line, 3) :] + "\n",
    "a quote left open": lambda line: line[: _comma(line, 6)] + '"income: 21450.16 -> 2\n',
}


@pytest.fixture(scope="module")
def eight_done(files: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The CSV a finished job of rows 0:8 writes."""
    output = tmp_path_factory.mktemp("eight") / "results.csv"
    assert main(["batch", *_job(files, output, "--rows", "0:8")]) == 0
    return output.read_bytes()


def _without_seconds(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.drop(columns="seconds").sort_values("row_id").reset_index(drop=True)


@pytest.mark.parametrize("rows", ["0:8", "0:11"], ids=["no rows left", "rows left"])
@pytest.mark.parametrize("tear", list(TORN_LAST_LINES.values()), ids=list(TORN_LAST_LINES))
def test_resume_drops_a_torn_last_line_and_solves_its_row_again(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    files: dict[str, Path],
    eight_done: bytes,
    tear: Callable[[str], str],
    rows: str,
) -> None:
    lines = eight_done.decode().splitlines(keepends=True)
    last = lines[-1].rstrip("\n")
    output = tmp_path / "results.csv"
    output.write_text("".join(lines[:-1]) + tear(last), encoding="utf-8")
    code, out, err = _run(capsys, *_job(files, output, "--rows", rows, "--resume", "--json"))
    assert code == 0, err
    assert err.count("dropped a torn last line") == 1 and err.count("\n") == 1  # one line says so
    records = pd.read_csv(output)
    stop = int(rows.split(":")[1])
    assert sorted(records["row_id"]) == list(range(stop))  # each row once, none beyond the data
    assert json.loads(out)["rows_this_run"] == 1 + stop - 8  # the torn line's row, solved again
    assert records["status"].isin(["ok", "already_met"]).all() and records["valid"].all()
    assert records["distance"].notna().all() and records.notna().drop(columns=["changes", "error"]).all().all()
    before = _without_seconds(pd.read_csv(io.BytesIO(eight_done)))
    pd.testing.assert_frame_equal(_without_seconds(records[records["row_id"] < 8]), before)
    assert output.read_bytes().startswith(b"".join(line.encode() for line in lines[:-1]))  # kept as it was


@pytest.mark.parametrize(
    "tail",
    ["999999,ok,True,[0/0/0]hard/[-0.6", "999999,ok,True,[0/0/0]hard/[-0.6\n", "3,ok,True,[0/0/0]hard/[-0.6,0.6,2\n"],
    ids=["cut short", "cut short with a newline", "a done row cut short with a newline"],
)
def test_resume_drops_a_torn_line_past_the_last_record_when_no_row_is_left(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, files: dict[str, Path], eight_done: bytes, tail: str
) -> None:
    output = tmp_path / "results.csv"
    output.write_bytes(eight_done + tail.encode())
    code, out, err = _run(capsys, *_job(files, output, "--rows", "0:8", "--resume", "--json"))
    assert code == 0, err
    assert err.count("dropped a torn last line") == 1
    assert json.loads(out)["rows_this_run"] == 0
    assert output.read_bytes() == eight_done  # never read as a record: the file holds each row once


def test_resume_restarts_a_file_whose_header_a_crash_cut_short(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, files: dict[str, Path], eight_done: bytes
) -> None:
    output = tmp_path / "results.csv"
    output.write_bytes(eight_done[:20])
    code, out, err = _run(capsys, *_job(files, output, "--rows", "0:8", "--resume", "--json"))
    assert code == 0, err
    assert "dropped a torn last line" in err
    assert json.loads(out)["rows_this_run"] == 8
    before = _without_seconds(pd.read_csv(io.BytesIO(eight_done)))
    pd.testing.assert_frame_equal(_without_seconds(pd.read_csv(output)), before)


@pytest.mark.parametrize(
    ("join", "fragment"),
    [
        (lambda lines: lines + lines[:1] + lines[1:3], "holds the row id 'row_id', no position"),  # two outputs joined
        (lambda lines: lines + lines[2:3], "holds row "),  # a record twice
        (lambda lines: [*lines[:2], "1500" + lines[2][lines[2].index(",") :], *lines[3:]], "holds the row id 1500"),
    ],
    ids=["a second header", "a row twice", "a row beyond the data"],
)
def test_resume_refuses_an_output_that_is_no_output_of_one_job(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    files: dict[str, Path],
    eight_done: bytes,
    join: Callable[[list[str]], list[str]],
    fragment: str,
) -> None:
    """``cat a.csv b.csv > out.csv`` then ``--resume``: a stack trace (``int('row_id')``); a row
    held twice, or one the data does not have, was counted in the summary as a record."""
    output = tmp_path / "results.csv"
    output.write_text("".join(join(eight_done.decode().splitlines(keepends=True))), encoding="utf-8")
    before = output.read_bytes()
    code, out, err = _run(capsys, *_job(files, output, "--rows", "0:8", "--resume"))
    assert code == 2, err
    assert err.startswith("counterplan: error: --output: ") and err.count("\n") == 1 and fragment in err
    assert "Traceback" not in err + out and output.read_bytes() == before


def test_resume_refuses_an_output_another_seed_explained(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, files: dict[str, Path], eight_done: bytes
) -> None:
    """The job of rows 0:8 ran with ``--seed 3``; resumed with ``--seed 4`` it appended the rest
    with seed 4's answers, an output no run gives, without a word."""
    output = tmp_path / "results.csv"
    output.write_bytes(eight_done)
    flags = {**_flags(files, output), "--seed": "4"}
    code, _, err = _run(capsys, *_argv(flags), "--rows", "0:12", "--resume", "--no-progress")
    assert code == 2, err
    assert err.startswith("counterplan: error: --output: ") and "explained with another seed than this run's 4" in err
    assert err.count("\n") == 1 and output.read_bytes() == eight_done


@pytest.mark.parametrize(
    "change",
    [{"--immutable": "age"}, {"--goal": "class:1@0.9"}, {"--engine": "swarm"}, {"--batch-engine": "threads"}],
    ids=["immutable", "goal", "engine", "batch engine"],
)
def test_resume_refuses_an_output_that_answered_another_question(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    files: dict[str, Path],
    eight_done: bytes,
    change: dict[str, str],
) -> None:
    """The job of rows 0:8 held ``age`` and ``has_prior_default`` fixed; resumed with another
    ``--immutable`` (or goal, or engine, or the threads path for the vectorised engine's job) it
    appended the rest answered to another question, an output no run gives, without a word. Each
    record holds its question's fingerprint."""
    output = tmp_path / "results.csv"
    output.write_bytes(eight_done)
    flags = {**_flags(files, output), **change}
    code, _, err = _run(capsys, *_argv(flags), "--rows", "0:12", "--resume", "--no-progress")
    assert code == 2, err
    assert err.startswith("counterplan: error: --output: ") and "answered to another question" in err
    assert err.count("\n") == 1 and output.read_bytes() == eight_done
    # the same flags resume it, and every record holds the one question
    code, _, err = _run(capsys, *_job(files, output, "--rows", "0:12", "--resume"))
    assert code == 0, err
    questions = pd.read_csv(output, dtype={"question": str})["question"]
    assert len(questions) == 12 and questions.nunique() == 1 and len(str(questions.iloc[0])) == 16
    # a record whose question was emptied is no record of this question either (not a traceback)
    emptied = pd.read_csv(output, dtype={"question": str}).assign(
        question=lambda f: f["question"].where(f["row_id"] != 2)
    )
    emptied.to_csv(output, index=False)
    code, _, err = _run(capsys, *_job(files, output, "--rows", "0:13", "--resume"))
    assert code == 2 and "holds row 2 answered to another question" in err and "Traceback" not in err, err


def test_resume_reads_an_infinity_where_whole_numbers_go(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, files: dict[str, Path], eight_done: bytes
) -> None:
    """An earlier record (edited, or another tool's) proposing ``inf`` for a whole-number feature:
    reading the output to resume it ended on an ``OverflowError`` (a stack trace); that column is
    kept as decimals instead, as any value a whole-number column cannot hold."""
    lines = eight_done.decode().splitlines(keepends=True)
    header = lines[0].rstrip("\n").split(",")
    fields = lines[1].rstrip("\n").split(",")
    assert len(fields) == len(header)  # no quoted commas in this record
    fields[header.index("cf_age")] = "inf"
    output = tmp_path / "results.csv"
    output.write_text("".join([lines[0], ",".join(fields) + "\n", *lines[2:]]), encoding="utf-8")
    code, out, err = _run(capsys, *_job(files, output, "--rows", "0:10", "--resume", "--json"))
    assert code == 0, err
    assert "Traceback" not in err + out and json.loads(out)["rows_this_run"] == 2


def test_resume_reads_back_the_numbers_the_records_hold(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, files: dict[str, Path], eight_done: bytes
) -> None:
    """pandas' default CSV parser reads a number of 17 digits up to a unit in the last place off
    (0.0035714285714285713 as 0.0035714285714285): a resumed job's summary of the records it read
    back, its mean distance in ``--json``, differed from the job's own when it was not
    interrupted, and so did an audit's records read back from a CSV."""
    lines = eight_done.decode().splitlines(keepends=True)
    header = lines[0].rstrip("\n").split(",")
    written = [0.0035714285714285713, 1.7482014642097883, 0.48098691928969395]
    answered = [line for line in lines[1:] if line.split(",")[1] == "ok"][: len(written)]
    edited = [lines[0]]
    for line, distance in zip(answered, written, strict=True):
        fields = line.rstrip("\n").split(",")
        assert len(fields) == len(header)  # no quoted commas in these records
        fields[header.index("distance")] = repr(distance)
        edited.append(",".join(fields) + "\n")
    output = tmp_path / "results.csv"
    output.write_text("".join(edited), encoding="utf-8")
    data = pd.read_csv(files["csv"])
    dtypes = writer.record_dtypes(data, [c[3:] for c in header if c.startswith("cf_")])
    records = writer.read_existing(output, header, dtypes, rows=len(data))
    assert records["distance"].tolist() == written
    rows = ",".join(line.split(",")[0] for line in answered)
    code, out, err = _run(capsys, *_job(files, output, "--rows", rows, "--resume", "--json"))
    assert code == 0, err
    assert json.loads(out)["mean_distance"] == pd.Series(written).mean()


def test_resume_keeps_a_whole_last_record(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, files: dict[str, Path], eight_done: bytes
) -> None:
    output = tmp_path / "results.csv"
    output.write_bytes(eight_done)
    code, out, err = _run(capsys, *_job(files, output, "--rows", "0:8", "--resume", "--json"))
    assert code == 0, err
    assert "dropped a torn" not in err and json.loads(out)["rows_this_run"] == 0
    assert output.read_bytes() == eight_done


def test_an_interrupted_parquet_job_keeps_its_parts_and_resumes_to_each_row_once(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, files: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    output = tmp_path / "results.parquet"
    monkeypatch.setattr(writer, "PART_RECORDS", 4)
    write = writer.ParquetRecords.write
    seen: list[int] = []

    def interrupted_after_six(self: writer.ParquetRecords, record: dict[str, Any]) -> None:
        if len(seen) == 6:
            raise KeyboardInterrupt  # Ctrl-C while a row is being written
        seen.append(record["row_id"])
        write(self, record)

    monkeypatch.setattr(writer.ParquetRecords, "write", interrupted_after_six)
    code, _, err = _run(capsys, *_job(files, output, "--rows", "0:14", "--window", "14"))
    assert code == 130 and "--resume" in err
    assert not output.exists()
    parts = sorted(p.name for p in writer.parts_directory(output).iterdir())
    assert parts == ["part-00000.parquet", "part-00001.parquet"]  # 4 records, then the 2 buffered
    monkeypatch.setattr(writer.ParquetRecords, "write", write)
    code, _, err = _run(capsys, *_job(files, output, "--rows", "0:14"))
    assert code == 2 and "exists; pass --resume" in err
    code, out, err = _run(capsys, *_job(files, output, "--rows", "0:14", "--resume", "--json"))
    assert code == 0, err
    records = pd.read_parquet(output)
    assert sorted(records["row_id"]) == list(range(14))
    assert set(seen) <= set(records["row_id"])
    assert json.loads(out)["rows_this_run"] == 14 - 6
    assert not writer.parts_directory(output).exists()


def test_a_parquet_job_stopped_while_it_removed_its_merged_parts_resumes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, files: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Parquet job's end combines its parts into the output, then removes them: stopped in
    between (Ctrl-C, ``kill -9``), its output held every row once, and its parts the same rows
    again, so ``--resume`` refused it ('holds row 0 twice: it is no output of one job'), and so
    did every later resume. A part whose rows the output holds, all of them, was merged into it."""
    output = tmp_path / "results.parquet"
    monkeypatch.setattr(writer, "PART_RECORDS", 4)
    remove = writer.shutil.rmtree

    def stopped(path: Any, *args: Any, **kwargs: Any) -> None:
        for part in sorted(Path(path).glob("part-*.parquet"))[:1]:
            part.unlink()  # stopped after the first part was removed
        raise KeyboardInterrupt

    monkeypatch.setattr(writer.shutil, "rmtree", stopped)
    code, _, err = _run(capsys, *_job(files, output, "--rows", "0:10"))
    assert code == 130, err
    whole = pd.read_parquet(output)
    assert sorted(whole["row_id"]) == list(range(10)) and len(list(writer.parts_directory(output).iterdir())) == 2
    monkeypatch.setattr(writer.shutil, "rmtree", remove)
    code, out, err = _run(capsys, *_job(files, output, "--rows", "0:14", "--resume", "--json"))
    assert code == 0, err
    records = pd.read_parquet(output)
    assert sorted(records["row_id"]) == list(range(14))
    figures = json.loads(out)
    assert figures["rows_this_run"] == 4 and figures["explained"] + figures["already_met"] == 14  # each row once
    assert not writer.parts_directory(output).exists()
    pd.testing.assert_frame_equal(_without_seconds(records[records["row_id"] < 10]), _without_seconds(whole))


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"--target": "outcome"}, "--target: no column 'outcome'"),
        ({"--immutable": "age,height"}, "--immutable: 'height' is not a feature column"),
        ({"--rows": "0:5000"}, "--rows: 0:5000 is not a range"),
        ({"--rows": "first"}, "--rows: give all, rejected"),
        ({"--rows": "3,1500"}, "--rows: position 1500 is outside"),
        ({"--rows": "3,8,3"}, "--rows: position 3 is given twice"),  # not "the rows' index has duplicate labels"
        ({"--output": "missing/results.csv"}, "--output: the directory"),
        ({"--output": "results.json"}, "--output: must end in .parquet or .csv"),
        ({"--plot": "missing/shares.png"}, "--plot: the directory"),
        ({"--plot": "shares.svg"}, "--plot: must end in .png"),
        ({"--output": "r" * 300 + ".csv"}, "--output: cannot use"),  # a name over the file system's limit
        ({"--output": "r" * 300 + "/results.csv"}, "--output: cannot use"),
        ({"--plot": "p" * 300 + ".png"}, "--plot: cannot use"),  # refused before the run, not after it
        ({"--data": "d" * 300 + ".csv"}, "cannot read"),
        ({"--data": "d" * 300 + ".parquet"}, "cannot read"),
        ({"--model": "m" * 300 + ".joblib"}, "cannot read"),
        ({"--workers": "0"}, "--workers must be at least 1"),
        ({"--window": "0"}, "--window: must be from 1"),
        ({"--batch-engine": "gpu"}, "--batch-engine: give vector or threads, given 'gpu'"),
        ({"--goal": "class"}, "goal 'class'"),
        ({"--goal": "range:1"}, "LOW..HIGH"),
        ({"--goal": "class:7"}, "not one of"),
        ({"--output": None}, "give --output"),
    ],
)
def test_a_bad_input_is_one_line_naming_it_and_nothing_is_written(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    files: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
    change: dict[str, str | None],
    fragment: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    flags = {**_flags(files, "results.csv"), "--rows": "0:10", **change}
    argv = [*_argv(flags), "--no-progress"]
    code, out, err = _run(capsys, *argv, "--no-progress")
    assert code == 2, err
    assert err.startswith("counterplan: error:") and err.count("\n") == 1
    assert fragment in err
    assert "Traceback" not in err + out
    assert sorted(os.listdir(tmp_path)) == []


def test_a_data_file_that_names_a_column_twice_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, files: dict[str, Path], loan_data: pd.DataFrame
) -> None:
    """pandas reads a repeated header name as ``income.1``: the model got the first ``income``
    without a word (or, with ``debt`` renamed ``income`` by mistake, ``debt`` was said missing)."""
    data = tmp_path / "loans.csv"
    loan_data.iloc[:20].assign(spare=0.0).rename(columns={"spare": "income"}).to_csv(data, index=False)
    output = tmp_path / "results.csv"
    code, out, err = _run(capsys, *_argv({**_flags(files, output), "--data": str(data)}), "--no-progress")
    assert code == 2, err
    assert err.startswith("counterplan: error:") and err.count("\n") == 1
    assert "the header names two columns 'income'" in err and "Traceback" not in err + out
    assert not output.exists()


def test_a_read_only_output_directory_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, files: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # root writes anywhere: ask as a user would be answered
        monkeypatch.setattr(os, "access", lambda path, mode: False)
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        code, _, err = _run(capsys, *_job(files, folder / "results.parquet", "--rows", "0:4"))
    finally:
        folder.chmod(0o700)
    assert code == 2 and "--output: the directory" in err and "not writable" in err
    assert list(folder.iterdir()) == []


@pytest.mark.parametrize("resume", [False, True])
def test_a_file_where_a_parquet_outputs_parts_go_is_refused_before_any_row(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, files: dict[str, Path], resume: bool
) -> None:
    """``results.parquet.parts`` a file: the job ran every row and then failed writing the first
    part (exit 1, ``File exists``), or said ``results.parquet`` exists when it did not."""
    output = tmp_path / "results.parquet"
    writer.parts_directory(output).write_text("not a directory")
    code, _, err = _run(capsys, *_job(files, output, "--rows", "0:4", *(["--resume"] if resume else [])))
    assert code == 2, err
    assert "--output: " in err and "results.parquet.parts' is not a directory" in err and err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.parquet.parts"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
@pytest.mark.parametrize("flag", ["--output", "--plot"])
def test_a_named_pipe_as_the_output_or_plot_is_refused_not_waited_on(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, files: dict[str, Path], flag: str
) -> None:
    """``--output results.csv --resume`` where results.csv is a named pipe read it, waiting for a
    writer for good (fuzzing: killed after 30 s); a plot saved to one would wait the same way."""
    pipe = tmp_path / ("results.csv" if flag == "--output" else "shares.png")
    os.mkfifo(pipe)
    output = pipe if flag == "--output" else tmp_path / "results.csv"
    extra = ["--resume"] if flag == "--output" else ["--plot", str(pipe)]
    code, _, err = _run(capsys, *_job(files, output, "--rows", "0:4", *extra))
    assert code == 2, err
    assert f"{flag}: " in err and "is not a regular file" in err and err.count("\n") == 1


def test_an_interrupted_parquet_jobs_parts_are_named_when_the_output_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, files: dict[str, Path]
) -> None:
    """Only ``results.parquet.parts/`` exists (a stopped job): the refusal said ``results.parquet``
    exists, which a user looking for it could not find."""
    output = tmp_path / "results.parquet"
    writer.parts_directory(output).mkdir()
    code, _, err = _run(capsys, *_job(files, output, "--rows", "0:4"))
    assert code == 2, err
    assert "results.parquet.parts' exists; pass --resume to continue the interrupted job it holds" in err


def test_plot_without_matplotlib_names_the_extra(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, files: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    output = tmp_path / "results.csv"
    code, _, err = _run(capsys, *_job(files, output, "--rows", "0:4", "--plot", str(tmp_path / "p.png")))
    assert code == 2 and err.count("\n") == 1
    assert "counterplan[plot]" in err
    assert not output.exists()


def test_a_ray_address_that_does_not_answer_is_refused_before_any_work(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, files: dict[str, Path]
) -> None:
    pytest.importorskip("counterplan.solver.batch.on_ray")
    output = tmp_path / "results.csv"
    code, out, err = _run(capsys, *_job(files, output, "--rows", "0:4", "--ray", "127.0.0.1:9"))
    assert code == 2 and err.count("\n") == 1 and "ray" in err
    assert "Traceback" not in err + out
    assert not output.exists()


@pytest.mark.parametrize(("flag", "vectorised"), [(None, True), ("vector", True), ("threads", False)])
def test_batch_engine_chooses_the_vectorised_engine_by_default_or_the_threads_path(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    files: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
    flag: str | None,
    vectorised: bool,
) -> None:
    from counterplan.solver import explainer as explainer_module

    asked: list[Any] = []
    real = explainer_module.explain_batch

    def spy(*args: Any, **kwargs: Any) -> Any:
        asked.append(kwargs["vectorised"])
        return real(*args, **kwargs)

    monkeypatch.setattr(explainer_module, "explain_batch", spy)
    output = tmp_path / "results.csv"
    extra = [] if flag is None else ["--batch-engine", flag]
    code, _, err = _run(capsys, *_job(files, output, "--rows", "0:6", *extra))
    assert code == 0, err
    assert asked == [vectorised]
    assert pd.read_csv(output)["valid"].all()


def test_an_infinite_value_in_the_first_row_is_that_rows_error_not_the_batchs(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path], loan_data: pd.DataFrame, tmp_path: Path
) -> None:
    """The settings are checked on a row that can be read: an ``inf`` in the data's first row (a
    row the selection need not even hold) refused the whole batch, while one in any other row is
    that row's error record."""
    data = loan_data.iloc[:SMALL_ROWS].astype({"income": float})
    data.loc[0, "income"] = np.inf
    path = tmp_path / "inf.csv"
    data.to_csv(path, index=False)
    for rows in ("0:4", "2:4"):
        output = tmp_path / f"out-{rows.replace(':', '-')}.csv"
        flags = {**_flags(files, output), "--data": str(path), "--rows": rows}
        code, _, err = _run(capsys, *_argv(flags), "--no-progress")
        assert code == 0, err
        records = pd.read_csv(output).set_index("row_id")
        assert (records.drop(index=0, errors="ignore")["status"] != "error").all()
    assert records.index.tolist() == [2, 3]
    first = pd.read_csv(tmp_path / "out-0-4.csv").set_index("row_id")
    assert first.loc[0, "status"] == "error" and "income" in first.loc[0, "error"]


def test_a_batch_whose_every_row_fails_exits_1_quoting_the_first_error(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path], loan_data: pd.DataFrame, tmp_path: Path
) -> None:
    """Every selected row an error record (here an ``inf`` in each; a model that raises on every
    row, an ONNX model of another width) exited 0 where ``explain`` on any of them exits 1; the
    records stay written, and one failing row among good ones is still exit 0."""
    data = loan_data.iloc[:SMALL_ROWS].astype({"income": float})
    data.loc[:3, "income"] = np.inf
    path = tmp_path / "inf.csv"
    data.to_csv(path, index=False)
    output = tmp_path / "out.csv"
    flags = {**_flags(files, output), "--data": str(path), "--rows": "0:4"}
    code, out, err = _run(capsys, *_argv(flags), "--no-progress", "--json")
    assert code == 1, err
    assert err.count("\n") == 1 and err.startswith("counterplan: error: every row failed (4 error records, kept in")
    assert "the first, row 0: " in err and "finite" in err
    assert json.loads(out)["errors"] == 4  # the summary is printed as usual
    assert pd.read_csv(output)["status"].tolist() == ["error"] * 4
    flags = {**flags, "--rows": "2:6", "--output": str(tmp_path / "some.csv")}
    code, _, err = _run(capsys, *_argv(flags), "--no-progress")
    assert code == 0, err


def test_an_engine_that_cannot_take_the_model_is_refused_before_any_row(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``--engine exact`` with a model the exact engine cannot read was an error record for every
    row and exit 0; the batch's settings check built each row's problem but no solver for it."""
    data = pd.DataFrame({"a": [float(i % 7) for i in range(40)], "b": [float(i % 5) for i in range(40)]})
    data["y"] = (data.a + data.b > 6).astype(int)
    joblib.dump(KNeighborsClassifier().fit(data[["a", "b"]], data.y), tmp_path / "knn.joblib")
    data.to_csv(tmp_path / "data.csv", index=False)
    output = tmp_path / "out.csv"
    argv = ["--model", str(tmp_path / "knn.joblib"), "--data", str(tmp_path / "data.csv"), "--target", "y"]
    code, _, err = _run(capsys, *argv, "--engine", "exact", "--output", str(output), "--no-progress")
    assert code == 2 and "exact engine cannot take" in err and len(err.strip().splitlines()) == 1, err
    assert not output.exists()


_PARENT = os.getpid()
"""This test process: a forked worker inherits the value, not the process."""


class _DiesInAWorker(LogisticRegression):
    """A logistic regression whose process is killed when a worker process calls it (as the
    out-of-memory killer kills a worker)."""

    def predict_proba(self, X: Any) -> Any:
        if os.getpid() != _PARENT:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().predict_proba(X)


def test_a_worker_killed_mid_batch_ends_it_in_one_line_that_says_to_resume(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A worker process killed outright (the OOM killer, which picks the largest process) ended
    the batch with the pool's ``BrokenProcessPool`` traceback; now one line says what happened,
    how many rows were kept and to resume, exit 1."""
    data = pd.DataFrame({"a": [float(i % 7) for i in range(40)], "b": [float(i % 5) for i in range(40)]})
    data["y"] = (data.a + data.b > 6).astype(int)
    joblib.dump(_DiesInAWorker().fit(data[["a", "b"]], data.y), tmp_path / "model.joblib")
    data.to_csv(tmp_path / "data.csv", index=False)
    output = tmp_path / "out.csv"
    argv = ["--model", str(tmp_path / "model.joblib"), "--trust-model", "--data", str(tmp_path / "data.csv")]
    argv += ["--target", "y", "--rows", "all", "--workers", "2", "--window", "4", "--output", str(output)]
    code, out, err = _run(capsys, *argv, "--no-progress")
    assert code == 1 and err.count("\n") == 1, err
    assert err.startswith("counterplan: error: a worker process ended abruptly (killed by a signal")
    assert err.endswith(f"0 new rows kept in {output}: run the same command with --resume to continue\n")
    assert "Traceback" not in err + out
