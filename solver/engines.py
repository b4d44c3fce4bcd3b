"""Choosing the engine: ``local``, ``exact``, ``swarm`` or ``auto``, as shorthand for a phase list.

This is the one place that names engines: the solver core runs phases it does not know, the
bridge (:mod:`counterplan.solver.counterfactual`) asks :func:`plan_engine` what to run and why.

``exact`` runs the configuration's phases (local search by default: a warm start) and then the
exact engine; ``swarm`` runs the particle swarm and a boundary polish (a configuration with its
own swarm phase runs as it is); ``local`` keeps the configuration as it is.
``auto`` (:func:`_auto`) takes the exact engine when the problem can be encoded (a linear model
or a tree ensemble behind supported preprocessing, a linear distance, one goal) and the exact
engine is expected to finish within the per-row budget (``config.auto.budget_seconds``, 2 s by
default; the estimate comes from the program's size, the model family and the solver the exact
phase would use (CP-SAT for trees under the ``auto`` backend),
:mod:`counterplan.solver.exact.estimate`, and is checked first, so a large model costs no program
build); otherwise local search (with, when ``config.auto.exact_improvement_seconds`` asks for it,
a time-limited exact improvement of local search's answer), or the swarm when there are many
features. It says which it chose and why: the estimate and the budget are in the reason. The
budget and the improvement are capped at the solve's time limit (``--time-limit``, a
configuration's ``spent_limit_seconds``, a server's share of a deadline: :func:`capped_auto`), so
a time limit shorter than the estimate means local search on every path.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from counterplan.planning.errors import ProblemError
from counterplan.planning.problem import CounterfactualProblem
from counterplan.solver.core.config import AutoConfig, PhaseConfig, SolverConfig, TerminationConfig, stable_termination
from counterplan.solver.core.termination import wall_limit
from counterplan.solver.exact.config import ExactPhaseConfig
from counterplan.solver.exact.estimate import estimate_seconds, program_size
from counterplan.solver.local.config import AcceptorConfig, BoundaryPolishPhaseConfig, LocalSearchPhaseConfig
from counterplan.solver.swarm.config import SwarmPhaseConfig

EngineChoice = Literal["local", "exact", "swarm", "auto"]
ENGINES: tuple[str, ...] = ("local", "exact", "swarm", "auto")


class EnginePlan(NamedTuple):
    """What to run: the configuration, the engine's name (``local``, ``exact`` or ``swarm``) and why."""

    config: SolverConfig
    name: str
    reason: str


def plan_engine(problem: CounterfactualProblem, config: SolverConfig, engine: EngineChoice | None) -> EnginePlan:
    """The configuration to run for ``engine`` (:func:`choose`); None runs ``config`` as it is,
    named by its phases (an exact phase: ``exact``; a swarm phase: ``swarm``; else ``local``)."""
    if engine is not None:
        plan = choose(problem, config, engine)
        if plan.name == "local" and has_phase(plan.config, SwarmPhaseConfig):
            return EnginePlan(plan.config, "swarm", plan.reason + "; the configuration has a swarm phase")
        return plan
    if has_phase(config, ExactPhaseConfig):
        return EnginePlan(config, "exact", "the configuration has an exact phase")
    if has_phase(config, SwarmPhaseConfig):
        return EnginePlan(config, "swarm", "the configuration has a swarm phase")
    return EnginePlan(config, "local", "")


def has_phase(config: SolverConfig, kind: type[PhaseConfig]) -> bool:
    """``config`` runs a phase of the type ``kind``."""
    return any(isinstance(p, kind) for p in config.phases)


def runs_exact(config: SolverConfig, engine: EngineChoice | None) -> bool:
    """The exact engine may run: asked for (``exact``, ``auto``) or in the configuration's phases."""
    return engine in ("exact", "auto") or has_phase(config, ExactPhaseConfig)


def with_acceptor(config: SolverConfig, acceptor: AcceptorConfig) -> SolverConfig:
    """``config`` with every local-search phase using ``acceptor`` (a service's acceptor choice)."""
    phases = tuple(
        p.model_copy(update={"acceptor": acceptor}) if isinstance(p, LocalSearchPhaseConfig) else p
        for p in config.phases
    )
    return config.model_copy(update={"phases": phases})


def not_encodable(
    problem: CounterfactualProblem, backend: Literal["auto", "highs", "ortools", "cpsat"] = "auto"
) -> str | None:
    """Why the exact engine cannot take ``problem`` (or has no MILP solver: ``backend``, see
    :mod:`counterplan.solver.exact.backend`), or None when it can. The encoder's check
    (:func:`counterplan.solver.exact.formulation.check`), not the whole program: it runs before
    the solve's clock starts, and the exact phase builds its own program (narrowed to its warm
    start) within the time limit; a refusal only the trees' splits raise is reported there."""
    try:
        from counterplan.planning.structure.errors import NotEncodableError  # noqa: PLC0415
        from counterplan.solver.exact.backend import available  # noqa: PLC0415 - the exact engine loads on demand
        from counterplan.solver.exact.formulation import check  # noqa: PLC0415
    except ImportError as exc:  # pragma: no cover - the formulation itself needs no extra
        return str(exc)
    try:
        check(problem)  # not the whole program: this runs before the solve's clock starts
    except NotEncodableError as exc:
        return str(exc)
    return available(backend)


def exact_config(config: SolverConfig) -> SolverConfig:
    """``config`` with the exact engine after its phases (unless it already has one): the local
    search's best answer is the program's warm start and incumbent, so the program only has to
    prove it or beat it, and the answer is never worse than local search's."""
    if has_phase(config, ExactPhaseConfig):
        return config
    phases = tuple(_bounded(p) for p in config.phases)
    return config.model_copy(update={"phases": (*phases, ExactPhaseConfig())})


def _for(problem: CounterfactualProblem, config: SolverConfig) -> SolverConfig:
    """:func:`exact_config`; but a credit scorecard under the default phases gets the program
    alone: its program is small and solved in a fraction of a second (SCIP), and local search's
    warm start cost more than it saved (heloc, K = 1: 0.48 s with it, 0.20 s without)."""
    from counterplan.planning.scorecard import ScorecardAdapter  # noqa: PLC0415

    if isinstance(problem.model, ScorecardAdapter) and config.phases == SolverConfig().phases:
        return config.model_copy(update={"phases": (ExactPhaseConfig(),)})
    return exact_config(config)


def swarm_config(config: SolverConfig, *, then_local: bool = False) -> SolverConfig:
    """``config`` as it is when it has a swarm phase; else the swarm (default settings), local
    search from the swarm's best rows when ``then_local``, and a boundary polish, under
    ``config``'s termination and seed."""
    if has_phase(config, SwarmPhaseConfig):
        return config
    local = (LocalSearchPhaseConfig(termination=stable_termination()),) if then_local else ()
    return config.model_copy(update={"phases": (SwarmPhaseConfig(), *local, BoundaryPolishPhaseConfig())})


WARM_START_UNIMPROVED_STEPS = 100
"""A local-search phase before the exact engine also ends after this many steps without a better
solution, so an unreachable goal leaves the program its turn (to prove it unreachable)."""


def _bounded(phase: PhaseConfig) -> PhaseConfig:
    if not isinstance(phase, LocalSearchPhaseConfig):
        return phase
    cap = TerminationConfig(unimproved_step_count_limit=WARM_START_UNIMPROVED_STEPS)
    children = (phase.termination, cap) if phase.termination is not None else (cap,)
    return phase.model_copy(update={"termination": TerminationConfig(children=children)})


def choose(problem: CounterfactualProblem, config: SolverConfig, engine: str) -> EnginePlan:
    """The configuration to run, the engine's name, and why it was chosen."""
    if engine not in ENGINES:
        raise ProblemError("engine", f"must be one of {list(ENGINES)}, given {engine!r}")
    if engine == "local":
        return EnginePlan(config, "local", "asked for")
    if engine == "swarm":
        return EnginePlan(swarm_config(config), "swarm", "asked for")
    phase = next((p for p in config.phases if isinstance(p, ExactPhaseConfig)), ExactPhaseConfig())
    if engine == "exact":
        reason = not_encodable(problem, phase.backend)
        if reason is not None:
            raise ProblemError("engine", f"the exact engine cannot take this problem: {reason}")
        return EnginePlan(_for(problem, config), "exact", "asked for")
    return _auto(problem, config, phase)


SWARM_FROM_FEATURES = 200
"""``auto`` runs the swarm (then local search from its best rows) from this many mutable features
on. Measured with random forests (``benchmarks/swarm.py``): at 30, 64 and 100 features local search
found closer answers; at 300 the swarm was closer and about three times faster."""


def _linear(problem: CounterfactualProblem) -> bool:
    """A credit scorecard, or a model whose last step has linear coefficients."""
    from counterplan.planning.scorecard import ScorecardAdapter  # noqa: PLC0415
    from counterplan.planning.structure.kind import is_linear, model_estimator  # noqa: PLC0415

    if isinstance(problem.model, ScorecardAdapter):
        return True
    return is_linear(model_estimator(problem.model))


def _auto(problem: CounterfactualProblem, config: SolverConfig, phase: ExactPhaseConfig) -> EnginePlan:
    """The exact engine when it is expected within the budget and the problem can be encoded;
    else local search below :data:`SWARM_FROM_FEATURES` mutable features (then a budgeted exact
    improvement, when asked), the swarm from there on."""
    from counterplan.solver.exact.backend import available  # noqa: PLC0415 - the exact engine loads on demand

    features = int(problem.space.mutable.sum())
    auto = capped_auto(config.auto, wall_limit(config.termination))
    budget = auto.budget_seconds
    held = " (the solve's time limit)" if budget < config.auto.budget_seconds else ""
    size = program_size(problem)
    expected = estimate_seconds(size, phase.backend)  # the solver the exact phase would use
    cost = f"the exact engine's estimate for {size.describe()} is {_seconds(expected)}"
    missing = available(phase.backend)  # no MILP solver installed: the first thing to say
    if missing is not None:
        reason: str | None = missing
    elif expected <= budget or size.family == "other":  # "other": say why it cannot be encoded
        reason = not_encodable(problem, phase.backend)
        if reason is None:
            return EnginePlan(
                _for(problem, config),
                "exact",
                f"auto: the exact engine, because {cost}, within the {_seconds(budget)} budget{held}",
            )
    else:
        reason = f"{cost}, more than the {_seconds(budget)} budget{held}"
    if features >= SWARM_FROM_FEATURES:
        return EnginePlan(
            swarm_config(config, then_local=True),
            "swarm",
            f"auto: the particle swarm, then local search from its best rows, because {features} mutable "
            f"features is at least {SWARM_FROM_FEATURES} and {reason}",
        )
    improvement = auto.exact_improvement_seconds
    # over the budget (not refused by the encoder): the improvement's own phase builds the program
    # within its time limit, and reports "not encodable" should the encoder refuse it there
    if improvement is not None and missing is None and expected > budget and size.family != "other":
        return EnginePlan(
            improvement_config(config, phase, improvement),
            "exact",
            f"auto: local search, then the exact engine for at most {_seconds(improvement)} from its answer "
            f"(asked for), because {reason}",
        )
    return EnginePlan(config, "local", f"auto: local search, because {reason}")


def capped_auto(auto: AutoConfig, seconds: float | None) -> AutoConfig:
    """``auto`` with its budget and exact improvement at most ``seconds``, the solve's own time
    limit (None: none): a budget past it would let ``auto`` choose a proof the solve is stopped
    before, and an improvement past it is cut there anyway. Capped, not refused: a server's
    client cannot know the share of its deadline the server leaves the solve; the engine reason
    names the budget that held."""
    if seconds is None:
        return auto
    update = {
        name: seconds
        for name in ("budget_seconds", "exact_improvement_seconds")
        if (value := getattr(auto, name)) is not None and value > seconds
    }
    return auto.model_copy(update=update) if update else auto


def improvement_config(config: SolverConfig, phase: ExactPhaseConfig, seconds: float) -> SolverConfig:
    """``config``'s phases as they are (so local search finds the answer it finds alone), then the
    exact engine for at most ``seconds``: local search's answer is its warm start and incumbent,
    so the answer is never worse, and the report gives the proof's bound and gap."""
    limit = seconds if phase.time_limit_seconds is None else min(seconds, phase.time_limit_seconds)
    exact = phase.model_copy(update={"time_limit_seconds": limit})
    phases = tuple(p for p in config.phases if not isinstance(p, ExactPhaseConfig))
    return config.model_copy(update={"phases": (*phases, exact)})


def _seconds(value: float) -> str:
    """Seconds for a reason: three digits (0.001 s, 1.5 s, 142 s), no exponent below a million."""
    return f"{value:,.0f} s" if 1000 <= value < 1e6 else f"{value:.3g} s"
