"""Plausibility against the data: a counterfactual should lie near real rows of the desired class.

Optional, when training data is given. Rows are compared in a Gower-like space (numbers scaled
by their domain range, categories and booleans one-hot at weight 1/2, so a mismatch costs 1)
with Manhattan distance. A candidate is plausible when its k-th nearest reference row (a
training row of the desired class) is no farther than the ``quantile`` of the reference rows'
own k-th-neighbour distances: as close to the data as typical rows of that class are.
"""

from __future__ import annotations

from typing import Annotated, Self

import numpy as np
import numpy.typing as npt
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, model_validator
from sklearn.neighbors import NearestNeighbors

from counterplan.planning.errors import ProblemError
from counterplan.planning.features import BooleanFeature, CategoricalFeature, category_text, is_missing
from counterplan.planning.space import FeatureSpace, FloatMatrix


class PlausibilitySettings(BaseModel):
    """How plausibility is judged."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    k: Annotated[int, Field(ge=1, le=100)] = 5
    quantile: Annotated[float, Field(gt=0.0, le=1.0)] = 0.95
    max_reference_rows: Annotated[int, Field(ge=10)] = 5000
    """Larger reference sets are subsampled (deterministically) to keep each batch fast."""

    @model_validator(mode="after")
    def _check(self) -> Self:
        """Each reference row's own k-th neighbour is among the other rows, so the subsample needs
        more than k of them: ``k=50`` with ``max_reference_rows=10`` failed in scikit-learn's
        neighbour search ("Expected n_neighbors <= n_samples_fit"), naming no setting."""
        if self.max_reference_rows <= self.k:
            raise ValueError(f"max_reference_rows={self.max_reference_rows} must be more than k={self.k}")
        return self


class PlausibilityModel:
    """k-nearest-neighbour plausibility of encoded candidates against reference rows."""

    def __init__(self, space: FeatureSpace, reference: FloatMatrix, settings: PlausibilitySettings) -> None:
        if reference.shape[0] <= settings.k:
            raise ProblemError(
                "plausibility", f"needs more than k={settings.k} reference rows, has {reference.shape[0]}"
            )
        if reference.shape[0] > settings.max_reference_rows:
            keep = np.random.default_rng(0).choice(reference.shape[0], settings.max_reference_rows, replace=False)
            reference = reference[np.sort(keep)]
        self.space = space
        self.settings = settings
        self.reference_rows = int(reference.shape[0])
        """Rows of the desired class compared against (after subsampling)."""
        self._scale = space.domain_width
        self._nominal = np.flatnonzero(space.nominal & ~space.missing)
        self._sizes = (space.domain_upper[self._nominal] + 1).astype(int)
        points = self._transform(reference)
        self._index = NearestNeighbors(n_neighbors=settings.k + 1, metric="manhattan").fit(points)
        own, _ = self._index.kneighbors(points)
        self.threshold = float(np.quantile(own[:, -1], settings.quantile))  # column 0 is the row itself

    def _transform(self, X: FloatMatrix) -> FloatMatrix:
        # a column missing in the instance says nothing about nearness: it is left out
        numeric = np.where(self.space.nominal | self.space.missing, 0.0, (X - self.space.domain_lower) / self._scale)
        blocks = [numeric]
        for column, size in zip(self._nominal, self._sizes, strict=True):
            onehot = np.zeros((X.shape[0], size))
            onehot[np.arange(X.shape[0]), np.rint(X[:, column]).astype(int)] = 0.5
            blocks.append(onehot)
        return np.hstack(blocks)

    def distance(self, X: FloatMatrix) -> FloatMatrix:
        """Distance of each candidate to its k-th nearest reference row."""
        distances, _ = self._index.kneighbors(self._transform(X), n_neighbors=self.settings.k)
        return np.asarray(distances[:, -1], dtype=np.float64)

    def plausible(self, X: FloatMatrix) -> npt.NDArray[np.bool_]:
        """Candidates as close to the desired class's rows as its typical rows are."""
        return np.asarray(self.distance(X) <= self.threshold, dtype=bool)


def encode_frame(space: FeatureSpace, data: pd.DataFrame) -> FloatMatrix:
    """Encode DataFrame rows into the space's matrix, dropping rows outside its domains.

    A gap in a numeric column takes that column's median, so training data with gaps keeps its
    rows; a gap in a category or a boolean drops the row (no category is made up for it); a
    column missing in the instance itself is left out of the comparison.
    """
    columns = []
    keep = np.ones(len(data), dtype=bool)
    for feature in space.features:
        column = data[feature.name]
        if feature.missing:  # left out of the comparison: every row holds the code
            columns.append(np.full(len(data), feature.missing_code))
        elif isinstance(feature, CategoricalFeature):
            texts = [None if is_missing(v) else category_text(v) for v in column]  # codes 1.0 read as "1"
            codes = pd.Categorical(texts, categories=list(feature.domain)).codes.astype(np.float64)
            keep &= codes >= 0
            columns.append(codes)
        elif isinstance(feature, BooleanFeature):  # a gap drops the row, as a category's does
            known = column.notna()  # astype(bool) read NaN as True, None as False, and raised on pandas' NA
            keep &= known.to_numpy(dtype=bool)
            columns.append(np.asarray(column.where(known, False).astype(bool).to_numpy(), dtype=np.float64))
        else:
            values = pd.to_numeric(column, errors="coerce").to_numpy(dtype=np.float64)
            known = np.isfinite(values)  # a gap in a reference row: the column's median, the row kept
            values = np.where(known, values, np.median(values[known]) if known.any() else feature.missing_code)
            columns.append(values)
    matrix = np.column_stack(columns)
    inside = (matrix >= space.domain_lower) & (matrix <= space.domain_upper)
    keep &= (inside | space.missing).all(axis=1)
    return np.asarray(matrix[keep], dtype=np.float64)
