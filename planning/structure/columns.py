"""The neutral description of a column on its way through a pipeline.

A search space encodes a candidate as one number per feature (categories and booleans as codes). A
pipeline turns those features into the columns its final estimator reads; for the preprocessing
counterplan understands, every such column is a function of one feature of one of three shapes:

* :class:`NumberColumn`: the feature's value (NaN when missing), then elementwise arithmetic
  (:class:`Layer`, in scikit-learn's own operation order);
* :class:`CategoryColumn`: a nominal feature not yet encoded: the value the pipeline sees for each
  of its codes (slot 0 is the missing value, slot ``k + 1`` code ``k``);
* :class:`LookupColumn`: a number per code (a one-hot indicator, an ordinal code, a category's own
  number), then arithmetic.

The fast path evaluates these with numpy, bit for bit as scikit-learn computes them; the exact
engine writes them as linear expressions of its variables; the split values read a number column's
affine map. Nothing here knows either consumer.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from counterplan.planning.structure.errors import NotEncodableError

FloatArray = npt.NDArray[np.float64]


class _Missing:
    """The missing value of a nominal column (None or NaN in the frame a pipeline gets)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()

OPERATIONS = ("fill", "sub", "div", "mul", "add", "clip")


@dataclass(frozen=True)
class Layer:
    """One step's elementwise arithmetic on a number column, in scikit-learn's operation order.

    ``x = where(isnan(x), fill, x); x -= sub; x /= div; x *= mul; x += add; clip(x, lo, hi)``, each
    only when named in ``ops`` (an operation left out is not applied at all, so no ``-0.0`` turns
    into ``0.0`` on the way).
    """

    ops: frozenset[str]
    fill: float = math.nan
    sub: float = 0.0
    div: float = 1.0
    mul: float = 1.0
    add: float = 0.0
    lo: float = -math.inf
    hi: float = math.inf
    where: str = field(default="", compare=False)
    """The step that applies it (for messages)."""

    def constants(self) -> dict[str, float]:
        """The layer's constants by name, as :func:`run_layer` takes them."""
        return {name: getattr(self, name) for name in ("fill", "sub", "div", "mul", "add", "lo", "hi")}

    def affine(self) -> tuple[tuple[float, float], ...]:
        """The layer as affine maps ``x -> factor * x + shift``, applied in order: centring and
        scaling as ``(1 / div, -sub / div)``, then ``(mul, add)``. A fill is left out (it changes a
        missing value only; the readers of this form never see one); a clip is not affine."""
        if "clip" in self.ops:
            raise NotEncodableError(f"{self.where}(clip=True) is not affine")
        steps = []
        if self.ops & {"sub", "div"}:
            div = self.div if "div" in self.ops else 1.0
            sub = self.sub if "sub" in self.ops else 0.0
            steps.append((1.0 / div, -sub / div))
        if self.ops & {"mul", "add"}:
            steps.append((self.mul if "mul" in self.ops else 1.0, self.add if "add" in self.ops else 0.0))
        return tuple(steps)


def run_layer(x: FloatArray, ops: frozenset[str], constants: Mapping[str, Any]) -> FloatArray:
    """Apply a layer's operations to ``x`` (scalars or per-column vectors as constants).

    Lookup tables are folded with this same function and the fast path applies it to whole blocks
    of columns, so both compute exactly what the scaler computes.
    """
    if "fill" in ops:
        x = np.where(np.isnan(x), constants["fill"], x)
    if "sub" in ops:
        x = x - constants["sub"]
    if "div" in ops:
        x = x / constants["div"]
    if "mul" in ops:
        x = x * constants["mul"]
    if "add" in ops:
        x = x + constants["add"]
    if "clip" in ops:
        x = np.clip(x, constants["lo"], constants["hi"])
    return np.asarray(x, dtype=np.float64)


@dataclass(frozen=True)
class NumberColumn:
    """A number column: feature ``source``'s value (NaN when missing), then ``layers`` in order."""

    source: int
    layers: tuple[Layer, ...] = ()
    boolean: bool = False
    """A boolean feature decoded as ``False``/``True``: an encoder may read it as two categories."""


@dataclass(frozen=True)
class CategoryColumn:
    """A nominal column not yet encoded: the value the pipeline sees per slot (slot 0: missing)."""

    source: int
    values: tuple[Any, ...]
    errors: frozenset[int] = frozenset()
    """Slots an encoder fitted with ``handle_unknown='error'`` does not know: the pipeline raises."""


Read = Literal["value", "indicator", "code"]
"""How a lookup's numbers were made: a category's own number, a one-hot indicator (1 where the
slot's category is the column's, else 0), or an ordinal encoder's code."""


@dataclass(frozen=True)
class LookupColumn:
    """A number per slot of feature ``source``'s code (``values[code + 1]``; slot 0: missing), then
    ``layers`` in order."""

    source: int
    values: tuple[float, ...]
    read: Read
    errors: frozenset[int] = frozenset()
    layers: tuple[Layer, ...] = ()
    where: str = field(default="", compare=False)
    """The step that made it (for messages)."""

    def folded(self) -> tuple[float, ...]:
        """The values after the layers: what the estimator gets per slot."""
        values = np.asarray(self.values, dtype=np.float64)
        for layer in self.layers:
            values = run_layer(values, layer.ops, layer.constants())
        return tuple(float(v) for v in values)


Column = NumberColumn | CategoryColumn | LookupColumn
EstimatorColumn = NumberColumn | LookupColumn
"""What a final estimator reads: numbers only."""


def same_category(ours: Any, theirs: Any) -> bool:
    """Does our category value match an encoder's category (missing matches missing)? Numbers
    match numbers by value, anything else by text."""
    if ours is MISSING:
        return theirs is None or (isinstance(theirs, float | np.floating) and math.isnan(theirs))
    if isinstance(ours, str) or isinstance(theirs, str):
        return str(ours) == str(theirs)
    try:
        return bool(float(ours) == float(theirs))
    except (TypeError, ValueError):
        return False


__all__ = [
    "MISSING",
    "CategoryColumn",
    "Column",
    "EstimatorColumn",
    "Layer",
    "LookupColumn",
    "NumberColumn",
    "Read",
    "run_layer",
    "same_category",
]
