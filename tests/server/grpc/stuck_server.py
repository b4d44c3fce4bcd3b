"""``serve()`` in a process of its own, with a model that gets stuck: for the shutdown tests.

Run as ``python -m tests.server.grpc.stuck_server MARKER FAST_CALLS STUCK_SECONDS GRACE``: it
serves one model, ``stuck`` (the CSCF paper's toy person, so both Explain and Plan work on it),
whose first ``FAST_CALLS`` calls answer at once and every later one touches ``MARKER`` (the
test's sign that a call is in flight) and sleeps ``STUCK_SECONDS``, as a model whose backend
hangs. It prints ``counterplan serving on HOST:PORT`` and runs until SIGTERM, with the given
grace, exactly as ``counterplan serve`` does (the same :func:`serve`). With a fifth argument
``leave-thread``, the model's first call instead starts a thread that is no daemon and never
ends (as a model's library may leave one), and a stalled exit is cut one second past the grace.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from counterplan.planning import CallableAdapter, OutputSpec, scored_rows
from counterplan.server.grpc import app
from counterplan.server.grpc.app import serve
from counterplan.server.grpc.settings import ServerSettings
from counterplan.server.logs import configure_json_logs
from counterplan.server.registry.registry import FeatureSpec, ModelRegistry, RegisteredModel
from counterplan.solver.core.config import SolverConfig, TerminationConfig

FEATURES = [
    FeatureSpec(name="job", kind="categorical", categories=("Seller", "Developer")),
    FeatureSpec(name="education", kind="categorical", categories=("HS", "BSc")),
    FeatureSpec(name="location", kind="categorical", categories=("Germany", "US")),
    FeatureSpec(name="age", kind="integer", low=18, high=90),
]
PERSON = {"job": "Seller", "education": "HS", "location": "Germany", "age": 30}
ENDLESS = SolverConfig(termination=TerminationConfig(spent_limit_seconds=120.0), phases=({"type": "local_search"},))  # type: ignore[arg-type]
"""A solve that only its time limit (two minutes) ends: shutdown must cut it."""


class StuckModel:
    """Approves a developer in the US or with a degree; gets stuck after ``fast`` calls."""

    def __init__(self, marker: Path, fast: int, stuck_seconds: float) -> None:
        self.marker = marker
        self.fast = fast
        self.stuck_seconds = stuck_seconds
        self.calls = 0

    def __call__(self, X: Any) -> Any:
        self.calls += 1
        if self.calls > self.fast:
            self.marker.touch()
            time.sleep(self.stuck_seconds)
        developer, degree, us = X[:, 0] == 1, X[:, 1] == 1, X[:, 2] == 1
        p = np.where(developer & (us | degree), 0.9, 0.1)
        return np.column_stack([1.0 - p, p])


class Hanging:
    """The toy person's model: its first ``fast`` calls answer at once, the next ones hang until
    :attr:`release` is set (``seconds`` at most; :attr:`stuck` says one did); counts its calls."""

    def __init__(self, fast: int, seconds: float) -> None:
        self.fast = fast
        self.seconds = seconds
        self.calls = 0
        self.stuck = threading.Event()
        self.release = threading.Event()

    def __call__(self, X: Any) -> Any:
        self.calls += 1
        if self.calls > self.fast:
            self.stuck.set()
            self.release.wait(self.seconds)
        developer, degree, us = X[:, 0] == 1, X[:, 1] == 1, X[:, 2] == 1
        p = np.where(developer & (us | degree), 0.9, 0.1)
        return np.column_stack([1.0 - p, p])


class ThreadLeavingModel(StuckModel):
    """Its first call starts a thread that is no daemon and never ends (give it ``fast`` calls
    enough never to get stuck as well)."""

    def __call__(self, X: Any) -> Any:
        if self.calls == 0:
            threading.Thread(target=threading.Event().wait, name="left-by-the-model", daemon=False).start()
            self.marker.touch()
        return super().__call__(X)


def main(marker: str, fast: str, stuck_seconds: str, grace: str, mode: str = "") -> None:
    scored_rows.MAX_REMEMBERED_BYTES = 0  # every call asks the model (none remembered): the counted call comes
    kind = StuckModel
    if mode == "leave-thread":
        app.EXIT_MARGIN_SECONDS = 1.0
        kind = ThreadLeavingModel
    model = kind(Path(marker), int(fast), float(stuck_seconds))
    adapter = CallableAdapter(model, [OutputSpec("ok", (0, 1))])
    registered = RegisteredModel("stuck", "1", "gets stuck", adapter, FEATURES, default_config=ENDLESS)
    configure_json_logs()  # to stderr, as counterplan serve does: stdout says where it serves
    serve(ServerSettings(port=0, grace_seconds=float(grace)), ModelRegistry([registered]))


if __name__ == "__main__":
    main(*sys.argv[1:])
