"""A ``PlanRequest``'s search settings mapped onto the solver's names: the wire keeps ``seed``,
``generations`` and ``time_limit_seconds``; the config has ``random_seed`` and a termination."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from counterplan.planning import CallableAdapter, OutputSpec
from counterplan.server.grpc.client import CounterplanClient, class_goal
from counterplan.server.grpc.convert import BadRequestError
from counterplan.server.grpc.plan_convert import check_plan_request
from counterplan.server.registry.registry import FeatureSpec, RegisteredModel
from counterplan.solver.core.config import TerminationConfig
from tests.toy_person import TOY

FEATURES = [
    FeatureSpec(name="job", kind="categorical", categories=("Seller", "Developer")),
    FeatureSpec(name="education", kind="categorical", categories=("HS", "BSc")),
    FeatureSpec(name="location", kind="categorical", categories=("Germany", "US")),
    FeatureSpec(name="age", kind="integer", low=18, high=90),
]
PERSON = {"job": "Seller", "education": "HS", "location": "Germany", "age": 30}


def _model() -> RegisteredModel:
    def approves_nobody(X: Any) -> Any:
        return np.column_stack([np.ones(len(X)), np.zeros(len(X))])

    return RegisteredModel("toy", "1", "toy", CallableAdapter(approves_nobody, [OutputSpec("ok", (0, 1))]), FEATURES)


def _check(**search: Any) -> Any:
    request = CounterplanClient.plan_request("toy", PERSON, TOY, [class_goal(1)])
    for name, value in search.items():
        setattr(request.search, name, value)
    return check_plan_request(request, _model(), 100, 1000, 1000)


def test_the_wire_names_map_onto_the_solvers() -> None:
    config = _check(seed=7, generations=20, time_limit_seconds=5.0, population=40).config
    assert config.random_seed == 7 and config.population == 40
    assert config.termination == TerminationConfig(step_count_limit=20, spent_limit_seconds=5.0)
    assert _check().config.termination == TerminationConfig(step_count_limit=150)


@pytest.mark.parametrize(
    ("search", "field"),
    [
        ({"seed": -1}, "search.seed"),
        ({"generations": 0}, "search.generations"),
        ({"generations": 1001}, "search.generations"),
        ({"generations": 20_000}, "search.generations"),  # past the search's own bound too: named once
        ({"time_limit_seconds": -1.0}, "search.time_limit_seconds"),
        ({"time_limit_seconds": float("nan")}, "search.time_limit_seconds"),
    ],
)
def test_a_bad_search_setting_is_named_by_its_wire_name(search: dict[str, Any], field: str) -> None:
    with pytest.raises(BadRequestError) as info:
        _check(**search)
    assert [f for f, _ in info.value.violations] == [field], info.value.violations


def test_a_bad_termination_and_a_bad_setting_are_named_at_once() -> None:
    with pytest.raises(BadRequestError) as info:
        _check(generations=0, bias=0.2)
    assert {f for f, _ in info.value.violations} == {"search.generations", "search.bias"}


def test_a_bad_generation_count_and_time_limit_are_named_each() -> None:
    with pytest.raises(BadRequestError) as info:
        _check(generations=0, time_limit_seconds=-1.0)
    assert info.value.violations == [
        ("search.time_limit_seconds", "Input should be greater than 0 (given -1.0)"),
        ("search.generations", "Input should be greater than 0 (given 0)"),
    ]
