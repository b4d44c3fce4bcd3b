"""Where particles live: min-max scaled coordinates of the searched features, inside a box.

A particle's position has one coordinate per searched number (its value scaled by the feature's
domain to [0, 1]) and one per category of each searched categorical or boolean feature (a
one-hot group, decoded by argmax, as MD-PSO handles a discrete dimension). Features not searched
(immutable, not among the ``top_features``, a missing original, a feature another one computes,
an empty domain) stay at the original value in every decoded row.

The box (the paper's actionability box): a number whose scaled original is ``z`` may move within
``[z (1 - eps), z (1 + eps)]``, or ``[z - eps, z + eps]`` when ``z`` is 0 (the relative box
would be a point), clipped to the search bounds (the domain, narrowed by a monotone rule). A
one-hot coordinate is 0 or 1 at the original, so its box is ``[0, eps]`` or ``[1 - eps, 1]``
within [0, 1]: with eps of 1/2 or more any category can win the argmax.

A relative box can leave the goal out of reach (a feature whose original sits low in its domain
can only move a little), so the phase may open it to the whole domain (:meth:`SwarmPositions.widened`)
when half its iterations found nothing valid.

Decoding rounds numbers onto their grids (whole numbers, a precision, allowed values) through
the space's own :meth:`~counterplan.solver.core.protocol.EncodedSpace.snap`, and snaps a scaled change
smaller than the tolerance back to the original, so a feature the swarm barely moved counts as
unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from counterplan.solver.core.protocol import EncodedSpace, FloatMatrix

IntArray = npt.NDArray[np.intp]


def searchable(space: EncodedSpace) -> IntArray:
    """Columns a swarm may move: mutable, with more than one value to take, and with an original
    value: a missing original stays missing (a one-hot group has no coordinate for "missing", so
    its argmax would always fill it in; local search may fill such gaps)."""
    lower, upper = space.lower, space.upper
    missing = np.asarray(getattr(space, "missing", np.zeros(space.n_features, dtype=bool)), dtype=bool)
    return np.flatnonzero(space.mutable & (upper > lower) & ~missing)


@dataclass(frozen=True)
class SwarmPositions:
    """The coordinates of one problem's swarm: which columns, their scaling and their box.

    Build with :meth:`of`. ``numbers`` and ``groups`` are the searched columns; coordinate ``d``
    of a position is column ``numbers[d]`` for ``d < len(numbers)``, then the one-hot
    coordinates of each grouped column in turn (``group_of[d]``, ``code_of[d]``).
    """

    space: EncodedSpace
    numbers: IntArray
    groups: IntArray
    origin: FloatMatrix
    """Per number column: the value scaled coordinate 0 maps to (the domain's lower end)."""
    width: FloatMatrix
    """Per number column: the domain's width (scaled coordinate 1 is origin + width)."""
    codes: list[FloatMatrix]
    """Per grouped column: the encoded values (category indices) its one-hot coordinates stand for."""
    group_of: IntArray
    code_of: IntArray
    low: FloatMatrix
    """Per coordinate: the box's lower end."""
    high: FloatMatrix
    start: FloatMatrix
    """The original row's position."""
    tolerance: float
    bounds: tuple[FloatMatrix, FloatMatrix]
    """Per coordinate: the search bounds the box lies in (the whole domain, narrowed by a
    monotone rule), which :meth:`widened` opens the box to."""
    most_changes: int | None = None
    """The problem's ``max_changed_features``: a decoded row keeps at most this many changes
    (:meth:`decode`); None: no cap."""

    @property
    def dimensions(self) -> int:
        """Coordinates per particle."""
        return int(self.low.size)

    @property
    def columns(self) -> IntArray:
        """Every searched column."""
        return np.concatenate([self.numbers, self.groups])

    @classmethod
    def of(
        cls,
        space: EncodedSpace,
        columns: IntArray,
        box_ratio: float,
        tolerance: float,
        most_changes: int | None = None,
    ) -> SwarmPositions:
        """The positions of ``columns`` (a subset of :func:`searchable`) with box half-width
        ``box_ratio``; ``most_changes``: the problem's cap on changed features."""
        columns = np.sort(np.asarray(columns, dtype=np.intp))
        nominal = space.nominal[columns]
        numbers, groups = columns[~nominal], columns[nominal]
        lower_domain = getattr(space, "domain_lower", space.lower)[numbers]
        upper_domain = getattr(space, "domain_upper", space.upper)[numbers]
        width = np.maximum(upper_domain - lower_domain, 1e-300)
        z = (space.original[numbers] - lower_domain) / width
        search_low = (space.lower[numbers] - lower_domain) / width
        search_high = (space.upper[numbers] - lower_domain) / width
        low = np.where(z > 0.0, z * (1.0 - box_ratio), z - box_ratio)
        high = np.where(z > 0.0, z * (1.0 + box_ratio), z + box_ratio)
        low, high = np.maximum(low, search_low), np.minimum(high, search_high)
        codes: list[FloatMatrix] = []
        group_of: list[int] = []
        code_of: list[int] = []
        starts: list[float] = []
        for g, j in enumerate(groups.tolist()):
            values = space.allowed.get(j)
            if values is None:
                values = np.arange(np.ceil(space.lower[j]), np.floor(space.upper[j]) + 1.0)
            codes.append(np.asarray(values, dtype=np.float64))
            group_of.extend([g] * values.size)
            code_of.extend(range(values.size))
            starts.extend((values == space.original[j]).astype(np.float64).tolist())
        one_hot = np.asarray(starts, dtype=np.float64)
        bounds = (
            np.concatenate([search_low, np.zeros(one_hot.size)]),
            np.concatenate([search_high, np.ones(one_hot.size)]),
        )
        hot_low = np.where(one_hot > 0.0, 1.0 - box_ratio, 0.0).clip(0.0, 1.0)
        hot_high = np.where(one_hot > 0.0, 1.0, box_ratio).clip(0.0, 1.0)
        return cls(
            space=space,
            numbers=numbers,
            groups=groups,
            origin=lower_domain,
            width=width,
            codes=codes,
            group_of=np.asarray(group_of, dtype=np.intp),
            code_of=np.asarray(code_of, dtype=np.intp),
            low=np.concatenate([low, hot_low]),
            high=np.concatenate([high, hot_high]),
            start=np.concatenate([z, one_hot]),
            tolerance=tolerance,
            bounds=bounds,
            most_changes=most_changes,
        )

    def widened(self) -> SwarmPositions:
        """The same coordinates with the box opened to the search bounds."""
        return replace(self, low=self.bounds[0], high=self.bounds[1])

    def box_values(self) -> tuple[FloatMatrix, FloatMatrix]:
        """Per column of :attr:`columns`: the box's ends as encoded values (NaN for categories)."""
        n = self.numbers.size
        blank = np.full(self.groups.size, np.nan)
        low = np.concatenate([self.origin + self.low[:n] * self.width, blank])
        high = np.concatenate([self.origin + self.high[:n] * self.width, blank])
        return low, high

    def uniform(self, count: int, rng: np.random.Generator) -> FloatMatrix:
        """``count`` positions drawn uniformly inside the box."""
        return self.low + rng.random((count, self.dimensions)) * (self.high - self.low)

    def decode(self, positions: FloatMatrix) -> FloatMatrix:
        """Candidate rows for ``positions``: numbers unscaled, snapped back within the tolerance
        and put on their grids; each one-hot group's argmax category; the rest original. Under a
        cap on changed features (:attr:`most_changes`), a row keeps the changes its position
        commits to most (:meth:`_capped`)."""
        space = self.space
        rows = np.repeat(space.original.reshape(1, -1), positions.shape[0], axis=0)
        n = self.numbers.size
        if n:
            scaled = positions[:, :n]
            values = self.origin + scaled * self.width
            near = np.abs(scaled - self.start[:n]) < self.tolerance
            rows[:, self.numbers] = np.where(near, space.original[self.numbers], values)
        offset = n
        for g, j in enumerate(self.groups.tolist()):
            size = self.codes[g].size
            block = positions[:, offset : offset + size]
            rows[:, j] = self.codes[g][np.argmax(block, axis=1)]
            offset += size
        rows = space.snap(rows)
        return rows if self.most_changes is None else self._capped(rows, positions)

    def _commitment(self, positions: FloatMatrix) -> FloatMatrix:
        """Per position and searched column (:attr:`columns`' order): how far the position moved
        it, a number in domain widths, a category as its chosen one-hot coordinate's lead over
        the original's (none: a missing original)."""
        n = self.numbers.size
        out = np.empty((positions.shape[0], n + self.groups.size))
        out[:, :n] = np.abs(positions[:, :n] - self.start[:n])
        offset = n
        for g in range(self.groups.size):
            size = self.codes[g].size
            block = positions[:, offset : offset + size]
            home = self.start[offset : offset + size] > 0.0
            kept = block[:, home].max(axis=1) if home.any() else np.zeros(block.shape[0])
            out[:, n + g] = block.max(axis=1) - kept
            offset += size
        return out

    def _capped(self, rows: FloatMatrix, positions: FloatMatrix) -> FloatMatrix:
        """``rows`` with at most :attr:`most_changes` changed features each: a row with more keeps
        those its position commits to most (a number's move in domain widths, a category's lead
        of its chosen one-hot coordinate over the original's), the first of equals by column,
        and the others go back to the original: the particle's row projected onto the rows the
        problem allows (hard thresholding). Only the score penalised a row over the cap, so with
        a cap of one the swarm often ended with every particle changing several features and no
        feasible answer where local search found one."""
        assert self.most_changes is not None
        columns = self.columns
        original = self.space.original[columns]
        changed = rows[:, columns] != original
        over = changed.sum(axis=1) > self.most_changes
        if not over.any():
            return rows
        weight = np.where(changed[over], self._commitment(positions[over]), -np.inf)
        order = np.argsort(-weight, axis=1, kind="stable")  # most committed first, then by column
        dropped = np.zeros(weight.shape, dtype=bool)
        np.put_along_axis(dropped, order[:, self.most_changes :], True, axis=1)
        block = rows[over][:, columns]
        block[dropped] = np.broadcast_to(original, block.shape)[dropped]
        out = rows.copy()
        out[np.ix_(np.flatnonzero(over), columns)] = block
        return out

    def encode(self, rows: FloatMatrix) -> FloatMatrix:
        """Positions of candidate rows (a warm start), clipped into the box."""
        n = self.numbers.size
        out = np.empty((rows.shape[0], self.dimensions))
        out[:, :n] = (rows[:, self.numbers] - self.origin) / self.width
        offset = n
        for g, j in enumerate(self.groups.tolist()):
            size = self.codes[g].size
            out[:, offset : offset + size] = rows[:, [j]] == self.codes[g].reshape(1, -1)
            offset += size
        return np.clip(out, self.low, self.high)
