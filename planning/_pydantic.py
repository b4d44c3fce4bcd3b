"""Turn pydantic's validation errors into counterplan's own, naming the object and field.

Pydantic checks types; counterplan promises errors that say which feature or goal is wrong.
Models call :func:`reraise` from ``__init__`` so that a bad feature raises ``FeatureError``
("feature 'income.low': ...") rather than a generic ``pydantic.ValidationError``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NoReturn

import numpy as np
from pydantic import ValidationError

from counterplan.planning.errors import TEXT_CHARS, InvalidInputError, cut, echo


def describe(exc: ValidationError) -> list[tuple[str, str]]:
    """Return ``(field path, message)`` for every error in a pydantic ``ValidationError``."""
    out: list[tuple[str, str]] = []
    errors = exc.errors(include_url=False)
    for err in errors:
        loc = ".".join(str(part) for part in err["loc"])
        if err["type"] == "too_short" and _holds_an_error(err["loc"], errors):
            continue  # a list whose item failed is "too short after validation": the item's error says it
        inner = err.get("ctx", {}).get("error")
        if isinstance(inner, InvalidInputError):  # a nested model's own error: keep its path, each field's
            out += [(f"{loc}.{field}" if loc else field, problem) for field, problem in inner.parts]
            continue
        msg = err["msg"]
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        if "input" in err and err["type"] != "value_error" and not isinstance(err["input"], dict):
            msg = f"{msg} (given {excerpt(err['input'])})"
        out.append((loc, msg))
    return out


def _holds_an_error(loc: tuple[Any, ...], errors: list[Any]) -> bool:
    """True when another error lies inside ``loc`` (one of its items)."""
    return any(len(e["loc"]) > len(loc) and tuple(e["loc"][: len(loc)]) == tuple(loc) for e in errors)


def excerpt(value: Any) -> str:
    """A bad value as an error message shows it, never rendered whole: a collection by its size,
    anything else as every echo of a caller's value (:func:`~counterplan.planning.errors.echo`)."""
    if isinstance(value, list | tuple | dict | set):
        return f"a {type(value).__name__} of {len(value)} items"
    return echo(value)


def a_scalar(value: Any) -> Any:
    """A value a rule lists or a goal names, checked before its union ``str | int | float | bool``:
    a list, an object, null (JSON a caller sent) or a NaN is refused in one message, where pydantic would
    name each kind it tried as a field (``target.str, target.int, target.float, target.bool: ...``)."""
    if value is None or isinstance(value, list | tuple | dict | set):
        raise ValueError(f"must be text, a number or a boolean, given {excerpt(value)}")
    if isinstance(value, np.generic):  # model.classes_[1]: numpy's True_ would become the number 1.0
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"must be text, a finite number or a boolean, given {excerpt(value)}")
    return value


def reraise(
    exc: ValidationError,
    owner: str,
    make: Callable[[str, str], InvalidInputError],
) -> NoReturn:
    """Raise ``make(field, problem)`` for ``exc``; ``owner`` (may be empty) prefixes the field path."""
    problems = describe(exc)
    fields = [".".join(part for part in (owner, loc) if part) or "value" for loc, _ in problems]
    field = fields[0] if len(fields) == 1 else ", ".join(fields)
    text = "; ".join(f"{f}: {m}" if len(problems) > 1 else m for f, (_, m) in zip(fields, problems, strict=True))
    error = make(field, text)
    if len(problems) > 1:  # each field on its own, as the joined field and text may be cut
        error.parts = tuple((cut(f), cut(m, TEXT_CHARS)) for f, (_, m) in zip(fields, problems, strict=True))
    raise error from None
