"""The reference side of the scorecard benchmark: optbinning's own ``Counterfactual``, nothing else.

optbinning's ``optbinning.scorecard.Counterfactual`` implements Navas-Palencia, "Optimal
Counterfactual Explanations for Scorecard modelling" (formulations (3), (7) and (13) of the paper;
``shared/papers/notes-mip.md`` section B). This script runs it on the scorecards of
``benchmarks/scorecards.py`` in the settings of the paper's Tables 4, 6 and 9 and writes every
answer, checked against the scorecard itself, to one JSON file. It imports OR-Tools (through
optbinning), which cannot share a process with highspy, so it runs on its own::

    .venv/bin/python benchmarks/optbinning_reference.py --dataset heloc --out results.json
    .venv/bin/python benchmarks/optbinning_reference.py --dataset adult       # -> benchmarks/.cache/
    .venv/bin/python benchmarks/optbinning_reference.py --dataset heloc --quick
    .venv/bin/python benchmarks/optbinning_reference.py --dataset heloc --sections pwl --append
    .venv/bin/python benchmarks/optbinning_reference.py --summary benchmarks/.cache/optbinning-heloc.json

Default output: ``benchmarks/.cache/optbinning-<dataset>.json`` (rewritten after every section;
``--append`` adds the ``--sections`` asked for to an existing file, replacing their earlier runs).
The full run (``single,pwl,multi``) took about 55 min for heloc on a shared 2-core machine, most of it
the multi section, whose solves mostly stop at the time limit.
A compact table is printed at the end; progress goes to stderr.

Targets (class 1 is the wanted outcome in both data sets, see ``scorecards.py``):

* ``probability``: ``outcome_type="probability", y=0.5, hard_constraints=["min_outcome"]``, the
  paper's "PD < 0.5" (optbinning's probability is that of class 1, the good side here; the
  constraint is on its 15-segment piecewise-linear approximation of the sigmoid);
* ``binary``: ``outcome_type="binary", y=1`` (optbinning requires score >= 1e-6).

Methods: ``W`` = ``method="weighted"`` with optbinning's default weights proximity = closeness = 1;
``H(1,0)`` = ``method="hierarchical", objectives={"proximity": 2, "closeness": 1}`` (proximity
first, optbinning's default order) and ``H(0,1)`` = ``{"proximity": 1, "closeness": 2}``, both with
optbinning's ``priority_tol=0.1`` (the paper's 10 % relative degradation).

Sections:

* ``single`` (Table 4): ``n_cf=1``, ``max_changes`` K = 1..4, methods W, H(1,0), H(0,1), both
  targets, on the paper's query (``scorecards.paper_query``) and the first ``--queries`` (10) test
  rows the scorecard rejects (``scorecards.query_rows``). ``time_limit`` = ``--time-limit`` (10 s,
  optbinning's default).
* ``pwl``: the ``single`` queries, ``n_cf=1``, K = 1..4, W, probability target with the bound
  ``--pwl-target`` (0.7): near the largest error of optbinning's sigmoid approximation, where an
  answer meeting ``min_outcome`` could miss the bound under the real model.
* ``multi`` (Tables 6 and 9), the paper's query only: ``n_cf`` = 3..5 x K = 2..4 x diversity
  ``FV`` (``hard_constraints`` "diversity_values", Table 6), ``F`` ("diversity_features") and
  ``F+FV`` (both, Table 9), method W, both targets; the Table 6 rows ``(3, 2, FV)`` and
  ``(4, 3, FV)`` also with H(1,0) and H(0,1); for adult also Table 9's ``(5, 5, F)`` and
  ``(5, 5, F+NA)`` (NA: sex and race not actionable). ``time_limit`` = ``--multi-time-limit`` (30 s).

All features are actionable unless a run says otherwise (the paper changes age in adult).

Per run the JSON holds the settings, optbinning's status (an exception, e.g. the hierarchical
first stage being infeasible, is recorded as its status), the wall seconds of ``generate()``
(fit excluded; the fit time is recorded once) and the process CPU seconds of the same span (CBC's
``time_limit`` counts CPU seconds, so on a busy machine the wall time of a run stopped by the limit
can be several times the limit), optbinning's solver statistics and objective values
(``information()``'s numbers; for several counterfactuals they are sums over them, for the
hierarchical method the solver objective is the last stage's), and each counterfactual:

* ``optbinning_row``: optbinning's answer as it gives it, a bin label (``"[91.50, 95.50)"``, or a
  category list) in each changed feature; ``changes``: per changed feature its original value, the
  bin label, the bin index and ``to``, the value used for it;
* ``row``: a real row (plain dict): every changed feature gets the training value inside the new
  bin nearest to the original value (most frequent training category for a categorical bin), and
  the row is checked to fall in exactly the bins optbinning chose;
* ``optbinning_probability``: the sigmoid of optbinning's own score of the answer (what its
  ``display(show_outcome=True)`` shows); ``pwl_probability``: optbinning's piecewise-linear
  approximation at that score (recomputed with its ``logistic_pw``), the quantity its
  ``min_outcome`` constraint bounds; ``true_probability``: ``scorecard.predict_proba(row)[:, 1]``;
* ``valid``: the target holds under the real model: ``true_probability >= y`` (probability) or
  ``scorecard.predict(row) == 1`` (binary); ``constraints_ok``: at most K changed bins, nothing
  non-actionable changed and, for several counterfactuals, the diversity rule holds;
* the paper's objective terms computed independently by ``scorecards.paper_objective``
  (``proximity``, ``closeness``, ``changed`` ...), next to optbinning's own sums.

Run summaries add the mean proximity / closeness per counterfactual (the paper's Table 6 reports
means), D_F and D_FV (the pairwise Hamming distances of the changed-feature sets and of the bin
indicators, the paper's diversity metrics), the min / max true probability and the number of
invalid answers.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scorecards

PROBABILITY_TARGET = 0.5
SINGLE_K = (1, 2, 3, 4)
MULTI_N_CF = (3, 4, 5)
MULTI_K = (2, 3, 4)
METHODS: dict[str, tuple[str, dict[str, int] | None]] = {
    "W": ("weighted", None),
    "H(1,0)": ("hierarchical", {"proximity": 2, "closeness": 1}),
    "H(0,1)": ("hierarchical", {"proximity": 1, "closeness": 2}),
}
DIVERSITY: dict[str, list[str]] = {
    "FV": ["diversity_values"],
    "F": ["diversity_features"],
    "F+FV": ["diversity_features", "diversity_values"],
}
TARGETS = ("probability", "binary")


# --------------------------------------------------------------------------------------------
# settings


@dataclass(frozen=True)
class Setting:
    """One call of ``Counterfactual.generate``."""

    section: str
    table: str
    query: int
    paper_query: bool
    target: str
    n_cf: int
    max_changes: int
    method: str
    diversity: str | None
    time_limit: int
    non_actionable: tuple[str, ...] = ()
    y: float | None = None
    """The probability target's bound; None = PROBABILITY_TARGET."""

    @property
    def bound(self) -> float:
        return PROBABILITY_TARGET if self.y is None else self.y

    def generate_kwargs(self, features: Sequence[str]) -> dict[str, Any]:
        method, objectives = METHODS[self.method]
        hard = list(DIVERSITY[self.diversity]) if self.diversity else []
        if self.target == "probability":
            kwargs: dict[str, Any] = {"y": self.bound, "outcome_type": "probability"}
            hard = ["min_outcome", *hard]
        else:
            kwargs = {"y": 1, "outcome_type": "binary"}
        kwargs.update(
            n_cf=self.n_cf,
            method=method,
            objectives=objectives,
            max_changes=self.max_changes,
            hard_constraints=hard or None,
            time_limit=self.time_limit,
        )
        if self.non_actionable:
            kwargs["actionable_features"] = [f for f in features if f not in self.non_actionable]
        return kwargs

    def describe(self) -> str:
        target = self.target if self.y is None else f"{self.target}>={self.y:g}"
        parts = [f"q{self.query}", target, f"n_cf={self.n_cf}", f"K={self.max_changes}", self.method]
        if self.diversity:
            parts.append(self.diversity + ("+NA" if self.non_actionable else ""))
        return " ".join(parts)


def single_settings(queries: Sequence[int], paper: int, time_limit: int, ks: Iterable[int] = SINGLE_K) -> list[Setting]:
    out = []
    for q in queries:
        for target in TARGETS:
            for k in ks:
                for method in METHODS:
                    out.append(Setting("single", "4", q, q == paper, target, 1, k, method, None, time_limit))
    return out


def pwl_settings(queries: Sequence[int], paper: int, time_limit: int, y: float, ks: Iterable[int]) -> list[Setting]:
    """Single CF, weighted, a probability bound where the sigmoid's approximation is least exact."""
    return [
        Setting("pwl", "4", q, q == paper, "probability", 1, k, "W", None, time_limit, y=y) for q in queries for k in ks
    ]


def multi_settings(dataset: str, paper: int, time_limit: int, quick: bool) -> list[Setting]:
    out = []
    grid = [(3, 2), (4, 3)] if quick else [(n, k) for n in MULTI_N_CF for k in MULTI_K]
    table = "6" if dataset == "heloc" else "9"
    for target in TARGETS:
        for n_cf, k in grid:
            for div in DIVERSITY:
                out.append(Setting("multi", table, paper, True, target, n_cf, k, "W", div, time_limit))
        for n_cf, k in [(3, 2), (4, 3)]:
            for method in ("H(1,0)", "H(0,1)"):
                out.append(Setting("multi", "6", paper, True, target, n_cf, k, method, "FV", time_limit))
        if dataset == "adult" and not quick:
            na = scorecards.SPECS[dataset].paper_non_actionable
            out.append(Setting("multi", "9", paper, True, target, 5, 5, "W", "F", time_limit))
            out.append(Setting("multi", "9", paper, True, target, 5, 5, "W", "F", time_limit, na))
    return out


# --------------------------------------------------------------------------------------------
# reading optbinning's answers


def jsonable(value: Any) -> Any:
    """Plain JSON types: numpy scalars, arrays, NaN (as None), pandas arrays."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (np.ndarray, pd.api.extensions.ExtensionArray, pd.Index)):
        return [jsonable(v) for v in list(value)]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


@dataclass
class BinInfo:
    """A scorecard feature's regular bins: labels as optbinning prints them, and how to pick a value."""

    feature: str
    categorical: bool
    labels: list[Any]
    splits: list[Any]
    train_values: np.ndarray
    frequency: dict[Any, int] = field(default_factory=dict)

    def index_of(self, label: Any) -> int:
        for j, known in enumerate(self.labels):
            if self.categorical:
                if not isinstance(label, str) and [str(x) for x in list(label)] == [str(x) for x in known]:
                    return j
            elif str(label) == str(known):
                return j
        raise KeyError(f"{self.feature}: bin {label!r} not in {self.labels}")

    def value_in(self, j: int, original: Any) -> Any:
        """The training value in bin ``j`` nearest the original (most frequent category for categoricals)."""
        if self.categorical:
            categories = list(self.splits[j])
            return max(categories, key=lambda c: (self.frequency.get(c, 0), -categories.index(c)))
        lo = -np.inf if j == 0 else float(self.splits[j - 1])
        hi = np.inf if j == len(self.splits) else float(self.splits[j])
        values = self.train_values[(self.train_values >= lo) & (self.train_values < hi)]
        if values.size == 0:  # not expected: every bin holds training rows
            return lo if np.isfinite(lo) else hi - 1
        values = np.unique(values)
        base = float(original) if original is not None and not pd.isna(original) else float(np.median(values))
        return values[np.argmin(np.abs(values - base))].item()


def bin_infos(scorecard: Any, X_train: pd.DataFrame) -> dict[str, BinInfo]:
    table = scorecard.table(style="detailed")
    infos = {}
    for v in scorecards.scorecard_features(scorecard):
        optb = scorecard.binning_process_.get_binned_variable(v)
        categorical = optb.dtype == "categorical"
        rows = table[table["Variable"] == v]
        labels = [b for b in rows["Bin"].tolist() if not (isinstance(b, str) and b in ("Special", "Missing"))]
        splits = [list(s) for s in optb.splits] if categorical else list(np.asarray(optb.splits, dtype=float))
        column = X_train[v].dropna()
        infos[v] = BinInfo(
            feature=v,
            categorical=categorical,
            labels=labels,
            splits=splits,
            train_values=np.asarray([]) if categorical else column.to_numpy(dtype=float),
            frequency=column.value_counts().to_dict() if categorical else {},
        )
    return infos


@dataclass
class Context:
    """Per data set: the scorecard, its data, and what the checks need."""

    dataset: str
    scorecard: Any
    X_train: pd.DataFrame
    features: list[str]
    infos: dict[str, BinInfo]
    objective: scorecards.ObjectiveData
    pwl: tuple[list[tuple[float, float]], np.ndarray]


def pwl_probability(pwl: tuple[list[tuple[float, float]], np.ndarray], score: float) -> float:
    """optbinning's piecewise-linear sigmoid at ``score`` (the segment that holds it; lowest if on a breakpoint)."""
    bounds, coef = pwl
    r = next((i for i, (_, hi) in enumerate(bounds) if score <= hi), len(bounds) - 1)
    return float(coef[r][0] + coef[r][1] * score)


def read_counterfactual(ctx: Context, setting: Setting, query: pd.DataFrame, cf: dict[str, Any]) -> dict[str, Any]:
    original = query.iloc[0]
    answer = cf["query"].iloc[0]
    changed = [str(v) for v in cf["features"]]
    row = {f: original[f] for f in ctx.features}
    changes = {}
    for v in changed:
        info = ctx.infos[v]
        j = info.index_of(answer[v])
        to = info.value_in(j, original[v])
        row[v] = to
        changes[v] = {"from": original[v], "bin": answer[v], "bin_index": j, "to": to}
    frame = scorecards.as_frame(row, ctx.features).astype(ctx.X_train[ctx.features].dtypes.to_dict())
    got = ctx.scorecard.binning_process_.transform(frame, metric="indices").iloc[0]
    bins_ok = all(int(got[v]) == changes[v]["bin_index"] for v in changed)
    true_p = float(ctx.scorecard.predict_proba(frame)[0, 1])
    predicted = int(ctx.scorecard.predict(frame)[0])
    valid = true_p >= setting.bound if setting.target == "probability" else predicted == 1
    terms = scorecards.paper_objective(ctx.scorecard, ctx.X_train, query, frame, data=ctx.objective)
    score = float(cf["score"])
    record = {
        "changes": changes,
        "row": row,
        "optbinning_row": {f: answer[f] for f in ctx.features},
        "bins_ok": bins_ok,
        "optbinning_score": score,
        "optbinning_probability": 1.0 / (1.0 + math.exp(-score)),
        "pwl_probability": pwl_probability(ctx.pwl, score) if setting.target == "probability" else None,
        "true_probability": true_p,
        "valid": bool(valid),
        **terms,
    }
    record["within_k"] = terms["n_changed_woe"] <= setting.max_changes
    record["actionable_ok"] = not set(terms["changed"]) & set(setting.non_actionable)
    return jsonable(record)


def diversity_metrics(cfs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The paper's D_F and D_FV, and whether the hard rules hold, from the answers' bins."""
    chosen = [{v: c["changes"][v]["bin_index"] for v in c["changes"]} for c in cfs]
    d_f = d_fv = 0
    features_ok = values_ok = True
    for a, b in combinations(chosen, 2):
        sym = set(a) ^ set(b)
        d_f += len(sym)
        d_fv += len(sym) + 2 * sum(a[v] != b[v] for v in set(a) & set(b))
        features_ok &= set(a) != set(b)
        values_ok &= all(a[v] != b[v] for v in set(a) & set(b))
    return {"D_F": d_f, "D_FV": d_fv, "features_distinct": features_ok, "values_distinct": values_ok}


def summarize_run(setting: Setting, cfs: list[dict[str, Any]]) -> dict[str, Any]:
    if not cfs:
        return {"n_returned": 0}
    ps = [c["true_probability"] for c in cfs]
    out: dict[str, Any] = {
        "n_returned": len(cfs),
        "n_invalid": sum(not c["valid"] for c in cfs),
        "all_valid": all(c["valid"] for c in cfs),
        "proximity_mean": statistics.fmean(c["proximity"] for c in cfs),
        "closeness_mean": statistics.fmean(c["closeness"] for c in cfs),
        "p_min": min(ps),
        "p_max": max(ps),
        "changed_mean": statistics.fmean(c["n_changed"] for c in cfs),
    }
    ok = all(c["within_k"] and c["actionable_ok"] and c["bins_ok"] for c in cfs)
    if setting.n_cf > 1:
        div = diversity_metrics(cfs)
        out.update(div)
        rules = DIVERSITY[setting.diversity] if setting.diversity else []
        if "diversity_features" in rules:
            ok &= div["features_distinct"]
        if "diversity_values" in rules:
            ok &= div["values_distinct"]
    out["constraints_ok"] = ok
    return out


# --------------------------------------------------------------------------------------------
# running


def run_one(ctx: Context, counterfactual: Any, setting: Setting, query: pd.DataFrame) -> dict[str, Any]:
    from optbinning.information import solver_statistics

    record: dict[str, Any] = {"setting": jsonable(setting.__dict__), "describe": setting.describe()}
    kwargs = setting.generate_kwargs(ctx.features)
    record["generate_kwargs"] = jsonable(kwargs)
    start, cpu_start = time.perf_counter(), time.process_time()
    try:
        counterfactual.generate(query, **kwargs)
    except Exception as exc:  # optbinning raises a bare Exception when a hierarchical stage fails
        record["wall_s"] = time.perf_counter() - start
        record["cpu_s"] = time.process_time() - cpu_start
        message = str(exc)
        first = message.split(maxsplit=1)[0] if message.strip() else ""
        status = first if first.isupper() else "ERROR"
        record.update(status=status, error=f"{type(exc).__name__}: {message}", counterfactuals=[])
        record["summary"] = {"n_returned": 0}
        return record
    record["wall_s"] = time.perf_counter() - start
    record["cpu_s"] = time.process_time() - cpu_start
    record["status"] = counterfactual.status
    record["solver_s"] = counterfactual._time_solver
    optimizer = counterfactual._optimizer
    stats, _ = solver_statistics("mip", optimizer.solver_)
    record["solver"] = jsonable(stats)
    if counterfactual.status in ("OPTIMAL", "FEASIBLE"):
        record["optbinning_objectives"] = {k: float(e.solution_value()) for k, e in optimizer._objectives.items()}
    cfs = [read_counterfactual(ctx, setting, query, cf) for cf in (counterfactual._cfs or [])]
    record["counterfactuals"] = cfs
    record["summary"] = jsonable(summarize_run(setting, cfs))
    return record


def context_for(dataset: str, data_dir: str | None) -> tuple[Context, Any, float]:
    from optbinning.scorecard import Counterfactual
    from optbinning.scorecard.counterfactual.utils import logistic_pw

    scorecard, X_train, _, _, _ = scorecards.build_scorecard(dataset, data_dir=data_dir)
    features = scorecards.scorecard_features(scorecard)
    start = time.perf_counter()
    counterfactual = Counterfactual(scorecard=scorecard, n_jobs=1).fit(X_train)
    fit_s = time.perf_counter() - start
    bounds, coef = logistic_pw(counterfactual._min_p, counterfactual._max_p, 15)
    ctx = Context(
        dataset=dataset,
        scorecard=scorecard,
        X_train=X_train,
        features=features,
        infos=bin_infos(scorecard, X_train),
        objective=scorecards.objective_data(scorecard, X_train),
        pwl=([(float(a), float(b)) for a, b in bounds], np.asarray(coef, dtype=float)),
    )
    return ctx, counterfactual, fit_s


def scorecard_facts(ctx: Context, data_dir: str | None) -> dict[str, Any]:
    from sklearn.metrics import roc_auc_score

    scorecard, X_train, _, X_test, y_test = scorecards.build_scorecard(ctx.dataset, data_dir=data_dir)
    estimator = scorecard.estimator_
    return jsonable(
        {
            "features": ctx.features,
            "n_bins": {v: len(ctx.infos[v].labels) for v in ctx.features},
            "coef": estimator.coef_.ravel(),
            "intercept": float(np.ravel(estimator.intercept_)[0]),
            "n_train": len(X_train),
            "n_test": len(X_test),
            "test_auc": float(roc_auc_score(y_test, scorecard.predict_proba(X_test)[:, 1])),
            "test_rejected_share": float(scorecards.rejected(scorecard, X_test).mean()),
            "score_range": [ctx.pwl[0][0][0], ctx.pwl[0][-1][1]],
            "pwl_max_abs_error": pwl_error(ctx.pwl),
            "cache": str(scorecards.cache_path(ctx.dataset)),
        }
    )


def pwl_error(pwl: tuple[list[tuple[float, float]], np.ndarray]) -> float:
    lo, hi = pwl[0][0][0], pwl[0][-1][1]
    grid = np.linspace(lo, hi, 4001)
    return float(max(abs(pwl_probability(pwl, s) - 1.0 / (1.0 + math.exp(-s))) for s in grid))


def write(path: Path, payload: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(jsonable(payload), indent=1))
    os.replace(tmp, path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--dataset", choices=scorecards.DATASETS)
    parser.add_argument("--out", type=Path, help="JSON output (default benchmarks/.cache/optbinning-<dataset>.json)")
    parser.add_argument("--data-dir", default=None, help="folder of heloc.csv / adult.csv (default shared/data)")
    parser.add_argument("--queries", type=int, default=10, help="rejected test rows for the single-CF runs")
    parser.add_argument("--time-limit", type=int, default=10, help="seconds per single-CF solve (optbinning's default)")
    parser.add_argument("--multi-time-limit", type=int, default=30, help="seconds per multi-CF solve")
    parser.add_argument("--sections", default="single,pwl,multi", help="comma separated: single, pwl, multi")
    parser.add_argument("--pwl-target", type=float, default=0.7, help="probability bound of the pwl section")
    parser.add_argument(
        "--append", action="store_true", help="add the sections' runs to the existing --out file (replacing theirs)"
    )
    parser.add_argument("--quick", action="store_true", help="2 test rows, K in (1, 2), multi (3,2) and (4,3)")
    parser.add_argument("--summary", type=Path, help="print the tables of an existing JSON and exit")
    args = parser.parse_args(argv)
    if args.summary:
        print_summary(json.loads(args.summary.read_text()))
        return 0
    if not args.dataset:
        parser.error("--dataset is required (or --summary FILE)")
    warnings.filterwarnings("ignore", category=FutureWarning)
    dataset = args.dataset
    out = args.out or scorecards.CACHE_DIR / f"optbinning-{dataset}.json"
    sections = {s.strip() for s in args.sections.split(",") if s.strip()}

    import optbinning
    import ortools
    import sklearn

    ctx, counterfactual, fit_s = context_for(dataset, args.data_dir)
    paper = scorecards.SPECS[dataset].paper_row
    n_queries = 2 if args.quick else args.queries
    rows = scorecards.query_rows(dataset, n_queries, data_dir=args.data_dir)
    scorecard, _, _, X_test, _ = scorecards.build_scorecard(dataset, data_dir=args.data_dir)
    query_frames = {paper: scorecards.paper_query(dataset, data_dir=args.data_dir)}
    for r in rows:
        query_frames[r] = X_test.loc[[r], ctx.features]
    payload: dict[str, Any] = {
        "dataset": dataset,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "versions": {
            "optbinning": optbinning.__version__,
            "ortools": ortools.__version__,
            "sklearn": sklearn.__version__,
            "pandas": pd.__version__,
            "numpy": np.__version__,
            "python": platform.python_version(),
        },
        "machine": {"cpus": os.cpu_count(), "loadavg_start": list(os.getloadavg()), "platform": platform.platform()},
        "solver_note": "optbinning 1.0.0 always solves with CBC through pywraplp (n_jobs=1 here).",
        "scorecard": scorecard_facts(ctx, args.data_dir),
        "fit_s": fit_s,
        "queries": {
            str(q): {
                "paper": q == paper,
                "row": frame.iloc[0].to_dict(),
                "probability": float(scorecard.predict_proba(frame)[0, 1]),
            }
            for q, frame in query_frames.items()
        },
        "targets": {"probability": {"y": PROBABILITY_TARGET, "hard": "min_outcome"}, "binary": {"y": 1}},
        "runs": [],
    }
    plan: list[Setting] = []
    appending = args.append and out.exists()
    if appending:
        previous = json.loads(out.read_text())
        kept = [r for r in previous["runs"] if r["setting"]["section"] not in sections]
        previous.setdefault("appended", []).append(
            {
                "sections": sorted(sections),
                "started": payload["started"],
                "loadavg_start": payload["machine"]["loadavg_start"],
            }
        )
        payload = {**previous, "runs": kept, "queries": {**previous["queries"], **payload["queries"]}}
    ks = (1, 2) if args.quick else SINGLE_K
    if "single" in sections:
        plan += single_settings([paper, *rows], paper, args.time_limit, ks)
    if "pwl" in sections:
        plan += pwl_settings([paper, *rows], paper, args.time_limit, args.pwl_target, ks)
    if "multi" in sections:
        plan += multi_settings(dataset, paper, args.multi_time_limit, args.quick)
    total_start = time.perf_counter()
    last_section = None
    for i, setting in enumerate(plan, 1):
        if last_section is not None and setting.section != last_section:
            write(out, payload)
        last_section = setting.section
        record = run_one(ctx, counterfactual, setting, query_frames[setting.query])
        payload["runs"].append(record)
        s = record["summary"]
        print(
            f"[{i}/{len(plan)}] {dataset} {setting.describe()}: {record['status']} {record['wall_s']:.2f}s"
            f" (cpu {record['cpu_s']:.2f}s)"
            + (f" p={s['p_min']:.3f}-{s['p_max']:.3f} invalid={s['n_invalid']}" if s.get("n_returned") else ""),
            file=sys.stderr,
            flush=True,
        )
    finish = {
        "total_s": time.perf_counter() - total_start,
        "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "loadavg_end": list(os.getloadavg()),
    }
    if appending:
        payload["appended"][-1].update(finish)
    else:
        payload["machine"]["loadavg_end"] = finish.pop("loadavg_end")
        payload.update(finish)
    write(out, payload)
    print(f"wrote {out}", file=sys.stderr)
    print_summary(json.loads(out.read_text()))
    return 0


# --------------------------------------------------------------------------------------------
# tables


PAPER_SINGLE_HEADER = ("target", "K", "method", "status", "wall_s", "cpu_s")
PAPER_SINGLE_HEADER += ("prox", "clos", "true_p", "pwl_p", "valid", "changes")
ROWS_SINGLE_HEADER = ("target", "K", "method", "status", "med_wall", "med_cpu", "max_cpu")
ROWS_SINGLE_HEADER += ("prox", "clos", "mean_p", "invalid")


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[_fmt(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(header)]
    lines = [" | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("-|-".join("-" * w for w in widths))
    lines += [" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(lines)


def print_summary(payload: dict[str, Any]) -> None:
    runs = payload["runs"]
    dataset = payload["dataset"]
    sc = payload["scorecard"]
    print(
        f"\n{dataset}: {len(sc['features'])} features, test AUC {sc['test_auc']:.3f}, score range "
        f"[{sc['score_range'][0]:.2f}, {sc['score_range'][1]:.2f}], "
        f"PWL sigmoid max error {sc['pwl_max_abs_error']:.4f}, "
        f"fit {payload['fit_s']:.2f}s, total {payload.get('total_s', float('nan')):.0f}s, load "
        f"{payload['machine'].get('loadavg_start', ['?'])[0]}"
    )
    paper_single = [r for r in runs if r["setting"]["section"] == "single" and r["setting"]["paper_query"]]
    if paper_single:
        q = next(iter(k for k, v in payload["queries"].items() if v["paper"]))
        p0 = payload["queries"][q]["probability"]
        print(f"\nTable 4 (single CF), paper query row {q}: P(class 1) {p0:.3f} (PD {1 - p0:.3f})")
        rows = []
        for r in paper_single:
            s, st = r["summary"], r["setting"]
            c = r["counterfactuals"][0] if r["counterfactuals"] else {}
            rows.append(
                [
                    st["target"],
                    st["max_changes"],
                    st["method"],
                    r["status"],
                    r["wall_s"],
                    r.get("cpu_s"),
                    s.get("proximity_mean"),
                    s.get("closeness_mean"),
                    c.get("true_probability"),
                    c.get("pwl_probability"),
                    s.get("all_valid") if s.get("n_returned") else None,
                    ", ".join(f"{v}->{ch['bin']}" for v, ch in c.get("changes", {}).items()) or "-",
                ]
            )
        print(
            _table(
                PAPER_SINGLE_HEADER,
                rows,
            )
        )
    other = [r for r in runs if r["setting"]["section"] == "single" and not r["setting"]["paper_query"]]
    if other:
        n_q = len({r["setting"]["query"] for r in other})
        print(f"\nsingle CF over {n_q} rejected test rows (means over the rows with an answer)")
        groups: dict[tuple[str, int, str], list[dict[str, Any]]] = {}
        for r in other:
            st = r["setting"]
            groups.setdefault((st["target"], st["max_changes"], st["method"]), []).append(r)
        rows = []
        for (target, k, method), rs in groups.items():
            answered = [r for r in rs if r["summary"].get("n_returned")]
            statuses: dict[str, int] = {}
            for r in rs:
                statuses[r["status"]] = statuses.get(r["status"], 0) + 1
            rows.append(
                [
                    target,
                    k,
                    method,
                    " ".join(f"{k2}:{v}" for k2, v in sorted(statuses.items())),
                    statistics.median(r["wall_s"] for r in rs),
                    statistics.median(r.get("cpu_s", math.nan) for r in rs),
                    max(r.get("cpu_s", math.nan) for r in rs),
                    statistics.fmean(r["summary"]["proximity_mean"] for r in answered) if answered else None,
                    statistics.fmean(r["summary"]["closeness_mean"] for r in answered) if answered else None,
                    statistics.fmean(r["summary"]["p_min"] for r in answered) if answered else None,
                    sum(r["summary"]["n_invalid"] for r in answered),
                ]
            )
        print(
            _table(
                ROWS_SINGLE_HEADER,
                rows,
            )
        )
    pwl = [r for r in runs if r["setting"]["section"] == "pwl"]
    if pwl:
        y = pwl[0]["setting"]["y"]
        n_q = len({r["setting"]["query"] for r in pwl})
        print(f"\nsingle CF, W, probability >= {y:g} (min_outcome on the PWL sigmoid), {n_q} queries incl. the paper's")
        rows = []
        for k in sorted({r["setting"]["max_changes"] for r in pwl}):
            rs = [r for r in pwl if r["setting"]["max_changes"] == k]
            cs = [c for r in rs for c in r["counterfactuals"]]
            statuses: dict[str, int] = {}
            for r in rs:
                statuses[r["status"]] = statuses.get(r["status"], 0) + 1
            rows.append(
                [
                    k,
                    " ".join(f"{k2}:{v}" for k2, v in sorted(statuses.items())),
                    statistics.median(r.get("cpu_s", math.nan) for r in rs),
                    min((c["true_probability"] for c in cs), default=None),
                    max((abs(c["pwl_probability"] - c["true_probability"]) for c in cs), default=None),
                    sum(not c["valid"] for c in cs),
                ]
            )
        print(_table(["K", "status", "med_cpu", "min true p", "max |pwl-true|", "invalid"], rows))
    multi = [r for r in runs if r["setting"]["section"] == "multi"]
    if multi:
        print("\nmultiple CFs, paper query (prox / clos: means per CF; p: true probabilities)")
        rows = []
        for r in multi:
            s, st = r["summary"], r["setting"]
            rows.append(
                [
                    st["target"],
                    st["n_cf"],
                    st["max_changes"],
                    (st["diversity"] or "") + ("+NA" if st["non_actionable"] else ""),
                    st["method"],
                    r["status"],
                    r["wall_s"],
                    r.get("cpu_s"),
                    s.get("proximity_mean"),
                    s.get("closeness_mean"),
                    s.get("D_F"),
                    s.get("D_FV"),
                    s.get("p_min"),
                    s.get("p_max"),
                    f"{s['n_returned'] - s['n_invalid']}/{s['n_returned']}" if s.get("n_returned") else "-",
                    s.get("constraints_ok"),
                ]
            )
        print(
            _table(
                [
                    "target",
                    "n_cf",
                    "K",
                    "div",
                    "method",
                    "status",
                    "wall s",
                    "cpu s",
                    "prox",
                    "clos",
                    "D_F",
                    "D_FV",
                    "p min",
                    "p max",
                    "valid",
                    "rules ok",
                ],
                rows,
            )
        )
    invalid = [(r, c) for r in runs for c in r["counterfactuals"] if not c["valid"]]
    print(f"\nanswers not valid under predict_proba: {len(invalid)} of {sum(len(r['counterfactuals']) for r in runs)}")
    for r, c in invalid:
        print(
            f"  {r['describe']}: true p {c['true_probability']:.4f}, optbinning's own p "
            f"{c['optbinning_probability']:.4f}, PWL p {_fmt(c['pwl_probability'], 4)}"
        )
    broken = [r for r in runs if r["summary"].get("n_returned") and not r["summary"].get("constraints_ok")]
    if broken:
        print(f"runs whose answers break a requested rule (K, actionability, diversity, bins): {len(broken)}")
        for r in broken:
            print(f"  {r['describe']}: {r['summary']}")


if __name__ == "__main__":
    raise SystemExit(main())
