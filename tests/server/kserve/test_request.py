"""The KServe runtime's request: its form and bounds, and the solves, without a server."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest
from sklearn.pipeline import Pipeline

from counterplan.server.kserve import explaining
from counterplan.server.kserve.explaining import explain_instances
from counterplan.server.kserve.request import (
    ExplainLimits,
    ExplainParameters,
    RequestError,
    instance_seconds,
    read_request,
)
from counterplan.solver.explainer import Explainer
from tests.server.kserve.conftest import TARGET

ROW = {"income": 40.0, "age": 30, "housing": "rent"}
LIMITS = ExplainLimits(max_instances=3, max_counterfactuals=2)


def _goal(goal: Any) -> dict[str, Any]:
    """A request asking ``goal`` in its spec."""
    return {"instances": [ROW], "parameters": {"spec": {"goals": [goal]}}}


def _features(rules: dict[str, Any]) -> dict[str, Any]:
    """A request whose spec sets ``rules`` for its features."""
    return {"instances": [ROW], "parameters": {"spec": {"features": rules}}}


@pytest.fixture(scope="module")
def explainer(credit_data: pd.DataFrame, credit_model: Pipeline) -> Explainer:
    return Explainer(credit_model, credit_data, target=TARGET)


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ([ROW], "body", "expected a JSON object with 'instances', given a list"),
        ({"rows": [ROW]}, "instances", "missing"),
        ({"instances": ROW}, "instances", "expected a list of instances, given an object"),
        ({"instances": [ROW] * 4}, "instances", "at most 3 instances per request, given 4"),
        ({"instances": [ROW, 5]}, "instances[1]", "expected an object of feature values, given a number"),
        ({"instances": []}, "instances", "at least one instance"),
        ({"instances": [ROW], "parameters": {"seed": -1}}, "parameters.seed", "greater than or equal to 0"),
        ({"instances": [ROW], "parameters": {"seed": "7"}}, "parameters.seed", "valid integer"),
        ({"instances": [ROW], "parameters": {"time_limit": 0}}, "parameters.time_limit", "greater than 0"),
        ({"instances": [ROW], "parameters": {"time_limit": True}}, "parameters.time_limit", "valid number"),
        ({"instances": [ROW], "parameters": {"time_limit": "5"}}, "parameters.time_limit", "valid number"),
        ({"instances": [ROW], "parameters": {"num_counterfactuals": 3}}, "parameters.num_counterfactuals", "at most 2"),
        ({"instances": [ROW], "parameters": {"answers": 3}}, "parameters.answers", "Extra inputs"),
        ({"instances": [ROW], "parameters": {"spec": {"margin": 2}}}, "parameters.spec.margin", "0.5"),
        ({"instances": [ROW], "extra": 1}, "extra", "Extra inputs"),
        # a goal was named as pydantic's union tried each kind: "goals[0].ClassGoal.goal.confidence, ..."
        (
            _goal({"kind": "class", "target": "good", "confidence": 2}),
            "parameters.spec.goals[0].confidence",
            "less than or equal to 1",
        ),
        (_goal({"target": "good", "margin": 0.9}), "parameters.spec.goals[0].margin", "less than or equal to 0.5"),
        (_goal({"kind": "range", "low": 3, "high": 1}), "parameters.spec.goals[0].low", "inverted range"),
        (_goal({"kind": "value", "value": "x"}), "parameters.spec.goals[0].value", "valid number"),
        (_goal({"kind": "odds"}), "parameters.spec.goals[0].kind", "unknown goal kind 'odds'; one of class, value"),
        (_goal(5), "parameters.spec.goals[0]", "expected a goal"),
        # a value of the wrong kind was named as pydantic's union tried each kind (found fuzzing):
        # "goals[0].target.str, goal.target.int, goal.target.float, goal.target.bool: goal.target.str: ..."
        (_goal({"kind": "class", "target": None}), "parameters.spec.goals[0].target", "text, a number or a boolean"),
        (
            _features({"housing": {"allowed": ["own", [1]]}}),
            "parameters.spec.features.housing.allowed[1]",
            "given a list",
        ),
        (_features({"housing": {"forbidden": [None]}}), "parameters.spec.features.housing.forbidden[0]", "given None"),
        (
            {"instances": [ROW], "parameters": {"spec": {"fill_missing": [1]}}},
            "parameters.spec.fill_missing",
            "give true, false or a list of feature names",
        ),
        # a feature's bounds were named "features.income.value", or (beyond 2^53) blamed on the instance
        (_features({"income": {"low": 100, "high": 1}}), "parameters.spec.features.income.high", "empty domain"),
        (_features({"income": {"low": 0, "high": 1e300}}), "parameters.spec.features.income.high", "2^53"),
        (_features({"income": {"low": 0}}), "parameters.spec.features.income.high", "give both low and high"),
        # 400,000 categories were taken (each costs memory in every model call: 2.5 GB in a server)
        (
            _features({"housing": {"categories": ["own", "rent", "free", *(f"c{i}" for i in range(9_998))]}}),
            "parameters.spec.features.housing.categories",
            "at most 10,000 categories, given 10,001",
        ),
        # a relation's "model" was text, and the search failed on it: HTTP 500, a traceback in the log
        (
            {
                "instances": [ROW],
                "parameters": {"spec": {"relations": [{"target": "age", "inputs": ["income"], "model": "x"}]}},
            },
            "parameters.spec.relations",
            "learned constraints are fitted models",
        ),
    ],
)
def test_a_bad_request_is_refused_naming_its_field(body: Any, field: str, words: str) -> None:
    with pytest.raises(RequestError) as caught:
        read_request(body, LIMITS)
    assert caught.value.field == field
    assert words in caught.value.problem
    assert caught.value.text.startswith(f"{field}: ")


def test_inputs_are_read_as_instances() -> None:
    request = read_request({"inputs": [ROW], "parameters": {"seed": 4, "num_counterfactuals": 2}}, LIMITS)
    assert request.instances == [ROW]
    assert request.parameters == ExplainParameters(seed=4, num_counterfactuals=2)


def test_each_instance_gets_its_share_of_the_time_left() -> None:
    limits = ExplainLimits(max_instance_seconds=10, request_seconds=30)
    default = ExplainParameters()
    assert instance_seconds(default, limits, left=30, rows_left=2) == 10  # capped by the maximum
    assert instance_seconds(default, limits, left=12, rows_left=4) == 3  # the deadline's share
    assert instance_seconds(ExplainParameters(time_limit=1.5), limits, left=30, rows_left=2) == 1.5
    assert instance_seconds(ExplainParameters(time_limit=99), limits, left=30, rows_left=1) == 10
    assert instance_seconds(default, limits, left=-1, rows_left=1) == 1e-3  # past the deadline: stop at once


def test_the_answers_are_the_explainers_for_the_same_seed(explainer: Explainer) -> None:
    rows = [ROW, {"income": 45.5, "age": 52, "housing": "free"}]
    request = read_request({"instances": rows, "parameters": {"seed": 11, "num_counterfactuals": 2}}, LIMITS)
    answer = explain_instances(explainer, request, LIMITS)
    assert len(answer["explanations"]) == 2
    for row, got in zip(rows, answer["explanations"], strict=True):
        expected = explainer.explain(row, seed=11, num_counterfactuals=2).model_dump(mode="json")
        assert got["valid"] and got["predictions"]["credit"]["good"] > 0.5
        assert got["original"] == row
        for key in ("proposed", "changes", "predictions", "score", "counterfactuals", "goal"):
            assert got[key] == expected[key], key
        assert len(got["counterfactuals"]) == 2


def test_a_request_spec_is_laid_over_the_runtimes(explainer: Explainer) -> None:
    asked = {"immutable": ["income"], "goals": [{"kind": "class", "target": "bad"}]}
    good = {"income": 55.0, "age": 40, "housing": "own"}
    body = {"instances": [good], "parameters": {"seed": 3, "spec": asked}}
    (got,) = explain_instances(explainer, read_request(body, LIMITS), LIMITS)["explanations"]
    assert got["valid"] and got["goal"].startswith("credit = bad")
    assert got["changes"] and "income" not in {change["feature"] for change in got["changes"]}


@pytest.mark.parametrize(
    ("instance", "field", "words"),
    [
        ({**ROW, "debt": 3}, "instances[1].debt", "not a feature of the model"),
        ({**ROW, "income": "lots"}, "instances[1].income", "numeric column given the text 'lots'"),
        ({"income": 40.0, "housing": "rent"}, "instances[1].age", "no value"),
        ({**ROW, "housing": "castle"}, "instances[1].housing", "not one of its categories"),
        ({**ROW, "income": [40, 50]}, "instances[1].income", "numeric column given list [40, 50]"),
        ({**ROW, "income": {"low": 40}}, "instances[1].income", "numeric column given dict"),
        ({**ROW, "age": True}, "instances[1].age", "numeric column given bool True"),
        ({**ROW, "housing": "c" * 100_000}, "instances[1].housing", "… (100,000 characters)' is not one of"),
    ],
)
def test_a_bad_instance_is_refused_before_any_search(
    explainer: Explainer, monkeypatch: pytest.MonkeyPatch, instance: dict[str, Any], field: str, words: str
) -> None:
    def no_search(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a search ran")

    monkeypatch.setattr(explaining, "CounterfactualSolver", no_search)
    request = read_request({"instances": [ROW, instance]}, LIMITS)
    with pytest.raises(RequestError) as caught:
        explain_instances(explainer, request, LIMITS)
    assert caught.value.field == field
    assert words in caught.value.problem


def test_a_field_named_by_the_caller_is_answered_with_its_control_characters_escaped(explainer: Explainer) -> None:
    """An instance's key is the caller's text: its escape sequence reached the answer's error as
    it came (``instances[0].h\\x1b[31mousing``), where the value beside it was shown escaped."""
    request = read_request({"instances": [{**ROW, "h\x1b[31m\u202eousing": 1}]}, LIMITS)
    with pytest.raises(RequestError) as caught:
        explain_instances(explainer, request, LIMITS)
    assert caught.value.text.startswith("instances[0].h\\x1b[31m\\u202eousing: not a feature of the model")


def test_a_spec_that_does_not_fit_the_model_names_the_spec(explainer: Explainer) -> None:
    body = {"instances": [ROW], "parameters": {"spec": {"goals": [{"kind": "class", "target": "great"}]}}}
    with pytest.raises(RequestError) as caught:
        explain_instances(explainer, read_request(body, LIMITS), LIMITS)
    assert caught.value.field.startswith("parameters.spec.goals")
    assert "'great' is not one of" in caught.value.problem


def test_every_search_ends_by_the_requests_deadline(explainer: Explainer, monkeypatch: pytest.MonkeyPatch) -> None:
    """A clock past the deadline: each instance gets a millisecond (its search stops at once),
    and the request still answers every instance."""
    ticks = iter([0.0] + [100.0] * 10)
    limits = ExplainLimits(request_seconds=5, max_instances=3)
    request = read_request({"instances": [ROW, ROW], "parameters": {"seed": 1}}, limits)
    seen: list[float] = []
    real = explaining.capped

    def spy(config: Any, seconds: float) -> Any:
        seen.append(seconds)
        return real(config, seconds)

    monkeypatch.setattr(explaining, "capped", spy)
    answer = explain_instances(explainer, request, limits, clock=lambda: next(ticks))
    assert seen == [1e-3, 1e-3]
    assert len(answer["explanations"]) == 2


def test_a_request_stopped_before_its_thread_starts_runs_no_search(
    explainer: Explainer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client left while the request waited for a worker thread: no instance is searched."""

    def no_search(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a search ran")

    monkeypatch.setattr(explaining, "CounterfactualSolver", no_search)
    cancelled = explaining.SolveStops()
    cancelled.stop()
    request = read_request({"instances": [ROW, ROW]}, LIMITS)
    assert explain_instances(explainer, request, LIMITS, cancelled=cancelled) == {"explanations": []}


def test_a_stream_of_distinct_specs_keeps_a_bounded_number_of_builds(explainer: Explainer) -> None:
    """Each request's distinct plausibility setting (or feature bound) built a model of the
    training rows, and the runtime's explainer kept every one for good: 60 requests of a 30,000-row
    runtime held 110 MB more (found fuzzing). It keeps the newest SHARED_BUILDS; the answers hold."""
    from counterplan.planning.shared_builds import SHARED_BUILDS

    for i in range(SHARED_BUILDS + 8):
        spec = {"plausibility": {"k": 1, "quantile": 0.5 + i / 1000}}
        body = {"instances": [ROW], "parameters": {"time_limit": 0.05, "spec": spec}}
        (got,) = explain_instances(explainer, read_request(body, LIMITS), LIMITS)["explanations"]
        assert got["original"] == ROW
    assert len(explainer._cache) <= SHARED_BUILDS


def test_a_requests_plausibility_reference_rows_are_bounded_by_the_runtime() -> None:
    """Each distinct plausibility setting builds its model from up to ``max_reference_rows``
    training rows before any search, at a cost more than linear in them (80,000 rows: 3.9 s):
    a request set it without bound (the KServe fuzz's finding)."""

    def body(rows: int) -> dict[str, Any]:
        return {"instances": [ROW], "parameters": {"spec": {"plausibility": {"max_reference_rows": rows}}}}

    assert read_request(body(5000), LIMITS).parameters.spec is not None  # the default is taken
    with pytest.raises(RequestError) as caught:
        read_request(body(80_000), LIMITS)
    assert (
        caught.value.text
        == "parameters.spec.plausibility.max_reference_rows: at most 5,000 on this runtime, given 80,000"
    )
    assert read_request(body(80_000), ExplainLimits(max_reference_rows=100_000)).parameters.spec is not None
