"""What the exact engine expects to spend on a problem, from its size, before any program is built.

``auto`` (:mod:`counterplan.solver.engines`) takes the exact engine only when it expects it to
finish within a per-row budget: a proof that takes a minute for a 0.1% better distance than local
search's two seconds is not what a user asking for "the best engine" wants (a LightGBM model on
Give Me Some Credit: 44-57 s). The estimate reads what the program's size grows with, from the
model's structure (read once per fitted model and kept) and the problem, never by building the
program: building a large ensemble's program alone takes longer than local search's answer.

* trees: the leaves the answer can reach (a binary each; a split on an immutable feature leaves
  only the original's side reachable, so a model that splits much on immutables, such as age, has
  a smaller program than its leaf count says) and the split thresholds of the mutable numbers
  inside their domains (what the proof branches on);
* a network: its hidden units (a binary each);
* a linear model or a scorecard: its features (a linear program with a few binaries).

:func:`estimate_seconds` turns the size into seconds by a rule fitted on measurements of this
machine (``benchmarks/auto_budget.py``; the data points and the fit are in
``docs/how-to/exact.md``), chosen to lie above every measured time: a model the rule calls cheap
was cheap every time it was measured.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from counterplan.planning.fast_path.cache import space_signature
from counterplan.planning.fast_path.inputs import FastInputs
from counterplan.planning.problem import CounterfactualProblem
from counterplan.planning.space import FeatureSpace
from counterplan.planning.structure.cache import MEMO
from counterplan.planning.structure.errors import NotEncodableError
from counterplan.planning.structure.kind import (
    BAGGED_TREES,
    GRADIENT_BOOSTING,
    HIST_GRADIENT_BOOSTING,
    final_estimator,
    is_linear,
    is_network,
    is_tree_ensemble,
    kind_name,
)
from counterplan.planning.structure.pipeline import describe_model
from counterplan.planning.structure.trees import read_ensemble

Family = Literal["linear", "trees", "network", "other"]
Ensemble = Literal["boosted", "bagged", "external", ""]
"""A tree ensemble's kind, for its cost: scikit-learn's boosting (each leaf adds to a logit),
averaged trees (forests: the averaged probabilities make a weaker relaxation) and the boosters
read from a dump (XGBoost, LightGBM: deeper, leaf-wise trees)."""
_FOREST = "exact-estimate-forest"
"""The memo's key of an ensemble's trees as one set of arrays."""


@dataclass(frozen=True)
class ProgramSize:
    """What the exact program's cost grows with (see the module's description)."""

    family: Family
    mutable: int
    """Mutable features."""
    ensemble: Ensemble = ""
    trees: int = 0
    leaves: int = 0
    reachable: int = 0
    """Leaves reachable with the immutable features at their values."""
    thresholds: int = 0
    """Split thresholds of the mutable numbers inside their domains."""
    units: int = 0
    """Hidden units of a network."""
    deep_units: int = 0
    """Of those, the units of the layers after the first (their bounds are looser: they cost more)."""

    def describe(self) -> str:
        """The size in words, for the engine's reason."""
        if self.family == "trees":
            leaves = (
                f"{self.leaves} leaves"
                if self.reachable == self.leaves
                else f"{self.reachable} of {self.leaves} leaves reachable"
            )
            return f"{self.trees} trees, {leaves}, {self.thresholds} thresholds on mutable features"
        if self.family == "network":
            return f"a network of {self.units} hidden units, {self.mutable} mutable features"
        if self.family == "linear":
            return f"a linear model, {self.mutable} mutable features"
        return f"{self.mutable} mutable features"


def program_size(problem: CounterfactualProblem) -> ProgramSize:
    """The size of ``problem``'s exact program, read from its model and features."""
    from counterplan.planning.scorecard import ScorecardAdapter  # noqa: PLC0415

    mutable = int(problem.space.mutable.sum())
    if isinstance(problem.model, ScorecardAdapter):
        return ProgramSize("linear", mutable)
    estimator = final_estimator(getattr(problem.model, "model", None))
    if is_linear(estimator):
        return ProgramSize("linear", mutable)
    if is_network(estimator):
        layers = [int(getattr(w, "shape", (0, 0))[1]) for w in getattr(estimator, "coefs_", [])[:-1]]
        return ProgramSize("network", mutable, units=sum(layers), deep_units=sum(layers[1:]))
    if is_tree_ensemble(estimator):
        forest = MEMO.get(estimator, _FOREST, lambda: _forest(estimator))
        if forest is not None:
            values = problem.split_values()  # a value on each side of each threshold (kept per model)
            thresholds = sum(len(v) for v in values.values()) // 2
            reachable = _reachable_leaves(problem, forest)
            return ProgramSize(
                "trees", mutable, _ensemble(estimator), forest.trees, forest.leaves, reachable, thresholds
            )
    return ProgramSize("other", mutable)


def _ensemble(estimator: Any) -> Ensemble:
    kind = kind_name(estimator)
    if kind in BAGGED_TREES:
        return "bagged"
    return "boosted" if kind in GRADIENT_BOOSTING or kind in HIST_GRADIENT_BOOSTING else "external"


@dataclass(frozen=True)
class _Forest:
    """Every tree of an ensemble in one set of arrays (node ids offset per tree), for a walk of all
    trees at once."""

    trees: int
    leaves: int
    roots: npt.NDArray[np.intp]
    feature: npt.NDArray[np.intp]
    threshold: npt.NDArray[np.float64]
    left: npt.NDArray[np.intp]
    right: npt.NDArray[np.intp]
    missing_left: npt.NDArray[np.bool_]
    strict: npt.NDArray[np.bool_]


def _forest(estimator: Any) -> _Forest | None:
    try:
        trees = read_ensemble(estimator).trees
    except NotEncodableError:
        return None
    sizes = np.array([len(t.feature) for t in trees], dtype=np.intp)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.intp)

    def children(side: list[npt.NDArray[np.intp]]) -> npt.NDArray[np.intp]:
        return np.concatenate([np.where(c >= 0, c + o, -1) for c, o in zip(side, offsets, strict=True)])

    feature = np.concatenate([t.feature for t in trees])
    return _Forest(
        trees=len(trees),
        leaves=int((feature < 0).sum()),
        roots=offsets,
        feature=feature,
        threshold=np.concatenate([t.threshold for t in trees]),
        left=children([t.left for t in trees]),
        right=children([t.right for t in trees]),
        missing_left=np.concatenate([t.missing_left for t in trees]),
        strict=np.concatenate([np.full(len(t.feature), t.strict) for t in trees]),
    )


def _reachable_leaves(problem: CounterfactualProblem, forest: _Forest) -> int:
    """The leaves a candidate can reach: at a split on a column of a feature that cannot move
    (immutable, or a one-value domain), only the original's side; elsewhere both. All trees walk
    together, one level per step."""
    fixed = _fixed_columns(problem)
    if fixed is None:
        return forest.leaves
    held, value = fixed
    frontier = forest.roots
    leaves = 0
    while frontier.size:
        feature = forest.feature[frontier]
        split = feature >= 0
        leaves += int((~split).sum())
        nodes, column = frontier[split], feature[split]
        inside = column < len(held)  # a column past the described ones: free
        column = np.where(inside, column, 0)
        free = ~(held[column] & inside)
        x = value[column]
        with np.errstate(invalid="ignore"):
            below = np.where(forest.strict[nodes], x < forest.threshold[nodes], x <= forest.threshold[nodes])
        below = np.where(np.isnan(x), forest.missing_left[nodes], below)
        frontier = np.concatenate([forest.left[nodes[free | below]], forest.right[nodes[free | ~below]]])
    return leaves


def _fixed_columns(problem: CounterfactualProblem) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.float64]] | None:
    """Per column the estimator reads: whether its feature cannot move, and its value for the
    original (the preprocessing's description evaluated on the encoded original, bit for bit the
    pipeline's; the description is kept per model and space encoding, so a batch's rows pay for it
    once); None when the columns cannot be read."""
    adapter: Any = problem.model
    model: Any = getattr(adapter, "model", None)
    space = problem.space
    decoded = getattr(adapter, "input_kind", "") == "dataframe"
    if model is None:
        return None
    inputs = MEMO.get(model, (_INPUTS, space_signature(space), decoded), lambda: _inputs(model, space, decoded))
    if inputs is None:
        return None
    columns, sources = inputs
    try:
        value = columns.transform(space.original.reshape(1, -1), space.missing_code).reshape(-1)
    except ValueError:  # an encoder would raise on the original: the program cannot be read
        return None
    still = ~space.mutable | (space.lower == space.upper)
    held = np.where(sources >= 0, still[np.maximum(sources, 0)], False)
    return held, value


_INPUTS = "exact-estimate-inputs"
"""The memo's key (with the space's encoding) of a model's described preprocessing."""


def _inputs(model: Any, space: FeatureSpace, decoded: bool) -> tuple[FastInputs, npt.NDArray[np.intp]] | None:
    """The compiled preprocessing of ``model`` for ``space``'s encoding and each estimator column's
    feature (-1: none), or None when the walker refuses a step."""
    try:
        described = describe_model(model, space, decoded).columns
    except NotEncodableError:
        return None
    sources = np.array([getattr(c, "source", -1) for c in described], dtype=np.intp)
    return FastInputs.build(described, space, decoded), sources


def estimate_seconds(size: ProgramSize) -> float:
    """The seconds the exact engine is expected to take at most, warm start included (see the
    module's description and the constants below)."""
    if size.family == "linear":
        return LINEAR_BASE_SECONDS + LINEAR_SECONDS_PER_FEATURE * size.mutable
    if size.family == "trees":
        work = max(size.reachable, 1) * math.log2(2 + size.thresholds)
        return TREE_BASE_SECONDS + TREE_SCALE[size.ensemble or "bagged"] * math.pow(work, TREE_EXPONENT)
    if size.family == "network":
        effective = size.units + (NETWORK_DEEP_WEIGHT - 1) * size.deep_units
        return NETWORK_SCALE * math.pow(effective, NETWORK_EXPONENT)
    return math.inf


LINEAR_BASE_SECONDS = 0.6
LINEAR_SECONDS_PER_FEATURE = 0.002
"""A linear model or scorecard: a small program (measured at most 0.50 s on adult and heloc, warm
start included, on a loaded machine); 200 features stay near a second."""
TREE_BASE_SECONDS = 0.7
TREE_EXPONENT = 1.8
TREE_SCALE: dict[str, float] = {"boosted": 1.7e-6, "bagged": 4.0e-6, "external": 1.3e-5}
"""Trees: ``TREE_BASE_SECONDS + TREE_SCALE[kind] * work**TREE_EXPONENT`` seconds, where ``work``
is the reachable leaves times ``log2(2 + thresholds)``. Fitted on ``benchmarks/auto_budget.py``
with the exact engine of interval rows, the narrowing to the warm start and SCIP for trees (adult
and heloc, 2 rows per model, 18 models from 20 trees of 8 leaves to 100 of depth 6, and the demo)
as an envelope: the base is the slowest small program (adult's 30-tree boosting, 0.68 s, warm
start and SCIP's start included, load average 7 on 2 cores); per kind the scale puts every
measured time under the estimate: boosting by the demo's 100-tree depth-3 model (9.2 s at 667
reachable leaves and 276 thresholds; heloc's same-sized model took 6.6 s), boosters from a dump by
adult's 20-tree 8-leaf LightGBM (1.96 s at 137 reachable leaves and 20 thresholds in one run, 1.19 s
in another; heloc's took 2.05 s at 160), forests by heloc's 20-tree depth-4 forest
(4.4 s at 314 leaves, proven; 100 trees of depth 6 run past 10 s on both data sets)."""
NETWORK_SCALE = 7.8e-5
NETWORK_EXPONENT = 2.47
NETWORK_DEEP_WEIGHT = 3.0
"""A network: ``NETWORK_SCALE * units**NETWORK_EXPONENT`` seconds, the units of later layers
counted three times. Fitted on :mod:`counterplan.solver.exact.encoders.network`'s table (one
hidden layer of 25, 50, 100, 200 units: at most 0.12, 1.22, 2.42, 20.5 s; two layers of 50:
30 s) as the line through the 50-unit point with the slope of the whole table (2.47 in log-log),
which lies above every measured row: 0.22, 2.3, 6.8, 40 and 40 s."""
