"""The rows a report stands for: each value as its feature decodes it, encoded again.

A result shows a candidate decoded (:meth:`~counterplan.planning.space.FeatureSpace.decode`): a float
rounded to its precision, a whole number by rounding, a category by its code. A row a hair off its
grid (``2.788 + 0.001`` is ``2.7889999999999997``, within the grid check's ``1e-12``) was checked
through the model as held and shown as ``2.789``, which a threshold between the two decides
otherwise: a valid-marked answer the model rejects. So an answer's final check first replaces its
row by the row its report stands for, ``encode(decode(row))``: the model checks what the user is
told. :class:`ReportedValues` computes that for a whole matrix at once (a batch's answers are
thousands of rows), the same floats the features' own ``decode`` and ``encode`` give one by one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from counterplan.planning.features import BooleanFeature, CategoricalFeature, FloatFeature, IntegerFeature
from counterplan.planning.grid import Grid

FloatMatrix = npt.NDArray[np.float64]

_EXACT_MAGNITUDE = 2.0**51
"""Scaled values this large may sit within an ulp of a half (their ulp is 0.5 or more): Python's
``round`` decides them."""


class ReportedValues:
    """What :meth:`FeatureSpace.as_reported <counterplan.planning.space.FeatureSpace.as_reported>`
    needs of the features, read once: which columns round to decimals and to how many, which hold
    whole numbers (booleans among them, and categories or booleans whose missing original is coded
    below 0), and the allowed values a float shows as they are."""

    def __init__(self, features: Sequence[IntegerFeature | FloatFeature | CategoricalFeature | BooleanFeature]) -> None:
        floats = {i: f for i, f in enumerate(features) if isinstance(f, FloatFeature) and f.precision is not None}
        self._decimal = np.array(list(floats), dtype=np.intp)
        self._places = [int(f.precision or 0) for f in floats.values()]
        self._grid = Grid(self._places)
        """The decimal columns' grids: 10 ** places as exact powers of ten (10.0 ** -3 is not exact)."""
        self._listed = {
            k: np.array(sorted(f.allowed), dtype=np.float64)
            for k, f in enumerate(floats.values())
            if f.allowed is not None
        }
        """Per decimal column (its position among them): the allowed values, shown as they are."""
        whole = [i for i, f in enumerate(features) if not isinstance(f, FloatFeature)]
        self._whole = np.array(whole, dtype=np.intp)
        self._boolean = np.array([k for k, i in enumerate(whole) if isinstance(features[i], BooleanFeature)], np.intp)
        self._gaps = np.array(
            [
                k
                for k, i in enumerate(whole)
                if isinstance(features[i], CategoricalFeature | BooleanFeature) and features[i].missing
            ],
            dtype=np.intp,
        )
        """Positions among the whole columns of the categories and booleans whose original is
        missing: a code below 0 shows as missing (their code -1)."""
        self.key: tuple[Any, ...] = (
            tuple(self._decimal.tolist()),
            tuple(self._places),
            tuple(whole),
            tuple(self._boolean.tolist()),
            tuple(self._gaps.tolist()),
            tuple((k, tuple(v.tolist())) for k, v in self._listed.items()),
        )
        """Equal for two spaces whose rows are reported alike (given each row's own original)."""

    def rows(self, X: FloatMatrix, original: FloatMatrix) -> FloatMatrix:
        """``X`` (a matrix) as reported, a new matrix; a value equal to its row's ``original``
        (the original row, or one per row) is shown as it is."""
        X = np.asarray(X, dtype=np.float64)
        out = X.copy()
        if self._decimal.size:
            out[:, self._decimal] = self._decimals(X[:, self._decimal])
        if self._whole.size:
            out[:, self._whole] = self._whole_numbers(X[:, self._whole])
        np.copyto(out, X, where=original == X)
        return out

    def _decimals(self, block: FloatMatrix) -> FloatMatrix:
        """Python's ``round(value, places)`` of every value: ``rint`` of the value scaled by an
        exact power of ten, scaled back (the float nearest the rounded decimal, as ``round``
        gives), with ``round`` itself deciding the rare value whose scaled float lies within two
        ulps of a half, where the float product may have crossed it; allowed values as they are."""
        scaled = self._grid.steps(block)
        steps = np.rint(scaled)
        rounded = self._grid.values(steps)
        with np.errstate(invalid="ignore"):  # infinities: inf - inf
            size = np.abs(scaled)
            near = np.abs(np.abs(scaled - steps) - 0.5) <= 2.0 * np.spacing(size)
            near |= size >= _EXACT_MAGNITUDE
        for i, k in np.argwhere(near).tolist():
            rounded[i, k] = round(float(block[i, k]), self._places[k])
        for k, values in self._listed.items():
            listed = np.isin(block[:, k], values)
            rounded[listed, k] = block[listed, k]
        return rounded

    def _whole_numbers(self, block: FloatMatrix) -> FloatMatrix:
        """Integers and category codes rounded (half to even, as ``round``), booleans 0 or 1, a
        missing category's or boolean's code below 0 its missing code."""
        rounded: FloatMatrix = np.rint(block) + 0.0  # round() gives an int: no -0.0
        if self._boolean.size:
            rounded[:, self._boolean] = np.minimum(np.abs(rounded[:, self._boolean]), 1.0)
        if self._gaps.size:
            rounded[:, self._gaps] = np.where(block[:, self._gaps] < 0.0, -1.0, rounded[:, self._gaps])
        return rounded
