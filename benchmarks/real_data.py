"""counterplan as a new user meets it: real data sets, models trained the usual way, three distances.

Nothing here is tuned for counterplan. Each data set is read with ``pd.read_csv`` from ``--data-dir``
(default the ``shared/data`` folder next to the repository root,
``Path(__file__).resolve().parents[2] / "shared" / "data"``; the data are never copied into the
repository), split with ``train_test_split(test_size=0.25, random_state=0)``, and a model is fitted
on the training part the way its users fit it. Then, for each distance metric, every query goes
through the public API only::

    problem = CounterfactualProblem.from_dataframe(
        train, row, model, [ClassGoal(target=1, confidence=c)], target=..., immutable=...,
        distance=DistanceSettings(metric=metric))
    result = solver.explain(problem, seed=0)

Data sets (``--datasets``, comma separated, default all):

* ``adult``: target ``income``; immutable age, sex, race, native-country; the training part
  subsampled to 8,000 rows (``random_state=0``);
* ``compas``: target ``score``; immutable age, race, sex;
* ``heloc``: target ``RiskPerformance`` (cast to int); 21 numeric columns, whole-number floats in
  the CSV; nothing immutable;
* ``heloc-missing``: heloc with its missing values back. CARLA imputed them with per-class means,
  which show up as a column's non-whole values (each affected column has 2 distinct ones); any
  numeric column with 1 to 3 distinct non-whole values has those replaced by NaN, in the training
  rows and the query rows alike.

Models (``--models``, comma separated, default all that are importable):

* ``logreg``: ``Pipeline(ColumnTransformer(OneHotEncoder(handle_unknown="ignore")`` on the
  categoricals, ``StandardScaler`` on the numerics), ``LogisticRegression(max_iter=1000))``;
* ``forest``: the same encoding, ``RandomForestClassifier(n_estimators=100, random_state=0)``;
* ``hgb``: categoricals one-hot encoded (dense), numerics passed through,
  ``HistGradientBoostingClassifier(random_state=0)``; it takes NaN natively, so it is the only
  model fitted on ``heloc-missing``;
* ``xgboost``, ``lightgbm``: the ``hgb`` encoding with ``xgboost.XGBClassifier(random_state=0)`` /
  ``lightgbm.LGBMClassifier(random_state=0, verbose=-1)``, only when the package is importable
  (left out silently otherwise).

Distance metrics (``--metrics``, default all): ``range_l1``, ``mad_l1``, ``sd_squared``.

Queries: per data set and model, the first ``--rows`` (default 20) test rows the model predicts 0,
in the split's order. The goal is class 1 with ``--confidence`` (default 0.7).

Everything reported is computed here from the proposed row and the training data; the library's
own flags (``result.valid``, ``result.changes``) are not used. Per case (data set x model x metric):

* ``rows``: queries run; ``failed``: queries where building the problem or solving raised (each
  is warned about on stderr in one line and counts as not valid; the reasons are listed after the
  table);
* ``valid %``: the model's own ``predict_proba`` on the proposed row, as a one-row DataFrame in the
  training dtypes, gives class 1 at least the confidence;
* ``MAD-L1``: mean over valid answers of the sum of numeric ``|delta| / MAD`` (MAD of the training
  column, non-missing values, 1 when 0) plus 1 per changed categorical, one common yardstick for
  every metric (a missing value filled in, or a value made missing, also counts 1);
* ``changed``: mean features changed over valid answers;
* ``off-grid %``: of the changed numeric values in every proposed row (valid or not; the count in
  brackets), the share not on the column's grid. The grid: the column's decimal precision is the
  number of decimals the most precise training value needs, leaving out values that need more
  than 6 decimals when there are at most 3 such distinct values (imputation artifacts), capped at
  6; a value is off-grid when ``round(value, precision)`` differs from it by more than a relative
  1e-9. The goal is 0: integers stay whole, heloc's counts and months stay whole;
* ``top changed``: the three features most often changed among valid answers, with their share of
  valid answers, to show which default distance gives answers a person would act on;
* ``median s``: median wall seconds per answered query (failed ones left out), building the
  problem included.

Run from the repository root::

    .venv/bin/python benchmarks/real_data.py                      # everything, ~10 min on 2 cores
    .venv/bin/python benchmarks/real_data.py --quick              # 5 rows per case
    .venv/bin/python benchmarks/real_data.py --datasets adult --models logreg --metrics mad_l1 --per-instance
    .venv/bin/python benchmarks/real_data.py --markdown           # the table also as Markdown

``--per-instance`` also prints each query's proposed change set. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from counterplan.planning import ClassGoal, CounterfactualProblem, DistanceSettings
from counterplan.solver import explain

SEED = 0
ADULT_TRAIN_ROWS = 8000
METRICS = ("range_l1", "mad_l1", "sd_squared")
MAX_DECIMALS = 6
"""Grid precision cap; values needing more decimals are imputation artifacts or real floats."""
MAX_ARTIFACTS = 3
"""At most this many distinct over-precise values in a column are left out of its grid."""
REL_TOL = 1e-9
"""Relative tolerance of the off-grid test (and of "changed")."""
EXACT_TOL = 1e-12
"""Relative tolerance when reading a training value's decimals: tight, or 6 decimals fit everything large."""


@dataclass(frozen=True)
class DatasetSpec:
    """Where a data set lives and how its columns are used."""

    name: str
    file: str
    target: str
    immutable: tuple[str, ...]
    train_rows: int | None = None
    missing: bool = False
    """Turn CARLA's imputed values (a column's few non-whole values) back into NaN."""


DATASETS = {
    "adult": DatasetSpec("adult", "adult.csv", "income", ("age", "sex", "race", "native-country"), ADULT_TRAIN_ROWS),
    "compas": DatasetSpec("compas", "compas.csv", "score", ("age", "race", "sex")),
    "heloc": DatasetSpec("heloc", "heloc.csv", "RiskPerformance", ()),
    "heloc-missing": DatasetSpec("heloc-missing", "heloc.csv", "RiskPerformance", (), missing=True),
}


# --------------------------------------------------------------------------------------------
# data


@dataclass
class Data:
    """One data set, split: training frame (features and target), test features, column kinds."""

    spec: DatasetSpec
    train: pd.DataFrame
    test: pd.DataFrame
    features: list[str]
    categorical: list[str]
    numeric: list[str]
    mad: dict[str, float]
    precision: dict[str, int]
    """Decimal places of each numeric column's grid."""
    blanked: dict[str, int] = field(default_factory=dict)
    """heloc-missing: values set to NaN per column (whole data set)."""


def decimals_needed(values: np.ndarray) -> np.ndarray:
    """Per value, the fewest decimals (0..MAX_DECIMALS) that represent it; MAX_DECIMALS + 1 if none do."""
    needed = np.full(values.shape, MAX_DECIMALS + 1, dtype=np.int64)
    for digits in range(MAX_DECIMALS, -1, -1):
        on = np.abs(np.round(values, digits) - values) <= EXACT_TOL * np.maximum(np.abs(values), 1e-3)
        needed[on] = digits
    return needed


def grid_precision(column: pd.Series) -> int:
    """The column's decimal precision, leaving out a few over-precise values (imputation artifacts)."""
    values = np.unique(column.dropna().to_numpy(dtype=np.float64))
    values = values[np.isfinite(values)]
    if values.size == 0:
        return 0
    needed = decimals_needed(values)
    over = needed > MAX_DECIMALS
    if over.sum() <= MAX_ARTIFACTS:
        needed = needed[~over]
    return int(min(needed.max(), MAX_DECIMALS)) if needed.size else 0


def off_grid(value: float, precision: int) -> bool:
    return abs(round(value, precision) - value) > REL_TOL * max(abs(value), 1e-3)


def blank_imputed(data: pd.DataFrame, numeric: Sequence[str]) -> dict[str, int]:
    """Replace each numeric column's imputed values (1-3 distinct non-whole values) with NaN, in place."""
    blanked = {}
    for c in numeric:
        values = data[c].dropna().unique()
        fractional = values[values != np.round(values)]
        if 1 <= len(fractional) <= MAX_ARTIFACTS:
            mask = data[c].isin(fractional)
            data.loc[mask, c] = np.nan
            blanked[c] = int(mask.sum())
    return blanked


def load_data(spec: DatasetSpec, data_dir: Path) -> Data:
    data = pd.read_csv(data_dir / spec.file)
    data[spec.target] = data[spec.target].astype(int)
    features = [c for c in data.columns if c != spec.target]
    numeric = [c for c in features if pd.api.types.is_numeric_dtype(data[c])]
    categorical = [c for c in features if c not in numeric]
    blanked = blank_imputed(data, numeric) if spec.missing else {}
    train, test = train_test_split(data, test_size=0.25, random_state=SEED)
    if spec.train_rows is not None and len(train) > spec.train_rows:
        train = train.sample(n=spec.train_rows, random_state=SEED)
    mad = {}
    for c in numeric:
        column = train[c].dropna().to_numpy(dtype=np.float64)
        value = float(np.median(np.abs(column - np.median(column)))) if column.size else 0.0
        mad[c] = value if value > 0 else 1.0
    precision = {c: grid_precision(train[c]) for c in numeric}
    return Data(spec, train.copy(), test[features].copy(), features, categorical, numeric, mad, precision, blanked)


# --------------------------------------------------------------------------------------------
# models


def _scaled(categorical: list[str], numeric: list[str]) -> ColumnTransformer:
    return ColumnTransformer(
        [
            ("categories", OneHotEncoder(handle_unknown="ignore"), categorical),
            ("numbers", StandardScaler(), numeric),
        ]
    )


def _dense(categorical: list[str], numeric: list[str]) -> ColumnTransformer:
    return ColumnTransformer(
        [
            ("categories", OneHotEncoder(handle_unknown="ignore", sparse_output=False), categorical),
            ("numbers", "passthrough", numeric),
        ]
    )


def _xgboost() -> Any:
    from xgboost import XGBClassifier

    return XGBClassifier(random_state=SEED)


def _lightgbm() -> Any:
    from lightgbm import LGBMClassifier

    return LGBMClassifier(random_state=SEED, verbose=-1)


@dataclass(frozen=True)
class ModelSpec:
    name: str
    build: Callable[[list[str], list[str]], Pipeline]
    takes_nan: bool = False
    package: str | None = None
    """Optional dependency; the model is left out when it is not importable."""


MODELS = {
    "logreg": ModelSpec(
        "logreg", lambda c, n: Pipeline([("encode", _scaled(c, n)), ("classify", LogisticRegression(max_iter=1000))])
    ),
    "forest": ModelSpec(
        "forest",
        lambda c, n: Pipeline(
            [("encode", _scaled(c, n)), ("classify", RandomForestClassifier(n_estimators=100, random_state=SEED))]
        ),
    ),
    "hgb": ModelSpec(
        "hgb",
        lambda c, n: Pipeline(
            [("encode", _dense(c, n)), ("classify", HistGradientBoostingClassifier(random_state=SEED))]
        ),
        takes_nan=True,
    ),
    "xgboost": ModelSpec(
        "xgboost", lambda c, n: Pipeline([("encode", _dense(c, n)), ("classify", _xgboost())]), package="xgboost"
    ),
    "lightgbm": ModelSpec(
        "lightgbm", lambda c, n: Pipeline([("encode", _dense(c, n)), ("classify", _lightgbm())]), package="lightgbm"
    ),
}


def available_models() -> list[str]:
    return [m for m, s in MODELS.items() if s.package is None or importlib.util.find_spec(s.package) is not None]


# --------------------------------------------------------------------------------------------
# one query


@dataclass
class Outcome:
    """What counterplan did on one query, as measured here."""

    row_id: int
    answered: bool = False
    valid: bool = False
    probability: float = float("nan")
    distance: float = float("nan")
    changed: list[str] = field(default_factory=list)
    numeric_changes: int = 0
    off_grid: int = 0
    seconds: float = 0.0
    error: str | None = None
    changes: list[str] = field(default_factory=list)


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float | np.floating) and not np.isfinite(value))


def proposed_frame(data: Data, proposed: dict[str, Any]) -> pd.DataFrame:
    """The proposed row as a one-row DataFrame in the training frame's column order and dtypes."""
    out = {}
    for c in data.features:
        dtype = data.train[c].dtype
        value = proposed[c]
        if c in data.numeric:
            number = np.nan if _missing(value) else float(value)
            column = pd.Series([number], dtype=np.float64)
            if pd.api.types.is_integer_dtype(dtype) and np.isfinite(number) and number.is_integer():
                column = column.astype(dtype)
        else:
            column = pd.Series([value]).astype(dtype)
        out[c] = column
    return pd.DataFrame(out)


def measure(
    data: Data, model: Pipeline, query: pd.Series, proposed: dict[str, Any], *, confidence: float, o: Outcome
) -> None:
    """Fill validity, distance, changes and grid counts by comparing the proposed row with the query."""
    o.answered = True
    row = proposed_frame(data, proposed)
    column = list(model.classes_).index(1)
    o.probability = float(model.predict_proba(row)[0, column])
    o.valid = bool(o.probability >= confidence)
    distance = 0.0
    for c in data.features:
        before, after = query[c], row.iloc[0][c]
        if c in data.numeric:
            gone, back = _missing(before), _missing(after)
            if gone and back:
                continue
            if gone or back:
                distance += 1.0
            else:
                delta = abs(float(after) - float(before))
                if delta <= REL_TOL * max(abs(float(before)), 1.0):
                    continue
                distance += delta / data.mad[c]
            o.numeric_changes += 0 if back else 1
            o.off_grid += 0 if back or not off_grid(float(after), data.precision[c]) else 1
        elif str(after) == str(before):
            continue
        else:
            distance += 1.0
        o.changed.append(c)
        o.changes.append(f"{c}: {before} -> {after}")
    o.distance = distance


def run_query(data: Data, model: Pipeline, query: pd.Series, *, metric: str, confidence: float, o: Outcome) -> None:
    row = {c: query[c] for c in data.features}
    start = time.perf_counter()
    try:
        problem = CounterfactualProblem.from_dataframe(
            data.train,
            row,
            model,
            [ClassGoal(target=1, confidence=confidence)],
            target=data.spec.target,
            immutable=data.spec.immutable,
            distance=DistanceSettings(metric=metric),
        )
        result = explain(problem, seed=SEED)
    finally:
        o.seconds = time.perf_counter() - start
    measure(data, model, query, dict(result.proposed), confidence=confidence, o=o)


# --------------------------------------------------------------------------------------------
# report


HEADER = [
    "dataset",
    "model",
    "metric",
    "rows",
    "failed",
    "valid %",
    "MAD-L1 (valid)",
    "changed (valid)",
    "off-grid % (n)",
    "top changed (valid)",
    "median s",
]


def summary_row(dataset: str, model: str, metric: str, outcomes: Sequence[Outcome]) -> list[str]:
    valid = [o for o in outcomes if o.valid]
    answered = [o for o in outcomes if o.answered]
    numeric = sum(o.numeric_changes for o in answered)
    off = sum(o.off_grid for o in answered)
    counts = Counter(c for o in valid for c in o.changed)
    top = ", ".join(f"{c} {100 * n / len(valid):.0f}%" for c, n in counts.most_common(3)) if valid else "-"

    def mean(values: Sequence[float], digits: int) -> str:
        return f"{statistics.fmean(values):.{digits}f}" if values else "-"

    return [
        dataset,
        model,
        metric,
        str(len(outcomes)),
        str(sum(1 for o in outcomes if o.error)),
        f"{100.0 * len(valid) / len(outcomes):.0f}" if outcomes else "-",
        mean([o.distance for o in valid], 3),
        mean([float(len(o.changed)) for o in valid], 2),
        f"{100.0 * off / numeric:.0f} ({numeric})" if numeric else f"- ({numeric})",
        top or "none",
        f"{statistics.median(o.seconds for o in answered):.3f}" if answered else "-",
    ]


def render(header: Sequence[str], rows: Sequence[Sequence[str]], markdown: bool, left: int = 3) -> str:
    """An aligned plain-text table (the first ``left`` columns and the last text column left-aligned), or Markdown."""
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines)
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    text = {header.index("top changed (valid)")} if "top changed (valid)" in header else set()

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            str(c).ljust(w) if i < left or i in text else str(c).rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    return "\n".join([line(header), "  ".join("-" * w for w in widths), *(line(r) for r in rows)])


# --------------------------------------------------------------------------------------------
# main


def default_data_dir() -> Path:
    return Path(__file__).resolve().parents[2] / "shared" / "data"


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=default_data_dir(), help="folder with the CSVs")
    parser.add_argument("--datasets", default=",".join(DATASETS), help="comma-separated: " + ",".join(DATASETS))
    parser.add_argument(
        "--models", default=None, help="comma-separated: " + ",".join(MODELS) + " (default: all importable)"
    )
    parser.add_argument("--metrics", default=",".join(METRICS), help="comma-separated: " + ",".join(METRICS))
    parser.add_argument("--rows", type=int, default=20, help="rejected test rows per data set and model")
    parser.add_argument("--confidence", type=float, default=0.7, help="class-1 probability the goal asks for")
    parser.add_argument("--quick", action="store_true", help="smoke run: rows=5")
    parser.add_argument("--markdown", action="store_true", help="also print the table as Markdown")
    parser.add_argument("--per-instance", action="store_true", help="also print each query's proposed changes")
    args = parser.parse_args(argv)
    if args.quick:
        args.rows = 5
    args.dataset_list = _split(args.datasets)
    args.metric_list = _split(args.metrics)
    importable = available_models()
    if args.models is None:
        args.model_list = importable
    else:
        args.model_list = _split(args.models)
        for name in args.model_list:
            if name in MODELS and name not in importable:
                parser.error(f"model {name!r} needs the {MODELS[name].package} package, which is not installed")
    for name, known, what in (
        *((d, DATASETS, "data set") for d in args.dataset_list),
        *((m, MODELS, "model") for m in args.model_list),
        *((m, METRICS, "metric") for m in args.metric_list),
    ):
        if name not in known:
            parser.error(f"unknown {what} {name!r}; choose from {', '.join(known)}")
    return args


def one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:200]


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    began = time.perf_counter()
    summary: list[list[str]] = []
    results: dict[tuple[str, str, str], list[Outcome]] = {}
    for dataset in args.dataset_list:
        data = load_data(DATASETS[dataset], args.data_dir)
        note = f", set to NaN: {data.blanked}" if data.blanked else ""
        print(
            f"[{dataset}] train {len(data.train)} rows, {len(data.features)} features "
            f"({len(data.categorical)} categorical); grid decimals "
            f"{sorted(set(data.precision.values())) or '-'}{note}",
            file=sys.stderr,
        )
        models = [m for m in args.model_list if MODELS[m].takes_nan or not data.spec.missing]
        if not models:
            print(f"  [{dataset}] none of the chosen models takes missing values; skipped", file=sys.stderr)
        for model_name in models:
            spec = MODELS[model_name]
            start = time.perf_counter()
            model = spec.build(data.categorical, data.numeric)
            model.fit(data.train[data.features], data.train[data.spec.target])
            queries = data.test[model.predict(data.test) == 0].iloc[: args.rows]
            with_nan = int(queries.isna().any(axis=1).sum())
            print(
                f"  [{dataset}/{model_name}] fitted in {time.perf_counter() - start:.1f}s, "
                f"{len(queries)} rejected queries ({with_nan} with missing values)",
                file=sys.stderr,
            )
            for metric in args.metric_list:
                outcomes = []
                start = time.perf_counter()
                for row_id in queries.index:
                    outcome = Outcome(int(row_id))
                    try:
                        query = queries.loc[row_id]
                        run_query(data, model, query, metric=metric, confidence=args.confidence, o=outcome)
                    except Exception as exc:
                        outcome.error = one_line(exc)
                        case = f"{dataset}/{model_name}/{metric}"
                        print(f"warning: {case} row {row_id}: {outcome.error}", file=sys.stderr)
                    outcomes.append(outcome)
                results[(dataset, model_name, metric)] = outcomes
                row = summary_row(dataset, model_name, metric, outcomes)
                summary.append(row)
                print(
                    f"    {dataset}/{model_name}/{metric}: valid {row[5]}%, failed {row[4]}, "
                    f"off-grid {row[8]}, {time.perf_counter() - start:.1f}s",
                    file=sys.stderr,
                )
    wall = time.perf_counter() - began

    print(
        f"\nrows={args.rows} per data set and model; goal class 1 with confidence {args.confidence}; "
        f"solver defaults, seed {SEED}; wall time {wall:.0f} s"
    )
    print(f"counterplan imported from {Path(sys.modules['counterplan'].__file__ or '?').parent.parent}\n")
    print(render(HEADER, summary, markdown=False))
    if args.markdown:
        print()
        print(render(HEADER, summary, markdown=True))
    reasons: Counter[tuple[str, str, str, str]] = Counter()
    for (dataset, model_name, metric), outcomes in results.items():
        for o in outcomes:
            if o.error:
                reasons[(dataset, model_name, metric, o.error)] += 1
    if reasons:
        print("\nfailures:")
        for (dataset, model_name, metric, error), n in sorted(reasons.items()):
            print(f"  {dataset}/{model_name}/{metric}: {n} x {error}")
    if args.per_instance:
        print("\nper instance:")
        for (dataset, model_name, metric), outcomes in results.items():
            for o in outcomes:
                status = f"error: {o.error}" if o.error else f"valid={o.valid!s:5} p1={o.probability:.3f}"
                print(
                    f"{dataset} {model_name} {metric} row {o.row_id}: {status} dist={o.distance:.3f} "
                    f"changed={len(o.changed)} off-grid={o.off_grid}/{o.numeric_changes} {o.seconds:.2f}s "
                    f"[{'; '.join(o.changes)}]"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
