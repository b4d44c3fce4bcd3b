"""A tree ensemble's structure as arrays, read once per fitted model, for the exact engine's builds.

The exact engine builds one program per row (and more: the narrowed program, the whole one, the
retries; the check before the solve reads these arrays and writes no tree). What a tree program
holds depends on the row: a split on an immutable feature, or one outside the row's domains
(narrowed to local search's distance), is decided while building and its subtree dropped. What
does not depend on the row is the trees' shape, and that is what is kept here, per fitted
estimator (:data:`~counterplan.planning.structure.cache.MEMO`, so a refit drops it; a batch's
worker process or Ray actor reads it once from its copy of the model):

* every split as one of the ensemble's distinct ``(column, threshold)`` keys, so a row decides
  each key once (a forest's hundreds of trees share most of their thresholds), not each node;
* each tree's nodes in the order the encoder has always visited them (depth first, right child
  first), each node's parent and side, and the range of its leaves in that order, so the leaves
  under a split are a slice, not a walk;
* the nodes of every tree by depth, so which nodes a row reaches is one vectorised step per level
  (:meth:`EnsembleArrays.reached`): a node is reached when its parent is, and the parent's split
  is not decided to the other side.

The encoder (:mod:`counterplan.solver.exact.encoders.trees`) decides the keys for the row and
writes the program from these arrays in the same order as its walk, so the program is the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from counterplan.planning.structure.cache import MEMO
from counterplan.planning.structure.trees import Ensemble, Tree, read_ensemble

IntArray = npt.NDArray[np.intp]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

LEFT, RIGHT, FREE = 0, 1, 2
"""A key's decision for a row: always left, always right, or decided by the program."""

_ARRAYS = "exact-ensemble-arrays"
"""The memo's key of an estimator's :class:`EnsembleArrays`."""


@dataclass(frozen=True)
class TreeOrder:
    """One tree's nodes in the encoder's order (depth first, right child first)."""

    offset: int
    """The tree's first node in the ensemble's node arrays."""
    order: IntArray
    """Every node of the tree, in the encoder's order."""
    splits: IntArray
    """The split nodes, in that order."""
    leaves: IntArray
    """The leaves, in that order."""
    leaf_start: IntArray
    """Per node: its first leaf's position in :attr:`leaves`; its leaves run to :attr:`leaf_stop`."""
    leaf_stop: IntArray
    split_list: list[int] = field(default_factory=list, compare=False)
    """:attr:`splits`, :attr:`leaves`, :attr:`leaf_start` and :attr:`leaf_stop` as lists (the
    encoder's per-node loop reads them)."""
    leaf_list: list[int] = field(default_factory=list, compare=False)
    start_list: list[int] = field(default_factory=list, compare=False)
    stop_list: list[int] = field(default_factory=list, compare=False)


@dataclass(frozen=True)
class EnsembleArrays:
    """An ensemble's trees as arrays over all their nodes (see the module)."""

    ensemble: Ensemble
    trees: list[TreeOrder]
    key: IntArray
    """Per node of the ensemble (trees one after another): its split's key (-1 at a leaf)."""
    key_list: list[int]
    """:attr:`key` as a list."""
    key_column: IntArray
    """Per key: the model input column it splits."""
    key_threshold: FloatArray
    """Per key: the threshold. A key is a distinct (column, threshold, comparison) of the
    ensemble's splits."""
    key_strict: BoolArray
    """Per key: ``x < threshold`` goes left (XGBoost), else ``x <= threshold``."""
    key_float32: BoolArray
    """Per key: the model compares float32 inputs."""
    key_node: list[tuple[int, int]]
    """Per key: one (tree, node) splitting on it, to ask the encoder's per-node code."""
    node_column: IntArray
    """Per node: the column it splits (-1 at a leaf)."""
    parent: IntArray
    """Per node: its parent (-1 at a root), as an index into the ensemble's nodes."""
    side: IntArray
    """Per node: :data:`LEFT` or :data:`RIGHT` of its parent."""
    levels: list[IntArray]
    """The ensemble's nodes by depth, from the roots' children down."""
    roots: IntArray
    missing_left: BoolArray
    """Per node: where a missing value goes."""
    memo: dict[Any, Any] = field(default_factory=dict, compare=False)
    """What the encoder derives from a key and the row-independent parts of its column (the grid
    step where a split turns), kept across rows."""

    @classmethod
    def of(cls, ensemble: Ensemble) -> EnsembleArrays:
        """Read ``ensemble``'s trees into arrays."""
        orders: list[TreeOrder] = []
        offset = 0
        parent_parts, side_parts, depth_parts = [], [], []
        for tree in ensemble.trees:
            order, parent, side, depth = _walk(tree)
            start, stop, leaves = _leaf_ranges(tree, order)
            splits = order[tree.feature[order] >= 0]
            orders.append(
                TreeOrder(
                    offset,
                    order,
                    splits,
                    leaves,
                    start,
                    stop,
                    splits.tolist(),
                    leaves.tolist(),
                    start.tolist(),
                    stop.tolist(),
                )
            )
            parent_parts.append(np.where(parent >= 0, parent + offset, -1))
            side_parts.append(side)
            depth_parts.append(depth)
            offset += len(tree.feature)
        features = np.concatenate([t.feature for t in ensemble.trees])
        thresholds = np.concatenate([t.threshold for t in ensemble.trees])
        strict = np.concatenate([np.full(len(t.feature), t.strict) for t in ensemble.trees])
        float32 = np.concatenate([np.full(len(t.feature), t.float32) for t in ensemble.trees])
        split = features >= 0
        keys = np.stack([features[split], thresholds[split], strict[split], float32[split]]).astype(np.float64)
        unique, inverse = np.unique(keys, axis=1, return_inverse=True)
        key = np.full(len(features), -1, dtype=np.intp)
        key[split] = inverse.reshape(-1)
        parent = np.concatenate(parent_parts)
        depth = np.concatenate(depth_parts)
        levels = [np.flatnonzero(depth == d) for d in range(1, int(depth.max()) + 1)]
        where: dict[int, tuple[int, int]] = {}
        for t_index, order_of in enumerate(orders):
            for node in order_of.splits:
                where.setdefault(int(key[order_of.offset + node]), (t_index, int(node)))
        return cls(
            ensemble=ensemble,
            trees=orders,
            key=key,
            key_list=key.tolist(),
            key_column=unique[0].astype(np.intp),
            key_threshold=unique[1].copy(),
            key_strict=unique[2] > 0,
            key_float32=unique[3] > 0,
            key_node=[where[k] for k in range(unique.shape[1])],
            node_column=features,
            parent=parent,
            side=np.concatenate(side_parts),
            levels=levels,
            roots=np.flatnonzero(parent < 0),
            missing_left=np.concatenate([t.missing_left for t in ensemble.trees]),
        )

    def reached(self, decision: npt.NDArray[np.int8]) -> BoolArray:
        """Which nodes a row reaches, given each node's decision (:data:`LEFT`, :data:`RIGHT` or
        :data:`FREE`; a leaf's is not read)."""
        reached = np.zeros(len(self.key), dtype=bool)
        reached[self.roots] = True
        for level in self.levels:
            up = self.parent[level]
            way = decision[up]
            reached[level] = reached[up] & ((way == FREE) | (way == self.side[level]))
        return reached


def ensemble_arrays(estimator: Any) -> EnsembleArrays:
    """``estimator``'s trees as arrays, read once per fitted state
    (:func:`~counterplan.planning.structure.trees.read_ensemble` refuses what it cannot read)."""
    return MEMO.get(estimator, _ARRAYS, lambda: EnsembleArrays.of(read_ensemble(estimator)))


def _walk(tree: Tree) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    """The tree's nodes in the encoder's order (a stack: the right child is visited first), and
    each node's parent, side and depth."""
    n = len(tree.feature)
    parent = np.full(n, -1, dtype=np.intp)
    side = np.zeros(n, dtype=np.intp)
    depth = np.zeros(n, dtype=np.intp)
    order = []
    stack = [0]
    while stack:
        node = stack.pop()
        order.append(node)
        if tree.feature[node] < 0:
            continue
        left, right = int(tree.left[node]), int(tree.right[node])
        parent[left] = parent[right] = node
        side[left], side[right] = LEFT, RIGHT
        depth[left] = depth[right] = depth[node] + 1
        stack.extend([left, right])
    return np.asarray(order, dtype=np.intp), parent, side, depth


def _leaf_ranges(tree: Tree, order: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """Per node, the range of its leaves among the tree's leaves in the encoder's order (a node's
    subtree is one run of a depth-first order), and those leaves."""
    n = len(tree.feature)
    is_leaf = tree.feature[order] < 0
    leaves = order[is_leaf]
    before = np.concatenate([[0], np.cumsum(is_leaf)])  # leaves before each position of the order
    position = np.empty(n, dtype=np.intp)
    position[order] = np.arange(n)
    size = np.ones(n, dtype=np.intp)  # subtree sizes, children before parents
    for node in order[::-1]:
        if tree.feature[node] >= 0:
            size[node] = 1 + size[tree.left[node]] + size[tree.right[node]]
    start = before[position]
    stop = before[position + size]
    return start.astype(np.intp), stop.astype(np.intp), leaves


__all__ = ["FREE", "LEFT", "RIGHT", "EnsembleArrays", "TreeOrder", "ensemble_arrays"]
