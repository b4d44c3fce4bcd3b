"""The ``Plan`` and ``PlanStream`` calls: action plans for one instance, over gRPC.

A plan search runs under the same rules as a solve, and through the same
:class:`~counterplan.solver.manager.SolverManager`: the request is checked at the boundary
(INVALID_ARGUMENT naming every bad field, actions included, and a search whose one generation
would evaluate more than ``max_plan_generation_work`` formula parts), admitted under the concurrency and
memory limits (a solve slot, RESOURCE_EXHAUSTED with a retry hint beyond them; the memory
estimate is the solver's, :func:`counterplan.solver.plans.budget.estimate_bytes`), capped by the
server's maximum solve time and the client's deadline (a time limit over the request's own
termination, as for a solve, and a deadline the search keeps between action passes and model
calls, its first generation included: no model call starts that could not end, the front's check
included, before it), submitted to the manager as a plan job (listed with the solves, terminated
early when the server shuts down, abandoned when the client goes away: no model call more); then
it answers OK with the front found so far (``stopped_early``; empty, with no generation, when
not even the first one fitted). The search is deterministic by seed, so only those limits can change an
answer. Its model calls are its own (one per generation), not shared with running solves by
dynamic batching. A stream's front messages are the search's best-solution events (each change
of the front), throttled.

:class:`PlanCalls` is handed the server's :class:`~counterplan.server.grpc.admission.Admission` and
solver manager (the same ones Explain uses); it knows nothing of the servicer that composes it.
"""

from __future__ import annotations

import importlib.util
import queue
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import structlog

from counterplan.planning.actions import Action, CostGraph, pass_size
from counterplan.planning.errors import InvalidInputError, one_line
from counterplan.server._generated.counterplan.v1 import counterplan_pb2 as pb
from counterplan.server.grpc.admission import MB, Admission, shutting_down
from counterplan.server.grpc.convert import BadRequestError
from counterplan.server.grpc.plan_convert import (
    CheckedPlanRequest,
    action_violations,
    check_plan_request,
    final_front,
    front_message,
    plan_message,
)
from counterplan.server.grpc.refusal import Refusal, bad_request, refused, registered_model, solve_failure
from counterplan.server.grpc.request_log import log_request
from counterplan.server.grpc.settings import ServerSettings
from counterplan.server.grpc.throttle import throttled
from counterplan.server.registry.registry import ModelRegistry, RegisteredModel
from counterplan.solver.core.config import TerminationConfig
from counterplan.solver.core.events import BestSolutionListener
from counterplan.solver.manager import PlanJob, SolverManager
from counterplan.solver.plans.budget import estimate_bytes
from counterplan.solver.plans.planner import PlanResult
from counterplan.solver.plans.search import generation_size

log = structlog.get_logger("counterplan.server")

_MESSAGE_HEADROOM = 64 * 1024
"""Room left in the largest message for a stream message's own fields around the result."""


@dataclass
class PlanCall:
    """One admitted plan search: its job on the solver manager, its solve slot, and how its
    answer is written."""

    admission: Admission
    manager: SolverManager
    request_id: str
    model: RegisteredModel
    names: list[str]
    job: PlanJob
    ticket: int
    max_plans: int
    max_message_bytes: int

    def result(self) -> PlanResult:
        """The search's result (waiting for it); a failure becomes a :class:`Refusal` that says
        honestly why (a model's own message stays in the server log, under the request id). At
        shutdown's cut it waits no more: the front so far, laid out without a model call."""
        try:
            assert self.job.future is not None
            if not self.admission.wait_done(self.job.future, self.job.answer_by):
                return self.admission.answer_now(self.job, self.request_id)
            return self.job.result()
        except Exception as exc:
            raise solve_failure(exc, self.request_id) from None

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
            self.names,
            max_plans=self.max_plans,
            max_bytes=self.max_message_bytes - _MESSAGE_HEADROOM,
        )

    def close(self) -> None:
        """Stop the search (a no-op once it is over), wait for it to end (at its next action pass,
        or as the model call in flight returns), drop its job and give the solve slot back: the
        slot is held as long as the search runs, or until shutdown's cut or the call's deadline
        (``job.answer_by``) gives it up."""
        self.job.terminate_early()
        assert self.job.future is not None
        if not self.admission.wait_done(self.job.future, self.job.answer_by):  # the cut, the deadline
            self.admission.give_up(self.job, self.request_id)
        self.manager.forget(self.job.job_id)
        self.admission.release_slot(self.ticket)


class PlanCalls:
    """``Plan`` and ``PlanStream`` for the registry's models, admitted by ``admission`` and run
    by ``manager``."""

    def __init__(
        self, registry: ModelRegistry, settings: ServerSettings, admission: Admission, manager: SolverManager
    ) -> None:
        self.registry = registry
        self.settings = settings
        self.admission = admission
        self.manager = manager

    def check(self, request: pb.PlanRequest) -> tuple[RegisteredModel, CheckedPlanRequest, int]:
        """Check ``request`` against its model and the memory limit: the model, the checked
        request and the search's memory estimate; raise :class:`Refusal`."""
        settings = self.settings
        if importlib.util.find_spec("pymoo") is None:
            raise refused(grpc.StatusCode.UNIMPLEMENTED, "plans need counterplan[plans] (pymoo) on the server")
        model = registered_model(self.registry, request.model_id)
        try:
            checked = check_plan_request(
                request, model, settings.max_features, settings.max_plan_population, settings.max_plan_generations
            )
        except BadRequestError as exc:
            raise bad_request(exc) from None
        if self.admission.closing:
            raise shutting_down()
        estimate = estimate_bytes(checked.config, len(checked.actions.actions), len(checked.request.features))
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
        return model, checked, estimate

    def begin(
        self,
        request: pb.PlanRequest,
        request_id: str,
        time_remaining: float | None,
        listener: BestSolutionListener | None = None,
    ) -> PlanCall:
        """Check and admit ``request`` and submit its search to the manager (``listener`` hears
        each change of its front); raise :class:`Refusal`. The caller closes the call."""
        model, checked, estimate = self.check(request)
        clock = self.admission.clock(time_remaining, "plan")  # no time at all: refused before the build
        plain = checked.request
        try:
            problem = model.problem(plain.instance, plain.spec)
            actions, graph = checked.actions.compile(problem.space)
        except InvalidInputError as exc:  # actions that do not fit the features (ActionError: every bad field)
            raise bad_request(BadRequestError(action_violations(exc))) from None
        limit = clock.limit()  # building the problem is part of the deadline, as for a solve
        config = checked.config.model_copy(
            update={
                "termination": TerminationConfig(spent_limit_seconds=limit, children=(checked.config.termination,)),
                "model_threads": self.settings.threads_for(None),
            }
        )
        self._refuse_heavy(generation_size(config), actions, graph)
        ticket = self.admission.take_slot(estimate)
        try:
            job = self.manager.submit_plan(
                problem,
                actions,
                graph,
                config,
                listener=listener,
                job_id=f"{request_id}-{uuid.uuid4().hex[:8]}",
                deadline_seconds=limit,  # binds inside the first generation too: a heavy one cannot hold the slot
            )
        except InvalidInputError as exc:  # an action on a computed feature, found as the search is built
            self.admission.release_slot(ticket)
            raise bad_request(BadRequestError([(exc.field, one_line(exc.problem))])) from None
        job.answer_by = clock.answer_by
        if self.admission.closing:  # shutdown began while it started: it too answers with what it finds
            job.terminate_early()
        return PlanCall(
            self.admission,
            self.manager,
            request_id,
            model,
            list(problem.space.names),
            job,
            ticket,
            checked.max_plans,
            self.settings.max_message_bytes,
        )

    def _refuse_heavy(self, genomes: int, actions: list[Action], graph: CostGraph) -> None:
        """Refuse a search whose one generation is estimated above ``max_plan_generation_work``
        (its most genomes, :func:`generation_size`, x :func:`pass_size`): a deadline stops it
        between action passes, but such a search would hold a slot and a core for a long time
        and end with an empty front."""
        most = self.settings.max_plan_generation_work
        work = genomes * pass_size(actions, graph)
        if work <= most:
            return
        why = (
            f"one generation would evaluate about {work:,} formula parts (its {genomes:,} genomes, the population "
            f"and its elites, x the parts of every action's formulas and edges); the server allows {most:,}"
        )
        raise bad_request(
            BadRequestError(
                [
                    ("search.population", f"{why}: lower the population"),
                    ("actions", f"{why}: use fewer actions, shorter formulas or fewer edges"),
                ]
            )
        )

    def plan(self, request: pb.PlanRequest, context: grpc.ServicerContext) -> pb.PlanResponse:
        """``Plan``: search, then the whole result."""
        request_id = request.request_id or uuid.uuid4().hex
        started = time.perf_counter()
        outcome: dict[str, Any] = {"status": "OK", "request_id": request_id}
        try:
            call = self._begin_or_abort(request, request_id, context, outcome)
            try:
                _stop_when_ended(context, call.job.abandon)
                result = call.result()
            except Refusal as refusal:
                outcome["status"] = refusal.code.name
                refusal.abort(context)
            finally:
                call.close()
            outcome["score"], outcome["stopped_early"] = _summary(result), result.stopped_early
            return call.message(result)
        finally:
            log_request("Plan", request_id, request.model_id, started, outcome)

    def plan_stream(self, request: pb.PlanRequest, context: grpc.ServicerContext) -> Iterator[pb.PlanStreamResponse]:
        """``PlanStream``: the front after each generation that changed it (the search's
        best-solution events, throttled), then FINAL."""
        request_id = request.request_id or uuid.uuid4().hex
        started = time.perf_counter()
        outcome: dict[str, Any] = {"status": "OK", "request_id": request_id}
        try:
            events: queue.Queue[Any] = queue.Queue()
            call = self._begin_or_abort(request, request_id, context, outcome, events.put)
            _stop_when_ended(context, call.job.abandon)
            threading.Thread(target=_forward_end, args=(self.admission, call.job, events), daemon=True).start()
            sequence = 0
            try:
                for event in throttled(events, 1.0 / self.settings.stream_max_per_second, _DONE):
                    sequence += 1
                    yield front_message(event, time.perf_counter() - started, sequence)
                result = call.result()
            except Refusal as refusal:
                outcome["status"] = refusal.code.name
                refusal.abort(context)
            except GeneratorExit:  # the client went away mid-stream: stop the search now
                outcome["status"] = "CANCELLED"
                raise
            finally:
                call.close()
            outcome["score"], outcome["stopped_early"] = _summary(result), result.stopped_early
            yield pb.PlanStreamResponse(
                sequence_id=sequence + 1,
                stage=pb.STAGE_FINAL,
                generation=max(result.generations - 1, 0),
                front=final_front(result),
                front_size=result.front_size,
                time_spent_seconds=result.seconds,
                result=call.message(result),
            )
        finally:
            log_request("PlanStream", request_id, request.model_id, started, outcome)

    def _begin_or_abort(
        self,
        request: pb.PlanRequest,
        request_id: str,
        context: grpc.ServicerContext,
        outcome: dict[str, Any],
        listener: BestSolutionListener | None = None,
    ) -> PlanCall:
        try:
            return self.begin(request, request_id, context.time_remaining(), listener)
        except Refusal as refusal:
            outcome["status"] = refusal.code.name
            refusal.abort(context)


_DONE = object()


def _forward_end(admission: Admission, job: PlanJob, events: queue.Queue[Any]) -> None:
    """End a stream's front messages when its search ends, or at shutdown's cut (the stream then
    answers with the front so far without waiting for it)."""
    assert job.future is not None
    admission.wait_done(job.future, job.answer_by)
    events.put(_DONE)


def _stop_when_ended(context: grpc.ServicerContext, stop: Any) -> None:
    """Call ``stop`` when the call ends (done, cancelled, its deadline: then nobody reads the
    answer, so ``stop`` abandons the search, no model call more), or now when it already has:
    gRPC does not run a callback added after the end, and a client that cancels at once must
    not leave its search running for a minute."""
    if not context.add_callback(stop):
        stop()


def _summary(result: PlanResult) -> str:
    """What the request log says of a result: the front's size and the cheapest cost."""
    cheapest = "none" if result.cheapest is None else f"{result.cheapest.total_cost:.4g}"
    return f"{len(result.plans)} plans, cheapest {cheapest}"
