"""The bounds of the flags that become solver settings, checked where the flag is read.

A flag's value ends up in a field of a configuration (``--time-limit`` in the termination's
``spent_limit_seconds``, ``--seed`` in ``random_seed``, ``--budget`` in every trial's time
limit); left to the configuration, a bad value is refused under the field's name, which the user
never wrote. So each such flag is checked here, against the field's own bound (imported from the
configuration, so the two cannot drift), and refused naming the flag. The configuration loads
numpy and pydantic: commands import this module when they run, not for ``--help``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from counterplan.solver.core.config import MAX_SECONDS, MAX_SEED

Usage = Callable[[str], Exception]
"""The command's usage error (``UsageError``): exit code 2 and the one line."""


def check_seconds(flag: str, value: float | None, usage: Usage, maximum: float = MAX_SECONDS) -> None:
    """``value`` (None: not given) must be a finite number of seconds above 0, at most ``maximum``
    (by default a solver configuration's: about 300 years)."""
    if value is not None and not (math.isfinite(value) and 0.0 < value <= maximum):
        raise usage(f"{flag} must be a finite number of seconds above 0 and at most {maximum:g}, given {value:g}")


def check_seed(flag: str, value: int | None, usage: Usage) -> None:
    """``value`` (None: not given) must be a seed a solver configuration takes: 0 to 2**63 - 1."""
    if value is not None and not 0 <= value <= MAX_SEED:
        raise usage(f"{flag} must be a whole number from 0 to 2**63 - 1, given {_short(value)}")


def validation_problem(exc: Any) -> str:
    """The first problem of a pydantic ``ValidationError``, in one line: its message and, for a
    nested field, where (``nearest: Input should be greater than or equal to 1``)."""
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error.get("loc", ()))
    message = str(error.get("msg", "invalid value"))
    return f"{where}: {message}" if where else message


def _short(value: int) -> str:
    """A whole number as given, or its size when it is too long to echo."""
    text = str(value)
    return text if len(text) <= 30 else f"a number of {len(text)} digits"
