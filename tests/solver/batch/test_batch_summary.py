"""The summary of a batch's records: overall figures and how often each feature is changed."""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd
import pytest

from counterplan.solver.batch.records import RECORD_COLUMNS
from counterplan.solver.batch.summary import FEATURE_COLUMNS, summarize

ORIGINALS = pd.DataFrame(
    {
        "income": [30_000.0, 40_000.0, 50_000.0, 60_000.0, 70_000.0, 80_000.0],
        "cards": [5, 6, 7, 8, 9, 4],
        "home": ["rent", "rent", "own", "rent", "mortgage", "rent"],
        "guarantor": [False, False, True, False, False, False],
        "debt": [1.0, float("nan"), 3.0, float("nan"), 5.0, 6.0],
    },
    index=[10, 11, 12, 13, 14, 15],
)


def _record(row_id: int, status: str, distance: float, changed: int, **proposed: Any) -> dict[str, Any]:
    record: dict[str, Any] = dict.fromkeys(RECORD_COLUMNS)
    record.update(row_id=row_id, status=status, valid=status in ("ok", "already_met"), distance=distance)
    record["changed"] = changed
    values = ORIGINALS.loc[row_id].to_dict()
    values.update(proposed)
    record.update({f"cf_{name}": value for name, value in values.items()})
    return record


def _records() -> pd.DataFrame:
    rows = [
        _record(10, "ok", 1.0, 2, income=31_000.0, home="own"),
        _record(11, "ok", 2.0, 2, income=43_000.0, debt=0.0),  # a gap filled in: a change
        _record(12, "ok", 3.0, 1, guarantor=False),
        _record(13, "ok", 4.0, 2, income=61_000.0, home="own"),
        _record(14, "not_found", 9.0, 3, income=1.0, cards=0),  # invalid: not counted per feature
        _record(15, "already_met", 0.0, 0),
    ]
    error = dict.fromkeys(RECORD_COLUMNS)
    error.update(row_id=16, status="error", valid=False, distance=float("nan"), changed=0, error="boom")
    return pd.DataFrame([*rows, error])


def test_overall_figures_count_statuses_and_average_over_valid_answers_only() -> None:
    summary = summarize(_records(), ORIGINALS)
    assert (summary.explained, summary.valid, summary.not_found, summary.errors, summary.already_met) == (6, 4, 1, 1, 1)
    assert summary.valid_share == pytest.approx(4 / 6)
    assert summary.mean_distance == pytest.approx(2.5)
    assert summary.median_distance == pytest.approx(2.5)
    assert summary.mean_changes == pytest.approx(1.75)
    assert summary.median_changes == pytest.approx(2.0)


def test_each_feature_says_how_often_and_how_it_changes_most_often_first() -> None:
    features = summarize(_records(), ORIGINALS).features.set_index("feature")
    assert list(summarize(_records(), ORIGINALS).features.columns) == list(FEATURE_COLUMNS)
    assert features.index.tolist() == ["income", "home", "debt", "guarantor", "cards"]
    income = features.loc["income"]
    assert (income["changed"], income["share"]) == (3, 0.75)
    assert income["median_change"] == pytest.approx(1_000.0)  # of +1000, +3000, +1000
    assert pd.isna(income["top_change"])
    home = features.loc["home"]
    assert (home["changed"], home["top_change"], home["top_change_count"]) == (2, "rent -> own", 2)
    assert math.isnan(home["median_change"])
    debt = features.loc["debt"]  # 11: a gap filled (a change, no difference); 13: a gap kept
    assert debt["changed"] == 1 and math.isnan(debt["median_change"])
    guarantor = features.loc["guarantor"]
    assert (guarantor["changed"], guarantor["top_change"], guarantor["top_change_count"]) == (1, "True -> False", 1)
    assert features.loc["cards", "changed"] == 0


def test_records_read_back_from_a_csv_give_the_same_summary(tmp_path: Any) -> None:
    records = _records()
    path = tmp_path / "records.csv"
    records.to_csv(path, index=False)
    again = summarize(pd.read_csv(path), ORIGINALS)
    ours = summarize(records, ORIGINALS)
    pd.testing.assert_frame_equal(again.features, ours.features)
    assert again.to_dict() == ours.to_dict()


def test_a_batch_with_no_valid_answer_has_no_averages_and_json_ready_figures() -> None:
    records = _records()
    records = records[records["status"] != "ok"]
    summary = summarize(records, ORIGINALS)
    assert summary.valid == 0 and math.isnan(summary.mean_distance)
    assert (summary.features["changed"] == 0).all()
    figures = summary.to_dict()
    assert figures["mean_distance"] is None and figures["valid_share"] == 0.0
    json.dumps(figures, allow_nan=False)  # None, not NaN
    empty = summarize(records.iloc[:0], ORIGINALS)
    assert empty.explained == 0 and math.isnan(empty.valid_share)
    assert empty.to_dict()["valid_share"] is None


def test_an_answer_reaching_the_goal_only_by_breaking_a_rule_is_counted_apart_and_says_why() -> None:
    """With one change allowed, every answer of this logistic regression needs two: the search
    returns one breaking the rule. Its record was ``ok``, valid, with no note (only its score
    said so); the summary counted it valid and listed its changes among the features changed."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    from counterplan.planning import ClassGoal, CounterfactualProblem, FloatFeature
    from counterplan.planning.models import adapt_sklearn
    from counterplan.solver.batch.records import record_of
    from counterplan.solver.counterfactual import explain

    X = np.random.default_rng(0).uniform(0.0, 10.0, size=(400, 2))
    model = LogisticRegression().fit(X, (X.sum(axis=1) > 14).astype(int))
    features = [FloatFeature(name=name, value=1.0, low=0.0, high=10.0) for name in ("x", "y")]
    problem = CounterfactualProblem(features, [ClassGoal(target=1)], adapt_sklearn(model, "ok"), max_changed_features=1)
    result = explain(problem, seed=0)
    assert result.valid and not result.feasible
    record = record_of(7, result, 0, 0.1)
    assert record["status"] == "ok" and record["error"] is not None and "breaks" in record["error"], record
    within = _record(10, "ok", 1.0, 2, income=31_000.0, home="own")
    within["score"] = "[0/0/0]hard/[-1/-2]soft"
    broken = _record(11, "ok", 0.5, 1, cards=0)
    broken["score"] = record["score"]
    summary = summarize(pd.DataFrame([within, broken]), ORIGINALS)
    assert (summary.valid, summary.broke_rules, summary.explained) == (1, 1, 2)
    assert summary.mean_distance == pytest.approx(1.0)
    assert "cards" not in set(summary.features.loc[summary.features.changed > 0, "feature"])
    assert summary.to_dict()["broke_rules"] == 1
