"""Quality metrics of counterfactuals, usable on any method's output (counterplan, DiCE, ...).

Everything works on plain DataFrames: the original row, the counterfactual rows, the training
data, and a ``predict`` function, so another method's answers are judged exactly like ours.
Which formula each follows:

==========================  ==================================================================
metric                      definition (source)
==========================  ==================================================================
validity                    share of counterfactuals predicted as the target class, with the
                            confidence when one is asked (DiCE ``validity``)
proximity_continuous        mean over counterfactuals of sum_j |x_j - x'_j| / MAD_j over the
                            numeric features, MAD 0 counting as 1 (DiCE, Wachter et al.)
proximity_categorical       mean share of categorical features changed (DiCE)
sparsity                    mean share of features left unchanged (DiCE); ``changed_features``
                            is the mean count of changed features
l0, l1, l2, linf            CARLA's d1..d4 on min-max scaled features, categories 0/1:
                            changed count, sum |d|, sum d^2, max |d|
redundancy                  mean number of changes that could each be reverted alone with the
                            counterfactual still valid (CARLA)
knn_distance                mean distance (scaled L1) to the k nearest training rows of the
                            target class (CARLA's yNN neighbourhood, as a distance)
ynn                         share of the k nearest training rows (any class) labelled as the
                            target class (CARLA ``yNN``)
immutable_violations        count of immutable features changed, over all counterfactuals
monotone_violations         count of monotone rules broken, over all counterfactuals
diversity                   mean pairwise distance between counterfactuals: MAD-scaled L1 on
                            numbers plus categorical mismatches (DiCE ``diversity``)
count_diversity             mean over pairs of the share of features that differ (DiCE)
seconds                     the time the method took, as given
==========================  ==================================================================
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from sklearn.neighbors import NearestNeighbors

from counterplan.planning.spec import name_list

Predict = Callable[[pd.DataFrame], np.ndarray]
"""Class probabilities (n, n_classes) for a DataFrame of feature rows."""


@dataclass
class MetricContext:
    """What the metrics need to know about the data and the model."""

    train: pd.DataFrame
    """Training features (and ``label`` when given) for statistics and neighbours."""
    features: list[str]
    categorical: list[str]
    predict_proba: Predict
    classes: Sequence[Any]
    target_class: Any
    confidence: float | None = None
    immutable: Sequence[str] = ()
    monotone: Mapping[str, str] = field(default_factory=dict)
    label: str | None = None
    k: int = 5

    def __post_init__(self) -> None:
        numeric = [f for f in self.features if f not in self.categorical]
        values = self.train[numeric].astype(float)
        mad = (values - values.median()).abs().median()
        self.numeric = numeric
        self.mad = mad.where(mad > 0, 1.0).to_numpy()
        self.low = values.min().to_numpy()
        span = (values.max() - values.min()).to_numpy()
        self.span = np.where(span > 0, span, 1.0)
        self.index = (
            list(self.classes).index(self.target_class)
            if self.target_class in self.classes
            else next(i for i, c in enumerate(self.classes) if str(c) == str(self.target_class))
        )


def _valid(context: MetricContext, rows: pd.DataFrame) -> np.ndarray:
    if rows.empty:
        return np.zeros(0, dtype=bool)
    proba = np.asarray(context.predict_proba(rows[context.features]), dtype=float)
    valid = proba.argmax(axis=1) == context.index
    if context.confidence is not None:
        valid &= proba[:, context.index] >= context.confidence
    return np.asarray(valid, dtype=bool)


def _scaled_numeric(context: MetricContext, rows: pd.DataFrame) -> np.ndarray:
    return np.asarray((rows[context.numeric].astype(float).to_numpy() - context.low) / context.span, dtype=float)


def _differs(a: pd.DataFrame, b: pd.DataFrame, columns: list[str]) -> np.ndarray:
    if not columns:
        return np.zeros((len(a), 0), dtype=bool)
    return np.asarray(a[columns].astype(str).to_numpy() != b[columns].astype(str).to_numpy(), dtype=bool)


def answer_distances(context: MetricContext, original: Mapping[str, Any], counterfactuals: pd.DataFrame) -> np.ndarray:
    """Each counterfactual's DiCE distance from the original: MAD-scaled L1 on numbers plus categories changed.

    The distance ``diversity`` uses between two counterfactuals, here against the original; it
    orders one method's answers from closest to farthest, e.g. to compare the closest ``n`` of
    two methods that returned different numbers of answers.
    """
    cfs = counterfactuals[context.features].reset_index(drop=True)
    if cfs.empty:
        return np.zeros(0)
    base = pd.DataFrame([{f: original[f] for f in context.features}] * len(cfs))[context.features]
    num_delta = cfs[context.numeric].astype(float).to_numpy() - base[context.numeric].astype(float).to_numpy()
    numeric = (np.abs(num_delta) / context.mad).sum(axis=1)
    return np.asarray(numeric + _differs(cfs, base, context.categorical).sum(axis=1), dtype=float)


def evaluate(
    context: MetricContext, original: Mapping[str, Any], counterfactuals: pd.DataFrame, seconds: float | None = None
) -> dict[str, float]:
    """Every metric for one original row and its counterfactuals (NaN where none exist)."""
    cfs = counterfactuals[context.features].reset_index(drop=True)
    n = len(cfs)
    base = pd.DataFrame([{f: original[f] for f in context.features}] * max(n, 1))[context.features]
    nan = float("nan")
    out: dict[str, float] = {"count": float(n), "seconds": float(seconds) if seconds is not None else nan}
    if n == 0:
        return out | dict.fromkeys(
            [
                "validity",
                "proximity_continuous",
                "proximity_categorical",
                "sparsity",
                "changed_features",
                "l0",
                "l1",
                "l2",
                "linf",
                "redundancy",
                "knn_distance",
                "ynn",
                "immutable_violations",
                "monotone_violations",
                "diversity",
                "count_diversity",
            ],
            nan,
        )
    base = base.iloc[:n].reset_index(drop=True)
    valid = _valid(context, cfs)
    num_delta = cfs[context.numeric].astype(float).to_numpy() - base[context.numeric].astype(float).to_numpy()
    cat_changed = _differs(cfs, base, context.categorical)
    changed = np.hstack([num_delta != 0, cat_changed])
    scaled = np.hstack([np.abs(num_delta) / context.span, cat_changed.astype(float)])
    out["validity"] = float(valid.mean())
    out["proximity_continuous"] = float((np.abs(num_delta) / context.mad).sum(axis=1).mean())
    out["proximity_categorical"] = float(cat_changed.mean()) if context.categorical else 0.0
    out["changed_features"] = float(changed.sum(axis=1).mean())
    out["sparsity"] = float(1.0 - changed.mean())
    out["l0"] = float(changed.sum(axis=1).mean())
    out["l1"] = float(scaled.sum(axis=1).mean())
    out["l2"] = float((scaled**2).sum(axis=1).mean())
    out["linf"] = float(scaled.max(axis=1).mean())
    out["redundancy"] = _redundancy(context, cfs, base, changed)
    out["knn_distance"], out["ynn"] = _neighbours(context, cfs)
    immutable = [f for f in name_list(context.immutable) if f in context.features]
    out["immutable_violations"] = float(_differs(cfs, base, immutable).sum())
    out["monotone_violations"] = float(_monotone_broken(context, cfs, base))
    out["diversity"], out["count_diversity"] = _diversity(context, cfs)
    return out


def _redundancy(context: MetricContext, cfs: pd.DataFrame, base: pd.DataFrame, changed: np.ndarray) -> float:
    columns = context.numeric + context.categorical
    trials = []
    owners = []
    for i, j in zip(*np.nonzero(changed), strict=True):
        row = cfs.iloc[[i]].copy()
        row[columns[j]] = base.iloc[i][columns[j]]
        trials.append(row)
        owners.append(i)
    if not trials:
        return 0.0
    still = _valid(context, pd.concat(trials, ignore_index=True))
    counts = np.bincount(np.asarray(owners)[still], minlength=len(cfs))
    return float(counts.mean())


def _neighbours(context: MetricContext, cfs: pd.DataFrame) -> tuple[float, float]:
    def embed(rows: pd.DataFrame, categories: Mapping[str, list[str]]) -> np.ndarray:
        blocks = [_scaled_numeric(context, rows)]
        for column in context.categorical:
            values = rows[column].astype(str).to_numpy()
            blocks.append(np.stack([(values == c) * 0.5 for c in categories[column]], axis=1).astype(float))
        return np.hstack(blocks)

    train = context.train
    categories = {c: sorted(train[c].astype(str).unique()) for c in context.categorical}
    points = embed(cfs, categories)
    k = min(context.k, len(train))
    distance = float("nan")
    ynn = float("nan")
    if context.label is not None and context.label in train.columns:
        labels = train[context.label].astype(str).to_numpy()
        target = labels == str(context.target_class)
        if target.sum() >= k:
            index = NearestNeighbors(n_neighbors=k, metric="manhattan").fit(embed(train[target], categories))
            distance = float(index.kneighbors(points)[0].mean())
        index = NearestNeighbors(n_neighbors=k, metric="manhattan").fit(embed(train, categories))
        neighbours = index.kneighbors(points, return_distance=False)
        ynn = float(target[neighbours].mean())
    return distance, ynn


def _monotone_broken(context: MetricContext, cfs: pd.DataFrame, base: pd.DataFrame) -> int:
    broken = 0
    for name, direction in context.monotone.items():
        if name not in context.numeric:
            continue
        delta = cfs[name].astype(float).to_numpy() - base[name].astype(float).to_numpy()
        broken += int(((delta < 0) if direction == "increase" else (delta > 0)).sum())
    return broken


def _diversity(context: MetricContext, cfs: pd.DataFrame) -> tuple[float, float]:
    if len(cfs) < 2:
        return float("nan"), float("nan")
    numbers = cfs[context.numeric].astype(float).to_numpy() / context.mad
    texts = cfs[context.categorical].astype(str).to_numpy()
    distances = []
    counts = []
    for a, b in itertools.combinations(range(len(cfs)), 2):
        cat = (texts[a] != texts[b]) if context.categorical else np.zeros(0, dtype=bool)
        distances.append(float(np.abs(numbers[a] - numbers[b]).sum() + cat.sum()))
        num_diff = cfs[context.numeric].iloc[a].to_numpy() != cfs[context.numeric].iloc[b].to_numpy()
        counts.append(float((num_diff.sum() + cat.sum()) / len(context.features)))
    return float(np.mean(distances)), float(np.mean(counts))
