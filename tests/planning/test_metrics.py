"""Counterfactual quality metrics, computed by hand on a tiny data set."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from counterplan.planning.metrics import MetricContext, evaluate


def _approve(frame: pd.DataFrame) -> np.ndarray:
    """Approve when income + 10 * (plan == gold) >= 10."""
    score = frame["income"].astype(float) + 10.0 * (frame["plan"] == "gold")
    p = (score >= 10).astype(float).to_numpy()
    return np.column_stack([1 - p, p])


TRAIN = pd.DataFrame(
    {
        "income": [0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0],  # median 7, MAD 4
        "age": [20, 30, 40, 50, 60, 70, 80, 90],
        "plan": ["basic", "basic", "gold", "basic", "gold", "basic", "basic", "gold"],
        "y": [0, 0, 1, 0, 1, 1, 1, 1],
    }
)


def _context(**kwargs: object) -> MetricContext:
    return MetricContext(
        train=TRAIN,
        features=["income", "age", "plan"],
        categorical=["plan"],
        predict_proba=_approve,
        classes=[0, 1],
        target_class=1,
        immutable=["age"],
        label="y",
        k=2,
        **kwargs,  # type: ignore[arg-type]
    )


def test_metrics_by_hand() -> None:
    original = {"income": 2.0, "age": 30, "plan": "basic"}
    cfs = pd.DataFrame(
        [
            {"income": 10.0, "age": 30, "plan": "basic"},  # valid: income +8
            {"income": 2.0, "age": 31, "plan": "gold"},  # valid: gold, age broken (immutable)
            {"income": 6.0, "age": 30, "plan": "basic"},  # not valid
        ]
    )
    m = evaluate(_context(monotone={"income": "increase"}), original, cfs, seconds=0.5)
    assert m["validity"] == pytest.approx(2 / 3)
    mad_income, mad_age = 4.0, 20.0  # age: median 55, |x - 55| median 20
    assert m["proximity_continuous"] == pytest.approx((8 / mad_income + (1 / mad_age) + 4 / mad_income) / 3)
    assert m["proximity_categorical"] == pytest.approx(1 / 3)
    assert m["changed_features"] == pytest.approx((1 + 2 + 1) / 3)
    assert m["sparsity"] == pytest.approx(1 - 4 / 9)
    span_income, span_age = 14.0, 70.0
    assert m["l1"] == pytest.approx((8 / span_income + (1 / span_age + 1) + 4 / span_income) / 3)
    assert m["linf"] == pytest.approx((8 / span_income + 1 + 4 / span_income) / 3)
    assert m["immutable_violations"] == 1.0 and m["monotone_violations"] == 0.0
    # the second answer's age change can be reverted and it stays valid: redundancy 1 of 3 rows
    assert m["redundancy"] == pytest.approx(1 / 3)
    assert m["seconds"] == 0.5 and m["count"] == 3
    assert 0.0 <= m["ynn"] <= 1.0 and m["knn_distance"] >= 0.0
    assert m["diversity"] > 0 and 0 < m["count_diversity"] <= 1


def test_diversity_of_two_by_hand_and_empty_answers() -> None:
    original = {"income": 2.0, "age": 30, "plan": "basic"}
    cfs = pd.DataFrame([{"income": 10.0, "age": 30, "plan": "basic"}, {"income": 2.0, "age": 30, "plan": "gold"}])
    m = evaluate(_context(), original, cfs)
    assert m["diversity"] == pytest.approx(8 / 4 + 1)  # income differs by 8 (MAD 4), plan differs
    assert m["count_diversity"] == pytest.approx(2 / 3)
    empty = evaluate(_context(), original, cfs.iloc[:0])
    assert empty["count"] == 0 and math.isnan(empty["validity"])
