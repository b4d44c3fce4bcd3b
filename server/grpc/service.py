"""The gRPC servicer: a thin layer over the solver manager, which knows nothing of gRPC.

Each call is checked at the boundary (INVALID_ARGUMENT with every bad field), admitted under
the concurrency limit (RESOURCE_EXHAUSTED beyond it), capped by the client's deadline and the
server's maximum solve time, and terminated early when the client goes away. One JSON log
line per call records its request id, model, duration, final score and status.

Dynamic batching: every served model has one :class:`~counterplan.solver.batch.shared_calls.SharedCalls`,
and every solve of that model (Explain, ExplainStream, each ExplainBatch instance) is its member
while it runs, so solves running at the same time merge their model calls into one (a call
costs nearly the same for 1 row as for thousands). Each solve still gets the model's answer for
its own rows, so its answer does not change. ``dynamic_batching_max_wait_ms`` bounds how long a
call waits for the others; 0 turns it off.

The checks and the start of a solve (:mod:`counterplan.server.grpc.explain_steps`) raise a
:class:`~counterplan.server.grpc.refusal.Refusal`; a unary or streaming call ends with it, an
ExplainBatch instance (:mod:`counterplan.server.grpc.batch_stream`) gets it as its own result, so both
say the same about the same request. Admission (:mod:`counterplan.server.grpc.admission`) is one object
every method is handed, so the method modules import it, not each other: this module composes them.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import grpc
import structlog

from counterplan.server._generated.counterplan.v1 import counterplan_pb2 as pb, counterplan_pb2_grpc as pb_grpc
from counterplan.server.grpc.admission import Admission
from counterplan.server.grpc.audit_service import AuditCalls
from counterplan.server.grpc.batch_stream import BatchStream
from counterplan.server.grpc.convert import (
    BadRequestError,
    CheckedRequest,
    event_message,
    model_message,
    result_message,
)
from counterplan.server.grpc.explain_steps import ExplainSteps
from counterplan.server.grpc.plan_service import PlanCalls
from counterplan.server.grpc.refusal import Refusal, bad_request, no_model, refused
from counterplan.server.grpc.request_log import log_request
from counterplan.server.grpc.settings import ServerSettings
from counterplan.server.grpc.throttle import throttled
from counterplan.server.registry.registry import ModelRegistry, RegisteredModel
from counterplan.solver.batch.shared_calls import SharedCalls, SharedCallStatistics
from counterplan.solver.manager import SolverJob, SolverManager
from counterplan.solver.result import CounterfactualResult

log = structlog.get_logger("counterplan.server")

_DONE = object()


class CounterfactualService(pb_grpc.CounterfactualServiceServicer):
    """Explains predictions of the registry's models.

    It is composed of parts that know nothing of one another's modules: the :class:`Admission`
    (slots, memory, the deadline rule, shutdown), the :class:`ExplainSteps` every explain goes
    through, one :class:`BatchStream` per ExplainBatch call, the :class:`PlanCalls` and the
    :class:`AuditCalls`.
    """

    def __init__(self, registry: ModelRegistry, settings: ServerSettings) -> None:
        self.registry = registry
        self.settings = settings
        self.manager = SolverManager(max_workers=settings.max_concurrent_solves)
        self.admission = Admission(settings)
        wait = settings.dynamic_batching_max_wait
        self.shared_calls: dict[str, SharedCalls] = (
            {} if wait is None else {m.id: SharedCalls(m.adapter, max_wait=wait) for m in registry.list()}
        )
        """Per model id, the model calls its running solves share (empty: dynamic batching off)."""
        self.steps = ExplainSteps(registry, settings, self.admission, self.manager, self.shared_calls)
        self.plans = PlanCalls(registry, settings, self.admission, self.manager)
        self.audits = AuditCalls(registry, settings, self.admission)
        self._streams: set[BatchStream] = set()
        self._streams_lock = threading.Lock()
        self._stream_slots = threading.BoundedSemaphore(settings.max_batch_streams)

    # -- models -------------------------------------------------------------------------------
    def ListModels(self, request: pb.ListModelsRequest, context: grpc.ServicerContext) -> pb.ListModelsResponse:
        """Every served model."""
        return pb.ListModelsResponse(
            models=[
                pb.ModelSummary(id=m.id, version=m.version, description=m.description) for m in self.registry.list()
            ]
        )

    def GetModel(self, request: pb.GetModelRequest, context: grpc.ServicerContext) -> pb.Model:
        """One model's feature schema."""
        return model_message(self._model(request.model_id, context))

    # -- explaining ---------------------------------------------------------------------------
    def Explain(self, request: pb.ExplainRequest, context: grpc.ServicerContext) -> pb.ExplainResponse:
        """Solve and return the final result."""
        request_id = request.request_id or uuid.uuid4().hex
        started = time.perf_counter()
        outcome: dict[str, Any] = {"status": "OK", "request_id": request_id}
        try:
            model, checked, ticket = self._admit(request, context, outcome)
            try:
                job = self._submit(request_id, model, checked, context, None, outcome=outcome)
                result = self._wait(job, context, outcome)
            finally:
                self.admission.release_slot(ticket)
            outcome["score"] = result.score
            outcome["stopped_early"] = result.stopped_early
            return result_message(result, request_id, model.id)
        finally:
            log_request("Explain", request_id, request.model_id, started, outcome)

    def ExplainStream(
        self, request: pb.ExplainRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.ExplainStreamResponse]:
        """Solve, streaming throttled new-best messages, then exactly one FINAL message."""
        request_id = request.request_id or uuid.uuid4().hex
        started = time.perf_counter()
        outcome: dict[str, Any] = {"status": "OK", "request_id": request_id}
        try:
            model, checked, ticket = self._admit(request, context, outcome)
            events: queue.Queue[Any] = queue.Queue()
            job: SolverJob | None = None
            try:
                job = self._submit(request_id, model, checked, context, events.put, outcome=outcome)
                threading.Thread(target=self._forward_end, args=(job, events), daemon=True).start()
                sequence = 0
                for event in throttled(events, 1.0 / self.settings.stream_max_per_second, _DONE):
                    sequence += 1
                    yield event_message(event, sequence)
                result = self._wait(job, context, outcome)
            except GeneratorExit:  # the client went away mid-stream: stop the solve now
                outcome["status"] = "CANCELLED"
                raise
            finally:
                if job is not None:
                    job.terminate_early()
                    self.manager.forget(job.job_id)
                self.admission.release_slot(ticket)
            outcome["score"] = result.score
            outcome["stopped_early"] = result.stopped_early
            final = result_message(result, request_id, model.id)
            yield pb.ExplainStreamResponse(
                sequence_id=sequence + 1,
                stage=pb.STAGE_FINAL,
                score=final.score,
                proposed=final.proposed,
                time_spent_seconds=final.statistics.time_spent_seconds,
                step_index=final.statistics.steps,
                result=final,
            )
        finally:
            log_request("ExplainStream", request_id, request.model_id, started, outcome)

    def ExplainBatch(
        self, request_iterator: Iterator[pb.ExplainBatchRequest], context: grpc.ServicerContext
    ) -> Iterator[pb.ExplainBatchResponse]:
        """Solve a stream of instances concurrently; one result per instance as it finishes."""
        if not self._stream_slots.acquire(blocking=False):  # each open stream holds a worker thread
            log.info("stream", method="ExplainBatch", status="RESOURCE_EXHAUSTED")
            limit = self.settings.max_batch_streams
            refused(grpc.StatusCode.RESOURCE_EXHAUSTED, f"{limit} ExplainBatch streams are open; retry later").abort(
                context
            )
        stream = BatchStream(self.steps, self.admission, self.settings, request_iterator, context)
        with self._streams_lock:
            self._streams.add(stream)
        try:
            yield from stream.run()
        finally:
            with self._streams_lock:
                self._streams.discard(stream)
            self._stream_slots.release()

    # -- action plans (counterplan.server.grpc.plan_service) ------------------------------------------------------
    def Plan(self, request: pb.PlanRequest, context: grpc.ServicerContext) -> pb.PlanResponse:
        """The Pareto front of action plans for one instance."""
        return self.plans.plan(request, context)

    def PlanStream(self, request: pb.PlanRequest, context: grpc.ServicerContext) -> Iterator[pb.PlanStreamResponse]:
        """The front after each generation that changed it (throttled), then the FINAL result."""
        yield from self.plans.plan_stream(request, context)

    # -- audits (counterplan.server.grpc.audit_service) ----------------------------------------
    def Audit(self, request: pb.AuditRequest, context: grpc.ServicerContext) -> Iterator[pb.AuditResponse]:
        """A recourse audit over many rows: progress (throttled), then the FINAL report."""
        yield from self.audits.audit(request, context)

    def batching_statistics(self) -> dict[str, SharedCallStatistics]:
        """Per model id, what dynamic batching did: model calls, solves' requests and rows
        (``requests_per_call`` above 1: calls were shared). Empty when it is off."""
        return {model_id: calls.statistics for model_id, calls in self.shared_calls.items()}

    @property
    def open_batch_streams(self) -> int:
        """ExplainBatch streams open now."""
        with self._streams_lock:
            return len(self._streams)

    # -- helpers ------------------------------------------------------------------------------
    def _model(self, model_id: str, context: grpc.ServicerContext) -> RegisteredModel:
        if not model_id:
            bad_request(BadRequestError([("model_id", "required")])).abort(context)
        model = self.registry.get(model_id)
        if model is None:
            no_model(model_id).abort(context)
        return model

    def _admit(
        self, request: pb.ExplainRequest, context: grpc.ServicerContext, outcome: dict[str, Any]
    ) -> tuple[RegisteredModel, CheckedRequest, int]:
        """Check the request and admit it: a solve slot and room for its estimated memory (the
        ticket is released by the caller)."""
        try:
            checked = self.steps.check(request)
            ticket = self.admission.take_slot(checked.estimate)
        except Refusal as refusal:
            outcome["status"] = refusal.code.name
            refusal.abort(context)
        outcome["status"] = "OK"
        return checked.model, checked.request, ticket

    def _submit(
        self,
        request_id: str,
        model: RegisteredModel,
        checked: CheckedRequest,
        context: grpc.ServicerContext,
        listener: Any,
        *,
        outcome: dict[str, Any],
    ) -> SolverJob:
        try:
            job = self.steps.start(request_id, model, checked, context.time_remaining(), listener)
        except Refusal as refusal:  # the caller's finally releases the slot
            outcome["status"] = refusal.code.name  # logged as sent
            refusal.abort(context)
        if not context.add_callback(job.terminate_early):  # the call ended (done, cancelled, deadline)
            job.terminate_early()  # already: no callback runs then
        return job

    def _wait(self, job: SolverJob, context: grpc.ServicerContext, outcome: dict[str, Any]) -> CounterfactualResult:
        """The job's result, or the call ended with the status :meth:`ExplainSteps.result_of` gives."""
        try:
            result = self.steps.result_of(job, outcome.get("request_id", ""))
        except Refusal as refusal:
            outcome["status"] = refusal.code.name
            refusal.abort(context)
        if not context.is_active():
            outcome["status"] = "CANCELLED"
        return result

    def _forward_end(self, job: SolverJob, events: queue.Queue[Any]) -> None:
        """End the stream's messages when the solve ends, or at shutdown's cut (then _wait
        answers with its best so far without waiting for it); a failure is reported by _wait."""
        assert job.future is not None
        self.admission.wait_done(job.future, job.answer_by)
        events.put(_DONE)

    def begin_shutdown(self) -> None:
        """Refuse new solves (UNAVAILABLE) and tell running ones to stop at their next step; each
        then answers with its best so far (a unary result, or a stream's FINAL message; a plan
        search, a job of the manager too, with its front so far)."""
        self.admission.begin_shutdown()
        with self._streams_lock:
            streams = list(self._streams)
        for stream in streams:  # they read no more instances and end once the running ones answer
            stream.shutdown()
        for job in self.manager.list_jobs():
            with contextlib.suppress(KeyError):  # it finished meanwhile
                self.manager.terminate_early(job.job_id)

    def cut_calls(self) -> None:
        """Shutdown's grace is nearly up: every call still waiting for its solve (a solve inside a
        model call) answers now with its best so far, and the solve is abandoned (see
        :class:`~counterplan.server.grpc.admission.Admission`)."""
        self.admission.cut_calls()

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no solve holds a slot, at most ``timeout`` seconds; True when idle."""
        return self.admission.wait_idle(timeout)

    def shutdown(self) -> None:
        """Terminate running solves early and stop the pool; log what dynamic batching did."""
        self.manager.shutdown(wait=False)
        for model_id, stats in self.batching_statistics().items():
            if stats.calls:
                log.info(
                    "dynamic batching",
                    model_id=model_id,
                    model_calls=stats.calls,
                    requests=stats.requests,
                    rows=stats.rows,
                    requests_per_call=round(stats.requests_per_call, 2),
                    model_seconds=round(stats.seconds, 3),
                )
