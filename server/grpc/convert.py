"""Between the wire and the domain: proto messages in, checked problems out, results back.

Validation happens here, once, at the boundary, and collects every problem of a request
(each as a field path and a description) before reporting them together, so a caller fixes
its request in one round trip.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from typing import Any

from counterplan.planning.defaults import default_goals
from counterplan.planning.distance import MAX_CHANGE_PENALTY, DistanceSettings
from counterplan.planning.errors import ECHO_CHARS, TEXT_CHARS, InvalidInputError, cut, echo, one_line
from counterplan.planning.features import MAX_MAGNITUDE, is_missing
from counterplan.planning.goals import ClassGoal, OutputSpec, RangeGoal, ValueGoal, bind_goals
from counterplan.planning.plausibility import PlausibilitySettings
from counterplan.planning.profile import FeatureSpec, InstanceError
from counterplan.planning.space import AnyFeature
from counterplan.planning.spec import MAX_MARGIN, FeatureRule, ProblemSpec, feature_rule
from counterplan.planning.trust_region import TrustRegionSettings
from counterplan.server._generated.counterplan.v1 import counterplan_pb2 as pb
from counterplan.server.registry.registry import RegisteredModel
from counterplan.solver.core.budget import check_budget, one_hot_width
from counterplan.solver.core.config import (
    MAX_AUTO_BUDGET_SECONDS,
    MAX_SEED,
    AutoConfig,
    ConfigError,
    SolverConfig,
    TerminationConfig,
)
from counterplan.solver.exact.report import ExactStatistics
from counterplan.solver.presets import with_acceptor_preset
from counterplan.solver.result import BestSolutionEvent, Change, CounterfactualResult

Violation = tuple[str, str]
_MISSING = object()
"""A FeatureValue with ``missing`` set (None already means "no valid value")."""
MAX_COUNTERFACTUALS = 100
MAX_REQUEST_ID_CHARS = 256
"""A caller's request id is echoed whole in the response (and quoted in an INTERNAL status and
the server log, where it is looked up): longer ones are refused, not echoed (as a batch row id)."""
_MONOTONE = {pb.MONOTONE_INCREASE: "increase", pb.MONOTONE_DECREASE: "decrease"}

_ENGINE_CHOICES: dict[int, str | None] = {
    pb.ENGINE_CHOICE_UNSPECIFIED: None,
    pb.ENGINE_CHOICE_LOCAL: "local",
    pb.ENGINE_CHOICE_EXACT: "exact",
    pb.ENGINE_CHOICE_AUTO: "auto",
    pb.ENGINE_CHOICE_SWARM: "swarm",
}
_ACCEPTORS: dict[int, str] = {
    # the wire's ``Engine`` enum names local search's acceptor (its name and numbers stay: wire
    # compatibility); each maps to the solver's preset of that name
    pb.ENGINE_TABU_SEARCH: "tabu_search",
    pb.ENGINE_HILL_CLIMBING: "hill_climbing",
    pb.ENGINE_LATE_ACCEPTANCE: "late_acceptance",
    pb.ENGINE_SIMULATED_ANNEALING: "simulated_annealing",
    pb.ENGINE_GREAT_DELUGE: "great_deluge",
    pb.ENGINE_STEP_COUNTING_HILL_CLIMBING: "step_counting_hill_climbing",
}
MAX_TRUST_REGION_ROWS = 500
"""A request's trust region uses at most this many training rows of the target outcome (the
exact engine adds a variable per row; local search checks membership by linear programs)."""
_METRICS = {
    pb.DISTANCE_METRIC_UNSPECIFIED: "auto",
    pb.DISTANCE_METRIC_RANGE_L1: "range_l1",
    pb.DISTANCE_METRIC_MAD_L1: "mad_l1",
    pb.DISTANCE_METRIC_SD_SQUARED: "sd_squared",
    pb.DISTANCE_METRIC_SCORECARD: "scorecard",
}


MAX_ALLOWED_VALUES = 10_000
"""Values an override lists per feature at most (allowed, forbidden, a domain's categories): a list
of numbers longer than that is a grid (use a precision); every category costs memory in each model
call of the solve (400,000 of them in a 3.5 MB request held 2.5 GB, the grpc fuzz)."""
MAX_VIOLATIONS = 20
"""Bad fields reported by name at most; the rest are counted. Details travel in gRPC trailing
metadata, which clients cap (16 KB by default), so every part of them is bounded."""
MAX_FIELD_CHARS = ECHO_CHARS
MAX_DESCRIPTION_CHARS = 300


class BadRequestError(InvalidInputError):
    """A request with one or more bad fields; ``violations`` names each (capped, see above)."""

    def __init__(self, violations: list[Violation]) -> None:
        shown = [(cut(f, MAX_FIELD_CHARS), one_line(d, MAX_DESCRIPTION_CHARS)) for f, d in violations[:MAX_VIOLATIONS]]
        total = ""
        if len(violations) > MAX_VIOLATIONS:
            more = len(violations) - MAX_VIOLATIONS
            shown.append(("request", f"and {more:,} more bad fields ({len(violations):,} in all)"))
            total = f"{len(violations):,} bad fields, the first {MAX_VIOLATIONS} named: "  # the text may be cut
        self.violations = shown
        text = one_line(total + "; ".join(f"{f}: {d}" for f, d in shown), TEXT_CHARS)
        super().__init__("request", shown[0][0] if shown else "", text)


class CheckedRequest:
    """A request turned into domain objects, every field checked: the instance, the problem spec
    (laid over the model's own when the problem is built), and how to solve it."""

    def __init__(
        self,
        instance: dict[str, Any],
        spec: ProblemSpec,
        features: list[AnyFeature],
        config: SolverConfig,
        seed: int | None,
        *,
        num_counterfactuals: int = 1,
        engine: str | None = None,
    ) -> None:
        self.instance = instance
        self.spec = spec
        self.features = features
        """The checked features (what the request is admitted by: its memory estimate)."""
        self.config = config
        self.seed = seed
        self.num_counterfactuals = num_counterfactuals
        self.engine = engine
        """``local``, ``exact``, ``auto``, ``swarm``, or None: the configuration as it is."""


def check_request(request: pb.ExplainRequest, model: RegisteredModel, max_features: int) -> CheckedRequest:
    """Check every field of ``request`` against ``model``; raise :class:`BadRequestError`.

    Every bad field is named, in the order the fields are checked here. The message's fields
    become a :class:`ProblemSpec`, the one form every way in gives a problem's options."""
    violations: list[Violation] = []
    check_request_id(request.request_id, violations)
    if len(request.instance) > max_features:
        violations.append(("instance", f"{len(request.instance)} features; at most {max_features} allowed"))
    rules = _overrides(request, model, violations)
    instance = _instance(request, model, violations)
    goals = _goals(request, model.outputs, violations)
    margin = _margin(request, violations)
    config, seed = _solver(request.solver, model.default_config, violations)
    engine = _ENGINE_CHOICES.get(request.solver.engine_choice, "")
    if engine == "":
        violations.append(("solver.engine_choice", f"unknown value {request.solver.engine_choice}"))
    metric, weights = _metric(request, model, violations)
    k = request.num_counterfactuals or 1
    if not 1 <= k <= MAX_COUNTERFACTUALS:
        violations.append(("num_counterfactuals", f"must be 1 to {MAX_COUNTERFACTUALS}, given {k}"))
    limit = request.max_changed_features if request.HasField("max_changed_features") else None
    if limit is not None and limit < 1:
        violations.append(("max_changed_features", f"must be at least 1, given {limit}"))
    penalty = _change_penalty(request, violations)
    _check_plausible(request, model, goals, violations)
    region = _trust_region(request, model, violations)
    distance = DistanceSettings(metric=metric, change_penalty=penalty, **weights)
    options: dict[str, Any] = {"goals": tuple(goals) or None, "margin": margin, "distance": distance}
    options["max_changed_features"] = limit
    options |= {"plausibility": PlausibilitySettings() if request.plausible else None, "trust_region": region}
    spec = _spec(rules, options)
    features = _features(model, instance, spec, violations) if not violations else []
    if not violations:
        try:
            check_budget(config, len(features), sum(f.mutable for f in features), one_hot_width(features))
        except ConfigError as exc:
            violations.append((f"solver.config_json.{exc.field}", exc.problem))
    if violations:
        raise BadRequestError(violations)
    return CheckedRequest(instance, spec, features, config, seed, num_counterfactuals=k, engine=engine or None)


def check_request_id(request_id: str, out: list[Violation]) -> None:
    """A request id fits :data:`MAX_REQUEST_ID_CHARS` (every method's request has one)."""
    if len(request_id) > MAX_REQUEST_ID_CHARS:
        out.append(("request_id", f"at most {MAX_REQUEST_ID_CHARS} characters, given {len(request_id):,}"))


def _spec(rules: dict[str, FeatureRule], options: dict[str, Any]) -> ProblemSpec:
    """The request's :class:`ProblemSpec`: its rules, and only the options it sets (the model's
    own hold where it sets none)."""
    given = {k: v for k, v in options.items() if v is not None and v != DistanceSettings()}
    if given.get("max_changed_features", 1) < 1:
        given.pop("max_changed_features")
    return ProblemSpec(features=rules, **given)


def _overrides(request: pb.ExplainRequest, model: RegisteredModel, out: list[Violation]) -> dict[str, FeatureRule]:
    """The feature overrides as the spec's rules, per feature name, each checked against the
    model's feature."""
    rules: dict[str, FeatureRule] = {}
    for i, override in enumerate(request.overrides):
        field = f"overrides[{i}]"
        spec = model.feature(override.name)
        if spec is None:
            out.append((f"{field}.name", f"unknown feature {echo(override.name)}"))
            continue
        if override.name in rules:
            out.append((f"{field}.name", f"feature {override.name!r} is overridden twice"))
            continue
        fields = _override(override, spec, field, out)
        try:
            rules[override.name] = feature_rule(fields)
        except InvalidInputError as exc:
            out.append((f"{field}.{exc.field}", exc.problem))
    return rules


def _instance(request: pb.ExplainRequest, model: RegisteredModel, out: list[Violation]) -> dict[str, Any]:
    """The instance's values, typed by the model's schema: every model feature needs a value,
    and every value a model feature."""
    return instance_values(request.instance, model, "instance", out)


def instance_values(
    values: Mapping[str, pb.FeatureValue],
    model: RegisteredModel,
    field: str,
    out: list[Violation],
    *,
    extra: Collection[str] = (),
) -> dict[str, Any]:
    """``values`` typed by the model's schema (a bad one named ``FIELD[NAME]``): every model
    feature needs a value, and every value a model feature or one of ``extra`` (columns the
    caller reads, such as an audit's group columns; their plain values are kept as they are)."""
    instance: dict[str, Any] = {}
    for name in values:
        if model.feature(name) is None and name not in extra:
            out.append((f"{field}[{name}]", "unknown feature"))
    for spec in model.features:
        where = f"{field}[{spec.name}]"
        if spec.name not in values:
            out.append((where, "missing: every model feature needs a value"))
            continue
        value = _value(values[spec.name], spec, where, out)
        if value is None:
            continue
        instance[spec.name] = None if value is _MISSING else value
    for name in extra:
        if name in values and model.feature(name) is None:
            instance[name] = plain_value(values[name])
    return instance


def _features(
    model: RegisteredModel, instance: dict[str, Any], spec: ProblemSpec, out: list[Violation]
) -> list[AnyFeature]:
    """The instance's features under the request's spec over the model's own, built by the model's
    explainer (its profile: the card's training data or its schema); a bad one is named, the
    instance's value or the request's override, whichever it is."""
    try:
        features = model.features_of(instance, spec)
    except InstanceError as exc:  # the instance's values, and rules that do not fit their feature
        for name, problem in exc.problems:
            overridden = name in spec.features and "domain" in problem  # the request's domain left the value out
            out.append((f"overrides.{name}" if overridden else _wire_field(name), problem))
        return []
    except InvalidInputError as exc:
        out.append((_wire_field(exc.field), exc.problem))
        return []
    if spec.goals is None and model.spec.goals is None:  # the default question needs a binary classifier
        try:
            default_goals(model.adapter)
        except InvalidInputError as exc:
            out.append((exc.field, exc.problem))
    return features


def _wire_field(field: str) -> str:
    """Where a problem's field is on the wire: a rule's (``features.NAME.allowed``) is the
    request's override of NAME, anything else a feature of the instance (``instance[NAME]``)."""
    head, _, rest = field.partition(".")
    if head == "features" and rest:
        return f"overrides.{rest}"
    if field in ("immutable", "fill_missing") or "." in field:
        return field
    return f"instance[{field}]"


def _margin(request: pb.ExplainRequest, out: list[Violation]) -> float | None:
    """``request.margin``, checked: every class goal that sets none gets it (the default's too)."""
    if not request.HasField("margin"):
        return None
    margin = request.margin
    if not (math.isfinite(margin) and 0.0 <= margin <= MAX_MARGIN):
        out.append(("margin", f"must be a number from 0 to {MAX_MARGIN}, given {margin}"))
        return None
    return margin


def _metric(request: pb.ExplainRequest, model: RegisteredModel, out: list[Violation]) -> tuple[str, dict[str, float]]:
    """The distance metric and the scorecard distance's weights (``alpha``, ``beta``), checked
    against what the model offers (a scorecard, the statistics a metric scales by)."""
    metric = _METRICS.get(request.distance_metric)
    if metric is None:
        out.append(("distance_metric", f"unknown value {request.distance_metric}"))
        metric = "auto"
    weights = {"alpha": 1.0, "beta": 1.0}
    for name in weights:
        if request.HasField(f"scorecard_{name}"):
            weight = getattr(request, f"scorecard_{name}")
            if metric != "scorecard":
                out.append((f"scorecard_{name}", "only with distance_metric DISTANCE_METRIC_SCORECARD"))
            elif not (math.isfinite(weight) and 0.0 <= weight <= 1e6):
                out.append((f"scorecard_{name}", f"must be a number from 0 to 1e6, given {weight}"))
            else:
                weights[name] = weight
    if metric == "scorecard" and not model.scorecard:
        out.append(("distance_metric", f"model {model.id!r} is not a scorecard"))
    elif metric not in ("auto", "range_l1", "scorecard"):
        numeric = [f.name for f in model.features if f.kind in ("integer", "float") and not f.immutable]
        stat = "mad" if metric == "mad_l1" else "std"
        missing = [n for n in numeric if getattr(model.statistics.get(n), stat, None) is None]
        if missing:
            out.append(("distance_metric", f"the model has no {stat} statistics for {missing}"))
    return metric, weights


def _change_penalty(request: pb.ExplainRequest, out: list[Violation]) -> float:
    """The distance added per changed feature (0 when not given, or when out of range)."""
    penalty = request.change_penalty if request.HasField("change_penalty") else 0.0
    if not (math.isfinite(penalty) and 0.0 <= penalty <= MAX_CHANGE_PENALTY):
        out.append(("change_penalty", f"must be a number from 0 to {MAX_CHANGE_PENALTY:g}, given {penalty}"))
        penalty = 0.0
    return penalty


def _check_plausible(
    request: pb.ExplainRequest,
    model: RegisteredModel,
    goals: list[ClassGoal | ValueGoal | RangeGoal],
    out: list[Violation],
) -> None:
    """Plausibility needs the model's training data and a class goal."""
    if request.plausible and model.reference is None:
        out.append(("plausible", f"model {model.id!r} has no training data to judge plausibility"))
    if request.plausible and goals and not any(isinstance(g, ClassGoal) for g in goals):  # none: the default's is
        out.append(("plausible", "needs a class goal"))


def _trust_region(
    request: pb.ExplainRequest, model: RegisteredModel, out: list[Violation]
) -> TrustRegionSettings | None:
    """The request's trust region settings, checked (None: no trust region)."""
    if not request.HasField("trust_region"):
        return None
    message = request.trust_region
    if model.reference is None:
        out.append(("trust_region", f"model {model.id!r} has no training data with its label column"))
        return None
    fields: dict[str, Any] = {}
    if message.HasField("nearest"):
        if not 1 <= message.nearest <= MAX_TRUST_REGION_ROWS:
            out.append(("trust_region.nearest", f"must be 1 to {MAX_TRUST_REGION_ROWS}, given {message.nearest}"))
            return None
        fields["nearest"] = message.nearest
    if message.HasField("slack"):
        if not (math.isfinite(message.slack) and 0.0 <= message.slack <= 1e3):
            out.append(("trust_region.slack", f"must be a number from 0 to 1000, given {message.slack}"))
            return None
        fields["slack"] = message.slack
    if message.HasField("enlarge_when_infeasible"):
        fields["enlarge_when_infeasible"] = message.enlarge_when_infeasible
    return TrustRegionSettings(max_reference_rows=MAX_TRUST_REGION_ROWS, **fields)


def _override(override: pb.FeatureOverride, spec: FeatureSpec, field: str, out: list[Violation]) -> dict[str, Any]:
    """The fields an override replaces, each checked against the feature (in this order)."""
    result: dict[str, Any] = {}
    if override.HasField("constrained"):
        result["constrained"] = override.constrained
    if override.monotone:
        result |= _monotone(override.monotone, field, out)
    result |= _listed_choices(override, spec, field, out)
    if override.HasField("precision"):
        result |= _precision(override.precision, spec, field, out)
    if override.HasField("fill_missing"):
        result["fill_missing"] = override.fill_missing
    if override.HasField("cost"):
        result |= _cost(override.cost, field, out)
    if override.HasField("domain"):
        result |= _domain(override.domain, spec, field, out)
    return result


def _monotone(monotone: pb.Monotone, field: str, out: list[Violation]) -> dict[str, Any]:
    if monotone not in _MONOTONE:
        out.append((f"{field}.monotone", f"unknown value {monotone}"))
        return {}
    return {"monotone": _MONOTONE[monotone]}


def _listed_choices(
    override: pb.FeatureOverride, spec: FeatureSpec, field: str, out: list[Violation]
) -> dict[str, Any]:
    """The values a change may reach (a number's, a category's by its text or its code) and the
    ones it may not; whether they fit the feature is checked where the feature is built, as for
    a local run."""
    result: dict[str, Any] = {}
    for name, count in (
        ("allowed_values", len(override.allowed_values)),
        ("allowed_categories", len(override.allowed_categories)),
        ("forbidden", len(override.forbidden)),
    ):
        if count > MAX_ALLOWED_VALUES:
            out.append((f"{field}.{name}", f"{count:,} values; at most {MAX_ALLOWED_VALUES:,}"))
            return {}
    forbidden = [plain_value(v) for v in override.forbidden]
    listed = [("allowed_values", list(override.allowed_values)), ("forbidden", forbidden)]
    bad = [(f"{field}.{name}[{i}]", v) for name, values in listed for i, v in enumerate(values) if _not_finite(v)]
    out += [(name, f"must be a finite number, given {value!r}") for name, value in bad[:3]]
    if bad:  # NaN is no value a change can reach (pydantic's message would name each type it tried)
        return {}
    allowed = (*override.allowed_values, *override.allowed_categories)
    if allowed:
        result["allowed"] = allowed
    if override.forbidden:
        if any(v is None for v in forbidden):
            out.append((f"{field}.forbidden", "give values (a missing value cannot be forbidden)"))
        else:
            result["forbidden"] = tuple(forbidden)
    return result


def _not_finite(value: Any) -> bool:
    """A number that is NaN or infinite (a category's text or a boolean is not a number)."""
    return isinstance(value, float) and not math.isfinite(value)


def _precision(precision: int, spec: FeatureSpec, field: str, out: list[Violation]) -> dict[str, Any]:
    if spec.kind != "float":
        out.append((f"{field}.precision", f"feature {spec.name!r} is {spec.kind}; only floats have a precision"))
    elif not -9 <= precision <= 12:
        out.append((f"{field}.precision", f"must be -9 to 12 decimals, given {precision}"))
    else:
        return {"precision": precision}
    return {}


def _cost(cost: float, field: str, out: list[Violation]) -> dict[str, Any]:
    if not (math.isfinite(cost) and cost > 0):
        out.append((f"{field}.cost", f"must be above 0, given {cost}"))
        return {}
    return {"cost": cost}


def _domain(domain: pb.FeatureDomain, spec: FeatureSpec, field: str, out: list[Violation]) -> dict[str, Any]:
    """A replaced domain: bounds for a number, categories for a category; a boolean's is fixed."""
    if spec.kind in ("integer", "float"):
        return _numeric_domain(domain, spec, field, out)
    if spec.kind == "categorical":
        return _categorical_domain(domain, spec, field, out)
    out.append((f"{field}.domain", f"feature {spec.name!r} is boolean: its domain is fixed"))
    return {}


def _numeric_domain(domain: pb.FeatureDomain, spec: FeatureSpec, field: str, out: list[Violation]) -> dict[str, Any]:
    if domain.categories:
        out.append((f"{field}.domain.categories", f"feature {spec.name!r} is numeric"))
    if domain.HasField("low") != domain.HasField("high"):
        out.append((f"{field}.domain", "give both low and high"))
    elif domain.HasField("low"):
        if not (math.isfinite(domain.low) and math.isfinite(domain.high)):
            out.append((f"{field}.domain", "bounds must be finite"))
        elif domain.low > domain.high:
            out.append((f"{field}.domain", f"empty domain: low {domain.low} > high {domain.high}"))
        elif max(abs(domain.low), abs(domain.high)) > MAX_MAGNITUDE:
            out.append((f"{field}.domain", f"bounds must be within +-2^53 ({MAX_MAGNITUDE:,})"))
        else:
            return {"low": domain.low, "high": domain.high}
    return {}


def _categorical_domain(
    domain: pb.FeatureDomain, spec: FeatureSpec, field: str, out: list[Violation]
) -> dict[str, Any]:
    if domain.HasField("low") or domain.HasField("high"):
        out.append((f"{field}.domain", f"feature {spec.name!r} is categorical: give categories"))
    if len(domain.categories) > MAX_ALLOWED_VALUES:
        out.append(
            (f"{field}.domain.categories", f"{len(domain.categories):,} categories; at most {MAX_ALLOWED_VALUES:,}")
        )
    elif domain.categories:
        return {"categories": list(domain.categories)}
    if not domain.HasField("low") and not domain.categories:
        out.append((f"{field}.domain.categories", "empty domain: give at least one category"))
    return {}


def _value(value: pb.FeatureValue, spec: FeatureSpec, field: str, out: list[Violation]) -> Any:
    kind = value.WhichOneof("kind")
    if kind is None:
        out.append((field, "no value set"))
        return None
    raw = getattr(value, kind)
    if kind == "missing":
        if not raw:
            out.append((field, "missing must be true when set"))
        return _MISSING
    if spec.kind in ("float", "integer") and kind in ("number_value", "integer_value"):
        return _number(raw, kind, spec, field, out)
    if spec.kind == "categorical" and kind == "category_value":
        return raw
    if spec.kind == "boolean" and kind == "bool_value":
        return raw
    expected = {
        "float": "number_value",
        "integer": "integer_value",
        "categorical": "category_value",
        "boolean": "bool_value",
    }
    out.append(
        (field, f"wrong type: feature {spec.name!r} is {spec.kind}, expects {expected[spec.kind]}, given {kind}")
    )
    return None


def _number(raw: Any, kind: str, spec: FeatureSpec, field: str, out: list[Violation]) -> Any:
    """A number for a float or integer feature (None, with the violation, when it is none)."""
    if spec.kind == "float":
        if not math.isfinite(raw):
            out.append((field, f"must be finite, given {raw}"))
            return None
        return float(raw)
    if kind == "number_value" and not (math.isfinite(raw) and float(raw).is_integer()):
        if spec.stored_as_float and math.isfinite(raw):
            return float(raw)  # an imputed mean in a whole-number column: kept, as locally
        out.append((field, f"integer feature given {raw}"))
        return None
    return int(raw)


def _goals(
    request: pb.ExplainRequest, outputs: tuple[OutputSpec, ...], out: list[Violation]
) -> list[ClassGoal | ValueGoal | RangeGoal]:
    goals: list[ClassGoal | ValueGoal | RangeGoal] = []
    if not request.goals:
        return goals  # the model's default question (see _default_goals)
    for i, goal in enumerate(request.goals):
        built = _goal(goal, f"goals[{i}]", out)
        if built is not None:
            goals.append(built)
    if goals and len(goals) == len(request.goals):
        try:
            bind_goals(goals, outputs)
        except InvalidInputError as exc:
            out.append((exc.field, exc.problem))
    return goals


def _goal(goal: pb.Goal, field: str, out: list[Violation]) -> ClassGoal | ValueGoal | RangeGoal | None:
    """One goal (None, its bad fields named in ``out``, when it is bad). It is checked without its
    output, so that each bad field is named ``FIELD.NAME`` however the output is named: a goal's
    error names its fields after the output (``goal[approved].confidence``), and a long name was
    cut with the field's own name in it (``goals[0].goal[QQQ… (317 characters)``)."""
    kind = goal.WhichOneof("target")
    try:
        if kind == "class_target":
            target = goal.class_target
            confidence = target.confidence if target.HasField("confidence") else None
            margin = {"margin": target.margin} if target.HasField("margin") else {}
            built: ClassGoal | ValueGoal | RangeGoal = ClassGoal(target=target.label, confidence=confidence, **margin)
        elif kind == "value_target":
            built = ValueGoal(value=goal.value_target.value, tolerance=goal.value_target.tolerance)
        elif kind == "range_target":
            built = RangeGoal(low=goal.range_target.low, high=goal.range_target.high)
        else:
            out.append((f"{field}.target", "set one of class_target, value_target, range_target"))
            return None
    except InvalidInputError as exc:  # each bad field of the goal (a confidence and a margin: both)
        for name, problem in exc.parts:
            own = name.removeprefix("goal").removeprefix(".")
            out.append((f"{field}.{own}" if own else field, problem))
        return None
    return built.model_copy(update={"output": goal.output}) if goal.output else built


def _solver(spec: pb.SolverSpec, default: SolverConfig, out: list[Violation]) -> tuple[SolverConfig, int | None]:
    config = default
    if spec.config_json:
        try:
            config = SolverConfig.from_yaml(spec.config_json)
        except ConfigError as exc:  # each bad field of the configuration
            out += [(f"solver.config_json.{field}", problem) for field, problem in exc.parts]
    if spec.engine:
        config = _with_acceptor(config, spec.engine, out)
    if spec.HasField("termination"):
        config = _with_termination(config, spec.termination, out)
    if spec.HasField("auto_engine"):
        config = _with_auto(config, spec.auto_engine, out)
    seed = spec.seed if spec.HasField("seed") else None
    if seed is not None and not 0 <= seed <= MAX_SEED:
        out.append(("solver.seed", f"must be 0 to {MAX_SEED}, given {seed}"))
        seed = None
    return config, seed


def _with_acceptor(config: SolverConfig, engine: pb.Engine, out: list[Violation]) -> SolverConfig:
    """``config`` with the acceptor the request's ``engine`` names in every local search phase."""
    preset = _ACCEPTORS.get(engine)
    if preset is None:
        out.append(("solver.engine", f"unknown engine {engine}"))
        return config
    return with_acceptor_preset(config, preset)


def _with_auto(config: SolverConfig, auto: pb.AutoEngine, out: list[Violation]) -> SolverConfig:
    """``config`` with the request's typed ``auto`` budget (each set field replaces the
    configuration's), each a finite number of seconds above 0 and at most
    :data:`MAX_AUTO_BUDGET_SECONDS`. The server caps them at the solve's time limit when it
    starts it (:meth:`counterplan.server.grpc.explain_steps.ExplainSteps.start`)."""
    asked: dict[str, float] = {}
    for name in ("budget_seconds", "exact_improvement_seconds"):
        if auto.HasField(name):
            value = getattr(auto, name)
            if not (math.isfinite(value) and 0.0 < value <= MAX_AUTO_BUDGET_SECONDS):
                problem = f"must be a finite number of seconds above 0 and at most {MAX_AUTO_BUDGET_SECONDS:g}"
                out.append((f"solver.auto_engine.{name}", f"{problem}, given {value:g}"))
            else:
                asked[name] = value
    if not asked:
        return config
    return config.model_copy(update={"auto": AutoConfig(**{**config.auto.model_dump(), **asked})})


def _with_termination(config: SolverConfig, t: pb.Termination, out: list[Violation]) -> SolverConfig:
    """``config`` ended also by the request's limits (whichever comes first)."""
    limits: dict[str, Any] = {}
    for name in (
        "spent_limit_seconds",
        "unimproved_spent_limit_seconds",
        "step_count_limit",
        "unimproved_step_count_limit",
        "score_calculation_count_limit",
    ):
        if t.HasField(name):
            value = getattr(t, name)
            if not value > 0:
                out.append((f"solver.termination.{name}", f"must be above 0, given {value}"))
            else:
                limits[name] = value
    if t.best_score_limit:
        limits["best_score_limit"] = t.best_score_limit
    try:
        extra = TerminationConfig(**limits)
        config = config.model_copy(update={"termination": TerminationConfig(children=(config.termination, extra))})
    except ConfigError as exc:
        out.append((f"solver.termination.{exc.field}", exc.problem))
    return config


def value_message(value: Any) -> pb.FeatureValue:
    """A Python feature value as a ``FeatureValue`` (None, NaN, pandas' NA: missing; pandas' NA
    was sent as the category ``'<NA>'``)."""
    if is_missing(value):
        return pb.FeatureValue(missing=True)
    if isinstance(value, bool):
        return pb.FeatureValue(bool_value=value)
    if isinstance(value, int):
        return pb.FeatureValue(integer_value=value)
    if isinstance(value, float):
        return pb.FeatureValue(number_value=value)
    return pb.FeatureValue(category_value=str(value))


def plain_value(value: pb.FeatureValue) -> Any:
    """A ``FeatureValue`` as a Python value (None when missing)."""
    kind = value.WhichOneof("kind")
    return getattr(value, kind) if kind and kind != "missing" else None


def score_message(levels: list[float], text: str, feasible: bool) -> pb.Score:
    """The score message."""
    return pb.Score(hard_levels=levels[:3], soft_levels=levels[3:], text=text, feasible=feasible)


def _predictions(predictions: dict[str, Any]) -> list[pb.OutputPrediction]:
    out = []
    for name, value in predictions.items():
        if isinstance(value, dict):
            out.append(pb.OutputPrediction(output=name, probabilities=value))
        else:
            out.append(pb.OutputPrediction(output=name, value=value))
    return out


def _change_messages(changes: list[Change]) -> list[pb.FeatureChange]:
    """Changed features as messages (a scorecard variable's bins when it has them)."""
    return [
        pb.FeatureChange(
            feature=c.feature,
            original=value_message(c.original),
            proposed=value_message(c.proposed),
            original_bin=c.original_bin or "",
            proposed_bin=c.proposed_bin or "",
        )
        for c in changes
    ]


def result_message(result: CounterfactualResult, request_id: str, model_id: str) -> pb.ExplainResponse:
    """A solve's result as an ``ExplainResponse``."""
    s = result.statistics
    return pb.ExplainResponse(
        request_id=request_id,
        model_id=model_id,
        goal=result.goal,
        goal_default=result.goal_default,
        proposed={k: value_message(v) for k, v in result.proposed.items()},
        changes=_change_messages(result.changes),
        predictions=_predictions(result.predictions),
        original_predictions=_predictions(result.original_predictions),
        score=score_message(result.score_levels, result.score, result.feasible),
        valid=result.valid,
        feasible=result.feasible,
        counterfactuals=[
            pb.Counterfactual(
                proposed={k: value_message(v) for k, v in c.proposed.items()},
                changes=_change_messages(c.changes),
                predictions=_predictions(c.predictions),
                score=score_message(c.score_levels, c.score, c.feasible),
                valid=c.valid,
                feasible=c.feasible,
            )
            for c in result.counterfactuals
        ],
        note=result.note or "",
        original={k: value_message(v) for k, v in result.original.items()},
        requested=result.requested,
        failure=result.failure or "",
        blocked_by=result.blocked_by,
        reaches=result.reaches,
        already_met=result.already_met,
        held_fixed=result.held_fixed,
        feature_names=list(result.original),
        stopped_early=result.stopped_early,
        statistics=pb.SolveStatistics(
            steps=s.steps,
            score_calculation_count=s.score_calculation_count,
            model_call_count=s.model_call_count,
            score_calculation_speed=s.score_calculation_speed,
            time_spent_seconds=s.time_spent_seconds,
            best_found_at_step=s.best_found_at_step,
            termination_reason=s.termination_reason,
            best_found_after_seconds=s.best_found_after_seconds,
            engine=s.engine,
            engine_reason=s.engine_reason,
            exact=_exact_message(s.exact),
            swarm=pb.SwarmStatistics(**s.swarm.model_dump()) if s.swarm is not None else None,
        ),
    )


def _exact_message(exact: ExactStatistics | None) -> pb.ExactStatistics | None:
    if exact is None:
        return None
    fields = exact.model_dump()
    return pb.ExactStatistics(**{k: v for k, v in fields.items() if v is not None})


def event_message(event: BestSolutionEvent, sequence_id: int) -> pb.ExplainStreamResponse:
    """An intermediate best solution as a stream message."""
    return pb.ExplainStreamResponse(
        sequence_id=sequence_id,
        stage=pb.STAGE_INTERMEDIATE,
        score=score_message(event.score_levels, event.score, event.feasible),
        proposed={k: value_message(v) for k, v in event.values.items()},
        time_spent_seconds=event.time_spent_seconds,
        step_index=event.step_index,
    )


def model_message(model: RegisteredModel) -> pb.Model:
    """A registered model's schema as a ``Model``."""
    types = {
        "integer": pb.FEATURE_TYPE_INTEGER,
        "float": pb.FEATURE_TYPE_FLOAT,
        "categorical": pb.FEATURE_TYPE_CATEGORICAL,
        "boolean": pb.FEATURE_TYPE_BOOLEAN,
    }
    features = []
    for f in model.features:
        domain = pb.FeatureDomain(categories=list(f.categories or ()))
        if f.low is not None and f.high is not None:
            domain.low, domain.high = f.low, f.high
        monotone = {"increase": pb.MONOTONE_INCREASE, "decrease": pb.MONOTONE_DECREASE}.get(
            f.monotone or "", pb.MONOTONE_UNSPECIFIED
        )
        schema = pb.FeatureSchema(
            name=f.name, type=types[f.kind], domain=domain, immutable=f.immutable, monotone=monotone, cost=f.cost
        )
        if f.precision is not None:
            schema.precision = f.precision
        features.append(schema)
    outputs = [pb.OutputSchema(name=o.name, classes=[str(c) for c in o.classes or ()]) for o in model.outputs]
    return pb.Model(
        id=model.id,
        version=model.version,
        description=model.description,
        features=features,
        outputs=outputs,
        default_solver_config_json=model.default_config.model_dump_json(),
    )
