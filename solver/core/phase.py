"""The phase contract: what every phase of a solve is, and the scope a phase runs in.

As Timefold's ``Phase`` and ``AbstractSolver.runPhases``: the solver runs a list of phases and
knows none of them. A phase is built by its type's factory (:mod:`counterplan.solver.core.registry`)
for one solve and hears the lifecycle: ``solving_started`` (every phase, before the first runs),
``phase_started``, ``solve``, ``phase_ended``, ``solving_ended``; :class:`PhaseBase` gives no-op
hooks. A :class:`PhaseScope` combines the solver's termination with the phase's own once
(:meth:`PhaseScope.verdict`), so no phase re-implements "the solver's limits, then mine, then a
stop request". Engine-specific results travel as typed :class:`PhaseReport` s, kept in the solver
scope by phase type.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, Protocol, TypeVar, cast

from pydantic import BaseModel, ConfigDict

from counterplan.solver.core.registry import phase_type
from counterplan.solver.core.scope import Progress, SolverScope
from counterplan.solver.core.termination import TERMINATED_EARLY, TIME_LIMIT, Termination

if TYPE_CHECKING:
    from counterplan.solver.core.config import PhaseConfig


class PhaseReport(BaseModel):
    """What a phase type reports about its run (the exact engine's proof, the swarm's flight):
    frozen data, kept in the solver scope under the phase type's name."""

    model_config = ConfigDict(frozen=True)


class Verdict(NamedTuple):
    """Whether a phase must stop now, how far along the terminations are (0..1), and why."""

    done: bool
    gradient: float
    reason: str


class Phase(Protocol):
    """One phase of a solve, built for that solve."""

    @property
    def closing(self) -> bool:
        """A closing phase runs even after a termination ended the search (choosing the answers)."""
        ...

    def solving_started(self, scope: SolverScope) -> None:
        """Before any phase runs."""
        ...

    def phase_started(self, phase_scope: PhaseScope) -> None:
        """Just before :meth:`solve`."""
        ...

    def solve(self, phase_scope: PhaseScope) -> None:
        """Search (or do this phase's work) until a termination or a stop request ends it."""
        ...

    def phase_ended(self, phase_scope: PhaseScope) -> None:
        """Just after :meth:`solve`."""
        ...

    def solving_ended(self, scope: SolverScope) -> None:
        """After the last phase ran."""
        ...


@dataclass(frozen=True)
class SpaceSize:
    """What sizes a step: the candidate matrix's columns, the mutable ones, and their one-hot
    width (one coordinate per mutable number, one per category of each mutable categorical, two
    per mutable boolean: what a particle of the swarm carries)."""

    n_features: int
    n_mutable: int
    one_hot_width: int | None = None
    """None: one per mutable feature."""

    @property
    def coordinates(self) -> int:
        """The one-hot width, or one per mutable feature when it is not known."""
        return self.n_mutable if self.one_hot_width is None else self.one_hot_width


class PhaseFactory(Protocol):
    """Builds one phase type's runtime phase from its config, and sizes it before a solve."""

    def build(self, config: Any) -> Phase:
        """A runtime phase for one solve (defaults filled, contradictions refused)."""
        ...

    def step_cells(self, config: Any, size: SpaceSize) -> tuple[str, int] | None:
        """The config field that sizes the phase's largest step (relative to the phase, as
        ``"move_selector.moves_per_step"``) and the candidate values that step holds; None when
        its steps hold no candidate matrix worth bounding."""
        ...

    def collects_pool(self, config: Any) -> bool:
        """The phase reads the pool of feasible rows the solve scored (so the solve keeps one)."""
        ...


def factory_for(config: PhaseConfig) -> PhaseFactory:
    """The factory of ``config``'s phase type."""
    return cast(PhaseFactory, phase_type(config.type).factory_object())


def build_phase(config: PhaseConfig) -> Phase:
    """The runtime phase of ``config`` (the only dispatch on phase types there is)."""
    return factory_for(config).build(config)


C = TypeVar("C", bound="PhaseConfig")


class PhaseBase(Generic[C]):
    """A phase with no-op lifecycle hooks around its config; subclasses write :meth:`solve`."""

    closing = False

    def __init__(self, config: C) -> None:
        self.config = config

    def solving_started(self, scope: SolverScope) -> None:
        """Nothing to do before the solve."""

    def phase_started(self, phase_scope: PhaseScope) -> None:
        """Nothing to set up."""

    def solve(self, phase_scope: PhaseScope) -> None:  # pragma: no cover - every phase writes its own
        raise NotImplementedError

    def phase_ended(self, phase_scope: PhaseScope) -> None:
        """Nothing to drop."""

    def solving_ended(self, scope: SolverScope) -> None:
        """Nothing to finish."""


@dataclass
class PhaseScope:
    """The state of one phase: the solve's scope, the phase's counters and its termination.

    ``termination`` is the phase's own (None: the phase ends by itself or by the solver's);
    :meth:`verdict` asks the solver's termination, then the phase's, then whether a stop was
    requested, in that order, once for every phase.
    """

    solver_scope: SolverScope
    index: int
    solver_termination: Termination
    termination: Termination | None = None
    progress: Progress = field(init=False)

    def __post_init__(self) -> None:
        self.start()

    def start(self) -> None:
        """Start the phase's counters at the best score now (the solver calls it after
        ``phase_started``, which may have offered rows set aside)."""
        self.progress = Progress.starting(self.solver_scope.best_score)

    @property
    def counters(self) -> list[Progress]:
        """The solve's counters and the phase's: a step counts on both."""
        return [self.solver_scope.progress, self.progress]

    def verdict(self) -> Verdict:
        """Whether the phase must stop now: the solver's limits first (their reason as is), then
        the phase's own (``phase i: ...``), then whether one more model call still fits before the
        solve's wall limit (the limit's own reason: it ended the search), then a stop request (``terminated
        early``). The gradient is the furthest the terminations have gone."""
        scope = self.solver_scope
        done, gradient, reason = self.solver_termination.evaluate(scope.progress)
        if self.termination is not None and not done:
            phase_done, phase_gradient, phase_reason = self.termination.evaluate(self.progress)
            gradient = max(gradient, phase_gradient)
            if phase_done:
                return Verdict(True, gradient, f"phase {self.index}: {phase_reason}")
        if done:
            return Verdict(True, gradient, reason)
        if scope.out_of_time():  # the limit is not reached, but the next model call would pass it
            return Verdict(True, 1.0, TIME_LIMIT)
        if scope.terminate_flag.is_set():
            return Verdict(True, gradient, TERMINATED_EARLY)
        return Verdict(False, gradient, "")

    def must_stop(self) -> bool:
        """The verdict alone, for a phase that leaves its own limit's reason to the phases after
        it. The solve's end (its limits, a stop request) is recorded: a last phase that stops for
        it (the polish, the exact engine) has no phase after it to say so, and the answer read as
        the search's own end, not its best so far (``stopped_early``)."""
        verdict = self.verdict()
        if verdict.done and not verdict.reason.startswith("phase "):
            self.end(verdict)
        return verdict.done

    def end(self, verdict: Verdict) -> None:
        """Record why the phase ended (the solver stops unless the phase's own limit ended it)."""
        self.solver_scope.termination_reason = verdict.reason

    def report(self, name: str, report: PhaseReport) -> None:
        """Keep the phase's report under ``name`` (its type)."""
        self.solver_scope.reports[name] = report

    def report_of(self, name: str) -> Any:
        """The report kept under ``name``, or None."""
        return self.solver_scope.reports.get(name)
