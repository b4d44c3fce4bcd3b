"""The HiGHS backend (``highspy``, the ``exact`` extra): solves a :class:`~counterplan.solver.exact.milp.Milp`.

HiGHS is an open-source MILP solver with a proof of optimality (dual bound, gap, node count),
warm starts (``setSolution``) and callbacks: every improving incumbent is reported as it is
found, and a stop check interrupts the search (a time limit, a cancelled call). It is loaded
only here, only when the exact engine runs.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from counterplan.planning.errors import CounterplanError
from counterplan.solver.exact.milp import LoadStopped, Milp, MilpResult, lifted_rows, loading_stop, or_the_start
from counterplan.solver.exact.watched import run_watched


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


NO_PROBING = 1 << 15
"""HiGHS's ``presolve_rule_off`` bit for probing (its own log names it when probing hits the
time limit): off under a time limit, see :func:`solve`."""


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
    """Minimise ``milp``; ``start`` is a feasible warm start (the incumbent to beat).

    ``time_limit`` counts from this call: loading the program into HiGHS is part of it. Under a
    time limit presolve's probing is off (:data:`NO_PROBING`): HiGHS checks its clock only
    between probes and calls no callback meanwhile, so probing overran the limit by seconds
    (a 100-tree forest: 18.9 s under a 5 s limit) and could not be stopped. The root node's cut
    separation has no clock either (the same forest: 8.8 s more under a 6 s limit), so with a
    time limit or a stop check HiGHS runs in a thread of its own (:func:`_run`), and a search
    still running :data:`~counterplan.solver.exact.watched.GRACE` seconds after its time is up
    is abandoned with what its callbacks told: the best incumbent and bound so far."""
    entered = time.perf_counter()
    highspy = load_highspy()
    h = new_highs(highspy)
    h.silent()
    h.setOptionValue("threads", int(threads))
    h.setOptionValue("mip_rel_gap", float(relative_gap))
    h.setOptionValue("mip_abs_gap", 1e-9)
    h.setOptionValue("random_seed", 0)
    if time_limit is not None:
        h.setOptionValue("presolve_rule_off", NO_PROBING)
    if node_limit is not None:
        h.setOptionValue("mip_max_nodes", int(node_limit))
    try:
        _load_program(highspy, h, milp, loading_stop(should_stop, entered, time_limit))
    except LoadStopped:  # the time (or a stop) came while it was loaded: the start stands
        stopped = MilpResult("no solution", None, float("inf"), -float("inf"), float("inf"), 0, 0.0)
        return or_the_start(stopped, milp, start)
    if start is not None:
        _warm_start(highspy, h, start)
    progress = _Progress()
    _listen(h, progress, on_incumbent, should_stop)
    deadline = None
    if time_limit is not None:  # what is left of it after loading the program
        deadline = entered + float(time_limit)
        h.setOptionValue("time_limit", max(deadline - time.perf_counter(), 0.001))
    started = time.perf_counter()
    finished = _run(h, deadline, should_stop, progress)
    seconds = time.perf_counter() - started
    if not finished:
        return progress.result(milp, seconds)
    return _result(highspy, h, milp, seconds)


@dataclass
class _Progress:
    """What a search's callbacks have told so far (its best incumbent and bound), and whether
    it was abandoned: from then on its callbacks report nothing and ask it to stop."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    abandoned: bool = False
    x: npt.NDArray[np.float64] | None = None
    objective: float = float("inf")
    bound: float = -float("inf")
    nodes: int = 0

    def abandon(self) -> None:
        """Report nothing more (after a callback under way has finished)."""
        with self.lock:
            self.abandoned = True

    def result(self, milp: Milp, seconds: float) -> MilpResult:
        """The abandoned search's result: its incumbent (``feasible``) or none."""
        offset = milp.objective_offset
        if self.x is None:
            return MilpResult("no solution", None, float("inf"), self.bound + offset, float("inf"), self.nodes, seconds)
        objective, bound = self.objective + offset, min(self.bound, self.objective) + offset
        gap = abs(objective - bound) / abs(objective) if objective != 0.0 else float("inf")
        return MilpResult("feasible", self.x, objective, bound, gap, self.nodes, seconds)


def _run(h: Any, deadline: float | None, should_stop: Callable[[], bool] | None, progress: _Progress) -> bool:
    """Run the search, watched (:func:`counterplan.solver.exact.watched.run_watched`); True when
    it finished, False when it was abandoned. HiGHS's own callbacks interrupt it on a stop; an
    abandoned search goes on in its thread until HiGHS next checks its clock, holding a core
    meanwhile. Not highspy's startSolve: it resets HiGHS's process-wide scheduler after each
    solve, under any other search running meanwhile (an abandoned one, a server's)."""
    return run_watched(
        h.run, name="highs", deadline=deadline, should_stop=should_stop, on_late=progress.abandon
    ).finished


def _load_program(highspy: Any, h: Any, milp: Milp, stop: Callable[[], bool] | None = None) -> None:
    """The program's variables, integrality, objective and rows, into ``h`` (a row with a term HiGHS
    would take for zero multiplied up first: :func:`~counterplan.solver.exact.milp.lifted`);
    raises :class:`~counterplan.solver.exact.milp.LoadStopped` when ``stop`` says stop."""
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
    for terms, low, up in lifted_rows(milp, stop):  # no term below HiGHS's zero
        starts.append(len(indices))
        indices.extend(terms.keys())
        values.extend(terms.values())
        lows.append(max(low, -inf))
        ups.append(min(up, inf))
    status = h.addRows(
        len(milp.rows),
        np.array(lows),
        np.array(ups),
        len(indices),
        np.array(starts, dtype=np.int32),
        np.array(indices, dtype=np.int32),
        np.array(values, dtype=np.float64),
    )
    if status == highspy.HighsStatus.kError:  # it kept none of them: the empty program's optimum is no answer
        raise RuntimeError(f"HiGHS refused the program's {len(milp.rows)} rows (a coefficient beyond its range)")


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
    progress: _Progress,
    on_incumbent: Callable[[npt.NDArray[np.float64], float], None] | None,
    should_stop: Callable[[], bool] | None,
) -> None:
    """Report every improving incumbent; interrupt the search when ``should_stop`` says so (or
    once it is abandoned). ``progress`` keeps the incumbent and bound for an abandoned search."""

    def improving(event: Any) -> None:
        with progress.lock:
            if progress.abandoned:
                return
            solution = np.array(event.data_out.mip_solution, dtype=np.float64)
            objective = float(event.data_out.objective_function_value)
            progress.x, progress.objective = solution, objective
            if on_incumbent is not None:
                on_incumbent(solution, objective)

    h.cbMipImprovingSolution.subscribe(improving)

    def interrupt(event: Any) -> None:
        data = event.data_out
        if math.isfinite(data.mip_dual_bound):
            progress.bound = max(progress.bound, float(data.mip_dual_bound))
        progress.nodes = max(progress.nodes, int(data.mip_node_count))
        if progress.abandoned or (should_stop is not None and should_stop()):
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
