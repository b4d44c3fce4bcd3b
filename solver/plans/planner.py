"""``plan(problem, actions, graph, config)``: the Pareto front of action plans, each step by step.

:class:`PlanSolver` is the same search as an object a caller (the solver manager, a server) can
listen to and stop from another thread; ``plan`` builds one and runs it.

The search (:mod:`~counterplan.solver.plans.search`) returns the genomes of the feasible
non-dominated plans; this module replays each of them from the original, checks every state after
every step through the real model in one call (so a user sees which step flips the decision, and
no plan is called valid that the model does not confirm at its end), and lays them out: ordered
actions with their values, the state after each step, the step costs, the goal output after each
step, the total cost and the distance. The cheapest plan, and the cheapest of at most two
actions, are named.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import fields, replace
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, model_validator

from counterplan.planning.actions import Action, ActionError, ActionSet, CostGraph, check_runtime
from counterplan.planning.calculator import Evaluation
from counterplan.planning.distance import gower
from counterplan.planning.errors import ModelFailureError
from counterplan.planning.problem import CounterfactualProblem
from counterplan.planning.space import FeatureSpace, FloatMatrix
from counterplan.planning.threads import NativeThreadLimit
from counterplan.solver.core.events import BestSolutionListener, ParetoFront
from counterplan.solver.plans.genome import Decoded, decode
from counterplan.solver.plans.search import PlanConfig, PlanSearch
from counterplan.solver.plans.unroll import Interrupted, Unrolled, unroll

SHORT_PLAN = 2
"""The short plan the result names: the cheapest of at most this many actions."""
_Plans = TypeVar("_Plans", Decoded, Unrolled)
CHECK_LOT_ROWS = 4096
"""A front's states are checked through the real model in calls of at most this many rows (of
whole plans), a search's stop asked between them (:func:`_checked_front`)."""
LAY_OUT_SECONDS = 0.05
"""How long a search that must end (a stop request, its time limit or its deadline passed) may
still lay its front out, cheapest plan first (at least that one): the rest is counted in
``front_size``, not laid out. A deadline is a promise, and the lay-out calls no model."""


class PlanStep(BaseModel):
    """One action of a plan, and the state after it."""

    model_config = ConfigDict(frozen=True)

    action: str
    feature: str
    before: Any
    after: Any
    cost: float
    consequences: dict[str, tuple[Any, Any]] = {}
    """Other features this step changed (its consequences, computed features): name -> (before, after)."""
    state: dict[str, Any]
    """Every feature after this step."""
    prediction: float
    """The first goal's output after this step: the target class's probability, or the value."""
    goal_met: bool


class ActionPlan(BaseModel):
    """One plan of the front."""

    model_config = ConfigDict(frozen=True)

    steps: list[PlanStep]
    total_cost: float
    """The sum of its steps' costs."""
    distance: float
    """Mean Gower distance from the original to the final state."""
    valid: bool
    """The final state meets every goal (checked through the real model) and keeps the
    problem's actionability rules."""


class PlanResult(BaseModel):
    """The feasible Pareto front of plans, cheapest first."""

    model_config = ConfigDict(frozen=True)

    goal: str = ""
    """The goals asked, in words (``approved = 1 with p >= 0.705``): every output states them."""
    goal_default: str | None = None
    """When the goals were a default rather than asked, which one; None: asked."""
    original: dict[str, Any]
    original_prediction: float
    plans: list[ActionPlan]
    front_size: int
    """The plans on the search's front: more than ``plans`` holds when a stop, the time limit or
    the deadline ended the search with a front too large to lay out in time (the cheapest are
    laid out, :data:`LAY_OUT_SECONDS`). Left out: as many as ``plans``."""
    cheapest: ActionPlan | None
    short: ActionPlan | None
    """The cheapest plan of at most two actions, when the front has one."""
    already_met: bool = False
    """The original already meets every goal: no action is needed (and none is searched)."""
    failure: str | None = None
    """The model failed on candidates so often that the search stopped calling it (its last
    message), or failed on some: what a user needs to know when no plan comes back."""
    cost_failure: str | None = None
    """Why some candidate plans were refused for their cost: a step's effort or tau was not a
    finite number (infinite, NaN), or the costs added up past the largest float. Such a plan is
    infeasible, never on the front; this names how many there were and the first action."""
    generations: int
    """Generations run."""
    stopped_early: bool = False
    """A time limit, a stop request or a failing model ended the search where its counting
    limits (generations, unimproved generations) would not have: the front is the best found by
    then, and another run may find more."""
    model_calls: int
    seconds: float

    @model_validator(mode="before")
    @classmethod
    def _whole_front(cls, data: Any) -> Any:
        """A result given no ``front_size`` holds its whole front."""
        if isinstance(data, dict) and data.get("front_size") is None:
            return {**data, "front_size": len(data.get("plans") or ())}
        return data


class PlanSolver:
    """Plans for one problem, as :class:`~counterplan.solver.counterfactual.CounterfactualSolver`
    explains one: built at once (a bad action is refused here, naming its field), run by
    :meth:`solve`, heard through the solver's best-solution listeners (each change of the front,
    with its cheapest plan as the best row), stopped from any thread by :meth:`terminate_early`
    (the front so far comes back). The :class:`~counterplan.solver.manager.SolverManager` runs it
    in the background as it runs a solve.

    ``actions``: runtime :class:`~counterplan.planning.actions.Action` s (with ``graph``), or an
    :class:`~counterplan.planning.actions.ActionSet` declared as data (its own graph is used).
    """

    def __init__(
        self,
        problem: CounterfactualProblem,
        actions: Sequence[Action] | ActionSet,
        graph: CostGraph | None = None,
        config: PlanConfig | None = None,
        listeners: Sequence[BestSolutionListener] = (),
        *,
        deadline_seconds: float | None = None,
    ) -> None:
        if isinstance(actions, ActionSet):
            if graph is not None and graph.edges:
                raise ActionError("graph", "an ActionSet holds its own graph: give its edges there, or Actions")
            compiled, graph = actions.compile(problem.space)
        else:
            check_runtime(actions, CostGraph() if graph is None else graph, problem.space)
            compiled = list(actions)
        self.problem = problem
        self.config = config or PlanConfig()
        self.search = PlanSearch(problem, compiled, graph or CostGraph(), self.config, listeners)
        self.search.deadline_seconds = deadline_seconds
        self._abandoned = threading.Event()
        self._started = time.perf_counter()
        self._original: Evaluation | None = None
        """The original's check, once made (what :meth:`so_far` reports its prediction from)."""

    def add_listener(self, listener: BestSolutionListener) -> None:
        """Hear every change of the front, in the searching thread."""
        self.search.add_listener(listener)

    def terminate_early(self) -> None:
        """Stop the search at its next check (inside a generation too); the front so far comes
        back, checked through the model (one call)."""
        self.search.terminate_early()

    def abandon(self) -> None:
        """Stop as :meth:`terminate_early` does, and make no model call more, from any thread:
        nobody will read the answer (its client went away, or the caller answered with
        :meth:`so_far` at a server's shutdown), so the front is not laid out; a model call in
        flight runs to its end, and any later one raises
        :class:`~counterplan.planning.calculator.SolveAbandoned`."""
        self._abandoned.set()
        self.search.calculator.abandon()
        self.search.terminate_early()

    def so_far(self, front: ParetoFront | None) -> PlanResult | None:
        """The answer of a search that must end at once, its thread maybe inside a model call (a
        server whose grace or a call's deadline is running out), read from any thread without a
        model call; None before the original's check came back (nothing was scored: no answer).
        ``front``
        (the last its listeners heard; None: none yet) laid out by replaying each plan (no model
        call). Its states are not checked through the model: each step's prediction is NaN, and
        the last step of each plan meets the goal, as the search's scoring of its final state
        found (the front holds only such plans), so each plan is valid as it was scored. The
        search is over, so its plans are laid out cheapest first for at most
        :data:`LAY_OUT_SECONDS` (``front_size`` counts the rest)."""
        search = self.search
        original = self._original
        if original is None:
            return None
        plans: list[ActionPlan] = []
        size = 0 if front is None else int(front.rows.shape[0])
        if front is not None and size:
            should_stop = _lay_out_stop(search)
            objectives, decoded, played = _replayed(search, front.rows, front.objectives, should_stop)
            plans = _plans(search, decoded, played, objectives, None, should_stop=should_stop)
        return self._result(original, plans, self._started, front_size=size, stopped_early=True)

    def solve(self) -> PlanResult:
        """Search (native thread pools limited to ``model_threads``) and lay out the front."""
        started = time.perf_counter()
        problem, search = self.problem, self.search
        calculator = search.calculator
        search.started = started  # the time limit covers the original's check too
        with NativeThreadLimit(self.config.model_threads):
            original = self._original = calculator.check(problem.original_row())
            if original.failures[0] is not None:
                raise ModelFailureError.on_original(original.failures[0], problem.space.missing_names)
            already_met = bool((original.scores[0, :3] == 0.0).all())
            keys, objectives = search.run() if not already_met else (np.empty((0, 0)), np.empty((0, 0)))
            plans = _lay_out(search, keys, objectives) if keys.shape[0] and not self._abandoned.is_set() else []
            front_size = int(keys.shape[0])
        failure = None
        if calculator.gave_up is not None:
            failure = f"{calculator.gave_up}; the last: {calculator.last_failure}"
        elif search.failed_states and not any(p.valid for p in plans):
            failure = (
                f"the model failed on {search.failed_states:,} candidate states; the first: {search.first_failure}"
            )
        cost_failure = None
        if search.unpriced_plans:
            cost_failure = (
                f"{search.unpriced_plans:,} candidate plans had no finite cost (the first: {search.first_unpriced}, "
                "an effort that is negative, or an effort or tau that is infinite or not a number): they are "
                "infeasible, never on the front"
            )
        return self._result(
            original,
            plans,
            started,
            already_met=already_met,
            front_size=front_size,
            failure=failure,
            cost_failure=cost_failure,
            stopped_early=search.stopped_early,
        )

    def _result(self, original: Evaluation, plans: list[ActionPlan], started: float, **fields: Any) -> PlanResult:
        """The result around laid-out ``plans`` (a finished search's or :meth:`so_far`'s): sorted
        cheapest first, naming the cheapest valid plan and the cheapest short one; ``fields``
        are the rest (``stopped_early``, failures)."""
        problem, search = self.problem, self.search
        plans.sort(key=lambda p: (p.total_cost, p.distance, len(p.steps)))
        valid = [p for p in plans if p.valid]
        short = [p for p in valid if len(p.steps) <= SHORT_PLAN]
        return PlanResult(
            goal=problem.goal_text,
            goal_default=problem.goals_default,
            original=problem.space.decode(problem.space.original),
            original_prediction=_prediction(problem, original, 0),
            plans=plans,
            cheapest=valid[0] if valid else None,
            short=short[0] if short else None,
            generations=search.generations_run,
            model_calls=search.calculator.model_call_count,
            seconds=time.perf_counter() - started,
            **fields,
        )


def plan(
    problem: CounterfactualProblem,
    actions: Sequence[Action] | ActionSet,
    graph: CostGraph | None = None,
    config: PlanConfig | None = None,
    *,
    listeners: Sequence[BestSolutionListener] = (),
) -> PlanResult:
    """The Pareto front of action plans that take ``problem``'s original to its goals.

    ``actions``: runtime :class:`~counterplan.planning.actions.Action` s (with ``graph``), or an
    :class:`~counterplan.planning.actions.ActionSet` declared as data (its own graph is used).
    ``listeners`` (the solver's :data:`~counterplan.solver.core.events.BestSolutionListener` s)
    hear each generation that changed the front: the event's ``front`` holds it (its
    ``objectives``' columns: cost, distance, then per touched feature the steps that changed it),
    ``row`` and ``score`` its cheapest plan, ``step_index`` the generations run. To stop a search
    from another thread, build a :class:`PlanSolver` and call its ``terminate_early``.
    """
    return PlanSolver(problem, actions, graph, config, listeners).solve()


def _lay_out(search: PlanSearch, keys: FloatMatrix, objectives: FloatMatrix) -> list[ActionPlan]:
    """Each front plan step by step, every state checked through the real model (in lots of
    whole plans, :func:`_checked_front`); cheapest first, and once a stop or the clock ended the
    search, for at most :data:`LAY_OUT_SECONDS` (:func:`_lay_out_stop`)."""
    should_stop = _lay_out_stop(search)
    objectives, decoded, played = _replayed(search, keys, objectives, should_stop)
    lengths = decoded.lengths
    rows = [played.states[i, 1 : lengths[i] + 1] for i in range(objectives.shape[0])]
    checked, count = _checked_front(search, rows, should_stop)
    if count < objectives.shape[0]:  # the check was cut short: the plans it checked
        objectives, decoded, played = objectives[:count], _first(decoded, count), _first(played, count)
        lengths = decoded.lengths
    if checked is not None:
        played = _as_checked(played, lengths, checked)
    return _plans(search, decoded, played, objectives, checked, should_stop=should_stop)


def _checked_front(
    search: PlanSearch, rows: list[FloatMatrix], should_stop: Callable[[], bool]
) -> tuple[Evaluation | None, int]:
    """Every plan's states (``rows``, one matrix a plan, cheapest first) checked through the real
    model in lots of whole plans of at most :data:`CHECK_LOT_ROWS` states (a longer plan alone),
    ``should_stop`` asked between lots; the check and how many plans it covers (all of them,
    unless a stop cut it: at least the first lot's). None when no plan has a step: nothing to
    check. A front of 1,820 plans of 150 steps over 150 features was checked in one call of
    273,000 rows, whatever the search's deadline."""
    if not any(r.shape[0] for r in rows):
        return None, len(rows)
    sizes = np.array([r.shape[0] for r in rows], dtype=np.intp)
    parts: list[Evaluation] = []
    done = 0
    while done < len(rows):
        if parts and should_stop():
            break
        end = done + 1 + int(np.searchsorted(np.cumsum(sizes[done + 1 :]), CHECK_LOT_ROWS - sizes[done], "right"))
        lot = [r for r in rows[done:end] if r.shape[0]]
        if lot:
            parts.append(search.calculator.check(np.vstack(lot)))
        done = end
    return (Evaluation.joined(parts) if parts else None), done


def _first(plans: _Plans, count: int) -> _Plans:
    """The first ``count`` plans of a decoded or unrolled population (every array cut alike)."""
    return replace(plans, **{f.name: getattr(plans, f.name)[:count] for f in fields(plans)})


def _as_checked(played: Unrolled, lengths: npt.NDArray[np.intp], checked: Evaluation) -> Unrolled:
    """``played`` with every step's state as its check checked it, as it is reported (a state a
    hair off its grid is checked, and laid out, as the value its plan shows); a plan's states
    past its end keep its last."""
    assert checked.rows is not None  # a check keeps its rows
    states = played.states.copy()
    steps = states.shape[1] - 1
    taken = np.arange(steps) < lengths.reshape(-1, 1)  # (plans, steps), row-major as ``rows`` were stacked
    states[:, 1:][taken] = checked.rows
    last = np.minimum(np.arange(steps + 1), lengths.reshape(-1, 1))
    return replace(played, states=states[np.arange(states.shape[0]).reshape(-1, 1), last])


def _replayed(
    search: PlanSearch, keys: FloatMatrix, objectives: FloatMatrix, should_stop: Callable[[], bool]
) -> tuple[FloatMatrix, Decoded, Unrolled]:
    """A front's plans played out from the original (no model call), cheapest first (ties in
    their order: a lay-out cut short keeps the cheapest, and one laid out whole is sorted as
    before, as :meth:`PlanSolver._result` sorts stably by cost first); their objectives, genomes
    decoded and states. When ``should_stop`` stops the replay (a large front of many actions
    takes seconds), the cheapest plan alone."""
    actions, space = search.actions, search.problem.space
    order = np.argsort(objectives[:, 0], kind="stable")
    keys, objectives = keys[order], objectives[order]
    decoded = decode(keys, actions, space)
    try:
        played = unroll(
            decoded, actions, search.graph, space, space.original, settle=search.settle, should_stop=should_stop
        )
    except Interrupted:
        keys, objectives = keys[:1], objectives[:1]
        decoded = decode(keys, actions, space)
        played = unroll(decoded, actions, search.graph, space, space.original, settle=search.settle)
    return objectives, decoded, played


def _lay_out_stop(search: PlanSearch) -> Callable[[], bool]:
    """The lay-out's stop check, asked between plans: a search that a stop request, its time
    limit or its deadline ended (:meth:`PlanSearch.past_its_time`) has its plans laid out for at
    most :data:`LAY_OUT_SECONDS` after its first (a front of 1,820 plans of 150 steps took 33 s;
    a small front is whole within it)."""
    began: list[float] = []

    def should_stop() -> bool:
        now = time.perf_counter()
        began[:] = began or [now]
        return now - began[0] > LAY_OUT_SECONDS and search.past_its_time()

    return should_stop


def _plans(
    search: PlanSearch,
    decoded: Decoded,
    played: Unrolled,
    objectives: FloatMatrix,
    checked: Evaluation | None,
    *,
    should_stop: Callable[[], bool] | None = None,
) -> list[ActionPlan]:
    """The plans laid out from their unrolled states, in the order given; ``checked`` holds every
    step's state checked through the model, in order (None: unchecked, see
    :meth:`PlanSolver.so_far`). ``should_stop`` is asked before each plan but the first: once it
    says stop, the plans laid out come back (a front of 2,000 plans of 150 steps each takes
    seconds to lay out: a deadline must hold there too)."""
    problem, actions, space = search.problem, search.actions, search.problem.space
    lengths = decoded.lengths
    out: list[ActionPlan] = []
    offset = 0
    start: tuple[bytes, dict[str, Any]] | None = None
    for i in range(objectives.shape[0]):
        if out and should_stop is not None and should_stop():
            break
        if start is None or start[0] != played.states[i, 0].tobytes():
            start = (played.states[i, 0].tobytes(), space.decode(played.states[i, 0]))
        state = start[1]
        steps = []
        for t in range(int(lengths[i])):
            a = int(decoded.order[i, t])
            action = actions[a]
            j = space.index[action.feature]
            before, after = played.states[i, t], played.states[i, t + 1]
            row = offset + t
            state, previous = _next_state(space, state, before, after), state
            steps.append(
                PlanStep(
                    action=action.name,
                    feature=action.feature,
                    before=previous[action.feature],
                    after=state[action.feature],
                    cost=float(played.step_costs[i, t]),
                    consequences={
                        space.names[k]: (previous[space.names[k]], state[space.names[k]])
                        for k in np.flatnonzero(before != after)
                        if k != j
                    },
                    state=state,
                    prediction=math.nan if checked is None else _prediction(problem, checked, row),
                    goal_met=bool(t == lengths[i] - 1) if checked is None else _goal_met(checked, row),
                )
            )
        last = offset + int(lengths[i]) - 1
        keeps_rules = checked is None or (last >= offset and bool(checked.scores[last, 1] == 0.0))
        offset += int(lengths[i])
        final = played.final[i].reshape(1, -1)
        distance = float(gower(final, space.original, space.nominal, space.domain_width)[0])
        out.append(
            ActionPlan(
                steps=steps,
                total_cost=float(sum(step.cost for step in steps)),  # the steps' own: the search's is rounded
                distance=distance,
                valid=bool(steps and steps[-1].goal_met and keeps_rules),
            )
        )
    return out


def _next_state(space: FeatureSpace, state: dict[str, Any], before: FloatMatrix, after: FloatMatrix) -> dict[str, Any]:
    """``space.decode(after)``, from ``state`` (``space.decode(before)``): a step changes a few
    features, so only those are decoded again (a state of 150 features decoded whole at every
    step of every plan of a front was most of its lay-out). Compared by their bits, so every
    value is decoded from the very code ``space.decode`` would see."""
    bits = np.asarray(before, dtype=np.float64).view(np.uint64) != np.asarray(after, dtype=np.float64).view(np.uint64)
    changed = np.flatnonzero(bits)
    if changed.size == 0:
        return dict(state)
    features = space.features
    return {**state, **{features[k].name: features[k].decode(float(after[k])) for k in changed.tolist()}}


def _goal_met(checked: Evaluation, row: int) -> bool:
    """Every goal is met at ``row`` of a check, its prediction did not fail."""
    return bool(checked.scores[row, 0] == 0.0 and checked.scores[row, 2] == 0.0) and checked.failures[row] is None


def _prediction(problem: CounterfactualProblem, evaluation: Evaluation, row: int) -> float:
    """The first goal's output at ``row``: the target class's probability, or the value."""
    bound = problem.goals[0]
    values = evaluation.predictions[bound.output.name][row]
    if bound.output.is_classification:
        return float(np.asarray(values)[bound.class_index])
    return float(values)
