"""The OR-Tools backend (``ortools``' pywraplp): solves a :class:`~counterplan.solver.exact.milp.Milp` where
highspy cannot be loaded, e.g. beside optbinning (the ``scorecard`` extra), which brings OR-Tools.

:func:`solve_described` has :func:`counterplan.solver.exact.highs.solve`'s signature and result,
and says which solver ran. The MIP solver is the first of :data:`SOLVERS` that OR-Tools can
create. What each one does with the arguments through pywraplp (OR-Tools 9.15, measured):

======================  ========================  ========================  ====================
                        SCIP 10 ("SCIP")          HiGHS 1.12 ("HIGHS")      CBC 2.10 ("CBC")
======================  ========================  ========================  ====================
``start``               the incumbent to beat     not given (``SetHint``    ignored by OR-Tools
                        (``SetHint``)             crashes the process)
``should_stop``         interrupts the search     checked before the        checked before the
                        (within ~0.3 s)           solve only                solve only
a limit reached         ``feasible``: the best    ``no solution``: the      ``feasible``: the
                        solution and bound        incumbent is dropped      best solution
``bound`` when optimal  SCIP's dual bound         the objective itself      CBC's bound
``node_limit``          ``limits/nodes``          ``mip_max_nodes``         not supported
``relative_gap``        ``RELATIVE_MIP_GAP``      ``mip_rel_gap``           ``RELATIVE_MIP_GAP``
output                  none                      a banner on the C stdout  none
                                                  at every solve: sent to
                                                  /dev/null meanwhile
======================  ========================  ========================  ====================

So SCIP comes first: it is the one that honours every argument; it runs without cutting planes,
which made it seven to ten times faster on these tree programs. pywraplp has no incumbent
callback: ``on_incumbent`` is called once, after the solve, with the final solution (when there
is one). One thread, fixed random seeds and no presolve (:data:`SCIP_PRESOLVE_ROUNDS`): the same
program gives the same answer every run. pywraplp hands SCIP each row's terms in the order of a
hash map keyed by the variables' addresses, which changes from one solve to the next; SCIP's LP
sorts a row's terms by column, but its presolve reads them in the order given, and its choices
followed that order (with the linear rows' dual presolve off, the answer was the same in every
order too). OR-Tools' HiGHS takes its rows from pywraplp's export, in variable order; it and CBC
gave the same answer every run on the programs SCIP did not.
SCIP does not catch Ctrl-C (``misc/catchctrlc``): it would end the solve as though it had
finished, and the command would never know it was interrupted; left to Python, the signal stops
the solve through ``should_stop`` like any stop request.
"""

from __future__ import annotations

import contextlib
import importlib
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt

from counterplan.solver.exact.highs import MissingSolverError, quiet_stdout
from counterplan.solver.exact.milp import LoadStopped, Milp, MilpResult, lifted_rows, loading_stop, or_the_start
from counterplan.solver.exact.watched import run_watched

SOLVERS: tuple[str, ...] = ("SCIP", "HIGHS", "CBC")
"""pywraplp's solver names, in order of preference (the first OR-Tools can create is used)."""

NAMES = {"HIGHS": "HiGHS", "SCIP": "SCIP", "CBC": "CBC"}


INVALID = frozenset({5, 85})
"""Solve statuses of a program or parameters OR-Tools refuses (``MPSOLVER_MODEL_INVALID``,
``MPSOLVER_MODEL_INVALID_SOLVER_PARAMETERS``): a bug here, raised rather than called no solution."""

SCIP_PRESOLVE_ROUNDS = 0
"""SCIP's presolve rounds (``presolving/maxrounds``): none, so that its answer does not depend on
the order of each row's terms, which pywraplp does not keep (see the module docstring). With its
presolve, the same program gave different answers run to run: a fuzzed set of three answers on a
five-stump forest with features near 1e-6 came back at 9.5604 or 9.5656, both called optimal,
and a set of three on adult's 100-tree boosting four ways in four orders of its terms, one of
them 8.17 called optimal where the optimum is 7.57. Without it, every program of a corpus (tree
programs, sets of answers and tie-breaks on heloc's and adult's forests and boosting, the tests'
scorecards and sets) gave one answer whatever the order of its rows' terms (three random orders
each, through OR-Tools' proto path, which keeps the order it is given), and the corpus took 61 s
instead of 76 s (one set program 10.2 s instead of 1.0 s, another 22 s instead of 36 s). One set
of five answers on adult was called optimal at 15.46 where the optimum is 14.96, every run: a
tree ensemble's sets go to HiGHS when highspy loads
(:func:`~counterplan.solver.exact.answer_set.set_backend`), and ``docs/benchmarks/engines.md``
has the measurements."""

HIGHS_VERSIONS = {"9.15": "1.12.0"}
"""The HiGHS bundled with an OR-Tools release (its pywraplp reports no version of its own)."""


def ortools_module(name: str, backend: str) -> Any:
    """OR-Tools' module ``name`` (``ortools.sat.python.cp_model``), or the one-line error naming
    ``backend`` and the ``exact`` extra that brings OR-Tools."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise MissingSolverError(
            f"the {backend} backend needs OR-Tools: pip install 'counterplan[exact]' ({exc})"
        ) from exc


def _pywraplp() -> Any:
    return ortools_module("ortools.linear_solver.pywraplp", "OR-Tools")


def ortools_version() -> str:
    """OR-Tools' version, ``major.minor`` (``9.15``)."""
    ortools = importlib.import_module("ortools")
    return ".".join(str(getattr(ortools, "__version__", "?")).split(".")[:2])


def _create(pywraplp: Any) -> tuple[Any, str]:
    """A solver of the first of :data:`SOLVERS` OR-Tools can create, and its name."""
    for name in SOLVERS:
        solver = pywraplp.Solver.CreateSolver(name)
        if solver is not None:
            return solver, name
    raise MissingSolverError(f"this OR-Tools build has none of the MIP solvers {list(SOLVERS)}")


def available() -> str | None:
    """None when OR-Tools loads and can create one of :data:`SOLVERS`, else why not."""
    try:
        _create(_pywraplp())
    except ImportError as exc:
        return str(exc)
    return None


def describe(name: str, solver: Any) -> str:
    """``SCIP 10.0.0 (OR-Tools 9.15)``: the solver that ran, and the OR-Tools that carries it."""
    release = ortools_version()
    if name == "HIGHS":
        version = _highs_version or HIGHS_VERSIONS.get(release)
        return f"HiGHS {version} (OR-Tools {release})" if version else f"HiGHS (OR-Tools {release})"
    text = str(solver.SolverVersion())  # "SCIP 10.0.0 [LP solver: SoPlex 8.0.0]", "Cbc 2.10.12"
    words = text.split()
    version = words[1] if len(words) > 1 and words[1][:1].isdigit() else ""
    return f"{NAMES[name]} {version} (OR-Tools {release})" if version else f"{NAMES[name]} (OR-Tools {release})"


_highs_version: str | None = None
"""The bundled HiGHS's version, read from its banner the first time it runs."""


@contextlib.contextmanager
def _highs_banner() -> Iterator[None]:
    """OR-Tools' HiGHS prints a banner on the C stdout at every solve: the first goes to a file
    (its version is read from it), the others to /dev/null (see :func:`quiet_stdout`)."""
    global _highs_version  # noqa: PLW0603 - read once per process, from the first banner
    if _highs_version is not None:
        with quiet_stdout():
            yield
        return
    with tempfile.TemporaryFile() as capture:
        with quiet_stdout(capture.fileno()):
            yield
        capture.seek(0)
        found = re.search(rb"Running HiGHS (\d+\.\d+\.\d+)", capture.read(4096))
        if found:
            _highs_version = found.group(1).decode()


def solve_described(
    milp: Milp,
    *,
    time_limit: float | None,
    relative_gap: float,
    start: npt.NDArray[np.float64] | None = None,
    on_incumbent: Callable[[npt.NDArray[np.float64], float], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    node_limit: int | None = None,
    threads: int = 1,
) -> tuple[MilpResult, str]:
    """Minimise ``milp``; ``start`` is a feasible warm start (the incumbent to beat). Returns the
    result and the description of the solver that ran (``SCIP 10.0.0 (OR-Tools 9.15)``).

    As :func:`counterplan.solver.exact.highs.solve`, with what the solver behind pywraplp allows
    (see the module's table): ``on_incumbent`` is called once, with the final solution.
    ``time_limit`` counts from this call: loading the program is part of it."""
    entered = time.perf_counter()
    pywraplp = _pywraplp()
    solver, name = _create(pywraplp)
    if should_stop is not None and should_stop():  # stopped before it started
        stopped = MilpResult("no solution", None, float("inf"), -float("inf"), float("inf"), 0, 0.0)
        return or_the_start(stopped, milp, start), describe(name, solver)
    try:
        variables = _load(solver, milp, loading_stop(should_stop, entered, time_limit))
    except LoadStopped:  # the time (or a stop) came while it was loaded: the start stands
        stopped = MilpResult("no solution", None, float("inf"), -float("inf"), float("inf"), 0, 0.0)
        return or_the_start(stopped, milp, start), describe(name, solver)
    if time_limit is not None:  # what is left of it after loading the program
        time_limit = max(float(time_limit) - (time.perf_counter() - entered), 0.0)
    params = _parameters(
        pywraplp, solver, name, time_limit=time_limit, relative_gap=relative_gap, node_limit=node_limit, threads=threads
    )
    if start is not None and name != "HIGHS":  # HiGHS: SetHint crashes OR-Tools 9.15 (a segfault)
        solver.SetHint(variables, [float(v) for v in start])
    started = time.perf_counter()
    if name == "HIGHS":  # InterruptSolve() does nothing there: its own time limit only
        with _highs_banner():
            status: int | None = solver.Solve(params)
    else:
        deadline = None if time_limit is None else started + time_limit
        status = _watched(solver, params, deadline, should_stop)
    if status is None:  # abandoned: past its time (or a stop) and still running
        stopped = MilpResult("no solution", None, float("inf"), -float("inf"), float("inf"), 0, 0.0)
        result = replace(stopped, seconds=time.perf_counter() - started)
    else:
        seconds = time.perf_counter() - started
        result = _result(pywraplp, solver, milp, variables, status=status, seconds=seconds)
    result = or_the_start(result, milp, start)
    if on_incumbent is not None and result.x is not None:
        on_incumbent(result.x, result.objective - milp.objective_offset)  # as HiGHS reports it
    return result, describe(name, solver)


def _watched(solver: Any, params: Any, deadline: float | None, should_stop: Callable[[], bool] | None) -> int | None:
    """``solver.Solve(params)`` watched (:func:`counterplan.solver.exact.watched.run_watched`):
    interrupted when ``should_stop`` says stop; its status, or None when it was abandoned. SCIP
    checks its clock and the interrupt between its own steps only (a presolve round, a node): on
    a 100-tree forest under load one of them overran a 3 s limit by more than a second. An
    abandoned solve goes on in its thread until SCIP next looks, and nobody reads its solution."""
    watched = run_watched(
        lambda: int(solver.Solve(params)),
        name="ortools",
        deadline=deadline,
        should_stop=should_stop,
        on_stop=solver.InterruptSolve,
        on_late=solver.InterruptSolve,
    )
    return watched.value


def _load(solver: Any, milp: Milp, stop: Callable[[], bool] | None = None) -> list[Any]:
    """The variables, rows and objective, through the solver's row/coefficient API; a row with a
    coefficient the solver would take for zero is multiplied up first
    (:func:`~counterplan.solver.exact.milp.lifted`). Raises
    :class:`~counterplan.solver.exact.milp.LoadStopped` when ``stop`` says stop."""
    inf = solver.infinity()
    variables = [
        solver.Var(max(low, -inf), min(up, inf), integer, "")
        for low, up, integer in zip(milp.lower, milp.upper, milp.integer, strict=True)
    ]
    for terms, low, up in lifted_rows(milp, stop):  # no term below the solver's zero
        row = solver.RowConstraint(max(low, -inf), min(up, inf), "")
        coefficient = row.SetCoefficient
        for i, c in terms.items():
            coefficient(variables[i], c)
    objective = solver.Objective()
    for i, c in milp.objective.items():
        objective.SetCoefficient(variables[i], c)
    objective.SetMinimization()
    return variables


def _parameters(
    pywraplp: Any,
    solver: Any,
    name: str,
    *,
    time_limit: float | None,
    relative_gap: float,
    node_limit: int | None,
    threads: int,
) -> Any:
    """Sets the limits on ``solver``; returns the common parameters to solve with."""
    if time_limit is not None:
        solver.SetTimeLimit(max(round(float(time_limit) * 1000), 1))
    solver.SetNumThreads(int(threads))
    params = pywraplp.MPSolverParameters()
    params.SetDoubleParam(params.RELATIVE_MIP_GAP, float(relative_gap))
    specific: list[str] = []
    if name == "HIGHS":  # OR-Tools passes HiGHS none of the common parameters: its own options
        specific = [f"threads={int(threads)}", "random_seed=0", f"mip_rel_gap={float(relative_gap)!r}"]
        specific.append("mip_abs_gap=1e-09")
        if node_limit is not None:
            specific.append(f"mip_max_nodes={int(node_limit)}")
        text = ",".join(specific)
    elif name == "SCIP":
        # no cutting planes: on the test suite's 24 tree and linear programs, the demo's and two
        # more, SCIP took 95 s with its defaults and 9.4 s without cuts (highspy: 13.9 s)
        specific = ["randomization/randomseedshift = 0", "limits/absgap = 1e-9"]
        specific += ["separating/maxrounds = 0", "separating/maxroundsroot = 0"]
        specific.append(f"presolving/maxrounds = {SCIP_PRESOLVE_ROUNDS}")  # the same answer every run
        specific.append("misc/catchctrlc = FALSE")  # Ctrl-C is Python's (see the module docstring)
        if node_limit is not None:
            specific.append(f"limits/nodes = {int(node_limit)}")
        text = "\n".join(specific)
    else:
        text = ""  # CBC takes no solver-specific parameters through pywraplp: no node limit
    # OR-Tools' HiGHS says False but applies them (a bad one fails the solve: status 85)
    if text and not solver.SetSolverSpecificParametersAsString(text) and name != "HIGHS":
        raise ValueError(f"{NAMES[name]} refused the parameters {text!r}")
    return params


def _result(pywraplp: Any, solver: Any, milp: Milp, variables: list[Any], *, status: int, seconds: float) -> MilpResult:
    if status in INVALID:
        raise ValueError(f"OR-Tools refused the program or its parameters (status {status})")
    has_solution = status in (pywraplp.Solver.OPTIMAL, pywraplp.Solver.FEASIBLE)
    if status == pywraplp.Solver.OPTIMAL:
        label = "optimal"
    elif status == pywraplp.Solver.INFEASIBLE:
        label = "infeasible"
    else:
        label = "feasible" if has_solution else "no solution"
    x = np.array([v.solution_value() for v in variables], dtype=np.float64) if has_solution else None
    objective = float(solver.Objective().Value()) + milp.objective_offset if has_solution else float("inf")
    bound = float("inf") if label == "infeasible" else -float("inf")
    if has_solution:  # OR-Tools' HiGHS gives the objective itself as its bound
        with contextlib.suppress(Exception):
            bound = float(solver.Objective().BestBound()) + milp.objective_offset
    nodes = 0
    if any(milp.integer):
        with contextlib.suppress(Exception):
            nodes = int(solver.nodes())
    gap = _gap(objective, bound) if has_solution else float("inf")
    return MilpResult(label, x, objective, bound, gap, max(nodes, 0), seconds)


def _gap(objective: float, bound: float) -> float:
    """HiGHS's relative gap: ``|objective - bound| / |objective|``."""
    if objective == bound:
        return 0.0
    if not np.isfinite(bound) or objective == 0.0:
        return float("inf")
    return abs(objective - bound) / abs(objective)
