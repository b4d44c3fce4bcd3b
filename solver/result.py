"""What a counterfactual solve returns, and what its listeners hear, in decoded form.

The result models, and :class:`ResultBuilder`: the one place a result is built from a solve (or
from an instance that already meets its goals), decoded through the planning problem.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from pydantic import BaseModel, ConfigDict, computed_field

from counterplan.planning.score import BendableScore
from counterplan.solver.core.termination import stopped_early
from counterplan.solver.exact.report import ExactStatistics
from counterplan.solver.swarm.report import SwarmStatistics


class Change(BaseModel):
    """One feature the counterfactual changes."""

    model_config = ConfigDict(frozen=True)

    feature: str
    original: Any
    proposed: Any
    original_bin: str | None = None
    """For a scorecard variable: the bin the original value falls in (``[83, 91.5)``)."""
    proposed_bin: str | None = None
    """For a scorecard variable: the bin the proposed value (a representative of it) falls in."""


class SolveStatistics(BaseModel):
    """What the search spent, and why it stopped."""

    model_config = ConfigDict(frozen=True)

    steps: int
    score_calculation_count: int
    model_call_count: int
    """The model calls the search made (the original's included). Two calls after it are not
    counted: the answer's own check through the real model, and, without a valid answer, the
    diagnosis's scan of the immutable features (:mod:`counterplan.solver.diagnosis`)."""
    score_calculation_speed: float
    """Candidate scores per second over the whole solve."""
    time_spent_seconds: float
    best_found_at_step: int
    best_found_after_seconds: float
    termination_reason: str
    engine: str = "local"
    """The engine that ran: ``local``, ``exact`` or ``swarm`` (``auto`` picks one and says why)."""
    engine_reason: str = ""
    exact: ExactStatistics | None = None
    swarm: SwarmStatistics | None = None


class Counterfactual(BaseModel):
    """One answer of several: its values, changes, predictions and score."""

    model_config = ConfigDict(frozen=True)

    proposed: dict[str, Any]
    changes: list[Change]
    predictions: dict[str, Any]
    score: str
    score_levels: list[float]
    valid: bool
    feasible: bool


class CounterfactualResult(BaseModel):
    """The best counterfactual found: values, changes, predictions, score and statistics."""

    model_config = ConfigDict(frozen=True)

    goal: str = ""
    """The goals asked, in words (``approved = 1 with p >= 0.705``): every output states them."""
    goal_default: str | None = None
    """When the goals were a default rather than asked, which one (``a binary classifier's second
    class``, ``the demo model's question``); None: asked."""
    original: dict[str, Any]
    proposed: dict[str, Any]
    changes: list[Change]
    predictions: dict[str, Any]
    """Per output: ``{class: probability}`` for a classifier, the value otherwise."""
    original_predictions: dict[str, Any]
    score: str
    """The bendable score in text form, ``[h0/h1/h2]hard/[s0/s1]soft``."""
    score_levels: list[float]
    valid: bool
    """Every goal is met, with its confidence."""
    feasible: bool
    """Every hard level is 0: goals met and no actionability rule broken."""
    statistics: SolveStatistics
    failure: str | None = None
    """Why the proposed row's prediction failed, if it did."""
    counterfactuals: list[Counterfactual] = []
    """With ``num_counterfactuals`` above 1: distinct valid answers, best first (the first is
    the one above, but for the exact engine's set solved as a whole, ``answer_set="copies"``,
    whose answers need not include the proven optimum above). Fewer than asked when fewer exist
    within the limits (every answer is at most ten times as far from the original as the best
    one, see :mod:`counterplan.solver.answers.diversity`); never padded."""
    requested: int = 1
    """How many answers were asked for."""
    blocked_by: list[str] = []
    """When no valid answer was found: the immutable features whose change alone would reach
    the goal, or else those that would bring it closest (see :mod:`counterplan.solver.diagnosis`)."""
    already_met: bool = False
    """The instance met every goal as it was: nothing to change, no search ran."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def stopped_early(self) -> bool:
        """A clock (a time limit, a client's deadline) or a stop request (a cancel, a shutdown)
        ended the search: the answer is its best so far."""
        return stopped_early(self.statistics.termination_reason)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def note(self) -> str | None:
        """What a reader should know: the goal was already met, not reached, reached only by
        breaking a rule, or fewer answers came back."""
        if self.already_met:
            return "the instance already meets the goal: nothing to change"
        if not self.valid:
            return self._not_reached()
        if not self.feasible:
            return self._rules_broken()
        if self.requested > 1 and len(self.counterfactuals) < self.requested:
            return self._fewer_answers()
        return None

    def _rules_broken(self) -> str:
        """A valid answer that breaks a rule (hard level 1, actionability, below 0: the only hard
        level a valid answer can miss), and that no answer keeping every rule was found. The score
        counts the broken rules but does not say which, and it counts each change past the most
        allowed as one, so a level of -3 is three rules or one cap passed by three: the note gives
        the level, not a number of rules. The rules are listed once, in
        :mod:`counterplan.planning.score` and the guide's actionability table."""
        broken = round(-self.score_levels[1])
        kinds = (
            "an immutable feature, a monotone direction, allowed or forbidden values, precision, the "
            "most features allowed to change, a relation, the trust region or plausibility"
        )
        counted = "one for each rule broken and each change past the most allowed"
        rules = (
            f"an actionability rule (hard level 1: {kinds})"
            if broken == 1
            else f"actionability rules (hard level 1 is -{broken}, {counted}: {kinds})"
        )
        found = "no answer keeping every rule was found"
        if self.requested > 1:
            came = len(self.counterfactuals)
            found += f", and {'none' if came == 0 else came} of the {self.requested} answers asked for came back"
        return f"the answer reaches the goal but breaks {rules}; {found}"

    def _not_reached(self) -> str:
        """Why no valid answer came back: proven infeasible, a failing model, or the immutables."""
        exact = self.statistics.exact
        if exact is not None and exact.status == "infeasible" and exact.proven:
            why = f" ({exact.reason})" if exact.reason else ""
            return f"no counterfactual exists within the domains and rules: the exact engine proved it{why}"
        if self.failure is not None and not self.feasible:
            return f"no valid counterfactual: {self.failure}"
        if not self.held_fixed and not self.blocked_by:
            if self.stopped_early:  # not "none exists": the clock or a stop cut the search
                steps, reason = self.statistics.steps, self.statistics.termination_reason
                return (
                    f"no valid counterfactual found before the search was stopped ({reason}, "
                    f"after {steps:,} step{'' if steps == 1 else 's'}): more time may find one"
                )
            return "no valid counterfactual found within the domains and rules"
        held = _names(self.held_fixed, "and") if self.held_fixed else "the immutable features"
        if not self.blocked_by:
            return (
                f"no valid counterfactual with {held} held fixed; changing one of them alone would "
                "neither reach the goal nor come closer"
            )
        return f"no valid counterfactual with {held} held fixed; changing {_names(self.blocked_by)}" + (
            " alone would reach the goal" if self.reaches else " would come closest"
        )

    def _fewer_answers(self) -> str:
        """Why fewer answers came back than were asked for."""
        found = len(self.counterfactuals)
        noun = "counterfactual" if found == 1 else "counterfactuals"
        swarm = self.statistics.swarm
        if swarm is not None and swarm.answers_from:
            asked = f"found {found} distinct valid {noun} of the {self.requested} asked for"
            if swarm.empty_clusters:
                empty = f"{swarm.empty_clusters} of the swarm's {swarm.clusters} clusters"
                return f"{asked}: {empty} held no valid particle"
            if swarm.clusters < self.requested:
                return f"{asked}: the swarm found only {swarm.clusters} distinct valid rows"
            return f"{asked}: some clusters' answers became the same once their needless changes were dropped"
        exact = self.statistics.exact
        if exact is not None and exact.answer_set:  # the exact engine's own set, not a pool's choice
            asked = f"found {found} distinct valid {noun} of the {self.requested} asked for"
            reason = exact.answer_set_reason
            if exact.answer_set == "infeasible":  # the set program proved no such set
                return f"{asked}: {reason}"
            collapsed = "the exact engine's other answers were these with changes they do not need"
            return f"{asked}: {collapsed}" + (f" ({reason})" if reason else "")
        return (
            f"found {found} distinct valid {noun} of the {self.requested} asked for "
            "within ten times the best one's distance"
        )

    reaches: bool = False
    """With ``blocked_by``: True when changing one of those features alone would reach the goal."""
    held_fixed: list[str] = []
    """When no valid answer was found: the immutable features the diagnosis tried moving, the
    ones a user held fixed (the note names them)."""

    @property
    def bendable_score(self) -> BendableScore:
        """The score as a :class:`~counterplan.planning.score.BendableScore`."""
        return BendableScore.parse(self.score)

    def to_dataframe(self) -> pd.DataFrame:
        """One row per feature: original, proposed, and whether it changed."""
        changed = {c.feature for c in self.changes}
        return pd.DataFrame(
            {
                "feature": list(self.original),
                "original": list(self.original.values()),
                "proposed": [self.proposed[name] for name in self.original],
                "changed": [name in changed for name in self.original],
            }
        )


NAMES_SHOWN = 6
"""Features a note names at most; the rest are counted."""


def _names(names: list[str], last: str = "or") -> str:
    """``a``, ``a or b``, ``a, b or c``; past ``NAMES_SHOWN``, ``a, b, ... and 4 more``."""
    if len(names) > NAMES_SHOWN:
        return ", ".join(names[:NAMES_SHOWN]) + f" and {len(names) - NAMES_SHOWN} more"
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + f" {last} " + names[-1]


class BestSolutionEvent(BaseModel):
    """A new best solution during the search, as listeners receive it."""

    model_config = ConfigDict(frozen=True)

    score: str
    score_levels: list[float]
    feasible: bool
    values: dict[str, Any]
    time_spent_seconds: float
    step_index: int
    score_calculation_count: int
