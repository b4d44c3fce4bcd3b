"""An audit's stop check (a server's deadline, cancel or shutdown) cuts a proof under way, in
this process: a proof may take the whole time limit, so asked only between proofs the check
let a late one run that long past the deadline. A proof cut short is no verdict: nothing is kept."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from counterplan.solver.audit import proofs
from counterplan.solver.audit.proofs import read_proofs
from counterplan.solver.audit.runner import PROOFS_FILE, AuditOptions, run_audit
from counterplan.solver.counterfactual import CounterfactualSolver
from counterplan.solver.explainer import Explainer
from tests.solver.audit.test_audit import grid, grid_explainer

pytest.importorskip("highspy")

__all__ = ["grid", "grid_explainer"]  # the fixtures, shared with test_audit.py


@pytest.mark.parametrize("screen", [False, True])
def test_a_stop_cuts_the_proof_under_way(
    grid_explainer: Explainer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, screen: bool
) -> None:
    proving = threading.Event()  # a proof has started
    asked = threading.Event()  # the stop check was asked while it ran

    class Watched(CounterfactualSolver):
        def solve(self) -> Any:
            proving.set()
            asked.wait(timeout=5.0)  # without the check during the proof: on after 5 s
            return super().solve()

    monkeypatch.setattr(proofs, "CounterfactualSolver", Watched)

    def stop() -> bool:
        if proving.is_set():
            asked.set()
            return True
        return False

    options = AuditOptions(bootstrap=0, rules=0, screen=screen, stop=stop)
    report, _ = run_audit(grid_explainer, "rejected", options, out=tmp_path)
    assert proving.is_set() and asked.is_set()
    assert report.partial
    path = tmp_path / PROOFS_FILE
    assert not path.exists() or read_proofs(path) == {}, "a proof cut short is no verdict"


def test_a_stop_ends_the_workers_proofs_under_way(
    grid_explainer: Explainer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On two worker processes each task holds up to 8 rows, and the stop was asked only when a
    task came back: an audit stopped at 4 s took 11 s (fuzzing). Each screen's proof made to take
    2 s here (the forked workers inherit it): a task takes 16 s, and the audit stopped at 1.5 s
    ends within a few seconds of it, partial, every verdict it kept a whole one."""
    real = proofs.prove_row

    def slow(*args: Any, **kwargs: Any) -> Any:
        time.sleep(2.0)
        return real(*args, **kwargs)

    monkeypatch.setattr(proofs, "prove_row", slow)
    started = time.perf_counter()
    deadline = started + 1.5
    options = AuditOptions(bootstrap=0, rules=0, screen=True, workers=2, stop=lambda: time.perf_counter() > deadline)
    report, _ = run_audit(grid_explainer, "rejected", options, out=tmp_path)
    spent = time.perf_counter() - started
    assert report.partial
    assert spent < 8.0, f"the audit ended {spent - 1.5:.1f} s after its stop"
