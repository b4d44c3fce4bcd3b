from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, strategies as st

from counterplan.planning import (
    BooleanFeature,
    CandidateError,
    CategoricalFeature,
    FeatureSpace,
    FloatFeature,
    IntegerFeature,
)
from counterplan.planning.space import AnyFeature


@st.composite
def feature_and_value(draw: st.DrawFn, index: int) -> tuple[AnyFeature, Any]:
    """A random feature of any kind plus a random value from its domain."""
    name = f"f{index}"
    kind = draw(st.sampled_from(["integer", "float", "categorical", "boolean"]))
    if kind == "integer":
        low = draw(st.integers(-1000, 1000))
        high = draw(st.integers(low, low + 2000))
        value = draw(st.integers(low, high))
        other = draw(st.integers(low, high))
        return IntegerFeature(name=name, value=value, low=low, high=high), other
    if kind == "float":
        floats = st.floats(-1e9, 1e9, allow_nan=False, allow_infinity=False)
        a, b = sorted((draw(floats) + 0.0, draw(floats) + 0.0))
        value = draw(st.floats(a, b))
        other = draw(st.floats(a, b))
        return FloatFeature(name=name, value=value, low=a, high=b), other
    if kind == "categorical":
        categories = draw(st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=6, unique=True))
        value = draw(st.sampled_from(categories))
        other = draw(st.sampled_from(categories))
        return CategoricalFeature(name=name, value=value, categories=tuple(categories)), other
    return BooleanFeature(name=name, value=draw(st.booleans())), draw(st.booleans())


@st.composite
def space_and_row(draw: st.DrawFn) -> tuple[FeatureSpace, dict[str, Any]]:
    count = draw(st.integers(1, 8))
    pairs = [draw(feature_and_value(i)) for i in range(count)]
    return FeatureSpace([f for f, _ in pairs]), {f.name: v for f, v in pairs}


@given(space_and_row())
def test_encoding_round_trips_losslessly(case: tuple[FeatureSpace, dict[str, Any]]) -> None:
    space, values = case
    row = space.encode(values)
    assert row.dtype == np.float64 and row.shape == (len(space),)
    assert space.decode(row) == values
    matrix = np.vstack([row, space.original])
    space.check_candidates(matrix)
    frame = space.to_frame(matrix)
    assert list(frame.columns) == list(space.names)
    assert {name: frame[name].iloc[0] for name in space.names} == values
    original = {f.name: f.value for f in space.features}
    assert space.decode(space.original) == original


def test_to_frame_gives_the_types_a_pipeline_expects() -> None:
    space = FeatureSpace(
        [
            IntegerFeature(name="n", value=2, low=0, high=5),
            FloatFeature(name="x", value=0.5, low=0.0, high=1.0),
            CategoricalFeature(name="c", value="b", categories=("a", "b")),
            BooleanFeature(name="flag", value=True),
        ]
    )
    frame = space.to_frame(np.array([[3.0, 0.25, 0.0, 0.0]]))
    assert frame["n"].dtype == np.int64 and frame["n"].iloc[0] == 3
    assert frame["x"].dtype == np.float64
    assert frame["c"].iloc[0] == "a"
    assert frame["flag"].dtype == bool and not frame["flag"].iloc[0]


def test_candidates_outside_the_space_are_rejected_by_name() -> None:
    space = FeatureSpace(
        [
            IntegerFeature(name="n", value=2, low=0, high=5),
            FloatFeature(name="x", value=0.5, low=0.0, high=1.0),
        ]
    )
    with pytest.raises(CandidateError, match="shape"):
        space.check_candidates(np.zeros((2, 3)))
    with pytest.raises(CandidateError) as info:
        space.check_candidates(np.array([[2.0, 0.5], [2.0, 1.5]]))
    assert info.value.field == "x" and "row 1" in str(info.value)
    with pytest.raises(CandidateError, match="whole number"):
        space.check_candidates(np.array([[2.5, 0.5]]))
    with pytest.raises(CandidateError):
        space.check_candidates(np.array([[2.0, np.nan]]))


def test_a_float_precision_puts_candidates_on_its_grid_and_keeps_the_original() -> None:
    from counterplan.planning import FloatFeature, IntegerFeature

    space = FeatureSpace(
        [
            FloatFeature(name="ratio", value=0.123456, low=0.0, high=1.0, precision=2),
            FloatFeature(name="amount", value=50.0, low=0.0, high=100.0, precision=1, allowed=(12.25, 60.0)),
            IntegerFeature(name="n", value=3, low=0, high=9),
        ]
    )
    X = np.array([[0.4567, 20.0, 4.6], [0.123456, 50.0, 3.0], [1.5, 70.0, 3.0]])
    snapped = space.snap(X.copy())
    assert snapped[0].tolist() == [0.46, 12.25, 5.0]
    assert snapped[1].tolist() == [0.123456, 50.0, 3.0]  # the original stays, off the grid or not
    assert snapped[2].tolist() == [1.0, 60.0, 3.0]  # into the grid bounds, onto the allowed values
    assert space.off_grid(snapped).tolist() == [0, 0, 0]  # an allowed value wins over the decimals
    assert space.off_grid(np.array([[0.455, 60.0, 3.0]])).tolist() == [1]


def test_off_grid_tells_the_decimals_as_numpys_isclose_does() -> None:
    """:meth:`FeatureSpace.off_grid` writes ``np.isclose(rounded, value, rtol=1e-12, atol=0)``
    out: the same count on values near the tolerance, huge, tiny, signed zeros, infinities and NaN."""
    from counterplan.planning import FloatFeature

    space = FeatureSpace([FloatFeature(name=f"x{p}", value=0.5, low=-1e15, high=1e15, precision=p) for p in (0, 2, 6)])
    rng = np.random.default_rng(0)
    grid = np.rint(rng.normal(0, 1e3, (400, 3)) * [1.0, 100.0, 1e6]) / [1.0, 100.0, 1e6]
    edges = [0.0, -0.0, 0.5, 1e-300, 5e-7, 0.015, 1e15 + 0.5, 1e300, -1e300, np.inf, -np.inf, np.nan]
    values = np.vstack(
        [
            grid,
            grid * (1.0 + rng.choice([-2e-12, -1e-12, -5e-13, 5e-13, 1e-12, 2e-12], grid.shape)),
            grid + rng.choice([-1e-9, 1e-9, 0.3], grid.shape),
            np.array(edges)[rng.integers(0, len(edges), (400, 3))],
        ]
    )
    scale = np.array([1.0, 100.0, 1e6])
    with np.errstate(all="ignore"):
        rounded = np.rint(values * scale) / scale
        expected = (~np.isclose(rounded, values, rtol=1e-12, atol=0.0) & (values != 0.5)).sum(axis=1)
        got = space.off_grid(values)
    assert 0 < expected.sum() < values.size
    assert got.tolist() == expected.tolist()


@pytest.mark.parametrize(("low", "high"), [(-11.0, -0.14 - 1.0), (0.14 + 1.0, 11.0)])
def test_a_bound_a_hair_past_its_grid_value_admits_that_value(low: float, high: float) -> None:
    """Data computed in floats holds bounds like ``-0.14 - 1.0 == -1.1400000000000001``: the grid
    of two decimals ends on -1.14 there, an ulp outside the bound, and every engine's first
    candidate at that end was refused by the candidate check (a ``CandidateError`` out of the
    solve, found by fuzzing). The domain admits the grid value its bound stands for."""
    value = -8.0 if high < 0 else 8.0
    for held in (False, True):  # a held feature's domain too: the diagnosis scans it
        feature = FloatFeature(name="x", value=value, low=low, high=high, precision=2, constrained=held)
        space = FeatureSpace([feature])
        ends = space.to_grid(np.array([[-100.0], [100.0]]), slice(None))
        assert ends[:, 0].tolist() == [round(low, 2), round(high, 2)]
        space.check_candidates(ends)  # raised CandidateError: -1.14 outside [-11.0, -1.1400000000000001]
        space.check_candidates(np.array([[low], [high]]))  # the bounds as given stay inside
        assert space.off_grid(ends).tolist() == [0, 0]
    held_without_domain = FeatureSpace([FloatFeature(name="x", value=high, precision=2, constrained=True)])
    assert held_without_domain.domain_lower.tolist() == held_without_domain.domain_upper.tolist() == [high]


def test_a_float_with_allowed_values_finer_than_its_decimals_takes_each_of_them() -> None:
    """A list of values wins over decimals: 1.22 among 1.21, 1.22, 1.23 on a 1-decimal feature was
    rounded to 1.2 before the allowed values were looked at, and became 1.21 (snap, and every
    engine's moves through to_grid): no value could ever reach 1.22 (the plan fuzz's finding)."""
    space = FeatureSpace(
        [FloatFeature(name="a", value=0.5, low=0.0, high=3.0, precision=1, allowed=(1.21, 1.22, 1.23))]
    )
    X = np.array([[1.22], [1.224], [1.2], [1.3], [0.5], [2.9]])
    assert space.snap(X.copy())[:, 0].tolist() == [1.22, 1.22, 1.21, 1.23, 0.5, 1.23]
    assert space.to_grid(np.array([1.22, 1.26]), np.zeros(2, dtype=np.intp)).tolist() == [1.22, 1.26]
    assert space.off_grid(np.array([[1.22], [1.224]])).tolist() == [0, 1]
