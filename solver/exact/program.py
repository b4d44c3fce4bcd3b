"""The exact engine's program as data: the variables of each feature, the model's output, and the
map between rows and variables.

Every part of the engine writes into these: the formulation makes the features' variables and the
goal rows (:mod:`counterplan.solver.exact.formulation`), the encoders the model's output
(:mod:`counterplan.solver.exact.encoders`), the trust region its hull. Keeping them in a module of
their own, that imports none of those, is what lets each import this one without a circle.
"""

from __future__ import annotations

import functools
import math
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from counterplan.planning.grid import GridUnit
from counterplan.planning.models import model_input
from counterplan.planning.problem import CounterfactualProblem
from counterplan.planning.structure.trees import Tree
from counterplan.solver.exact.milp import Expr, Milp

FloatArray = npt.NDArray[np.float64]

Lin = tuple[Expr, float]
"""A linear expression and its constant."""


REACH_TOLERANCE = 1e-7
"""Relative slack on ``reach`` (and its absolute counterpart below): rounding in the distance's
terms must never cut off a solution at the reach itself."""


def reach_limit(reach: float) -> float:
    """The largest objective a program narrowed to ``reach`` must keep (``reach`` and a slack)."""
    return reach * (1.0 + REACH_TOLERANCE) + REACH_TOLERANCE


def scaled(lin: Lin, factor: float, shift: float = 0.0) -> Lin:
    """``factor * lin + shift``."""
    terms, constant = lin
    return {k: v * factor for k, v in terms.items()}, constant * factor + shift


def evaluate(lin: Lin, x: FloatArray) -> float:
    """A linear expression's value at ``x``."""
    terms, constant = lin
    return constant + math.fsum(c * x[i] for i, c in terms.items())


class BuildStopped(Exception):  # noqa: N818 - a signal, not an error
    """The phase's time limit or a stop request ended the building of the program: a large
    ensemble takes seconds to encode, and that time counts against the limit."""


@dataclass(frozen=True)
class Domains:
    """Each feature's range and its grid's ends, as the program states them: the space's, or
    narrower where the warm start's distance bounds how far a feature can move
    (:func:`counterplan.solver.exact.formulation.build`'s ``reach``)."""

    lower: FloatArray
    upper: FloatArray
    grid_lower: FloatArray
    grid_upper: FloatArray

    @classmethod
    def of(cls, problem: CounterfactualProblem) -> Domains:
        """The space's own domains."""
        space = problem.space
        return cls(
            np.asarray(space.lower, dtype=np.float64).copy(),
            np.asarray(space.upper, dtype=np.float64).copy(),
            np.asarray(space.grid_lower, dtype=np.float64).copy(),
            np.asarray(space.grid_upper, dtype=np.float64).copy(),
        )


@dataclass
class FeatureVars:
    """One feature's variables: its encoded value, and what the model reads of it."""

    index: int
    value: Lin
    """The encoded value (a number, or a category's index)."""
    categories: list[tuple[Any, Lin]] | None = None
    """For a category or a boolean: the model's value of each category and its indicator."""
    changed: int | None = None
    distance: int | None = None
    grid: tuple[int, GridUnit] | None = None
    """For a number on a grid: the integer variable counting steps, and the grid's arithmetic
    (a value is a count of steps as :class:`~counterplan.planning.grid.GridUnit` writes it)."""
    allowed: tuple[list[int], FloatArray] | None = None
    stay: int | None = None
    """For a number whose original lies off its grid: 1 keeps the original."""


@dataclass
class ModelInputs:
    """The estimator at the end of the pipeline, and the columns it reads as linear expressions."""

    estimator: Any
    columns: list[Lin]
    forbidden: list[Lin] = field(default_factory=list)
    """Indicators that must stay 0: categories an encoder fitted with ``handle_unknown='error'``
    does not know."""
    preprocess: Any = None
    """The fitted preprocessing (a pipeline without its last step, an ONNX graph up to its node),
    or None."""
    tolerance: float = 1e-7
    """How closely the columns' expressions must give the real preprocessing's values at the
    original (an ONNX graph computes them in float32)."""


@dataclass
class Output:
    """The model's output as a linear expression, and what it means."""

    lin: Lin
    link: str
    description: str
    classes: list[Lin] | None = None
    """For a multi-class model: each class's probability (``link`` probability) or score
    (``logit``: the softmax's inputs)."""
    inclusive: bool = False
    """A scorecard's: for ``label``, 0 itself gives class 1 (a score at the cut-off is accepted);
    for ``value``, a range's ends are reached exactly (sums of points, or a tree regressor's sums
    of leaves), kept without a margin."""
    grouped: bool = False
    """A scorecard's: the expression's terms are the formulation's leaves, one of each tree 1, so
    its goal row is tightened (:mod:`counterplan.solver.exact.tighten`)."""


@dataclass
class Formulation:
    """The program, and how to map rows to variables and back."""

    problem: CounterfactualProblem
    milp: Milp
    features: list[FeatureVars]
    output: Output
    distance: Expr
    changes: Expr
    thresholds: list[tuple[int, int, float]] = field(default_factory=list)
    """(variable, feature, raw threshold): the variable is 1 when the feature is above it."""
    bands: dict[int, tuple[float, float]] = field(default_factory=dict)
    """Threshold variable -> the nearest values its feature may take below and above it."""
    margin_scale: float = 1.0
    """Threshold margins, as a multiple of the defaults (wider after the model rejected an answer)."""
    conservative: str | None = None
    """Why the program is stricter than the problem (a multi-class softmax), when it is."""
    original_sides: dict[int, bool] = field(default_factory=dict)
    """Threshold variables of a number whose original is off its grid: the original's side."""
    leaves: list[dict[int, int]] = field(default_factory=list)
    """Per tree: leaf node -> its indicator variable."""
    trees: list[Tree] = field(default_factory=list)
    inputs: ModelInputs | None = None
    fills: list[Callable[[FloatArray, FloatArray], None]] = field(default_factory=list)
    """Set auxiliary variables in a warm start ``(x, row)`` from the values already in ``x``."""
    domains: Domains | None = None
    """The domains the program states (None: the space's); see :attr:`domain`."""
    reach: float | None = None
    """The objective the program was narrowed for (None: not narrowed): every solution whose
    objective is at most this lies in :attr:`domains`, so an optimum at or below it is the whole
    program's optimum."""
    interval_distance: bool = True
    """Tree ensembles: each feature's distance bounded over its threshold intervals, one row per
    feature (the relaxation's convex hull); False, one weaker row per threshold (the encoding
    before it, kept for the benchmark that compares them, ``benchmarks/exact_trees.py``)."""
    leaf_bounds: bool = True
    """Tree ensembles: the model's leaves that cost more than :attr:`reach` fixed at 0
    (:mod:`counterplan.solver.exact.encoders.leaf_costs`); False keeps them (the encoding before
    it, for the benchmark that compares them, ``benchmarks/exact_trees.py``)."""
    interval_lower: dict[int, Lin] = field(default_factory=dict)
    """Tree ensembles: each number's distance variable -> the distance its threshold binaries
    force (the interval row's right side: the distance to the far side of the farthest threshold
    crossed), exact at every integral point; the CP-SAT backend's distance
    (:mod:`counterplan.solver.exact.cpsat`)."""
    structure_only: bool = False
    """The check before a solve (:func:`counterplan.solver.exact.formulation.check`): a tree
    ensemble's trees are read (the tree reader's refusals) but not written, and its output is a
    placeholder of the right link and classes, so the goal's refusals still come."""
    tighten_bounds: bool = True
    """A network's hidden units after the first layer get linear-program bounds (two LPs a unit:
    1.3 s for a (100, 100) network of 20 features); False keeps their interval bounds, looser and
    still sound, so as many units or more count as unstable (the check's first pass:
    :func:`counterplan.solver.exact.formulation.check`)."""
    should_stop: Callable[[], bool] | None = None
    """The phase's stop check (its time limit, a stop request), asked between the costly parts of
    the building (each tree, each layer); see :meth:`check_stop`."""

    @property
    def domain(self) -> Domains:
        """The domains the program states (the space's unless narrowed)."""
        if self.domains is None:
            self.domains = Domains.of(self.problem)
        return self.domains

    def check_stop(self) -> None:
        """Raise :class:`BuildStopped` when the phase must stop: the building is abandoned."""
        if self.should_stop is not None and self.should_stop():
            raise BuildStopped("the time limit (or a stop request) came while the program was being built")

    def decode(self, x: FloatArray) -> FloatArray:
        """The encoded row a solution stands for, exactly on its grid and categories."""
        space = self.problem.space
        row = space.original.copy()
        for f in self.features:
            j = f.index
            if f.changed is not None and x[f.changed] < 0.5:
                continue  # unchanged: exactly the original
            if f.categories is not None:
                row[j] = float(np.argmax([evaluate(indicator, x) for _, indicator in f.categories]))
            elif f.allowed is not None:
                picks, values = f.allowed
                row[j] = float(values[int(np.argmax([x[v] for v in picks]))])
            elif f.grid is not None:
                if f.stay is not None and x[f.stay] > 0.5:
                    continue
                steps, unit = f.grid
                row[j] = unit.value(float(np.rint(x[steps]))) + 0.0
            else:
                row[j] = float(np.clip(evaluate(f.value, x), space.lower[j], space.upper[j]))
        return row

    @functools.cached_property
    def owner_of_var(self) -> dict[int, int]:
        """Each feature variable's feature (built once: tree encodings ask for every split)."""
        out: dict[int, int] = {}
        for f in self.features:
            for v in f.value[0]:
                out[v] = f.index
            for _, (terms, _c) in f.categories or ():
                for v in terms:
                    out[v] = f.index
        return out

    def assignment_of_original(self) -> FloatArray:
        """Every variable's value at the original instance."""
        return self.assignment(self.problem.space.original)

    def assignment(self, row: FloatArray) -> FloatArray:
        """Every variable's value for an encoded row (a warm start)."""
        original = self.problem.space.original
        x = np.zeros(self.milp.n_vars)
        for f in self.features:
            _assign_feature(x, f, float(row[f.index]), float(original[f.index]))
        for var, j, t in self.thresholds:
            staying = var in self.original_sides and row[j] == original[j]
            x[var] = float(self.original_sides[var] if staying else row[j] > t)
        if self.leaves:
            assert self.inputs is not None
            model_row = warm_input_row(self.problem, self.inputs, row)
            for tree, leaves in zip(self.trees, self.leaves, strict=True):
                leaf = tree.leaf(model_row)
                if leaf in leaves:
                    x[leaves[leaf]] = 1.0
        for fill in self.fills:  # auxiliary variables of other encodings, from what is set above
            fill(x, row)
        return x


def _assign_feature(x: FloatArray, f: FeatureVars, value: float, original: float) -> None:
    """Set feature ``f``'s variables in ``x`` for its encoded ``value``."""
    moved = value != original
    if f.changed is not None:
        x[f.changed] = float(moved)
    if f.distance is not None:
        x[f.distance] = abs(value - original)
    if f.categories is not None:
        for k, (_, (terms, _c)) in enumerate(f.categories):
            for v in terms:
                x[v] = float(round(value) == k)
    elif f.allowed is not None:
        picks, values = f.allowed
        for v, allowed in zip(picks, values, strict=True):
            x[v] = float(allowed == value)
    elif f.grid is not None:
        _assign_grid(x, f, value, moved)
    else:
        for v in f.value[0]:
            x[v] = value


def _assign_grid(x: FloatArray, f: FeatureVars, value: float, moved: bool) -> None:
    """A number on a grid: its count of grid steps (and whether it stays at an off-grid original)."""
    assert f.grid is not None
    steps, unit = f.grid
    if f.stay is not None:
        x[f.stay] = float(not moved)
        x[steps] = round(unit.steps(value)) if moved else 0.0
    else:
        x[steps] = round(unit.steps(value))


def model_input_row(problem: CounterfactualProblem, inputs: ModelInputs, row: FloatArray) -> Any:
    """What the final estimator reads for ``row``, computed by the real preprocessing."""
    adapter: Any = problem.model
    data: Any = model_input(row.reshape(1, -1), problem.space, adapter.input_kind)
    if inputs.preprocess is not None:
        data = inputs.preprocess.transform(data)
    if hasattr(data, "toarray"):
        data = data.toarray()
    return np.asarray(data, dtype=np.float64)[0]


class _AtOriginal:
    """What the real model makes of one problem's original, kept while the problem lives: every
    program of a row (the check before the solve, the narrowed program, the whole one, the
    retries, the loosened proof) reads the same values, and each costs a call of the real
    pipeline (about 10 ms for one row of a ColumnTransformer)."""

    def __init__(self) -> None:
        self._kept: weakref.WeakKeyDictionary[CounterfactualProblem, dict[Any, FloatArray]] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()

    def get(self, problem: CounterfactualProblem, key: Any, compute: Callable[[], FloatArray]) -> FloatArray:
        """The value kept for ``problem`` under ``key``, computed on first use (a copy: the
        caller may change it)."""
        with self._lock:
            found = self._kept.get(problem, {}).get(key)
        if found is None:
            found = np.array(compute(), dtype=np.float64)
            with self._lock:
                self._kept.setdefault(problem, {})[key] = found
        return found.copy()


AT_ORIGINAL = _AtOriginal()
"""The real model's values at each problem's original (the model's input row, its output)."""


def original_input_row(problem: CounterfactualProblem, inputs: ModelInputs) -> FloatArray:
    """What the final estimator reads at the original, by the real preprocessing
    (:func:`model_input_row`), computed once per problem."""
    return AT_ORIGINAL.get(problem, "input", lambda: model_input_row(problem, inputs, problem.space.original))


def warm_input_row(problem: CounterfactualProblem, inputs: ModelInputs, row: FloatArray) -> FloatArray:
    """What the final estimator reads for a warm start's ``row``: by the compiled preprocessing
    when the model has one (:mod:`counterplan.planning.fast_path`, checked against the real
    pipeline when compiled; a warm start is a hint, and every answer is checked by the real
    model), else by the real pipeline."""
    adapter: Any = problem.model
    fast_path = getattr(adapter, "fast_path", None)
    path: Any = fast_path(problem.space) if fast_path is not None and getattr(adapter, "fast", False) else None
    if path is None or path.inputs is None or inputs.preprocess is None:
        real: FloatArray = model_input_row(problem, inputs, row)
        return real
    fast: FloatArray = np.asarray(
        path.inputs.transform(row.reshape(1, -1), problem.space.missing_code), dtype=np.float64
    )[0]
    return fast


__all__ = [
    "AT_ORIGINAL",
    "REACH_TOLERANCE",
    "BuildStopped",
    "Domains",
    "FeatureVars",
    "Formulation",
    "Lin",
    "ModelInputs",
    "Output",
    "evaluate",
    "model_input_row",
    "original_input_row",
    "warm_input_row",
    "reach_limit",
    "scaled",
]
