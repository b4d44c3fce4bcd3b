"""One flat record per explained row, and the DataFrame of a batch's records.

A record is what a user filters and joins back to the data: the row id, whether the answer is
valid, its score, distance and number of changes, the changes in words, the proposed value of
every feature (columns ``cf_<feature>``), the time and model calls it took, the seed it ran
with, the question it answered (a fingerprint: :func:`question_of`), and, for a row that could
not be explained, the reason (``status`` ``error``) instead of an exception that would end the
whole job.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import pandas as pd
from pydantic import BaseModel

from counterplan.planning.errors import one_line
from counterplan.planning.score import BendableScore
from counterplan.solver.result import CounterfactualResult

RECORD_COLUMNS = (
    "row_id",
    "status",
    "valid",
    "score",
    "distance",
    "changed",
    "changes",
    "seconds",
    "model_calls",
    "seed",
    "question",
    "error",
)
"""The columns of every record, before the proposed values (``cf_<feature>``)."""
STATUSES = ("ok", "not_found", "already_met", "error")
"""A record's ``status``: a valid answer, none found, the row meets its goal already, or an error."""
PROPOSED_PREFIX = "cf_"
"""Prefix of the proposed-value columns."""
MAX_ERROR_CHARS = 300
"""An error row's reason is cut to this length (it may quote the model's own message)."""


QUESTION_CHARS = 16
"""Hex characters of a question's fingerprint (64 bits: two questions share one by chance about
once in 10^19)."""


def question_of(spec: BaseModel, config: BaseModel, engine: Any, answers: int) -> str:
    """The fingerprint of a batch's question: its spec (goals, rules, distance), its solver
    configuration but the seed (each record holds its row's own), its engine and the number of
    answers asked. Two runs whose records hold the same one asked every row the same; a resumed
    job of another (a changed ``--goal``, ``--immutable``, ``--config``) would append answers to
    another question, an output no run gives."""
    digest = hashlib.sha256()
    digest.update(spec.model_dump_json().encode())
    digest.update(config.model_copy(update={"random_seed": 0}).model_dump_json().encode())
    digest.update(repr((str(engine), int(answers))).encode())
    return digest.hexdigest()[:QUESTION_CHARS]


def batch_question(question: str, *, vectorised: bool) -> str:
    """The question a batch's records hold: ``question`` (the explainer's, :func:`question_of`) for
    a batch searched by the vectorised engine (the default), and for one on the threads path
    (``vectorised=False``, ``--batch-engine threads``) that question marked with the path. A row's
    answer differs between them (the vectorised engine searches otherwise), so a job resumed on
    the other path appended answers of another search to an output, which no run gives, without
    a word."""
    if vectorised:
        return question
    return hashlib.sha256(f"{question}/threads".encode()).hexdigest()[:QUESTION_CHARS]


def record_of(row_id: Any, result: CounterfactualResult, seed: int, seconds: float) -> dict[str, Any]:
    """The record of a solved row."""
    record: dict[str, Any] = {
        "row_id": row_id,
        "status": "already_met" if result.already_met else ("ok" if result.valid else "not_found"),
        "valid": bool(result.valid),
        "score": result.score,
        "distance": -float(result.score_levels[3]) + 0.0,
        "changed": len(result.changes),
        "changes": "; ".join(f"{c.feature}: {c.original} -> {c.proposed}" for c in result.changes),
        "seconds": seconds,
        "model_calls": result.statistics.model_call_count,
        "seed": seed,
        "error": _note(result),
    }
    for name, value in result.proposed.items():
        record[PROPOSED_PREFIX + name] = value
    return record


def _note(result: CounterfactualResult) -> str | None:
    """A record's note: for an ``ok`` row whose answer reaches the goal only by breaking a rule
    (:func:`breaks_a_rule`), which rules (it had none: only its score said so); for a
    ``not_found`` row, the model's failure, or that the search was stopped (a time limit or a
    stop request) before it found an answer, so such a row does not read as a proof that none
    exists; None for an answer within the rules or a search that ended by itself."""
    if result.already_met:
        return None
    if result.valid:
        return None if result.feasible or result.note is None else one_line(result.note)
    if result.failure:
        return result.failure
    if result.stopped_early:
        return one_line(f"stopped before a valid answer was found ({result.statistics.termination_reason})")
    return None


def breaks_a_rule(status: str, score: Any) -> bool:
    """Whether a record of ``status`` ``ok`` holds an answer that reaches the goal only by breaking
    a rule (an immutable feature, the most features allowed to change, a monotone direction...:
    its score's hard levels are not all 0). The search returns such an answer when it finds none
    within the rules; its status is ``ok`` (the goal is met), but it is no recourse: the summary
    counts it apart (:mod:`~counterplan.solver.batch.summary`), and the audit sends its row to the
    exact engine as one without an answer."""
    return status == "ok" and isinstance(score, str) and not BendableScore.parse(score).is_feasible


def error_record(row_id: Any, error: BaseException, seed: int, seconds: float) -> dict[str, Any]:
    """The record of a row that could not be explained, with the reason in one line."""
    reason = one_line(f"{type(error).__name__}: {error}")
    if len(reason) > MAX_ERROR_CHARS:
        reason = reason[: MAX_ERROR_CHARS - 3] + "..."
    return {
        "row_id": row_id,
        "status": "error",
        "valid": False,
        "score": None,
        "distance": float("nan"),
        "changed": 0,
        "changes": "",
        "seconds": seconds,
        "model_calls": 0,
        "seed": seed,
        "error": reason,
    }


def records_frame(records: Sequence[dict[str, Any]], features: Sequence[str]) -> pd.DataFrame:
    """The records as a DataFrame: the fixed columns, then one ``cf_`` column per feature."""
    columns = [*RECORD_COLUMNS, *(PROPOSED_PREFIX + f for f in features)]
    frame = pd.DataFrame.from_records(list(records), columns=columns)
    frame["valid"] = frame["valid"].astype(bool)
    for name in ("changed", "model_calls", "seed"):
        frame[name] = frame[name].astype("int64")
    for name in ("distance", "seconds"):
        frame[name] = frame[name].astype("float64")
    for feature in features:  # numbers as numbers where every value is one (errors leave gaps)
        column = frame[PROPOSED_PREFIX + feature]
        numeric = pd.to_numeric(column, errors="coerce")
        if numeric.notna().sum() == column.notna().sum() and not column.map(lambda v: isinstance(v, str)).any():
            frame[PROPOSED_PREFIX + feature] = numeric
    return frame
