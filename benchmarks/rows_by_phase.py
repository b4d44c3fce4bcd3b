"""Where a solve's model rows and calls go: per phase and the search function that asked for them.

The solves of :mod:`benchmarks.one_row` (the ``hgb`` pipelines, the first ``--rows`` test rows
the model rejects, the goal "class 1 at 70%", seed 0), with every model call counted where the
calculator reaches the model (after the per-solve memory of scored rows left out the rows it
knows: these are the rows the model really predicts) and charged to the innermost function of
the solver's phases on the call's stack (``solver/local``, ``solver/core/trade.py``,
``solver/answers``...). Printed per data set: each site's rows and calls a solve (means), the
biggest first, so a cut in rows is aimed where the rows are::

    .venv/bin/python benchmarks/rows_by_phase.py --datasets heloc
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

from threadpoolctl import threadpool_limits

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))

from benchmarks.one_row import GOAL, count_model_calls  # noqa: E402
from benchmarks.real_data import DATASETS, MODELS, load_data  # noqa: E402
from counterplan.planning import CounterfactualProblem  # noqa: E402
from counterplan.solver import explain  # noqa: E402

_SOLVER = "/solver/"
_NOT_SITES = ("/solver/scoring.py", "/solver/core/protocol.py", "/solver/core/solver.py", "/solver/counterfactual.py")
"""Modules that pass a batch on, not ask for it: the site is the solver frame below them."""
_RELAYS = {"score", "_score", "_score_known"}
"""Scoring helpers of the phases (the polish's, the scan's): the site is their caller."""

ROWS: collections.Counter[str] = collections.Counter()
CALLS: collections.Counter[str] = collections.Counter()


def _site() -> str:
    """The innermost solver function on the stack that is no scoring relay."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if _SOLVER in name and not name.endswith(_NOT_SITES) and frame.f_code.co_name not in _RELAYS:
            where = name.split(_SOLVER, 1)[1].removesuffix(".py")
            return f"{where}.{frame.f_code.co_name}"
        frame = frame.f_back  # type: ignore[assignment]
    return "(outside the phases)"


def _count(rows: int) -> None:
    """Charge a model call's rows to the phase function that asked for it."""
    site = _site()
    ROWS[site] += rows
    CALLS[site] += 1


def measure(name: str, rows: int, data_dir: Path) -> None:
    """Solve the data set's rows and print each site's rows and calls a solve."""
    ROWS.clear()
    CALLS.clear()
    data = load_data(DATASETS[name], data_dir)
    model = MODELS["hgb"].build(data.categorical, data.numeric)
    model.fit(data.train[data.features], data.train[data.spec.target])
    rejected = data.test[model.predict(data.test) == 0].iloc[:rows]
    solved = 0
    with threadpool_limits(1):
        for _, row in rejected.iterrows():
            problem = CounterfactualProblem.from_dataframe(
                data.train, row, model, GOAL, target=data.spec.target, immutable=data.spec.immutable
            )
            explain(problem, seed=0)
            solved += 1
    n = max(solved, 1)
    print(f"\n{name}: {sum(ROWS.values()) / n:.0f} model rows, {sum(CALLS.values()) / n:.1f} calls a solve")
    print("| site | rows a solve | calls a solve |\n|---|---:|---:|")
    for site, count in ROWS.most_common():
        print(f"| {site} | {count / n:.0f} | {CALLS[site] / n:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="adult,compas,heloc")
    parser.add_argument("--rows", type=int, default=30)
    parser.add_argument("--data-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    args = parser.parse_args()
    count_model_calls(_count)
    for name in args.datasets.split(","):
        measure(name, args.rows, args.data_dir)


if __name__ == "__main__":
    main()
