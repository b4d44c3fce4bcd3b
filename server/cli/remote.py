"""``counterplan explain --server``: the same command, solved by a server, shown live."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from rich.console import Console

from counterplan.server._generated.counterplan.v1 import counterplan_pb2 as pb
from counterplan.server.cli.flags import EXIT_NOT_FOUND, UsageError
from counterplan.server.cli.problem_flags import flag_errors, problem_spec
from counterplan.server.grpc.client import CounterplanClient
from counterplan.server.grpc.convert import plain_value
from counterplan.server.grpc.spec_request import explain_request
from counterplan.server.registry.loading import load_instance
from counterplan.server.registry.registry import DEMO_ID
from counterplan.solver.exact.report import ExactStatistics
from counterplan.solver.result import BestSolutionEvent, Change, Counterfactual, CounterfactualResult, SolveStatistics
from counterplan.solver.swarm.report import SwarmStatistics

_ENGINE_CHOICES = {
    "local": pb.ENGINE_CHOICE_LOCAL,
    "exact": pb.ENGINE_CHOICE_EXACT,
    "swarm": pb.ENGINE_CHOICE_SWARM,
    "auto": pb.ENGINE_CHOICE_AUTO,
}


def explain_remote(client: CounterplanClient, args: argparse.Namespace) -> int:
    """Stream a solve from the server, with the live best-score line; print like ``explain``."""
    from counterplan.server.cli.render import print_result, progress_line  # noqa: PLC0415

    spec = problem_spec(args)  # the same spec as a local run, sent as the request's fields
    solver = _solver_spec(args)
    with flag_errors():  # an option the wire cannot carry is named by its flag
        request = explain_request(
            args.model_id, remote_instance(args), spec, num_counterfactuals=args.num_counterfactuals
        )
    request.solver.CopyFrom(solver)
    err = Console(stderr=True)
    final: pb.ExplainResponse | None = None
    show = not args.no_progress and not args.json and err.is_terminal
    with err.status("searching on the server...") as status:
        for message in client.explain_stream(request, timeout=None):
            if message.stage == pb.STAGE_FINAL:
                final = message.result
            elif show:
                status.update(progress_line(_event(message)))
    assert final is not None, "the server's stream ended without a FINAL message"
    result = _result(final)
    if args.json:  # the same schema as a local explain's --json
        print(result.model_dump_json(indent=2))
    else:
        print_result(result, Console())
    return 0 if result.valid else EXIT_NOT_FOUND


def remote_instance(args: argparse.Namespace) -> dict[str, Any]:
    """``--instance``, or the demo's rejected applicant when the served model is the demo's."""
    if args.instance:
        return load_instance(args.instance)
    if args.model_id == DEMO_ID:
        from counterplan.planning.demo import rejected_applicant  # noqa: PLC0415

        return rejected_applicant()
    raise UsageError(f"--instance is needed: only the demo model {DEMO_ID!r} has a default instance")


def _solver_spec(args: argparse.Namespace) -> pb.SolverSpec:
    """``--engine``, ``--seed``, ``--config`` (the file's text) and ``--time-limit`` as a
    ``SolverSpec``, each flag checked by name first (protobuf's errors name none)."""
    from counterplan.server.cli.bounds import check_seconds, check_seed  # noqa: PLC0415

    if args.threads is not None:  # the server's operator sets them
        raise UsageError("--threads sets this process's model threads; a server's are set by serve --model-threads")
    check_seconds("--time-limit", args.time_limit, UsageError)
    check_seed("--seed", args.seed, UsageError)
    solver = pb.SolverSpec()
    if args.engine is not None:
        solver.engine_choice = _ENGINE_CHOICES[args.engine]
    if args.seed is not None:
        solver.seed = args.seed
    if args.config:
        with open(args.config, encoding="utf-8") as handle:
            solver.config_json = handle.read()
    if args.time_limit is not None:
        solver.termination.spent_limit_seconds = args.time_limit
    return solver


def _event(message: pb.ExplainStreamResponse) -> BestSolutionEvent:
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


def _result(message: pb.ExplainResponse) -> CounterfactualResult:
    s = message.statistics
    order = list(message.feature_names) or list(message.original)  # a map has no order; the model's has
    return CounterfactualResult(
        goal=message.goal,
        goal_default=message.goal_default if message.HasField("goal_default") else None,
        original=_values(message.original, order),
        proposed=_values(message.proposed, order),
        changes=[
            Change(
                feature=c.feature,
                original=plain_value(c.original),
                proposed=plain_value(c.proposed),
                original_bin=c.original_bin or None,
                proposed_bin=c.proposed_bin or None,
            )
            for c in message.changes
        ],
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
        changes=[
            Change(
                feature=c.feature,
                original=plain_value(c.original),
                proposed=plain_value(c.proposed),
                original_bin=c.original_bin or None,
                proposed_bin=c.proposed_bin or None,
            )
            for c in message.changes
        ],
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
