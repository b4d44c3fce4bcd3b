"""The audit's screen (``AuditOptions.screen``): each row put to the exact engine for feasibility
before its search. Rows proven infeasible there are not searched; the row sets, the proofs and
the answers are the audit's without the screen, on one worker or two, through a stop and a resume;
a model the exact engine cannot encode is not screened."""

from __future__ import annotations

import collections
import dataclasses
import threading
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder

from counterplan.planning import ClassGoal
from counterplan.planning.errors import ProblemError
from counterplan.solver.audit.proofs import read_proofs
from counterplan.solver.audit.report import AuditReport
from counterplan.solver.audit.runner import PROOFS_FILE, SCREEN_PROBE, AuditOptions, run_audit
from counterplan.solver.explainer import Explainer
from tests.solver.audit.test_audit import (
    FEATURES,
    TARGET,
    _comparable,
    _noisy,
    _tree,
    assert_infeasible_by_enumeration,
    grid,
    grid_explainer,
)

pytest.importorskip("highspy")

__all__ = ["grid", "grid_explainer"]  # the fixtures, shared with test_audit.py


def _run(explainer: Explainer, rows: Any, options: AuditOptions, out: Path | None = None) -> tuple[Any, ...]:
    """The audit, with the outcomes told per stage (``Counter`` of ``(stage, outcome)``)."""
    told: collections.Counter[tuple[str, str]] = collections.Counter()
    options = dataclasses.replace(options, on_outcome=lambda stage, outcome: told.update([(stage, outcome)]))
    report, rows_frame = run_audit(explainer, rows, options, out)
    return report, rows_frame, told


def _same(with_screen: AuditReport, without: AuditReport) -> None:
    one, two = _comparable(with_screen), _comparable(without)
    assert one["settings"].pop("screen") is True and two["settings"].pop("screen") is False
    assert one == two


def _searched(told: collections.Counter[tuple[str, str]]) -> int:
    return sum(n for (stage, _), n in told.items() if stage == "search")


def test_screened_rows_are_proven_without_a_search_and_the_report_is_the_same(grid_explainer: Explainer) -> None:
    """The grid's 210 rejected rows: the 75 with c = 0 (immutable) have no recourse. With the
    screen they are proven before any search and only the 135 others are searched; the report
    and every searched row's record are the audit's without the screen."""
    options = AuditOptions(groups=("cgroup",), bootstrap=50, seed=3)
    on, rows_on, told_on = _run(grid_explainer, "rejected", dataclasses.replace(options, screen=True))
    off, rows_off, told_off = _run(grid_explainer, "rejected", dataclasses.replace(options, screen=False))
    _same(on, off)
    assert len(on.no_recourse_proven) == 75 and len(on.with_recourse) == 135
    assert told_on[("screen", "proven")] == 75 and told_on[("screen", "feasible")] == 135
    assert _searched(told_on) == 135 and on.timing.rows_searched == 135 and on.timing.rows_screened == 210
    assert _searched(told_off) == 210 and ("screen", "proven") not in told_off
    assert on.timing.rows_proved == 0 and off.timing.rows_proved == 75  # the screen was their proof
    searched = rows_on["audit_status"] == "with_recourse"
    pd.testing.assert_frame_equal(
        rows_on[searched].drop(columns=["seconds"]).reset_index(drop=True),
        rows_off[rows_off["audit_status"] == "with_recourse"].drop(columns=["seconds"]).reset_index(drop=True),
    )
    proven = rows_on[rows_on["audit_status"] == "no_recourse_proven"]
    assert (proven["status"] == "not_found").all() and not proven["valid"].any()


def test_the_default_screens_an_encodable_model_and_its_proofs_hold_by_enumeration() -> None:
    """A depth-5 tree on noisy data: the default (``screen=None``) screens it, and every row it
    calls proven (the screen's proofs among them) has no valid change by brute force."""
    data = _noisy()
    explainer = Explainer(_tree(data, max_depth=5), data, target=TARGET, columns=FEATURES, immutable=["c"])
    report, _, told = _run(explainer, "rejected", AuditOptions(bootstrap=0, rules=0))
    off, _, _ = _run(explainer, "rejected", AuditOptions(bootstrap=0, rules=0, screen=False))
    _same(report, off)
    assert report.settings.screen and told[("screen", "proven")] == len(report.no_recourse_proven) > 0
    assert _searched(told) == len(report.with_recourse)
    (bound,) = explainer.problem(0).goals
    assert isinstance(bound.goal, ClassGoal) and bound.goal.confidence is None
    assert_infeasible_by_enumeration(explainer, data, report.no_recourse_proven, (1.0 + bound.goal.margin) / 2.0)


def test_the_screen_on_two_workers_gives_the_same_report(grid_explainer: Explainer) -> None:
    options = AuditOptions(groups=("band",), seed=5, bootstrap=50, window=16, screen=True)
    one, rows_one, _ = _run(grid_explainer, "150:300", options)
    two, rows_two, told = _run(grid_explainer, "150:300", dataclasses.replace(options, workers=2))
    assert _comparable(one) == _comparable(two)
    assert told[("screen", "proven")] == len(two.no_recourse_proven) > 0
    pd.testing.assert_frame_equal(rows_one.drop(columns=["seconds"]), rows_two.drop(columns=["seconds"]))


def test_a_stopped_screen_resumes_without_screening_a_row_twice(tmp_path: Path, grid_explainer: Explainer) -> None:
    """The stop check is asked after each screened row: stopped after 20, the audit is partial
    and nothing was searched; resumed, the other rows are screened, each once, and the report is
    the one of an audit never stopped. (It is also asked while a screen runs, from a helper
    thread, every 0.05 s: a slow machine's screens would count those too, so only the audit's
    own asks, between rows, are counted here.)"""
    asked = 0
    audit_thread = threading.current_thread()

    def stop() -> bool:
        nonlocal asked
        if threading.current_thread() is audit_thread:
            asked += 1
        return asked >= 20

    options = AuditOptions(bootstrap=0, screen=True)
    cut, _, told = _run(grid_explainer, "rejected", dataclasses.replace(options, stop=stop), tmp_path)
    assert cut.partial and _searched(told) == 0 and sum(told.values()) == 20
    assert len(read_proofs(tmp_path / PROOFS_FILE)) == 20
    resumed, _, again = _run(grid_explainer, "rejected", options, tmp_path)
    whole, _, _ = _run(grid_explainer, "rejected", options)
    assert not resumed.partial and resumed.timing.rows_screened == 210 - 20
    assert sum(n for (stage, _), n in again.items() if stage == "screen") == 190
    assert _comparable(resumed) == _comparable(whole)
    later, _, last = _run(grid_explainer, "rejected", options, tmp_path)  # all done: nothing again
    assert sum(last.values()) == 0 and _comparable(later) == _comparable(whole)


def test_a_model_the_exact_engine_cannot_encode_is_not_screened(grid: pd.DataFrame) -> None:
    """A nearest-neighbour model: the default does not screen it (every row is searched, as
    before), asking for the screen is refused naming it, and so is a screen without proofs."""
    knn = make_pipeline(
        ColumnTransformer([("kind", OneHotEncoder(), ["kind"])], remainder="passthrough"),
        KNeighborsClassifier(n_neighbors=1),
    ).fit(grid[FEATURES], grid[TARGET])
    explainer = Explainer(knn, grid, target=TARGET, columns=FEATURES, immutable=["c"])
    report, _, told = _run(explainer, "0:60", AuditOptions(bootstrap=0, rules=0))
    assert not report.settings.screen and report.timing.rows_screened == 0
    assert not any(stage == "screen" for stage, _ in told) and _searched(told) == report.n_rows == 60
    assert report.unproven_reasons == {"not encodable": 15}
    with pytest.raises(ProblemError) as caught:
        run_audit(explainer, "0:60", AuditOptions(bootstrap=0, screen=True))
    assert caught.value.field == "screen"
    tree = Explainer(_tree(grid), grid, target=TARGET, columns=FEATURES, immutable=["c"])
    with pytest.raises(ProblemError) as caught:
        run_audit(tree, "0:60", AuditOptions(bootstrap=0, prove=False, screen=True))
    assert caught.value.field == "screen"


def test_the_default_screen_stops_when_its_probe_finds_no_row_without_recourse(
    grid: pd.DataFrame, grid_explainer: Explainer
) -> None:
    """The 135 rejected rows with c >= 1 all have recourse: the default screens the first
    SCREEN_PROBE of them, finds none proven, and searches every row; ``screen=True`` screens all."""
    rows = grid[(grid.c >= 1) & (grid[TARGET] == 0)]
    auto, _, told = _run(grid_explainer, rows, AuditOptions(bootstrap=0, rules=0))
    forced, _, _ = _run(grid_explainer, rows, AuditOptions(bootstrap=0, rules=0, screen=True))
    assert auto.settings.screen and auto.timing.rows_screened == SCREEN_PROBE < len(rows)
    assert told[("screen", "feasible")] == SCREEN_PROBE and _searched(told) == len(rows) == 135
    assert forced.timing.rows_screened == len(rows) and len(auto.with_recourse) == 135
    assert _comparable(auto) == _comparable(forced)


def test_a_first_row_with_an_unseen_category_is_its_own_error_not_the_audits(
    grid: pd.DataFrame, grid_explainer: Explainer
) -> None:
    """The default screen asks whether the exact engine can encode the model on the first row's
    problem: a first row holding a category the data has never seen made no problem, and its
    refusal ended the whole audit before any search (without the screen, that row is an error
    record and the others are audited). Now the row is its own error, with the screen or without."""
    rows = grid[(grid[TARGET] == 0)].iloc[:12].copy()
    rows.loc[rows.index[0], "kind"] = "never seen"
    report, audited, _ = _run(grid_explainer, rows, AuditOptions(bootstrap=0, rules=0))
    assert report.settings.screen and report.errors == [int(rows.index[0])]
    assert "never seen" in str(audited.loc[audited["row_id"] == rows.index[0], "error"].iloc[0])
    without, _, _ = _run(grid_explainer, rows, AuditOptions(bootstrap=0, rules=0, screen=False))
    _same(report, without)
