"""The exact engine as a solver phase: build the program, warm-start it from the best solution so
far, solve it (HiGHS or OR-Tools: :mod:`counterplan.solver.exact.backend`), check every answer through the
real model, and report the proof.

Two programs run when ``lexicographic`` is on: the first minimises the distance (soft level 0);
the second, among answers within the first's optimum (to a 1e-9 relative tolerance), the number
of changed features (soft level 1). Both answers are scored by the real model and the better
score is kept, so rounding in the second program can never make the answer worse.

With a valid warm start the first program is built narrowed to its distance
(``narrow_to_warm_start``, :func:`~counterplan.solver.exact.formulation.build`'s ``reach``): an
optimum at or below it is the whole program's, a bound is capped at it, and when the narrowed
program has nothing at or below it the whole program is built and solved
(:func:`_within_reach`).

The first program states every goal at its end, a relaxation of the scored goal
(:func:`~counterplan.solver.exact.formulation.retry_margins`). An answer the program calls valid
but the real model rejects (a borderline rounding) is not returned as valid: the programs are
solved again with every goal ``goal_epsilon`` inside, then with every goal and threshold margin a
hundred times wider, twice; the report says how many such retries there were, and a retry's
answer is proven by the first program's bound (:meth:`ExactPhase._retried_proof`).

The phase's time limit counts everything, the building of the program included (it stops
between trees and layers: :class:`~counterplan.solver.exact.program.BuildStopped`). The bound
reported is never worse than the trivial one (:func:`~counterplan.solver.exact.milp.proof_bound`).
A proof is of the scored problem: the answer's needless changes are dropped through the real
model (:mod:`counterplan.solver.exact.needless`), and when that (or local search) gives a better
valid answer than the program's optimum, it is proven only by the program with the goals
loosened by ``goal_epsilon`` (a relaxation of the scored goal).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from counterplan.planning.score import best_row, is_better, is_feasible
from counterplan.planning.scorecard import ScorecardAdapter
from counterplan.planning.structure.errors import NotEncodableError
from counterplan.planning.structure.kind import TREE_ENSEMBLES, kind_name, model_estimator
from counterplan.solver.core.phase import PhaseBase, PhaseScope
from counterplan.solver.core.scope import AnswerSet, SolverScope
from counterplan.solver.exact.backend import solve
from counterplan.solver.exact.boundary import toward_the_end
from counterplan.solver.exact.config import ExactPhaseConfig
from counterplan.solver.exact.formulation import RETRIES, build, retry_margins
from counterplan.solver.exact.milp import INF, MilpResult, proof_bound, trivial_bound
from counterplan.solver.exact.needless import drop_needless_changes
from counterplan.solver.exact.program import BuildStopped, Formulation, Lin, evaluate, reach_limit
from counterplan.solver.exact.report import ExactStatistics

SCORED_NOT_PROVEN = (
    "the program's optimum is of the goal kept goal_epsilon inside its threshold; a better valid answer "
    "was found (its needless changes dropped) and is not proven optimal for the scored problem"
)
"""Why a program's optimum is not called proven when the solve found a better valid answer."""
WIDENED_NOT_PROVEN = (
    "the real model rejected the program's answer, so the program was solved again with every goal "
    "and threshold margin wider; that optimum is of a stricter program than the scored problem, and "
    "the program with the goals goal_epsilon outside them does not prove it"
)
"""Why a retried program's optimum is not called proven (its margins left answers out)."""
LOOSENED_UNSOLVED = (
    "the program is infeasible with every goal kept goal_epsilon inside its threshold; the time ran "
    "out before the program with them goal_epsilon outside was solved"
)
LOOSENED_REJECTED = (
    "the program is infeasible with every goal kept goal_epsilon inside its threshold; with them "
    "goal_epsilon outside it has an answer, which the real model rejects"
)
"""Why a program's infeasibility is not proven of the scored problem (the margin it leaves out)."""
MODEL_REJECTED = "the real model rejected the program's answer, also with margins widened {retries} times"
"""Why an optimum of the program is not proven: no answer of it was valid for the real model (the
ONNX fuzz: an original on a threshold, a graph whose probabilities leave [0, 1]; the report said
``optimal``, not proven, with no reason)."""
DISTANCE_LEVEL = 3
"""The score's level of the distance (soft level 0, after the three hard levels)."""
TIE_BREAK_FLOOR_DETERMINISTIC = 1.0
"""The least CP-SAT deterministic seconds the tie-break program gets (``tie_break_effort``): a
first program proven in its presolve leaves the second a budget of almost nothing otherwise."""
TIE_BREAK_FLOOR_NODES = 1_000
"""The least nodes the tie-break program gets on HiGHS or SCIP (a first program solved at its
root reports one node)."""


class ExactPhase(PhaseBase[ExactPhaseConfig]):
    """Runs one :class:`~counterplan.solver.exact.config.ExactPhaseConfig`."""

    def phase_started(self, phase_scope: PhaseScope) -> None:
        """The swarm's picks give way: the program chooses its own set of answers."""
        scope = phase_scope.solver_scope
        if scope.answer_set is not None and scope.answer_set.kind == "picks":
            scope.answer_set = None

    def _backend(self, scope: SolverScope) -> ExactPhaseConfig:
        """The configuration with ``auto`` resolved for this problem, by measurement: tree
        ensembles go to CP-SAT (:mod:`counterplan.solver.exact.cpsat`, which hands a program it
        does not state to SCIP), a credit scorecard to OR-Tools' SCIP, when OR-Tools is installed
        (optbinning brings it); linear models and networks to HiGHS.

        Measured on heloc's 12-variable scorecard with the paper's objective (236 variables, 106
        binaries, 636 rows): SCIP 0.26 s (K = 2) and 0.36 s (K = 4), HiGHS 2.0 s and 4.1 s, both
        proven, the same optimum. On tree ensembles (``benchmarks/exact_trees.py``, the program
        narrowed to local search's distance, one thread, a busy 2-core machine): 100-tree
        depth-6 forests on adult, CP-SAT proved 3 of 3 rows in 0.9-2.4 s, SCIP in 2.9-5.9 s,
        HiGHS in 1.0-13.8 s; 100-tree boosting on heloc, CP-SAT's slowest row 1.5 s against
        SCIP's 3.0 s and HiGHS's 6.9 s, within 0.1-0.2 s of HiGHS on adult's and compas's small
        programs (``docs/benchmarks/engines.md``)."""
        from counterplan.solver.exact import ortools_backend  # noqa: PLC0415

        config = self.config
        if config.backend != "auto" or scope.problem is None:
            return config
        model = scope.problem.model
        trees = kind_name(model_estimator(model)) in TREE_ENSEMBLES
        if (trees or isinstance(model, ScorecardAdapter)) and ortools_backend.available() is None:
            return config.model_copy(update={"backend": "cpsat" if trees else "ortools"})
        return config

    def solve(self, phase_scope: PhaseScope) -> None:
        """Solve the program; offer its verified answers to the scope."""
        scope = phase_scope.solver_scope
        if phase_scope.must_stop():
            return
        if scope.problem is None:
            phase_scope.report(
                "exact",
                ExactStatistics(
                    status="not encodable", proven=False, reason="the exact engine needs the planning problem"
                ),
            )
            return
        self.config = self._backend(scope)
        started = time.perf_counter()
        _, should_stop = self._clock(scope, started)
        self._before = (scope.best_row.copy(), scope.best_score.copy())
        try:
            run = self._proof(phase_scope, started)
        except NotEncodableError as exc:
            phase_scope.report("exact", ExactStatistics(status="not encodable", proven=False, reason=str(exc)))
            return
        except BuildStopped:
            reason = "the time limit (or a stop request) came while the program was being built"
            stopped = ExactStatistics(
                status="no solution", proven=False, seconds=time.perf_counter() - started, reason=reason
            )
            phase_scope.report("exact", stopped)
            phase_scope.must_stop()  # records the solve's end, when it was its clock or a stop request
            return
        formulation, report = run.formulation, run.report
        drop_needless_changes(scope, phase_scope.counters, should_stop)
        milp = formulation.milp
        first = report.first
        conservative = formulation.conservative or ""  # a stricter program than the problem: not a proof
        region = scope.problem.trust_region
        enlarged = region.note if region is not None and region.note else ""
        proven = not conservative and (first.status == "infeasible" or (first.status == "optimal" and run.verified))
        proof = (first.objective if first.x is not None else None, report.bound, report.gap)
        status, scored = first.status, ""
        if proven and first.status == "infeasible":
            status, proof, proven, scored = self._infeasible_proof(phase_scope, started, proof, report.trivial)
        elif proven and report.score is not None and is_better(scope.best_score, report.score):
            # the solve found a better valid answer than the program's optimum (dropped changes):
            # that optimum was of the tightened goal; the scored problem's needs its own proof
            proof, proven = self._loosened_proof(phase_scope, started, report.trivial)
            scored = "" if proven else SCORED_NOT_PROVEN
        elif proven and run.retries:
            # the optimum of a program with margins: answers within them were left out (a
            # scorecard of 4e9 points kept its range goal 4e5 points inside: fuzzing)
            proof, proven = self._retried_proof(phase_scope, started, run)
            scored = "" if proven else WIDENED_NOT_PROVEN
        rejected = MODEL_REJECTED.format(retries=run.retries) if first.x is not None and not run.verified else ""
        statistics = ExactStatistics(
            status=status,
            proven=proven,
            model=formulation.output.description,
            objective=proof[0],
            bound=proof[1] if status != "infeasible" else None,
            gap=proof[2] if proof[0] is not None else None,
            nodes=report.nodes,
            seconds=time.perf_counter() - started,
            variables=milp.n_vars,
            constraints=len(milp.rows),
            verified=run.verified,
            retries=run.retries,
            reason="; ".join(part for part in (conservative, enlarged, scored, rejected) if part),
            backend=report.backend,
        )
        phase_scope.report("exact", statistics)
        if scope.answers > 1 and self.config.answer_set != "pool" and not scope.terminate_flag.is_set():
            self._answer_set(phase_scope, statistics, started)
        phase_scope.must_stop()  # a program the solve's clock cut: the answer is its best so far

    def _proof(self, phase_scope: PhaseScope, started: float) -> _Proof:
        """Build and solve the program, with wider margins after an answer the model rejects.
        Raises :class:`NotEncodableError`, or :class:`BuildStopped` when the time is up while
        the program is built (the building counts against the time limit)."""
        scope = phase_scope.solver_scope
        assert scope.problem is not None
        _, should_stop = self._clock(scope, started)
        retries = 0
        last: _Proof | None = None
        end: _End | None = None
        reach = self._reach(scope)
        while True:
            # every goal at its end first (a relaxation of the scored goal), then margins
            goal, probability, scale = retry_margins(retries, self.config.goal_epsilon)
            try:
                formulation = build(
                    scope.problem,
                    goal,
                    probability_epsilon=probability,
                    margin_scale=scale,
                    should_stop=should_stop,
                    reach=reach if retries == 0 else None,
                )
            except BuildStopped:
                if last is None:
                    raise
                return last  # out of time rebuilding for a retry: the last program's run stands
            report, verified = self._run(phase_scope, formulation, started, warm=retries == 0)
            if formulation.reach is not None:
                narrowed = _within_reach(report, formulation.reach)
                if narrowed is None:  # nothing within reach: the whole program decides
                    reach = None
                    if should_stop():
                        raise BuildStopped("the time limit came before the whole program was solved")
                    continue
                report = narrowed
            if retries == 0 and report.first.status in ("optimal", "feasible"):
                end = _End(formulation, report)
            last = _Proof(formulation, report, verified, retries, end)
            if verified or report.first.status in ("infeasible", "no solution") or retries >= RETRIES or should_stop():
                return last
            retries += 1

    def _reach(self, scope: SolverScope) -> float | None:
        """The warm start's distance, which narrows the program (``build``'s ``reach``): every
        answer at most that far lies in the narrowed domains. None when it is off
        (``narrow_to_warm_start``), there is no valid warm start, or an encoding replaces the
        distance (a scorecard's objective)."""
        assert scope.problem is not None
        if not self.config.narrow_to_warm_start or not is_feasible(scope.best_score):
            return None
        if isinstance(scope.problem.model, ScorecardAdapter):
            return None
        return float(-scope.best_score[DISTANCE_LEVEL])

    def _infeasible_proof(
        self, phase_scope: PhaseScope, started: float, proof: tuple[float | None, float, float], trivial: float
    ) -> tuple[str, tuple[float | None, float, float], bool, str]:
        """The program, its goals kept ``goal_epsilon`` inside their thresholds, has no answer:
        the scored problem has none only when the program with them ``goal_epsilon`` outside
        (a relaxation) has none either. An answer of that program the real model confirms is
        offered to the solve; with a valid answer known (local search's, or that one), its
        optimality is proven as :meth:`_loosened_proof` does. Returns the status, the proof
        (objective, bound, gap), whether it is proven, and why not.

        Fuzzing: a boosted regressor whose best output lay 3e-7 above a range goal's low end (a
        valid answer local search found) was proven infeasible by every backend; with local
        search's answer as the warm start, the report said ``infeasible``, proven, beside it."""
        scope = phase_scope.solver_scope
        assert scope.problem is not None
        if not is_feasible(scope.best_score):
            solved = self._solve_loosened(scope, started, start_from_best=False)
            if solved is None:
                return "infeasible", proof, False, LOOSENED_UNSOLVED
            loose, result = solved
            if result.status == "infeasible":
                return "infeasible", proof, True, ""
            if result.x is None:
                return "infeasible", proof, False, LOOSENED_UNSOLVED
            row = loose.decode(result.x).reshape(1, -1)
            scores = scope.scorer.score_final(row)
            if scope.offer(row, scores, phase_scope.counters):
                scope.announce()
            if not is_feasible(scope.best_score):
                return "infeasible", proof, False, LOOSENED_REJECTED
        loosened, proven = self._loosened_proof(phase_scope, started, trivial)
        return ("optimal" if proven else "feasible"), loosened, proven, ("" if proven else SCORED_NOT_PROVEN)

    def _retried_proof(
        self, phase_scope: PhaseScope, started: float, run: _Proof
    ) -> tuple[tuple[float | None, float, float], bool]:
        """Whether the best answer of a retried program (its goals kept inside their ends) is the
        scored problem's optimum. The segment from it to the first program's rejected answer is
        searched first (:mod:`~counterplan.solver.exact.boundary`). The first program, every goal
        at its end, is a relaxation of the scored problem: its bound bounds every valid answer,
        and proves the best answer when it is within ``relative_gap`` of its objective there.
        When that program was solved to its optimum and does not prove it, the program with the
        goals ``goal_epsilon`` outside (whose optimum is at most that one) cannot either, and is
        not solved (a network's took 12 s to fail, for an answer 3e-5 from the bound); otherwise
        it is (:meth:`_loosened_proof`).
        Returns (objective, bound, gap) and whether it is proven."""
        scope = phase_scope.solver_scope
        end = run.end
        if end is None:
            return self._loosened_proof(phase_scope, started, run.report.trivial)
        if end.report.first.x is not None:  # its answer, rejected: the optimum lies toward it
            _, should_stop = self._clock(scope, started)
            rejected = end.formulation.decode(end.report.first.x)
            toward_the_end(scope, rejected, phase_scope.counters, should_stop)
        start = end.formulation.assignment(scope.best_row.reshape(-1))
        objective = evaluate(end.report.objective, start)
        proof, proven = _bounded(objective, end.report.bound, self.config.relative_gap)
        if proven or end.report.first.status == "optimal":
            return proof, proven
        return self._loosened_proof(phase_scope, started, run.report.trivial)

    def _loosened_proof(
        self, phase_scope: PhaseScope, started: float, trivial: float
    ) -> tuple[tuple[float | None, float, float], bool]:
        """Whether the best answer is the scored problem's optimum: the program with every goal
        kept ``goal_epsilon`` outside its threshold (a relaxation of the scored goal) is solved
        from it; the best answer is proven when its objective there is within ``relative_gap``
        of that program's bound. Returns (objective, bound, gap) and whether it is proven;
        ``trivial`` is the bound when the time is up before that program is built."""
        scope = phase_scope.solver_scope
        solved = self._solve_loosened(scope, started, start_from_best=True)
        if solved is None:
            return (None, trivial, INF), False
        loose, result = solved
        start = loose.assignment(scope.best_row.reshape(-1))
        objective = evaluate((loose.milp.objective, loose.milp.objective_offset), start)
        bound, _ = proof_bound(loose.milp, result)
        proof, proven = _bounded(objective, bound, self.config.relative_gap)
        return proof, proven and result.status != "infeasible"

    def _solve_loosened(
        self, scope: SolverScope, started: float, *, start_from_best: bool
    ) -> tuple[Formulation, MilpResult] | None:
        """The program with every goal kept ``goal_epsilon`` outside its threshold (a relaxation
        of the scored goal), built and solved within the phase's time (from the best answer when
        ``start_from_best``); None when the time ran out while it was built."""
        assert scope.problem is not None
        remaining, should_stop = self._clock(scope, started)
        epsilon = -self.config.goal_epsilon
        try:
            loose = build(scope.problem, epsilon, probability_epsilon=epsilon, should_stop=should_stop)
        except BuildStopped:
            return None
        result, _ = solve(
            loose.milp,
            self.config.backend,
            time_limit=remaining(),
            relative_gap=self.config.relative_gap,
            start=loose.assignment(scope.best_row.reshape(-1)) if start_from_best else None,
            should_stop=should_stop,
            node_limit=self.config.node_limit,
            formulation=loose,
        )
        return loose, result

    def _clock(self, scope: SolverScope, started: float) -> tuple[Callable[[], float | None], Callable[[], bool]]:
        """The seconds the phase has left (None: no limit), and whether it must stop now."""
        config = self.config

        def remaining() -> float | None:
            limits = []
            if config.time_limit_seconds is not None:
                limits.append(config.time_limit_seconds - (time.perf_counter() - started))
            if scope.wall_limit is not None:
                limits.append(scope.wall_limit - scope.time_spent())
            return max(min(limits), 0.0) if limits else None

        def should_stop() -> bool:
            left = remaining()
            return scope.terminate_flag.is_set() or (left is not None and left <= 0.0)

        return remaining, should_stop

    def _answer_set(self, phase_scope: PhaseScope, statistics: ExactStatistics, started: float) -> None:
        """Several answers asked: solve for the set (:mod:`counterplan.solver.exact.answer_set`); the
        set (empty when there is none) is final: no later phase's picks replace it."""
        from counterplan.solver.exact.answer_set import solve_set  # noqa: PLC0415 - only for several answers

        scope = phase_scope.solver_scope
        remaining, should_stop = self._clock(scope, started)
        if not is_feasible(scope.best_score):
            return
        rows, status, reason = solve_set(scope, self.config, remaining, should_stop)
        empty = np.empty((0, scope.space.n_features))
        scope.answer_set = AnswerSet(rows if rows is not None else empty, "final")
        phase_scope.report("exact", statistics.model_copy(update={"answer_set": status, "answer_set_reason": reason}))

    def _final_scores(
        self, scope: SolverScope, row: npt.NDArray[np.float64], checked: dict[bytes, npt.NDArray[np.float64]]
    ) -> npt.NDArray[np.float64]:
        """``row``'s scores through the real model, once per row (``checked``); a best the real
        model rejects is withdrawn (:meth:`_withdraw`)."""
        key = row.tobytes()
        if key not in checked:
            checked[key] = scope.scorer.score_final(row)
        scores = checked[key].copy()
        if not is_feasible(scores[0]) and np.array_equal(scope.best_row.reshape(-1), row.reshape(-1)):
            self._withdraw(scope, scores[0])
        return scores

    def _withdraw(self, scope: SolverScope, rejected: npt.NDArray[np.float64]) -> None:
        """The scope's best is a row the real model rejects: the search's own scoring (a fast
        path) took it, an output on a goal's end an ulp apart from the model's (fuzzing: a ridge
        regression's range beginning at its own output at a grid point; the row stayed the best,
        the result had no answer, and its proof was reported). The best before this phase takes
        its place when it was feasible; else the row stays, with the real model's score, and any
        feasible answer beats it."""
        row, score = self._before
        if is_feasible(score) and not np.array_equal(row, scope.best_row):
            scope.best_row, scope.best_score = row.copy(), score.copy()
        else:  # none before, or the warm start itself (the search's own scoring took it too)
            scope.best_score = rejected.copy()

    def _run(
        self, phase_scope: PhaseScope, formulation: Formulation, started: float, *, warm: bool = True
    ) -> tuple[_Run, bool]:
        config = self.config
        scope = phase_scope.solver_scope
        phase_scope.start()
        counters = phase_scope.counters
        remaining, should_stop = self._clock(scope, started)
        verified_scores: list[npt.NDArray[np.float64]] = []
        checked: dict[bytes, npt.NDArray[np.float64]] = {}
        """Rows already checked through the real model: the tie-break program's answer is most
        often the first program's own, and the same row gets the same check."""

        def offer(x: npt.NDArray[np.float64], final: bool = False) -> bool:
            row = formulation.decode(x).reshape(1, -1)
            scores = self._final_scores(scope, row, checked) if final else scope.scorer.score(row)
            if scope.offer(row, scores, counters):
                scope.announce()
            feasible = bool(is_feasible(scores[0]))
            if final and feasible:
                verified_scores.append(scores[0])
            return feasible

        # a retry starts cold: HiGHS took 30,002 nodes (7.4 s) from a network's valid answer where,
        # cold, its root (0.02 s) solved the same program
        start = formulation.assignment(scope.best_row) if warm and is_feasible(scope.best_score) else None

        def incumbent(x: npt.NDArray[np.float64], _objective: float) -> None:
            offer(x)  # each improving incumbent, checked by the model, is a best-solution event

        first, backend = solve(
            formulation.milp,
            config.backend,
            time_limit=remaining(),
            relative_gap=config.relative_gap,
            start=start,
            on_incumbent=incumbent,
            should_stop=should_stop,
            node_limit=config.node_limit,
            formulation=formulation,
        )
        # before the second program changes the objective
        bound, gap = proof_bound(formulation.milp, first)
        objective = (dict(formulation.milp.objective), formulation.milp.objective_offset)
        trivial = trivial_bound(formulation.milp)
        nodes = first.nodes
        verified = False
        if first.x is not None:
            verified = offer(first.x, final=True)
            if config.lexicographic and first.status == "optimal" and not should_stop():
                milp = formulation.milp
                tolerance = abs(first.objective) * 1e-9 + 1e-9
                milp.row(formulation.distance, -INF, first.objective + tolerance)
                milp.minimise(formulation.changes)
                node_limit, deterministic_limit = _tie_break_budget(config, first)
                second, _ = solve(
                    milp,
                    config.backend,
                    time_limit=remaining(),
                    relative_gap=0.0,
                    start=first.x,
                    should_stop=should_stop,
                    node_limit=node_limit,
                    formulation=formulation,
                    deterministic_limit=deterministic_limit,
                )
                nodes += second.nodes
                if second.x is not None:
                    verified = offer(second.x, final=True) or verified
        score = verified_scores[best_row(np.vstack(verified_scores))] if verified_scores else None
        return _Run(first, nodes, backend, bound, gap, trivial, score, objective), verified


def _bounded(objective: float, bound: float, relative_gap: float) -> tuple[tuple[float, float, float], bool]:
    """An answer's objective, a bound of every valid answer's, and the gap between them; and
    whether the bound proves the answer optimal (within ``relative_gap``)."""
    proven = objective <= bound + relative_gap * abs(objective) + 1e-9
    bound = min(bound, objective)
    gap = abs(objective - bound) / abs(objective) if objective != 0.0 else (0.0 if bound == 0.0 else INF)
    return (objective, bound, gap), proven


def _tie_break_budget(config: ExactPhaseConfig, first: MilpResult) -> tuple[int, float | None]:
    """The tie-break program's node limit and deterministic-time limit (``tie_break_effort``): a
    multiple of the first program's work, at least a floor, the node limit never above the
    config's. Both are counts, not clock time, so the answer does not depend on the load."""
    effort = config.tie_break_effort
    if effort is None:
        return config.node_limit, None
    nodes = min(config.node_limit, max(TIE_BREAK_FLOOR_NODES, int(np.ceil(effort * max(first.nodes, 1)))))
    if first.deterministic_seconds is None:
        return nodes, None
    return nodes, max(TIE_BREAK_FLOOR_DETERMINISTIC, effort * first.deterministic_seconds)


def _within_reach(report: _Run, reach: float) -> _Run | None:
    """The run of a program narrowed to ``reach``, as the whole program's: an optimum at or below
    the reach is the whole program's optimum; a bound is the whole program's only up to the reach
    (any solution outside the narrowed domains costs more), so it is capped there. None when the
    narrowed program has nothing at or below the reach (infeasible, or an optimum above it): the
    whole program must be solved."""
    first = report.first
    limit = reach_limit(reach)
    if first.status == "infeasible" or (first.status == "optimal" and first.objective > limit):
        return None
    if first.status == "optimal":
        return report
    bound = min(report.bound, reach)
    objective = first.objective
    gap = report.gap
    if first.x is not None and objective != 0.0:
        gap = abs(objective - bound) / abs(objective)
    return replace(report, bound=bound, gap=gap)


@dataclass(frozen=True)
class _Run:
    """The first program's result (the proof) with its bound and gap (never worse than the
    trivial bound, also kept), the nodes of both programs, the backend that solved them, and
    the best score of the programs' answers the model confirmed (None: none)."""

    first: MilpResult
    nodes: int
    backend: str
    bound: float
    gap: float
    trivial: float
    score: npt.NDArray[np.float64] | None
    objective: Lin
    """The first program's objective (the second's replaces it in the program)."""


@dataclass(frozen=True)
class _Proof:
    """The program that was solved last, its run, whether the model confirmed an answer of it,
    and how many times the margins were widened."""

    formulation: Formulation
    report: _Run
    verified: bool
    retries: int
    end: _End | None = None
    """The solve's first program (every goal at its end) with its run, when it has a solution or
    a bound: a relaxation of the scored problem (:meth:`ExactPhase._retried_proof`)."""


@dataclass(frozen=True)
class _End:
    """A solve's first program, every goal at its end, and its run."""

    formulation: Formulation
    report: _Run
