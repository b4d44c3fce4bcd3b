"""How far local search is from the proven optimum: the exact engine against the default local
search on adult, compas and heloc.

Data are read and split as in ``benchmarks/real_data.py`` (its loaders: the ``shared/data`` CSVs,
``train_test_split(test_size=0.25, random_state=0)``, adult's training part subsampled to 8,000
rows). Models, each a ``Pipeline`` on the training part:

* ``logreg``: one-hot categoricals, standardised numerics, ``LogisticRegression(max_iter=1000)``;
* ``gb``: one-hot categoricals, numerics passed through,
  ``GradientBoostingClassifier(n_estimators=100, max_depth=3, random_state=0)``;
* ``forest``: the same encoding, ``RandomForestClassifier(n_estimators=100, max_depth=6, random_state=0)``.

Queries: the first ``--rows`` (default 10) test rows each model predicts 0; goal class 1 with
confidence 0.7; the MAD-L1 distance (``auto``); immutables as in ``real_data.py``. Each query is
solved by ``explain(problem, seed=0)`` (local search, the default) and by
``explain(problem, engine="exact", seed=0)`` with a 60 s limit. Both answers are scored by the
same calculator (the soft score's distance level); the gap of local search is
``(local - optimum) / optimum``. Reported per case: rows, the share the exact engine proved
optimal (verified through the real model), its median and max seconds, the share where local
search is optimal (gap <= 1e-6) and within 2%, the mean and max gap, and local search's cost per solve (mean
model calls, mean rows scored, median milliseconds)::

    .venv/bin/python benchmarks/exact_gap.py                 # every case, ~15 min on 2 cores
    .venv/bin/python benchmarks/exact_gap.py --rows 3 --datasets compas --models logreg
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

import numpy as np
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.real_data import DATASETS, Data, default_data_dir, load_data
from counterplan.planning import ClassGoal, CounterfactualProblem
from counterplan.solver.core.config import SolverConfig, TerminationConfig
from counterplan.solver.counterfactual import explain
from counterplan.solver.local.config import BoundaryPolishPhaseConfig, default_phases

SEED = 0
CONFIDENCE = 0.7
EXACT_SECONDS = 60.0


def _encoder(data: Data, scale: bool) -> ColumnTransformer:
    numbers: Any = StandardScaler() if scale else "passthrough"
    return ColumnTransformer(
        [
            ("categories", OneHotEncoder(handle_unknown="ignore"), data.categorical),
            ("numbers", numbers, data.numeric),
        ]
    )


MODELS: dict[str, Callable[[Data], Pipeline]] = {
    "logreg": lambda d: Pipeline([("encode", _encoder(d, True)), ("model", LogisticRegression(max_iter=1000))]),
    "gb": lambda d: Pipeline(
        [
            ("encode", _encoder(d, False)),
            ("model", GradientBoostingClassifier(n_estimators=100, max_depth=3, random_state=SEED)),
        ]
    ),
    "forest": lambda d: Pipeline(
        [
            ("encode", _encoder(d, False)),
            ("model", RandomForestClassifier(n_estimators=100, max_depth=6, random_state=SEED)),
        ]
    ),
}


def _exact_optimum(
    problem: CounterfactualProblem, key: str, cache: dict[str, Any], exact_seconds: float, local_only: bool
) -> dict[str, Any] | None:
    """The exact engine's answer for one row: ``{"distance", "proven", "valid", "seconds", "status"}``,
    from ``cache`` when it holds the row (a longer limit's proof is kept: the optimum does not depend
    on local search), else solved (not with ``local_only``) and stored there."""
    if key in cache:
        return dict(cache[key])
    if local_only:
        return None
    limited = SolverConfig(termination=TerminationConfig(spent_limit_seconds=exact_seconds))
    started = time.perf_counter()
    exact = explain(problem, limited, engine="exact", seed=SEED)
    report = exact.statistics.exact
    cache[key] = {
        "distance": -exact.score_levels[3],
        "proven": bool(report is not None and report.proven and exact.valid),
        "valid": bool(exact.valid),
        "seconds": time.perf_counter() - started,
        "status": report.status if report else "-",
    }
    return dict(cache[key])


def _local_config(polish: dict[str, Any]) -> SolverConfig:
    """The default solve with the boundary polish's settings changed (``--polish``)."""
    phases = [p.model_copy(update=polish) if isinstance(p, BoundaryPolishPhaseConfig) else p for p in default_phases()]
    return SolverConfig(phases=phases)


def run_case(
    data: Data,
    name: str,
    rows: int,
    *,
    exact_seconds: float = EXACT_SECONDS,
    cache: dict[str, Any] | None = None,
    local_only: bool = False,
    only: set[int] | None = None,
    save: Callable[[], None] | None = None,
    polish: dict[str, Any] | None = None,
) -> dict[str, Any]:
    model = MODELS[name](data).fit(data.train[data.features], data.train[data.spec.target])
    predicted = model.predict(data.test)
    queries = data.test[predicted == 0].head(rows)
    if only:
        queries = queries[queries.index.isin(only)]
    cache = {} if cache is None else cache
    gaps: list[float] = []
    proven = 0
    seconds: list[float] = []
    failures: list[str] = []
    calls: list[int] = []
    scored: list[int] = []
    local_ms: list[float] = []
    for _, query in queries.iterrows():
        problem = CounterfactualProblem.from_dataframe(
            data.train,
            {c: query[c] for c in data.features},
            model,
            [ClassGoal(target=1, confidence=CONFIDENCE)],
            target=data.spec.target,
            immutable=data.spec.immutable,
        )
        started = time.perf_counter()
        local = explain(problem, _local_config(polish), seed=SEED) if polish else explain(problem, seed=SEED)
        local_ms.append(1000 * (time.perf_counter() - started))
        calls.append(local.statistics.model_call_count)
        scored.append(local.statistics.score_calculation_count)
        try:
            exact = _exact_optimum(problem, f"{data.spec.name}/{name}/{query.name}", cache, exact_seconds, local_only)
        except ValueError as exc:
            failures.append(str(exc)[:200])
            continue
        if exact is None:
            continue
        if save is not None:
            save()
        seconds.append(exact["seconds"])
        proven += exact["proven"]
        if exact["valid"] and local.valid:
            optimum, found = exact["distance"], -local.score_levels[3]
            gaps.append((found - optimum) / optimum if optimum > 0 else 0.0)
        print(
            f"  {data.spec.name} {name} row {query.name}: exact {exact['distance']:.4f} "
            f"({exact['status']}, {exact['seconds']:.2f} s), local {-local.score_levels[3]:.4f} "
            f"({local.statistics.model_call_count} calls, {local.statistics.score_calculation_count} rows)",
            file=sys.stderr,
        )
    n = len(seconds)
    return {
        "rows": n,
        "proven": proven / n if n else float("nan"),
        "median_s": statistics.median(seconds) if seconds else float("nan"),
        "max_s": max(seconds) if seconds else float("nan"),
        "optimal": float(np.mean([g <= 1e-6 for g in gaps])) if gaps else float("nan"),
        "within2": float(np.mean([g <= 0.02 for g in gaps])) if gaps else float("nan"),
        "mean_gap": float(np.mean(gaps)) if gaps else float("nan"),
        "max_gap": max(gaps) if gaps else float("nan"),
        "calls": float(np.mean(calls)) if calls else float("nan"),
        "scored": float(np.mean(scored)) if scored else float("nan"),
        "local_ms": statistics.median(local_ms) if local_ms else float("nan"),
        "failures": failures,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10)
    parser.add_argument("--datasets", default="adult,compas,heloc")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--data-dir", type=Path, default=default_data_dir())
    parser.add_argument("--exact-seconds", type=float, default=EXACT_SECONDS, help="the exact engine's limit per row")
    parser.add_argument(
        "--cache", type=Path, help="a JSON file of the exact answers: read, and the rows solved here added to it"
    )
    parser.add_argument(
        "--local-only", action="store_true", help="only rows whose exact answer is in --cache; no exact solve"
    )
    parser.add_argument("--polish", default="", help="JSON of boundary-polish settings for local search")
    parser.add_argument("--only", default="", help="comma-separated test-row ids (the data's index) to keep")
    args = parser.parse_args(argv)
    cache: dict[str, Any] = json.loads(args.cache.read_text()) if args.cache and args.cache.exists() else {}
    only = {int(r) for r in args.only.split(",") if r}
    warnings.filterwarnings("ignore", category=UserWarning)
    header = (
        f"{'data':<7} {'model':<7} {'rows':>4} {'proven':>7} {'median s':>9} {'max s':>7} "
        f"{'LS optimal':>10} {'LS <=2%':>8} {'mean gap':>9} {'max gap':>8} {'LS calls':>8} {'LS rows':>8} {'LS ms':>6}"
    )
    lines = [header]
    failures: list[str] = []
    for dataset in args.datasets.split(","):
        data = load_data(DATASETS[dataset], args.data_dir)
        for name in args.models.split(","):
            r = run_case(
                data,
                name,
                args.rows,
                exact_seconds=args.exact_seconds,
                cache=cache,
                local_only=args.local_only,
                only=only,
                polish=json.loads(args.polish) if args.polish else None,
                save=(lambda: args.cache.write_text(json.dumps(cache, indent=1, sort_keys=True)))
                if args.cache
                else None,
            )
            failures += [f"{dataset} {name}: {f}" for f in r["failures"]]
            lines.append(
                f"{dataset:<7} {name:<7} {r['rows']:>4} {r['proven']:>7.0%} {r['median_s']:>9.2f} {r['max_s']:>7.2f} "
                f"{r['optimal']:>10.0%} {r['within2']:>8.0%} {r['mean_gap']:>9.2%} {r['max_gap']:>8.2%} "
                f"{r['calls']:>8.1f} {r['scored']:>8.0f} {r['local_ms']:>6.0f}"
            )
            print(lines[-1], file=sys.stderr)
    print("\n".join(lines))
    for failure in failures:
        print(f"failed: {failure}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
