"""A block of rows through the vectorised engine (:mod:`counterplan.solver.vector`), and where it
cannot go.

:func:`vector_refusal` says, for a whole batch, why the vectorised engine cannot run it (several
answers, another engine, phases other than the default solve's); :func:`run_vector_block` then
takes each row it can search (:func:`~counterplan.solver.vector.capability.problem_refusal`; the rows
of one program are searched together, each with its own domains) and hands the rest to the threads-sharing-calls path
(:func:`counterplan.solver.batch.block.run_block`) with the reason logged.

Every answer is checked through the real model as it is reported: the block's originals and its
bests each take one reference call per layout (:func:`~counterplan.planning.calculator.check_shared`:
each best put first on the values its record shows), and each row's own
:class:`~counterplan.planning.calculator.ScoreCalculator` scores its row from that call's
predictions, so a row's score, validity and result are built by the same code as a single
solve's (:class:`~counterplan.solver.result_builder.ResultBuilder`), from the row checked.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import structlog

from counterplan.planning.calculator import Evaluation, check_shared
from counterplan.planning.errors import ModelAdapterError, ModelFailureError, RemoteModelError
from counterplan.planning.problem import CounterfactualProblem
from counterplan.planning.threads import NativeThreadLimit
from counterplan.solver.batch.fair_share import FairShare
from counterplan.solver.batch.protocol import RowExplainer
from counterplan.solver.batch.records import error_record, record_of
from counterplan.solver.batch.rows import id_text, row_seed
from counterplan.solver.core.config import SolverConfig
from counterplan.solver.core.protocol import FloatMatrix
from counterplan.solver.core.registry import default_phases
from counterplan.solver.core.scope import no_time_for_a_call
from counterplan.solver.core.termination import (
    TERMINATED_EARLY,
    TIME_LIMIT,
    idle_time_limit,
    step_limits,
    wall_limit,
)
from counterplan.solver.engines import EnginePlan
from counterplan.solver.local.config import BoundaryPolishPhaseConfig
from counterplan.solver.result_builder import ResultBuilder, Spent
from counterplan.solver.vector.capability import problem_refusal, same_layout, same_program
from counterplan.solver.vector.scoring import BlockScorer
from counterplan.solver.vector.search import VectorSearch, VectorSettings, feasible

Record = dict[str, Any]
Item = tuple[Any, dict[str, Any]]
ENGINE_NAME = "local"
ENGINE_REASON = "the vectorised batch engine: a block's rows searched together"
_log = structlog.get_logger(__name__)


def vector_refusal(explainer: RowExplainer) -> str | None:
    """Why the vectorised engine cannot run this explainer's rows, or None when it can."""
    if getattr(explainer, "num_counterfactuals", 1) != 1:
        return "several answers per row (num_counterfactuals > 1) need the diverse-answers phase"
    if explainer.engine not in (None, "local"):
        return f"the {explainer.engine!r} engine runs its own phases"
    if not _default_search(explainer.config):
        return "custom phases (the vectorised engine runs the default scan, local search and polish)"
    return _clock_it_cannot_keep(explainer.config)


def _clock_it_cannot_keep(config: SolverConfig) -> str | None:
    """A time limit the vectorised engine would not keep: it keeps the solve's own (an OR tree's
    smallest spent limit, :func:`~counterplan.solver.core.termination.wall_limit`), not a phase's,
    an unimproved time limit, or a spent limit in an AND tree; such rows take the threads path,
    where every limit holds as in a single solve."""
    if any(phase.reads_the_clock for phase in config.phases):
        return "a phase's own time limit (the vectorised engine keeps the solve's only)"
    if idle_time_limit(config.termination):
        return "an unimproved time limit (the vectorised engine keeps the solve's time limit only)"
    if config.termination.reads_the_clock and wall_limit(config.termination) is None:
        return "a time limit joined by 'and' (the vectorised engine keeps the solve's time limit only)"
    return None


def _default_search(config: SolverConfig) -> bool:
    """The phases are the default solve's (their settings may differ only in termination)."""
    defaults = default_phases()
    if len(config.phases) != len(defaults):
        return False
    return all(
        a.model_copy(update={"termination": None}) == b.model_copy(update={"termination": None})
        for a, b in zip(config.phases, defaults, strict=True)
    )


def _checked(problems: Sequence[CounterfactualProblem], rows: FloatMatrix, model: Any) -> list[Evaluation]:
    """Each row scored by its own problem's calculator, from one real-model call per layout (rows
    of one layout have the same space, so each row goes through the model as it would alone)."""
    out: list[Evaluation | None] = [None] * len(problems)
    pending = list(range(len(problems)))
    while pending:
        reference = problems[pending[0]]
        mine = [i for i in pending if same_layout(problems[i], reference)]
        chosen = set(mine)
        pending = [i for i in pending if i not in chosen]
        for i, evaluation in zip(mine, _checked_alike([problems[i] for i in mine], rows[mine], model), strict=True):
            out[i] = evaluation
    return [e for e in out if e is not None]


def _checked_alike(problems: Sequence[CounterfactualProblem], rows: FloatMatrix, model: Any) -> list[Evaluation]:
    """:func:`_checked` for rows of one layout: one real-model call for all of them, each row as
    it is reported (:func:`~counterplan.planning.calculator.check_shared`)."""
    return check_shared(problems, rows, model)


def run_vector_block(
    explainer: RowExplainer,
    items: Sequence[Item],
    seed: int,
    on_record: Callable[[Record], None],
    *,
    stop: Callable[[], bool] | None = None,
    fallback: Callable[[Sequence[Item]], None] | None = None,
    settings: VectorSettings | None = None,
) -> None:
    """Solve ``items`` together; the rows the engine cannot search go to ``fallback``. A model call
    whose answer breaks the model's contract (:class:`~counterplan.planning.errors.ModelAdapterError`:
    an output of the wrong shape) ends the rows of its program with error records, as each row's
    solve on the threads path ends, not the whole batch on an exception; a served model that fails
    for good (:class:`~counterplan.planning.errors.RemoteModelError`: down, unknown, a wrong answer)
    still stops the whole job with its one-line error, as the serving guide says."""
    started = time.perf_counter()
    settings = settings or _settings(explainer.config)
    groups: list[tuple[list[CounterfactualProblem], list[Item]]] = []
    refused: list[Item] = []
    for row_id, row in items:
        own = row_seed(seed, row_id)
        try:
            problem = explainer.problem(row)
        except Exception as exc:  # a bad row: an error record, the block goes on
            on_record(error_record(row_id, exc, own, time.perf_counter() - started))
            continue
        reason = problem_refusal(problem)
        if reason is not None:
            _log.info("batch.threads_path", row_id=str(row_id), reason=reason)
            refused.append((row_id, row))
            continue
        # rows whose domains or whole-number kinds differ (a value outside the data's range, an
        # imputed decimal) share the program, each with its own domains (solver.vector.layouts)
        group = next((g for g in groups if same_program(problem, g[0][0]) is None), None)
        if group is None:
            group = ([], [])
            groups.append(group)
        group[0].append(problem)
        group[1].append((row_id, row))
    if refused:
        if fallback is None:
            raise ValueError("rows the vectorised engine cannot search need a fallback")
        fallback(refused)
    for problems, kept in groups:
        _solve_or_fail(explainer, kept, problems, seed, on_record, stop=stop, settings=settings, started=started)


def _solve_or_fail(
    explainer: RowExplainer,
    items: Sequence[Item],
    problems: list[CounterfactualProblem],
    seed: int,
    on_record: Callable[[Record], None],
    *,
    stop: Callable[[], bool] | None,
    settings: VectorSettings,
    started: float,
) -> None:
    """:func:`_solve`; when a call's answer breaks the model's contract (an output of the wrong
    shape), each row not answered yet gets the error record its solve on the threads path gives."""
    done: set[str] = set()

    def answered(record: Record) -> None:
        done.add(id_text(record["row_id"]))
        on_record(record)

    try:
        # native pools limited as a solve limits them (``model_threads``): in a worker process
        # forked after its parent's OpenMP pool started, a call on more than one OpenMP thread
        # waits for the parent's threads, which the fork did not copy, for good
        with NativeThreadLimit(explainer.config.model_threads):
            _solve(explainer, items, problems, seed, answered, stop=stop, settings=settings, started=started)
    except RemoteModelError:  # a served model that fails for good stops the whole job (serving.md)
        raise
    except ModelAdapterError as exc:
        for row_id, _ in items:
            if id_text(row_id) not in done:
                on_record(error_record(row_id, exc, row_seed(seed, row_id), time.perf_counter() - started))


def _solve(
    explainer: RowExplainer,
    items: Sequence[Item],
    problems: list[CounterfactualProblem],
    seed: int,
    on_record: Callable[[Record], None],
    *,
    stop: Callable[[], bool] | None,
    settings: VectorSettings,
    started: float,
) -> None:
    clock = FairShare(len(problems))  # a row's time limit: its share of the time its block takes
    seeds = [row_seed(seed, row_id) for row_id, _ in items]
    builders = [ResultBuilder(p, EnginePlan(explainer.config, ENGINE_NAME, ENGINE_REASON), 1) for p in problems]
    model = explainer.adapter
    originals = np.vstack([p.space.original for p in problems])
    checked = _checked(problems, originals, model)
    limit = wall_limit(explainer.config.termination)
    scorer = BlockScorer(problems, model)

    cut: list[str] = []  # why the block stopped, in a solve's own words (its rows say they were cut)

    def should_stop() -> bool:  # a deadline is a promise: no call that would end after it
        if cut:
            return True
        spent = clock.charge(scorer.calling)
        if no_time_for_a_call(spent, limit, _call_seconds(scorer, spent)):
            cut.append(TIME_LIMIT)
        elif stop is not None and stop():
            cut.append(TERMINATED_EARLY)
        return bool(cut)

    scorer.stop = should_stop
    active = np.ones(len(problems), dtype=bool)
    for i, (evaluation, builder) in enumerate(zip(checked, builders, strict=True)):
        (row_id, _), own = items[i], seeds[i]
        if evaluation.failures[0] is not None:
            error = ModelFailureError.on_original(evaluation.failures[0], problems[i].space.missing_names)
            on_record(error_record(row_id, error, own, time.perf_counter() - started))
            active[i] = False
        elif _valid(builder, originals[i], evaluation):
            on_record(record_of(row_id, builder.already_met(evaluation, time.perf_counter() - started), own, 0.0))
            active[i] = False
    if not active.any():
        return
    search = VectorSearch(scorer, np.asarray(seeds, dtype=np.uint64), settings)
    outcome = search.run(active)
    idx = np.flatnonzero(active)
    clock.charge(idx)  # the final check is every searched row's
    finals = _checked([problems[i] for i in idx], outcome.best[idx], model)
    clock.charge(np.empty(0, dtype=np.intp))
    reason = (cut[0] if cut else TERMINATED_EARLY) if outcome.stopped else "the vectorised search ended"
    for evaluation, i in zip(finals, idx.tolist(), strict=True):
        row_id, seconds = items[i][0], float(clock.each[i])  # its share of the block's time
        spent = Spent(int(scorer.rows_per_instance[i]), int(scorer.calls_per_instance[i]), seconds)
        result = builders[i].so_far(
            (_checked_row(evaluation), evaluation),
            original=checked[i],
            spent=spent,
            found_at=(int(outcome.steps[i]), seconds),
            reason=reason if feasible(evaluation.scores)[0] or outcome.stopped else "no valid answer found",
        )
        on_record(record_of(row_id, result, seeds[i], seconds))


def _checked_row(evaluation: Evaluation) -> FloatMatrix:
    """The row a final check checked: the search's best as it is reported, which the result shows."""
    assert evaluation.rows is not None  # a check keeps its rows
    return np.asarray(evaluation.rows[0], dtype=np.float64)


def _valid(builder: ResultBuilder, row: FloatMatrix, evaluation: Evaluation) -> bool:
    """Whether ``row`` meets every goal, as its result would say (one rule, the result builder's)."""
    return builder.counterfactual(row, evaluation, evaluation.score(0), fine=evaluation.failures[0] is None).valid


def _call_seconds(scorer: BlockScorer, spent: float) -> float:
    """The expected seconds the next model call charges each row: the mean so far."""
    if scorer.model_calls == 0:
        return 0.0
    return spent / scorer.model_calls


def _settings(config: SolverConfig) -> VectorSettings:
    """The search's limits from the solve's termination (a user's step caps hold), and whether to
    combine, trade and rebuild, the beam's sizes, the trade rounds and the rebuilds' share and
    slack from its polish phase (the default solve's: :func:`_default_search`)."""
    steps, unimproved = step_limits(config.termination)
    base = VectorSettings()
    settings = VectorSettings(
        step_limit=steps or base.step_limit,
        unimproved_step_limit=unimproved or base.unimproved_step_limit,
    )
    polish = next((p for p in config.phases if isinstance(p, BoundaryPolishPhaseConfig)), None)
    if polish is None:
        return settings
    return replace(
        settings,
        combos=polish.combos,
        beam_width=polish.beam_width,
        beam_depth=polish.beam_depth,
        beam_keep=polish.beam_keep,
        trade_rounds=polish.trade_rounds,
        recreate_steps=settings.recreate_steps if polish.recreate_steps else 0,
        recreate_share=polish.recreate_share,
        recreate_slack=polish.recreate_slack,
        recreate_onward=polish.recreate_onward,
    )
