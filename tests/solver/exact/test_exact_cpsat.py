"""CP-SAT on tree ensembles (:mod:`counterplan.solver.exact.cpsat`): the program as a pure-integer
model (each number's distance a constant per threshold interval, the rest scaled to integers as a
relaxation). Its optimum equals an independent enumeration of the trees' cells and HiGHS's on the
same program; every answer meets the MILP's rows and the real model; its time limit holds; the
same program gives the same answer (one worker, or several interleaved); a program it does not
state goes to SCIP."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

from counterplan.planning import ClassGoal, CounterfactualProblem, FloatFeature, IntegerFeature
from counterplan.planning.calculator import ScoreCalculator
from counterplan.planning.models import adapt_sklearn
from counterplan.solver.core.config import SolverConfig
from counterplan.solver.counterfactual import explain
from counterplan.solver.exact.backend import solve
from counterplan.solver.exact.config import ExactPhaseConfig
from counterplan.solver.exact.formulation import build
from tests.solver.exact.test_exact_deadlines import CALL_ROOM, LIMIT, ROOM, _forest_problem
from tests.solver.exact.test_exact_trees import MODELS, _cells, _data, _problem

pytest.importorskip("highspy")
pytest.importorskip("ortools")

from counterplan.solver.exact import cpsat, intervals


def _cpsat_config(**settings: Any) -> SolverConfig:
    """Local search's warm start, then the exact phase on CP-SAT."""
    return SolverConfig(phases=(*SolverConfig().phases, ExactPhaseConfig(backend="cpsat", **settings)))


@pytest.mark.parametrize("name", list(MODELS))
def test_the_cpsat_optimum_equals_an_enumeration_of_the_trees_cells(name: str) -> None:
    problem = _problem(MODELS[name]())
    scores = ScoreCalculator(problem).calculate(_cells(problem)).scores
    feasible = scores[(scores[:, :3] >= 0.0).all(axis=1)]
    best = feasible[np.lexsort(feasible.T[::-1])[-1]]
    result = explain(problem, _cpsat_config(), engine="exact", seed=0)
    exact = result.statistics.exact
    assert exact is not None and exact.proven and result.valid, exact
    assert exact.backend.startswith("CP-SAT"), exact.backend
    assert result.score_levels[3] == pytest.approx(best[3], rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("narrowed", [False, True])
def test_cpsat_proves_highs_optimum_on_the_same_program_with_a_valid_answer(name: str, narrowed: bool) -> None:
    """The same program (whole, and narrowed to local search's distance), both backends: the same
    optimum, CP-SAT's bound below it (a relaxation's), its answer meets every row of the MILP and
    the real model accepts it."""
    problem = _problem(MODELS[name]())
    reach = -float(explain(problem, seed=0).score_levels[3]) if narrowed else None
    by_highs, _ = solve(build(problem, reach=reach).milp, "highs", time_limit=None, relative_gap=1e-9)
    formulation = build(problem, reach=reach)
    by_cpsat, description = solve(
        formulation.milp, "cpsat", time_limit=None, relative_gap=1e-9, formulation=formulation
    )
    assert description.startswith("CP-SAT")
    assert by_highs.status == by_cpsat.status == "optimal"
    assert by_cpsat.objective == pytest.approx(by_highs.objective, rel=1e-7, abs=1e-9)
    assert by_cpsat.bound <= by_highs.objective + 1e-9
    assert by_cpsat.x is not None and intervals.meets_rows(formulation.milp, by_cpsat.x)
    row = formulation.decode(by_cpsat.x).reshape(1, -1)
    assert (ScoreCalculator(problem).calculate(row).scores[0, :3] >= 0.0).all()


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("income", [2.05, 6.25, 9.95])
def test_a_number_off_its_grid_is_stated_and_proves_highs_optimum(name: str, income: float) -> None:
    """An original off its one-decimal grid may stay, or move onto the grid: moving without
    crossing a threshold costs the way to the nearest grid value (CP-SAT states it, no SCIP)."""
    frame, label = _data()
    model = MODELS[name]().fit(frame, label)
    features = [
        FloatFeature(name="income", value=income, low=0.0, high=10.0, precision=1),
        IntegerFeature(name="tenure", value=3, low=0, high=14),
        FloatFeature(name="debt", value=3.0, low=0.0, high=5.0, precision=1),
    ]
    problem = CounterfactualProblem(features, [ClassGoal(target=1, confidence=0.7)], adapt_sklearn(model, "ok"))
    formulation = build(problem)
    assert any(f.stay is not None for f in formulation.features)
    by_cpsat, description = solve(
        formulation.milp, "cpsat", time_limit=None, relative_gap=1e-9, formulation=formulation
    )
    by_highs, _ = solve(build(problem).milp, "highs", time_limit=None, relative_gap=1e-9)
    assert description.startswith("CP-SAT")
    assert by_highs.status == by_cpsat.status == "optimal"
    assert by_cpsat.objective == pytest.approx(by_highs.objective, rel=1e-7, abs=1e-9)
    assert by_cpsat.x is not None and intervals.meets_rows(formulation.milp, by_cpsat.x)


def test_every_incumbent_is_streamed_decoded_and_improving() -> None:
    problem = _problem(MODELS["random forest"]())
    formulation = build(problem)
    seen: list[float] = []

    def incumbent(x: np.ndarray, objective: float) -> None:
        assert intervals.meets_rows(formulation.milp, x)
        seen.append(objective)

    result = cpsat.solve(formulation, time_limit=None, relative_gap=1e-9, on_incumbent=incumbent)
    assert seen and seen == sorted(seen, reverse=True) and len(set(seen)) == len(seen)
    assert seen[-1] == pytest.approx(result.objective - formulation.milp.objective_offset)


@pytest.mark.parametrize("threads", [1, 4])
def test_the_same_program_gives_the_same_answer(threads: int) -> None:
    """One worker is deterministic; several are interleaved in one thread in a fixed order."""
    problem = _problem(MODELS["gradient boosting"]())
    answers = []
    for _ in range(2):
        formulation = build(problem)
        result = cpsat.solve(formulation, time_limit=None, relative_gap=1e-9, threads=threads)
        assert result.x is not None
        answers.append((result.objective, result.nodes, result.x.tobytes()))
    assert answers[0] == answers[1]


def test_the_time_limit_holds_on_a_hard_forest() -> None:
    """As :mod:`tests.solver.exact.test_exact_deadlines`, on CP-SAT: the whole phase within a
    second of its limit (CP-SAT's own clock; the building counts)."""
    problem = _forest_problem()
    config = SolverConfig(phases=(ExactPhaseConfig(time_limit_seconds=LIMIT, backend="cpsat"),))
    started = time.perf_counter()
    result = explain(problem, config, engine="exact", seed=0)
    spent = time.perf_counter() - started
    exact = result.statistics.exact
    assert exact is not None, result.statistics
    assert exact.seconds <= LIMIT + ROOM, exact
    assert spent <= LIMIT + CALL_ROOM, (spent, exact)


def test_a_stop_request_ends_the_search() -> None:
    problem = _forest_problem()
    formulation = build(problem)
    asked = [0]

    def should_stop() -> bool:
        asked[0] += 1
        return asked[0] > 3

    result = cpsat.solve(formulation, time_limit=None, relative_gap=0.0, should_stop=should_stop)
    assert result.status != "optimal" and asked[0] > 3


@pytest.mark.parametrize("asks_before_stop", [0, 1, 2])
def test_a_stopped_cpsat_search_keeps_its_warm_start(asks_before_stop: int) -> None:
    """CP-SAT stopped before its first solution (before building, while building, in its
    presolve: a 2 s exact improvement under load) reports none, not even its hint: the backend
    returns the feasible warm start, streamed as an incumbent, as SCIP's does, never "no
    solution" (which lost auto's improvement its bound and gap)."""
    problem = _problem(MODELS["random forest"]())
    formulation = build(problem)
    known = cpsat.solve(formulation, time_limit=None, relative_gap=1.0)
    assert known.x is not None
    asked = [0]

    def should_stop() -> bool:
        asked[0] += 1
        return asked[0] > asks_before_stop

    seen: list[float] = []
    result = cpsat.solve(
        formulation,
        time_limit=None,
        relative_gap=0.0,
        start=known.x,
        should_stop=should_stop,
        on_incumbent=lambda x, objective: seen.append(objective),
    )
    assert result.status in {"feasible", "optimal"} and result.x is not None, result
    assert result.objective <= known.objective + 1e-9
    assert seen and seen[-1] == pytest.approx(result.objective - formulation.milp.objective_offset)
    if asks_before_stop == 0:
        np.testing.assert_array_equal(result.x, known.x)
        assert result.status == "feasible" and result.gap == float("inf"), "the start is not proven"


def test_a_program_cpsat_does_not_state_goes_to_scip(monkeypatch: pytest.MonkeyPatch) -> None:
    """A linear model's program has continuous values CP-SAT would have to scale (the reason
    CP-SAT through pywraplp called a worse answer optimal): it is not given to it. A final
    solution that fails a row of the MILP after decoding also sends the program to SCIP."""
    from sklearn.linear_model import LogisticRegression

    linear = build(_problem(LogisticRegression(max_iter=1000)))
    with pytest.raises(cpsat.Unsupported):
        cpsat.build(linear)
    _, description = solve(linear.milp, "cpsat", time_limit=None, relative_gap=1e-9, formulation=linear)
    assert description.startswith("SCIP")
    trees = build(_problem(MODELS["random forest"]()))
    monkeypatch.setattr(intervals, "meets_rows", lambda milp, x: False)
    result, description = solve(trees.milp, "cpsat", time_limit=None, relative_gap=1e-9, formulation=trees)
    assert description.startswith("SCIP") and result.status == "optimal"


@pytest.mark.parametrize("income", [2.05, 6.25])
def test_the_hint_is_whole_and_feasible_with_a_number_off_its_grid(income: float) -> None:
    """The warm start hints every variable of the CP model, the off-grid number's boolean too
    (before, that one was left out and CP-SAT searched for the hint's completion after its
    presolve); CP-SAT finds the hint feasible, the answer never above it."""
    frame, label = _data()
    model = MODELS["random forest"]().fit(frame, label)
    features = [
        FloatFeature(name="income", value=income, low=0.0, high=10.0, precision=1),
        IntegerFeature(name="tenure", value=3, low=0, high=14),
        FloatFeature(name="debt", value=3.0, low=0.0, high=5.0, precision=1),
    ]
    problem = CounterfactualProblem(features, [ClassGoal(target=1, confidence=0.7)], adapt_sklearn(model, "ok"))
    local = explain(problem, seed=0)
    assert local.valid
    formulation = build(problem)
    start = formulation.assignment(problem.space.encode(local.proposed))
    program = cpsat.build(formulation)
    assert program is not None and program.alone
    program.hint(start)
    proto = program.model.Proto()
    assert len(proto.solution_hint.vars) == len(proto.variables)
    solver = cpsat.cp_model().CpSolver()
    solver.parameters.fix_variables_to_their_hinted_value = True
    assert solver.Solve(program.model) in (cpsat.cp_model().OPTIMAL, cpsat.cp_model().FEASIBLE)


@pytest.mark.parametrize("merge", [False, True])
def test_the_presolve_merges_no_at_most_ones_unless_asked(monkeypatch: pytest.MonkeyPatch, merge: bool) -> None:
    """CP-SAT's clique merging is off (the threshold rows of the leaves state the cliques it
    found on heloc's forest, ``docs/benchmarks/engines.md``), on with ``MERGE_AT_MOST_ONES``;
    the optimum is the same either way."""
    monkeypatch.setattr(cpsat, "MERGE_AT_MOST_ONES", merge)
    solver = cpsat.cp_model().CpSolver()
    cpsat._parameters(solver.parameters, 1.0, 1e-6, 1, 0)
    default = cpsat.cp_model().CpSolver().parameters.merge_at_most_one_work_limit
    assert solver.parameters.merge_at_most_one_work_limit == (default if merge else 0.0)
    problem = _problem(MODELS["random forest"]())
    formulation = build(problem)
    result, _ = solve(formulation.milp, "cpsat", time_limit=60.0, relative_gap=1e-9, formulation=formulation)
    highs, _ = solve(formulation.milp, "highs", time_limit=60.0, relative_gap=1e-9)
    assert result.status == highs.status == "optimal"
    assert result.objective == pytest.approx(highs.objective, rel=1e-7, abs=1e-9)


@pytest.mark.parametrize("name", list(MODELS))
def test_cpsat_branches_first_on_which_features_change(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """With a warm start, CP-SAT's search decides first whether each feature changes,
    "unchanged" first, the features with the most thresholds first
    (:func:`~counterplan.solver.exact.cpsat._changes_first`), by a fixed search; without one
    (answers still to be found), and on the tie-break's program (the fewest changes), by its own
    rules."""
    problem = _problem(MODELS[name]())
    formulation = build(problem)
    program = cpsat.build(formulation)
    assert not program.model.Proto().search_strategy
    program.branch_first(formulation)
    (strategy,) = program.model.Proto().search_strategy
    changed = {program.kept[f.changed].Index(): f.index for f in formulation.features if f.changed is not None}
    order = [changed[e.vars[0]] for e in strategy.exprs]
    assert sorted(order) == sorted(changed.values())
    counts = [sum(j == f for _, j, _ in formulation.thresholds) for f in order]
    assert counts == sorted(counts, reverse=True)
    assert strategy.domain_reduction_strategy == strategy.SELECT_MIN_VALUE
    fixed: list[bool] = []
    parameters = cpsat._parameters
    monkeypatch.setattr(cpsat, "_parameters", lambda *args, **kw: (fixed.append(kw["fixed"]), parameters(*args, **kw)))
    local = explain(problem, seed=0)
    start = formulation.assignment(problem.space.encode(local.proposed))
    for warm in (start, None):
        result, _ = solve(
            formulation.milp, "cpsat", time_limit=None, relative_gap=1e-9, start=warm, formulation=formulation
        )
        assert result.status == "optimal"
    formulation.milp.minimise(formulation.changes)  # the tie-break's program: CP-SAT's own search
    result, _ = solve(
        formulation.milp, "cpsat", time_limit=None, relative_gap=0.0, start=start, formulation=formulation
    )
    assert result.status == "optimal"
    assert fixed == [True, False, False]
    solver = cpsat.cp_model().CpSolver()
    parameters(solver.parameters, 1.0, 1e-6, 1, 0, fixed=True)
    assert solver.parameters.search_branching == cpsat.cp_model().FIXED_SEARCH


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("values", [(2.0, 3, 3.0), (1.0, 2, 4.0), (3.0, 1, 4.5), (0.5, 5, 2.5)])
def test_branching_on_the_changes_keeps_the_optimum(
    monkeypatch: pytest.MonkeyPatch, name: str, values: tuple[float, int, float]
) -> None:
    """The same narrowed program, CP-SAT with the branching on the features' changes and with
    its own search: both proven, the same optimum (the order of the search moves no proof)."""
    frame, label = _data()
    model = MODELS[name]().fit(frame, label)
    income, tenure, debt = values
    features = [
        FloatFeature(name="income", value=income, low=0.0, high=10.0, precision=1),
        IntegerFeature(name="tenure", value=tenure, low=0, high=14),
        FloatFeature(name="debt", value=debt, low=0.0, high=5.0, precision=1),
    ]
    problem = CounterfactualProblem(features, [ClassGoal(target=1, confidence=0.7)], adapt_sklearn(model, "ok"))
    local = explain(problem, seed=0)
    reach = -float(local.score_levels[3])
    optima = []
    for branch in (True, False):
        monkeypatch.setattr(cpsat, "BRANCH_ON_CHANGES", branch)
        formulation = build(problem, reach=reach)
        start = formulation.assignment(problem.space.encode(local.proposed))
        result, description = solve(
            formulation.milp, "cpsat", time_limit=None, relative_gap=1e-9, start=start, formulation=formulation
        )
        assert description.startswith("CP-SAT") and result.status == "optimal"
        optima.append(result.objective)
    assert optima[0] == pytest.approx(optima[1], rel=1e-7, abs=1e-9)
