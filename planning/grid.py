"""Grid arithmetic: a value on a grid of multiples of ``10 ** -places``, written as the float
decoding shows it.

A feature with a precision ``p`` takes multiples of ``10 ** -p``: ``p`` decimals, or with a
negative ``p`` multiples of 10, 1,000 or 1,000,000,000 (``-1``, ``-3``, ``-9``). Its decode shows
Python's ``round(value, p)``, the float nearest the rounded decimal. So a grid value must be
that float, bit for bit, or the engine searches a value the user never sees: ``4 / 1e-5`` is
``399999.99999999994`` (``1e-5`` is not exact), shown as 400000, which a threshold at 400000
decides otherwise. Every grid value is therefore a whole count of steps scaled by an exact power
of ten, divided (``k / 10 ** p`` for ``p >= 0``, correctly rounded: what ``round`` gives) or
multiplied (``k * 10 ** -p`` for ``p < 0``, exact below 2^53): :class:`Grid` holds the two
factors per column (``up`` = ``10 ** max(p, 0)``, ``down`` = ``10 ** max(-p, 0)``), and every
"round onto the grid" of the engines and the space goes through it (:class:`GridUnit` for one
column's scalars, the exact engine's). Whole numbers are a grid of places 0; a float without a
precision has none (its factors are 1, its ``gridded`` flag False: callers keep its values).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

FloatMatrix = npt.NDArray[np.float64]

GRID_TOLERANCE = 1e-9
"""How far past a grid value, in grid steps, a bound may lie and still end on it: float noise
(``0.29 * 100`` is ``28.999999999999996``)."""


def _factors(places: int) -> tuple[float, float]:
    """``(10 ** max(places, 0), 10 ** max(-places, 0))``, each an exact float (places -9..12)."""
    return 10.0 ** max(places, 0), 10.0 ** max(-places, 0)


@dataclass(frozen=True)
class GridUnit:
    """One column's grid, for scalar arithmetic (the exact engine's step variables): a value is
    ``steps / up * down``, a count of steps ``value * up / down``."""

    up: float
    """``10 ** places`` for places >= 0, else 1."""
    down: float
    """``10 ** -places`` for places < 0, else 1."""

    def steps(self, value: float) -> float:
        """``value`` in grid steps (not rounded)."""
        return value * self.up / self.down

    def value(self, steps: float) -> float:
        """The value of ``steps`` grid steps (a whole count: the grid value decode shows)."""
        return steps / self.up * self.down

    def step_ends(self, lower: float, upper: float) -> tuple[int, int]:
        """The first grid step at or above ``lower`` and the last at or below ``upper``, each
        within :data:`GRID_TOLERANCE` of a step."""
        return (
            math.ceil(self.steps(lower) - GRID_TOLERANCE),
            math.floor(self.steps(upper) + GRID_TOLERANCE),
        )


class Grid:
    """Per column, the grid its values live on (:mod:`counterplan.planning.grid`).

    Parameters
    ----------
    places:
        Per column: decimals of the grid (negative: multiples of 10, 100, ...), 0 for whole
        numbers, None for a float without a grid.
    """

    def __init__(self, places: Sequence[int | None]) -> None:
        self.places: tuple[int | None, ...] = tuple(places)
        self.gridded: npt.NDArray[np.bool_] = np.array([p is not None for p in self.places], dtype=bool)
        """Columns with a grid."""
        factors = [_factors(p) if p is not None else (1.0, 1.0) for p in self.places]
        self.up: FloatMatrix = np.array([f[0] for f in factors], dtype=np.float64).reshape(-1)
        self.down: FloatMatrix = np.array([f[1] for f in factors], dtype=np.float64).reshape(-1)
        self.coarse = bool((self.down != 1.0).any())
        """Some column's grid is coarser than whole numbers (a negative precision): only then is
        ``down`` applied (a division or product by 1 changes nothing, and costs time)."""
        self.per_unit: FloatMatrix = np.array(
            [10.0**p if p is not None else 0.0 for p in self.places], dtype=np.float64
        ).reshape(-1)
        """Grid values per unit (``10 ** places``), 0 without a grid: a description (for a
        negative precision it is not exact); grid values come from :meth:`values`."""

    def unit(self, column: int) -> GridUnit:
        """Column ``column``'s grid as plain floats."""
        return GridUnit(float(self.up[column]), float(self.down[column]))

    def steps(self, values: Any, columns: Any = slice(None)) -> FloatMatrix:
        """``values`` of ``columns`` (broadcast together) in grid steps, not rounded (a new array)."""
        scaled: FloatMatrix = np.multiply(values, self.up[columns], dtype=np.float64)
        if self.coarse:
            scaled /= self.down[columns]
        return scaled

    def values(self, steps: Any, columns: Any = slice(None)) -> FloatMatrix:
        """The grid values of counts of ``steps`` (whole numbers) of ``columns`` (a new array)."""
        out: FloatMatrix = np.divide(steps, self.up[columns], dtype=np.float64)
        if self.coarse:
            out *= self.down[columns]
        return out

    def round(self, values: Any, columns: Any = slice(None)) -> FloatMatrix:
        """``values`` of ``columns`` rounded to the nearest grid value (a new array; a column
        without a grid rounds to whole numbers: keep its values where :attr:`gridded` is False)."""
        rounded: FloatMatrix = np.rint(self.steps(values, columns))
        rounded /= self.up[columns]
        if self.coarse:
            rounded *= self.down[columns]
        return rounded

    def ends(self, lower: Any, upper: Any, columns: Any = slice(None)) -> tuple[FloatMatrix, FloatMatrix]:
        """Per column: the first grid value at or above ``lower`` and the last at or below
        ``upper``, each within :data:`GRID_TOLERANCE` of a step (meaningless for a column
        without a grid)."""
        low = self.values(np.ceil(self.steps(lower, columns) - GRID_TOLERANCE), columns)
        high = self.values(np.floor(self.steps(upper, columns) + GRID_TOLERANCE), columns)
        return low + 0.0, high + 0.0
