"""A time limit in a batch: is it each row's own? Rows found, answers and wall time, per way.

The model and question are :mod:`benchmarks.compare`'s (``--dataset``: its boosting pipeline, or
``--model forest``: the same encoding with ``RandomForestClassifier(n_estimators=100,
max_depth=6)``), class 1, the data set's immutables, asked of the first ``--rows`` rejected test
rows under ``--time-limit`` seconds. Each way solves every row under that limit:

* ``loop``: one ``Explainer.explain`` after another (each row has the limit to itself);
* ``vector``: ``explain_batch`` (the vectorised engine, blocks of 64 rows);
* ``threads``: ``explain_batch(vectorised=False)`` (the threads path);
* ``exact-loop`` and ``exact-batch``: the same with ``engine="exact"`` (threads path).

Printed per way: rows found (``ok``), cut without an answer (``not_found``), wall seconds, mean
distance over the rows every way found, and how many rows have the loop's distance. ``--code``
runs another checkout's package (the code before a change) with this script::

    .venv/bin/python benchmarks/batch_time_limits.py --rows 64 --time-limit 0.3 --model forest
    .venv/bin/python benchmarks/batch_time_limits.py --rows 64 --time-limit 0.3 --code /tmp/before
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
if "--code" in sys.argv:  # before any counterplan import
    sys.path.insert(0, str(Path(sys.argv[sys.argv.index("--code") + 1]).resolve()))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from sklearn.ensemble import RandomForestClassifier  # noqa: E402
from sklearn.pipeline import Pipeline  # noqa: E402

from benchmarks.compare import DATASETS, Bench, load_bench  # noqa: E402
from counterplan.planning import ClassGoal  # noqa: E402
from counterplan.solver.core.config import SolverConfig, TerminationConfig  # noqa: E402
from counterplan.solver.explainer import Explainer  # noqa: E402

SEED = 0
WAYS = ("loop", "vector", "threads", "exact-loop", "exact-batch")


def _model(bench: Bench, kind: str) -> Pipeline:
    if kind == "gb":
        return bench.pipe
    forest = RandomForestClassifier(n_estimators=100, max_depth=6, random_state=SEED)
    pipe = Pipeline([("encode", bench.pipe.named_steps["encode"]), ("model", forest)])
    return pipe.fit(bench.train[bench.features], bench.train[bench.spec.target])


def run(way: str, bench: Bench, model: Pipeline, rows: pd.DataFrame, limit: float) -> pd.DataFrame:
    """One record per row: its status and distance."""
    config = SolverConfig()
    termination = TerminationConfig(spent_limit_seconds=limit, children=(config.termination,))
    explainer = Explainer(
        model,
        bench.train,
        [ClassGoal(target=1)],
        target=bench.spec.target,
        immutable=bench.spec.immutable,
        config=config.model_copy(update={"termination": termination}),
        engine="exact" if way.startswith("exact") else None,
    )
    if way.endswith("loop"):
        records = []
        for row_id, row in rows.iterrows():
            result = explainer.explain(row, seed=SEED)
            distance = -float(result.score_levels[3]) if result.valid else np.nan
            records.append({"row_id": row_id, "status": "ok" if result.valid else "not_found", "distance": distance})
        return pd.DataFrame(records)
    frame = explainer.explain_batch(rows, seed=SEED, vectorised=way == "vector")
    return frame[["row_id", "status", "distance"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--time-limit", type=float, default=0.3)
    parser.add_argument("--dataset", default="heloc", choices=sorted(DATASETS))
    parser.add_argument("--model", default="forest", choices=["gb", "forest"])
    parser.add_argument("--ways", default=",".join(WAYS))
    parser.add_argument("--code", type=Path, help="the checkout whose counterplan runs (default this one)")
    parser.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "data")
    args = parser.parse_args()
    bench = load_bench(DATASETS[args.dataset], args.data_dir, args.rows)
    model = _model(bench, args.model)
    ways = args.ways.split(",")
    run(ways[0], bench, model, bench.queries.iloc[:2], args.time_limit)  # the imports, untimed
    print(f"load before: {' / '.join(f'{x:.2f}' for x in os.getloadavg())}", file=sys.stderr, flush=True)
    frames: dict[str, pd.DataFrame] = {}
    walls: dict[str, float] = {}
    for way in ways:
        started = time.perf_counter()
        frames[way] = run(way, bench, model, bench.queries, args.time_limit).reset_index(drop=True)
        walls[way] = time.perf_counter() - started
        print(f"{way}: {walls[way]:.1f} s", file=sys.stderr, flush=True)
    found = np.logical_and.reduce([f["status"].eq("ok").to_numpy() for f in frames.values()])
    first = frames[ways[0]]
    lines = [
        f"{args.dataset} {args.model}, {len(first)} rows, time limit {args.time_limit} s a row",
        "",
        "| way | ok | not_found | wall s | mean distance (rows all found) | rows with the first way's distance |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for way, frame in frames.items():
        same = int(np.isclose(frame["distance"].to_numpy(), first["distance"].to_numpy(), rtol=1e-6).sum())
        mean = frame.loc[found, "distance"].mean() if found.any() else float("nan")
        lines.append(
            f"| {way} | {int(frame['status'].eq('ok').sum())} | {int(frame['status'].eq('not_found').sum())} | "
            f"{walls[way]:.1f} | {mean:.4f} | {same} |"
        )
    print("\n".join(lines))
    print(f"load after: {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
