"""``counterplan explain --server``: the same command, solved by a server, shown live."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from counterplan.server._generated.counterplan.v1 import counterplan_pb2 as pb
from counterplan.server.cli.flags import EXIT_NOT_FOUND, UsageError
from counterplan.server.cli.problem_flags import flag_errors, problem_spec
from counterplan.server.grpc.client import CounterplanClient
from counterplan.server.grpc.result_convert import result_of, stream_event
from counterplan.server.grpc.spec_request import explain_request
from counterplan.server.registry.loading import load_instance
from counterplan.server.registry.registry import DEMO_ID

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
    solver = solver_spec(args)
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
                status.update(progress_line(stream_event(message)))
    assert final is not None, "the server's stream ended without a FINAL message"
    result = result_of(final)
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


def solver_spec(args: argparse.Namespace) -> pb.SolverSpec:
    """``--engine``, ``--seed``, ``--config`` (the file's text), ``--time-limit``,
    ``--auto-budget`` and ``--auto-improve`` as a ``SolverSpec``, each flag checked by name first
    (protobuf's errors name none)."""
    from counterplan.server.cli.bounds import check_seconds, check_seed  # noqa: PLC0415
    from counterplan.solver.core.config import MAX_AUTO_BUDGET_SECONDS  # noqa: PLC0415

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
    auto = {"budget_seconds": "auto_budget", "exact_improvement_seconds": "auto_improve"}
    for field, name in auto.items():
        value = getattr(args, name, None)
        check_seconds(f"--{name.replace('_', '-')}", value, UsageError, MAX_AUTO_BUDGET_SECONDS)
        if value is not None:
            setattr(solver.auto_engine, field, value)
    return solver
