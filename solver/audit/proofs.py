"""The audit's proofs: a row the bulk search left without an answer, put to the exact engine.

A row is proven to have no recourse only when the exact engine, on the row's own problem (the
same domains, immutables, rules, trust region and goal as its search), reports the program
infeasible and proven so (:class:`~counterplan.solver.exact.report.ExactStatistics`). A valid
answer found there makes it a row with recourse after all (the record is the engine's, checked
through the model); anything else leaves it unproven, with the reason. Each proof is independent
and seeded by its row, so with ``workers`` > 1 the rows are proved in worker processes (the
explainer sent to each once) and the verdicts are the same as in one process. Each verdict is
appended to ``proofs.jsonl`` as it arrives, so an interrupted audit does not prove a row twice.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from counterplan.planning.errors import one_line
from counterplan.solver.batch.block import stop_watched
from counterplan.solver.batch.records import record_of
from counterplan.solver.batch.rows import id_text
from counterplan.solver.batch.run import gather, worker_started
from counterplan.solver.core.config import SolverConfig
from counterplan.solver.counterfactual import CounterfactualSolver
from counterplan.solver.engines import not_encodable
from counterplan.solver.exact.config import ExactPhaseConfig
from counterplan.solver.explainer import Explainer
from counterplan.solver.result import CounterfactualResult

Item = tuple[Any, dict[str, Any], int]
"""A row to prove: its id, its values and its seed."""
PROVE = "prove"
SCREEN = "screen"
"""A proof's stage: ``prove`` (a row the search left without an answer) or ``screen`` (a row
put to the exact engine before its search, for its feasibility alone: :func:`screen_config`)."""
SCREEN_SECONDS = 2.0
"""The screen's time limit per row unless ``prove_seconds`` is smaller: a row the screen cannot
settle quickly is searched, as without the screen, so a long screen buys nothing."""
ROWS_PER_TASK = 8
"""Rows a worker process proves per task: few enough that the verdicts come back steadily."""


@dataclass(frozen=True)
class Proof:
    """What the exact engine said about one row without an answer."""

    row_id: Any
    outcome: str
    """``proven`` (infeasible, proven), ``found`` (a valid answer after all) or ``unproven``."""
    reason: str
    """For ``unproven``: why (``not encodable: ...``, ``time limit``, ``error: ...``)."""
    record: dict[str, Any] | None = None
    """For ``found``: the row's new record (the exact engine's answer); for a screen's
    ``proven``: the row's record (it has no search record)."""
    stage: str = PROVE
    """:data:`PROVE` or :data:`SCREEN`. A screen's verdict is ``proven``, ``feasible`` (the
    program has a point: the row is searched, and its answer is the search's) or ``unproven``
    (searched too); only its ``proven`` stands in for the row's proof."""
    question: str | None = None
    """The fingerprint of the question the row was asked (:attr:`Explainer.question`), so a
    resumed audit can tell a verdict on another question (None: a line an earlier version wrote)."""

    @property
    def final(self) -> bool:
        """The row's proof: a proof step's verdict, or a screen's ``proven``."""
        return self.stage == PROVE or self.outcome == "proven"


def proof_config(config: SolverConfig, seconds: float | None) -> SolverConfig:
    """The exact engine alone (the configuration's own exact phase, else the default one), its
    time limit ``seconds``, under the configuration's termination and seed. No local search
    first: the bulk search has just failed on these rows, so a warm start would cost the search
    again and find nothing (on a depth-6 tree, 0.3 s a row against a few milliseconds)."""
    phase = next((p for p in config.phases if isinstance(p, ExactPhaseConfig)), ExactPhaseConfig())
    if seconds is not None:
        phase = phase.model_copy(update={"time_limit_seconds": seconds})
    return config.model_copy(update={"phases": (phase,)})


def screen_config(config: SolverConfig, seconds: float | None) -> SolverConfig:
    """:func:`proof_config` asked for feasibility alone: any point within the rules and the goal
    ends the program (a relative gap of 1: the first incumbent is within it) and no second,
    lexicographic program; the time limit is :data:`SCREEN_SECONDS` or ``seconds`` when smaller.
    The proof of infeasibility is the proof step's, the same program's."""
    limit = SCREEN_SECONDS if seconds is None else min(seconds, SCREEN_SECONDS)
    proof = proof_config(config, limit)
    (phase,) = proof.phases
    assert isinstance(phase, ExactPhaseConfig)
    return proof.model_copy(
        update={"phases": (phase.model_copy(update={"relative_gap": 1.0, "lexicographic": False}),)}
    )


def prove_row(
    explainer: Explainer,
    row_id: Any,
    row: dict[str, Any],
    seed: int,
    config: SolverConfig,
    *,
    stage: str = PROVE,
    stop: Callable[[], bool] | None = None,
) -> Proof:
    """Put one row to the exact engine, under the same problem its search had (the row's own,
    with its trust region): ``proven`` only when the engine reports the program infeasible and
    proven so. With ``stage`` :data:`SCREEN` a valid point is ``feasible`` (its answer is not
    kept: the row's answer is its search's) and a proven row carries its record. ``stop`` (a
    deadline's check) is asked every :data:`~counterplan.solver.batch.block.STOP_POLL_SECONDS`
    (as the batch's threads path asks it) while the proof runs: once it
    says stop, the proof ends at its solver's next step and :class:`ProofStoppedError` is
    raised (a proof cut short is no verdict to keep). The verdict holds the question asked."""
    proof = _proof(explainer, row_id, row, seed, config, stage=stage, stop=stop)
    return replace(proof, question=explainer.question)


def _proof(
    explainer: Explainer,
    row_id: Any,
    row: dict[str, Any],
    seed: int,
    config: SolverConfig,
    *,
    stage: str,
    stop: Callable[[], bool] | None,
) -> Proof:
    started = time.perf_counter()
    try:
        problem = explainer.problem(row)
        why = not_encodable(problem, exact_backend(config))
        if why is not None:
            return Proof(row_id, "unproven", "not encodable: " + one_line(why)[:200], stage=stage)
        solver = CounterfactualSolver(problem, config, seed, 1)
        with stop_watched(solver, stop) as stopped:
            result = solver.solve()
        if stopped.is_set():
            raise ProofStoppedError(row_id)
    except ProofStoppedError:
        raise
    except Exception as exc:  # a failing model or program: no proof, the audit goes on
        return Proof(row_id, "unproven", one_line(f"error: {type(exc).__name__}: {exc}")[:300], stage=stage)
    record = {**record_of(row_id, result, seed, time.perf_counter() - started), "question": explainer.question}
    if result.valid and result.feasible:  # an answer that breaks a rule is no recourse
        return Proof(row_id, "feasible", "", stage=stage) if stage == SCREEN else Proof(row_id, "found", "", record)
    outcome, reason = _verdict(result)
    keep = record if stage == SCREEN and outcome == "proven" else None
    return Proof(row_id, outcome, reason, keep, stage)


class ProofStoppedError(Exception):
    """A proof was cut by its audit's stop check (a deadline, a cancel, a shutdown): no verdict."""


def exact_backend(config: SolverConfig) -> Any:
    """The backend of the configuration's exact phase (``auto`` without one)."""
    return next((p.backend for p in config.phases if isinstance(p, ExactPhaseConfig)), "auto")


def _verdict(result: CounterfactualResult) -> tuple[str, str]:
    """``proven`` for a proven infeasible program; else ``unproven`` and why."""
    exact = result.statistics.exact
    if exact is not None and exact.status == "infeasible" and exact.proven:
        return "proven", ""
    if exact is None:
        return "unproven", "the exact engine did not run"
    if result.stopped_early or "limit" in exact.reason.lower() or "limit" in result.statistics.termination_reason:
        return "unproven", "time limit"
    detail = f": {one_line(exact.reason)[:200]}" if exact.reason else ""
    return "unproven", f"exact engine: {exact.status}{detail}"


def append_proof(path: Path, proof: Proof) -> None:
    line = json.dumps(
        {
            "row_id": plain(proof.row_id),
            "outcome": proof.outcome,
            "reason": proof.reason,
            "record": _plain_record(proof.record),
            "stage": proof.stage,
            "question": proof.question,
        }
    )
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")
        handle.flush()


def read_proofs(path: Path) -> dict[str, Proof]:
    """The proofs an earlier run wrote; a line a crash tore is ignored (that row is proved again)."""
    proofs: dict[str, Proof] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            continue
        proofs[id_text(item["row_id"])] = Proof(
            item["row_id"],
            item["outcome"],
            item["reason"],
            item.get("record"),
            item.get("stage", PROVE),
            item.get("question"),
        )
    return proofs


def plain(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    return value


def _plain_record(record: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if record is None else {k: plain(v) for k, v in record.items()}


def prove_rows(
    explainer: Explainer,
    items: Sequence[Item],
    config: SolverConfig,
    *,
    workers: int = 1,
    on_proof: Callable[[Proof], None],
    stage: str = PROVE,
    stop: Callable[[], bool] | None = None,
) -> None:
    """Prove ``items`` (in this process, or on ``workers`` processes); each verdict goes to
    ``on_proof`` as it arrives (in this thread). ``stage`` and ``stop``: as for :func:`prove_row`;
    on the workers, a stop ends them and the proofs they run
    (:func:`~counterplan.solver.batch.run.gather`), and :class:`ProofStoppedError` is raised."""
    if workers <= 1 or len(items) <= 1:
        for row_id, row, seed in items:
            on_proof(prove_row(explainer, row_id, row, seed, config, stage=stage, stop=stop))
        return
    tasks = [(list(items[i : i + ROWS_PER_TASK]), stage) for i in range(0, len(items), ROWS_PER_TASK)]
    pool = ProcessPoolExecutor(max_workers=workers, initializer=_start_worker, initargs=(explainer, config))

    def each(proofs: list[Proof]) -> None:
        for proof in proofs:
            on_proof(proof)

    if gather(pool, [pool.submit(_prove_task, *task) for task in tasks], each, stop):
        raise ProofStoppedError("the stop check said stop: the workers' proofs under way were ended")


_WORKER: tuple[Explainer, SolverConfig] | None = None


def _start_worker(explainer: Explainer, config: SolverConfig) -> None:
    global _WORKER  # noqa: PLW0603 - one explainer per worker process, sent once
    _WORKER = (explainer, config)
    worker_started()


def _prove_task(items: list[Item], stage: str) -> list[Proof]:
    assert _WORKER is not None
    explainer, config = _WORKER
    return [prove_row(explainer, row_id, row, seed, config, stage=stage) for row_id, row, seed in items]
