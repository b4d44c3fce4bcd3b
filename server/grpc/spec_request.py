"""A :class:`~counterplan.planning.spec.ProblemSpec` as a request's fields: the client's half of
the conversion whose server half is :func:`counterplan.server.grpc.convert.check_request`.

A command with ``--server`` builds the same spec as a local run (:mod:`counterplan.server.cli.problem_flags`)
and sends it: each option becomes the field the server reads back into the same spec, so a flag
means the same thing on a server as in the process. A spec option the wire cannot carry is
refused by name (:class:`WireError`), never dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from counterplan.planning.distance import DistanceSettings
from counterplan.planning.errors import InvalidInputError
from counterplan.planning.features import is_missing
from counterplan.planning.goals import ClassGoal, RangeGoal, ValueGoal
from counterplan.planning.plausibility import PlausibilitySettings
from counterplan.planning.spec import FeatureRule, ProblemSpec
from counterplan.planning.trust_region import TrustRegionSettings
from counterplan.server._generated.counterplan.v1 import counterplan_pb2 as pb
from counterplan.server.grpc.convert import MAX_TRUST_REGION_ROWS, value_message

METRICS = {
    "auto": pb.DISTANCE_METRIC_UNSPECIFIED,
    "range_l1": pb.DISTANCE_METRIC_RANGE_L1,
    "mad_l1": pb.DISTANCE_METRIC_MAD_L1,
    "sd_squared": pb.DISTANCE_METRIC_SD_SQUARED,
    "scorecard": pb.DISTANCE_METRIC_SCORECARD,
}
MONOTONE = {"increase": pb.MONOTONE_INCREASE, "decrease": pb.MONOTONE_DECREASE}


class WireError(InvalidInputError):
    """A spec holds an option no request field carries (the model card fixes it on a server)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__("request", field, problem)


def goal_message(goal: ClassGoal | ValueGoal | RangeGoal) -> pb.Goal:
    """A goal as a ``Goal`` message (a class goal's margin only when it sets its own)."""
    message = pb.Goal(output=goal.output or "")
    if isinstance(goal, ClassGoal):
        message.class_target.label = str(goal.target)
        if goal.confidence is not None:
            message.class_target.confidence = goal.confidence
        if "margin" in goal.model_fields_set:
            message.class_target.margin = goal.margin
    elif isinstance(goal, ValueGoal):
        message.value_target.value, message.value_target.tolerance = goal.value, goal.tolerance
    else:
        message.range_target.low, message.range_target.high = goal.low, goal.high
    return message


def explain_request(
    model_id: str, instance: Mapping[str, Any], spec: ProblemSpec, *, num_counterfactuals: int = 1
) -> pb.ExplainRequest:
    """An ``ExplainRequest`` asking ``spec`` of ``instance`` (the solver's fields are the caller's)."""
    request = pb.ExplainRequest(
        model_id=model_id,
        instance={name: value_message(value) for name, value in instance.items()},
        num_counterfactuals=num_counterfactuals,
    )
    _question(request, spec, instance)
    request.distance_metric = METRICS[spec.distance.metric]
    if spec.distance.metric == "scorecard":
        request.scorecard_alpha, request.scorecard_beta = spec.distance.alpha, spec.distance.beta
    elif (spec.distance.alpha, spec.distance.beta) != (1.0, 1.0):
        raise WireError("distance.alpha", "the scorecard distance's weights apply only to distance scorecard")
    if spec.distance.change_penalty:
        request.change_penalty = spec.distance.change_penalty
    return request


def plan_fields(request: pb.PlanRequest, spec: ProblemSpec, instance: Mapping[str, Any]) -> None:
    """Set ``spec`` on a ``PlanRequest`` (a plan's objectives are its own: no distance)."""
    if spec.distance != DistanceSettings():
        raise WireError("distance", "a plan measures its own distance (Gower): give no distance options")
    _question(request, spec, instance)


def _question(request: pb.ExplainRequest | pb.PlanRequest, spec: ProblemSpec, instance: Mapping[str, Any]) -> None:
    """The fields an explain and a plan share: the rules, the goals, the margin, the limits."""
    if spec.relations:
        raise WireError(
            "relations",
            "learned constraints are fitted models, sent by no request: register the model on the server with "
            "them (RegisteredModel(spec=ProblemSpec(relations=...)) in Python; a YAML card cannot hold them)",
        )
    request.overrides.extend(override_messages(spec, instance))
    request.goals.extend(goal_message(goal) for goal in spec.goals or ())
    if spec.margin is not None:
        request.margin = spec.margin
    if spec.max_changed_features is not None:
        request.max_changed_features = spec.max_changed_features
    if spec.plausibility is not None:
        if spec.plausibility != PlausibilitySettings():
            raise WireError("plausibility", "a request asks for plausibility with the server's settings")
        request.plausible = True
    region = spec.trust_region
    if region is not None:
        _check_trust_region(region)
        request.trust_region.SetInParent()
        if region.nearest is not None:
            request.trust_region.nearest = region.nearest
        if region.slack:
            request.trust_region.slack = region.slack
        if not region.enlarge_when_infeasible:
            request.trust_region.enlarge_when_infeasible = False


def _check_trust_region(region: TrustRegionSettings) -> None:
    """A request's trust region carries ``nearest``, ``slack`` and ``enlarge_when_infeasible``; the
    server builds it from its own number of rows and enlarges it to take in its own number of them
    (those of a region asked with other numbers were dropped without a word)."""
    server = TrustRegionSettings(max_reference_rows=MAX_TRUST_REGION_ROWS)
    for name in ("max_reference_rows", "enlarge_rows"):
        if getattr(region, name) != getattr(server, name):
            raise WireError(
                f"trust_region.{name}",
                f"a request's trust region has the server's {name} ({getattr(server, name)}), "
                f"given {getattr(region, name)}",
            )


def override_messages(spec: ProblemSpec, instance: Mapping[str, Any]) -> list[pb.FeatureOverride]:
    """One override per feature (a server refuses a second): the spec's rules, its immutables,
    and the features whose missing value may be filled (``True``: every feature missing in the
    instance)."""
    rules: dict[str, FeatureRule] = dict(spec.features)
    for name in spec.immutable:
        rules[name] = FeatureRule(immutable=True).over(rules.get(name, FeatureRule()))
    fill = spec.fill_missing
    fillable = [k for k, v in instance.items() if is_missing(v)] if fill is True else list(fill or ())
    for name in fillable:
        rules[name] = FeatureRule(fill_missing=True).over(rules.get(name, FeatureRule()))
    return [_override_message(name, rule) for name, rule in rules.items()]


_SCALARS = (
    ("immutable", "constrained"),
    ("cost", "cost"),
    ("precision", "precision"),
    ("fill_missing", "fill_missing"),
)
"""A rule's fields that an override carries as they are, by the override's name."""


def _override_message(name: str, rule: FeatureRule) -> pb.FeatureOverride:
    if rule.kind is not None:
        raise WireError(f"features.{name}.kind", "a model card fixes each feature's kind on a server")
    override = pb.FeatureOverride(name=name)
    for field, wire in _SCALARS:
        if (value := getattr(rule, field)) is not None:
            setattr(override, wire, value)
    if rule.monotone is not None:
        override.monotone = MONOTONE[rule.monotone]
    if rule.low is not None and rule.high is not None:
        override.domain.low, override.domain.high = rule.low, rule.high
    if rule.categories is not None:
        override.domain.categories.extend(rule.categories)
    for value in rule.allowed or ():
        if isinstance(value, bool):
            override.allowed_categories.append(str(value).lower())
        elif isinstance(value, str):
            override.allowed_categories.append(value)
        else:
            override.allowed_values.append(value)
    override.forbidden.extend(value_message(value) for value in rule.forbidden or ())
    return override
