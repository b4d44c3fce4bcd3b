"""One memo per fitted estimator, with one way to tell that it was refitted in place.

What is read from a model (its compiled fast paths, its split thresholds) costs milliseconds to
seconds and is the same for every problem of that model, so it is kept per estimator. Two things
must hold: a model refitted in place (``model.fit(...)`` again, or a warm start that grows its
trees) must drop what was kept, and keeping must never keep the model alive.

:func:`fitted_state` is the refit detector: the identity of every fitted attribute (scikit-learn's
trailing-underscore convention, plus the boosters XGBoost and LightGBM keep privately) of the model
or of each step of its pipeline, and the length of each list among them (a warm start appends to
``estimators_`` in place). Fitting replaces those attributes, so the state changes; the attributes
are held while the state is remembered, so no identity is reused by a new object. Other private
attributes are left out on purpose: some transformers cache things there while transforming
(``ColumnTransformer`` with pandas output does on every call). Computing it costs a few
microseconds, cheap enough for every model call.

:class:`Memo` keeps, per estimator (weakly: the entry goes with the estimator) and per fitted state,
a dictionary of whatever its users build. :data:`MEMO` is the one the package shares.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")

PRIVATE_FITTED = frozenset({"_Booster"})
"""Fitted attributes without the trailing underscore: XGBoost's and LightGBM's boosters."""


class FittedState:
    """What a model's fitted attributes are, compared by identity (see the module)."""

    __slots__ = ("held", "key")

    def __init__(self, key: tuple[int, ...], held: tuple[Any, ...]) -> None:
        self.key = key
        self.held = held
        """The attributes themselves, kept so that no other object takes their identities."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FittedState) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"FittedState({len(self.held)} attributes)"


def fitted_state(model: Any) -> FittedState:
    """The fitted state of ``model`` (or of every step of its pipeline). Called at every fast
    model call, so written for speed: one pass over the attributes, identities and lengths only."""
    steps = getattr(model, "steps", None)
    parts = [step for _, step in steps] if steps else [model]
    held = [
        value
        for part in parts
        for name, value in getattr(part, "__dict__", {}).items()
        if name[-1:] == "_" or name in PRIVATE_FITTED
    ]
    return FittedState((*map(id, held), *[len(value) for value in held if type(value) is list]), tuple(held))


class Kept:
    """What is kept for one estimator in one fitted state."""

    __slots__ = ("state", "values")

    def __init__(self, state: FittedState) -> None:
        self.state = state
        self.values: dict[Hashable, Any] = {}


_NOTHING: Any = object()


class Memo:
    """Values built from estimators, kept per estimator and fitted state; safe to share between
    threads. Two threads may build the same value at once: the first one kept is returned to both."""

    def __init__(self) -> None:
        self._kept: weakref.WeakKeyDictionary[Any, Kept] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def kept(self, estimator: Any) -> Kept | None:
        """What is kept for ``estimator`` as it is fitted now (a fresh, empty entry after a refit);
        None when it cannot be weakly referenced (nothing can be kept for it)."""
        state = fitted_state(estimator)
        try:
            with self._lock:
                kept = self._kept.get(estimator)
                if kept is None or kept.state != state:
                    kept = Kept(state)
                    self._kept[estimator] = kept
                return kept
        except TypeError:  # not hashable or not weakly referable
            return None

    def get(self, estimator: Any, key: Hashable, build: Callable[[], T]) -> T:
        """The value kept for ``estimator`` under ``key``, built by ``build()`` on first use (and
        again after a refit); built every time for an estimator that cannot be kept."""
        kept = self.kept(estimator)
        if kept is None:
            return build()
        with self._lock:
            found = kept.values.get(key, _NOTHING)
        if found is _NOTHING:
            value = build()
            with self._lock:
                found = kept.values.setdefault(key, value)
        return found  # type: ignore[no-any-return]

    def peek(self, estimator: Any, key: Hashable) -> Any:
        """The value kept under ``key`` for ``estimator`` as it is fitted now, or None (tests and
        diagnostics: never builds)."""
        kept = self.kept(estimator)
        return None if kept is None else kept.values.get(key)

    def clear(self) -> None:
        """Forget everything (tests: a fresh read)."""
        with self._lock:
            self._kept = weakref.WeakKeyDictionary()


MEMO = Memo()
"""The memo every reader of model structure shares."""


__all__ = ["MEMO", "FittedState", "Kept", "Memo", "fitted_state"]
