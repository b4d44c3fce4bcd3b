"""The particle-swarm phase: MD-PSO (Shekhar et al.) as one phase of the solver.

Every iteration decodes the whole swarm into candidate rows (:mod:`counterplan.solver.swarm.positions`),
scores them in one model call, updates each particle's own best and the swarm's best, and moves
every particle (:mod:`counterplan.solver.swarm.velocity`). Each iteration is one step of the solve: the
solver's termination bounds it, every scored row is offered to the solve's best (so the
best-solution events fire as with any engine), and the phase's own ``termination`` can end it
early.

What guides the particles (``objective``): the bendable score, compared level by level (the
default), or the paper's scalar l1 + l2 + l3: the goal's hinge (minus hard level 0), the mean
Gower distance over all features, and the number of changed features, plus each broken rule.
The solve's answer is the best bendable score found either way.

A warm start: when an earlier phase found a better row than the original, the first particle
starts there. When no particle is valid by half the iterations, the box opens to the whole domain
(``widen_when_infeasible``). When the phase ends, its particles' best rows (best first, distinct) become the
starting points of a following local-search phase's walkers; and when several answers are
asked, k-means picks them (:mod:`counterplan.solver.swarm.clusters`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from counterplan.planning.distance import gower
from counterplan.planning.distinct_rows import distinct_rows, first_of_each
from counterplan.planning.score import HARD_LEVELS, best_first, best_row, better
from counterplan.solver.core.phase import PhaseBase, PhaseScope
from counterplan.solver.core.protocol import EncodedSpace, FloatMatrix
from counterplan.solver.core.scope import AnswerSet, SolverScope
from counterplan.solver.swarm.clusters import kmeans, pick_per_cluster
from counterplan.solver.swarm.config import SwarmPhaseConfig
from counterplan.solver.swarm.positions import SwarmPositions, searchable
from counterplan.solver.swarm.ranking import rank
from counterplan.solver.swarm.report import SwarmStatistics
from counterplan.solver.swarm.velocity import Coefficients, move

ARCHIVE_MAX = 2048
"""Distinct valid rows kept for choosing several answers (the best-scored, when more were seen)."""
STARTS_MAX = 16
"""Distinct particle bests handed to a following local search as its walkers' starts."""
NAMES_KEPT = 50
"""The statistics name at most this many searched features."""


def paper_objective(rows: FloatMatrix, scores: FloatMatrix, space: EncodedSpace) -> FloatMatrix:
    """The paper's l1 + l2 + l3 per row (lower is better), plus one per broken rule.

    l1: the goal's hinge, minus hard level 0 (for a class goal, the shortfall of the target
    probability below the needed confidence); l2: mean Gower distance over all features (numbers
    by their domain's width, categories 1 when changed); l3: the number of changed features.
    """
    original = space.original.reshape(1, -1)
    span = space.upper - space.lower
    width = getattr(space, "domain_width", np.where(span > 0, span, 1.0))
    l1 = -scores[:, 0]
    l2 = gower(rows, original, space.nominal, width)
    l3 = (rows != original).sum(axis=1)
    return np.asarray(l1 + l2 + l3 - scores[:, 1], dtype=np.float64)


class SwarmPhase(PhaseBase[SwarmPhaseConfig]):
    """Runs one particle-swarm phase of a solve."""

    def _fitness(self, rows: FloatMatrix, scores: FloatMatrix, space: EncodedSpace) -> FloatMatrix:
        """What guides the swarm, higher better, as rows comparable level by level."""
        if self.config.objective == "paper":
            return -paper_objective(rows, scores, space).reshape(-1, 1)
        return scores

    def solve(self, phase_scope: PhaseScope) -> None:
        """Fly the swarm until its iterations, the phase's or the solver's termination end it."""
        config = self.config
        scope = phase_scope.solver_scope
        candidates = searchable(scope.space)
        relations = getattr(scope.problem, "relations", None)
        if relations is not None:  # computed features: whatever the swarm set there is overwritten
            candidates = np.setdiff1d(candidates, np.asarray(relations.target_columns, dtype=np.intp))
        if candidates.size == 0:
            scope.termination_reason = f"phase {scope.phase_index}: no feature the swarm may move"
            return
        positions, columns, ranking = self._positions(phase_scope, candidates)
        flight = _Flight.launch(scope, positions, config.particles, config.answers_from)
        scope.termination_reason = self._fly(phase_scope, flight)
        clusters, empty = self._hand_over(scope, flight) if flight.own_fitness is not None else (0, 0)
        names = getattr(scope.space, "names", None)
        searched = [str(names[j]) for j in columns.tolist()[:NAMES_KEPT]] if names is not None else []
        statistics = SwarmStatistics(
            particles=config.particles,
            iterations=flight.iterations,
            searched=int(columns.size),
            searchable=int(candidates.size),
            ranking=ranking,
            searched_features=searched,
            objective=config.objective,
            widened=flight.widened,
            answers_from=config.answers_from if scope.answers > 1 else "",
            clusters=clusters,
            empty_clusters=empty,
        )
        phase_scope.report("swarm", statistics)

    def _positions(
        self, phase_scope: PhaseScope, candidates: npt.NDArray[np.intp]
    ) -> tuple[SwarmPositions, npt.NDArray[np.intp], str]:
        """The positions of the ``top_features`` most relevant of ``candidates`` (ranking them may
        score rows: they are offered), the searched columns and how they were ranked."""
        config = self.config
        scope = phase_scope.solver_scope
        most = getattr(scope.problem, "max_changed_features", None)
        full = SwarmPositions.of(scope.space, candidates, config.box_ratio, config.snap_tolerance, most)
        top = candidates.size if config.top_features == "all" else config.top_features
        columns, ranking, scored = rank(
            scope.space,
            full.columns,
            top,
            by=config.rank_by,
            problem=scope.problem,
            scorer=scope.scorer,
            box=full.box_values(),
        )
        if scored is not None and scope.offer(scored[0], scored[1], phase_scope.counters):
            scope.announce()
        if columns.size == candidates.size:
            return full, columns, ranking
        positions = SwarmPositions.of(scope.space, columns, config.box_ratio, config.snap_tolerance, most)
        return positions, columns, ranking

    def _fly(self, phase_scope: PhaseScope, flight: _Flight) -> str:
        """Iterate, one model call each, until the iterations or a termination end it; why it ended."""
        config = self.config
        scope = phase_scope.solver_scope
        coefficients = Coefficients(config.inertia, config.cognitive, config.social, config.diversity)
        reason = f"phase {scope.phase_index}: {config.iterations} iterations"
        while flight.iterations < config.iterations:
            if (
                config.widen_when_infeasible
                and not flight.widened
                and not flight.seen_valid
                and flight.iterations == max(config.iterations // 2, 1)
            ):
                flight.widen(scope.rng)  # the swarm spreads over the whole domain
            verdict = phase_scope.verdict()
            if verdict.done:
                return verdict.reason
            rows = flight.positions.decode(flight.X)
            scores = scope.scorer.score(rows)  # one model call for the whole swarm
            flight.take(rows, scores, self._fitness(rows, scores, scope.space))
            if scope.offer(rows, scores, phase_scope.counters):
                scope.announce()
            assert flight.own_fitness is not None
            leader = flight.own_best[best_row(flight.own_fitness)]
            draws = scope.rng.random((3, flight.X.shape[0], flight.positions.dimensions))
            flight.X, flight.V = move(
                flight.X,
                flight.V,
                own_best=flight.own_best,
                swarm_best=leader,
                draws=draws,
                coefficients=coefficients,
                box=(flight.positions.low, flight.positions.high),
                max_velocity=config.max_velocity,
                away_from=config.diversity_from,
            )
        return reason

    def _hand_over(self, scope: SolverScope, flight: _Flight) -> tuple[int, int]:
        """The particles' best rows become the next phase's starts; with several answers asked,
        k-means picks one per cluster (unless a proven set stays). Returns the clusters and
        how many held no valid particle."""
        order = best_first(flight.own_scores)
        first = first_of_each(flight.own_rows[order])
        scope.starts = [flight.own_rows[order[i]].copy() for i in first[:STARTS_MAX].tolist()]
        final = scope.answer_set is not None and scope.answer_set.kind == "final"
        if not final:  # a proven set from an earlier exact phase stays
            scope.answer_set = None
        if scope.answers == 1 or final:
            return 0, 0
        if flight.archive is not None:
            points_rows, points_scores = flight.archive.rows()
            points = flight.positions.encode(points_rows) if points_rows.shape[0] else points_rows
        else:
            points_rows, points_scores, points = flight.own_rows, flight.own_scores, flight.own_best
        if not points_rows.shape[0]:
            return 0, 0
        if scope.out_of_time() or scope.terminate_flag.is_set():  # out of time: the best rows, no clustering
            labels = np.arange(points_rows.shape[0]) % scope.answers
        else:
            labels = kmeans(points, scope.answers, scope.rng)
        feasible = np.asarray((points_scores[:, :HARD_LEVELS] >= 0.0).all(axis=1), dtype=bool)
        picks, empty = pick_per_cluster(labels, points_scores, feasible)
        scope.answer_set = AnswerSet(points_rows[picks].copy(), "picks") if picks else None
        return int(np.unique(labels).size), empty


@dataclass
class _Flight:
    """The swarm in flight: positions and velocities, each particle's best, the visited archive."""

    positions: SwarmPositions
    X: FloatMatrix
    V: FloatMatrix
    own_best: FloatMatrix
    own_rows: FloatMatrix
    own_scores: FloatMatrix
    archive: _Archive | None
    own_fitness: FloatMatrix | None = None
    iterations: int = 0
    widened: bool = False
    seen_valid: bool = False

    @classmethod
    def launch(cls, scope: SolverScope, positions: SwarmPositions, count: int, answers_from: str) -> _Flight:
        """``count`` particles spread over the box, the best rows found so far among them."""
        space = scope.space
        X = positions.uniform(count, scope.rng)
        warm = [row for row in [scope.best_row, *scope.starts] if not np.array_equal(row, space.original)]
        if warm:
            seeds = positions.encode(np.vstack(warm[:count]))
            X[: seeds.shape[0]] = seeds
        scope.starts = []
        return cls(
            positions=positions,
            X=X,
            V=np.zeros_like(X),
            own_best=X.copy(),
            own_rows=np.empty((count, space.n_features)),
            own_scores=np.empty((count, scope.best_score.size)),
            archive=_Archive() if scope.answers > 1 and answers_from == "visited" else None,
        )

    def widen(self, rng: np.random.Generator) -> None:
        """Open the box to the whole domain and scatter the particles over it afresh."""
        self.positions, self.widened = self.positions.widened(), True
        self.X, self.V = self.positions.uniform(self.X.shape[0], rng), np.zeros_like(self.X)

    def take(self, rows: FloatMatrix, scores: FloatMatrix, fitness: FloatMatrix) -> None:
        """One iteration's scored rows: each particle's best, whether any was valid, the archive."""
        improved = np.ones(rows.shape[0], dtype=bool) if self.own_fitness is None else better(fitness, self.own_fitness)
        self.own_best[improved] = self.X[improved]
        self.own_rows[improved] = rows[improved]
        self.own_scores[improved] = scores[improved]
        self.own_fitness = (
            fitness.copy() if self.own_fitness is None else np.where(improved[:, None], fitness, self.own_fitness)
        )
        self.iterations += 1
        self.seen_valid = self.seen_valid or bool((scores[:, :HARD_LEVELS] >= 0.0).all(axis=1).any())
        if self.archive is not None:
            self.archive.add(rows, scores)


class _Archive:
    """The distinct valid rows the swarm visited, with their scores, at most :data:`ARCHIVE_MAX`."""

    def __init__(self) -> None:
        self._rows: list[FloatMatrix] = []
        self._scores: list[FloatMatrix] = []
        self._held = 0

    def add(self, rows: FloatMatrix, scores: FloatMatrix) -> None:
        """Keep the valid ones of a scored batch."""
        valid = (scores[:, :HARD_LEVELS] >= 0.0).all(axis=1)
        if valid.any():
            self._rows.append(rows[valid].copy())
            self._scores.append(scores[valid].copy())
            self._held += int(valid.sum())
            if self._held > 2 * ARCHIVE_MAX:
                self._rows, self._scores = self._compact()

    def _compact(self) -> tuple[list[FloatMatrix], list[FloatMatrix]]:
        rows, scores = self.rows()
        self._held = rows.shape[0]
        return [rows], [scores]

    def rows(self) -> tuple[FloatMatrix, FloatMatrix]:
        """Each valid row once (its first score), the best :data:`ARCHIVE_MAX`, best first."""
        if not self._rows:
            return np.empty((0, 0)), np.empty((0, 0))
        rows, scores = np.vstack(self._rows), np.vstack(self._scores)
        first, _ = distinct_rows(rows)
        rows, scores = rows[first], scores[first]
        order = best_first(scores)[:ARCHIVE_MAX]
        return rows[order], scores[order]
