"""Pairs of changes a tree ensemble rewards only together, read from its trees at one row.

Local search prices a pair of changes by their gains alone, added (the beam's pairs, the
combinations): two features whose trees split one under the other can reach the goal together
where neither gains alone, or where one alone even hurts (a boosted model on generated data: x4
alone 0.343 -> 0.343, x5 alone -> 0.193, both -> 0.740; local search paid 85% more than the proven
optimum, which changes exactly those two). No added gains see such a pair; the trees do.

:func:`pair_moves` walks every tree of the ensemble at the original (in the estimator's input
space): at each split on its path that a movable number decides, it crosses to the other side
(the nearest split value of the feature past the threshold), follows that row down, and at each
split on the new path that another movable number decides crosses again; the leaf the pair reaches
is compared with the original's, in the direction of the goal's class. Every tree at once, level
by level (numpy over all the rows walked, no Python per node); the pairs come back with the sum of
the trees' gains that found them, the largest first. They are candidates, not answers: the search
scores them through the model with the rest of its rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from counterplan.planning.distinct_rows import distinct_rows
from counterplan.planning.space import FeatureSpace
from counterplan.planning.structure.cache import MEMO
from counterplan.planning.structure.kind import final_estimator, is_linear
from counterplan.planning.structure.pipeline import describe_model
from counterplan.planning.structure.splits import READ_ERRORS, affine_columns, split_points
from counterplan.planning.structure.trees import Ensemble, read_ensemble

IntArray = npt.NDArray[np.intp]
FloatArray = npt.NDArray[np.float64]
FLAT_TREES = "flat trees"
"""The memo key of an estimator's :class:`FlatTrees`."""
MAX_PAIRS = 65_536
"""Pairs walked at most per row (the crossings nearest the root first): a bound on the work of a
deep, wide ensemble."""


@dataclass(frozen=True)
class PairMoves:
    """Pairs of changes of the original (feature ``first`` to ``first_value`` and ``second`` to
    ``second_value``), each with the gain toward the goal's class the trees that found it give it,
    the largest first."""

    first: IntArray
    first_value: FloatArray
    second: IntArray
    second_value: FloatArray
    gain: FloatArray

    @classmethod
    def none(cls) -> PairMoves:
        """No pairs (a model whose trees cannot be read, a linear model, a goal without a class)."""
        empty_int, empty = np.empty(0, dtype=np.intp), np.empty(0)
        return cls(empty_int, empty, empty_int.copy(), empty.copy(), empty.copy())

    def __len__(self) -> int:
        return int(self.first.size)


@dataclass(frozen=True)
class FlatTrees:
    """Every tree of an ensemble in one set of node arrays (children as indices into them)."""

    feature: IntArray
    threshold: FloatArray
    left: IntArray
    right: IntArray
    missing_left: npt.NDArray[np.bool_]
    value: FloatArray
    roots: IntArray
    strict: bool
    float32: bool

    @classmethod
    def of(cls, ensemble: Ensemble) -> FlatTrees | None:
        """The ensemble's trees flattened; None when they compare inputs in different ways."""
        trees = ensemble.trees
        if not trees or len({(t.strict, t.float32) for t in trees}) != 1:
            return None
        sizes = np.array([t.feature.size for t in trees], dtype=np.intp)
        roots = np.r_[0, np.cumsum(sizes)[:-1]].astype(np.intp)
        shift = np.repeat(roots, sizes)

        def child(name: str) -> IntArray:
            nodes = np.concatenate([getattr(t, name) for t in trees]).astype(np.intp)
            return np.where(nodes >= 0, nodes + shift, -1)

        return cls(
            feature=np.concatenate([t.feature for t in trees]).astype(np.intp),
            threshold=np.concatenate([t.threshold for t in trees]).astype(np.float64),
            left=child("left"),
            right=child("right"),
            missing_left=np.concatenate([t.missing_left for t in trees]).astype(bool),
            value=np.concatenate([t.value for t in trees]).astype(np.float64),
            roots=roots,
            strict=trees[0].strict,
            float32=trees[0].float32,
        )

    def goes_left(self, nodes: IntArray, x: FloatArray) -> npt.NDArray[np.bool_]:
        """The trees' own decisions at ``nodes`` for the input values ``x`` (as :meth:`Tree.goes_left`)."""
        seen = x.astype(np.float32).astype(np.float64) if self.float32 else x
        t = self.threshold[nodes]
        left = seen < t if self.strict else seen <= t  # False for NaN, which goes its own way
        missing = np.isnan(x)
        if missing.any():
            left = np.where(missing, self.missing_left[nodes], left)
        return left


def _flat(estimator: Any) -> FlatTrees | None:
    try:
        return FlatTrees.of(read_ensemble(estimator))
    except READ_ERRORS:
        return None


def pair_moves(
    model: Any,
    space: FeatureSpace,
    inputs: FloatArray,
    *,
    dataframe: bool,
    class_index: int,
    limit: int,
    split_values: Mapping[int, FloatArray] | None = None,
) -> PairMoves:
    """At most ``limit`` pairs of changes of ``space``'s original that ``model``'s trees reward
    together toward class number ``class_index`` (see the module); ``inputs`` is the original as
    the final estimator reads it (the model's preprocessing applied); the values crossed to are
    ``split_values`` (a solve's), else the model's. None for a model the readers cannot
    read, a linear one, or a regressor."""
    try:
        estimator = final_estimator(model)
        if is_linear(estimator) or not hasattr(estimator, "classes_") or limit <= 0:
            return PairMoves.none()
        flat: FlatTrees | None = MEMO.get(estimator, FLAT_TREES, lambda: _flat(estimator))
        if flat is None:
            return PairMoves.none()
        columns = describe_model(model, space, dataframe).columns
        owner_of, slope, shift = affine_columns(columns, space)
        values = split_values if split_values else split_points(model, space, dataframe=dataframe)
    except READ_ERRORS:
        return PairMoves.none()
    outputs = flat.value.shape[1]
    if outputs == 1:  # a binary model's one output is its second class's
        weight = flat.value[:, 0] if class_index == 1 else -flat.value[:, 0]
    elif 0 <= class_index < outputs:
        weight = flat.value[:, class_index]
    else:
        return PairMoves.none()
    walk = _Walk(
        flat=flat,
        inputs=np.asarray(inputs, dtype=np.float64),
        owner_of=owner_of,
        slope=slope,
        shift=shift,
        values=values,
    )
    return walk.pairs(weight, limit)


class _Walk:
    """The walks of one row through every tree: the original with up to two features changed,
    each walked in one tree from a node on. Per node, once: the original's input there, the
    movable feature that decides it, its affine map, and the nearest split values of that feature
    that send a row left and right of it (checked through the trees' own comparison)."""

    def __init__(
        self,
        *,
        flat: FlatTrees,
        inputs: FloatArray,
        owner_of: IntArray,
        slope: FloatArray,
        shift: FloatArray,
        values: Mapping[int, FloatArray],
    ) -> None:
        self.flat = flat
        splits = flat.feature >= 0
        column = np.where(splits, flat.feature, 0)
        self.input = np.where(splits, inputs[column], 0.0)
        self.owner = np.where(splits, owner_of[column], -1)
        self.slope = np.where(splits, slope[column], 0.0)
        self.shift = np.where(splits, shift[column], 0.0)
        self.to_left = np.full(flat.feature.size, np.nan)
        self.to_right = np.full(flat.feature.size, np.nan)
        movable = np.flatnonzero(self.owner >= 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            cut = (flat.threshold[movable] - self.shift[movable]) / self.slope[movable]
        owners = self.owner[movable]
        order = np.argsort(owners, kind="stable")
        bounds = np.searchsorted(owners[order], np.arange(int(owners.max(initial=-1)) + 2))
        for feature in range(bounds.size - 1):
            mine = order[bounds[feature] : bounds[feature + 1]]
            split = values.get(feature)
            if mine.size == 0 or split is None or split.size == 0:
                continue
            for at in (
                np.searchsorted(split, cut[mine], side="right"),
                np.searchsorted(split, cut[mine], side="left") - 1,
            ):
                ok = (at >= 0) & (at < split.size)
                nodes, value = movable[mine[ok]], split[at[ok]]
                left = flat.goes_left(nodes, self.slope[nodes] * value + self.shift[nodes])
                self.to_left[nodes[left]] = value[left]
                self.to_right[nodes[~left]] = value[~left]

    def _descend(
        self, start: IntArray, features: tuple[IntArray, ...], values: tuple[FloatArray, ...]
    ) -> tuple[IntArray, IntArray, IntArray, npt.NDArray[np.bool_]]:
        """Each walked row down its tree from ``start``: its leaf, and every node on its way as
        (walk, node, went left) triples."""
        flat = self.flat
        node = start.copy()
        walks: list[IntArray] = []
        nodes: list[IntArray] = []
        lefts: list[npt.NDArray[np.bool_]] = []
        going = np.flatnonzero(flat.feature[node] >= 0)
        while going.size:
            at = node[going]
            x = self.input[at]
            owner = self.owner[at]
            for feature, value in zip(features, values, strict=True):
                own = np.flatnonzero(owner == feature[going])
                if own.size:
                    x[own] = self.slope[at[own]] * value[going[own]] + self.shift[at[own]]
            left = flat.goes_left(at, x)
            walks.append(going)
            nodes.append(at)
            lefts.append(left)
            node[going] = np.where(left, flat.left[at], flat.right[at])
            going = going[flat.feature[node[going]] >= 0]
        if not walks:
            empty = np.empty(0, dtype=np.intp)
            return node, empty, empty.copy(), np.empty(0, dtype=bool)
        return node, np.concatenate(walks), np.concatenate(nodes), np.concatenate(lefts)

    def _crossings(self, nodes: IntArray, went_left: npt.NDArray[np.bool_]) -> tuple[IntArray, FloatArray, IntArray]:
        """Per node on a walked row's way: the movable feature that decides it and its nearest
        split value on the side the row does not take (feature -1: none within the problem's
        bounds), and the child that value leads to."""
        value = np.where(went_left, self.to_right[nodes], self.to_left[nodes])
        feature = np.where(np.isnan(value), -1, self.owner[nodes])
        child = np.where(went_left, self.flat.right[nodes], self.flat.left[nodes])
        return feature, value, child

    def pairs(self, weight: FloatArray, limit: int) -> PairMoves:
        flat = self.flat
        trees = flat.roots.size
        none = (np.full(trees, -1, dtype=np.intp),)
        leaf0, walk0, node0, left0 = self._descend(flat.roots, none, (np.zeros(trees),))
        # first crossings: every movable split on the original's way in every tree, walked on
        # from the other side
        first, first_value, child = self._crossings(node0, left0)
        keep = np.flatnonzero(first >= 0)
        tree1, first, first_value, child = walk0[keep], first[keep], first_value[keep], child[keep]
        if tree1.size == 0:
            return PairMoves.none()
        _, walk1, node1, left1 = self._descend(child, (first,), (first_value,))
        # second crossings: every split under it on the new way that another movable feature decides
        second, second_value, child2 = self._crossings(node1, left1)
        keep = np.flatnonzero((second >= 0) & (second != first[walk1]))[:MAX_PAIRS]
        walk1, second, second_value, child2 = walk1[keep], second[keep], second_value[keep], child2[keep]
        if walk1.size == 0:
            return PairMoves.none()
        tree2 = tree1[walk1]
        a, a_value = first[walk1], first_value[walk1]
        leaf2, _, _, _ = self._descend(child2, (a, second), (a_value, second_value))
        gain = weight[leaf2] - weight[leaf0[tree2]]
        good = gain > 0.0
        if not good.any():
            return PairMoves.none()
        a, a_value, b, b_value, gain = a[good], a_value[good], second[good], second_value[good], gain[good]
        swap = a > b  # one order per pair
        a, b = np.where(swap, b, a), np.where(swap, a, b)
        a_value, b_value = np.where(swap, b_value, a_value), np.where(swap, a_value, b_value)
        table = np.stack([a.astype(np.float64), a_value, b.astype(np.float64), b_value], axis=1)
        first_rows, inverse = distinct_rows(table)
        unique = table[first_rows]
        total = np.asarray(np.bincount(inverse, weights=gain, minlength=unique.shape[0]), dtype=np.float64)
        order = np.lexsort((np.arange(total.size), -total))[:limit]
        unique, total = unique[order], total[order]
        return PairMoves(
            first=unique[:, 0].astype(np.intp),
            first_value=unique[:, 1].copy(),
            second=unique[:, 2].astype(np.intp),
            second_value=unique[:, 3].copy(),
            gain=total,
        )


__all__ = ["FLAT_TREES", "FlatTrees", "PairMoves", "pair_moves"]
