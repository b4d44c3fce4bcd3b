"""counterplan against TrustyAI 0.6.4 and DiCE 0.12 on the adult, compas and heloc data sets.

For each data set (read from ``--data-dir``, default the ``shared/data`` folder next to the
repository root, ``Path(__file__).resolve().parents[2] / "shared" / "data"``; the data are never
copied into the repository):

* ``adult.csv``: target ``income``; categorical workclass, marital-status, occupation,
  relationship, race, sex, native-country; immutable age, sex, race, native-country;
* ``compas.csv``: target ``score``; categorical c_charge_degree, race, sex; immutable age, race, sex;
* ``heloc.csv``: target ``RiskPerformance`` (cast to int); 21 numeric features, no immutables.

One model serves every method: ``Pipeline(ColumnTransformer([OneHotEncoder(handle_unknown="ignore")``
on the categoricals, ``"passthrough"`` on the numerics), GradientBoostingClassifier(n_estimators=100,
max_depth=3, random_state=0))``, fitted on ``train_test_split(test_size=0.25, random_state=0)``'s
training part (adult's training part subsampled to 8,000 rows, ``random_state=0``). The queries are
the first ``--rows`` (default 20) test rows the model predicts 0 (rejected), in the split's order.
Every method gets the same domains: numeric min..max of the training data, categoricals as the
observed categories, immutables held fixed. The goal is class 1.

Methods (``--methods``, comma separated, default all):

* ``counterplan``: ``CounterfactualProblem.from_dataframe(train, row, pipeline, [ClassGoal(target=1)],
  target=..., immutable=..., distance=DistanceSettings(metric="mad_l1"))`` then
  ``solver.explain(problem, config, seed=0)`` with ``SolverConfig()`` or ``--counterplan-config``
  (a YAML ``SolverConfig``). The timed span includes building the problem.
* ``trustyai``: ``CounterfactualExplainer(steps=--trustyai-steps)`` (default 10,000, TrustyAI's own
  default), run on only the first ``--trustyai-rows`` (default 5) queries, because 10,000 steps
  cost about 70 s per instance. ``explain`` gets ``timeout=--trustyai-timeout`` (default 3600 s):
  TrustyAI's own default silently stops the search after 120 s of wall time.
* ``dice-random``, ``dice-genetic``, ``dice-kdtree``: ``dice_ml`` with ``total_CFs=1``,
  ``desired_class="opposite"``, ``features_to_vary`` = the mutable features. kdtree raises when it
  finds nothing; that counts as not valid.

Per instance it records: the proposed row; validity (the pipeline's own ``predict`` on the proposed
row is 1, re-predicted here, whatever the method claims); the MAD-scaled L1 distance from the
original (numeric ``|delta| / MAD`` of the training column, MAD = median(|x - median(x)|), 1.0 when
the MAD is 0; categorical 1 per changed feature); features changed; immutable features changed;
wall seconds; model rows evaluated (the predict/predict_proba each method sees is wrapped in a row
counter; counterplan reports ``result.statistics.score_calculation_count``). Exceptions are caught
per instance, warned about on stderr in one line, and counted as not valid.

The table has one row per data set x method: rows run, valid %, mean MAD-L1 distance and mean
features changed over the valid rows, immutable features broken (total), median seconds per
instance, mean model rows per instance, model rows per second (total rows / total seconds). Then,
for counterplan against TrustyAI on the rows both ran, the mean distance of each over the rows
valid for both. Seeds are fixed everywhere (DiCE random gets ``random_seed=0``; numpy's and
Python's global generators are reseeded before every DiCE call; OptaPlanner's default is
reproducible).

Run from the repository root in a separate benchmark virtual environment (TrustyAI needs Java 17
on the machine; the references are the project's ``benchmark`` extra, never runtime dependencies)::

    python3 -m venv .benchvenv && .benchvenv/bin/pip install -e '.[benchmark]'
    .benchvenv/bin/python benchmarks/compare.py                 # everything, ~10 min + TrustyAI
    .benchvenv/bin/python benchmarks/compare.py --quick         # smoke run: 5 rows, TrustyAI 1k steps on 2
    .benchvenv/bin/python benchmarks/compare.py --methods counterplan,dice-random --datasets adult
    .benchvenv/bin/python benchmarks/compare.py --markdown --per-instance

``--per-instance`` also prints one line per query and method.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import GradientBoostingClassifier
from sklearn.model_selection import train_test_split
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder

from counterplan.planning import ClassGoal, CounterfactualProblem, DistanceSettings
from counterplan.solver import SolverConfig, explain

ALL_METHODS = ("counterplan", "trustyai", "dice-random", "dice-genetic", "dice-kdtree")
ADULT_TRAIN_ROWS = 8000
SEED = 0


@dataclass(frozen=True)
class DatasetSpec:
    """Where a data set lives and how its columns are used."""

    name: str
    file: str
    target: str
    categorical: tuple[str, ...]
    immutable: tuple[str, ...]
    train_rows: int | None = None


DATASETS = {
    "adult": DatasetSpec(
        "adult",
        "adult.csv",
        "income",
        ("workclass", "marital-status", "occupation", "relationship", "race", "sex", "native-country"),
        ("age", "sex", "race", "native-country"),
        ADULT_TRAIN_ROWS,
    ),
    "compas": DatasetSpec("compas", "compas.csv", "score", ("c_charge_degree", "race", "sex"), ("age", "race", "sex")),
    "heloc": DatasetSpec("heloc", "heloc.csv", "RiskPerformance", (), ()),
}


@dataclass
class Bench:
    """One data set, ready: training frame, fitted pipeline, queries and MADs."""

    spec: DatasetSpec
    train: pd.DataFrame
    """Training rows, features and target."""
    features: list[str]
    numeric: list[str]
    pipe: Pipeline
    queries: pd.DataFrame
    """Test rows predicted 0, features only, in the split's order (index = row id in the CSV)."""
    mad: dict[str, float]

    @property
    def mutable(self) -> list[str]:
        return [c for c in self.features if c not in self.spec.immutable]

    def coerce(self, row: pd.DataFrame) -> pd.DataFrame:
        """A proposed row in the training frame's column order and dtypes."""
        out = pd.DataFrame({str(c): row[c].to_numpy() for c in row.columns})[self.features]
        for c in self.features:
            if c in self.numeric:
                out[c] = pd.to_numeric(out[c]).astype(self.train[c].dtype)
            else:
                out[c] = out[c].astype(str)
        return out.reset_index(drop=True)


@dataclass
class Outcome:
    """What one method did on one query."""

    row_id: int
    valid: bool = False
    distance: float = float("nan")
    changed: int = 0
    immutable_changed: int = 0
    seconds: float = 0.0
    model_rows: int = 0
    error: str | None = None
    changes: list[str] = field(default_factory=list)


class CountingModel:
    """Wraps a fitted pipeline and counts the rows its predict/predict_proba see."""

    def __init__(self, model: Pipeline) -> None:
        self.model = model
        self.rows = 0
        self.classes_ = model.classes_
        self.feature_names_in_ = model.feature_names_in_

    def predict(self, X: Any) -> Any:
        self.rows += len(X)
        return self.model.predict(X)

    def predict_proba(self, X: Any) -> Any:
        self.rows += len(X)
        return self.model.predict_proba(X)


# --------------------------------------------------------------------------------------------
# data and model


def load_bench(spec: DatasetSpec, data_dir: Path, rows: int) -> Bench:
    """Read the CSV, split, fit the pipeline, pick the rejected test rows."""
    data = pd.read_csv(data_dir / spec.file)
    data[spec.target] = data[spec.target].astype(int)
    features = [c for c in data.columns if c != spec.target]
    for c in spec.categorical:
        data[c] = data[c].astype(str)
    numeric = [c for c in features if c not in spec.categorical]
    train, test = train_test_split(data, test_size=0.25, random_state=SEED)
    if spec.train_rows is not None and len(train) > spec.train_rows:
        train = train.sample(n=spec.train_rows, random_state=SEED)
    pipe = Pipeline(
        [
            (
                "encode",
                ColumnTransformer(
                    [
                        ("categories", OneHotEncoder(handle_unknown="ignore"), list(spec.categorical)),
                        ("numbers", "passthrough", numeric),
                    ]
                ),
            ),
            ("classify", GradientBoostingClassifier(n_estimators=100, max_depth=3, random_state=SEED)),
        ]
    )
    pipe.fit(train[features], train[spec.target])
    test_x = test[features]
    rejected = test_x[pipe.predict(test_x) == 0]
    mad = {}
    for c in numeric:
        column = train[c].to_numpy(dtype=np.float64)
        value = float(np.median(np.abs(column - np.median(column))))
        mad[c] = value if value > 0 else 1.0
    return Bench(spec, train.copy(), features, numeric, pipe, rejected.iloc[:rows].copy(), mad)


def measure(bench: Bench, original: pd.DataFrame, proposed: pd.DataFrame | None, outcome: Outcome) -> Outcome:
    """Fill validity, distance and change counts by comparing the proposed row with the original."""
    if proposed is None or len(proposed) == 0:
        return outcome
    row = bench.coerce(proposed.iloc[[0]])
    outcome.valid = int(bench.pipe.predict(row)[0]) == 1
    before, after = original.iloc[0], row.iloc[0]
    distance = 0.0
    for c in bench.features:
        if c in bench.numeric:
            delta = abs(float(after[c]) - float(before[c]))
            if delta <= 1e-9:
                continue
            distance += delta / bench.mad[c]
        elif str(after[c]) == str(before[c]):
            continue
        else:
            distance += 1.0
        outcome.changed += 1
        outcome.changes.append(f"{c}: {before[c]} -> {after[c]}")
        if c in bench.spec.immutable:
            outcome.immutable_changed += 1
    outcome.distance = distance
    return outcome


# --------------------------------------------------------------------------------------------
# methods: each returns a function (outcome to fill, 1-row query frame) -> the filled outcome.
# A runner fills seconds and model rows before it can raise, so failed searches keep their cost.


Runner = Callable[[Outcome, pd.DataFrame], Outcome]


def counterplan_problem(bench: Bench, query: pd.DataFrame, change_penalty: float = 0.0) -> CounterfactualProblem:
    """counterplan's problem for one query row: class 1, the data set's immutables, MAD-scaled L1."""
    return CounterfactualProblem.from_dataframe(
        bench.train,
        {c: query.iloc[0][c] for c in bench.features},
        bench.pipe,
        [ClassGoal(target=1)],
        target=bench.spec.target,
        immutable=bench.spec.immutable,
        distance=DistanceSettings(metric="mad_l1", change_penalty=change_penalty),
    )


def counterplan_runner(bench: Bench, config_path: str | None) -> Runner:
    config = SolverConfig.load(config_path) if config_path else SolverConfig()

    def run(outcome: Outcome, query: pd.DataFrame) -> Outcome:
        start = time.perf_counter()
        try:
            result = explain(counterplan_problem(bench, query), config, seed=SEED)
        finally:
            outcome.seconds = time.perf_counter() - start
        outcome.model_rows = result.statistics.score_calculation_count
        if not result.valid:
            outcome.error = f"counterplan says not valid, score {result.score}"
        return measure(bench, query, pd.DataFrame([result.proposed]), outcome)

    return run


def trustyai_runner(bench: Bench, steps: int, timeout: float) -> Runner:
    # Imported here: importing TrustyAI starts a JVM, which runs without TrustyAI should not pay.
    from trustyai.explainers import CounterfactualExplainer
    from trustyai.model import Model, feature_domain

    counter = CountingModel(bench.pipe)
    target = bench.spec.target

    def predict_df(df: pd.DataFrame) -> pd.DataFrame:
        return pd.DataFrame({target: counter.predict(bench.coerce(df))})

    model = Model(predict_df, dataframe_input=True, feature_names=bench.features, output_names=[target])
    domains: list[Any] = []
    for c in bench.features:
        if c in bench.spec.immutable:
            domains.append(None)
        elif c in bench.numeric:
            column = bench.train[c]
            cast: Callable[[Any], Any] = int if pd.api.types.is_integer_dtype(column) else float
            domains.append(feature_domain((cast(column.min()), cast(column.max()))))
        else:
            domains.append(feature_domain(sorted(bench.train[c].unique().tolist())))
    explainer = CounterfactualExplainer(steps=steps)

    def run(outcome: Outcome, query: pd.DataFrame) -> Outcome:
        counter.rows = 0
        start = time.perf_counter()
        try:
            res = explainer.explain(
                inputs=query.reset_index(drop=True),
                goal=pd.DataFrame({target: [1]}),
                model=model,
                feature_domains=domains,
                timeout=timeout,  # without it, TrustyAI stops silently after 120 s wall time
            )
        finally:
            outcome.seconds = time.perf_counter() - start
            outcome.model_rows = counter.rows
        if not bool(res._result.isValid()):
            outcome.error = "TrustyAI says not valid"
        return measure(bench, query, res.proposed_features_dataframe, outcome)

    return run


def dice_runner(bench: Bench, method: str) -> Runner:
    os.environ.setdefault("TQDM_DISABLE", "1")  # DiCE draws a progress bar per query otherwise
    import dice_ml

    counter = CountingModel(bench.pipe)
    data = dice_ml.Data(dataframe=bench.train, continuous_features=bench.numeric, outcome_name=bench.spec.target)
    model = dice_ml.Model(model=counter, backend="sklearn")
    explainer = dice_ml.Dice(data, model, method=method)

    def run(outcome: Outcome, query: pd.DataFrame) -> Outcome:
        counter.rows = 0
        random.seed(SEED)
        np.random.seed(SEED)  # noqa: NPY002 - DiCE draws from numpy's global generator
        extra = {"random_seed": SEED} if method == "random" else {}
        start = time.perf_counter()
        try:
            res = explainer.generate_counterfactuals(
                query, total_CFs=1, desired_class="opposite", features_to_vary=bench.mutable, **extra
            )
        finally:
            outcome.seconds = time.perf_counter() - start
            outcome.model_rows = counter.rows
        cf = res.cf_examples_list[0].final_cfs_df
        if cf is None or len(cf) == 0:
            outcome.error = "DiCE found no counterfactual"
            return outcome
        return measure(bench, query, cf[bench.features], outcome)

    return run


def make_runner(method: str, bench: Bench, args: argparse.Namespace) -> Runner:
    if method == "counterplan":
        return counterplan_runner(bench, args.counterplan_config)
    if method == "trustyai":
        return trustyai_runner(bench, args.trustyai_steps, args.trustyai_timeout)
    return dice_runner(bench, method.removeprefix("dice-"))


# --------------------------------------------------------------------------------------------
# report


def summary_row(dataset: str, method: str, outcomes: Sequence[Outcome]) -> list[str]:
    valid = [o for o in outcomes if o.valid]
    seconds = sum(o.seconds for o in outcomes)
    model_rows = sum(o.model_rows for o in outcomes)

    def mean(values: Sequence[float], digits: int) -> str:
        return f"{statistics.fmean(values):.{digits}f}" if values else "-"

    return [
        dataset,
        method,
        str(len(outcomes)),
        f"{100.0 * len(valid) / len(outcomes):.0f}" if outcomes else "-",
        mean([o.distance for o in valid], 3),
        mean([float(o.changed) for o in valid], 2),
        str(sum(o.immutable_changed for o in outcomes)),
        f"{statistics.median(o.seconds for o in outcomes):.3f}" if outcomes else "-",
        mean([float(o.model_rows) for o in outcomes], 0),
        f"{model_rows / seconds:.0f}" if seconds > 0 else "-",
    ]


HEADER = [
    "dataset",
    "method",
    "rows",
    "valid %",
    "MAD-L1 (valid)",
    "changed (valid)",
    "immutable broken",
    "median s/inst",
    "model rows/inst",
    "model rows/s",
]


def render(header: Sequence[str], rows: Sequence[Sequence[str]], markdown: bool, left: int = 2) -> str:
    """An aligned plain-text table (the first ``left`` columns left-aligned), or Markdown."""
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines)
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            str(c).ljust(w) if i < left else str(c).rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    return "\n".join([line(header), "  ".join("-" * w for w in widths), *(line(r) for r in rows)])


def head_to_head(results: dict[tuple[str, str], list[Outcome]], datasets: Sequence[str]) -> list[list[str]]:
    """counterplan against TrustyAI on the queries both ran, distance over the rows both solved."""
    rows = []
    for dataset in datasets:
        ours = {o.row_id: o for o in results.get((dataset, "counterplan"), [])}
        theirs = {o.row_id: o for o in results.get((dataset, "trustyai"), [])}
        both = [i for i in theirs if i in ours]
        if not both:
            continue
        solved = [i for i in both if ours[i].valid and theirs[i].valid]

        def mean(values: list[float]) -> str:
            return f"{statistics.fmean(values):.3f}" if values else "-"

        rows.append(
            [
                dataset,
                str(len(both)),
                str(len(solved)),
                mean([ours[i].distance for i in solved]),
                mean([theirs[i].distance for i in solved]),
                mean([float(ours[i].changed) for i in solved]),
                mean([float(theirs[i].changed) for i in solved]),
            ]
        )
    return rows


H2H_HEADER = [
    "dataset",
    "rows both ran",
    "valid for both",
    "counterplan MAD-L1",
    "trustyai MAD-L1",
    "counterplan changed",
    "trustyai changed",
]


# --------------------------------------------------------------------------------------------
# main


def default_data_dir() -> Path:
    return Path(__file__).resolve().parents[2] / "shared" / "data"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=default_data_dir(), help="folder with the three CSVs")
    parser.add_argument("--datasets", default=",".join(DATASETS), help="comma-separated: adult,compas,heloc")
    parser.add_argument("--methods", default=",".join(ALL_METHODS), help="comma-separated: " + ",".join(ALL_METHODS))
    parser.add_argument("--rows", type=int, default=20, help="rejected test rows per data set")
    parser.add_argument("--trustyai-steps", type=int, default=10_000, help="TrustyAI score-calculation limit")
    parser.add_argument("--trustyai-rows", type=int, default=5, help="run TrustyAI on only the first N rows")
    parser.add_argument(
        "--trustyai-timeout", type=float, default=3600.0, help="TrustyAI wall-time cap per instance, seconds"
    )
    parser.add_argument("--counterplan-config", default=None, help="YAML SolverConfig for counterplan")
    parser.add_argument("--quick", action="store_true", help="smoke run: rows=5, trustyai-steps=1000, trustyai-rows=2")
    parser.add_argument("--markdown", action="store_true", help="also print the tables as Markdown")
    parser.add_argument("--per-instance", action="store_true", help="also print one line per query and method")
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.trustyai_steps, args.trustyai_rows = 5, 1000, 2
    args.dataset_list = [d.strip() for d in args.datasets.split(",") if d.strip()]
    args.method_list = [m.strip() for m in args.methods.split(",") if m.strip()]
    for name in args.dataset_list:
        if name not in DATASETS:
            parser.error(f"unknown data set {name!r}; choose from {', '.join(DATASETS)}")
    for name in args.method_list:
        if name not in ALL_METHODS:
            parser.error(f"unknown method {name!r}; choose from {', '.join(ALL_METHODS)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    results: dict[tuple[str, str], list[Outcome]] = {}
    summary: list[list[str]] = []
    for dataset in args.dataset_list:
        bench = load_bench(DATASETS[dataset], args.data_dir, args.rows)
        print(
            f"[{dataset}] train {len(bench.train)} rows, {len(bench.features)} features, "
            f"{len(bench.queries)} rejected queries",
            file=sys.stderr,
        )
        for method in args.method_list:
            limit = args.trustyai_rows if method == "trustyai" else args.rows
            queries = bench.queries.iloc[:limit]
            outcomes: list[Outcome] = []
            try:
                runner = make_runner(method, bench, args)
            except Exception as exc:
                print(f"warning: {dataset}/{method}: setup failed: {type(exc).__name__}: {exc}", file=sys.stderr)
                runner = None
            for row_id in queries.index:
                query = queries.loc[[row_id]]
                if runner is None:
                    outcomes.append(Outcome(int(row_id), error="setup failed"))
                    continue
                outcome = Outcome(int(row_id))
                try:
                    runner(outcome, query)
                except Exception as exc:
                    message = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
                    print(f"warning: {dataset}/{method} row {row_id}: {message}", file=sys.stderr)
                    outcome.valid, outcome.error = False, message
                outcomes.append(outcome)
                print(
                    f"  {dataset}/{method} row {row_id}: valid={outcome.valid} dist={outcome.distance:.3f} "
                    f"changed={outcome.changed} {outcome.seconds:.2f}s rows={outcome.model_rows}",
                    file=sys.stderr,
                )
            results[(dataset, method)] = outcomes
            summary.append(summary_row(dataset, method, outcomes))

    config = args.counterplan_config or "SolverConfig() defaults"
    print(
        f"\nrows={args.rows} per data set; trustyai: steps={args.trustyai_steps} on the first "
        f"{args.trustyai_rows} rows; counterplan config: {config}\n"
    )
    print(f"counterplan imported from {Path(sys.modules['counterplan'].__file__ or '?').parent.parent}\n")
    print(render(HEADER, summary, markdown=False))
    h2h = head_to_head(results, args.dataset_list)
    if h2h:
        print("\ncounterplan vs TrustyAI, mean over rows valid for both:\n")
        print(render(H2H_HEADER, h2h, markdown=False, left=1))
    if args.markdown:
        print()
        print(render(HEADER, summary, markdown=True))
        if h2h:
            print()
            print(render(H2H_HEADER, h2h, markdown=True))
    if args.per_instance:
        print("\nper instance:")
        for (dataset, method), outcomes in results.items():
            for o in outcomes:
                note = f" ({o.error})" if o.error else ""
                print(
                    f"{dataset:7} {method:13} row {o.row_id:6}  valid={o.valid!s:5} dist={o.distance:8.3f} "
                    f"changed={o.changed} immutable={o.immutable_changed} {o.seconds:7.2f}s "
                    f"rows={o.model_rows:6}{note}  [{'; '.join(o.changes)}]"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
