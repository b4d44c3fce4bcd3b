"""A response as the local result: the client's half of :func:`counterplan.server.grpc.convert.result_message`.

``explain --server`` prints and dumps what a local explain does, key for key, so a response
becomes a :class:`~counterplan.solver.result.CounterfactualResult` (and a stream message a
:class:`~counterplan.solver.result.BestSolutionEvent`): values in the model's feature order (a
proto map has none), probabilities in class order, the engines' reports as their typed models.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from counterplan.server._generated.counterplan.v1 import counterplan_pb2 as pb
from counterplan.server.grpc.convert import plain_value
from counterplan.solver.exact.report import ExactStatistics
from counterplan.solver.result import BestSolutionEvent, Change, Counterfactual, CounterfactualResult, SolveStatistics
from counterplan.solver.swarm.report import SwarmStatistics


def _changes(items: Iterable[pb.FeatureChange]) -> list[Change]:
    """Changed features as a result lists them (a scorecard variable's bins when it has them)."""
    return [
        Change(
            feature=c.feature,
            original=plain_value(c.original),
            proposed=plain_value(c.proposed),
            original_bin=c.original_bin or None,
            proposed_bin=c.proposed_bin or None,
        )
        for c in items
    ]


def stream_event(message: pb.ExplainStreamResponse) -> BestSolutionEvent:
    """An intermediate stream message as the best-solution event a local listener hears."""
    return BestSolutionEvent(
        score=message.score.text,
        score_levels=[*message.score.hard_levels, *message.score.soft_levels],
        feasible=message.score.feasible,
        values={k: plain_value(v) for k, v in message.proposed.items()},
        time_spent_seconds=message.time_spent_seconds,
        step_index=message.step_index,
        score_calculation_count=0,
    )


def _predictions(items: list[pb.OutputPrediction]) -> dict[str, object]:
    """Outputs as a local result has them: probabilities in class order (a proto map has none)."""
    return {p.output: _in_class_order(dict(p.probabilities)) if p.probabilities else p.value for p in items}


def _in_class_order(probabilities: dict[str, float]) -> dict[str, float]:
    def key(label: str) -> tuple[int, float, str]:
        try:
            return (0, float(label), label)
        except ValueError:
            return (1, 0.0, label)

    return {label: probabilities[label] for label in sorted(probabilities, key=key)}


def result_of(message: pb.ExplainResponse) -> CounterfactualResult:
    """A final ``ExplainResponse`` as the result a local explain returns."""
    s = message.statistics
    order = list(message.feature_names) or list(message.original)  # a map has no order; the model's has
    return CounterfactualResult(
        goal=message.goal,
        goal_default=message.goal_default if message.HasField("goal_default") else None,
        original=_values(message.original, order),
        proposed=_values(message.proposed, order),
        changes=_changes(message.changes),
        predictions=_predictions(list(message.predictions)),
        original_predictions=_predictions(list(message.original_predictions)),
        score=message.score.text,
        score_levels=[*message.score.hard_levels, *message.score.soft_levels],
        valid=message.valid,
        feasible=message.feasible,
        statistics=SolveStatistics(
            steps=s.steps,
            score_calculation_count=s.score_calculation_count,
            model_call_count=s.model_call_count,
            score_calculation_speed=s.score_calculation_speed,
            time_spent_seconds=s.time_spent_seconds,
            best_found_at_step=s.best_found_at_step,
            best_found_after_seconds=s.best_found_after_seconds,
            termination_reason=s.termination_reason,
            engine=s.engine or "local",
            engine_reason=s.engine_reason,
            exact=_exact(s.exact) if s.HasField("exact") else None,
            swarm=_swarm(s.swarm) if s.HasField("swarm") else None,
        ),
        failure=message.failure or None,
        counterfactuals=[_counterfactual(c, order) for c in message.counterfactuals],
        requested=message.requested or 1,
        blocked_by=list(message.blocked_by),
        reaches=message.reaches,
        held_fixed=list(message.held_fixed),
        already_met=message.already_met,
    )


def _swarm(message: pb.SwarmStatistics) -> SwarmStatistics:
    """The swarm's report, as the local result holds it (the message has the same fields)."""
    values = {name: getattr(message, name) for name in SwarmStatistics.model_fields}
    values["searched_features"] = list(message.searched_features)
    return SwarmStatistics(**values)


def _values(values: Mapping[str, pb.FeatureValue], order: list[str]) -> dict[str, object]:
    """A proto map of values as a dict in the model's feature order (names it lacks are None)."""
    known = set(order)
    names = order + [name for name in values if name not in known]
    return {name: plain_value(values[name]) if name in values else None for name in names}


def _counterfactual(message: pb.Counterfactual, order: list[str]) -> Counterfactual:
    return Counterfactual(
        proposed=_values(message.proposed, order),
        changes=_changes(message.changes),
        predictions=_predictions(list(message.predictions)),
        score=message.score.text,
        score_levels=[*message.score.hard_levels, *message.score.soft_levels],
        valid=message.valid,
        feasible=message.feasible,
    )


def _exact(message: pb.ExactStatistics) -> ExactStatistics:
    """The exact engine's report as a local result has it (unset optional numbers: None)."""
    optional = {
        name: getattr(message, name) if message.HasField(name) else None for name in ("objective", "bound", "gap")
    }
    return ExactStatistics(
        status=message.status,
        proven=message.proven,
        model=message.model,
        nodes=message.nodes,
        seconds=message.seconds,
        variables=message.variables,
        constraints=message.constraints,
        verified=message.verified,
        retries=message.retries,
        reason=message.reason,
        backend=message.backend,
        answer_set=message.answer_set,
        answer_set_reason=message.answer_set_reason,
        **optional,
    )
