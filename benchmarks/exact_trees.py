"""The exact engine on tree ensembles: the encoding before the interval rows (``old``: one
distance cut per threshold) against the current one (``new``: one row per feature over its
threshold intervals) and the current one narrowed to local search's distance (``narrow``:
``build``'s ``reach``), each solved by HiGHS (highspy), by SCIP (the ``ortools`` backend) or by
CP-SAT (the ``cpsat`` backend: the tree program as a pure-integer ``cp_model``; ``cpsat4``: four
workers interleaved in one thread), on the same programs.

Data, models and queries as ``benchmarks/exact_gap.py``: the first ``--rows`` test rows each model
predicts 0, goal class 1 with confidence 0.7, the MAD-L1 distance; ``gb`` is
``GradientBoostingClassifier(n_estimators=100, max_depth=3)``, ``forest``
``RandomForestClassifier(n_estimators=100, max_depth=6)``. Each row is first solved by local
search (``explain(problem, seed=0)``); its answer is the warm start of every program. Each
program (the first, distance-minimising one the engine solves) runs with a ``--seconds`` limit,
one thread. Reported per data set, model and variant: the share proven optimal, the median and
max seconds of the solve (loading the program into the solver included; building it is reported
apart: it is the same for both backends), the share of answers the real model accepts (the
decoded solution scored by the problem's calculator), and the largest difference of a proven
optimum from HiGHS's on the new program (a proof must not move the optimum)::

    .venv/bin/python benchmarks/exact_trees.py --datasets heloc --models gb --rows 10
    .venv/bin/python benchmarks/exact_trees.py --variants old-highs,new-highs --models forest --seconds 60
    .venv/bin/python benchmarks/exact_trees.py --variants narrow-highs,narrow-scip,narrow-cpsat --seconds 30
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.exact_gap import CONFIDENCE, MODELS, SEED
from benchmarks.real_data import DATASETS, Data, default_data_dir, load_data
from counterplan.planning import ClassGoal, CounterfactualProblem
from counterplan.planning.calculator import ScoreCalculator
from counterplan.solver.counterfactual import explain
from counterplan.solver.exact import cpsat
from counterplan.solver.exact.backend import solve
from counterplan.solver.exact.encoders import leaf_costs
from counterplan.solver.exact.formulation import build
from counterplan.solver.exact.milp import MilpResult
from counterplan.solver.exact.program import Formulation

VARIANTS = ("old-highs", "new-highs", "new-cpsat", "narrow-highs", "narrow-scip", "narrow-cpsat", "narrow-cpsat4")
"""Each ``program-backend``; a suffix ``-keep`` keeps the leaves beyond the reach (``build``'s
``leaf_bounds`` off), ``-full`` gives CP-SAT its default three presolve rounds (main's CP-SAT
before both was ``narrow-cpsat-keep-full``), ``-nocut`` leaves out the threshold rows of the
leaves (``leaf_costs.THRESHOLD_ROWS`` off: the program before them), ``-merge`` lets CP-SAT's
presolve merge at-most-ones into cliques (``cpsat.MERGE_AT_MOST_ONES``): CP-SAT before both was
``narrow-cpsat-nocut-merge``; ``-own`` leaves CP-SAT its own search (``cpsat.BRANCH_ON_CHANGES``
off: no branching on the features' changes first)."""


def _cpsat(formulation: Formulation, seconds: float, start: np.ndarray | None, workers: int) -> MilpResult:
    """The CP-SAT backend (``cp_model``: the pure-integer model of the tree program); a program it
    does not state (a number whose original is off its grid) goes to SCIP, as in the engine, and
    is marked ``(SCIP)`` in the row's line."""
    result, description = solve(
        formulation.milp,
        "cpsat",
        time_limit=seconds,
        relative_gap=1e-6,
        start=start,
        threads=workers,
        formulation=formulation,
    )
    return result if description.startswith("CP-SAT") else replace(result, status=f"{result.status}(SCIP)")


def _problem(data: Data, model: Any, query: Any) -> CounterfactualProblem:
    return CounterfactualProblem.from_dataframe(
        data.train,
        {c: query[c] for c in data.features},
        model,
        [ClassGoal(target=1, confidence=CONFIDENCE)],
        target=data.spec.target,
        immutable=data.spec.immutable,
    )


def run_case(data: Data, name: str, rows: int, seconds: float, variants: Sequence[str]) -> dict[str, dict[str, Any]]:
    presolve, merge, branch = cpsat.PRESOLVE_ITERATIONS, cpsat.MERGE_AT_MOST_ONES, cpsat.BRANCH_ON_CHANGES
    model = MODELS[name](data).fit(data.train[data.features], data.train[data.spec.target])
    queries = data.test[model.predict(data.test) == 0].head(rows)
    out: dict[str, dict[str, Any]] = {
        v: {"proven": 0, "seconds": [], "build": [], "valid": 0, "diff": 0.0} for v in variants
    }
    for _, query in queries.iterrows():
        problem = _problem(data, model, query)
        local = explain(problem, seed=SEED)
        warm = problem.space.encode(local.proposed) if local.valid else None
        calculator = ScoreCalculator(problem)
        optima: dict[str, float] = {}
        line = [f"  {data.spec.name} {name} row {query.name}:"]
        for variant in variants:
            program, backend, *flags = variant.split("-")
            interval = program != "old"
            reach = -float(local.score_levels[3]) if program == "narrow" and local.valid else None
            started = time.perf_counter()
            leaf_costs.THRESHOLD_ROWS = "nocut" not in flags
            formulation = build(problem, interval_distance=interval, reach=reach, leaf_bounds="keep" not in flags)
            leaf_costs.THRESHOLD_ROWS = True
            built = time.perf_counter() - started
            start = formulation.assignment(warm) if warm is not None else None
            solving = time.perf_counter()
            if backend in {"highs", "scip"}:
                name = "highs" if backend == "highs" else "ortools"
                result, _ = solve(formulation.milp, name, time_limit=seconds, relative_gap=1e-6, start=start)
            else:
                workers = int(backend.removeprefix("cpsat") or 1)
                cpsat.PRESOLVE_ITERATIONS = 3 if "full" in flags else presolve
                cpsat.MERGE_AT_MOST_ONES = "merge" in flags
                cpsat.BRANCH_ON_CHANGES = "own" not in flags
                result = _cpsat(formulation, seconds, start, workers)
                cpsat.PRESOLVE_ITERATIONS, cpsat.MERGE_AT_MOST_ONES, cpsat.BRANCH_ON_CHANGES = presolve, merge, branch
            result = replace(result, seconds=time.perf_counter() - solving)  # loading included, for all
            stats = out[variant]
            stats["build"].append(built)
            stats["seconds"].append(result.seconds)
            if result.x is not None:
                scores = calculator.calculate(formulation.decode(result.x).reshape(1, -1)).scores[0]
                stats["valid"] += bool((scores[:3] >= 0.0).all())
            if (
                reach is not None
                and result.status.startswith("optimal")
                and result.objective > reach * (1 + 1e-7) + 1e-7
            ):
                result = MilpResult("above reach", None, result.objective, result.bound, 0.0, 0, result.seconds)
            if result.status.startswith("optimal"):
                stats["proven"] += 1
                optima[variant] = result.objective
            size = f"{formulation.milp.n_vars}v"
            line.append(f"{variant} {result.status} {result.objective:.6g} {result.seconds:.2f}s {size}")
        if "new-highs" in optima:
            for variant, value in optima.items():
                diff = abs(value - optima["new-highs"]) / max(abs(optima["new-highs"]), 1e-9)
                out[variant]["diff"] = max(out[variant]["diff"], diff)
        print(" | ".join(line), file=sys.stderr, flush=True)
    for stats in out.values():
        stats["rows"] = len(queries)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=5)
    parser.add_argument("--datasets", default="adult,compas,heloc")
    parser.add_argument("--models", default="gb")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--data-dir", type=Path, default=default_data_dir())
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", category=UserWarning)
    variants = args.variants.split(",")
    print(f"load average at start: {' / '.join(f'{x:.2f}' for x in os.getloadavg())}", file=sys.stderr)
    header = (
        "| data | model | variant | rows | proven | median s | max s | build s | valid | max optimum diff |\n"
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"
    )
    lines = [header]
    for dataset in args.datasets.split(","):
        data = load_data(DATASETS[dataset], args.data_dir)
        for name in args.models.split(","):
            for variant, r in run_case(data, name, args.rows, args.seconds, variants).items():
                n = r["rows"]
                lines.append(
                    f"| {dataset} | {name} | {variant} | {n} | {r['proven'] / n:.0%} | "
                    f"{statistics.median(r['seconds']):.2f} | {max(r['seconds']):.2f} | "
                    f"{statistics.median(r['build']):.2f} | {r['valid'] / n:.0%} | {r['diff']:.1e} |"
                )
    print("\n".join(lines))
    print(f"load average at end: {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
