"""Solver configuration as pure data: pydantic models that round-trip through JSON and YAML.

The shape follows OptaPlanner's solver config: a solver has a termination and a list of
phases; a local-search phase has an acceptor, a forager, a move selector and its own
termination. Factories (``counterplan.solver.local.factory``) fill defaults and reject contradictions; runtime
objects live for one solve. A tuned configuration is saved with :meth:`SolverConfig.to_yaml`
and served as is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, Self

import yaml
from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError, model_validator

from counterplan.planning._pydantic import reraise
from counterplan.planning.errors import InvalidInputError, ScoreFormatError
from counterplan.planning.safe_yaml import ConfigTextError, load_config_text
from counterplan.planning.score import BendableScore
from counterplan.planning.threads import MAX_MODEL_THREADS


class ConfigError(InvalidInputError):
    """A solver configuration is invalid or contradicts itself."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__("solver config", field, problem)


class _Config(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            reraise(exc, "", ConfigError)


def _parse_score(field: str, text: str) -> BendableScore:
    try:
        return BendableScore.parse(text)
    except ScoreFormatError as exc:
        raise ConfigError(field, exc.problem) from None


# Every number a configuration holds is bounded: a configuration can come from the wire, and a
# size it names (a tabu list, a history, a batch of moves) is memory the solve allocates.
MAX_SECONDS = 1.0e10
"""About 300 years: a time limit allocates nothing, so it is only kept finite (``--time-limit 1e9``
must mean what it says)."""
MAX_STEPS = 10**9
MAX_COUNT = 10**12
MAX_MEMORY_SIZE = 100_000
"""Tabu lists, late-acceptance and step-counting histories, accepted-move limits."""
MAX_MOVES_PER_STEP = 4096
MAX_WEIGHT = 1.0e6
MAX_PHASES = 16
MAX_SEED = 2**63 - 1
PositiveSeconds = Annotated[float, Field(gt=0.0, le=MAX_SECONDS)]
PositiveInt = Annotated[int, Field(gt=0, le=MAX_STEPS)]
PositiveCount = Annotated[int, Field(gt=0, le=MAX_COUNT)]
MemorySize = Annotated[int, Field(gt=0, le=MAX_MEMORY_SIZE)]
Weight = Annotated[float, Field(ge=0.0, le=MAX_WEIGHT)]


class TerminationConfig(_Config):
    """Limits that end a solve or a phase; set limits are joined by ``composition``.

    Every field left ``None`` is not a limit. ``children`` nest further terminations, joined
    with this level's limits by the same ``composition`` (``"or"``: any one ends it;
    ``"and"``: all must hold).
    """

    spent_limit_seconds: PositiveSeconds | None = None
    unimproved_spent_limit_seconds: PositiveSeconds | None = None
    step_count_limit: PositiveInt | None = None
    unimproved_step_count_limit: PositiveInt | None = None
    best_score_limit: str | None = None
    """The text form of a score; reached when the best score is at least this good."""
    best_score_feasible: bool | None = None
    """When true: reached once the best score is feasible."""
    score_calculation_count_limit: PositiveCount | None = None
    move_count_limit: PositiveCount | None = None
    composition: Literal["or", "and"] = "or"
    children: Annotated[tuple[TerminationConfig, ...], Field(max_length=MAX_PHASES)] = ()

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.best_score_limit is not None:
            _parse_score("best_score_limit", self.best_score_limit)
        if self.best_score_feasible is False:
            raise ConfigError("best_score_feasible", "either true or left out")
        return self

    @property
    def is_empty(self) -> bool:
        """True when no limit is set anywhere in this tree."""
        own = self.model_dump(exclude={"composition", "children"}, exclude_none=True)
        return not own and all(child.is_empty for child in self.children)


class HillClimbingAcceptorConfig(_Config):
    """Accept a move whose score is not worse than the current step's."""

    type: Literal["hill_climbing"] = "hill_climbing"


class TabuSearchAcceptorConfig(_Config):
    """Tabu search: recently changed features, values or moves are tabu for some steps.

    Aspiration: a tabu move whose score beats the best score so far is accepted anyway.
    """

    type: Literal["tabu_search"] = "tabu_search"
    entity_tabu_size: Annotated[int, Field(ge=0, le=MAX_MEMORY_SIZE)] | None = None
    value_tabu_size: Annotated[int, Field(ge=0, le=MAX_MEMORY_SIZE)] | None = None
    move_tabu_size: Annotated[int, Field(ge=0, le=MAX_MEMORY_SIZE)] | None = None
    aspiration_enabled: bool = True


class LateAcceptanceAcceptorConfig(_Config):
    """Accept a move not worse than the step score ``late_acceptance_size`` steps ago."""

    type: Literal["late_acceptance"] = "late_acceptance"
    late_acceptance_size: MemorySize = 20


class SimulatedAnnealingAcceptorConfig(_Config):
    """Accept worse moves with a chance that shrinks as the temperature cools.

    ``starting_temperature`` is a score in text form, one temperature per level (as in
    OptaPlanner); the temperature falls linearly with the termination's progress (time
    gradient), reaching 0 at the end.
    """

    type: Literal["simulated_annealing"] = "simulated_annealing"
    starting_temperature: str = "[0.05/0/0]hard/[0.2/1]soft"

    @model_validator(mode="after")
    def _check(self) -> Self:
        levels = _parse_score("starting_temperature", self.starting_temperature).levels
        if any(level < 0 for level in levels) or not any(levels):
            raise ConfigError("starting_temperature", "needs levels >= 0, at least one above 0")
        return self


class GreatDelugeAcceptorConfig(_Config):
    """Accept moves above a water level that rises towards 0 every step."""

    type: Literal["great_deluge"] = "great_deluge"
    water_level_increment_ratio: Annotated[float, Field(gt=0.0, lt=1.0)] = 0.02


class StepCountingHillClimbingAcceptorConfig(_Config):
    """Accept moves not worse than a threshold refreshed every ``size`` steps."""

    type: Literal["step_counting_hill_climbing"] = "step_counting_hill_climbing"
    step_counting_hill_climbing_size: MemorySize = 10


AcceptorConfig = Annotated[
    HillClimbingAcceptorConfig
    | TabuSearchAcceptorConfig
    | LateAcceptanceAcceptorConfig
    | SimulatedAnnealingAcceptorConfig
    | GreatDelugeAcceptorConfig
    | StepCountingHillClimbingAcceptorConfig,
    Field(discriminator="type"),
]

PickEarlyType = Literal["never", "first_best_score_improving", "first_last_step_score_improving"]


class ForagerConfig(_Config):
    """Picks the step among the accepted moves (OptaPlanner's local search forager)."""

    accepted_count_limit: MemorySize | None = None
    """Consider only the first N accepted moves of the sample; None: all of them."""
    pick_early_type: PickEarlyType = "never"


class MoveSelectorConfig(_Config):
    """Which moves a step samples, with relative weights, and how many per step."""

    moves_per_step: Annotated[int, Field(gt=0, le=MAX_MOVES_PER_STEP)] = 96
    """Sampled moves per walker per step; all are scored in one batched model call."""
    change_weight: Weight = 4.0
    revert_weight: Weight = 1.0
    pair_change_weight: Weight = 1.0
    toward_original_weight: Weight = 2.0
    shrink_weight: Weight = 1.0
    """Moves that scale every changed number part of the way back to the original at once."""
    swap_weight: Weight = 0.0
    local_step_ratio: Annotated[float, Field(ge=0.0, le=1.0)] = 0.8
    """Share of numeric change moves that step locally rather than uniformly in the domain."""
    local_step_scale: Annotated[float, Field(gt=0.0, le=1.0)] = 0.1
    """Largest local step, as a fraction of the feature's range."""
    split_jump_ratio: Annotated[float, Field(ge=0.0, le=1.0)] = 0.25
    """Share of numeric change moves that jump to a value just past one of the model's split
    thresholds (a tree model's; ``EncodedSpace.split_values``), where the decision changes."""

    @model_validator(mode="after")
    def _check(self) -> Self:
        weights = (
            self.change_weight,
            self.revert_weight,
            self.pair_change_weight,
            self.toward_original_weight,
            self.shrink_weight,
        )
        if sum(weights) + self.swap_weight <= 0.0:
            raise ConfigError("weights", "at least one move weight must be above 0")
        return self


class LocalSearchPhaseConfig(_Config):
    """A local-search phase: acceptor, forager, move selector, walkers and termination."""

    type: Literal["local_search"] = "local_search"
    acceptor: AcceptorConfig = Field(default_factory=TabuSearchAcceptorConfig)
    forager: ForagerConfig = Field(default_factory=ForagerConfig)
    move_selector: MoveSelectorConfig = Field(default_factory=MoveSelectorConfig)
    walkers: Annotated[int, Field(ge=1, le=64)] = 8
    """Independent searches stepping in lockstep; their moves share one model call per step."""
    termination: TerminationConfig | None = None


class FeatureScanPhaseConfig(_Config):
    """A construction phase: scan each mutable feature's domain alone, in one batched call.

    Every mutable feature is set, one at a time, to each of ``grid_size`` values spread over
    its numeric domain (every category, the other boolean), the rest kept original. The best
    row becomes the solution, and the best rows of distinct features become the starting
    points of the next local-search phase's walkers, so they search different basins. This
    plays the part of OptaPlanner's construction heuristic.
    """

    type: Literal["feature_scan"] = "feature_scan"
    grid_size: Annotated[int, Field(ge=2, le=256)] = 24
    split_values: bool = True
    """Also try each number just past each split threshold of a tree model (``counterplan.solver.exact.splits``):
    where the optimal answers land, often far from the original."""
    greedy_steps: Annotated[int, Field(ge=0, le=50)] = 6
    """Then build a counterfactual greedily: take the move with the best goal gain per unit
    of distance and scan again from there, until feasible or this many times (one call each)."""


class BoundaryPolishPhaseConfig(_Config):
    """A phase that shaves the best solution down to the decision boundary, deterministically.

    Each iteration tries, in one batched call, every changed number at ``grid_size - 1``
    points between its original and current value, all of them moved back together by the
    same fractions, and each changed feature reverted; it keeps the best. It stops after
    ``max_iterations`` or at the first iteration that finds nothing better.

    With ``starts`` above 1 it then polishes, together, the best row of each of the next
    ``starts - 1`` distinct sets of changed features the solve has found feasible (reverts
    and a grid per changed number, one call per iteration for all of them, see
    :mod:`counterplan.solver.core.refine`), and keeps the best: a route the search left unpolished, or
    carrying a needless change, can shave down below the polished best.
    """

    type: Literal["boundary_polish"] = "boundary_polish"
    grid_size: Annotated[int, Field(ge=2, le=256)] = 32
    max_iterations: Annotated[int, Field(ge=1, le=100)] = 6
    starts: Annotated[int, Field(ge=1, le=256)] = 1


class ExactPhaseConfig(_Config):
    """The exact engine: a mixed-integer program that proves the optimum (``counterplan.solver.exact``).

    It encodes the model (linear models and tree ensembles, behind scikit-learn preprocessing),
    the domains, the rules and the distance; a local-search phase before it gives its warm start.
    It stops at the first of: the optimum proven within ``relative_gap``, ``node_limit`` nodes,
    ``time_limit_seconds``, or the solver's own time limit. Only a time limit makes the answer
    depend on the machine: the default has none.
    """

    type: Literal["exact"] = "exact"
    relative_gap: Annotated[float, Field(ge=0.0, le=1.0)] = 1e-6
    """A solution within this relative gap of the bound counts as proven optimal."""
    node_limit: Annotated[int, Field(gt=0, le=MAX_STEPS)] = 1_000_000
    time_limit_seconds: PositiveSeconds | None = None
    goal_epsilon: Annotated[float, Field(gt=0.0, le=0.1)] = 1e-6
    """Each goal bound is kept this far inside (in the model's output units: logit, probability
    or value), so an answer on the boundary is not lost to rounding."""
    lexicographic: bool = True
    """Then minimise the number of changed features among the answers at the optimal distance
    (the score's second soft level), as a second program."""
    backend: Literal["auto", "highs", "ortools"] = "auto"
    """The MILP solver: ``highs`` (highspy, the ``exact`` extra), ``ortools`` (OR-Tools, which
    the ``scorecard`` extra brings: SCIP through it, which takes the warm start and stops when
    asked), or ``auto``: highspy when it loads, else OR-Tools. The report names the one that ran."""
    answer_set: Literal["copies", "no_good", "pool"] = "copies"
    """When several answers are asked: ``copies`` solves for all of them in one program (k copies
    with the diversity rules below, the scorecard paper's formulation 13); ``no_good`` solves
    again after each answer, excluding its set of changed features; ``pool`` takes the exact
    optimum and picks the others from local search's answers."""
    distinct_features: bool = True
    """``copies``: every two answers differ in their sets of changed features."""
    distinct_values: bool = True
    """``copies``: two answers that change the same feature give it different bins (a scorecard),
    categories or allowed values."""
    diversity_weight: Annotated[float, Field(ge=0.0, le=1e6)] = 0.0
    """``copies``: subtracted per pairwise difference (of feature sets and values) from the summed distance."""


class SwarmPhaseConfig(_Config):
    """A particle-swarm phase (MD-PSO, Shekhar et al.): every particle moves every searched feature.

    Positions live in min-max scaled coordinates ([0, 1] per feature's domain). Only the
    ``top_features`` most relevant features are searched (information value against the data's
    labels, else the model's sensitivity at the original; ``"all"``: every mutable one), each boxed
    to ``[z (1 - box_ratio), z (1 + box_ratio)]`` around its scaled original ``z`` (``[z - box_ratio,
    z + box_ratio]`` where ``z`` is 0), clipped to the domain. Every iteration scores the whole swarm
    in one model call. See :mod:`counterplan.solver.swarm`.
    """

    type: Literal["swarm"] = "swarm"
    particles: Annotated[int, Field(ge=2, le=4096)] = 50
    iterations: Annotated[int, Field(ge=1, le=100_000)] = 100
    inertia: Annotated[float, Field(ge=0.0, le=2.0)] = 0.7298
    """c0: how much of its velocity a particle keeps."""
    cognitive: Annotated[float, Field(ge=0.0, le=8.0)] = 1.49618
    """c1: the pull towards the particle's own best."""
    social: Annotated[float, Field(ge=0.0, le=8.0)] = 1.49618
    """c2: the pull towards the swarm's best."""
    diversity: Annotated[float, Field(ge=0.0, le=8.0)] = 0.3
    """c3: the push away from ``diversity_from`` (0: the plain PSO update)."""
    diversity_from: Literal["swarm_mean", "global_best"] = "swarm_mean"
    """What the diversity term pushes away from: the swarm's mean position (the paper's example)
    or the swarm's best (the original MD-PSO)."""
    top_features: Annotated[int, Field(ge=1, le=100_000)] | Literal["all"] = 20
    """h: how many features are searched, the most relevant first."""
    rank_by: Literal["information_value", "sensitivity"] = "information_value"
    """How features are ranked for ``top_features``: information value (10 bins, natural log,
    +0.5 count smoothing) against the training labels, when the problem was built from data with
    its label column; else, and with ``sensitivity``, how far moving the feature alone to either
    end of its box brings the goal (one model call)."""
    box_ratio: Annotated[float, Field(gt=0.0, le=1000.0)] = 1.0
    """eps: the box's half-width relative to the scaled original (additive where it is 0)."""
    snap_tolerance: Annotated[float, Field(ge=0.0, le=1.0)] = 0.05
    """A scaled change smaller than this snaps back to the original, so unchanged features count as
    unchanged (otherwise every particle changes all ``top_features``)."""
    objective: Literal["score", "paper"] = "score"
    """What guides the particles: the bendable score (compared level by level), or the paper's sum
    l1 + l2 + l3 (goal hinge + mean Gower distance + features changed; plus broken rules). The
    solve's answer is the best bendable score either way."""
    widen_when_infeasible: bool = True
    """When no particle has been valid by half the iterations, open the box to the whole domain
    and scatter the particles over it afresh for the rest (a relative box can keep the goal out of
    reach); their own bests are kept. The statistics say so."""
    answers_from: Literal["visited", "final_swarm"] = "visited"
    """When several answers are asked, what k-means clusters: every distinct valid row the swarm
    visited (default: no cluster is empty, so k answers come back whenever k distinct valid rows
    were seen), or the particles' own best positions at the end (the paper's final swarm: a
    cluster without a valid particle gives no answer)."""
    max_velocity: Annotated[float, Field(gt=0.0, le=1.0)] = 0.5
    """Velocity clamp per dimension, as a share of the box's width (keeps the swarm inside it)."""
    termination: TerminationConfig | None = None


def _phase_type(value: Any) -> str:
    """A phase's ``type``; local search when a dict leaves it out."""
    if isinstance(value, dict):
        return str(value.get("type", "local_search"))
    return str(getattr(value, "type", "local_search"))


PhaseConfig = Annotated[
    Annotated[LocalSearchPhaseConfig, Tag("local_search")]
    | Annotated[FeatureScanPhaseConfig, Tag("feature_scan")]
    | Annotated[BoundaryPolishPhaseConfig, Tag("boundary_polish")]
    | Annotated[ExactPhaseConfig, Tag("exact")]
    | Annotated[SwarmPhaseConfig, Tag("swarm")],
    Discriminator(_phase_type),
]


def default_phases() -> tuple[FeatureScanPhaseConfig | LocalSearchPhaseConfig | BoundaryPolishPhaseConfig, ...]:
    """A feature scan; tabu search until feasible and stable; a boundary polish."""
    return (
        FeatureScanPhaseConfig(),
        LocalSearchPhaseConfig(termination=stable_termination()),
        BoundaryPolishPhaseConfig(),
    )


def stable_termination(unimproved_steps: int = 3) -> TerminationConfig:
    """Ends once the best is feasible and has not improved for ``unimproved_steps`` steps."""
    return TerminationConfig(composition="and", best_score_feasible=True, unimproved_step_count_limit=unimproved_steps)


DEFAULT_STEP_LIMIT = 1000
"""The default solve's step cap: with no clock in the default, this bounds an unreachable goal's search."""


def default_termination() -> TerminationConfig:
    """The solve's caps: no better solution for 400 steps, or 1,000 steps in all.

    The default local-search phase ends much sooner, once its best is feasible and stable
    (:func:`stable_termination`). No cap reads the clock: the same problem, configuration and
    seed give the same answer whatever the machine's load. Only a time limit the user sets
    (``--time-limit``, a configuration's ``spent_limit_seconds``, a gRPC deadline) may cut a
    search short.
    """
    return TerminationConfig(unimproved_step_count_limit=400, step_count_limit=DEFAULT_STEP_LIMIT)


class SolverConfig(_Config):
    """A whole solve: phases run in sequence under one solver-level termination."""

    phases: Annotated[tuple[PhaseConfig, ...], Field(max_length=MAX_PHASES)] = Field(default_factory=default_phases)
    termination: TerminationConfig = Field(default_factory=default_termination)
    random_seed: Annotated[int, Field(ge=0, le=MAX_SEED)] = 0
    model_threads: Annotated[int, Field(ge=1, le=MAX_MODEL_THREADS)] | None = 1
    """Native (OpenMP, BLAS) threads a model call may use; None leaves the pools as they are.
    One by default: the engines batch candidates, and extra threads fight other work for the
    cores (see :mod:`counterplan.planning.threads`). Like OptaPlanner's ``moveThreadCount``, a speed knob only."""

    @model_validator(mode="after")
    def _check(self) -> Self:
        if not self.phases:
            raise ConfigError("phases", "give at least one phase")
        local = [p for p in self.phases if isinstance(p, LocalSearchPhaseConfig)]
        if self.termination.is_empty and any(p.termination is None or p.termination.is_empty for p in local):
            raise ConfigError("termination", "the solver or every phase needs a termination, or the solve never ends")
        return self

    def to_yaml(self) -> str:
        """The configuration as YAML."""
        return yaml.safe_dump(self.model_dump(mode="json", exclude_defaults=False), sort_keys=False)

    @classmethod
    def from_yaml(cls, text: str) -> SolverConfig:
        """Parse YAML (or JSON, which YAML reads too), within :mod:`counterplan.solver.core.safe_yaml`'s limits."""
        try:
            data = load_config_text(text)
        except ConfigTextError as exc:
            raise ConfigError("yaml", exc.problem) from None
        if not isinstance(data, dict):
            raise ConfigError("yaml", "expected a mapping at the top level")
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SolverConfig:
        """Validate plain data, raising :class:`ConfigError` naming the bad field."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            reraise(exc, "", ConfigError)

    @classmethod
    def load(cls, path: str | Path) -> SolverConfig:
        """Read a ``.yaml``/``.yml``/``.json`` file."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(str(path), f"cannot read: {exc.strerror}") from None
        return cls.from_yaml(text)
