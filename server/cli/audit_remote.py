"""``counterplan audit --server``: the same audit, run by a server's ``Audit`` call.

The question is the same spec a local audit builds from the flags
(:func:`counterplan.server.cli.problem_flags.problem_spec`), sent as the request's ``problem``
(:func:`counterplan.server.grpc.spec_request.explain_request`), so a flag means the same on a
server; the rows are a selection of the served model card's training data (``--rows``). The
report comes back whole and is written to ``--out/audit.json`` (the command prints it as a local
audit's);
the rows' records stay on the server, so there is no ``rows.parquet`` or ``report.html``. What a
server does not do is refused by name: the local model and data flags, workers, Ray, a window,
``--resume`` and positions in ``--rows`` (a refit, ``--retrain``, the server refuses itself).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from counterplan.server._generated.counterplan.v1 import counterplan_pb2 as pb
from counterplan.server.cli.flags import RemoteError, server_refusal

if TYPE_CHECKING:
    from counterplan.solver.audit.report import AuditReport
    from counterplan.solver.audit.runner import Progress

LOCAL_ONLY = ("model", "data", "target", "ray", "window")
"""Flags that name what only a local audit has (the server's model card holds the model and data)."""


def remote_audit(args: argparse.Namespace, usage: Callable[[str], Exception], progress: Progress | None) -> AuditReport:
    """Run the audit on ``--server`` (``progress`` told each stage's rows done); write
    ``audit.json`` to ``--out`` and return the report."""
    from counterplan.solver.audit.report import AuditReport  # noqa: PLC0415

    _check_flags(args, usage)
    final = _stream(args, _request(args), usage, progress)
    if not final.report_json:
        raise RemoteError(f"the server sent no report: {final.note}")
    report = AuditReport.model_validate_json(final.report_json)
    out = Path(args.out)
    out.mkdir(exist_ok=True)
    (out / "audit.json").write_text(report.to_json(), encoding="utf-8")
    if final.partial:
        print(f"partial: stopped by {final.stopped_by} after {final.n_rows} rows", file=sys.stderr)
    return report


def _check_flags(args: argparse.Namespace, usage: Callable[[str], Exception]) -> None:
    given = [f"--{flag}" for flag in LOCAL_ONLY if getattr(args, flag) is not None]
    given += ["--trust-model"] * args.trust_model + ["--resume"] * args.resume
    given += [f"--workers {args.workers}"] * (args.workers != 1)
    if given:
        raise usage(f"{', '.join(given)}: with --server, the server's model card holds the model and its data")
    from counterplan.solver.audit.runner import AuditOptions  # noqa: PLC0415 - the server's audit runs its defaults

    rules, validity = AuditOptions.rules, AuditOptions.rule_validity
    own = [f"--rules {args.rules}"] * (args.rules != rules)
    own += [f"--rule-validity {args.rule_validity}"] * (args.rule_validity != validity)
    own += [] if args.screen is None else ["--screen" if args.screen else "--no-screen"]
    if own:  # an AuditRequest has no field for them: the server's audit ran its own, the report said nothing
        raise usage(
            f"{', '.join(own)}: with --server, the server's audit finds at most {rules} global rules of validity "
            f"{validity} and screens the rows as it decides; leave them out, or audit locally"
        )
    if args.out is None:
        raise usage("give --out: the directory for audit.json")
    if "," in args.rows or args.rows.strip().isdigit():
        raise usage("--rows: with --server, give rejected, all or START:STOP of the model card's data")


def _request(args: argparse.Namespace) -> pb.AuditRequest:
    """The flags as an ``AuditRequest``: the question as a local audit builds it, the rows a selection."""
    from counterplan.server.cli.problem_flags import comma_names, flag_errors, problem_spec  # noqa: PLC0415
    from counterplan.server.cli.remote import solver_spec  # noqa: PLC0415
    from counterplan.server.grpc.spec_request import explain_request  # noqa: PLC0415

    with flag_errors(instance_flag="--rows"):
        problem = explain_request(args.model_id, {}, problem_spec(args))
    problem.solver.CopyFrom(solver_spec(args))
    problem.solver.ClearField("seed")  # the audit's own
    request = pb.AuditRequest(
        model_id=args.model_id,
        selection=args.rows,
        groups=comma_names(args.group),
        seed=args.seed if args.seed is not None else 0,
        prove=not args.no_proof,
        bootstrap=args.bootstrap,
        confidence=args.confidence,
        retrain=args.retrain,
        problem=problem,
    )
    if args.prove_seconds is not None:
        request.prove_seconds = args.prove_seconds
    return request


def _stream(
    args: argparse.Namespace, request: pb.AuditRequest, usage: Callable[[str], Exception], progress: Progress | None
) -> pb.AuditResult:
    """The server's stream, each progress message told to ``progress``; its FINAL result."""
    import grpc  # noqa: PLC0415 - grpc loads only when a server is named

    from counterplan.server.grpc.client import CounterplanClient  # noqa: PLC0415

    try:
        with CounterplanClient(args.server, token=args.token, root_certificate=args.tls_ca) as client:
            for message in client.audit(request, timeout=None):
                if message.stage == pb.STAGE_FINAL:
                    return message.result
                if progress is not None:
                    progress(message.progress.stage, message.progress.rows_done, message.progress.rows_total)
    except grpc.RpcError as exc:
        raise server_refusal(exc, usage) from None
    raise RemoteError("the server's stream ended without the report")
