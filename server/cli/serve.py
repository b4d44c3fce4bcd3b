"""``counterplan serve``: the gRPC service; each flag overrides a ``COUNTERPLAN_*`` setting."""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from counterplan.server.cli.flags import UsageError


def add_parser(commands: Any) -> None:
    """Add ``serve`` to the command line's subcommands."""
    _add_serve_parser(commands)


def run(args: argparse.Namespace) -> int:
    """Run ``counterplan serve`` until it is stopped; returns the exit code."""
    return _serve(args)


def _add_serve_parser(commands: Any) -> None:
    """``counterplan serve``: each flag overrides a ``COUNTERPLAN_*`` setting."""
    serve = commands.add_parser(
        "serve",
        help="run the gRPC service",
        description="Serve counterfactual explanations over gRPC. Flags override COUNTERPLAN_* variables.",
    )
    serve.add_argument("--address", help="listen address (COUNTERPLAN_ADDRESS, default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port, 0 for a free one (COUNTERPLAN_PORT, default 50051)")
    serve.add_argument("--models-dir", help="directory of model cards (default: the embedded demo model)")
    serve.add_argument("--trust-pickle", action="store_true", default=None, help="allow joblib/pickle model files")
    serve.add_argument("--workers", type=int, help="gRPC worker threads")
    serve.add_argument("--max-concurrent-solves", type=int, help="more are refused with RESOURCE_EXHAUSTED")
    serve.add_argument("--max-solve-seconds", type=float, help="cap on every solve")
    serve.add_argument(
        "--max-solve-memory-mb", type=int, help="estimated memory of the solves running at once (default 2048)"
    )
    serve.add_argument("--stream-max-per-second", type=float, help="intermediate stream messages per second")
    serve.add_argument("--tls-cert", help="PEM certificate chain")
    serve.add_argument("--tls-key", help="PEM private key")
    serve.add_argument("--auth-token", help="require this bearer token")
    serve.add_argument("--grace-seconds", type=float, help="shutdown grace period for running solves")
    serve.add_argument("--model-threads", type=int, help="native threads per model call (COUNTERPLAN_MODEL_THREADS)")
    serve.add_argument(
        "--dynamic-batching-max-wait-ms",
        type=float,
        help="how long a solve's model call waits to share one call with the model's other solves; 0: off (default 5)",
    )
    serve.add_argument("--batch-max-instances", type=int, help="instances one ExplainBatch stream may send")
    serve.add_argument(
        "--batch-max-in-flight", type=int, help="instances of one ExplainBatch stream read and not yet answered"
    )
    serve.add_argument(
        "--max-batch-solves",
        type=int,
        help="solve slots ExplainBatch instances hold at once, every stream together (default: half the slots)",
    )
    serve.add_argument("--max-batch-streams", type=int, help="ExplainBatch streams open at once")
    serve.add_argument("--max-plan-population", type=int, help="a Plan request's population at most (default 2000)")
    serve.add_argument("--max-plan-generations", type=int, help="a Plan request's generations at most (default 1000)")
    serve.add_argument(
        "--max-plan-generation-work",
        type=int,
        help="a Plan generation's work at most: 1.5 x population x its actions' formula parts (default 10000000)",
    )


def _serve(args: argparse.Namespace) -> int:
    from pydantic import ValidationError  # noqa: PLC0415

    from counterplan.server.grpc.app import serve  # noqa: PLC0415 - grpc loads only for the server
    from counterplan.server.grpc.settings import ServerSettings  # noqa: PLC0415
    from counterplan.server.logs import configure_json_logs  # noqa: PLC0415

    given = {name: getattr(args, name) for name in FLAGGED if getattr(args, name) is not None}
    try:
        settings = ServerSettings(**given)
    except ValidationError as exc:
        raise UsageError(setting_error(exc, given)) from None
    configure_json_logs()
    if args.auth_token is not None:  # the flag shows in the process list; the variable does not
        print(
            "counterplan: warning: --auth-token is visible to every user in the process list; "
            "set COUNTERPLAN_AUTH_TOKEN instead",
            file=sys.stderr,
        )
    serve(settings)
    return 0


FLAGGED = (
    "address",
    "port",
    "models_dir",
    "trust_pickle",
    "workers",
    "max_concurrent_solves",
    "max_solve_seconds",
    "max_solve_memory_mb",
    "stream_max_per_second",
    "tls_cert",
    "tls_key",
    "auth_token",
    "grace_seconds",
    "model_threads",
    "dynamic_batching_max_wait_ms",
    "batch_max_instances",
    "batch_max_in_flight",
    "max_batch_solves",
    "max_batch_streams",
    "max_plan_population",
    "max_plan_generations",
    "max_plan_generation_work",
)
"""The settings ``serve`` has a flag for (``--max-solve-seconds``); every setting has its variable."""


def setting_error(exc: Any, given: dict[str, Any]) -> str:
    """A settings error as the user set them: a setting given as a flag by its flag, any other by
    its ``COUNTERPLAN_*`` variable; in a rule between settings, each by the flag that sets it (or
    its variable, when it has no flag)."""
    first = exc.errors()[0]
    fields = [str(part) for part in first["loc"]]
    message = str(first["msg"]).removeprefix("Value error, ")
    if fields:
        name = fields[0]
        return f"{_flag(name) if name in given else _variable(name)}: {message}"
    return re.sub(r"\b[a-z][a-z_]*\b", lambda m: _named(m.group(0)), message)


def _named(word: str) -> str:
    """A settings field named in a message as the user sets it; any other word as it is."""
    from counterplan.server.grpc.settings import ServerSettings  # noqa: PLC0415

    if word not in ServerSettings.model_fields:
        return word
    return _flag(word) if word in FLAGGED else _variable(word)


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _variable(name: str) -> str:
    return "COUNTERPLAN_" + name.upper()
