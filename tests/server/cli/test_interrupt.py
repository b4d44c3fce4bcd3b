"""Ctrl-C: one line and exit code 130 from every command, the best answer so far where there is one.

The commands run as real processes sent a real SIGINT. Each is started through a harness that
prints a marker on stderr when the search begins (the function named is wrapped), so the signal
arrives while the search runs however busy the machine is; the searches themselves are long
(a minute's time limit, thousands of generations, many trials), so it cannot end first.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import joblib
import pandas as pd
import pytest
from sklearn.pipeline import Pipeline

from counterplan.planning.demo import TARGET
from counterplan.server.cli.interrupt import Interrupted, stop_on_interrupt

MARKER = "counterplan-test: searching"
HARNESS = f"""
import importlib, signal, sys
from counterplan.server.cli.main import main

# A terminal's Ctrl-C, whatever the suite was started from: a shell's background job starts with
# SIGINT ignored, and a child would inherit that and never hear the signal.
signal.signal(signal.SIGINT, signal.default_int_handler)

module, name = sys.argv[1].rsplit(":", 1)
owner = importlib.import_module(module)
*path, attribute = name.split(".")
for part in path:
    owner = getattr(owner, part)
original = getattr(owner, attribute)

def announced(*args, **kwargs):
    print({MARKER!r}, file=sys.stderr, flush=True)
    return original(*args, **kwargs)

setattr(owner, attribute, announced)
sys.exit(main(sys.argv[2:]))
"""
SLOW_LOCAL = """\
phases:
  - type: local_search
    termination:
      spent_limit_seconds: 300
termination:
  spent_limit_seconds: 300
"""
"""Local search that goes on for five minutes unless it is stopped."""


@pytest.fixture(autouse=True)
def _python_hears_ctrl_c() -> Iterator[None]:
    """Python's own Ctrl-C handler in this process for the test, as in a terminal: a suite started
    as a shell's background job has SIGINT ignored, and the handlers under test restore what they
    found."""
    found = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, found)


@dataclass
class Stopped:
    """A command's exit code and output after the SIGINT, and how long it took to end."""

    code: int
    out: str
    err: list[str]
    seconds: float


def _interrupt(
    target: str,
    argv: list[str],
    cwd: Path,
    *,
    delay: float = 1.0,
    ready: Callable[[], bool] | None = None,
    group: bool = False,
    signum: int = signal.SIGINT,
) -> Stopped:
    """Run ``counterplan argv`` with ``target`` (``module:attribute``) announcing the search;
    ``delay`` seconds after the marker (and once ``ready()``), send SIGINT (to the whole process
    group with ``group``, as a terminal's Ctrl-C does)."""
    process = subprocess.Popen(
        [sys.executable, "-c", HARNESS, target, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        start_new_session=group,
    )
    assert process.stderr is not None and process.stdout is not None
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.append(process.stdout.read() if process.stdout else ""))
    reader.start()
    before: list[str] = []
    for line in process.stderr:
        if line.strip() == MARKER:
            break
        before.append(line)
    else:
        process.wait(timeout=60)
        reader.join()
        pytest.fail(f"the search never started (exit {process.returncode}): {''.join(before)[-2000:]}")
    deadline = time.monotonic() + 120
    while ready is not None and not ready() and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(delay)
    sent = time.monotonic()
    if group:
        os.killpg(process.pid, signum)
    else:
        process.send_signal(signum)
    err = process.stderr.read()
    code = process.wait(timeout=180)
    seconds = time.monotonic() - sent
    reader.join()
    return Stopped(code, "".join(out), [line for line in err.splitlines() if line.strip()], seconds)


def _one_line(stopped: Stopped, progress: str | None = None, *, code: int = 130, word: str = "interrupted") -> str:
    """The one line a Ctrl-C prints, checked: exit 130, nothing else on stderr (but the command's
    own ``progress`` lines before it); a SIGTERM's: exit 143, "terminated"."""
    assert stopped.code == code, (stopped.code, stopped.err[-30:])
    err = [line for line in stopped.err if progress is None or not line.startswith(progress)]
    assert len(err) == 1, stopped.err[-30:]
    (line,) = err
    assert line.startswith(f"counterplan: {word}"), line
    return line


@pytest.fixture(scope="module")
def slow_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("interrupt") / "slow.yaml"
    path.write_text(SLOW_LOCAL)
    return path


@pytest.mark.parametrize(
    ("signum", "code", "word"),
    [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")],
    ids=["ctrl-c", "sigterm"],
)
def test_a_stop_signal_during_explain_prints_the_best_so_far_in_one_line(
    slow_config: Path, tmp_path: Path, signum: int, code: int, word: str
) -> None:
    """Ctrl-C, and SIGTERM (a container's or a scheduler's stop, whose default was a silent death)."""
    stopped = _interrupt(
        "counterplan.solver.counterfactual:CounterfactualSolver.solve",
        ["explain", "--no-progress", "--config", str(slow_config)],
        tmp_path,
        delay=2.0,
        signum=signum,
    )
    line = _one_line(stopped, code=code, word=word)
    assert "best so far" in line and "score [" in line and " -> " in line, line
    assert stopped.out == ""
    assert stopped.seconds < 60, "the five-minute search was stopped at once"


def test_ctrl_c_during_explain_json_prints_no_partial_json(slow_config: Path, tmp_path: Path) -> None:
    stopped = _interrupt(
        "counterplan.solver.counterfactual:CounterfactualSolver.solve",
        ["explain", "--json", "--config", str(slow_config)],
        tmp_path,
        delay=2.0,
    )
    _one_line(stopped)
    assert stopped.out == ""


EXACT_ORTOOLS = """\
phases:
  - type: local_search
    termination:
      unimproved_step_count_limit: 20
  - type: exact
    backend: ortools
    relative_gap: 0
"""


EXACT_HIGHS = EXACT_ORTOOLS.replace("backend: ortools", "backend: highs")
"""HiGHS named: ``auto`` gives the demo's trees to CP-SAT where OR-Tools is installed."""
EXACT_CPSAT = EXACT_ORTOOLS.replace("backend: ortools", "backend: cpsat")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("target", "config"),
    [
        ("counterplan.solver.exact.highs:solve", EXACT_HIGHS),
        ("counterplan.solver.exact.ortools_backend:solve_described", EXACT_ORTOOLS),
        ("counterplan.solver.exact.cpsat:solve", EXACT_CPSAT),
    ],
    ids=["highs", "ortools-scip", "cpsat"],
)
def test_ctrl_c_during_the_exact_engine_says_it_was_interrupted(
    target: str, config: str | None, tmp_path: Path
) -> None:
    """HiGHS (highspy) and SCIP (OR-Tools) each used to swallow the signal: exit 0 with local
    search's answer, as though the exact engine had finished."""
    argv = ["explain", "--no-progress", "--engine", "exact"]
    if config is not None:
        (tmp_path / "exact.yaml").write_text(config)
        argv = ["explain", "--no-progress", "--config", str(tmp_path / "exact.yaml")]
    stopped = _interrupt(target, argv, tmp_path, delay=0.3)
    line = _one_line(stopped)
    assert "exact engine" in line, line
    assert stopped.seconds < 30


@pytest.mark.slow
def test_ctrl_c_during_plan_prints_one_line(tmp_path: Path) -> None:
    stopped = _interrupt(
        "counterplan.solver.plans.planner:PlanSolver.solve", ["plan", "--generations", "10000"], tmp_path, delay=2.0
    )
    line = _one_line(stopped)
    assert "plan" in line, line
    assert stopped.out == ""


def _a_trial_completed(database: Path) -> Callable[[], bool]:
    """Whether the optuna study in the SQLite file ``database`` has a complete trial."""

    def ready() -> bool:
        if not database.exists():
            return False
        try:
            with closing(sqlite3.connect(database, timeout=1)) as connection:
                query = "SELECT count(*) FROM trials WHERE state = 'COMPLETE'"
                return bool(connection.execute(query).fetchone()[0])
        except sqlite3.Error:  # the tables are not made yet, or the file is busy
            return False

    return ready


@pytest.mark.slow
def test_ctrl_c_during_tune_prints_one_line_and_writes_nothing(tmp_path: Path) -> None:
    stopped = _interrupt(
        "counterplan.solver.tuning:tune",
        ["tune", "--trials", "200", "--rows", "4", "--heldout", "2", "--storage", "sqlite:///study.db"],
        tmp_path,
        delay=3.0,
        ready=_a_trial_completed(tmp_path / "study.db"),
    )
    line = _one_line(stopped, progress="trial ")
    assert stopped.err[-1] == line and "resume" in line, line
    assert "(the best: trial " in line, line  # what was found so far is said, not only kept
    assert not list(tmp_path.glob("*.yaml"))


@pytest.fixture(scope="module")
def batch_files(
    tmp_path_factory: pytest.TempPathFactory, loan_data: pd.DataFrame, loan_model: Pipeline, slow_config: Path
) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("interrupt-batch")
    loan_data.to_csv(folder / "loans.csv", index=False)
    joblib.dump(loan_model, folder / "model.joblib")
    return {"data": str(folder / "loans.csv"), "model": str(folder / "model.joblib"), "config": str(slow_config)}


def _records(path: Path) -> int:
    if not path.exists():
        return 0
    with path.open(encoding="utf-8") as lines:
        return max(sum(1 for _ in lines) - 1, 0)


@pytest.mark.slow
def test_ctrl_c_during_batch_with_workers_keeps_the_records_and_ends_at_once(
    batch_files: dict[str, str], tmp_path: Path
) -> None:
    """A terminal's Ctrl-C reaches the worker processes too: the job ends at once (it used to
    wait for every queued block), keeps what it wrote, and ``--resume`` goes on from there."""
    output = tmp_path / "out.csv"
    argv = [
        "batch",
        "--model",
        batch_files["model"],
        "--data",
        batch_files["data"],
        "--target",
        TARGET,
        "--rows",
        "all",
        "--config",
        batch_files["config"],
        "--time-limit",
        "1",
        "--window",
        "8",
        "--workers",
        "2",
        "--no-progress",
        "--output",
        str(output),
    ]
    stopped = _interrupt(
        "counterplan.solver.batch.run:explain_batch",
        argv,
        tmp_path,
        delay=0.5,
        ready=lambda: _records(output) >= 8,
        group=True,
    )
    line = _one_line(stopped)
    kept = _records(output)
    assert kept >= 8 and f"{kept} new rows kept" in line and "--resume" in line, line
    assert stopped.seconds < 30, "the queued blocks were not waited for"


def test_sigterm_during_batch_keeps_the_records_and_exits_143(batch_files: dict[str, str], tmp_path: Path) -> None:
    """SIGTERM to the command alone (as Kubernetes stops a job's process): it killed the process
    with the records of its last second unwritten; now it keeps them as Ctrl-C does."""
    output = tmp_path / "out.csv"
    argv = ["batch", "--model", batch_files["model"], "--data", batch_files["data"], "--target", TARGET]
    argv += ["--rows", "all", "--config", batch_files["config"], "--time-limit", "1", "--window", "8"]
    argv += ["--no-progress", "--output", str(output)]
    stopped = _interrupt(
        "counterplan.solver.batch.run:explain_batch",
        argv,
        tmp_path,
        delay=0.5,
        ready=lambda: _records(output) >= 8,
        signum=signal.SIGTERM,
    )
    line = _one_line(stopped, code=143, word="terminated")
    kept = _records(output)
    assert kept >= 8 and f"{kept} new rows kept" in line and "--resume" in line, line


@pytest.mark.slow
def test_sigterm_to_a_batch_with_workers_stops_them_and_ends_at_once(
    batch_files: dict[str, str], tmp_path: Path
) -> None:
    """SIGTERM reaches the command's own process only (a container's PID 1), not its workers: the
    command waited for the blocks they were solving (a block's time limit, here a minute) before
    it exited; it stops them now."""
    output = tmp_path / "out.csv"
    argv = ["batch", "--model", batch_files["model"], "--data", batch_files["data"], "--target", TARGET]
    argv += ["--rows", "all", "--config", batch_files["config"], "--time-limit", "60", "--window", "4"]
    argv += ["--workers", "2", "--no-progress", "--output", str(output)]
    stopped = _interrupt("counterplan.solver.batch.run:explain_batch", argv, tmp_path, delay=3.0, signum=signal.SIGTERM)
    line = _one_line(stopped, code=143, word="terminated")
    assert "new rows kept" in line, line
    assert stopped.seconds < 30, "the workers' blocks were not waited for"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_stop_during_an_audits_proofs_on_workers_ends_them_at_once(
    batch_files: dict[str, str], tmp_path: Path, signum: int
) -> None:
    """A stop reaching the audit's process alone, while its workers prove rows: the workers were
    sent SIGTERM, but a forked worker kept the command's own handler, which raises
    ``KeyboardInterrupt``; the pool took that as the proof's error and the worker went on, and the
    command's exit waited for its proofs (11 s on the demo, up to ``--prove-seconds`` a row)."""
    argv = ["audit", "--model", batch_files["model"], "--data", batch_files["data"], "--target", TARGET]
    argv += ["--workers", "2", "--prove-seconds", "120", "--screen", "--no-progress", "--out", str(tmp_path / "audit")]
    stopped = _interrupt("counterplan.solver.audit.proofs:_prove_task", argv, tmp_path, delay=2.0, signum=signum)
    ctrl_c = signum == signal.SIGINT
    line = _one_line(stopped, MARKER, code=130 if ctrl_c else 143, word="interrupted" if ctrl_c else "terminated")
    assert "--resume" in line, line
    assert stopped.seconds < 10, f"the workers' proofs were waited for: {stopped.seconds:.1f} s"


HANGING_MODEL = """
import pathlib, threading
import numpy as np

class Hanging:
    \"\"\"The loan model, but a call holding the row of this debt never returns (a hung remote
    model); it leaves a file ``hung`` when it starts hanging.\"\"\"

    def __init__(self, model, debt):
        self.model, self.debt = model, debt
        self.classes_ = model.classes_
        self.feature_names_in_ = model.feature_names_in_

    def predict_proba(self, X):
        if (np.asarray(X["debt"], dtype=float) == self.debt).any():
            pathlib.Path("hung").touch()
            threading.Event().wait()
        return self.model.predict_proba(X)

    def predict(self, X):
        return self.model.predict(X)
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_stop_ends_a_batch_whose_row_hangs_in_a_model_call_on_the_threads_path(
    loan_data: pd.DataFrame, loan_model: Pipeline, tmp_path: Path, signum: int
) -> None:
    """A row's solve runs in a thread of its own there, and the batch waited for its threads after
    a stop: with a model call that never returns, Ctrl-C and SIGTERM left the process running
    for good (killed with SIGKILL, fuzzing). The stop now lets such a thread go and the command
    ends, keeping the records it had."""
    (tmp_path / "hanging_model.py").write_text(HANGING_MODEL, encoding="utf-8")
    sys.path.insert(0, str(tmp_path))
    try:
        from hanging_model import Hanging  # type: ignore[import-not-found]

        joblib.dump(Hanging(loan_model, float(loan_data["debt"].iloc[12])), tmp_path / "model.joblib")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("hanging_model", None)
    loan_data.iloc[:40].to_csv(tmp_path / "loans.csv", index=False)
    output = tmp_path / "out.csv"
    argv = ["batch", "--model", "model.joblib", "--data", "loans.csv", "--target", TARGET, "--rows", "all"]
    argv += ["--batch-engine", "threads", "--window", "4", "--no-progress", "--output", str(output)]
    log = tmp_path / "stderr.txt"
    with log.open("w", encoding="utf-8") as stderr:  # a file: a pipe nobody reads could fill and block it
        process = subprocess.Popen(
            [sys.executable, "-c", HARNESS, "counterplan.solver.batch.run:explain_batch", *argv],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            cwd=tmp_path,
        )
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "hung").exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert (tmp_path / "hung").exists(), f"the model never hung (exit {process.poll()})"
        time.sleep(0.5)
        sent = time.monotonic()
        process.send_signal(signum)
        code = process.wait(timeout=60)  # hung for good without the fix
        seconds = time.monotonic() - sent
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    err = log.read_text(encoding="utf-8")
    assert code == 128 + signum, err[-2000:]
    assert seconds < 30, seconds
    assert "new rows kept" in err.splitlines()[-1], err[-2000:]
    assert _records(output) >= 1  # the rows before the hung one


def test_the_first_interrupt_stops_the_search_and_a_second_raises() -> None:
    stops: list[str] = []
    with pytest.raises(KeyboardInterrupt), stop_on_interrupt(lambda: stops.append("stop")) as interrupt:
        assert not interrupt.requested
        signal.raise_signal(signal.SIGINT)
        assert interrupt.requested and stops, "the first Ctrl-C asks the search to stop, and raises nothing"
        signal.raise_signal(signal.SIGINT)  # the user insists
    assert stops[0] == "stop"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler, "the usual handler is back"


def test_an_interrupt_heard_while_the_main_thread_is_in_native_code_stops_at_once() -> None:
    """A MILP solver runs in C with the GIL released: Python's handler would run only when it
    returns. The signal's wakeup byte reaches a helper thread, which stops the search at once."""
    heard = threading.Event()
    with stop_on_interrupt(heard.set) as interrupt:
        interrupt.hear(signal.SIGINT)  # what the helper thread does with a wakeup byte
        assert heard.wait(5)
        assert interrupt.requested
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_outside_the_main_thread_the_handlers_are_left_alone() -> None:
    seen: list[bool] = []

    def elsewhere() -> None:
        with stop_on_interrupt(lambda: None) as interrupt:
            seen.append(interrupt.requested)

    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join()
    assert seen == [False]


def test_an_interruption_carries_its_line() -> None:
    error = Interrupted("best so far: none")
    assert isinstance(error, KeyboardInterrupt) and error.line == "best so far: none"


def test_ctrl_c_while_the_command_loads_its_modules_prints_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Ctrl-C in the first tenths of a second, while the command imported its logging (structlog,
    rich) after parsing its flags, printed a traceback and no line (a batch interrupted at random
    times: 5 of 30 between 0.3 and 2.5 s)."""
    from counterplan.server import logs
    from counterplan.server.cli import interrupt
    from counterplan.server.cli.main import main

    def interrupted() -> None:
        raise KeyboardInterrupt  # Ctrl-C while the logs' modules load

    monkeypatch.setattr(logs, "configure_console_logs", interrupted)
    monkeypatch.setattr(interrupt, "_received", [])  # no signal an earlier test's command heard
    try:
        code = main(["batch"])
    except KeyboardInterrupt:
        pytest.fail("the Ctrl-C left the command: Python printed a traceback")
    assert code == 130
    out, err = capsys.readouterr()
    assert err == "counterplan: interrupted\n" and out == ""


ROOT = Path(__file__).resolve().parents[3]
PAUSED = "counterplan-test: loading"
ENTRY_HARNESS = f"""
import importlib, runpy, signal, sys

signal.signal(signal.SIGINT, signal.default_int_handler)  # a terminal's Ctrl-C, as HARNESS says
entry, loading, *argv = sys.argv[1:]


class Pause:
    \"\"\"Holds the import of the module ``loading`` until the test's SIGINT arrives.\"\"\"

    def find_spec(self, name, path=None, target=None):
        if name == loading:
            sys.meta_path.remove(self)
            print({PAUSED!r}, file=sys.stderr, flush=True)
            sys.stdin.readline()  # never answered: the SIGINT interrupts it
        return None


sys.meta_path.insert(0, Pause())
sys.argv = ["counterplan", *argv]
if entry == "-m":  # python -m counterplan
    runpy.run_module("counterplan", run_name="__main__", alter_sys=True)
else:  # what the console script pip writes does: from MODULE import FUNCTION; sys.exit(FUNCTION())
    module, function = entry.split(":")
    sys.exit(getattr(importlib.import_module(module), function)())
"""


def _console_script() -> str:
    """The ``counterplan`` command's entry point as pyproject.toml declares it (``module:function``)."""
    import tomllib

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    return str(scripts["counterplan"])


@pytest.mark.parametrize("entry", ["script", "-m"])
@pytest.mark.parametrize(
    "loading", ["counterplan.server.cli.explain", "counterplan.server.cli.tune", "counterplan.server.cli.problem_flags"]
)
def test_ctrl_c_while_the_command_starts_prints_one_line(tmp_path: Path, entry: str, loading: str) -> None:
    """A Ctrl-C in the first tenth of a second, while the console script imported the command line
    (every command's module, before main ran), printed Python's traceback: the signal is sent while
    the import of ``loading`` is held."""
    process = subprocess.Popen(
        [sys.executable, "-c", ENTRY_HARNESS, _console_script() if entry == "script" else "-m", loading, "explain"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert process.stderr is not None
    first = process.stderr.readline()
    assert first.strip() == PAUSED, first + process.stderr.read()[-2000:]
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert "Traceback" not in err, err[-3000:]
    assert (process.returncode, err, out) == (130, "counterplan: interrupted\n", "")
