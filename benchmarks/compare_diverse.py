"""counterplan against DiCE 0.12 when one or several counterfactuals are asked for (k = 1 and 4).

It measures the quality of the *sets* of answers each method returns, on the setup of
``benchmarks/compare.py`` (imported from it, not copied): the adult, compas and heloc data sets from
``--data-dir`` (default ``shared/data`` next to the repository root), the same immutables, the same
fitted ``GradientBoostingClassifier`` pipeline for every method, and the same queries (the first
``--rows``, default 10, test rows the model rejects). The goal is class 1.

Methods, each asked for ``k`` answers per query (``--k``, default ``1,4``):

* ``counterplan``: ``CounterfactualProblem.from_dataframe(train, row, pipeline, [ClassGoal(target=1)],
  target=..., immutable=..., distance=DistanceSettings(metric="mad_l1"))`` then
  ``solver.explain(problem, seed=0, num_counterfactuals=k)``; the answers are
  ``result.counterfactuals`` (distinct valid answers, possibly fewer than ``k``). The timed span
  includes building the problem.
* ``dice-random``, ``dice-genetic``, ``dice-kdtree``: ``dice_ml`` with ``total_CFs=k``,
  ``desired_class="opposite"``, ``features_to_vary`` = the mutable features; the answers are
  ``final_cfs_df``. DiCE raising "No counterfactuals found" means 0 answers.

Every answer set is judged by ``counterplan.planning.metrics.evaluate`` (DiCE's and CARLA's formulas, see that
module's docstring) with a ``MetricContext`` of the training features and label (so ``knn`` and
``ynn`` work, ``k=5`` neighbours), the categorical features, the pipeline's ``predict_proba``,
classes ``[0, 1]``, target class 1 and the immutable features. One table row per data set, ``k``
and method:

* ``answers/row``: mean number of answers per query (0 when a method found none or failed);
* ``rows valid``: queries with at least one valid answer, of those run;
* ``validity`` (share of a query's answers predicted 1), ``prox_cont`` (MAD-scaled L1 over the
  numeric features), ``prox_cat`` (share of categoricals changed), ``changed`` (features changed),
  ``l1`` (CARLA d2 on min-max scaled features), ``redundancy`` (changes revertible alone),
  ``ynn``: means over the queries that got at least one answer;
* ``immutable``: immutable features changed, summed over every answer of every query;
* ``diversity`` (mean pairwise MAD-L1 + categorical mismatches) and ``count_div`` (mean pairwise
  share of differing features): k > 1 only, over the queries with at least two answers;
* ``median s/row``: median wall seconds per query.

Then the paired table: counterplan (each ``--change-penalty`` value) against each DiCE method on
the queries both answered, ``ours / theirs``. When the two returned different numbers of answers
to a query, both are judged on as many as the one with fewer returned, each method's closest
ones (``counterplan.planning.metrics.answer_distances``), so a method is not rewarded for returning fewer.

``--change-penalty 0,1e6`` runs counterplan once per value (``DistanceSettings.change_penalty``,
MADs per changed feature; a value other than 0 is labelled ``counterplan P=value``).
``--cache DIR`` stores DiCE's answers and seconds per data set, method, k, row count and query,
and reuses them on the next run (DiCE's answers do not change between runs; counterplan always
runs afresh), so a counterplan change is measured against the whole table in minutes.

Seeds are fixed (counterplan ``seed=0``; DiCE random ``random_seed=0``; numpy's and Python's
global generators reseeded before every DiCE call). An exception in one call is caught, warned
about on stderr in one line, and counted as 0 answers. ``--skip dataset:method`` (comma separated)
leaves a pair out, e.g. ``--skip heloc:dice-kdtree`` (about 50 s per heloc query).

Run from the repository root in the benchmark virtual environment (``pip install -e '.[benchmark]'``)::

    .benchvenv/bin/python benchmarks/compare_diverse.py
    .benchvenv/bin/python benchmarks/compare_diverse.py --rows 20 --change-penalty 0,1e6 --cache .cache --markdown
    .benchvenv/bin/python benchmarks/compare_diverse.py --rows 6 --k 4 --skip heloc:dice-kdtree --markdown
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable from the repository root
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.compare import DATASETS, SEED, Bench, counterplan_problem, default_data_dir, load_bench, render
from counterplan.planning.metrics import MetricContext, answer_distances, evaluate
from counterplan.solver import explain

METHODS = ("counterplan", "dice-random", "dice-genetic", "dice-kdtree")
NO_CF = "No counterfactuals found"


@dataclass
class Judged:
    """One method's answers to one query and their metrics."""

    metrics: dict[str, float]
    answers: pd.DataFrame
    original: dict[str, Any]


Runner = Callable[[pd.DataFrame, int], pd.DataFrame]
"""(1-row query, k) -> the answers, in the training frame's feature columns and dtypes."""


def counterplan_runner(bench: Bench, change_penalty: float) -> Runner:

    def run(query: pd.DataFrame, k: int) -> pd.DataFrame:
        problem = counterplan_problem(bench, query, change_penalty)
        result = explain(problem, seed=SEED, num_counterfactuals=k)
        if not result.counterfactuals:
            return pd.DataFrame(columns=bench.features)
        return bench.coerce(pd.DataFrame([cf.proposed for cf in result.counterfactuals]))

    return run


def dice_runner(bench: Bench, method: str) -> Runner:
    os.environ.setdefault("TQDM_DISABLE", "1")
    import dice_ml

    data = dice_ml.Data(dataframe=bench.train, continuous_features=bench.numeric, outcome_name=bench.spec.target)
    explainer = dice_ml.Dice(data, dice_ml.Model(model=bench.pipe, backend="sklearn"), method=method)

    def run(query: pd.DataFrame, k: int) -> pd.DataFrame:
        random.seed(SEED)
        np.random.seed(SEED)  # noqa: NPY002 - DiCE draws from numpy's global generator
        extra = {"random_seed": SEED} if method == "random" else {}
        try:
            res = explainer.generate_counterfactuals(
                query, total_CFs=k, desired_class="opposite", features_to_vary=bench.mutable, **extra
            )
        except Exception as exc:
            if NO_CF in str(exc):
                return pd.DataFrame(columns=bench.features)
            raise
        cf = res.cf_examples_list[0].final_cfs_df
        if cf is None or len(cf) == 0:
            return pd.DataFrame(columns=bench.features)
        return bench.coerce(cf[bench.features])

    return run


def make_runner(method: str, bench: Bench, change_penalty: float) -> Runner:
    if method == "counterplan":
        return counterplan_runner(bench, change_penalty)
    return dice_runner(bench, method.removeprefix("dice-"))


def metric_context(bench: Bench) -> MetricContext:
    spec = bench.spec
    return MetricContext(
        train=bench.train,
        features=bench.features,
        categorical=list(spec.categorical),
        predict_proba=bench.pipe.predict_proba,
        classes=[0, 1],
        target_class=1,
        immutable=list(spec.immutable),
        label=spec.target,
        k=5,
    )


# --------------------------------------------------------------------------------------------
# report

HEADER = [
    "dataset",
    "k",
    "method",
    "rows",
    "answers/row",
    "rows valid",
    "validity",
    "prox_cont",
    "prox_cat",
    "changed",
    "l1",
    "redundancy",
    "ynn",
    "immutable",
    "diversity",
    "count_div",
    "median s/row",
]


def summary_row(dataset: str, k: int, method: str, results: Sequence[dict[str, float]]) -> list[str]:
    def mean(key: str, digits: int = 3) -> str:
        values = [r[key] for r in results if not np.isnan(r[key])]
        return f"{statistics.fmean(values):.{digits}f}" if values else "-"

    answered = [r for r in results if r["count"] > 0]
    return [
        dataset,
        str(k),
        method,
        str(len(results)),
        mean("count", 2),
        f"{sum(r['validity'] > 0 for r in answered)}/{len(results)}",
        mean("validity"),
        mean("proximity_continuous"),
        mean("proximity_categorical"),
        mean("changed_features", 2),
        mean("l1"),
        mean("redundancy", 2),
        mean("ynn"),
        f"{sum(r['immutable_violations'] for r in answered):.0f}",
        mean("diversity") if k > 1 else "-",
        mean("count_diversity") if k > 1 else "-",
        f"{statistics.median(r['seconds'] for r in results):.3f}" if results else "-",
    ]


PAIRED_HEADER = [
    "dataset",
    "k",
    "ours",
    "rival",
    "rows",
    "answers compared/row",
    "prox_cont",
    "prox_cat",
    "changed",
    "diversity",
    "count_div",
]
PAIRED_METRICS = ("proximity_continuous", "proximity_categorical", "changed_features")


def closest(context: MetricContext, judged: Judged, n: int) -> dict[str, float]:
    """The metrics of ``judged``'s ``n`` answers closest to the original (DiCE distance)."""
    order = np.argsort(answer_distances(context, judged.original, judged.answers), kind="stable")[:n]
    return evaluate(context, judged.original, judged.answers.iloc[order])


def paired_rows(
    context: MetricContext,
    dataset: str,
    k: int,
    *,
    label: str,
    ours: Sequence[Judged],
    rivals: Mapping[str, Sequence[Judged]],
) -> list[list[str]]:
    """counterplan against each rival on the queries both answered: ``ours / theirs`` per metric.

    Unpaired means compare different queries when a method answers only some (DiCE kdtree), and
    different numbers of answers when a method returns fewer than k. Here each cell averages
    the same queries for both, and on each query both are judged on as many answers as the one
    with fewer returned (each method's closest ones). Diversity is over the queries where that
    number is at least two.
    """
    out = []
    for rival, theirs in rivals.items():
        both: list[tuple[dict[str, float], dict[str, float]]] = []
        answers = 0
        for a, b in zip(ours, theirs, strict=True):
            n = int(min(a.metrics["count"], b.metrics["count"]))
            if n > 0:
                both.append((closest(context, a, n), closest(context, b, n)))
                answers += n
        many = [(a, b) for a, b in both if a["count"] > 1]

        def pair(key: str, rows: Sequence[tuple[dict[str, float], dict[str, float]]], digits: int = 3) -> str:
            if not rows:
                return "-"
            a = statistics.fmean(r[0][key] for r in rows)
            b = statistics.fmean(r[1][key] for r in rows)
            return f"{a:.{digits}f} / {b:.{digits}f}"

        cells = [pair(key, both, 2 if key == "changed_features" else 3) for key in PAIRED_METRICS]
        diversity = [pair("diversity", many), pair("count_diversity", many)] if k > 1 else ["-", "-"]
        per_query = f"{answers / len(both):.2f}" if both else "-"
        out.append([dataset, str(k), label, rival, str(len(both)), per_query, *cells, *diversity])
    return out


# --------------------------------------------------------------------------------------------
# main


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=default_data_dir(), help="folder with the three CSVs")
    parser.add_argument("--datasets", default=",".join(DATASETS), help="comma-separated: adult,compas,heloc")
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated: " + ",".join(METHODS))
    parser.add_argument("--k", default="1,4", help="comma-separated numbers of counterfactuals to ask for")
    parser.add_argument("--rows", type=int, default=10, help="rejected test rows per data set")
    parser.add_argument("--skip", default="", help="comma-separated dataset:method pairs to leave out")
    parser.add_argument("--markdown", action="store_true", help="also print the table as Markdown")
    parser.add_argument("--per-instance", action="store_true", help="print one stderr line per query and method")
    parser.add_argument(
        "--change-penalty",
        default="0",
        help="comma-separated DistanceSettings.change_penalty values (MADs per changed feature); "
        "counterplan runs once per value, labelled 'counterplan P=value' when not 0",
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=None,
        help="folder where DiCE's answers are stored and reused (counterplan is always run afresh)",
    )
    args = parser.parse_args(argv)
    args.dataset_list = [d.strip() for d in args.datasets.split(",") if d.strip()]
    args.method_list = [m.strip() for m in args.methods.split(",") if m.strip()]
    args.k_list = [int(k) for k in args.k.split(",") if k.strip()]
    try:
        args.penalties = [float(p) for p in args.change_penalty.split(",") if p.strip()]
    except ValueError:
        parser.error(f"--change-penalty {args.change_penalty!r}: expected numbers")
    args.skip_set = {s.strip() for s in args.skip.split(",") if s.strip()}
    for name in args.dataset_list:
        if name not in DATASETS:
            parser.error(f"unknown data set {name!r}; choose from {', '.join(DATASETS)}")
    for name in args.method_list:
        if name not in METHODS:
            parser.error(f"unknown method {name!r}; choose from {', '.join(METHODS)}")
    for pair in args.skip_set:
        dataset, _, method = pair.partition(":")
        if dataset not in DATASETS or method not in METHODS:
            parser.error(f"bad --skip entry {pair!r}; expected dataset:method")
    if any(k < 1 for k in args.k_list):
        parser.error("--k values must be at least 1")
    return args


def cached_answers(
    cache: Path | None, key: str, bench: Bench, compute: Callable[[], tuple[pd.DataFrame, float]]
) -> tuple[pd.DataFrame, float]:
    """A reference method's answers and seconds, read from ``cache/key.json`` when an earlier run stored them.

    The references do not change between runs of this script (same library versions, same seeds),
    while counterplan does; caching them lets a counterplan change be measured against the full
    table without re-running DiCE kdtree's minutes per heloc query.
    """
    path = None if cache is None else cache / f"{key}.json"
    if path is not None and path.exists():
        stored = json.loads(path.read_text())
        frame = pd.DataFrame(stored["answers"], columns=bench.features)
        return (bench.coerce(frame) if len(frame) else frame), float(stored["seconds"])
    answers, seconds = compute()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        records = json.loads(answers.to_json(orient="records"))
        path.write_text(json.dumps({"answers": records, "seconds": seconds}))
    return answers, seconds


def run_one(
    runner: Runner | None,
    context: MetricContext,
    query: pd.DataFrame,
    k: int,
    label: str,
    *,
    cache: tuple[Path, str, Bench] | None = None,
) -> Judged:
    """One query through one method, judged; failures are 0 answers with a stderr warning."""
    features = context.features

    def compute() -> tuple[pd.DataFrame, float]:
        answers = pd.DataFrame(columns=features)
        start = time.perf_counter()
        if runner is not None:
            try:
                answers = runner(query, k)
            except Exception as exc:
                message = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
                print(f"warning: {label}: {message}", file=sys.stderr)
        return answers, time.perf_counter() - start

    if cache is None:
        answers, seconds = compute()
    else:
        answers, seconds = cached_answers(cache[0], cache[1], cache[2], compute)
    original = {c: query.iloc[0][c] for c in features}
    return Judged(evaluate(context, original, answers, seconds=seconds), answers, original)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    summary: list[list[str]] = []
    paired: list[list[str]] = []
    for dataset in args.dataset_list:
        bench = load_bench(DATASETS[dataset], args.data_dir, args.rows)
        context = metric_context(bench)
        print(
            f"[{dataset}] train {len(bench.train)} rows, {len(bench.features)} features, "
            f"{len(bench.queries)} rejected queries",
            file=sys.stderr,
        )
        runners: dict[str, Runner | None] = {}
        for method in args.method_list:
            if f"{dataset}:{method}" in args.skip_set:
                continue
            for penalty in args.penalties if method == "counterplan" else [0.0]:
                label = method if not penalty else f"{method} P={penalty:g}"
                try:
                    runners[label] = make_runner(method, bench, penalty)
                except Exception as exc:
                    print(f"warning: {dataset}/{label}: setup failed: {type(exc).__name__}: {exc}", file=sys.stderr)
                    runners[label] = None
        for k in args.k_list:
            by_method: dict[str, list[Judged]] = {}
            for method, runner in runners.items():
                results = by_method.setdefault(method, [])
                for row_id in bench.queries.index:
                    label = f"{dataset}/k={k}/{method} row {row_id}"
                    cache = None
                    if args.cache is not None and not method.startswith("counterplan"):
                        cache = (args.cache, f"{dataset}-{method}-k{k}-rows{args.rows}-{row_id}", bench)
                    judged = run_one(runner, context, bench.queries.loc[[row_id]], k, label, cache=cache)
                    results.append(judged)
                    result = judged.metrics
                    if args.per_instance:
                        print(
                            f"  {label}: answers={result['count']:.0f} validity={result['validity']:.2f} "
                            f"prox={result['proximity_continuous']:.3f} changed={result['changed_features']:.2f} "
                            f"{result['seconds']:.2f}s",
                            file=sys.stderr,
                        )
                summary.append(summary_row(dataset, k, method, [r.metrics for r in results]))
                print(f"  done {dataset} k={k} {method}", file=sys.stderr)
            rivals = {m: r for m, r in by_method.items() if not m.startswith("counterplan")}
            for ours in (m for m in by_method if m.startswith("counterplan")):
                paired.extend(paired_rows(context, dataset, k, label=ours, ours=by_method[ours], rivals=rivals))

    skipped = ", ".join(sorted(args.skip_set)) or "none"
    print(f"\nrows={args.rows} per data set; k={args.k}; skipped: {skipped}\n")
    print(render(HEADER, summary, markdown=False, left=3))
    if paired:
        print("\ncounterplan / rival, on the queries both answered:\n")
        print(render(PAIRED_HEADER, paired, markdown=False, left=3))
    if args.markdown:
        print()
        print(render(HEADER, summary, markdown=True))
        if paired:
            print()
            print(render(PAIRED_HEADER, paired, markdown=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
