"""The model a command asks about in this process: the embedded demo, or ``--model`` with ``--data``.

``explain``, ``batch``, ``plan`` and ``tune`` build it the same way, as an
:class:`~counterplan.solver.explainer.Explainer` (the object Python users and the server's registry
build too): the demo with its own rules (:func:`counterplan.planning.demo.demo_spec`, as the served
demo has them), a user's model with none beyond its data's. A command's flags are then asked per
row as a :class:`~counterplan.planning.spec.ProblemSpec` laid over it.

``--model`` is a file, or a served model's address (``http://HOST:PORT/v2/models/NAME``,
``grpc://HOST:PORT/NAME``: :func:`counterplan.planning.remote.url.is_model_address` tells them
apart) called over the Open Inference Protocol with ``--model-timeout`` and ``--model-header``.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from counterplan.server.cli.flags import UsageError

if TYPE_CHECKING:
    from counterplan.planning.spec import ProblemSpec
    from counterplan.solver.core.config import SolverConfig
    from counterplan.solver.engines import EngineChoice
    from counterplan.solver.explainer import Explainer


MODEL_HELP = (
    "fitted scikit-learn model (.skops or .joblib; an optbinning Scorecard as .joblib), an ONNX model (.onnx), "
    "a scorecard's points table (.yaml, .json or .csv), or a served model's address: "
    "http://HOST:PORT/v2/models/NAME or grpc://HOST:PORT/NAME (KServe, MLServer, Triton)"
)
"""``--model``'s help, the same for every command that loads a model in this process."""
SERVED_FLAGS = ("--model-timeout", "--model-header")


def add_served_model_flags(group: argparse._ArgumentGroup) -> None:
    """How to call a served ``--model`` (``RemoteModel``'s ``timeout`` and ``headers``)."""
    group.add_argument(
        "--model-timeout",
        type=float,
        metavar="SECONDS",
        help="a served --model: seconds each call may wait for its answer (default 10)",
    )
    group.add_argument(
        "--model-header",
        action="append",
        metavar="KEY=VALUE",
        help="a served --model: a header sent with every call (repeat it), e.g. 'Authorization=Bearer TOKEN'",
    )


def served_flags_given(args: argparse.Namespace) -> list[str]:
    """The served-model flags given (a command asking a counterplan server refuses them)."""
    return [flag for flag in SERVED_FLAGS if getattr(args, flag[2:].replace("-", "_"), None) is not None]


def is_demo(args: argparse.Namespace) -> bool:
    """No ``--model`` and no ``--data``: the command asks about the embedded demo."""
    return args.model is None and args.data is None


def local_explainer(
    args: argparse.Namespace,
    spec: ProblemSpec | None = None,
    config: SolverConfig | None = None,
    *,
    engine: EngineChoice | None = None,
    data: Any = None,
) -> Explainer:
    """The demo's explainer, or ``--model`` over ``--data`` (``data``: already read by the
    command) with ``--target``, asking ``spec`` (the flags') over the model's own rules; a
    missing or bad file is refused naming its flag."""
    from counterplan.planning.spec import ProblemSpec  # noqa: PLC0415
    from counterplan.server.registry.fitted_categories import with_fitted_categories  # noqa: PLC0415
    from counterplan.server.registry.loading import load_csv  # noqa: PLC0415
    from counterplan.solver.explainer import Explainer  # noqa: PLC0415

    if is_demo(args):
        from counterplan.planning import demo  # noqa: PLC0415 - trains a model: only when the demo is asked for

        if getattr(args, "row", None) is not None or args.target is not None:
            raise UsageError("--row and --target need --model and --data")
        if given := served_flags_given(args):
            raise UsageError(f"{', '.join(given)}: only for a served --model (http://... or grpc://...)")
        frame = demo.make_loan_data()
        model = demo.train_loan_model(frame)
        asked = (spec or ProblemSpec()).over(demo.demo_spec())
        return Explainer(model, frame, spec=asked, target=demo.TARGET, config=config, engine=engine, check=False)
    if args.model is None or args.data is None:
        raise UsageError("give both --model and --data (or neither, for the demo)")
    frame = data if data is not None else load_csv(args.data)
    model = _model(args)
    frame = with_fitted_categories(model, frame, "--data")
    if args.target is not None and args.target not in frame.columns:
        listed = ", ".join(str(c) for c in frame.columns[:30]) + (" ..." if len(frame.columns) > 30 else "")
        from counterplan.planning.errors import echo  # noqa: PLC0415

        raise UsageError(f"--target: no column {echo(args.target)} in the data; columns: {listed}")
    return Explainer(model, frame, spec=spec, target=args.target, config=config, engine=engine, check=False)


def _model(args: argparse.Namespace) -> Any:
    """``--model``: the served model at its address (its metadata read: a server that is down is
    refused now, in one line), or the model file."""
    from counterplan.planning.remote.url import is_model_address  # noqa: PLC0415
    from counterplan.server.registry.loading import load_model  # noqa: PLC0415

    if not is_model_address(args.model):
        if given := served_flags_given(args):
            raise UsageError(f"{', '.join(given)}: only for a served --model (http://... or grpc://...)")
        return load_model(args.model, trust=args.trust_model)
    from counterplan.planning.errors import ModelAdapterError  # noqa: PLC0415
    from counterplan.server.cli.bounds import check_seconds  # noqa: PLC0415
    from counterplan.server.registry.served import MAX_CALL_SECONDS, ServedModelOptions, load_served_model  # noqa: PLC0415

    if args.trust_model:
        raise UsageError("--trust-model is for a model file, not a served model's address")
    timeout = getattr(args, "model_timeout", None)
    check_seconds("--model-timeout", timeout, UsageError, MAX_CALL_SECONDS)
    headers = header_pairs(getattr(args, "model_header", None), "--model-header")
    try:
        return load_served_model(args.model, ServedModelOptions(timeout=timeout, headers=headers))
    except ModelAdapterError as exc:  # a header the adapter refuses (gRPC metadata takes ASCII text only)
        if exc.field.partition(".")[0] != "headers":
            raise
        name = exc.field.partition(".")[2]
        raise UsageError(f"--model-header{f' {name}' if name else ''}: {exc.problem}") from None


def header_pairs(texts: list[str] | None, flag: str) -> dict[str, str]:
    """``KEY=VALUE`` texts (a repeated flag) as headers; a text without ``=`` or with an empty
    key is refused naming ``flag``, never shown (``Authorization: Bearer TOKEN`` carries a secret)."""
    headers: dict[str, str] = {}
    for text in texts or []:
        key, found, value = text.partition("=")
        if not found or not key.strip():
            given = "a text without '='" if not found else "an empty key"
            raise UsageError(f"{flag}: give KEY=VALUE, given {given} (the text is not shown: it may be a secret)")
        headers[key.strip()] = value.strip()
    return headers


def asked_row(args: argparse.Namespace, explainer: Explainer) -> int | dict[str, Any]:
    """The row ``--row`` or ``--instance`` names (the demo's rejected applicant when neither is
    given for the demo); a mapping is checked key by key when the problem is built."""
    from counterplan.server.registry.loading import load_instance  # noqa: PLC0415

    if is_demo(args):
        from counterplan.planning.demo import rejected_applicant  # noqa: PLC0415

        return rejected_applicant() if args.instance is None else load_instance(args.instance)
    if (args.row is None) == (args.instance is None):
        raise UsageError("give exactly one of --row and --instance")
    if args.row is None:
        return load_instance(args.instance)
    rows = len(explainer.data) if explainer.data is not None else 0
    if not 0 <= args.row < rows:
        raise UsageError(f"--row: row {args.row} is outside the data's {rows} rows")
    return int(args.row)
