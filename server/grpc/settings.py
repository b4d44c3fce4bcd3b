"""Server settings from flags and ``COUNTERPLAN_*`` environment variables (pydantic-settings)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Self

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from counterplan.planning.threads import MAX_MODEL_THREADS
from counterplan.solver.core.config import MAX_SECONDS


class ServerSettings(BaseSettings):
    """How a counterplan server runs. Every field reads ``COUNTERPLAN_<NAME>`` too."""

    model_config = SettingsConfigDict(env_prefix="COUNTERPLAN_", extra="forbid")

    address: str = "127.0.0.1"
    port: Annotated[int, Field(ge=0, le=65535)] = 50051
    """0 picks a free port."""
    models_dir: Path | None = None
    """Directory of model cards; none serves the embedded demo model."""
    trust_pickle: bool = False
    """Allow joblib/pickle model files in ``models_dir`` (they run code while loading)."""
    workers: Annotated[int, Field(ge=1, le=256)] = 8
    """gRPC worker threads."""
    max_concurrent_solves: Annotated[int, Field(ge=1)] = 4
    """More solves at once are refused with RESOURCE_EXHAUSTED."""
    max_solve_memory_mb: Annotated[int, Field(ge=64, le=1_048_576)] = 2048
    """Estimated memory of the solves running at once (``counterplan.solver.core.budget.estimate_bytes``): a solve
    that does not fit beside the running ones is refused with RESOURCE_EXHAUSTED and a retry hint;
    one that could never fit, with INVALID_ARGUMENT."""
    max_solve_seconds: Annotated[float, Field(gt=0, le=MAX_SECONDS)] = 30.0
    """Every solve is capped at this, and at the client's deadline (it becomes the solve's time limit:
    at most a solver configuration's, about 300 years)."""
    stream_max_per_second: Annotated[float, Field(gt=0)] = 20.0
    """Intermediate stream messages per second at most (the last one is always sent)."""
    max_features: Annotated[int, Field(ge=1)] = 1000
    max_plan_population: Annotated[int, Field(ge=4, le=20_000)] = 2000
    """A Plan request's population at most (its memory is also bounded by ``max_solve_memory_mb``)."""
    max_plan_generations: Annotated[int, Field(ge=1, le=10_000)] = 1000
    """A Plan request's generations at most (its time is also bounded by ``max_solve_seconds``)."""
    max_plan_generation_work: Annotated[int, Field(ge=1_000, le=10**12)] = 10_000_000
    """A Plan request's one generation at most, in formula parts evaluated: its genomes (the
    population and at most half as many elites, :func:`counterplan.solver.plans.search.generation_size`)
    times the parts one plan's pass through every action evaluates
    (:func:`counterplan.planning.actions.pass_size`: each action's effort, conditions and
    consequences, and the discounts of the graph's edges into what it changes). A search is
    stopped between action passes, but a generation that alone outlasts any deadline is refused
    up front with INVALID_ARGUMENT naming ``search.population`` and ``actions``. The default
    admits the shipped action sets at the largest population (about 520,000) many times over."""
    max_message_bytes: Annotated[int, Field(ge=1024)] = 4 * 1024 * 1024
    tls_cert: Path | None = None
    tls_key: Path | None = None
    auth_token: str | None = None
    """When set, every call needs ``authorization: Bearer <token>``."""
    max_reflection_streams: Annotated[int, Field(ge=1, le=64)] = 2
    """Reflection streams open at once; each holds a worker thread while open (keep it below ``workers``)."""
    grace_seconds: Annotated[float, Field(ge=0, le=MAX_SECONDS)] = 5.0
    """On shutdown, running solves get this long to stop; one second before its end, every call
    still waiting (its solve inside a model call) answers with its best so far, and the solve is
    abandoned: the server is gone within the grace."""
    model_threads: Annotated[int, Field(ge=1, le=MAX_MODEL_THREADS)] = 1
    """Native threads per model call at most: a request's config may ask for fewer, never more.

    Several solves run at once on the server's cores, so one thread each is the default; the
    operator, not a client, decides how the cores are shared."""

    dynamic_batching_max_wait_ms: Annotated[float, Field(ge=0.0, le=100.0)] = 5.0
    """Dynamic batching: solves running at once on one model merge their model calls
    (:class:`counterplan.solver.batch.shared_calls.SharedCalls`). A solve's model call waits until every
    running solve of that model is waiting too, or this long at most, then one call scores them
    all. A model call costs about the same for 1 row as for thousands, so under load this turns
    many calls into one; answers do not change. 0 turns it off (each solve calls the model
    itself). Keep it below a model call's own time: a few milliseconds."""
    batch_max_instances: Annotated[int, Field(ge=1, le=1_000_000)] = 10_000
    """Instances one ExplainBatch stream may send; one more ends the call with INVALID_ARGUMENT
    (the server remembers each stream's row ids to refuse repeats, so this bounds that memory)."""
    max_batch_streams: Annotated[int, Field(ge=1, le=64)] = 2
    """ExplainBatch streams open at once; more are refused with RESOURCE_EXHAUSTED. A stream holds
    a worker thread for as long as the client keeps it open, sending or not (keep it below
    ``workers``, as reflection streams, so idle streams cannot take every worker)."""
    batch_max_in_flight: Annotated[int, Field(ge=1, le=256)] = 8
    """Instances of one ExplainBatch stream read and not yet answered, at most: the server reads
    the next one only when one is answered, so a stream holds at most this many requests and
    results in memory. How many of them solve at once is ``max_batch_solves``'s (an instance
    waits for a free slot instead of being refused)."""
    max_batch_solves: Annotated[int | None, Field(ge=1)] = None
    """Solve slots that ExplainBatch instances may hold at once, across every stream, at most
    (:attr:`batch_solves`); at most ``max_concurrent_solves``. A batch instance waits for a slot
    while an interactive call (Explain, ExplainStream, Plan, PlanStream, Audit) is refused when
    none is free, so batches holding every slot would turn every interactive caller away for as
    long as a batch runs. Unset, it is half the slots, rounded down (``max_concurrent_solves //
    2``, at least 1): interactive callers keep at least half, since a refusal costs them the call
    while a batch instance only waits, and a batch's solves of one model share their model calls
    (dynamic batching), so fewer of them at once lose little throughput. With a single slot
    nothing can be kept back: the batch gets it when it is free. Interactive calls are not
    capped: with no batch running they may take every slot."""
    max_audit_rows: Annotated[int, Field(ge=1, le=1_000_000)] = 10_000
    """Rows one Audit call may audit: sent inline, or selected from a model card's training data
    (for ``rejected``, the card's rows before the ones meeting the goal are left out). The whole
    audit also runs within ``max_solve_seconds`` and the client's deadline."""
    max_audit_groups: Annotated[int, Field(ge=0, le=64)] = 8
    """Group columns one Audit call may break its figures down by."""
    max_audit_group_values: Annotated[int, Field(ge=1, le=10_000)] = 100
    """Distinct values of one group column among an audit's rows (the report has figures, and
    bootstrap intervals, per value)."""
    max_audit_bootstrap: Annotated[int, Field(ge=0, le=100_000)] = 2_000
    """Bootstrap resamples of each interval of one Audit call."""

    @model_validator(mode="after")
    def _check(self) -> Self:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("give both tls_cert and tls_key, or neither")
        if self.max_reflection_streams >= self.workers:
            raise ValueError(
                f"max_reflection_streams ({self.max_reflection_streams}) must be below workers ({self.workers}): "
                "open reflection streams would hold every worker thread"
            )
        if self.max_batch_streams + self.max_reflection_streams >= self.workers:
            raise ValueError(
                f"max_batch_streams ({self.max_batch_streams}) plus max_reflection_streams "
                f"({self.max_reflection_streams}) must be below workers ({self.workers}): "
                "open ExplainBatch and reflection streams would hold every worker thread"
            )
        if self.max_batch_solves is not None and self.max_batch_solves > self.max_concurrent_solves:
            raise ValueError(
                f"max_batch_solves ({self.max_batch_solves}) must be at most max_concurrent_solves "
                f"({self.max_concurrent_solves}): batch instances solve within the server's solve slots"
            )
        return self

    @property
    def batch_solves(self) -> int:
        """Solve slots ExplainBatch instances may hold at once: ``max_batch_solves``, or unset,
        half of ``max_concurrent_solves`` (at least 1)."""
        if self.max_batch_solves is not None:
            return self.max_batch_solves
        return max(1, self.max_concurrent_solves // 2)

    @property
    def dynamic_batching_max_wait(self) -> float | None:
        """Seconds a model call waits for the other solves of its model; None: dynamic batching off."""
        return self.dynamic_batching_max_wait_ms / 1e3 if self.dynamic_batching_max_wait_ms > 0 else None

    def threads_for(self, asked: int | None) -> int:
        """The native threads a solve gets when its config asks for ``asked`` (None: no wish)."""
        return self.model_threads if asked is None else min(asked, self.model_threads)
