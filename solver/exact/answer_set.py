"""Several counterfactuals from the exact engine, with diversity stated as rules.

HiGHS keeps no pool of solutions, so a set of k answers is asked for directly, in one of two
ways (``ExactPhaseConfig.answer_set``):

- ``copies`` (the scorecard paper's formulation 13): k copies of the whole program in one MILP,
  and for each pair of copies and each mutable feature ``u = XOR(changed_k, changed_l)``,
  linearised (``u <= a + b``, ``u >= a - b``, ``u >= b - a``, ``u <= 2 - a - b``). Hard rules:
  the changed-feature sets differ (``sum_i u >= 1``); and two answers that change the same
  feature put it in different bins (a scorecard variable's leaves), categories or allowed values
  (``sum_j XOR(z_kij, z_lij) >= a_ki + a_li - 1``). The objective is the copies' summed
  distance, minus ``diversity_weight`` x the pairwise Hamming distances (of feature sets and
  values). The copies are ordered by distance, which removes their k! symmetric orderings.
  Infeasibility is a proof: no k answers differ so (the report says it in words).
- ``no_good``: the optimum, then the next best answer whose changed-feature set differs from
  every earlier one (a cut per answer), k - 1 times: each answer optimal given the earlier ones.

Every answer is checked through the real model; one the model rejects is left out.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from counterplan.planning.problem import CounterfactualProblem
from counterplan.planning.score import is_feasible
from counterplan.planning.scorecard import ScorecardAdapter
from counterplan.solver.core.scope import SolverScope
from counterplan.solver.exact import intervals
from counterplan.solver.exact.config import ExactPhaseConfig
from counterplan.solver.exact.formulation import RETRIES, build, retry_margins
from counterplan.solver.exact.milp import INF, WIDE_STEPS, Expr, Milp, MilpResult, add
from counterplan.solver.exact.program import BuildStopped, FeatureVars, Formulation

if TYPE_CHECKING:
    from counterplan.solver.exact.backend import Backend


@dataclass
class SetFormulation:
    """k copies of the program in one MILP."""

    milp: Milp
    copies: list[Formulation]

    def decode(self, x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """``(k, n_features)``: each copy's row."""
        return np.vstack([copy.decode(x) for copy in self.copies])


def build_set(  # noqa: PLR0917 - the settings of one program
    problem: CounterfactualProblem,
    count: int,
    distinct_features: bool,
    distinct_values: bool,
    diversity_weight: float,
    goal_epsilon: float = 1e-6,
    probability_epsilon: float = 0.0,
    margin_scale: float = 1.0,
    *,
    should_stop: Callable[[], bool] | None = None,
) -> SetFormulation:
    """The program of ``count`` answers at once (formulation 13); ``should_stop`` as
    :func:`~counterplan.solver.exact.formulation.build`'s."""
    milp = Milp()
    copies = [
        build(problem, goal_epsilon, probability_epsilon, margin_scale, milp=milp, should_stop=should_stop)
        for _ in range(count)
    ]
    objective: Expr = {}
    for copy in copies:
        objective = add(objective, copy.distance)
    hamming: Expr = {}
    moved = [[_moved(copy, f) for f in copy.features] for copy in copies]
    for (a, first), (b, second) in itertools.combinations(enumerate(copies), 2):
        differ = _differences(milp, (first, second), (moved[a], moved[b]), distinct_values, hamming)
        if distinct_features and differ:
            milp.row(differ, 1.0, INF)
        elif distinct_features:
            milp.row({}, 1.0, INF)  # no mutable feature: no two answers can differ
    for first, second in itertools.pairwise(copies):  # symmetry: copies ordered by distance
        milp.row(add(first.distance, second.distance, -1.0), -INF, 0.0)
    if diversity_weight:
        objective = add(objective, hamming, -diversity_weight)
    milp.minimise(objective)
    return SetFormulation(milp, copies)


def _differences(
    milp: Milp,
    pair: tuple[Formulation, Formulation],
    moved: tuple[list[int | None], list[int | None]],
    distinct_values: bool,
    hamming: Expr,
) -> Expr:
    """For two copies: one XOR per feature either may move (whether exactly one of them moves it),
    returned as a sum; with ``distinct_values``, rows that make two copies changing the same
    feature give it different values. Every difference also counts in ``hamming``."""
    first, second = pair
    differ: Expr = {}
    for f, g in zip(first.features, second.features, strict=True):
        here, there = moved[0][f.index], moved[1][g.index]
        if here is None or there is None:
            continue
        u = _xor(milp, here, there, f"differ[{f.index}]")
        differ[u] = 1.0
        hamming[u] = hamming.get(u, 0.0) + 1.0
        if not distinct_values:
            continue
        mine, theirs = _value_indicators(first, f), _value_indicators(second, g)
        if not mine or len(mine) != len(theirs):
            continue
        values: Expr = {}
        for z_first, z_second in zip(mine, theirs, strict=True):
            d = _xor(milp, z_first, z_second, f"value-differs[{f.index}]")
            values[d] = 1.0
            hamming[d] = hamming.get(d, 0.0) + 1.0
        # both change the feature -> some indicator differs: sum d >= a + b - 1
        milp.row(add(values, {here: -1.0, there: -1.0}), -1.0, INF)
    return differ


def _moved(formulation: Formulation, f: FeatureVars) -> int | None:
    """A 0/1 variable that is 1 exactly when the feature changes (None: it cannot change).

    The program's own ``changed`` may be 1 for a number that stays put (only a move forces it),
    which would let two copies "differ" in a feature neither moves. So: a scorecard variable
    changes when it leaves its bin (1 - the original bin's leaf); a category, an allowed value
    or an original off the grid have an exact ``changed`` already; a number on a grid (or a
    continuous one) gets up/down binaries that make ``changed`` mean a move of at least one grid
    step (or 1e-6 of its range)."""
    if f.changed is None:
        return None
    milp = formulation.milp
    problem = formulation.problem
    model = problem.model
    name = problem.space.names[f.index]
    if isinstance(model, ScorecardAdapter) and name in [v.name for v in model.table.variables]:
        c = [v.name for v in model.table.variables].index(name)
        leaves, tree = formulation.leaves[c], formulation.trees[c]
        assert formulation.inputs is not None
        original = problem.space.to_frame(problem.space.original.reshape(1, -1))
        home = leaves[tree.leaf(formulation.inputs.preprocess.transform(original)[0])]
        left = milp.var(f"left-bin[{name}]", 0.0, 1.0)
        milp.row({left: 1.0, home: 1.0}, 1.0, 1.0)
        return left
    if f.categories is not None or f.allowed is not None or f.stay is not None:
        return f.changed
    space = problem.space
    o, low, high = float(space.original[f.index]), float(space.lower[f.index]), float(space.upper[f.index])
    step = f.grid[1].value(1.0) if f.grid is not None else 1e-6 * (high - low)
    terms, constant = f.value
    up, down = milp.binary(f"up[{name}]"), milp.binary(f"down[{name}]")
    milp.row({up: 1.0, down: 1.0, f.changed: -1.0}, 0.0, 0.0)
    if o + step > high + 1e-9:
        milp.upper[up] = 0.0
    else:  # up: value >= o + step
        milp.row(add(terms, {up: -(o + step - low)}), low - constant, INF)
    if o - step < low - 1e-9:
        milp.upper[down] = 0.0
    else:  # down: value <= o - step
        milp.row(add(terms, {down: high - (o - step)}), -INF, high - constant)
    return f.changed


def _xor(milp: Milp, a: int, b: int, name: str) -> int:
    u = milp.var(name, 0.0, 1.0)
    milp.row({u: 1.0, a: -1.0, b: -1.0}, -INF, 0.0)
    milp.row({u: 1.0, a: -1.0, b: 1.0}, 0.0, INF)
    milp.row({u: 1.0, a: 1.0, b: -1.0}, 0.0, INF)
    milp.row({u: 1.0, a: 1.0, b: 1.0}, -INF, 2.0)
    return u


def _value_indicators(formulation: Formulation, f: FeatureVars) -> list[int]:
    """The 0/1 variables that say which value a feature takes: a scorecard variable's bins (its
    leaves), a category's indicators, an allowed value's picks; empty for a plain number."""
    model = formulation.problem.model
    if isinstance(model, ScorecardAdapter):
        name = formulation.problem.space.names[f.index]
        names = [v.name for v in model.table.variables]
        if name in names:
            leaves = formulation.leaves[names.index(name)]
            return [leaves[node] for node in sorted(leaves)]
    if f.categories is not None:
        out: list[int] = []
        for _, (terms, _c) in f.categories:
            if len(terms) != 1:
                return []
            out.extend(terms)
        return out
    if f.allowed is not None:
        return list(f.allowed[0])
    return []


def no_good_cuts(formulation: Formulation, rows: list[npt.NDArray[np.float64]]) -> None:
    """Exclude each row's set of changed features (bins, for a scorecard): in every answer
    from here on, at least one feature changes where that row's does not, or the other way."""
    space = formulation.problem.space
    moved = [(f, _moved(formulation, f)) for f in formulation.features]
    for row in rows:
        changed_here = _changed_set(formulation.problem, row)
        terms: Expr = {}
        count = 0
        for f, var in moved:
            if var is None:
                continue
            if space.names[f.index] in changed_here:
                terms[var] = -1.0
                count += 1
            else:
                terms[var] = 1.0
        formulation.milp.row(terms, 1.0 - count, INF)


def _changed_set(problem: CounterfactualProblem, row: npt.NDArray[np.float64]) -> set[str]:
    """The features ``row`` changes (for a scorecard variable: moves out of its bin)."""
    space = problem.space
    changed = {space.names[j] for j in np.flatnonzero(row != space.original)}
    model = problem.model
    if isinstance(model, ScorecardAdapter):
        bins = model.table.bins(space.to_frame(np.vstack([space.original, row])))
        for c, variable in enumerate(model.table.variables):
            if variable.name in changed and bins[0, c] == bins[1, c]:
                changed.discard(variable.name)
    return changed


def describe_infeasible(problem: CounterfactualProblem, count: int, distinct_values: bool) -> str:
    """Why a set program has no solution, in words."""
    limit = f" with at most {problem.max_changed_features} changes" if problem.max_changed_features else ""
    values = " (and, on a feature two of them change, in its bin or value)" if distinct_values else ""
    return f"no {count} counterfactuals{limit} differ in their features{values}"


def set_backend(backend: Backend) -> Backend:
    """The backend of a set's programs: the phase's, but for CP-SAT, which states one tree
    ensemble's program and no set: ``auto`` then (HiGHS when highspy loads, SCIP otherwise),
    where the other programs CP-SAT refuses go to SCIP.

    Measured on sets of 100-tree boosting (heloc's and adult's first two rows the model rejects,
    one thread, the same answer every run from both): three answers, HiGHS 18.4, 8.6, 5.4 and
    3.2 s, SCIP 36, 15, 3-13 and 1.0 s with its presolve (one run in four called a worse set
    optimal: 8.17 where the optimum is 7.57), 22, 9.0, 10.2 and 10.2 s without it; five answers
    on adult, HiGHS 12.3 s, SCIP 32 s with its presolve, 19 s without it, calling 15.46 optimal
    where the optimum is 14.96 (:mod:`~counterplan.solver.exact.ortools_backend`)."""
    return "auto" if backend == "cpsat" else backend


def solve_set(
    scope: SolverScope,
    config: ExactPhaseConfig,
    remaining: Callable[[], float | None],
    should_stop: Callable[[], bool],
    retries: int = RETRIES,
) -> tuple[npt.NDArray[np.float64] | None, str, str]:
    """Solve for ``scope.answers`` answers (``config.answer_set``); returns the verified rows best
    first (None when there is no set), the program's status, and why there is no set."""
    from counterplan.solver.exact.backend import solve  # noqa: PLC0415 - the phase's own backend

    problem = scope.problem
    assert problem is not None
    k = scope.answers

    def run(milp: Milp) -> MilpResult:
        result, _ = solve(
            milp,
            set_backend(config.backend),
            time_limit=remaining(),
            relative_gap=config.relative_gap,
            should_stop=should_stop,
            node_limit=config.node_limit,
        )
        return result

    rows: list[npt.NDArray[np.float64]] = []
    status = ""
    wide = False
    for retry in range(retries + 1):  # wider margins after an answer the real model rejects
        margins = retry_margins(retry, config.goal_epsilon)
        try:
            if config.answer_set == "copies":
                candidates, status, wide = _by_copies(problem, k, config, margins, run, should_stop=should_stop)
                if candidates is None:
                    break
            else:
                candidates, status, wide = _by_no_good(
                    problem, [scope.best_row], k, margins=margins, run=run, should_stop=should_stop
                )
        except BuildStopped:  # out of time while building: the answers verified so far stand
            status = "no solution"
            break
        rows = _verified(scope, candidates)
        if len(rows) == candidates.shape[0] or should_stop():
            break
    rows, status, repeated = _kept_distinct(scope, (rows, status), config, run, should_stop)
    if not rows:
        reason = describe_infeasible(problem, k, config.distinct_values and config.answer_set == "copies")
        if status != "infeasible":
            reason = f"no set of {k} answers found ({status})"
        return None, status, reason
    reason = ""
    if len(rows) < k:
        reason = describe_infeasible(problem, k, False) if status == "infeasible" else f"{len(rows)} of {k} found"
    notes = [note for note, applies in ((WIDE, wide and status == "feasible"), (REPEATED, repeated)) if applies]
    return np.vstack(rows), status, ": ".join([reason, *notes] if reason else notes)


REPEATED = (
    "the set program's answers repeated a set of changed features (a number whose grid is too fine for "
    "its range to be told from staying put): each kept once, the others found one at a time, each "
    "excluding the sets before it"
)
"""Why a set is not its program's optimum (the program's answers were not distinct)."""


def _kept_distinct(
    scope: SolverScope,
    found: tuple[list[npt.NDArray[np.float64]], str],
    config: ExactPhaseConfig,
    run: Callable[[Milp], MilpResult],
    should_stop: Callable[[], bool],
) -> tuple[list[npt.NDArray[np.float64]], str, bool]:
    """The rows (best first) and status ``found``, each row with a set of changed features of its
    own, topped up one answer at a time when some repeated one (:func:`_topped_up`), and whether
    some did: the program's promise broken by its numerics, its optimum is not the set's (an
    ``optimal`` status becomes ``feasible``). Only when the answers must differ in their features
    (``distinct_features``, or ``no_good``)."""
    assert scope.problem is not None
    rows, status = found
    if not (config.distinct_features or config.answer_set == "no_good"):
        return rows, status, False
    distinct = _distinct(scope.problem, rows)
    if len(distinct) == len(rows):
        return rows, status, False
    if len(distinct) < scope.answers and not should_stop():
        distinct = _topped_up(scope, distinct, config, run, should_stop)
    return distinct, ("feasible" if status == "optimal" else status), True


def _topped_up(
    scope: SolverScope,
    rows: list[npt.NDArray[np.float64]],
    config: ExactPhaseConfig,
    run: Callable[[Milp], MilpResult],
    should_stop: Callable[[], bool],
) -> list[npt.NDArray[np.float64]]:
    """``rows`` and more answers, each excluding the sets of changed features found before it
    (``no_good``'s programs), until ``scope.answers``: verified, distinct, best first."""
    assert scope.problem is not None
    margins = retry_margins(0, config.goal_epsilon)
    try:
        candidates, _, _ = _by_no_good(
            scope.problem, rows, scope.answers, margins=margins, run=run, should_stop=should_stop
        )
    except BuildStopped:
        return rows
    return _distinct(scope.problem, _verified(scope, candidates))


def _distinct(problem: CounterfactualProblem, rows: list[npt.NDArray[np.float64]]) -> list[npt.NDArray[np.float64]]:
    """``rows`` (best first) without those whose set of changed features a better one has.

    The program keeps two answers apart with 0/1 variables tied to each number by a big-M as
    wide as its range: on a grid of 1 over a range of 6e9 (a feature near 1e9) the solvers'
    integrality tolerance (1e-6) is thousands of grid steps, so a program "moved" a number it
    left where it was, and a set of two identical answers was called optimal (fuzzing: a depth-3
    decision tree, HiGHS and CP-SAT's fallback alike)."""
    seen: set[frozenset[str]] = set()
    kept = []
    for row in rows:
        changed = frozenset(_changed_set(problem, row))
        if changed not in seen:
            seen.add(changed)
            kept.append(row)
    return kept


Margins = tuple[float, float, float]
"""A retry's goal epsilon, probability epsilon and margin scale (:func:`retry_margins`)."""


def _by_copies(
    problem: CounterfactualProblem,
    k: int,
    config: ExactPhaseConfig,
    margins: Margins,
    run: Callable[[Milp], MilpResult],
    *,
    should_stop: Callable[[], bool],
) -> tuple[npt.NDArray[np.float64] | None, str, bool]:
    """``copies``: the k answers of one program (None when it has none), its status, and whether
    it is too wide to prove (:func:`_unprovable`)."""
    epsilon, probability, scale = margins
    program = build_set(
        problem,
        k,
        config.distinct_features,
        config.distinct_values,
        config.diversity_weight,
        epsilon,
        probability,
        scale,
        should_stop=should_stop,
    )
    result = run(program.milp)
    status, wide = _unprovable(result.status, program.copies[0])
    return (None if result.x is None else program.decode(result.x)), status, wide


def _by_no_good(
    problem: CounterfactualProblem,
    found: list[npt.NDArray[np.float64]],
    k: int,
    *,
    margins: Margins,
    run: Callable[[Milp], MilpResult],
    should_stop: Callable[[], bool],
) -> tuple[npt.NDArray[np.float64], str, bool]:
    """``no_good``: the answers ``found`` (the best one), then the next best with another set of
    features, until k (fewer when a program has no answer); the worst status seen, and whether a
    program was too wide to prove (:func:`_unprovable`)."""
    epsilon, probability, scale = margins
    found = [row.copy() for row in found]
    status = "optimal"
    wide = False
    while len(found) < k and not should_stop():
        single = build(problem, epsilon, probability, scale, should_stop=should_stop)
        no_good_cuts(single, found)
        result = run(single.milp)
        if result.x is None:
            status = result.status
            break
        solved, too_wide = _unprovable(result.status, single)
        wide = wide or too_wide
        if solved != "optimal":
            status = solved
        found.append(single.decode(result.x))
    return np.vstack(found), status, wide


def _unprovable(status: str, formulation: Formulation) -> tuple[str, bool]:
    """A tree ensemble's set program, solved by HiGHS or SCIP (:func:`set_backend`), is not proven
    over a number of more than :data:`~counterplan.solver.exact.milp.WIDE_STEPS` grid steps:
    the big-M rows of its splits are wider than the solvers' tolerances
    (:mod:`~counterplan.solver.exact.intervals`, which a set's rows over the numbers' values keep
    out). On 25 fuzzed depth-3 trees over numbers near 1e9, HiGHS and SCIP both called their sets
    of two optimal on 19 and disagreed on 17 of those. "optimal" becomes "feasible", and True says
    why. (A linear model's set keeps its proof: no split ties its numbers to binaries, and its
    distances are rescaled, :func:`~counterplan.solver.exact.milp.column_scales`.)"""
    if status == "optimal" and formulation.leaves and intervals.wide(formulation):
        return "feasible", True
    return status, False


WIDE = (
    "a number spans more grid steps than HiGHS's and SCIP's tolerances can tell apart "
    f"(over {WIDE_STEPS:.0e}): the set is not proven optimal"
)
"""Why a set found in full is not called optimal (:func:`_unprovable`)."""


def _verified(scope: SolverScope, candidates: npt.NDArray[np.float64]) -> list[npt.NDArray[np.float64]]:
    """The candidates the real model confirms, each offered to the solve's best; best first."""
    scores = scope.scorer.score_final(candidates)
    valid = np.array([is_feasible(s) for s in scores])
    for row, score in zip(candidates[valid], scores[valid], strict=True):
        if scope.offer(row.reshape(1, -1), score.reshape(1, -1), [scope.progress]):
            scope.announce()
    order = np.lexsort(scores[valid].T[::-1])[::-1]  # best score first
    return list(candidates[valid][order])
