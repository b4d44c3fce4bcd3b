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
* a linear model: its features (a linear program with a few binaries);
* a scorecard: its mutable variables' bins within their domains (a chain of splits each: a
  variable of many bins costs more than many variables of few);
* whatever the model, a trust region's reference rows (a weight each, in rows over the numbers'
  values). Such rows, and a relation's, are what CP-SAT's program of a tree ensemble cannot
  state (:mod:`counterplan.solver.exact.intervals`): its program goes to SCIP or HiGHS instead,
  and is estimated by their rule.

:func:`estimate_seconds` turns the size into seconds by a rule per family and per solver (a tree
ensemble's program goes to CP-SAT under the ``auto`` backend, much faster than SCIP or HiGHS on
it: :func:`tree_solver`), fitted on measurements of this machine (``benchmarks/auto_budget.py``,
whose ``--fit`` fits CP-SAT's tree rule; the data points and the fit are in
``docs/how-to/exact.md``) and lifted to lie above the typical row of every measured model: a
model the rule calls cheap was cheap on most of its rows (a few rows of a model may take longer:
the rule reads the program's size, not the row's distance to the boundary).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
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
    ONNX_TREES,
    is_linear,
    is_network,
    is_tree_ensemble,
    kind_name,
    model_estimator,
)
from counterplan.planning.structure.pipeline import describe_model
from counterplan.solver.exact.encoders.tree_cache import FREE, LEFT, RIGHT, EnsembleArrays, ensemble_arrays

Family = Literal["linear", "scorecard", "trees", "network", "other"]
Ensemble = Literal["boosted", "histogram", "bagged", "external", ""]
"""A tree ensemble's kind, for its cost: scikit-learn's gradient boosting (shallow trees, each
leaf adds to a logit), its histogram boosting (leaf-wise trees of up to 31 leaves: at the same
size about twice as slow under CP-SAT), averaged trees (forests: the averaged probabilities make a
weaker relaxation) and the boosters read from a dump (XGBoost, LightGBM: deep or leaf-wise trees,
and a slower model call for the warm start)."""
Solver = Literal["cpsat", "milp"]
"""What solves a tree ensemble's program: CP-SAT, or a MILP solver (SCIP, HiGHS)."""


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
    bins: int = 0
    """A scorecard's bins of its mutable variables, within their domains."""
    bin_work: float = 0.0
    """A scorecard's work: the sum over its mutable variables of ``bins ** 1.25``."""
    hull_rows: int = 0
    """A trust region's reference rows (a weight each in the program; 0: no trust region)."""
    value_rows: bool = False
    """The program has rows over the numbers' values (a trust region, relations): a tree
    ensemble's goes to SCIP or HiGHS, not CP-SAT (:func:`tree_solver`)."""

    def describe(self) -> str:
        """The size in words, for the engine's reason."""
        region = f", a trust region of {self.hull_rows} rows" if self.hull_rows else ""
        relations = ", relations" if self.value_rows and not self.hull_rows else ""
        return self._model() + region + relations

    def _model(self) -> str:
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
        if self.family == "scorecard":
            return f"a scorecard, {self.bins} bins of {self.mutable} mutable features"
        return f"{self.mutable} mutable features"


def program_size(problem: CounterfactualProblem) -> ProgramSize:
    """The size of ``problem``'s exact program, read from its model and features."""
    region = problem.trust_region
    hull = region.reference_rows if region is not None else 0
    return replace(_model_size(problem), hull_rows=hull, value_rows=region is not None or problem.relations is not None)


def _model_size(problem: CounterfactualProblem) -> ProgramSize:
    """The size of the model's part of the program."""
    from counterplan.planning.scorecard import ScorecardAdapter  # noqa: PLC0415

    mutable = int(problem.space.mutable.sum())
    if isinstance(problem.model, ScorecardAdapter):
        bins = _scorecard_bins(problem, problem.model)
        work = sum(b**SCORECARD_BIN_POWER for b in bins)
        return ProgramSize("scorecard", mutable, bins=sum(bins), bin_work=work)
    estimator = model_estimator(problem.model)
    if is_linear(estimator):
        return ProgramSize("linear", mutable)
    if is_network(estimator):
        layers = [int(getattr(w, "shape", (0, 0))[1]) for w in getattr(estimator, "coefs_", [])[:-1]]
        return ProgramSize("network", mutable, units=sum(layers), deep_units=sum(layers[1:]))
    if is_tree_ensemble(estimator):
        arrays = _arrays(estimator)
        if arrays is not None:
            values = problem.split_values()  # a value on each side of each threshold (kept per model)
            thresholds = sum(len(v) for v in values.values()) // 2
            reachable = _reachable_leaves(problem, arrays)
            leaves = int((arrays.node_column < 0).sum())
            kind = _ensemble(estimator)
            return ProgramSize("trees", mutable, kind, len(arrays.trees), leaves, reachable, thresholds)
    return ProgramSize("other", mutable)


def _scorecard_bins(problem: CounterfactualProblem, adapter: Any) -> list[int]:
    """Per mutable variable of the scorecard, its bins the feature's domain reaches."""
    space = problem.space
    counts = []
    for variable in adapter.table.variables:
        if variable.name not in space.names or not space.mutable[space.names.index(variable.name)]:
            continue
        if variable.categorical:
            counts.append(len(variable.bins))
            continue
        j = space.names.index(variable.name)
        low, high = float(space.grid_lower[j]), float(space.grid_upper[j])
        counts.append(
            sum((b.upper is None or b.upper > low) and (b.lower is None or b.lower <= high) for b in variable.bins)
        )
    return counts


def _ensemble(estimator: Any) -> Ensemble:
    kind = kind_name(estimator)
    if kind in ONNX_TREES:  # an ONNX graph's trees: averaged probabilities, or a boosted sum
        return "bagged" if estimator.ensemble.link == "probability" else "boosted"
    if kind in BAGGED_TREES:
        return "bagged"
    if kind in HIST_GRADIENT_BOOSTING:
        return "histogram"
    return "boosted" if kind in GRADIENT_BOOSTING else "external"


def _arrays(estimator: Any) -> EnsembleArrays | None:
    """The ensemble's trees as arrays (the exact encoder's, read once per fitted model and kept
    for it), or None when they cannot be read."""
    try:
        return ensemble_arrays(estimator)
    except NotEncodableError:
        return None


def _reachable_leaves(problem: CounterfactualProblem, arrays: EnsembleArrays) -> int:
    """The leaves a candidate can reach: at a split on a column of a feature that cannot move
    (immutable, or a one-value domain), only the original's side; elsewhere both. All trees walk
    together, one level per step (:meth:`EnsembleArrays.reached`)."""
    leaf = arrays.node_column < 0
    if arrays.key_threshold.size == 0:  # no split in any tree (a constant label or column): every leaf is reached
        return int(leaf.sum())
    fixed = _fixed_columns(problem)
    if fixed is None:
        return int(leaf.sum())
    held, value = fixed
    column = arrays.node_column
    inside = ~leaf & (column < len(held))  # a column past the described ones: free
    column = np.where(inside, column, 0)
    key = np.maximum(arrays.key, 0)  # a leaf's decision is not read
    x = value[column]
    with np.errstate(invalid="ignore"):
        threshold = arrays.key_threshold[key]
        below = np.where(arrays.key_strict[key], x < threshold, x <= threshold)
    below = np.where(np.isnan(x), arrays.missing_left, below)
    side = np.where(below, LEFT, RIGHT)
    decision = np.where(held[column] & inside, side, FREE).astype(np.int8)
    return int((arrays.reached(decision) & leaf).sum())


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


def tree_work(size: ProgramSize) -> float:
    """What a tree ensemble's time grows with: the reachable leaves times ``log2(2 + thresholds)``."""
    return max(size.reachable, 1) * math.log2(2 + size.thresholds)


def tree_solver(backend: str = "auto", value_rows: bool = False) -> Solver:
    """What solves a tree ensemble's program under the exact phase's ``backend``: CP-SAT when
    asked for, or under ``auto`` when OR-Tools loads (the choice
    :meth:`counterplan.solver.exact.phase.ExactPhase._backend` makes); else SCIP or HiGHS, as
    for a program with ``value_rows`` (a trust region, relations: CP-SAT's program of intervals
    cannot state them, and hands the MILP on, :mod:`counterplan.solver.exact.intervals`)."""
    if value_rows:
        return "milp"
    if backend == "cpsat":
        return "cpsat"
    if backend != "auto":
        return "milp"
    from counterplan.solver.exact import ortools_backend  # noqa: PLC0415 - OR-Tools loads on demand

    return "cpsat" if ortools_backend.available() is None else "milp"


def scorecard_solver(backend: str = "auto") -> str:
    """What solves a scorecard's program under ``backend``: SCIP (``ortools``, the ``auto``
    choice when OR-Tools loads), CP-SAT, or HiGHS."""
    if backend in ("ortools", "cpsat", "highs"):
        return backend
    from counterplan.solver.exact import ortools_backend  # noqa: PLC0415 - OR-Tools loads on demand

    return "ortools" if ortools_backend.available() is None else "highs"


def estimate_seconds(size: ProgramSize, backend: str = "auto") -> float:
    """The seconds the exact engine is expected to take at most, warm start included, under the
    exact phase's ``backend`` (see the module's description and the constants below)."""
    return _model_seconds(size, backend) + TRUST_REGION_SECONDS_PER_ROW * size.hull_rows


def _model_seconds(size: ProgramSize, backend: str) -> float:
    if size.family == "linear":
        return LINEAR_BASE_SECONDS + LINEAR_SECONDS_PER_FEATURE * size.mutable
    if size.family == "scorecard":
        factor = SCORECARD_SOLVER_FACTOR[scorecard_solver(backend)]
        return LINEAR_BASE_SECONDS + factor * SCORECARD_SCALE * math.pow(size.bin_work, SCORECARD_EXPONENT)
    if size.family == "trees":
        return TREE_RULES[tree_solver(backend, size.value_rows)].seconds(size)
    if size.family == "network":
        effective = size.units + (NETWORK_DEEP_WEIGHT - 1) * size.deep_units
        return LINEAR_BASE_SECONDS + NETWORK_SCALE * math.pow(effective, NETWORK_EXPONENT)
    return math.inf


@dataclass(frozen=True)
class TreeRule:
    """``base + scale[kind] * work**exponent`` seconds for a tree ensemble (``work``:
    :func:`tree_work`)."""

    base: float
    exponent: float
    scale: dict[str, float]

    def seconds(self, size: ProgramSize) -> float:
        """The rule's seconds for ``size``."""
        return self.base + self.scale[size.ensemble or "bagged"] * math.pow(tree_work(size), self.exponent)


LINEAR_BASE_SECONDS = 0.6
LINEAR_SECONDS_PER_FEATURE = 0.002
"""A linear model or scorecard: a small program (measured at most 0.50 s on adult and heloc, warm
start included, on a loaded machine; in the CP-SAT round, HiGHS for the linear models, at most
0.55 s on adult, 0.44 s on compas, 0.34 s on heloc, under the 0.6 s its formula gives); 200
features stay near a second."""
SCORECARD_BIN_POWER = 1.25
SCORECARD_EXPONENT = 1.543
SCORECARD_SCALE = 4.75e-6
"""A scorecard: ``0.6 + SCORECARD_SCALE * work**1.543`` seconds under SCIP, ``work`` the sum over
its mutable variables of ``bins**1.25``. The estimate was 0.6 s whatever the bins, so ``auto``
sent a card of 20 variables of 1,000 bins to the exact engine, which took 253 s (2 s budget:
fuzzing). Fitted by least squares of ``log(seconds - 0.6)`` on the exact engine alone (SCIP,
random cards of integer features, a goal 40 points above the original; a 2-core machine shared
with other jobs), then lifted by 1.37 to lie above every row: 1,000 bins as 10 x 100, 50 x 20,
100 x 10, 200 x 5 took 1.5, 0.95, 0.88, 1.2 s; 3,000 bins as 3 x 1,000, 10 x 300, 30 x 100 took
16.3, 5.3, 3.5 s; 5 x 1,000 took 30.7 s, 20 x 1,000 253 s. heloc's 12 variables stay at 0.61 s."""
SCORECARD_SOLVER_FACTOR = {"ortools": 1.0, "cpsat": 1.5, "highs": 6.0}
"""The other solvers against SCIP on the same cards (two variables of 1,000 and 11 bins, 8 cards:
CP-SAT at most 1.9 times SCIP's time, HiGHS at most 8 times, 2.5 to 21 s where SCIP took 0.9 to
2.6 s)."""
CPSAT_TREES = TreeRule(
    base=0.0,
    exponent=0.457,
    scale={"boosted": 0.02186, "histogram": 0.04534, "bagged": 0.05700, "external": 0.07772},
)
"""Trees under CP-SAT (the ``auto`` backend's choice for them,
:mod:`counterplan.solver.exact.cpsat`): ``scale[kind] * work**0.457`` seconds, fitted by
``benchmarks/auto_budget.py --fit`` on 87 rows of 29 models (adult, compas, heloc and the
synthetic 150,000-row stand-in, 3 rejected rows per model, and the demo; 20 to 100 trees, work
280 to 54,000; a 2-core machine at load average 5-7, ``docs/how-to/exact.md``): least squares of
``log(seconds)`` on a scale per kind and a common exponent of ``work`` (rows cut at the 8 s cap
enter at the cap, a lower bound), then each kind's scale lifted so the estimate lies above the
median row of every measured model of that kind (a factor of 1.52 for boosting, 2.16 for
histogram boosting, 2.77 for forests, 2.46 for dumped boosters). Times hardly grow with the size
(exponent 0.46): the program is narrowed to local search's answer, and the data set matters as
much (the same model is ten times faster on compas than on heloc). A single row may lie above
its estimate (the first row of a model pays for reading it; a far row needs a larger program): 3
of the 54 rows this rule sends to the exact engine under 2 s took longer (2.19, 2.48, 2.75 s)."""
MILP_TREES = TreeRule(
    base=0.7,
    exponent=1.8,
    scale={"boosted": 1.7e-6, "histogram": 1.7e-6, "bagged": 4.0e-6, "external": 1.3e-5},
)
"""Trees under SCIP or HiGHS (a ``backend`` asked for, or no OR-Tools): ``0.7 + scale[kind] *
work**1.8`` seconds. Fitted on ``benchmarks/auto_budget.py`` with the exact engine of interval
rows, the narrowing to the warm start and SCIP for trees (adult and heloc, 2 rows per model, 18
models from 20 trees of 8 leaves to 100 of depth 6, and the demo) as an envelope: the base is
the slowest small program (adult's 30-tree boosting, 0.68 s, warm start and SCIP's start
included, load average 7 on 2 cores); per kind the scale puts every measured time under the
estimate: boosting (histogram boosting with it) by the demo's 100-tree depth-3 model (9.2 s at
667 reachable leaves and 276 thresholds; heloc's same-sized model took 6.6 s), boosters from a
dump by adult's 20-tree 8-leaf LightGBM (1.96 s at 137 reachable leaves and 20 thresholds in one
run, 1.19 s in another; heloc's took 2.05 s at 160), forests by heloc's 20-tree depth-4 forest
(4.4 s at 314 leaves, proven; 100 trees of depth 6 run past 10 s on both data sets)."""
TREE_RULES: dict[Solver, TreeRule] = {"cpsat": CPSAT_TREES, "milp": MILP_TREES}
NETWORK_SCALE = 3.0e-4
NETWORK_EXPONENT = 2.47
NETWORK_DEEP_WEIGHT = 3.0
"""A network: ``0.6 + NETWORK_SCALE * units**NETWORK_EXPONENT`` seconds (the linear model's base:
the warm start and a small program), the units of later layers counted three times. The slope
(2.47 in log-log) is that of :mod:`counterplan.solver.exact.encoders.network`'s table, measured
on 4 integer inputs (one hidden layer of 25, 50, 100, 200 units: at most 0.12, 1.22, 2.42,
20.5 s; two layers of 50: 30 s). The rule was the line through that table's 50-unit point,
``7.8e-5 * units**2.47`` with no base, and lay far under networks of continuous inputs: on 3, 6
and 10 numbers of one decimal (``MLPClassifier``, 2,000 rows, a goal of 0.7, three rows each,
HiGHS, a 2-core machine at load average 4), 40 units took 2.0-7.8 s a row where it said 0.71 s
(so ``auto`` took the exact engine under the 2 s budget), 20 units 0.6-1.4 s where it said
0.13 s, 10 units 0.5 s where it said 0.02 s. The scale now lies above the median row of each of
those networks (20 units: 0.69-0.99 s, 30: 1.01 s, 40: 2.03-3.31 s, 50: 2.55 s; estimates 1.09,
1.94, 3.3 and 5.3 s); the integer table's rows lie below it."""
TRUST_REGION_SECONDS_PER_ROW = 0.004
"""A trust region: this much more per reference row (a weight each; 500 rows by default, 2 s),
whatever the model; a tree ensemble's program with one also goes to SCIP or HiGHS
(:func:`tree_solver`). It was left out: a 100-tree depth-3 boosting estimated at 1.15 s took
6.7 and 25.8 s with the default trust region (SCIP), and ``auto`` took the exact engine under
the 2 s budget (now 13.1 s: local search). Measured on the same 6 numbers (two rows each, 500
rows): a logistic regression 1.6-1.9 s (0.3-0.6 s without), a 10-unit network 2.7-3.1 s (0.5
s), 30 trees of depth 2 2.0-3.2 s (0.3-0.4 s), a 10-tree depth-3 forest 2.1 s (0.3-0.5 s), one
full-depth tree 2.4-4.4 s (0.2-0.3 s); the estimates with the term: 2.6, 2.7, 2.9, 2.9 and 4.0
s. With 50 rows a regression took 0.5-1.5 s, 30 trees 0.7-1.0 s."""
