"""Hard level 1: monotone features, ordered categories, change limits, costs, plausibility."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.pipeline import Pipeline

from counterplan.planning import (
    CallableAdapter,
    CategoricalFeature,
    ClassGoal,
    CounterfactualProblem,
    FloatFeature,
    IntegerFeature,
    OutputSpec,
    ProblemError,
    ScoreCalculator,
    ValueGoal,
)
from counterplan.planning.demo import IMMUTABLE, TARGET, rejected_applicant
from counterplan.planning.plausibility import PlausibilitySettings
from counterplan.planning.space import FloatMatrix
from counterplan.solver import explain


def _sum_model(X: FloatMatrix) -> FloatMatrix:
    return X.sum(axis=1)


def _problem(**kwargs: object) -> CounterfactualProblem:
    features = [
        IntegerFeature(name="years", value=5, low=0, high=40, monotone="increase"),
        FloatFeature(name="debt", value=10.0, low=0.0, high=50.0, monotone="decrease", cost=2.0),
        CategoricalFeature(name="level", value="b", categories=("a", "b", "c", "d"), monotone="increase"),
        FloatFeature(name="free", value=1.0, low=0.0, high=10.0),
    ]
    return CounterfactualProblem(
        features,
        [ValueGoal(value=30.0)],
        CallableAdapter(_sum_model, [OutputSpec("y")]),
        **kwargs,  # type: ignore[arg-type]
    )


def test_monotone_rules_narrow_the_search_and_count_when_broken() -> None:
    problem = _problem()
    space = problem.space
    assert space.lower.tolist() == [5.0, 0.0, 1.0, 0.0]  # years and level may only go up
    assert space.upper.tolist() == [40.0, 10.0, 3.0, 10.0]  # debt may only go down
    X = np.repeat(problem.original_row(), 4, axis=0)
    X[1, 0] = 4.0  # years down: broken
    X[2, 1] = 12.0  # debt up: broken
    X[3, 2] = 0.0  # level down: broken
    X[3, 0] = 6.0  # years up: fine
    scores = ScoreCalculator(problem, assert_mode=True).calculate(X).scores
    assert scores[:, 1].tolist() == [0.0, -1.0, -1.0, -1.0]


def test_change_costs_weight_the_distance() -> None:
    problem = _problem()
    X = problem.original_row()
    X[0, 1] = 5.0  # debt -5 of a range 50, at cost 2
    scores = ScoreCalculator(problem, assert_mode=True).calculate(X).scores
    assert scores[0, 3] == pytest.approx(-2.0 * 5.0 / 50.0)


def test_a_change_limit_counts_every_change_past_it() -> None:
    problem = _problem(max_changed_features=1)
    X = np.repeat(problem.original_row(), 2, axis=0)
    X[0, 3] = 2.0
    X[1, [0, 3]] = [6.0, 2.0]
    X[1, 2] = 2.0
    scores = ScoreCalculator(problem, assert_mode=True).calculate(X).scores
    assert scores[:, 1].tolist() == [0.0, -2.0]
    with pytest.raises(ProblemError, match="at least 1"):
        _problem(max_changed_features=0)


def test_the_search_respects_every_rule() -> None:
    problem = _problem(max_changed_features=2)
    result = explain(problem, seed=1)
    assert result.valid and result.feasible
    assert result.proposed["years"] >= 5 and result.proposed["debt"] <= 10.0
    assert result.proposed["level"] in ("b", "c", "d") and len(result.changes) <= 2


def test_plausibility_against_the_desired_class(loan_data: pd.DataFrame, loan_model: Pipeline) -> None:
    settings = PlausibilitySettings(k=5, quantile=0.9)
    problem = CounterfactualProblem.from_dataframe(
        loan_data,
        rejected_applicant(),
        loan_model,
        [ClassGoal(target=1)],
        target=TARGET,
        immutable=IMMUTABLE,
        plausibility=settings,
    )
    judge = problem.plausibility
    assert judge is not None and judge.threshold > 0
    approved = loan_data[loan_data[TARGET] == 1].drop(columns=[TARGET]).head(50)
    from counterplan.planning.plausibility import encode_frame

    typical = judge.plausible(encode_frame(problem.space, approved))
    assert typical.mean() > 0.8  # real approved applicants look plausible
    weird = problem.original_row()
    weird[0, problem.space.index["income"]] = problem.space.domain_upper[problem.space.index["income"]]
    weird[0, problem.space.index["loan_amount"]] = problem.space.domain_lower[problem.space.index["loan_amount"]]
    weird[0, problem.space.index["credit_cards"]] = 0
    weird[0, problem.space.index["debt"]] = problem.space.domain_upper[problem.space.index["debt"]]
    assert not judge.plausible(weird)[0]
    scores = ScoreCalculator(problem, assert_mode=True).calculate(weird).scores
    assert scores[0, 1] == -1.0
    result = explain(problem, seed=0)
    assert result.valid and result.feasible  # a plausible counterfactual was found
    with pytest.raises(ProblemError, match="label column"):
        CounterfactualProblem.from_dataframe(
            loan_data,
            rejected_applicant(),
            loan_model,
            [ClassGoal(target=1)],
            plausibility=settings,
            columns=list(loan_model.feature_names_in_),
        )


def test_plausibility_refuses_fewer_reference_rows_than_its_neighbours(
    loan_data: pd.DataFrame, loan_model: Pipeline
) -> None:
    """k=50 over a subsample of 10 rows failed in scikit-learn's neighbour search ("Expected
    n_neighbors <= n_samples_fit"), naming no setting (the rules fuzz's finding)."""
    with pytest.raises(ValueError, match="max_reference_rows=10 must be more than k=50"):
        PlausibilitySettings(k=50, max_reference_rows=10)
    with pytest.raises(ValueError, match=r"'plausibility': max_reference_rows=10 must be more than k=10"):
        CounterfactualProblem.from_dataframe(
            loan_data,
            rejected_applicant(),
            loan_model,
            target=TARGET,
            immutable=IMMUTABLE,
            plausibility={"k": 10, "max_reference_rows": 10},  # type: ignore[arg-type]
        )
    judge = CounterfactualProblem.from_dataframe(
        loan_data,
        rejected_applicant(),
        loan_model,
        target=TARGET,
        plausibility=PlausibilitySettings(k=9, max_reference_rows=10),
    ).plausibility
    assert judge is not None and judge.reference_rows == 10


def test_allowed_values_for_numbers() -> None:
    features = [
        FloatFeature(
            name="loan", value=12_345.0, low=1_000.0, high=50_000.0, allowed=tuple(range(1_000, 50_001, 1_000))
        ),
        FloatFeature(name="free", value=1.0, low=0.0, high=10.0),
    ]
    problem = CounterfactualProblem(
        features, [ValueGoal(value=30_000.0, tolerance=0.01)], CallableAdapter(_sum_model, [OutputSpec("y")])
    )
    space = problem.space
    assert space.allowed[0][0] == 1_000.0 and 12_345.0 in space.allowed[0]  # the original stays allowed
    X = np.repeat(problem.original_row(), 3, axis=0)
    X[1, 0] = 20_000.0
    X[2, 0] = 20_500.0  # not an allowed value
    scores = ScoreCalculator(problem, assert_mode=True).calculate(X).scores
    assert scores[:, 1].tolist() == [0.0, 0.0, -1.0]
    assert space.snap(X.copy())[2, 0] in (20_000.0, 21_000.0)
    result = explain(problem, seed=0)
    assert result.valid and result.feasible
    assert result.proposed["loan"] % 1_000 == 0 or result.proposed["loan"] == 12_345.0
    with pytest.raises(ValueError, match="outside the domain"):
        FloatFeature(name="loan", value=2.0, low=1.0, high=5.0, allowed=(0.0, 3.0))


def test_a_gap_that_may_be_filled_with_allowed_values_may_also_stay_a_gap() -> None:
    """The original always stays possible, a gap too: its missing code lies below the domain, so
    the allowed values left it out and keeping the gap broke a rule. Every engine then filled it,
    a change the answer did not need (fuzzing: local search, the swarm, auto and both batch
    paths, each filling a gap beside the one change that reached the goal)."""
    features = [
        IntegerFeature(name="kids", value=None, low=0, high=5, allowed=(0, 1, 2), fill_missing=True),
        FloatFeature(name="free", value=1.0, low=0.0, high=10.0),
    ]
    problem = CounterfactualProblem(
        features, [ValueGoal(value=8.0, tolerance=0.01)], CallableAdapter(lambda X: X[:, 1], [OutputSpec("y")])
    )
    X = np.repeat(problem.original_row(), 2, axis=0)
    X[1, 1] = 8.0  # the goal met with the gap kept
    scores = ScoreCalculator(problem, assert_mode=True).calculate(X).scores
    assert scores[:, 1].tolist() == [0.0, 0.0], "keeping the gap breaks no rule"
    result = explain(problem, seed=0)
    assert result.valid and result.feasible
    assert result.proposed["kids"] is None, result.proposed  # filling it is a needless change


def test_a_number_yaml_read_as_text_says_why() -> None:
    """PyYAML (YAML 1.1) reads ``1e9`` as the text '1e9': a card's ``allowed: [1e9]`` was refused
    as "'1e9' is not a finite number", an action's ``low: 1e3`` as "must be a number, given '1e3'",
    without a word of why (the rules fuzz's finding). The refusal stands, and says how to write it."""
    from counterplan.planning.actions import ActionSet
    from counterplan.planning.profile import apply_rule
    from counterplan.planning.safe_yaml import load_config_text
    from counterplan.planning.spec import ProblemSpec

    spec = ProblemSpec(**load_config_text("features:\n  income: {allowed: [1e9, 2.5e3]}\n"))
    fields = {"name": "income", "kind": "float", "value": 1.0, "low": 0.0, "high": 10.0}
    with pytest.raises(ValueError, match=r"'1e9' is not a finite number \(YAML reads 1e9 as text: .*, 1\.0e\+9\)"):
        apply_rule(fields, spec.features["income"], "income")
    actions = load_config_text("actions:\n  - {name: earn, feature: income, kind: add, low: 1E-3, high: 2.5e4}\n")
    with pytest.raises(ValueError, match=r"given '1E-3' \(YAML reads 1E-3 as text: .*, 1\.0e-3\)") as info:
        ActionSet.model_validate(actions)
    assert "write a decimal point and the exponent's sign, 2.5e+4" in str(info.value)
    written = load_config_text("a: [1.0e+9, 2.5e+4, 1.0e-3]")  # the forms the hints give are numbers
    assert written == {"a": [1.0e9, 2.5e4, 1.0e-3]}


@pytest.mark.parametrize("dtype", ["boolean", "object"])
def test_a_gap_in_a_boolean_reference_row_drops_the_row(dtype: str) -> None:
    """Encoding reference rows read a boolean column with ``astype(bool)``: pandas' NA raised
    ("cannot convert float NaN to bool", "boolean value of NA is ambiguous") as plausibility or a
    trust region was built from data with a nullable boolean column, and in a column of objects a
    NaN was read as True and None as False (the rules fuzz's finding). A gap drops the row, as a
    category's does."""
    from counterplan.planning import BooleanFeature
    from counterplan.planning.plausibility import encode_frame
    from counterplan.planning.space import FeatureSpace
    from counterplan.planning.trust_region import TrustRegionSettings

    gap = pd.NA if dtype == "boolean" else float("nan")
    flags = pd.Series([True, gap, False, None if dtype == "object" else gap, True], dtype=dtype)
    data = pd.DataFrame({"flag": flags, "n": [1, 2, 3, 4, 5]})
    space = FeatureSpace([BooleanFeature(name="flag", value=False), IntegerFeature(name="n", value=1, low=1, high=5)])
    assert encode_frame(space, data).tolist() == [[1.0, 1.0], [0.0, 3.0], [1.0, 5.0]]

    rng = np.random.default_rng(0)
    n = rng.integers(0, 10, 120)
    flag = rng.integers(0, 2, 120).astype(bool)
    train = pd.DataFrame({"flag": pd.array(flag, dtype="boolean"), "n": n, "y": ((n > 5) | flag).astype(int)})
    train.loc[::7, "flag"] = pd.NA

    def approve(X: FloatMatrix) -> FloatMatrix:
        p = ((X[:, 1] > 5) | (X[:, 0] > 0.5)).astype(float)
        return np.column_stack([1.0 - p, p])

    model = CallableAdapter(approve, [OutputSpec("y", classes=(0, 1))])
    for rules in ({"plausibility": PlausibilitySettings(k=3)}, {"trust_region": TrustRegionSettings()}):
        problem = CounterfactualProblem.from_dataframe(
            train, {"flag": False, "n": 2}, model, [ClassGoal(target=1)], target="y", columns=["flag", "n"], **rules
        )
        known = int(((train["y"] == 1) & train["flag"].notna()).sum())
        if problem.plausibility is not None:
            assert problem.plausibility.reference_rows == known
        else:
            assert problem.trust_region is not None and problem.trust_region.reference_rows <= known
        assert explain(problem, seed=0).feasible
