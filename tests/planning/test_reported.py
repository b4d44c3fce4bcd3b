"""The rows a report stands for (:meth:`FeatureSpace.as_reported`): ``encode(decode(row))`` of
every row of a matrix at once, the same floats the features give one value at a time."""

from __future__ import annotations

import numpy as np
import pytest

from counterplan.planning import BooleanFeature, CategoricalFeature, FloatFeature, IntegerFeature
from counterplan.planning.space import AnyFeature, FeatureSpace

pytestmark = pytest.mark.unit

FEATURES: list[AnyFeature] = [
    FloatFeature(name="three", value=2.788, low=-10.0, high=10.0, precision=3),
    FloatFeature(name="thousands", value=12000.0, low=0.0, high=1e7, precision=-3),
    FloatFeature(name="lakhs", value=500000.0, low=0.0, high=1e9, precision=-5),  # 4 / 1e-5 is 399999.99999999994
    FloatFeature(name="billions", value=3e9, low=0.0, high=9e15, precision=-9),
    FloatFeature(name="any", value=0.1, low=0.0, high=1.0),
    FloatFeature(name="listed", value=50.0, low=0.0, high=100.0, precision=1, allowed=(12.25, 60.0)),
    FloatFeature(name="gap", value=None, low=0.0, high=1.0, precision=2, fill_missing=True),
    FloatFeature(name="fine", value=0.12345, low=0.0, high=1.0, precision=2),  # an original off its grid
    FloatFeature(name="twelve", value=0.5, low=0.0, high=1.0, precision=12),
    IntegerFeature(name="count", value=3, low=-5, high=5),
    IntegerFeature(name="count_gap", value=None, low=0, high=5, fill_missing=True),
    CategoricalFeature(name="colour", value="b", categories=("a", "b", "c")),
    CategoricalFeature(name="colour_gap", value=None, categories=("a", "b", "c"), fill_missing=True),
    BooleanFeature(name="flag", value=True),
    BooleanFeature(name="flag_gap", value=None, fill_missing=True),
]


def _rows(space: FeatureSpace, n: int, seed: int = 0) -> np.ndarray:
    """Rows of every kind of value an engine may hold: on the grid, an ulp either side of it, a
    half between two grid values and an ulp below that, anywhere, the original, a missing code."""
    rng = np.random.default_rng(seed)
    X = np.tile(space.original, (n, 1))
    for j, feature in enumerate(space.features):
        if isinstance(feature, FloatFeature):
            assert feature.low is not None and feature.high is not None
            values = rng.uniform(feature.low, feature.high, n)
            if feature.precision is not None:
                up, down = 10.0 ** max(feature.precision, 0), 10.0 ** max(-feature.precision, 0)
                steps = np.rint(values * up / down)
                grid, half = steps / up * down, (steps + 0.5) / up * down
                pick = rng.integers(0, 6, n)
                kinds = [grid, np.nextafter(grid, np.inf), np.nextafter(grid, -np.inf), half, np.nextafter(half, 0)]
                values = np.select([pick == k for k in range(5)], kinds, values)
            if feature.allowed is not None:
                values[::7] = rng.choice(feature.allowed, values[::7].size)
            values[::11] = space.original[j]
            X[:, j] = values
        else:
            top = {IntegerFeature: 5.49, CategoricalFeature: 2.49, BooleanFeature: 1.49}[type(feature)]
            codes = rng.uniform(-5.49 if isinstance(feature, IntegerFeature) else -0.49, top, n)
            X[:, j] = np.where(rng.random(n) < 0.2, space.missing_code[j], codes) if feature.missing else codes
    return X


def test_as_reported_is_encode_of_decode_row_by_row() -> None:
    space = FeatureSpace(FEATURES)
    X = _rows(space, 3000)
    reported = space.as_reported(X)
    expected = np.array([space.encode(space.decode(row)) for row in X])
    assert np.array_equal(reported, expected)
    assert np.array_equal(space.as_reported(reported), reported)  # what it reports, it reports as it is
    assert not np.array_equal(reported, X)  # the rows an ulp off their grids moved


def test_a_value_a_hair_off_its_grid_becomes_the_value_its_report_shows() -> None:
    space = FeatureSpace(FEATURES[:3])
    held = np.array([[2.788 + 0.001, 12000.0, 4 / 1e-5]])  # 2.7889999999999997, the original, 399999.99999999994
    assert held[0, 0] != 2.789 and held[0, 2] != 400000.0
    assert space.as_reported(held).tolist() == [[2.789, 12000.0, 400000.0]]
    assert space.decode(held[0]) == {"three": 2.789, "thousands": 12000.0, "lakhs": 400000.0}


def test_each_row_keeps_its_own_original() -> None:
    space = FeatureSpace([FloatFeature(name="x", value=0.5, low=0.0, high=1.0, precision=2)])
    rows = np.array([[0.12345], [0.12345], [0.5]])
    originals = np.array([[0.12345], [0.9], [0.5]])  # the first row's own original is off the grid
    assert space.as_reported(rows, originals).tolist() == [[0.12345], [0.12], [0.5]]
    assert space.as_reported(rows).tolist() == [[0.12], [0.12], [0.5]]


def test_an_allowed_value_is_reported_as_it_is() -> None:
    """An allowed value wins over the decimals (the search proposes it and the model is asked
    about it), in the report too: 12.25 among a 1-decimal feature's allowed values shows as 12.25."""
    feature = FloatFeature(name="amount", value=50.0, low=0.0, high=100.0, precision=1, allowed=(12.25, 60.0))
    assert feature.decode(12.25) == 12.25  # before: 12.2, a value the model was never asked about
    assert feature.decode(12.34) == 12.3
    space = FeatureSpace([feature])
    assert space.as_reported(np.array([[12.25], [12.34]])).tolist() == [[12.25], [12.3]]


def test_spaces_report_alike_when_their_features_round_alike() -> None:
    one = FeatureSpace([FloatFeature(name="x", value=0.5, low=0.0, high=1.0, precision=2)])
    other = FeatureSpace([FloatFeature(name="x", value=0.25, low=0.0, high=2.0, precision=2)])
    finer = FeatureSpace([FloatFeature(name="x", value=0.5, low=0.0, high=1.0, precision=3)])
    assert one.reports_like(other) and not one.reports_like(finer)
