"""The ``Audit`` call: a recourse audit over many rows, streamed as it goes, over gRPC.

A thin layer over :func:`counterplan.solver.audit.runner.run_audit` (the audit itself, its search,
proofs and figures, is the solver's): the request is checked at the boundary
(:mod:`counterplan.server.grpc.audit_convert`: INVALID_ARGUMENT naming every bad field, every size
bounded), admitted as one solve (a slot with room for its estimated memory, RESOURCE_EXHAUSTED
beyond them), and run in a thread of its own within the server's maximum solve time and the
client's deadline (:meth:`Admission.time_limit`: each row's search and each proof is capped by it
too). The audit asks its stop check between rows (after each bulk record, before each proof),
before every model call of a block of rows searched together, and every
:data:`~counterplan.solver.batch.block.STOP_POLL_SECONDS` while rows of the threads path run
(each row's time limit is the audit's, so a row started late must be stopped): the time limit
passing, the call ending (cancel, deadline) or the server shutting down stop it there, and the FINAL message then
carries the report over the rows done, ``partial``, as a solve stopped early answers with its best
so far. Only when not even that is ready by the call's :meth:`Admission.answer_by` (a row or a
model call longer than the time left) does the call end with DEADLINE_EXCEEDED (UNAVAILABLE at
shutdown's cut); the audit then stops at its next row and gives its slot back. Progress messages
(rows done, rows with recourse and proven without so far) are throttled as every stream's are.
The bulk engine runs in this process (one worker, no Ray: the server's cores are shared by its
slots), and its model calls are its own, not shared with running solves by dynamic batching.
"""

from __future__ import annotations

import queue
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import grpc
import structlog

from counterplan.server._generated.counterplan.v1 import counterplan_pb2 as pb
from counterplan.server.grpc.admission import MB, Admission, shutting_down
from counterplan.server.grpc.audit_convert import WINDOW_ROWS, CheckedAudit, check_audit_request, result_message
from counterplan.server.grpc.convert import BadRequestError
from counterplan.server.grpc.refusal import Refusal, bad_request, refused, registered_model, solve_failure
from counterplan.server.grpc.request_log import log_request
from counterplan.server.grpc.settings import ServerSettings
from counterplan.server.grpc.throttle import throttled
from counterplan.server.registry.registry import ModelRegistry
from counterplan.solver.audit.report import AuditReport
from counterplan.solver.audit.runner import AuditOptions, run_audit
from counterplan.solver.core.config import TerminationConfig

log = structlog.get_logger("counterplan.server")

_DONE = object()
_MESSAGE_HEADROOM = 64 * 1024
"""Room left in the largest message for the final message's own fields around the report."""


@dataclass
class _Tally:
    """How far an audit is, as its progress messages say (updated from the audit's thread)."""

    stage: str = "search"
    done: int = 0
    total: int = 0
    with_recourse: int = 0
    proven: int = 0

    def message(self) -> pb.AuditProgress:
        return pb.AuditProgress(
            stage=self.stage,
            rows_done=self.done,
            rows_total=self.total,
            with_recourse=self.with_recourse,
            no_recourse_proven=self.proven,
        )


@dataclass
class _AuditRun:
    """One admitted audit: its thread's future, its stop check and why it stopped."""

    checked: CheckedAudit
    request_id: str
    ticket: int
    stop_at: float
    """``time.monotonic()`` when its time limit passes."""
    by_deadline: bool
    """The client's deadline, not the server's maximum, set the time limit."""
    answer_by: float | None
    shutdown: threading.Event
    ended: threading.Event = field(default_factory=threading.Event)
    """The call is over (cancelled, past its deadline) or its answer was given up."""
    future: Future[AuditReport] = field(default_factory=Future)
    events: queue.Queue[Any] = field(default_factory=queue.Queue)
    tally: _Tally = field(default_factory=_Tally)

    started: float = field(default_factory=time.monotonic)
    _last: float | None = None
    _longest: float = 0.0

    def stop(self) -> bool:
        """The audit's stop check, asked between rows, before every model call of a block of
        rows searched together, and now and then while rows of the threads path run: the call
        ended, the server is shutting down, or the next stretch of work (as long as the longest
        since the last check: a model call, a row, or a proof) would end past the time limit. A
        deadline is a promise: no work starts that could not end before it."""
        now = time.monotonic()
        self._longest = max(self._longest, now - (self._last if self._last is not None else self.started))
        self._last = now
        return self.ended.is_set() or self.shutdown.is_set() or now + self._longest >= self.stop_at

    def stopped_by(self) -> str:
        if self.shutdown.is_set():
            return "shutdown"
        if self.ended.is_set():
            return "cancelled"
        return "deadline" if self.by_deadline else "max_solve_seconds"

    def progress(self, stage: str, done: int, total: int) -> None:
        self.tally.stage, self.tally.done, self.tally.total = stage, done, total
        self.events.put(self.tally.message())

    def on_outcome(self, stage: str, outcome: str) -> None:
        if (stage, outcome) in {("search", "ok"), ("prove", "found")}:
            self.tally.with_recourse += 1
        elif outcome == "proven":
            self.tally.proven += 1


class AuditCalls:
    """``Audit`` for the registry's models, admitted by ``admission`` (the one every method uses)."""

    def __init__(self, registry: ModelRegistry, settings: ServerSettings, admission: Admission) -> None:
        self.registry = registry
        self.settings = settings
        self.admission = admission

    def audit(self, request: pb.AuditRequest, context: grpc.ServicerContext) -> Iterator[pb.AuditResponse]:
        """``Audit``: progress messages (throttled), then exactly one FINAL message with the report."""
        request_id = request.request_id or uuid.uuid4().hex
        started = time.perf_counter()
        outcome: dict[str, Any] = {"status": "OK", "request_id": request_id}
        try:
            try:
                run = self._begin(request, request_id, context.time_remaining())
            except Refusal as refusal:
                outcome["status"] = refusal.code.name
                refusal.abort(context)
            if not context.add_callback(run.ended.set):  # the call is over already
                run.ended.set()
            threading.Thread(target=self._forward_end, args=(run,), daemon=True).start()
            sequence = 0
            try:
                for progress in throttled(run.events, 1.0 / self.settings.stream_max_per_second, _DONE):
                    sequence += 1
                    yield pb.AuditResponse(sequence_id=sequence, stage=pb.STAGE_INTERMEDIATE, progress=progress)
                report = self._report(run)
            except Refusal as refusal:
                outcome["status"] = refusal.code.name
                refusal.abort(context)
            except GeneratorExit:  # the client went away mid-stream: the audit stops at its next row
                outcome["status"] = "CANCELLED"
                run.ended.set()
                raise
            outcome["score"] = f"{len(report.with_recourse)} of {report.n_rows} with recourse"
            outcome["stopped_early"] = report.partial
            yield pb.AuditResponse(
                sequence_id=sequence + 1, stage=pb.STAGE_FINAL, result=self._result(run, report, request.model_id)
            )
        finally:
            log_request("Audit", request_id, request.model_id, started, outcome)

    def _begin(self, request: pb.AuditRequest, request_id: str, time_remaining: float | None) -> _AuditRun:
        """Check and admit ``request`` and start its audit; raise :class:`Refusal`."""
        model = registered_model(self.registry, request.model_id)
        try:
            checked = check_audit_request(request, model, self.settings)
        except BadRequestError as exc:
            raise bad_request(exc) from None
        if self.admission.closing:
            raise shutting_down()
        if checked.estimate > self.settings.max_solve_memory_mb * MB:  # it could never fit: not worth a retry
            why = (
                f"the audit would need about {checked.estimate // MB:,} MB (a window of {WINDOW_ROWS} row solves "
                f"and the rows' tables); the server allows {self.settings.max_solve_memory_mb:,} MB"
            )
            rows = "inline.rows" if request.WhichOneof("rows") == "inline" else "selection"
            violations = [
                ("problem.solver.config_json", f"{why}: lower moves_per_step, walkers or grid_size"),
                (rows, f"{why}: audit fewer rows"),
            ]
            raise bad_request(BadRequestError(violations))
        limit = self.admission.time_limit(time_remaining, "audit")
        ticket = self.admission.take_slot(checked.estimate)
        run = _AuditRun(
            checked,
            request_id,
            ticket,
            time.monotonic() + limit,
            by_deadline=limit < self.settings.max_solve_seconds,
            answer_by=self.admission.answer_by(time_remaining),
            shutdown=self.admission.stop_switch(),
        )
        termination = TerminationConfig(spent_limit_seconds=limit, children=(checked.config.termination,))
        config = checked.config.model_copy(
            update={
                "termination": termination,
                "model_threads": self.settings.threads_for(checked.config.model_threads),
            }
        )
        prove_seconds = min(checked.prove_seconds or self.settings.max_solve_seconds, limit)
        options = AuditOptions(
            groups=checked.groups,
            seed=checked.seed,
            engine=checked.engine,  # type: ignore[arg-type]  # checked: one of the choices
            prove=checked.prove,
            prove_seconds=prove_seconds,
            bootstrap=checked.bootstrap,
            confidence=checked.confidence,
            progress=run.progress,
            stop=run.stop,
            on_outcome=run.on_outcome,
        )
        thread = threading.Thread(
            target=self._run,
            args=(run, checked.explainer(config), options),
            name=f"counterplan-audit-{request_id[:8]}",
            daemon=True,
        )
        try:
            thread.start()
        except BaseException:
            self._release(run)
            raise
        return run

    def _run(self, run: _AuditRun, explainer: Any, options: AuditOptions) -> None:
        """The audit's thread: run it, hand its report (or error) to the call, free the slot."""
        try:
            report, _ = run_audit(explainer, run.checked.rows, options)
        except BaseException as exc:  # the call's thread says what it means
            run.future.set_exception(exc)
        else:
            run.future.set_result(report)
        finally:
            self._release(run)

    def _release(self, run: _AuditRun) -> None:
        self.admission.drop_stop_switch(run.shutdown)
        self.admission.release_slot(run.ticket)

    def _forward_end(self, run: _AuditRun) -> None:
        """End the progress messages when the audit ends, or at its answer-by time or shutdown's cut."""
        self.admission.wait_done(run.future, run.answer_by)
        run.events.put(_DONE)

    def _report(self, run: _AuditRun) -> AuditReport:
        """The audit's report, or a :class:`Refusal` saying why there is none."""
        if not run.future.done():  # its answer-by time or shutdown's cut came first
            run.ended.set()  # it stops at its next row and gives its slot back
            log.info("audit answered without its report", request_id=run.request_id)
            if self.admission.cut:
                raise refused(
                    grpc.StatusCode.UNAVAILABLE,
                    "the server shut down before this audit had a report; retry on another instance",
                )
            raise refused(grpc.StatusCode.DEADLINE_EXCEEDED, "the deadline came before this audit had a report")
        try:
            return run.future.result()
        except Exception as exc:
            raise solve_failure(exc, run.request_id, "audit") from None

    def _result(self, run: _AuditRun, report: AuditReport, model_id: str) -> pb.AuditResult:
        """The FINAL message's result, fitted into the server's largest message."""
        result = result_message(report, run.request_id, model_id)
        if report.partial:
            result.stopped_by = run.stopped_by()
        if result.ByteSize() > self.settings.max_message_bytes - _MESSAGE_HEADROOM:
            result.report_json = ""
            result.note = (
                "the report's JSON is left out: it would not fit in the server's largest message "
                f"({self.settings.max_message_bytes:,} bytes); audit fewer rows or group values"
            )
        return result
