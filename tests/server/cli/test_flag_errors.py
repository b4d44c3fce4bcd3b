"""A bad flag is refused naming the flag the user wrote, never the setting it feeds.

One test per family of flags that end up in a solver or server setting: explain's search flags
(locally and with ``--server``, refused before any connection), its answer flags, batch's, tune's,
plan's and serve's (flag or ``COUNTERPLAN_*`` variable, whichever set it).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import joblib
import pandas as pd
import pytest
from sklearn.pipeline import Pipeline

from counterplan.planning.demo import TARGET
from tests.cli import run_cli

INTERNAL = ("spent_limit_seconds", "random_seed", "problem 'seed'", "errors.pydantic.dev", "time_limit_seconds")
"""Words of the settings behind the flags: an error naming one speaks of what the user never wrote."""


def _refused(capsys: pytest.CaptureFixture[str], flag: str, *argv: str) -> str:
    """``counterplan argv`` exits 2 with one line that starts with ``flag`` and names no internal field."""
    code, out, err = run_cli(capsys, *argv)
    lines = err.strip().splitlines()
    assert code == 2, (code, err[-2000:])
    assert len(lines) == 1, err[-2000:]
    line = lines[0]
    assert line.startswith(f"counterplan: error: {flag}"), line
    assert not any(word in line for word in INTERNAL), line
    assert out == ""
    return line


@pytest.mark.parametrize(
    ("flag", "argv"),
    [
        ("--time-limit", ["--time-limit", "1e12"]),
        ("--time-limit", ["--time-limit", "inf"]),
        ("--seed", ["--seed", "-1"]),
        ("--seed", ["--seed", str(2**64)]),
        ("--time-limit", ["--server", "127.0.0.1:1", "--time-limit", "1e12"]),
        ("--seed", ["--server", "127.0.0.1:1", "--seed", str(2**64)]),
        ("--threads", ["--threads", "0"]),
        ("-k", ["-k", "0"]),
    ],
)
def test_explains_search_flags_are_refused_by_name(
    capsys: pytest.CaptureFixture[str], flag: str, argv: list[str]
) -> None:
    line = _refused(capsys, flag, "explain", "--no-progress", *argv)
    if flag == "--time-limit":
        assert "at most 1e+10" in line, line


@pytest.mark.parametrize(
    ("flag", "argv"),
    [
        ("--alpha", ["--distance", "scorecard", "--alpha", "-1"]),
        ("--trust-nearest", ["--trust-nearest", "0"]),
        ("--trust-slack", ["--trust-slack", "-1"]),
    ],
)
def test_explains_answer_flags_say_what_is_wrong(
    capsys: pytest.CaptureFixture[str], flag: str, argv: list[str]
) -> None:
    """They named the flag, but with the last line of pydantic's message: a link to its docs."""
    line = _refused(capsys, flag, "explain", "--no-progress", *argv)
    assert "greater than" in line, line


@pytest.fixture(scope="module")
def batch_files(tmp_path_factory: pytest.TempPathFactory, loan_data: pd.DataFrame, loan_model: Pipeline) -> list[str]:
    folder = tmp_path_factory.mktemp("flag-errors")
    loan_data.iloc[:20].to_csv(folder / "loans.csv", index=False)
    joblib.dump(loan_model, folder / "model.joblib")
    return ["--model", str(folder / "model.joblib"), "--data", str(folder / "loans.csv"), "--target", TARGET]


@pytest.mark.parametrize(
    ("flag", "argv"),
    [
        ("--time-limit", ["--time-limit", "1e12"]),
        ("--threads", ["--threads", "0"]),
        ("--window", ["--window", "0"]),
        ("--workers", ["--workers", "0"]),
    ],
)
def test_batchs_flags_are_refused_by_name(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, batch_files: list[str], flag: str, argv: list[str]
) -> None:
    _refused(capsys, flag, "batch", *batch_files, "--no-progress", "--output", str(tmp_path / "out.csv"), *argv)
    assert not (tmp_path / "out.csv").exists()


@pytest.mark.parametrize(
    ("flag", "argv"),
    [
        ("--budget", ["--budget", "1e12"]),
        ("--budget", ["--budget", "nan"]),
        ("--budget", ["--budget", "0.05"]),  # no row could be searched: every trial scored the same
        ("--seed", ["--seed", "-1"]),
        ("--seed", ["--seed", str(2**64)]),
        ("--trials", ["--trials", "0"]),
        ("--trials", ["--trials", "100000000"]),  # ran until killed
        ("--rows", ["--rows", "0"]),
        ("--heldout", ["--heldout", "-1"]),
    ],
)
def test_tunes_flags_are_refused_by_name(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, flag: str, argv: list[str]
) -> None:
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    _refused(capsys, flag, "tune", "--trials", "1", "--rows", "2", "--heldout", "0", "--storage", storage, *argv)


def test_a_large_tune_seed_within_the_bound_runs(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A seed past 2**32 (optuna's sampler's own bound) is one a solver takes: tuning runs with it."""
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    output = tmp_path / "tuned.yaml"
    argv = ["tune", "--trials", "1", "--rows", "2", "--heldout", "0", "--budget", "0.1"]
    code, _, err = run_cli(capsys, *argv, "--storage", storage, "--seed", str(2**62), "--output", str(output))
    assert code == 0, err[-2000:]


@pytest.mark.parametrize(
    ("flag", "argv"),
    [
        ("--population", ["--population", "1"]),
        ("--generations", ["--generations", "0"]),
        ("--generations", ["--generations", "100000000"]),  # as --population, bounded
        ("--seed", ["--seed", "-1"]),
        ("--time-limit", ["--time-limit", "1e12"]),
    ],
)
def test_plans_flags_are_refused_by_name(capsys: pytest.CaptureFixture[str], flag: str, argv: list[str]) -> None:
    _refused(capsys, flag, "plan", *argv)


@pytest.fixture
def no_server(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """``serve`` checks its settings, then would serve: here it only records them."""
    from counterplan.server.grpc import app

    served: list[Any] = []
    monkeypatch.setattr(app, "serve", served.append)
    return served


@pytest.mark.parametrize(
    ("flag", "argv", "environment"),
    [
        ("--max-solve-seconds", ["--max-solve-seconds", "1e12"], {}),
        ("--grace-seconds", ["--grace-seconds", "1e12"], {}),
        ("--port", ["--port", "99999"], {}),
        ("--model-threads", ["--model-threads", "0"], {}),
        ("--max-plan-population", ["--max-plan-population", "1"], {}),
        ("COUNTERPLAN_PORT", [], {"COUNTERPLAN_PORT": "99999"}),
        ("COUNTERPLAN_MAX_SOLVE_SECONDS", [], {"COUNTERPLAN_MAX_SOLVE_SECONDS": "-1"}),
    ],
)
def test_serves_flags_and_variables_are_refused_by_name(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    no_server: list[Any],
    flag: str,
    argv: list[str],
    environment: dict[str, str],
) -> None:
    """``--max-solve-seconds 1e12`` used to be taken, and every solve then refused under
    ``spent_limit_seconds``."""
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    _refused(capsys, flag, "serve", *argv)
    assert no_server == []


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--workers", "2"], "COUNTERPLAN_MAX_REFLECTION_STREAMS (2) must be below --workers (2)"),
        (["--tls-cert", "cert.pem"], "give both --tls-cert and --tls-key, or neither"),
    ],
)
def test_a_rule_between_serves_settings_names_them_as_the_user_sets_them(
    capsys: pytest.CaptureFixture[str], no_server: list[Any], argv: list[str], expected: str
) -> None:
    code, _, err = run_cli(capsys, "serve", *argv)
    assert code == 2 and err.strip().startswith(f"counterplan: error: {expected}"), err
    assert no_server == []


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
@pytest.mark.parametrize(
    ("flag", "argv"),
    [
        ("solver config", ["explain", "--config"]),
        ("file", ["explain", "--instance"]),
        ("--actions", ["plan", "--actions"]),
    ],
)
def test_a_named_pipe_given_as_a_file_is_refused_not_waited_on(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, flag: str, argv: list[str]
) -> None:
    """A file flag naming a named pipe read it, waiting for a writer for good (fuzzing: plan
    --actions, batch --config and plan --instance @pipe each hung until killed)."""
    path = tmp_path / "pipe.yaml"
    os.mkfifo(path)
    given = f"@{path}" if argv[-1] == "--instance" else str(path)
    line = _refused(capsys, flag, *argv, given)
    assert "not a regular file" in line


@pytest.mark.parametrize(
    ("flag", "content", "argv"),
    [
        ("solver config", b"phases: \x00", ["explain", "--config"]),  # PyYAML's reader refuses it as it starts
        ("solver config", b"seed: \xff\xfe", ["explain", "--config"]),
        ("file", b'{"income": "\xff"}', ["explain", "--instance"]),
        ("--actions", b"actions: \xff", ["plan", "--actions"]),
    ],
)
def test_a_binary_file_is_one_line_naming_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, flag: str, content: bytes, argv: list[str]
) -> None:
    """A file that is no text (a NUL byte, bytes that are not UTF-8) was a traceback (exit 1):
    UnicodeDecodeError is a ValueError, not the OSError its reader caught, and PyYAML's reader
    checks the text while the loader is made, before the parse its errors were caught around."""
    path = tmp_path / "binary.yaml"
    path.write_bytes(content)
    given = f"@{path}" if argv[-1] == "--instance" else str(path)
    line = _refused(capsys, flag, *argv, given)
    # libyaml says "control characters are not allowed", PyYAML's own reader "special characters ..."
    assert "not UTF-8 text" in line or "characters are not allowed" in line
