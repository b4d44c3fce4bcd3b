"""What a KServe explain request may ask, checked before any solve starts.

KServe's v1 explain body is ``{"instances": [...]}``: here each instance is an object of feature
values, as ``counterplan explain --instance`` takes one. ``parameters`` carries what a request may
choose per call (a seed, the number of answers, a time limit per instance, and a problem spec
with its goals laid over the runtime's). Everything is bounded by the runtime's
:class:`ExplainLimits`, set when it starts: a request is refused (HTTP 400, naming the field)
rather than allowed to run without end. The spec is the domain's own
:class:`~counterplan.planning.spec.ProblemSpec`, the object the command line, model cards and gRPC
requests become, so a field means the same thing and fails with the same message everywhere.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from counterplan.planning._pydantic import describe
from counterplan.planning.errors import TEXT_CHARS, InvalidInputError, one_line
from counterplan.planning.plausibility import PlausibilitySettings
from counterplan.planning.spec import MAX_LISTED_VALUES, ProblemSpec
from counterplan.solver.core.config import MAX_SECONDS, MAX_SEED


class RequestError(InvalidInputError):
    """An explain request breaks its form or the runtime's limits (HTTP 400); names the field
    as the body spells it (``instances[2].income``, ``parameters.seed``)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__("request", field, problem)

    @property
    def text(self) -> str:
        """The answer's one line: ``field: problem``, a control or invisible character of the field
        (an instance's key: the caller's) written as its escape (``\\x1b``), as the problem's
        quoted values are: a client printing the error would act on it."""
        return f"{one_line(self.field, TEXT_CHARS)}: {self.problem}" if self.field else self.problem


class ExplainLimits(BaseModel):
    """The bounds of every request, set when the runtime starts (``counterplan kserve`` flags)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    max_instances: Annotated[int, Field(ge=1, le=10_000)] = 32
    """Instances one request may send."""
    max_instance_seconds: Annotated[float, Field(gt=0.0, le=MAX_SECONDS)] = 10.0
    """A solve's time at most (a request's ``time_limit`` is capped by it)."""
    request_seconds: Annotated[float, Field(gt=0.0, le=MAX_SECONDS)] = 60.0
    """The whole request's time at most: each instance gets its share of what is left."""
    max_counterfactuals: Annotated[int, Field(ge=1, le=100)] = 10
    """Answers per instance at most (``parameters.num_counterfactuals``)."""
    max_requests: Annotated[int, Field(ge=1, le=10_000)] = 64
    """A model's requests in the server at once, searching or waiting for a worker thread; one
    more is HTTP 503 (retry later): the SDK queues requests without a bound, each with its body."""
    max_reference_rows: Annotated[int, Field(ge=10, le=1_000_000)] = PlausibilitySettings().max_reference_rows
    """A request's spec's ``plausibility.max_reference_rows`` at most: the plausibility model of
    each distinct setting is built from up to that many training rows before any search (80,000
    rows took 3.9 s, more than linearly), so an unbounded one costs what the request chooses."""


class ExplainParameters(BaseModel):
    """``parameters``: per-request choices; every field may be left out."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    seed: Annotated[int, Field(ge=0, le=MAX_SEED, strict=True)] | None = None
    """The search's seed (default: the runtime's configuration's): the same request with the same
    seed gives the same answers."""
    num_counterfactuals: Annotated[int, Field(ge=1, strict=True)] = 1
    """Distinct valid answers per instance."""
    time_limit: Annotated[float, Field(gt=0.0, strict=True)] | None = None
    """Seconds per instance, capped by the runtime's ``max_instance_seconds``: a JSON number (as
    the seed, strict: ``true`` was read as one second, ``"5"`` as five)."""
    spec: ProblemSpec | None = None
    """A problem spec laid over the runtime's: its goals (``{"goals": [{"kind": "class", "target":
    "good", "confidence": 0.7}]}``), immutables, per-feature rules, distance..."""


class ExplainRequest(BaseModel):
    """A checked request: its instances and its parameters."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    instances: list[dict[str, Any]]
    parameters: ExplainParameters = ExplainParameters()


def read_request(payload: Any, limits: ExplainLimits) -> ExplainRequest:
    """The request a decoded JSON body asks, within ``limits``; refused naming the field. A spec's
    feature lists at most :data:`~counterplan.planning.spec.MAX_LISTED_VALUES` categories, as its
    allowed values: each costs memory in every model call (400,000 held 2.5 GB in a server).

    ``{"inputs": [...]}`` is taken as ``instances``: KServe's v2-style clients name the list so.
    """
    if not isinstance(payload, dict):
        raise RequestError("body", f"expected a JSON object with 'instances', given {_kind(payload)}")
    body = dict(payload)
    if "inputs" in body and "instances" not in body:
        body["instances"] = body.pop("inputs")
    _check_instances(body.get("instances"), limits)
    try:
        request = ExplainRequest.model_validate(body)
    except ValidationError as exc:
        field, problem = describe(exc)[0]
        raise RequestError(_indexed(field), problem) from None
    except InvalidInputError as exc:  # a spec's own check, raised as its error
        raise RequestError(f"parameters.spec.{exc.field}", exc.problem) from None
    asked = request.parameters.num_counterfactuals
    if asked > limits.max_counterfactuals:
        raise RequestError(
            "parameters.num_counterfactuals", f"at most {limits.max_counterfactuals} per instance, given {asked}"
        )
    spec = request.parameters.spec
    for name, rule in spec.features.items() if spec is not None else ():
        if rule.categories is not None and len(rule.categories) > MAX_LISTED_VALUES:
            raise RequestError(
                f"parameters.spec.features.{name}.categories",
                f"at most {MAX_LISTED_VALUES:,} categories, given {len(rule.categories):,}",
            )
    plausibility = spec.plausibility if spec is not None else None
    if plausibility is not None and plausibility.max_reference_rows > limits.max_reference_rows:
        raise RequestError(
            "parameters.spec.plausibility.max_reference_rows",
            f"at most {limits.max_reference_rows:,} on this runtime, given {plausibility.max_reference_rows:,}",
        )
    return request


def _check_instances(instances: Any, limits: ExplainLimits) -> None:
    """The instances are a list of at most ``max_instances`` objects (checked before pydantic
    reads them: its message for a list of a million numbers would name each)."""
    if instances is None:
        raise RequestError("instances", "missing: give a list of instances (objects of feature values)")
    if not isinstance(instances, list):
        raise RequestError("instances", f"expected a list of instances, given {_kind(instances)}")
    if not instances:
        raise RequestError("instances", "empty: give at least one instance")
    if len(instances) > limits.max_instances:
        raise RequestError("instances", f"at most {limits.max_instances} instances per request, given {len(instances)}")
    for i, instance in enumerate(instances):
        if not isinstance(instance, dict):
            raise RequestError(f"instances[{i}]", f"expected an object of feature values, given {_kind(instance)}")


def instance_seconds(parameters: ExplainParameters, limits: ExplainLimits, left: float, rows_left: int) -> float:
    """One instance's time limit: the request's ``time_limit`` (or the runtime's maximum), capped
    by the maximum and by an equal share of the request's time ``left`` among the ``rows_left``
    instances still to explain (so the last instance has time too, and the request ends by its
    deadline); at least a millisecond, which stops a search at once."""
    asked = parameters.time_limit if parameters.time_limit is not None else limits.max_instance_seconds
    share = left / max(rows_left, 1)
    return max(min(asked, limits.max_instance_seconds, share), 1e-3) if math.isfinite(share) else asked


def _indexed(field: str) -> str:
    """pydantic's ``instances.2`` as the body spells it: ``instances[2]``."""
    parts = field.split(".")
    out: list[str] = []
    for part in parts:
        if part.isdigit() and out:
            out[-1] += f"[{part}]"
        else:
            out.append(part)
    return ".".join(out)


def _kind(value: Any) -> str:
    """A JSON value's kind, in words (never the value: it may be a megabyte)."""
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number" if isinstance(value, int | float) else type(value).__name__)
