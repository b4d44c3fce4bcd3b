"""The exact engine's configuration as pure data (the program's limits, its backend, answer sets)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from counterplan.solver.core.config import MAX_STEPS, PhaseConfig, PositiveSeconds


class ExactPhaseConfig(PhaseConfig):
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
    """A retried program keeps each goal bound this far inside (in the model's output units:
    logit, probability or value; relative to a bound's size), and the relaxation that proves an
    answer keeps it this far outside. The first program states each goal at its end
    (:func:`~counterplan.solver.exact.formulation.retry_margins`)."""
    lexicographic: bool = True
    """Then minimise the number of changed features among the answers at the optimal distance
    (the score's second soft level), as a second program."""
    tie_break_effort: Annotated[float, Field(gt=0.0, le=1000.0)] | None = 0.25
    """The second program's work at most this multiple of the first's, in the backend's own
    measure that does not depend on the machine's load (CP-SAT's deterministic seconds, HiGHS's
    and SCIP's nodes), and never less than a floor (``TIE_BREAK_FLOOR_*`` in
    :mod:`counterplan.solver.exact.phase`); None: until the time limit. The distance is proven by
    the first program: the second only looks for fewer changes at that distance, and on heloc's
    100-tree forest it ran to the 30 s limit after proofs of 8-16 s (``docs/benchmarks/engines.md``).
    Cut short, it keeps the best answer it found (at worst the first's)."""
    narrow_to_warm_start: bool = True
    """Narrow the program to the warm start's distance: a feature whose change alone costs more
    is fixed, a number's range cut to what that distance allows, and the tree splits outside it
    decided while building (their subtrees dropped). An optimum within that distance is the
    whole program's; otherwise the whole program is solved. On 100-tree forests this shrinks
    the program several times over (``docs/benchmarks/engines.md``)."""
    backend: Literal["auto", "highs", "ortools", "cpsat"] = "auto"
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

    @property
    def reads_the_clock(self) -> bool:
        """The phase's own time limit (``time_limit_seconds``) reads the clock too."""
        return self.time_limit_seconds is not None or super().reads_the_clock
