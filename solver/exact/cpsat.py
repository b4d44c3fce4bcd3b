"""CP-SAT (OR-Tools' ``cp_model``) on a tree ensemble's program, as a pure-integer model.

A tree ensemble's program is integral but for each number's value and distance; without them
(:mod:`~counterplan.solver.exact.intervals`: the threshold binaries put each number in an
interval, the distances become the interval rows' right sides) every variable is 0/1, and this
module hands CP-SAT that program scaled to integers:

* the objective's coefficients are scaled by ``S`` and rounded towards zero's side that makes
  the integer objective at most ``S`` times the real one (down, for the non-negative variables
  of a distance);
* a row whose coefficients are not whole numbers is scaled and *relaxed* by its rounding: its
  bounds moved outward by half a unit per variable's magnitude, so every solution of the real
  rows is a solution of the integer ones.

So the integer program is a relaxation of the MILP with an objective below it: CP-SAT's bound,
divided by ``S``, is a valid lower bound of the MILP's optimum (**bound-safe**). A solution is
decoded by putting each number at the point of its interval nearest the original (on its grid,
for a number on one), its distance and "changed" recomputed; the real objective is evaluated
there and every row of the MILP is checked (feasibility tolerance 1e-6, as HiGHS's). A solution
that fails a row (a goal met only thanks to a relaxed rounding: its output within about
``1e-9`` of the goal's bound) is dropped; if the final one fails, :class:`Unsupported` is raised
and the caller solves the MILP with another backend. The status is ``optimal`` when CP-SAT
proved the integer optimum and the real objective lies within ``relative_gap`` (plus 1e-6,
the rounding of at most a thousand terms at ``S`` >= 1e9) of the bound; otherwise ``feasible``
with its gap. The phase then checks the answer through the real model, as every backend's.

Not supported (``Unsupported``, the caller falls back): what the values-free program does not
state, and any other continuous variable. A number whose original lies off its grid keeps its
``stay`` boolean, and moving it onto the grid without crossing a threshold costs the way to the
nearest grid value.

One worker by default (``threads``), seed 0: CP-SAT with one worker is deterministic; with more,
``interleave_search`` runs them in one thread in a fixed order, deterministic as well
(``docs/benchmarks/engines.md`` measures both). The time limit is CP-SAT's own
(``max_time_in_seconds``); the solve runs in a thread of its own while the caller's asks the
stop check (so Ctrl-C reaches Python), calls ``StopSearch`` on a stop, and abandons a solve
still running a quarter of a second past its time, as SCIP's. Each improving solution that
decodes is handed to ``on_incumbent`` as it is found. One presolve round
(:data:`PRESOLVE_ITERATIONS`), without merging at-most-ones into cliques
(:data:`MERGE_AT_MOST_ONES`); CP-SAT loads the hint only after it, so a solve that ends before
with no solution returns the warm start (:func:`_or_the_start`). With a warm start the search
of the distance's program decides first which features change, "unchanged" first
(:data:`BRANCH_ON_CHANGES`, :func:`_changes_first`); the tie-break's keeps CP-SAT's own.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from counterplan.solver.exact.intervals import (
    Alone,
    Reduction,
    Unsupported,
    place_numbers,
    reduction,
    substituted,
)
from counterplan.solver.exact.milp import ROWS_PER_CHECK, Expr, Milp, MilpResult, or_the_start
from counterplan.solver.exact.ortools_backend import ortools_module, ortools_version
from counterplan.solver.exact.program import Formulation
from counterplan.solver.exact.watched import run_watched

FloatArray = npt.NDArray[np.float64]

OBJECTIVE_SCALE = 1e9
"""``S``, at most: the objective's coefficients times this, rounded (fewer when they are large)."""
ROW_SCALE = 1e9
"""A row with fractional coefficients is scaled so that its largest is about this."""
LARGEST = 2**52
"""No scaled coefficient or bound beyond this (CP-SAT's integers are 64-bit; sums stay far from it)."""
PRESOLVE_ITERATIONS = 1
"""CP-SAT's presolve rounds (``max_presolve_iterations``, 3 by default). On heloc's 100-tree
forest each round's probing and clique merging cost about 2 deterministic seconds (12 s of a busy
machine's wall time before the search started, the hint loaded only then); the later rounds
found little (``docs/benchmarks/engines.md``)."""
MERGE_AT_MOST_ONES = False
"""CP-SAT's presolve merges the at-most-one constraints into maximal cliques
(``merge_at_most_one_work_limit``); off by default here: on heloc's 100-tree forest the merging
cost about 0.85 of the 2.5 deterministic seconds of an easy row, and the threshold rows of the
leaves (:func:`~counterplan.solver.exact.encoders.leaf_costs.threshold_rows`) state the cliques
it found (the proofs took 1.7-5.7 deterministic seconds against 2.5-9.4 with it,
``docs/benchmarks/engines.md``)."""
BRANCH_ON_CHANGES = True
"""With a warm start, on the distance's program (not the tie-break's), CP-SAT branches first on
whether each feature changes, "unchanged" first, the features with the most thresholds first
(:func:`_changes_first`), then by its own rules (``FIXED_SEARCH``); off, without a start or on
the tie-break: its default search. On heloc's 100-tree forest the two slowest rows took 14.7-16.6
deterministic seconds to the proof against 15-40 or more (``docs/benchmarks/engines.md``).
Without a start the search must find answers first, which its own rules do better (heloc row
1096's whole program: 10.02 after 30 deterministic seconds against 39.96)."""


def cp_model() -> Any:
    """OR-Tools' ``cp_model`` (the ``exact`` extra brings OR-Tools)."""
    return ortools_module("ortools.sat.python.cp_model", "CP-SAT")


def describe() -> str:
    """``CP-SAT (OR-Tools 9.15)``."""
    return f"CP-SAT (OR-Tools {ortools_version()})"


@dataclass
class Program:
    """The integer program, and how its solutions map back to the MILP's variables."""

    model: Any
    kept: dict[int, Any]
    reduced: Reduction
    """The program without its values it states (:func:`~counterplan.solver.exact.intervals.reduction`)."""
    scale: float
    offset: float
    """The objective's constant (real units), from the distances' expressions."""
    alone: list[tuple[Any, Alone]] = field(default_factory=list)
    """The booleans of the numbers off their grid, each with its ``Alone``."""
    decisions: list[Any] = field(default_factory=list)
    """The booleans CP-SAT branches on first, in order (:func:`_changes_first`), once
    :meth:`branch_first` is called; none: its own search."""

    def branch_first(self, formulation: Formulation) -> None:
        """Branch first on which features change (:func:`_changes_first`), unless
        :data:`BRANCH_ON_CHANGES` is off; :attr:`decisions` says whether it does."""
        if not BRANCH_ON_CHANGES:
            return
        self.decisions = _changes_first(formulation, self.kept)
        if self.decisions:
            cp = cp_model()
            self.model.AddDecisionStrategy(self.decisions, cp.CHOOSE_FIRST, cp.SELECT_MIN_VALUE)

    def hint(self, start: FloatArray) -> None:
        """``start`` (the MILP's variables) as CP-SAT's hint, whole: an off-grid number's boolean
        is 1 where its number leaves the original without crossing a threshold (a partial hint
        costs a search for its completion after the presolve, heloc row 4911)."""
        for i, var in self.kept.items():
            self.model.AddHint(var, round(float(start[i])))
        for var, (_, stay, crossed) in self.alone:
            crossings = sum(round(float(start[v])) if one else 1 - round(float(start[v])) for v, one in crossed)
            self.model.AddHint(var, int(round(float(start[stay])) == 0 and crossings == 0))


def build(formulation: Formulation, should_stop: Callable[[], bool] | None = None) -> Program | None:
    """The integer program of ``formulation``'s MILP (its current rows and objective) without its
    values (:mod:`~counterplan.solver.exact.intervals`); None when ``should_stop`` says stop while
    it is built (asked every :data:`~counterplan.solver.exact.milp.ROWS_PER_CHECK` rows)."""
    reduced = reduction(formulation, should_stop)
    if reduced is None:
        return None
    milp = formulation.milp
    model = cp_model().CpModel()
    kept = _variables(model, formulation, dropped=reduced.dropped)
    extras: dict[int, Any] = {}
    for index, _, _ in reduced.alone:  # its row, b + stay + sum(crossed) >= 1, leads the rows
        extras[index] = model.NewBoolVar("")
    variables = {**kept, **extras}
    for k, (expr, low, high) in enumerate(reduced.rows):
        if should_stop is not None and k % ROWS_PER_CHECK == 0 and should_stop():
            return None
        if expr:
            _row(model, variables, milp, expr, low, high)
        else:
            model.AddBoolOr([])  # a constant row that fails: infeasible
    objective, offset = substituted(milp.objective, reduced.substitutes)
    scale = _objective_scale(objective)
    coefficients = []
    for i, c in objective.items():
        low, high = _bounds(milp, i)
        if low < 0.0 < high:
            raise Unsupported("an objective variable of either sign")
        rounded = math.floor(c * scale) if low >= 0.0 else math.ceil(c * scale)
        if rounded != 0:
            coefficients.append((variables[i], rounded))
    model.Minimize(sum(v * c for v, c in coefficients))
    program = Program(model, kept, reduced, scale, offset + milp.objective_offset)
    program.alone = [(extras[index], (index, stay, crossed)) for index, stay, crossed in reduced.alone]
    return program


def _minimises_distance(formulation: Formulation) -> bool:
    """Whether the program's objective is the distance (the first program), not the tie-break's
    number of changes at the optimum's distance. The branching on the changes is for the
    distance's proof: on the tie-break it was slower than CP-SAT's own search (heloc row 6500:
    unproven in 24.8 s against proven in 8.75 s, ``docs/benchmarks/engines.md``)."""
    distance = {k: v for k, v in formulation.distance.items() if v != 0.0}
    return formulation.milp.objective == distance


def _changes_first(formulation: Formulation, kept: dict[int, Any]) -> list[Any]:
    """Each feature's "changed" boolean, the features with the most thresholds first (the
    formulation's order among equals): the decisions CP-SAT tries first, each "unchanged" first.

    Deciding that a feature keeps its original fixes every threshold of it at once, and with
    them the leaves beyond those thresholds in every tree; "changed" alone fixes nothing (the
    thresholds it allows are decided later, by CP-SAT's own rules). A proof on a forest is
    mostly a search over which features change: on heloc's 100-tree forest (21 features that
    may change, 6-7 changed at the optimum) CP-SAT's own branching, on leaves and thresholds by
    its LP, took 25-28 deterministic seconds on the two slowest rows where this order takes 15
    (``docs/benchmarks/engines.md``). Deterministic: the order depends on the program only."""
    count: dict[int, int] = {}
    for _, j, _ in formulation.thresholds:
        count[j] = count.get(j, 0) + 1
    changed = [(f.index, f.changed) for f in formulation.features if f.changed is not None and f.changed in kept]
    changed.sort(key=lambda item: -count.get(item[0], 0))
    return [kept[var] for _, var in changed]


def _bounds(milp: Milp, i: int) -> tuple[float, float]:
    """A variable's bounds; a boolean of the CP model alone (past the MILP's) is 0/1."""
    return (milp.lower[i], milp.upper[i]) if i < milp.n_vars else (0.0, 1.0)


def _variables(model: Any, formulation: Formulation, dropped: set[int]) -> dict[int, Any]:
    """An integer variable per MILP variable that is not ``dropped``."""
    milp = formulation.milp
    # integral at every solution of the MILP's rows, though not declared so: a category's
    # "changed" (1 - its original's indicator) and the leaves (fixed by the threshold binaries)
    integral = {f.changed for f in formulation.features if f.categories is not None}
    integral.update(v for leaves in formulation.leaves for v in leaves.values())
    kept: dict[int, Any] = {}
    for i in range(milp.n_vars):
        if i in dropped:
            continue
        if not milp.integer[i] and i not in integral:
            raise Unsupported(f"a continuous variable {milp.names[i]!r}")
        kept[i] = model.NewIntVar(math.ceil(milp.lower[i] - 1e-9), math.floor(milp.upper[i] + 1e-9), "")
    return kept


def _objective_scale(objective: Expr) -> float:
    total = sum(abs(c) for c in objective.values()) or 1.0
    return min(OBJECTIVE_SCALE, LARGEST / 64 / total)


def _row(model: Any, kept: dict[int, Any], milp: Milp, expr: Expr, low: float, high: float) -> None:  # noqa: PLR0917
    """``low <= expr <= high``, in whole numbers: exactly when it is one already, else scaled and
    relaxed by its rounding (see the module's docstring)."""
    # an integer expression within 64 bits (a float past 2**53 is whole too: a regression tree's
    # leaves of 1e20 were handed to CP-SAT as they are, and OR-Tools raised a TypeError)
    whole = all(abs(c - round(c)) < 1e-12 and abs(c) <= LARGEST for c in expr.values())
    if whole and all(abs(bound) <= LARGEST for bound in (low, high) if math.isfinite(bound)):
        # its bounds rounded inward are the same row
        lower = math.ceil(low - 1e-9) if math.isfinite(low) else -LARGEST
        upper = math.floor(high + 1e-9) if math.isfinite(high) else LARGEST
        model.AddLinearConstraint(sum(kept[i] * round(c) for i, c in expr.items()), lower, upper)
        return
    factor = ROW_SCALE / max(abs(c) for c in expr.values())
    magnitude = sum(max(abs(bound) for bound in _bounds(milp, i)) for i in expr)
    slack = 0.5 * magnitude + 1.0
    terms = [(kept[i], round(c * factor)) for i, c in expr.items()]
    lower = math.floor(low * factor - slack + 1e-9) if math.isfinite(low) else -LARGEST
    upper = math.ceil(high * factor + slack - 1e-9) if math.isfinite(high) else LARGEST
    if max(abs(c) for _, c in terms) > LARGEST or max(abs(lower), abs(upper)) > LARGEST * 4:
        raise Unsupported("a row too large to scale to integers")
    model.AddLinearConstraint(sum(v * c for v, c in terms), max(lower, -LARGEST), min(upper, LARGEST))


def decode(program: Program, formulation: Formulation, value: Callable[[Any], int]) -> FloatArray | None:
    """The MILP's variables of a CP-SAT solution (``value`` reads a variable): each number at its
    interval's point nearest the original; None when that fails a row of the MILP."""
    x = np.zeros(formulation.milp.n_vars)
    for i, var in program.kept.items():
        x[i] = float(value(var))
    return place_numbers(program.reduced, formulation, x)


def solve(
    formulation: Formulation,
    *,
    time_limit: float | None,
    relative_gap: float,
    start: FloatArray | None = None,
    on_incumbent: Callable[[FloatArray, float], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    threads: int = 1,
    seed: int = 0,
    deterministic_limit: float | None = None,
) -> MilpResult:
    """Minimise ``formulation``'s MILP (its current objective and rows) with CP-SAT; the result
    is in the MILP's variables, as every backend's. Raises :class:`Unsupported` when the program
    is not one it states (or its final solution fails the MILP's rows): solve it elsewhere.
    ``deterministic_limit``: at most this many of CP-SAT's deterministic seconds (a limit that
    does not depend on the machine's load, unlike ``time_limit``)."""
    entered = time.perf_counter()
    cp = cp_model()
    if should_stop is not None and should_stop():
        return _or_the_start(
            MilpResult("no solution", None, math.inf, -math.inf, math.inf, 0, 0.0), formulation, start, on_incumbent
        )
    program = build(formulation, should_stop)
    if program is None:  # the time (or a stop) came while the model was being built
        stopped = MilpResult("no solution", None, math.inf, -math.inf, math.inf, 0, time.perf_counter() - entered)
        return _or_the_start(stopped, formulation, start, on_incumbent)
    if start is not None:
        program.hint(start)
        if _minimises_distance(formulation):  # the answer is known: what is left is mostly the proof
            program.branch_first(formulation)
    solver = cp.CpSolver()
    left = None if time_limit is None else float(time_limit) - (time.perf_counter() - entered)
    _parameters(solver.parameters, left, relative_gap, threads, seed, fixed=bool(program.decisions))
    if deterministic_limit is not None:
        solver.parameters.max_deterministic_time = max(float(deterministic_limit), 0.001)
    callback = _callback(cp, program, formulation, on_incumbent, should_stop)
    started = time.perf_counter()
    deadline = None if left is None else started + max(left, 0.0)
    status = _watched(solver, program.model, callback, deadline, should_stop)
    seconds = time.perf_counter() - started
    if status is None:  # abandoned: past its time (or a stop) and still running
        stopped = MilpResult("no solution", None, math.inf, -math.inf, math.inf, 0, seconds)
        return _or_the_start(stopped, formulation, start, on_incumbent)
    result = _result(cp, solver, status, program, formulation, relative_gap, seconds)
    result = replace(result, deterministic_seconds=float(solver.deterministic_time))
    return _or_the_start(result, formulation, start, on_incumbent)


def _or_the_start(
    result: MilpResult,
    formulation: Formulation,
    start: FloatArray | None,
    on_incumbent: Callable[[FloatArray, float], None] | None,
) -> MilpResult:
    """``result``, or the warm start when CP-SAT stopped before a solution of its own
    (:func:`counterplan.solver.exact.milp.or_the_start`): stopped in its presolve, it reports
    none, not even the hint. The start is handed on as an incumbent, as SCIP's backend does."""
    kept = or_the_start(result, formulation.milp, start)
    if kept is not result and kept.x is not None and on_incumbent is not None:
        on_incumbent(kept.x, kept.objective - formulation.milp.objective_offset)
    return kept


def _callback(
    cp: Any,
    program: Program,
    formulation: Formulation,
    on_incumbent: Callable[[FloatArray, float], None] | None,
    should_stop: Callable[[], bool] | None,
) -> Any:
    """CP-SAT's solution callback: each solution decoded, each improving one handed on."""
    milp = formulation.milp
    best: list[float] = []

    class Callback(cp.CpSolverSolutionCallback):  # type: ignore[misc]
        def on_solution_callback(self) -> None:
            x = decode(program, formulation, self.Value)
            if x is not None:
                objective = milp.value(milp.objective, x, milp.objective_offset)
                if not best or objective < best[-1]:
                    best.append(objective)
                    if on_incumbent is not None:
                        on_incumbent(x, objective - milp.objective_offset)
            if should_stop is not None and should_stop():
                self.StopSearch()

    return Callback()


def _parameters(  # noqa: PLR0917
    parameters: Any, time_limit: float | None, relative_gap: float, threads: int, seed: int, fixed: bool = False
) -> None:
    """CP-SAT's parameters: the time left, the workers (interleaved in one thread when several:
    deterministic), the seed, the gap; ``fixed``: the model's decision strategy first
    (:data:`BRANCH_ON_CHANGES`)."""
    if time_limit is not None:
        parameters.max_time_in_seconds = max(time_limit, 0.001)
    parameters.num_workers = max(int(threads), 1)
    if threads > 1:
        parameters.interleave_search = True  # several workers in one thread, in a fixed order
    parameters.random_seed = seed
    parameters.catch_sigint_signal = False  # Ctrl-C is Python's: it stops the solve (see _watched)
    parameters.relative_gap_limit = float(relative_gap)
    # the LP relaxation with its cuts at every node: heloc's hardest 100-tree boosting row took
    # 0.55 s with it and did not finish in 30 s without (docs/benchmarks/engines.md)
    parameters.linearization_level = 2
    parameters.max_presolve_iterations = PRESOLVE_ITERATIONS
    if not MERGE_AT_MOST_ONES:
        parameters.merge_at_most_one_work_limit = 0.0
    if fixed:
        parameters.search_branching = cp_model().FIXED_SEARCH


def _watched(
    solver: Any, model: Any, callback: Any, deadline: float | None, should_stop: Callable[[], bool] | None
) -> int | None:
    """``solver.Solve`` watched (:func:`counterplan.solver.exact.watched.run_watched`), always in
    a thread of its own: ``StopSearch`` when ``should_stop`` says stop. The calling thread stays
    in Python, so a Ctrl-C reaches its handler (which sets the stop) instead of waiting for the
    solve to end; CP-SAT's own SIGINT handler is off (``catch_sigint_signal``) for the same
    reason. CP-SAT looks at its clock often, but not inside every presolve step: a solve still
    running past its grace is stopped and abandoned, as SCIP's (None)."""
    watched = run_watched(
        lambda: int(solver.Solve(model, callback)),
        name="cpsat",
        deadline=deadline,
        should_stop=should_stop,
        on_stop=solver.StopSearch,
        on_late=solver.StopSearch,
        always_thread=True,
    )
    return watched.value


def _result(  # noqa: PLR0917
    cp: Any, solver: Any, status: int, program: Program, formulation: Formulation, relative_gap: float, seconds: float
) -> MilpResult:
    milp = formulation.milp
    branches = int(solver.NumBranches())
    if status == cp.INFEASIBLE:  # a relaxation's infeasibility is the MILP's
        return MilpResult("infeasible", None, math.inf, math.inf, math.inf, branches, seconds)
    if status not in (cp.OPTIMAL, cp.FEASIBLE):
        return MilpResult("no solution", None, math.inf, -math.inf, math.inf, branches, seconds)
    x = decode(program, formulation, solver.Value)
    if x is None:
        raise Unsupported("CP-SAT's solution fails a row of the program after decoding")
    objective = milp.value(milp.objective, x, milp.objective_offset)
    bound = min(float(solver.BestObjectiveBound()) / program.scale + program.offset, objective)
    gap = 0.0 if objective == bound else (abs(objective - bound) / abs(objective) if objective else math.inf)
    proven = status == cp.OPTIMAL and objective - bound <= relative_gap * abs(objective) + 1e-6
    return MilpResult("optimal" if proven else "feasible", x, objective, bound, gap, branches, seconds)


__all__ = ["Program", "Unsupported", "build", "decode", "describe", "solve"]
