"""Action plans on adult: the front, its cheapest plans, and an exhaustive check of short plans.

On ``--rows`` (default 50) rows of ``adult.csv`` (``--data-dir``, default ``shared/data`` next to
the repository root) that a gradient-boosting pipeline rejects, with the shipped
``examples/adult-actions.yaml`` and the immutables race, sex, native-country, fnlwgt,
relationship, marital-status and workclass, ``counterplan.solver.plans.planner.plan`` runs with the default
``PlanConfig`` (population 500, 150 generations; ``--population`` / ``--generations`` to change).
Per row: whether a feasible plan exists, the front's size, the cheapest plan's length and cost,
the cheapest plan of at most two actions, and the seconds.

The exhaustive reference: every single action and every ordered pair of distinct actions, each
action's value on a grid (``--grid`` points over an ``add`` action's delta range, every value of
a ``set`` action), unrolled and scored in one model call (about 3,000 plans a row); its cheapest
feasible plan of at most two actions. Ours is "at least as cheap" on a row when its cheapest
short plan costs no more (within 1e-9), or both found none.

Run from the repository root (the project's virtual environment, with the ``plans`` extra)::

    .venv/bin/python benchmarks/plans.py --rows 50
"""

from __future__ import annotations

import argparse
import statistics
import time
from itertools import permutations
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import GradientBoostingClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder

from counterplan.planning import ClassGoal, CounterfactualProblem
from counterplan.planning.actions import Action, ActionSet, CostGraph
from counterplan.planning.calculator import ScoreCalculator
from counterplan.solver.plans.genome import Decoded
from counterplan.solver.plans.planner import plan
from counterplan.solver.plans.search import PlanConfig, plan_termination
from counterplan.solver.plans.unroll import unroll

ROOT = Path(__file__).resolve().parents[1]
IMMUTABLE = ["race", "sex", "native-country", "fnlwgt", "relationship", "marital-status", "workclass"]
TRAIN_ROWS = 8000


def exhaustive_short(
    problem: CounterfactualProblem, actions: list[Action], graph: CostGraph, grid: int
) -> tuple[float, int]:
    """The cheapest feasible plan of one or two distinct actions on a value grid, and the plans tried."""
    space = problem.space
    choices = [np.linspace(a.low, a.high, grid) if a.kind == "add" else a.choices(space) for a in actions]
    if any(a.kind == "add" and space.integral[space.index[a.feature]] for a in actions):
        choices = [
            np.unique(np.rint(c)) if a.kind == "add" and space.integral[space.index[a.feature]] else c
            for a, c in zip(actions, choices, strict=True)
        ]
    orders: list[list[int]] = []
    values: list[list[float]] = []
    count = len(actions)
    for a in range(count):
        for v in choices[a]:
            orders.append([a] + [-1] * (count - 1))
            row = [0.0] * count
            row[a] = float(v)
            values.append(row)
    for a, b in permutations(range(count), 2):
        for v in choices[a]:
            for w in choices[b]:
                orders.append([a, b] + [-1] * (count - 2))
                row = [0.0] * count
                row[a], row[b] = float(v), float(w)
                values.append(row)
    order = np.array(orders, dtype=np.intp)
    decoded = Decoded(order=order, lengths=(order >= 0).sum(axis=1), values=np.array(values))
    played = unroll(decoded, actions, graph, space, space.original)
    scores = ScoreCalculator(problem).calculate(played.final.copy()).scores
    feasible = (scores[:, :3] == 0.0).all(axis=1) & (played.violations == 0)
    cost = np.where(feasible, played.cost, np.inf)
    return float(cost.min()), int(order.shape[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50)
    parser.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--population", type=int, default=500)
    parser.add_argument("--generations", type=int, default=150)
    parser.add_argument("--grid", type=int, default=11)
    args = parser.parse_args()
    data = pd.read_csv(args.data_dir / "adult.csv")
    features = data.drop(columns="income")
    text = [c for c in features.columns if not pd.api.types.is_numeric_dtype(features[c])]
    encode = ColumnTransformer([("text", OneHotEncoder(handle_unknown="ignore"), text)], remainder="passthrough")
    model = Pipeline([("encode", encode), ("model", GradientBoostingClassifier(random_state=0))])
    model.fit(features[:TRAIN_ROWS], data["income"][:TRAIN_ROWS])
    rest = np.arange(TRAIN_ROWS, len(data))
    rejected = rest[model.predict(features.iloc[rest]) == 0][: args.rows]
    action_set = ActionSet.from_data(yaml.safe_load((ROOT / "examples" / "adult-actions.yaml").read_text()))
    config = PlanConfig(population=args.population, termination=plan_termination(args.generations))
    found, sizes, lengths, seconds, ours_short, theirs_short, tried = [], [], [], [], [], [], []
    for row in rejected.tolist():
        problem = CounterfactualProblem.from_dataframe(
            data, row, model, [ClassGoal(target=1)], target="income", immutable=IMMUTABLE
        )
        start = time.perf_counter()
        result = plan(problem, action_set, config=config)
        seconds.append(time.perf_counter() - start)
        found.append(result.cheapest is not None)
        sizes.append(len(result.plans))
        if result.cheapest is not None:
            lengths.append(len(result.cheapest.steps))
        ours_short.append(result.short.total_cost if result.short is not None else np.inf)
        actions, graph = action_set.compile(problem.space)
        best, count = exhaustive_short(problem, actions, graph, args.grid)
        theirs_short.append(best)
        tried.append(count)
        print(
            f"row {row}: front {len(result.plans)}, short ours {ours_short[-1]:.4f} "
            f"vs grid {best:.4f}, {seconds[-1]:.2f} s",
            flush=True,
        )
    ours, theirs = np.array(ours_short), np.array(theirs_short)
    as_cheap = (ours <= theirs + 1e-9) | (np.isinf(ours) & np.isinf(theirs))
    print(
        "\n| rows | with a feasible plan | median front size | median cheapest plan length | median s per row "
        "| short plan at least as cheap as the grid's | grid plans per row |"
    )
    print("|---|---|---|---|---|---|---|")
    print(
        f"| {len(found)} | {sum(found)}/{len(found)} | {statistics.median(sizes):g} | "
        f"{statistics.median(lengths) if lengths else float('nan'):g} | {statistics.median(seconds):.2f} | "
        f"{int(as_cheap.sum())}/{len(as_cheap)} | {statistics.median(tried):g} |"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
