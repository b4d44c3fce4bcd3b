"""``explain_batch(rows, only_rejected=True)``: the approved rows found by one model call per layout
of rows (:func:`counterplan.solver.batch.rows.meeting_the_goal`), against solving every row and
dropping the approved ones' records (what it did before).

Data and model as ``benchmarks/exact_gap.py``'s ``gb`` (``benchmarks/real_data.py``'s split; one-hot
categoricals, ``GradientBoostingClassifier(n_estimators=100, max_depth=3)``), goal class 1 at 0.7.
The first ``--rows`` training rows are explained both ways in one process (window 64, seed 0); the
records of the rejected rows must be equal (``seconds`` aside). Then the approved rows alone: what
solving them costs, against the selection that finds them (and how many of them it finds, and
how many differ from their own solves' word)::

    .venv/bin/python benchmarks/rejected_selection.py --dataset adult --rows 600
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.exact_gap import MODELS
from benchmarks.real_data import DATASETS, default_data_dir, load_data
from counterplan.planning import ClassGoal
from counterplan.solver.batch.rows import meeting_the_goal
from counterplan.solver.batch.run import SKIPPED
from counterplan.solver.explainer import Explainer


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="adult")
    parser.add_argument("--rows", type=int, default=600)
    parser.add_argument("--data-dir", type=Path, default=default_data_dir())
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", category=UserWarning)
    data = load_data(DATASETS[args.dataset], args.data_dir)
    model = MODELS["gb"](data).fit(data.train[data.features], data.train[data.spec.target])
    train = data.train.reset_index(drop=True)
    explainer = Explainer(
        model,
        train,
        [ClassGoal(target=1, confidence=0.7)],
        target=data.spec.target,
        immutable=data.spec.immutable,
    )
    selection = f"0:{args.rows}"
    started = time.perf_counter()
    every = explainer.explain_batch(selection, seed=0)
    before = time.perf_counter() - started
    started = time.perf_counter()
    rejected = explainer.explain_batch(selection, seed=0, only_rejected=True)
    after = time.perf_counter() - started
    kept = every[every["status"] != "already_met"].reset_index(drop=True)
    columns = [c for c in every.columns if c != "seconds"]
    pd.testing.assert_frame_equal(kept[columns], rejected[columns].reset_index(drop=True), check_dtype=False)
    approved = int((every["status"] == "already_met").sum())
    print(f"{args.dataset}: {args.rows} rows, {approved} approved, {len(rejected)} rejected (records equal)")
    print(f"  solve every row, drop the approved: {before:8.2f} s")
    print(f"  the selection, then the rejected:   {after:8.2f} s  ({before / after:.2f}x)")
    print(f"  skipped (attrs): {rejected.attrs[SKIPPED]}; explained rows/s {len(rejected) / after:.1f}")
    ids = every.loc[every["status"] == "already_met", "row_id"].tolist()
    started = time.perf_counter()
    explainer.explain_batch(train.loc[ids], seed=0)
    solving = time.perf_counter() - started
    started = time.perf_counter()
    met = meeting_the_goal(explainer, train.iloc[: args.rows])
    selecting = time.perf_counter() - started
    found = train.index[: args.rows][met].tolist()
    print(f"  the {approved} approved rows: solved {solving:.2f} s; selected from {args.rows}: ", end="")
    print(f"{selecting:.3f} s ({len(found)} found, {len(set(found) ^ set(ids))} differ)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
