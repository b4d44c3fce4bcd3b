"""The boundary-polish phase: shave the best counterfactual down to the decision boundary.

Each iteration is one step of the bisection of :class:`~counterplan.solver.core.boundary.Bisection`
(every changed number on a grid towards its bracket, all of them back together, each reverted,
in one call) and keeps the best row. It stops after ``max_iterations`` or at the first
iteration that finds nothing better.

With ``starts`` above 1, the same calls also refine the best feasible row of each of the next
``starts - 1`` distinct sets of changed features the solve has found
(:class:`~counterplan.solver.core.boundary.Refiner`): a route the search left coarse, or one
carrying a needless change, can shave down below the polished best. Those rows ride in the
best's calls while it still improves; after that, iterations go on for them alone, up to
``max_iterations``.

Then, where the distance is a per-feature sum (:func:`~counterplan.solver.core.trade.pricer_for`),
the polish reaches what a bisection cannot (:mod:`counterplan.solver.core.trade`):

* **combinations** (``combos``): the original's single-feature rows, then 2-4 of them at once
  where their goal gains add up; a win is bisected (a model without split values: after the
  trades, then trades again with the single rows' fronts as buys);
* **trades** (``trade_rounds``): one changed feature given back while another is bought, up to
  ``trade_rows`` rows a round; each winning round is bisected again, and the trades stop at the
  first round without a win, or at a row the solve traded from already. With ``starts`` above 1,
  each other route is traded and bisected the same way (a route one give-back from the optimum,
  as the demo's 2-change answer is).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from counterplan.planning.score import HARD_LEVELS, best_row, is_better, is_feasible
from counterplan.planning.scored_rows import row_index
from counterplan.solver.core.boundary import Bisection, Refiner
from counterplan.solver.core.budget import MAX_CELLS_PER_STEP
from counterplan.solver.core.phase import PhaseBase, PhaseScope
from counterplan.solver.core.pool import best_per_change_set
from counterplan.solver.core.protocol import FloatMatrix, score_batches
from counterplan.solver.core.scope import Progress, SolverScope, count_step
from counterplan.solver.core.trade import (
    TradeValues,
    beam_candidates,
    combo_candidates,
    extend_candidates,
    front_values,
    pair_candidates,
    pairs_key,
    pareto_front,
    pricer_for,
    recreate_candidates,
    single_rows,
    trade_candidates,
    undominated,
    unique_rows,
)
from counterplan.solver.local.config import BoundaryPolishPhaseConfig
from counterplan.solver.local.scan import most_efficient

PAIR_MOVES_PER_ROW = 8
"""The trees' pairs read per pair row kept: the most gain first, before the cost filter and the
ranking by gain per unit of distance."""


class BoundaryPolishPhase(PhaseBase[BoundaryPolishPhaseConfig]):
    """Runs one boundary polish."""

    def phase_started(self, phase_scope: PhaseScope) -> None:
        """Rows an earlier phase set aside (the scan's split chain) compete for the best first."""
        phase_scope.solver_scope.offer_deferred()

    def solve(self, phase_scope: PhaseScope) -> None:
        """Iterate until an iteration improves nothing, the limit, or the solver's termination;
        then the combinations and trades (see the module).

        With ``starts`` above 1, the other routes' refinement (:class:`~counterplan.solver.core.boundary.Refiner`)
        shares each iteration's model call; its rows are offered at the end.
        """
        scope = phase_scope.solver_scope
        routes = self._routes(scope)
        self._bisect_with_routes(phase_scope, routes)
        if routes is not None and scope.offer(routes.rows, routes.scores, phase_scope.counters, count=False):
            scope.announce()
        pricer = pricer_for(scope.problem) if self.config.trade_rounds or self.config.combos else None
        if pricer is None or not is_feasible(scope.best_score):
            return
        tree = bool(scope.space.split_values)  # a linear model's gains add up: trades reach its optimum
        memo = TradeValues(scope.space, pricer, self.config.trade_grid_size)
        traded: set[bytes] = set()
        buys, other = self._combos(phase_scope, memo) if self.config.combos and tree else (None, None)
        self._trade(phase_scope, memo, scope.best_row, scope.best_score, buys, traded=traded)
        others = [] if other is None else [other]
        if routes is not None:
            others += list(zip(routes.rows, routes.scores, strict=True))
        for start, start_score in others:
            if is_feasible(start_score) and not (start == scope.best_row).all():
                row, score = self._bisect_from(phase_scope, start, start_score)
                self._trade(phase_scope, memo, row, score, buys, traded=traded)
        if self.config.recreate_steps and tree:  # a linear model's trades of marginal rates reach its optimum
            self._recreate(phase_scope, memo, buys, traded)
        if self.config.combos and not tree:
            self._linear_front(phase_scope, memo)

    def _linear_front(self, phase_scope: PhaseScope, memo: TradeValues) -> None:
        """A model without split values, after its trades: the combinations and trades again with
        the single-feature rows' fronts as buys. Its trades drew their buys at random from the
        thousands of pairs around the best, and a best far from the boundary (several features at
        once, some at their bounds) missed the trades of marginal rates that reach its optimum
        (heloc's logistic regression at 0.9 for its 15 least likely rows: 7 above 2%, to 12.7%;
        with the fronts 3, to 8.7%). Done after the trades, so no answer is farther than before."""
        scope = phase_scope.solver_scope
        if phase_scope.must_stop() or not is_feasible(scope.best_score):
            return
        buys, other = self._combos(phase_scope, memo)
        traded: set[bytes] = set()
        self._trade(phase_scope, memo, scope.best_row, scope.best_score, buys, traded=traded)
        if other is not None and is_feasible(other[1]) and not (other[0] == scope.best_row).all():
            row, score = self._bisect_from(phase_scope, *other)
            self._trade(phase_scope, memo, row, score, buys, traded=traded)

    def _recreate(
        self, phase_scope: PhaseScope, memo: TradeValues, buys: dict[int, FloatMatrix] | None, traded: set[bytes]
    ) -> None:
        """Ruin and recreate (``recreate_steps``): each changed feature of the best carrying at
        least ``recreate_share`` of its distance, the priciest first, is given back and the row
        rebuilt by the greedy rule of the feature scan (:func:`~counterplan.solver.local.scan.most_efficient`)
        until a step finds a feasible row nearer than the best (or its going on past a farther one,
        ``recreate_onward``, ends), the round's chains in step (:meth:`_rebuild`); then the best
        feasible row each met is bisected and traded, in the round's order."""
        scope = phase_scope.solver_scope
        space, pricer = scope.space, memo.pricer
        tried: set[tuple[int, float]] = set()
        for _ in range(self.config.recreate_rounds):
            best, distance = scope.best_row.copy(), -float(scope.best_score[3])
            changed = np.flatnonzero((best != space.original) & space.mutable)
            if changed.size == 0 or distance <= 0.0 or not is_feasible(scope.best_score):
                return
            costs = pricer.cost(best[changed], changed)
            order = np.argsort(-costs, kind="stable")
            ruined = [
                (int(k), float(c))
                for k, c in zip(changed[order].tolist(), costs[order].tolist(), strict=True)
                if c >= self.config.recreate_share * distance and (int(k), float(c)) not in tried
            ]
            ruined = ruined[: self.config.recreate_features]
            if not ruined:
                return
            chains = []
            for k, cost in ruined:
                tried.add((k, cost))
                row = best.copy()
                row[k] = space.original[k]
                chains.append(_Chain(row, {k: cost}))
            self._rebuild(phase_scope, memo, chains)
            found = [chain.found for chain in chains if chain.found is not None]
            for row, score in self._bisect_together(phase_scope, found):
                self._trade(phase_scope, memo, row, score, buys, traded=traded)
            if distance <= -float(scope.best_score[3]):
                return  # no round after one that found nothing better

    def _rebuild(self, phase_scope: PhaseScope, memo: TradeValues, chains: list[_Chain]) -> None:
        """The greedy chains of :meth:`_recreate`, in step: each step's rows of every chain still
        going are scored in one model call (a round's chains took a call a step each, one chain
        after the other). Each chain keeps the best feasible row it met in ``found``; a chain
        leaves the shared step at a feasible row nearer than the best, when no row gains, when no
        row is left to score, or when its going on past a farther feasible step ends
        (:meth:`_Chain.step`, ``recreate_onward``)."""
        scope = phase_scope.solver_scope
        going = list(chains)
        for _ in range(self.config.recreate_steps):
            if phase_scope.must_stop() or not going:
                return
            best_distance = -float(scope.best_score[3])
            parts = [(chain, self._chain_rows(scope, memo, chain, best_distance)) for chain in going]
            parts = [(chain, X) for chain, X in parts if X.shape[0]]
            if not parts:
                return
            all_scores, improved = _score(phase_scope, np.vstack([X for _, X in parts]))
            if improved:
                scope.announce()
            ends = np.cumsum([X.shape[0] for _, X in parts])
            onward = self.config.recreate_onward
            going = [
                chain
                for (chain, X), scores in zip(parts, np.split(all_scores, ends[:-1]), strict=True)
                if chain.step(X, scores, best_distance, onward)
            ]

    def _chain_rows(self, scope: SolverScope, memo: TradeValues, chain: _Chain, best_distance: float) -> FloatMatrix:
        """A recreate chain's next rows (:func:`~counterplan.solver.core.trade.recreate_candidates`),
        its row itself first before its first call; past a farther feasible step only rows
        predicted nearer than the best (no slack)."""
        X, _ = recreate_candidates(
            chain.row,
            None,
            best_distance,
            scope.space,
            memo.pricer,
            grid_size=self.config.trade_grid_size,
            caps=chain.caps,
            max_rows=self.config.recreate_rows,
            slack=self.config.recreate_slack if chain.left is None else 0.0,
            memo=memo,
        )
        return X if chain.base_score is not None else np.vstack([chain.row.reshape(1, -1), X])

    @staticmethod
    def _undominated(scope: SolverScope, memo: TradeValues, X: FloatMatrix, base: FloatMatrix) -> FloatMatrix:
        """A trade round's rows ``X`` around ``base`` less those a nearer row of them beats for sure
        (:func:`~counterplan.solver.core.trade.undominated`), where nothing but the model and the
        distance tells them apart: no pool (every feasible row wanted), plausibility model, trust
        region or computed features. The round's winner stays what it was, with fewer rows to the
        model (29% of heloc's). A rebuild step's rows are one per cell already, but for a few:
        finding those costs more than scoring them."""
        problem = scope.problem
        if scope.pool is not None or problem is None:
            return X
        if problem.plausibility is not None or problem.trust_region is not None or problem.relations is not None:
            return X
        return undominated(scope.space, memo.pricer, X, base, memo.split_cells)

    def _bisect_with_routes(self, phase_scope: PhaseScope, routes: Refiner | None) -> None:
        """The best's bisection, the other routes' refinement riding in its calls."""
        scope = phase_scope.solver_scope
        counters = phase_scope.counters
        bisection = Bisection(scope.space, self.config.grid_size)
        n = scope.space.n_features
        polishing = True
        for _ in range(self.config.max_iterations):
            if phase_scope.must_stop():
                break
            X, owners = bisection.candidates(scope.best_row) if polishing else (np.empty((0, n)), None)
            polishing = X.shape[0] > 0
            others = routes.candidates() if routes is not None and routes.active else np.empty((0, n))
            if not polishing and others.shape[0] == 0:
                break
            all_scores = score_batches(scope.scorer, np.vstack([X, others]))
            count_step(counters, X.shape[0] + others.shape[0])
            scores = all_scores[: X.shape[0]]
            if others.shape[0] and routes is not None:
                routes.update(all_scores[X.shape[0] :])
            if polishing and owners is not None:
                polishing = _take(scope, counters, bisection, X=X, owners=owners, scores=scores)

    def _combos(
        self, phase_scope: PhaseScope, memo: TradeValues
    ) -> tuple[dict[int, FloatMatrix] | None, tuple[FloatMatrix, FloatMatrix] | None]:
        """Score the original's single-feature rows, then the cheapest combinations of 2-4 of
        them predicted to reach the goal, the beam's pairs (:func:`~counterplan.solver.core.trade.beam_candidates`)
        and its further levels; bisect the best when it improved. Each feature's gain/cost front
        (the buys a trade tries first), and the best feasible combination of another change set
        than the best's: a route polished after the best (the demo's 2-change optimum is one)."""
        scope = phase_scope.solver_scope
        space, pricer = scope.space, memo.pricer
        X, owner = single_rows(space, pricer, self.config.trade_grid_size, memo)
        if X.shape[0] == 0 or X.size > MAX_CELLS_PER_STEP or phase_scope.must_stop():
            return None, None  # too many to score in a step (a problem of thousands of features): none
        scores, improved = _score_known(phase_scope, np.vstack([space.original.reshape(1, -1), X]), scope.scanned)
        origin, scores = scores[0], scores[1:]
        singles = _Singles(X, owner, pricer.cost(X[np.arange(owner.size), owner], owner), scores[:, 0] - origin[0])
        other = None
        if origin[0] < 0.0 and not phase_scope.must_stop():
            C = combo_candidates(
                space.original,
                X,
                owner,
                singles.cost,
                singles.gain,
                deficit=-float(origin[0]),
                best_distance=-float(scope.best_score[3]),
                max_rows=self.config.combo_rows,
            )
            beam = (
                bool(self.config.beam_width)
                and not _predicted_to_reach(C, singles, space.original, -float(origin[0]))
                and not phase_scope.must_stop()  # the beam's pairs cost a second on a 300-tree forest
            )
            if beam:
                B = beam_candidates(
                    space.original,
                    X,
                    owner,
                    singles.cost,
                    singles.gain,
                    best_distance=-float(scope.best_score[3]),
                    width=self.config.beam_width,
                    max_rows=self.config.combo_rows,
                )
                C = unique_rows(np.vstack([C, B]), space.original)
            if self.config.pair_rows and scope.problem is not None and not phase_scope.must_stop():
                moves = scope.problem.pair_moves(PAIR_MOVES_PER_ROW * self.config.pair_rows, space.split_values)
                P = pair_candidates(
                    space.original,
                    moves,
                    pricer,
                    best_distance=-float(scope.best_score[3]),
                    max_rows=self.config.pair_rows,
                )
                C = unique_rows(np.vstack([C, P]), space.original) if P.shape[0] else C
            if C.shape[0]:
                combined, won = _score(phase_scope, C)
                other = _other_route(C, combined, scope.best_row, space.original)
                found, deeper = self._beam_levels(phase_scope, singles, origin, C, combined)
                improved = improved or won or deeper
                if found is not None and (other is None or is_better(found[1], other[1])):
                    other = found
        if improved:
            scope.announce()
            self._bisect_from(phase_scope, scope.best_row, scope.best_score)
        return front_values(X, owner, pareto_front(owner, singles.cost, singles.gain)), other

    def _beam_levels(
        self, phase_scope: PhaseScope, singles: _Singles, origin: FloatMatrix, level: FloatMatrix, scores: FloatMatrix
    ) -> tuple[tuple[FloatMatrix, FloatMatrix] | None, bool]:
        """The beam's further levels: its ``beam_keep`` rows nearest the goal, one more feature
        each, up to ``beam_depth`` features. The best feasible row of another change set than the
        best's, and whether the best improved."""
        scope = phase_scope.solver_scope
        other = None
        improved = False
        for _ in range(self.config.beam_depth - 2):
            keep = _beam_rows(scores, self.config.beam_keep)
            if keep.size == 0 or phase_scope.must_stop():
                break
            level = extend_candidates(
                scope.space.original,
                level[keep],
                -scores[keep, 3],
                scores[keep, 0] - origin[0],
                singles.X,
                singles.owner,
                singles.cost,
                singles.gain,
                best_distance=-float(scope.best_score[3]),
                max_rows=self.config.combo_rows,
            )
            if level.shape[0] == 0:
                break
            scores, won = _score(phase_scope, level)
            improved = improved or won
            found = _other_route(level, scores, scope.best_row, scope.space.original)
            if found is not None and (other is None or is_better(found[1], other[1])):
                other = found
        return other, improved

    def _trade(
        self,
        phase_scope: PhaseScope,
        memo: TradeValues,
        row: FloatMatrix,
        score: FloatMatrix,
        buys: dict[int, FloatMatrix] | None,
        *,
        traded: set[bytes],
    ) -> None:
        """Trade rounds from ``row``: each round's winner, when better than ``row``, is bisected
        and traded from again; the first round without a win ends them. Every scored row is
        offered to the solve (the best, the pool).

        ``traded`` holds the rows (their bytes) this solve has traded from: a round from one of
        them again would build much the same rows the memory of scored rows already knows (a
        rebuilt row bisects back to the best, or to a route traded before: 20 of heloc GB's 71
        trades), and the trades end there."""
        scope = phase_scope.solver_scope
        for _ in range(self.config.trade_rounds):
            if phase_scope.must_stop() or not is_feasible(score):
                return
            key = row.tobytes()
            if key in traded:
                return
            traded.add(key)
            X = trade_candidates(
                row,
                -float(score[3]),
                scope.space,
                memo.pricer,
                grid_size=self.config.trade_grid_size,
                max_rows=self.config.trade_rows,
                rng=scope.rng,
                buys=buys,
                memo=memo,
            )
            if X.shape[0] == 0:
                return
            X = self._undominated(scope, memo, X, row)
            scores, improved = _score(phase_scope, X)
            if improved:
                scope.announce()
            winner = best_row(scores)
            if not is_better(scores[winner], score):
                return
            row, score = self._bisect_from(phase_scope, X[winner].copy(), scores[winner].copy())

    def _bisect_from(
        self, phase_scope: PhaseScope, row: FloatMatrix, score: FloatMatrix
    ) -> tuple[FloatMatrix, FloatMatrix]:
        """The bisection of one row (the best, or another route) until an iteration finds
        nothing better; its rows are offered to the solve. The row and score it ended at."""
        return self._bisect_together(phase_scope, [(row, score)])[0]

    def _bisect_together(
        self, phase_scope: PhaseScope, starts: list[tuple[FloatMatrix, FloatMatrix]]
    ) -> list[tuple[FloatMatrix, FloatMatrix]]:
        """The bisections of several rows (a recreate round's rebuilt rows) in step: each
        iteration's rows of every bisection still going are one model call, each counted as its
        own step. A bisection ends when an iteration finds nothing better than its row; its
        rows are offered to the solve. Each row and score it ended at, in order: the same as
        bisecting one row after the other (a bisection looks at its own row and scores only)."""
        scope = phase_scope.solver_scope
        counters = phase_scope.counters
        bisections = [Bisection(scope.space, self.config.grid_size) for _ in starts]
        ended = list(starts)
        going = list(range(len(starts)))
        for _ in range(self.config.max_iterations):
            if phase_scope.must_stop() or not going:
                break
            parts = [(i, *bisections[i].candidates(ended[i][0])) for i in going]
            parts = [(i, X, owners) for i, X, owners in parts if X.shape[0]]
            if not parts:
                break
            X_all = np.vstack([X for _, X, _ in parts])
            all_scores = score_batches(scope.scorer, X_all)
            for _, X, _ in parts:
                count_step(counters, X.shape[0])
            if scope.offer(X_all, all_scores, counters, count=False):
                scope.announce()
            going = []
            ends = np.cumsum([X.shape[0] for _, X, _ in parts])
            for (i, X, owners), scores in zip(parts, np.split(all_scores, ends[:-1]), strict=True):
                winner = best_row(scores)
                if is_better(scores[winner], ended[i][1]):
                    bisections[i].moved(ended[i][0], X, owners, winner)
                    ended[i] = (X[winner].copy(), scores[winner].copy())
                    going.append(i)
        return ended

    def _routes(self, scope: SolverScope) -> Refiner | None:
        """A refiner of the best row of each of the next ``starts - 1`` change sets found feasible."""
        if self.config.starts < 2 or not scope.pool:
            return None
        rows, scores = scope.pool.rows()
        chosen = best_per_change_set(rows, scores, scope.space.original, self.config.starts, per_set=1)
        rows, scores = rows[chosen], scores[chosen]
        others = ~(rows == scope.best_row).all(axis=1)
        if not others.any():
            return None
        return Refiner(rows[others], scores[others], scope.space, max(self.config.grid_size // 4, 2))


@dataclass
class _Singles:
    """The original's single-feature rows: each changes feature ``owner`` to its value in ``X``,
    at distance ``cost``, with goal gain ``gain`` over the original."""

    X: FloatMatrix
    owner: np.ndarray
    cost: FloatMatrix
    gain: FloatMatrix


@dataclass
class _Chain:
    """One ruin-and-recreate chain (:meth:`BoundaryPolishPhase._rebuild`): its row, the caps of its
    given-back feature, the row's score (None before its first call), the best feasible row it met
    and the steps it has left past a feasible step no nearer than the best (None: none yet)."""

    row: FloatMatrix
    caps: dict[int, float]
    base_score: FloatMatrix | None = None
    found: tuple[FloatMatrix, FloatMatrix] | None = None
    left: int | None = None

    def step(self, X: FloatMatrix, scores: FloatMatrix, best_distance: float, onward: int) -> bool:
        """Take a scored step (``X``, ``scores``: the rows around ``row``, the row itself first
        before its first call; ``best_distance``: the best's distance before the step). Whether
        the chain goes on.

        A step whose best feasible row is nearer than the best ends the chain. When it is farther,
        the row is kept (should nothing better follow) and the chain goes on for up to ``onward``
        more steps from the step's most efficient row short of the goal, scoring only rows
        predicted nearer than the best, while that row's rate of gain could still reach the goal
        nearer than the best (:func:`_hopeless`): past a farther feasible step the optimum may add
        nearly free threshold crossings of large-MAD features and shave the expensive change.
        heloc's forest row 3374: ended at its first feasible step, the chain bought
        NumBank2NatlTradesWHighUtilization for 1 MAD (+3.8%); going on, it buys one unit of each
        of AverageMInFile, MSinceMostRecentDelq and PercentTradesWBalance (about 0.06 MAD each)
        and one of NetFractionRevolvingBurden, and ExternalRiskEstimate 77 instead of 80: the
        proven optimum. Without a feasible row the chain steps to the most efficient row, unless
        none gains."""
        if self.base_score is None:
            self.base_score, X, scores = scores[0], X[1:], scores[1:]
        top, pick = _feasible_and_next(scores, self.base_score)
        if top is not None:
            self.found = _better_of(self.found, X[top], scores[top])
            if -float(scores[top, 3]) < best_distance:
                return False
            self.left = onward if self.left is None else self.left
        if self.left is not None:
            if self.left == 0 or pick is None or _hopeless(scores[pick], self.base_score, best_distance):
                return False
            self.left -= 1
        if pick is None:
            return False
        self.row, self.base_score = X[pick].copy(), scores[pick].copy()
        return True


def _score(phase_scope: PhaseScope, X: FloatMatrix) -> tuple[FloatMatrix, bool]:
    """``X`` scored in one step and offered to the solve (the best, the pool): the scores, and
    whether the best moved."""
    scope = phase_scope.solver_scope
    scores = score_batches(scope.scorer, X)
    count_step(phase_scope.counters, X.shape[0])
    return scores, scope.offer(X, scores, phase_scope.counters, count=False)


def _feasible_and_next(scores: FloatMatrix, base_score: FloatMatrix) -> tuple[int | None, int | None]:
    """A rebuild step's best feasible row and its most efficient row short of the goal (where the
    chain goes next, :func:`~counterplan.solver.local.scan.most_efficient`), by index; None where
    it has none."""
    reached = (scores[:, :HARD_LEVELS] >= 0.0).all(axis=1)
    feasible, short = np.flatnonzero(reached), np.flatnonzero(~reached)
    top = int(feasible[best_row(scores[feasible])]) if feasible.size else None
    pick = most_efficient(scores[short], base_score)
    return top, None if pick is None else int(short[pick])


def _hopeless(score: FloatMatrix, base_score: FloatMatrix, best_distance: float) -> bool:
    """Whether a rebuild going on past a farther feasible step should stop rather than step from
    ``base_score`` to ``score``: at that step's gain per unit of distance, the rest of the way to the
    goal would end no nearer than ``best_distance`` (greedy steps' rates mostly fall as a chain goes)."""
    gain = float(score[0] - base_score[0])
    cost = float(base_score[3] - score[3])
    if gain <= 0.0 or cost <= 1e-12:
        return False
    return -float(score[3]) - float(score[0]) * cost / gain >= best_distance


def _better_of(
    found: tuple[FloatMatrix, FloatMatrix] | None, row: FloatMatrix, score: FloatMatrix
) -> tuple[FloatMatrix, FloatMatrix]:
    """``found`` or (a copy of) ``row`` and its score, whichever scores better (``found`` on a tie)."""
    if found is not None and not is_better(score, found[1]):
        return found
    return row.copy(), score.copy()


def _predicted_to_reach(C: FloatMatrix, singles: _Singles, original: FloatMatrix, deficit: float) -> bool:
    """Whether a combination of ``C`` reaches the whole ``deficit`` with its single-feature rows'
    goal gains added: the beam's pairs and levels, for features that reach the goal only
    together, are then not needed (the cheapest such combinations are scored already)."""
    if C.shape[0] == 0 or singles.owner.size == 0:
        return False
    # each changed value of C found among the single rows' (feature, value) pairs in one search;
    # the gains added per row feature by feature in column order, as a loop over the features
    keys = pairs_key(singles.owner, singles.X[np.arange(singles.owner.size), singles.owner])
    order = np.argsort(keys, kind="stable")
    keys = keys[order]
    rows, columns = np.nonzero(original != C)
    wanted = pairs_key(columns, C[rows, columns])
    at = np.minimum(np.searchsorted(keys, wanted), keys.size - 1)
    gains = np.where(keys[at] == wanted, singles.gain[order][at], 0.0)
    gained = np.bincount(rows, weights=gains, minlength=C.shape[0])
    return bool((gained >= deficit).any())


def _score_known(
    phase_scope: PhaseScope, X: FloatMatrix, known: tuple[FloatMatrix, FloatMatrix] | None
) -> tuple[FloatMatrix, bool]:
    """As :func:`_score`, the rows of ``X`` found in ``known`` (rows and their scores, the
    feature scan's) taking their scores from there: only the others go to the model."""
    if known is None or known[0].shape[1] != X.shape[1]:
        return _score(phase_scope, X)
    rows, row_scores = known
    found = row_index(rows, X)
    hit = found >= 0
    scores = np.empty((X.shape[0], row_scores.shape[1]))
    scores[hit] = row_scores[found[hit]]
    fresh = np.flatnonzero(~hit)
    if fresh.size:
        scores[fresh], _ = _score(phase_scope, X[fresh])
    return scores, False


def _beam_rows(scores: FloatMatrix, keep: int) -> np.ndarray:
    """The ``keep`` rows nearest the goal (hard levels, then distance) that do not reach it yet."""
    short = np.flatnonzero(scores[:, 0] < 0.0)
    if short.size == 0:
        return short
    order = np.lexsort(scores[short].T[::-1])[::-1]
    return short[order[:keep]]


def _other_route(
    X: FloatMatrix, scores: FloatMatrix, best: FloatMatrix, original: FloatMatrix
) -> tuple[FloatMatrix, FloatMatrix] | None:
    """The best feasible row of ``X`` whose set of changed features differs from ``best``'s."""
    feasible = (scores[:, :HARD_LEVELS] >= 0.0).all(axis=1)
    other = feasible & ((original != X) != (best != original)).any(axis=1)
    if not other.any():
        return None
    index = np.flatnonzero(other)
    top = index[best_row(scores[index])]
    return X[top].copy(), scores[top].copy()


def _take(
    scope: SolverScope,
    counters: list[Progress],
    bisection: Bisection,
    *,
    X: FloatMatrix,
    owners: np.ndarray,
    scores: FloatMatrix,
) -> bool:
    """Offer the bisection's scored rows; when the best moved, the bisection's brackets follow.
    Whether it improved."""
    winner = best_row(scores)
    previous = scope.best_row.copy()
    if not scope.offer(X, scores, counters, count=False):
        return False
    scope.announce()
    bisection.moved(previous, X, owners, winner)
    return True
