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
* ``calculator ms``: the median time a solve spends inside the score calculator (the rows
  through the fast path, the memory of scored rows, the score levels, and the real pipeline's
  check of the answer), and the same in 256-row calls: the solve's floor for the rows it scores,
  whatever the search does between its calls (the rest of ``solve ms`` is the search's own work);
* ``calls``: the median number of model calls of a solve; ``model rows``: the median number of
  rows a solve sends to the model (the fast path's and the real pipeline's, counted where the
  calculator reaches the model), and the median rows of a call; ``valid %`` and ``mean
  distance`` (the solver's own soft score: the range-scaled L1 distance) so the answers' quality
  shows.

Without ``--explainer`` it runs on any version of counterplan (the "before" column of the
table in docs/benchmarks/speed.md was measured so, on the commit before issue 16). With
``--before DIR`` it measures the counterplan of checkout ``DIR`` (its ``counterplan/`` package)
and this one side by side, one data set after the other in fresh processes, alternating
``--rounds`` times (each figure is then the median of the rounds)::

    .venv/bin/python benchmarks/one_row.py                      # everything, ~1 min
    .venv/bin/python benchmarks/one_row.py --explainer --rows 50
    .venv/bin/python benchmarks/one_row.py --before ../main --rounds 3
    .venv/bin/python benchmarks/one_row.py --before ../main --clock cpu   # on a busy machine

``--clock cpu`` times the calls and the solves by the process's CPU time instead of the wall
clock: on a machine whose cores other processes share, the wall clock counts the time the
process waited for a core, the CPU time only what it spent.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

HERE = Path(__file__).resolve().parents[1]
_CODE = os.environ.get("ONE_ROW_CODE")  # the checkout whose counterplan a --before child measures
sys.path.insert(0, str(HERE))
if _CODE:
    sys.path.insert(0, _CODE)

from benchmarks.real_data import DATASETS, MODELS, load_data  # noqa: E402
from counterplan.planning import ClassGoal, CounterfactualProblem, calculator  # noqa: E402
from counterplan.solver import explain  # noqa: E402

GOAL = [ClassGoal(target=1, confidence=0.7)]
_SENT: list[int] = []
"""Rows of each model call of the current solve (both paths)."""
_INSIDE: list[float] = []
"""Time of each score calculation of the current solve."""
_COUNTING: list[bool] = []
"""Not empty once the process counts its model calls and times its calculations."""


def count_model_calls(on_call: Callable[[int], None]) -> None:
    """Report the rows of every model call where any version's calculator reaches the model
    (both paths: the fast one and the reference), to ``on_call``."""
    made = calculator.DirectCalls.__init__

    def counting(self: Any, model: Any) -> None:
        made(self, model)
        for name in ("predict", "predict_reference"):
            call = getattr(self, name)

            def counted(X: Any, space: Any, call: Any = call) -> Any:
                on_call(int(X.shape[0]))
                return call(X, space)

            setattr(self, name, counted)

    calculator.DirectCalls.__init__ = counting  # type: ignore[method-assign]


def time_calculations(now: Callable[[], float], on_calculation: Callable[[float], None]) -> None:
    """Report the time of every :meth:`ScoreCalculator.calculate` (the answer's check included,
    which calls it) to ``on_calculation``, by ``now``."""
    calculate = calculator.ScoreCalculator.calculate

    def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
        started = now()
        try:
            return calculate(self, *args, **kwargs)
        finally:
            on_calculation(now() - started)

    calculator.ScoreCalculator.calculate = timed  # type: ignore[method-assign]


def measure(name: str, rows: int, use_explainer: bool, data_dir: Path, clock: str = "wall") -> dict[str, float]:
    """The figures of one data set; times by ``clock`` (``wall`` or ``cpu``: the process's CPU time)."""
    now = time.process_time if clock == "cpu" else time.perf_counter
    data = load_data(DATASETS[name], data_dir)
    model = MODELS["hgb"].build(data.categorical, data.numeric)
    model.fit(data.train[data.features], data.train[data.spec.target])
    batch = data.test.iloc[:256]
    with threadpool_limits(1):
        model.predict_proba(batch)
        calls = []
        for _ in range(30):
            started = now()
            model.predict_proba(batch)
            calls.append(now() - started)
    call = statistics.median(calls)
    rejected = data.test[model.predict(data.test) == 0].iloc[:rows]
    explainer = None
    if use_explainer:
        from counterplan.solver.explainer import Explainer

        explainer = Explainer(model, data.train, GOAL, target=data.spec.target, immutable=data.spec.immutable)
    if not _COUNTING:  # once a process: another data set's measure would count every call twice
        count_model_calls(_SENT.append)
        time_calculations(now, _INSIDE.append)
        _COUNTING.append(True)
    builds, solves, inside, counts, valid, distances, sent, per_call = [], [], [], [], [], [], [], []
    for _, row in rejected.iterrows():
        started = now()
        if explainer is not None:
            problem = explainer.problem(row)
        else:
            problem = CounterfactualProblem.from_dataframe(
                data.train, row, model, GOAL, target=data.spec.target, immutable=data.spec.immutable
            )
        built = now()
        _SENT.clear()
        _INSIDE.clear()
        result = explain(problem, seed=0)
        solves.append(now() - built)
        inside.append(sum(_INSIDE))
        builds.append(built - started)
        counts.append(result.statistics.model_call_count)
        sent.append(sum(_SENT))
        per_call.extend(_SENT)
        valid.append(result.valid)
        if result.valid:
            distances.append(-result.score_levels[3])
    solve = statistics.median(solves)
    calculating = statistics.median(inside)
    return {
        "call": call * 1e3,
        "build": statistics.median(builds) * 1e3,
        "solve": solve * 1e3,
        "in_calls": solve / call,
        "calculator": calculating * 1e3,
        "calculator_in_calls": calculating / call,
        "calls": float(statistics.median(counts)),
        "rows": float(statistics.median(sent)),
        "per_call": float(statistics.median(per_call)),
        "valid": 100.0 * float(np.mean(valid)),
        "distance": float(np.mean(distances)) if distances else float("nan"),
    }


HEADER = (
    "| data set | code | 256-row call ms | build ms | solve ms | solve in 256-row calls | calculator ms "
    "| calculator in 256-row calls | model calls | model rows | rows a call | valid % | mean distance |"
    "\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
)


def _line(name: str, code: str, m: dict[str, float]) -> str:
    return (
        f"| {name} | {code} | {m['call']:.1f} | {m['build']:.1f} | {m['solve']:.1f} | {m['in_calls']:.1f} | "
        f"{m['calculator']:.1f} | {m['calculator_in_calls']:.1f} | {m['calls']:.0f} | {m['rows']:.0f} | "
        f"{m['per_call']:.0f} | {m['valid']:.0f} | {m['distance']:.4f} |"
    )


def _child(name: str, code: Path | None, args: argparse.Namespace) -> dict[str, float]:
    """One data set measured in a fresh process, on the counterplan of ``code`` (None: this one)."""
    env = dict(os.environ)
    env.pop("ONE_ROW_CODE", None)
    if code is not None:
        env["ONE_ROW_CODE"] = str(code.resolve())
    command = [sys.executable, __file__, "--json", "--datasets", name, "--rows", str(args.rows)]
    command += ["--data-dir", str(args.data_dir), "--clock", args.clock] + (["--explainer"] if args.explainer else [])
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def _side_by_side(args: argparse.Namespace) -> None:
    """Each data set on ``--before``'s code and on this one, alternating, median of the rounds."""
    print(HEADER)
    for name in args.datasets.split(","):
        runs: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
        for _ in range(args.rounds):
            runs["before"].append(_child(name, args.before, args))
            runs["after"].append(_child(name, None, args))
        for code, measured in runs.items():
            median = {k: statistics.median(m[k] for m in measured) for k in measured[0]}
            print(_line(name, code, median), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="adult,compas,heloc")
    parser.add_argument("--rows", type=int, default=30)
    parser.add_argument("--explainer", action="store_true", help="build each row's problem with an Explainer")
    parser.add_argument("--data-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--before", type=Path, help="a checkout whose counterplan to measure beside this one")
    parser.add_argument("--rounds", type=int, default=1, help="with --before: alternating rounds")
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="time by the wall clock or by the process's CPU time (steadier on a busy machine)",
    )
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.before is not None:
        _side_by_side(args)
        return
    if not args.json:
        print(HEADER)
    for name in args.datasets.split(","):
        m = measure(name, args.rows, args.explainer, args.data_dir, args.clock)
        print(json.dumps(m) if args.json else _line(name, "this", m), flush=True)


if __name__ == "__main__":
    main()
