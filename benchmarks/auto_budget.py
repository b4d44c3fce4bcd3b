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
    .venv/bin/python benchmarks/auto_budget.py --datasets demo      # the demo's model, rules and applicant
    .venv/bin/python benchmarks/auto_budget.py --fit points.jsonl   # fit CP-SAT's tree rule to the points

``--fit`` (:func:`fit`) fits :data:`counterplan.solver.exact.estimate.CPSAT_TREES` and prints,
per case, the estimate as measured, the fitted one, the module's, the measured times and
``auto``'s choice before and after (``docs/benchmarks/engines.md``, "auto's estimate under CP-SAT").

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
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
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
from counterplan.solver.exact.estimate import ProgramSize, estimate_seconds, program_size, tree_work

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
    import pandas as pd
    from sklearn.model_selection import train_test_split

    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({f"x{i}": np.round(rng.gamma(2.0, 2.0, rows), 2) for i in range(10)})
    score = frame.x0 - 0.5 * frame.x1 + np.sin(frame.x2) + 0.2 * frame.x3 * frame.x4 - 0.1 * frame.x5**1.5
    frame["y"] = (score + rng.normal(0, 1.0, rows) > 3.0).astype(int)
    train, test = train_test_split(frame, test_size=0.25, random_state=seed)
    features = [f"x{i}" for i in range(10)]
    return Data(DatasetSpec("synthetic", "", "y", ()), train, test, features, [], features, {}, {})


def problems(data: Data, name: str, rows: int) -> Iterator[tuple[Any, CounterfactualProblem]]:
    """``name``'s model fitted on ``data``'s training rows, and the problems of the first ``rows``
    test rows it predicts 0, with their labels."""
    model = Pipeline([("encode", _encoder(data, name == "lr")), ("model", ESTIMATORS[name]())])
    model.fit(data.train[data.features], data.train[data.spec.target])
    queries = data.test[model.predict(data.test[data.features]) == 0].head(rows)
    for label, query in queries.iterrows():
        problem = CounterfactualProblem.from_dataframe(
            data.train,
            {c: query[c] for c in data.features},
            model,
            [ClassGoal(target=1, confidence=0.7)],
            target=data.spec.target,
            immutable=data.spec.immutable,
        )
        yield label, problem


def demo_problems(rows: int) -> Iterator[tuple[Any, CounterfactualProblem]]:
    """The demo as ``counterplan explain`` builds it (its model, rules and question): its
    rejected applicant, then the first rejected rows of its data."""
    from counterplan.planning import demo
    from counterplan.solver.explainer import Explainer

    frame = demo.make_loan_data()
    model = demo.train_loan_model(frame)
    explainer = Explainer(model, frame, spec=demo.demo_spec(), target=demo.TARGET, check=False)
    yield "applicant", explainer.problem(demo.rejected_applicant())
    rejected = np.flatnonzero(model.predict(frame.drop(columns=[demo.TARGET])) == 0)
    for k in rejected[: max(rows - 1, 0)]:
        yield int(k), explainer.problem(int(k))


def run_case(data: Data | None, name: str, rows: int, limit: float, sizes_only: bool = False) -> list[dict[str, Any]]:
    """Each problem of ``name`` on ``data`` (None: the demo) sized, estimated and solved by
    local search, the exact engine and ``auto`` (see the module's description)."""
    capped = SolverConfig(termination=TerminationConfig(spent_limit_seconds=limit))
    points = []
    cases = demo_problems(rows) if data is None else problems(data, name, rows)
    for label, problem in cases:
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
                "backend": report.backend if report is not None else "",
                "chose": solver.engine,
                "reason": solver.engine_reason,
            }
        point = {
            "data": "demo" if data is None else data.spec.name,
            "model": name,
            "row": int(label) if isinstance(label, int) else str(label),
            **{
                k: getattr(size, k)
                for k in ("family", "mutable", "ensemble", "trees", "leaves", "reachable", "thresholds", "units")
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
    parser.add_argument("--fit", type=Path, help="fit the estimate's constants to this file's points (see fit())")
    parser.add_argument("--budget", type=float, default=2.0, help="--fit: the budget the choice column uses")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", category=UserWarning)
    if args.fit is not None:
        return fit(args.fit, args.budget)
    print(
        f"{'data':<6} {'model':<10} {'trees':>5} {'leaves':>6} {'reach':>6} {'thr':>5} {'est s':>7} {'exact s':>8} "
        f"{'proven':>6} {'local s':>7} {'gap %':>7} {'auto':>6} {'auto s':>7}"
    )
    for dataset in args.datasets.split(","):
        data = _data(dataset, args.data_dir)
        for name in args.models.split(",") if data is not None else ["gb"]:
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


KINDS = ("boosted", "histogram", "bagged", "external")


def _kind(point: dict[str, Any]) -> str:
    """A tree row's ensemble kind (points written before the field existed: from the model's name)."""
    if point.get("ensemble"):
        return str(point["ensemble"])
    model = str(point["model"])
    if model.startswith("rf"):
        return "bagged"
    if model.startswith(("lgbm", "xgb")):
        return "external"
    return "histogram" if model == "hgb" else "boosted"


def _size(point: dict[str, Any]) -> ProgramSize:
    fields = ("mutable", "trees", "leaves", "reachable", "thresholds", "units")
    ensemble: Any = _kind(point) if point["family"] == "trees" else ""
    return ProgramSize(point["family"], ensemble=ensemble, **{k: int(point[k]) for k in fields})


def fit(path: Path, budget: float) -> int:
    """Fit CP-SAT's tree rule (:data:`counterplan.solver.exact.estimate.CPSAT_TREES`) to the
    points in ``path`` and print it, then per case the old estimate (as measured), the fitted
    one, the module's, the measured times and ``auto``'s choice under ``budget`` before and after.

    The method: least squares of ``log(seconds)`` of every tree row the exact engine solved with
    CP-SAT (rows cut at the cap enter at the cap: lower bounds) on a constant per kind and a
    common slope on ``log(work)``; then, per kind, the scale is lifted by the smallest factor that
    puts the estimate above the median row of every measured model (data set and model) of that
    kind. Single rows may lie above it; the table counts those the rule sends to the exact engine.
    Linear programs keep their rule; the table shows them against it."""
    points = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    trees = [p for p in points if p["family"] == "trees" and str(p.get("exact_backend", "")).startswith("CP-SAT")]
    kinds = [k for k in KINDS if any(_kind(p) == k for p in trees)]
    work = np.array([tree_work(_size(p)) for p in trees])
    design = np.column_stack([[_kind(p) == k for p in trees] for k in kinds] + [np.log(work)]).astype(float)
    seconds = np.array([p["exact_seconds"] for p in trees])
    coefficients, *_ = np.linalg.lstsq(design, np.log(seconds), rcond=None)
    exponent = float(coefficients[-1])
    fitted = np.exp(design @ coefficients)
    cases: dict[tuple[str, str], list[int]] = {}
    for i, p in enumerate(trees):
        cases.setdefault((p["data"], p["model"]), []).append(i)
    factor = dict.fromkeys(kinds, 0.0)
    for rows in cases.values():
        kind = _kind(trees[rows[0]])
        ratio = statistics.median(seconds[rows]) / statistics.median(fitted[rows])
        factor[kind] = max(factor[kind], ratio)
    scale = {k: float(np.exp(coefficients[i])) * factor[k] for i, k in enumerate(kinds)}
    print(f"CP-SAT trees: {len(trees)} rows, {len(cases)} models; exponent {exponent:.3f}")
    for k in kinds:
        fitted_scale = np.exp(coefficients[kinds.index(k)])
        print(f"  {k:<10} scale {scale[k]:.4g} (least squares {fitted_scale:.4g} x {factor[k]:.2f})")
    print(
        f"\n{'data':<9} {'model':<10} {'kind':<9} {'work':>6} {'old est':>8} {'fit est':>8} {'module':>7} "
        f"{'exact s (rows)':<22} {'auto before':>11} {'after':>6}"
    )
    by_case: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for p in points:
        by_case.setdefault((p["data"], p["model"]), []).append(p)
    over = chosen = 0
    for (data, model), rows in by_case.items():
        size = _size(rows[0])
        if size.family == "trees":
            estimate = max(scale[_kind(r)] * tree_work(_size(r)) ** exponent for r in rows)
        else:
            estimate = max(estimate_seconds(_size(r)) for r in rows)
        module = max(estimate_seconds(_size(r), "cpsat") for r in rows)
        after = "exact" if estimate <= budget else "local"
        if after == "exact":
            chosen += len(rows)
            over += sum(r["exact_seconds"] > budget for r in rows)
        times = ", ".join(f"{r['exact_seconds']:.2f}{'+' if r['capped'] else ''}" for r in rows)
        kind = _kind(rows[0]) if size.family == "trees" else size.family
        print(
            f"{data:<9} {model:<10} {kind:<9} {tree_work(size) if size.family == 'trees' else 0:>6.0f} "
            f"{max(r['estimate_s'] for r in rows):>8.3g} {estimate:>8.3g} {module:>7.3g} {times:<22} "
            f"{rows[0]['auto_chose']:>11} {after:>6}"
        )
    print(f"\nunder {budget:g} s: {chosen} rows go to the exact engine, {over} of them measured above the budget")
    return 0


def _data(dataset: str, data_dir: Path) -> Data | None:
    """A data set by name (``synthetic``: the stand-in; ``demo``: None, the demo's own)."""
    if dataset == "demo":
        return None
    return synthetic() if dataset == "synthetic" else load_data(DATASETS[dataset], data_dir)


if __name__ == "__main__":
    raise SystemExit(main())
