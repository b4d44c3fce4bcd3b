"""The steps of one explain over gRPC: check a request, start its solve, read its result.

Explain, ExplainStream (:mod:`counterplan.server.grpc.service`) and each ExplainBatch instance
(:mod:`counterplan.server.grpc.batch_stream`) go through the same three steps, so a batch instance's
answer or error is exactly what Explain says about the same request. Each step raises a
:class:`~counterplan.server.grpc.refusal.Refusal`; the caller chooses how to send it (a unary or
streaming call ends with it, a batch instance gets it as its own result). Slots, memory and the
deadline are :class:`~counterplan.server.grpc.admission.Admission`'s.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import grpc
import structlog

from counterplan.planning.errors import InvalidInputError, RemoteModelError, one_line
from counterplan.server._generated.counterplan.v1 import counterplan_pb2 as pb
from counterplan.server.grpc.admission import MB, Admission, shutting_down
from counterplan.server.grpc.convert import BadRequestError, CheckedRequest, check_request
from counterplan.server.grpc.refusal import bad_request, refused, registered_model, solve_failure
from counterplan.server.grpc.settings import ServerSettings
from counterplan.server.registry.registry import ModelRegistry, RegisteredModel
from counterplan.solver.batch.shared_calls import SharedCalls
from counterplan.solver.core.budget import estimate_bytes, one_hot_width
from counterplan.solver.core.config import SolverConfig, TerminationConfig
from counterplan.solver.manager import SolverJob, SolverManager
from counterplan.solver.result import CounterfactualResult

log = structlog.get_logger("counterplan.server")


@dataclass(frozen=True)
class Checked:
    """A request checked against its model, with its solve's estimated memory."""

    model: RegisteredModel
    request: CheckedRequest
    estimate: int


def _without_model_text(result: CounterfactualResult, request_id: str) -> CounterfactualResult:
    """The result with the model's own failure message (it may hold paths or secrets) replaced by
    a pointer to the server log, where it is written under the request id."""
    if result.failure is None:
        return result
    log.warning("model failed on candidates", request_id=request_id, error=one_line(result.failure))
    return result.model_copy(
        update={"failure": f"the model failed (request id {request_id}); its message is in the server log"}
    )


class ExplainSteps:
    """Check, start and finish the solves of one server's models.

    Parameters
    ----------
    registry, settings:
        The served models and the server's settings.
    admission:
        The server's admission (shutdown, the deadline rule); slots are taken by the caller.
    manager:
        Runs the solves in the background.
    shared_calls:
        Per model id, the model calls its running solves share (empty: dynamic batching off).
    """

    def __init__(
        self,
        registry: ModelRegistry,
        settings: ServerSettings,
        admission: Admission,
        manager: SolverManager,
        shared_calls: dict[str, SharedCalls],
    ) -> None:
        self.registry = registry
        self.settings = settings
        self.admission = admission
        self.manager = manager
        self.shared_calls = shared_calls

    def check(self, request: pb.ExplainRequest) -> Checked:
        """Check ``request`` against its model and the memory limit; raise :class:`Refusal`."""
        model = registered_model(self.registry, request.model_id)
        try:
            checked = check_request(request, model, self.settings.max_features)
        except BadRequestError as exc:
            raise bad_request(exc) from None
        if self.admission.closing:
            raise shutting_down()
        space_features = len(checked.features)
        mutable = sum(f.mutable for f in checked.features)
        estimate = estimate_bytes(
            checked.config,
            space_features,
            mutable,
            several=checked.num_counterfactuals > 1,
            one_hot=one_hot_width(checked.features),
        )
        if estimate > self.settings.max_solve_memory_mb * MB:
            raise bad_request(
                BadRequestError(
                    [
                        (
                            "solver.config_json",
                            f"the solve would need about {estimate // MB:,} MB; the server allows "
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
        deadline, read just before), and shares its model's calls with the model's other running
        solves. Building the problem is part of the deadline's time: a trust region's linear
        programs or a plausibility model can take most of a second, and a solve then given the
        whole deadline answered after it (the client's bare DEADLINE_EXCEEDED, the grpc fuzz).
        """
        clock = self.admission.clock(time_remaining, "solve")  # no time at all: refused before the build
        try:
            problem = model.problem(request.instance, request.spec)
            config = self._config(request.config, clock.limit())
            job = self._submit(problem, config, request, request_id, listener, calls=self.shared_calls.get(model.id))
        except InvalidInputError as exc:  # the engine choice, checked against the problem
            field = "solver.engine_choice" if exc.field == "engine" else exc.field
            raise bad_request(BadRequestError([(field, one_line(exc.problem))])) from None
        job.answer_by = clock.answer_by
        if self.admission.closing:  # shutdown began while it started: it too answers with what it finds
            job.terminate_early()
        return job

    def _config(self, config: SolverConfig, limit: float) -> SolverConfig:
        """``config`` ended by the solve's time ``limit`` (:meth:`CallClock.limit`), with the
        server's native threads (``auto`` is capped at that limit where it chooses,
        :func:`counterplan.solver.engines.capped_auto`)."""
        termination = TerminationConfig(spent_limit_seconds=limit, children=(config.termination,))
        return config.model_copy(
            update={
                "termination": termination,
                "model_threads": self.settings.threads_for(config.model_threads),
            }
        )

    def result_of(self, job: SolverJob, request_id: str) -> CounterfactualResult:
        """The job's result (waiting for it), or a :class:`Refusal` saying honestly why there is
        none: a model's failure (its text stays in the log under the request id, it may hold
        paths or secrets), a bad value found while solving, or our own error (logged with its
        traceback), never a bare UNKNOWN. The job is forgotten either way.

        At shutdown's cut (:meth:`Admission.cut_calls`), or when the call must answer by its
        deadline (``job.answer_by``), it waits no more: a solve still running then (inside a
        model call, or late on a busy machine) is abandoned, and its best answer scored so far
        comes back (:meth:`SolverJob.so_far`; UNAVAILABLE at shutdown, DEADLINE_EXCEEDED at the
        deadline, when it has none yet)."""
        try:
            assert job.future is not None
            if not self.admission.wait_done(job.future, job.answer_by):
                return self.admission.answer_now(job, request_id)
            result = job.result()
        except RemoteModelError as exc:  # the card's served model failed: not the caller's input
            raise solve_failure(exc, request_id) from None
        except InvalidInputError as exc:  # said in the message, as Explain always has
            raise refused(grpc.StatusCode.INVALID_ARGUMENT, one_line(str(exc))) from None
        except Exception as exc:
            raise solve_failure(exc, request_id) from None
        finally:
            self.manager.forget(job.job_id)
        return _without_model_text(result, request_id)

    def _submit(
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
