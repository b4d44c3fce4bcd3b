"""``tune`` recommends a configuration only when it beats the default on held-out rows, and writes
a file only when ``--output`` asks for one.

The held-out comparison is replaced by fixed evaluations (the real one depends on the machine's
speed, a time budget per row), so each verdict is tested as it is decided.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from counterplan.solver import tuning
from counterplan.solver.tuning import MEANINGFUL_GAIN, Evaluation, TuningReport
from tests.cli import run_cli

QUICK = ("--rows", "1", "--heldout", "1", "--trials", "1", "--budget", "0.1")


def _evaluation(cost: float, seconds: float) -> Evaluation:
    return Evaluation(mean_cost=cost, validity=1.0, mean_distance=0.3, mean_changed=2.0, median_seconds=seconds)


def _report(default: Evaluation | None, tuned: Evaluation | None) -> TuningReport:
    return TuningReport(None, None, 0.0, {}, default, tuned)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("default", "tuned", "beats"),
    [
        (0.40, 0.40, False),  # +0.0000: as good
        (0.40, 0.40 - MEANINGFUL_GAIN / 2, False),  # within the tolerance: noise
        (0.40, 0.40 - 2 * MEANINGFUL_GAIN, True),
        (0.40, 0.60, False),  # worse
    ],
)
def test_the_tuned_configuration_beats_the_default_only_beyond_the_tolerance(
    default: float, tuned: float, beats: bool
) -> None:
    report = _report(_evaluation(default, 0.1), _evaluation(tuned, 0.36))
    assert report.beats_default is beats
    assert report.heldout_gain == pytest.approx(default - tuned)
    assert report.slowdown == pytest.approx(3.6)


def test_without_held_out_rows_there_is_no_verdict() -> None:
    report = _report(None, None)
    assert report.beats_default is None and report.heldout_gain is None and report.slowdown is None


def _held_out(monkeypatch: pytest.MonkeyPatch, default: Evaluation, tuned: Evaluation) -> None:
    """The held-out comparison gives ``default`` for the default configuration, then ``tuned``."""
    results = iter([default, tuned])

    def evaluate(problems: Any, config: Any) -> Evaluation:
        return next(results)

    monkeypatch.setattr(tuning, "evaluate_config", evaluate)


def test_no_gain_says_the_default_is_as_good_and_writes_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue: +0.0000 held-out gain, 3.6x slower, and still written and recommended."""
    monkeypatch.chdir(tmp_path)
    _held_out(monkeypatch, _evaluation(0.4, 0.1), _evaluation(0.4, 0.36))
    code, out, err = run_cli(capsys, "tune", *QUICK)
    assert code == 0, err
    assert list(tmp_path.glob("*.yaml")) == [], "nothing written unless --output asks"
    text = " ".join(out.split())
    assert "the default configuration is as good" in text and "3.6x slower" in text, text
    assert "nothing written" in text and "written to" not in text and "--config" not in text, text


def test_a_real_gain_is_recommended_and_written_only_with_output(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _held_out(monkeypatch, _evaluation(0.6, 0.1), _evaluation(0.4, 0.12))
    code, out, _ = run_cli(capsys, "tune", *QUICK)
    text = " ".join(out.split())
    assert code == 0 and list(tmp_path.glob("*.yaml")) == []
    assert "better than the default" in text and "--output" in text, text
    _held_out(monkeypatch, _evaluation(0.6, 0.1), _evaluation(0.4, 0.12))
    code, out, _ = run_cli(capsys, "tune", *QUICK, "--output", "tuned.yaml")
    text = " ".join(out.split())
    assert code == 0 and (tmp_path / "tuned.yaml").is_file()
    assert "written to tuned.yaml" in text and "counterplan explain --config tuned.yaml" in text, text


def test_output_writes_as_asked_even_when_the_default_is_as_good(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _held_out(monkeypatch, _evaluation(0.4, 0.1), _evaluation(0.4, 0.36))
    code, out, _ = run_cli(capsys, "tune", *QUICK, "--output", "tuned.yaml")
    text = " ".join(out.split())
    assert code == 0 and (tmp_path / "tuned.yaml").is_file()
    assert "the default configuration is as good" in text and "written to tuned.yaml" in text, text


def test_an_output_that_cannot_be_written_is_refused_before_tuning(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(capsys, "tune", *QUICK, "--output", str(tmp_path / "missing" / "tuned.yaml"))
    assert code == 2 and err.startswith("counterplan: error: --output:"), err
    assert "trial" not in err, "refused before any trial ran"


def test_an_output_naming_the_storage_is_refused_before_tuning(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Written over the study's SQLite file after the trials, the configuration destroyed the
    study they were kept in, and the report's read of it ended in optuna's traceback."""
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(capsys, "tune", *QUICK)  # the default storage, sqlite:///counterplan-tuning.db
    assert code == 0, err
    for output in ("counterplan-tuning.db", str(tmp_path / "counterplan-tuning.db")):
        code, _, err = run_cli(capsys, "tune", *QUICK, "--output", output)
        assert code == 2 and err.count("\n") == 1 and "is the --storage's database" in err, err
    code, out, err = run_cli(capsys, "tune", *QUICK)
    assert code == 0 and "2 trials" in " ".join(out.split()), err  # the study is whole: it resumed


def test_an_output_that_is_a_named_pipe_is_refused_before_tuning(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The write after the trials blocked until a reader came: forever. (The pipe has a reader
    here, so a run that writes into it ends: its text fits the pipe's buffer.)"""
    monkeypatch.chdir(tmp_path)
    pipe = tmp_path / "tuned.yaml"
    os.mkfifo(pipe)
    reader = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)
    try:
        code, _, err = run_cli(capsys, "tune", *QUICK, "--output", str(pipe))
    finally:
        os.close(reader)
    assert code == 2 and err.count("\n") == 1 and "is not a regular file" in err, err
    assert "trial" not in err, "refused before any trial ran"


def test_an_output_the_file_system_refuses_after_the_trials_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The directory checked before the trials is gone when the configuration is written: the
    write's OSError was a traceback after the whole run."""
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "out"
    folder.mkdir()
    results = iter([_evaluation(0.4, 0.1), _evaluation(0.4, 0.36)])

    def evaluate(problems: Any, config: Any) -> Evaluation:
        if folder.exists():
            folder.rmdir()  # removed while the held-out rows are solved
        return next(results)

    monkeypatch.setattr(tuning, "evaluate_config", evaluate)
    code, _, err = run_cli(capsys, "tune", *QUICK, "--no-progress", "--output", str(folder / "tuned.yaml"))
    assert code == 1 and err.count("\n") == 1 and "--output: cannot write" in err, err
    assert "the trials are kept in the study" in err, err


@pytest.mark.parametrize("storage", ["sqlite://", "sqlite:///:memory:"])
def test_an_in_memory_storage_is_not_said_to_resume(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, storage: str
) -> None:
    """A study in memory ends with the command: "run again ... (the study resumes)" and "the trials
    are kept in the study's --storage; run the same command to resume it" were untrue for it."""
    from counterplan.server.cli.tune import _Progress

    monkeypatch.chdir(tmp_path)
    _held_out(monkeypatch, _evaluation(0.4, 0.1), _evaluation(0.4 - 2 * MEANINGFUL_GAIN, 0.1))
    code, out, err = run_cli(capsys, "tune", *QUICK, "--storage", storage)
    assert code == 0, err
    text = " ".join(out.split())
    assert "better than the default" in text and "resumes" not in text, text
    assert "an in-memory --storage keeps no study to resume" in text, text
    assert list(tmp_path.iterdir()) == []  # no database file made either
    line = str(_Progress(None, shown=False, kept=False).stopped())  # type: ignore[arg-type]
    assert "resume it" not in line and "in-memory --storage" in line and "end with the command" in line
    kept = str(_Progress(None, shown=False).stopped())  # type: ignore[arg-type]
    assert "kept in the study's --storage; run the same command to resume it" in kept
