"""A mixed-integer linear program as plain data, independent of the solver that solves it.

The exact engine's formulation writes into a :class:`Milp` (variables with bounds and
integrality, sparse linear rows, a linear objective); a backend (:mod:`counterplan.solver.exact.highs`)
solves it. Keeping the program as data lets a second backend (OR-Tools, which the scorecard
issue brings with optbinning) take the same formulation, and lets tests inspect it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

INF = float("inf")
ROWS_PER_CHECK = 2000
"""Rows translated or loaded between two looks at the stop check (a 100-tree forest has about 25,000)."""
ZERO_TOLERANCE = 1e-9
"""The size at or below which SCIP (``numerics/epsilon``) and HiGHS (``small_matrix_value``) take
a coefficient for zero and drop it from its row: a grid of nine decimals enters its rows at
exactly 1e-9 per step, and both dropped it."""
LIFTED_SMALLEST = 1e-6
"""What :func:`lifted` brings a row's smallest coefficient up to (a thousand times the zero tolerance)."""
LIFT_CEILING = 1e12
"""No coefficient or finite side of a lifted row beyond this: HiGHS refuses a matrix value from
1e15, and refused the whole program's rows with it (a scorecard's closeness row, its noise terms
at 1e-32 beside two 1s, lifted by 2^86): it solved a program without rows, "optimal" at 0."""
SMALL_ROW = 1e-3
"""A row whose every term moves it by less than this (its coefficient times its variable's largest
magnitude), and whose finite sides are below it too, is multiplied by a power of two that brings
that reach near 1 (:func:`lifted`): the solvers' feasibility tolerance (1e-7 for HiGHS, 1e-6 for
SCIP) is absolute, and a row that lives below it binds nothing."""
NEGLIGIBLE = 1e-12
"""A row's term whose reach (its coefficient times its variable's largest magnitude) is at most
this fraction of the row's largest term's reach moves the row by less than the solvers can tell:
:func:`lifted` drops it rather than letting it set the lift."""
COST_RANGE = (1e-3, 1e3)
"""The objective coefficients a continuous variable is handed over with as it is; outside, the
variable is rescaled (:func:`column_scales`)."""

WIDE_STEPS = 1e7
"""A number spanning more grid steps than this is beyond what HiGHS's and SCIP's tolerances (about
1e-6, relative) tell apart. Its count of steps is a continuous variable (rounded onto the grid when
decoded; a step is then less than 1e-7 of its range), handed over in units of its magnitude
(:func:`column_scales`), and a tree ensemble's program over it goes to them without its values
(:mod:`~counterplan.solver.exact.intervals`). Fuzzed depth-3 trees, 30-40 problems each: SCIP
proved worse answers optimal on 9 to 16 of them at 6e8 to 6e9 steps, and on none at 6e7 steps or
fewer (HiGHS: 2 of 40 at 6e9); the limit keeps a factor of six below the widest that never failed.
The demo's income (cents up to about 2e5) spans about 2e7 steps."""
MAGNITUDE_SCALED = 1e6
"""A continuous variable outside the objective whose bounds reach beyond this is handed over in
units of its magnitude (:func:`column_scales`)."""

Expr = dict[int, float]
"""A linear expression: variable index -> coefficient (a constant travels beside it)."""


@dataclass
class Milp:
    """Variables, rows ``lower <= a.x <= upper`` and a linear objective to minimise."""

    lower: list[float] = field(default_factory=list)
    upper: list[float] = field(default_factory=list)
    integer: list[bool] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    rows: list[tuple[Expr, float, float]] = field(default_factory=list)
    objective: Expr = field(default_factory=dict)
    objective_offset: float = 0.0

    @property
    def n_vars(self) -> int:
        """Number of variables."""
        return len(self.lower)

    def var(self, name: str, lower: float, upper: float, integer: bool = False) -> int:
        """Add a variable; returns its index."""
        if lower > upper:
            raise ValueError(f"variable {name}: lower bound {lower} above upper bound {upper}")
        self.lower.append(float(lower))
        self.upper.append(float(upper))
        self.integer.append(integer)
        self.names.append(name)
        return len(self.lower) - 1

    def binary(self, name: str) -> int:
        """Add a 0/1 variable."""
        return self.var(name, 0.0, 1.0, integer=True)

    def row(self, expr: Mapping[int, float], lower: float = -INF, upper: float = INF) -> None:
        """Add ``lower <= expr <= upper`` (zero coefficients dropped)."""
        terms = {int(k): float(v) for k, v in expr.items() if v != 0.0}
        if not terms:
            if lower > 1e-9 or upper < -1e-9:
                self._never()
            return
        self.rows.append((terms, float(lower), float(upper)))

    def _never(self) -> None:
        """A constant row that cannot hold (a goal no reachable leaf meets, the immutables having
        decided every split): kept as a row the solver sees cannot hold (a 0/1 variable fixed at
        0 that must be 1), so the program is solved and reported infeasible through the same path
        as any other, proof included, rather than raising while it is built (which ended the
        solve with an error, never a proof)."""
        never = self.var("constant_row_fails", 0.0, 0.0, integer=True)
        self.rows.append(({never: 1.0}, 1.0, INF))

    def minimise(self, expr: Mapping[int, float], offset: float = 0.0) -> None:
        """Set the objective."""
        self.objective = {int(k): float(v) for k, v in expr.items() if v != 0.0}
        self.objective_offset = offset

    def value(self, expr: Mapping[int, float], x: npt.NDArray[np.float64], constant: float = 0.0) -> float:
        """``expr`` evaluated at ``x``."""
        return constant + float(sum(c * x[i] for i, c in expr.items()))


@dataclass(frozen=True)
class MilpResult:
    """What a backend found."""

    status: str
    """``optimal``, ``feasible`` (a solution, not proven: a limit stopped the search),
    ``infeasible``, or ``no solution`` (stopped before finding one)."""
    x: npt.NDArray[np.float64] | None
    objective: float
    bound: float
    gap: float
    nodes: int
    seconds: float
    deterministic_seconds: float | None = None
    """CP-SAT's deterministic time for the solve (None from the other backends): its measure of the
    work done, the same on a busy machine as on a quiet one, so a limit in it keeps answers
    independent of the load (the tie-break's budget, :mod:`counterplan.solver.exact.phase`)."""


def or_the_start(result: MilpResult, milp: Milp, start: npt.NDArray[np.float64] | None) -> MilpResult:
    """``result``, or the warm start as a ``feasible`` result when the solver was stopped before it
    reported a solution of its own. The start is feasible (the caller's promise, as for HiGHS,
    whose callback reports it as its first incumbent), so a stop never loses it: SCIP, stopped or
    abandoned before its first solution, reports none, not even the hint it was given, and
    CP-SAT stopped in its presolve (a 2 s improvement under load) reports none either."""
    if result.x is not None or start is None or result.status == "infeasible":
        return result
    x = np.asarray(start, dtype=np.float64).copy()
    objective = milp.value(milp.objective, x, milp.objective_offset)
    return MilpResult("feasible", x, objective, result.bound, float("inf"), result.nodes, result.seconds)


def trivial_bound(milp: Milp) -> float:
    """The least the objective can be over the variables' bounds alone (0 for a distance: every
    term is a non-negative weight times a non-negative variable). Always a valid lower bound."""
    terms = np.array(list(milp.objective.items()), dtype=np.float64).reshape(-1, 2)
    index = terms[:, 0].astype(np.intp)
    lower = np.asarray(milp.lower, dtype=np.float64)[index]
    upper = np.asarray(milp.upper, dtype=np.float64)[index]
    with np.errstate(invalid="ignore"):  # 0 * inf: a zero coefficient is never stored
        least = np.minimum(terms[:, 1] * lower, terms[:, 1] * upper)
    return float(least.sum()) + milp.objective_offset


def proof_bound(milp: Milp, result: MilpResult) -> tuple[float, float]:
    """The result's bound and gap, the bound never worse than :func:`trivial_bound` nor above
    the objective: a solver stopped before its first bound reports -inf (gap inf) where 0 is
    known for a distance. The gap is HiGHS's, ``|objective - bound| / |objective|`` (0 when they
    meet, inf without a solution)."""
    bound = max(result.bound, trivial_bound(milp))
    if result.x is None:
        return bound, INF
    if bound == result.bound and np.isfinite(result.gap):  # the solver's own bound stands: so does its gap
        return min(bound, result.objective), result.gap
    bound = min(bound, result.objective)
    if result.objective == bound:
        return bound, 0.0
    if not np.isfinite(bound) or result.objective == 0.0:
        return bound, INF
    return bound, abs(result.objective - bound) / abs(result.objective)


def lifted(
    terms: Expr, lower: float, upper: float, magnitudes: Sequence[float] | None = None
) -> tuple[Expr, float, float]:
    """The row ``lower <= terms <= upper`` as a solver should be given it: multiplied by a power of
    two (exact in floating point, and the same solutions) when a coefficient lies at or below
    :data:`ZERO_TOLERANCE`, so that its smallest is at least :data:`LIFTED_SMALLEST`, or when the
    whole row lies below :data:`SMALL_ROW` (below); unchanged otherwise.

    A number whose whole range is tiny (a feature near 1e-6 gets a grid of 1e-12) enters its
    distance rows at 1e-12 per grid step beside the distance's 1. A solver dropped that term: the
    distance no longer followed the number, which went wherever the other rows let it (fuzzing:
    sets of answers on stump forests whose tiny feature went to the end of its domain, several
    times the distance of the answer at its split). A grid of nine decimals (``precision=9``) sits
    at the tolerance itself, 1e-9 per step, which both solvers drop too (``<=``): a linear model's
    answers on such a number were proven optimal at a different distance for each warm start,
    up to 1.6e-3 above the optimum (fuzzing ONNX linear regressors).

    With ``magnitudes`` (:func:`sizes`: each variable's largest magnitude within its bounds), a term that
    moves the row by at most :data:`NEGLIGIBLE` of its largest term's reach is dropped first: it
    would otherwise set the lift. A linear model's near-zero weight for a feature (6.5e-22 on a
    number of tenths) lifted its goal row by 2^51, the row's sides near 2e16, where the solvers'
    tolerance is below one unit in the last place: HiGHS and SCIP took the warm start for optimal
    (fuzzing: a regression on a whole number up to 1e10 proved a different distance for each
    seed, up to 1.4e-3 above the optimum).

    A row whose whole reach lies below :data:`SMALL_ROW` (each term's coefficient times its
    variable's largest magnitude, and its finite sides; ``magnitudes`` None: its coefficients) is
    multiplied by a power of two that brings that reach near 1, at most to :data:`LIFT_CEILING`. A
    number on ``[0, 1e-6]`` with seven decimals ties its grid steps to its change and distance at
    1e-7 per step, rows whose sides are below 1e-6: within HiGHS's feasibility tolerance (1e-7,
    absolute) they bound nothing, and HiGHS moved the number five steps while counting no change
    and no distance, and SCIP under-counted the distance (fuzzing linear models and networks on
    numbers near 1e-6 and 1e9: a backend gave no valid answer, or a worse one than local
    search's, on 16 of 150 problems; on 2 now)."""
    if magnitudes is not None:
        terms = _without_negligible(terms, magnitudes)
    if not terms:
        return terms, lower, upper
    sizes_ = [abs(c) for c in terms.values()]
    smallest = min(sizes_)
    if max(sizes_) > LIFT_CEILING or any(LIFT_CEILING < abs(b) < INF for b in (lower, upper)):
        return _lowered(terms, lower, upper)
    if smallest > ZERO_TOLERANCE:
        if _reaches(terms, lower, upper, magnitudes):  # (most rows: answered by their first term)
            return terms, lower, upper
        reach = _reach(terms, lower, upper, magnitudes)
        if reach <= 0.0:
            return terms, lower, upper
        largest = max([*(abs(c) for c in terms.values()), *(abs(b) for b in (lower, upper) if math.isfinite(b))])
        factor = max(min(2.0 ** round(-math.log2(reach)), 2.0 ** math.floor(math.log2(LIFT_CEILING / largest))), 1.0)
        return {i: c * factor for i, c in terms.items()}, lower * factor, upper * factor
    largest = max([*(abs(c) for c in terms.values()), *(abs(b) for b in (lower, upper) if math.isfinite(b))])
    factor = 2.0 ** math.ceil(math.log2(LIFTED_SMALLEST / smallest))
    if largest * factor > LIFT_CEILING:  # at most to the ceiling: a term still at the solvers' zero is dropped
        factor = max(2.0 ** math.floor(math.log2(LIFT_CEILING / largest)), 1.0)
        terms = {i: c for i, c in terms.items() if abs(c) * factor > ZERO_TOLERANCE}
    return {i: c * factor for i, c in terms.items()}, lower * factor, upper * factor


def _lowered(terms: Expr, lower: float, upper: float) -> tuple[Expr, float, float]:
    """The row multiplied by the power of two that brings its largest coefficient or finite side
    down to :data:`LIFT_CEILING` (a term then at the solvers' zero dropped, as a lift drops it).
    HiGHS refuses a matrix value from 1e15 and both solvers take a side from 1e20 for infinite:
    a linear regression whose outputs reach 1e17 had every row of its program refused ("HiGHS
    refused the program's 13 rows"), raised through ``engine="auto"`` (the goal fuzz)."""
    largest = max([*(abs(c) for c in terms.values()), *(abs(b) for b in (lower, upper) if math.isfinite(b))])
    factor = 2.0 ** math.floor(math.log2(LIFT_CEILING / largest))
    kept = {i: c * factor for i, c in terms.items() if abs(c) * factor > ZERO_TOLERANCE}
    return kept, lower * factor, upper * factor


def column_scales(milp: Milp) -> npt.NDArray[np.float64] | None:
    """Per variable, the power of two a solver should see it divided by (None: 1 for every
    variable): a continuous variable whose objective coefficient lies outside :data:`COST_RANGE`
    is handed over as ``x / s`` with its coefficient ``c * s`` near 1 (exact in floating point;
    integers and variables outside the objective keep their units).

    A number whose range is huge (a feature near 1e9, its MAD 7e8) has its distance variable in
    the feature's own units, weighed by ``1 / MAD`` = 1.4e-9 in the objective: below the solvers'
    dual feasibility tolerance (1e-7), so HiGHS and SCIP took any value of it for optimal, and a set
    of answers padded with that distance was proven optimal at 11.73 (HiGHS) and 10.98 (SCIP)
    where 7.63 is reached (fuzzing). A tiny number's distance (weighed 1e6) had the mirror
    problem: the rows' feasibility tolerance (1e-7) in its units was 0.1 of objective.

    A continuous variable outside the objective whose bounds reach beyond
    :data:`MAGNITUDE_SCALED` is handed over divided by a power of two near that reach, so that the
    solver sees it within about [-1, 1]: a number near 1e9 (its count of grid steps continuous,
    :data:`WIDE_STEPS`) enters a network's first layer through its standard scaling at 1e-10 per
    unit, and HiGHS proved programs infeasible (12 fuzzed MLPs: "no counterfactual exists" on 10,
    while local search found answers) or worse answers optimal; SCIP proved worse ones on 11.
    Handed over in its magnitude's units, both proved optima no worse than local search's on all
    12."""
    low, high = COST_RANGE
    scales = np.ones(milp.n_vars, dtype=np.float64)
    for i, c in milp.objective.items():
        if not milp.integer[i] and not low <= abs(c) <= high:
            scales[i] = 2.0 ** round(-math.log2(abs(c)))
    for i in range(milp.n_vars):
        reach = max(abs(milp.lower[i]), abs(milp.upper[i]))
        if not milp.integer[i] and i not in milp.objective and MAGNITUDE_SCALED < reach < INF:
            scales[i] = 2.0 ** round(math.log2(reach))
    return None if bool((scales == 1.0).all()) else scales


def in_scaled_columns(milp: Milp, scales: npt.NDArray[np.float64]) -> Milp:
    """``milp`` in the variables ``x / scales`` (:func:`column_scales`): the same program, whose
    solution times ``scales`` is the original's."""
    s = [float(v) for v in scales]
    return Milp(
        lower=[low / f for low, f in zip(milp.lower, s, strict=True)],
        upper=[up / f for up, f in zip(milp.upper, s, strict=True)],
        integer=list(milp.integer),
        names=list(milp.names),
        rows=[({i: c * s[i] for i, c in terms.items()}, low, up) for terms, low, up in milp.rows],
        objective={i: c * s[i] for i, c in milp.objective.items()},
        objective_offset=milp.objective_offset,
    )


class LoadStopped(Exception):  # noqa: N818 - a stop, not an error
    """The time limit (or a stop request) came while a program was loaded into its solver."""


def loading_stop(
    should_stop: Callable[[], bool] | None, entered: float, time_limit: float | None
) -> Callable[[], bool] | None:
    """The stop check of a program's loading: ``should_stop``, or the time limit counted from
    ``entered`` (a ``time.perf_counter`` reading) past."""
    if time_limit is None:
        return should_stop
    deadline = entered + float(time_limit)
    return lambda: time.perf_counter() >= deadline or (should_stop is not None and should_stop())


def lifted_rows(milp: Milp, stop: Callable[[], bool] | None = None) -> Iterator[tuple[Expr, float, float]]:
    """Every row of ``milp`` as a solver should be given it (:func:`lifted`), ``stop`` asked every
    :data:`ROWS_PER_CHECK` rows: loading a large program takes seconds (a 200-tree forest's,
    1.6 s past its time limit into HiGHS). Raises :class:`LoadStopped` when it says stop."""
    reach = sizes(milp)
    for k, (terms, low, up) in enumerate(milp.rows):
        if stop is not None and k % ROWS_PER_CHECK == 0 and stop():
            raise LoadStopped
        yield lifted(terms, low, up, reach)


def sizes(milp: Milp) -> list[float]:
    """Each variable's largest magnitude within its bounds (infinite when unbounded), for
    :func:`lifted`."""
    return [max(abs(low), abs(up)) for low, up in zip(milp.lower, milp.upper, strict=True)]


def _without_negligible(terms: Expr, magnitudes: Sequence[float]) -> Expr:
    """``terms`` without those whose reach is at most :data:`NEGLIGIBLE` of the largest reach; in a
    row with an unbounded variable, which has no reach, without those whose coefficient is at most
    that fraction of the largest (a scorecard's closeness row: rounding noise of 1e-20 in its
    factor beside its two parts' 1s set a lift of 2^60, and HiGHS failed, "solve error")."""
    reach = {i: abs(c) * magnitudes[i] for i, c in terms.items()}
    largest = max(reach.values(), default=0.0)
    if largest == 0.0:
        return terms
    if not math.isfinite(largest):
        biggest = max(abs(c) for c in terms.values())
        return {i: c for i, c in terms.items() if abs(c) > NEGLIGIBLE * biggest}
    return {i: c for i, c in terms.items() if reach[i] > NEGLIGIBLE * largest}


def add(a: Mapping[int, float], b: Mapping[int, float], scale: float = 1.0) -> Expr:
    """``a + scale * b``."""
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0.0) + scale * v
    return out


def _reaches(terms: Expr, lower: float, upper: float, magnitudes: Sequence[float] | None) -> bool:
    """Whether the row's reach (:func:`_reach`) is at least :data:`SMALL_ROW`, stopping at the
    first side or term that shows it (the load of a 100-tree forest's 15,000 rows took twice as
    long computing every row's whole reach)."""
    if any(math.isfinite(side) and abs(side) >= SMALL_ROW for side in (lower, upper)):
        return True
    if magnitudes is None:
        return any(abs(c) >= SMALL_ROW for c in terms.values())
    return any(abs(c) * magnitudes[i] >= SMALL_ROW for i, c in terms.items())


def _reach(terms: Expr, lower: float, upper: float, magnitudes: Sequence[float] | None) -> float:
    """How far the row's terms can move it (each coefficient times its variable's largest
    magnitude; the coefficients alone without ``magnitudes``) or its finite sides lie, whichever
    is largest; infinite with an unbounded variable, which any row can hold."""
    sides = [abs(b) for b in (lower, upper) if math.isfinite(b)]
    if magnitudes is None:
        return max([*(abs(c) for c in terms.values()), *sides])
    return max([*(abs(c) * magnitudes[i] for i, c in terms.items()), *sides])
