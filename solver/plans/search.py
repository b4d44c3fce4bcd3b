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
   fresh random genomes; genomes whose objective vectors repeat an elite's are dropped.

Every feasible plan seen is offered to an archive that keeps the non-dominated ones: the Pareto
front the answer is built from. The same seed gives the same front; only a time limit (the
user's, or a server's deadline) or a stop request (a cancelled call, a server shutting down)
ends the search before its last generation, and then it answers with the archive so far.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from counterplan.planning.actions import Action, ActionError, CostGraph
from counterplan.planning.calculator import ScoreCalculator
from counterplan.planning.distance import gower
from counterplan.planning.problem import CounterfactualProblem
from counterplan.planning.space import FloatMatrix
from counterplan.planning.threads import MAX_MODEL_THREADS
from counterplan.solver.plans.genome import decode
from counterplan.solver.plans.unroll import Unrolled, unroll

COST_DECIMALS = 4
DISTANCE_DECIMALS = 2
ARCHIVE_MAX = 2000


class PlanConfig(BaseModel):
    """The plan search's settings (the paper's released code's defaults)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    population: Annotated[int, Field(ge=4, le=20_000)] = 500
    mutant_share: Annotated[float, Field(ge=0.0, lt=1.0)] = 0.2
    """Share of each new population that is fresh random genomes (the rest: crossover children)."""
    bias: Annotated[float, Field(ge=0.5, le=1.0)] = 0.7
    """Chance that a child's key comes from its elite parent."""
    generations: Annotated[int, Field(ge=1, le=10_000)] = 150
    seed: Annotated[int, Field(ge=0, le=2**63 - 1)] = 0
    time_limit_seconds: Annotated[float, Field(gt=0.0, le=86_400.0)] | None = None
    """Stop after the generation that passes this (None: run every generation)."""
    model_threads: Annotated[int, Field(ge=1, le=MAX_MODEL_THREADS)] | None = 1
    """Native threads per model call (None: leave the pools as they are)."""


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
        on_generation: Callable[[int, FloatMatrix], None] | None = None,
    ) -> None:
        self.problem = problem
        self.actions = actions
        self.graph = graph
        self.config = config or PlanConfig()
        self.on_generation = on_generation
        self.calculator = ScoreCalculator(problem)
        self.generations_run = 0
        self.stopped_early = False
        """The search ended before its last generation (a time limit, a stop request, or a model
        that failed on batch after batch)."""
        self.failed_states = 0
        """Final states the model failed on (raised for, or answered NaN): never feasible."""
        self.first_failure: str | None = None
        space = problem.space
        relations = problem.relations
        self._settle = None if relations is None else relations.apply
        computed = set() if relations is None else {space.names[j] for j in relations.target_columns}
        _refuse_computed(actions, computed)
        touched = {a.feature for a in actions} | {name for a in actions for name in a.consequences}
        self._touched = np.array([space.index[name] for name in space.names if name in touched], dtype=np.intp)

    def evaluate(self, keys: FloatMatrix) -> Generation:
        """Decode, unroll and score ``keys``: one model call for every final state."""
        space = self.problem.space
        decoded = decode(keys, self.actions, space)
        played = unroll(decoded, self.actions, self.graph, space, space.original, settle=self._settle)
        final = played.final
        evaluation = self.calculator.calculate(final.copy())
        scores = evaluation.scores
        failed = [reason for reason in evaluation.failures if reason is not None]
        if failed:
            self.failed_states += len(failed)
            self.first_failure = self.first_failure or failed[0]
        missed = np.maximum(-scores[:, :3], 0.0).sum(axis=1)
        violation = np.asarray(missed + decoded.empty + played.violations, dtype=np.float64)
        cost = np.round(played.cost, COST_DECIMALS)
        distance = np.round(gower(final, space.original, space.nominal, space.domain_width), DISTANCE_DECIMALS)
        objectives = np.column_stack([cost, distance, played.changes[:, self._touched]]).astype(np.float64)
        return Generation(keys=keys, objectives=objectives, violation=violation, played=played)

    def run(self, stop: Callable[[], bool] | None = None) -> tuple[FloatMatrix, FloatMatrix]:
        """Every generation, or until ``config.time_limit_seconds`` or ``stop()`` (asked after
        each generation); returns the archive's genomes and objectives (the feasible front)."""
        from pymoo.util.nds.non_dominated_sorting import NonDominatedSorting  # noqa: PLC0415 - the plans extra

        sorting = NonDominatedSorting()
        config = self.config
        rng = np.random.default_rng(config.seed)
        width = 2 * len(self.actions)
        keys = rng.random((config.population, width))
        archive_keys = np.empty((0, width))
        archive_objectives = np.empty((0, 2 + self._touched.size))
        mutants = round(config.mutant_share * config.population)
        offspring = config.population - mutants
        limit = config.time_limit_seconds
        deadline = None if limit is None else time.monotonic() + limit
        for generation in range(config.generations):
            scored = self.evaluate(keys)
            self.generations_run = generation + 1
            feasible = scored.violation == 0
            archive_keys, archive_objectives = self._archive(
                sorting, archive_keys, archive_objectives, keys[feasible], scored.objectives[feasible]
            )
            if self.on_generation is not None:
                self.on_generation(generation, archive_objectives)
            if generation == config.generations - 1:
                break
            gave_up = self.calculator.gave_up is not None  # the model failed on batch after batch
            if gave_up or (deadline is not None and time.monotonic() >= deadline) or (stop is not None and stop()):
                self.stopped_early = True
                break
            pool = (
                np.flatnonzero(feasible)
                if feasible.any()
                else np.flatnonzero(scored.violation == scored.violation.min())
            )
            front = pool[sorting.do(scored.objectives[pool], only_non_dominated_front=True)]
            _, unique = np.unique(scored.objectives[front], axis=0, return_index=True)
            elites = front[np.sort(unique)]
            others = np.setdiff1d(np.arange(keys.shape[0]), elites)
            if others.size == 0:
                others = elites
            mothers = elites[rng.integers(elites.size, size=offspring)]
            fathers = others[rng.integers(others.size, size=offspring)]
            from_elite = rng.random((offspring, width)) < config.bias
            children = np.where(from_elite, keys[mothers], keys[fathers])
            keys = np.vstack([keys[elites], children, rng.random((mutants, width))])
        return archive_keys, archive_objectives

    @staticmethod
    def _archive(
        sorting: object, keys: FloatMatrix, objectives: FloatMatrix, new_keys: FloatMatrix, new_objectives: FloatMatrix
    ) -> tuple[FloatMatrix, FloatMatrix]:
        """The non-dominated plans of the archive and the new feasible ones, each objective vector once."""
        if new_keys.shape[0] == 0:
            return keys, objectives
        all_keys = np.vstack([keys, new_keys])
        all_objectives = np.vstack([objectives, new_objectives])
        _, unique = np.unique(all_objectives, axis=0, return_index=True)
        unique = np.sort(unique)
        all_keys, all_objectives = all_keys[unique], all_objectives[unique]
        front = sorting.do(all_objectives, only_non_dominated_front=True)  # type: ignore[attr-defined]
        front = np.sort(np.asarray(front, dtype=np.intp))[:ARCHIVE_MAX]
        return all_keys[front], all_objectives[front]


def _refuse_computed(actions: list[Action], computed: set[str]) -> None:
    """A computed feature follows its inputs: no action or consequence may set it."""
    for i, action in enumerate(actions):
        if action.feature in computed:
            raise ActionError(f"actions[{i}].feature", f"{action.feature!r} is computed from other features")
        for name in action.consequences:
            if name in computed:
                raise ActionError(f"actions[{i}].consequences.{name}", f"{name!r} is computed from other features")
