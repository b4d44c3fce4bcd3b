"""Bulk exact: rows per second of ``explain_batch`` with the exact engine, per MILP backend.

The model and question are :mod:`benchmarks.compare`'s (``--dataset`` adult or heloc, one-hot
categoricals, ``GradientBoostingClassifier(n_estimators=100, max_depth=3)``, class 1, MAD-L1, the
data set's immutables), asked of the first ``--rows`` rejected test rows. Each way is the exact
engine (local search's warm start, the narrowed program, the tie-break program, the checks) with
one backend: ``loop-B`` one ``Explainer.explain`` after another, ``batch-B`` ``explain_batch`` in
this process (rows in threads), ``workers-B`` ``explain_batch(workers=2)``, ``ray-B``
``explain_batch(ray="auto")`` on a local Ray started in the run with 2 CPUs, before its clock
(left out when ray is not installed); ``B`` is ``scip`` (the ``ortools`` backend) or ``cpsat``. Two rows are solved
first, untimed, so no way pays the imports. Printed: rows, rows/s, wall seconds, CPU seconds of
this process (all its threads; a steadier measure than the wall on a busy machine, but not
counting worker processes or Ray's), valid %, proven % (the report's ``exact.proven``), mean
distance, and how many rows' distances equal the first way's::

    .venv/bin/python benchmarks/exact_bulk.py --rows 40
    .venv/bin/python benchmarks/exact_bulk.py --rows 40 --dataset heloc --ways loop-cpsat,batch-cpsat
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.compare import DATASETS, Bench, load_bench
from counterplan.planning import ClassGoal
from counterplan.planning.distance import DistanceSettings
from counterplan.planning.models import adapt_sklearn
from counterplan.solver.core.config import SolverConfig
from counterplan.solver.engines import exact_config
from counterplan.solver.exact.config import ExactPhaseConfig
from counterplan.solver.explainer import Explainer

SEED = 0
BACKENDS = {"scip": "ortools", "cpsat": "cpsat"}


def _config(backend: str) -> SolverConfig:
    config = exact_config(SolverConfig())
    return config.model_copy(update={"phases": (*config.phases[:-1], ExactPhaseConfig(backend=backend))})


def run(way: str, bench: Bench, rows: pd.DataFrame) -> pd.DataFrame:
    """The records of one way (``loop-B``, ``batch-B``, ``workers-B``)."""
    kind, name = way.split("-")
    explainer = Explainer(
        adapt_sklearn(bench.pipe, bench.spec.target),
        bench.train,
        [ClassGoal(target=1)],
        target=bench.spec.target,
        immutable=bench.spec.immutable,
        distance=DistanceSettings(metric="mad_l1"),
        config=_config(BACKENDS[name]),
        engine="exact",
    )
    if kind == "loop":
        records = []
        for row_id, row in rows.iterrows():
            result = explainer.explain(row, seed=SEED)
            exact = result.statistics.exact
            distance = -float(result.score_levels[3]) if result.valid else np.nan
            records.append({"row_id": row_id, "valid": result.valid, "distance": distance, "proven": exact.proven})
        return pd.DataFrame(records)
    if kind == "ray":  # Ray is started before the clock (main)
        frame = explainer.explain_batch(rows, seed=SEED, ray="auto")
    else:
        frame = explainer.explain_batch(rows, seed=SEED, workers=2 if kind == "workers" else 1)
    frame["proven"] = np.nan  # the batch's records carry no proof
    return frame[["row_id", "valid", "distance", "proven"]]


def _start_ray() -> Any:
    """A local Ray with 2 CPUs, started before the clock (its start takes seconds of its own)."""
    import ray

    started = time.perf_counter()
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    print(f"ray started in {time.perf_counter() - started:.1f} s (not timed)", file=sys.stderr, flush=True)
    return ray


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50)
    parser.add_argument("--ways", default="loop-cpsat,batch-cpsat,workers-cpsat,ray-cpsat")
    parser.add_argument("--dataset", default="adult", choices=["adult", "heloc"])
    parser.add_argument("--data-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    args = parser.parse_args()
    bench = load_bench(DATASETS[args.dataset], args.data_dir, args.rows)
    ways = [w for w in args.ways.split(",") if not w.startswith("ray") or importlib.util.find_spec("ray") is not None]
    run(f"loop-{ways[0].split('-')[1]}", bench, bench.queries.iloc[:2])  # the imports, untimed
    print(f"load before: {' / '.join(f'{x:.2f}' for x in os.getloadavg())}", file=sys.stderr, flush=True)
    lines = ["| way | rows | rows/s | wall s | cpu s | valid % | proven % | mean distance | same distance as first |"]
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    first: pd.DataFrame | None = None
    for way in ways:
        ray = _start_ray() if way.startswith("ray") else None
        started, cpu = time.perf_counter(), time.process_time()
        try:
            frame = run(way, bench, bench.queries)
        finally:
            seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
            if ray is not None:
                ray.shutdown()
        print(f"{way}: {len(frame)} rows in {seconds:.1f} s", file=sys.stderr, flush=True)
        first = frame if first is None else first
        same = int(np.isclose(frame["distance"].to_numpy(), first["distance"].to_numpy(), rtol=1e-6).sum())
        proven = f"{frame['proven'].mean():.0%}" if frame["proven"].notna().all() else "-"
        lines.append(
            f"| {way} | {len(frame)} | {len(frame) / seconds:.2f} | {seconds:.1f} | {cpu:.1f} | "
            f"{frame['valid'].mean():.0%} | "
            f"{proven} | {frame.loc[frame['valid'], 'distance'].mean():.4f} | {same} |"
        )
    print("\n".join(lines))
    print(f"load after: {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
