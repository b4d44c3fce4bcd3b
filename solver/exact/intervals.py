"""A tree ensemble's program without its numbers' values: each number stands in the interval its
threshold binaries put it in, and is placed there when a solution is decoded.

A tree ensemble reads a number only through its thresholds, so the program's big-M rows tying a
number's value to its threshold binaries are bookkeeping: the binaries (ordered: above a higher
threshold implies above a lower one) decide an interval, and within it the distance is least at
the point nearest the original. That distance is the interval row's right side
(:attr:`~counterplan.solver.exact.program.Formulation.interval_lower`; for a number of allowed
values ``sum |v - o| pick_v``). Dropping the values and putting those expressions in place of
the distances leaves a program of 0/1 variables with the model's own coefficients.

Two backends solve it:

* CP-SAT always (:mod:`counterplan.solver.exact.cpsat`), scaled to integers;
* HiGHS and SCIP (:func:`interval_program`) when a number spans more than
  :data:`~counterplan.solver.exact.milp.WIDE_STEPS`
  grid steps. There the big-M rows are as wide as the number's range in steps, and the solvers'
  tolerances (about 1e-6, relative) let a binary at ``1 - 1e-9`` leave hundreds of steps
  unaccounted for; their bounds went wrong with it. Fuzzed trees on numbers of a billion grid
  steps had SCIP prove a worse answer optimal on 16 of 40 problems and HiGHS on 2, while CP-SAT,
  on the values-free program, was right on all.

A solution is decoded by putting each number at the point of its interval nearest the original
(on its grid, for a number on one), with its distance and "changed" recomputed
(:func:`place_numbers`); every row of the full program is then checked (:func:`meets_rows`).
Not stated here (:class:`Unsupported`): relations and trust regions (rows over the numbers'
values), the encoding without the interval rows, a program of no tree ensemble.
"""

from __future__ import annotations

import importlib
import math
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from counterplan.planning.grid import GridUnit
from counterplan.solver.exact.milp import INF, ROWS_PER_CHECK, WIDE_STEPS, Expr, Milp
from counterplan.solver.exact.program import Formulation, Lin

FloatArray = npt.NDArray[np.float64]

TOLERANCE = 1e-6
"""A decoded solution must meet every row of the full program to this (HiGHS's primal tolerance)."""
_NO_GRID = GridUnit(1.0, 1.0)
"""A number without a grid: its variable is its value (steps of 1, unrounded)."""


class Unsupported(Exception):  # noqa: N818 - a signal to fall back, not an error
    """The program is not one stated without its values; another backend solves it whole."""


@dataclass
class Number:
    """A number whose value and distance are dropped: where its value lies, decided at decoding."""

    var: int
    """Its value variable (the value itself, or its count of grid steps)."""
    unit: GridUnit | None
    """For a number on a grid, the grid's arithmetic (its variable counts steps)."""
    original: float
    """The original, in the variable's units."""
    low: float
    high: float
    bands: list[tuple[int, float, float]] = field(default_factory=list)
    """(threshold binary, the value's largest below it, its least above it), in value units."""
    distance: int | None = None
    changed: int | None = None
    stay: int | None = None
    """For a number whose original lies off its grid: 1 keeps the original."""


Alone = tuple[int, int, list[tuple[int, bool]]]
"""A number off its grid that moves without crossing a threshold: (its boolean's index, past the
full program's variables; its ``stay``; its thresholds, each with True when 1 means crossed)."""


@dataclass
class Reduction:
    """What dropping the values makes of a program: the distances' expressions, the numbers to
    place at decoding, the off-grid numbers' booleans, and the rows over what is left."""

    substitutes: dict[int, Lin]
    numbers: list[Number]
    alone: list[Alone]
    rows: list[tuple[Expr, float, float]] = field(default_factory=list)
    """The off-grid numbers' rows, then the full program's rows without the values, the
    distances substituted (a row whose expression is empty is a constant that fails: infeasible)."""

    @property
    def dropped(self) -> set[int]:
        """The full program's variables the reduced one does without: values and distances."""
        return {n.var for n in self.numbers} | set(self.substitutes)


def check(formulation: Formulation) -> None:
    """Raise :class:`Unsupported` saying why the program is not stated without its values."""
    problem = formulation.problem
    if not formulation.leaves:
        raise Unsupported("only a tree ensemble's program is stated without its values")
    if not formulation.interval_distance:
        raise Unsupported("the program needs the interval rows")
    if problem.relations is not None or problem.trust_region is not None:
        raise Unsupported("relations and trust regions are rows over the numbers' values")


def reduction(formulation: Formulation, should_stop: Callable[[], bool] | None = None) -> Reduction | None:
    """The program of ``formulation`` without its numbers' values (its current rows); None when
    ``should_stop`` says stop while the rows are translated (asked every :data:`ROWS_PER_CHECK`).
    Raises :class:`Unsupported` for a program it does not state."""
    check(formulation)
    reduced = _substitutes(formulation)
    if not _translate(formulation.milp, reduced, should_stop):
        return None
    return reduced


def _substitutes(formulation: Formulation) -> Reduction:
    """The distance variables' expressions, the numbers whose values are dropped, and the
    booleans of the numbers off their grid (see :func:`_off_grid`)."""
    milp = formulation.milp
    space = formulation.problem.space
    substitutes: dict[int, Lin] = {}
    numbers: dict[int, Number] = {}
    for f in formulation.features:
        if f.distance is None:
            continue
        o = float(space.original[f.index])
        if f.allowed is not None:
            picks, values = f.allowed
            substitutes[f.distance] = ({p: abs(float(v) - o) for p, v in zip(picks, values, strict=True)}, 0.0)
            continue
        substitutes[f.distance] = formulation.interval_lower.get(f.distance, ({}, 0.0))
        if f.stay is not None:
            numbers[f.index] = _off_grid_number(formulation, f.index)
            continue
        (var,) = f.value[0]
        unit = f.grid[1] if f.grid is not None else None
        home = unit.steps(o) if unit is not None else o
        number = Number(var, unit, home, milp.lower[var], milp.upper[var], distance=f.distance, changed=f.changed)
        if not number.low - 1e-9 <= home <= number.high + 1e-9:
            raise Unsupported(f"feature {f.index}: its original lies outside its domain")
        numbers[f.index] = number
    for var, j, _ in formulation.thresholds:
        if j in numbers:
            below, above = formulation.bands[var]
            numbers[j].bands.append((var, below, above))
    alone: list[Alone] = []
    for number in numbers.values():
        if number.stay is not None:
            alone.append(_off_grid(formulation, number, substitutes, milp.n_vars + len(alone)))
    return Reduction(substitutes, list(numbers.values()), alone, rows=[_alone_row(a) for a in alone])


def _off_grid_number(formulation: Formulation, j: int) -> Number:
    """A number whose original lies off its grid: its grid steps, within the grid's domain."""
    f = formulation.features[j]
    assert f.grid is not None and f.distance is not None
    steps, unit = f.grid
    domain = formulation.domain
    low, high = unit.step_ends(float(domain.grid_lower[j]), float(domain.grid_upper[j]))
    home = unit.steps(float(formulation.problem.space.original[j]))
    return Number(steps, unit, home, low, high, distance=f.distance, changed=f.changed, stay=f.stay)


def _off_grid(formulation: Formulation, number: Number, substitutes: dict[int, Lin], index: int) -> Alone:
    """Leaving an original off its grid costs at least the way to the nearest grid value even
    when no threshold is crossed (the interval row's sum is 0 there): a boolean (variable
    ``index``), at least ``1 - stay - sum(crossed)``, adds that least distance to the number's
    distance. At every integral point the sum is then the distance to the interval's nearest grid
    value (exactly, unless a threshold lies between the original and its nearer grid value: then
    a lower bound, and the final check's gap says so)."""
    assert number.stay is not None and number.distance is not None and number.unit is not None
    nearest = min(max(number.original, number.low), number.high)
    candidates = [k for k in (math.floor(nearest), math.ceil(nearest)) if number.low <= k <= number.high]
    least = number.unit.value(min((abs(k - number.original) for k in candidates), default=0.0))
    sides = formulation.original_sides
    o = number.unit.value(number.original)
    crossed = [(var, not sides.get(var, o > (below + above) / 2.0)) for var, below, above in number.bands]
    terms, constant = substitutes[number.distance]
    substitutes[number.distance] = ({**terms, index: least}, constant)
    return index, number.stay, crossed


def _alone_row(alone: Alone) -> tuple[Expr, float, float]:
    """An off-grid number's boolean ``b``: ``b + stay + sum(crossed) >= 1``, a row of the reduced
    program (a crossing that 0 means is ``1 - var``)."""
    index, stay, crossed = alone
    terms: Expr = {index: 1.0, stay: 1.0}
    lower = 1.0
    for var, one in crossed:
        terms[var] = terms.get(var, 0.0) + (1.0 if one else -1.0)
        lower -= 0.0 if one else 1.0
    return terms, lower, INF


def _translate(milp: Milp, reduced: Reduction, should_stop: Callable[[], bool] | None) -> bool:
    """The full program's rows over the kept variables (the distances substituted) into
    ``reduced.rows``; a row of a number's value is its bookkeeping, met by the placing (a row of
    that value alone bounds it). False when ``should_stop`` said stop."""
    dropped = {n.var for n in reduced.numbers}
    for k, (terms, low, high) in enumerate(milp.rows):
        if should_stop is not None and k % ROWS_PER_CHECK == 0 and should_stop():
            return False
        if dropped.intersection(terms):
            if len(terms) == 1:
                _tighten(reduced.numbers, terms, low, high)
            continue
        expr, constant = substituted(terms, reduced.substitutes)
        if expr:
            reduced.rows.append((expr, low - constant, high - constant))
        elif not low - 1e-9 <= constant <= high + 1e-9:
            reduced.rows.append(({}, 1.0, INF))  # a constant row that fails: infeasible
    return True


def _tighten(numbers: list[Number], terms: Expr, low: float, high: float) -> None:
    """A row on one value variable alone bounds it (a threshold's side held out of its margin)."""
    ((var, c),) = terms.items()
    for n in numbers:
        if n.var == var:
            lo, hi = (low / c, high / c) if c > 0 else (high / c, low / c)
            n.low, n.high = max(n.low, lo), min(n.high, hi)


def substituted(terms: Expr, substitutes: dict[int, Lin]) -> Lin:
    """``terms`` with each distance variable replaced by its expression."""
    out: Expr = {}
    constant = 0.0
    for i, c in terms.items():
        if i in substitutes:
            sub, sub_constant = substitutes[i]
            constant += c * sub_constant
            for k, v in sub.items():
                out[k] = out.get(k, 0.0) + c * v
        else:
            out[i] = out.get(i, 0.0) + c
    return {k: v for k, v in out.items() if v != 0.0}, constant


def place_numbers(reduced: Reduction, formulation: Formulation, x: FloatArray) -> FloatArray | None:
    """The full program's variables of a reduced solution ``x`` (its kept variables set): each
    number at its interval's point nearest the original; None when that fails a row of the full
    program."""
    for n in reduced.numbers:
        if not _place(n, x):
            return None
    for f in formulation.features:  # a number of allowed values: its distance from its pick
        if f.allowed is not None and f.distance is not None:
            picks, values = f.allowed
            chosen = float(sum(float(v) * x[p] for p, v in zip(picks, values, strict=True)))
            x[f.distance] = abs(chosen - float(formulation.problem.space.original[f.index]))
    return x if meets_rows(formulation.milp, x) else None


def _place(n: Number, x: FloatArray) -> bool:
    """Put number ``n`` at the point of its interval (its threshold binaries' in ``x``) nearest
    its original, with its distance and "changed"; False when the interval is empty."""
    unit = n.unit or _NO_GRID
    if n.stay is not None and x[n.stay] > 0.5:  # the original kept, off its grid
        x[n.var] = 0.0
        if n.distance is not None:
            x[n.distance] = 0.0
        return True
    low, high = n.low, n.high
    for var, below, above in n.bands:
        if x[var] > 0.5:
            low = max(low, unit.steps(above))
        else:
            high = min(high, unit.steps(below))
    if n.unit is not None:
        low, high = math.ceil(low - 1e-9), math.floor(high + 1e-9)
    if low > high + 1e-9:
        return False
    at = float(min(max(n.original, low), high))
    if n.stay is not None:  # onto the grid: the nearer of the grid values around the original
        at = float(min((k for k in (math.floor(at), math.ceil(at)) if low <= k <= high), key=lambda k: abs(k - at)))
    x[n.var] = at
    if n.distance is not None:
        x[n.distance] = unit.value(abs(at - n.original))
    if n.changed is not None:
        x[n.changed] = float(at != n.original)
    return True


def wide(formulation: Formulation) -> bool:
    """Whether a number of the program spans more than
    :data:`~counterplan.solver.exact.milp.WIDE_STEPS` grid steps (a number
    without a grid: its range over its smallest threshold band, the margin a split keeps)."""
    bands: dict[int, float] = {}
    for var, j, _ in formulation.thresholds:
        below, above = formulation.bands[var]
        bands[j] = min(bands.get(j, INF), above - below)
    milp = formulation.milp
    for f in formulation.features:
        if f.grid is not None:
            steps = f.grid[0]
            if milp.upper[steps] - milp.lower[steps] > WIDE_STEPS:
                return True
        elif f.allowed is None and f.categories is None and len(f.value[0]) == 1 and f.index in bands:
            (var,) = f.value[0]
            if bands[f.index] > 0.0 and (milp.upper[var] - milp.lower[var]) / bands[f.index] > WIDE_STEPS:
                return True
    return False


@dataclass
class IntervalProgram:
    """The reduced program as a MILP for HiGHS and SCIP: the full program's variables, the
    values and distances fixed at 0 and in no row, then one 0/1 variable per off-grid number."""

    milp: Milp
    reduced: Reduction
    formulation: Formulation

    def start(self, x: FloatArray | None) -> FloatArray | None:
        """A full solution as the reduced program's start: its kept variables, the values and
        distances at 0, each off-grid number's boolean 1 where it leaves its original without
        crossing a threshold."""
        if x is None:
            return None
        y = np.zeros(self.milp.n_vars)
        n = self.formulation.milp.n_vars
        y[:n] = np.asarray(x, dtype=np.float64)
        y[sorted(self.reduced.dropped)] = 0.0
        for index, stay, crossed in self.reduced.alone:
            crossings = sum(round(float(x[v])) if one else 1 - round(float(x[v])) for v, one in crossed)
            y[index] = float(round(float(x[stay])) == 0 and crossings == 0)
        return y

    def full(self, y: FloatArray) -> FloatArray | None:
        """The full program's solution of a reduced one (None when a number's interval is empty
        or a row of the full program fails)."""
        x = np.asarray(y[: self.formulation.milp.n_vars], dtype=np.float64).copy()
        integral = [i for i, whole in enumerate(self.formulation.milp.integer) if whole]
        x[integral] = np.rint(x[integral])
        return place_numbers(self.reduced, self.formulation, x)


def interval_program(formulation: Formulation, should_stop: Callable[[], bool] | None = None) -> IntervalProgram | None:
    """``formulation``'s program without its values, for HiGHS and SCIP; None when stopped while
    it is built. Raises :class:`Unsupported` for a program it does not state."""
    reduced = reduction(formulation, should_stop)
    if reduced is None:
        return None
    full = formulation.milp
    milp = Milp(list(full.lower), list(full.upper), list(full.integer), list(full.names))
    for i in reduced.dropped:
        milp.lower[i] = milp.upper[i] = 0.0
        milp.integer[i] = False
    for index, _, _ in reduced.alone:
        assert milp.binary(f"leaves-off-grid[{index}]") == index
    for expr, low, high in reduced.rows:
        milp.row(expr, low, high)
    objective, offset = substituted(full.objective, reduced.substitutes)
    milp.minimise(objective, offset + full.objective_offset)
    return IntervalProgram(milp, reduced, formulation)


@dataclass
class _Rows:
    """A program's rows as a CSR matrix and their bounds, for as many rows as it had."""

    count: int
    matrix: object
    low: FloatArray
    high: FloatArray


_matrices: dict[int, tuple[weakref.ref[Milp], _Rows]] = {}
_matrices_lock = threading.Lock()


def meets_rows(milp: Milp, x: FloatArray) -> bool:
    """Every row and bound of ``milp`` holds at ``x`` (to :data:`TOLERANCE`): one sparse product
    (the matrix built once per program and number of rows: the callback checks every answer,
    under the GIL the batch's other rows need)."""
    lower = np.asarray(milp.lower)
    upper = np.asarray(milp.upper)
    if np.any(x < lower - TOLERANCE) or np.any(x > upper + TOLERANCE):
        return False
    matrix, low, high = _matrix(milp)
    total = np.asarray(matrix @ x, dtype=np.float64)  # type: ignore[operator]
    pad = TOLERANCE * np.maximum(1.0, np.abs(total))
    return bool(np.all(total >= low - pad) and np.all(total <= high + pad))


def _matrix(milp: Milp) -> tuple[object, FloatArray, FloatArray]:
    """``milp``'s rows as a CSR matrix and their bounds (rebuilt when rows were added); kept
    while the program lives (a program is a mutable dataclass: keyed by its identity)."""
    with _matrices_lock:
        cached = _matrices.get(id(milp))
        if cached is not None and cached[0]() is milp and cached[1].count == len(milp.rows):
            rows = cached[1]
            return rows.matrix, rows.low, rows.high
    sparse = importlib.import_module("scipy.sparse")
    pointers = [0]
    columns: list[int] = []
    values: list[float] = []
    for terms, _, _ in milp.rows:
        columns.extend(terms)
        values.extend(terms.values())
        pointers.append(len(columns))
    matrix = sparse.csr_matrix((values, columns, pointers), shape=(len(milp.rows), milp.n_vars))
    low = np.array([row[1] for row in milp.rows], dtype=np.float64)
    high = np.array([row[2] for row in milp.rows], dtype=np.float64)
    key = id(milp)

    def forget(dead: object) -> None:
        # Not under the lock: the collector calls this on whichever thread allocates, which may be
        # one inside the locked blocks here (it waited for its own lock for good: CP-SAT's callback
        # threads hung a whole solve). A dict's get and pop are atomic under the GIL; a newer
        # program that took the same id keeps its entry.
        entry = _matrices.get(key)
        if entry is not None and entry[0] is dead:
            _matrices.pop(key, None)

    with _matrices_lock:
        _matrices[key] = (weakref.ref(milp, forget), _Rows(len(milp.rows), matrix, low, high))
    return matrix, low, high


__all__ = [
    "IntervalProgram",
    "Number",
    "Reduction",
    "Unsupported",
    "check",
    "interval_program",
    "meets_rows",
    "place_numbers",
    "reduction",
    "substituted",
    "wide",
]
