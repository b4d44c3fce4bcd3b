"""Distinct rows of a matrix, found without holding the GIL: how the engines drop repeated rows
where they used ``np.unique(rows, axis=0)`` (the trade's :func:`~counterplan.solver.core.trade.unique_rows`
keeps np.unique for rows with NaN or -0.0: it returns np.unique's very bytes, the sign of a zero
among them, where these give a row's first occurrence).

np.unique sorts the rows as records, holding the GIL for the whole sort: 1.4 s for a full pool
of 363,000 rows, during which no other thread of the process ran (a server's call past its
deadline could not answer: the grpc fuzz). A lexsort of the columns, stable as np.unique's sort,
releases it and gives the same index and inverse.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.intp]


def distinct_rows(rows: npt.NDArray[Any]) -> tuple[IntArray, IntArray]:
    """``np.unique(rows, axis=0, return_index=True, return_inverse=True)``'s index and inverse:
    the first row of each distinct value, in their lexicographic order, and each row's place
    among them (a NaN is never equal, -0.0 equals 0.0, as there)."""
    n = rows.shape[0]
    order = np.lexsort(rows.T[::-1]) if rows.shape[1] else np.arange(n)
    ranked = rows[order]
    new = np.ones(n, dtype=bool)
    new[1:] = (ranked[1:] != ranked[:-1]).any(axis=1)
    inverse = np.empty(n, dtype=np.intp)
    inverse[order] = np.cumsum(new) - 1
    return order[new], inverse


def first_of_each(rows: npt.NDArray[Any]) -> IntArray:
    """The first occurrence of each distinct row, in the rows' own order (a matrix's rows less
    the repeats: ``rows[first_of_each(rows)]``)."""
    first, _ = distinct_rows(rows)
    return np.sort(first)


__all__ = ["distinct_rows", "first_of_each"]
