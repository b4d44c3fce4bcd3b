"""The compiled preprocessing: an encoded candidate matrix in, exactly the estimator's input out.

The pipeline walker (:mod:`counterplan.planning.structure.pipeline`) describes each column the final
estimator reads; this module turns the description into index arrays and tables once, and
evaluates them on whole candidate matrices: number columns are gathered (missing codes to NaN),
put through their layers block by block with :func:`~counterplan.planning.structure.columns.run_layer`
(the scalers' own operations in their order, so the values are bit for bit scikit-learn's), and
placed; lookup columns are one gather from a flat table indexed by each row's codes. No per-row
Python anywhere.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from counterplan.planning.space import FeatureSpace, FloatMatrix
from counterplan.planning.structure.columns import EstimatorColumn, LookupColumn, NumberColumn, run_layer
from counterplan.planning.structure.errors import NotEncodableError
from counterplan.planning.structure.pipeline import describe_model

logger = logging.getLogger(__name__)

IntArray = npt.NDArray[np.intp]
LAYER_CONSTANTS = ("fill", "sub", "div", "mul", "add", "lo", "hi")


def compile_inputs(model: Any, space: FeatureSpace) -> FastInputs | None:
    """Compile a fitted pipeline's preprocessing for candidates of ``space`` decoded as a DataFrame.

    Returns None when some step is not understood (the caller keeps the real pipeline). The plan
    is not checked here: :func:`counterplan.planning.fast_path.probe.compile_fast_path` checks it
    against the real pipeline.
    """
    try:
        return build_inputs(model, space, decoded=True)
    except NotEncodableError as exc:
        logger.debug("fast path: %s", exc)
        return None


def build_inputs(model: Any, space: FeatureSpace, decoded: bool) -> FastInputs:
    """:class:`FastInputs` for ``model``'s preprocessing; raises :class:`NotEncodableError` when the
    walker refuses a step, or an encoder would raise on a category the space holds."""
    described = describe_model(model, space, decoded)
    if described.raises:
        raise NotEncodableError("an encoder with handle_unknown='error' does not know some category")
    return FastInputs.build(described.columns, space, decoded)


@dataclass(frozen=True)
class _Stage:
    """One layer applied to a block of the number columns (``columns`` None: all of them)."""

    ops: frozenset[str]
    columns: IntArray | None
    constants: dict[str, FloatMatrix]


def _placement(positions: Sequence[int]) -> slice | IntArray:
    """Where a block goes in the output: a slice when the positions are consecutive (cheaper)."""
    if positions and list(positions) == list(range(positions[0], positions[0] + len(positions))):
        return slice(positions[0], positions[0] + len(positions))
    return np.asarray(positions, dtype=np.intp)


@dataclass(frozen=True)
class FastInputs:
    """The compiled preprocessing: an encoded candidate matrix in, the estimator's input out."""

    width: int
    decoded: bool
    raw_sources: IntArray
    raw_integral: IntArray
    raw_place: slice | IntArray
    stages: tuple[_Stage, ...]
    table_sources: IntArray
    table_offsets: IntArray
    table_values: FloatMatrix
    table_place: slice | IntArray
    error_slots: npt.NDArray[np.bool_] | None = None

    @classmethod
    def build(cls, columns: Sequence[EstimatorColumn], space: FeatureSpace, decoded: bool) -> FastInputs:
        """Index arrays and tables for ``columns``, the estimator's input columns in order."""
        raw = [(p, c) for p, c in enumerate(columns) if isinstance(c, NumberColumn)]
        tables = [(p, c) for p, c in enumerate(columns) if isinstance(c, LookupColumn)]
        sources = np.array([c.source for _, c in raw], dtype=np.intp)
        integral = np.flatnonzero(space.integral[sources]) if decoded and raw else np.empty(0, dtype=np.intp)
        folded = [c.folded() for _, c in tables]
        sizes = [len(values) for values in folded]
        offsets = np.cumsum([0, *sizes[:-1]]).astype(np.intp) if tables else np.empty(0, dtype=np.intp)
        flat = np.array([v for values in folded for v in values], dtype=np.float64)
        errors = np.zeros(flat.size, dtype=bool)
        for offset, (_, column) in zip(offsets, tables, strict=True):
            errors[[int(offset) + slot for slot in column.errors]] = True
        return cls(
            width=len(columns),
            decoded=decoded,
            raw_sources=sources,
            raw_integral=integral,
            raw_place=_placement([p for p, _ in raw]),
            stages=_stages([c for _, c in raw]),
            table_sources=np.array([c.source for _, c in tables], dtype=np.intp),
            table_offsets=offsets + 1,  # slot 0 is the missing code -1
            table_values=flat,
            table_place=_placement([p for p, _ in tables]),
            error_slots=errors if errors.any() else None,
        )

    def transform(self, X: FloatMatrix, missing_code: FloatMatrix) -> FloatMatrix:
        """The estimator's input for the encoded candidates ``X`` (``missing_code``: the space's)."""
        out = np.empty((X.shape[0], self.width), dtype=np.float64)
        if self.raw_sources.size:
            out[:, self.raw_place] = self._numbers(X, missing_code)
        if self.table_sources.size:
            slots = np.rint(X[:, self.table_sources]).astype(np.intp) + self.table_offsets
            if self.error_slots is not None and self.error_slots[slots].any():
                raise ValueError(
                    "Found unknown categories during transform (a missing value the encoder does not know)"
                )
            out[:, self.table_place] = self.table_values[slots]
        return out

    def _numbers(self, X: FloatMatrix, missing_code: FloatMatrix) -> FloatMatrix:
        block = X[:, self.raw_sources]
        if self.decoded:
            if self.raw_integral.size == self.raw_sources.size:
                block = np.rint(block)
            elif self.raw_integral.size:
                block[:, self.raw_integral] = np.rint(block[:, self.raw_integral])
        codes = missing_code[self.raw_sources]  # a gap is NaN in a frame and in an array alike
        if not np.isnan(codes).all():
            block = np.where(block == codes, np.nan, block)
        for stage in self.stages:
            if stage.columns is None:
                block = run_layer(block, stage.ops, stage.constants)
            else:
                block[:, stage.columns] = run_layer(block[:, stage.columns], stage.ops, stage.constants)
        return block


def _stages(columns: list[NumberColumn]) -> tuple[_Stage, ...]:
    """The columns' layers as blocks: the k-th layers of all columns sharing their operations."""
    stages: list[_Stage] = []
    depth = max((len(c.layers) for c in columns), default=0)
    for k in range(depth):
        groups: dict[frozenset[str], list[int]] = {}
        for i, column in enumerate(columns):
            if k < len(column.layers) and column.layers[k].ops:
                groups.setdefault(column.layers[k].ops, []).append(i)
        for ops, members in groups.items():
            layers = [columns[i].layers[k] for i in members]
            constants = {
                name: np.array([getattr(layer, name) for layer in layers], dtype=np.float64) for name in LAYER_CONSTANTS
            }
            every = len(members) == len(columns)
            stages.append(_Stage(ops, None if every else np.asarray(members, dtype=np.intp), constants))
    return tuple(stages)


__all__ = ["FastInputs", "build_inputs", "compile_inputs"]
