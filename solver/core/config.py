"""Solver configuration as pure data: pydantic models that round-trip through JSON and YAML.

The shape follows OptaPlanner's solver config: a solver has a termination and a list of
phases. This module holds what every solve shares (the solver config, terminations, the phase
config base class and the bounds every number is held to); each phase type's own config lives in
its engine's package (``counterplan.solver.local.config``, ``...exact.config``, ``...swarm.config``)
and is found through the phase registry (:mod:`counterplan.solver.core.registry`). Factories fill
defaults and reject contradictions; runtime objects live for one solve. A tuned configuration is
saved with :meth:`SolverConfig.to_yaml` and served as is.
"""

from __future__ import annotations

import numbers
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Self

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializeAsAny,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from counterplan.planning._pydantic import reraise
from counterplan.planning.errors import InvalidInputError, ProblemError, ScoreFormatError, echo
from counterplan.planning.safe_yaml import ConfigTextError, load_config_text, read_config_file
from counterplan.planning.score import BendableScore
from counterplan.planning.threads import MAX_MODEL_THREADS
from counterplan.solver.core.registry import default_phases, phase_type, phase_type_names


class ConfigError(InvalidInputError):
    """A solver configuration is invalid or contradicts itself."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__("solver config", field, problem)


def check_seed(seed: object) -> None:
    """Refuse a seed that is not a whole number from 0 to :data:`MAX_SEED` (``ProblemError`` on
    ``seed``). A batch's rows hash its text with their ids (``row_seed``): ``1.0``, ``True`` or
    ``-1`` would be another batch than ``1``'s, silently. numpy's integers are whole numbers."""
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= int(seed) <= MAX_SEED:
        raise ProblemError("seed", f"must be a whole number from 0 to {MAX_SEED}, given {echo(seed)}")


class ConfigModel(BaseModel):
    """Every config model: frozen pure data, unknown fields refused, errors as :class:`ConfigError`."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            reraise(exc, "", ConfigError)


def parse_score(field: str, text: str) -> BendableScore:
    try:
        return BendableScore.parse(text)
    except ScoreFormatError as exc:
        raise ConfigError(field, exc.problem) from None


# Every number a configuration holds is bounded: a configuration can come from the wire, and a
# size it names (a tabu list, a history, a batch of moves) is memory the solve allocates.
MAX_SECONDS = 1.0e10
"""About 300 years: a time limit allocates nothing, so it is only kept finite (``--time-limit 1e9``
must mean what it says)."""
MAX_STEPS = 10**9
MAX_COUNT = 10**12
MAX_MEMORY_SIZE = 100_000
"""Tabu lists, late-acceptance and step-counting histories, accepted-move limits."""
MAX_MOVES_PER_STEP = 4096
MAX_WEIGHT = 1.0e6
MAX_PHASES = 16
MAX_SEED = 2**63 - 1
PositiveSeconds = Annotated[float, Field(gt=0.0, le=MAX_SECONDS)]
PositiveInt = Annotated[int, Field(gt=0, le=MAX_STEPS)]
PositiveCount = Annotated[int, Field(gt=0, le=MAX_COUNT)]
MemorySize = Annotated[int, Field(gt=0, le=MAX_MEMORY_SIZE)]
Weight = Annotated[float, Field(ge=0.0, le=MAX_WEIGHT)]


class TerminationConfig(ConfigModel):
    """Limits that end a solve or a phase; set limits are joined by ``composition``.

    Every field left ``None`` is not a limit. ``children`` nest further terminations, joined
    with this level's limits by the same ``composition`` (``"or"``: any one ends it;
    ``"and"``: all must hold).
    """

    spent_limit_seconds: PositiveSeconds | None = None
    unimproved_spent_limit_seconds: PositiveSeconds | None = None
    step_count_limit: PositiveInt | None = None
    unimproved_step_count_limit: PositiveInt | None = None
    best_score_limit: str | None = None
    """The text form of a score; reached when the best score is at least this good."""
    best_score_feasible: bool | None = None
    """When true: reached once the best score is feasible."""
    score_calculation_count_limit: PositiveCount | None = None
    move_count_limit: PositiveCount | None = None
    composition: Literal["or", "and"] = "or"
    children: Annotated[tuple[TerminationConfig, ...], Field(max_length=MAX_PHASES)] = ()

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.best_score_limit is not None:
            parse_score("best_score_limit", self.best_score_limit)
        if self.best_score_feasible is False:
            raise ConfigError("best_score_feasible", "either true or left out")
        return self

    @property
    def is_empty(self) -> bool:
        """True when no limit is set anywhere in this tree."""
        own = self.model_dump(exclude={"composition", "children"}, exclude_none=True)
        return not own and all(child.is_empty for child in self.children)

    @property
    def reads_the_clock(self) -> bool:
        """True when a limit anywhere in this tree is a time (a spent or an unimproved spent
        limit): then how far a solve gets depends on the CPU it is given."""
        own = self.spent_limit_seconds is not None or self.unimproved_spent_limit_seconds is not None
        return own or any(child.reads_the_clock for child in self.children)


class PhaseConfig(ConfigModel):
    """The pure-data config of one phase. Each phase type subclasses it with its own fields and a
    ``type`` literal, and registers it (:mod:`counterplan.solver.core.registry`); a solver config's
    ``phases`` holds any registered type, chosen by ``type`` (``local_search`` when a mapping leaves
    it out)."""

    type: str
    ends_by_itself: ClassVar[bool] = True
    """False for a phase that steps until a termination ends it (local search): a solve whose
    solver termination is empty needs such a phase to carry its own."""

    @property
    def own_termination(self) -> TerminationConfig | None:
        """The phase's own termination, when it has one."""
        termination = getattr(self, "termination", None)
        return termination if isinstance(termination, TerminationConfig) else None

    @property
    def reads_the_clock(self) -> bool:
        """True when a limit of the phase's own is a time (a phase with a time limit of another
        kind says so too)."""
        own = self.own_termination
        return own is not None and own.reads_the_clock


def _phase_type(value: Any) -> str:
    """A phase's ``type``; local search when a mapping leaves it out (the name shows in errors)."""
    if isinstance(value, dict):
        return str(value.get("type", "local_search"))
    return str(getattr(value, "type", "local_search"))


def _registered_phase(value: Any, _handler: ValidatorFunctionWrapHandler) -> PhaseConfig:
    """Validate one phase with the config class its ``type`` registered, as a tagged union would:
    an unknown tag names the known ones, and a field's error path starts with the tag."""
    tag = _phase_type(value)
    names = phase_type_names()
    if tag not in names:
        raise PydanticCustomError(
            "union_tag_invalid",
            "Input tag '{tag}' found using {discriminator} does not match any of the expected tags: {expected_tags}",
            {"discriminator": "_phase_type()", "tag": tag, "expected_tags": ", ".join(repr(n) for n in names)},
        )
    config_class: type[PhaseConfig] = phase_type(tag).config_class()
    if isinstance(value, config_class):
        return value
    try:
        return config_class.model_validate(value)
    except ValidationError as exc:
        errors: list[InitErrorDetails] = [
            {"type": e["type"], "loc": (tag, *e["loc"]), "input": e["input"], "ctx": e.get("ctx", {})}
            for e in exc.errors()
        ]
        raise ValidationError.from_exception_data(exc.title, errors) from None


AnyPhaseConfig = Annotated[SerializeAsAny[PhaseConfig], WrapValidator(_registered_phase)]
"""A phase of any registered type (validated and dumped as its own class)."""


def stable_termination(unimproved_steps: int = 3) -> TerminationConfig:
    """Ends once the best is feasible and has not improved for ``unimproved_steps`` steps."""
    return TerminationConfig(composition="and", best_score_feasible=True, unimproved_step_count_limit=unimproved_steps)


DEFAULT_STEP_LIMIT = 1000
"""The default solve's step cap: with no clock in the default, this bounds an unreachable goal's search."""


def default_termination() -> TerminationConfig:
    """The solve's caps: no better solution for 400 steps, or 1,000 steps in all.

    The default local-search phase ends much sooner, once its best is feasible and stable
    (:func:`stable_termination`). No cap reads the clock: the same problem, configuration and
    seed give the same answer whatever the machine's load. Only a time limit the user sets
    (``--time-limit``, a configuration's ``spent_limit_seconds``, a gRPC deadline) may cut a
    search short.
    """
    return TerminationConfig(unimproved_step_count_limit=400, step_count_limit=DEFAULT_STEP_LIMIT)


MAX_AUTO_BUDGET_SECONDS = 3600.0
"""The longest per-row budget ``auto`` accepts: a budget is a promise about one row's time."""


class AutoConfig(ConfigModel):
    """How the ``auto`` engine choice weighs the exact engine's time (:mod:`counterplan.solver.engines`)."""

    budget_seconds: Annotated[float, Field(gt=0.0, le=MAX_AUTO_BUDGET_SECONDS)] = 2.0
    """``auto`` takes the exact engine only when its estimate of the exact program's time (from
    the program's size and the model family, :mod:`counterplan.solver.exact.estimate`) is within
    this; otherwise local search (or the swarm, for many features)."""
    exact_improvement_seconds: Annotated[float, Field(gt=0.0, le=MAX_AUTO_BUDGET_SECONDS)] | None = None
    """When ``auto`` runs local search: then the exact engine for at most this long, from local
    search's answer (its warm start and incumbent), so the answer is never worse than local
    search's and comes with the proof's bound and gap. None: no improvement. Like any time limit,
    it makes the answer depend on the machine when it cuts the proof short."""


class SolverConfig(ConfigModel):
    """A whole solve: phases run in sequence under one solver-level termination."""

    phases: Annotated[tuple[AnyPhaseConfig, ...], Field(max_length=MAX_PHASES)] = Field(default_factory=default_phases)
    termination: TerminationConfig = Field(default_factory=default_termination)
    random_seed: Annotated[int, Field(ge=0, le=MAX_SEED)] = 0
    model_threads: Annotated[int, Field(ge=1, le=MAX_MODEL_THREADS)] | None = 1
    """Native (OpenMP, BLAS) threads a model call may use; None leaves the pools as they are.
    One by default: the engines batch candidates, and extra threads fight other work for the
    cores (see :mod:`counterplan.planning.threads`). Like OptaPlanner's ``moveThreadCount``, a speed knob only."""
    auto: AutoConfig = Field(default_factory=AutoConfig)
    """The ``auto`` engine choice's budget (used only when the engine is ``auto``)."""

    @model_validator(mode="after")
    def _check(self) -> Self:
        if not self.phases:
            raise ConfigError("phases", "give at least one phase")
        endless = [p for p in self.phases if not p.ends_by_itself]
        if self.termination.is_empty and any(p.own_termination is None or p.own_termination.is_empty for p in endless):
            raise ConfigError("termination", "the solver or every phase needs a termination, or the solve never ends")
        return self

    def reads_the_clock(self, engine: str | None = None) -> bool:
        """True when a time limit may cut a solve with ``engine`` short (the solver's or a
        phase's; ``auto``'s budgeted exact improvement): such a solve gets as far as the CPU it
        is given allows, so a batch gives each such row the time alone
        (:mod:`counterplan.solver.batch.block`)."""
        if self.termination.reads_the_clock or any(phase.reads_the_clock for phase in self.phases):
            return True
        return engine == "auto" and self.auto.exact_improvement_seconds is not None

    def to_yaml(self) -> str:
        """The configuration as YAML."""
        return yaml.safe_dump(self.model_dump(mode="json", exclude_defaults=False), sort_keys=False)

    @classmethod
    def from_yaml(cls, text: str) -> SolverConfig:
        """Parse YAML (or JSON, which YAML reads too), within :mod:`counterplan.planning.safe_yaml`'s limits."""
        try:
            data = load_config_text(text)
        except ConfigTextError as exc:
            raise ConfigError("yaml", exc.problem) from None
        if not isinstance(data, dict):
            raise ConfigError("yaml", "expected a mapping at the top level")
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SolverConfig:
        """Validate plain data, raising :class:`ConfigError` naming the bad field."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            reraise(exc, "", ConfigError)

    @classmethod
    def load(cls, path: str | Path) -> SolverConfig:
        """Read a ``.yaml``/``.yml``/``.json`` file."""
        try:
            text = read_config_file(path)
        except OSError as exc:
            raise ConfigError(str(path), f"cannot read: {exc.strerror}") from None
        except UnicodeDecodeError as exc:  # a binary file: a ValueError, not an OSError
            raise ConfigError(str(path), f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        except ConfigTextError as exc:  # a named pipe, a device, a file past the cap: not read
            raise ConfigError(str(path), exc.problem) from None
        return cls.from_yaml(text)
