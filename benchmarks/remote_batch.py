"""A batch on a served model: ``explain_batch`` over the same rows with the pipeline in this
process and behind a real MLServer (REST and gRPC), in one process and on two workers, with the
vectorised engine and with threads.

The adult data set's ``logreg`` pipeline is trained, served and asked as in
:mod:`benchmarks.remote_overhead` (one input per column, the pandas codec). The first ``--rows``
test rows the model rejects are explained in blocks of ``--window`` (goal "class 1 at 70%",
batch seed 5). Printed per setup: the seconds, the inference requests sent (in this process; a
worker's are its own), the rows' own model calls added up, and whether every record equals the
local model's (all columns but ``seconds``). Run (a minute or two)::

    .venv/bin/python benchmarks/remote_batch.py
    .venv/bin/python benchmarks/remote_batch.py --rows 64 --window 32
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))

from benchmarks.real_data import DATASETS, MODELS, default_data_dir, load_data, render  # noqa: E402
from benchmarks.remote_overhead import DATATYPES, mlserver_binary  # noqa: E402
from counterplan import ClassGoal, Explainer, RemoteModel  # noqa: E402
from tests.serving.mlserver import ServedModel, start  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=32)
    parser.add_argument("--window", type=int, default=16)
    parser.add_argument("--data-dir", type=Path, default=default_data_dir())
    args = parser.parse_args(argv)

    os.environ.setdefault("OMP_NUM_THREADS", "1")  # the server's scikit-learn: one thread (see remote_overhead)
    spec = DATASETS["adult"]
    data = load_data(spec, args.data_dir)
    pipe = MODELS["logreg"].build(data.categorical, data.numeric)
    pipe.fit(data.train[data.features], data.train[spec.target])
    rows = data.test[pipe.predict(data.test) == 0].head(args.rows)
    inputs = [{"name": c, "datatype": DATATYPES[str(data.train[c].dtype)], "shape": [-1]} for c in data.features]
    outputs = [{"name": "predict_proba", "datatype": "FP64", "shape": [-1, 2]}]

    root = Path(tempfile.mkdtemp(prefix="remote-batch-")) / "models"
    server = start(mlserver_binary(), root, [ServedModel("adult", pipe, inputs, outputs, "pd")])
    table = []
    try:
        goal = [ClassGoal(target=1, confidence=0.7)]

        def explainer(model: object) -> Explainer:
            return Explainer(model, data.train, goal, target=spec.target, immutable=spec.immutable, seed=0)

        local = explainer(pipe)
        for vectorised in (True, False):
            engine = "vector" if vectorised else "threads"
            started = time.perf_counter()
            want = local.explain_batch(rows, seed=5, window=args.window, vectorised=vectorised)
            seconds = time.perf_counter() - started
            columns = [c for c in want.columns if c != "seconds"]
            table.append(["local", engine, "1", f"{seconds:.2f}", "-", str(want["model_calls"].sum()), "-"])
            for name, url in (("REST", f"{server.rest}/v2/models/adult"), ("gRPC", f"{server.grpc}/adult")):
                remote = explainer(RemoteModel(url))
                remote.explain(rows.iloc[0], seed=0)  # warm: connection open, class names checked
                for workers in (1, 2):
                    before = remote.adapter.request_count  # type: ignore[attr-defined]
                    started = time.perf_counter()
                    got = remote.explain_batch(rows, seed=5, window=args.window, workers=workers, vectorised=vectorised)
                    seconds = time.perf_counter() - started
                    sent = remote.adapter.request_count - before  # type: ignore[attr-defined]
                    table.append(
                        [
                            name,
                            engine,
                            str(workers),
                            f"{seconds:.2f}",
                            str(sent) if workers == 1 else "(workers)",
                            str(got["model_calls"].sum()),
                            str(got[columns].equals(want[columns])),
                        ]
                    )
    finally:
        server.stop()
    header = ["model", "engine", "workers", "seconds", "requests", "rows' calls", "= local"]
    print(f"adult logreg, {len(rows)} rejected rows, window {args.window}, load {os.getloadavg()[0]:.2f}")
    print(render(header, table, markdown=True, left=3))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
