"""The vectorised engine against the per-row engine, row by row, under settings of its own.

The model and question are :mod:`benchmarks.batch_time_limits`' (``--dataset``, ``--model gb``:
:mod:`benchmarks.compare`'s boosting pipeline, ``forest``: a 100-tree depth-6 forest behind the
same encoding; class 1, the data set's immutables), asked of the first ``--rows`` rejected test
rows, seed 0. The per-row engine's answers (``Explainer.explain`` per row) are computed once;
then for each named set of ``VectorSettings`` fields (``--settings`` as JSON, ``{}``: the
defaults) the rows go through ``run_vector_block`` in blocks of 64. Printed per setting, over the
rows that needed a change: the wall seconds, the sum of the vectorised distances over the per-row
ones, their mean and largest ratio, and the share within 2%::

    .venv/bin/python benchmarks/vector_gap.py --dataset adult --model forest --rows 256
    .venv/bin/python benchmarks/vector_gap.py --settings '{"128": {"combo_rows": 128, "recreate_rows": 128}, "now": {}}'
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.batch_time_limits import _model, run
from benchmarks.compare import DATASETS, load_bench
from counterplan.planning import ClassGoal
from counterplan.solver.batch.vectorised import _settings, run_vector_block
from counterplan.solver.explainer import Explainer

BLOCK = 64


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="adult", choices=sorted(DATASETS))
    parser.add_argument("--model", default="forest", choices=["gb", "forest"])
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--settings", default='{"defaults": {}}', help="JSON: name -> VectorSettings fields")
    parser.add_argument("--data-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    args = parser.parse_args()
    bench = load_bench(DATASETS[args.dataset], args.data_dir, args.rows)
    model = _model(bench, args.model)
    per_row = run("loop", bench, model, bench.queries, 1e6).reset_index(drop=True)
    explainer = Explainer(
        model, bench.train, [ClassGoal(target=1)], target=bench.spec.target, immutable=bench.spec.immutable
    )
    base = _settings(explainer.config)
    items = [(row_id, {str(k): v for k, v in row.items()}) for row_id, row in bench.queries.iterrows()]
    print(f"load before: {' / '.join(f'{x:.2f}' for x in os.getloadavg())}", file=sys.stderr)
    print(f"{args.dataset} {args.model}, {len(items)} rows\n")
    print("| settings | wall s | sum ratio | mean ratio | max ratio | within 2% |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, fields in json.loads(args.settings).items():
        records: list[dict[str, object]] = []
        started = time.perf_counter()
        settings = replace(base, **fields)
        for start in range(0, len(items), BLOCK):
            run_vector_block(explainer, items[start : start + BLOCK], 0, records.append, settings=settings)
        wall = time.perf_counter() - started
        found = {r["row_id"]: float(r["distance"]) for r in records}  # type: ignore[arg-type]
        ours = np.array([found.get(row_id, np.nan) for row_id in per_row["row_id"]])
        theirs = per_row["distance"].to_numpy()
        ok = np.isfinite(ours) & np.isfinite(theirs) & (theirs > 0)
        ratio = ours[ok] / theirs[ok]
        print(
            f"| {name} | {wall:.1f} | {ours[ok].sum() / theirs[ok].sum():.4f} | {ratio.mean():.4f} | "
            f"{ratio.max():.2f} | {np.mean(ratio <= 1.02):.0%} |"
        )
    print(f"\nload after: {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
