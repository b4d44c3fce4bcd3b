"""The HiGHS backend (``highspy``, the ``exact`` extra): solves a :class:`~counterplan.solver.exact.milp.Milp`.

HiGHS is an open-source MILP solver with a proof of optimality (dual bound, gap, node count),
warm starts (``setSolution``) and callbacks: every improving incumbent is reported as it is
found, and a stop check interrupts the search (a time limit, a cancelled call). It is loaded
only here, only when the exact engine runs.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from counterplan.planning.errors import CounterplanError
from counterplan.solver.exact.milp import Milp, MilpResult


class MissingSolverError(CounterplanError, ImportError):
    """highspy is not installed."""


def load_highspy() -> Any:
    """The ``highspy`` module, or :class:`MissingSolverError` naming the extra to install."""
    try:
        import highspy  # noqa: PLC0415 - heavy, optional: loaded when the exact engine runs
    except ImportError as exc:
        raise MissingSolverError("the exact engine needs HiGHS: pip install 'counterplan[exact]' (highspy)") from exc
    return highspy


_stdout_lock = threading.Lock()
_stdout_users = 0
_stdout_saved = -1


@contextlib.contextmanager
def quiet_stdout(target: int | None = None) -> Iterator[None]:
    """The C library's stdout (file descriptor 1) goes to ``target`` (/dev/null by default) while
    the block runs: a solver's banner would corrupt the command line's JSON. Nested and
    concurrent blocks share one redirection (the first in sends it away, the last out brings it
    back; then ``target`` of a later one is ignored). Python's own writes are buffered and come
    out afterwards, unless flushed meanwhile: then they are lost as well."""
    global _stdout_users, _stdout_saved  # noqa: PLW0603 - one file descriptor 1 per process
    with _stdout_lock:
        if _stdout_users == 0:
            if sys.stdout is not None:
                sys.stdout.flush()
            _stdout_saved = os.dup(1)
            if target is None:
                quiet = os.open(os.devnull, os.O_WRONLY)
                os.dup2(quiet, 1)
                os.close(quiet)
            else:
                os.dup2(target, 1)
        _stdout_users += 1
    try:
        yield
    finally:
        with _stdout_lock:
            _stdout_users -= 1
            if _stdout_users == 0:
                with contextlib.suppress(Exception):
                    ctypes.CDLL(None).fflush(None)  # the C library's buffer, before stdout comes back
                os.dup2(_stdout_saved, 1)
                os.close(_stdout_saved)


_banner_lock = threading.Lock()
_banner_shown = False


def new_highs(highspy: Any) -> Any:
    """A ``Highs`` object. The first one in a process prints a copyright banner on the C
    library's stdout, which would corrupt the command line's JSON: it goes to /dev/null."""
    global _banner_shown  # noqa: PLW0603 - once per process, as the banner
    with _banner_lock:
        if _banner_shown:
            return highspy.Highs()
        with quiet_stdout():
            h = highspy.Highs()
        _banner_shown = True
        return h


def solve(
    milp: Milp,
    *,
    time_limit: float | None,
    relative_gap: float,
    start: npt.NDArray[np.float64] | None = None,
    on_incumbent: Callable[[npt.NDArray[np.float64], float], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    node_limit: int | None = None,
    threads: int = 1,
) -> MilpResult:
    """Minimise ``milp``; ``start`` is a feasible warm start (the incumbent to beat)."""
    highspy = load_highspy()
    h = new_highs(highspy)
    h.silent()
    h.setOptionValue("threads", int(threads))
    h.setOptionValue("mip_rel_gap", float(relative_gap))
    h.setOptionValue("mip_abs_gap", 1e-9)
    h.setOptionValue("random_seed", 0)
    if time_limit is not None:
        h.setOptionValue("time_limit", max(float(time_limit), 0.001))
    if node_limit is not None:
        h.setOptionValue("mip_max_nodes", int(node_limit))
    _load_program(highspy, h, milp)
    if start is not None:
        _warm_start(highspy, h, start)
    _listen(h, on_incumbent, should_stop)
    started = time.perf_counter()
    h.run()
    seconds = time.perf_counter() - started
    return _result(highspy, h, milp, seconds)


def _load_program(highspy: Any, h: Any, milp: Milp) -> None:
    """The program's variables, integrality, objective and rows, into ``h``."""
    n = milp.n_vars
    inf = highspy.kHighsInf
    lower = np.array([max(v, -inf) for v in milp.lower], dtype=np.float64)
    upper = np.array([min(v, inf) for v in milp.upper], dtype=np.float64)
    h.addVars(n, lower, upper)
    integer = np.flatnonzero(np.array(milp.integer, dtype=bool)).astype(np.int32)
    if integer.size:
        h.changeColsIntegrality(
            integer.size, integer, np.full(integer.size, highspy.HighsVarType.kInteger, dtype=np.uint8)
        )
    cost = np.zeros(n)
    for i, c in milp.objective.items():
        cost[i] = c
    h.changeColsCost(n, np.arange(n, dtype=np.int32), cost)
    if not milp.rows:
        return
    starts: list[int] = []
    indices: list[int] = []
    values: list[float] = []
    lows: list[float] = []
    ups: list[float] = []
    for terms, low, up in milp.rows:
        starts.append(len(indices))
        indices.extend(terms.keys())
        values.extend(terms.values())
        lows.append(max(low, -inf))
        ups.append(min(up, inf))
    h.addRows(
        len(milp.rows),
        np.array(lows),
        np.array(ups),
        len(indices),
        np.array(starts, dtype=np.int32),
        np.array(indices, dtype=np.int32),
        np.array(values, dtype=np.float64),
    )


def _warm_start(highspy: Any, h: Any, start: npt.NDArray[np.float64]) -> None:
    """``start`` as the incumbent. With local search's answer as the incumbent, the primal
    heuristics mostly rediscover it: off, a 100-tree heloc program was proven in 4.4 s instead of
    6.1 s."""
    for heuristic in ("mip_heuristic_run_rens", "mip_heuristic_run_rins", "mip_heuristic_run_feasibility_jump"):
        h.setOptionValue(heuristic, False)
    solution = highspy.HighsSolution()
    solution.col_value = list(map(float, start))
    h.setSolution(solution)


def _listen(
    h: Any,
    on_incumbent: Callable[[npt.NDArray[np.float64], float], None] | None,
    should_stop: Callable[[], bool] | None,
) -> None:
    """Report every improving incumbent; interrupt the search when ``should_stop`` says so."""
    if on_incumbent is not None:

        def improving(event: Any) -> None:
            solution = np.array(event.data_out.mip_solution, dtype=np.float64)
            on_incumbent(solution, float(event.data_out.objective_function_value))

        h.cbMipImprovingSolution.subscribe(improving)
    if should_stop is not None:

        def interrupt(event: Any) -> None:
            if should_stop():
                event.interrupt()

        h.cbMipInterrupt.subscribe(interrupt)


def _result(highspy: Any, h: Any, milp: Milp, seconds: float) -> MilpResult:
    """What the solver found: the status, the solution, its objective, the bound, the gap."""
    status = h.getModelStatus()
    info = h.getInfo()
    has_solution = info.primal_solution_status == 2  # kSolutionStatusFeasible
    x = np.array(h.getSolution().col_value, dtype=np.float64) if has_solution else None
    if status == highspy.HighsModelStatus.kOptimal:
        label = "optimal"
    elif status == highspy.HighsModelStatus.kInfeasible:
        label = "infeasible"
    else:
        label = "feasible" if has_solution else "no solution"
    objective = float(info.objective_function_value) + milp.objective_offset if has_solution else float("inf")
    bound = float(info.mip_dual_bound) + milp.objective_offset
    gap = float(info.mip_gap) if has_solution else float("inf")
    nodes = int(info.mip_node_count)
    return MilpResult(label, x, objective, bound, gap, max(nodes, 0), seconds)
