"""Learned constraints: a feature that follows others through a fitted model (CE-OCL).

Some features are not free: a loan's duration goes with its amount, a person's age with the years
a degree takes. When the relation is known only from data, it is learned: a scikit-learn
regressor fitted to predict the dependent feature from its inputs. A counterfactual must respect
it, so the dependent feature is not searched: it is computed.

``form="additive"`` (the default: CE-OCL's structural form, after Karimi et al.) keeps the
individual's own deviation from the relation: ``x_t = x̂_t + f(x) - f(x̂)``, so the original
stays where it is and only the change of the inputs moves the dependent feature.
``form="value"`` sets ``x_t = f(x)`` outright.

The result is put on the dependent feature's grid (its integers or decimals; its allowed value
nearest) and clipped to its domain. Every engine sees the same rows: the local engines score
each candidate with its dependent features computed (:meth:`LearnedRelations.apply`), and the
exact engine encodes the regressor (a linear model exactly; others as
:mod:`counterplan.solver.exact.encoders.relations` says) with the dependent feature tied to it within half a grid
step, and every answer is computed again here before it is reported.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from counterplan.planning.errors import ProblemError, one_line
from counterplan.planning.halving import Run, call_in_halves
from counterplan.planning.space import FeatureSpace, FloatMatrix

RelationForm = Literal["additive", "value"]


@dataclass(frozen=True)
class LearnedConstraint:
    """``target`` follows ``inputs`` through ``model`` (a fitted regressor reading those columns,
    in that order, as a plain array)."""

    target: str
    inputs: tuple[str, ...]
    model: Any
    form: RelationForm = "additive"

    @classmethod
    def of(cls, target: str, inputs: Sequence[str], model: Any, form: RelationForm = "additive") -> LearnedConstraint:
        """Checked construction (names are checked against a problem later); ``inputs`` may be
        one name (as a text it would be read letter by letter, each letter a feature)."""
        if not hasattr(model, "predict"):
            raise ProblemError("relations.model", f"{type(model).__name__} has no predict: give a fitted regressor")
        if form not in ("additive", "value"):
            raise ProblemError("relations.form", f"must be 'additive' or 'value', given {form!r}")
        names = (inputs,) if isinstance(inputs, str) else tuple(inputs)
        if not names or target in names:
            raise ProblemError("relations.inputs", "give the input features, without the target itself")
        return cls(target, names, model, form)


class LearnedRelations:
    """The relations of one problem, bound to its feature space."""

    def __init__(self, space: FeatureSpace, relations: Sequence[LearnedConstraint]) -> None:
        self.space = space
        self.relations = tuple(relations)
        names = list(space.names)
        targets = [r.target for r in self.relations]
        for r in self.relations:
            for name in (r.target, *r.inputs):
                if name not in names:
                    raise ProblemError("relations", f"relation of {r.target!r}: no feature {name!r}")
            gaps = [name for name in (r.target, *r.inputs) if _gap(space, names.index(name), r, name)]
            if gaps:  # its missing code is no value: the relation would compute from a stand-in number
                raise ProblemError(
                    "relations", f"relation of {r.target!r}: the instance has no value for {gaps[0]!r} (it is missing)"
                )
            j = names.index(r.target)
            if space.nominal[j]:
                raise ProblemError("relations", f"relation of {r.target!r}: the target must be a number")
            if any(space.nominal[names.index(i)] for i in r.inputs):
                raise ProblemError("relations", f"relation of {r.target!r}: its inputs must be numbers")
            if any(i in targets for i in r.inputs):
                raise ProblemError("relations", f"relation of {r.target!r}: an input is computed too (no chains)")
            if not space.mutable[j]:
                raise ProblemError(
                    "relations", f"relation of {r.target!r}: it changes with its inputs, so it must be mutable"
                )
        if len(set(targets)) != len(targets):
            raise ProblemError("relations", "two relations compute the same feature")
        self.target_columns = [names.index(r.target) for r in self.relations]
        self.input_columns = [[names.index(i) for i in r.inputs] for r in self.relations]
        self._baseline = [
            _at_original(r, space.original[cols]) for r, cols in zip(self.relations, self.input_columns, strict=True)
        ]

    def raw(self, X: FloatMatrix) -> FloatMatrix:
        """``(n, n_relations)``: each relation's value for each row, before its grid."""
        out = np.empty((X.shape[0], len(self.relations)))
        for k, (r, cols, j) in enumerate(zip(self.relations, self.input_columns, self.target_columns, strict=True)):
            predicted = _predicted(r, X[:, cols])
            if r.form == "additive":
                predicted = float(self.space.original[j]) + predicted - self._baseline[k]
            out[:, k] = predicted
        return out

    def apply(self, X: FloatMatrix) -> FloatMatrix:
        """``X`` with every dependent feature computed from its inputs, on its grid and in its
        domain (a new matrix). The original row is left as it is, and so is the dependent
        feature's original value where the relation's value holds it (:meth:`_held`):
        an original off its grid (two decimals on a grid of one) is not moved by rounding alone,
        as the exact engine, whose row keeps the feature within that tolerance, leaves it."""
        if X.shape[0] == 0:
            return X
        out = np.array(X, dtype=np.float64, copy=True)
        values = self.raw(out)
        original = np.all(out == self.space.original, axis=1)
        for k, j in enumerate(self.target_columns):
            stays = original | (np.abs(values[:, k] - self.space.original[j]) <= self._held(j))
            out[:, j] = np.where(stays, self.space.original[j], self.snap(j, values[:, k]))
        return out

    def snap(self, j: int, values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """Values onto feature ``j``'s grid (nearest allowed value, integer or decimal) and domain."""
        space = self.space
        values = np.where(np.isfinite(values), values, space.original[j])
        if j in space.allowed:
            grid = np.asarray(space.allowed[j], dtype=np.float64)
            return np.asarray(grid[np.abs(values[:, None] - grid[None, :]).argmin(axis=1)], dtype=np.float64)
        if space.grid.gridded[j]:
            low, high = space.grid.ends(space.grid_lower[j], space.grid_upper[j], j)
            return np.clip(space.grid.round(values, j), low, high)
        return np.clip(values, space.lower[j], space.upper[j])

    def broken(self, X: FloatMatrix) -> npt.NDArray[np.int64]:
        """Per row (already computed by :meth:`apply`), how many relations its domain could not
        hold: the relation's value lies outside the dependent feature's domain (or grid), or its
        model gave none (it raised, or answered NaN)."""
        if X.shape[0] == 0:
            return np.zeros(0, dtype=np.int64)
        values = self.raw(X)
        original = np.all(self.space.original == X, axis=1)
        count = np.zeros(X.shape[0], dtype=np.int64)
        for k, j in enumerate(self.target_columns):
            near = np.abs(X[:, j] - values[:, k]) <= self._held(j)
            far = ~near  # a value the relation did not give (NaN: its model failed there) is no value
            count += (far & ~original).astype(np.int64)
        return count

    def _held(self, j: int) -> float:
        """:meth:`tolerance` with a rounding error's room (1e-9 of the original's size): how far
        the feature may sit from the relation's value and still hold it."""
        return self.tolerance(j) + 1e-9 * max(1.0, abs(float(self.space.original[j])))

    def tolerance(self, j: int) -> float:
        """How far the dependent feature may sit from the relation's value: half a grid step
        (rounding), or 1e-9 of its range for a continuous feature."""
        grid = self.space.grid
        if grid.gridded[j]:
            return float(grid.values(0.5, j))
        return 1e-9 * max(float(self.space.upper[j] - self.space.lower[j]), 1.0)


def _gap(space: FeatureSpace, column: int, relation: LearnedConstraint, name: str) -> bool:
    """A missing original the relation would read as a number (its missing code): the target's
    own (the additive form starts from it; filled, it is no longer computed), or an input's that
    may be filled or that the value form reads. A missing input that stays missing under the
    additive form is harmless: its code is the same on both sides of ``f(x) - f(x̂)``."""
    if not space.missing[column]:
        return False
    return name == relation.target or relation.form == "value" or bool(space.mutable[column])


def _at_original(relation: LearnedConstraint, inputs: npt.NDArray[np.float64]) -> float:
    """The relation's value at the original: one finite number, or the relation is refused by
    name (a model that fails there, or answers NaN or several numbers, computes nothing: every
    answer would keep the feature as it is and call the relation held)."""
    where = f"relation of {relation.target!r}"
    try:
        value = np.asarray(relation.model.predict(inputs.reshape(1, -1)), dtype=np.float64).reshape(-1)
    except Exception as error:  # the user's regressor: any failure is its own
        failed = one_line(str(error), 300)  # the message only, bounded
        raise ProblemError("relations", f"{where}: its model failed on the original's inputs: {failed}") from None
    if value.shape != (1,) or not np.isfinite(value[0]):
        raise ProblemError(
            "relations",
            f"{where}: its model must give one finite number per row; at the original: {value[:3].tolist()}",
        )
    return float(value[0])


def _predicted(relation: LearnedConstraint, inputs: FloatMatrix) -> npt.NDArray[np.float64]:
    """The relation's model on each row of ``inputs``; NaN where it raised or gave no number
    (found by halving the call, as the score calculator finds a model's failing rows), which
    :meth:`LearnedRelations.broken` counts as a broken relation."""
    out = np.full(inputs.shape[0], np.nan)

    def call(run: Run) -> None:
        values = np.asarray(relation.model.predict(inputs[run.rows]), dtype=np.float64).reshape(-1)
        if values.shape != (run.size,):
            raise ValueError(f"{values.size} numbers for {run.size} rows")
        out[run.rows] = values

    call_in_halves(inputs.shape[0], call, lambda run, _: None if run.size == 1 else run.halves())
    return out
