"""Random-key genomes of action plans, decoded for a whole population at once.

After CSCF (Naumann and Ntoutsi), its Figure 3: a plan over N actions is 2N keys in [0, 1]. The
first N say which actions run and in which order: an action whose key is above 0.5 is inactive,
and the active ones run in the order of their keys, smallest first. The second N are each
action's value: interpolated into an ``add`` action's delta range, or an index into a ``set``
action's values (:meth:`counterplan.planning.actions.Action.value_of`). So keys (0.70, 0.45, 0.02) give the
sequence a3, a2. Every key vector is a valid plan (possibly empty), which is what lets a
biased random-key genetic algorithm cross over and mutate without repair.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from counterplan.planning.actions import Action
from counterplan.planning.space import FeatureSpace, FloatMatrix

IntMatrix = npt.NDArray[np.intp]
ACTIVE_BELOW = 0.5


@dataclass(frozen=True)
class Decoded:
    """A population's plans: per row, the actions in order (``-1`` past its length) and every
    action's value (delta or encoded value; read only where the action runs)."""

    order: IntMatrix
    lengths: IntMatrix
    values: FloatMatrix

    @property
    def empty(self) -> npt.NDArray[np.bool_]:
        """Rows whose plan has no action."""
        return np.asarray(self.lengths == 0)


def decode(keys: FloatMatrix, actions: list[Action], space: FeatureSpace) -> Decoded:
    """The plans of ``keys`` (``(n, 2 N)`` for N ``actions``)."""
    n, width = keys.shape
    count = len(actions)
    if width != 2 * count:
        raise ValueError(f"a genome of {count} actions has {2 * count} keys, given {width}")
    first, second = keys[:, :count], keys[:, count:]
    active = first <= ACTIVE_BELOW
    ranked = np.where(active, first, np.inf)
    order = np.argsort(ranked, axis=1, kind="stable")
    lengths = active.sum(axis=1)
    order = np.where(np.arange(count)[None, :] < lengths[:, None], order, -1)
    values = np.column_stack([action.value_of(second[:, j], space) for j, action in enumerate(actions)])
    return Decoded(order=order.astype(np.intp), lengths=lengths.astype(np.intp), values=values.reshape(n, count))
