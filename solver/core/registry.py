"""The phase registry: a phase type's name -> its config class and its factory, loaded on first use.

A plain table, below everything else in the core (it imports none of it): the config module
validates phases through it, the solver builds them through it (:func:`~counterplan.solver.core.phase.factory_for`).

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
from typing import Any


class PhaseTypeError(KeyError):
    """A phase type is unknown or registered twice."""


@dataclass
class PhaseType:
    """One registered phase type: where its config class and its factory live."""

    name: str
    config: str | type[Any]
    """``"module:ClassName"`` of its :class:`~counterplan.solver.core.config.PhaseConfig`
    subclass, or the class itself."""
    factory: Any
    """``"module:name"`` of its :class:`~counterplan.solver.core.phase.PhaseFactory` (an object, or
    a class instantiated once), or the factory itself."""
    _loaded: dict[str, Any] = field(default_factory=dict, repr=False)

    def config_class(self) -> Any:
        """The config class, imported on first use."""
        if "config" not in self._loaded:
            self._loaded["config"] = _resolve(self.config)
        return self._loaded["config"]

    def factory_object(self) -> Any:
        """The factory, imported (and instantiated, when a class is named) on first use."""
        if "factory" not in self._loaded:
            value = _resolve(self.factory)
            self._loaded["factory"] = value() if isinstance(value, type) else value
        return self._loaded["factory"]


def _resolve(target: Any) -> Any:
    if not isinstance(target, str):
        return target
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


_TYPES: dict[str, PhaseType] = {}
_LOCK = threading.Lock()
_DEFAULTS: list[str] = []


def register_phase_type(name: str, *, config: str | type[Any], factory: Any) -> None:
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


def default_phases() -> tuple[Any, ...]:
    """The default phase list (as set by :func:`set_default_phases`)."""
    if not _DEFAULTS:
        raise PhaseTypeError("no default phases are registered")
    phases: tuple[Any, ...] = _resolve(_DEFAULTS[0])()
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
