"""One way in: for every option of the question, the problem a command builds in this process
equals the one a server builds from the same flags sent as a request.

The local side is the command line's own path (its parser, the shared flag group's spec, the
command's explainer over ``--model`` and ``--data``); the server side is a model card over the
same model and training data, and the request the command would send (the spec as the wire's
fields), checked and built as a served explain is. Each problem is reduced to everything a search
sees (features with their domains and rules, goals, distance, statistics and scales, limits,
plausibility, the trust region) and the two must be equal.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np
import pandas as pd
import pytest
import skops.io as sio
import yaml
from sklearn.pipeline import Pipeline

from counterplan.planning.demo import TARGET, rejected_applicant
from counterplan.planning.problem import CounterfactualProblem
from counterplan.planning.spec import FeatureRule, ProblemSpec
from counterplan.planning.trust_region import TrustRegionSettings
from counterplan.server.cli.flags import UsageError
from counterplan.server.cli.local_model import local_explainer
from counterplan.server.cli.main import build_parser
from counterplan.server.cli.problem_flags import flag_errors, problem_spec
from counterplan.server.grpc.convert import BadRequestError, check_request
from counterplan.server.grpc.spec_request import WireError, explain_request
from counterplan.server.registry.registry import RegisteredModel, load_card

OPTIONS: list[list[str]] = [
    [],  # the default question: a binary classifier's second class
    ["--goal", "class:1@0.8"],
    ["--goal", "class:0"],
    ["--margin", "0.05"],
    ["--goal", "class:1@0.6", "--margin", "0"],
    ["--immutable", "age,debt"],
    ["--monotone", "income=increase", "--monotone", "education=increase"],
    ["--allowed", "purpose=car,education"],
    ["--forbid", "purpose=education"],
    ["--allowed", "loan_amount=10000,20000,30000"],
    ["--allowed", "loan_amount=10000,20000,30000", "--forbid", "loan_amount=20000"],
    ["--allowed", "has_guarantor=false"],  # a boolean held where it is: it may not become true
    ["--forbid", "has_guarantor=true"],
    ["--cost", "debt=2", "--cost", "income=0.5"],
    ["--precision", "income=-3"],
    ["--fill-missing", "income"],
    ["--fill-missing", "all"],
    ["--max-changes", "2"],
    ["--change-penalty", "0.1"],
    ["--distance", "range_l1"],
    ["--distance", "mad_l1"],
    ["--distance", "sd_squared"],
    ["--plausible"],
    ["--trust-region"],
    ["--trust-nearest", "40", "--trust-slack", "0.2"],
]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, loan_data: pd.DataFrame, loan_model: Pipeline) -> dict[str, Any]:
    """The model and its training data as files (what a command reads) and as a card (what a
    server reads), with nothing in the card beyond the data: the question is the request's."""
    folder = tmp_path_factory.mktemp("one-way-in")
    sio.dump(loan_model, folder / "loan.skops")
    loan_data.to_csv(folder / "train.csv", index=False)
    card = folder / "loan.yaml"
    trusted = sio.get_untrusted_types(file=folder / "loan.skops")
    card.write_text(
        yaml.safe_dump(
            {
                "id": "loan",
                "model_file": "loan.skops",
                "outputs": [TARGET],
                "training_data": "train.csv",
                "target": TARGET,
                "trusted_types": trusted,
            }
        )
    )
    return {"folder": folder, "card": load_card(card), "trusted": trusted}


def _args(served: dict[str, Any], instance: dict[str, Any], option: list[str]) -> argparse.Namespace:
    folder = served["folder"]
    argv = ["explain", "--model", str(folder / "loan.skops"), "--trust-model", "--data", str(folder / "train.csv")]
    argv += ["--target", TARGET, "--instance", json.dumps(instance), *option]
    return build_parser().parse_args(argv)


def _local(args: argparse.Namespace, instance: dict[str, Any]) -> CounterfactualProblem:
    """As ``counterplan explain`` builds it (the shared flag group's spec over the model's explainer)."""
    explainer = local_explainer(args, problem_spec(args))
    with flag_errors():
        return explainer.problem(instance)


def _served(card: RegisteredModel, args: argparse.Namespace, instance: dict[str, Any]) -> CounterfactualProblem:
    """As a server builds it from the request ``counterplan explain --server`` sends."""
    request = explain_request("loan", instance, problem_spec(args))
    checked = check_request(request, card, max_features=64)
    return card.problem(checked.instance, checked.spec)


def _facts(problem: CounterfactualProblem) -> dict[str, Any]:
    """Everything a search sees of a problem, as plain data."""
    region = problem.trust_region
    plausible = problem.plausibility
    return {
        "features": [feature.model_dump() for feature in problem.space.features],
        "goals": [(b.goal.model_dump(), b.output.name, b.class_index) for b in problem.goals],
        "goal_text": problem.goal_text,
        "goals_default": problem.goals_default,
        "distance": problem.distance.model_dump(),
        "scales": np.asarray(problem.scales).tolist(),
        "statistics": {name: s.model_dump() for name, s in sorted(problem.statistics.items())},
        "max_changed_features": problem.max_changed_features,
        "plausibility": None
        if plausible is None
        else (plausible.settings.model_dump(), plausible.reference_rows, plausible.threshold),
        "trust_region": None
        if region is None
        else (region.settings.slack, region.settings.nearest, np.asarray(region.points).tolist()),
    }


def _instance(option: list[str]) -> dict[str, Any]:
    instance = rejected_applicant()
    if "--fill-missing" in option:
        instance["income"] = None  # a missing value the search may fill in
    return instance


@pytest.mark.parametrize("option", OPTIONS, ids=[" ".join(o) or "defaults" for o in OPTIONS])
def test_the_local_and_the_served_problem_are_equal(served: dict[str, Any], option: list[str]) -> None:
    instance = _instance(option)
    args = _args(served, instance, option)
    local, remote = _local(args, instance), _served(served["card"], args, instance)
    assert _facts(local) == _facts(remote)


def test_every_option_changes_the_problem(served: dict[str, Any]) -> None:
    """The options above are not all the defaults in disguise: each builds another problem."""
    base = _facts(_local(_args(served, rejected_applicant(), []), rejected_applicant()))
    for option in OPTIONS[1:]:
        if option == ["--distance", "mad_l1"]:  # what auto means on this data (every number has a MAD)
            assert _facts(_local(_args(served, rejected_applicant(), option), rejected_applicant())) == base
            continue
        instance = _instance(option)
        assert _facts(_local(_args(served, instance, option), instance)) != base, option


@pytest.mark.parametrize(
    ("option", "local_error", "field"),
    [
        (
            ["--allowed", "purpose=boat"],
            "--allowed purpose: ['boat'] is not a category of purpose",
            "overrides.purpose",
        ),
        (["--forbid", "purpose=boat"], "--forbid purpose: ['boat'] is not a category of purpose", "overrides.purpose"),
        (["--allowed", "income=lots"], "--allowed income: income is a number: 'lots'", "overrides.income.allowed"),
    ],
)
def test_a_rule_that_does_not_fit_its_feature_is_refused_on_both_sides(
    served: dict[str, Any], option: list[str], local_error: str, field: str
) -> None:
    instance = rejected_applicant()
    args = _args(served, instance, option)
    with pytest.raises(UsageError) as local:
        _local(args, instance)
    assert local_error in str(local.value)
    with pytest.raises(BadRequestError) as remote:
        _served(served["card"], args, instance)
    assert any(where.startswith(field) for where, _ in remote.value.violations), remote.value.violations


@pytest.mark.parametrize(
    ("change", "local_error", "field"),
    [
        ({"education": "phd"}, "--instance: education: 'phd' is not one of its categories", "instance[education]"),
        ({"salary": 1.0}, "--instance: salary: not a feature of the model", "instance[salary]"),
    ],
)
def test_a_misspelt_category_or_an_unknown_key_is_refused_on_both_sides(
    served: dict[str, Any], change: dict[str, Any], local_error: str, field: str
) -> None:
    instance = {**rejected_applicant(), **change}
    args = _args(served, instance, [])
    with pytest.raises(UsageError) as local:
        _local(args, instance)
    assert local_error in str(local.value)
    with pytest.raises(BadRequestError) as remote:
        _served(served["card"], args, instance)
    assert field in [where for where, _ in remote.value.violations], remote.value.violations


@pytest.mark.parametrize("gap", [None, float("nan"), pd.NA], ids=["None", "NaN", "NA"])
def test_a_gap_every_feature_may_fill_is_filled_on_both_sides(served: dict[str, Any], gap: Any) -> None:
    """``fill_missing=True`` sent only the gaps written None as features to fill: a NaN (a pandas
    row's gap) stayed a gap on the server while the local run filled it, and pandas' NA was sent
    as the category '<NA>' (the rules fuzz's finding)."""
    instance = {**rejected_applicant(), "income": gap}
    spec = ProblemSpec(fill_missing=True)
    local = local_explainer(_args(served, rejected_applicant(), []), spec).problem(instance)
    request = explain_request("loan", instance, spec)
    checked = check_request(request, served["card"], max_features=64)
    remote = served["card"].problem(checked.instance, checked.spec)
    assert local.space["income"].missing and local.space["income"].fill_missing
    assert _facts(local) == _facts(remote)


@pytest.mark.parametrize("income", [None, 30_000.0], ids=["gap", "value"])
def test_a_monotone_rule_on_a_feature_that_may_be_filled_keeps_its_direction_from_a_value_only(
    served: dict[str, Any], income: float | None
) -> None:
    """A card or request with ``fill_missing`` and ``monotone`` on one feature refused, on both
    sides, every instance missing it ("a missing value has no direction to keep"), and a request
    could not change the card's rule (the rules fuzz's finding). A direction is kept from the
    instance's value: a gap to fill may take any value of its domain; a value keeps the rule."""
    instance = {**rejected_applicant(), "income": income}
    spec = ProblemSpec(fill_missing=["income"], features={"income": FeatureRule(monotone="increase")})
    local = local_explainer(_args(served, rejected_applicant(), []), spec).problem(instance)
    checked = check_request(explain_request("loan", instance, spec), served["card"], max_features=64)
    remote = served["card"].problem(checked.instance, checked.spec)
    for problem in (local, remote):
        feature = problem.space["income"]
        assert feature.missing == (income is None) and (income is not None or feature.fill_missing)
        assert feature.monotone == (None if income is None else "increase")
    assert _facts(local) == _facts(remote)


@pytest.mark.parametrize(("name", "value"), [("enlarge_rows", 1), ("max_reference_rows", 50)])
def test_a_trust_region_setting_no_request_carries_is_refused_by_name(name: str, value: int) -> None:
    """A request carries a trust region's nearest, slack and enlarge_when_infeasible; the server
    builds it with its own row numbers, so other numbers were dropped without a word (the rules
    fuzz's finding), where a plausibility setting of one's own is refused."""
    spec = ProblemSpec(trust_region=TrustRegionSettings(nearest=40, **{name: value}))
    with pytest.raises(WireError, match=rf"'trust_region\.{name}': a request's trust region has the server's {name}"):
        explain_request("loan", rejected_applicant(), spec)
    carried = explain_request("loan", rejected_applicant(), ProblemSpec(trust_region=TrustRegionSettings(nearest=40)))
    assert carried.trust_region.nearest == 40
