"""scikit-learn ReLU networks (``MLPClassifier``, ``MLPRegressor``) in the exact engine.

Each hidden unit ``v = max(0, a)`` of pre-activation ``a`` is written with the bounds ``[L, U]``
that ``a`` can reach over the problem's domains, computed before the unit is encoded:

- ``U <= 0``: the unit is the constant 0 (no variable);
- ``L >= 0``: the unit is ``a`` itself (no variable: the expression is substituted);
- otherwise (an *unstable* unit) a variable ``v`` in ``[0, U]`` and a binary ``s`` with
  ``v >= a``, ``v <= U s``, ``v <= a - L (1 - s)``.

The bounds are tight, never a fixed big M: CE-OCL writes ``M = 1e5``, and with a solver's
integrality tolerance (``s = 1e-6`` passes as 0) that leaves ``0.1`` of slack in ``v``, so the
program calls answers valid that the real network rejects. Here the slack is ``1e-6 max(U, -L)``.

Bounds. Every unit is a linear expression of the program's feature variables and of the unstable
units before it (stable active units are substituted), so bounds come from the expression, not
from a layer's box: a feature's category or allowed value is one choice among its indicators
(their sum is 1), a number off its grid either stays or lies on the grid, every other variable
has its own bounds (an unstable unit ``[0, U]``). On the first layer this is the exact range over
the domains; deeper, it is interval arithmetic on the unstable units, tighter than plain interval
arithmetic on the layer before (the stable units cancel). Each bound is then widened by a relative
``1e-9`` so the real model's float64 ``matmul`` never leaves it (a unit called stable is stable).

Outputs. A binary ``MLPClassifier``'s one output unit is the log-odds of class 1 (its
``predict_proba`` is the logistic of it): link ``logit``. A multi-class one's outputs are the
softmax's inputs: link ``logit`` with ``classes``. An ``MLPRegressor``'s one output is the value.
The encoding is checked at the original instance against the real model's output.

Size. The program's difficulty is its number of binaries, the unstable units. Measured on
COMPAS (CE-OCL's setting, ``benchmarks/ceocl_table2.py``: 7 inputs behind ``StandardScaler``, one
hidden layer of 100 units, 30 rejected rows): every answer proven optimal, a median of 0.93 s a row
(p90 1.5 s), 2.8 s with the trust region, on a busy 2-core machine. And on 4 integer inputs
(1,500 synthetic rows, ``ClassGoal(confidence=0.7)``, three rejected rows, HiGHS, 30 s limit; the
binaries include the features'):

=============  ========  ========================  ======================
hidden layers  binaries  seconds (three rows)      status
=============  ========  ========================  ======================
(25,)          33        0.12, 0.11, 0.04          optimal
(50,)          57        1.22, 0.27, 0.21          optimal
(100,)         108       2.42, 0.20, 1.01          optimal
(200,)         207       20.5, 2.66, 1.95          optimal
(50, 50)       107       30.0, 7.43, 15.6          feasible (limit), optimal, optimal
=============  ========  ========================  ======================

A second layer costs more than its binaries say (its bounds are looser); past about 200 unstable
units a solve takes minutes, hence the limit.

Beyond :data:`MAX_UNSTABLE_UNITS` unstable units the network is refused (``auto`` takes local
search, ``engine="exact"`` says why); beyond :data:`MAX_HIDDEN_UNITS` hidden units it is refused
before any bound is computed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from counterplan.planning.features import BooleanFeature, CategoricalFeature
from counterplan.planning.structure.errors import NotEncodableError
from counterplan.solver.exact.highs import load_highspy, new_highs
from counterplan.solver.exact.milp import INF, Expr, Milp, add
from counterplan.solver.exact.program import FeatureVars, Formulation, Lin, ModelInputs, Output, evaluate

MAX_UNSTABLE_UNITS = 200
"""Unstable units (each a binary) the exact engine takes: see the measured table above."""
MAX_HIDDEN_UNITS = 4096
"""Hidden units the exact engine reads at all (stable or not)."""
MAX_TIGHTENED_UNITS = 400
"""Units of a layer after the first whose bounds are tightened by linear programs (two each),
when their interval bounds leave them unstable."""
TIGHTEN_ITERATIONS = 2000
"""Simplex iterations of each of those linear programs (its duals give a valid bound even when
it stops early)."""
BOUND_PAD = 1e-9
"""Each pre-activation bound is widened by this times the size of the terms that make it."""

FloatArray = npt.NDArray[np.float64]


@dataclass
class _Space:
    """The variables a network's units are written in, and what is known of them."""

    variables: list[int] = field(default_factory=list)
    """Program variable of each column of a unit's coefficient row."""
    lower: list[float] = field(default_factory=list)
    upper: list[float] = field(default_factory=list)
    choices: list[list[int]] = field(default_factory=list)
    """Groups of columns of which exactly one is 1 (a category's or an allowed value's indicators)."""
    numbers: list[tuple[list[int], FloatArray, float, float]] = field(default_factory=list)
    """Numbers written in several variables (a number off its grid: steps and stay): columns,
    the value's coefficients, and the value's least and greatest feasible value."""

    def column(self, var: int, lower: float, upper: float) -> int:
        self.variables.append(var)
        self.lower.append(lower)
        self.upper.append(upper)
        return len(self.variables) - 1


@dataclass
class Layer:
    """One hidden layer: its units' pre-activation bounds, and its unstable units' variables."""

    lower: FloatArray
    upper: FloatArray
    units: list[tuple[int, int, int]] = field(default_factory=list)
    """(unit, its value's variable, its binary) of each unstable unit."""

    @property
    def unstable(self) -> int:
        """Units that switch on and off over the domains (each a binary)."""
        return len(self.units)


@dataclass
class NetworkOutput(Output):
    """A network's output, and its hidden layers as encoded."""

    estimator: Any = None
    layers: list[Layer] = field(default_factory=list)

    def unit_values(self, model_row: FloatArray) -> dict[int, float]:
        """Each unit variable's value (and binary) when the network reads ``model_row``: a
        complete warm start, with :meth:`Formulation.assignment`'s feature values."""
        out: dict[int, float] = {}
        values = np.asarray(model_row, dtype=np.float64).reshape(1, -1)
        for layer, w, b in zip(self.layers, self.estimator.coefs_, self.estimator.intercepts_, strict=False):
            values = values @ np.asarray(w, dtype=np.float64) + np.asarray(b, dtype=np.float64)
            if self.estimator.activation == "relu":
                values = np.maximum(values, 0.0)
            for j, v, s in layer.units:
                out[v] = float(min(values[0, j], layer.upper[j]))
                out[s] = float(values[0, j] > 0.0)
        return out


def check_network(estimator: Any) -> None:
    """Refuse what the program cannot state, naming it."""
    kind = type(estimator).__name__
    activation = getattr(estimator, "activation", None)
    if activation not in ("relu", "identity"):
        raise NotEncodableError(
            f"{kind} with activation {activation!r}: only 'relu' (and 'identity') hidden layers are piecewise linear"
        )
    out = getattr(estimator, "out_activation_", None)
    outputs = int(getattr(estimator, "n_outputs_", 1))
    if kind == "MLPRegressor" and outputs != 1:
        raise NotEncodableError(f"an MLPRegressor with {outputs} outputs")
    if kind == "MLPClassifier" and not (out == "softmax" or (out == "logistic" and outputs == 1)):
        raise NotEncodableError(f"an MLPClassifier with {outputs} {out} outputs (multi-label)")
    hidden = sum(int(np.shape(w)[1]) for w in estimator.coefs_[:-1])
    if hidden > MAX_HIDDEN_UNITS:
        raise NotEncodableError(f"{kind} has {hidden} hidden units; the exact engine reads at most {MAX_HIDDEN_UNITS}")


class TooManyUnstableUnitsError(NotEncodableError):
    """More hidden units switch on and off over the domains than the engine takes: a count that
    tighter bounds can lower (:attr:`~counterplan.solver.exact.program.Formulation.tighten_bounds`)."""


def encode_network(
    formulation: Formulation, estimator: Any, inputs: ModelInputs, original: FloatArray
) -> NetworkOutput:
    """The network's output as linear expressions of the program's variables (see the module)."""
    check_network(estimator)
    kind = type(estimator).__name__
    layers, lins, outputs = _network(formulation, estimator, inputs, original)
    output = NetworkOutput(lins[0], "value" if kind == "MLPRegressor" else "logit", "", estimator=estimator)
    output.layers = layers
    if len(lins) > 1:
        output.classes = lins
    sizes = ", ".join(str(layer.lower.size) for layer in layers)
    output.description = f"{kind} ({sizes}), {sum(layer.unstable for layer in layers)} unstable units"
    _check_original(formulation, output, original, outputs)
    return output


def _network(
    formulation: Formulation, estimator: Any, inputs: ModelInputs, original: FloatArray
) -> tuple[list[Layer], list[Lin], FloatArray]:
    """Layer by layer, into the program: the bounds and unit variables, the output expressions,
    and the outputs at the original (numpy's forward pass, as scikit-learn's)."""
    kind = type(estimator).__name__
    milp = formulation.milp
    weights = [np.asarray(w, dtype=np.float64) for w in estimator.coefs_]
    biases = [np.asarray(b, dtype=np.float64) for b in estimator.intercepts_]
    space, post, constant = _inputs(formulation, inputs, original)
    relu = estimator.activation == "relu"
    layers: list[Layer] = []
    values = np.asarray(original, dtype=np.float64).reshape(1, -1)
    unstable = 0
    for layer, (w, b) in enumerate(zip(weights[:-1], biases[:-1], strict=True)):
        formulation.check_stop()
        pre = _widen(w.T @ post, len(space.variables))
        pre_constant = w.T @ constant + b
        lower, upper = _bounds(space, pre, pre_constant)
        values = values @ w + b
        if not relu:
            layers.append(Layer(lower, upper))
            post, constant = pre, pre_constant
            continue
        values = np.maximum(values, 0.0)
        free = np.flatnonzero((lower < 0.0) & (upper > 0.0))
        tighten = formulation.tighten_bounds and unstable and 0 < free.size <= MAX_TIGHTENED_UNITS
        if tighten:  # after a layer of binaries: LP bounds
            _tighten(milp, space, pre, pre_constant, free, lower, upper, check_stop=formulation.check_stop)
            free = np.flatnonzero((lower < 0.0) & (upper > 0.0))
        unstable += free.size
        if unstable > MAX_UNSTABLE_UNITS:
            raise TooManyUnstableUnitsError(
                f"{kind} is too large for the exact engine: more than {MAX_UNSTABLE_UNITS} of its hidden units "
                f"switch on and off over the domains, each a binary ({unstable} by hidden layer {layer + 1})"
            )
        active = lower >= 0.0
        post = np.where(active[:, None], pre, 0.0)
        constant = np.where(active, pre_constant, 0.0)
        new = np.zeros((post.shape[0], free.size))
        encoded = Layer(lower, upper)
        for n, j in enumerate(free):
            low, high = float(lower[j]), float(upper[j])
            v = milp.var(f"mlp/h{layer}[{j}]", 0.0, high)
            s = milp.binary(f"mlp/on{layer}[{j}]")
            a_terms, a_constant = _lin(space, pre[j], float(pre_constant[j]))
            milp.row(add({v: 1.0}, a_terms, -1.0), a_constant, INF)  # v >= a
            milp.row({v: 1.0, s: -high}, -INF, 0.0)  # v <= U s
            milp.row(add({v: 1.0, s: -low}, a_terms, -1.0), -INF, a_constant - low)  # v <= a - L (1 - s)
            space.column(v, 0.0, high)
            new[j, n] = 1.0
            encoded.units.append((int(j), v, s))
        layers.append(encoded)
        post = np.hstack([post, new])
    w, b = weights[-1], biases[-1]
    out = _widen(w.T @ post, len(space.variables))
    out_constant = w.T @ constant + b
    lins = [_lin(space, out[k], float(out_constant[k])) for k in range(out.shape[0])]
    return layers, lins, (values @ w + b)[0]


def _tighten(  # noqa: PLR0917 - one call site
    milp: Milp,
    space: _Space,
    rows: FloatArray,
    constant: FloatArray,
    units: npt.NDArray[np.intp],
    lower: FloatArray,
    upper: FloatArray,
    *,
    check_stop: Callable[[], None],
) -> None:
    """Tighten ``units``' bounds (in place) to the least and greatest value of their expressions
    over the program's linear relaxation. Each bound comes from weak duality with the LP's row
    duals, computed here: valid whatever the LP solver's tolerances. Without highspy (OR-Tools
    alone) the interval bounds stay as they are: looser, still sound."""
    try:
        highspy = load_highspy()
    except ImportError:
        return
    h = new_highs(highspy)
    h.silent()
    h.setOptionValue("threads", 1)
    h.setOptionValue("presolve", "off")  # each LP starts from the last one's basis
    h.setOptionValue("simplex_iteration_limit", TIGHTEN_ITERATIONS)  # deterministic, unlike a time limit
    n = milp.n_vars
    box_low = np.array(milp.lower)
    box_high = np.array(milp.upper)
    h.addVars(n, box_low, box_high)
    matrix = np.zeros((len(milp.rows), n))
    row_low = np.array([low for _, low, _ in milp.rows])
    row_high = np.array([high for _, _, high in milp.rows])
    for i, (terms, _, _) in enumerate(milp.rows):
        for var, coef in terms.items():
            matrix[i, var] = coef
    starts = np.zeros(len(milp.rows), dtype=np.int32)
    indices: list[int] = []
    coefficients: list[float] = []
    for i, (terms, _, _) in enumerate(milp.rows):
        starts[i] = len(indices)
        indices.extend(terms)
        coefficients.extend(terms.values())
    inf = highspy.kHighsInf
    h.addRows(
        len(milp.rows),
        np.maximum(row_low, -inf),
        np.minimum(row_high, inf),
        len(indices),
        starts,
        np.array(indices, dtype=np.int32),
        np.array(coefficients, dtype=np.float64),
    )
    columns = np.arange(n, dtype=np.int32)
    variables = np.array(space.variables)
    for j in units:
        check_stop()  # two LPs a unit: the tightening counts against the phase's time limit
        objective = np.zeros(n)
        np.add.at(objective, variables, rows[j])
        for sign in (1.0, -1.0):  # the least value of +a, then of -a
            h.changeColsCost(n, columns, sign * objective)
            h.run()
            duals = np.array(h.getSolution().row_dual, dtype=np.float64)
            if duals.size != len(milp.rows) or not np.isfinite(duals).all():
                continue
            least = _dual_bound(sign * objective, duals, matrix, (row_low, row_high), (box_low, box_high))
            if sign > 0:
                lower[j] = max(lower[j], least + float(constant[j]))
            else:
                upper[j] = min(upper[j], -least + float(constant[j]))
            if sign > 0 and lower[j] >= 0.0:
                break  # stable: its upper bound is not used


def _dual_bound(
    cost: FloatArray,
    duals: FloatArray,
    matrix: FloatArray,
    row_bounds: tuple[FloatArray, FloatArray],
    box: tuple[FloatArray, FloatArray],
) -> float:
    """A lower bound on ``cost . x`` over ``row_low <= matrix x <= row_high``, ``box``: for any
    ``y``, ``cost . x = (cost - matrix' y) . x + y . (matrix x)``, each part at least its least
    value over its box. Both signs of the solver's duals are tried (their convention aside); the
    result is widened for rounding."""
    row_low, row_high = row_bounds
    box_low, box_high = box
    best = -INF
    for signed in (duals, -duals):
        y = np.where(((signed > 0.0) & ~np.isfinite(row_low)) | ((signed < 0.0) & ~np.isfinite(row_high)), 0.0, signed)
        reduced = cost - matrix.T @ y
        from_rows = y * np.where(y > 0.0, row_low, 0.0) + y * np.where(y < 0.0, row_high, 0.0)
        with np.errstate(invalid="ignore"):
            from_box = np.where(reduced == 0.0, 0.0, np.minimum(reduced * box_low, reduced * box_high))
        if not np.isfinite(from_box).all():
            continue
        value = float(from_rows.sum() + from_box.sum())
        size = float(np.abs(from_rows).sum() + np.abs(from_box).sum() + np.abs(matrix.T @ y).sum())
        best = max(best, value - BOUND_PAD * size - 1e-12)
    return best


def _inputs(
    formulation: Formulation, inputs: ModelInputs, original: FloatArray
) -> tuple[_Space, FloatArray, FloatArray]:
    """The model's input columns as a matrix over the variables they use, and a constant each."""
    milp = formulation.milp
    space = _Space()
    index: dict[int, int] = {}

    def note(variables: Iterable[int]) -> list[int]:
        for var in variables:
            if var not in index:
                index[var] = space.column(var, milp.lower[var], milp.upper[var])
        return [index[var] for var in variables]

    for terms, _ in inputs.columns:
        note(terms)
    for f in formulation.features:  # what is known of the variables of a feature the model reads
        if any(var in index for var in (f.value[0] if f.categories is None else owned(f.categories))):
            _known(formulation, f, space, note)
    matrix, constant = _matrix(inputs, index, len(space.variables), original)
    return space, matrix, constant


def _matrix(
    inputs: ModelInputs, index: dict[int, int], width: int, original: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Each input column's coefficients on the space's columns (``index``: variable -> column),
    and its constant (a constant column: its value at the original)."""
    matrix = np.zeros((len(inputs.columns), width))
    constant = np.zeros(len(inputs.columns))
    for c, (terms, c_constant) in enumerate(inputs.columns):
        if not terms:
            value = float(original[c])
            if np.isnan(value):
                raise NotEncodableError(f"column {c} of the network's input is missing at the original")
            constant[c] = value
            continue
        constant[c] = c_constant
        for var, coef in terms.items():
            matrix[c, index[var]] = coef
    return matrix, constant


def _known(formulation: Formulation, f: FeatureVars, space: _Space, note: Callable[[Iterable[int]], list[int]]) -> None:
    """Add what is known of feature ``f``'s variables to ``space``: a choice among indicators (a
    category's or an allowed value's), or a number that stays or lies on its grid."""
    milp = formulation.milp
    problem = formulation.problem
    feature = problem.space.features[f.index]
    if f.categories is not None and isinstance(feature, CategoricalFeature | BooleanFeature):
        single = [ind[0] for _, ind in f.categories if len(ind[0]) == 1 and ind[1] == 0.0]
        if len(single) == len(f.categories):  # one indicator each, their sum 1
            space.choices.append(note([next(iter(t)) for t in single if milp.upper[next(iter(t))] >= 0.5]))
            note(owned(f.categories))
    elif f.allowed is not None:
        space.choices.append(note(f.allowed[0]))
    elif f.stay is not None:  # the original, or a value on the grid
        j = f.index
        o = float(problem.space.original[j])
        coefs = np.array(list(f.value[0].values()))
        lowest = min(o, float(problem.space.grid_lower[j]), float(problem.space.lower[j])) - f.value[1]
        highest = max(o, float(problem.space.grid_upper[j]), float(problem.space.upper[j])) - f.value[1]
        space.numbers.append((note(f.value[0]), coefs, lowest, highest))


def owned(categories: list[tuple[Any, Lin]]) -> list[int]:
    """The variables of a feature's category indicators."""
    return [var for _, (terms, _) in categories for var in terms]


def _widen(matrix: FloatArray, columns: int) -> FloatArray:
    """``matrix`` with zero columns for the variables added since it was made."""
    if matrix.shape[1] == columns:
        return matrix
    return np.hstack([matrix, np.zeros((matrix.shape[0], columns - matrix.shape[1]))])


def _bounds(space: _Space, rows: FloatArray, constant: FloatArray) -> tuple[FloatArray, FloatArray]:
    """The least and greatest value of each row's expression over the space (widened by
    :data:`BOUND_PAD`): a choice among indicators adds its least and greatest coefficient; a number
    off its grid adds its value's range (along the value's coefficients) and the rest's box."""
    lower = np.asarray(space.lower)
    upper = np.asarray(space.upper)
    free = np.ones(rows.shape[1], dtype=bool)
    low = constant.copy()
    high = constant.copy()
    for group in space.choices:
        free[group] = False
        if group:
            low += rows[:, group].min(axis=1)
            high += rows[:, group].max(axis=1)
    for columns, coefs, lowest, highest in space.numbers:
        free[columns] = False
        part = rows[:, columns]
        # part . x = scale (value - its constant) + rest . x, with rest orthogonal to the value's coefficients
        scale = part @ coefs / float(coefs @ coefs)
        rest = part - np.outer(scale, coefs)
        below = np.minimum(scale * lowest, scale * highest) + _interval(rest, lower[columns], upper[columns])[0]
        above = np.maximum(scale * lowest, scale * highest) + _interval(rest, lower[columns], upper[columns])[1]
        plain_low, plain_high = _interval(part, lower[columns], upper[columns])
        low += np.maximum(below, plain_low)
        high += np.minimum(above, plain_high)
    plain_low, plain_high = _interval(rows[:, free], lower[free], upper[free])
    low += plain_low
    high += plain_high
    size = np.abs(constant) + np.abs(rows) @ np.maximum(np.abs(lower), np.abs(upper))
    pad = BOUND_PAD * size + 1e-12
    return low - pad, high + pad


def _interval(rows: FloatArray, lower: FloatArray, upper: FloatArray) -> tuple[FloatArray, FloatArray]:
    positive = np.maximum(rows, 0.0)
    negative = np.minimum(rows, 0.0)
    return positive @ lower + negative @ upper, positive @ upper + negative @ lower


def _lin(space: _Space, row: FloatArray, constant: float) -> Lin:
    terms: Expr = {}
    for k in np.flatnonzero(row):
        var = space.variables[k]
        terms[var] = terms.get(var, 0.0) + float(row[k])
    return terms, constant


def _check_original(formulation: Formulation, output: NetworkOutput, original: FloatArray, outputs: FloatArray) -> None:
    """At the original, the encoding (with each unit at its real value) gives numpy's forward
    pass, and that gives the real model's prediction."""
    x = np.zeros(formulation.milp.n_vars)
    start = formulation.assignment_of_original()
    x[: start.size] = start
    for var, value in output.unit_values(original).items():
        x[var] = value
    for k, lin in enumerate(output.classes or [output.lin]):
        encoded = evaluate(lin, x)
        if not math.isclose(encoded, outputs[k], rel_tol=1e-7, abs_tol=1e-7):
            raise NotEncodableError(f"the network's encoding gives {encoded!r} at the original, numpy {outputs[k]!r}")
    estimator = output.estimator
    row = np.asarray(original, dtype=np.float64).reshape(1, -1)
    if output.link == "value":
        real = np.asarray(estimator.predict(row), dtype=np.float64).reshape(-1)
        mine = outputs
    else:
        real = np.asarray(estimator.predict_proba(row), dtype=np.float64).reshape(-1)
        if outputs.size == 1:
            logit = float(outputs[0])
            p = 1.0 / (1.0 + math.exp(-logit)) if logit >= 0.0 else math.exp(logit) / (1.0 + math.exp(logit))
            mine = np.array([1.0 - p, p])
        else:
            e = np.exp(outputs - outputs.max())
            mine = e / e.sum()
    if not np.allclose(mine, real, rtol=1e-7, atol=1e-9):
        raise NotEncodableError(f"the network's forward pass gives {mine!r} at the original, the model {real!r}")
