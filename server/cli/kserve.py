"""``counterplan kserve``: a KServe explainer for a model served by a KServe predictor.

KServe runs an explainer beside a predictor: its ingress sends ``POST /v1/models/NAME:explain``
to the explainer, which asks the predictor for predictions. This command is that explainer:
counterplan's search over the predictor's model, called over the Open Inference Protocol (V2,
REST or gRPC) as :class:`~counterplan.planning.remote.RemoteModel`. The predictor's model name is
``--model-name``, as KServe names both after the InferenceService. The training data (or a model
card) gives the features, their domains and statistics, and the class names; it is read once, at
start. See :mod:`counterplan.server.kserve` for the request and the answer.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from counterplan.server.cli.flags import UsageError
from counterplan.server.cli.problem_flags import add_problem_flags, add_search_flags
from counterplan.server.kserve import PREDICTOR_PROTOCOLS

if TYPE_CHECKING:
    from counterplan.planning.remote import RemoteModel
    from counterplan.planning.spec import ProblemSpec
    from counterplan.server.kserve.request import ExplainLimits
    from counterplan.solver.core.config import SolverConfig
    from counterplan.solver.explainer import Explainer

LIMIT_FLAGS = {
    "max_instances": "--max-instances",
    "max_instance_seconds": "--max-instance-seconds",
    "request_seconds": "--request-seconds",
    "max_counterfactuals": "--max-counterfactuals",
    "max_requests": "--max-requests",
    "max_reference_rows": "--max-reference-rows",
}
"""Each request bound's flag (:class:`~counterplan.server.kserve.request.ExplainLimits`)."""


def add_parser(commands: Any) -> None:
    """``counterplan kserve``: its flags in the order ``--help`` shows them."""
    kserve = commands.add_parser(
        "kserve",
        help="run a KServe explainer (POST /v1/models/NAME:explain) for a model on a KServe predictor",
        description="Serve KServe's explain endpoint with counterfactuals; predictions come from the predictor "
        "over the Open Inference Protocol (V2). Listens on --host (KServe's default 0.0.0.0), --http-port.",
    )
    group = kserve.add_argument_group("the predictor and its data")
    group.add_argument(
        "--model-name", required=True, help="the model's name: in the explain URL and on the predictor (KServe's)"
    )
    group.add_argument(
        "--predictor-host",
        metavar="HOST[:PORT]",
        help="the predictor (in KServe: NAME-predictor.NAMESPACE; port 80 when none is given); or --card",
    )
    group.add_argument(
        "--predictor-protocol",
        choices=PREDICTOR_PROTOCOLS,
        default="v2",
        help="Open Inference Protocol over REST (v2, the default) or gRPC (grpc-v2)",
    )
    group.add_argument(
        "--predictor-timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="one prediction call at most, its retries included (default 10)",
    )
    group.add_argument("--data", help="CSV of training data: features, domains and class names come from it")
    group.add_argument("--target", help="label column of --data")
    group.add_argument(
        "--card",
        metavar="FILE",
        help="instead of --predictor-host, --data and --target: a model card (as counterplan serve reads): its "
        "model (model_url: the predictor), its data or schema, its rules and solver configuration",
    )
    group.add_argument("--trust-pickle", action="store_true", help="allow the card's joblib/pickle model file")
    server = kserve.add_argument_group("the server")
    server.add_argument("--http-port", type=int, default=8080, help="HTTP port (default 8080, KServe's)")
    server.add_argument(
        "--host", default="0.0.0.0", help="listen address (default 0.0.0.0, as KServe's own runtimes bind)"
    )
    server.add_argument("--max-instances", type=int, help="instances one request may send (default 32)")
    server.add_argument("--max-instance-seconds", type=float, help="one instance's search at most (default 10)")
    server.add_argument(
        "--request-seconds", type=float, help="a request's time at most, shared among its instances (default 60)"
    )
    server.add_argument("--max-counterfactuals", type=int, help="answers per instance a request may ask (default 10)")
    server.add_argument(
        "--max-requests",
        type=int,
        help="requests in the server at once, searching or waiting; one more is HTTP 503 (default 64)",
    )
    server.add_argument(
        "--max-reference-rows",
        type=int,
        help="a request's plausibility.max_reference_rows at most: training rows its plausibility is built from "
        "(default 5000)",
    )
    add_problem_flags(kserve)
    add_search_flags(kserve, leave_out=("--time-limit", "--threads", "--no-progress"))


def run(args: argparse.Namespace) -> int:
    """Run ``counterplan kserve`` until SIGTERM or SIGINT; returns the exit code."""
    from counterplan.server.cli.problem_flags import problem_spec, solver_config  # noqa: PLC0415
    from counterplan.server.kserve.sdk import import_kserve  # noqa: PLC0415

    limits = _limits(args)
    if not 0 <= args.http_port <= 65535:
        raise UsageError(f"--http-port must be from 0 to 65535, given {args.http_port}")
    spec, config = problem_spec(args), solver_config(args)  # every flag checked before a file is read
    if args.card is not None:
        _card_only(args, spec)
        build = _card_build(args)
    elif args.trust_pickle:
        raise UsageError("--trust-pickle: only with --card (it trusts the card's model file)")
    else:
        if args.predictor_host is None or args.data is None or args.target is None:
            raise UsageError(
                "give --predictor-host, --data and --target (the predictor, its training data and "
                "label column), or --card"
            )
        model = _predictor(args)

        def build() -> Explainer:
            return _explainer(args, model, spec, config)

    import_kserve()  # before the runtime: kserve reads sys.argv when it is imported
    from counterplan.server.kserve.runtime import CounterplanExplainer, KServeRuntime  # noqa: PLC0415
    from counterplan.server.logs import configure_json_logs  # noqa: PLC0415

    configure_json_logs()
    KServeRuntime([CounterplanExplainer(args.model_name, build, limits)], args.http_port, host=args.host).run()
    return 0


CARD_HOLDS = (
    "--predictor-host",
    "--data",
    "--target",
    "--engine",
    "--config",
    "--seed",
    "--auto-budget",
    "--auto-improve",
)
"""Flags a model card's own fields replace (its model_url, training data, target, solver
configuration); with ``--card`` they are refused, as are the question's flags (its rules)."""


def _card_only(args: argparse.Namespace, spec: ProblemSpec) -> None:
    """With ``--card``, the card holds the model, the data and the question: a flag for any of
    them is refused (a request may still lay its own spec over the card's)."""
    from counterplan.planning.spec import ProblemSpec  # noqa: PLC0415

    given = [flag for flag in CARD_HOLDS if getattr(args, flag[2:].replace("-", "_")) is not None]
    if given or spec != ProblemSpec():
        named = ", ".join(given) if given else "the question's flags"
        raise UsageError(
            f"{named}: with --card, the card holds the model, its data and its rules (and a request "
            "may send its own spec)"
        )


def _card_build(args: argparse.Namespace) -> Callable[[], Explainer]:
    """The card's explainer, built when the runtime loads (as ``counterplan serve`` loads a card)."""
    from pathlib import Path  # noqa: PLC0415

    from counterplan.server.registry.registry import load_card  # noqa: PLC0415

    def build() -> Explainer:
        return load_card(Path(args.card), trust_pickle=args.trust_pickle).ready_explainer

    return build


def _predictor(args: argparse.Namespace) -> RemoteModel:
    """The predictor's model (no call yet), its host refused naming the flag."""
    from counterplan.planning.errors import InvalidInputError  # noqa: PLC0415
    from counterplan.planning.remote.options import MAX_CALL_SECONDS  # noqa: PLC0415
    from counterplan.planning.remote.url import FORMS  # noqa: PLC0415
    from counterplan.server.cli.bounds import check_seconds  # noqa: PLC0415
    from counterplan.server.kserve.predictor import predictor_model  # noqa: PLC0415

    check_seconds("--predictor-timeout", args.predictor_timeout, UsageError, MAX_CALL_SECONDS)
    try:
        return predictor_model(
            args.predictor_host, args.predictor_protocol, args.model_name, timeout=args.predictor_timeout
        )
    except InvalidInputError as exc:  # the address parser's forms are URLs: the flag takes HOST[:PORT]
        flag = "--model-name" if "model name" in exc.problem else "--predictor-host"
        raise UsageError(f"{flag}: {exc.problem.removesuffix(f'; expected {FORMS}')}") from None


def _explainer(args: argparse.Namespace, model: RemoteModel, spec: ProblemSpec, config: SolverConfig) -> Explainer:
    """The explainer over the predictor: ``--data`` and ``--target`` read once (the class names
    are the target's labels), the settings checked on the data's first row through the predictor."""
    from counterplan.server.cli.problem_flags import flag_errors  # noqa: PLC0415
    from counterplan.server.registry.loading import load_csv  # noqa: PLC0415
    from counterplan.solver.explainer import Explainer  # noqa: PLC0415

    data = load_csv(args.data)
    if args.target not in data.columns:
        from counterplan.planning.errors import echo  # noqa: PLC0415

        raise UsageError(f"--target: no column {echo(args.target)} in the data")
    with flag_errors():
        return Explainer(model, data, spec=spec, target=args.target, config=config, engine=args.engine, seed=args.seed)


def _limits(args: argparse.Namespace) -> ExplainLimits:
    """The request bounds the flags set, each refused naming its flag."""
    from pydantic import ValidationError  # noqa: PLC0415

    from counterplan.server.kserve.request import ExplainLimits  # noqa: PLC0415

    given = {name: getattr(args, name) for name in LIMIT_FLAGS if getattr(args, name) is not None}
    try:
        return ExplainLimits(**given)
    except ValidationError as exc:
        error = exc.errors()[0]
        raise UsageError(f"{LIMIT_FLAGS[str(error['loc'][0])]}: {error['msg']} (given {error['input']})") from None
