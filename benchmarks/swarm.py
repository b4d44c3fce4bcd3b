"""counterplan's particle swarm (MD-PSO) against its local search and DiCE 0.12 on high-dimensional data.

The setup follows Shekhar et al., "A PSO Based Method to Generate Actionable Counterfactuals for
High Dimensional Data" (2023): a random forest black box, ``k`` counterfactuals per query, and the
paper's metrics (its eq. 8-15), on data sets from 7 to 300 features. Everything is offline.

Data sets (``--datasets``, comma separated; every model is fitted on
``train_test_split(test_size=0.25, random_state=0)``'s training part):

* ``compas`` (7 features, 3 categorical): ``compas.csv`` from ``--data-dir`` (default the
  ``shared/data`` folder next to the repository root), label ``score``, categoricals and
  immutables (age, race, sex) as in ``benchmarks/compare.py``;
* ``breast_cancer`` (30): ``sklearn.datasets.load_breast_cancer``;
* ``digits`` (64 integer pixels ``p0..p63``, 0..16): ``load_digits`` restricted to 3s (label 0)
  and 8s (label 1): which pixels turn this 3 into an 8;
* ``hill_valley_like`` (100): ``make_classification(n_samples=1212, n_features=100,
  n_informative=10, n_redundant=40, n_repeated=0, random_state=0)``;
* ``lsvt_like`` (300): ``make_classification(n_samples=504, n_features=300, n_informative=20,
  n_redundant=80, random_state=0)``.

Features are named ``f0..fN`` (pixels ``p0..p63``), the label column ``label``. The model
(``--model``): ``rf`` ``RandomForestClassifier(n_estimators=100, random_state=0)`` (default, the
paper's black box), ``hgb`` ``HistGradientBoostingClassifier(random_state=0)`` or ``mlp``
``MLPClassifier(hidden_layer_sizes=(32,), max_iter=500, random_state=0)`` after a
``StandardScaler``; in a pipeline that one-hot encodes the categoricals. The queries are the first
``--queries`` (default 5) test rows the model predicts 0 (for digits: 3s predicted 3), in the
split's order. The goal is class 1 with probability at least 0.5.

Methods (``--methods``, comma separated), each asked for ``k`` answers per query (``--k``, default 5):

* ``local``, ``swarm``, ``auto``: ``CounterfactualProblem.from_dataframe(train, row, pipeline,
  [ClassGoal(target=1, confidence=0.5)], target="label", immutable=...)`` then
  ``counterplan.solver.counterfactual.explain(problem, seed=--seed, num_counterfactuals=k, engine=...)``;
* ``swarm-paper``: ``SwarmPhaseConfig(objective="paper")`` and a boundary polish: the paper's
  objective (hinge + mean Gower + features changed) guides the particles;
* ``swarm-final``: ``SwarmPhaseConfig(answers_from="final_swarm")`` and a polish: several answers
  the paper's way, k-means over the particles' own bests (a cluster without a valid one is empty);
* ``swarm+local``: the same with ``SolverConfig(phases=(SwarmPhaseConfig(),
  LocalSearchPhaseConfig(termination=stable_termination()), BoundaryPolishPhaseConfig()))``;
* ``dice-random``: ``dice_ml`` random sampling, ``total_CFs=k``, ``desired_class="opposite"``,
  ``features_to_vary`` = the mutable features, ``random_seed=--seed``, its other settings
  (``posthoc_sparsity_param=0.1``) at their defaults. "No counterfactuals found" is 0 answers.
  Each call runs in a forked child process and is killed after ``--dice-timeout`` seconds
  (default 60; 0: no cap, in process); a killed call is 0 answers, its time the cap, and the
  ``capped`` column counts them.

counterplan's answers are ``result.counterfactuals`` (or ``result.proposed`` when that is empty);
DiCE's are ``final_cfs_df``. Duplicate answers are dropped. Each method's own validity flag is
ignored: an answer ``c`` is valid when the pipeline's ``predict_proba(c)[1] >= 0.5``. The timed
span of a counterplan query includes building the problem; DiCE's explainer is built once per
data set, outside it.

Metrics, for a query ``x`` with valid answers ``c_1..c_m`` (``m <= k``); ``C`` the continuous
(numeric) features, ``D`` the categorical ones, ``F`` all of them;
``MAD_j = median_i |x_ij - median(x_j)|`` over the training rows, or the feature's training
range when that is 0, or 1 when both are 0:

* ``prox_cont`` = (1/m) sum_i (1/|C|) sum_{j in C} |c_ij - x_j| / MAD_j              (eq. 8)
* ``prox_cat``  = (1/m) sum_i (1/|D|) sum_{j in D} [c_ij != x_j]  (blank without categoricals)
* ``sparsity``  = (1/m) sum_i (1/|F|) sum_{j in F} [c_ij != x_j]: the share of features changed
* ``d(a, b)``   = (1/|C|) sum_{j in C} |a_j - b_j| / MAD_j + (1/|D|) sum_{j in D} [a_j != b_j]
  (the second term 0 without categoricals), so ``prox(c) = d(c, x)`` = prox_cont + prox_cat
* ``diversity`` = mean over the pairs i < l of d(c_i, c_l)                        (m >= 2 only)
* ``norm_div``  = mean over the pairs i < l of d(c_i, c_l) / (prox(c_i) + prox(c_l))  (m >= 2 only;
  at most 1 by the triangle inequality)
* ``coverage``  = (sum over queries of m) / (k x queries): the share of the requested outputs
  that came back valid and distinct.

Each metric is averaged over a query's valid answers, then over the queries with at least one
(two for the diversities). Also: ``rows valid`` (queries with at least one valid answer / queries),
``answers/row`` (distinct answers returned, valid or not), ``changed`` (mean features changed per
valid answer), ``s/query`` (median wall seconds per query), ``engine`` (what counterplan ran;
``auto`` picks by problem) and ``capped`` (DiCE calls killed at the time cap).

One table per data set (rows = methods); under COMPAS, the paper's own COMPAS numbers for MD-PSO
and DiCE-Random. With ``--k1`` every method also runs with k = 1, and a last table gives, per data
set (ordered by dimension) and method: valid %, the mean MAD-L1 distance of the answer
(``sum_{j in C} |c_j - x_j| / MAD_j + sum_{j in D} [c_j != x_j]``) and its features changed, over
the valid queries, and the median seconds per query.

Run from the repository root in the benchmark virtual environment (it has dice-ml); never
imported by the tests::

    .benchvenv/bin/python benchmarks/swarm.py --quick --methods local,swarm,dice-random
    .benchvenv/bin/python benchmarks/swarm.py --k1 --markdown        # everything, about 15 min on 2 cores
    .benchvenv/bin/python benchmarks/swarm.py --datasets lsvt_like --methods swarm,swarm+local,local --queries 10

``--quick``: 2 queries, k = 2, and (unless ``--datasets`` is given) compas and breast_cancer.
DiCE random takes about 3 s per query on 300 features when it finds its k answers, but on
hill_valley_like and lsvt_like some of its k = 5 calls run past the 60 s cap (3 and 2 of 5 queries
with the default settings, the rf model and seed 0); those capped calls are about 5 of the
15 minutes.
"""

from __future__ import annotations

import argparse
import itertools
import multiprocessing
import os
import random
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.datasets import load_breast_cancer, load_digits, make_classification
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable from the repository root
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.compare import DATASETS as CSV_DATASETS, Bench, DatasetSpec, default_data_dir, render

DATASETS = ("compas", "breast_cancer", "digits", "hill_valley_like", "lsvt_like")
METHODS = ("local", "swarm", "swarm+local", "swarm-paper", "swarm-final", "auto", "dice-random")
MODELS = ("rf", "hgb", "mlp")
QUICK_DATASETS = ("compas", "breast_cancer")
LABEL = "label"
TARGET_CLASS = 1
CONFIDENCE = 0.5
SPLIT_SEED = 0
NO_CF = "No counterfactuals found"
CHANGE_TOLERANCE = 1e-9

PAPER_COMPAS = (
    ("MD-PSO (paper)", ("0.2629", "0.1230", "0.2959", "1.1257", "1.00")),
    ("DiCE-Random (paper)", ("1.3992", "0.1999", "1.7163", "1.2266", "1.00")),
)
"""Shekhar et al.'s COMPAS results, five numbers per method in the paper's column order."""


# --------------------------------------------------------------------------------------------
# data and model


def make_model(name: str, numeric: Sequence[str], categorical: Sequence[str]) -> Pipeline:
    """The black box: one-hot categoricals (and scaled numerics for the network), then the classifier."""
    classifier: Any
    if name == "rf":
        classifier = RandomForestClassifier(n_estimators=100, random_state=SPLIT_SEED)
    elif name == "hgb":
        classifier = HistGradientBoostingClassifier(random_state=SPLIT_SEED)
    else:
        classifier = MLPClassifier(hidden_layer_sizes=(32,), max_iter=500, random_state=SPLIT_SEED)
    numbers: Any = StandardScaler() if name == "mlp" else "passthrough"
    transformers: list[tuple[str, Any, list[str]]] = [("numbers", numbers, list(numeric))]
    if categorical:
        transformers.insert(0, ("categories", OneHotEncoder(handle_unknown="ignore"), list(categorical)))
    return Pipeline([("encode", ColumnTransformer(transformers)), ("classify", classifier)])


def guarded_mad(train: pd.DataFrame, numeric: Sequence[str]) -> dict[str, float]:
    """Each numeric feature's MAD over the training rows; its range when that is 0; else 1."""
    out = {}
    for c in numeric:
        column = train[c].to_numpy(dtype=np.float64)
        mad = float(np.median(np.abs(column - np.median(column))))
        span = float(column.max() - column.min())
        out[c] = mad if mad > 0 else span if span > 0 else 1.0
    return out


def raw_frame(name: str, data_dir: Path) -> tuple[pd.DataFrame, DatasetSpec]:
    """A data set's rows (features and the integer label) and how its columns are used."""
    if name == "compas":
        spec = CSV_DATASETS["compas"]
        data = pd.read_csv(data_dir / spec.file)
        data[spec.target] = data[spec.target].astype(int)
        for c in spec.categorical:
            data[c] = data[c].astype(str)
        return data, spec
    spec = DatasetSpec(name, "", LABEL, (), ())
    if name == "breast_cancer":
        x, y = load_breast_cancer(return_X_y=True)
        columns = [f"f{i}" for i in range(x.shape[1])]
    elif name == "digits":
        x, y = load_digits(return_X_y=True)
        keep = np.isin(y, (3, 8))
        x, y = x[keep].astype(np.int64), (y[keep] == 8).astype(np.int64)
        columns = [f"p{i}" for i in range(x.shape[1])]
    elif name == "hill_valley_like":
        x, y = make_classification(
            n_samples=1212, n_features=100, n_informative=10, n_redundant=40, n_repeated=0, random_state=0
        )
        columns = [f"f{i}" for i in range(x.shape[1])]
    elif name == "lsvt_like":
        x, y = make_classification(n_samples=126 * 4, n_features=300, n_informative=20, n_redundant=80, random_state=0)
        columns = [f"f{i}" for i in range(x.shape[1])]
    else:
        raise ValueError(f"unknown data set {name!r}")
    data = pd.DataFrame(x, columns=columns)
    data[LABEL] = np.asarray(y, dtype=np.int64)
    return data, spec


def load(name: str, data_dir: Path, model: str, queries: int) -> Bench:
    """Split, fit the model, pick the queries (test rows predicted 0; for digits, 3s predicted 3)."""
    data, spec = raw_frame(name, data_dir)
    features = [c for c in data.columns if c != spec.target]
    numeric = [c for c in features if c not in spec.categorical]
    train, test = train_test_split(data, test_size=0.25, random_state=SPLIT_SEED)
    pipe = make_model(model, numeric, spec.categorical)
    pipe.fit(train[features], train[spec.target])
    test_x = test[features]
    rejected = pipe.predict(test_x) == 0
    if name == "digits":
        rejected &= test[spec.target].to_numpy() == 0
    chosen = test_x[rejected].iloc[:queries].copy()
    return Bench(spec, train.copy(), features, numeric, pipe, chosen, guarded_mad(train, numeric))


# --------------------------------------------------------------------------------------------
# methods: each is a function (1-row query, k) -> (answers in the training frame's columns, engine)


Runner = Callable[[pd.DataFrame, int], tuple[pd.DataFrame, str]]


class CappedError(Exception):
    """A call killed at its time cap."""


def counterplan_runner(bench: Bench, method: str, seed: int) -> Runner:
    # Imported here: the swarm engine and its configuration are looked up only when asked for.
    from counterplan.planning import ClassGoal, CounterfactualProblem
    from counterplan.solver.core.config import SolverConfig, stable_termination
    from counterplan.solver.counterfactual import explain
    from counterplan.solver.local.config import BoundaryPolishPhaseConfig, LocalSearchPhaseConfig
    from counterplan.solver.swarm.config import SwarmPhaseConfig

    config: SolverConfig | None = None
    engine: Any = method
    if method == "swarm+local":
        config = SolverConfig(
            phases=(
                SwarmPhaseConfig(),
                LocalSearchPhaseConfig(termination=stable_termination()),
                BoundaryPolishPhaseConfig(),
            )
        )
        engine = None
    elif method == "swarm-paper":  # the paper's objective (hinge + Gower + count) guides the particles
        config = SolverConfig(phases=(SwarmPhaseConfig(objective="paper"), BoundaryPolishPhaseConfig()))
        engine = None
    elif method == "swarm-final":  # several answers the paper's way: k-means over the final swarm
        config = SolverConfig(phases=(SwarmPhaseConfig(answers_from="final_swarm"), BoundaryPolishPhaseConfig()))
        engine = None

    def run(query: pd.DataFrame, k: int) -> tuple[pd.DataFrame, str]:
        problem = CounterfactualProblem.from_dataframe(
            bench.train,
            {c: query.iloc[0][c] for c in bench.features},
            bench.pipe,
            [ClassGoal(target=TARGET_CLASS, confidence=CONFIDENCE)],
            target=bench.spec.target,
            immutable=bench.spec.immutable,
        )
        result = explain(problem, config, seed=seed, num_counterfactuals=k, engine=engine)
        rows = [cf.proposed for cf in result.counterfactuals] or [result.proposed]
        return bench.coerce(pd.DataFrame(rows)), str(result.statistics.engine)

    return run


def capped(call: Callable[[], pd.DataFrame], seconds: float) -> tuple[pd.DataFrame, float]:
    """``call()`` and its wall seconds, run in a forked child killed after ``seconds`` (0: in process).

    Raises :class:`CappedError` at the cap, and what the child raised (as a ``RuntimeError``
    naming it) otherwise."""
    if seconds <= 0:
        start = time.perf_counter()
        return call(), time.perf_counter() - start
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)

    def child() -> None:
        start = time.perf_counter()
        try:
            answers = call()
            send.send(("ok", answers, time.perf_counter() - start))
        except BaseException as exc:
            send.send(("error", f"{type(exc).__name__}: {exc}", time.perf_counter() - start))
        finally:
            send.close()

    process = context.Process(target=child, daemon=True)
    process.start()
    send.close()
    try:
        if not receive.poll(seconds):
            raise CappedError(f"killed after {seconds:g} s")
        try:
            status, payload, spent = receive.recv()
        except EOFError as exc:
            raise RuntimeError(f"the child process died (exit code {process.exitcode})") from exc
    finally:
        if process.is_alive():
            process.kill()
        process.join()
        receive.close()
    if status != "ok":
        raise RuntimeError(payload)
    return payload, spent


def dice_runner(bench: Bench, seed: int, timeout: float) -> Runner:
    os.environ.setdefault("TQDM_DISABLE", "1")  # DiCE draws a progress bar per query otherwise
    import dice_ml

    data = dice_ml.Data(dataframe=bench.train, continuous_features=bench.numeric, outcome_name=bench.spec.target)
    explainer = dice_ml.Dice(data, dice_ml.Model(model=bench.pipe, backend="sklearn"), method="random")
    empty = pd.DataFrame(columns=bench.features)

    def call(query: pd.DataFrame, k: int) -> pd.DataFrame:
        random.seed(seed)
        np.random.seed(seed)  # noqa: NPY002 - DiCE draws from numpy's global generator
        try:
            res = explainer.generate_counterfactuals(
                query, total_CFs=k, desired_class="opposite", features_to_vary=bench.mutable, random_seed=seed
            )
        except Exception as exc:
            if NO_CF in str(exc):
                return empty
            raise
        cf = res.cf_examples_list[0].final_cfs_df
        if cf is None or len(cf) == 0:
            return empty
        return bench.coerce(cf[bench.features])

    def run(query: pd.DataFrame, k: int) -> tuple[pd.DataFrame, str]:
        answers, _ = capped(lambda: call(query, k), timeout)
        return answers, "-"

    return run


def make_runner(method: str, bench: Bench, args: argparse.Namespace) -> Runner:
    if method == "dice-random":
        return dice_runner(bench, args.seed, args.dice_timeout)
    return counterplan_runner(bench, method, args.seed)


# --------------------------------------------------------------------------------------------
# metrics


@dataclass
class Judged:
    """One method's answers to one query, judged."""

    answers: int = 0
    """Distinct answers returned, valid or not."""
    valid: int = 0
    seconds: float = 0.0
    engine: str = "-"
    capped: bool = False
    failed: bool = False
    prox_cont: float = float("nan")
    prox_cat: float = float("nan")
    sparsity: float = float("nan")
    changed: float = float("nan")
    diversity: float = float("nan")
    norm_div: float = float("nan")
    best_distance: float = float("nan")
    """The smallest MAD-L1 distance (sum, not mean) of a valid answer."""
    best_changed: float = float("nan")
    """The features changed by that answer."""


def judge(bench: Bench, query: pd.DataFrame, answers: pd.DataFrame, k: int) -> Judged:
    """The metrics of ``answers`` to ``query`` (see the module docstring)."""
    answers = answers.drop_duplicates().reset_index(drop=True).iloc[:k]
    judged = Judged(answers=len(answers))
    if len(answers) == 0:
        return judged
    classes = list(bench.pipe.classes_)
    proba = bench.pipe.predict_proba(answers[bench.features])[:, classes.index(TARGET_CLASS)]
    valid = answers[proba >= CONFIDENCE].reset_index(drop=True)
    judged.valid = len(valid)
    if len(valid) == 0:
        return judged
    numeric = bench.numeric
    categorical = list(bench.spec.categorical)
    mad = np.array([bench.mad[c] for c in numeric])
    original = query.iloc[0]
    x_num = original[numeric].to_numpy(dtype=np.float64)
    c_num = valid[numeric].to_numpy(dtype=np.float64)
    delta = np.abs(c_num - x_num)
    cont = (delta / mad).mean(axis=1) if numeric else np.zeros(len(valid))
    changed = (delta > CHANGE_TOLERANCE).sum(axis=1).astype(np.float64)
    c_cat = valid[categorical].astype(str).to_numpy() if categorical else np.empty((len(valid), 0), dtype=object)
    mismatch = c_cat != original[categorical].astype(str).to_numpy() if categorical else np.zeros((len(valid), 0))
    cat = mismatch.mean(axis=1) if categorical else np.zeros(len(valid))
    changed += mismatch.sum(axis=1)
    prox = cont + cat
    judged.prox_cont = float(cont.mean())
    judged.prox_cat = float(cat.mean()) if categorical else float("nan")
    judged.sparsity = float((changed / len(bench.features)).mean())
    judged.changed = float(changed.mean())
    distance = (delta / mad).sum(axis=1) + mismatch.sum(axis=1)
    best = int(np.argmin(distance))
    judged.best_distance, judged.best_changed = float(distance[best]), float(changed[best])
    if len(valid) >= 2:
        diversity, normalised = [], []
        for i, j in itertools.combinations(range(len(valid)), 2):
            d = float((np.abs(c_num[i] - c_num[j]) / mad).mean()) if numeric else 0.0
            if categorical:
                d += float((c_cat[i] != c_cat[j]).mean())
            diversity.append(d)
            denominator = float(prox[i] + prox[j])
            normalised.append(d / denominator if denominator > 0 else 0.0)
        judged.diversity = statistics.fmean(diversity)
        judged.norm_div = statistics.fmean(normalised)
    return judged


def run_one(runner: Runner | None, bench: Bench, query: pd.DataFrame, k: int, label: str) -> Judged:
    """One query through one method, judged; a failure or a cap is 0 answers (failures warned about on stderr)."""
    empty = pd.DataFrame(columns=bench.features)
    answers, engine, note = empty, "-", ""
    start = time.perf_counter()
    if runner is not None:
        try:
            answers, engine = runner(query, k)
        except CappedError as exc:
            note = "capped"
            print(f"warning: {label}: {exc}", file=sys.stderr)
        except Exception as exc:
            note = "failed"
            message = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
            print(f"warning: {label}: {message}", file=sys.stderr)
    else:
        note = "failed"
    seconds = time.perf_counter() - start
    judged = judge(bench, query, answers, k)
    judged.seconds, judged.engine = seconds, engine
    judged.capped, judged.failed = note == "capped", note == "failed"
    return judged


# --------------------------------------------------------------------------------------------
# report

HEADER = [
    "method",
    "rows valid",
    "answers/row",
    "coverage",
    "prox_cont",
    "prox_cat",
    "sparsity",
    "changed",
    "diversity",
    "norm_div",
    "s/query",
    "engine",
    "capped",
]
PAPER_HEADER = ["method", "prox", "sparsity", "diversity", "norm_div", "coverage"]
K1_HEADER = ["dataset", "features", "method", "valid %", "MAD-L1", "changed", "median s"]


def mean_of(values: Sequence[float], digits: int = 4) -> str:
    kept = [v for v in values if not np.isnan(v)]
    return f"{statistics.fmean(kept):.{digits}f}" if kept else "-"


def summary_row(method: str, results: Sequence[Judged], k: int) -> list[str]:
    n = len(results)
    answered = [r for r in results if r.valid > 0]
    engines = sorted({r.engine for r in results if r.engine != "-"})
    return [
        method,
        f"{len(answered)}/{n}",
        mean_of([float(r.answers) for r in results], 2),
        f"{sum(r.valid for r in results) / (k * n):.2f}" if n else "-",
        mean_of([r.prox_cont for r in answered]),
        mean_of([r.prox_cat for r in answered]),
        mean_of([r.sparsity for r in answered]),
        mean_of([r.changed for r in answered], 2),
        mean_of([r.diversity for r in answered]) if k > 1 else "-",
        mean_of([r.norm_div for r in answered]) if k > 1 else "-",
        f"{statistics.median(r.seconds for r in results):.2f}" if n else "-",
        ",".join(engines) or "-",
        str(sum(r.capped for r in results)),
    ]


def k1_row(dataset: str, features: int, method: str, results: Sequence[Judged]) -> list[str]:
    valid = [r for r in results if r.valid > 0]
    return [
        dataset,
        str(features),
        method,
        f"{100.0 * len(valid) / len(results):.0f}" if results else "-",
        mean_of([r.best_distance for r in valid], 3),
        mean_of([r.best_changed for r in valid], 2),
        f"{statistics.median(r.seconds for r in results):.2f}" if results else "-",
    ]


def show(header: Sequence[str], rows: Sequence[Sequence[str]], markdown: bool, left: int) -> None:
    print(render(header, rows, markdown=False, left=left))
    if markdown:
        print()
        print(render(header, rows, markdown=True))


# --------------------------------------------------------------------------------------------
# main


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--datasets", default=None, help="comma-separated: " + ",".join(DATASETS) + " (default all)")
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated: " + ",".join(METHODS))
    parser.add_argument("--queries", type=int, default=5, help="rejected test rows per data set")
    parser.add_argument("--k", type=int, default=5, help="counterfactuals asked for per query")
    parser.add_argument("--k1", action="store_true", help="also run every method with k=1 and print the k=1 table")
    parser.add_argument("--seed", type=int, default=0, help="counterplan's seed and DiCE's random_seed")
    parser.add_argument("--data-dir", type=Path, default=default_data_dir(), help="folder with compas.csv")
    parser.add_argument("--model", choices=MODELS, default="rf", help="the black box (default rf)")
    parser.add_argument(
        "--dice-timeout", type=float, default=60.0, help="wall seconds per DiCE call before it is killed (0: no cap)"
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: 2 queries, k=2, compas and breast_cancer")
    parser.add_argument("--markdown", action="store_true", help="also print the tables as Markdown")
    parser.add_argument("--per-instance", action="store_true", help="print one stderr line per query and method")
    args = parser.parse_args(argv)
    if args.quick:
        args.queries, args.k = 2, 2
        if args.datasets is None:
            args.datasets = ",".join(QUICK_DATASETS)
    args.dataset_list = [d.strip() for d in (args.datasets or ",".join(DATASETS)).split(",") if d.strip()]
    args.method_list = [m.strip() for m in args.methods.split(",") if m.strip()]
    for name in args.dataset_list:
        if name not in DATASETS:
            parser.error(f"unknown data set {name!r}; choose from {', '.join(DATASETS)}")
    for name in args.method_list:
        if name not in METHODS:
            parser.error(f"unknown method {name!r}; choose from {', '.join(METHODS)}")
    if args.queries < 1 or args.k < 1:
        parser.error("--queries and --k must be at least 1")
    return args


def describe(name: str, bench: Bench, args: argparse.Namespace) -> str:
    categorical = len(bench.spec.categorical)
    return (
        f"{name}: {len(bench.features)} features ({len(bench.numeric)} continuous, {categorical} categorical, "
        f"{len(bench.spec.immutable)} immutable), train {len(bench.train)} rows, {len(bench.queries)} queries, "
        f"k={args.k}, model {args.model}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    warnings.filterwarnings("ignore", category=pd.errors.PerformanceWarning)  # DiCE on hundreds of columns
    k_values = [args.k] + ([1] if args.k1 and args.k != 1 else [])
    k1_rows: list[tuple[int, int, list[str]]] = []
    for order, dataset in enumerate(args.dataset_list):
        bench = load(dataset, args.data_dir, args.model, args.queries)
        print(f"[{describe(dataset, bench, args)}]", file=sys.stderr)
        rows: list[list[str]] = []
        for method in args.method_list:
            try:
                runner: Runner | None = make_runner(method, bench, args)
            except Exception as exc:
                print(f"warning: {dataset}/{method}: setup failed: {type(exc).__name__}: {exc}", file=sys.stderr)
                runner = None
            for k in k_values:
                results = []
                for row_id in bench.queries.index:
                    label = f"{dataset}/{method}/k={k} row {row_id}"
                    judged = run_one(runner, bench, bench.queries.loc[[row_id]], k, label)
                    results.append(judged)
                    if args.per_instance:
                        print(
                            f"  {label}: answers={judged.answers} valid={judged.valid} "
                            f"prox_cont={judged.prox_cont:.3f} changed={judged.changed:.1f} "
                            f"{judged.seconds:.2f}s {judged.engine}",
                            file=sys.stderr,
                        )
                if k == args.k:
                    rows.append(summary_row(method, results, k))
                if k == 1 and args.k1:
                    k1_rows.append((len(bench.features), order, k1_row(dataset, len(bench.features), method, results)))
                print(f"  done {dataset} {method} k={k}", file=sys.stderr)
        print(f"\n### {describe(dataset, bench, args)}\n")
        show(HEADER, rows, args.markdown, left=1)
        if dataset == "compas":
            print(
                "\nShekhar et al. (2023) on COMPAS, for comparison (their queries, k and random forest; "
                "its Table II: Prox / Spars / Div / NormDiv / Coverage; its proximity is MAD-scaled on its own "
                "reduction of COMPAS to 13 features, so compare the ratios, not the values):\n"
            )
            show(PAPER_HEADER, [[name, *values] for name, values in PAPER_COMPAS], args.markdown, left=1)
        sys.stdout.flush()
    if args.k1 and k1_rows:
        print(f"\n### validity / distance / sparsity / time per instance by dimension (k=1, model {args.model})\n")
        show(K1_HEADER, [row for _, _, row in sorted(k1_rows, key=lambda r: (r[0], r[1]))], args.markdown, left=3)
    return 0


if __name__ == "__main__":
    sys.exit(main())
