"""Model calls shared by solves that run at the same time on one model (dynamic batching).

A model call costs nearly the same for 1 row as for thousands (see DESIGN.md, "Python's cost
model"), so solves of one model that run at the same time should not each pay for their own.
Each solve runs in its own thread and asks for its predictions as usual; :class:`SharedCalls`
holds the requests until every solve that is a *member* is waiting (the solves then step in
lockstep: every step of all of them is one model call), or until ``max_wait`` has passed since
a request arrived (a member busy elsewhere, say in a MIP, does not hold up the others for
long). Then one call scores them all, split into chunks of at most ``max_rows`` rows, and each
solve gets its own rows back. Inference servers batch the same way (Triton's dynamic batcher).

Why it keeps answers the same: a solve's predictions are the model's for its own rows, whatever
else was in the call, so when and with whom a solve's rows were scored changes nothing it decides
on. That holds for a model that predicts row by row
(:func:`~counterplan.planning.model_protocol.predicts_row_by_row`: trees), and only for one: a
linear model's or a network's matrix product gives a row other last bits among other rows, so
each request of such a model is called on its own, as its solve alone would call it (the solves
still step in lockstep, each with its own call). Requests are grouped by the encoding of their feature
space (two problems whose categories differ decode indices differently) and by path (the
search's fast path or the real model's, for the final check). When a merged call raises, each
request of it is called again on its own, so one solve's failing rows never fail another's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from counterplan.planning.fast_path.cache import space_signature
from counterplan.planning.model_protocol import ModelAdapter, Predictions, check_rows, predicts_row_by_row
from counterplan.planning.space import FeatureSpace, FloatMatrix

MAX_ROWS_PER_CALL = 65_536
"""Rows per merged model call: more are split into several calls (memory, not speed)."""
MAX_WAIT_SECONDS = 0.005
"""How long a request waits for the other members before it is scored with what is there."""


@dataclass
class _Request:
    X: FloatMatrix
    space: FeatureSpace
    reference: bool
    done: threading.Event = field(default_factory=threading.Event)
    result: Predictions | None = None
    error: BaseException | None = None


@dataclass
class SharedCallStatistics:
    """What the shared calls did: how many calls, requests and rows."""

    calls: int = 0
    requests: int = 0
    rows: int = 0
    seconds: float = 0.0

    @property
    def requests_per_call(self) -> float:
        """How many solves' requests one model call served, on average."""
        return self.requests / self.calls if self.calls else 0.0


class SharedCalls:
    """Merges concurrent model calls on one adapter; safe to use from many threads.

    Parameters
    ----------
    model:
        The model adapter every member's problem uses.
    max_rows:
        The most rows one merged call gets.
    max_wait:
        Seconds a request waits for the other members before it is scored anyway.
    """

    def __init__(
        self, model: ModelAdapter, *, max_rows: int = MAX_ROWS_PER_CALL, max_wait: float = MAX_WAIT_SECONDS
    ) -> None:
        self.model = model
        self.max_rows = max_rows
        self.max_wait = max_wait
        self.statistics = SharedCallStatistics()
        self._reference = getattr(model, "predict_reference", model.predict)
        self._lock = threading.Lock()
        self._pending: list[_Request] = []
        self._members = 0

    @contextmanager
    def member(self) -> Iterator[SharedCalls]:
        """Count a solve as a member while it runs: requests are held until every member waits."""
        with self._lock:
            self._members += 1
        try:
            yield self
        finally:
            with self._lock:
                self._members -= 1
                ready = bool(self._pending) and len(self._pending) >= self._members
            if ready:  # the others were waiting for this one: score them now
                self._flush()

    @property
    def members(self) -> int:
        """Solves counted as members now."""
        return self._members

    def predict(self, X: FloatMatrix, space: FeatureSpace) -> Predictions:
        """The search's predictions of ``X``, in a call shared with the other members."""
        return self._call(_Request(X, space, reference=False))

    def predict_reference(self, X: FloatMatrix, space: FeatureSpace) -> Predictions:
        """The real model's predictions of ``X`` (the final check), in a shared call."""
        return self._call(_Request(X, space, reference=True))

    def _call(self, request: _Request) -> Predictions:
        with self._lock:
            self._pending.append(request)
            ready = len(self._pending) >= max(self._members, 1)
        if ready or not request.done.wait(self.max_wait):
            self._flush()
        request.done.wait()  # another thread may be scoring it
        if request.error is not None:
            raise request.error
        assert request.result is not None
        return request.result

    def _flush(self) -> None:
        """Score every pending request: one call per group of compatible requests."""
        with self._lock:
            batch, self._pending = self._pending, []
        groups: dict[tuple[tuple[Any, ...], bool], list[_Request]] = {}
        for request in batch:
            groups.setdefault((encoding_key(request.space), request.reference), []).append(request)
        try:
            for requests in groups.values():
                self._score(requests)
        except BaseException as exc:  # never leave a waiting solve hanging, of any group
            for request in batch:
                if not request.done.is_set():
                    request.error = exc
                    request.done.set()
            raise

    def _score(self, requests: list[_Request]) -> None:
        call = self._reference if requests[0].reference else self.model.predict
        space = requests[0].space
        started = time.perf_counter()
        apart = len(requests) == 1 or not predicts_row_by_row(self.model, space)
        if apart:  # a row's predictions among other solves' rows would not be its own
            for request in requests:
                self._score_alone(request, call)
        else:
            X = np.vstack([r.X for r in requests])
            try:
                merged = self._chunked(call, X, space)
            except Exception:  # some solve's rows make the model raise: each finds its own
                for request in requests:
                    self._score_alone(request, call)
            else:
                offset = 0
                for request in requests:
                    n = request.X.shape[0]
                    request.result = {name: values[offset : offset + n] for name, values in merged.items()}
                    offset += n
                    request.done.set()
        with self._lock:
            stats = self.statistics
            stats.calls += len(requests) if apart else 1
            stats.requests += len(requests)
            stats.rows += sum(r.X.shape[0] for r in requests)
            stats.seconds += time.perf_counter() - started

    def _score_alone(self, request: _Request, call: Any) -> None:
        try:
            request.result = self._chunked(call, request.X, request.space)
        except Exception as exc:  # the solve's own calculator bisects it, as without sharing
            request.error = exc
        request.done.set()

    def _chunked(self, call: Any, X: FloatMatrix, space: FeatureSpace) -> Predictions:
        """``call``'s predictions of ``X``, in calls of at most ``max_rows`` rows, each checked to
        answer its rows one for one (a merged call is cut back into its requests by position)."""
        if X.shape[0] <= self.max_rows:
            return check_rows(dict(call(X, space)), X.shape[0])
        parts = [
            check_rows(dict(call(X[i : i + self.max_rows], space)), X[i : i + self.max_rows].shape[0])
            for i in range(0, X.shape[0], self.max_rows)
        ]
        return {name: np.concatenate([np.asarray(p[name]) for p in parts]) for name in parts[0]}


def encoding_key(space: FeatureSpace) -> tuple[Any, ...]:
    """Spaces with the same key decode a candidate matrix the same way, so their rows can share a
    model call: the fast path's signature (names, kinds, categories and their types) plus the
    missing codes, which decide where a decoded row holds a gap. Cached on the space."""
    key = getattr(space, "_encoding_key", None)
    if key is None:
        gaps = tuple(
            float(code) if held else None for code, held in zip(space.missing_code, space.missing, strict=True)
        )
        key = (space_signature(space), gaps)
        space._encoding_key = key  # type: ignore[attr-defined]
    return tuple(key)
