"""Recourse audits on real data: recourse rates and burden by group, proven "no recourse", speed,
and, on logistic regression, the proofs against a plain linear-programming check.

Cases (``--cases``, comma separated, default all): ``adult-lr``, ``adult-gb`` (groups sex and race),
``compas-lr``, ``compas-gb`` (group race). The data are read from ``--data-dir`` (default the
``shared/data`` folder next to the repository root) and split as :mod:`benchmarks.real_data`
splits them (``train_test_split(test_size=0.25, random_state=0)``, adult's training part
subsampled to 8,000 rows; immutable: adult's age, sex, race, native-country, compas's age, race,
sex). Models: ``lr`` is :mod:`benchmarks.real_data`'s ``logreg`` (one-hot categoricals, scaled
numerics, ``LogisticRegression(max_iter=1000)``); ``gb`` is :mod:`benchmarks.compare`'s model
(one-hot categoricals, numerics passed through, ``GradientBoostingClassifier(n_estimators=100,
max_depth=3, random_state=0)``). The audited rows are the first ``--rows`` (default 300) test rows
the model rejects, in the split's order. The question: class 1 (adult: with p >= 0.7; the default margin), MAD-L1, with
what an applicant cannot act on held fixed beside the data set's immutables (adult: marital-status,
relationship, capital-gain, capital-loss; compas: two_year_recid, c_charge_degree) and one-way
features (adult's education-num and compas's priors_count may only increase): with every other
feature free over the data's whole range, every rejected row has recourse and there is nothing to
prove.

Per case, one audit with ``workers=1`` and the proofs (``counterplan.solver.audit.audit(explainer,
rows, groups=..., seed=0, bootstrap=1000, prove_seconds=--prove-seconds)``) gives the first table
(recourse rate and its interval, rows with recourse, proven and unproven without, mean cost, the
search's rows/s, the proofs' seconds) and the group table (per group value: rows, recourse rate,
mean cost, the burden's cost ratio and no-recourse ratio). Then the first ``--speed-rows`` (default
100) of them are searched again, ``prove=False, bootstrap=0``, with ``workers=1``, ``workers=2`` and
on a local Ray (``ray="auto"``, started with 2 CPUs before the clock): the speed table gives each
way's rows/s of the bulk search, marked "rows differ" if its rows with recourse are not those of one
worker (they must be the same: a row's seed comes from the audit's seed and its id).

On ``lr`` cases, the LP table: for a logistic regression on one-hot and scaled features, with box
domains and immutables, "no recourse" is decidable by maximising the logit over the problem's
domains (the same features, bounds, categories and immutables the audit's problem has, read from
``explainer.problem(row).space``): one ``scipy.optimize.linprog`` per row, the numeric mutable
features bounded by their domains (a one-way feature from its value) and each mutable categorical's
one-hot indicators relaxed to [0, 1] summing to 1 (a product of boxes and simplices: the LP's
optimum is at a vertex, a real category and a bound, so the relaxation is exact; integer features
have whole bounds). A row has no recourse when the maximum logit stays below the goal's (p >= (1 +
margin) / 2, or confidence + margin). The table compares the LP's infeasible rows with the audit's
proven ones (both, LP only, audit only) and their times (the LP's whole, the audit's proofs).

``--screen-compare`` runs, instead of the tables above, each case's audit four ways side by side
(``bootstrap=0, rules=0``, the proofs on, one worker): without the screen (``screen=False``), the
default (``screen=None``: screened until a probe of the first rows proves none), with the screen on
every row (``screen=True``: each row put to the exact engine for feasibility before its search,
``AuditOptions.screen``) and with the full proof as the screen (the screen's configuration replaced
by the proof's, optimising, under the same time limit: what the screen would cost if it were the
proof); the screen table gives each way's total, screen, search and proof seconds, the rows
searched, and whether its rows with recourse, proven and unproven are those without the screen.

Run from the repository root (a few minutes; the machine's load is printed first)::

    .venv/bin/python benchmarks/audit.py --rows 300
    .venv/bin/python benchmarks/audit.py --cases adult-lr --rows 100 --ways 1
    .venv/bin/python benchmarks/audit.py --cases adult-gb,compas-lr --rows 150 --screen-compare
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import structlog

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.real_data import DATASETS, MODELS, Data, default_data_dir, load_data, render
from counterplan.planning import ClassGoal
from counterplan.planning.distance import DistanceSettings
from counterplan.planning.features import CategoricalFeature
from counterplan.planning.models import adapt_sklearn
from counterplan.solver.audit import proofs, runner
from counterplan.solver.audit.report import AuditReport
from counterplan.solver.audit.runner import audit
from counterplan.solver.explainer import Explainer

SEED = 0
GROUPS = {"adult": ("sex", "race"), "compas": ("race",)}
IMMUTABLE = {
    "adult": ("marital-status", "relationship", "capital-gain", "capital-loss"),
    "compas": ("two_year_recid", "c_charge_degree"),
}
"""Held fixed beside the data set's own immutables: what an applicant cannot act on."""
CONFIDENCE = {"adult": 0.7, "compas": None}
"""The goal: class 1 with this probability (None: ahead of class 0), plus the default margin."""
MONOTONE = {"adult": {"education-num": "increase"}, "compas": {"priors_count": "increase"}}
"""Features that may only go one way (an education is not undone, a prior offence not erased)."""
CASES = ("adult-lr", "adult-gb", "compas-lr", "compas-gb")


def _gb(categorical: list[str], numeric: list[str]) -> Any:
    """benchmarks/compare.py's model."""
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import GradientBoostingClassifier
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder

    encode = ColumnTransformer(
        [("categories", OneHotEncoder(handle_unknown="ignore"), categorical), ("numbers", "passthrough", numeric)]
    )
    model = GradientBoostingClassifier(n_estimators=100, max_depth=3, random_state=SEED)
    return Pipeline([("encode", encode), ("classify", model)])


@dataclass
class Case:
    name: str
    data: Data
    pipe: Any
    explainer: Explainer
    rows: pd.DataFrame
    groups: tuple[str, ...]


def load_case(name: str, data_dir: Path, n_rows: int, cache: dict[str, Data]) -> Case:
    dataset, model = name.split("-")
    if dataset not in cache:
        cache[dataset] = load_data(DATASETS[dataset], data_dir)
    data = cache[dataset]
    target = data.spec.target
    build = MODELS["logreg"].build if model == "lr" else _gb
    pipe = build(data.categorical, data.numeric).fit(data.train[data.features], data.train[target])
    rejected = data.test[pipe.predict(data.test[data.features]) == 0].head(n_rows)
    explainer = Explainer(
        adapt_sklearn(pipe, target),
        data.train,
        [ClassGoal(target=1, confidence=CONFIDENCE[dataset])],
        target=target,
        columns=data.features,
        immutable=(*data.spec.immutable, *IMMUTABLE[dataset]),
        overrides={name: {"monotone": way} for name, way in MONOTONE[dataset].items()},
        distance=DistanceSettings(metric="mad_l1"),
    )
    return Case(name, data, pipe, explainer, rejected, GROUPS[dataset])


# --------------------------------------------------------------------------------------------
# the linear-programming check


def lp_infeasible(case: Case) -> tuple[list[Any], float]:
    """The rows whose maximum logit over the problem's domains misses the goal, and the seconds
    the LPs took (not the problems' building, which reads the same domains the audit's search has)."""
    from scipy.optimize import linprog

    encode, classify = case.pipe.named_steps["encode"], case.pipe.named_steps["classify"]
    ohe, scaler = encode.named_transformers_["categories"], encode.named_transformers_["numbers"]
    categorical = list(encode.transformers_[0][2])
    numeric = list(encode.transformers_[1][2])
    coef = classify.coef_[0]
    n_onehot = sum(len(c) for c in ohe.categories_)
    cat_weights: dict[str, dict[str, float]] = {}
    at = 0
    for name, categories in zip(categorical, ohe.categories_, strict=True):
        cat_weights[name] = {str(c): float(coef[at + i]) for i, c in enumerate(categories)}
        at += len(categories)
    slope = {name: float(coef[n_onehot + j] / scaler.scale_[j]) for j, name in enumerate(numeric)}
    offset = float(classify.intercept_[0]) - sum(
        float(coef[n_onehot + j] * scaler.mean_[j] / scaler.scale_[j]) for j in range(len(numeric))
    )
    goal = ClassGoal(target=1, confidence=CONFIDENCE[case.name.split("-")[0]])
    p = (1.0 + goal.margin) / 2.0 if goal.confidence is None else min(goal.confidence + goal.margin, 1.0)
    needed = math.log(p / (1.0 - p))
    infeasible: list[Any] = []
    seconds = 0.0
    for row_id, row in case.rows.iterrows():
        features = case.explainer.problem(row).space.features
        started = time.perf_counter()
        fixed = offset
        c: list[float] = []
        bounds: list[tuple[float, float]] = []
        equal_rows: list[list[int]] = []
        for feature in features:
            if isinstance(feature, CategoricalFeature):
                weights = cat_weights[feature.name]
                if feature.constrained:
                    fixed += weights.get(str(feature.value), 0.0)
                    continue
                choices = feature.categories or ()
                equal_rows.append(list(range(len(c), len(c) + len(choices))))
                c += [-weights.get(str(k), 0.0) for k in choices]  # an unseen category weighs 0
                bounds += [(0.0, 1.0)] * len(choices)
            elif feature.constrained:
                fixed += slope[feature.name] * float(feature.value)
            else:
                low, high = float(feature.low), float(feature.high)
                if feature.monotone == "increase":
                    low = float(feature.value)
                elif feature.monotone == "decrease":
                    high = float(feature.value)
                c.append(-slope[feature.name])
                bounds.append((low, high))
        a_eq = np.zeros((len(equal_rows), len(c)))
        for i, columns in enumerate(equal_rows):
            a_eq[i, columns] = 1.0
        result = linprog(
            c, A_eq=a_eq if equal_rows else None, b_eq=np.ones(len(equal_rows)) if equal_rows else None, bounds=bounds
        )
        best = fixed - float(result.fun)
        seconds += time.perf_counter() - started
        if best < needed:
            infeasible.append(row_id)
    return infeasible, seconds


# --------------------------------------------------------------------------------------------
# tables


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _num(value: float | None, digits: int = 2) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def _ci(interval: tuple[float | None, float | None]) -> str:
    low, high = interval
    return "-" if low is None or high is None else f"{100 * low:.0f}-{100 * high:.0f}%"


def audit_row(name: str, report: AuditReport) -> list[str]:
    t = report.timing
    return [
        name,
        str(report.n_rows),
        _pct(report.recourse_rate),
        _ci(report.recourse_rate_ci),
        str(len(report.with_recourse)),
        str(len(report.no_recourse_proven)),
        str(len(report.no_recourse_unproven)),
        _num(report.cost_mean),
        _num(t.rows_per_second, 1),
        _num(t.search_seconds, 1),
        _num(t.prove_seconds + t.screen_seconds, 1),
    ]


def group_rows(name: str, report: AuditReport) -> list[list[str]]:
    out = []
    for column, values in report.groups.items():
        burden = report.burden[column]
        for value, figures in values.items():
            ratio = burden.values.get(value)
            out.append(
                [
                    name,
                    f"{column}={value}",
                    str(figures.n),
                    _pct(figures.recourse_rate),
                    str(figures.no_recourse_proven),
                    _num(figures.cost_mean),
                    _num(ratio.cost_ratio if ratio else None),
                    _num(ratio.no_recourse_ratio if ratio else None),
                ]
            )
    return out


SCREEN_WAYS = ("off", "auto", "on", "proof")
"""``--screen-compare``'s ways: no screen, the default (which stops after a probe that proves no
row), the feasibility screen on every row, the full proof as the screen on every row."""


def screen_rows(name: str, case: Case, prove_seconds: float) -> list[list[str]]:
    """The case audited without the screen, with it, and with the full proof as the screen."""
    out: list[list[str]] = []
    reference: tuple[set[Any], ...] | None = None
    feasibility = runner.screen_config
    for way in SCREEN_WAYS:
        if way == "proof":  # the proof's program, under the screen's time limit
            runner.screen_config = lambda config, seconds: proofs.proof_config(  # type: ignore[assignment]
                config, min(seconds or proofs.SCREEN_SECONDS, proofs.SCREEN_SECONDS)
            )
        try:
            report = audit(
                case.explainer,
                case.rows,
                seed=SEED,
                bootstrap=0,
                rules=0,
                prove_seconds=prove_seconds,
                screen={"off": False, "auto": None}.get(way, True),
            )
        finally:
            runner.screen_config = feasibility
        sets = (set(report.with_recourse), set(report.no_recourse_proven), set(report.no_recourse_unproven))
        reference = sets if reference is None else reference
        t = report.timing
        out.append(
            [
                name,
                way,
                str(report.n_rows),
                _num(t.seconds, 1),
                _num(t.screen_seconds, 1),
                _num(t.search_seconds, 1),
                _num(t.prove_seconds, 1),
                str(t.rows_searched),
                str(len(report.no_recourse_proven)),
                "yes" if sets == reference else "NO",
            ]
        )
        print(" | ".join(out[-1]), file=sys.stderr, flush=True)
    return out


def _start_ray() -> bool:
    try:
        import ray
    except ImportError:
        return False
    started = time.perf_counter()
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    print(f"ray started in {time.perf_counter() - started:.1f} s (not timed)", file=sys.stderr, flush=True)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", type=Path, default=default_data_dir())
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--rows", type=int, default=300)
    parser.add_argument("--speed-rows", type=int, default=100, help="rows of the speed table's searches")
    parser.add_argument("--ways", default="1,2,ray", help="search speed ways: 1, 2 (workers), ray")
    parser.add_argument("--prove-seconds", type=float, default=10.0)
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--screen-compare", action="store_true", help="only the screen table: off, on, proof")
    args = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))  # the tables only
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} (1, 5 min); cpus: {os.cpu_count()}", flush=True)
    if args.screen_compare:
        cache_: dict[str, Data] = {}
        table: list[list[str]] = []
        for name in [c for c in args.cases.split(",") if c]:
            table += screen_rows(name, load_case(name, args.data_dir, args.rows, cache_), args.prove_seconds)
        header = ["case", "screen", "rows", "total s", "screen s", "search s", "prove s", "searched", "proven", "same"]
        print(render(header, table, args.markdown, left=2))
        return 0
    ways = [w for w in args.ways.split(",") if w]
    with_ray = "ray" in ways and _start_ray()
    cache: dict[str, Data] = {}
    audits: list[list[str]] = []
    groups: list[list[str]] = []
    speeds: list[list[str]] = []
    lps: list[list[str]] = []
    for name in [c for c in args.cases.split(",") if c]:
        case = load_case(name, args.data_dir, args.rows, cache)
        print(f"{name}: {len(case.rows)} rejected rows", file=sys.stderr, flush=True)
        report = audit(
            case.explainer,
            case.rows,
            groups=case.groups,
            seed=SEED,
            bootstrap=1000,
            prove_seconds=args.prove_seconds,
        )
        audits.append(audit_row(name, report))
        groups += group_rows(name, report)
        speed = [name]
        reference: set[Any] | None = None
        for way in ways:
            if way == "ray" and not with_ray:
                speed.append("-")
                continue
            other = audit(
                case.explainer,
                case.rows.head(args.speed_rows),
                groups=case.groups,
                seed=SEED,
                bootstrap=0,
                prove=False,
                workers=2 if way == "2" else 1,
                ray="auto" if way == "ray" else None,
            )
            found = set(other.with_recourse)
            reference = found if reference is None else reference
            same = "" if found == reference else " (rows differ)"
            speed.append(f"{_num(other.timing.rows_per_second, 1)}{same}")
        speeds.append(speed)
        if name.endswith("-lr"):
            infeasible, lp_seconds = lp_infeasible(case)
            lp, proven = set(infeasible), set(report.no_recourse_proven)
            lps.append(
                [
                    name,
                    str(report.n_rows),
                    str(len(lp)),
                    str(len(proven)),
                    str(len(lp & proven)),
                    str(len(lp - proven)),
                    str(len(proven - lp)),
                    _num(lp_seconds, 2),
                    _num(report.timing.prove_seconds, 2),
                ]
            )
    markdown = args.markdown
    print(
        render(
            [
                "case",
                "rows",
                "recourse",
                "95% CI",
                "with",
                "proven none",
                "unproven",
                "cost",
                "rows/s",
                "search s",
                "prove s",
            ],
            audits,
            markdown,
            left=1,
        )
    )
    print()
    print(
        render(
            ["case", "group", "n", "recourse", "proven none", "cost", "cost ratio", "no-recourse ratio"],
            groups,
            markdown,
            left=2,
        )
    )
    print()
    columns = ["case", *[{"1": "workers 1", "2": "workers 2", "ray": "ray (2 CPUs)"}.get(w, w) for w in ways]]
    print(render(columns, speeds, markdown, left=1))
    if lps:
        print()
        header = ["case", "rows", "LP: none", "audit: proven none", "both", "LP only", "audit only", "LP s", "proofs s"]
        print(render(header, lps, markdown, left=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
