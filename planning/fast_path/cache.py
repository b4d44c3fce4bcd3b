"""Compiled fast paths, kept per model and per space encoding.

A compiled plan does not depend on the instance, only on the encoding (names, kinds, categories),
so all problems of one data set share it; and every adapter of one model shares one cache (a
problem built from a raw model gets its own adapter, so a cache per adapter would compile once
per problem). The caches live in the shared per-estimator memo
(:data:`counterplan.planning.structure.cache.MEMO`), weakly keyed by the model; each call checks the
model's fitted state with the one refit detector
(:func:`~counterplan.planning.structure.cache.fitted_state`), so refitting the model in place drops
every compiled path. A solve asks once per space, at its first model call, and keeps the path for
its other calls (the adapters' ``solve_predict``, which a score calculator uses).
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from counterplan.planning.fast_path import probe
from counterplan.planning.fast_path.probe import UNKNOWN, FastPath, Method, Trees, agrees
from counterplan.planning.fast_path.trees import compile_trees
from counterplan.planning.features import CategoricalFeature
from counterplan.planning.space import FeatureSpace
from counterplan.planning.structure.cache import MEMO, FittedState, fitted_state
from counterplan.planning.structure.kind import final_estimator

Signature = tuple[tuple[Any, ...], ...]


def space_signature(space: FeatureSpace) -> Signature:
    """What a compiled plan depends on: names, kinds, categories and their types. Not the instance,
    the bounds or which values are missing (the plan reads the missing codes at every call)."""
    parts: list[tuple[Any, ...]] = []
    for feature in space.features:
        if isinstance(feature, CategoricalFeature):
            parts.append((feature.name, feature.kind, feature.category_type, feature.category_dtype, feature.domain))
        else:
            parts.append((feature.name, feature.kind))
    return tuple(parts)


class FastPathCache:
    """Compiled fast paths of one model, per space encoding; safe to share between threads.

    A space is looked up by identity first (no signature to compute on every call), then by its
    signature and which of its columns hold a missing value: the plan depends on the signature
    only, so a new pattern of missing values reuses it after one check against the real pipeline
    (the frame a pipeline gets changes with it: an integer column with a gap is float). A failed
    compile or check is remembered too. Two threads may compile the same path at once; the last
    result is kept. The model's fitted state is checked at every call: refitting it in place
    drops everything. The newest ``size`` paths and plans are kept: a server's requests may each
    narrow a category to their own allowed values, each a new encoding.
    """

    def __init__(self, input_kind: str, method: Method, size: int = 256) -> None:
        self.input_kind = input_kind
        self.method = method
        self.size = size
        self._lock = threading.Lock()
        self._state: FittedState | None = None
        self._trees: Trees = UNKNOWN
        self._plans: dict[Signature, FastPath] = {}
        self._paths: dict[tuple[Signature, bytes], FastPath | None] = {}
        self._by_space: weakref.WeakKeyDictionary[FeatureSpace, FastPath | None] = weakref.WeakKeyDictionary()

    def get(self, model: Any, space: FeatureSpace) -> FastPath | None:
        """The fast path of ``model`` for ``space`` (compiled on first use), or None: use the real path."""
        state = fitted_state(model)
        with self._lock:
            if self._state is None or state.key != self._state.key:
                self._forget(state)
            if space in self._by_space:
                return self._by_space[space]
            key = (space_signature(space), space.missing.tobytes())
            known = key in self._paths
            path, plan, trees = self._paths.get(key), self._plans.get(key[0]), self._trees
        if not known:
            path, trees = self._compile(model, space, plan, trees)
        with self._lock:
            if self._state is not None and state.key == self._state.key:
                self._keep(key, path, trees)
                self._by_space[space] = path
        return path

    def _compile(
        self, model: Any, space: FeatureSpace, plan: FastPath | None, trees: Trees
    ) -> tuple[FastPath | None, Trees]:
        """A path for a new (signature, missing values) pair: the signature's plan if it passes the
        check on this space's probe rows, else a new compile."""
        if plan is not None:
            return (plan if agrees(plan, model, space, self.input_kind) else None), trees
        if trees is UNKNOWN:
            trees = compile_trees(final_estimator(model))
        return probe.compile_fast_path(model, space, self.input_kind, self.method, trees), trees

    def _keep(self, key: tuple[Signature, bytes], path: FastPath | None, trees: Trees) -> None:
        self._trees = trees
        while len(self._paths) >= self.size:
            self._paths.pop(next(iter(self._paths)))
        self._paths[key] = path
        if path is not None and key[0] not in self._plans:  # the newest ``size`` plans too: a stream of
            while len(self._plans) >= self.size:  # specs narrowing categories is a stream of encodings
                self._plans.pop(next(iter(self._plans)))
            self._plans[key[0]] = path

    def _forget(self, state: FittedState) -> None:
        self._state = state
        self._trees = UNKNOWN
        self._plans.clear()
        self._paths.clear()
        self._by_space = weakref.WeakKeyDictionary()

    def __getstate__(self) -> dict[str, Any]:
        """Pickle the settings only: compiled paths are rebuilt where the copy is used."""
        return {"input_kind": self.input_kind, "method": self.method, "size": self.size}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]


def shared_cache(model: Any, input_kind: str, method: Method) -> FastPathCache:
    """The cache of fast paths every adapter of ``model`` shares (kept in the shared memo while the
    model is fitted as it is). A model that cannot be weakly referenced gets a cache of its own."""
    return MEMO.get(model, ("fast paths", input_kind, method), lambda: FastPathCache(input_kind, method))


__all__ = ["FastPathCache", "Signature", "shared_cache", "space_signature"]
