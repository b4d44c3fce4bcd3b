"""The domains of a block's instances, held per layout, so rows of different domains share one program.

On heloc about a third of the rows differ from the others in their domains or kinds: a value
beyond the data's range widens that row's domain, an imputed decimal in a column of whole numbers
makes it a decimal column for that row (:data:`~counterplan.solver.vector.capability.LAYOUT_FIELDS`).
Searched as separate programs, a block of 64 became about 10 programs, each with its own model
calls and per-step numpy work. Here every distinct layout's bounds are rows of ``(layouts,
features)`` arrays and each instance indexes its own (``layout[instance]``): the moves, the scan's
grid and split values, and the rounding onto the grid all read the instance's own bounds, so an
instance searches exactly as it would alone, while the block still makes one model call per step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from counterplan.planning.problem import CounterfactualProblem
from counterplan.planning.space import FeatureSpace
from counterplan.solver.core.protocol import FloatMatrix
from counterplan.solver.vector.capability import same_layout

IntArray = npt.NDArray[np.intp]


class Layouts:
    """Per layout (a distinct set of domains and kinds among a block's problems) its bounds, and
    per instance its layout; the rounding onto each instance's grid."""

    def __init__(self, problems: Sequence[CounterfactualProblem]) -> None:
        self.problems: list[CounterfactualProblem] = []
        """One problem per layout (the first of its instances)."""
        owner: list[int] = []
        for problem in problems:
            found = next((k for k, p in enumerate(self.problems) if same_layout(problem, p)), None)
            if found is None:
                found = len(self.problems)
                self.problems.append(problem)
            owner.append(found)
        self.layout: IntArray = np.asarray(owner, dtype=np.intp)
        spaces = [p.space for p in self.problems]
        self.lower: FloatMatrix = np.vstack([s.lower for s in spaces])
        self.upper: FloatMatrix = np.vstack([s.upper for s in spaces])
        self.grid_lower: FloatMatrix = np.vstack([s.grid_lower for s in spaces])
        self.grid_upper: FloatMatrix = np.vstack([s.grid_upper for s in spaces])
        self.integral: npt.NDArray[np.bool_] = np.vstack([s.integral for s in spaces])
        first = spaces[0]
        self.grid = first.grid
        """The columns' grids (one program's instances share them: ``same_program``)."""
        self._gridded = first.rounded  # (alike in every layout: same_program)
        self._all_gridded = bool(self._gridded.all())
        self.model_space: FeatureSpace = _model_space(spaces)

    @property
    def count(self) -> int:
        """How many layouts."""
        return len(self.problems)

    def to_grid(self, values: FloatMatrix, instances: Any, columns: Any) -> FloatMatrix:
        """``values`` of ``columns`` of ``instances`` (broadcast together) rounded onto their grids
        and into each instance's grid bounds: :meth:`FeatureSpace.to_grid` with the instance's own
        bounds (the same arithmetic, so the same numbers)."""
        layout = self.layout[instances]
        rounded = self.grid.round(values, columns)
        np.maximum(rounded, self.grid_lower[layout, columns], out=rounded)
        np.minimum(rounded, self.grid_upper[layout, columns], out=rounded)
        if not self._all_gridded:
            rounded = np.where(self._gridded[columns], rounded, values).astype(np.float64, copy=False)
        rounded += 0.0  # no -0.0
        return rounded


def _model_space(spaces: Sequence[FeatureSpace]) -> FeatureSpace:
    """The space the block's search calls the model with: the first layout's, except that a
    column some layout holds as decimals is decimal for all (a whole number passes through a
    decimal column unchanged, while a decimal in a column of whole numbers would be rounded)."""
    first = spaces[0]
    if len(spaces) == 1:
        return first
    decimal = ~np.logical_and.reduce([s.integral for s in spaces])
    if not decimal.any():
        return first
    features = [
        next(s.features[j] for s in spaces if not s.integral[j]) if decimal[j] else f
        for j, f in enumerate(first.features)
    ]
    return FeatureSpace(features)
