"""The ``Plan`` and ``PlanStream`` calls: action plans for one instance, over gRPC.

A plan search runs under the same rules as a solve: the request is checked at the boundary
(INVALID_ARGUMENT naming every bad field, actions included), admitted under the concurrency and
memory limits (a solve slot, RESOURCE_EXHAUSTED with a retry hint beyond them), capped by the
server's maximum solve time and the client's deadline, and stopped early when the client goes
away or the server shuts down; then it answers with the front found so far. The search is
deterministic by seed, so only those limits can change an answer. Its model calls are its own
(one per generation), not shared with running solves by dynamic batching.

:class:`PlanCalls` is handed the server's :class:`~counterplan.server.grpc.admission.Admission` (the
same one Explain uses); it knows nothing of the servicer that composes it.
"""

from __future__ import annotations

import importlib.util
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import structlog

from counterplan.planning.actions import Action, CostGraph
from counterplan.planning.errors import InvalidInputError, ModelAdapterError, ModelCallError, one_line
from counterplan.planning.problem import CounterfactualProblem
from counterplan.planning.space import FloatMatrix
from counterplan.server._generated.counterplan.v1 import counterplan_pb2 as pb
from counterplan.server.grpc.admission import MB, Admission, shutting_down
from counterplan.server.grpc.convert import BadRequestError
from counterplan.server.grpc.plan_convert import check_plan_request, final_front, front_message, plan_message
from counterplan.server.grpc.refusal import Refusal, bad_request, refused
from counterplan.server.grpc.request_log import log_request
from counterplan.server.grpc.settings import ServerSettings
from counterplan.server.grpc.throttle import throttled
from counterplan.server.registry.registry import ModelRegistry, RegisteredModel
from counterplan.solver.plans.planner import PlanResult, plan
from counterplan.solver.plans.search import PlanConfig

log = structlog.get_logger("counterplan.server")

_MESSAGE_HEADROOM = 64 * 1024
"""Room left in the largest message for a stream message's own fields around the result."""


@dataclass
class PlanJob:
    """One admitted plan search: its problem, actions, settings, solve slot and stop switch."""

    admission: Admission
    request_id: str
    model: RegisteredModel
    problem: CounterfactualProblem
    actions: list[Action]
    graph: CostGraph
    config: PlanConfig
    ticket: int
    stop: threading.Event
    max_plans: int
    max_message_bytes: int

    def run(self, on_generation: Callable[[int, FloatMatrix], None] | None = None) -> PlanResult:
        """Search; a failure becomes a :class:`Refusal` that says honestly why (a model's own
        message stays in the server log, under the request id)."""
        try:
            return plan(
                self.problem, self.actions, self.graph, self.config, on_generation=on_generation, stop=self.stop.is_set
            )
        except (ModelCallError, ModelAdapterError) as exc:
            log.warning("model failed", request_id=self.request_id, error=one_line(str(exc)))
            raise refused(
                grpc.StatusCode.INTERNAL,
                f"the model failed on this request (request id {self.request_id}); its message is in the server log",
            ) from None
        except InvalidInputError as exc:
            raise bad_request(BadRequestError([(exc.field, one_line(exc.problem))])) from None
        except Exception:
            log.exception("internal error", request_id=self.request_id)
            raise refused(
                grpc.StatusCode.INTERNAL, f"internal error (request id {self.request_id}); see the server log"
            ) from None

    def message(self, result: PlanResult) -> pb.PlanResponse:
        """The result as a ``PlanResponse`` that fits in the server's largest message, the
        model's own failure message (it may hold paths or secrets) left in the server log."""
        if result.failure is not None:
            log.warning("model failed on candidates", request_id=self.request_id, error=one_line(result.failure))
            failure = f"the model failed (request id {self.request_id}); its message is in the server log"
            result = result.model_copy(update={"failure": failure})
        return plan_message(
            result,
            self.request_id,
            self.model.id,
            list(self.problem.space.names),
            max_plans=self.max_plans,
            max_bytes=self.max_message_bytes - _MESSAGE_HEADROOM,
        )

    def close(self) -> None:
        """Give the solve slot back and forget the stop switch."""
        self.admission.drop_stop_switch(self.stop)
        self.admission.release_slot(self.ticket)


class PlanCalls:
    """``Plan`` and ``PlanStream`` for the registry's models, admitted by ``admission``."""

    def __init__(self, registry: ModelRegistry, settings: ServerSettings, admission: Admission) -> None:
        self.registry = registry
        self.settings = settings
        self.admission = admission

    def begin(self, request: pb.PlanRequest, request_id: str, time_remaining: float | None) -> PlanJob:
        """Check and admit ``request``; raise :class:`Refusal`. The caller closes the job."""
        settings = self.settings
        if importlib.util.find_spec("pymoo") is None:
            raise refused(grpc.StatusCode.UNIMPLEMENTED, "plans need counterplan[plans] (pymoo) on the server")
        if not request.model_id:
            raise bad_request(BadRequestError([("model_id", "required")]))
        model = self.registry.get(request.model_id)
        if model is None:
            raise refused(grpc.StatusCode.NOT_FOUND, f"no model {request.model_id!r}; see ListModels")
        try:
            checked = check_plan_request(
                request, model, settings.max_features, settings.max_plan_population, settings.max_plan_generations
            )
        except BadRequestError as exc:
            raise bad_request(exc) from None
        if self.admission.closing:
            raise shutting_down()
        estimate = checked.estimate_bytes()
        if estimate > settings.max_solve_memory_mb * MB:
            raise bad_request(
                BadRequestError(
                    [
                        (
                            "search.population",
                            f"the search would need about {estimate // MB:,} MB; the server allows "
                            f"{settings.max_solve_memory_mb:,} MB: lower the population or the actions",
                        )
                    ]
                )
            )
        limit = self.admission.time_limit(time_remaining, "plan")
        given = checked.config.time_limit_seconds
        config = checked.config.model_copy(
            update={
                "time_limit_seconds": limit if given is None else min(given, limit),
                "model_threads": settings.threads_for(None),
            }
        )
        plain = checked.request
        try:
            problem = model.problem(plain.instance, plain.spec)
            actions, graph = checked.actions.compile(problem.space)
        except InvalidInputError as exc:  # an action that does not fit the features (ActionError), or the problem
            raise bad_request(BadRequestError([(exc.field, one_line(exc.problem))])) from None
        ticket = self.admission.take_slot(estimate)
        stop = self.admission.stop_switch()
        return PlanJob(
            self.admission,
            request_id,
            model,
            problem,
            actions,
            graph,
            config,
            ticket,
            stop,
            checked.max_plans,
            settings.max_message_bytes,
        )

    def plan(self, request: pb.PlanRequest, context: grpc.ServicerContext) -> pb.PlanResponse:
        """``Plan``: search, then the whole result."""
        request_id = request.request_id or uuid.uuid4().hex
        started = time.perf_counter()
        outcome: dict[str, Any] = {"status": "OK", "request_id": request_id}
        try:
            job = self._begin_or_abort(request, request_id, context, outcome)
            try:
                context.add_callback(job.stop.set)  # the call ended (cancelled, deadline)
                result = job.run()
            except Refusal as refusal:
                outcome["status"] = refusal.code.name
                refusal.abort(context)
            finally:
                job.close()
            outcome["score"] = _summary(result)
            return job.message(result)
        finally:
            log_request("Plan", request_id, request.model_id, started, outcome)

    def plan_stream(self, request: pb.PlanRequest, context: grpc.ServicerContext) -> Iterator[pb.PlanStreamResponse]:
        """``PlanStream``: the front after each generation that changed it (throttled), then FINAL."""
        request_id = request.request_id or uuid.uuid4().hex
        started = time.perf_counter()
        outcome: dict[str, Any] = {"status": "OK", "request_id": request_id}
        try:
            job = self._begin_or_abort(request, request_id, context, outcome)
            context.add_callback(job.stop.set)
            events: queue.Queue[Any] = queue.Queue()
            ended: dict[str, Any] = {}
            worker = threading.Thread(target=_search, args=(job, events, ended), daemon=True)
            sequence = 0
            try:
                worker.start()
                for generation, front in throttled(events, 1.0 / self.settings.stream_max_per_second, _DONE):
                    sequence += 1
                    yield front_message(generation, front, time.perf_counter() - started, sequence)
            except GeneratorExit:  # the client went away mid-stream: stop the search now
                outcome["status"] = "CANCELLED"
                raise
            finally:
                if "result" not in ended:
                    job.stop.set()
                worker.join()
                job.close()
            if "refusal" in ended:
                refusal: Refusal = ended["refusal"]
                outcome["status"] = refusal.code.name
                refusal.abort(context)
            result: PlanResult = ended["result"]
            outcome["score"] = _summary(result)
            yield pb.PlanStreamResponse(
                sequence_id=sequence + 1,
                stage=pb.STAGE_FINAL,
                generation=max(result.generations - 1, 0),
                front=final_front(result),
                front_size=len(result.plans),
                time_spent_seconds=result.seconds,
                result=job.message(result),
            )
        finally:
            log_request("PlanStream", request_id, request.model_id, started, outcome)

    def _begin_or_abort(
        self,
        request: pb.PlanRequest,
        request_id: str,
        context: grpc.ServicerContext,
        outcome: dict[str, Any],
    ) -> PlanJob:
        try:
            return self.begin(request, request_id, context.time_remaining())
        except Refusal as refusal:
            outcome["status"] = refusal.code.name
            refusal.abort(context)


_DONE = object()


def _search(job: PlanJob, events: queue.Queue[Any], ended: dict[str, Any]) -> None:
    """Run the search on a worker thread, putting each changed front on ``events``, then _DONE."""
    last: list[FloatMatrix] = []

    def on_generation(generation: int, objectives: FloatMatrix) -> None:
        if last and last[0].shape == objectives.shape and (last[0] == objectives).all():
            return
        last[:] = [objectives.copy()]
        events.put((generation, last[0]))

    try:
        ended["result"] = job.run(on_generation)
    except Refusal as refusal:
        ended["refusal"] = refusal
    finally:
        events.put(_DONE)


def _summary(result: PlanResult) -> str:
    """What the request log says of a result: the front's size and the cheapest cost."""
    cheapest = "none" if result.cheapest is None else f"{result.cheapest.total_cost:.4g}"
    return f"{len(result.plans)} plans, cheapest {cheapest}"
