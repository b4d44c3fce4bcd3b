"""The trust region (CE-OCL): a counterfactual must lie in the convex hull of real rows with the
target outcome, so it resembles data the model has seen doing what is asked.

Optional, when training data is given. Rows live in the Gower-like space plausibility uses
(:mod:`counterplan.planning.plausibility`): a number is ``(x - domain low) / domain range``; a category or a
boolean is one-hot at weight 1/2, so a changed category costs 1 in L1, as in the distance. A
column whose original value is missing is left out. With reference points ``r_i`` (training
rows of the target class, optionally only the ``nearest`` k to the original) the region is

    eps-CH = {x : sum_i lambda_i r_i = x + s, sum_i lambda_i = 1, lambda >= 0, ||s||_1 <= eps},

``eps`` = :attr:`TrustRegionSettings.slack` (0: the plain hull). A category's one-hot block
forces, in the plain hull, every weight onto rows of the candidate's own category: a category
no reference row has is never inside.

Membership of a batch (:meth:`TrustRegion.inside`) is decided exactly, up to
:attr:`TrustRegion.tolerance`, by certificates tried from cheap to dear, each rigorous:

1. the bounding box of the reference points: the L1 excess of a candidate over the box is a
   lower bound of its slack (in the one-hot space this is also "a category no row has");
2. cached cuts: any ``y`` with ``|y|_inf <= 1`` bounds every slack below by
   ``y.z - max_i y.r_i``; each candidate found outside leaves its ``y`` (up to 1,024 kept);
3. with ``eps > 0``: a known hull point (a reference row, or one found before) within ``eps``;
   and candidates met before (a dictionary of up to 100,000);
4. per candidate left, a non-negative least-squares fit (``scipy.optimize.nnls``, the weights
   pressed to sum 1 by a heavily weighted row): its hull point is an upper bound (inside when
   within ``eps``), its gap a separating ``y`` (outside when that bound exceeds ``eps``). In the
   plain hull only the points of the candidate's own categories can carry weight, so the fit
   uses those and the numbers alone (no such point: outside). The fit is tried first on the
   points of recent inside fits and the candidate's nearest points (a local-search neighbour
   usually lies in their hull), then on all; with ``eps > 0`` it is reweighted towards the L1
   gap up to four times;
5. only a candidate no certificate decides (in practice one whose least slack lies within about
   10% of ``eps``) gets the LP ``min ||s||_1`` (``scipy.optimize.linprog``, method ``highs``).

Costs, measured on the project's 2-core machine under a load average of about 5 (other test
runs), so roughly twice the idle figures. One membership LP: 6-8 ms with 200 points in 20
dimensions, so 256 candidates decided by LP alone would cost 1.5-2 s. Batches of 256 with 200
points and 20 numeric features: uniform random candidates (nearly all outside) 25-75 ms; random
points deep inside 180-290 ms (one full NNLS each); a local-search-like stream (each candidate
its walker's point with one or two columns moved by up to a tenth of their range) 45-145 ms
per batch for the plain hull and 20-500 ms with ``eps = 0.1`` (the dear end when the walker
hugs the boundary and about 17 candidates a batch need the LP). With 500 points in 40
dimensions the same stream costs 390-550 ms (plain) and 160-300 ms (``eps = 0.1``). A scikit-learn
pipeline's model call is 7-10 ms, so a search inside a large numeric hull is several times
slower per step; categorical features make the plain hull cheaper (only the candidate's pattern
is fitted), and the calculator never checks the original row, which is no counterfactual.

**Enlargement.** The immutable features hold their original values and monotone features move
one way, so the hull may hold no candidate the search can reach (an immutable age above every
approved applicant's). With ``enlarge_when_infeasible`` this is checked when the region is built,
without the model: the search box (immutables at their originals, numbers within their search
bounds, categories among those allowed) is tested against the hull by LPs, one per category
pattern of the reference rows (the nearest patterns first, at most 32: past them the region
counts as unreachable). When no pattern reaches it within ``slack``, the slack is raised
to the L1 distance at which the ``enlarge_rows`` reference rows nearest to the box, projected onto
it (immutables set to the original's values, numbers clipped into the search bounds, a
category not allowed replaced), lie inside: the region then holds at least those rows of the
target class as the instance could become. Every engine scores against this same region, and
:attr:`TrustRegion.note` says what was done. A region the search can reach but only where the
model misses the goal is not enlarged: the exact engine then proves the problem infeasible.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from typing import Annotated, Self

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field, model_validator
from scipy.optimize import linprog, nnls
from scipy.spatial.distance import cdist

from counterplan.planning.distinct_rows import first_of_each
from counterplan.planning.errors import ProblemError
from counterplan.planning.space import BoolArray, FeatureSpace, FloatMatrix

ONE_HOT = 0.5
"""Weight of a category's one-hot entry: a changed category moves 1 in L1, as in plausibility."""
TOLERANCE = 1e-6
"""Per column of the scaled space: a candidate is inside when its least slack is at most
``slack + TOLERANCE * (1 + columns)`` (the exact engine's rows hold to 1e-7 each)."""
MAX_CUTS = 1024
"""Separating directions kept from candidates found outside (oldest dropped first)."""
MAX_ANCHORS = 512
"""Hull points kept from candidates found inside (with a slack, they vouch for their neighbours)."""
MAX_SUPPORTS = 4
"""Point sets of recent inside fits tried first for the next candidates."""
REWEIGHTINGS = 4
"""With a slack: least-squares fits reweighted towards the L1 gap (each column by 1/sqrt|gap|)
before the LP is asked; on an enlarged hull this decided 95% of the candidates the LP would."""
MAX_CACHE = 100_000
"""Candidates whose membership is remembered (cleared when full)."""
MAX_PATTERNS = 32
"""Category patterns tried when checking that the search can reach the region at all."""
_SUM_WEIGHT = 100.0
"""Weight of the NNLS row that presses the hull weights to sum 1."""


class TrustRegionSettings(BaseModel):
    """How the trust region is built.

    Attributes
    ----------
    nearest:
        Use only the k reference rows nearest to the original (L1 in the scaled space); None:
        every row (up to ``max_reference_rows``).
    slack:
        The budget ``eps``: how far, in L1 of the scaled space (a number's range counts 1, a
        changed category 1), a candidate may lie outside the hull. 0 is the plain hull.
    enlarge_when_infeasible:
        When no candidate the search may reach lies in the region, raise the slack (see the
        module's "Enlargement") rather than leave the problem without an answer.
    enlarge_rows:
        The enlarged region takes in this many reference rows projected onto the search box.
    max_reference_rows:
        Larger reference sets (after removing duplicates) are subsampled deterministically:
        each row is one weight in every membership check and one variable of the exact program.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    nearest: Annotated[int, Field(ge=1)] | None = None
    slack: Annotated[float, Field(ge=0.0, allow_inf_nan=False)] = 0.0
    enlarge_when_infeasible: bool = True
    enlarge_rows: Annotated[int, Field(ge=1)] = 5
    max_reference_rows: Annotated[int, Field(ge=1, le=20_000)] = 500

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.nearest is not None and self.nearest > self.max_reference_rows:
            raise ValueError(f"nearest={self.nearest} is more than max_reference_rows={self.max_reference_rows}")
        return self


@dataclass(frozen=True)
class HullColumn:
    """One column of the scaled space: a number's scaled value, or one category's indicator."""

    feature: int
    """The feature's column in the candidate matrix."""
    category: int | None = None
    """For a category or a boolean: the category's code (the column is 1/2 where it is chosen)."""


def _checked_reference(space: FeatureSpace, reference: FloatMatrix) -> FloatMatrix:
    """The reference rows as a float matrix of the space's width, at least one of them."""
    reference = np.asarray(reference, dtype=np.float64)
    if reference.ndim != 2 or reference.shape[1] != space.n_features:
        raise ProblemError("trust_region", f"reference rows must be (n, {space.n_features}); given {reference.shape}")
    if reference.shape[0] == 0:
        raise ProblemError("trust_region", "no reference row of the target outcome lies in the features' domains")
    return reference


def _rows_by_pattern(codes: npt.NDArray[np.intp]) -> dict[tuple[int, ...], npt.NDArray[np.intp]]:
    """Per category pattern (a row of ``codes``): the rows that have it."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for row, pattern in enumerate(map(tuple, codes.tolist())):
        groups.setdefault(pattern, []).append(row)
    return {pattern: np.array(rows, dtype=np.intp) for pattern, rows in groups.items()}


class TrustRegion:
    """The (enlarged) convex hull of reference rows, and exact membership of candidates.

    Parameters
    ----------
    space:
        The problem's feature space (its domains scale the numbers; its original, bounds and
        immutables decide the enlargement and the nearest rows).
    reference:
        Encoded reference rows (training rows of the target outcome), ``(n, n_features)``.
    settings:
        How to build it; the defaults when None.
    """

    def __init__(
        self, space: FeatureSpace, reference: FloatMatrix, settings: TrustRegionSettings | None = None
    ) -> None:
        settings = settings or TrustRegionSettings()
        reference = _checked_reference(space, reference)
        self.space = space
        self.settings = settings
        self.offset: FloatMatrix = space.domain_lower.copy()
        """Per feature: subtracted from a number before scaling."""
        self.scale: FloatMatrix = space.domain_width
        """Per feature: a number's scaled value is ``(x - offset) / scale``."""
        used = ~space.missing
        self._numeric = np.flatnonzero(used & ~space.nominal)
        self._nominal = np.flatnonzero(used & space.nominal)
        self._sizes = np.rint(space.domain_upper[self._nominal] + 1).astype(int)
        columns = [HullColumn(int(j)) for j in self._numeric]
        for j, size in zip(self._nominal, self._sizes, strict=True):
            columns += [HullColumn(int(j), c) for c in range(int(size))]
        self.columns: tuple[HullColumn, ...] = tuple(columns)
        """The scaled space's columns, in the order of :attr:`points`."""
        points = self._reference_points(reference, settings)
        self.points: FloatMatrix = points
        """The reference points in the scaled space, ``(reference_rows, len(columns))``."""
        self.reference_rows = int(points.shape[0])
        self.tolerance = TOLERANCE * (1 + len(self.columns))
        self.slack = float(settings.slack)
        """The slack in force: the settings', or the enlarged one."""
        self.enlarged = False
        """True when no reachable candidate lay in the region and the slack was raised."""
        self.least_slack: float | None = None
        """With :attr:`enlarged`: the least slack with which a reachable candidate lies inside."""
        self.note: str | None = None
        """What a reader should know about the region (its enlargement)."""
        self._low = points.min(axis=0)
        self._high = points.max(axis=0)
        n, d = points.shape
        self._lp_cost = np.r_[np.zeros(n), np.ones(2 * d)]
        self._lp_matrix = np.vstack([np.hstack([points.T, -np.eye(d), np.eye(d)]), np.r_[np.ones(n), np.zeros(2 * d)]])
        self._reset_caches()
        self._codes = self._categories()
        self._groups = _rows_by_pattern(self._codes)
        """Per category pattern: the points that have it (in the plain hull, the only ones a
        candidate with that pattern can be made of)."""
        if settings.enlarge_when_infeasible:
            self._enlarge_if_unreachable()

    def _reference_points(self, reference: FloatMatrix, settings: TrustRegionSettings) -> FloatMatrix:
        """The distinct reference rows in the scaled space (read-only): the ``nearest`` to the
        original when asked, else at most ``max_reference_rows`` of them (a seeded sample)."""
        points = self.transform(reference)
        points = points[first_of_each(points)]  # duplicates add nothing to a hull
        origin = self.transform(self.space.original.reshape(1, -1))[0]
        if settings.nearest is not None:
            order = np.argsort(np.abs(points - origin).sum(axis=1), kind="stable")
            points = points[np.sort(order[: settings.nearest])]
        elif points.shape[0] > settings.max_reference_rows:
            keep = np.random.default_rng(0).choice(points.shape[0], settings.max_reference_rows, replace=False)
            points = points[np.sort(keep)]
        points.setflags(write=False)
        return points

    def _reset_caches(self) -> None:
        """What membership checks learn (speed only: every verdict is the same without it)."""
        self._lock = threading.Lock()
        self._cuts: deque[tuple[FloatMatrix, float]] = deque(maxlen=MAX_CUTS)
        self._anchors: deque[FloatMatrix] = deque(maxlen=MAX_ANCHORS)
        self._supports: deque[npt.NDArray[np.intp]] = deque(maxlen=MAX_SUPPORTS)
        self._known: dict[bytes, bool] = {}

    def __getstate__(self) -> dict[str, object]:
        """Pickled without its lock and caches (a worker process learns its own)."""
        state = dict(self.__dict__)
        for name in ("_lock", "_cuts", "_anchors", "_supports", "_known"):
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._reset_caches()

    # -- the scaled space ---------------------------------------------------------------------

    def transform(self, X: FloatMatrix) -> FloatMatrix:
        """Encoded candidates ``(n, n_features)`` into the scaled space ``(n, len(columns))``."""
        X = np.asarray(X, dtype=np.float64)
        blocks = [(X[:, self._numeric] - self.offset[self._numeric]) / self.scale[self._numeric]]
        rows = np.arange(X.shape[0])
        for j, size in zip(self._nominal, self._sizes, strict=True):
            codes = np.rint(X[:, j]).astype(np.intp)
            known = (codes >= 0) & (codes < size)
            onehot = np.zeros((X.shape[0], int(size)))
            onehot[rows[known], codes[known]] = ONE_HOT
            blocks.append(onehot)
        return np.hstack(blocks)

    # -- membership ---------------------------------------------------------------------------

    def inside(self, X: FloatMatrix) -> BoolArray:
        """Per candidate: does it lie in the region (within :attr:`tolerance`)?"""
        Z = self.transform(X)
        n = Z.shape[0]
        result = np.zeros(n, dtype=bool)
        if n == 0:
            return result
        budget = self.slack + self.tolerance
        excess = (np.maximum(self._low - Z, 0.0) + np.maximum(Z - self._high, 0.0)).sum(axis=1)
        pending = np.flatnonzero(excess <= budget)
        with self._lock:
            cuts = list(self._cuts)
            anchors = list(self._anchors)
        if cuts and pending.size:
            directions = np.array([y for y, _ in cuts])
            heights = np.array([h for _, h in cuts])
            bound = (Z[pending] @ directions.T - heights).max(axis=1)
            pending = pending[bound <= budget]
        if self.slack > 0.0 and pending.size:
            known_points = np.vstack([self.points, *anchors]) if anchors else self.points
            near = cdist(Z[pending], known_points, metric="cityblock").min(axis=1) <= budget
            result[pending[near]] = True
            pending = pending[~near]
        verdicts = [self._known.get(Z[i].tobytes()) for i in pending]
        result[pending] = [v is True for v in verdicts]
        pending = pending[[v is None for v in verdicts]]
        for i in pending:
            verdict = self._decide(Z[i], budget)
            if len(self._known) >= MAX_CACHE:
                self._known.clear()
            self._known[Z[i].tobytes()] = verdict
            result[i] = verdict
        return result

    def slack_needed(self, X: FloatMatrix) -> FloatMatrix:
        """Per candidate: the least L1 slack that puts it in the plain hull (one LP each: slow)."""
        Z = self.transform(X)
        return np.array([self._lp(z)[0] for z in Z], dtype=np.float64)

    def _decide(self, z: FloatMatrix, budget: float) -> bool:
        """One candidate no cheap certificate decided: NNLS fits, then the LP if need be.

        In the plain hull only points of the candidate's own category pattern can carry weight,
        so the fit is over those points and the numeric columns alone. It is tried first on the
        points that carried recent fits and the candidate's nearest points (a local-search
        neighbour usually lies in the hull of those), then on every point it may use.
        """
        m = self._numeric.size
        if self.slack == 0.0:
            group = self._groups.get(self._pattern_of(z))
            if group is None:  # no reference row has these categories together
                self._cut(self._pattern_direction(z, np.zeros(m)), z)
                return False
            columns = slice(0, m)
        else:
            group = np.arange(self.reference_rows)
            columns = slice(None)
        target = z[columns]
        if self._fits_locally(group, columns, target, budget):
            return True
        verdict = self._fit_verdict(z, group, columns, target, budget)
        if verdict is not None:
            return verdict
        least, dual = self._lp(z)
        if least > budget and dual is not None:
            self._cut(dual, z)
        return least <= budget

    def _fits_locally(self, group: npt.NDArray[np.intp], columns: slice, target: FloatMatrix, budget: float) -> bool:
        """Whether the points of recent fits and the candidate's nearest points (of ``group``, when
        it is large) hold it, within ``budget``."""
        with self._lock:
            recent = list(self._supports)
        local_size = 2 * (target.size + 1)
        if group.size <= 3 * local_size:
            return False
        distance = np.abs(self.points[group, columns] - target).sum(axis=1)
        chosen = np.zeros(self.reference_rows, dtype=bool)
        if recent:
            chosen[np.concatenate(recent)] = True
            in_group = np.zeros(self.reference_rows, dtype=bool)
            in_group[group] = True
            chosen &= in_group
        chosen[group[np.argpartition(distance, local_size)[:local_size]]] = True
        subset = np.flatnonzero(chosen)
        fit = self._fit(subset, columns, target)
        if fit is not None and fit[0] <= budget:
            self._remember_fit(subset, fit[2])
            return True
        return False

    def _fit_verdict(
        self, z: FloatMatrix, group: npt.NDArray[np.intp], columns: slice, target: FloatMatrix, budget: float
    ) -> bool | None:
        """The verdict of a fit over all of ``group``: inside, outside (a cut proves it), or None
        when only the LP can tell."""
        fit = self._fit(group, columns, target)
        if fit is None:
            return None
        upper, gap, weights = fit
        if upper <= budget:
            self._remember_fit(group, weights)
            return True
        if self.slack == 0.0:
            unit = gap / max(float(np.abs(gap).max()), 1e-300)
            own = float(unit @ target) - float((self.points[group, columns] @ unit).max())
            if own > budget:  # outside its pattern's hull, which is all the plain hull offers it
                self._cut(self._pattern_direction(z, unit), z)
                return False
            return None
        if self._cut(gap, z) > budget:
            return False
        return self._reweighted_verdict(z, group, columns, target, gap=gap, budget=budget)

    def _reweighted_verdict(
        self,
        z: FloatMatrix,
        group: npt.NDArray[np.intp],
        columns: slice,
        target: FloatMatrix,
        *,
        gap: FloatMatrix,
        budget: float,
    ) -> bool | None:
        """With a slack the L1 gap counts: reweighted fits approach the L1 projection; None when
        they decide nothing."""
        for _ in range(REWEIGHTINGS):
            fit = self._fit(group, columns, target, 1.0 / np.sqrt(np.maximum(np.abs(gap), 1e-6)))
            if fit is None:
                return None
            upper, gap, weights = fit
            if upper <= budget:
                self._remember_fit(group, weights)
                return True
            if self._cut(np.sign(gap), z) > budget:  # the L1 projection's dual, nearly
                return False
        return None

    def _pattern_of(self, z: FloatMatrix) -> tuple[int, ...]:
        """A scaled candidate's category codes (-1 where no category is set)."""
        codes = []
        start = self._numeric.size
        for size in self._sizes:
            block = z[start : start + size]
            codes.append(int(np.argmax(block)) if block.max() > 0 else -1)
            start += int(size)
        return tuple(codes)

    def _pattern_direction(self, z: FloatMatrix, numeric: FloatMatrix) -> FloatMatrix:
        """A cut direction: ``numeric`` on the numbers, +1 on the candidate's categories and -1 on
        the others (a point of another category loses 1 per mismatch against it)."""
        one_hot = np.where(z[self._numeric.size :] > 0, 1.0, -1.0)
        return np.concatenate([numeric, one_hot])

    def _fit(
        self,
        rows: npt.NDArray[np.intp],
        columns: slice,
        target: FloatMatrix,
        column_weights: FloatMatrix | None = None,
    ) -> tuple[float, FloatMatrix, FloatMatrix] | None:
        """Non-negative least squares of ``target`` by ``rows``' points (each column's residual
        scaled by ``column_weights``), the weights pressed to sum 1, then normalised: the L1 gap
        of that hull point (an upper bound of the least slack), the gap, and the weights. None
        when the fit fails."""
        block = self.points[rows, columns]
        scale = np.ones(block.shape[1]) if column_weights is None else column_weights
        matrix = np.vstack([block.T * scale[:, None], np.full((1, rows.size), _SUM_WEIGHT)])
        try:
            weights, _ = nnls(matrix, np.append(target * scale, _SUM_WEIGHT))
        except RuntimeError:  # did not converge: the LP decides
            return None
        total = float(weights.sum())
        if total <= 0.0:
            return None
        weights = weights / total
        gap = target - weights @ block
        return float(np.abs(gap).sum()), gap, weights

    def _remember_fit(self, rows: npt.NDArray[np.intp], weights: FloatMatrix) -> None:
        support = rows[weights > 0.0]
        with self._lock:
            self._supports.append(support)
            if self.slack > 0.0:
                self._anchors.append(weights @ self.points[rows])

    def _cut(self, direction: FloatMatrix, z: FloatMatrix) -> float:
        """The lower bound on ``z``'s slack that ``direction`` (either sign) proves; a positive
        one is kept for later candidates."""
        size = float(np.abs(direction).max())
        if not np.isfinite(size) or size == 0.0:
            return 0.0
        best = -np.inf
        kept: tuple[FloatMatrix, float] | None = None
        for y in (direction / size, -direction / size):
            height = float((self.points @ y).max())
            bound = float(y @ z) - height
            if bound > best:
                best, kept = bound, (y, height)
        if best > 0.0 and kept is not None:
            with self._lock:
                self._cuts.append(kept)
        return best

    def _lp(self, z: FloatMatrix) -> tuple[float, FloatMatrix | None]:
        """``min ||s||_1`` over the plain hull, and its dual (a separating direction)."""
        result = linprog(self._lp_cost, A_eq=self._lp_matrix, b_eq=np.append(z, 1.0), bounds=(0, None), method="highs")
        if result.status != 0:  # always feasible (any weights, with slack): a solver failure
            raise ProblemError("trust_region", f"the membership LP failed: {result.message}")
        marginals = getattr(result.eqlin, "marginals", None)
        direction = None if marginals is None else np.asarray(marginals[: z.size], dtype=np.float64)
        return float(result.fun), direction

    # -- enlargement --------------------------------------------------------------------------

    def _reachable_box(self) -> tuple[FloatMatrix, FloatMatrix, list[npt.NDArray[np.bool_]]]:
        """What the search may reach, in the scaled space: per numeric column an interval, per
        categorical feature the categories allowed."""
        space = self.space
        j = self._numeric
        o = space.original[j]
        low = np.where(space.mutable[j], np.minimum(space.grid_lower[j], o), o)
        high = np.where(space.mutable[j], np.maximum(space.grid_upper[j], o), o)
        low = (low - self.offset[j]) / self.scale[j]
        high = (high - self.offset[j]) / self.scale[j]
        allowed = []
        for f, size in zip(self._nominal, self._sizes, strict=True):
            codes = np.arange(int(size))
            original = round(float(space.original[f]))
            if space.mutable[f]:
                ok = ((codes >= space.lower[f]) & (codes <= space.upper[f])) | (codes == original)
            else:
                ok = codes == original
            allowed.append(ok)
        return low, high, allowed

    def _categories(self) -> npt.NDArray[np.intp]:
        """Each reference point's category code per categorical feature, ``(n, n_nominal)``."""
        start = self._numeric.size
        codes = []
        for size in self._sizes:
            codes.append(np.argmax(self.points[:, start : start + size], axis=1))
            start += int(size)
        return np.column_stack(codes) if codes else np.zeros((self.reference_rows, 0), dtype=np.intp)

    def _enlarge_if_unreachable(self) -> None:
        low, high, allowed = self._reachable_box()
        numbers = self.points[:, : self._numeric.size]
        distance = (np.maximum(low - numbers, 0.0) + np.maximum(numbers - high, 0.0)).sum(axis=1)
        codes = self._codes
        patterns = codes.copy()
        for k, ok in enumerate(allowed):
            bad = ~ok[codes[:, k]]
            distance += 2 * ONE_HOT * bad  # the category must change: one out, one in
            nearest_ok = np.flatnonzero(ok)
            patterns[bad, k] = nearest_ok[np.argmin(np.abs(nearest_ok[:, None] - codes[bad, k]), axis=0)]
        budget = self.slack + self.tolerance
        if float(distance.min()) <= budget:
            return  # a reference row itself, projected, is reachable
        least = self._least_reachable_slack(low, high, patterns, distance, budget)
        if least <= budget:
            return
        rows = min(self.settings.enlarge_rows, self.reference_rows)
        enlarged = max(float(np.sort(distance)[rows - 1]), self.slack)
        self.least_slack = least
        self.slack = enlarged
        self.enlarged = True
        plain = "plain hull" if self.settings.slack == 0.0 else f"hull with slack {self.settings.slack:.3g}"
        self.note = (
            f"the trust region was enlarged: no candidate the search may reach lies in the {plain} of "
            f"{self.reference_rows} reference rows (the least slack that reaches it is {least:.3g}); the slack is now "
            f"{enlarged:.3g}, which takes in the {rows} rows nearest to reach, with the immutable features "
            "at their original values"
        )

    def _least_reachable_slack(
        self,
        low: FloatMatrix,
        high: FloatMatrix,
        patterns: npt.NDArray[np.intp],
        distance: FloatMatrix,
        budget: float,
    ) -> float:
        """The least slack with which a reachable candidate lies in the hull, trying the category
        patterns of the reference rows (projected into the allowed categories) most promising
        first; it stops at the first within ``budget``."""
        n, d = self.points.shape
        m = self._numeric.size
        seen: dict[tuple[int, ...], float] = {}
        for row, pattern in enumerate(map(tuple, patterns.tolist())):
            seen[pattern] = min(seen.get(pattern, np.inf), float(distance[row]))
        order = sorted((value, pattern) for pattern, value in seen.items())
        # variables: weights (n), the numbers (m), s+ (d), s- (d)
        cost = np.r_[np.zeros(n + m), np.ones(2 * d)]
        matrix = np.vstack(
            [
                np.hstack([self.points.T, -np.eye(d, m), -np.eye(d), np.eye(d)]),
                np.r_[np.ones(n), np.zeros(m + 2 * d)],
            ]
        )
        bounds: list[tuple[float | None, float | None]] = [(0.0, None)] * n
        bounds += [(float(a), float(b)) for a, b in zip(low, high, strict=True)]
        bounds += [(0.0, None)] * (2 * d)
        least = float(np.inf)
        for _, pattern in order[:MAX_PATTERNS]:
            target = np.zeros(d)
            start = m
            for code, size in zip(pattern, self._sizes, strict=True):
                target[start + code] = ONE_HOT
                start += int(size)
            result = linprog(cost, A_eq=matrix, b_eq=np.append(target, 1.0), bounds=bounds, method="highs")
            if result.status == 0:
                least = min(least, float(result.fun))
            if least <= budget:
                break
        return least


__all__ = ["HullColumn", "TrustRegion", "TrustRegionSettings"]
