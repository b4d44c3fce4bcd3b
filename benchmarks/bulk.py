"""Bulk explanation: instances per second of the ways to explain a whole test set.

The model is the one :mod:`benchmarks.compare` uses (adult, one-hot categoricals, numbers passed
through, ``GradientBoostingClassifier(n_estimators=100, max_depth=3)``), the question is
compare's too (class 1, immutables age, sex, race, native-country, MAD-scaled L1), asked of the
first ``--rows`` (default 1,000) rejected test rows. Ways, each on the same rows and seed:

* ``loop``: one ``Explainer.explain`` after another (on the first ``--loop-rows``, default 200:
  it is the slow one), each row with the seed the batch gives it, so its answers are the batch's;
* ``batch``: ``explain_batch(vectorised=False)`` in this process (the threads path: lockstep
  threads sharing model calls);
* ``workers 2``: the threads path on two processes;
* ``ray 2 cpus``: the threads path on a local Ray started with 2 CPUs (left out when ray is not
  installed);
* ``vector``: ``explain_batch`` (its default: the vectorised engine, :mod:`counterplan.solver.vector`),
  in this process;
* ``vector16``: the same with blocks of 16 rows (its answers must equal ``vector``'s: an answer
  does not depend on its block);
* ``vector-workers``: the vectorised engine on 2 worker processes;
* ``vector-ray``: the vectorised engine on a local Ray started with 2 CPUs.

Printed per way: rows, instances/s, wall seconds, valid %, mean distance and mean changes over
valid rows, how many rows' answers equal the loop's (on the rows both ran; the vectorised engine
searches otherwise, so its answers differ), ``vector``'s (for the other vectorised ways), and the
mean distance of the loop's rows against each way's on the same rows (``dist / loop``, the
quality bar: at most 1.02). The machine's load (``os.getloadavg``) is printed before and after. ``--no-fast``
runs the real pipeline at every model call (a model the fast path cannot compile). ``--profile``
also prints where the in-process batch spends its time (cProfile, top functions by own time).
``--worse N`` prints, per way, how many of the loop's rows it answered farther and nearer, and
its N rows farthest beyond the loop's with both answers' changes (how the vectorised engine's
gap to the loop was studied, row by row)::

    .venv/bin/python benchmarks/bulk.py                  # ~2-4 min on 2 cores
    .venv/bin/python benchmarks/bulk.py --rows 300 --ways batch,workers --profile
    .venv/bin/python benchmarks/bulk.py --dataset heloc --rows 128 --loop-rows 48 --ways loop,vector
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.util
import io
import os
import pstats
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.compare import DATASETS, load_bench
from counterplan.planning import ClassGoal
from counterplan.planning.distance import DistanceSettings
from counterplan.planning.models import adapt_sklearn
from counterplan.solver.batch.records import record_of, records_frame
from counterplan.solver.batch.rows import row_seed
from counterplan.solver.explainer import Explainer

SEED = 0


def loop(explainer: Explainer, rows: pd.DataFrame) -> pd.DataFrame:
    """One row after another, each with its batch seed."""
    records = []
    for row_id, row in rows.iterrows():
        seed = row_seed(SEED, row_id)
        started = time.perf_counter()
        result = explainer.explain(row, seed=seed)
        records.append(record_of(row_id, result, seed, time.perf_counter() - started))
    return records_frame(records, list(explainer.columns or rows.columns))


def run(way: str, explainer: Explainer, rows: pd.DataFrame, window: int) -> pd.DataFrame:
    """The records of one way."""
    if way == "loop":
        return loop(explainer, rows)
    if way == "batch":
        return explainer.explain_batch(rows, seed=SEED, window=window, vectorised=False)
    if way == "workers":
        return explainer.explain_batch(rows, seed=SEED, window=window, workers=2, vectorised=False)
    if way == "vector":
        return explainer.explain_batch(rows, seed=SEED, window=window, vectorised=True)
    if way == "vector16":
        return explainer.explain_batch(rows, seed=SEED, window=16, vectorised=True)
    if way == "vector-workers":
        return explainer.explain_batch(rows, seed=SEED, window=window, workers=2, vectorised=True)
    if way in ("ray", "vector-ray"):
        import ray

        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
        try:
            vectorised = way == "vector-ray"
            return explainer.explain_batch(rows, seed=SEED, window=window, ray="auto", vectorised=vectorised)
        finally:
            ray.shutdown()
    raise SystemExit(f"unknown way {way!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="adult", choices=sorted(DATASETS))
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--loop-rows", type=int, default=200)
    parser.add_argument("--window", type=int, default=64)
    parser.add_argument("--ways", default="loop,batch,workers,ray,vector,vector16,vector-workers")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--worse", type=int, default=0, help="print each way's N rows farthest beyond the loop's")
    parser.add_argument(
        "--no-fast", action="store_true", help="the real pipeline at every model call (no compiled fast path)"
    )
    parser.add_argument("--data-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    args = parser.parse_args()
    bench = load_bench(DATASETS[args.dataset], args.data_dir, args.rows)
    explainer = Explainer(
        adapt_sklearn(bench.pipe, bench.spec.target, fast=not args.no_fast),
        bench.train,
        [ClassGoal(target=1)],
        target=bench.spec.target,
        immutable=bench.spec.immutable,
        distance=DistanceSettings(metric="mad_l1"),
    )
    ways = [w for w in args.ways.split(",") if "ray" not in w or importlib.util.find_spec("ray") is not None]
    results: dict[str, tuple[pd.DataFrame, float]] = {}
    print(f"load before: {os.getloadavg()}", file=sys.stderr, flush=True)
    for way in ways:
        rows = bench.queries.iloc[: args.loop_rows] if way == "loop" else bench.queries
        profiler = cProfile.Profile() if args.profile and way == "batch" else None
        started = time.perf_counter()
        if profiler is not None:
            profiler.enable()
        frame = run(way, explainer, rows, args.window)
        if profiler is not None:
            profiler.disable()
        results[way] = (frame, time.perf_counter() - started)
        print(f"{way}: {len(frame)} rows in {results[way][1]:.1f} s", file=sys.stderr, flush=True)
        if profiler is not None:
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(25)
            print(out.getvalue(), file=sys.stderr)
    print(f"load after: {os.getloadavg()}", file=sys.stderr, flush=True)
    reference = results.get("loop", (None, 0.0))[0]
    vector = results.get("vector", (None, 0.0))[0]
    print(
        "| way | rows | instances/s | x loop | wall s | valid % | mean distance | mean changes | same as loop "
        "| same as vector | dist / loop |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    loop_speed = len(reference) / results["loop"][1] if reference is not None else float("nan")
    for way, (frame, seconds) in results.items():
        valid = frame[frame["valid"]]
        same: Any = "-"
        ratio: Any = "-"
        if reference is not None and way != "loop":
            joined = reference.merge(frame, on="row_id", suffixes=("_a", "_b"))
            same = f"{int((joined['score_a'] == joined['score_b']).sum())}/{len(joined)}"
            ratio = f"{joined['distance_b'].mean() / joined['distance_a'].mean():.4f}"
        alike: Any = "-"
        if vector is not None and way.startswith("vector") and way != "vector":
            joined = vector.merge(frame, on="row_id", suffixes=("_a", "_b"))
            alike = f"{int((joined['score_a'] == joined['score_b']).sum())}/{len(joined)}"
        speed = len(frame) / seconds
        print(
            f"| {way} | {len(frame)} | {speed:.1f} | {speed / loop_speed:.2f} | {seconds:.1f} | "
            f"{100 * frame['valid'].mean():.1f} | {valid['distance'].mean():.3f} | {valid['changed'].mean():.2f} | "
            f"{same} | {alike} | {ratio} |"
        )
    if reference is not None and args.worse:
        for way, (frame, _) in results.items():
            if way != "loop":
                worse_rows(way, reference, frame, args.worse)


def worse_rows(way: str, reference: pd.DataFrame, frame: pd.DataFrame, count: int) -> None:
    """How many of the loop's rows ``way`` answered farther and nearer, and its ``count`` rows
    farthest beyond the loop's, with both answers' changes."""
    joined = reference.merge(frame, on="row_id", suffixes=("_loop", "_way"))
    gap = joined["distance_way"] - joined["distance_loop"]
    print(f"\n{way}: {int((gap > 1e-9).sum())} rows farther than the loop's, {int((gap < -1e-9).sum())} nearer")
    for i in gap.sort_values(ascending=False).index[:count]:
        if gap[i] <= 1e-9:
            break
        row = joined.loc[i]
        print(f"  row {row['row_id']}: +{gap[i]:.3f}")
        print(f"    loop {row['distance_loop']:.3f}: {row['changes_loop']}")
        print(f"    {way} {row['distance_way']:.3f}: {row['changes_way']}")


if __name__ == "__main__":
    main()
