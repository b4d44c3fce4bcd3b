"""The plan search: a biased random-key genetic algorithm with non-dominated sorting (CSCF).

Each generation (after Naumann and Ntoutsi's code):

1. decode every genome (:mod:`~counterplan.solver.plans.genome`), unroll every plan from the original
   (:mod:`~counterplan.solver.plans.unroll`), and score all the final states in **one** model call;
2. objectives, all minimised: the total cost (rounded to 4 decimals), the Gower distance from
   the original to the final state (rounded to 2), and per feature some action can change, the
   number of steps that changed it;
3. constraints: the final state meets every goal and keeps the problem's actionability rules
   (every hard level of the score: no immutable changed, monotone rules, at most
   ``max_changed_features``, plausibility and the trust region when the problem has them), the
   plan is not empty, no step broke its conditions;
4. the elites are the first non-dominated front (pymoo's ``NonDominatedSorting``) among the
   feasible plans, or, when none is feasible, among those with the least constraint violation;
5. the next population: the elites, ``offspring`` children each of a random elite and a random
   non-elite by biased uniform crossover (each key from the elite with ``bias``), and ``mutants``
   fresh random genomes; genomes whose objective vectors repeat an elite's are dropped. The
   elites are at most :data:`ELITE_SHARE` of the population (a random subset of a larger front:
   the archive keeps it whole), so a generation holds at most :func:`generation_size` genomes.

Every feasible plan seen is offered to an archive that keeps the non-dominated ones: the Pareto
front the answer is built from.

The search speaks the solver's language: a generation is a **step**, and a generation that
changed the front **improved** it. So the solver's own
:class:`~counterplan.solver.core.config.TerminationConfig`, evaluated by the core's
:class:`~counterplan.solver.core.termination.Termination` on a
:class:`~counterplan.solver.core.scope.Progress` the search keeps, ends it: a generation count
(``step_count_limit``), generations without a change of the front (``unimproved_step_count_limit``),
a time limit (``spent_limit_seconds``), once the front holds a plan (``best_score_feasible``), and
and/or trees of those; :func:`plan_termination` says the usual ones in the search's words. Each
changed front is announced to the solver's
:data:`~counterplan.solver.core.events.BestSolutionListener` s, and :meth:`PlanSearch.terminate_early`
stops it from any thread, as :meth:`counterplan.solver.core.solver.Solver.terminate_early` does a solve.

The same seed gives the same front; only a clock (a time limit: the user's, or a server's
deadline), a stop request (a cancelled call, a server shutting down) or a model failing batch
after batch ends the search where its counting limits would not, and then it answers with the
archive so far (``stopped_early``). Those are asked between model calls and inside a generation
(before every action pass of the unrolling, and before its model call): a generation that cannot
finish in time is dropped, the search does not start a model call that would end after its time
limit (nor one whose answer could not be laid out before it: the front's check is one more call),
and it answers with the archive of the generations that finished (empty when none did).
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Annotated, Self

import numpy as np
import numpy.typing as npt
from pydantic import Field, model_validator

from counterplan.planning.actions import Action, ActionError, CostGraph
from counterplan.planning.calculator import NOT_SCORED, ScoreCalculator
from counterplan.planning.distance import gower
from counterplan.planning.distinct_rows import first_of_each
from counterplan.planning.problem import CounterfactualProblem
from counterplan.planning.score import HARD_LEVELS, LEVELS
from counterplan.planning.space import FloatMatrix
from counterplan.planning.threads import MAX_MODEL_THREADS
from counterplan.solver.core.config import MAX_SEED, ConfigError, ConfigModel, TerminationConfig
from counterplan.solver.core.events import BestSolutionChanged, BestSolutionListener, ParetoFront
from counterplan.solver.core.scope import Progress, count_step, no_time_for_a_call
from counterplan.solver.core.termination import TERMINATED_EARLY, TIME_LIMIT, Termination, wall_limit
from counterplan.solver.plans.genome import decode
from counterplan.solver.plans.unroll import Interrupted, Unrolled, unroll

COST_DECIMALS = 4
DISTANCE_DECIMALS = 2
ARCHIVE_MAX = 2000
DEFAULT_GENERATIONS = 150
"""The paper's released code's generation count: the default termination."""
MAX_GENERATIONS = 10_000
"""Generations a search may be given at most (a server's ``max_plan_generations`` is no higher):
each is a model call over the population (at most 20,000 genomes), so a count that is a typo for
a time limit would run for days; a longer search is run again from its front."""
GAVE_UP = "the model failed on batch after batch"
ELITE_SHARE = 0.5
"""The elites a generation breeds from, at most, as a share of the population. They come on top
of its children and mutants (the paper's code), so an uncapped front grew every generation: a
population of 500 over 32 actions held 12,949 genomes by its 40th generation, far past the
memory and the work a server admits it by."""

_SHORT_NAMES = {
    "step_count_limit": "generations",
    "spent_limit_seconds": "time_limit_seconds",
    "unimproved_step_count_limit": "unimproved_generations",
}


def plan_termination(
    generations: int | None = DEFAULT_GENERATIONS,
    *,
    time_limit_seconds: float | None = None,
    unimproved_generations: int | None = None,
) -> TerminationConfig:
    """The usual plan termination, in the search's words (a generation is a step).

    It ends after ``generations`` generations, after ``time_limit_seconds`` (checked after each
    generation), or after ``unimproved_generations`` generations in a row that left the front as
    it was, whichever comes first; None leaves a limit out. Errors name these parameters, not the
    :class:`TerminationConfig` fields they fill. Any other ``TerminationConfig`` works as well.
    ``generations`` is at most :data:`MAX_GENERATIONS`.
    """
    if generations is not None and generations > MAX_GENERATIONS:
        raise ConfigError("generations", f"at most {MAX_GENERATIONS:,}, given {generations:,}")
    try:
        return TerminationConfig(
            step_count_limit=generations,
            spent_limit_seconds=time_limit_seconds,
            unimproved_step_count_limit=unimproved_generations,
        )
    except ConfigError as exc:  # each bad field in the search's words, on its own (ConfigError.parts)
        error = ConfigError(_short(exc.field), _short(exc.problem))
        error.parts = tuple((_short(field), _short(problem)) for field, problem in exc.parts)
        raise error from None


def _short(text: str) -> str:
    """``text`` with the :class:`TerminationConfig` fields named in the search's words."""
    for internal, name in _SHORT_NAMES.items():
        text = text.replace(internal, name)
    return text


class PlanConfig(ConfigModel):
    """The plan search's settings (the paper's released code's defaults).

    Its names are the solver's (:class:`~counterplan.solver.core.config.SolverConfig`):
    ``termination``, ``random_seed``, ``model_threads``. The default termination is
    :data:`DEFAULT_GENERATIONS` generations; ``termination=plan_termination(generations,
    time_limit_seconds=...)`` says another count or a time limit.
    """

    population: Annotated[int, Field(ge=4, le=20_000)] = 500
    mutant_share: Annotated[float, Field(ge=0.0, lt=1.0)] = 0.2
    """Share of each new population that is fresh random genomes (the rest: crossover children)."""
    bias: Annotated[float, Field(ge=0.5, le=1.0)] = 0.7
    """Chance that a child's key comes from its elite parent."""
    termination: TerminationConfig = Field(default_factory=plan_termination)
    """When the search ends (a generation is a step; a generation that changed the front improved it)."""
    random_seed: Annotated[int, Field(ge=0, le=MAX_SEED)] = 0
    model_threads: Annotated[int, Field(ge=1, le=MAX_MODEL_THREADS)] | None = 1
    """Native threads per model call (None: leave the pools as they are), as the solver's."""

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.termination.is_empty:
            raise ConfigError("termination", "set a limit (generations, a time limit...), or the search never ends")
        for path, node in _limits(self.termination, "termination"):
            if node.best_score_limit is not None:
                raise ConfigError(
                    f"{path}.best_score_limit",
                    "a plan search keeps a front of plans, not one best score: use best_score_feasible "
                    "(once the front holds a plan), generations or a time limit",
                )
            if node.step_count_limit is not None and node.step_count_limit > MAX_GENERATIONS:
                raise ConfigError(  # plan_termination's bound, for a TerminationConfig given whole
                    f"{path}.step_count_limit",
                    f"at most {MAX_GENERATIONS:,} generations, given {node.step_count_limit:,}",
                )
        return self


def _limits(termination: TerminationConfig, path: str) -> Iterator[tuple[str, TerminationConfig]]:
    """Every node of ``termination``'s tree, with its path (``termination.children[0]``)."""
    yield path, termination
    for i, child in enumerate(termination.children):
        yield from _limits(child, f"{path}.children[{i}]")


NO_PLAN_SCORE = np.array([-1.0] + [0.0] * (LEVELS - 1))
"""The search's best score while its front holds no plan (infeasible: ``best_score_feasible`` waits)."""


def generation_size(config: PlanConfig) -> int:
    """The genomes a generation of ``config``'s search holds at most: its population and elites."""
    return config.population + _most_elites(config.population)


def _most_elites(population: int) -> int:
    return max(1, int(population * ELITE_SHARE))


def front_score(objectives: FloatMatrix) -> tuple[int, FloatMatrix]:
    """The front's lexicographic best plan (the cheapest, then the nearest) and its score: every
    hard level 0 (the front holds only feasible plans), the soft levels minus its total cost and
    minus its distance. What a listener that knows one best answer reads of a front."""
    best = int(np.lexsort((objectives[:, 1], objectives[:, 0]))[0])
    score = np.zeros(LEVELS)
    score[HARD_LEVELS:] = -objectives[best, :2]
    return best, score


@dataclass(frozen=True)
class Generation:
    """One generation scored: genomes, their objectives and constraint violation."""

    keys: FloatMatrix
    objectives: FloatMatrix
    violation: FloatMatrix
    played: Unrolled


class PlanSearch:
    """Searches the plans of one problem (see the module docstring)."""

    def __init__(
        self,
        problem: CounterfactualProblem,
        actions: list[Action],
        graph: CostGraph,
        config: PlanConfig | None = None,
        listeners: Sequence[BestSolutionListener] = (),
    ) -> None:
        self.problem = problem
        self.actions = actions
        self.graph = graph
        self.config = config or PlanConfig()
        self.listeners: list[BestSolutionListener] = list(listeners)
        self.calculator = ScoreCalculator(problem, stop=self.must_stop)
        self.started = time.perf_counter()
        """When the search's clock started (the planner sets it where its solve began)."""
        self._wall_limit = wall_limit(self.config.termination)
        self.deadline_seconds: float | None = None
        """Seconds from :attr:`started` by which the answer must be back, its front's check
        included; unlike the time limit it binds the first generation too (a server sets it from
        its client's deadline: an empty front in time is an answer, a full one too late is not)."""
        self.generations_run = 0
        self.stopped_early = False
        """A clock, a stop request or a model that failed on batch after batch ended the search
        where its counting limits would not have: the front is the one found by then."""
        self.termination_reason = ""
        self.failed_states = 0
        """Final states the model failed on (raised for, or answered NaN): never feasible."""
        self.first_failure: str | None = None
        self.unpriced_plans = 0
        """Candidate plans with a step whose cost is not a finite number, or whose costs add up
        past float64's range: infeasible (a constraint violation), never on the front."""
        self.first_unpriced: str | None = None
        """The action of the first such step seen (what :attr:`PlanResult.cost_failure` names)."""
        self._terminate = threading.Event()
        space = problem.space
        relations = problem.relations
        self.settle = None if relations is None else relations.apply
        computed = set() if relations is None else {space.names[j] for j in relations.target_columns}
        _refuse_computed(actions, computed)
        touched = {a.feature for a in actions} | {name for a in actions for name in a.consequences}
        self._touched = np.array([space.index[name] for name in space.names if name in touched], dtype=np.intp)
        self._front_keys, self._front_objectives = self._empty_front()

    def _empty_front(self) -> tuple[FloatMatrix, FloatMatrix]:
        return np.empty((0, 2 * len(self.actions))), np.empty((0, 2 + self._touched.size))

    def add_listener(self, listener: BestSolutionListener) -> None:
        """Hear every change of the front, in the searching thread."""
        self.listeners.append(listener)

    def terminate_early(self) -> None:
        """Stop at the next check (between action passes of a generation, or before its model
        call); the generations that finished make the front; safe from any thread."""
        self._terminate.set()

    def must_stop(self) -> bool:
        """A stop was requested, or the next model call and then the front's check (one more
        call, as long) would end after the time limit or the deadline: no model call is started
        then, no action pass either. The time limit lets the first generation finish (it still
        answers with a front, however short the limit); a stop request and the deadline
        (:attr:`deadline_seconds`) do not, however heavy that generation is."""
        if self._terminate.is_set():
            return True
        spent, call = time.perf_counter() - self.started, 2 * self.calculator.call_seconds
        if no_time_for_a_call(spent, self.deadline_seconds, call):
            return True
        return self.generations_run > 0 and no_time_for_a_call(spent, self._wall_limit, call)

    def past_its_time(self) -> bool:
        """A stop was requested, or the time limit or the deadline has passed (or will have
        within :data:`~counterplan.solver.core.scope.CALL_MARGIN_SECONDS`): what the work after
        the search asks, which calls no model (the front's lay-out)."""
        spent = time.perf_counter() - self.started
        late = any(no_time_for_a_call(spent, limit, 0.0) for limit in (self.deadline_seconds, self._wall_limit))
        return self._terminate.is_set() or late

    @property
    def terminate_requested(self) -> bool:
        """True once :meth:`terminate_early` was called."""
        return self._terminate.is_set()

    def evaluate(self, keys: FloatMatrix) -> Generation:
        """Decode, unroll and score ``keys``: one model call for every final state."""
        space = self.problem.space
        decoded = decode(keys, self.actions, space)
        played = unroll(
            decoded, self.actions, self.graph, space, space.original, settle=self.settle, should_stop=self.must_stop
        )
        final = played.final
        evaluation = self.calculator.calculate(final.copy())
        if NOT_SCORED in evaluation.failures:  # stopped before the model call: the generation is dropped
            raise Interrupted
        scores = evaluation.scores
        failed = [reason for reason in evaluation.failures if reason is not None]
        if failed:
            self.failed_states += len(failed)
            self.first_failure = self.first_failure or failed[0]
        missed = np.maximum(-scores[:, :3], 0.0).sum(axis=1)
        overflow = ~np.isfinite(played.cost)
        self._count_unpriced(played, decoded.order, overflow)
        violation = np.asarray(missed + decoded.empty + played.violations + overflow, dtype=np.float64)
        cost = _rounded_cost(np.where(overflow, np.inf, played.cost))
        distance = np.round(gower(final, space.original, space.nominal, space.domain_width), DISTANCE_DECIMALS)
        objectives = np.column_stack([cost, distance, played.changes[:, self._touched]]).astype(np.float64)
        return Generation(keys=keys, objectives=objectives, violation=violation, played=played)

    def _count_unpriced(self, played: Unrolled, order: npt.NDArray[np.intp], overflow: npt.NDArray[np.bool_]) -> None:
        """Count the plans that have no finite cost (a step's, or their sum), and name the first
        step's action: the answer says why they are not on the front."""
        unpriced = played.unpriced.any(axis=1) | overflow
        if not unpriced.any():
            return
        self.unpriced_plans += int(unpriced.sum())
        if self.first_unpriced is None:
            rows, steps = np.nonzero(played.unpriced)
            first = f"action {self.actions[int(order[rows[0], steps[0]])].name!r}" if rows.size else "their sum"
            self.first_unpriced = first

    def run(self) -> tuple[FloatMatrix, FloatMatrix]:
        """Generations until the termination, a stop request or a failing model ends the search;
        returns the archive's genomes and objectives (the feasible front)."""
        from pymoo.util.nds.non_dominated_sorting import NonDominatedSorting  # noqa: PLC0415 - the plans extra

        sorting = NonDominatedSorting()
        config = self.config
        rng = np.random.default_rng(config.random_seed)
        keys = rng.random((config.population, 2 * len(self.actions)))
        termination = Termination(config.termination)
        progress = Progress.starting(NO_PLAN_SCORE, self.started)
        self._front_keys, self._front_objectives = self._empty_front()
        self.generations_run, self.stopped_early, self.termination_reason = 0, False, ""
        while True:
            if self.generations_run and self.must_stop():  # no time for another generation's model call
                self._interrupted()
                return self._front_keys, self._front_objectives
            try:
                scored = self.evaluate(keys)
            except Interrupted:
                self._interrupted()
                return self._front_keys, self._front_objectives
            self.generations_run += 1
            count_step([progress], keys.shape[0])
            feasible = scored.violation == 0
            if self._offer(sorting, keys[feasible], scored.objectives[feasible], progress):
                self._announce(progress)
            if self._ends(termination, progress):
                return self._front_keys, self._front_objectives
            keys = self._breed(sorting, rng, scored)

    def _offer(self, sorting: object, keys: FloatMatrix, objectives: FloatMatrix, progress: Progress) -> bool:
        """Offer a generation's feasible plans to the archive; True when the front changed (the
        generation improved it: the counters of unimproved generations and time start again)."""
        before = self._front_objectives
        self._front_keys, self._front_objectives = self._archive(sorting, self._front_keys, before, keys, objectives)
        if np.array_equal(before, self._front_objectives):
            return False
        progress.best_score = front_score(self._front_objectives)[1]
        progress.best_step_index = progress.step_count
        progress.last_improvement_time = time.perf_counter()
        return True

    def _announce(self, progress: Progress) -> None:
        """Tell every listener of the changed front (and its cheapest plan, as the best row)."""
        if not self.listeners:
            return
        best, score = front_score(self._front_objectives)
        event = BestSolutionChanged(
            self._front_keys[best].copy(),
            score,
            progress.elapsed(),
            progress.step_count,
            self.calculator.calculation_count,
            front=ParetoFront(self._front_keys.copy(), self._front_objectives.copy()),
        )
        for listener in self.listeners:
            listener(event)

    def _ends(self, termination: Termination, progress: Progress) -> bool:
        """Whether the search ends after this generation, and why (``stopped_early`` when the
        clock, a stop request or a failing model decided it rather than the counting limits)."""
        done, _, reason = termination.evaluate(progress)
        if done:
            self.termination_reason = reason
            self.stopped_early = not termination.evaluate(_clock_stopped(progress))[0]
        elif self.calculator.gave_up is not None:  # the model failed on batch after batch
            self.termination_reason, self.stopped_early = GAVE_UP, True
        elif self._terminate.is_set():
            self.termination_reason, self.stopped_early = TERMINATED_EARLY, True
        return bool(self.termination_reason)

    def _interrupted(self) -> None:
        """Why a generation was dropped halfway: a stop request, else the clock."""
        self.stopped_early = True
        self.termination_reason = TERMINATED_EARLY if self._terminate.is_set() else TIME_LIMIT

    def _breed(self, sorting: object, rng: np.random.Generator, scored: Generation) -> FloatMatrix:
        """The next population: the elites, crossover children and fresh mutants."""
        config = self.config
        keys, width = scored.keys, scored.keys.shape[1]
        mutants = round(config.mutant_share * config.population)
        offspring = config.population - mutants
        feasible = scored.violation == 0
        pool = (
            np.flatnonzero(feasible) if feasible.any() else np.flatnonzero(scored.violation == scored.violation.min())
        )
        front = pool[sorting.do(scored.objectives[pool], only_non_dominated_front=True)]  # type: ignore[attr-defined]
        elites = front[first_of_each(scored.objectives[front])]
        most = _most_elites(config.population)
        if elites.size > most:  # a random share of a large front breeds (the archive holds it all)
            elites = np.sort(rng.choice(elites, size=most, replace=False))
        others = np.setdiff1d(np.arange(keys.shape[0]), elites)
        if others.size == 0:
            others = elites
        mothers = elites[rng.integers(elites.size, size=offspring)]
        fathers = others[rng.integers(others.size, size=offspring)]
        from_elite = rng.random((offspring, width)) < config.bias
        children = np.where(from_elite, keys[mothers], keys[fathers])
        return np.vstack([keys[elites], children, rng.random((mutants, width))])

    @staticmethod
    def _archive(
        sorting: object, keys: FloatMatrix, objectives: FloatMatrix, new_keys: FloatMatrix, new_objectives: FloatMatrix
    ) -> tuple[FloatMatrix, FloatMatrix]:
        """The non-dominated plans of the archive and the new feasible ones, each objective vector once."""
        if new_keys.shape[0] == 0:
            return keys, objectives
        all_keys = np.vstack([keys, new_keys])
        all_objectives = np.vstack([objectives, new_objectives])
        unique = first_of_each(all_objectives)
        all_keys, all_objectives = all_keys[unique], all_objectives[unique]
        front = sorting.do(all_objectives, only_non_dominated_front=True)  # type: ignore[attr-defined]
        front = np.sort(np.asarray(front, dtype=np.intp))[:ARCHIVE_MAX]
        return all_keys[front], all_objectives[front]


def _rounded_cost(cost: FloatMatrix) -> FloatMatrix:
    """Each plan's cost rounded to :data:`COST_DECIMALS` (its objective). A cost past about 1e304
    is kept as it is: rounding scales it by 10^4 first, which overflowed to infinity (numpy's
    overflow warning on stderr, and every such plan the same infinite cost, so a front kept a
    dearer one of two plans alike but for it); it has no decimals left to round."""
    with np.errstate(over="ignore"):
        rounded = np.round(cost, COST_DECIMALS)
    return np.where(np.isinf(rounded) & np.isfinite(cost), cost, rounded)


def _refuse_computed(actions: list[Action], computed: set[str]) -> None:
    """A computed feature follows its inputs: no action or consequence may set it."""
    for i, action in enumerate(actions):
        if action.feature in computed:
            raise ActionError(f"actions[{i}].feature", f"{action.feature!r} is computed from other features")
        for name in action.consequences:
            if name in computed:
                raise ActionError(f"actions[{i}].consequences.{name}", f"{name!r} is computed from other features")


def _clock_stopped(progress: Progress) -> Progress:
    """``progress`` as if no time had passed: what the counting limits alone say."""
    return dataclasses.replace(progress, start_time=math.inf, last_improvement_time=math.inf)
