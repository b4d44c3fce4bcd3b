"""CE-OCL's Table 2 setting on COMPAS (one counterfactual per factual): counterplan's engines, DiCE
and the paper's own figures side by side.

Setting, as CE-OCL (Maragno, Roeber, Birbil) uses it (see ``shared/papers/notes-mip.md`` section A4,
and ``prep_data`` in the authors' ``src/ce_helpers.py``):

* data: ``compas.csv`` in CARLA's form, read from ``--data-dir`` (default the ``shared/data``
  folder next to the repository root; never copied into the repository). Its columns are the
  paper's 7 model inputs: 4 numbers ``age``, ``two_year_recid`` (0/1, a number as in CARLA and
  CE-OCL), ``priors_count``, ``length_of_stay`` (all whole numbers in the CSV) and 3 text
  categoricals ``c_charge_degree`` (F/M), ``race`` (African-American/Other), ``sex``. The label is
  ``score``; 1 is the wanted outcome (81% of rows; CARLA's "low risk" side: 39% of score-1 rows
  re-offended within two years against 74% of score-0 rows). Immutable: age, race, sex.
* split: ``train_test_split(test_size=0.2, stratify=score, random_state=0)``.
* models, each a ``Pipeline(ColumnTransformer([StandardScaler on the numbers, OneHotEncoder(dense)
  on the categoricals]), estimator)`` fitted on the training part: ``rf``
  ``RandomForestClassifier(n_estimators=20, max_depth=4, random_state=0)``, ``mlp``
  ``MLPClassifier(hidden_layer_sizes=(100,), random_state=0, max_iter=2000)``. (CE-OCL min-max
  scales instead; a forest's splits do not care, a network's fit does.)
* factuals: the first ``--rows`` (default 30) test rows the model predicts 0, in the split's order
  (CE-OCL used CARLA's 30 factuals of its own split, so the rows are not the paper's).

Methods (``--methods``, comma separated, default all):

* ``exact``: ``explain(problem, config, engine="exact", seed=0)``, counterplan's default distance
  (``auto`` = MAD-scaled L1, a MAD of 0 counting 1, no change penalty; whole numbers stay whole);
  ``config`` is the default with the exact phase's ``time_limit_seconds`` = ``--exact-seconds``.
* ``exact-tr``: the same with ``trust_region=TrustRegionSettings(max_reference_rows=--hull-rows)``:
  the (enlarged when unreachable) convex hull of the training rows with score 1, CE-OCL_tr's
  region; ``--hull-rows`` defaults to 5,000, so every one of the 3,209 distinct such rows is used
  (CE-OCL takes every desired-class row; the library's default 500 subsamples).
* ``exact-ceocl``, ``exact-ceocl-tr``: the exact engine with a distance close to CE-OCL's
  objective ``sum (x_i - x^_i)^2 + 1e4 * sum z_i`` over min-max scaled one-hot columns:
  ``DistanceSettings(metric="range_l1", change_penalty=100)`` (L1 on range-scaled numbers, +100 per
  changed feature, so fewer changes come first, as with CE-OCL's 1e4), ``c_charge_degree`` at
  cost 2 (CE-OCL's changed category costs two z's and two unit squares), and the four numbers
  continuous (overrides ``kind="float", precision=2``: CE-OCL's variables are continuous in the
  scaled space, so answers such as ``priors_count 10.5`` or ``two_year_recid 0.49`` come back). Among
  answers that change one feature, squared and plain L1 rank alike; they differ only when two or
  more features change. Squared L2 itself is not linear, so the exact engine does not take it.
* ``local``: ``explain(problem, engine="local", seed=0)``, the default distance.
* ``dice-genetic`` (the paper's DiCE), ``dice-random``: dice-ml 0.12 in the separate benchmark
  environment ``.benchvenv`` (``python3 -m venv .benchvenv && .benchvenv/bin/pip install -e
  '.[benchmark]'``), run as a subprocess of this script (``--dice-worker``) that refits the same
  models; ``total_CFs=1``, ``desired_class="opposite"``, ``features_to_vary`` the mutable
  features; numpy's and Python's generators reseeded per call (and ``random_seed=0`` for random).
  The worker's model is checked against this process's (a fingerprint of its test predictions).
  Without ``.benchvenv`` the DiCE rows say "not run".

Metrics, exactly as CE-OCL's ``ce_helpers.evaluation`` defines them for one counterfactual per
factual, averaged over the factuals that got a counterfactual (``n``), on the original features:

* validity: share of the ``--rows`` factuals whose counterfactual this process's model predicts
  class 1 (recomputed here whatever the method claims; a factual without a counterfactual counts
  as not valid). CE-OCL's code gives its own answers validity by fiat; here it is measured;
* cat_prox: ``1 - #categoricals changed / 3``;
* cont_prox: ``-sum over the 4 numbers of |x^ - x|`` in RAW units, no MAD, with s.e.;
* sparsity: ``1 - #features changed / 7`` (immutables in the denominator), with s.e.;
* s.e. = ``sd(ddof=1) / sqrt(n)``;
* time per row: wall seconds per factual, median and 90th percentile (counterplan: building the
  problem, trust region included, and solving; DiCE: ``generate_counterfactuals``);
* proven (exact engine): factuals whose answer the engine proved optimal and verified through the
  model, of those run.

Our objective is not CE-OCL's (see the methods), so proximity and sparsity are judged on CE-OCL's
yardstick, not on what each method minimises. The paper's COMPAS rows are printed alongside:
Table 2 (RF, 1 CF) for ``rf``; for ``mlp`` Table 2 has no row, so Table 3's COMPAS mlp figures
(3 CFs per factual, s.e. not given) are shown, marked as such. The notes' "sound re-encoding"
of CE-OCL (section C: every answer valid, -40.39 / 0.80) is shown under ``rf`` as well.

Results are written to ``benchmarks/.cache/ceocl_table2/`` (git-ignored), one JSON file per model and
method: the proposed rows, seconds and exact statuses; the metrics are always recomputed from the
rows. ``--reuse-cache`` reads a file instead of solving when its key (rows, factuals, model
fingerprint, settings) matches. Run from the repository root::

    .venv/bin/python benchmarks/ceocl_table2.py                 # everything, ~12 min on 2 cores
    .venv/bin/python benchmarks/ceocl_table2.py --quick         # smoke run: 5 factuals
    .venv/bin/python benchmarks/ceocl_table2.py --markdown      # the table also as Markdown
    .venv/bin/python benchmarks/ceocl_table2.py --models rf --methods exact,local --per-instance

Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SEED = 0
TARGET = "score"
NUMERIC = ("age", "two_year_recid", "priors_count", "length_of_stay")
CATEGORICAL = ("c_charge_degree", "race", "sex")
IMMUTABLE = ("age", "race", "sex")
MUTABLE = tuple(c for c in NUMERIC + CATEGORICAL if c not in IMMUTABLE)
CHANGE_PENALTY = 100.0
"""``exact-ceocl``: per changed feature, in range units (a number moves at most 1): sparsity first."""
CEOCL_PRECISION = 2
"""``exact-ceocl``: decimals of the numbers, made continuous as CE-OCL's scaled variables are."""
MLP_MAX_ITER = 2000
HULL_ROWS = 5000
"""Trust region: ``max_reference_rows``, above the 3,209 distinct score-1 training rows, so the hull
is over all of them as CE-OCL's is over all its desired-class rows (the library's default, 500,
subsamples them; it costs about 1 s per factual less)."""
CACHE = REPO / "benchmarks" / ".cache" / "ceocl_table2"
BENCHVENV_PYTHON = REPO / ".benchvenv" / "bin" / "python"

OURS = ("exact", "exact-tr", "exact-ceocl", "exact-ceocl-tr", "local")
DICE = ("dice-genetic", "dice-random")
ALL_METHODS = OURS + DICE
MODELS = ("rf", "mlp")
LABELS = {
    "exact": "counterplan exact (MAD-L1)",
    "exact-tr": "counterplan exact + trust region (MAD-L1)",
    "exact-ceocl": "counterplan exact, CE-OCL-like distance",
    "exact-ceocl-tr": "counterplan exact + trust region, CE-OCL-like distance",
    "local": "counterplan local search (MAD-L1)",
    "dice-genetic": "DiCE genetic",
    "dice-random": "DiCE random",
}

# (label, validity, cat_prox, cont_prox, cont_prox s.e., sparsity, sparsity s.e.); None: not given.
PaperRow = tuple[str, float | None, float | None, float, float | None, float, float | None]
PAPER: dict[str, list[PaperRow]] = {
    "rf": [
        ("paper Table 2: CE-OCL", 1.00, 1.00, -15.23, 5.84, 0.85, 0.01),
        ("paper Table 2: CE-OCL_tr", 1.00, 1.00, -30.83, 16.00, 0.85, None),
        ("paper Table 2: DiCE", 0.74, 0.94, -35.58, None, 0.61, None),
        ("notes C: sound re-encoding of CE-OCL", 1.00, None, -40.39, None, 0.80, None),
    ],
    "mlp": [
        ("paper Table 3 (3 CFs): CE-OCL", 1.00, None, -16.55, None, 0.81, None),
        ("paper Table 3 (3 CFs): CE-OCL_tr", 1.00, None, -27.75, None, 0.82, None),
        ("paper Table 3 (3 CFs): DiCE", 0.82, None, -59.11, None, 0.58, None),
    ],
}


# --------------------------------------------------------------------------------------------
# data and models (also run by the DiCE worker in .benchvenv: numpy, pandas and scikit-learn only)


def default_data_dir() -> Path:
    return REPO.parent / "shared" / "data"


@dataclass
class Setting:
    """The split, a fitted model and its factuals."""

    train: pd.DataFrame
    """Training rows, features and label."""
    test: pd.DataFrame
    features: list[str]
    model: Pipeline
    queries: pd.DataFrame
    """Factuals: test rows predicted 0, features only (index = row in the CSV)."""
    fingerprint: str


def make_model(name: str) -> Pipeline:
    estimator: Any
    if name == "rf":
        estimator = RandomForestClassifier(n_estimators=20, max_depth=4, random_state=SEED)
    elif name == "mlp":
        estimator = MLPClassifier(hidden_layer_sizes=(100,), random_state=SEED, max_iter=MLP_MAX_ITER)
    else:
        raise ValueError(f"unknown model {name!r}")
    encode = ColumnTransformer(
        [
            ("numbers", StandardScaler(), list(NUMERIC)),
            ("categories", OneHotEncoder(sparse_output=False, handle_unknown="ignore"), list(CATEGORICAL)),
        ]
    )
    return Pipeline([("encode", encode), ("model", estimator)])


def load_setting(data_dir: Path, model_name: str, rows: int) -> Setting:
    data = pd.read_csv(data_dir / "compas.csv")
    features = [c for c in data.columns if c != TARGET]
    if sorted(features) != sorted(NUMERIC + CATEGORICAL):
        raise SystemExit(f"compas.csv has columns {features}; expected {NUMERIC + CATEGORICAL}")
    for c in CATEGORICAL:
        data[c] = data[c].astype(str)
    data[TARGET] = data[TARGET].astype(int)
    train, test = train_test_split(data, test_size=0.2, stratify=data[TARGET], random_state=SEED)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = make_model(model_name).fit(train[features], train[TARGET])
    proba = model.predict_proba(test[features])[:, 1]
    fingerprint = hashlib.sha256(np.round(proba, 6).tobytes()).hexdigest()[:16]
    rejected = test[features][model.predict(test[features]) == 0]
    return Setting(train.copy(), test.copy(), features, model, rejected.iloc[:rows].copy(), fingerprint)


# --------------------------------------------------------------------------------------------
# per-row results and CE-OCL's metrics


@dataclass
class RowResult:
    """What one method proposed for one factual."""

    row_id: int
    proposed: dict[str, Any] | None = None
    seconds: float = 0.0
    claimed_valid: bool | None = None
    status: str = ""
    proven: bool = False
    note: str = ""
    error: str | None = None


@dataclass
class Measured:
    row_id: int
    valid: bool
    cat_changed: int
    cont_l1: float
    changed: int
    immutable_changed: int
    changes: list[str] = field(default_factory=list)


def coerce(setting: Setting, proposed: dict[str, Any]) -> pd.DataFrame:
    """One proposed row as a frame in the training columns' order and dtypes."""
    row = pd.DataFrame([{c: proposed[c] for c in setting.features}])
    for c in setting.features:
        row[c] = row[c].astype(str) if c in CATEGORICAL else pd.to_numeric(row[c]).astype(np.float64)
    return row


def measure(setting: Setting, original: pd.Series, proposed: dict[str, Any]) -> Measured:
    row = coerce(setting, proposed)
    valid = int(setting.model.predict(row)[0]) == 1
    after = row.iloc[0]
    cat_changed = cont = changed = immutable = 0
    cont_l1 = 0.0
    changes = []
    for c in setting.features:
        if c in CATEGORICAL:
            moved = str(after[c]) != str(original[c])
            cat_changed += moved
        else:
            delta = abs(float(after[c]) - float(original[c]))
            moved = delta > 1e-9
            cont_l1 += delta
            cont += moved
        if moved:
            changed += 1
            immutable += c in IMMUTABLE
            changes.append(f"{c}: {original[c]} -> {after[c]}")
    return Measured(int(original.name), valid, cat_changed, cont_l1, changed, immutable, changes)


def mean_se(values: Sequence[float]) -> tuple[float, float]:
    if not values:
        return float("nan"), float("nan")
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else float("nan")
    return statistics.fmean(values), se


def percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=np.float64), q)) if values else float("nan")


# --------------------------------------------------------------------------------------------
# counterplan


def ours_problem(setting: Setting, method: str, query: pd.Series, hull_rows: int) -> Any:
    from counterplan.planning import ClassGoal, CounterfactualProblem, DistanceSettings
    from counterplan.planning.trust_region import TrustRegionSettings

    kwargs: dict[str, Any] = {}
    if method.startswith("exact-ceocl"):
        kwargs["distance"] = DistanceSettings(metric="range_l1", change_penalty=CHANGE_PENALTY)
        overrides: dict[str, dict[str, Any]] = {c: {"kind": "float", "precision": CEOCL_PRECISION} for c in NUMERIC}
        overrides["c_charge_degree"] = {"cost": 2.0}
        kwargs["overrides"] = overrides
    if method.endswith("-tr"):
        kwargs["trust_region"] = TrustRegionSettings(max_reference_rows=hull_rows)
    return CounterfactualProblem.from_dataframe(
        setting.train,
        {c: query[c] for c in setting.features},
        setting.model,
        [ClassGoal(target=1)],
        target=TARGET,
        immutable=IMMUTABLE,
        **kwargs,
    )


def exact_solver_config(seconds: float | None) -> Any:
    """The configuration ``engine="exact"`` runs (local search as warm start, then the exact
    phase), with the exact phase's time limit."""
    from counterplan.solver.core.config import SolverConfig
    from counterplan.solver.engines import exact_config
    from counterplan.solver.exact.config import ExactPhaseConfig

    base = exact_config(SolverConfig())
    phases = tuple(
        ExactPhaseConfig(time_limit_seconds=seconds) if isinstance(p, ExactPhaseConfig) else p for p in base.phases
    )
    return base.model_copy(update={"phases": phases})


def run_ours(setting: Setting, method: str, args: argparse.Namespace) -> list[RowResult]:
    from counterplan.solver.counterfactual import explain

    config = exact_solver_config(args.exact_seconds) if method.startswith("exact") else None
    engine = "exact" if method.startswith("exact") else "local"
    results = []
    for row_id, query in setting.queries.iterrows():
        out = RowResult(int(row_id))
        start = time.perf_counter()
        try:
            problem = ours_problem(setting, method, query, args.hull_rows)
            result = explain(problem, config, engine=engine, seed=SEED)
            out.seconds = time.perf_counter() - start
            out.proposed = {k: (v.item() if isinstance(v, np.generic) else v) for k, v in result.proposed.items()}
            out.claimed_valid = bool(result.valid)
            exact = result.statistics.exact
            if exact is not None:
                out.status, out.proven = exact.status, bool(exact.proven and exact.status == "optimal")
                if exact.reason:
                    out.note = exact.reason[:200]
            region = getattr(problem, "trust_region", None)
            if region is not None and getattr(region, "enlarged", False):
                out.note = (out.note + "; " if out.note else "") + f"hull enlarged to slack {region.slack:.3g}"
        except Exception as exc:
            out.seconds = time.perf_counter() - start
            out.error = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
            print(f"warning: {method} row {row_id}: {out.error}", file=sys.stderr)
        results.append(out)
        progress(method, out)
    return results


def progress(method: str, out: RowResult) -> None:
    extra = f" {out.status}{' proven' if out.proven else ''}" if out.status else ""
    print(f"    {method} row {out.row_id}: {out.seconds:.2f}s{extra}", file=sys.stderr)


# --------------------------------------------------------------------------------------------
# DiCE, in .benchvenv


def dice_worker(spec_json: str) -> int:
    """Run inside .benchvenv: DiCE on every factual; writes the rows to ``spec["out"]``."""
    os.environ.setdefault("TQDM_DISABLE", "1")
    spec = json.loads(spec_json)
    warnings.filterwarnings("ignore")
    import dice_ml

    setting = load_setting(Path(spec["data_dir"]), spec["model"], spec["rows"])
    method = spec["method"].removeprefix("dice-")
    data = dice_ml.Data(
        dataframe=setting.train[[*setting.features, TARGET]], continuous_features=list(NUMERIC), outcome_name=TARGET
    )
    explainer = dice_ml.Dice(data, dice_ml.Model(model=setting.model, backend="sklearn"), method=method)
    rows = []
    for row_id in setting.queries.index:
        out = RowResult(int(row_id))
        random.seed(SEED)
        np.random.seed(SEED)  # noqa: NPY002 - DiCE draws from numpy's global generator
        extra = {"random_seed": SEED} if method == "random" else {}
        start = time.perf_counter()
        try:
            res = explainer.generate_counterfactuals(
                setting.queries.loc[[row_id]],
                total_CFs=1,
                desired_class="opposite",
                features_to_vary=list(MUTABLE),
                **extra,
            )
            out.seconds = time.perf_counter() - start
            cf = res.cf_examples_list[0].final_cfs_df
            if cf is None or len(cf) == 0:
                out.error = "DiCE found no counterfactual"
            else:
                first = cf.iloc[0]
                out.proposed = {c: (str(first[c]) if c in CATEGORICAL else float(first[c])) for c in setting.features}
        except Exception as exc:
            out.seconds = time.perf_counter() - start
            out.error = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        rows.append(asdict(out))
        progress(spec["method"], out)
    from importlib.metadata import version

    import sklearn

    versions = {"dice_ml": version("dice-ml")}

    versions["sklearn"] = sklearn.__version__
    Path(spec["out"]).write_text(
        json.dumps({"fingerprint": setting.fingerprint, "versions": versions, "rows": rows}), encoding="utf-8"
    )
    return 0


def run_dice(setting: Setting, model_name: str, method: str, args: argparse.Namespace) -> tuple[list[RowResult], str]:
    """DiCE's rows and a note; no rows when .benchvenv or dice-ml is missing."""
    python = args.benchvenv_python
    if not python.exists():
        return [], f"not run: {python} does not exist"
    CACHE.mkdir(parents=True, exist_ok=True)
    out = CACHE / f"dice-worker-{model_name}-{method}.json"
    out.unlink(missing_ok=True)
    spec = {"data_dir": str(args.data_dir), "model": model_name, "rows": args.rows, "method": method, "out": str(out)}
    done = subprocess.run(
        [str(python), str(Path(__file__).resolve()), "--dice-worker", json.dumps(spec)],
        check=False,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=None,
        text=True,
    )
    if done.returncode != 0 or not out.exists():
        tail = (done.stdout or "").strip().splitlines()[-1:] or [f"exit code {done.returncode}"]
        return [], f"not run: the DiCE worker failed ({tail[0][:200]})"
    payload = json.loads(out.read_text(encoding="utf-8"))
    out.unlink(missing_ok=True)
    note = f"dice_ml {payload['versions']['dice_ml']}, sklearn {payload['versions']['sklearn']} in .benchvenv"
    if payload["fingerprint"] != setting.fingerprint:
        note += "; its refitted model differs from this one (validity is judged by this one)"
    return [RowResult(**r) for r in payload["rows"]], note


# --------------------------------------------------------------------------------------------
# cache, running and the table


def cache_key(setting: Setting, model_name: str, method: str, args: argparse.Namespace) -> dict[str, Any]:
    key: dict[str, Any] = {
        "model": model_name,
        "method": method,
        "rows": [int(i) for i in setting.queries.index],
        "fingerprint": setting.fingerprint,
    }
    if method in OURS:
        key.update(exact_seconds=args.exact_seconds, hull_rows=args.hull_rows)
    return key


def results_for(
    setting: Setting, model_name: str, method: str, args: argparse.Namespace
) -> tuple[list[RowResult], str]:
    key = cache_key(setting, model_name, method, args)
    path = CACHE / f"{model_name}-{method}.json"
    if args.reuse_cache and path.exists():
        cached = json.loads(path.read_text(encoding="utf-8"))
        if cached.get("key") == key:
            print(f"  [{model_name}] {method}: from {path.relative_to(REPO)}", file=sys.stderr)
            return [RowResult(**r) for r in cached["rows"]], cached.get("note", "") + " (cached)"
    print(f"  [{model_name}] {method}:", file=sys.stderr)
    if method in OURS:
        rows, note = run_ours(setting, method, args), ""
    else:
        rows, note = run_dice(setting, model_name, method, args)
    if rows:
        CACHE.mkdir(parents=True, exist_ok=True)
        payload = {"key": key, "note": note, "rows": [asdict(r) for r in rows]}
        path.write_text(json.dumps(payload, indent=1, default=str), encoding="utf-8")
    return rows, note


HEADER = [
    "model",
    "method",
    "validity",
    "cat_prox",
    "cont_prox (s.e.)",
    "sparsity (s.e.)",
    "s/row median (p90)",
    "proven",
]


def summary_row(
    setting: Setting, model_name: str, method: str, rows: list[RowResult], *, note: str, notes: list[str]
) -> list[str]:
    label = LABELS[method]
    if not rows:
        notes.append(f"{model_name} / {label}: {note}")
        return [model_name, label, "not run", "", "", "", "", ""]
    measured: list[Measured] = []
    for r in rows:
        if r.proposed is None:
            continue
        m = measure(setting, setting.queries.loc[r.row_id], r.proposed)
        measured.append(m)
        if r.claimed_valid and not m.valid:
            notes.append(f"{model_name} / {label} row {r.row_id}: says valid, the model predicts 0")
        if m.immutable_changed:
            notes.append(f"{model_name} / {label} row {r.row_id}: changed an immutable feature ({m.changes})")
    failed = [r for r in rows if r.proposed is None]
    for r in failed:
        notes.append(f"{model_name} / {label} row {r.row_id}: no counterfactual ({r.error})")
    for r in rows:
        if r.note:
            notes.append(f"{model_name} / {label} row {r.row_id}: {r.note}")
    if note:
        notes.append(f"{model_name} / {label}: {note}")
    n_features = len(setting.features)
    valid = sum(m.valid for m in measured) / len(rows)
    cat = statistics.fmean(1 - m.cat_changed / len(CATEGORICAL) for m in measured) if measured else float("nan")
    cont, cont_se = mean_se([-m.cont_l1 for m in measured])
    sparse, sparse_se = mean_se([1 - m.changed / n_features for m in measured])
    seconds = [r.seconds for r in rows]
    exact_rows = [r for r in rows if r.status]
    proven = f"{sum(r.proven for r in exact_rows)}/{len(exact_rows)}" if exact_rows else ""
    answered = "" if len(measured) == len(rows) else f" ({len(measured)}/{len(rows)} answered)"
    return [
        model_name,
        label + answered,
        f"{valid:.2f}",
        f"{cat:.2f}",
        f"{cont:.2f} ({cont_se:.2f})",
        f"{sparse:.2f} ({sparse_se:.2f})",
        f"{statistics.median(seconds):.2f} ({percentile(seconds, 90):.2f})",
        proven,
    ]


def paper_rows(model_name: str) -> list[list[str]]:
    def num(value: float | None, se: float | None = None) -> str:
        if value is None:
            return "-"
        return f"{value:.2f}" + (f" ({se:.2f})" if se is not None else "")

    return [
        [model_name, label, num(v), num(c), num(p, pse), num(s, sse), "-", "-"]
        for label, v, c, p, pse, s, sse in PAPER.get(model_name, [])
    ]


def render(header: Sequence[str], rows: Sequence[Sequence[str]], markdown: bool) -> str:
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            str(c).ljust(w) if i < 2 else str(c).rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    return "\n".join([line(header), "  ".join("-" * w for w in widths), *(line(r) for r in rows)])


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=default_data_dir(), help="folder with compas.csv")
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated: rf,mlp")
    parser.add_argument("--methods", default=",".join(ALL_METHODS), help="comma-separated: " + ",".join(ALL_METHODS))
    parser.add_argument("--rows", type=int, default=30, help="factuals per model")
    parser.add_argument(
        "--exact-seconds", type=float, default=30.0, help="time limit of the exact phase per factual (0: none)"
    )
    parser.add_argument(
        "--hull-rows", type=int, default=HULL_ROWS, help="trust region: max_reference_rows (500: the library's default)"
    )
    parser.add_argument("--benchvenv-python", type=Path, default=BENCHVENV_PYTHON, help="python with dice-ml")
    parser.add_argument("--reuse-cache", action="store_true", help="read matching results from the cache")
    parser.add_argument("--quick", action="store_true", help="smoke run: 5 factuals")
    parser.add_argument("--markdown", action="store_true", help="also print the table as Markdown")
    parser.add_argument("--per-instance", action="store_true", help="also print each factual's changes")
    parser.add_argument("--dice-worker", metavar="JSON", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.rows = 5
    args.exact_seconds = args.exact_seconds or None
    args.model_list = [m.strip() for m in args.models.split(",") if m.strip()]
    args.method_list = [m.strip() for m in args.methods.split(",") if m.strip()]
    for m in args.model_list:
        if m not in MODELS:
            parser.error(f"unknown model {m!r}; choose from {', '.join(MODELS)}")
    for m in args.method_list:
        if m not in ALL_METHODS:
            parser.error(f"unknown method {m!r}; choose from {', '.join(ALL_METHODS)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.dice_worker:
        return dice_worker(args.dice_worker)
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    started = time.perf_counter()
    table: list[list[str]] = []
    notes: list[str] = []
    details: list[str] = []
    for model_name in args.model_list:
        setting = load_setting(args.data_dir, model_name, args.rows)
        accuracy = float((setting.model.predict(setting.test[setting.features]) == setting.test[TARGET]).mean())
        rejected = int((setting.model.predict(setting.test[setting.features]) == 0).sum())
        print(
            f"[{model_name}] train {len(setting.train)}, test {len(setting.test)} (accuracy {accuracy:.3f}), "
            f"{rejected} test rows predicted 0, {len(setting.queries)} used",
            file=sys.stderr,
        )
        notes.append(
            f"{model_name}: test accuracy {accuracy:.3f}; {rejected} of {len(setting.test)} test rows predicted 0; "
            f"factuals = the first {len(setting.queries)}"
        )
        for method in args.method_list:
            t0 = time.perf_counter()
            rows, note = results_for(setting, model_name, method, args)
            print(f"  [{model_name}] {method}: {time.perf_counter() - t0:.1f}s", file=sys.stderr)
            table.append(summary_row(setting, model_name, method, rows, note=note, notes=notes))
            for r in rows:
                if r.proposed is None:
                    continue
                m = measure(setting, setting.queries.loc[r.row_id], r.proposed)
                details.append(
                    f"{model_name:3} {method:14} row {r.row_id:5} valid={m.valid!s:5} {r.seconds:6.2f}s "
                    f"{r.status:9} [{'; '.join(m.changes)}]"
                )
        table.extend(paper_rows(model_name))
    limit = f"{args.exact_seconds:g} s" if args.exact_seconds else "none"
    print(
        f"\nCOMPAS, {args.rows} factuals per model, one counterfactual each; exact phase time limit {limit}; "
        f"trust region max_reference_rows {args.hull_rows}\n"
    )
    print(render(HEADER, table, markdown=False))
    if args.markdown:
        print()
        print(render(HEADER, table, markdown=True))
    if notes:
        print("\nnotes:")
        for n in notes:
            print(f"- {n}")
    if args.per_instance:
        print("\nper instance:")
        print("\n".join(details))
    print(f"\ntotal {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
