"""Which MILP backend solves the exact engine's program: HiGHS through ``highspy`` (the ``exact``
extra) or OR-Tools (which the ``scorecard`` extra brings with optbinning).

``auto`` takes highspy when it imports and OR-Tools otherwise: highspy may be missing, or an
older highspy (1.15) may clash with an OR-Tools already loaded in the process (an
undefined-symbol ImportError; highspy 1.16 and OR-Tools 9.15 load together). Both backends take
the same program and give the same result; :func:`solve` also says which one ran. A tree
ensemble's program with a number of more than :data:`~counterplan.solver.exact.milp.WIDE_STEPS`
grid steps goes to HiGHS and SCIP without its values (:mod:`~counterplan.solver.exact.intervals`),
where its big-M rows would be wider than their tolerances.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

from counterplan.solver.exact import highs, intervals, ortools_backend
from counterplan.solver.exact.highs import MissingSolverError
from counterplan.solver.exact.milp import Milp, MilpResult, column_scales, in_scaled_columns

if TYPE_CHECKING:
    from counterplan.solver.exact.program import Formulation

Backend = Literal["auto", "highs", "ortools", "cpsat"]
BACKENDS: tuple[str, ...] = ("auto", "highs", "ortools", "cpsat")

NEITHER = (
    "the exact engine needs HiGHS: pip install 'counterplan[exact]' (highspy); "
    "or OR-Tools, which 'counterplan[scorecard]' brings"
)


def _highs_description() -> str:
    module = highs.load_highspy()
    version = ".".join(str(getattr(module, f"HIGHS_VERSION_{part}", "?")) for part in ("MAJOR", "MINOR", "PATCH"))
    return f"HiGHS {version} (highspy)"


def available(backend: Backend = "auto") -> str | None:
    """None when ``backend`` can solve here, else why not (for the engine choice)."""
    if backend not in BACKENDS:
        return f"unknown MILP backend {backend!r}: one of {list(BACKENDS)}"
    if backend == "cpsat":
        return ortools_backend.available()
    if backend in ("auto", "highs"):
        try:
            highs.load_highspy()
        except ImportError as exc:
            if backend == "highs":
                return str(exc)
        else:
            return None
    reason = ortools_backend.available()
    if reason is not None and backend == "auto":
        return NEITHER
    return reason


def solve(
    milp: Milp,
    backend: Backend = "auto",
    *,
    time_limit: float | None,
    relative_gap: float,
    start: npt.NDArray[np.float64] | None = None,
    on_incumbent: Callable[[npt.NDArray[np.float64], float], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    node_limit: int | None = None,
    threads: int = 1,
    formulation: Formulation | None = None,
    deterministic_limit: float | None = None,
) -> tuple[MilpResult, str]:
    """Minimise ``milp`` with ``backend`` (see :func:`counterplan.solver.exact.highs.solve` for the
    arguments); returns the result and the backend that ran (``HiGHS 1.16.0 (highspy)``,
    ``SCIP 10.0.0 (OR-Tools 9.15)``, ``CP-SAT (OR-Tools 9.15)``). Raises :class:`MissingSolverError`
    when it cannot run. ``cpsat`` needs the ``formulation`` whose program ``milp`` is (it states
    a tree ensemble's program as a pure-integer model, :mod:`counterplan.solver.exact.cpsat`);
    without it, or for a program CP-SAT does not state, SCIP solves it (OR-Tools' MILP solver).
    ``deterministic_limit`` bounds CP-SAT's deterministic seconds; HiGHS and SCIP are bounded by
    ``node_limit`` instead (each backend's own measure of work that does not depend on the load)."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown MILP backend {backend!r}: one of {list(BACKENDS)}")
    if backend == "cpsat":
        from counterplan.solver.exact import cpsat  # noqa: PLC0415 - OR-Tools loads only when asked

        if formulation is not None and formulation.milp is milp:
            try:
                result = cpsat.solve(
                    formulation,
                    time_limit=time_limit,
                    relative_gap=relative_gap,
                    start=start,
                    on_incumbent=on_incumbent,
                    should_stop=should_stop,
                    threads=threads,
                    deterministic_limit=deterministic_limit,
                )
            except cpsat.Unsupported:
                pass  # SCIP below
            else:
                return result, cpsat.describe()
        backend = "ortools"
    use_highs = backend == "highs"
    if backend == "auto":
        use_highs = available("highs") is None
        if not use_highs and ortools_backend.available() is not None:
            raise MissingSolverError(NEITHER)
    call = _Call(time_limit, relative_gap, start, on_incumbent, should_stop, node_limit, threads)
    if formulation is not None and formulation.milp is milp and intervals.wide(formulation):
        solved = _solve_without_values(formulation, use_highs, call)
        if solved is not None:
            return solved
    return _solve_milp(milp, use_highs, call)


@dataclass(frozen=True)
class _Call:
    """What one solve is given besides its program: the arguments of :func:`solve` that HiGHS and
    SCIP take."""

    time_limit: float | None
    relative_gap: float
    start: npt.NDArray[np.float64] | None
    on_incumbent: Callable[[npt.NDArray[np.float64], float], None] | None
    should_stop: Callable[[], bool] | None
    node_limit: int | None
    threads: int


def _solve_milp(milp: Milp, use_highs: bool, call: _Call) -> tuple[MilpResult, str]:
    """:func:`solve` on HiGHS (``use_highs``) or OR-Tools' SCIP, the variables whose objective
    coefficient is far from 1 rescaled (:func:`~counterplan.solver.exact.milp.column_scales`);
    the solution in the program's own units. The time limit counts from this call: rescaling a
    large program's rows is part of it (a 200-tree forest's took 0.2-0.4 s past its limit)."""
    entered = time.perf_counter()
    scales = column_scales(milp)
    if scales is not None:  # the solver sees x / scales: every objective coefficient near 1
        milp = in_scaled_columns(milp, scales)
        start = None if call.start is None else np.asarray(call.start, dtype=np.float64) / scales
        call = replace(call, start=start, on_incumbent=_unscaled(call.on_incumbent, scales))
    if call.time_limit is not None:  # what is left of it after rescaling
        call = replace(call, time_limit=max(call.time_limit - (time.perf_counter() - entered), 0.0))
    run: Callable[..., tuple[MilpResult, str]] = ortools_backend.solve_described
    if use_highs:
        description = _highs_description()

        def run(program: Milp, **arguments: Any) -> tuple[MilpResult, str]:
            return highs.solve(program, **arguments), description

    result, description = run(
        milp,
        time_limit=call.time_limit,
        relative_gap=call.relative_gap,
        start=call.start,
        on_incumbent=call.on_incumbent,
        should_stop=call.should_stop,
        node_limit=call.node_limit,
        threads=call.threads,
    )
    if scales is not None and result.x is not None:
        result = replace(result, x=result.x * scales)
    return result, description


def _solve_without_values(formulation: Formulation, use_highs: bool, call: _Call) -> tuple[MilpResult, str] | None:
    """:func:`_solve_milp` on the program without its values
    (:func:`~counterplan.solver.exact.intervals.interval_program`), its solutions those of the full
    program; None when it does not state the program, was stopped while it was built, or its final
    solution fails a row of the full program: then the full program is solved. The time limit
    counts from this call: building the program is part of it."""
    entered = time.perf_counter()
    try:
        program = intervals.interval_program(formulation, call.should_stop)
    except intervals.Unsupported:
        return None
    if program is None:
        return None
    if call.time_limit is not None:  # what is left of it after building the program
        call = replace(call, time_limit=max(call.time_limit - (time.perf_counter() - entered), 0.0))
    milp = formulation.milp
    on_incumbent = call.on_incumbent

    def report(y: npt.NDArray[np.float64], _objective: float) -> None:
        x = program.full(y)
        if x is not None and on_incumbent is not None:
            on_incumbent(x, milp.value(milp.objective, x))

    result, description = _solve_milp(
        program.milp, use_highs, replace(call, start=program.start(call.start), on_incumbent=report)
    )
    if result.x is None:
        return result, description
    x = program.full(result.x)
    if x is None:
        return None
    objective = milp.value(milp.objective, x, milp.objective_offset)
    bound = min(result.bound, objective)
    gap = 0.0 if objective == bound else (abs(objective - bound) / abs(objective) if objective else float("inf"))
    proven = result.status == "optimal" and objective - bound <= call.relative_gap * abs(objective) + 1e-9
    status = "optimal" if proven else "feasible"
    return replace(result, status=status, x=x, objective=objective, bound=bound, gap=gap), description


def _unscaled(
    on_incumbent: Callable[[npt.NDArray[np.float64], float], None] | None, scales: npt.NDArray[np.float64]
) -> Callable[[npt.NDArray[np.float64], float], None] | None:
    """``on_incumbent`` told the solution in the program's own variables."""
    if on_incumbent is None:
        return None
    report = on_incumbent
    return lambda x, objective: report(x * scales, objective)
