"""The phase registry: a phase type's name -> its config class and its factory, loaded on first use.

As Timefold's ``PhaseFactory``: the solver core knows no phase type. A type registers its
pure-data config class and its factory (which fills defaults, rejects contradictions, builds the
runtime phase for one solve and sizes its largest step); the solver asks the registry, never an
``isinstance`` chain. Both are given as ``"module:name"`` strings and imported only when a
configuration names the type, so HiGHS or pymoo load only with a phase that uses them.

The types counterplan ships are registered in :mod:`counterplan.solver.phases`, one line each;
a new type is its own package plus one :func:`register_phase_type` line (a test registers a toy
type from the test itself).
"""

from __future__ import annotations

import importlib
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from counterplan.solver.core.config import PhaseConfig
    from counterplan.solver.core.phase import Phase


@dataclass(frozen=True)
class SpaceSize:
    """What sizes a step: the candidate matrix's columns, the mutable ones, and their one-hot
    width (one coordinate per mutable number, one per category of each mutable categorical, two
    per mutable boolean: what a particle of the swarm carries)."""

    n_features: int
    n_mutable: int
    one_hot_width: int | None = None
    """None: one per mutable feature."""

    @property
    def coordinates(self) -> int:
        """The one-hot width, or one per mutable feature when it is not known."""
        return self.n_mutable if self.one_hot_width is None else self.one_hot_width


class PhaseFactory(Protocol):
    """Builds one phase type's runtime phase from its config, and sizes it before a solve."""

    def build(self, config: Any) -> Phase:
        """A runtime phase for one solve (defaults filled, contradictions refused)."""
        ...

    def step_cells(self, config: Any, size: SpaceSize) -> tuple[str, int] | None:
        """The config field that sizes the phase's largest step (relative to the phase, as
        ``"move_selector.moves_per_step"``) and the candidate values that step holds; None when
        its steps hold no candidate matrix worth bounding."""
        ...

    def collects_pool(self, config: Any) -> bool:
        """The phase reads the pool of feasible rows the solve scored (so the solve keeps one)."""
        ...


class PhaseTypeError(KeyError):
    """A phase type is unknown or registered twice."""


@dataclass
class PhaseType:
    """One registered phase type: where its config class and its factory live."""

    name: str
    config: str | type[PhaseConfig]
    """``"module:ClassName"``, or the class itself."""
    factory: str | PhaseFactory
    """``"module:name"`` of a factory object (or class, instantiated once), or the factory itself."""
    _loaded: dict[str, Any] = field(default_factory=dict, repr=False)

    def config_class(self) -> type[PhaseConfig]:
        """The config class, imported on first use."""
        if "config" not in self._loaded:
            self._loaded["config"] = _resolve(self.config)
        value: type[PhaseConfig] = self._loaded["config"]
        return value

    def factory_object(self) -> PhaseFactory:
        """The factory, imported (and instantiated, when a class is named) on first use."""
        if "factory" not in self._loaded:
            value = _resolve(self.factory)
            self._loaded["factory"] = value() if isinstance(value, type) else value
        factory: PhaseFactory = self._loaded["factory"]
        return factory


def _resolve(target: Any) -> Any:
    if not isinstance(target, str):
        return target
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


_TYPES: dict[str, PhaseType] = {}
_LOCK = threading.Lock()
_DEFAULTS: list[str] = []


def register_phase_type(name: str, *, config: str | type[PhaseConfig], factory: str | PhaseFactory) -> None:
    """Make ``name`` a phase type: configurations may name it (``{"type": name, ...}``), the
    solver builds it with ``factory``. Registering a name twice is refused."""
    with _LOCK:
        if name in _TYPES:
            raise PhaseTypeError(f"phase type {name!r} is registered already")
        _TYPES[name] = PhaseType(name, config, factory)


def unregister_phase_type(name: str) -> None:
    """Forget ``name`` (a test's own type, when the test ends)."""
    with _LOCK:
        _TYPES.pop(name, None)


def set_default_phases(target: str) -> None:
    """``"module:function"`` giving the phases of a configuration that names none."""
    _DEFAULTS[:] = [target]


def default_phases() -> tuple[PhaseConfig, ...]:
    """The default phase list (as set by :func:`set_default_phases`)."""
    if not _DEFAULTS:
        raise PhaseTypeError("no default phases are registered")
    phases: tuple[PhaseConfig, ...] = _resolve(_DEFAULTS[0])()
    return phases


def phase_type(name: str) -> PhaseType:
    """The registered type ``name``; :class:`PhaseTypeError` when there is none."""
    found = _TYPES.get(name)
    if found is None:
        raise PhaseTypeError(f"unknown phase type {name!r}")
    return found


def phase_type_names() -> list[str]:
    """Every registered type, in registration order."""
    return list(_TYPES)


def factory_of(config: PhaseConfig) -> PhaseFactory:
    """The factory of ``config``'s type."""
    return phase_type(config.type).factory_object()


def build_phase(config: PhaseConfig) -> Phase:
    """The runtime phase of ``config`` (the only dispatch on phase types there is)."""
    return factory_of(config).build(config)
