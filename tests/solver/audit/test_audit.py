"""Recourse audits (:func:`counterplan.solver.audit.audit`) on real scikit-learn models trained on
small generated data: the figures on a hand-checkable case, "proven" checked by brute force,
failed searches never called proven, determinism, the intervals and refit robustness."""

from __future__ import annotations

import dataclasses
import itertools
import json
import time
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import OneHotEncoder
from sklearn.tree import DecisionTreeClassifier

from counterplan.planning import ClassGoal
from counterplan.planning.errors import ProblemError
from counterplan.planning.features import CategoricalFeature, IntegerFeature
from counterplan.solver.audit import AuditReport, audit, run_audit
from counterplan.solver.audit.runner import AuditOptions
from counterplan.solver.audit.stats import burden, group_figures
from counterplan.solver.explainer import Explainer

pytest.importorskip("highspy")

FEATURES = ["a", "b", "c", "kind"]
KINDS = ("x", "y", "z")
TARGET = "y"


def _tree(data: pd.DataFrame, **options: Any) -> Pipeline:
    encode = ColumnTransformer([("kind", OneHotEncoder(), ["kind"])], remainder="passthrough")
    return make_pipeline(encode, DecisionTreeClassifier(random_state=0, **options)).fit(data[FEATURES], data[TARGET])


@pytest.fixture(scope="module")
def grid() -> pd.DataFrame:
    """Every combination of a, b in 0..4, c in 0..3 and kind once (300 rows); approved when
    a + b >= 5 and c >= 1. ``cgroup`` says whether c is 0; ``band`` is a group column that is no
    feature (a row's position modulo 2)."""
    cells = list(itertools.product(range(5), range(5), range(4), KINDS))
    data = pd.DataFrame(cells, columns=FEATURES)
    data[TARGET] = ((data.a + data.b >= 5) & (data.c >= 1)).astype(int)
    data["cgroup"] = np.where(data.c == 0, "zero", "positive")
    data["band"] = np.where(np.arange(len(data)) % 2 == 0, "even", "odd")
    return data


@pytest.fixture(scope="module")
def grid_explainer(grid: pd.DataFrame) -> Explainer:
    """A fully grown tree fitted on the whole grid: the model is the rule itself; c is immutable."""
    return Explainer(_tree(grid), grid, target=TARGET, columns=FEATURES, immutable=["c"])


@pytest.fixture(scope="module")
def grid_audit(grid_explainer: Explainer) -> tuple[AuditReport, pd.DataFrame]:
    return run_audit(grid_explainer, "rejected", AuditOptions(groups=("cgroup", "kind", "band"), bootstrap=200))


def test_recourse_rate_and_groups_on_a_hand_checkable_case(grid: pd.DataFrame, grid_audit: Any) -> None:
    """210 rows are rejected: the 75 with c = 0 can never be approved (c is immutable), the 135
    others can (raise a and b). By kind: 70 rejected each, 45 with recourse."""
    report, rows = grid_audit
    rejected = grid.index[grid[TARGET] == 0]
    assert report.n_rows == 210 and report.skipped_already_met == 90
    assert report.recourse_rate == pytest.approx(135 / 210)
    assert sorted(report.with_recourse) == sorted(int(i) for i in rejected if grid.c[i] >= 1)
    assert sorted(report.no_recourse_proven) == sorted(int(i) for i in rejected if grid.c[i] == 0)
    assert report.no_recourse_unproven == [] and report.errors == [] and report.already_met == []
    zero, positive = report.groups["cgroup"]["zero"], report.groups["cgroup"]["positive"]
    assert (zero.n, zero.recourse_rate, zero.no_recourse_proven) == (75, 0.0, 75)
    assert (positive.n, positive.recourse_rate, positive.with_recourse) == (135, 1.0, 135)
    for kind in KINDS:
        figures = report.groups["kind"][kind]
        assert (figures.n, figures.with_recourse) == (70, 45)
        own = rows[(rows["kind"] == kind) & (rows["audit_status"] == "with_recourse")]
        assert figures.cost_mean == pytest.approx(own["distance"].mean())
        assert figures.cost_median == pytest.approx(own["distance"].median())
        assert figures.changed_mean == pytest.approx(own["changed"].mean())
    # the burden: each kind's mean cost over the cheapest kind's; equal shares without recourse
    means = {k: report.groups["kind"][k].cost_mean for k in KINDS}
    best = min(sorted(means), key=lambda k: means[k])
    assert report.burden["kind"].cost_reference == best
    for kind in KINDS:
        assert report.burden["kind"].values[kind].cost_ratio == pytest.approx(means[kind] / means[best])
        assert report.burden["kind"].values[kind].no_recourse_ratio == pytest.approx(1.0)
    # the best-off cgroup has no row without recourse: its ratio has no denominator
    assert report.burden["cgroup"].no_recourse_reference == "positive"
    assert report.burden["cgroup"].values["zero"].no_recourse_ratio is None
    # c is immutable: never changed; kind never needs to be
    assert "c" not in report.features or report.features["c"].changed == 0
    changed = sum(f.changed for f in report.features.values())
    assert changed == rows.loc[rows["audit_status"] == "with_recourse", "changed"].sum()


def test_every_answer_is_valid_through_the_model(grid_explainer: Explainer, grid_audit: Any) -> None:
    _, rows = grid_audit
    answers = rows[rows["audit_status"] == "with_recourse"]
    proposed = pd.DataFrame({f: answers["cf_" + f].to_numpy() for f in FEATURES})
    proposed[["a", "b", "c"]] = proposed[["a", "b", "c"]].astype(int)
    assert (grid_explainer.model.predict_proba(proposed)[:, 1] > 0.5).all()


def test_bootstrap_intervals_contain_their_estimates_and_repeat(grid_audit: Any) -> None:
    report, rows = grid_audit
    low, high = report.recourse_rate_ci
    assert low is not None and high is not None and low <= report.recourse_rate <= high < 1.0
    for column in ("kind", "band"):
        for figures in report.groups[column].values():
            assert figures.recourse_rate_ci[0] <= figures.recourse_rate <= figures.recourse_rate_ci[1]
            assert figures.cost_mean_ci[0] <= figures.cost_mean <= figures.cost_mean_ci[1]
        for ratios in report.burden[column].values.values():
            low, high = ratios.cost_ratio_ci
            assert low is not None and high is not None and low <= high
    columns = ["cgroup", "kind", "band"]
    assert group_figures(rows, columns, 0, 200, 0.95) == report.groups  # the figures from the rows, again
    assert burden(rows, columns, 0, 200, 0.95) == report.burden
    other = group_figures(rows, columns, 1, 200, 0.95)  # another seed: other draws
    assert other["kind"]["x"].cost_mean_ci != report.groups["kind"]["x"].cost_mean_ci


def test_a_recourse_rate_of_every_row_one_way_has_an_interval_of_the_rows_count(grid_audit: Any) -> None:
    """A percentile bootstrap of a share resamples only the outcomes seen: the 135 rows of
    ``positive`` that all have recourse got [1, 1] and the 75 of ``zero`` that have none [0, 0],
    a certainty no sample gives. The Wilson score interval gives 135 rows of 135 the lower end
    1 / (1 + z**2 / n), 0.9723 at 95%, and none of 75 the upper end (z**2 / n) / (1 + z**2 / n)."""
    report, _ = grid_audit
    z2 = NormalDist().inv_cdf(0.975) ** 2
    positive, zero = report.groups["cgroup"]["positive"], report.groups["cgroup"]["zero"]
    assert positive.recourse_rate_ci == (pytest.approx(1 / (1 + z2 / 135)), 1.0)
    assert zero.recourse_rate_ci == (0.0, pytest.approx(z2 / 75 / (1 + z2 / 75)))


def test_the_share_interval_is_wilsons() -> None:
    """8 of 10 at 95%: [0.4902, 0.9433], the textbook's figures; none with no rows or no bootstrap;
    the same whatever the order of the rows."""
    from counterplan.solver.audit.stats import share_interval

    hits = np.array([1.0] * 8 + [0.0] * 2)
    low, high = share_interval(hits, 1000, 0.95)
    assert (round(low or 0, 4), round(high or 0, 4)) == (0.4902, 0.9433)
    assert share_interval(hits[::-1], 1000, 0.95) == (low, high)
    low99, high99 = share_interval(hits, 1000, 0.99)
    assert low99 is not None and high99 is not None and low99 < low < high < high99
    assert share_interval(np.empty(0), 1000, 0.95) == (None, None)
    assert share_interval(hits, 0, 0.95) == (None, None)
    assert share_interval(np.array([1.0]), 1000, 0.95) == (
        pytest.approx(1 / (1 + NormalDist().inv_cdf(0.975) ** 2)),
        1.0,
    )


def _noisy() -> pd.DataFrame:
    rng = np.random.default_rng(2)
    n = 160
    data = pd.DataFrame(
        {
            "a": rng.integers(0, 4, n),
            "b": rng.integers(0, 4, n),
            "c": rng.integers(0, 3, n),
            "kind": rng.choice(KINDS, n),
            "group": rng.choice(["p", "q"], n),
        }
    )
    score = data.a + data.b + 4 * data.c + (data.kind == "z") + rng.normal(0, 1.5, n)
    data[TARGET] = (score > 7).astype(int)
    return data


def assert_infeasible_by_enumeration(
    explainer: Explainer, data: pd.DataFrame, row_ids: list[Any], threshold: float
) -> None:
    """No combination of the allowed values (a, b and kind over their whole domains, c held: it
    is immutable) brings any of ``row_ids`` to class 1's ``threshold``."""
    for row_id in row_ids:
        row = data.loc[row_id]
        space = explainer.problem(int(row_id)).space
        domains: dict[str, list[Any]] = {}
        for feature in space.features:
            if isinstance(feature, CategoricalFeature):
                domains[feature.name] = list(feature.domain)
            else:
                assert isinstance(feature, IntegerFeature)
                assert feature.low is not None and feature.high is not None
                # the problem's domain lies within the data's range, which is enumerated whole
                assert data[feature.name].min() <= feature.low and feature.high <= data[feature.name].max()
                domains[feature.name] = list(range(int(data[feature.name].min()), int(data[feature.name].max()) + 1))
        domains["c"] = [row["c"]]  # immutable
        cells = pd.DataFrame(list(itertools.product(*(domains[f] for f in FEATURES))), columns=FEATURES)
        assert (explainer.model.predict_proba(cells)[:, 1] < threshold).all(), f"row {row_id} has a valid change"


def test_every_proven_row_is_infeasible_by_brute_force() -> None:
    """A depth-5 tree on noisy data, c immutable: for every row the audit calls proven, no
    combination of the allowed values (a, b and kind over their whole domains, c held) reaches
    the goal; every row with recourse has an answer the model approves."""
    data = _noisy()
    model = _tree(data, max_depth=5)
    explainer = Explainer(model, data, target=TARGET, columns=FEATURES, immutable=["c"])
    report, rows = run_audit(explainer, "rejected", AuditOptions(groups=("group",), bootstrap=0))
    assert report.no_recourse_proven and report.with_recourse  # the check is not empty
    (bound,) = explainer.problem(0).goals  # class 1 leads class 0 by the margin: p1 >= (1 + margin) / 2
    goal = bound.goal
    assert isinstance(goal, ClassGoal) and goal.confidence is None and goal.margin < 0.05
    threshold = (1.0 + goal.margin) / 2.0

    def rows_of(ids: list[Any]) -> pd.DataFrame:
        chosen = rows.set_index("row_id").loc[ids]
        return pd.DataFrame({f: chosen["cf_" + f].to_numpy() for f in FEATURES}).astype({"a": int, "b": int, "c": int})

    assert report.no_recourse_unproven == []
    assert_infeasible_by_enumeration(explainer, data, report.no_recourse_proven, threshold)
    answers = rows_of(report.with_recourse)
    assert (model.predict_proba(answers)[:, 1] >= threshold).all()


def test_a_failed_search_without_a_proof_is_never_called_proven(grid: pd.DataFrame) -> None:
    """A nearest-neighbour model the exact engine cannot read: the rows with c = 0 have no
    answer, and no proof; likewise when the proof is not asked for."""
    knn = make_pipeline(
        ColumnTransformer([("kind", OneHotEncoder(), ["kind"])], remainder="passthrough"),
        KNeighborsClassifier(n_neighbors=1),
    ).fit(grid[FEATURES], grid[TARGET])
    explainer = Explainer(knn, grid, target=TARGET, columns=FEATURES, immutable=["c"])
    report = audit(explainer, "rejected", groups=["cgroup"], bootstrap=0)
    zero = sorted(int(i) for i in grid.index[grid.c == 0])
    assert report.no_recourse_proven == []
    assert sorted(report.no_recourse_unproven) == zero
    assert report.unproven_reasons == {"not encodable": 75}
    tree = Explainer(_tree(grid), grid, target=TARGET, columns=FEATURES, immutable=["c"])
    cut = audit(tree, "0:60", prove_seconds=1e-6, bootstrap=0)  # no proof is built in a microsecond
    assert cut.no_recourse_proven == [] and len(cut.no_recourse_unproven) == 15
    assert cut.unproven_reasons == {"time limit": 15}
    skipped = audit(tree, "rejected", prove=False, bootstrap=0)
    assert skipped.no_recourse_proven == [] and sorted(skipped.no_recourse_unproven) == zero
    assert skipped.unproven_reasons == {"not asked": 75}


def _comparable(report: AuditReport) -> dict[str, Any]:
    data = json.loads(report.to_json())
    del data["timing"], data["settings"]["workers"], data["settings"]["started"]
    return dict(data)


def test_the_same_seed_gives_the_same_report_on_one_or_two_workers(grid: pd.DataFrame) -> None:
    explainer = Explainer(_tree(grid), grid, target=TARGET, columns=FEATURES, immutable=["c"])
    options = AuditOptions(groups=("band",), seed=5, bootstrap=100, window=16)
    one, rows_one = run_audit(explainer, "200:280", options)
    two, rows_two = run_audit(explainer, "200:280", dataclasses.replace(options, workers=2))
    assert _comparable(one) == _comparable(two)
    pd.testing.assert_frame_equal(rows_one.drop(columns=["seconds"]), rows_two.drop(columns=["seconds"]))
    assert one.already_met and one.no_recourse_proven  # "200:280" keeps the rows that meet the goal: listed apart


def test_retrain_keeps_answers_a_refit_cannot_move() -> None:
    """x in 0..9, approved when x >= 5: a stump splits at 4.5 on every bootstrap sample (each holds
    4s and 5s), so every answer (x = 5) stays valid under every refit."""
    x = np.repeat(np.arange(10), 40)
    data = pd.DataFrame({"x": x, "z": np.tile(np.arange(8), 50), TARGET: (x >= 5).astype(int)})
    model = DecisionTreeClassifier(max_depth=1).fit(data[["x", "z"]], data[TARGET])
    explainer = Explainer(model, data, target=TARGET)
    report = audit(explainer, "0:80", retrain=4, bootstrap=0)
    assert report.robustness is not None and report.robustness.answers == 80
    assert report.robustness.shares == [1.0] * 4 and report.robustness.mean == 1.0


def test_retrain_shares_are_shares_and_can_fall() -> None:
    """A logistic regression on noisy data: the answers sit on its boundary, so refits lose some."""
    rng = np.random.default_rng(3)
    n = 300
    data = pd.DataFrame({"u": rng.normal(0, 1, n), "v": rng.normal(0, 1, n)})
    data[TARGET] = (data.u + data.v + rng.normal(0, 1, n) > 0).astype(int)
    explainer = Explainer(LogisticRegression().fit(data[["u", "v"]], data[TARGET]), data, target=TARGET)
    first = audit(explainer, "0:60", retrain=3, bootstrap=0, seed=1)
    assert first.robustness is not None and len(first.robustness.shares) == 3
    assert all(0.0 <= s <= 1.0 for s in first.robustness.shares)
    assert min(first.robustness.shares) < 1.0
    again = audit(explainer, "0:60", retrain=3, bootstrap=0, seed=1)
    assert again.robustness == first.robustness


def test_retrain_refuses_a_model_it_cannot_refit(grid: pd.DataFrame) -> None:
    from counterplan.planning.models import adapt_sklearn

    explainer = Explainer(adapt_sklearn(_tree(grid), TARGET), grid, target=TARGET, columns=FEATURES)
    with pytest.raises(ProblemError, match="retrain") as caught:
        audit(explainer, "0:10", retrain=2, bootstrap=0)
    assert caught.value.field == "retrain"


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"groups": ["nope"]}, "groups"),
        ({"rows": "10:5"}, "rows"),
        ({"rows": "sometimes"}, "rows"),
        ({"bootstrap": -1}, "bootstrap"),
        ({"retrain": -2}, "retrain"),
        ({"groups": ["status"]}, "groups"),
    ],
)
def test_bad_settings_are_refused_naming_their_field(
    grid_explainer: Explainer, options: dict[str, Any], field: str
) -> None:
    rows = options.pop("rows", "rejected")
    with pytest.raises(ProblemError) as caught:
        audit(grid_explainer, rows, **options)
    assert caught.value.field == field


def test_a_group_column_of_too_many_values_is_refused_before_any_search(
    grid_explainer: Explainer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An id column as a group (4,000 values) took minutes and wrote an 11 MB report of one-row
    groups: more values than MAX_GROUP_VALUES among the rows is refused, naming the column."""
    from counterplan.solver.audit import runner

    monkeypatch.setattr(runner, "MAX_GROUP_VALUES", 4)
    with pytest.raises(ProblemError) as caught:
        audit(grid_explainer, "rejected", groups=["kind", "a"])  # kind: 3 values; a: 5
    assert caught.value.field == "groups"
    assert "'a' has 5 distinct values among the rows; at most 4" in caught.value.problem


def test_group_columns_of_too_many_values_together_are_refused(
    grid_explainer: Explainer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The limit holds for the group columns together too: each within it, three columns of
    1,000 values drew an 18 MB page in a minute (a row, a bar and a box per value of each)."""
    from counterplan.solver.audit import runner

    monkeypatch.setattr(runner, "MAX_GROUP_VALUES", 7)
    with pytest.raises(ProblemError) as caught:
        audit(grid_explainer, "rejected", groups=["kind", "a"])  # kind: 3 values; a: 5; together 8
    assert caught.value.field == "groups"
    assert "have 8 distinct values together among the rows; at most 7" in caught.value.problem
    assert audit(grid_explainer, "0:30", groups=["kind", "cgroup"], bootstrap=0, rules=0).groups["kind"]  # 3 + 2


def test_a_one_row_sample_has_no_bootstrap_interval() -> None:
    """One row resampled is that row again: its interval had zero width, a certainty one row
    cannot give. Two rows have one."""
    from counterplan.solver.audit.stats import mean_interval

    rng = np.random.default_rng(0)
    assert mean_interval(np.array([731.7]), rng, 200, 0.95) == (None, None)
    low, high = mean_interval(np.array([1.0, 3.0]), rng, 200, 0.95)
    assert low is not None and high is not None and low < high


def test_a_ratio_whose_reference_often_resamples_to_zero_has_no_interval() -> None:
    """The reference value (5 rows, 1 without recourse) keeps no row without recourse in a third
    of the draws, whose ratio is unbounded: they were left out, and the other value's burden of
    2.5 got the interval [0.5, 4.0], an upper bound the draws do not give. A reference that
    rarely resamples to 0 still gives an interval about the ratio."""
    status = ["no_recourse_proven"] + ["with_recourse"] * 4 + ["no_recourse_proven"] * 5 + ["with_recourse"] * 5
    rows = pd.DataFrame(
        {
            "row_id": range(15),
            "audit_status": status,
            "distance": [1.0] * 15,
            "changed": 1,
            "g": ["small"] * 5 + ["big"] * 10,
        }
    )
    figures = burden(rows, ["g"], seed=0, draws=2000, confidence=0.95)["g"]
    assert figures.no_recourse_reference == "small"
    assert figures.values["big"].no_recourse_ratio == pytest.approx(2.5)
    assert figures.values["big"].no_recourse_ratio_ci == (None, None)
    assert figures.values["small"].no_recourse_ratio_ci == (None, None)
    wider = rows.assign(g=["small"] * 10 + ["big"] * 5)  # a reference of 10 rows, 5 without recourse
    wider["audit_status"] = ["no_recourse_proven"] * 5 + ["with_recourse"] * 5 + ["no_recourse_proven"] * 5
    low, high = burden(wider, ["g"], seed=0, draws=2000, confidence=0.95)["g"].values["big"].no_recourse_ratio_ci
    assert low is not None and high is not None and low <= 2.0 <= high


def test_outputs_and_resume(tmp_path: Any, grid_explainer: Explainer) -> None:
    """``out``: audit.json with the issue's keys and rows.parquet with every row's status and group;
    a second run over the same directory resumes: nothing is searched or proved again."""
    first = audit(grid_explainer, "0:60", groups=["cgroup"], bootstrap=50, out=tmp_path)
    written = json.loads((tmp_path / "audit.json").read_text())
    for key in (
        "recourse_rate",
        "no_recourse_proven",
        "no_recourse_unproven",
        "with_recourse",
        "groups",
        "burden",
        "features",
        "rules",
    ):
        assert key in written
    rows = pd.read_parquet(tmp_path / "rows.parquet")
    assert len(rows) == 60 and {"audit_status", "audit_reason", "cgroup", "row_id", "cf_a"} <= set(rows.columns)
    assert sorted(rows.loc[rows["audit_status"] == "no_recourse_proven", "row_id"]) == sorted(first.no_recourse_proven)
    again = audit(grid_explainer, "0:60", groups=["cgroup"], bootstrap=50, out=tmp_path)
    assert again.timing.rows_searched == 0 and again.timing.rows_proved == 0
    assert _comparable(again) == _comparable(first)
    with pytest.raises(ProblemError) as caught:
        audit(grid_explainer, "0:60", out=tmp_path, resume=False)
    assert caught.value.field == "out"


def test_a_resume_with_another_question_or_seed_is_refused(
    tmp_path: Any, grid: pd.DataFrame, grid_explainer: Explainer
) -> None:
    """An audit resumed with another goal, other rules or another seed took the earlier run's
    records and proofs as its own, and its report mixed two questions' answers without a word
    (a batch's resume refuses it). Each record holds its seed and question, and each proof its
    question, so a resume of another job is refused naming ``out``, before any row is searched."""
    audit(grid_explainer, "0:12", bootstrap=0, rules=0, out=tmp_path)
    proofs = (tmp_path / "proofs.jsonl").read_text()
    assert proofs and all(json.loads(line)["question"] == grid_explainer.question for line in proofs.splitlines())
    other_rules = Explainer(_tree(grid), grid, target=TARGET, columns=FEATURES, immutable=["c", "b"])
    other_goal = Explainer(_tree(grid), grid, [ClassGoal(target=1, confidence=0.9)], target=TARGET, columns=FEATURES)
    asked = [
        (grid_explainer, {"seed": 5}, "explained with another seed than this run's 5"),
        (other_rules, {}, "another question"),
        (other_goal, {}, "another question"),
        (grid_explainer, {"vectorised": False}, "another question"),
    ]
    for explainer, options, fragment in asked:
        with pytest.raises(ProblemError) as caught:
            audit(explainer, "0:20", bootstrap=0, rules=0, out=tmp_path, **options)
        assert caught.value.field == "out" and fragment in str(caught.value)
    (tmp_path / "records.parquet").unlink()  # the proofs alone, as an audit stopped while it screened leaves them
    with pytest.raises(ProblemError) as caught:
        audit(other_rules, "0:20", bootstrap=0, rules=0, out=tmp_path)
    assert caught.value.field == "out" and "proved for another question" in str(caught.value)
    assert (tmp_path / "proofs.jsonl").read_text() == proofs  # refused before any row is proved


def test_an_answer_that_breaks_a_rule_is_no_recourse(grid: pd.DataFrame) -> None:
    """At most one feature may change: from a = b = 0 the goal (a + b >= 5) needs two, so no
    answer exists within the rules. The search then returns its best answer that breaks the rule
    (valid, changing a and b) and the batch counts it ``ok``; the audit counted it a row with
    recourse unless the screen had proved it infeasible first. Now such a row goes to the proof:
    proven without recourse, with the screen or without, and never asked: unproven."""
    explainer = Explainer(_tree(grid), grid, target=TARGET, columns=FEATURES, immutable=["c"], max_changed_features=1)
    rows = grid[(grid.c == 1) & (grid.kind == "x") & (grid.a + grid.b <= 4)]
    blocked = sorted(int(i) for i in rows.index[(rows.a == 0) & (rows.b == 0)])
    options = AuditOptions(bootstrap=0, rules=0, screen=False)
    report, audited = run_audit(explainer, rows, options)
    assert report.no_recourse_proven == blocked
    assert sorted(report.with_recourse) == sorted(int(i) for i in rows.index if int(i) not in blocked)
    assert (audited.loc[audited["audit_status"] == "with_recourse", "changed"] == 1).all()
    screened, _ = run_audit(explainer, rows, dataclasses.replace(options, screen=True))
    assert _comparable(screened) == {**_comparable(report), "settings": _comparable(screened)["settings"]}
    unasked = audit(explainer, rows, prove=False, screen=False, bootstrap=0, rules=0)
    assert unasked.no_recourse_unproven == blocked and unasked.unproven_reasons == {"not asked": len(blocked)}


def test_a_row_the_proof_finds_an_answer_for_counts_as_recourse(grid: pd.DataFrame, grid_explainer: Explainer) -> None:
    """The proof is the exact engine alone on the row's own problem: on a row with recourse it
    returns the answer (checked through the model) as the row's new record, never a proof."""
    from counterplan.solver.audit.proofs import proof_config, prove_row

    row_id = int(grid.index[(grid.c == 2) & (grid.a == 0) & (grid.b == 0)][0])
    row = {str(k): v for k, v in grid.loc[row_id, [*FEATURES, TARGET]].items()}
    proof = prove_row(grid_explainer, row_id, row, 0, proof_config(grid_explainer.config, None))
    assert proof.outcome == "found" and proof.record is not None and proof.record["valid"]
    assert proof.record["cf_a"] + proof.record["cf_b"] >= 5 and proof.record["cf_c"] == 2
    blocked = int(grid.index[(grid.c == 0) & (grid.a == 4)][0])
    row = {str(k): v for k, v in grid.loc[blocked, [*FEATURES, TARGET]].items()}
    assert prove_row(grid_explainer, blocked, row, 0, proof_config(grid_explainer.config, None)).outcome == "proven"


def test_a_stop_is_asked_before_the_first_proof(grid: pd.DataFrame, grid_explainer: Explainer) -> None:
    """The stop check is asked after each proof, and before the first: a proof may take the whole
    time limit, so one started unasked after the search ran past the audit's deadline (a server's
    audit, cancelled or shutting down while the search ended, still proved a row)."""
    stage: list[str] = []
    options = AuditOptions(
        bootstrap=0,
        screen=False,
        progress=lambda name, done, total: stage.append(name),
        stop=lambda: stage[-1:] == ["prove"],  # every row searched, then the time is up
    )
    without = grid[(grid[TARGET] == 0) & (grid.c == 0)].iloc[:3]  # no recourse: each goes to a proof
    report, rows = run_audit(grid_explainer, without, options)
    assert report.partial and report.timing.rows_proved == 0 and report.no_recourse_proven == []
    assert (rows["audit_status"] == "no_recourse_unproven").all()


def test_the_changes_by_group_are_counted_once_per_answer() -> None:
    """Each group value's share of answers changing each feature, from the answers' changes found
    once: finding them again for each value (one batch summary per value) took 8 s for 8 group
    columns of 100 values over 40 features, after a stopped audit's deadline. The same figures."""
    from counterplan.solver.audit.stats import feature_figures
    from counterplan.solver.batch.summary import feature_changes

    rng = np.random.default_rng(3)
    n, names = 3000, [f"f{j}" for j in range(40)]
    originals = pd.DataFrame(rng.normal(size=(n, 40)).round(2), columns=names, index=[f"r{i}" for i in range(n)])
    originals["color"] = rng.choice(["red", "green", "blue"], n)
    proposed = originals.to_numpy(dtype=object).copy()
    moved = rng.random((n, 41)) < 0.1
    proposed[:, :40][moved[:, :40]] = (originals[names].to_numpy() + 1.0)[moved[:, :40]]
    proposed[:, 40][moved[:, 40]] = "gold"
    rows = pd.DataFrame(proposed, columns=[f"cf_{c}" for c in originals.columns])
    for c in names:
        rows[f"cf_{c}"] = rows[f"cf_{c}"].astype("float64")
    rows.insert(0, "row_id", originals.index)
    rows["audit_status"] = rng.choice(["with_recourse", "no_recourse_unproven"], n, p=[0.8, 0.2])
    groups = [f"g{k}" for k in range(8)]
    for g in groups:
        rows[g] = rng.integers(0, 100, n).astype(str)
    rows.loc[::9, "g0"] = None  # a gap: the value "missing"
    started = time.perf_counter()
    figures = feature_figures(rows, originals, groups)
    assert time.perf_counter() - started < 3.0
    valid = rows[rows["audit_status"] == "with_recourse"]
    for value in ("7", "42", "missing"):  # the batch summary's own figures, value by value
        mine = valid[(valid["g0"].fillna("missing") == value).to_numpy()]
        shares = feature_changes(mine, originals).set_index("feature")["share"]
        assert {name: f.by_group["g0"][value] for name, f in figures.items()} == shares.to_dict()
    assert set(figures) == {*names, "color"} and figures["color"].changed > 0


@pytest.mark.parametrize(
    ("values", "words"),
    [
        (["missing", None], "the values 'missing' and None would both be reported as 'missing'"),
        ([5, "5"], "the values 5 and '5' would both be reported as '5'"),
    ],
)
def test_group_values_the_report_would_key_alike_are_refused(
    grid_explainer: Explainer, values: list[object], words: str
) -> None:
    """The report keys a group by its text (``missing`` for a gap, ``5`` for 5.0): a gap and the
    text ``missing``, or the number 5 and the text ``5``, were one group, their figures merged."""
    rows = grid_explainer.data.iloc[:30].copy()  # type: ignore[union-attr]
    rows["team"] = pd.Series([values[i % 2] for i in range(len(rows))], index=rows.index, dtype=object)
    with pytest.raises(ProblemError) as caught:
        audit(grid_explainer, rows, groups=["team"], bootstrap=0, rules=0)
    assert caught.value.field == "groups" and words in caught.value.problem, caught.value.problem
    rows["team"] = pd.Series([["x", "y"][i % 2] for i in range(len(rows))], index=rows.index, dtype=object)
    assert set(audit(grid_explainer, rows, groups=["team"], bootstrap=0, rules=0).groups["team"]) == {"x", "y"}


def test_the_same_rows_in_another_order_give_the_same_figures(grid: pd.DataFrame) -> None:
    """A bootstrap draws rows by position: the same portfolio in another order gave other
    intervals for one seed, and a mean summed in another order another last bit (the determinism
    fuzz's finding). The figures come from the rows in the order of their ids."""
    explainer = Explainer(_tree(grid), grid, target=TARGET, columns=FEATURES, immutable=["c"])
    options = AuditOptions(groups=("band",), seed=5, bootstrap=100, window=16)
    rows = grid.iloc[200:280]
    forward, _ = run_audit(explainer, rows, options)
    backward, _ = run_audit(explainer, rows.iloc[::-1], options)
    listed = ("with_recourse", "no_recourse_proven", "no_recourse_unproven", "already_met", "errors")
    one, other = _comparable(forward), _comparable(backward)
    for name in listed:  # the lists keep the rows' own order
        assert sorted(one.pop(name)) == sorted(other.pop(name))
    assert one == other
    assert forward.recourse_rate_ci[0] < forward.recourse_rate < forward.recourse_rate_ci[1]
