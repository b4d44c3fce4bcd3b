"""Action plans on the wire: ``PlanRequest`` checked into domain objects, results into messages.

A plan request shares its instance, overrides, goals and margin with ``ExplainRequest``, so it
is checked by the same code (:func:`counterplan.server.grpc.convert.check_request`) and a bad instance is named
the same way. Its actions and cost graph become the plain data an actions file holds and go
through :class:`counterplan.planning.actions.ActionSet`, the same checks as the command line's
``--actions``; only their compilation against the instance's features (unknown, immutable or
computed features, values a feature cannot take) waits for the problem, in the service.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import ValidationError

from counterplan.planning._pydantic import describe
from counterplan.planning.actions import ActionError, ActionSet
from counterplan.planning.errors import InvalidInputError
from counterplan.server._generated.counterplan.v1 import counterplan_pb2 as pb
from counterplan.server.grpc.convert import (
    BadRequestError,
    CheckedRequest,
    Violation,
    check_request,
    plain_value,
    value_message,
)
from counterplan.server.registry.registry import RegisteredModel
from counterplan.solver.core.config import ConfigError, TerminationConfig
from counterplan.solver.core.events import BestSolutionChanged
from counterplan.solver.plans.planner import ActionPlan, PlanResult, PlanStep
from counterplan.solver.plans.search import DEFAULT_GENERATIONS, PlanConfig, plan_termination

DEFAULT_MAX_PLANS = 100
"""Plans a response carries when the request does not say (``max_plans``)."""
MOST_PLANS = 1000
FRONT_POINTS = 100
"""Front points a stream message carries at most (cheapest first; ``front_size`` counts all)."""

_KINDS = {pb.ACTION_KIND_UNSPECIFIED: "add", pb.ACTION_KIND_ADD: "add", pb.ACTION_KIND_SET: "set"}
_SEARCH_FIELDS = ("population", "generations", "mutant_share", "bias", "seed", "time_limit_seconds")
_CONFIG_NAMES = {"seed": "random_seed"}
"""``PlanSearch`` fields by the :class:`PlanConfig` field they set, where the names differ (the
wire keeps its names; the config has the solver's)."""
_WIRE_NAMES = {config: wire for wire, config in _CONFIG_NAMES.items()}


@dataclass(frozen=True)
class CheckedPlanRequest:
    """A plan request turned into domain objects, every field it can be checked alone checked."""

    request: CheckedRequest
    actions: ActionSet
    config: PlanConfig
    max_plans: int


def check_plan_request(
    request: pb.PlanRequest, model: RegisteredModel, max_features: int, max_population: int, max_generations: int
) -> CheckedPlanRequest:
    """Check every field of ``request``; raise :class:`BadRequestError` naming each bad one."""
    violations: list[Violation] = []
    explain = pb.ExplainRequest(
        model_id=request.model_id,
        instance=request.instance,
        overrides=request.overrides,
        goals=request.goals,
        request_id=request.request_id,
    )
    if request.HasField("margin"):
        explain.margin = request.margin
    if request.HasField("max_changed_features"):
        explain.max_changed_features = request.max_changed_features
    explain.plausible = request.plausible
    if request.HasField("trust_region"):
        explain.trust_region.CopyFrom(request.trust_region)
    checked: CheckedRequest | None = None
    try:
        checked = check_request(explain, model, max_features)
    except BadRequestError as exc:
        violations += exc.violations
    actions: ActionSet | None = None
    try:
        actions = ActionSet.from_data(actions_data(request))
    except ActionError as exc:
        violations += exc.violations
    config = _search(request.search, max_population, max_generations, violations)
    max_plans = request.max_plans if request.HasField("max_plans") else DEFAULT_MAX_PLANS
    if not 1 <= max_plans <= MOST_PLANS:
        violations.append(("max_plans", f"must be 1 to {MOST_PLANS:,}, given {max_plans:,}"))
    if violations or checked is None or actions is None or config is None:
        raise BadRequestError(violations)
    return CheckedPlanRequest(checked, actions, config, max_plans)


def actions_data(request: pb.PlanRequest) -> dict[str, Any]:
    """The request's actions and graph as the plain data an actions file holds."""
    return {
        "actions": [_action_data(action) for action in request.actions],
        "graph": [{"source": e.source, "target": e.target, "tau": e.tau} for e in request.graph],
    }


def _action_data(action: pb.Action) -> dict[str, Any]:
    data: dict[str, Any] = {"name": action.name, "feature": action.feature}
    kind = _KINDS.get(action.kind)
    data["kind"] = kind if kind is not None else f"unknown value {action.kind}"
    for bound in ("low", "high"):
        if action.HasField(bound):
            data[bound] = getattr(action, bound)
    if action.values:
        data["values"] = [plain_value(v) for v in action.values]
    if action.consequences:
        data["consequences"] = dict(sorted(action.consequences.items()))
    for formula in ("effort", "pre", "post"):
        text = getattr(action, formula)
        if text:
            data[formula] = text
    return data


def action_messages(actions: ActionSet) -> tuple[list[pb.Action], list[pb.CostEdge]]:
    """An :class:`ActionSet` (an actions file) as messages: what a client sends."""
    out = []
    for spec in actions.actions:
        message = pb.Action(
            name=spec.name,
            feature=spec.feature,
            kind=pb.ACTION_KIND_SET if spec.kind == "set" else pb.ACTION_KIND_ADD,
            values=[value_message(v) for v in spec.values or ()],
            consequences={name: _text(f) for name, f in spec.consequences.items()},
            effort=_text(spec.effort),
            pre=_text(spec.pre),
            post=_text(spec.post),
        )
        if spec.low is not None:
            message.low = spec.low
        if spec.high is not None:
            message.high = spec.high
        out.append(message)
    edges = [pb.CostEdge(source=e.source, target=e.target, tau=_text(e.tau)) for e in actions.graph]
    return out, edges


def _text(formula: str | None) -> str:
    return "" if formula is None else formula


def action_violations(exc: InvalidInputError) -> list[Violation]:
    """Each bad field of an error raised while the actions are compiled for the problem: all of
    an :class:`ActionError`'s (every action and edge is checked at once), or the one it names."""
    if isinstance(exc, ActionError):
        return list(exc.violations)
    return [(exc.field, exc.problem)]


def _search(
    search: pb.PlanSearch, max_population: int, max_generations: int, out: list[Violation]
) -> PlanConfig | None:
    """The search settings: the request's over the defaults, within the server's caps; the
    generations and the time limit are the search's termination (:func:`plan_termination`)."""
    given = {name: getattr(search, name) for name in _SEARCH_FIELDS if search.HasField(name)}
    for name in ("mutant_share", "bias", "time_limit_seconds"):
        if name in given and not math.isfinite(given[name]):
            out.append((f"search.{name}", f"must be a finite number, given {given[name]}"))
            return None
    generations = given.pop("generations", DEFAULT_GENERATIONS)
    if generations > max_generations:  # the server's cap, at most the search's own: one refusal
        out.append(("search.generations", f"at most {max_generations:,} on this server, given {generations:,}"))
        generations = DEFAULT_GENERATIONS
    termination = _termination(generations, given.pop("time_limit_seconds", None), out)
    settings = {_CONFIG_NAMES.get(name, name): value for name, value in given.items()}
    try:
        config = PlanConfig.model_validate({**settings, "termination": termination})
    except ValidationError as exc:
        out += [(f"search.{_WIRE_NAMES.get(field, field)}", problem) for field, problem in describe(exc)]
        return None
    if config.population > max_population:
        out.append(("search.population", f"at most {max_population:,} on this server, given {config.population:,}"))
    return config


def _termination(generations: int, time_limit: float | None, out: list[Violation]) -> TerminationConfig:
    """The request's generations and time limit as the search's termination (the default one,
    with each bad field in ``out``, when they are out of bounds)."""
    try:
        return plan_termination(generations, time_limit_seconds=time_limit)
    except ConfigError as exc:
        out += [(f"search.{field}", problem) for field, problem in exc.parts]  # each bad field on its own
        return plan_termination()


def plan_message(
    result: PlanResult,
    request_id: str,
    model_id: str,
    names: list[str],
    *,
    max_plans: int = DEFAULT_MAX_PLANS,
    max_bytes: int | None = None,
) -> pb.PlanResponse:
    """A :class:`PlanResult` as a ``PlanResponse``: the cheapest ``max_plans`` plans (and the
    short plan, when it comes later), fewer when the message would pass ``max_bytes``."""
    kept = max_plans
    while True:
        chosen = _kept(result, kept)
        response = pb.PlanResponse(
            request_id=request_id,
            model_id=model_id,
            goal=result.goal,
            goal_default=result.goal_default,
            original=_values(result.original),
            original_prediction=result.original_prediction,
            plans=[_plan_message(p) for p in chosen],
            generations=result.generations,
            stopped_early=result.stopped_early,
            model_calls=result.model_calls,
            time_spent_seconds=result.seconds,
            feature_names=names,
            front_size=result.front_size,
            already_met=result.already_met,
            failure=result.failure or "",
            cost_failure=result.cost_failure or "",
        )
        for field, named in (("cheapest", result.cheapest), ("short_plan", result.short)):
            index = next((i for i, p in enumerate(chosen) if p is named), None)
            if index is not None:
                setattr(response, field, index)
        if max_bytes is None or kept <= 1 or response.ByteSize() <= max_bytes:
            return response
        kept //= 2


def _kept(result: PlanResult, most: int) -> list[ActionPlan]:
    """The cheapest ``most`` plans, and the short plan if it is not among them."""
    chosen = result.plans[:most]
    if result.short is not None and not any(p is result.short for p in chosen):
        chosen.append(result.short)
    return chosen


def _plan_message(plan: ActionPlan) -> pb.ActionPlan:
    return pb.ActionPlan(
        steps=[
            pb.PlanStep(
                action=s.action,
                feature=s.feature,
                before=value_message(s.before),
                after=value_message(s.after),
                cost=s.cost,
                state=_values(s.state),
                prediction=s.prediction,
                goal_met=s.goal_met,
                consequences=[
                    pb.FeatureChange(feature=name, original=value_message(old), proposed=value_message(new))
                    for name, (old, new) in s.consequences.items()
                ],
            )
            for s in plan.steps
        ],
        total_cost=plan.total_cost,
        distance=plan.distance,
        valid=plan.valid,
    )


def _values(values: dict[str, Any]) -> dict[str, pb.FeatureValue]:
    return {name: value_message(value) for name, value in values.items()}


def front_message(event: BestSolutionChanged, seconds: float, sequence: int) -> pb.PlanStreamResponse:
    """A stream's INTERMEDIATE message: the front a search announced (its objectives: cost,
    distance, then per touched feature the steps that changed it), cheapest first."""
    assert event.front is not None, "a plan search's event carries its front"
    objectives = event.front.objectives
    order = np.lexsort((objectives[:, 1], objectives[:, 0])) if objectives.shape[0] else np.empty(0, dtype=np.intp)
    points = [
        pb.FrontPoint(
            cost=float(objectives[i, 0]),
            distance=float(objectives[i, 1]),
            feature_changes=int(objectives[i, 2:].sum()),
        )
        for i in order[:FRONT_POINTS]
    ]
    return pb.PlanStreamResponse(
        sequence_id=sequence,
        stage=pb.STAGE_INTERMEDIATE,
        generation=event.step_index - 1,  # the generations run, counted from 0 on the wire
        front=points,
        front_size=int(objectives.shape[0]),
        time_spent_seconds=seconds,
    )


def plan_result(response: pb.PlanResponse) -> PlanResult:
    """A ``PlanResponse`` as a :class:`PlanResult` (what a client prints as a local one; features in
    the model's order)."""
    order = list(response.feature_names)

    def ordered(values: Any) -> dict[str, Any]:
        names = order if set(order) == set(values) else sorted(values)
        return {name: plain_value(values[name]) for name in names}

    plans = [
        ActionPlan(
            steps=[
                PlanStep(
                    action=s.action,
                    feature=s.feature,
                    before=plain_value(s.before),
                    after=plain_value(s.after),
                    cost=s.cost,
                    consequences={
                        c.feature: (plain_value(c.original), plain_value(c.proposed)) for c in s.consequences
                    },
                    state=ordered(s.state),
                    prediction=s.prediction,
                    goal_met=s.goal_met,
                )
                for s in p.steps
            ],
            total_cost=p.total_cost,
            distance=p.distance,
            valid=p.valid,
        )
        for p in response.plans
    ]
    return PlanResult(
        goal=response.goal,
        goal_default=response.goal_default if response.HasField("goal_default") else None,
        original=ordered(response.original),
        original_prediction=response.original_prediction,
        plans=plans,
        front_size=response.front_size,
        cheapest=plans[response.cheapest] if response.HasField("cheapest") else None,
        short=plans[response.short_plan] if response.HasField("short_plan") else None,
        already_met=response.already_met,
        failure=response.failure or None,
        cost_failure=response.cost_failure or None,
        generations=response.generations,
        stopped_early=response.stopped_early,
        model_calls=response.model_calls,
        seconds=response.time_spent_seconds,
    )


def final_front(result: PlanResult) -> list[pb.FrontPoint]:
    """The FINAL stream message's front: the result's plans as points, cheapest first."""
    return [
        pb.FrontPoint(
            cost=p.total_cost,
            distance=p.distance,
            feature_changes=sum(int(s.before != s.after) + len(s.consequences) for s in p.steps),
        )
        for p in result.plans[:FRONT_POINTS]
    ]
