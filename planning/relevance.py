"""How much each feature tells the two outcomes apart: information value against the labels.

The particle swarm (:mod:`counterplan.solver.swarm`) searches only the ``h`` most relevant features, ranked
as the MD-PSO paper ranks them, by information value (IV). The paper prints the formula without
its logarithm; this is the standard one, with count smoothing so an empty bin stays finite::

    IV = sum over bins of (p_i - n_i) * ln(p_i / n_i)
    p_i = (positives in bin i + 0.5) / (positives + 0.5 * bins)
    n_i = (negatives in bin i + 0.5) / (negatives + 0.5 * bins)

Numbers fall into (up to) 10 quantile bins of their observed values, so an outlier only widens
the last bin; categories and booleans are one bin per value; a missing value is a bin of its
own. The positive rows are those with the goal's outcome in the label column
(:func:`positive_rows`). Computed once per data set, label column and goal, and only when asked
(:class:`FeatureRelevance`): building a problem costs nothing more.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import pandas as pd

if TYPE_CHECKING:
    from counterplan.planning.inference import DataProfile

IV_BINS = 10
SMOOTHING = 0.5
MAX_ROWS = 100_000
"""Larger data sets are ranked on an evenly spaced sample of this many rows."""


def information_value(codes: npt.NDArray[np.intp], positive: npt.NDArray[np.bool_]) -> float:
    """IV of one binned column: ``codes`` are bin indices (0..bins-1), ``positive`` the labels."""
    bins = int(codes.max()) + 1 if codes.size else 1
    pos = np.bincount(codes[positive], minlength=bins).astype(np.float64)
    neg = np.bincount(codes[~positive], minlength=bins).astype(np.float64)
    p = (pos + SMOOTHING) / (pos.sum() + SMOOTHING * bins)
    n = (neg + SMOOTHING) / (neg.sum() + SMOOTHING * bins)
    return float(np.sum((p - n) * np.log(p / n)))


def bin_codes(column: pd.Series, bins: int = IV_BINS) -> npt.NDArray[np.intp]:
    """Bin indices of a column: quantile bins for numbers, one per value otherwise, missing apart."""
    missing = column.isna().to_numpy()
    numbers = pd.to_numeric(column, errors="coerce")
    is_number = column.dtype != object and not isinstance(column.dtype, pd.CategoricalDtype)
    is_number = is_number and not pd.api.types.is_bool_dtype(column.dtype)
    codes = np.zeros(len(column), dtype=np.intp)
    if is_number and numbers.nunique() > bins:
        values = numbers.to_numpy(dtype=np.float64)
        edges = np.unique(np.nanquantile(values[~missing], np.linspace(0.0, 1.0, bins + 1)[1:-1]))
        codes[~missing] = np.searchsorted(edges, values[~missing], side="right")
    else:
        _, inverse = np.unique(column[~missing].astype(str).to_numpy(), return_inverse=True)
        codes[~missing] = inverse
    codes[missing] = codes.max(initial=-1) + 1
    return codes


def information_values(data: pd.DataFrame, columns: Sequence[str], positive: npt.NDArray[np.bool_]) -> dict[str, float]:
    """IV of each of ``columns`` of ``data`` against ``positive`` (one flag per row)."""
    if len(data) > MAX_ROWS:
        keep = np.linspace(0, len(data) - 1, MAX_ROWS).astype(np.intp)
        data, positive = data.iloc[keep], positive[keep]
    return {name: information_value(bin_codes(data[name]), positive) for name in columns}


class FeatureRelevance:
    """The information values of a problem's features, computed on first use and then kept.

    ``positive`` says, for the data's label column, which rows have the goal's outcome; it runs
    only when the values are first asked for.
    """

    def __init__(
        self,
        profile: DataProfile,
        columns: Sequence[str],
        key: tuple[object, ...],
        positive: Callable[[pd.DataFrame], npt.NDArray[np.bool_]],
    ) -> None:
        self._profile = profile
        self._columns = tuple(columns)
        self._key = key
        self._positive = positive

    def values(self) -> dict[str, float]:
        """Feature name to information value; empty when no row, or every row, has the goal's
        outcome (the values would then measure how skewed each feature is, not how it separates
        the outcomes)."""
        cache = self._profile.relevance
        key = (self._columns, *self._key)
        if key not in cache:
            flags = np.asarray(self._positive(self._profile.data), dtype=bool)
            both = bool(flags.any()) and not bool(flags.all())
            cache[key] = information_values(self._profile.data, self._columns, flags) if both else {}
        return cache[key]

    def for_goals(
        self, key: tuple[object, ...], positive: Callable[[pd.DataFrame], npt.NDArray[np.bool_]]
    ) -> FeatureRelevance:
        """The same data and columns, for other goals (``key`` and ``positive`` as in the constructor)."""
        return FeatureRelevance(self._profile, self._columns, key, positive)

    @property
    def label(self) -> str:
        """The label column the outcomes are read from."""
        return str(self._key[0])
