"""Shaving rows down to the decision boundary: the one place boundary refinement is written.

A search gets close to the boundary by chance; refinement gets there deterministically, as a
batched many-way bisection, in two forms:

* :class:`Bisection`, the best row alone (the boundary-polish phase runs it): each iteration
  scores, in one call, every changed number at each point of a grid between its value and its
  bracket (the nearest value known to be on the wrong side of the boundary; at first, its
  original value), all changed numbers moved back together by each fraction of a grid, and each
  changed feature reverted. When the winner moved one number, the grid point just past it
  becomes that number's new bracket (the others go back to their originals, which another
  feature's move may have made wrong), so the next grid is ``grid_size`` times finer.
* :class:`Refiner` and :func:`refine_rows`, many rows at once (the polish's other routes, the
  answers phase), each row with its own brackets and no joint moves.

The other answers of a ``num_counterfactuals = k`` request come from the pool of feasible rows the
search scored on its way, so they usually carry changes they do not need (a feature that can go
back to its original value with the answer still valid: DiCE's and CARLA's *redundancy*) and
moves larger than needed. This module removes both, for every row together: each round scores,
in one model call for all rows,

* every changed feature of every row reverted, and
* every changed number of every row moved to each point of a grid between its value and its
  bracket (the nearest value known to be worse; at first the original value),

and gives each row its best candidate when that candidate scores strictly better. A row's
winning grid move sets that number's bracket to the grid point just past it, so the next grid
is finer. Rows stop at their first round without an improvement, all stop after
``max_rounds``. A better score than a feasible row's is feasible too, so refinement can
never make an answer invalid.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from counterplan.solver.core.protocol import BatchScorer, EncodedSpace, FloatMatrix, score_batches

_REVERT = -1.0
_JOINT_OWNER = -1
_REVERT_OWNER = -2


class Bisection:
    """The best row's bisection to the boundary, one iteration per model call (see the module).

    ``candidates(best)`` gives an iteration's rows and which feature each moves (-1: all numbers
    together, -2: a revert); after the solve took the winner, ``moved(...)`` sets the brackets.
    """

    def __init__(self, space: EncodedSpace, grid_size: int) -> None:
        self.space = space
        self.bracket = space.original.copy()
        """``bracket[j]``: the value of feature ``j`` known to be past the boundary."""
        self._fractions = np.linspace(0.0, 1.0, grid_size + 1)[1:-1]  # strictly between

    def candidates(self, best: FloatMatrix) -> tuple[FloatMatrix, np.ndarray]:
        """One iteration's rows around ``best``, and which feature each moves (or joint/revert)."""
        space, bracket, fractions = self.space, self.bracket, self._fractions
        changed = np.flatnonzero((best != space.original) & space.mutable)
        if changed.size == 0:
            return np.empty((0, best.size)), np.empty(0, dtype=np.intp)
        numeric = changed[space.graded[changed]]
        grid_owner = np.repeat(numeric, fractions.size)  # every changed number, each point of its grid
        grid = np.repeat(best.reshape(1, -1), grid_owner.size, axis=0)
        start = best[grid_owner]
        grid[np.arange(grid_owner.size), grid_owner] = start + np.tile(fractions, numeric.size) * (
            bracket[grid_owner] - start
        )
        blocks: list[FloatMatrix] = [grid]
        owners: list[np.ndarray] = [grid_owner]
        if numeric.size > 1:
            gap = np.zeros_like(best)
            gap[numeric] = space.original[numeric] - best[numeric]
            blocks.append(best + np.outer(fractions, gap))
            owners.append(np.full(fractions.size, _JOINT_OWNER))
        reverts = np.repeat(best.reshape(1, -1), changed.size, axis=0)
        reverts[np.arange(changed.size), changed] = space.original[changed]
        blocks.append(reverts)
        owners.append(np.full(changed.size, _REVERT_OWNER))
        X = space.snap(np.vstack(blocks))
        keep = (best != X).any(axis=1)
        return np.asarray(X[keep], dtype=np.float64), np.concatenate(owners)[keep]

    def moved(self, previous: FloatMatrix, X: FloatMatrix, owners: np.ndarray, winner: int) -> None:
        """The best moved from ``previous`` to ``X[winner]``: the grid point just past the winner,
        towards its old bracket, is the moved number's new bracket; the others start afresh."""
        j = int(owners[winner])
        old = self.bracket[j] if j >= 0 else 0.0
        self.bracket = self.space.original.copy()  # another feature moved: old brackets may be wrong
        if j >= 0:
            values = X[owners == j, j]
            side = np.sign(previous[j] - old)
            beyond = values[(values - X[winner, j]) * side < 0.0]
            self.bracket[j] = beyond[np.argmin(np.abs(beyond - X[winner, j]))] if beyond.size else old


class Refiner:
    """The refinement of a set of rows as a stepper, so a caller can share each model call.

    ``candidates()`` gives the next round's rows; ``update(scores)`` takes their scores and
    moves every row to its best strictly better candidate. ``active`` says whether another
    round may help.
    """

    def __init__(self, rows: FloatMatrix, scores: FloatMatrix, space: EncodedSpace, grid_size: int) -> None:
        self.rows = np.array(rows, dtype=np.float64, copy=True)
        self.scores = np.array(scores, dtype=np.float64, copy=True)
        self._space = space
        self._grid_size = grid_size
        self._brackets = np.repeat(space.original.reshape(1, -1), self.rows.shape[0], axis=0)
        self._active_rows = np.ones(self.rows.shape[0], dtype=bool)
        self._fractions = np.linspace(0.0, 1.0, grid_size + 1)[1:-1]
        self._pending: tuple[np.ndarray, np.ndarray, FloatMatrix] | None = None
        self._X = np.empty((0, self.rows.shape[1]))

    @property
    def active(self) -> bool:
        """Some row improved in the last round (or none has run yet)."""
        return bool(self._active_rows.any())

    def candidates(self) -> FloatMatrix:
        """The active rows' reverts and grid moves, to be scored and given to :meth:`update`."""
        X, owner, feature, fraction = _candidates(
            self.rows, self._brackets, self._active_rows, self._space, self._fractions
        )
        self._X, self._pending = X, (owner, feature, fraction)
        if X.shape[0] == 0:
            self._active_rows[:] = False
        return X

    def update(self, candidate_scores: FloatMatrix) -> None:
        """Move each row to its best candidate when that one scores strictly better."""
        if self._pending is None:
            return
        owner, feature, fraction = self._pending
        self._pending = None
        self._active_rows[:] = False
        if owner.size == 0:
            return
        order = np.lexsort((*(-candidate_scores.T[::-1]), owner))  # by owner, then best first
        _, first = np.unique(owner[order], return_index=True)
        pick = order[first]
        winners = pick[_rowwise_better(candidate_scores[pick], self.scores[owner[pick]])]
        if winners.size == 0:
            return
        rows, brackets = self.rows, self._brackets
        i, j = owner[winners], feature[winners]
        moved = fraction[winners] != _REVERT
        step = np.minimum(fraction[winners] + 1.0 / self._grid_size, 1.0)
        brackets[i[moved], j[moved]] = (rows[i, j] + step * (brackets[i, j] - rows[i, j]))[moved]
        rows[i] = self._X[winners]
        self.scores[i] = candidate_scores[winners]
        self._active_rows[i] = True


def refine_rows(
    rows: FloatMatrix,
    scores: FloatMatrix,
    space: EncodedSpace,
    scorer: BatchScorer,
    *,
    grid_size: int = 8,
    max_rounds: int = 8,
    should_stop: Callable[[], bool] | None = None,
) -> tuple[FloatMatrix, FloatMatrix]:
    """Refined copies of ``rows`` and their scores; each row is at least as good as given.

    Parameters
    ----------
    rows, scores:
        ``(m, n_features)`` candidates and their ``(m, 5)`` scores.
    space, scorer:
        The problem, through the engines' protocol; one model call per round (per 4,096 rows).
    grid_size:
        A bracket is cut into this many parts per round; 1 tries reverts only.
    max_rounds:
        At most this many rounds.
    should_stop:
        Asked before every round; True ends the refinement with what it has (the solve's
        time limit, a cancelled request).
    """
    refiner = Refiner(rows, scores, space, grid_size)
    for _ in range(max_rounds):
        if should_stop is not None and should_stop():
            break
        X = refiner.candidates()
        if X.shape[0] == 0:
            break
        refiner.update(score_batches(scorer, X))
        if not refiner.active:
            break
    return refiner.rows, refiner.scores


def _rowwise_better(a: FloatMatrix, b: FloatMatrix) -> np.ndarray:
    """Rows of ``a`` lexicographically better than the same rows of ``b``."""
    diff = a - b
    nonzero = diff != 0.0
    first = nonzero.argmax(axis=1)
    return np.asarray(nonzero.any(axis=1) & (diff[np.arange(a.shape[0]), first] > 0.0), dtype=bool)


def _candidates(
    rows: FloatMatrix,
    brackets: FloatMatrix,
    active: np.ndarray,
    space: EncodedSpace,
    fractions: FloatMatrix,
) -> tuple[FloatMatrix, np.ndarray, np.ndarray, FloatMatrix]:
    """Every active row's reverts and grid moves; for each: its row, feature and fraction."""
    original = space.original
    changed = (rows != original) & space.mutable & active[:, None]
    owner, feature = np.nonzero(changed)
    reverts = rows[owner]
    reverts[np.arange(owner.size), feature] = original[feature]
    numeric = space.graded[feature]
    g_owner = np.repeat(owner[numeric], fractions.size)
    g_feature = np.repeat(feature[numeric], fractions.size)
    g_fraction = np.tile(fractions, int(numeric.sum()))
    moves = rows[g_owner]
    start = rows[g_owner, g_feature]
    moves[np.arange(g_owner.size), g_feature] = start + g_fraction * (brackets[g_owner, g_feature] - start)
    X = np.vstack([reverts, moves])
    X = space.snap(X)
    all_owner = np.concatenate([owner, g_owner])
    all_feature = np.concatenate([feature, g_feature])
    all_fraction = np.concatenate([np.full(owner.size, _REVERT), g_fraction])
    keep = (rows[all_owner] != X).any(axis=1)
    return np.asarray(X[keep], dtype=np.float64), all_owner[keep], all_feature[keep], all_fraction[keep]
