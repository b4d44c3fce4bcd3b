"""Calibrating ``auto``'s estimate of the exact engine's time (:mod:`counterplan.solver.exact.estimate`).

For each data set and model, the first ``--rows`` (default 3) test rows the model predicts 0 are
solved twice, as ``auto`` would run either choice: by local search (``explain(problem, seed=0)``)
and by the exact engine after its warm start (``engine="exact"``, what ``auto`` ran before it
weighed time; capped at ``--limit`` seconds, default 20: a capped run is a lower bound and is
marked), then by ``auto`` (under the same cap). Each line gives the program's size as
the estimate reads it (trees, leaves, thresholds of mutable features, hidden units), the estimate,
both times, both distances and whether the exact engine proved its answer; then what ``auto``
chooses under a 2 s budget and how long that choice took. Data: ``benchmarks/real_data.py``'s
loaders and split; goal class 1 at 0.7; the default distance (MAD-L1)::

    .venv/bin/python benchmarks/auto_budget.py --datasets heloc --models lr,gb,lgbm
    .venv/bin/python benchmarks/auto_budget.py --json points.jsonl      # every case, the data points
    .venv/bin/python benchmarks/auto_budget.py --datasets synthetic --models lgbm   # 150,000 rows, 10 features

Models: ``lr`` (LogisticRegression, standardised), ``gb`` (GradientBoosting 100 trees depth 3),
``gb_small`` (30 trees depth 2), ``rf`` (RandomForest 100 trees depth 6), ``rf_small`` (20 trees
depth 4), ``hgb`` (HistGradientBoosting, default: 100 iterations, 31 leaves), ``lgbm``
(LGBMClassifier default: 100 trees, 31 leaves), ``lgbm_small`` (20 trees, 8 leaves), ``xgb``
(XGBClassifier default: 100 trees, depth 6); tree models read numbers as they are, categories one-hot.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sklearn.compose import ColumnTransformer
from sklearn.ensemble import GradientBoostingClassifier, HistGradientBoostingClassifier, RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.real_data import DATASETS, Data, DatasetSpec, default_data_dir, load_data
from counterplan.planning import ClassGoal, CounterfactualProblem
from counterplan.solver.core.config import SolverConfig, TerminationConfig
from counterplan.solver.counterfactual import CounterfactualSolver
from counterplan.solver.exact.estimate import estimate_seconds, program_size

SEED = 0


def _encoder(data: Data, scale: bool) -> ColumnTransformer:
    numbers: Any = StandardScaler() if scale else "passthrough"
    categories = OneHotEncoder(handle_unknown="ignore", sparse_output=False)
    return ColumnTransformer([("categories", categories, data.categorical), ("numbers", numbers, data.numeric)])


def _lgbm(**options: Any) -> Any:
    from lightgbm import LGBMClassifier  # optional

    return LGBMClassifier(random_state=SEED, verbose=-1, **options)


def _xgb() -> Any:
    from xgboost import XGBClassifier  # optional

    return XGBClassifier(random_state=SEED)


ESTIMATORS: dict[str, Callable[[], Any]] = {
    "lr": lambda: LogisticRegression(max_iter=1000),
    "gb_small": lambda: GradientBoostingClassifier(n_estimators=30, max_depth=2, random_state=SEED),
    "gb": lambda: GradientBoostingClassifier(n_estimators=100, max_depth=3, random_state=SEED),
    "rf_small": lambda: RandomForestClassifier(n_estimators=20, max_depth=4, random_state=SEED),
    "rf": lambda: RandomForestClassifier(n_estimators=100, max_depth=6, random_state=SEED),
    "hgb": lambda: HistGradientBoostingClassifier(random_state=SEED),
    "lgbm_small": lambda: _lgbm(n_estimators=20, num_leaves=8),
    "lgbm": _lgbm,
    "xgb": _xgb,
}


def synthetic(rows: int = 150_000, seed: int = SEED) -> Data:
    """A stand-in for Give Me Some Credit (not available here): 10 numeric features, ``rows`` rows,
    a nonlinear label with noise, split as the real data sets are."""
    import numpy as np
    import pandas as pd
    from sklearn.model_selection import train_test_split

    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({f"x{i}": np.round(rng.gamma(2.0, 2.0, rows), 2) for i in range(10)})
    score = frame.x0 - 0.5 * frame.x1 + np.sin(frame.x2) + 0.2 * frame.x3 * frame.x4 - 0.1 * frame.x5**1.5
    frame["y"] = (score + rng.normal(0, 1.0, rows) > 3.0).astype(int)
    train, test = train_test_split(frame, test_size=0.25, random_state=seed)
    features = [f"x{i}" for i in range(10)]
    return Data(DatasetSpec("synthetic", "", "y", ()), train, test, features, [], features, {}, {})


def run_case(data: Data, name: str, rows: int, limit: float, sizes_only: bool = False) -> list[dict[str, Any]]:
    model = Pipeline([("encode", _encoder(data, name == "lr")), ("model", ESTIMATORS[name]())])
    model.fit(data.train[data.features], data.train[data.spec.target])
    queries = data.test[model.predict(data.test[data.features]) == 0].head(rows)
    capped = SolverConfig(termination=TerminationConfig(spent_limit_seconds=limit))
    points = []
    for label, query in queries.iterrows():
        problem = CounterfactualProblem.from_dataframe(
            data.train,
            {c: query[c] for c in data.features},
            model,
            [ClassGoal(target=1, confidence=0.7)],
            target=data.spec.target,
            immutable=data.spec.immutable,
        )
        started = time.perf_counter()
        size = program_size(problem)
        sizing = time.perf_counter() - started
        timed = {}
        engines = (("local", SolverConfig()), ("exact", capped), ("auto", capped)) if not sizes_only else ()
        for engine, config in engines:
            started = time.perf_counter()
            solver = CounterfactualSolver(problem, config, SEED, engine=engine)  # type: ignore[arg-type]
            result = solver.solve()
            report = result.statistics.exact
            timed[engine] = {
                "seconds": time.perf_counter() - started,
                "distance": -result.score_levels[3] if result.valid else None,
                "proven": bool(report is not None and report.proven),
                "chose": solver.engine,
                "reason": solver.engine_reason,
            }
        point = {
            "data": data.spec.name,
            "model": name,
            "row": int(label) if isinstance(label, int) else str(label),
            **{
                k: getattr(size, k)
                for k in ("family", "mutable", "trees", "leaves", "reachable", "thresholds", "units")
            },
            "sizing_s": sizing,
            "estimate_s": estimate_seconds(size),
            "capped": bool(timed) and timed["exact"]["seconds"] >= limit,
            **{f"{e}_{k}": v for e, t in timed.items() for k, v in t.items() if k != "reason"},
            "auto_reason": timed["auto"]["reason"] if timed else "",
        }
        print(json.dumps(point), file=sys.stderr, flush=True)
        points.append(point)
    return points


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=3)
    parser.add_argument("--limit", type=float, default=20.0)
    parser.add_argument("--datasets", default="adult,heloc")
    parser.add_argument("--models", default=",".join(ESTIMATORS))
    parser.add_argument("--data-dir", type=Path, default=default_data_dir())
    parser.add_argument("--json", type=Path, help="append every data point to this file (JSON lines)")
    parser.add_argument("--sizes-only", action="store_true", help="only the programs' sizes and estimates: no solve")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", category=UserWarning)
    print(
        f"{'data':<6} {'model':<10} {'trees':>5} {'leaves':>6} {'reach':>6} {'thr':>5} {'est s':>7} {'exact s':>8} "
        f"{'proven':>6} {'local s':>7} {'gap %':>7} {'auto':>6} {'auto s':>7}"
    )
    for dataset in args.datasets.split(","):
        data = synthetic() if dataset == "synthetic" else load_data(DATASETS[dataset], args.data_dir)
        for name in args.models.split(","):
            points = run_case(data, name, args.rows, args.limit, args.sizes_only)
            if args.json is not None:
                with args.json.open("a", encoding="utf-8") as out:
                    out.writelines(json.dumps(p) + "\n" for p in points)
            if not points or args.sizes_only:
                continue
            p = points[0]
            exact_s = max(q["exact_seconds"] for q in points)
            gaps = [
                (q["local_distance"] - q["exact_distance"]) / q["exact_distance"] * 100
                for q in points
                if q["local_distance"] is not None and q["exact_distance"]
            ]
            print(
                f"{dataset:<6} {name:<10} {p['trees']:>5} {p['leaves']:>6} {p['reachable']:>6} {p['thresholds']:>5} "
                f"{p['estimate_s']:>7.2f} {exact_s:>7.2f}{'+' if any(q['capped'] for q in points) else ' '} "
                f"{sum(q['exact_proven'] for q in points):>3}/{len(points):<2} "
                f"{statistics.median(q['local_seconds'] for q in points):>7.2f} "
                f"{max(gaps) if gaps else float('nan'):>7.2f} {p['auto_chose']:>6} "
                f"{max(q['auto_seconds'] for q in points):>7.2f}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
