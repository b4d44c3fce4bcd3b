"""What one row costs: a solve against the model calls it makes, on the gradient-boosting pipelines.

For adult, compas and heloc (read and split as in :mod:`benchmarks.real_data`, the ``hgb``
pipeline: one-hot categoricals, numbers passed through, ``HistGradientBoostingClassifier``), the
first ``--rows`` (default 30) test rows the model rejects are explained with the goal "class 1 at
70%", one at a time, seed 0. Printed per data set:

* ``256-row call ms``: the median of 30 ``predict_proba`` calls of the real pipeline on 256 test
  rows as a DataFrame, native threads limited to one (as a solve limits them);
* ``build ms``: the median time to get a row's problem (``CounterfactualProblem.from_dataframe``,
  or with ``--explainer`` the explainer's ``problem(row)``; the explainer itself is made once);
* ``solve ms``: the median time of the solve alone, and the same in 256-row calls;
* ``calls``: the median number of model calls of a solve; ``valid %`` and ``mean distance``
  (the solver's own soft score: the range-scaled L1 distance) so the answers' quality shows.

Without ``--explainer`` it runs on any version of counterplan (the "before" column of the
table in docs/benchmarks/speed.md was measured so, on the commit before issue 16)::

    .venv/bin/python benchmarks/one_row.py                      # everything, ~1 min
    .venv/bin/python benchmarks/one_row.py --explainer --rows 50
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.real_data import DATASETS, MODELS, load_data
from counterplan.planning import ClassGoal, CounterfactualProblem
from counterplan.solver import explain

GOAL = [ClassGoal(target=1, confidence=0.7)]


def measure(name: str, rows: int, use_explainer: bool, data_dir: Path) -> dict[str, float]:
    """The figures of one data set."""
    data = load_data(DATASETS[name], data_dir)
    model = MODELS["hgb"].build(data.categorical, data.numeric)
    model.fit(data.train[data.features], data.train[data.spec.target])
    batch = data.test.iloc[:256]
    with threadpool_limits(1):
        model.predict_proba(batch)
        calls = []
        for _ in range(30):
            started = time.perf_counter()
            model.predict_proba(batch)
            calls.append(time.perf_counter() - started)
    call = statistics.median(calls)
    rejected = data.test[model.predict(data.test) == 0].iloc[:rows]
    explainer = None
    if use_explainer:
        from counterplan.solver.explainer import Explainer

        explainer = Explainer(model, data.train, GOAL, target=data.spec.target, immutable=data.spec.immutable)
    builds, solves, counts, valid, distances = [], [], [], [], []
    for _, row in rejected.iterrows():
        started = time.perf_counter()
        if explainer is not None:
            problem = explainer.problem(row)
        else:
            problem = CounterfactualProblem.from_dataframe(
                data.train, row, model, GOAL, target=data.spec.target, immutable=data.spec.immutable
            )
        built = time.perf_counter()
        result = explain(problem, seed=0)
        solves.append(time.perf_counter() - built)
        builds.append(built - started)
        counts.append(result.statistics.model_call_count)
        valid.append(result.valid)
        if result.valid:
            distances.append(-result.score_levels[3])
    solve = statistics.median(solves)
    return {
        "call": call * 1e3,
        "build": statistics.median(builds) * 1e3,
        "solve": solve * 1e3,
        "in_calls": solve / call,
        "calls": float(statistics.median(counts)),
        "valid": 100.0 * float(np.mean(valid)),
        "distance": float(np.mean(distances)) if distances else float("nan"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="adult,compas,heloc")
    parser.add_argument("--rows", type=int, default=30)
    parser.add_argument("--explainer", action="store_true", help="build each row's problem with an Explainer")
    parser.add_argument("--data-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    args = parser.parse_args()
    print(
        "| data set | 256-row call ms | build ms | solve ms | solve in 256-row calls | model calls | valid % "
        "| mean distance |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in args.datasets.split(","):
        m = measure(name, args.rows, args.explainer, args.data_dir)
        print(
            f"| {name} | {m['call']:.1f} | {m['build']:.1f} | {m['solve']:.1f} | {m['in_calls']:.1f} | "
            f"{m['calls']:.0f} | {m['valid']:.0f} | {m['distance']:.4f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
