"""The model a command asks about in this process: the embedded demo, or ``--model`` with ``--data``.

``explain``, ``batch``, ``plan`` and ``tune`` build it the same way, as an
:class:`~counterplan.solver.explainer.Explainer` (the object Python users and the server's registry
build too): the demo with its own rules (:func:`counterplan.planning.demo.demo_spec`, as the served
demo has them), a user's model with none beyond its data's. A command's flags are then asked per
row as a :class:`~counterplan.planning.spec.ProblemSpec` laid over it.
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
    from counterplan.server.registry.loading import load_csv, load_model  # noqa: PLC0415
    from counterplan.solver.explainer import Explainer  # noqa: PLC0415

    if is_demo(args):
        from counterplan.planning import demo  # noqa: PLC0415 - trains a model: only when the demo is asked for

        if getattr(args, "row", None) is not None or args.target is not None:
            raise UsageError("--row and --target need --model and --data")
        frame = demo.make_loan_data()
        model = demo.train_loan_model(frame)
        asked = (spec or ProblemSpec()).over(demo.demo_spec())
        return Explainer(model, frame, spec=asked, target=demo.TARGET, config=config, engine=engine, check=False)
    if args.model is None or args.data is None:
        raise UsageError("give both --model and --data (or neither, for the demo)")
    frame = data if data is not None else load_csv(args.data)
    model = load_model(args.model, trust=args.trust_model)
    if args.target is not None and args.target not in frame.columns:
        listed = ", ".join(str(c) for c in frame.columns[:30]) + (" ..." if len(frame.columns) > 30 else "")
        raise UsageError(f"--target: no column {args.target!r} in the data; columns: {listed}")
    return Explainer(model, frame, spec=spec, target=args.target, config=config, engine=engine, check=False)


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
