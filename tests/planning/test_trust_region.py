"""The trust region (CE-OCL): exact hull membership against independent checks, the slack, the
nearest rows, the enlargement, and hard level 1 of the score."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError
from scipy.optimize import linprog
from scipy.spatial import ConvexHull, Delaunay
from sklearn.linear_model import LinearRegression, LogisticRegression

from counterplan.planning import (
    CallableAdapter,
    CategoricalFeature,
    ClassGoal,
    CounterfactualProblem,
    FloatFeature,
    OutputSpec,
    ProblemError,
    RangeGoal,
    ScoreCalculator,
    TrustRegion,
    TrustRegionSettings,
)
from counterplan.planning.plausibility import encode_frame
from counterplan.planning.space import FeatureSpace, FloatMatrix


def _unit_space(d: int, value: float = 0.5) -> FeatureSpace:
    return FeatureSpace([FloatFeature(name=f"x{j}", value=value, low=0.0, high=1.0) for j in range(d)])


@pytest.mark.parametrize("d", [2, 3])
def test_membership_agrees_with_a_delaunay_triangulation(d: int) -> None:
    rng = np.random.default_rng(d)
    reference = rng.beta(2.0, 3.0, (40, d))
    region = TrustRegion(_unit_space(d), reference)
    X = rng.uniform(0.0, 1.0, (400, d))
    expected = Delaunay(reference).find_simplex(X) >= 0
    equations = ConvexHull(reference).equations
    clear = np.abs((X @ equations[:, :-1].T + equations[:, -1]).max(axis=1)) > 1e-6  # not on a facet
    got = region.inside(X)
    assert clear.sum() > 380 and 0.1 < expected.mean() < 0.9  # both answers are tested
    assert np.array_equal(got[clear], expected[clear])
    assert np.array_equal(region.inside(X[::-1])[::-1], got)  # the caches change nothing
    assert np.array_equal(pickle.loads(pickle.dumps(region)).inside(X), got)  # for worker processes
    assert region.inside(reference).all()  # every reference row is in its own hull


def _independent_least_slack(points: FloatMatrix, z: FloatMatrix) -> float:
    """min sum t  s.t.  -t <= sum_i w_i p_i - z <= t, sum w = 1, w >= 0 (written apart from the module)."""
    n, d = points.shape
    cost = np.r_[np.zeros(n), np.ones(d)]
    upper = np.vstack([np.hstack([points.T, -np.eye(d)]), np.hstack([-points.T, -np.eye(d)])])
    result = linprog(
        cost,
        A_ub=upper,
        b_ub=np.r_[z, -z],
        A_eq=np.r_[np.ones(n), np.zeros(d)].reshape(1, -1),
        b_eq=[1.0],
        bounds=(0, None),
        method="highs-ds",
    )
    assert result.status == 0
    return float(result.fun)


def _mixed_space() -> FeatureSpace:
    return FeatureSpace(
        [
            FloatFeature(name="x", value=5.0, low=0.0, high=10.0),
            FloatFeature(name="y", value=2.0, low=0.0, high=4.0),
            CategoricalFeature(name="plan", value="a", categories=("a", "b", "c")),
        ]
    )


def _mixed_rows(rng: np.random.Generator, n: int, plans: tuple[int, ...]) -> FloatMatrix:
    return np.column_stack([rng.uniform(2.0, 8.0, n), rng.uniform(0.5, 3.5, n), rng.choice(plans, n)])


@pytest.mark.parametrize("slack", [0.0, 0.3])
def test_membership_with_categories_and_slack_agrees_with_an_independent_lp(slack: float) -> None:
    """Numbers scaled by their range, categories one-hot at 1/2: the same point set, an LP
    written apart; a category no reference row has (c) is never inside (changing it costs 1)."""
    rng = np.random.default_rng(7)
    space = _mixed_space()
    region = TrustRegion(space, _mixed_rows(rng, 30, (0, 1)), TrustRegionSettings(slack=slack))
    X = _mixed_rows(rng, 150, (0, 1, 2))
    X[:, 0] = rng.uniform(0.0, 10.0, 150)
    Z = np.column_stack([X[:, 0] / 10.0, X[:, 1] / 4.0, 0.5 * (X[:, 2:3] == np.arange(3))])
    points = region.points
    assert points.shape == (30, 5)
    least = np.array([_independent_least_slack(points, z) for z in Z])
    expected = least <= slack + 1e-9
    clear = expected | (least > slack + 1e-5)  # not within a hair outside
    got = region.inside(X)
    assert clear.sum() > 140 and 0.1 < expected.mean() < 0.9
    assert np.array_equal(got[clear], expected[clear])
    assert not got[X[:, 2] == 2].any()
    np.testing.assert_allclose(region.slack_needed(X[:20]), least[:20], atol=1e-7)


def test_the_slack_admits_exactly_the_points_within_its_l1_distance() -> None:
    square = np.array([[0.2, 0.2], [0.2, 0.8], [0.8, 0.2], [0.8, 0.8]])
    beside, corner = np.array([[0.9, 0.5]]), np.array([[0.9, 0.9]])  # L1 distance 0.1 and 0.2
    assert not TrustRegion(_unit_space(2), square).inside(np.vstack([beside, corner])).any()
    np.testing.assert_allclose(
        TrustRegion(_unit_space(2), square).slack_needed(np.vstack([beside, corner])), [0.1, 0.2]
    )
    for slack, expected in [(0.09, [False, False]), (0.11, [True, False]), (0.19, [True, False]), (0.21, [True, True])]:
        region = TrustRegion(_unit_space(2), square, TrustRegionSettings(slack=slack))
        assert region.inside(np.vstack([beside, corner])).tolist() == expected, slack
    outside_the_box = np.array([[0.95, 0.5], [0.5, 0.05]])
    assert not TrustRegion(_unit_space(2), square).inside(outside_the_box).any()


def _approval_data(n: int = 400, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "age": rng.integers(18, 80, n),
            "income": rng.uniform(0.0, 10.0, n),
            "debt": rng.uniform(0.0, 5.0, n),
        }
    )
    frame["ok"] = ((frame.income - frame.debt + rng.normal(0.0, 0.5, n) > 3.0) & (frame.age <= 60)).astype(int)
    return frame


def test_the_nearest_rows_of_the_target_class() -> None:
    data = _approval_data()
    model = LogisticRegression(max_iter=1000).fit(data[["age", "income", "debt"]], data.ok)
    instance = {"age": 40, "income": 3.0, "debt": 3.0}
    problem = CounterfactualProblem.from_dataframe(
        data, instance, model, [ClassGoal(target=1)], target="ok", trust_region=TrustRegionSettings(nearest=25)
    )
    region = problem.trust_region
    assert region is not None and region.reference_rows == 25 and region.points.shape == (25, 3)
    approved = data[data.ok == 1]
    scaled = region.transform(encode_frame(problem.space, approved))
    order = np.argsort(np.abs(scaled - region.transform(problem.original_row())).sum(axis=1))
    nearest = {tuple(row) for row in scaled[order[:25]]}
    assert {tuple(row) for row in region.points} == nearest
    full = CounterfactualProblem.from_dataframe(
        data, instance, model, [ClassGoal(target=1)], target="ok", trust_region=TrustRegionSettings()
    ).trust_region
    assert full is not None and full.reference_rows == len(approved)
    assert full.inside(encode_frame(problem.space, approved)).all()
    assert not region.inside(encode_frame(problem.space, approved.iloc[order[-5:]])).any()  # the farthest


def test_a_regression_problem_uses_the_rows_whose_label_meets_the_goal() -> None:
    data = _approval_data()
    data["score"] = data.income - data.debt
    columns = ["age", "income", "debt"]
    model = LinearRegression().fit(data[columns], data.score)
    region = CounterfactualProblem.from_dataframe(
        data,
        0,
        model,
        [RangeGoal(low=2.0, high=4.0)],
        columns=columns,
        target="score",
        trust_region=TrustRegionSettings(enlarge_when_infeasible=False),
    ).trust_region
    assert region is not None and region.reference_rows == int(data.score.between(2.0, 4.0).sum())
    with pytest.raises(ProblemError, match="no row"):
        CounterfactualProblem.from_dataframe(
            data, 0, model, [RangeGoal(low=50.0, high=60.0)], columns=columns, target="score",
            trust_region=TrustRegionSettings(),
        )  # fmt: skip
    with pytest.raises(ProblemError, match="label column"):
        CounterfactualProblem.from_dataframe(
            data, 0, model, [RangeGoal(low=2.0, high=4.0)], columns=columns, trust_region=TrustRegionSettings()
        )


def test_an_unreachable_hull_is_enlarged_to_take_in_the_nearest_rows() -> None:
    """age is immutable at 70 and no approved row is over 60: no reachable candidate lies in the
    plain hull. Enlarged, it takes in the 5 approved rows nearest to age 70, moved to age 70."""
    data = _approval_data()
    model = LogisticRegression(max_iter=1000).fit(data[["age", "income", "debt"]], data.ok)
    instance = {"age": 70, "income": 3.0, "debt": 3.0}

    def build(**settings: object) -> CounterfactualProblem:
        return CounterfactualProblem.from_dataframe(
            data,
            instance,
            model,
            [ClassGoal(target=1)],
            target="ok",
            immutable=["age"],
            trust_region=TrustRegionSettings.model_validate(settings),
        )

    plain = build(enlarge_when_infeasible=False).trust_region
    assert plain is not None and not plain.enlarged and plain.note is None and plain.slack == 0.0
    rng = np.random.default_rng(0)
    reachable = np.column_stack([np.full(200, 70.0), rng.uniform(0, 10, 200), rng.uniform(0, 5, 200)])
    assert not plain.inside(reachable).any()
    region = build().trust_region
    assert region is not None and region.enlarged and region.note is not None and "enlarged" in region.note
    approved = data[data.ok == 1]
    span = data.age.max() - data.age.min()
    fifth = np.sort((70 - approved.age.to_numpy()) / span)[4]
    assert region.slack == pytest.approx(fifth)
    assert region.least_slack is not None and 0.0 < region.least_slack <= region.slack
    moved = encode_frame(region.space, approved)
    moved[:, 0] = 70.0
    distances = (70 - approved.age.to_numpy()) / span
    assert region.inside(moved[distances <= fifth]).all()
    needed = region.slack_needed(reachable)
    clear = np.abs(needed - region.slack) > 1e-5
    assert np.array_equal(region.inside(reachable)[clear], (needed <= region.slack)[clear])
    assert 0.0 < (needed <= region.slack).mean() < 1.0


def test_outside_the_region_breaks_one_rule_and_the_original_is_not_judged() -> None:
    features = [
        FloatFeature(name="x", value=9.0, low=0.0, high=10.0),
        FloatFeature(name="y", value=9.0, low=0.0, high=10.0),
    ]
    space = FeatureSpace(features)
    reference = np.array([[0.0, 0.0], [5.0, 0.0], [0.0, 5.0], [5.0, 5.0]])
    region = TrustRegion(space, reference)
    model = CallableAdapter(lambda X: X.sum(axis=1), [OutputSpec("total")])
    problem = CounterfactualProblem(features, [RangeGoal(low=0.0, high=20.0)], model, trust_region=region)
    X = np.array([[9.0, 9.0], [2.0, 2.0], [9.0, 2.0], [4.0, 4.0]])
    scores = ScoreCalculator(problem, assert_mode=True).calculate(X).scores  # the reference agrees
    assert scores[:, 1].tolist() == [0.0, 0.0, -1.0, 0.0]
    assert problem.with_goals([RangeGoal(low=0.0, high=5.0)]).trust_region is region
    with pytest.raises(ProblemError, match="other features"):
        CounterfactualProblem(features[:1], [RangeGoal(low=0.0, high=5.0)], model, trust_region=region)


def test_settings_are_checked_and_subsampling_is_deterministic() -> None:
    with pytest.raises(ValidationError):
        TrustRegionSettings(nearest=600, max_reference_rows=500)
    with pytest.raises(ValidationError):
        TrustRegionSettings.model_validate({"slack": -0.1})
    with pytest.raises(ValidationError):
        TrustRegionSettings.model_validate({"radius": 1.0})
    rows = np.random.default_rng(1).uniform(0.0, 1.0, (300, 3))
    settings = TrustRegionSettings(max_reference_rows=40)
    first = TrustRegion(_unit_space(3), rows, settings)
    assert first.reference_rows == 40
    assert np.array_equal(first.points, TrustRegion(_unit_space(3), rows, settings).points)
    doubled = TrustRegion(_unit_space(3), np.vstack([rows[:10], rows[:10]]))
    assert doubled.reference_rows == 10  # duplicates add nothing to a hull
    with pytest.raises(ProblemError, match="no reference row"):
        TrustRegion(_unit_space(3), rows[:0])


def test_rows_of_one_explainer_share_the_encoded_reference_and_get_their_own_region() -> None:
    """The encoded reference rows are built once per domains (encoding 20,000 rows' categories
    was most of each row's build); each row's region is the one it builds alone."""
    from counterplan.planning.problem import _domains
    from counterplan.planning.shared_builds import SharedBuilds
    from counterplan.solver.explainer import Explainer

    data = _approval_data()
    data["city"] = np.random.default_rng(1).choice(["north", "south", "east"], len(data))
    model = LogisticRegression(max_iter=1000).fit(data[["age", "income", "debt"]], data.ok)
    columns = ["age", "income", "debt", "city"]
    explainer = Explainer(
        model, data, [ClassGoal(target=1)], target="ok", columns=columns, trust_region=TrustRegionSettings(slack=0.1)
    )
    instances = [
        {"age": 40, "income": 3.0, "debt": 3.0, "city": "north"},
        {"age": 75, "income": 1.0, "debt": 4.5, "city": "east"},
    ]
    shared = [explainer.problem(row).trust_region for row in instances]
    alone = []
    for row in instances:
        explainer._cache = SharedBuilds()
        alone.append(explainer.problem(row).trust_region)
    for one, other in zip(shared, alone, strict=True):
        assert one is not None and other is not None
        assert np.array_equal(one.points, other.points) and one.slack == other.slack and one.note == other.note
    kept = [key for key in explainer._cache._kept if key[0] == "trust region rows"]
    assert len(kept) == 1
    # a feature with no range has its own value for its domain: rows of it share nothing
    held = [FloatFeature(name="x", value=v, low=None, high=None) for v in (1.0, 2.0)]
    assert _domains([held[0]]) != _domains([held[1]])
