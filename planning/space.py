"""The encoded search space: features as columns of a float64 candidate matrix.

The solver never sees features, only this space: bounds, which columns are whole numbers,
which are nominal (categories, booleans), which may move, and the original row. Moves, scores
and model calls all work on whole matrices ``X`` of shape ``(n_candidates, n_features)``.

Every number lives on a grid: integers on whole numbers, floats with a precision on multiples
of ``10 ** -precision``, each the float decoding shows (:mod:`counterplan.planning.grid`, exact
for a negative precision too). :meth:`FeatureSpace.snap` puts candidates on it, so every score is
the score of the values a user will see; the original value is always kept as it is. An answer's
final check goes through :meth:`FeatureSpace.as_reported` first, the rows its report stands for,
so that a value a hair off its grid is never checked as held and shown rounded. A missing
original value is encoded by its feature's ``missing_code``; the model gets NaN there.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from counterplan.planning.errors import CandidateError, FeatureError
from counterplan.planning.features import BooleanFeature, CategoricalFeature, FloatFeature, IntegerFeature
from counterplan.planning.grid import Grid
from counterplan.planning.reported import ReportedValues

AnyFeature = IntegerFeature | FloatFeature | CategoricalFeature | BooleanFeature
FloatMatrix = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


def _with_grid_ends(
    lower: FloatMatrix, upper: FloatMatrix, grid: Grid, on_grid: BoolArray
) -> tuple[FloatMatrix, FloatMatrix]:
    """The domain ``[lower, upper]`` widened, in the ``on_grid`` columns (those with a grid and a
    domain to search: a mutable feature's, or a held one's the diagnosis scans), to the grid values
    its bounds stand for. A bound a hair past a grid value (data computed in floats: ``-0.14 - 1.0``
    is ``-1.1400000000000001``) ends the grid on that value, which then lies outside the domain
    by an ulp: the search proposed it and the candidate check refused it, a ``CandidateError``
    out of every engine on valid input."""
    low, high = grid.ends(lower, upper)
    return np.where(on_grid, np.minimum(lower, low), lower), np.where(on_grid, np.maximum(upper, high), upper)


def _refuse_duplicate_names(features: tuple[AnyFeature, ...]) -> None:
    seen: set[str] = set()
    for feature in features:
        if feature.name in seen:
            raise FeatureError(feature.name, "duplicate feature name")
        seen.add(feature.name)


def _model_categories(features: tuple[AnyFeature, ...]) -> dict[int, npt.NDArray[np.object_]]:
    """Per categorical column: its categories as the model takes them, indexed by code."""
    categories: dict[int, npt.NDArray[np.object_]] = {}
    for i, f in enumerate(features):
        if isinstance(f, CategoricalFeature):
            values = np.empty(len(f.domain), dtype=object)
            values[:] = f.model_values()
            categories[i] = values
    return categories


def _array_columns(
    features: tuple[AnyFeature, ...], missing: BoolArray
) -> tuple[dict[int, FloatMatrix], npt.NDArray[np.intp]]:
    """Per category column stored as numbers (``category_type`` integer or number): the number each
    code stands for; and the columns whose original is missing (see ``FeatureSpace.to_array``)."""
    coded = {
        i: np.array(f.model_values(), dtype=np.float64)
        for i, f in enumerate(features)
        if isinstance(f, CategoricalFeature) and f.category_type != "text" and f.domain
    }
    return coded, np.flatnonzero(missing)


class SplitValues(dict[int, FloatMatrix]):
    """Per column, the values just on each side of a tree model's split thresholds
    (:func:`counterplan.planning.structure.splits.split_points`), with their ``cuts``.

    ``cuts[j]``, where known: the sorted first grid values past each of column ``j``'s thresholds
    (the higher value of each pair), given only when the reader proved, for every threshold the
    column meets, that the pair's lower value goes one way and the higher the other as the trees
    see them (their comparison, ``x <= t`` or ``x < t``, and float32 rounding: both values clear
    of the threshold), and that the column reaches the model through no other way. The values
    from one cut up to the next then score alike with the other columns fixed, so a search needs
    one of them per side of the original, where each split value alone is a cell without it."""

    def __init__(self, values: Mapping[int, FloatMatrix] | None = None, cuts: dict[int, FloatMatrix] | None = None):
        super().__init__(values or {})
        self.cuts: dict[int, FloatMatrix] = {} if cuts is None else cuts


class FeatureSpace:
    """An ordered set of features with unique names, and their matrix encoding.

    Parameters
    ----------
    features:
        The features, in model-input order. Names must be unique.
    """

    allowed: dict[int, FloatMatrix]
    """Per column with allowed values: the sorted values a candidate may take, within the search
    bounds (the original too)."""
    domain_allowed: dict[int, FloatMatrix]
    """Per mutable column with allowed values: those within its domain, and the original (a
    plan's step may move against a monotone rule on the way: :mod:`counterplan.planning.actions`)."""

    def __init__(self, features: Iterable[AnyFeature]) -> None:
        self.features: tuple[AnyFeature, ...] = tuple(features)
        if not self.features:
            raise FeatureError("features", "a problem needs at least one feature")
        _refuse_duplicate_names(self.features)
        self.names: tuple[str, ...] = tuple(f.name for f in self.features)
        self.index: dict[str, int] = {name: i for i, name in enumerate(self.names)}
        bounds = np.array([f.bounds for f in self.features], dtype=np.float64)
        self.mutable: BoolArray = np.array([f.mutable for f in self.features], dtype=bool)
        self.missing: BoolArray = np.array([f.missing for f in self.features], dtype=bool)
        """Columns whose original value is missing (encoded by the feature's missing code)."""
        self.step: FloatMatrix = np.array(
            [f.step if isinstance(f, IntegerFeature | FloatFeature) else 1.0 for f in self.features], dtype=np.float64
        )
        """Grid spacing per column: 1 for whole numbers, ``10 ** -precision``, 0 for any float."""
        self.grid = Grid(
            [
                p if (p := getattr(f, "precision", None)) is not None else (0 if s > 0 else None)
                for f, s in zip(self.features, self.step, strict=True)
            ]
        )
        """Per column, its grid's arithmetic: every value put on a grid is the float decode shows
        (:mod:`counterplan.planning.grid`; a negative precision's values are exact multiples)."""
        on_grid = self.grid.gridded
        self.domain_lower: FloatMatrix
        """Inclusive encoded domain bounds: what a candidate may hold at all."""
        self.domain_upper: FloatMatrix
        # a held feature's domain too, when it has one: the diagnosis scans it (solver/diagnosis.py)
        ranged = self.mutable | (bounds[:, 1] > bounds[:, 0])
        self.domain_lower, self.domain_upper = _with_grid_ends(bounds[:, 0], bounds[:, 1], self.grid, on_grid & ranged)
        self.monotone: FloatMatrix = np.array(
            [{"increase": 1.0, "decrease": -1.0}.get(f.monotone or "", 0.0) for f in self.features]
        )
        """+1 where a feature may only increase, -1 only decrease, 0 either way."""
        self.costs: FloatMatrix = np.array([f.cost for f in self.features], dtype=np.float64)
        self.nominal: BoolArray = np.array(
            [isinstance(f, CategoricalFeature | BooleanFeature) for f in self.features], dtype=bool
        )
        self.integral: BoolArray = np.array([not isinstance(f, FloatFeature) for f in self.features], dtype=bool)
        self.original: FloatMatrix = np.array([f.encode(f.value) for f in self.features], dtype=np.float64)
        self.graded: BoolArray = ~self.nominal & ~self.missing
        """Numbers with a numeric original: a move can go part of the way back. Elsewhere a
        change is all or nothing, and counts 1 in the distance (a category, a filled value)."""
        # The search moves within these: the domain, narrowed by monotone rules, so no move
        # breaks one; candidates from elsewhere that break one are counted on hard level 1.
        self.lower: FloatMatrix = np.where(self.monotone > 0, self.original, self.domain_lower)
        self.upper: FloatMatrix = np.where(self.monotone < 0, self.original, self.domain_upper)
        self.grid_lower, self.grid_upper = self._grid_bounds(on_grid)
        """The search bounds moved inwards onto the grid (what a snapped value may hold)."""
        self.missing_code: FloatMatrix = np.array(
            [f.missing_code if f.missing else np.nan for f in self.features], dtype=np.float64
        )
        """Per column: the code of a missing value, NaN where the original is not missing."""
        self.split_values: dict[int, FloatMatrix] = {}
        """Per column, when known: values where the model's decision changes (just past a tree's
        split thresholds). The feature scan tries them; for a tree model it searches a copy of
        the space that knows them (:meth:`with_split_values`)."""
        self.split_cuts: dict[int, FloatMatrix] = {}
        """Per column whose every threshold's sides are known (:class:`SplitValues`): the sorted
        values where a cell starts; the values from one cut up to the next are decided alike."""
        self.domain_allowed, self.allowed = self._allowed_values()
        listed = np.isin(np.arange(self.n_features), list(self.allowed))  # a list of values wins over decimals
        self.rounded: BoolArray = on_grid & ~(listed & ~self.integral)
        """The columns :meth:`to_grid` rounds: those with a grid but a float with allowed values
        (its values are those, whatever its decimals: ``1.25`` among them on a 1-decimal feature
        is no ``1.2``)."""
        self._all_gridded = bool(self.rounded.all())
        self._decimals = np.flatnonzero(self.rounded & ~self.integral & self.mutable)
        """The mutable floats with a precision and no allowed values: :meth:`off_grid` checks their decimals."""
        self._categories: dict[int, npt.NDArray[np.object_]] = _model_categories(self.features)
        self._coded, self._gap_columns = _array_columns(self.features, self.missing)
        """What :meth:`to_array` changes: per category column stored as numbers, the number each
        code stands for; the columns whose original is missing (NaN for their code)."""
        self._reported = ReportedValues(self.features)

    def _grid_bounds(self, on_grid: BoolArray) -> tuple[FloatMatrix, FloatMatrix]:
        """The search bounds moved inwards onto each column's grid; a column whose grid holds no
        value between them keeps its original."""
        grid_low, grid_high = self.grid.ends(self.lower, self.upper)
        empty = on_grid & (grid_low > grid_high)
        lower = np.where(on_grid & ~empty, grid_low, np.where(empty, self.original, self.lower))
        upper = np.where(on_grid & ~empty, grid_high, np.where(empty, self.original, self.upper))
        return lower, upper

    def _allowed_values(self) -> tuple[dict[int, FloatMatrix], dict[int, FloatMatrix]]:
        """Per mutable column with allowed values: those within the domain, and those within the
        search bounds; the original in both."""
        in_domain: dict[int, FloatMatrix] = {}
        searched: dict[int, FloatMatrix] = {}
        for i, f in enumerate(self.features):
            values = getattr(f, "allowed", None)
            if values is not None and f.mutable:
                grid = np.unique(np.append(np.asarray(values, dtype=np.float64), self.original[i]))
                # the original stays, even a gap's missing code below the bounds (a value to be
                # filled): keeping it was a broken rule, so every engine filled the gap needlessly
                original = grid == self.original[i]
                in_domain[i] = grid[((grid >= self.domain_lower[i]) & (grid <= self.domain_upper[i])) | original]
                searched[i] = grid[((grid >= self.lower[i]) & (grid <= self.upper[i])) | original]
        return in_domain, searched

    @property
    def domain_width(self) -> FloatMatrix:
        """Per column: the domain's width, 1 where the domain is a single value (what numbers are
        scaled by in the Gower distance, the trust region and plausibility)."""
        span = self.domain_upper - self.domain_lower
        return np.where(span > 0, span, 1.0)

    @property
    def grid_scale(self) -> FloatMatrix:
        """Per column: grid values per unit (``10 ** precision``, 1 for whole numbers), 0 for any
        float. A description (which grid a column has): grid values come from :attr:`grid`, whose
        arithmetic is exact for a negative precision (``1e-5`` is not)."""
        return self.grid.per_unit

    @property
    def checks_grid(self) -> bool:
        """True when some column has allowed values or a float precision to keep."""
        return bool(self.allowed) or bool((self.rounded & ~self.integral & self.mutable).any())

    def with_split_values(self, split_values: dict[int, FloatMatrix]) -> FeatureSpace:
        """This space knowing ``split_values``: a shallow copy (the arrays are shared, read only),
        so a solve can search with the model's split values without changing the problem. Their
        cuts come along when the reader knew them (:class:`SplitValues`)."""
        view = copy.copy(self)
        view.split_values = split_values
        view.split_cuts = split_values.cuts if isinstance(split_values, SplitValues) else {}
        return view

    def __len__(self) -> int:
        return len(self.features)

    def __getitem__(self, name: str) -> AnyFeature:
        try:
            return self.features[self.index[name]]
        except KeyError:
            raise FeatureError(name, f"unknown feature; known: {list(self.names)}") from None

    @property
    def missing_names(self) -> list[str]:
        """The features whose original value is missing (:attr:`missing`), by name."""
        return [name for name, gap in zip(self.names, self.missing, strict=True) if gap]

    @property
    def n_features(self) -> int:
        """Number of columns of a candidate matrix."""
        return len(self.features)

    def encode(self, values: Mapping[str, Any]) -> FloatMatrix:
        """Encode one candidate given as ``{name: value}``; every feature must be present."""
        unknown = sorted(set(values) - set(self.names))
        if unknown:
            raise FeatureError(unknown[0], f"unknown feature; known: {list(self.names)}")
        row = np.empty(self.n_features, dtype=np.float64)
        for i, feature in enumerate(self.features):
            if feature.name not in values:
                raise FeatureError(feature.name, "missing value")
            row[i] = feature.encode(values[feature.name])
        return row

    def encode_rows(self, rows: Sequence[Mapping[str, Any]]) -> FloatMatrix:
        """Encode several candidates into a matrix."""
        if not rows:
            return np.empty((0, self.n_features), dtype=np.float64)
        return np.vstack([self.encode(row) for row in rows])

    def decode(self, row: npt.ArrayLike) -> dict[str, Any]:
        """Decode one encoded row to ``{name: python value}`` in each feature's own type."""
        vector = np.asarray(row, dtype=np.float64)
        return {f.name: f.decode(float(vector[i])) for i, f in enumerate(self.features)}

    def to_frame(self, X: FloatMatrix) -> pd.DataFrame:
        """Decode a candidate matrix into a DataFrame with the original names and types.

        Categories come back as their strings (or the numbers they stand for), integers as
        ``int64``, booleans as ``bool``: what a scikit-learn pipeline fitted on the training
        DataFrame expects. A missing value is NaN (None in a text column), the way pandas
        reads a CSV with gaps: a column that can hold one is float64 (object for text). A feature
        whose training column was a pandas ``category`` is one (``category_dtype``).
        """
        columns: dict[str, Any] = self.to_columns(X)
        for i, feature in enumerate(self.features):
            if isinstance(feature, CategoricalFeature) and feature.category_dtype:  # the data's own dtype
                columns[feature.name] = pd.Categorical(columns[feature.name], categories=self._categories[i])
        return pd.DataFrame(columns, copy=False)  # dict order is column order; columns= would reindex

    def to_columns(self, X: FloatMatrix) -> dict[str, npt.NDArray[Any]]:
        """:meth:`to_frame`'s columns, by name in feature order, without building the DataFrame
        (a served model's request sends them one by one)."""
        columns: dict[str, Any] = {}
        for i, feature in enumerate(self.features):
            column = X[:, i]
            gap = column == self.missing_code[i] if self.missing[i] else None
            if isinstance(feature, CategoricalFeature):
                codes = np.rint(column).astype(np.intp)
                if gap is not None:
                    values = np.empty(column.size, dtype=object)
                    values[gap] = None if feature.category_type == "text" else np.nan
                    values[~gap] = self._categories[i][codes[~gap]] if self._categories[i].size else None
                    if feature.category_type != "text":
                        values = values.astype(np.float64)
                    columns[feature.name] = values
                elif feature.category_type != "text":
                    kind = np.int64 if feature.category_type == "integer" else np.float64
                    columns[feature.name] = self._categories[i][codes].astype(kind)
                else:
                    columns[feature.name] = self._categories[i][codes]
            elif gap is not None:
                columns[feature.name] = np.where(gap, np.nan, column)
            elif isinstance(feature, BooleanFeature):
                columns[feature.name] = column > 0.5
            elif isinstance(feature, IntegerFeature):
                columns[feature.name] = np.rint(column).astype(np.int64)
            else:
                columns[feature.name] = column
        return columns

    def to_array(self, X: FloatMatrix) -> FloatMatrix:
        """The candidates as a model fitted on an array (no column names) takes them: the data's
        values in feature order, as the training matrix held them (``data.to_numpy()``).

        Numbers, booleans (0/1) and text categories (their codes: a float matrix holds no text)
        are as encoded; a gap is NaN, not its feature's missing code (a number below the domain,
        which a model would read as a value); a category stored as numbers (``category_type``
        integer or number) is the number it stands for, not its code. Always a new array, never
        ``X`` itself: a model may write into what it is given (a ``StandardScaler(copy=False)``
        does), and ``X`` holds the search's candidates.
        """
        gaps = self._gap_columns
        if not self._coded and not gaps.size:
            return np.array(X, dtype=np.float64, copy=True)
        out = np.array(X, dtype=np.float64, copy=True)
        for i, numbers in self._coded.items():
            codes = np.clip(np.rint(X[:, i]), 0, numbers.size - 1).astype(np.intp)  # a gap's -1: NaN below
            out[:, i] = numbers[codes]
        if gaps.size:
            block = out[:, gaps]
            block[X[:, gaps] == self.missing_code[gaps]] = np.nan
            out[:, gaps] = block
        return out

    def to_grid(self, values: FloatMatrix, columns: Any) -> FloatMatrix:
        """``values`` of ``columns`` rounded onto their grids and into the grid bounds.

        ``columns`` broadcasts against ``values`` (an index array per element, or per column
        of a 2-D block). Floats without a precision pass through.
        """
        # The move sampler calls this a few times per step on every walker's moves at once, so
        # it keeps to plain ufuncs with their outputs reused (np.clip's wrapper costs as much as
        # the arithmetic on a few hundred values).
        rounded = self.grid.round(values, columns)
        np.maximum(rounded, self.grid_lower[columns], out=rounded)
        np.minimum(rounded, self.grid_upper[columns], out=rounded)
        if not self._all_gridded:  # floats without a precision (or with allowed values) pass through
            rounded = np.where(self.rounded[columns], rounded, values).astype(np.float64, copy=False)
        rounded += 0.0  # no -0.0
        return rounded

    def snap(self, X: FloatMatrix) -> FloatMatrix:
        """Put every value on its column's grid, then onto its allowed values (in place).

        A value equal to the original (a revert, a missing code) is kept as it is.
        """
        np.copyto(X, self.to_grid(X, slice(None)), where=self.original != X)  # every column
        return self.onto_allowed(X)

    def onto_allowed(self, X: FloatMatrix, *, domain: bool = False) -> FloatMatrix:
        """Put every value of a column with allowed values onto the nearest of them (in place);
        with ``domain``, of those within the domain (:attr:`domain_allowed`), not the search bounds."""
        for column in self.allowed:
            X[:, column] = self.nearest_allowed(X[:, column], column, domain=domain)
        return X

    def nearest_allowed(self, values: FloatMatrix, column: int, *, domain: bool = False) -> FloatMatrix:
        """The nearest allowed value of ``column`` to each of ``values`` (a new array); with
        ``domain``, of those within the domain, not the search bounds."""
        grid = (self.domain_allowed if domain else self.allowed)[column]
        if grid.size == 1:
            return np.full(values.shape, grid[0])
        right = np.clip(np.searchsorted(grid, values), 1, grid.size - 1)
        left = right - 1
        nearer_left = np.abs(values - grid[left]) <= np.abs(grid[right] - values)
        return np.where(nearer_left, grid[left], grid[right])

    def nearest_allowed_between(
        self, values: FloatMatrix, column: int, low: FloatMatrix, high: FloatMatrix
    ) -> FloatMatrix:
        """The nearest allowed value of ``column`` within the domain (:attr:`domain_allowed`) to
        each of ``values`` among those within ``[low, high]`` (per value, a hair's rounding
        error wide), NaN where none is: an ``add`` action's step stays within its bounds."""
        grid = self.domain_allowed[column]
        slack = 1e-12 * np.maximum(np.abs(low), np.abs(high))  # before + low computed in floats
        below = np.searchsorted(grid, values, side="right") - 1  # the largest at or below each value
        above = np.searchsorted(grid, values, side="left")  # the smallest at or above
        left = grid[np.clip(below, 0, grid.size - 1)]
        right = grid[np.clip(above, 0, grid.size - 1)]
        left_ok = (below >= 0) & (left >= low - slack)
        right_ok = (above < grid.size) & (right <= high + slack)
        nearer_left = left_ok & (~right_ok | (np.abs(values - left) <= np.abs(right - values)))
        return np.where(nearer_left, left, np.where(right_ok, right, np.nan))

    def gaps_as_nan(self, values: FloatMatrix, column: int) -> FloatMatrix:
        """``values`` of ``column`` with a gap (its missing code, where the original is missing)
        as NaN: what a formula reads, as a model does (the code is a number below the domain, and
        an action's arithmetic on it filled a gap with a value derived from the code)."""
        if not self.missing[column]:
            return values
        return np.where(values == self.missing_code[column], np.nan, values)

    def as_reported(self, X: FloatMatrix, original: FloatMatrix | None = None) -> FloatMatrix:
        """The rows ``X`` (a matrix) as their reports stand for them: ``encode(decode(row))`` of
        every row, a new matrix (:mod:`counterplan.planning.reported`).

        An answer's final check goes through this first, so the model checks what the user is
        told: a float a hair off its grid becomes the value :meth:`decode` shows (a value equal to
        the original, or one of a feature's allowed values, is shown as it is), a whole number or
        a category code its rounded value. ``original``: each row's own original row, when the
        rows are not all this space's instance's (the rows of a batch), else this one's.
        """
        return self._reported.rows(X, self.original if original is None else original)

    def reports_like(self, other: FeatureSpace) -> bool:
        """Whether ``other``'s rows are reported as this space's are (given each row's original):
        rows of both may then go through :meth:`as_reported` of either at once."""
        return self._reported.key == other._reported.key

    def off_grid(self, X: FloatMatrix) -> npt.NDArray[np.int64]:
        """Per row: how many columns hold a value off their grid or their allowed values.

        The original value is always on it. Whole numbers are checked by :meth:`check_candidates`.
        """
        count = np.zeros(X.shape[0], dtype=np.int64)
        for column, grid in self.allowed.items():
            count += ~np.isin(X[:, column], grid)
        decimals = self._decimals
        if decimals.size:
            block = X[:, decimals]
            rounded = self.grid.round(block, decimals)
            # np.isclose(rounded, block, rtol=1e-12, atol=0.0) written out, the same booleans (its
            # wrapper costs more than the arithmetic): its finiteness test of ``block`` matters only
            # for an infinite ``block``, and then ``rounded`` is that same infinity, equal to it
            close = np.abs(rounded - block) <= 1e-12 * np.abs(block)
            close |= rounded == block
            off = ~close & (block != self.original[decimals])
            count += off.sum(axis=1)
        return count

    def check_candidates(self, X: Any) -> FloatMatrix:
        """Check that ``X`` is a finite, in-domain candidate matrix of this space.

        Raises ``CandidateError`` naming the first offending column. Whole-number columns
        (integers, categories, booleans) must hold whole numbers.
        """
        matrix = np.asarray(X, dtype=np.float64)
        if matrix.ndim != 2 or matrix.shape[1] != self.n_features:
            raise CandidateError("shape", f"expected (n, {self.n_features}) candidates, given {matrix.shape}")
        if matrix.shape[0] == 0:
            return matrix
        bad = ~np.isfinite(matrix) | (matrix < self.domain_lower) | (matrix > self.domain_upper)
        bad &= ~(self.missing & (matrix == self.missing_code))  # a missing original is always allowed
        bad |= self.integral & (matrix != np.rint(matrix))
        if bad.any():
            row, col = map(int, np.argwhere(bad)[0])
            feature = self.features[col]
            raise CandidateError(
                feature.name,
                f"row {row} holds {matrix[row, col]!r}, outside the domain "
                f"[{self.domain_lower[col]!r}, {self.domain_upper[col]!r}]"
                + (" or not a whole number" if self.integral[col] else ""),
            )
        return matrix
