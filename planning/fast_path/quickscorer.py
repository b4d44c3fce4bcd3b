"""Boosted trees evaluated for all rows and trees at once, as bit masks (QuickScorer).

Lucchese et al., SIGIR 2015: per input column and per rank of a value among the column's split
thresholds, a precomputed bit mask per tree of the leaves still reachable; a row's leaf in a tree
is the lowest bit left after AND-ing its columns' masks. The trees are read with the one tree
reader (:func:`counterplan.planning.structure.trees.read_boosting`), in scikit-learn's order; the raw
score is the baseline plus the leaf values added tree by tree in that order, and the estimator's own
link gives the prediction, so the predictions are scikit-learn's, bit for bit.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from counterplan.planning.space import FloatMatrix
from counterplan.planning.structure.kind import GRADIENT_BOOSTING, HIST_GRADIENT_BOOSTING, kind_name
from counterplan.planning.structure.trees import Boosting, read_boosting

logger = logging.getLogger(__name__)

IntArray = npt.NDArray[np.intp]

MAX_TABLE_BYTES = 64 * 2**20
"""A forest whose bit-mask tables would exceed this falls back to the estimator's own predict."""
SMALL_SPLIT_COUNT = 8
"""Columns with at most this many distinct thresholds are ranked by one broadcast comparison."""
MAX_LEAVES = 64
"""Leaves per tree a mask word holds."""
MAX_RANK_TABLE_BYTES = 16 * 2**20
"""A forest whose table of ranks by threshold (:func:`_rank_table`) would exceed this ranks its
values column by column."""
SMALL_MASK_CELLS = 2560
"""A batch of at most this many values (rows times used columns: 120 rows of 21 columns) ANDs
its table rows in one gather and one reduction; larger ones find a reference row first."""
SMALL_BATCH = 64
"""Up to this many rows the trees' values are summed by one accumulate along each row; above it,
by one reduction over the trees of the whole block (the same additions in the same order: the same
bits either way; a reduction is not used for a few rows, whose block numpy could sum along the
trees as its contiguous axis, pairing terms up)."""

_DE_BRUIJN = {8: (0x1D, 5), 16: (0x09AF, 12), 32: (0x077CB531, 27), 64: (0x03F79D71B4CB0A89, 58)}
"""Multiplier and shift that map a single set bit to a unique index (a de Bruijn sequence)."""
_WORDS: dict[int, type[np.unsignedinteger[Any]]] = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


@dataclass(frozen=True)
class _Tree:
    """One regression tree with one value per node (children -1 at leaves)."""

    feature: IntArray
    threshold: FloatMatrix
    missing_left: npt.NDArray[np.bool_]
    left: IntArray
    right: IntArray
    value: FloatMatrix


@dataclass(frozen=True)
class TreePredictor:
    """A boosted forest evaluated for all rows and trees at once, equal to scikit-learn's own.

    Per used input column: the sorted distinct thresholds and a block of the mask table, one row
    per rank of a value among them (rank = thresholds below the value) plus one row for NaN. A
    row of the table holds, per tree, the leaves not ruled out by the column's splits that send
    such a value right. AND-ing a candidate's rows over its columns leaves, per tree, the bits of
    leaves it may reach; the leftmost one (lowest bit, leaves numbered left to right) is the leaf
    it reaches (QuickScorer). The raw score adds the leaf values tree by tree after the baseline,
    as scikit-learn does, then the estimator's own link gives the prediction.
    """

    columns: IntArray
    thresholds: tuple[FloatMatrix, ...]
    small: IntArray
    small_thresholds: FloatMatrix
    large: IntArray
    offsets: IntArray
    nan_rows: IntArray
    table_column: IntArray
    table: npt.NDArray[np.unsignedinteger[Any]]
    leaf_values: FloatMatrix
    tree_base: IntArray
    baseline: FloatMatrix
    n_outputs: int
    word_bits: int
    float32_inputs: bool
    allow_nan: bool
    finish: Callable[[FloatMatrix], FloatMatrix]
    every_threshold: FloatMatrix | None = None
    """Every column's thresholds in one sorted array (None: ranked column by column)."""
    rank_rows: IntArray | None = None
    """Per column and position of a value among ``every_threshold``: the table row of its rank
    in its own column (flattened, one block of ``every_threshold.size + 1`` per column)."""
    rank_base: IntArray | None = None
    """Per column: where its block of ``rank_rows`` starts."""

    def raw(self, X: FloatMatrix) -> FloatMatrix:
        """The raw scores, shape ``(n, n_outputs)`` in Fortran order (as scikit-learn makes them)."""
        X = self._checked(X)
        values = self._leaf_values(self._masks(self._rows(X[:, self.columns].T)))  # (n_trees, n)
        n = X.shape[0]
        if n <= SMALL_BATCH:  # one accumulate along each row's trees: no Python loop over the trees
            steps = np.empty((n, self.n_outputs, values.shape[0] // self.n_outputs + 1))
            steps[:, :, 0] = self.baseline
            steps[:, :, 1:] = values.reshape(-1, self.n_outputs, n).transpose(2, 1, 0)
            return np.asfortranarray(np.add.accumulate(steps, axis=2)[:, :, -1])
        # The baseline, then tree by tree: a reduction along the first axis of a C-ordered block
        # adds whole rows in order (numpy pairs up terms only along the contiguous axis).
        steps = np.empty((values.shape[0] // self.n_outputs + 1, self.n_outputs, n))
        steps[0] = self.baseline[:, None]
        steps[1:] = values.reshape(-1, self.n_outputs, n)
        return np.asarray(np.add.reduce(steps, axis=0).T)

    def predict(self, X: FloatMatrix) -> FloatMatrix:
        """The estimator's prediction (``predict_proba`` for a classifier, ``predict`` for a regressor)."""
        return self.finish(self.raw(X))

    def _checked(self, X: FloatMatrix) -> FloatMatrix:
        if self.float32_inputs:  # GradientBoosting compares float32 inputs with float64 thresholds
            X = X.astype(np.float32).astype(np.float64)
        if not self.allow_nan and not np.isfinite(X).all():
            raise ValueError("Input X contains NaN or infinity (or a value too large for float32).")
        return X

    def _rows(self, XT: FloatMatrix) -> IntArray:
        """Per used column and row (``XT`` is column-major): the table row of the value's rank.

        With the rank table (:func:`_rank_table`), one binary search for every value of every
        column among all columns' thresholds and one lookup (a column's thresholds below a value
        are those among all the thresholds below it; NaN, searched past +inf, finds its own row
        there); else a search per column."""
        if self.rank_rows is not None and self.every_threshold is not None and self.rank_base is not None:
            at = np.searchsorted(self.every_threshold, XT, side="left")
            at += self.rank_base[:, None]
            return np.asarray(self.rank_rows[at])
        ranks = np.empty(XT.shape, dtype=np.intp)
        if self.small.size:
            block = XT[self.small]
            counted = np.zeros(block.shape, dtype=np.intp)
            for k in range(self.small_thresholds.shape[1]):  # padded with +inf: never below a value
                counted += block > self.small_thresholds[:, k : k + 1]
            ranks[self.small] = counted
        for i in self.large:
            ranks[i] = np.searchsorted(self.thresholds[i], XT[i], side="left")
        ranks += self.offsets[:, None]
        nan = np.isnan(XT)
        if nan.any():
            ranks = np.where(nan, self.nan_rows[:, None], ranks)
        return ranks

    def _masks(self, rows: IntArray) -> npt.NDArray[np.unsignedinteger[Any]]:
        """Per row and tree: the leaves left after AND-ing the rows' table rows.

        A small batch gathers all its table rows at once and ANDs them along the columns (two
        numpy calls: :data:`SMALL_MASK_CELLS`). A larger batch of candidates mostly differs from
        one row in one column (a scan's, a chain's, a walker's moves): per column the most common
        table row is the reference, the AND of the reference rows of all columns but one is made
        once per column, and a row differing from the reference in at most one column takes it
        AND its one own table row (one AND, not one per column). The other rows AND their columns
        one by one, the columns they all share once (the whole batch so when most rows differ in
        several columns).
        AND is exact in any order: the masks are the same bits either way.
        """
        n_columns, n = rows.shape
        if n == 0:
            return np.empty((0, self.table.shape[1]), dtype=self.table.dtype)
        if n * n_columns <= SMALL_MASK_CELLS:  # one gather of every column's row, one AND along them
            return np.asarray(np.bitwise_and.reduce(self.table[rows], axis=0))
        counts = np.bincount(rows.ravel(), minlength=self.table.shape[0])
        most = np.flatnonzero(counts == np.maximum.reduceat(counts, self.offsets)[self.table_column])
        reference = most[np.searchsorted(self.table_column[most], np.arange(n_columns))]  # a most common, per column
        differs = rows != reference[:, None]
        many = differs.sum(axis=0) > 1
        if 2 * many.sum() > n:  # mostly rows of several changes: column by column is cheaper
            return self._masks_by_column(rows)
        first = differs.argmax(axis=0)
        ones = np.full((n_columns + 1, self.table.shape[1]), self.table.dtype.type(np.iinfo(self.table.dtype).max))
        below = ones.copy()  # below[c]: the AND of the reference rows of the columns before c
        np.bitwise_and.accumulate(self.table[reference], axis=0, out=below[1:])
        above = ones  # above[c]: the AND of those from c on
        above[:-1] = np.bitwise_and.accumulate(self.table[reference[::-1]], axis=0)[::-1]
        but = below[:-1] & above[1:]  # per column: the AND of every other column's reference row
        masks: npt.NDArray[np.unsignedinteger[Any]] = but[first] & self.table[rows[first, np.arange(n)]]
        if many.any():
            masks[many] = self._masks_by_column(rows[:, many])
        return masks

    def _masks_by_column(self, rows: IntArray) -> npt.NDArray[np.unsignedinteger[Any]]:
        """The masks AND-ed column by column; the columns whose row is the same in every row (the
        immutable ones, say) once for all rows."""
        same = (rows == rows[:, :1]).all(axis=1)
        masks = np.bitwise_and.reduce(self.table[rows[same, 0]], axis=0)
        masks = np.repeat(masks[None, :], rows.shape[1], axis=0)
        for column in rows[~same]:
            masks &= self.table[column]
        return masks

    def _leaf_values(self, masks: npt.NDArray[np.unsignedinteger[Any]]) -> FloatMatrix:
        """Per tree and row: the value of the leaf of the lowest bit left in the mask (its
        de Bruijn slot plus the tree's base, computed in place in the masks' own layout; the
        values are gathered straight into the trees' layout)."""
        word = masks.dtype.type
        multiplier, shift = _DE_BRUIJN[self.word_bits]
        slot = np.negative(masks)  # the lowest set bit: m & -m (two's complement)
        slot &= masks
        slot *= word(multiplier)
        slot >>= word(shift)
        if self.tree_base[-1] + self.word_bits <= np.iinfo(masks.dtype).max:
            slot += self.tree_base.astype(masks.dtype)  # the index fits the word: no wider copy
            return np.asarray(self.leaf_values.take(slot.T))
        return np.asarray(self.leaf_values.take(slot.T.astype(np.intp) + self.tree_base[:, None]))


def compile_boosting(estimator: Any) -> TreePredictor | None:
    """A :class:`TreePredictor` for ``HistGradientBoostingClassifier/Regressor`` (numeric splits)
    or ``GradientBoostingClassifier/Regressor`` with a constant initial estimator; None for any
    other model, a categorical split or a per-row initial estimator, trees of more than
    :data:`MAX_LEAVES` leaves, or tables beyond :data:`MAX_TABLE_BYTES`."""
    kind = kind_name(estimator)
    if kind in HIST_GRADIENT_BOOSTING:
        return _hist_gradient_boosting(estimator)
    if kind in GRADIENT_BOOSTING:
        return _gradient_boosting(estimator)
    return None


def _trees(boosting: Boosting, *, nan_possible: bool) -> list[_Tree]:
    """The reader's trees with their leaf values scaled by the learning rate, as scikit-learn adds
    them; without missing values in reach, no node sends NaN left."""
    out = []
    for tree in boosting.trees:
        missing_left = tree.missing_left if nan_possible else np.zeros(tree.feature.size, dtype=bool)
        value = boosting.rate * tree.value[:, 0]
        out.append(_Tree(tree.feature, tree.threshold, missing_left, tree.left, tree.right, value))
    return out


def _hist_gradient_boosting(estimator: Any) -> TreePredictor | None:
    if getattr(estimator, "_preprocessor", None) is not None or getattr(estimator, "is_categorical_", None) is not None:
        return None
    trees = _trees(read_boosting(estimator), nan_possible=True)
    baseline = np.asarray(estimator._baseline_prediction, dtype=np.float64).reshape(-1)
    loss = estimator._loss
    if hasattr(estimator, "classes_"):
        finish: Callable[[FloatMatrix], FloatMatrix] = loss.predict_proba
    else:

        def finish(raw: FloatMatrix) -> FloatMatrix:
            return np.asarray(loss.link.inverse(raw.ravel()))

    return _forest(trees, baseline, finish, float32_inputs=False, allow_nan=True)


def _gradient_boosting(estimator: Any) -> TreePredictor | None:
    init = estimator.init_
    if not (isinstance(init, str) and init == "zero") and kind_name(init) not in ("DummyClassifier", "DummyRegressor"):
        return None  # a per-row initial estimator
    zero = np.zeros((1, estimator.n_features_in_), dtype=np.float32)
    baseline = np.asarray(estimator._raw_predict_init(zero), dtype=np.float64).reshape(-1)
    trees = _trees(read_boosting(estimator), nan_possible=False)  # NaN never reaches a tree: rejected
    loss = estimator._loss
    if hasattr(estimator, "classes_"):

        def finish(raw: FloatMatrix) -> FloatMatrix:  # GradientBoosting's raw scores are C-ordered
            return np.asarray(loss.predict_proba(raw.ravel() if raw.shape[1] == 1 else np.ascontiguousarray(raw)))

    else:

        def finish(raw: FloatMatrix) -> FloatMatrix:
            return np.asarray(raw.ravel())

    return _forest(trees, baseline, finish, float32_inputs=True, allow_nan=False)


def _leaf_ranges(tree: _Tree) -> tuple[IntArray, IntArray, IntArray]:
    """Leaves numbered left to right; per node the range ``[low, high)`` of leaves below it."""
    n = tree.left.size
    low = np.zeros(n, dtype=np.intp)
    high = np.zeros(n, dtype=np.intp)
    order: list[int] = []
    stack: list[tuple[int, bool]] = [(0, False)]
    while stack:
        node, done = stack.pop()
        if tree.left[node] < 0:
            low[node] = len(order)
            order.append(node)
            high[node] = len(order)
        elif done:
            low[node] = low[tree.left[node]]
            high[node] = high[tree.right[node]]
        else:
            stack += [(node, True), (int(tree.right[node]), False), (int(tree.left[node]), False)]
    return low, high, np.asarray(order, dtype=np.intp)


def _forest(
    trees: list[_Tree],
    baseline: FloatMatrix,
    finish: Callable[[FloatMatrix], FloatMatrix],
    *,
    float32_inputs: bool,
    allow_nan: bool,
) -> TreePredictor | None:
    """Mask tables, thresholds and leaf values of ``trees`` (ordered iteration by iteration)."""
    most = max(int((t.left < 0).sum()) for t in trees)
    if most > MAX_LEAVES:
        return None
    bits = next(b for b in (8, 16, 32, 64) if most <= b)  # narrower words: less memory to AND
    ranges = [_leaf_ranges(tree) for tree in trees]
    splits = _splits(trees, ranges, bits)
    columns = np.unique(splits["column"]) if splits["column"].size else np.zeros(1, dtype=np.intp)
    thresholds = tuple(np.unique(splits["threshold"][splits["column"] == c]) for c in columns)
    if sum(t.size + 2 for t in thresholds) * len(trees) * (bits // 8) > MAX_TABLE_BYTES:
        return None
    table, offsets = _tables(splits, columns, thresholds, len(trees), _WORDS[bits])
    counts = np.array([t.size for t in thresholds], dtype=np.intp)
    small = np.flatnonzero(counts <= SMALL_SPLIT_COUNT)
    every, rank_rows, rank_base = _rank_table(thresholds, offsets, offsets + counts + 1)
    return TreePredictor(
        columns=columns.astype(np.intp),
        thresholds=thresholds,
        small=small,
        small_thresholds=_padded([thresholds[i] for i in small]),
        large=np.flatnonzero(counts > SMALL_SPLIT_COUNT),
        offsets=offsets,
        nan_rows=offsets + counts + 1,
        table_column=np.repeat(np.arange(counts.size, dtype=np.intp), counts + 2),
        table=table,
        leaf_values=_leaf_table(trees, [order for _, _, order in ranges], bits),
        tree_base=np.arange(len(trees), dtype=np.intp) * bits,
        baseline=baseline,
        n_outputs=baseline.size,
        word_bits=bits,
        float32_inputs=float32_inputs,
        allow_nan=allow_nan,
        finish=finish,
        every_threshold=every,
        rank_rows=rank_rows,
        rank_base=rank_base,
    )


def _rank_table(
    thresholds: tuple[FloatMatrix, ...], offsets: IntArray, nan_rows: IntArray
) -> tuple[FloatMatrix | None, IntArray | None, IntArray | None]:
    """Every column's thresholds and +inf as one sorted array ``every``, and per column and
    position ``g`` of a value among them (``searchsorted(every, value)``, 0 to ``every.size``) the
    table row of the value's rank in its own column: ``offsets[c]`` plus its thresholds below
    ``every[g]``. Exact: ``every`` holds each column's thresholds, so those of column ``c`` below a
    value are those among ``every[:g]``, the same comparisons as a search of the column's own.
    Every number, +inf too, is at most ``every``'s last value, +inf: only NaN (sorted past
    everything) is searched to ``g == every.size``, whose row is the column's NaN row
    (``nan_rows``), so the values need no NaN test. Flattened with each column's start;
    (None, None, None) beyond :data:`MAX_RANK_TABLE_BYTES`: a search per column (a forest of
    thousands of thresholds on hundreds of columns)."""
    every = np.unique(np.concatenate([*thresholds, [np.inf]]))
    width = every.size + 1
    if len(thresholds) * width * np.dtype(np.intp).itemsize > MAX_RANK_TABLE_BYTES:
        return None, None, None
    rows = np.empty((len(thresholds), width), dtype=np.intp)
    for c, column_thresholds in enumerate(thresholds):
        rows[c, :-1] = np.searchsorted(column_thresholds, every, side="left") + offsets[c]
        rows[c, -1] = nan_rows[c]
    return every, rows.ravel(), np.arange(len(thresholds), dtype=np.intp) * width


def _padded(thresholds: list[FloatMatrix]) -> FloatMatrix:
    """Few thresholds per column as one matrix, padded with +inf (no value is above +inf); as wide
    as the longest list (one-hot columns have one threshold: one comparison per value)."""
    padded = np.full((len(thresholds), max((t.size for t in thresholds), default=0)), np.inf)
    for row, values in enumerate(thresholds):
        padded[row, : values.size] = values
    return padded


def _leaf_table(trees: list[_Tree], orders: list[IntArray], bits: int) -> FloatMatrix:
    """Leaf values per tree, at the index the de Bruijn hash gives each leaf's bit."""
    multiplier, shift = _DE_BRUIJN[bits]
    values = np.zeros(len(trees) * bits, dtype=np.float64)
    for t, (tree, order) in enumerate(zip(trees, orders, strict=True)):
        slots = [((1 << b) * multiplier % (1 << bits)) >> shift for b in range(order.size)]
        values[t * bits + np.asarray(slots, dtype=np.intp)] = tree.value[order]
    return values


def _splits(
    trees: list[_Tree], ranges: list[tuple[IntArray, IntArray, IntArray]], bits: int
) -> dict[str, npt.NDArray[Any]]:
    """Every internal node: its column, threshold, NaN direction, tree, and the mask of the leaves
    that stay reachable when a value goes right (all but those of its left subtree)."""
    every = (1 << bits) - 1
    parts: dict[str, list[Any]] = {"column": [], "threshold": [], "missing_left": [], "tree": [], "mask": []}
    for t, (tree, (low, high, _)) in enumerate(zip(trees, ranges, strict=True)):
        inner = np.flatnonzero(tree.left >= 0)
        for child in tree.left[inner]:
            below = ((1 << int(high[child])) - 1) ^ ((1 << int(low[child])) - 1)
            parts["mask"].append(every ^ below)
        parts["tree"] += [t] * inner.size
        parts["column"] += tree.feature[inner].tolist()
        parts["threshold"] += tree.threshold[inner].tolist()
        parts["missing_left"] += tree.missing_left[inner].tolist()
    return {
        "column": np.asarray(parts["column"], dtype=np.intp),
        "threshold": np.asarray(parts["threshold"], dtype=np.float64),
        "missing_left": np.asarray(parts["missing_left"], dtype=bool),
        "tree": np.asarray(parts["tree"], dtype=np.intp),
        "mask": np.asarray(parts["mask"], dtype=_WORDS[bits]),
    }


def _tables(
    splits: dict[str, npt.NDArray[Any]],
    columns: IntArray,
    thresholds: tuple[FloatMatrix, ...],
    n_trees: int,
    word: type[np.unsignedinteger[Any]],
) -> tuple[npt.NDArray[np.unsignedinteger[Any]], IntArray]:
    """Per column: rows for ranks 0..k (splits with a threshold below the value AND-ed in) and NaN."""
    every = np.iinfo(word).max
    blocks = []
    offsets = []
    offset = 0
    for c, column_thresholds in zip(columns, thresholds, strict=True):
        on = splits["column"] == c
        k = np.searchsorted(column_thresholds, splits["threshold"][on])
        trees, masks = splits["tree"][on], splits["mask"][on]
        block = np.full((column_thresholds.size + 2, n_trees), every, dtype=word)
        np.bitwise_and.at(block, (k + 1, trees), masks)  # a value above threshold k goes right
        block[:-1] = np.bitwise_and.accumulate(block[:-1], axis=0)
        right = ~splits["missing_left"][on]
        block[-1] = every
        np.bitwise_and.at(block[-1], trees[right], masks[right])
        blocks.append(block)
        offsets.append(offset)
        offset += block.shape[0]
    return np.concatenate(blocks), np.asarray(offsets, dtype=np.intp)


__all__ = ["MAX_TABLE_BYTES", "TreePredictor", "compile_boosting"]
