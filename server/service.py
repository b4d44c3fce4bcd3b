"""The gRPC servicer: a thin layer over the solver manager, which knows nothing of gRPC.

Each call is checked at the boundary (INVALID_ARGUMENT with every bad field), admitted under
the concurrency limit (RESOURCE_EXHAUSTED beyond it), capped by the client's deadline and the
server's maximum solve time, and terminated early when the client goes away. One JSON log
line per call records its request id, model, duration, final score and status.
"""

from __future__ import annotations

import contextlib
import itertools
import queue
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
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
from server.status import abort, abort_bad_request, abort_retry_later
from solver.core.budget import estimate_bytes
from solver.core.config import TerminationConfig
from solver.core.result import BestSolutionEvent, CounterfactualResult
from solver.manager import SolverJob, SolverManager

log = structlog.get_logger("counterplan.server")

_MIN_SOLVE_SECONDS = 0.01
_MIN_RETRY_SECONDS = 0.1
_MB = 1024 * 1024
_DONE = object()


@dataclass(frozen=True)
class _Admitted:
    """A running solve's share: its estimated memory, and when its time limit ends it at the latest."""

    estimate: int
    ends_at: float


def _without_model_text(result: CounterfactualResult, request_id: str) -> CounterfactualResult:
    """The result with the model's own failure message (it may hold paths or secrets) replaced by
    a pointer to the server log, where it is written under the request id."""
    if result.failure is None:
        return result
    log.warning("model failed on candidates", request_id=request_id, error=one_line(result.failure))
    return result.model_copy(
        update={"failure": f"the model failed (request id {request_id}); its message is in the server log"}
    )


class CounterfactualService(pb_grpc.CounterfactualServiceServicer):
    """Explains predictions of the registry's models."""

    def __init__(self, registry: ModelRegistry, settings: ServerSettings) -> None:
        self.registry = registry
        self.settings = settings
        self.manager = SolverManager(max_workers=settings.max_concurrent_solves)
        self._running: dict[int, _Admitted] = {}
        self._tickets = itertools.count()
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
            model, checked, ticket = self._admit(request, context, outcome)
            try:
                job = self._submit(request_id, model, checked, context, None, outcome=outcome)
                result = self._wait(job, context, outcome)
            finally:
                self._release_slot(ticket)
            outcome["score"] = result.score
            return result_message(_without_model_text(result, request_id), request_id, model.id)
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
            model, checked, ticket = self._admit(request, context, outcome)
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
                self._release_slot(ticket)
            outcome["score"] = result.score
            final = result_message(_without_model_text(result, request_id), request_id, model.id)
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
    ) -> tuple[RegisteredModel, CheckedRequest, int]:
        """Check the request and admit it: a solve slot and room for its estimated memory (the
        ticket is released by the caller)."""
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
        space_features = len(checked.features)
        mutable = sum(f.mutable for f in checked.features)
        estimate = estimate_bytes(checked.config, space_features, mutable, several=checked.num_counterfactuals > 1)
        budget = self.settings.max_solve_memory_mb * _MB
        if estimate > budget:
            abort_bad_request(
                context,
                BadRequestError(
                    [
                        (
                            "solver.config_json",
                            f"the solve would need about {estimate // _MB:,} MB; the server allows "
                            f"{self.settings.max_solve_memory_mb:,} MB: lower moves_per_step, walkers or grid_size",
                        )
                    ]
                ),
            )
        ticket, why, retry_after = self._take_slot(estimate)
        if ticket is None:
            outcome["status"] = "RESOURCE_EXHAUSTED"
            abort_retry_later(context, f"{why}; retry in {retry_after:.1f} s", retry_after)
        outcome["status"] = "OK"
        return model, checked, ticket

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
        try:
            problem = model.problem(
                checked.features,
                checked.goals,
                checked.distance,
                checked.max_changed_features,
                checked.plausible,
                trust_region=checked.trust_region,
            )
            job = self._start(problem, config, checked, request_id, listener)
        except InvalidInputError as exc:  # the engine choice, checked against the problem
            outcome["status"] = "INVALID_ARGUMENT"
            field = "solver.engine_choice" if exc.field == "engine" else exc.field
            abort_bad_request(context, BadRequestError([(field, one_line(exc.problem))]))
        context.add_callback(job.terminate_early)  # the call ended (done, cancelled, deadline)
        return job

    def _start(self, problem: Any, config: Any, checked: CheckedRequest, request_id: str, listener: Any) -> SolverJob:
        return self.manager.submit(
            problem,
            config,
            seed=checked.seed,
            listener=listener,
            job_id=f"{request_id}-{uuid.uuid4().hex[:8]}",
            num_counterfactuals=checked.num_counterfactuals,
            engine=checked.engine,  # type: ignore[arg-type]  # checked: one of the choices
        )

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

    def _take_slot(self, estimate: int) -> tuple[int | None, str, float]:
        """A ticket when a solve slot is free and ``estimate`` bytes fit beside the running solves;
        else why not and, as a retry hint, when the first running solve must end."""
        now = time.monotonic()
        with self._idle:
            running = list(self._running.values())
            full = len(running) >= self.settings.max_concurrent_solves
            used = sum(a.estimate for a in running)
            if full or used + estimate > self.settings.max_solve_memory_mb * _MB:
                why = (
                    f"{len(running)} solves are running"
                    if full
                    else f"the running solves hold about {used // _MB:,} of {self.settings.max_solve_memory_mb:,} MB"
                )
                first_end = min((a.ends_at for a in running), default=now + 1.0)
                return None, why, min(max(first_end - now, _MIN_RETRY_SECONDS), self.settings.max_solve_seconds)
            ticket = next(self._tickets)
            self._running[ticket] = _Admitted(estimate, now + self.settings.max_solve_seconds)
            return ticket, "", 0.0

    def _release_slot(self, ticket: int) -> None:
        with self._idle:
            del self._running[ticket]
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
            return self._idle.wait_for(lambda: not self._running, timeout=timeout)

    def shutdown(self) -> None:
        """Terminate running solves early and stop the pool."""
        self.manager.shutdown(wait=False)
