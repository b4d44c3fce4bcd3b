"""Which rows a batch explains, and the seed each one gets.

A selection is ``all``, ``rejected`` (the rows whose prediction does not meet the goal now),
a half-open range of positions ``START:STOP`` (either end may be left out), or a list of
positions. A row's id is its index label in the DataFrame it comes from (for a CSV read with
pandas, its position), and its seed comes from the global seed and that id alone, so a row gets
the same answer whatever batch, worker or Ray block it runs in.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from counterplan.planning.errors import ProblemError
from counterplan.solver.core.config import MAX_SEED

_RANGE = re.compile(r"^\s*(-?\d*)\s*:\s*(-?\d*)\s*$")


@dataclass(frozen=True)
class RowSelection:
    """Rows of a DataFrame chosen by position: ``positions`` None means every row."""

    positions: tuple[int, ...] | None = None
    only_rejected: bool = False

    @classmethod
    def parse(cls, text: str | Sequence[int] | None, n_rows: int) -> RowSelection:
        """``all``, ``rejected``, ``START:STOP`` or positions, checked against ``n_rows`` rows."""
        if text is None or (isinstance(text, str) and text.strip() == "all"):
            return cls()
        if isinstance(text, str):
            if text.strip() == "rejected":
                return cls(only_rejected=True)
            match = _RANGE.match(text)
            if match is None:
                raise ProblemError("rows", f"give all, rejected, START:STOP or positions; given {text[:40]!r}")
            start = int(match.group(1)) if match.group(1) else 0
            stop = int(match.group(2)) if match.group(2) else n_rows
            if not 0 <= start < stop <= n_rows:
                raise ProblemError("rows", f"{start}:{stop} is not a range of positions in the data's {n_rows} rows")
            return cls(tuple(range(start, stop)))
        positions = [int(p) for p in text]
        bad = [p for p in positions if not 0 <= p < n_rows]
        if bad:
            raise ProblemError("rows", f"position {bad[0]} is outside the data's {n_rows} rows")
        return cls(tuple(positions))

    def apply(self, data: pd.DataFrame) -> pd.DataFrame:
        """The selected rows of ``data``."""
        return data if self.positions is None else data.iloc[list(self.positions)]


def row_seed(seed: int, row_id: Any) -> int:
    """The seed of the row with id ``row_id`` in a batch seeded with ``seed``: a hash of both, so
    it depends on nothing else (not the row's place in a batch, nor the worker)."""
    digest = hashlib.blake2b(f"{seed}/{id_text(row_id)}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % (MAX_SEED + 1)


def id_text(row_id: Any) -> str:
    """A row id as text, the same for ``5``, ``np.int64(5)`` and ``5.0``."""
    if isinstance(row_id, bool | np.bool_):
        return str(bool(row_id))
    if isinstance(row_id, int | np.integer):
        return str(int(row_id))
    if isinstance(row_id, float | np.floating) and float(row_id).is_integer():
        return str(int(row_id))
    return str(row_id)
