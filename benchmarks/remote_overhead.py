"""What a served model costs per solve: the same rows explained with the model in this process
and behind a real MLServer, over REST and over gRPC.

The adult data set's ``logreg`` pipeline (read and split as in :mod:`benchmarks.real_data`) is
trained here, written into a model repository and served by MLServer on loopback (its own
environment: ``tools/mlserver_env.py``; ``COUNTERPLAN_MLSERVER`` or ``.venv-mlserver``), one
input per column with the pandas codec. The first ``--rows`` test rows the model rejects are
explained with the goal "class 1 at 70%", seed 0, one at a time, by four setups:

* ``local``: the fitted pipeline (the scikit-learn adapter: compiled fast path);
* ``local black box``: the same pipeline behind a plain function of the decoded DataFrame, the
  local twin of a served model (no fast path, no structure read);
* ``REST`` and ``gRPC``: :class:`counterplan.RemoteModel` on the served copy.

Printed per setup: the median ms per solve, model calls and rows per solve, inference requests
per solve, ms per model call, the CPU time per model call of this process (the search, and the
client's share of a served model's call) and of the server (MLServer's process, read from
``/proc``: what the server spends on a request, whatever the machine's load), and how many answers
equal the black box's (proposed values and score) and the local adapter's. Run (a minute or two)::

    .venv/bin/python benchmarks/remote_overhead.py
    .venv/bin/python benchmarks/remote_overhead.py --rows 5 --model forest
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))

from benchmarks.real_data import DATASETS, MODELS, default_data_dir, load_data, render  # noqa: E402
from counterplan import CallableAdapter, ClassGoal, Explainer, OutputSpec, RemoteModel  # noqa: E402
from tests.serving.mlserver import ServedModel, start  # noqa: E402

DATATYPES = {"int64": "INT64", "float64": "FP64", "bool": "BOOL", "object": "BYTES"}


def mlserver_binary() -> Path:
    given = os.environ.get("COUNTERPLAN_MLSERVER")
    path = Path(given) if given else HERE / ".venv-mlserver" / "bin" / "mlserver"
    if not path.is_file():
        raise SystemExit(f"no MLServer at {path}: run tools/mlserver_env.py or set COUNTERPLAN_MLSERVER")
    return path


def process_cpu(pid: int) -> float:
    """Seconds of CPU (user and system) process ``pid`` has used (Linux's /proc; NaN elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sampled(frame: pd.DataFrame, names: Any, n: int) -> list[dict[str, Any]]:
    """``n`` training rows (repeated when there are fewer) as records of the features."""
    picked = frame[list(names)].iloc[np.arange(n) % len(frame)]
    return [{str(k): v for k, v in row.items()} for row in picked.to_dict(orient="records")]


def time_requests(
    models: dict[str, RemoteModel], X: Any, space: Any, server_pid: int, repeats: int = 10
) -> dict[str, tuple[float, float, float]]:
    """Per model: the median ms of one request of ``X``'s rows, this process's and the server's
    CPU ms per request; the models take turns, so a change of load hits each alike."""
    walls: dict[str, list[float]] = {name: [] for name in models}
    cpus = dict.fromkeys(models, 0.0)
    served = dict.fromkeys(models, 0.0)
    for model in models.values():
        model.predict(X, space)  # warm: the connection open
    for _ in range(repeats):
        for name, model in models.items():
            server_before, cpu, started = process_cpu(server_pid), time.process_time(), time.perf_counter()
            model.predict(X, space)
            walls[name].append((time.perf_counter() - started) * 1000.0)
            cpus[name] += (time.process_time() - cpu) * 1000.0 / repeats
            served[name] += (process_cpu(server_pid) - server_before) * 1000.0 / repeats
    return {name: (statistics.median(walls[name]), cpus[name], served[name]) for name in models}


def solve_all(explainer: Explainer, rows: list[pd.Series], server_pid: int) -> list[dict[str, Any]]:
    out = []
    for row in rows:
        adapter = explainer.adapter
        before = getattr(adapter, "request_count", 0)
        served_before = process_cpu(server_pid)
        cpu = time.process_time()
        started = time.perf_counter()
        result = explainer.explain(row, seed=0)
        ms = (time.perf_counter() - started) * 1000.0
        stats = result.statistics
        out.append(
            {
                "ms": ms,
                "cpu": (time.process_time() - cpu) * 1000.0,
                "server_cpu": (process_cpu(server_pid) - served_before) * 1000.0,
                "calls": stats.model_call_count,
                "requests": getattr(adapter, "request_count", 0) - before,
                "answer": (result.proposed, result.score, result.valid),
            }
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10)
    parser.add_argument("--model", default="logreg", choices=sorted(MODELS))
    parser.add_argument("--data-dir", type=Path, default=default_data_dir())
    parser.add_argument(
        "--sizes", default="50,500,4000", help="rows of the single requests timed after the solves (empty: none)"
    )
    args = parser.parse_args(argv)

    # MLServer runs scikit-learn with every core's OpenMP threads; a solve limits its own to one
    # (threadpoolctl). On a small shared machine the server's threads fight each other: one each.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    spec = DATASETS["adult"]
    data = load_data(spec, args.data_dir)
    pipe = MODELS[args.model].build(data.categorical, data.numeric)
    pipe.fit(data.train[data.features], data.train[spec.target])
    rejected = data.test[pipe.predict(data.test) == 0].head(args.rows)
    rows = [rejected.iloc[i] for i in range(len(rejected))]
    inputs = [{"name": c, "datatype": DATATYPES[str(data.train[c].dtype)], "shape": [-1]} for c in data.features]
    outputs = [{"name": "predict_proba", "datatype": "FP64", "shape": [-1, 2]}]

    root = Path(tempfile.mkdtemp(prefix="remote-overhead-")) / "models"
    server = start(mlserver_binary(), root, [ServedModel("adult", pipe, inputs, outputs, "pd")])
    try:
        goal = [ClassGoal(target=1, confidence=0.7)]
        black_box = CallableAdapter(pipe.predict_proba, [OutputSpec(spec.target, (0, 1))], input_kind="dataframe")
        setups = {
            "local": pipe,
            "local black box": black_box,
            "REST": RemoteModel(f"{server.rest}/v2/models/adult"),
            "gRPC": RemoteModel(f"{server.grpc}/adult"),
        }
        results: dict[str, list[dict[str, Any]]] = {}
        for name, model in setups.items():
            explainer = Explainer(model, data.train, goal, target=spec.target, immutable=spec.immutable, seed=0)
            explainer.explain(rows[0], seed=0)  # warm: fast path compiled, connection open, labels checked
            results[name] = solve_all(explainer, rows, server.process.pid)
        sizes = [int(n) for n in args.sizes.split(",") if n.strip()]
        explainer = Explainer(pipe, data.train, goal, target=spec.target, immutable=spec.immutable)
        space = explainer.problem(0).space
        requests = {
            "REST": RemoteModel(f"{server.rest}/v2/models/adult", classes=(0, 1)),
            "REST, gzip answers": RemoteModel(
                f"{server.rest}/v2/models/adult", classes=(0, 1), headers={"Accept-Encoding": "gzip"}
            ),
            "gRPC": RemoteModel(f"{server.grpc}/adult", classes=(0, 1)),
        }
        pid = server.process.pid
        timed = {
            n: time_requests(requests, space.encode_rows(sampled(data.train, space.names, n)), space, pid)
            for n in sizes
        }
    finally:
        server.stop()

    reference, local = results["local black box"], results["local"]
    header = ["setup", "ms/solve", "calls/solve", "requests/solve", "ms/call", "CPU ms/call", "server CPU ms/call"]
    header += ["= black box", "= local", "valid"]
    table = []
    for name, runs in results.items():
        ms = statistics.median(r["ms"] for r in runs)
        calls = statistics.median(r["calls"] for r in runs)
        requests = statistics.median(r["requests"] for r in runs) if name in ("REST", "gRPC") else float("nan")
        per_call = statistics.median(r["ms"] / max(r["calls"], 1) for r in runs)
        cpu = sum(r["cpu"] for r in runs) / max(sum(r["calls"] for r in runs), 1)
        served = sum(r["server_cpu"] for r in runs) / max(sum(r["calls"] for r in runs), 1)
        same_box = sum(r["answer"] == b["answer"] for r, b in zip(runs, reference, strict=True))
        same_local = sum(r["answer"] == b["answer"] for r, b in zip(runs, local, strict=True))
        valid = sum(bool(r["answer"][2]) for r in runs)
        table.append(
            [
                name,
                f"{ms:.0f}",
                f"{calls:.0f}",
                "-" if np.isnan(requests) else f"{requests:.0f}",
                f"{per_call:.2f}",
                f"{cpu:.2f}",
                f"{served:.2f}" if name in ("REST", "gRPC") else "-",
                f"{same_box}/{len(runs)}",
                f"{same_local}/{len(runs)}",
                f"{valid}/{len(runs)}",
            ]
        )
    print(f"adult {args.model}, {len(rows)} rejected rows, seed 0, load {os.getloadavg()[0]:.2f}")
    print(render(header, table, markdown=True, left=1))
    if timed:
        print(f"\none request of N rows, {len(next(iter(timed.values())))} clients taking turns, 10 each")
        head = ["rows", "client", "ms/request", "CPU ms/request", "server CPU ms/request"]
        lines = [
            [str(n), name, f"{wall:.1f}", f"{cpu:.2f}", f"{served:.1f}"]
            for n, by_client in timed.items()
            for name, (wall, cpu, served) in by_client.items()
        ]
        print(render(head, lines, markdown=True, left=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
