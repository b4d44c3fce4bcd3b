"""Tree ensembles in the exact engine: one indicator per reachable leaf, one binary per threshold.

Each tree gets an indicator per leaf a row can reach (their sum is 1); each split becomes an
expression that is 1 when it sends the row right, and the leaves under its left (right) child are
allowed only when it is 0 (1). A split on a feature is decided by that feature's variables:

* a category (or a function of one, as a one-hot column): the categories that go right;
* a number of allowed values: the values that go right, each decided exactly as the model does;
* a number on a grid: the grid step where the model's own comparison (float32 for scikit-learn)
  turns, so no grid value is lost to a margin;
* any other number: a binary "above the threshold", each side kept a margin away from it
  (:data:`~counterplan.planning.structure.trees.FLOAT32_MARGIN` for float32 comparisons), so an
  answer the program calls valid is valid for the real model.

The output is the weighted sum of the leaves' values plus an offset: the real model's output at
the original minus the trees' sum there, so baselines and initial estimators need no special cases.
Valid inequalities (thresholds crossed cost their distance; a higher threshold implies a lower
one) tighten the relaxation.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from counterplan.planning.grid import GridUnit
from counterplan.planning.models import model_input
from counterplan.planning.structure.errors import NotEncodableError
from counterplan.planning.structure.kind import final_estimator
from counterplan.planning.structure.trees import FLOAT32_MARGIN, FLOAT64_MARGIN, Ensemble, Tree
from counterplan.solver.exact.encoders.leaf_costs import Path, crossing, leaf_rows
from counterplan.solver.exact.encoders.tree_cache import FREE, LEFT, RIGHT, EnsembleArrays, ensemble_arrays
from counterplan.solver.exact.milp import INF, Expr, add
from counterplan.solver.exact.program import (
    AT_ORIGINAL,
    FeatureVars,
    Formulation,
    Lin,
    ModelInputs,
    Output,
    evaluate,
    original_input_row,
)

FloatArray = npt.NDArray[np.float64]

SPLITS_PER_CHECK = 256
"""The distinct splits :meth:`_TreeEncoder.reach` decides between two stop checks: a 500-tree forest
has hundreds of thousands, seconds of work (a few milliseconds per check interval)."""

Side = tuple[float, int, float]
"""A threshold on one side of a feature's original: (sort key, nearest first; its binary; the
distance from the original to the threshold's far side)."""


def encode_trees(formulation: Formulation, estimator: Any, inputs: ModelInputs, original: FloatArray) -> Output:
    """A tree ensemble's output, from its trees read once per fitted model
    (:func:`~counterplan.solver.exact.encoders.tree_cache.ensemble_arrays`); its leaves beyond the
    formulation's reach fixed at 0 unless ``leaf_bounds`` is off. For the check before a solve
    (``structure_only``) the trees are read, not written: a placeholder output."""
    arrays = ensemble_arrays(estimator)
    if formulation.structure_only:  # the check before a solve: read, not written
        ensemble = arrays.ensemble
        classes: list[Lin] | None = [({}, 0.0)] * ensemble.outputs if ensemble.outputs > 1 else None
        return Output(({}, 0.0), ensemble.link, ensemble.description, classes=classes)
    return encode_ensemble(
        formulation, arrays.ensemble, inputs, original, arrays=arrays, leaf_bounds=formulation.leaf_bounds
    )


def encode_ensemble(
    formulation: Formulation,
    ensemble: Ensemble,
    inputs: ModelInputs,
    original: FloatArray,
    *,
    real: FloatArray | None = None,
    arrays: EnsembleArrays | None = None,
    leaf_bounds: bool = False,
) -> Output:
    """The ensemble's output; ``real`` is the model's output at the original in the ensemble's
    link (read from the scikit-learn model when not given). The formulation's trees, leaves and
    thresholds are set to the ensemble's. With ``arrays`` (the ensemble's, kept per model), the
    nodes a row reaches are found from the arrays (each distinct split decided once, the reach
    one vectorised step per depth); without, by walking each tree (an ensemble made for one
    program: a scorecard's, a learned relation's). Both write the same program. ``leaf_bounds``
    fixes at 0 the leaves no solution within the formulation's reach picks
    (:mod:`~counterplan.solver.exact.encoders.leaf_costs`): the model's trees, whose leaves the
    distance pays for; not a relation's or a scorecard's. With them come the rows of each
    threshold crossed by a tree's leaves beyond it
    (:func:`~counterplan.solver.exact.encoders.leaf_costs.threshold_rows`)."""
    encoder = _TreeEncoder(formulation, inputs, original, arrays)
    if leaf_bounds and formulation.reach is not None:
        encoder.paths = {}
    outputs = ensemble.outputs
    totals: list[Expr] = [{} for _ in range(outputs)]
    reach = encoder.reach() if arrays is not None else None
    for t_index, tree in enumerate(ensemble.trees):
        formulation.check_stop()  # a large forest takes seconds: its building counts against the limit
        leaves = encoder.tree(t_index, tree) if reach is None else encoder.tree_of_arrays(t_index, tree, reach)
        for leaf, var in leaves.items():
            for k in range(outputs):
                if tree.value[leaf, k] != 0.0:
                    totals[k][var] = totals[k].get(var, 0.0) + ensemble.weight * float(tree.value[leaf, k])
        formulation.leaves.append(leaves)
        formulation.trees.append(tree)
    formulation.thresholds = encoder.thresholds
    _crossing_rows(formulation)
    if encoder.paths is not None:  # the model's trees: the leaves out of the warm start's reach fixed at 0
        leaf_rows(formulation, encoder.paths)  # and each threshold crossed by the leaves beyond it
    for variables in encoder.raw.values():  # above a higher threshold implies above a lower one
        ordered = [variables[t] for t in sorted(variables)]
        for lower_var, upper_var in itertools.pairwise(ordered):
            formulation.milp.row({lower_var: 1.0, upper_var: -1.0}, 0.0, INF)
    offsets = _offsets(formulation, ensemble, original, real)
    lins = [(totals[k], float(offsets[k])) for k in range(outputs)]
    if outputs == 1:
        # a regressor's output takes finitely many values (sums of leaves), and a range's end
        # is often one of them (a quantile of the data's predictions): kept without a margin, as a
        # scorecard's points are, else the optimum there was excluded and a farther one proven
        return Output(lins[0], ensemble.link, ensemble.description, inclusive=ensemble.link == "value")
    return Output(lins[0], ensemble.link, ensemble.description, classes=lins)


class _Reach(NamedTuple):
    """What a row makes of an ensemble's arrays: per node its decision (:data:`LEFT`,
    :data:`RIGHT`, :data:`FREE`), whether the encoder's per-node code must run there (a split the
    program decides, or one decided by a row of its own), and whether the row reaches it."""

    decision: list[int]
    call: list[bool]
    reached: list[bool]


class _TreeEncoder:
    """The splits of one ensemble, written into one program."""

    def __init__(
        self, formulation: Formulation, inputs: ModelInputs, original: FloatArray, arrays: EnsembleArrays | None = None
    ) -> None:
        self.formulation = formulation
        self.milp = formulation.milp
        self.space = formulation.problem.space
        self.inputs = inputs
        self.original = original
        self.arrays = arrays
        self.features_of = {f.index: f for f in formulation.features}
        self.raw: dict[int, dict[float, int]] = {}
        """feature -> raw threshold -> its binary variable."""
        self.thresholds: list[tuple[int, int, float]] = []
        self.turns: dict[tuple[float, ...], int | None] = arrays.memo if arrays is not None else {}
        """(threshold, strict, float32, a, b, grid) -> the grid step where a split turns (kept
        with the model's arrays: it does not depend on the row)."""
        self.split_lins: dict[int, Lin] = {}
        """key -> the expression of a split the program decides (with arrays: one per key)."""
        self.paths: dict[int, Path] | None = None
        """Leaf variable -> the undecided splits on its path (their expressions and its side of
        each), when the leaves are to be bounded (:mod:`~counterplan.solver.exact.encoders.leaf_costs`)."""

    def tree(self, t_index: int, tree: Tree) -> dict[int, int]:
        """Encode one tree by walking it; its leaves' indicators (leaf node -> variable)."""
        splits: dict[int, Lin] = {}
        """node -> the expression that is 1 when the split sends the row right."""
        reached: list[int] = []
        stack = [0]
        while stack:  # only the nodes a row can reach: constant splits are decided here
            node = stack.pop()
            if tree.feature[node] < 0:
                reached.append(node)
                continue
            right = self.right_of(tree, node)
            if right is True:
                stack.append(int(tree.right[node]))
            elif right is False:
                stack.append(int(tree.left[node]))
            else:
                splits[node] = right
                stack.extend([int(tree.left[node]), int(tree.right[node])])
        leaves = self._leaves(t_index, reached)
        for node, lin in splits.items():
            left = _leaves_under(tree, int(tree.left[node]), leaves)
            right_leaves = _leaves_under(tree, int(tree.right[node]), leaves)
            self._split_rows(lin, left, right_leaves)
        return leaves

    def reach(self) -> _Reach:
        """Decide every distinct split of the ensemble's arrays for this row, and find the nodes
        the row reaches. A split on a column without variables (an immutable feature, a constant)
        is decided by the original, all at once; any other by :meth:`side_of`, once per key."""
        arrays = self.arrays
        assert arrays is not None
        columns = arrays.key_column
        constant = np.array([not self.inputs.columns[c][0] for c in range(len(self.inputs.columns))], dtype=bool)
        fixed = constant[columns]
        decision = np.full(len(columns), FREE, dtype=np.int8)
        call = np.ones(len(columns), dtype=bool)
        value = self.original[columns[fixed]]
        value = np.where(arrays.key_float32[fixed], value.astype(np.float32).astype(np.float64), value)
        threshold = arrays.key_threshold[fixed]
        left = np.where(arrays.key_strict[fixed], value < threshold, value <= threshold)
        decision[fixed] = np.where(left, LEFT, RIGHT)
        call[fixed] = False
        for done, k in enumerate(np.flatnonzero(~fixed).tolist()):
            if done % SPLITS_PER_CHECK == 0:
                self.formulation.check_stop()  # deciding a large forest's splits takes seconds
            t_index, node = arrays.key_node[k]
            decision[k], call[k] = self.side_of(arrays.ensemble.trees[t_index], node)
        split = arrays.key >= 0
        node_decision = np.full(len(arrays.key), FREE, dtype=np.int8)
        node_decision[split] = decision[arrays.key[split]]
        node_call = np.zeros(len(arrays.key), dtype=bool)
        node_call[split] = call[arrays.key[split]]
        at = np.flatnonzero(split)  # indexed by the splits alone: an ensemble of single leaves has no key
        missing = np.zeros(len(arrays.key), dtype=bool)
        missing[at] = fixed[arrays.key[at]] & np.isnan(self.original[arrays.node_column[at]])
        node_decision[missing] = np.where(arrays.missing_left[missing], LEFT, RIGHT)  # a missing value's own way
        return _Reach(node_decision.tolist(), node_call.tolist(), arrays.reached(node_decision).tolist())

    def tree_of_arrays(self, t_index: int, tree: Tree, reach: _Reach) -> dict[int, int]:
        """Encode one tree from the ensemble's arrays and the row's reach: the same program as
        :meth:`tree`, in the same order, without walking the tree (plain lists: a tree's few
        nodes cost less in Python than in numpy's calls)."""
        arrays = self.arrays
        assert arrays is not None
        order = arrays.trees[t_index]
        offset = order.offset
        decision, call, reached = reach
        keys = arrays.key_list
        splits: list[tuple[int, Lin]] = []
        for node in order.split_list:
            at = offset + node
            if not reached[at] or not call[at]:
                continue  # not reached, or decided by the row with nothing to write
            if decision[at] != FREE:
                self.right_of(tree, node)  # decided, with a row of its own (a threshold's margin)
                continue
            lin = self.split_lins.get(keys[at])
            if lin is None:
                side = self.right_of(tree, node)
                if isinstance(side, bool):  # pragma: no cover - side_of and right_of agree
                    raise AssertionError(f"tree {t_index}, node {node}: decided while building, free by its key")
                lin = self.split_lins[keys[at]] = side
            splits.append((node, lin))
        leaves = self._leaves(t_index, [leaf for leaf in order.leaf_list if reached[offset + leaf]])
        all_leaves, start, stop = order.leaf_list, order.start_list, order.stop_list
        for node, lin in splits:
            left, right = int(tree.left[node]), int(tree.right[node])
            self._split_rows(
                lin,
                [leaves[leaf] for leaf in all_leaves[start[left] : stop[left]] if leaf in leaves],
                [leaves[leaf] for leaf in all_leaves[start[right] : stop[right]] if leaf in leaves],
            )
        return leaves

    def _leaves(self, t_index: int, reached: list[int]) -> dict[int, int]:
        """An indicator per reached leaf, exactly one of them on."""
        milp = self.milp
        leaves = {leaf: milp.var(f"tree{t_index}/leaf{leaf}", 0.0, 1.0) for leaf in reached}
        milp.row({v: 1.0 for v in leaves.values()}, 1.0, 1.0)
        return leaves

    def _split_rows(self, lin: Lin, left_leaves: list[int], right_leaves: list[int]) -> None:
        """The leaves under a split's left (right) child only when it sends the row left (right);
        each leaf's path noted, when the leaves are to be bounded."""
        terms, constant = lin
        if self.paths is not None:
            for side, under in ((False, left_leaves), (True, right_leaves)):
                for leaf in under:
                    self.paths.setdefault(leaf, []).append((lin, side))
        if left_leaves:  # sum(left) <= 1 - right
            self.milp.row(add(dict.fromkeys(left_leaves, 1.0), terms), -INF, 1.0 - constant)
        if right_leaves:  # sum(right) <= right
            self.milp.row(add(dict.fromkeys(right_leaves, 1.0), terms, -1.0), -INF, constant)

    def side_of(self, tree: Tree, node: int) -> tuple[int, bool]:
        """What :meth:`right_of` makes of ``node``, without writing anything: its decision
        (:data:`LEFT`, :data:`RIGHT`, :data:`FREE`) and whether :meth:`right_of` must still run
        where the node is reached (the program decides it; a row of its own; or a refusal)."""
        column = int(tree.feature[node])
        lin = self.inputs.columns[column]
        if not lin[0]:
            return (LEFT if tree.goes_left(node, float(self.original[column])) else RIGHT), False
        owner = _owner(self.formulation, set(lin[0]))
        if owner is None:
            return FREE, True  # refused where it is reached
        f = self.features_of[owner]
        if f.categories is not None or f.allowed is not None:
            return FREE, True
        try:
            a, b = _affine_in_feature(lin, f.value)
        except NotEncodableError:
            return FREE, True
        if a == 0.0:
            return (LEFT if tree.goes_left(node, float(self.original[column])) else RIGHT), False
        if f.grid is not None and a > 0:
            last_left = self._grid_turn(f, tree, node, (a, b))
            if last_left is not None:
                side = self._grid_side(f, last_left)
                return (FREE, True) if side is None else (RIGHT if side else LEFT, False)
        x_threshold, below, above_margin = self._x_threshold(tree, node, f, (a, b))
        case = self._threshold_case(f.index, x_threshold, (below, above_margin), strict=tree.strict)
        if case in ("free", "inside"):
            return FREE, True
        above = case in ("right", "above")
        return (RIGHT if above == (a > 0) else LEFT), case in ("above", "below")

    def right_of(self, tree: Tree, node: int) -> Lin | bool:
        """1 when ``node`` sends the row right, as an expression; or the side it always takes."""
        column = int(tree.feature[node])
        lin = self.inputs.columns[column]
        if not lin[0]:
            return not tree.goes_left(node, float(self.original[column]))
        owner = _owner(self.formulation, set(lin[0]))
        if owner is None:
            raise NotEncodableError(f"column {column} of the model's input mixes several features")
        f = self.features_of[owner]
        if f.categories is not None:
            return self._category_right(tree, node, lin, f.categories)
        if f.allowed is not None:  # each allowed value decides exactly, as the model does
            picks, values = f.allowed
            a, b = _affine_in_feature(lin, f.value)
            return {
                v: 1.0 for v, value in zip(picks, values, strict=True) if not tree.goes_left(node, a * value + b)
            }, 0.0
        return self._number_right(tree, node, column, lin, f)

    def _category_right(self, tree: Tree, node: int, lin: Lin, categories: list[tuple[Any, Lin]]) -> Lin:
        """A function of one category choice: right where its value is past the threshold."""
        t = float(tree.threshold[node])
        rights: Expr = {}
        right_constant = 0.0
        for _, indicator in categories:
            value = evaluate(lin, _unit(indicator, self.milp.n_vars))
            goes_right = (value >= t) if tree.strict else (value > t)
            if goes_right:
                rights = add(rights, indicator[0])
                right_constant += indicator[1]
        return rights, right_constant

    def _number_right(self, tree: Tree, node: int, column: int, lin: Lin, f: FeatureVars) -> Lin | bool:
        """A number: the column is ``a * value + b``; a binary above the threshold (on a grid: the
        grid step where the model's comparison turns)."""
        a, b = _affine_in_feature(lin, f.value)
        if a == 0.0:
            return not tree.goes_left(node, float(self.original[column]))
        if f.grid is not None and a > 0:
            exact = self._grid_threshold(f, tree, node, (a, b))
            if exact is not None:
                return exact
        x_threshold, below, above_margin = self._x_threshold(tree, node, f, (a, b))
        above = self._threshold_var(f.index, x_threshold, (below, above_margin), strict=tree.strict)
        if isinstance(above, bool):  # the domain lies on one side (beyond the margin)
            return above if a > 0 else not above
        return ({above: 1.0}, 0.0) if a > 0 else ({above: -1.0}, 1.0)

    def _x_threshold(
        self, tree: Tree, node: int, f: FeatureVars, affine: tuple[float, float]
    ) -> tuple[float, float, float]:
        """A split's threshold in the feature's own units, and the margins kept below and above it.
        An original inside the margin is on the side the model's own comparison puts it: that
        side's margin ends at the original (values beyond it round no nearer the threshold), the
        other keeps the whole margin. (Both used to shrink to half the original's distance: an
        original on the threshold left none, the program put it on either side, and the model
        rejected every retry's answer: the ONNX fuzz, a hand-built split at 1.4 and an original
        1.4.)"""
        a, b = affine
        t = float(tree.threshold[node])
        margin = max(abs(t), 1.0) * (FLOAT32_MARGIN if tree.float32 else FLOAT64_MARGIN) * self.formulation.margin_scale
        x_threshold = (t - b) / a  # in the feature's own units
        x_margin = margin / abs(a)
        o = float(self.space.original[f.index])
        if abs(o - x_threshold) >= x_margin:
            return x_threshold, x_margin, x_margin
        right = not tree.goes_left(node, float(self.original[int(tree.feature[node])]))
        if right == (a > 0):  # the original lies on the program's upper side
            return x_threshold, x_margin, o - x_threshold
        return x_threshold, x_threshold - o, x_margin

    def _threshold_case(self, j: int, t: float, margins: tuple[float, float], *, strict: bool) -> str:
        """Where feature ``j``'s domain lies against raw threshold ``t`` and its margins (below,
        above): ``left`` or ``right`` (all on one side), ``below`` or ``above`` (one side only
        beyond the margin: the value is held there by a row), ``inside`` (within the margin:
        refused), or ``free``."""
        domain = self.formulation.domain
        low, high = float(domain.lower[j]), float(domain.upper[j])
        below, above = margins
        if t > high if strict else t >= high:
            return "left"
        if t <= low if strict else t < low:
            return "right"
        if t + above > high and t - below < low:
            return "inside"
        if t + above > high:
            return "below"
        if t - below < low:
            return "above"
        return "free"

    def _threshold_var(self, j: int, t: float, margins: tuple[float, float], *, strict: bool) -> int | bool:
        """The binary that is 1 when feature ``j`` lies above raw threshold ``t``, each side kept a
        margin away from it; or, when the domain reaches only one side beyond the margin, that side
        (True: above) with the value held out of the margin."""
        space = self.space
        milp = self.milp
        low, high = float(self.formulation.domain.lower[j]), float(self.formulation.domain.upper[j])
        terms, constant = self.formulation.features[j].value
        below, above = margins
        case = self._threshold_case(j, t, margins, strict=strict)
        if case in ("left", "right"):
            return case == "right"
        if case == "inside":
            raise NotEncodableError(f"feature {space.features[j].name!r}: its domain lies inside a threshold's margin")
        if case == "below":  # above cannot keep the margin: stay below
            milp.row(terms, -INF, t - below - constant)
            return False
        if case == "above":
            milp.row(terms, t + above - constant, INF)
            return True
        existing = self.raw.setdefault(j, {})
        if t in existing:
            return existing[t]
        var = milp.binary(f"{space.features[j].name}>{t:.6g}")
        # above: value >= t + above when var = 1; below: value <= t - below when var = 0
        milp.row(add(terms, {var: -(t + above - low)}), low - constant, INF)
        milp.row(add(terms, {var: -(high - t + below)}), -INF, t - below - constant)
        existing[t] = var
        self.thresholds.append((var, j, t))
        self.formulation.bands[var] = (t - below, t + above)
        return var

    def _grid_turn(self, f: FeatureVars, tree: Tree, node: int, affine: tuple[float, float]) -> int | None:
        """The last grid step a split on a number on a grid sends left, by the tree's own
        comparison (float32 for scikit-learn); None when the turn is not found next to the
        threshold. It depends on the model and the pipeline, not the row: kept across rows."""
        assert f.grid is not None
        unit = f.grid[1]
        a, b = affine
        threshold = float(tree.threshold[node])
        key = (threshold, float(tree.strict), float(tree.float32), a, b, unit.up, unit.down)
        if key in self.turns:
            return self.turns[key]
        t = (threshold - b) / a
        if not math.isfinite(unit.steps(t)):  # a split of the missing values from the rest (scikit-learn's
            self.turns[key] = None  # threshold inf): no grid value turns it, the margin's case decides it
            return None
        centre = math.floor(unit.steps(t))
        reach = TURN_STEPS + _rounding_steps(tree, threshold, a, unit)
        if reach > TURN_STEPS:  # float32 rounds the input over several grid steps: the turn lies within them
            turn = _bisected_turn(lambda k: not tree.goes_left(node, a * unit.value(k) + b), centre, reach)
            self.turns[key] = turn
            return turn
        window = range(centre - TURN_STEPS, centre + TURN_STEPS + 1)
        rights = [not tree.goes_left(node, a * unit.value(k) + b) for k in window]
        turn = None
        if not (rights[0] or not rights[-1] or any(r and not later for r, later in itertools.pairwise(rights))):
            turn = window[rights.index(True) - 1]
        self.turns[key] = turn
        return turn

    def _grid_steps(self, f: FeatureVars) -> tuple[int, int]:
        """The first and last grid step of ``f``'s domain."""
        assert f.grid is not None
        domain = self.formulation.domain
        return f.grid[1].step_ends(float(domain.grid_lower[f.index]), float(domain.grid_upper[f.index]))

    def _grid_side(self, f: FeatureVars, last_left: int) -> bool | None:
        """The side a grid split always takes in ``f``'s domain (True: right), or None."""
        low, high = self._grid_steps(f)
        if f.stay is None and last_left >= high:
            return False
        if f.stay is None and last_left < low:
            return True
        return None

    def _grid_threshold(self, f: FeatureVars, tree: Tree, node: int, affine: tuple[float, float]) -> Lin | bool | None:
        """A split on a number on a grid, decided exactly: the grid step where the tree's own
        comparison (float32 for scikit-learn) turns from left to right, so no grid value is lost to
        a margin. None when the turn is not found next to the threshold (then a margin is used)."""
        assert f.grid is not None
        last_left = self._grid_turn(f, tree, node, affine)
        if last_left is None:
            return None
        side = self._grid_side(f, last_left)
        if side is not None:
            return side
        unit = f.grid[1]
        a, b = affine
        low, high = self._grid_steps(f)
        original_right = not tree.goes_left(node, a * float(self.space.original[f.index]) + b)
        key = unit.value(last_left + 0.5)  # between the last grid value on the left and the first on the right
        if f.stay is not None:  # two thresholds in one grid step may put the original on either side
            key += unit.value(-1e-6 if original_right else 1e-6)
        existing = self.raw.setdefault(f.index, {})
        if key not in existing:
            existing[key] = self._grid_var(f, key, (last_left, low, high), original_right)
        return {existing[key]: 1.0}, 0.0

    def _grid_var(self, f: FeatureVars, key: float, steps_at: tuple[int, int, int], original_right: bool) -> int:
        """The binary of a grid split: 1 from grid step ``last_left + 1`` on, 0 up to ``last_left``."""
        assert f.grid is not None
        steps, unit = f.grid
        last_left, low, high = steps_at
        milp = self.milp
        var = milp.binary(f"{self.space.features[f.index].name}>{key:.6g}")
        if f.stay is None:
            milp.row({steps: 1.0, var: -(last_left + 1 - low)}, low, INF)  # right: steps >= last_left + 1
            milp.row({steps: 1.0, var: -(high - last_left)}, -INF, last_left)  # left: steps <= last_left
        else:  # an original off the grid: the rows hold on the grid; staying, the original's side holds
            big = float(max(abs(last_left) + 1, abs(low), abs(high)) + 1)
            milp.row({steps: 1.0, var: -(last_left + 1 - low), f.stay: big}, low, INF)
            milp.row({steps: 1.0, var: -(high - last_left), f.stay: -big}, -INF, last_left)
            milp.row(
                {var: 1.0, f.stay: -1.0} if original_right else {var: 1.0, f.stay: 1.0},
                *((0.0, INF) if original_right else (-INF, 1.0)),
            )
        self.thresholds.append((var, f.index, key))
        self.formulation.bands[var] = (unit.value(last_left), unit.value(last_left + 1))
        if f.stay is not None:
            self.formulation.original_sides[var] = original_right
        return var


TURN_STEPS = 3
"""Grid steps on each side of a threshold where a split's turn is looked for, beyond the width of
the model's rounding of its input there (:func:`_rounding_steps`)."""


def _rounding_steps(tree: Tree, threshold: float, a: float, unit: GridUnit) -> int:
    """How many grid steps of the feature one float32 step of the model's input spans at
    ``threshold`` (0 for a float64 tree): the model's comparison turns within that many of it.

    A grid finer than float32 (six decimals near 199, where float32 steps by 1.5e-5; cents above
    half a million) turns up to several steps from the threshold, beyond the 3 looked at: the
    turn was not found and the split took a margin of 16 float32 steps on each side, which cut
    the grid values within it out of the program (a float of six decimals near 199 over a range
    of 9e-4 lost nearly half its domain, and the exact engine proved "infeasible" where local
    search found an answer: the rules fuzz)."""
    if not tree.float32:
        return 0
    spacing = float(np.spacing(np.float32(abs(threshold))))
    return math.ceil(abs(unit.steps(spacing / a)))


def _bisected_turn(goes_right: Callable[[int], bool], centre: int, reach: int) -> int | None:
    """The last grid step left of a split's turn within ``reach`` steps of ``centre``, by bisection
    (the model's comparison of a rounded affine input is monotone in the step); None when the ends
    do not straddle it."""
    low, high = centre - reach, centre + reach
    if goes_right(low) or not goes_right(high):
        return None
    while high - low > 1:
        middle = (low + high) // 2
        if goes_right(middle):
            high = middle
        else:
            low = middle
    return low


def _crossing_rows(formulation: Formulation) -> None:
    """Valid inequalities that tighten the relaxation: crossing a threshold away from the
    original changes the feature, and the feature's distance is at least the distance to the far
    side of the farthest threshold crossed, written over the threshold intervals (OCEAN's
    piecewise distance): ``distance >= sum_k c_k x_k`` over the thresholds above the original,
    ``c_k`` the extra distance from the previous one to this one, and likewise below. With the
    thresholds' order (a higher one implies a lower one) the sum is, at every integral point,
    the distance to the last threshold crossed; in the relaxation it is the convex hull's, where
    one row per threshold (``distance >= c x_k``) let a fractional solution cross many thresholds
    partly for the price of one. (The big-M rows imply all of it for integral values; the
    relaxation learns it only from these.)"""
    sides = _sides(formulation)
    if not formulation.interval_distance:
        _threshold_rows(formulation, sides)
        return
    for j, (up, down) in sides.items():
        distance = formulation.features[j].distance
        if distance is None:
            continue
        terms: Expr = {distance: 1.0}
        constant = 0.0
        for side, sign in ((up, 1.0), (down, -1.0)):
            reach = 0.0
            for _, var, far in sorted(side):  # nearest first
                step = max(far, reach) - reach
                reach += step
                if step > 0.0:
                    terms[var] = terms.get(var, 0.0) - sign * step
                    constant += step if sign < 0 else 0.0
        formulation.interval_lower[distance] = ({v: -c for v, c in terms.items() if v != distance}, constant)
        if len(terms) > 1:  # distance - up_sum - down_sum(1 - x) >= 0
            formulation.milp.row(terms, constant, INF)


def _sides(formulation: Formulation) -> dict[int, tuple[list[Side], list[Side]]]:
    """Per changeable feature, its thresholds above the original and below it; and the rows
    that say crossing one changes the feature."""
    milp = formulation.milp
    sides: dict[int, tuple[list[Side], list[Side]]] = {}
    for var, j, key in formulation.thresholds:
        f = formulation.features[j]
        if f.changed is None:
            continue
        right, far = crossing(formulation, var, j)
        up, down = sides.setdefault(j, ([], []))
        if not right:  # the original lies below: var = 1 means a change up to `above` at least
            milp.row({var: 1.0, f.changed: -1.0}, -INF, 0.0)
            up.append((key, var, far))
        else:  # the original lies above: var = 0 means a change down to `below` at least
            milp.row({var: -1.0, f.changed: -1.0}, -INF, -1.0 + 0.0)
            down.append((-key, var, far))
    return sides


def _threshold_rows(formulation: Formulation, sides: dict[int, tuple[list[Side], list[Side]]]) -> None:
    """The weaker cuts, one per threshold: ``distance >= c_k x_k`` (the encoding before the
    interval rows, kept for the comparison in ``benchmarks/exact_trees.py``)."""
    for j, (up, down) in sides.items():
        distance = formulation.features[j].distance
        if distance is None:
            continue
        for _, var, far in up:
            if far > 0.0:
                formulation.milp.row({distance: 1.0, var: -far}, 0.0, INF)
        for _, var, far in down:
            if far > 0.0:
                formulation.milp.row({distance: 1.0, var: far}, far, INF)


def _unit(indicator: Lin, n: int) -> FloatArray:
    """A variable vector where ``indicator`` is 1 and every other indicator 0."""
    x = np.zeros(n)
    for v in indicator[0]:
        x[v] = 1.0
    return x


def _owner(formulation: Formulation, variables: set[int]) -> int | None:
    """The one feature whose variables ``variables`` are, or None (several, or none)."""
    owners = {formulation.owner_of_var.get(v) for v in variables}
    return owners.pop() if len(owners) == 1 and None not in owners else None


def _affine_in_feature(column: Lin, value: Lin) -> tuple[float, float]:
    """``(a, b)`` with ``column = a * value + b``, when the column is a multiple of the value.
    The ratios of the column's coefficients to the value's are compared to a relative 1e-9, not
    for equality: a scaled number whose original lies off its grid has terms (the grid's step,
    the original's offset) whose ratios differ in the last bits, and was refused as not affine."""
    terms, constant = column
    value_terms, value_constant = value
    ratios = [terms.get(v, 0.0) / c for v, c in value_terms.items() if c != 0.0]
    if not ratios or set(terms) - set(value_terms):
        raise NotEncodableError("a model input column is not an affine function of one feature")
    a = ratios[0]
    if any(abs(r - a) > 1e-9 * max(1.0, abs(a)) for r in ratios):
        raise NotEncodableError("a model input column is not an affine function of one feature")
    return a, constant - a * value_constant


def _leaves_under(tree: Tree, node: int, leaves: dict[int, int]) -> list[int]:
    out = []
    stack = [node]
    while stack:
        n = stack.pop()
        if tree.feature[n] < 0:
            if n in leaves:
                out.append(leaves[n])
        else:
            stack.extend([int(tree.left[n]), int(tree.right[n])])
    return out


def _offsets(formulation: Formulation, ensemble: Ensemble, original: FloatArray, real: FloatArray | None) -> FloatArray:
    """Per output, what the model adds to the trees' sum: stated by the model (an ONNX graph's
    base values), or the real model's output at the original minus the trees' sum there."""
    if real is None and ensemble.offset is not None:
        return np.asarray(ensemble.offset, dtype=np.float64)
    at_original = _real_output(formulation, ensemble.link, ensemble.outputs) if real is None else real
    offsets: FloatArray = at_original - ensemble.total(original)
    return offsets


def _real_output(formulation: Formulation, link: str, outputs: int = 1) -> FloatArray:
    """The real model's outputs at the original: class 1's probability or logit (or each class's,
    for a multi-class model), or the value; computed once per problem
    (:data:`~counterplan.solver.exact.program.AT_ORIGINAL`)."""
    problem = formulation.problem
    inputs = formulation.inputs
    return AT_ORIGINAL.get(problem, ("output", link, outputs), lambda: _model_output(problem, inputs, link, outputs))


def _model_output(problem: Any, inputs: ModelInputs | None, link: str, outputs: int) -> FloatArray:
    """The model's outputs at the original. A scikit-learn estimator behind a pipeline, fitted
    without column names, is asked on the row the pipeline gives it (already computed for the
    program: :func:`~counterplan.solver.exact.program.original_input_row`), which is what the
    pipeline would hand it, so the preprocessing runs once, not twice."""
    adapter: Any = problem.model
    model = adapter.model
    original = problem.space.original.reshape(1, -1)
    data = model_input(original, problem.space, adapter.input_kind)
    final = final_estimator(model)
    if (
        inputs is not None
        and inputs.preprocess is not None
        and type(final).__module__.startswith("sklearn.")
        and getattr(final, "feature_names_in_", None) is None
    ):
        model, data = final, original_input_row(problem, inputs).reshape(1, -1)
    if link == "probability":
        proba: FloatArray = np.asarray(model.predict_proba(data), dtype=np.float64)[0]
        return proba if outputs > 1 else proba[1:2]
    if link == "logit":
        if hasattr(final, "decision_function"):
            raw = model.decision_function(data)
        elif hasattr(final, "get_booster"):  # XGBoost: the margin before the sigmoid
            raw = model.predict(data, output_margin=True)
        else:
            raw = model.predict(data, raw_score=True)  # LightGBM
        scores: FloatArray = np.asarray(raw, dtype=np.float64).reshape(-1)[:outputs]
        return scores
    value: FloatArray = np.asarray(model.predict(data), dtype=np.float64).reshape(-1)[:1]
    return value


__all__ = ["encode_ensemble", "encode_trees"]
