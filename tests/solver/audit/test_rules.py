"""Global rules of an audit: found where one action plainly works for a subgroup, never moving an
immutable feature, and valid only as far as the model says."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import make_column_transformer
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder
from sklearn.tree import DecisionTreeClassifier

from counterplan.solver.audit.report import AuditRule
from counterplan.solver.audit.rules import _actions, _rows, find_rules, global_rules
from counterplan.solver.audit.runner import AuditOptions, run_audit
from counterplan.solver.batch.records import RECORD_COLUMNS
from counterplan.solver.core.config import SolverConfig, TerminationConfig
from counterplan.solver.explainer import Explainer

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def credit() -> tuple[Explainer, pd.DataFrame, Any]:
    return credit_case()


def credit_case() -> tuple[Explainer, pd.DataFrame, Any]:
    """Approved when income >= 50 and debt < 30; debt and age are immutable, so a rejected
    applicant with debt < 30 needs more income (at most +40) and one with more debt has no way."""
    rng = np.random.default_rng(3)
    n = 300
    data = pd.DataFrame(
        {
            "income": rng.integers(10, 101, n),
            "debt": rng.integers(0, 61, n),
            "age": rng.integers(20, 71, n),
            "home": rng.choice(["rent", "own"], n),
        }
    )
    label = ((data["income"] >= 50) & (data["debt"] < 30)).astype(int)
    pipeline = make_pipeline(
        make_column_transformer((OneHotEncoder(), ["home"]), remainder="passthrough"),
        DecisionTreeClassifier(max_depth=3, random_state=0),
    ).fit(data, label)
    short = SolverConfig(termination=TerminationConfig(unimproved_step_count_limit=20))  # most rows have no way
    explainer = Explainer(
        pipeline, data.assign(approved=label), target="approved", immutable=["debt", "age"], config=short, seed=0
    )
    return explainer, data, pipeline


@pytest.fixture(scope="module")
def audited(credit: tuple[Explainer, pd.DataFrame, Any]) -> tuple[pd.DataFrame, pd.DataFrame]:
    explainer, data, _ = credit
    records = explainer.explain_batch("rejected")
    return data.loc[records["row_id"]], records


def _debt_cut(pipeline: Any) -> float:
    """The model's own threshold on debt (the tree's split nearest 30)."""
    tree = pipeline[-1].tree_
    names = list(pipeline[0].get_feature_names_out())
    cuts = [t for f, t in zip(tree.feature, tree.threshold, strict=True) if f >= 0 and names[f].endswith("debt")]
    return float(min(cuts, key=lambda t: abs(t - 30)))


def _approved(pipeline: Any, rows: pd.DataFrame, income: pd.Series) -> np.ndarray:
    changed = rows.assign(income=income.clip(10, 100))
    return np.asarray(pipeline.predict(changed) == 1)


def test_the_rule_of_the_subgroup_is_found(credit: Any, audited: Any) -> None:
    explainer, _, pipeline = credit
    rows, records = audited
    rules = find_rules(explainer, rows, records)
    cut = _debt_cut(pipeline)
    needing = rows.loc[records.set_index("row_id").query("status != 'already_met'").index]
    rule = rules[0]  # the broadest: the later ones ask less of narrower subgroups
    assert [s.feature for s in rule.action.steps] == ["income"]
    assert [(t.feature, t.op) for t in rule.condition] == [("debt", "<=")]
    assert rule.condition[0].value == int(np.floor(cut))  # the model's own split, in whole numbers
    covered = needing["debt"] <= rule.condition[0].value
    assert rule.rows_covered == int(covered.sum())
    assert rule.coverage == pytest.approx(covered.mean())
    assert rule.validity >= 0.8
    # the validity is the model's: the covered rows with the action applied, predicted again
    amount = rule.action.steps[0].value
    approved = _approved(pipeline, needing[covered], needing.loc[covered, "income"] + amount)
    assert rule.validity == pytest.approx(approved.mean())
    assert 0.0 < rule.cost_mean < np.inf
    assert not any(s.feature in ("debt", "age") for r in rules for s in r.action.steps)


def _lying_records(rows: pd.DataFrame, **change: Any) -> pd.DataFrame:
    """Records that call every row's answer valid, with ``change`` applied to each."""
    out = []
    for row_id, row in rows.iterrows():
        record: dict[str, Any] = dict.fromkeys(RECORD_COLUMNS)
        record.update(row_id=row_id, status="ok", valid=True, distance=1.0, changed=1)
        values = row.to_dict()
        for name, delta in change.items():
            values[name] = values[name] + delta
        record.update({f"cf_{name}": value for name, value in values.items()})
        out.append(record)
    return pd.DataFrame(out)


def test_validity_is_the_models_not_the_answers(credit: Any, audited: Any) -> None:
    """Answers that claim +5 income is enough for everyone with little debt: the model accepts it
    only for those already near the line, and the rule says so."""
    explainer, _, pipeline = credit
    rows, _ = audited
    some = rows[rows["debt"] < 25]
    records = _lying_records(some, income=5)
    rules = find_rules(explainer, some, records, min_validity=0.01, depth=0, min_rows=1)
    (rule,) = rules
    assert [(s.feature, s.value) for s in rule.action.steps] == [("income", 5)]
    approved = _approved(pipeline, some, some["income"] + 5)
    assert 0.0 < approved.mean() < 0.5
    assert rule.validity == pytest.approx(approved.mean())  # not 1, as the records claim
    assert rule.rows_covered == len(some)
    assert find_rules(explainer, some, records, min_validity=0.8, depth=0, min_rows=1) == []


def test_no_action_moves_an_immutable_feature(credit: Any, audited: Any) -> None:
    """Answers that (against the rules) cut debt and age: no candidate action, so no rule, moves them."""
    explainer, _, _ = credit
    rows, _ = audited
    records = _lying_records(rows, debt=-20, age=-5, income=10)
    audited_rows = _rows(explainer, rows, records)
    assert audited_rows is not None
    actions = _actions(audited_rows.problems[0].space, audited_rows, 48)
    assert actions
    assert {s.feature for a in actions for s in a.steps} == {"income"}
    rules = find_rules(explainer, rows, records, min_validity=0.5)
    assert rules
    assert all(s.feature == "income" for r in rules for s in r.action.steps)


def test_rules_are_deterministic_and_reported(credit: Any, audited: Any) -> None:
    explainer, _, _ = credit
    rows, records = audited
    first = global_rules(explainer, rows, records, seed=4)
    again = global_rules(explainer, rows, records, seed=4)
    assert first == again
    assert first and all(isinstance(r, AuditRule) for r in first)
    assert len(first) <= 5
    assert all(r.validity is not None and r.validity >= 0.8 for r in first)
    text = first[0].model_dump_json()
    assert AuditRule.model_validate_json(text) == first[0]
    assert len(global_rules(explainer, rows, records, max_rules=1)) == 1


def test_rows_meeting_the_goal_or_failing_are_left_out(credit: Any, audited: Any) -> None:
    explainer, _, _ = credit
    rows, records = audited
    found = find_rules(explainer, rows, records)
    needing = int(records["status"].isin(["ok", "not_found"]).sum())
    everyone = [r for r in found if not r.condition]
    for rule in found:
        assert rule.rows_covered == round(rule.coverage * needing)
    assert all(r.rows_covered == needing for r in everyone)


def test_records_read_back_with_nullable_columns_give_the_same_rules() -> None:
    """A resumed audit reads its earlier records back from Parquet or CSV with nullable dtypes
    (``boolean``, ``Int64``: :func:`~counterplan.solver.batch.writer.record_dtypes`); its rules are
    the rules of the records a single run holds. Before, a ``boolean`` answer column read as no
    answer at all, so a resumed audit reported no rules."""
    rng = np.random.default_rng(5)
    data = pd.DataFrame({"income": rng.integers(10, 101, 200), "guarantor": rng.random(200) < 0.3})
    label = (data["guarantor"] | (data["income"] >= 80)).astype(int)
    model = DecisionTreeClassifier(max_depth=3, random_state=0).fit(data, label)
    explainer = Explainer(model, data.assign(approved=label), target="approved", seed=0)
    records = explainer.explain_batch("rejected")
    rows = data.loc[records["row_id"]]
    read_back = records.astype({"cf_guarantor": "boolean", "cf_income": "Int64"})
    found = global_rules(explainer, rows, records)
    assert found and any(a.feature == "guarantor" for rule in found for a in rule.action)
    assert global_rules(explainer, rows, read_back) == found


def test_no_action_breaks_a_monotone_rule(credit: Any, audited: Any) -> None:
    """With income allowed only to fall, answers that raise it give no action at all."""
    explainer, data, pipeline = credit
    rows, _ = audited
    falling = Explainer(
        pipeline,
        data.assign(approved=pipeline.predict(data)),
        target="approved",
        immutable=["debt", "age"],
        overrides={"income": {"monotone": "decrease"}},
        seed=0,
    )
    records = _lying_records(rows, income=10)
    audited_rows = _rows(falling, rows, records)
    assert audited_rows is not None
    assert _actions(audited_rows.problems[0].space, audited_rows, 48) == []
    assert find_rules(falling, rows, records, min_validity=0.01) == []
    assert find_rules(explainer, rows, records, min_validity=0.01)  # the same answers, income free


def test_the_audit_reports_its_global_rules_and_writes_them(
    credit: tuple[Explainer, pd.DataFrame, Any], tmp_path: Path
) -> None:
    """``run_audit`` puts the rules in the report and in ``audit.json``: the subgroup's rule, each
    rule as valid as asked through the model; ``rules=0`` asks for none."""
    explainer = credit[0]
    report, _ = run_audit(explainer, "rejected", AuditOptions(bootstrap=0, rule_validity=0.9), out=tmp_path)
    assert report.rules, "the credit case has a rule: more income where debt is low"
    assert report.rules[0].condition[0].feature == "debt"
    for rule in report.rules:
        assert rule.validity is not None and rule.validity >= 0.9
        assert all(a.feature not in {"debt", "age"} for a in rule.action)
    written = json.loads((tmp_path / "audit.json").read_text(encoding="utf-8"))
    assert written["rules"] == [rule.model_dump(mode="json") for rule in report.rules]
    assert report.timing.rules_seconds > 0
    none, _ = run_audit(explainer, "rejected", AuditOptions(bootstrap=0, rules=0))
    assert none.rules == []
    with pytest.raises(ValueError, match="rules"):
        run_audit(explainer, "rejected", AuditOptions(rules=-1))
