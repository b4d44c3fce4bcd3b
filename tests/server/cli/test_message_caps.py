"""Local error messages are capped as the wire's are (issue 28): the command line's one-line
error and a Python exception quote a caller's id or value by at most 100 characters, marked with
its length, and say everything in at most 1 KB. Uncapped, a 100 KB ``--goal`` or ``--instance``
key printed a 100 KB line, and a Python exception held the whole input."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import joblib
import pandas as pd
import pytest
from sklearn.pipeline import Pipeline

from counterplan.planning.demo import rejected_applicant
from counterplan.planning.errors import CounterplanError, InvalidInputError
from counterplan.planning.goals import ClassGoal
from counterplan.server.cli.main import main
from counterplan.solver.explainer import Explainer

ECHO_CHARS = 100
"""An echoed id or value at most (``planning.errors.ECHO_CHARS``, written out)."""
TEXT_CHARS = 1024
"""An error text at most (``planning.errors.TEXT_CHARS``)."""
PREFIX = "counterplan: error: "


def _cut_echo(text: str, length: int) -> str:
    """The part of ``text`` that shows a cut value (its start to the length mark), checked: the
    mark names the original length, and the whole echo fits :data:`ECHO_CHARS`."""
    mark = f"… ({length:,} characters)"
    assert mark in text, text[:300]
    end = text.index(mark) + len(mark)
    start = max(text.rfind(" ", 0, end - len(mark)) + 1, 0)
    shown = text[start:end].lstrip("'\"")
    assert len(shown) <= ECHO_CHARS, (len(shown), shown)
    return shown


@pytest.mark.parametrize(
    ("args", "fragment", "length"),
    [
        (["--goal", "class:" + "g" * 100_000], "--goal: class 'ggg", 100_000),
        (["--instance", json.dumps({**rejected_applicant(), "k" * 100_000: 1})], "--instance: kkk", 100_000),
        (["--immutable", "age," + "i" * 100_000], "--immutable: 'iii", 100_000),
        (["--goal", "range:" + "1" * 100_000], "goal 'range:111", 100_006),
        (["--immutable", ",".join(f"column_{i}_{'x' * 40}" for i in range(3_000))], "--immutable", 0),
    ],
    ids=["huge goal", "huge instance key", "huge immutable name", "huge range text", "long name list"],
)
def test_a_command_line_error_is_one_line_of_at_most_1_kb(
    capsys: pytest.CaptureFixture[str], args: list[str], fragment: str, length: int
) -> None:
    try:
        code = main(["explain", "--no-progress", *args])
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    assert code == 2 and err.startswith(PREFIX) and err.count("\n") == 1, err[:300]
    assert len(err) <= len(PREFIX) + TEXT_CHARS + 1, len(err)
    assert fragment in err and "Traceback" not in out + err
    if length:
        _cut_echo(err, length)


MEGABYTE = "x" * 1_000_000


@pytest.mark.parametrize(
    "args",
    [
        [MEGABYTE],
        ["explain", "--seed", MEGABYTE],
        ["explain", "--engine", MEGABYTE],
        ["explain", "--no-progress", MEGABYTE, "--" + MEGABYTE],
        ["tune", "--trials", MEGABYTE],
        ["batch", "--workers", MEGABYTE],
        ["audit", "--rules", MEGABYTE],
        ["plan", "--generations", MEGABYTE],
        ["serve", "--port", MEGABYTE],
        ["kserve", "--http-port", MEGABYTE],
    ],
    ids=["command", "int", "choice", "unrecognized", "tune", "batch", "audit", "plan", "serve", "kserve"],
)
def test_a_flag_value_the_parser_refuses_is_echoed_cut(capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    """argparse echoed a bad value whole in every command: a megabyte ``--seed`` printed a megabyte
    line (an invalid int, an invalid choice, an unrecognized argument alike)."""
    try:
        main(args)
    except SystemExit as exc:
        assert exc.code == 2
    else:
        pytest.fail("the parser took a megabyte of x")
    out, err = capsys.readouterr()
    line = err.splitlines()[-1]
    assert out == "" and ": error: " in line and "Traceback" not in err, err[:300]
    assert len(line) <= len("counterplan kserve: error: ") + TEXT_CHARS, len(line)
    _cut_echo(line, 1_000_000)


def test_a_control_character_in_an_unrecognized_argument_is_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    """argparse prints unrecognized arguments as they are: an escape sequence reached the terminal."""
    with pytest.raises(SystemExit):
        main(["explain", "\x1b[2Jwiped"])
    err = capsys.readouterr().err
    assert "\x1b" not in err and "unrecognized arguments: \\x1b[2Jwiped" in err, err


@pytest.fixture(scope="module")
def model_files(tmp_path_factory: pytest.TempPathFactory, loan_data: pd.DataFrame, loan_model: Pipeline) -> Path:
    folder = tmp_path_factory.mktemp("echo-caps")
    loan_data.iloc[:50].to_csv(folder / "loans.csv", index=False)
    joblib.dump(loan_model, folder / "model.joblib")
    return folder


BATCH = ["batch", "--model", "{d}/model.joblib", "--data", "{d}/loans.csv", "--target", "approved", "--output", "o.csv"]
LONG = "x" * 3_000
NAME = "x" * 200
"""A file name within the system's 255 bytes, longer than an echo."""


@pytest.mark.parametrize(
    "args",
    [
        ["explain", "--no-progress", "--goal", f"{LONG}:1"],
        ["explain", "--no-progress", "--model", "{d}/model.joblib", "--data", "{d}/loans.csv", "--target", LONG],
        ["plan", "--no-progress", "--actions", LONG],
        ["plan", "--no-progress", "--actions", f"{{d}}/{NAME}"],
        [*BATCH, "--plot", LONG],
        [*BATCH, "--batch-engine", LONG],
        ["tune", "--storage", f"sqlite:///{{d}}/{NAME}.db", "--output", f"{{d}}/{NAME}.db"],
        ["kserve", "--model-name", "m", "--predictor-host", "127.0.0.1:1", "--data", "{d}/loans.csv", "--target", LONG],
    ],
    ids=["goal kind", "target", "actions", "missing actions", "plot", "batch engine", "output over storage", "kserve"],
)
def test_a_commands_own_error_quotes_a_long_value_cut(
    capsys: pytest.CaptureFixture[str], model_files: Path, args: list[str]
) -> None:
    """These quoted the flag's value whole (repr): a 3,000-character --target or goal kind filled
    the 1 KB line, where every other error shows 100 characters of it."""
    try:
        code = main([arg.replace("{d}", str(model_files)) for arg in args])
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.startswith(PREFIX) and err.count("\n") == 1, err[:300]
    longest = max(len(run) for run in re.findall("x+", err))
    assert longest < ECHO_CHARS, (longest, err[:400])


def test_python_errors_cap_their_own_text() -> None:
    """Whatever a subclass builds, the message stays bounded: a field by 100 characters, the text by 1 KB."""
    error = InvalidInputError("feature", "f" * 1_000_000, "p" * 1_000_000)
    assert len(str(error)) <= TEXT_CHARS and len(error.field) <= ECHO_CHARS and len(error.problem) <= TEXT_CHARS
    _cut_echo(str(error), 1_000_000)
    assert error.problem.endswith("… (1,000,000 characters)")
    assert len(str(CounterplanError("x" * 1_000_000))) <= TEXT_CHARS
    short = InvalidInputError("goal", "goals[0]", "give a label")
    assert str(short) == "goal 'goals[0]': give a label"  # what fits is left exactly as it was


@pytest.mark.parametrize(
    ("call", "length"),
    [
        (lambda e: e.explain({**rejected_applicant(), "k" * 1_000_000: 1}, seed=0), 1_000_000),
        (lambda e: e.explain(rejected_applicant(), seed=0, goals=[ClassGoal(target="g" * 1_000_000)]), 1_000_000),
    ],
    ids=["megabyte instance key", "megabyte class label"],
)
def test_an_explainers_error_quotes_a_megabyte_input_cut(loan_explainer: Explainer, call: Any, length: int) -> None:
    with pytest.raises(InvalidInputError) as info:
        call(loan_explainer)
    text = str(info.value)
    assert len(text) <= TEXT_CHARS, len(text)
    _cut_echo(text, length)
