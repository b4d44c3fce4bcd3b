"""The exact engine's two MILP backends, HiGHS (highspy) and OR-Tools: the same optimum as each
other and as brute force on small random programs, the same proof of infeasibility, a warm
start taken, a stop honoured, the banner kept off stdout, and the real engine proving the same
answer with either; ``auto`` picks one and says which."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from scipy.optimize import linprog
from sklearn.ensemble import GradientBoostingClassifier

from counterplan.planning import ClassGoal, CounterfactualProblem
from counterplan.planning.models import adapt_sklearn
from counterplan.solver.core.config import SolverConfig
from counterplan.solver.counterfactual import explain
from counterplan.solver.engines import exact_config, not_encodable
from counterplan.solver.exact import backend, highs, ortools_backend
from counterplan.solver.exact.config import ExactPhaseConfig
from counterplan.solver.exact.milp import INF, Milp, MilpResult
from counterplan.solver.exact.report import ExactStatistics

pytest.importorskip("highspy")
pytest.importorskip("ortools")

OR_TOOLS_SOLVERS = ("SCIP", "HIGHS", "CBC")


@pytest.fixture(params=OR_TOOLS_SOLVERS)
def or_tools_solver(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Each MIP solver OR-Tools carries, as the OR-Tools backend's only choice."""
    monkeypatch.setattr(ortools_backend, "SOLVERS", (request.param,))
    yield str(request.param)


def _random_milp(seed: int) -> tuple[Milp, int]:
    """Two or three integers in [-3, 3], zero to two bounded continuous variables, two to four
    rows; returns the program and its number of integers (they come first)."""
    rng = np.random.default_rng(seed)
    milp = Milp()
    n_int = int(rng.integers(2, 4))
    n_cont = int(rng.integers(0, 3))
    for i in range(n_int):
        milp.var(f"z{i}", float(rng.integers(-3, 1)), float(rng.integers(0, 4)), integer=True)
    for i in range(n_cont):
        low = float(rng.uniform(-2.0, 0.0))
        milp.var(f"y{i}", low, low + float(rng.uniform(0.5, 3.0)))
    n = n_int + n_cont
    for _ in range(int(rng.integers(2, 5))):
        coefficients = np.round(rng.uniform(-3.0, 3.0, n), 2)
        rhs = float(np.round(rng.uniform(-2.0, 4.0), 2))
        if rng.random() < 0.2:
            milp.row(dict(enumerate(coefficients)), rhs - 1.5, rhs)  # a ranged row
        else:
            milp.row(dict(enumerate(coefficients)), -INF, rhs)
    milp.minimise(dict(enumerate(np.round(rng.uniform(-2.0, 2.0, n), 2))), offset=float(rng.uniform(-1.0, 1.0)))
    return milp, n_int


def _brute_force(milp: Milp, n_int: int) -> float:
    """The optimum over every integer point, each with its continuous part an LP (inf: infeasible)."""
    n = milp.n_vars
    A = np.zeros((len(milp.rows), n))
    for r, (terms, _, _) in enumerate(milp.rows):
        for i, c in terms.items():
            A[r, i] = c
    lows = np.array([low for _, low, _ in milp.rows])
    ups = np.array([up for _, _, up in milp.rows])
    cost = np.zeros(n)
    for i, c in milp.objective.items():
        cost[i] = c
    best = INF
    axes = [range(round(milp.lower[i]), round(milp.upper[i]) + 1) for i in range(n_int)]
    for point in itertools.product(*axes):
        z = np.array(point, dtype=np.float64)
        fixed = A[:, :n_int] @ z
        value = float(cost[:n_int] @ z)
        if n == n_int:
            if np.all(fixed <= ups + 1e-9) and np.all(fixed >= lows - 1e-9):
                best = min(best, value)
            continue
        Ay = A[:, n_int:]
        upper = np.vstack([Ay, -Ay])
        rhs = np.concatenate([ups - fixed, fixed - lows])
        keep = np.isfinite(rhs)
        bounds = list(zip(milp.lower[n_int:], milp.upper[n_int:], strict=True))
        lp = linprog(cost[n_int:], A_ub=upper[keep], b_ub=rhs[keep], bounds=bounds)
        if lp.status == 0:
            best = min(best, value + float(lp.fun))
    return best + milp.objective_offset if best < INF else INF


def _solve(milp: Milp, name: str, **kwargs: Any) -> MilpResult:
    kwargs.setdefault("time_limit", 60.0)
    kwargs.setdefault("relative_gap", 0.0)
    return backend.solve(milp, name, **kwargs)[0]


SEEDS = range(40)


def test_random_programs_have_the_same_optimum_in_both_backends_and_by_brute_force(or_tools_solver: str) -> None:
    infeasible = 0
    for seed in SEEDS:
        milp, n_int = _random_milp(seed)
        expected = _brute_force(milp, n_int)
        by_highs = _solve(milp, "highs")
        by_ortools = _solve(milp, "ortools")
        if expected == INF:
            infeasible += 1
            assert by_highs.status == by_ortools.status == "infeasible", seed
            assert by_ortools.x is None
            continue
        assert by_highs.status == by_ortools.status == "optimal", (seed, by_highs, by_ortools)
        assert by_ortools.objective == pytest.approx(expected, abs=1e-6), seed
        assert by_highs.objective == pytest.approx(expected, abs=1e-6), seed
        x = by_ortools.x
        assert x is not None
        assert milp.value(milp.objective, x, milp.objective_offset) == pytest.approx(by_ortools.objective, abs=1e-6)
        assert np.allclose(x[:n_int], np.round(x[:n_int]), atol=1e-6)
        for terms, low, up in milp.rows:
            assert low - 1e-6 <= milp.value(terms, x) <= up + 1e-6
        assert by_ortools.gap <= 1e-6 and by_ortools.bound <= by_ortools.objective + 1e-6
    assert 0 < infeasible < len(SEEDS) // 2, "the random programs include some, not mostly, infeasible ones"


def test_an_integer_infeasible_program_is_proven_infeasible_by_both(or_tools_solver: str) -> None:
    """2a + 2b = 3 has real solutions and no integer one: the proof needs the branching."""
    milp = Milp()
    a, b = milp.var("a", 0, 5, integer=True), milp.var("b", 0, 5, integer=True)
    c = milp.var("c", 0.0, 1.0)
    milp.row({a: 2.0, b: 2.0}, 3.0, 3.0)
    milp.minimise({a: 1.0, c: 1.0})
    for name in ("highs", "ortools"):
        result = _solve(milp, name)
        assert result.status == "infeasible" and result.x is None, (name, result)
    milp.rows[0] = ({a: 2.0, b: 2.0}, 4.0, 4.0)  # and the control: solvable
    assert _solve(milp, "ortools").status == "optimal"


def _market_split(rows: int, n: int, seed: int = 0) -> tuple[Milp, np.ndarray, float]:
    """Equality knapsacks over binaries (Cornuéjols-Dawande): hard to find any solution of, a
    known one built in; returns the program, that solution and its objective."""
    rng = np.random.default_rng(seed)
    milp = Milp()
    xs = [milp.binary(f"x{i}") for i in range(n)]
    known = rng.integers(0, 2, n).astype(np.float64)
    weights = rng.integers(1, 100, size=(rows, n)).astype(np.float64)
    for w in weights:
        milp.row(dict(zip(xs, w, strict=True)), float(w @ known), float(w @ known))
    cost = rng.integers(-10, 10, n).astype(np.float64)
    milp.minimise(dict(zip(xs, cost, strict=True)))
    return milp, known, float(cost @ known)


@pytest.mark.parametrize("name", ["highs", "ortools"])
def test_a_warm_start_is_taken(name: str) -> None:
    """One node is too few to find a solution of a market split: with the known solution as the
    start the backend returns it (or better), without it none."""
    milp, known, objective = _market_split(3, 30)
    started = _solve(milp, name, start=known, node_limit=1, relative_gap=1e-6)
    assert started.x is not None and started.status in ("feasible", "optimal"), started
    assert started.objective <= objective + 1e-9
    cold = _solve(milp, name, node_limit=1, relative_gap=1e-6)
    assert cold.status == "no solution" and cold.x is None, "the control: without the start, nothing"


def test_or_tools_highs_is_not_given_the_start_that_would_crash_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """OR-Tools 9.15's HiGHS segfaults on a hint: the backend solves without it."""
    monkeypatch.setattr(ortools_backend, "SOLVERS", ("HIGHS",))
    milp, n_int = _random_milp(1)
    result = _solve(milp, "ortools", start=np.zeros(milp.n_vars))
    assert result.status in ("optimal", "infeasible")
    assert result.objective == pytest.approx(_brute_force(milp, n_int), abs=1e-6) or result.status == "infeasible"


def test_should_stop_interrupts_the_or_tools_search() -> None:
    """A four-row market split takes SCIP far longer than a minute: asked to stop after 0.5 s,
    it stops within a couple of seconds, with its incumbent (the start) unproven."""
    milp, known, objective = _market_split(4, 40)
    began = time.perf_counter()
    asked: list[float] = []

    def should_stop() -> bool:
        if time.perf_counter() - began > 0.5:
            asked.append(time.perf_counter())
            return True
        return False

    seen: list[float] = []
    result, description = backend.solve(
        milp,
        "ortools",
        time_limit=30.0,
        relative_gap=0.0,
        start=known,
        should_stop=should_stop,
        on_incumbent=lambda _x, value: seen.append(value),
    )
    assert description.startswith("SCIP")
    assert asked and time.perf_counter() - asked[0] < 5.0, "stopped when asked, not at the time limit"
    assert result.status == "feasible" and result.objective <= objective + 1e-9
    assert seen == [result.objective], "on_incumbent: once, with the final solution"


def test_a_stop_asked_before_the_solve_returns_at_once(or_tools_solver: str) -> None:
    milp, _, _ = _market_split(4, 40)
    began = time.perf_counter()
    result = _solve(milp, "ortools", should_stop=lambda: True)
    assert result.status == "no solution" and result.x is None
    assert time.perf_counter() - began < 2.0


def test_or_tools_highs_banner_stays_off_stdout(
    capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    milp, _ = _random_milp(0)
    from ortools.linear_solver import pywraplp

    control = pywraplp.Solver.CreateSolver("HIGHS")  # the control: unguarded, the banner shows
    control.Minimize(control.IntVar(0, 1, "x"))
    control.Solve()
    assert "Running HiGHS" in capfd.readouterr().out
    monkeypatch.setattr(ortools_backend, "SOLVERS", ("HIGHS",))
    print("before", flush=True)
    for _ in range(2):  # the first banner is read for the version, the next go to /dev/null
        result, description = backend.solve(milp, "ortools", time_limit=10.0, relative_gap=0.0)
        assert result.status in ("optimal", "infeasible")
        assert description.startswith("HiGHS 1.") and "(OR-Tools 9." in description, description
    print("after", flush=True)
    out = capfd.readouterr().out
    assert "HiGHS" not in out and out.split() == ["before", "after"], out


def _missing() -> Any:
    raise highs.MissingSolverError("not installed")


def test_auto_prefers_highspy_falls_back_to_or_tools_and_names_both_extras(monkeypatch: pytest.MonkeyPatch) -> None:
    milp, _ = _random_milp(2)
    assert backend.available("auto") is None and backend.available("highs") is None
    assert backend.available("ortools") is None
    assert "unknown MILP backend" in str(backend.available("gurobi"))
    _, description = backend.solve(milp, "auto", time_limit=10.0, relative_gap=0.0)
    assert description.startswith("HiGHS 1.") and description.endswith("(highspy)"), description

    monkeypatch.setattr(highs, "load_highspy", _missing)  # not installed, or clashing with OR-Tools
    assert backend.available("highs") is not None and backend.available("auto") is None
    _, description = backend.solve(milp, "auto", time_limit=10.0, relative_gap=0.0)
    assert "(OR-Tools 9." in description, description
    monkeypatch.setattr(ortools_backend, "_pywraplp", _missing)
    reason = backend.available("auto")
    assert reason is not None and "counterplan[exact]" in reason and "counterplan[scorecard]" in reason
    with pytest.raises(highs.MissingSolverError, match=r"counterplan\[scorecard\]"):
        backend.solve(milp, "auto", time_limit=10.0, relative_gap=0.0)
    with pytest.raises(ImportError):  # MissingSolverError is an ImportError, as before
        backend.solve(milp, "ortools", time_limit=10.0, relative_gap=0.0)


def test_the_engine_choice_asks_the_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    problem = _loan_like_problem()
    assert not_encodable(problem) is None and not_encodable(problem, "ortools") is None
    monkeypatch.setattr(ortools_backend, "_pywraplp", _missing)
    assert not_encodable(problem, "ortools") == "not installed" and not_encodable(problem) is None
    monkeypatch.setattr(highs, "load_highspy", _missing)
    reason = not_encodable(problem)
    assert reason is not None and "counterplan[scorecard]" in reason


def _loan_like_problem() -> CounterfactualProblem:
    from tests.solver.exact.test_exact import _data, _encoded, _features

    frame, label, _ = _data()
    model = _encoded(GradientBoostingClassifier(n_estimators=25, max_depth=3, random_state=0)).fit(frame, label)
    return CounterfactualProblem(_features(), [ClassGoal(target=1, confidence=0.7)], adapt_sklearn(model, "ok"))


def _with_backend(name: str) -> SolverConfig:
    """The exact engine's configuration (local search's warm start first), on ``name``."""
    config = exact_config(SolverConfig())
    return config.model_copy(update={"phases": (*config.phases[:-1], ExactPhaseConfig(backend=name))})


def test_the_exact_engine_proves_the_same_optimum_with_or_tools_as_with_highs() -> None:
    from tests.solver.exact.test_exact import _brute_force as grid_optimum

    problem = _loan_like_problem()
    answers = {name: explain(problem, _with_backend(name), engine="exact", seed=0) for name in ("highs", "ortools")}
    for name, result in answers.items():
        exact = result.statistics.exact
        assert exact is not None and exact.status == "optimal" and exact.proven and exact.verified, (name, exact)
        assert result.valid and result.statistics.engine == "exact"
    by_highs, by_ortools = answers["highs"], answers["ortools"]
    assert by_highs.statistics.exact is not None and by_ortools.statistics.exact is not None
    assert by_highs.statistics.exact.backend.endswith("(highspy)")
    assert by_ortools.statistics.exact.backend.startswith("SCIP") and "OR-Tools" in by_ortools.statistics.exact.backend
    assert by_ortools.statistics.exact.objective == pytest.approx(by_highs.statistics.exact.objective, rel=1e-6)
    assert by_ortools.score_levels[3] == pytest.approx(by_highs.score_levels[3], rel=1e-6, abs=1e-9)
    assert by_ortools.score_levels[4] == by_highs.score_levels[4]  # the lexicographic second program too
    assert by_ortools.score_levels[3] == pytest.approx(grid_optimum(problem)[3], rel=1e-6, abs=1e-9)


def test_the_backend_setting_and_report_round_trip() -> None:
    config = _with_backend("ortools")
    assert SolverConfig.model_validate_json(config.model_dump_json()) == config
    assert SolverConfig.from_yaml(config.to_yaml()) == config
    assert "backend: ortools" in config.to_yaml()
    with pytest.raises(ValueError, match="backend"):
        ExactPhaseConfig(backend="gurobi")
    from counterplan.server.grpc.convert import _exact_message
    from counterplan.server.grpc.result_convert import _exact

    report = ExactStatistics(status="optimal", proven=True, objective=1.5, backend="SCIP 10.0.0 (OR-Tools 9.15)")
    message = _exact_message(report)
    assert message is not None and message.backend == report.backend
    assert _exact(message) == report


def test_an_or_tools_solve_past_its_time_is_abandoned() -> None:
    """SCIP looks at its clock and the interrupt only between its steps: a solve that neither
    ends nor stops is abandoned soon after its deadline (a stop request likewise), without a
    solution; one that ends in time gives its status."""
    import threading
    import time

    from counterplan.solver.exact.ortools_backend import _watched

    class Stubborn:
        def __init__(self, seconds: float) -> None:
            self.seconds = seconds
            self.interrupted = threading.Event()

        def Solve(self, params: object) -> int:  # noqa: N802 - pywraplp's name
            time.sleep(self.seconds)
            return 0

        def InterruptSolve(self) -> None:  # noqa: N802
            self.interrupted.set()

    started = time.perf_counter()
    late = Stubborn(3.0)
    assert _watched(late, None, started + 0.2, None) is None
    assert late.interrupted.is_set()
    assert _watched(Stubborn(0.0), None, time.perf_counter() + 60.0, lambda: False) == 0
    stopped = Stubborn(3.0)
    assert _watched(stopped, None, None, lambda: True) is None and stopped.interrupted.is_set()


def test_a_stopped_or_tools_search_keeps_its_warm_start(or_tools_solver: str) -> None:
    """SCIP stopped before its first solution reports none, not even its hint: the backend returns
    the (feasible) warm start, as HiGHS's callback does, so a cancelled exact phase keeps local
    search's answer as its incumbent ("feasible"), never "no solution"."""
    milp, known, objective = _market_split(4, 40)
    result = _solve(milp, "ortools", start=known, should_stop=lambda: True)
    assert result.status == "feasible" and result.x is not None, result
    np.testing.assert_array_equal(result.x, known)
    assert result.objective == pytest.approx(objective)
    assert result.gap == INF, "the start is not proven"
