"""Terminations: when a solve or a phase stops, and how far along it is (0..1).

Built from a :class:`~counterplan.solver.core.config.TerminationConfig` tree. Each limit reports whether it
is reached and its progress; ``"or"`` ends at the first reached limit and reports the largest
progress, ``"and"`` ends when all are reached and reports the smallest, as in OptaPlanner.
Simulated annealing cools by this progress.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from counterplan.planning.score import BendableScore, is_feasible, not_worse
from counterplan.solver.core.config import TerminationConfig
from counterplan.solver.core.scope import Progress

Check = tuple[str, Callable[[Progress], tuple[bool, float]]]

TIME_LIMIT = "spent time limit"
"""The reason of a solve its time limit ended (the user's, or the server's from a client's
deadline), also when it stopped just before it because one more model call would pass it."""
TERMINATED_EARLY = "terminated early"
"""The reason of a solve a stop request ended (a cancelled call, a server shutting down)."""


def stopped_early(termination_reason: str) -> bool:
    """A solve that ended for ``termination_reason`` answered with its best so far (a clock or a
    stop request cut it), not at its search's own end; the answer says so (``stopped_early``)."""
    return termination_reason.startswith((TIME_LIMIT, TERMINATED_EARLY))


def _ratio(value: float, limit: float) -> tuple[bool, float]:
    return value >= limit, min(value / limit, 1.0)


def _limits(c: TerminationConfig) -> list[Check]:
    """The counting limits ``c`` sets, in the order their reasons are reported."""
    checks: list[Check] = []
    if c.spent_limit_seconds is not None:
        spent = c.spent_limit_seconds
        checks.append((TIME_LIMIT, lambda p: _ratio(p.elapsed(), spent)))
    if c.unimproved_spent_limit_seconds is not None:
        idle_time = c.unimproved_spent_limit_seconds
        checks.append(
            ("unimproved time limit", lambda p: _ratio(time.perf_counter() - p.last_improvement_time, idle_time))
        )
    if c.step_count_limit is not None:
        steps = c.step_count_limit
        checks.append(("step count limit", lambda p: _ratio(p.step_count, steps)))
    if c.unimproved_step_count_limit is not None:
        idle = c.unimproved_step_count_limit
        checks.append(("unimproved step count limit", lambda p: _ratio(p.step_count - p.best_step_index, idle)))
    return checks


def _score_limits(c: TerminationConfig) -> list[Check]:
    """The limits on the best score ``c`` sets."""
    checks: list[Check] = []
    if c.best_score_limit is not None:
        target = BendableScore.parse(c.best_score_limit).to_array()

        def reached(p: Progress) -> tuple[bool, float]:
            done = bool(not_worse(p.best_score.reshape(1, -1), target)[0])
            return done, 1.0 if done else 0.0

        checks.append(("best score limit", reached))
    if c.best_score_feasible:

        def feasible(p: Progress) -> tuple[bool, float]:
            done = is_feasible(p.best_score)
            return done, 1.0 if done else 0.0

        checks.append(("best score feasible", feasible))
    return checks


def _count_limits(c: TerminationConfig) -> list[Check]:
    """The limits on scores calculated and moves made ``c`` sets."""
    checks: list[Check] = []
    if c.score_calculation_count_limit is not None:
        calcs = c.score_calculation_count_limit
        checks.append(("score calculation count limit", lambda p: _ratio(p.score_calculation_count, calcs)))
    if c.move_count_limit is not None:
        moves = c.move_count_limit
        checks.append(("move count limit", lambda p: _ratio(p.move_count, moves)))
    return checks


class Termination:
    """A runtime termination tree, checked against a :class:`~counterplan.solver.core.scope.Progress`."""

    def __init__(self, config: TerminationConfig) -> None:
        self.config = config
        self.composition = config.composition
        self._checks: list[Check] = [*_limits(config), *_score_limits(config), *_count_limits(config)]
        self._children = [Termination(child) for child in config.children]

    @property
    def is_empty(self) -> bool:
        """True when no limit is set: such a termination never ends anything."""
        return not self._checks and all(child.is_empty for child in self._children)

    def evaluate(self, progress: Progress) -> tuple[bool, float, str]:
        """``(terminated, progress 0..1, reason)`` for the current counters."""
        results: list[tuple[bool, float, str]] = [(*check(progress), name) for name, check in self._checks]
        results += [child.evaluate(progress) for child in self._children if not child.is_empty]
        if not results:
            return False, 0.0, ""
        done = [r for r in results if r[0]]
        if self.composition == "or":
            return bool(done), float(max(r[1] for r in results)), done[0][2] if done else ""
        all_done = len(done) == len(results)
        return all_done, float(min(r[1] for r in results)), " and ".join(r[2] for r in results) if all_done else ""


def wall_limit(config: TerminationConfig) -> float | None:
    """The seconds after which ``config`` ends a solve whatever else happens, if any.

    An OR tree ends at its smallest spent limit; an AND tree needs its other limits too, so it
    gives none. Work done after the search (choosing several answers) stays within this.
    """
    if config.composition == "and":
        return None
    limits = [config.spent_limit_seconds] if config.spent_limit_seconds is not None else []
    limits += [limit for child in config.children if (limit := wall_limit(child)) is not None]
    return min(limits) if limits else None


def step_limits(config: TerminationConfig) -> tuple[int | None, int | None]:
    """The step count and the unimproved step count after which ``config`` ends a solve whatever
    else happens, if any, found as :func:`wall_limit` finds the time: an OR tree's smallest at any
    depth (a time limit from ``--time-limit`` or a server wraps the configuration's own
    termination as a child), none for an AND tree."""
    if config.composition == "and":
        return None, None
    total, unimproved = [config.step_count_limit], [config.unimproved_step_count_limit]
    for child in config.children:
        child_total, child_unimproved = step_limits(child)
        total.append(child_total)
        unimproved.append(child_unimproved)
    return _least(total), _least(unimproved)


def _least(limits: list[int | None]) -> int | None:
    return min((limit for limit in limits if limit is not None), default=None)


def idle_time_limit(config: TerminationConfig) -> bool:
    """Whether an unimproved time limit is set anywhere in ``config``'s tree (beside
    :func:`wall_limit` and :func:`step_limits`: what an engine that keeps only those would miss)."""
    own = config.unimproved_spent_limit_seconds is not None
    return own or any(idle_time_limit(child) for child in config.children)
