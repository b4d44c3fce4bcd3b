"""A small typed Python client of the counterplan gRPC service."""

from __future__ import annotations

from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from counterplan.planning.actions import ActionSet
from counterplan.planning.spec import ProblemSpec, name_list
from counterplan.server._generated.counterplan.v1 import counterplan_pb2 as pb, counterplan_pb2_grpc as pb_grpc
from counterplan.server.grpc.convert import value_message
from counterplan.server.grpc.spec_request import explain_request, plan_fields


def class_goal(label: Any, confidence: float | None = None, output: str = "") -> pb.Goal:
    """A class goal message."""
    target = pb.ClassTarget(label=str(label))
    if confidence is not None:
        target.confidence = confidence
    return pb.Goal(output=output, class_target=target)


def value_goal(value: float, tolerance: float = 0.0, output: str = "") -> pb.Goal:
    """A value goal message."""
    return pb.Goal(output=output, value_target=pb.ValueTarget(value=value, tolerance=tolerance))


def range_goal(low: float, high: float, output: str = "") -> pb.Goal:
    """A range goal message."""
    return pb.Goal(output=output, range_target=pb.RangeTarget(low=low, high=high))


class CounterplanClient:
    """Calls a counterplan server.

    Parameters
    ----------
    target:
        ``host:port``.
    token:
        Bearer token, when the server asks for one.
    root_certificate:
        PEM file of the CA that signed the server's certificate, for TLS; None for plaintext.
    """

    def __init__(self, target: str, token: str | None = None, root_certificate: str | Path | None = None) -> None:
        if root_certificate is not None:
            credentials = grpc.ssl_channel_credentials(Path(root_certificate).read_bytes())
            self.channel = grpc.secure_channel(target, credentials)
        else:
            self.channel = grpc.insecure_channel(target)
        self.stub = pb_grpc.CounterfactualServiceStub(self.channel)  # type: ignore[no-untyped-call]
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()

    def close(self) -> None:
        """Close the channel."""
        self.channel.close()

    def __enter__(self) -> CounterplanClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @staticmethod
    def request(
        model_id: str,
        instance: Mapping[str, Any],
        goals: Sequence[pb.Goal],
        *,
        seed: int | None = None,
        config_json: str = "",
        request_id: str = "",
        immutable: Sequence[str] = (),
        spec: ProblemSpec | None = None,
    ) -> pb.ExplainRequest:
        """Build an ``ExplainRequest`` from plain Python values; ``spec``: every option of the
        question as a local run takes it (:mod:`counterplan.server.grpc.spec_request`)."""
        solver = pb.SolverSpec(config_json=config_json)
        if seed is not None:
            solver.seed = seed
        asked = ProblemSpec(immutable=name_list(immutable)).over(spec or ProblemSpec())
        request = explain_request(model_id, instance, asked)
        request.goals.extend(goals)
        request.solver.CopyFrom(solver)
        request.request_id = request_id
        return request

    def explain(self, request: pb.ExplainRequest, timeout: float | None = 30.0) -> pb.ExplainResponse:
        """The final result; ``timeout`` is the call's deadline in seconds."""
        response: pb.ExplainResponse = self.stub.Explain(request, timeout=timeout, metadata=self._metadata)
        return response

    def explain_stream(
        self, request: pb.ExplainRequest, timeout: float | None = 30.0
    ) -> Iterator[pb.ExplainStreamResponse]:
        """Every intermediate best, then the FINAL message."""
        yield from self.stub.ExplainStream(request, timeout=timeout, metadata=self._metadata)

    def explain_batch(
        self,
        rows: Iterable[tuple[str, pb.ExplainRequest]],
        timeout: float | None = None,
    ) -> Generator[pb.ExplainBatchResponse, None, None]:
        """Explain many instances in one ``ExplainBatch`` call; each result as soon as it is solved.

        Parameters
        ----------
        rows:
            ``(row_id, request)`` pairs, row ids unique. Read lazily, as the server takes them
            (it holds at most its ``batch_max_in_flight`` unanswered), so a generator over a
            large file is fine.
        timeout:
            The whole call's deadline in seconds (None: no deadline; each solve is still capped
            by the server's ``max_solve_seconds``).

        Yields
        ------
        ExplainBatchResponse
            One per row, in completion order, tagged with its ``row_id``: ``response`` (as
            :meth:`explain` returns) or ``error`` (read it with :func:`row_error`).

        Raises
        ------
        grpc.RpcError
            When the call itself ends badly (a repeated or empty row id, too many rows, the
            server shutting down: the rows without a result were not explained; a bad row id or
            one row too many comes after the results of the rows sent before it). Stopping the
            iteration early (``close()``, or leaving a ``for`` loop that drops it) cancels the
            call, and the server stops the remaining solves.
        """
        messages = (pb.ExplainBatchRequest(row_id=row_id, request=request) for row_id, request in rows)
        call = self.stub.ExplainBatch(messages, timeout=timeout, metadata=self._metadata)
        try:
            yield from call
        finally:
            call.cancel()  # a no-op once the call is over; else the server stops the rest

    @staticmethod
    def plan_request(
        model_id: str,
        instance: Mapping[str, Any],
        actions: ActionSet | Mapping[str, Any],
        goals: Sequence[pb.Goal] = (),
        *,
        seed: int | None = None,
        population: int | None = None,
        generations: int | None = None,
        immutable: Sequence[str] = (),
        request_id: str = "",
        spec: ProblemSpec | None = None,
    ) -> pb.PlanRequest:
        """Build a ``PlanRequest``; ``actions`` as an :class:`ActionSet` or the plain data of an
        actions file (``{"actions": [...], "graph": [...]}``, checked here first); ``spec``: the
        question's options as a local plan takes them."""
        from counterplan.server.grpc.plan_convert import action_messages  # noqa: PLC0415 - only plan clients need it

        checked = actions if isinstance(actions, ActionSet) else ActionSet.from_data(actions)
        messages, edges = action_messages(checked)
        search = pb.PlanSearch()
        for name, value in (("seed", seed), ("population", population), ("generations", generations)):
            if value is not None:
                setattr(search, name, value)
        request = pb.PlanRequest(
            model_id=model_id,
            instance={name: value_message(value) for name, value in instance.items()},
            goals=list(goals),
            actions=messages,
            graph=edges,
            search=search,
            request_id=request_id,
        )
        plan_fields(request, ProblemSpec(immutable=name_list(immutable)).over(spec or ProblemSpec()), instance)
        return request

    def plan(self, request: pb.PlanRequest, timeout: float | None = 60.0) -> pb.PlanResponse:
        """The Pareto front of action plans; ``timeout`` is the call's deadline in seconds."""
        response: pb.PlanResponse = self.stub.Plan(request, timeout=timeout, metadata=self._metadata)
        return response

    def plan_stream(self, request: pb.PlanRequest, timeout: float | None = 60.0) -> Iterator[pb.PlanStreamResponse]:
        """The front after each generation that changed it, then the FINAL message."""
        yield from self.stub.PlanStream(request, timeout=timeout, metadata=self._metadata)

    def audit(self, request: pb.AuditRequest, timeout: float | None = 300.0) -> Iterator[pb.AuditResponse]:
        """A recourse audit's stream: progress messages, then the FINAL one with the report."""
        return self.stub.Audit(request, timeout=timeout, metadata=self._metadata)  # type: ignore[no-any-return]  # a call: also .cancel()

    def list_models(self, timeout: float | None = 10.0) -> list[pb.ModelSummary]:
        """The served models."""
        return list(self.stub.ListModels(pb.ListModelsRequest(), timeout=timeout, metadata=self._metadata).models)

    def get_model(self, model_id: str, timeout: float | None = 10.0) -> pb.Model:
        """One model's schema."""
        model: pb.Model = self.stub.GetModel(
            pb.GetModelRequest(model_id=model_id), timeout=timeout, metadata=self._metadata
        )
        return model


def field_violations(error: grpc.RpcError) -> list[tuple[str, str]]:
    """The ``(field, description)`` pairs of an INVALID_ARGUMENT's ``google.rpc.BadRequest`` details."""
    out: list[tuple[str, str]] = []
    for detail in _details(error):
        bad = error_details_pb2.BadRequest()
        if detail.Unpack(bad):
            out += [(v.field, v.description) for v in bad.field_violations]
    return out


def retry_after(error: grpc.RpcError) -> float | None:
    """The seconds a RESOURCE_EXHAUSTED's ``google.rpc.RetryInfo`` says to wait, if it has one."""
    for detail in _details(error):
        info = error_details_pb2.RetryInfo()
        if detail.Unpack(info):
            return float(info.retry_delay.ToTimedelta().total_seconds())
    return None


def row_error(response: pb.ExplainBatchResponse) -> tuple[grpc.StatusCode, str, list[tuple[str, str]]] | None:
    """An ExplainBatch row's error as ``(code, message, field violations)``; None for a result."""
    if not response.HasField("error"):
        return None
    status = response.error
    code = next((c for c in grpc.StatusCode if c.value[0] == status.code), grpc.StatusCode.UNKNOWN)
    violations: list[tuple[str, str]] = []
    for detail in status.details:
        bad = error_details_pb2.BadRequest()
        if detail.Unpack(bad):
            violations += [(v.field, v.description) for v in bad.field_violations]
    return code, status.message, violations


def _details(error: grpc.RpcError) -> list[Any]:
    status = rpc_status.from_call(error)  # type: ignore[arg-type]  # a failed call is a grpc.Call
    return list(status.details) if status is not None else []
