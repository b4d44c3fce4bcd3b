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

import numpy as np

from counterplan.planning.distance import gower
from counterplan.planning.score import HARD_LEVELS, best_first, best_row, better
from counterplan.solver.core.phase import PhaseBase, PhaseScope
from counterplan.solver.core.protocol import EncodedSpace, FloatMatrix
from counterplan.solver.core.scope import AnswerSet
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
        space = scope.space
        counters = phase_scope.counters
        candidates = searchable(space)
        relations = getattr(scope.problem, "relations", None)
        if relations is not None:  # computed features: whatever the swarm set there is overwritten
            candidates = np.setdiff1d(candidates, np.asarray(relations.target_columns, dtype=np.intp))
        if candidates.size == 0:
            scope.termination_reason = f"phase {scope.phase_index}: no feature the swarm may move"
            return
        full = SwarmPositions.of(space, candidates, config.box_ratio, config.snap_tolerance)
        top = candidates.size if config.top_features == "all" else config.top_features
        columns, ranking, scored = rank(
            space,
            full.columns,
            top,
            by=config.rank_by,
            problem=scope.problem,
            scorer=scope.scorer,
            box=full.box_values(),
        )
        if scored is not None and scope.offer(scored[0], scored[1], counters):
            scope.announce()
        positions = (
            full
            if columns.size == candidates.size
            else SwarmPositions.of(space, columns, config.box_ratio, config.snap_tolerance)
        )
        rng = scope.rng
        count = config.particles
        X = positions.uniform(count, rng)
        warm = [row for row in [scope.best_row, *scope.starts] if not np.array_equal(row, space.original)]
        if warm:
            seeds = positions.encode(np.vstack(warm[:count]))
            X[: seeds.shape[0]] = seeds
        scope.starts = []
        V = np.zeros_like(X)
        own_best = X.copy()
        own_rows = np.empty((count, space.n_features))
        own_scores = np.empty((count, scope.best_score.size))
        own_fitness: FloatMatrix | None = None
        coefficients = Coefficients(config.inertia, config.cognitive, config.social, config.diversity)
        archive = _Archive() if scope.answers > 1 and config.answers_from == "visited" else None
        iterations = 0
        widened = seen_valid = False
        reason = f"phase {scope.phase_index}: {config.iterations} iterations"
        while iterations < config.iterations:
            if (
                config.widen_when_infeasible
                and not widened
                and not seen_valid
                and iterations == max(config.iterations // 2, 1)
            ):
                positions, widened = positions.widened(), True
                X, V = positions.uniform(count, rng), np.zeros_like(X)  # the swarm spreads over the new box
            verdict = phase_scope.verdict()
            if verdict.done:
                reason = verdict.reason
                break
            rows = positions.decode(X)
            scores = scope.scorer.score(rows)  # one model call for the whole swarm
            fitness = self._fitness(rows, scores, space)
            improved = np.ones(count, dtype=bool) if own_fitness is None else better(fitness, own_fitness)
            own_best[improved] = X[improved]
            own_rows[improved] = rows[improved]
            own_scores[improved] = scores[improved]
            own_fitness = fitness.copy() if own_fitness is None else np.where(improved[:, None], fitness, own_fitness)
            iterations += 1
            seen_valid = seen_valid or bool((scores[:, :HARD_LEVELS] >= 0.0).all(axis=1).any())
            if archive is not None:
                archive.add(rows, scores)
            if scope.offer(rows, scores, counters):
                scope.announce()
            leader = own_best[best_row(own_fitness)]
            draws = rng.random((3, count, positions.dimensions))
            X, V = move(
                X,
                V,
                own_best=own_best,
                swarm_best=leader,
                draws=draws,
                coefficients=coefficients,
                box=(positions.low, positions.high),
                max_velocity=config.max_velocity,
                away_from=config.diversity_from,
            )
        scope.termination_reason = reason
        clusters = empty = 0
        if own_fitness is not None:
            order = best_first(own_scores)
            _, first = np.unique(own_rows[order], axis=0, return_index=True)
            scope.starts = [own_rows[order[i]].copy() for i in np.sort(first)[:STARTS_MAX].tolist()]
            final = scope.answer_set is not None and scope.answer_set.kind == "final"
            if not final:  # a proven set from an earlier exact phase stays
                scope.answer_set = None
            if scope.answers > 1 and not final:
                if archive is not None:
                    points_rows, points_scores = archive.rows()
                    points = positions.encode(points_rows) if points_rows.shape[0] else points_rows
                else:
                    points_rows, points_scores, points = own_rows, own_scores, own_best
                late = scope.wall_limit is not None and scope.time_spent() > scope.wall_limit
                if points_rows.shape[0]:
                    if late or scope.terminate_flag.is_set():  # out of time: the best rows, no clustering
                        labels = np.arange(points_rows.shape[0]) % scope.answers
                    else:
                        labels = kmeans(points, scope.answers, rng)
                    feasible = np.asarray((points_scores[:, :HARD_LEVELS] >= 0.0).all(axis=1), dtype=bool)
                    picks, empty = pick_per_cluster(labels, points_scores, feasible)
                    clusters = int(np.unique(labels).size)
                    scope.answer_set = AnswerSet(points_rows[picks].copy(), "picks") if picks else None
        names = getattr(space, "names", None)
        searched = [str(names[j]) for j in columns.tolist()[:NAMES_KEPT]] if names is not None else []
        statistics = SwarmStatistics(
            particles=count,
            iterations=iterations,
            searched=int(columns.size),
            searchable=int(candidates.size),
            ranking=ranking,
            searched_features=searched,
            objective=config.objective,
            widened=widened,
            answers_from=config.answers_from if scope.answers > 1 else "",
            clusters=clusters,
            empty_clusters=empty,
        )
        phase_scope.report("swarm", statistics)


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
        _, first = np.unique(rows, axis=0, return_index=True)
        rows, scores = rows[first], scores[first]
        order = best_first(scores)[:ARCHIVE_MAX]
        return rows[order], scores[order]
