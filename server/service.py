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

The checks and the start of a solve raise a :class:`~counterplan.server.refusal.Refusal`; a unary or
streaming call ends with it, an ExplainBatch instance (:mod:`counterplan.server.batch_stream`) gets it as its
own result, so both say the same about the same request.
"""

from __future__ import annotations

import contextlib
import itertools
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import grpc
import structlog

from counterplan.planning.errors import InvalidInputError, ModelAdapterError, ModelCallError, one_line
from counterplan.server._generated.counterplan.v1 import counterplan_pb2 as pb
from counterplan.server._generated.counterplan.v1 import counterplan_pb2_grpc as pb_grpc
from counterplan.server.convert import (
    BadRequestError,
    CheckedRequest,
    check_request,
    event_message,
    model_message,
    result_message,
)
from counterplan.server.refusal import Refusal, bad_request, refused, retry_later
from counterplan.server.registry import ModelRegistry, RegisteredModel
from counterplan.server.settings import ServerSettings
from counterplan.server.throttle import throttled
from counterplan.solver.batch.shared_calls import SharedCalls, SharedCallStatistics
from counterplan.solver.core.budget import estimate_bytes, one_hot_width
from counterplan.solver.core.config import TerminationConfig
from counterplan.solver.manager import SolverJob, SolverManager
from counterplan.solver.result import CounterfactualResult

if TYPE_CHECKING:
    from counterplan.server.batch_stream import BatchStream

log = structlog.get_logger("counterplan.server")

_MIN_SOLVE_SECONDS = 0.01
_MIN_RETRY_SECONDS = 0.1
_MB = 1024 * 1024
_DONE = object()
_SLOT_POLL_SECONDS = 0.25
"""A batch instance waiting for a solve slot looks again at least this often (a release wakes it
at once; this only bounds how late it sees the call end or the server shut down)."""


@dataclass(frozen=True)
class Checked:
    """A request checked against its model, with its solve's estimated memory."""

    model: RegisteredModel
    request: CheckedRequest
    estimate: int


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
        wait = settings.dynamic_batching_max_wait
        self.shared_calls: dict[str, SharedCalls] = (
            {} if wait is None else {m.id: SharedCalls(m.adapter, max_wait=wait) for m in registry.list()}
        )
        """Per model id, the model calls its running solves share (empty: dynamic batching off)."""
        self._streams: set[BatchStream] = set()
        self._streams_lock = threading.Lock()
        self._stream_slots = threading.BoundedSemaphore(settings.max_batch_streams)
        self._plan_stops: set[threading.Event] = set()
        self._plan_stops_lock = threading.Lock()

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
            return result_message(result, request_id, model.id)
        finally:
            self.log_request("Explain", request_id, request.model_id, started, outcome)

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
                self._release_slot(ticket)
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
            self.log_request("ExplainStream", request_id, request.model_id, started, outcome)

    def ExplainBatch(
        self, request_iterator: Iterator[pb.ExplainBatchRequest], context: grpc.ServicerContext
    ) -> Iterator[pb.ExplainBatchResponse]:
        """Solve a stream of instances concurrently; one result per instance as it finishes."""
        from counterplan.server.batch_stream import BatchStream  # noqa: PLC0415 - it builds on this module

        if not self._stream_slots.acquire(blocking=False):  # each open stream holds a worker thread
            log.info("stream", method="ExplainBatch", status="RESOURCE_EXHAUSTED")
            limit = self.settings.max_batch_streams
            refused(grpc.StatusCode.RESOURCE_EXHAUSTED, f"{limit} ExplainBatch streams are open; retry later").abort(
                context
            )
        stream = BatchStream(self, request_iterator, context)
        with self._streams_lock:
            self._streams.add(stream)
        try:
            yield from stream.run()
        finally:
            with self._streams_lock:
                self._streams.discard(stream)
            self._stream_slots.release()

    # -- action plans (counterplan.server.plan_service) ------------------------------------------------------
    def Plan(self, request: pb.PlanRequest, context: grpc.ServicerContext) -> pb.PlanResponse:
        """The Pareto front of action plans for one instance."""
        from counterplan.server.plan_service import plan_call  # noqa: PLC0415 - it builds on this module

        return plan_call(self, request, context)

    def PlanStream(self, request: pb.PlanRequest, context: grpc.ServicerContext) -> Iterator[pb.PlanStreamResponse]:
        """The front after each generation that changed it (throttled), then the FINAL result."""
        from counterplan.server.plan_service import plan_stream_call  # noqa: PLC0415

        yield from plan_stream_call(self, request, context)

    def remember_plan(self) -> threading.Event:
        """A running plan search's stop switch, set by :meth:`begin_shutdown` (or at once, when
        shutdown has already begun)."""
        stop = threading.Event()
        with self._plan_stops_lock:
            self._plan_stops.add(stop)
        if self._closing.is_set():
            stop.set()
        return stop

    def forget_plan(self, stop: threading.Event) -> None:
        """The plan search with this stop switch has ended."""
        with self._plan_stops_lock:
            self._plan_stops.discard(stop)

    def batching_statistics(self) -> dict[str, SharedCallStatistics]:
        """Per model id, what dynamic batching did: model calls, solves' requests and rows
        (``requests_per_call`` above 1: calls were shared). Empty when it is off."""
        return {model_id: calls.statistics for model_id, calls in self.shared_calls.items()}

    # -- the steps of a solve, shared by every method -------------------------------------------
    def check(self, request: pb.ExplainRequest) -> Checked:
        """Check ``request`` against its model and the memory limit; raise :class:`Refusal`."""
        if not request.model_id:
            raise bad_request(BadRequestError([("model_id", "required")]))
        model = self.registry.get(request.model_id)
        if model is None:
            raise refused(grpc.StatusCode.NOT_FOUND, f"no model {request.model_id!r}; see ListModels")
        try:
            checked = check_request(request, model, self.settings.max_features)
        except BadRequestError as exc:
            raise bad_request(exc) from None
        if self._closing.is_set():
            raise refused(grpc.StatusCode.UNAVAILABLE, "the server is shutting down; retry on another instance")
        space_features = len(checked.features)
        mutable = sum(f.mutable for f in checked.features)
        estimate = estimate_bytes(
            checked.config,
            space_features,
            mutable,
            several=checked.num_counterfactuals > 1,
            one_hot=one_hot_width(checked.features),
        )
        if estimate > self.settings.max_solve_memory_mb * _MB:
            raise bad_request(
                BadRequestError(
                    [
                        (
                            "solver.config_json",
                            f"the solve would need about {estimate // _MB:,} MB; the server allows "
                            f"{self.settings.max_solve_memory_mb:,} MB: lower moves_per_step, walkers or grid_size",
                        )
                    ]
                )
            )
        return Checked(model, checked, estimate)

    def start(
        self,
        request_id: str,
        model: RegisteredModel,
        request: CheckedRequest,
        time_remaining: float | None,
        listener: Any = None,
    ) -> SolverJob:
        """Start the solve of a checked, admitted request; raise :class:`Refusal`.

        The solve is capped by the server's maximum and by ``time_remaining`` (the client's
        deadline), and shares its model's calls with the model's other running solves.
        """
        limit = self.settings.max_solve_seconds
        if time_remaining is not None:
            limit = min(limit, time_remaining * 0.9 - 0.05)
        if limit < _MIN_SOLVE_SECONDS:
            raise refused(grpc.StatusCode.DEADLINE_EXCEEDED, "the deadline leaves no time to solve")
        config = request.config.model_copy(
            update={
                "termination": TerminationConfig(spent_limit_seconds=limit, children=(request.config.termination,)),
                "model_threads": self.settings.threads_for(request.config.model_threads),
            }
        )
        try:
            problem = model.problem(
                request.features,
                request.goals,
                request.distance,
                request.max_changed_features,
                request.plausible,
                trust_region=request.trust_region,
            )
            job = self._start(problem, config, request, request_id, listener, calls=self.shared_calls.get(model.id))
        except InvalidInputError as exc:  # the engine choice, checked against the problem
            field = "solver.engine_choice" if exc.field == "engine" else exc.field
            raise bad_request(BadRequestError([(field, one_line(exc.problem))])) from None
        if self._closing.is_set():  # shutdown began while it started: it too answers with what it finds
            job.terminate_early()
        return job

    def result_of(self, job: SolverJob, request_id: str) -> CounterfactualResult:
        """The job's result (waiting for it), or a :class:`Refusal` saying honestly why there is
        none: a model's failure (its text stays in the log under the request id, it may hold
        paths or secrets), a bad value found while solving, or our own error (logged with its
        traceback), never a bare UNKNOWN. The job is forgotten either way."""
        try:
            result = job.result()
        except (ModelCallError, ModelAdapterError) as exc:
            log.warning("model failed", request_id=request_id, error=one_line(str(exc)))
            raise refused(
                grpc.StatusCode.INTERNAL,
                f"the model failed on this request (request id {request_id}); its message is in the server log",
            ) from None
        except InvalidInputError as exc:
            raise refused(grpc.StatusCode.INVALID_ARGUMENT, one_line(str(exc))) from None
        except Exception:
            log.exception("internal error", request_id=request_id)
            raise refused(
                grpc.StatusCode.INTERNAL, f"internal error (request id {request_id}); see the server log"
            ) from None
        finally:
            self.manager.forget(job.job_id)
        return _without_model_text(result, request_id)

    def take_slot(self, estimate: int) -> int:
        """A solve slot's ticket for ``estimate`` bytes, or RESOURCE_EXHAUSTED with a retry hint."""
        ticket, why, retry_after = self._take_slot(estimate)
        if ticket is None:
            raise retry_later(f"{why}; retry in {retry_after:.1f} s", retry_after)
        return ticket

    def wait_for_slot(self, estimate: int, give_up: Callable[[], Refusal | None]) -> int:
        """A solve slot's ticket, waiting for one to come free (a batch instance queues where a
        unary call is refused); raises what ``give_up`` returns once it returns a refusal."""
        with self._idle:
            while True:
                ticket, _, _ = self._take_slot(estimate)
                if ticket is not None:
                    return ticket
                refusal = give_up()
                if refusal is not None:
                    raise refusal
                self._idle.wait(_SLOT_POLL_SECONDS)

    def release_slot(self, ticket: int) -> None:
        """Give a solve slot (and its memory share) back."""
        self._release_slot(ticket)

    @property
    def open_batch_streams(self) -> int:
        """ExplainBatch streams open now."""
        with self._streams_lock:
            return len(self._streams)

    @property
    def closing(self) -> bool:
        """True once shutdown has begun: no new solve starts."""
        return self._closing.is_set()

    # -- helpers ------------------------------------------------------------------------------
    def _model(self, model_id: str, context: grpc.ServicerContext) -> RegisteredModel:
        if not model_id:
            bad_request(BadRequestError([("model_id", "required")])).abort(context)
        model = self.registry.get(model_id)
        if model is None:
            refused(grpc.StatusCode.NOT_FOUND, f"no model {model_id!r}; see ListModels").abort(context)
        return model

    def _admit(
        self, request: pb.ExplainRequest, context: grpc.ServicerContext, outcome: dict[str, Any]
    ) -> tuple[RegisteredModel, CheckedRequest, int]:
        """Check the request and admit it: a solve slot and room for its estimated memory (the
        ticket is released by the caller)."""
        try:
            checked = self.check(request)
            ticket = self.take_slot(checked.estimate)
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
            job = self.start(request_id, model, checked, context.time_remaining(), listener)
        except Refusal as refusal:  # the caller's finally releases the slot
            outcome["status"] = refusal.code.name  # logged as sent
            refusal.abort(context)
        context.add_callback(job.terminate_early)  # the call ended (done, cancelled, deadline)
        return job

    def _start(
        self,
        problem: Any,
        config: Any,
        checked: CheckedRequest,
        request_id: str,
        listener: Any,
        *,
        calls: SharedCalls | None = None,
    ) -> SolverJob:
        return self.manager.submit(
            problem,
            config,
            seed=checked.seed,
            listener=listener,
            job_id=f"{request_id}-{uuid.uuid4().hex[:8]}",
            num_counterfactuals=checked.num_counterfactuals,
            engine=checked.engine,  # type: ignore[arg-type]  # checked: one of the choices
            calls=calls,
        )

    def _wait(self, job: SolverJob, context: grpc.ServicerContext, outcome: dict[str, Any]) -> CounterfactualResult:
        """The job's result, or the call ended with the status :meth:`result_of` gives."""
        try:
            result = self.result_of(job, outcome.get("request_id", ""))
        except Refusal as refusal:
            outcome["status"] = refusal.code.name
            refusal.abort(context)
        if not context.is_active():
            outcome["status"] = "CANCELLED"
        return result

    def _forward_end(self, job: SolverJob, events: queue.Queue[Any]) -> None:
        with contextlib.suppress(BaseException):  # a failure is reported by _wait on the calling thread
            job.result()
        events.put(_DONE)

    def log_request(
        self, method: str, request_id: str, model_id: str, started: float, outcome: dict[str, Any], **extra: Any
    ) -> None:
        log.info(
            "request",
            method=method,
            request_id=request_id,
            model_id=model_id,
            duration_ms=round((time.perf_counter() - started) * 1e3, 2),
            score=outcome.get("score"),
            status=outcome.get("status", "UNKNOWN"),
            **extra,
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
        with self._streams_lock:
            streams = list(self._streams)
        for stream in streams:  # they read no more instances and end once the running ones answer
            stream.shutdown()
        for job in self.manager.list_jobs():
            with contextlib.suppress(KeyError):  # it finished meanwhile
                self.manager.terminate_early(job.job_id)
        with self._plan_stops_lock:
            for stop in self._plan_stops:  # each answers with its front so far
                stop.set()

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no solve holds a slot, at most ``timeout`` seconds; True when idle."""
        with self._idle:
            return self._idle.wait_for(lambda: not self._running, timeout=timeout)

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
