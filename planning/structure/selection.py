"""Which columns a ``ColumnTransformer`` entry selects, as scikit-learn resolves them.

A fitted ``ColumnTransformer`` keeps each entry's selector as the user wrote it: column names,
positions (Python or numpy integers, negative ones from the end), a boolean mask, a slice of
positions (end excluded) or of names (end included, as pandas ``.loc``), and, for callables and
``make_column_selector``, the names they picked at fit time (the remainder: its positions).
:func:`select` turns any of them into positions, or refuses naming the entry; it never lets an
``IndexError`` or ``TypeError`` through.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from counterplan.planning.structure.errors import NotEncodableError


def select(selection: Any, names: Sequence[str], n: int, where: str, fitted: Sequence[int] | None = None) -> list[int]:
    """The positions (among ``n`` columns named ``names``, when the input had names) that
    ``selection`` picks. ``fitted`` is what the transformer resolved at fit time, used for a
    selector that can only be evaluated on data (a callable)."""
    if callable(selection):
        if fitted is None:
            raise NotEncodableError(f"{where}: a column selector that is a function, not resolved when fitted")
        return _positions(list(fitted), names, n, where)
    if isinstance(selection, slice):
        return _slice(selection, names, n, where)
    if isinstance(selection, str | int | np.integer | np.str_):
        return _positions([selection], names, n, where)
    try:
        picked = np.asarray(selection).tolist() if isinstance(selection, np.ndarray) else list(selection)
    except TypeError:
        raise NotEncodableError(f"{where}: a column selector {selection!r} is not understood") from None
    if picked and all(isinstance(p, bool | np.bool_) for p in picked):
        if len(picked) != n:
            raise NotEncodableError(f"{where}: a mask of {len(picked)} columns for {n} columns")
        return [i for i, p in enumerate(picked) if p]
    return _positions(picked, names, n, where)


def _positions(picked: list[Any], names: Sequence[str], n: int, where: str) -> list[int]:
    out = []
    for p in picked:
        if isinstance(p, str):
            out.append(_position(p, names, where))
        elif isinstance(p, int | np.integer) and not isinstance(p, bool | np.bool_):
            if not -n <= int(p) < n:
                raise NotEncodableError(f"{where}: column {int(p)} of {n} columns")
            out.append(int(p) % n)
        else:
            raise NotEncodableError(f"{where}: a column selector {p!r} is neither a name nor a position")
    return out


def _position(name: str, names: Sequence[str], where: str) -> int:
    if name not in names:
        raise NotEncodableError(f"{where}: unknown column {name!r}")
    return list(names).index(name)


def _slice(selection: slice, names: Sequence[str], n: int, where: str) -> list[int]:
    """A slice of positions (end excluded), or of names (end included, as pandas ``.loc``)."""
    ends = [end for end in (selection.start, selection.stop) if end is not None]
    if all(isinstance(end, int | np.integer) and not isinstance(end, bool) for end in ends):
        return list(range(n))[selection]
    if not all(isinstance(end, str) for end in ends):
        raise NotEncodableError(f"{where}: a slice mixing names and positions {selection!r}")
    if selection.step not in (1, None):
        raise NotEncodableError(f"{where}: a slice of names with a step {selection.step!r}")
    start = 0 if selection.start is None else _position(selection.start, names, where)
    stop = n - 1 if selection.stop is None else _position(selection.stop, names, where)
    return list(range(start, stop + 1))


__all__ = ["select"]
