"""The gRPC servicer: a thin layer over the solver manager, which knows nothing of gRPC.

Each call is checked at the boundary (INVALID_ARGUMENT with every bad field), admitted under
the concurrency limit (RESOURCE_EXHAUSTED beyond it), capped by the client's deadline and the
server's maximum solve time, and terminated early when the client goes away. One JSON log
line per call records its request id, model, duration, final score and status.
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

from planning.errors import InvalidInputError, ModelAdapterError, ModelCallError, one_line
from server._generated.counterplan.v1 import counterplan_pb2 as pb
from server._generated.counterplan.v1 import counterplan_pb2_grpc as pb_grpc
from server.convert import (
    BadRequestError,
    CheckedRequest,
    check_request,
    event_message,
    model_message,
    result_message,
)
from server.registry import ModelRegistry, RegisteredModel
from server.settings import ServerSettings
from server.status import abort, abort_bad_request
from solver.config import TerminationConfig
from solver.manager import SolverJob, SolverManager
from solver.result import BestSolutionEvent, CounterfactualResult

log = structlog.get_logger("counterplan.server")

_MIN_SOLVE_SECONDS = 0.01
_DONE = object()


class CounterfactualService(pb_grpc.CounterfactualServiceServicer):
    """Explains predictions of the registry's models."""

    def __init__(self, registry: ModelRegistry, settings: ServerSettings) -> None:
        self.registry = registry
        self.settings = settings
        self.manager = SolverManager(max_workers=settings.max_concurrent_solves)
        self._slots = threading.BoundedSemaphore(settings.max_concurrent_solves)
        self._active = 0
        self._idle = threading.Condition()
        self._closing = threading.Event()

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
            model, checked = self._admit(request, context, outcome)
            try:
                job = self._submit(request_id, model, checked, context, None, outcome=outcome)
                result = self._wait(job, context, outcome)
            finally:
                self._release_slot()
            outcome["score"] = result.score
            return result_message(result, request_id, model.id)
        finally:
            self._log("Explain", request_id, request.model_id, started, outcome)

    def ExplainStream(
        self, request: pb.ExplainRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.ExplainStreamResponse]:
        """Solve, streaming throttled new-best messages, then exactly one FINAL message."""
        request_id = request.request_id or uuid.uuid4().hex
        started = time.perf_counter()
        outcome: dict[str, Any] = {"status": "OK", "request_id": request_id}
        try:
            model, checked = self._admit(request, context, outcome)
            events: queue.Queue[Any] = queue.Queue()
            job: SolverJob | None = None
            try:
                job = self._submit(request_id, model, checked, context, events.put, outcome=outcome)
                threading.Thread(target=self._forward_end, args=(job, events), daemon=True).start()
                sequence = 0
                interval = 1.0 / self.settings.stream_max_per_second
                last_sent = 0.0
                pending: BestSolutionEvent | None = None
                while True:
                    timeout = None if pending is None else max(interval - (time.perf_counter() - last_sent), 0.0)
                    try:
                        item = events.get(timeout=timeout)
                    except queue.Empty:
                        item = None
                    if isinstance(item, BestSolutionEvent):
                        pending = item
                    if pending is not None and (item is _DONE or time.perf_counter() - last_sent >= interval):
                        sequence += 1
                        yield event_message(pending, sequence)
                        last_sent, pending = time.perf_counter(), None
                    if item is _DONE:
                        break
                result = self._wait(job, context, outcome)
            except GeneratorExit:  # the client went away mid-stream: stop the solve now
                outcome["status"] = "CANCELLED"
                raise
            finally:
                if job is not None:
                    job.terminate_early()
                    self.manager.forget(job.job_id)
                self._release_slot()
            outcome["score"] = result.score
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
            self._log("ExplainStream", request_id, request.model_id, started, outcome)

    # -- helpers ------------------------------------------------------------------------------
    def _model(self, model_id: str, context: grpc.ServicerContext) -> RegisteredModel:
        if not model_id:
            abort_bad_request(context, BadRequestError([("model_id", "required")]))
        model = self.registry.get(model_id)
        if model is None:
            abort(context, grpc.StatusCode.NOT_FOUND, f"no model {model_id!r}; see ListModels")
        return model

    def _admit(
        self, request: pb.ExplainRequest, context: grpc.ServicerContext, outcome: dict[str, Any]
    ) -> tuple[RegisteredModel, CheckedRequest]:
        """Check the request and take a solve slot (released by the caller)."""
        outcome["status"] = "NOT_FOUND" if request.model_id else "INVALID_ARGUMENT"
        model = self._model(request.model_id, context)
        outcome["status"] = "INVALID_ARGUMENT"
        try:
            checked = check_request(request, model, self.settings.max_features)
        except BadRequestError as exc:
            abort_bad_request(context, exc)
        if self._closing.is_set():
            outcome["status"] = "UNAVAILABLE"
            abort(context, grpc.StatusCode.UNAVAILABLE, "the server is shutting down; retry on another instance")
        if not self._take_slot():
            outcome["status"] = "RESOURCE_EXHAUSTED"
            abort(
                context,
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"{self.settings.max_concurrent_solves} solves are running; retry later",
            )
        outcome["status"] = "OK"
        return model, checked

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
        limit = self.settings.max_solve_seconds
        remaining = context.time_remaining()
        if remaining is not None:
            limit = min(limit, remaining * 0.9 - 0.05)
        if limit < _MIN_SOLVE_SECONDS:  # the caller's finally releases the slot
            outcome["status"] = "DEADLINE_EXCEEDED"  # logged as sent
            abort(context, grpc.StatusCode.DEADLINE_EXCEEDED, "the deadline leaves no time to solve")
        config = checked.config.model_copy(
            update={
                "termination": TerminationConfig(spent_limit_seconds=limit, children=(checked.config.termination,)),
                "model_threads": self.settings.threads_for(checked.config.model_threads),
            }
        )
        problem = model.problem(
            checked.features, checked.goals, checked.distance, checked.max_changed_features, checked.plausible
        )
        job = self.manager.submit(
            problem,
            config,
            seed=checked.seed,
            listener=listener,
            job_id=f"{request_id}-{uuid.uuid4().hex[:8]}",
            num_counterfactuals=checked.num_counterfactuals,
        )
        context.add_callback(job.terminate_early)  # the call ended (done, cancelled, deadline)
        return job

    def _wait(self, job: SolverJob, context: grpc.ServicerContext, outcome: dict[str, Any]) -> CounterfactualResult:
        """The job's result, or an honest status: a model's failure (its text stays in the log
        under the request id, it may hold paths or secrets), a bad value found while solving,
        or our own error (logged with its traceback), never a bare UNKNOWN."""
        request_id = outcome.get("request_id", "")
        try:
            result = job.result()
        except (ModelCallError, ModelAdapterError) as exc:
            outcome["status"] = "INTERNAL"
            log.warning("model failed", request_id=request_id, error=one_line(str(exc)))
            abort(
                context,
                grpc.StatusCode.INTERNAL,
                f"the model failed on this request (request id {request_id}); its message is in the server log",
            )
        except InvalidInputError as exc:
            outcome["status"] = "INVALID_ARGUMENT"
            abort(context, grpc.StatusCode.INVALID_ARGUMENT, one_line(str(exc)))
        except Exception:
            outcome["status"] = "INTERNAL"
            log.exception("internal error", request_id=request_id)
            abort(context, grpc.StatusCode.INTERNAL, f"internal error (request id {request_id}); see the server log")
        finally:
            self.manager.forget(job.job_id)
        if not context.is_active():
            outcome["status"] = "CANCELLED"
        return result

    def _forward_end(self, job: SolverJob, events: queue.Queue[Any]) -> None:
        with contextlib.suppress(BaseException):  # a failure is reported by _wait on the calling thread
            job.result()
        events.put(_DONE)

    def _log(self, method: str, request_id: str, model_id: str, started: float, outcome: dict[str, Any]) -> None:
        log.info(
            "request",
            method=method,
            request_id=request_id,
            model_id=model_id,
            duration_ms=round((time.perf_counter() - started) * 1e3, 2),
            score=outcome.get("score"),
            status=outcome.get("status", "UNKNOWN"),
        )

    def _take_slot(self) -> bool:
        if not self._slots.acquire(blocking=False):
            return False
        with self._idle:
            self._active += 1
        return True

    def _release_slot(self) -> None:
        self._slots.release()
        with self._idle:
            self._active -= 1
            self._idle.notify_all()

    def begin_shutdown(self) -> None:
        """Refuse new solves (UNAVAILABLE) and tell running ones to stop at their next step; each
        then answers with its best so far (a unary result, or a stream's FINAL message)."""
        self._closing.set()
        for job in self.manager.list_jobs():
            self.manager.terminate_early(job.job_id)

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no solve holds a slot, at most ``timeout`` seconds; True when idle."""
        with self._idle:
            return self._idle.wait_for(lambda: self._active == 0, timeout=timeout)

    def shutdown(self) -> None:
        """Terminate running solves early and stop the pool."""
        self.manager.shutdown(wait=False)
