"""The scorecards of the optbinning-Counterfactual benchmark, built the same way for both sides.

Navas-Palencia, "Optimal Counterfactual Explanations for Scorecard modelling" (optbinning's
``optbinning.scorecard.Counterfactual``) is run by ``benchmarks/optbinning_reference.py``; counterplan's
scorecard counterfactuals are run against the very same fitted objects. Both load them from here.

Importing this module does nothing (no data read, no fit). ``build_scorecard(dataset)`` returns
``(scorecard, X_train, y_train, X_test, y_test)`` and keeps the fitted result in
``benchmarks/.cache/scorecard-<dataset>.joblib`` (gitignored), so every later caller, in any
process, gets exactly the same object. The cache is rebuilt when the recipe tag, the data file or
the optbinning / scikit-learn versions change.

Data: CARLA's ``heloc.csv`` / ``adult.csv`` from ``data_dir`` (default ``shared/data`` next to the
repository root, never copied into the repository), split with
``train_test_split(test_size=0.25, random_state=0)``. Class 1 is the wanted outcome in both
(heloc ``RiskPerformance`` 1 = good, so the paper's PD is ``1 - predict_proba[:, 1]``; adult
``income`` 1 = >50K). A query is "rejected" when ``predict_proba[:, 1] < 0.5``.

* ``heloc`` (the paper's FICO setting): CARLA's heloc has 21 of FICO's 23 features (no
  MaxDelq2PublicRecLast12M / MaxDelqEver) and had its missing values (FICO's special codes)
  imputed with per-class means, which leaks the label; those values (a column's 1-3 distinct
  non-whole values) are set back to NaN, so optbinning puts them in the Missing bin as the paper's
  scorecard put the special codes in their own bins. The 12 features are selected as the paper's
  scorecard selected them, by optbinning: a first ``BinningProcess`` over all 21 with
  ``selection_criteria={"iv": {"strategy": "highest", "top": 12}}``; the scorecard is then
  fitted on those 12 only (univariate binning, so the bins are the same), and the returned frames
  hold just those 12 columns (``Scorecard.predict_proba`` needs every column its binning process
  was given). ``LogisticRegression(max_iter=1000)``.
* ``adult``: the paper's 8 DiCE features exist in CARLA's form, but binarised: ``workclass``
  (Private / Non-Private), ``marital-status`` (Married / Non-Married), ``occupation``
  (Managerial-Specialist / Other), ``race`` (White / Non-White), ``sex`` are 2-category strings
  (``categorical_variables``), and education is the numeric ``education-num`` (1-16) instead of
  the ``education`` categories; ``age`` and ``hours-per-week`` are integers.
  ``LogisticRegression(class_weight="balanced", max_iter=1000)`` as in optbinning's counterfactual
  tutorial, which the paper's adult probabilities (just above 0.5) match.

Both: ``Scorecard(BinningProcess(features, ...), estimator, scaling_method="min_max",
scaling_method_params={"min": 300, "max": 850})``; binning with optbinning's defaults.

``paper_query(dataset)``: the paper's single query, found in the data: heloc CSV row 7 (FICO's
PercentTradesNeverDelq 83, MSinceMostRecentInqexcl7days 0, NumBank2NatlTradesWHighUtilization 2,
NetFractionRevolvingBurden 28, AverageMInFile 65 of the paper's Tables 2-3; it falls in the
training part); adult CSV row 1885, the DiCE query (age 22, Private, HS-grad = education-num 9,
Non-Married, occupation Other (DiCE's "Service"), White, Female, 45 hours).

``paper_objective`` computes the paper's two objective terms for any counterfactual row, from the
scorecard and the training data only (not from optbinning's counterfactual internals).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

SEED = 0
TEST_SIZE = 0.25
POINTS = {"min": 300, "max": 850}
RECIPE = "scorecards-v1"
"""Bump when the recipe below changes: cached scorecards with another tag are rebuilt."""

DEFAULT_DATA_DIR = Path(__file__).resolve().parents[2] / "shared" / "data"
CACHE_DIR = Path(__file__).resolve().parent / ".cache"
MAX_ARTIFACTS = 3
"""A numeric column with 1 to this many distinct non-whole values had them imputed (CARLA)."""


@dataclass(frozen=True)
class ScorecardSpec:
    """How one benchmark scorecard is built."""

    name: str
    file: str
    target: str
    features: tuple[str, ...] | None
    """Candidate features, in this order; None = every column but the target."""
    categorical: tuple[str, ...]
    top_iv: int | None
    """Keep the top this many features by information value (optbinning's selection)."""
    class_weight: str | None
    blank_imputed: bool
    paper_row: int
    """Label (CSV row number) of the paper's query."""
    paper_non_actionable: tuple[str, ...] = ()
    """The paper's "NA" setting (Table 9, F + NA): features held fixed."""


SPECS: dict[str, ScorecardSpec] = {
    "heloc": ScorecardSpec(
        name="heloc",
        file="heloc.csv",
        target="RiskPerformance",
        features=None,
        categorical=(),
        top_iv=12,
        class_weight=None,
        blank_imputed=True,
        paper_row=7,
    ),
    "adult": ScorecardSpec(
        name="adult",
        file="adult.csv",
        target="income",
        features=(
            "age",
            "workclass",
            "education-num",
            "marital-status",
            "occupation",
            "race",
            "sex",
            "hours-per-week",
        ),
        categorical=("workclass", "marital-status", "occupation", "race", "sex"),
        top_iv=None,
        class_weight="balanced",
        blank_imputed=False,
        paper_row=1885,
        paper_non_actionable=("sex", "race"),
    ),
}
DATASETS = tuple(SPECS)


# --------------------------------------------------------------------------------------------
# data and scorecards


def _spec(dataset: str) -> ScorecardSpec:
    try:
        return SPECS[dataset]
    except KeyError:
        raise ValueError(f"unknown data set {dataset!r}; known: {', '.join(SPECS)}") from None


def _data_file(dataset: str, data_dir: Path | str | None) -> Path:
    return Path(data_dir if data_dir is not None else DEFAULT_DATA_DIR) / _spec(dataset).file


def blank_imputed(frame: pd.DataFrame) -> dict[str, int]:
    """Set each numeric column's imputed values (1-3 distinct non-whole values) to NaN, in place."""
    blanked = {}
    for c in frame.columns:
        if not pd.api.types.is_numeric_dtype(frame[c]):
            continue
        values = frame[c].dropna().unique()
        fractional = values[values != np.round(values)]
        if 1 <= len(fractional) <= MAX_ARTIFACTS:
            mask = frame[c].isin(fractional)
            frame.loc[mask, c] = np.nan
            blanked[c] = int(mask.sum())
    return blanked


def load_data(dataset: str, data_dir: Path | str | None = None) -> tuple[pd.DataFrame, pd.Series]:
    """The data set's candidate features and its 0/1 target, with the recipe's cleaning applied."""
    spec = _spec(dataset)
    data = pd.read_csv(_data_file(dataset, data_dir))
    y = data.pop(spec.target).astype(int)
    X = data[list(spec.features)] if spec.features is not None else data
    X = X.copy()
    if spec.blank_imputed:
        blank_imputed(X)
    return X, y


def _fit(dataset: str, data_dir: Path | str | None) -> tuple[Any, pd.DataFrame, pd.Series, pd.DataFrame, pd.Series]:
    from optbinning import BinningProcess, Scorecard
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split

    spec = _spec(dataset)
    X, y = load_data(dataset, data_dir)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=TEST_SIZE, random_state=SEED)
    categorical = [c for c in spec.categorical if c in X.columns]
    features = list(X.columns)
    if spec.top_iv is not None and spec.top_iv < len(features):
        selector = BinningProcess(
            features,
            categorical_variables=categorical or None,
            selection_criteria={"iv": {"strategy": "highest", "top": spec.top_iv}},
        )
        selector.fit(X_train, y_train)
        chosen = set(selector.get_support(names=True))
        features = [c for c in features if c in chosen]
        categorical = [c for c in categorical if c in chosen]
    X_train, X_test = X_train[features].copy(), X_test[features].copy()
    scorecard = Scorecard(
        binning_process=BinningProcess(features, categorical_variables=categorical or None),
        estimator=LogisticRegression(class_weight=spec.class_weight, max_iter=1000),
        scaling_method="min_max",
        scaling_method_params=dict(POINTS),
    )
    scorecard.fit(X_train, y_train)
    return scorecard, X_train, y_train, X_test, y_test


def cache_path(dataset: str) -> Path:
    """Where ``build_scorecard`` keeps the data set's fitted scorecard and split."""
    return CACHE_DIR / f"scorecard-{_spec(dataset).name}.joblib"


def _fingerprint(dataset: str, data_dir: Path | str | None) -> dict[str, str]:
    import optbinning
    import sklearn

    digest = hashlib.sha256(_data_file(dataset, data_dir).read_bytes()).hexdigest()
    return {
        "recipe": RECIPE,
        "dataset": dataset,
        "data_sha256": digest,
        "optbinning": optbinning.__version__,
        "sklearn": sklearn.__version__,
    }


def build_scorecard(
    dataset: str, *, data_dir: Path | str | None = None, use_cache: bool = True, refresh: bool = False
) -> tuple[Any, pd.DataFrame, pd.Series, pd.DataFrame, pd.Series]:
    """``(scorecard, X_train, y_train, X_test, y_test)`` for "heloc" or "adult", deterministic.

    With ``use_cache`` (default) the result is loaded from ``cache_path(dataset)`` when that file
    was built by the same recipe, data and library versions, and written there otherwise
    (``refresh`` forces a rebuild). The frames hold exactly the scorecard's features; their index
    is the CSV row number.
    """
    import joblib

    _spec(dataset)
    path = cache_path(dataset)
    fingerprint = _fingerprint(dataset, data_dir)
    if use_cache and not refresh and path.exists():
        stored = joblib.load(path)
        if stored.get("meta") == fingerprint:
            return stored["scorecard"], stored["X_train"], stored["y_train"], stored["X_test"], stored["y_test"]
    built = _fit(dataset, data_dir)
    if use_cache:
        path.parent.mkdir(parents=True, exist_ok=True)
        payload = dict(zip(("scorecard", "X_train", "y_train", "X_test", "y_test"), built, strict=True))
        payload["meta"] = fingerprint
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        os.close(fd)
        try:
            joblib.dump(payload, tmp)
            os.chmod(tmp, 0o644)  # mkstemp makes it private
            os.replace(tmp, path)  # atomic: a concurrent reader sees the old or the new file
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return built


def scorecard_features(scorecard: Any) -> list[str]:
    """The scorecard's features, in its order (the order of optbinning's problem data)."""
    return [str(v) for v in scorecard.binning_process_.get_support(names=True)]


def rejected(scorecard: Any, X: pd.DataFrame) -> np.ndarray:
    """Rows the scorecard rejects: probability of the wanted class 1 below 0.5."""
    return np.asarray(scorecard.predict_proba(X)[:, 1] < 0.5)


def query_rows(dataset: str, n: int, *, data_dir: Path | str | None = None) -> list[int]:
    """The first ``n`` test rows (split order) the scorecard rejects and that have no missing value.

    Returned as labels of ``X_test``'s index (CSV row numbers): ``X_test.loc[labels]``.
    Rows with a missing value in a scorecard feature are skipped, so both sides start from plain
    numbers (optbinning never moves a feature into the Missing bin, but could move one out).
    """
    scorecard, _, _, X_test, _ = build_scorecard(dataset, data_dir=data_dir)
    mask = rejected(scorecard, X_test) & X_test.notna().all(axis=1).to_numpy()
    return [int(i) for i in X_test.index[mask][:n]]


def paper_query(dataset: str, *, data_dir: Path | str | None = None) -> pd.DataFrame:
    """The paper's single query as a one-row frame of the scorecard's features (see the module doc)."""
    spec = _spec(dataset)
    scorecard, X_train, _, X_test, _ = build_scorecard(dataset, data_dir=data_dir)
    for frame in (X_train, X_test):
        if spec.paper_row in frame.index:
            return frame.loc[[spec.paper_row], scorecard_features(scorecard)].copy()
    raise KeyError(spec.paper_row)


# --------------------------------------------------------------------------------------------
# the paper's objective terms


@dataclass(frozen=True)
class ObjectiveData:
    """What ``paper_objective`` needs from the scorecard and the training data, computed once."""

    features: list[str]
    intercept: float
    coef: np.ndarray
    weights: np.ndarray
    """w_i = 1 / (max_j P_ij - min_j P_ij), P_ij = coef_i * WoE_ij over every row of feature i's table."""
    chol: np.ndarray
    """F = chol(inv(Sigma)), lower-triangular; Sigma the covariance of the WoE-transformed training data."""
    mean: np.ndarray
    """mu, the mean of the WoE-transformed training data."""


def objective_data(scorecard: Any, X_train: pd.DataFrame) -> ObjectiveData:
    """The paper's proximity weights and closeness metric (Section 2; notes-mip.md B1).

    The points P_ij are the unscaled ones, coefficient times WoE, and their range is taken over
    every row of the feature's detailed table, Special and Missing bins included: as optbinning
    does, so the values match its reported objectives (a scaled points table would multiply every
    w_i by the same constant). Covariance with ``np.cov`` (ddof 1), as optbinning.
    """
    features = scorecard_features(scorecard)
    table = scorecard.table(style="detailed")
    estimator = scorecard.estimator_
    coef = np.asarray(estimator.coef_, dtype=float).ravel()
    intercept = float(np.ravel(estimator.intercept_)[0])
    weights = np.empty(len(features))
    for i, v in enumerate(features):
        points = coef[i] * table.loc[table["Variable"] == v, "WoE"].to_numpy(dtype=float)
        weights[i] = 1.0 / (points.max() - points.min())
    woe = scorecard.binning_process_.transform(X_train[features], metric="woe").to_numpy(dtype=float)
    chol = np.linalg.cholesky(np.linalg.inv(np.cov(woe.T)))
    return ObjectiveData(features, intercept, coef, weights, chol, woe.mean(axis=0))


def as_frame(row: pd.DataFrame | pd.Series | Mapping[str, Any], features: list[str]) -> pd.DataFrame:
    """A one-row DataFrame of ``features`` from a frame, a Series or a dict."""
    if isinstance(row, pd.DataFrame):
        frame = row
    elif isinstance(row, pd.Series):
        frame = row.to_frame().T
    else:
        frame = pd.DataFrame([dict(row)])
    if len(frame) != 1:
        raise ValueError(f"expected one row, got {len(frame)}")
    frame = frame[features].reset_index(drop=True)
    return frame.infer_objects()


def paper_objective(
    scorecard: Any,
    X_train: pd.DataFrame,
    original_row: pd.DataFrame | pd.Series | Mapping[str, Any],
    cf_row: pd.DataFrame | pd.Series | Mapping[str, Any],
    *,
    data: ObjectiveData | None = None,
) -> dict[str, Any]:
    """The paper's objective terms for one counterfactual row (real feature values, not bins).

    * ``proximity`` = sum_i w_i |WoE'_i - WoE_i|, w_i as in ``objective_data``;
    * ``closeness`` = || F^T (WoE' - mu) ||_1 (L1-Mahalanobis to the training mean);
    * ``closeness_original``: the same for the original row;
    * ``changed``: features whose bin differs (optbinning only counts bins of a different WoE; a
      move between two bins of equal WoE is listed in ``changed`` but costs nothing);
    * ``score``: the model's log-odds of class 1, ``probability``: ``scorecard.predict_proba[:, 1]``
      of the row itself.

    Pass ``data=objective_data(scorecard, X_train)`` when calling this many times.
    """
    if data is None:
        data = objective_data(scorecard, X_train)
    features = data.features
    original = as_frame(original_row, features)
    cf = as_frame(cf_row, features)
    binning = scorecard.binning_process_
    woe = binning.transform(pd.concat([original, cf], ignore_index=True), metric="woe").to_numpy(dtype=float)
    bins = binning.transform(pd.concat([original, cf], ignore_index=True), metric="indices").to_numpy()
    w0, w1 = woe[0], woe[1]
    proximity = float(np.sum(data.weights * np.abs(w1 - w0)))
    closeness = float(np.abs(data.chol.T @ (w1 - data.mean)).sum())
    closeness_original = float(np.abs(data.chol.T @ (w0 - data.mean)).sum())
    changed = [f for f, a, b in zip(features, bins[0], bins[1], strict=True) if a != b]
    score = float(data.intercept + data.coef @ w1)
    probability = float(scorecard.predict_proba(cf)[0, 1])
    return {
        "proximity": proximity,
        "closeness": closeness,
        "closeness_original": closeness_original,
        "changed": changed,
        "n_changed": len(changed),
        "n_changed_woe": int(np.count_nonzero(w1 != w0)),
        "score": score,
        "probability": probability,
    }
