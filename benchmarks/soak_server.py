"""The soak's server process: ``counterplan serve``'s own start and shutdown
(:func:`counterplan.server.grpc.app.serve`), serving the demo model and a slow copy of it.

The slow copy (``slow-demo``) is the demo's pipeline behind a model call that takes
``--call-seconds`` (0.3 s by default): a served model whose every call is slow, the case a
deadline must be kept against (the server stops one model call before the client's deadline and
answers with its best so far)::

    python -m benchmarks.soak_server --port 0 [--call-seconds 0.3] [--max-solve-seconds 20]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from counterplan.planning.goals import OutputSpec
from counterplan.planning.models import CallableAdapter
from counterplan.server.grpc.app import serve
from counterplan.server.grpc.settings import ServerSettings
from counterplan.server.logs import configure_json_logs
from counterplan.server.registry.registry import ModelRegistry, RegisteredModel, demo_model
from counterplan.solver.explainer import Explainer

SLOW_MODEL_ID = "slow-demo"


def slow_demo_model(call_seconds: float) -> RegisteredModel:
    """The demo model behind a model call of ``call_seconds``: the same schema, data and rules."""
    demo = demo_model()
    pipeline: Any = demo.adapter.model  # type: ignore[attr-defined]

    def slow(frame: Any) -> Any:
        time.sleep(call_seconds)
        return pipeline.predict_proba(frame)

    adapter = CallableAdapter(slow, [OutputSpec(demo.target or "approved", (0, 1))], input_kind="dataframe")
    data = demo.reference
    explainer = Explainer(adapter, data, spec=demo.spec, target=demo.target, columns=demo.ready_explainer.columns)
    return RegisteredModel(
        SLOW_MODEL_ID,
        "1",
        f"The demo model, each call taking {call_seconds:g} s",
        adapter,
        demo.features,
        demo.statistics,
        reference=data,
        target=demo.target,
        spec=demo.spec,
        explainer=explainer,
    )


def registry(call_seconds: float) -> ModelRegistry:
    """The demo model and its slow copy."""
    return ModelRegistry([demo_model(), slow_demo_model(call_seconds)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--call-seconds", type=float, default=0.3)
    parser.add_argument("--max-solve-seconds", type=float, default=20.0)
    args = parser.parse_args()
    configure_json_logs()  # one JSON line per call on stderr, as serve writes it
    settings = ServerSettings(port=args.port, max_solve_seconds=args.max_solve_seconds)
    serve(settings, registry(args.call_seconds))


if __name__ == "__main__":
    main()
