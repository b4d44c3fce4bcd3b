"""The same solve on an idle machine and beside a busy neighbour, with native threads limited or not.

A HistGradientBoosting pipeline (ColumnTransformer + OneHotEncoder, fitted on the demo loan
data) predicts with OpenMP threads. The demo question (the rejected applicant, approved with
70% confidence, seed 0) is solved

* with ``model_threads: 1`` (the default) and ``model_threads: null`` (native pools left as
  they are: one OpenMP thread per core),
* on the machine as it is ("idle") and while ``--burners`` processes each keep a core busy,
* with the default termination (no clock) and, for comparison, the old default's 10-second
  cap (``--old-cap``, the issue this answers),

``--repeats`` times each, and prints the median (and range) of the wall time, the model calls
and steps, how many repeats gave the same answer (proposed values and score) as the first,
idle, one-thread solve, and how many were stopped by the time cap.
It also times the limiter itself: entering and leaving ``NativeThreadLimit`` per solve, and the
first scan of the loaded libraries. Run: ``python benchmarks/threads.py``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from sklearn.compose import ColumnTransformer
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder

from counterplan.planning import ClassGoal, CounterfactualProblem
from counterplan.planning.demo import CATEGORICAL, IMMUTABLE, TARGET, make_loan_data, rejected_applicant
from counterplan.planning.threads import NativeThreadLimit
from counterplan.solver import CounterfactualResult, SolverConfig, TerminationConfig, explain


@contextmanager
def busy_neighbour(burners: int) -> Iterator[None]:
    """``burners`` processes that each spin one core, running for the duration."""
    code = "print('busy', flush=True)\nwhile True:\n    pass\n"
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) for _ in range(burners)]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "busy"
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def _problem() -> CounterfactualProblem:
    data = make_loan_data()
    features = data.drop(columns=[TARGET])
    numeric = [c for c in features.columns if c not in CATEGORICAL]
    encode = ColumnTransformer(
        [
            ("categories", OneHotEncoder(handle_unknown="ignore"), list(CATEGORICAL)),
            ("numbers", "passthrough", numeric),
        ],
        sparse_threshold=0.0,
    )
    model = Pipeline([("encode", encode), ("classify", HistGradientBoostingClassifier(random_state=0))])
    model.fit(features, data[TARGET])
    return CounterfactualProblem.from_dataframe(
        data, rejected_applicant(), model, [ClassGoal(target=1, confidence=0.7)], target=TARGET, immutable=IMMUTABLE
    )


def _answer(result: CounterfactualResult) -> tuple[str, str]:
    return repr(sorted(result.proposed.items())), result.score


def _span(values: list[int]) -> str:
    """``"16"`` when every repeat agrees, else ``"5-16"``."""
    low, high = min(values), max(values)
    return str(low) if low == high else f"{low}-{high}"


def _limiter_overhead() -> tuple[float, float]:
    """Microseconds: the first limit (scans the libraries), then the median of later ones."""
    start = time.perf_counter()
    with NativeThreadLimit(1):
        pass
    first = time.perf_counter() - start
    times = []
    for _ in range(2000):
        start = time.perf_counter()
        with NativeThreadLimit(1):
            pass
        times.append(time.perf_counter() - start)
    return first * 1e6, statistics.median(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--burners", type=int, default=2)
    parser.add_argument("--old-cap", type=float, default=10.0, help="the old default's time cap, seconds (0: skip)")
    args = parser.parse_args()
    problem = _problem()
    first_us, per_solve_us = _limiter_overhead()
    cases: list[tuple[str, str, int | None]] = [
        ("idle", "default", 1),
        ("idle", "default", None),
        ("busy", "default", 1),
        ("busy", "default", None),
    ]
    if args.old_cap > 0:
        cases += [("busy", f"old {args.old_cap:g} s cap", 1), ("busy", f"old {args.old_cap:g} s cap", None)]
    print(f"{os.cpu_count()} cores; load average before: {os.getloadavg()[0]:.2f}; busy = {args.burners} burners")
    print(
        f"{'machine':<8} {'termination':<14} {'threads':>8} {'wall s':>8} {'min s':>7} {'max s':>7}"
        f" {'calls':>7} {'steps':>7}  {'same answer':>11} {'time cap':>10}"
    )
    reference: tuple[str, str] | None = None
    for machine, termination, threads in cases:
        config = SolverConfig(model_threads=threads)
        if termination != "default":
            config = config.model_copy(
                update={
                    "termination": TerminationConfig(spent_limit_seconds=args.old_cap, children=(config.termination,))
                }
            )
        walls: list[float] = []
        results: list[CounterfactualResult] = []
        with busy_neighbour(args.burners if machine == "busy" else 0):
            for _ in range(args.repeats):
                start = time.perf_counter()
                results.append(explain(problem, config, seed=0))
                walls.append(time.perf_counter() - start)
        if reference is None:
            reference = _answer(results[0])
        same = sum(_answer(r) == reference for r in results)
        capped = sum(r.statistics.termination_reason == "spent time limit" for r in results)
        calls = _span([r.statistics.model_call_count for r in results])
        steps = _span([r.statistics.steps for r in results])
        print(
            f"{machine:<8} {termination:<14} {threads if threads is not None else 'all':>8}"
            f" {statistics.median(walls):>8.3f} {min(walls):>7.3f} {max(walls):>7.3f}"
            f" {calls:>7} {steps:>7}"
            f"  {f'{same}/{len(results)}':>11} {f'{capped}/{len(results)}':>10}"
        )
    print(f"\nlimiter per solve: {per_solve_us:.1f} us median (first solve, scanning the libraries: {first_us:.0f} us)")


if __name__ == "__main__":
    main()
