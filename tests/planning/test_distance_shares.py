"""Each feature's share of the distance (planning.distance.feature_costs / FeaturePricer): the one
pricing the calculator sums and local search's trades and steps read."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from counterplan.planning.distance import SUMMED_METRICS, FeaturePricer, feature_costs, feature_distance

N = 5


@st.composite
def _case(draw: st.DrawFn) -> dict[str, object]:
    floats = st.floats(-1e4, 1e4, allow_nan=False, allow_infinity=False)
    original = np.array(draw(st.lists(floats, min_size=N, max_size=N)))
    rows = draw(st.integers(1, 4))
    X = np.array(draw(st.lists(st.lists(floats, min_size=N, max_size=N), min_size=rows, max_size=rows)))
    keep = np.array(draw(st.lists(st.booleans(), min_size=rows * N, max_size=rows * N))).reshape(rows, N)
    X = np.where(keep, original, X)  # some features unchanged
    return {
        "X": X,
        "original": original,
        "nominal": np.array(draw(st.lists(st.booleans(), min_size=N, max_size=N))),
        "scales": np.array(draw(st.lists(st.floats(0.01, 1e3), min_size=N, max_size=N))),
        "costs": np.array(draw(st.lists(st.floats(0.0, 10.0), min_size=N, max_size=N))),
        "metric": draw(st.sampled_from(SUMMED_METRICS)),
        "penalty": draw(st.sampled_from([0.0, 0.5, 3.0])),
    }


@settings(max_examples=200, deadline=None)
@given(_case())
def test_the_shares_sum_to_the_distance_and_the_pricer_prices_each_as_the_calculator(case: dict[str, object]) -> None:
    X, original, nominal, scales, costs = (np.asarray(case[k]) for k in ("X", "original", "nominal", "scales", "costs"))
    metric, penalty = case["metric"], float(case["penalty"])  # type: ignore[arg-type]
    shares = feature_costs(X, original, nominal, scales, metric, costs=costs, change_penalty=penalty)  # type: ignore[arg-type]
    whole = feature_distance(X, original, nominal, scales, metric, costs=costs, change_penalty=penalty)  # type: ignore[arg-type]
    assert shares.shape == X.shape and (shares >= 0).all()
    np.testing.assert_allclose(shares.sum(axis=1), whole, rtol=1e-12, atol=1e-9)
    pricer = FeaturePricer(original, nominal, scales, metric, costs=costs, change_penalty=penalty)  # type: ignore[arg-type]
    rows, columns = np.nonzero(np.ones(X.shape, dtype=bool))
    np.testing.assert_allclose(pricer.cost(X[rows, columns], columns), shares[rows, columns], rtol=1e-12, atol=1e-12)
    # a row's distance is its features' prices, one at a time
    for i in range(X.shape[0]):
        priced = pricer.cost(X[i], np.arange(N)).sum()
        assert priced == pytest.approx(whole[i], rel=1e-12, abs=1e-9)


def test_the_pricer_knows_units_and_refuses_a_metric_that_is_no_sum() -> None:
    pricer = FeaturePricer(
        np.zeros(2), np.array([False, False]), np.array([4.0, 1.0]), "mad_l1", costs=np.array([2.0, 0.0])
    )
    np.testing.assert_allclose(pricer.unit(np.array([0, 1])), [2.0, 1.0])  # 4 / cost 2; a free feature: its scale
    np.testing.assert_allclose(pricer.cost(np.array([2.0]), np.array([0])), [1.0])  # |2| / 4 * 2
    with pytest.raises(ValueError, match="scorecard"):
        FeaturePricer(np.zeros(1), np.array([False]), np.ones(1), "scorecard")
