"""Local search's configuration as pure data: acceptors, forager, move selector, and the three phases
the local engine runs (the feature scan, local search, the boundary polish).

Each phase type registers its config class here with the phase registry
(:mod:`counterplan.solver.phases`); the factories in :mod:`counterplan.solver.local.factory` build
the runtime phases.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal, Self

from pydantic import Field, model_validator

from counterplan.solver.core.config import (
    MAX_MEMORY_SIZE,
    MAX_MOVES_PER_STEP,
    ConfigError,
    ConfigModel,
    MemorySize,
    PhaseConfig,
    TerminationConfig,
    Weight,
    parse_score,
    stable_termination,
)


class HillClimbingAcceptorConfig(ConfigModel):
    """Accept a move whose score is not worse than the current step's."""

    type: Literal["hill_climbing"] = "hill_climbing"


class TabuSearchAcceptorConfig(ConfigModel):
    """Tabu search: recently changed features, values or moves are tabu for some steps.

    Aspiration: a tabu move whose score beats the best score so far is accepted anyway.
    """

    type: Literal["tabu_search"] = "tabu_search"
    entity_tabu_size: Annotated[int, Field(ge=0, le=MAX_MEMORY_SIZE)] | None = None
    value_tabu_size: Annotated[int, Field(ge=0, le=MAX_MEMORY_SIZE)] | None = None
    move_tabu_size: Annotated[int, Field(ge=0, le=MAX_MEMORY_SIZE)] | None = None
    aspiration_enabled: bool = True


class LateAcceptanceAcceptorConfig(ConfigModel):
    """Accept a move not worse than the step score ``late_acceptance_size`` steps ago."""

    type: Literal["late_acceptance"] = "late_acceptance"
    late_acceptance_size: MemorySize = 20


class SimulatedAnnealingAcceptorConfig(ConfigModel):
    """Accept worse moves with a chance that shrinks as the temperature cools.

    ``starting_temperature`` is a score in text form, one temperature per level (as in
    OptaPlanner); the temperature falls linearly with the termination's progress (time
    gradient), reaching 0 at the end.
    """

    type: Literal["simulated_annealing"] = "simulated_annealing"
    starting_temperature: str = "[0.05/0/0]hard/[0.2/1]soft"

    @model_validator(mode="after")
    def _check(self) -> Self:
        levels = parse_score("starting_temperature", self.starting_temperature).levels
        if any(level < 0 for level in levels) or not any(levels):
            raise ConfigError("starting_temperature", "needs levels >= 0, at least one above 0")
        return self


class GreatDelugeAcceptorConfig(ConfigModel):
    """Accept moves above a water level that rises towards 0 every step."""

    type: Literal["great_deluge"] = "great_deluge"
    water_level_increment_ratio: Annotated[float, Field(gt=0.0, lt=1.0)] = 0.02


class StepCountingHillClimbingAcceptorConfig(ConfigModel):
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


class ForagerConfig(ConfigModel):
    """Picks the step among the accepted moves (OptaPlanner's local search forager)."""

    accepted_count_limit: MemorySize | None = None
    """Consider only the first N accepted moves of the sample; None: all of them."""
    pick_early_type: PickEarlyType = "never"


class MoveSelectorConfig(ConfigModel):
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
    distance_step_share: Annotated[float, Field(ge=0.0, le=1.0)] = 0.25
    """Share of the local steps sized in units of the problem's distance, 0.01 to
    ``local_step_distance`` of them (MADs under MAD-L1: each feature as far as it costs), where the
    distance is a per-feature sum; the others are sized by the range (``local_step_scale``).
    Measured on adult, compas and heloc: all by distance lost one compas GB row (+6.7%), a
    quarter lost none."""
    local_step_distance: Annotated[float, Field(gt=0.0, le=1000.0)] = 4.0
    """Largest local step in units of the distance (``distance_step_share``)."""
    split_jump_draws: Annotated[int, Field(ge=1, le=16)] = 1
    """A split jump draws this many thresholds of its feature and takes the one nearest the
    original (the cheapest: a feature's cost grows with its distance from the original); 1: a
    uniform draw. Not the default: on adult's random forest, 3 draws led the search into
    capital-loss (1 unit a dollar under MAD-L1) on one row of 6, +6,000 % after the polish."""

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


class LocalSearchPhaseConfig(PhaseConfig):
    """A local-search phase: acceptor, forager, move selector, walkers and termination."""

    type: Literal["local_search"] = "local_search"
    ends_by_itself: ClassVar[bool] = False
    acceptor: AcceptorConfig = Field(default_factory=TabuSearchAcceptorConfig)
    forager: ForagerConfig = Field(default_factory=ForagerConfig)
    move_selector: MoveSelectorConfig = Field(default_factory=MoveSelectorConfig)
    walkers: Annotated[int, Field(ge=1, le=64)] = 8
    """Independent searches stepping in lockstep; their moves share one model call per step."""
    termination: TerminationConfig | None = None


class FeatureScanPhaseConfig(PhaseConfig):
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
    """Also try each number just past each split threshold of a tree model (``counterplan.planning.structure.splits``):
    where the optimal answers land, often far from the original."""
    greedy_steps: Annotated[int, Field(ge=0, le=50)] = 6
    """Then build a counterfactual greedily: take the move with the best goal gain per unit
    of distance and scan again from there, until feasible or this many times (one call each)."""


class BoundaryPolishPhaseConfig(PhaseConfig):
    """A phase that shaves the best solution down to the decision boundary, deterministically.

    Each iteration tries, in one batched call, every changed number at ``grid_size - 1``
    points between its original and current value, all of them moved back together by the
    same fractions, and each changed feature reverted; it keeps the best. It stops after
    ``max_iterations`` or at the first iteration that finds nothing better.

    With ``starts`` above 1 it then polishes, together, the best row of each of the next
    ``starts - 1`` distinct sets of changed features the solve has found feasible (reverts
    and a grid per changed number, one call per iteration for all of them, see
    :mod:`counterplan.solver.core.boundary`), and keeps the best: a route the search left unpolished, or
    carrying a needless change, can shave down below the polished best.
    """

    type: Literal["boundary_polish"] = "boundary_polish"
    grid_size: Annotated[int, Field(ge=2, le=256)] = 32
    max_iterations: Annotated[int, Field(ge=1, le=100)] = 6
    starts: Annotated[int, Field(ge=1, le=256)] = 1
    combos: bool = True
    """Before the trades, score the original's single-feature rows and the cheapest combinations of
    2-4 of them predicted (gains added) to reach the goal (:func:`counterplan.solver.core.trade.combo_candidates`):
    a basin of 3-4 changed features the greedy scan never enters; for a model without split values
    (a linear model), after the trades, and their fronts the buys of another round of trades.
    Per-feature-sum distances only."""
    trade_rounds: Annotated[int, Field(ge=0, le=100)] = 4
    """Rounds of trades (one changed feature given back, another bought, :mod:`counterplan.solver.core.trade`)
    from the best, each winner bisected again; 0: the bisection alone. Per-feature-sum distances only."""
    beam_width: Annotated[int, Field(ge=0, le=64)] = 4
    """With the combinations, the pairs of each of this many features whose single rows gain most
    (at each of their values) with every single-feature value of another, scored for real: two
    features that reach the goal only together. For a model whose split values are known (a tree
    ensemble) before the trades; for another (a linear model) after them, with the combinations. 0:
    none."""
    beam_depth: Annotated[int, Field(ge=2, le=8)] = 4
    """The beam's rows change up to this many features: after the pairs, the ``beam_keep`` rows
    nearest the goal that do not reach it, each with one more feature's single value (one call a
    level): 3-4 features that reach the goal only together (heloc GB)."""
    beam_keep: Annotated[int, Field(ge=1, le=256)] = 16
    pair_rows: Annotated[int, Field(ge=0, le=MAX_MOVES_PER_STEP)] = 64
    """With the combinations, at most this many pairs of changes a tree ensemble rewards only
    together, read from its trees (:mod:`counterplan.planning.structure.interactions`: a split
    crossed, then one under it on the new way), scored with the combinations in their call: two
    features where one alone gains nothing or hurts, which no added gains see (a boosted model on
    generated data: 85% above the proven optimum without them). The most gain per unit of
    distance first, below the best's distance. Classifiers whose trees the fast path evaluates;
    0: none."""
    trade_rows: Annotated[int, Field(ge=1, le=MAX_MOVES_PER_STEP)] = 1024
    """At most this many rows per trade round (one model call each)."""
    combo_rows: Annotated[int, Field(ge=1, le=MAX_MOVES_PER_STEP)] = 1024
    """At most this many combinations, and as many pairs of the beam (scored in one model call)."""
    trade_grid_size: Annotated[int, Field(ge=2, le=256)] = 24
    """Values of a number's whole domain a trade or combination may buy (beside split values and
    steps in the distance's units)."""
    recreate_steps: Annotated[int, Field(ge=0, le=32)] = 16
    """Ruin and recreate: each changed feature of the best that carries at least
    ``recreate_share`` of its distance is given back, and the row rebuilt greedily (the feature
    scan's rule: the single change with the best goal gain per unit of distance, one call a step
    for all of a round's chains, a feasible row nearer than the best ending a chain, see
    ``recreate_onward``; the given-back feature only cheaper than it was), for at most this many
    steps; a feasible result is bisected and traded. Reaches an optimum of many small changes
    where the search paid one large one (adult's forest: capital-gain 5,096 dollars, 1 MAD each,
    against capital-loss 1,795 and five cheap changes). Only for a model whose split values are
    known (a tree ensemble): a linear model's trades reach its optimum, and rebuilding doubled its
    rows per solve. 0: none."""
    recreate_share: Annotated[float, Field(gt=0.0, le=1.0)] = 0.15
    """The share of the best's distance a changed feature must carry to be given back."""
    recreate_slack: Annotated[float, Field(ge=0.0, le=1.0)] = 0.1
    """A recreate step scores rows predicted up to this share farther than the best: a feasible
    row a little farther may still bisect below it (heloc GB: a feature given back, another bought,
    a third then shaved)."""
    recreate_features: Annotated[int, Field(ge=1, le=64)] = 8
    """At most this many features given back a round (the priciest)."""
    recreate_rounds: Annotated[int, Field(ge=1, le=10)] = 3
    """Rounds of ruin and recreate: another from the new best while one improved it."""
    recreate_onward: Annotated[int, Field(ge=0, le=32)] = 6
    """A rebuild step whose feasible rows are all farther than the best does not end the rebuild:
    it goes on for at most this many steps from the step's most efficient row short of the goal
    (its best feasible row kept, should nothing better follow), scoring only rows predicted nearer
    than the best. The optimum may add nearly free threshold crossings of large-MAD features and
    shave the expensive change: heloc's forest rows 3374 and 2021 were +3.8% and +4.1% when a
    rebuild ended at its first feasible step; 4 steps make 3374 optimal, 6 take 2021 to +1.0%
    (measured: heloc's forest within 2% on 90%, 95%, 100% of 20 rows with 2, 4, 6). 0: a rebuild
    ends at its first feasible step."""
    recreate_rows: Annotated[int, Field(ge=1, le=MAX_MOVES_PER_STEP)] = 1024
    """At most this many rows per recreate step (the nearest)."""


def default_phases() -> tuple[FeatureScanPhaseConfig | LocalSearchPhaseConfig | BoundaryPolishPhaseConfig, ...]:
    """A feature scan; tabu search until feasible and stable; a boundary polish (the default solve)."""
    return (
        FeatureScanPhaseConfig(),
        LocalSearchPhaseConfig(termination=stable_termination()),
        BoundaryPolishPhaseConfig(),
    )
