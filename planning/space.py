"""The encoded search space: features as columns of a float64 candidate matrix.

The solver never sees features, only this space: bounds, which columns are whole numbers,
which are nominal (categories, booleans), which may move, and the original row. Moves, scores
and model calls all work on whole matrices ``X`` of shape ``(n_candidates, n_features)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from planning.errors import CandidateError, FeatureError
from planning.features import BooleanFeature, CategoricalFeature, FloatFeature, IntegerFeature

AnyFeature = IntegerFeature | FloatFeature | CategoricalFeature | BooleanFeature
FloatMatrix = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


class FeatureSpace:
    """An ordered set of features with unique names, and their matrix encoding.

    Parameters
    ----------
    features:
        The features, in model-input order. Names must be unique.
    """

    def __init__(self, features: Iterable[AnyFeature]) -> None:
        self.features: tuple[AnyFeature, ...] = tuple(features)
        if not self.features:
            raise FeatureError("features", "a problem needs at least one feature")
        seen: set[str] = set()
        for feature in self.features:
            if feature.name in seen:
                raise FeatureError(feature.name, "duplicate feature name")
            seen.add(feature.name)
        self.names: tuple[str, ...] = tuple(f.name for f in self.features)
        self.index: dict[str, int] = {name: i for i, name in enumerate(self.names)}
        bounds = np.array([f.bounds for f in self.features], dtype=np.float64)
        self.domain_lower: FloatMatrix = bounds[:, 0].copy()
        """Inclusive encoded domain bounds: what a candidate may hold at all."""
        self.domain_upper: FloatMatrix = bounds[:, 1].copy()
        self.monotone: FloatMatrix = np.array(
            [{"increase": 1.0, "decrease": -1.0}.get(f.monotone or "", 0.0) for f in self.features]
        )
        """+1 where a feature may only increase, -1 only decrease, 0 either way."""
        self.costs: FloatMatrix = np.array([f.cost for f in self.features], dtype=np.float64)
        self.mutable: BoolArray = np.array([f.mutable for f in self.features], dtype=bool)
        self.nominal: BoolArray = np.array(
            [isinstance(f, CategoricalFeature | BooleanFeature) for f in self.features], dtype=bool
        )
        self.integral: BoolArray = np.array([not isinstance(f, FloatFeature) for f in self.features], dtype=bool)
        self.original: FloatMatrix = np.array([f.encode(f.value) for f in self.features], dtype=np.float64)
        # The search moves within these: the domain, narrowed by monotone rules, so no move
        # breaks one; candidates from elsewhere that break one are counted on hard level 1.
        self.lower: FloatMatrix = np.where(self.monotone > 0, self.original, self.domain_lower)
        self.upper: FloatMatrix = np.where(self.monotone < 0, self.original, self.domain_upper)
        self.allowed: dict[int, FloatMatrix] = {}
        """Per column with allowed values: the sorted values a candidate may take (the original too)."""
        for i, f in enumerate(self.features):
            values = getattr(f, "allowed", None)
            if values is not None and f.mutable:
                grid = np.unique(np.append(np.asarray(values, dtype=np.float64), self.original[i]))
                self.allowed[i] = grid[(grid >= self.lower[i]) & (grid <= self.upper[i])]
        self._categories: dict[int, npt.NDArray[np.object_]] = {
            i: np.array(f.domain, dtype=object)
            for i, f in enumerate(self.features)
            if isinstance(f, CategoricalFeature)
        }

    def __len__(self) -> int:
        return len(self.features)

    def __getitem__(self, name: str) -> AnyFeature:
        try:
            return self.features[self.index[name]]
        except KeyError:
            raise FeatureError(name, f"unknown feature; known: {list(self.names)}") from None

    @property
    def n_features(self) -> int:
        """Number of columns of a candidate matrix."""
        return len(self.features)

    def encode(self, values: Mapping[str, Any]) -> FloatMatrix:
        """Encode one candidate given as ``{name: value}``; every feature must be present."""
        unknown = sorted(set(values) - set(self.names))
        if unknown:
            raise FeatureError(unknown[0], f"unknown feature; known: {list(self.names)}")
        row = np.empty(self.n_features, dtype=np.float64)
        for i, feature in enumerate(self.features):
            if feature.name not in values:
                raise FeatureError(feature.name, "missing value")
            row[i] = feature.encode(values[feature.name])
        return row

    def encode_rows(self, rows: Sequence[Mapping[str, Any]]) -> FloatMatrix:
        """Encode several candidates into a matrix."""
        if not rows:
            return np.empty((0, self.n_features), dtype=np.float64)
        return np.vstack([self.encode(row) for row in rows])

    def decode(self, row: npt.ArrayLike) -> dict[str, Any]:
        """Decode one encoded row to ``{name: python value}`` in each feature's own type."""
        vector = np.asarray(row, dtype=np.float64)
        return {f.name: f.decode(float(vector[i])) for i, f in enumerate(self.features)}

    def to_frame(self, X: FloatMatrix) -> pd.DataFrame:
        """Decode a candidate matrix into a DataFrame with the original names and types.

        Categories come back as their strings, integers as ``int64``, booleans as ``bool``:
        what a scikit-learn pipeline fitted on the training DataFrame expects.
        """
        columns: dict[str, Any] = {}
        for i, feature in enumerate(self.features):
            column = X[:, i]
            if isinstance(feature, CategoricalFeature):
                columns[feature.name] = self._categories[i][np.rint(column).astype(np.intp)]
            elif isinstance(feature, BooleanFeature):
                columns[feature.name] = column > 0.5
            elif isinstance(feature, IntegerFeature):
                columns[feature.name] = np.rint(column).astype(np.int64)
            else:
                columns[feature.name] = column
        return pd.DataFrame(columns, copy=False)  # dict order is column order; columns= would reindex

    def snap(self, X: FloatMatrix) -> FloatMatrix:
        """Move every value of a column with allowed values to the nearest allowed one (in place)."""
        for column, grid in self.allowed.items():
            values = X[:, column]
            right = np.clip(np.searchsorted(grid, values), 1, max(grid.size - 1, 1))
            left = right - 1
            if grid.size == 1:
                X[:, column] = grid[0]
                continue
            nearer_left = np.abs(values - grid[left]) <= np.abs(grid[right] - values)
            X[:, column] = np.where(nearer_left, grid[left], grid[right])
        return X

    def off_grid(self, X: FloatMatrix) -> npt.NDArray[np.int64]:
        """Per row: how many columns hold a value their allowed values do not include."""
        count = np.zeros(X.shape[0], dtype=np.int64)
        for column, grid in self.allowed.items():
            count += ~np.isin(X[:, column], grid)
        return count

    def check_candidates(self, X: Any) -> FloatMatrix:
        """Check that ``X`` is a finite, in-domain candidate matrix of this space.

        Raises ``CandidateError`` naming the first offending column. Whole-number columns
        (integers, categories, booleans) must hold whole numbers.
        """
        matrix = np.asarray(X, dtype=np.float64)
        if matrix.ndim != 2 or matrix.shape[1] != self.n_features:
            raise CandidateError("shape", f"expected (n, {self.n_features}) candidates, given {matrix.shape}")
        if matrix.shape[0] == 0:
            return matrix
        bad = ~np.isfinite(matrix) | (matrix < self.domain_lower) | (matrix > self.domain_upper)
        bad |= self.integral & (matrix != np.rint(matrix))
        if bad.any():
            row, col = map(int, np.argwhere(bad)[0])
            feature = self.features[col]
            raise CandidateError(
                feature.name,
                f"row {row} holds {matrix[row, col]!r}, outside the domain "
                f"[{self.domain_lower[col]!r}, {self.domain_upper[col]!r}]"
                + (" or not a whole number" if self.integral[col] else ""),
            )
        return matrix
