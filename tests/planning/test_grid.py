"""Grid values are the floats decoding shows (:mod:`counterplan.planning.grid`).

A precision ``p`` shows a value as ``round(value, p)``. With a negative ``p`` the grid was computed
as ``k / 10 ** p`` (``10 ** -5`` is not exact: ``4 / 1e-5`` is ``399999.99999999994``, shown as
400000), so the space, the learned relations and a tree's split values proposed values a hair
off what a user is shown. A precision of 0 or more keeps its arithmetic, bit for bit."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LinearRegression
from sklearn.tree import DecisionTreeClassifier

from counterplan.planning import ClassGoal, CounterfactualProblem, FloatFeature
from counterplan.planning.grid import Grid
from counterplan.planning.models import adapt_sklearn
from counterplan.planning.relations import LearnedConstraint, LearnedRelations
from counterplan.planning.space import FeatureSpace

pytestmark = pytest.mark.unit

COARSE = [(-1, 1e4), (-3, 1e7), (-5, 1e9), (-9, 9e15)]
"""(precision, the domain's top): a hundred thousand grid steps or so below the top."""


def _shown(values: np.ndarray, places: int) -> list[float]:
    return [float(round(float(v), places)) for v in values]


def _bits(values: np.ndarray | list[float] | list[float | None]) -> list[int]:
    return [int(b) for b in np.asarray(values, dtype=np.float64).view(np.int64)]


@pytest.mark.parametrize(("places", "top"), COARSE)
def test_the_spaces_grid_values_are_what_decode_shows(places: int, top: float) -> None:
    feature = FloatFeature(name="x", value=top / 2, low=0.0, high=top, precision=places)
    space = FeatureSpace([feature])
    rng = np.random.default_rng(abs(places))
    step = 10.0**-places
    # anywhere, and the grid values themselves: every k for a few k around the top's and small ones
    values = np.concatenate([rng.uniform(0.0, top, 3000), np.arange(0, 2000) * step, top - np.arange(0, 2000) * step])
    values = values[(values >= 0) & (values <= top)]
    snapped = space.to_grid(values.reshape(-1, 1), slice(None))[:, 0]
    # before: 3 / 1e-5 = 300000.00000000006, 4 / 1e-5 = 399999.99999999994, shown 300000 and 400000
    assert _bits(snapped) == _bits(_shown(values, places))
    assert _bits([feature.decode(float(v)) for v in snapped]) == _bits(snapped)  # each shows as it is held
    assert space.off_grid(snapped.reshape(-1, 1)).tolist() == [0] * snapped.size
    ends = [space.grid_lower[0], space.grid_upper[0], space.domain_lower[0], space.domain_upper[0]]
    assert _bits(ends) == _bits(_shown(np.array(ends), places))
    X = np.column_stack([values])
    assert _bits(space.snap(X.copy())[:, 0]) == _bits(np.where(values == feature.value, values, snapped))


@pytest.mark.parametrize("places", range(13))
def test_a_precision_of_zero_or_more_keeps_its_arithmetic(places: int) -> None:
    """``rint(x * 10 ** p) / 10 ** p``, as before, bit for bit (Python's round gives it too)."""
    rng = np.random.default_rng(abs(places))
    values = rng.uniform(-1e3, 1e3, 5000) * rng.choice([1e-6, 1.0, 1e3], 5000)
    grid = Grid([places])
    scale = 10.0**places
    assert _bits(grid.round(values, 0)) == _bits(np.rint(values * scale) / scale)
    low, high = grid.ends(values, values, 0)
    assert _bits(low) == _bits(np.ceil(values * scale - 1e-9) / scale + 0.0)
    assert _bits(high) == _bits(np.floor(values * scale + 1e-9) / scale + 0.0)
    unit = grid.unit(0)
    assert [unit.value(k) for k in range(-50, 50)] == [k / scale for k in range(-50, 50)]


def test_a_grid_unit_and_its_grid_agree() -> None:
    grid = Grid([-9, -5, 0, 2, None])
    steps = np.arange(-40.0, 40.0)
    for j in range(4):
        unit = grid.unit(j)
        assert _bits([unit.value(float(k)) for k in steps]) == _bits(grid.values(steps, j))
        assert [round(unit.steps(float(v))) for v in grid.values(steps, j)] == steps.tolist()
    assert grid.gridded.tolist() == [True, True, True, True, False]
    assert grid.values(steps, 4).tolist() == steps.tolist()  # no grid: steps of 1
    assert grid.unit(1).step_ends(250000.0, 1e6 - 1e-12) == (3, 10)  # a bound an ulp under a step ends on it


def test_a_learned_relations_values_are_what_decode_shows() -> None:
    """A dependent feature in hundred-thousands, computed from another, lands on the grid decode shows."""
    rng = np.random.default_rng(0)
    amount = rng.uniform(0, 100, 200)
    relation = LinearRegression().fit(amount.reshape(-1, 1), amount * 7919.0 + 12345.0)
    space = FeatureSpace(
        [
            FloatFeature(name="amount", value=50.0, low=0.0, high=100.0, precision=2),
            FloatFeature(name="price", value=400000.0, low=0.0, high=1e6, precision=-5),
        ]
    )
    relations = LearnedRelations(space, [LearnedConstraint.of("price", ["amount"], relation)])
    X = np.column_stack([np.round(rng.uniform(0, 100, 500), 2), np.full(500, 400000.0)])
    computed = relations.apply(X)[:, 1]
    assert _bits(computed) == _bits(_shown(computed, -5))  # before: 299999.99999999994 for 300000, ...
    assert len(set(computed.tolist())) > 3
    assert relations.broken(relations.apply(X)).tolist() == [0] * 500


def test_a_trees_split_values_are_what_decode_shows() -> None:
    """The values either side of a tree's thresholds on a feature in hundred-thousands."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"x": rng.integers(0, 100, 400) * 100000.0, "z": rng.uniform(0, 1, 400)})
    label = ((frame["x"] > 2_350_000) & (frame["x"] < 7_650_000)).astype(int)
    tree = DecisionTreeClassifier(max_depth=3, random_state=0).fit(frame, label)
    features = [
        FloatFeature(name="x", value=9e6, low=0.0, high=9.9e6, precision=-5),
        FloatFeature(name="z", value=0.5, low=0.0, high=1.0, precision=2),
    ]
    problem = CounterfactualProblem(features, [ClassGoal(target=1, confidence=0.7)], adapt_sklearn(tree, "ok"))
    found = problem.split_values()
    assert found[0].size >= 4
    assert _bits(found[0]) == _bits(_shown(found[0], -5))  # before: 2299999.9999999995, ...
