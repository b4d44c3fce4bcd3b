"""A :class:`~counterplan.planning.remote.RemoteModel`'s options, checked when it is built.

A bad option used to surface at the first call, or never where it was given: a timeout of
``inf`` as an ``OverflowError`` deep in the socket, a header value with a newline or a non-ASCII
letter as gRPC's "Invalid metadata" (INTERNAL, which read as the served model raising, so the
score calculator bisected every batch and counted its rows as the model's failures), a CA
bundle's path that does not exist as a ``FileNotFoundError``, a string count as a ``TypeError``.
Each is now a :class:`~counterplan.planning.errors.ModelAdapterError` naming its option.
"""

from __future__ import annotations

import math
import numbers
import os
import re
from collections.abc import Mapping
from typing import Any

from counterplan.planning.errors import ModelAdapterError, echo

MAX_CALL_SECONDS = 3600.0
"""The longest a served model's call may be given to answer (``timeout``, a card's
``remote.timeout``, ``--model-timeout``): an hour is already no interactive search."""
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""An HTTP header's name (RFC 9110's token), which gRPC metadata keys are too (lower-cased)."""
_VALUE = re.compile(r"[\x20-\x7e]*")
"""A header's value: printable ASCII, what gRPC metadata carries as text (and HTTP as is)."""


def seconds(field: str, value: object) -> float:
    """``value`` as seconds: a number above 0, at most :data:`MAX_CALL_SECONDS`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ModelAdapterError(field, f"give seconds as a number, given {echo(value)}")
    number = float(value)
    if not (math.isfinite(number) and 0 < number <= MAX_CALL_SECONDS):
        raise ModelAdapterError(field, f"give seconds above 0 and at most {MAX_CALL_SECONDS:g}, given {number:g}")
    return number


def count(field: str, value: object) -> int:
    """``value`` as a whole number of at least 1."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ModelAdapterError(field, f"give a whole number of at least 1, given {echo(value)}")
    return int(value)


def headers(value: object, grpc: bool) -> dict[str, str]:
    """``value`` as headers that go on every call: text names (HTTP tokens) and values (printable
    ASCII); over gRPC no binary (``-bin``) key, whose value would have to be bytes. A refusal
    never shows a header's value, nor a name that is no name (``Authorization: Bearer TOKEN``
    given as one), only where it breaks the rule (:func:`first_bad`): a header carries secrets,
    and a refusal goes into logs."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ModelAdapterError("headers", f"give a mapping of names to values, given {type(value).__name__}")
    for name, text in value.items():
        if not isinstance(name, str) or not _TOKEN.fullmatch(name):
            raise ModelAdapterError(
                "headers", f"a header name is letters, digits and !#$%&'*+-.^_`|~; {first_bad(name, _TOKEN)}"
            )
        if not isinstance(text, str) or not _VALUE.fullmatch(text):
            raise ModelAdapterError(f"headers.{name}", f"give printable ASCII text; {first_bad(text, _VALUE)}")
        if grpc and name.lower().endswith("-bin"):
            raise ModelAdapterError(f"headers.{name}", "a gRPC binary header (-bin) is not supported")
    return dict(value)


def first_bad(text: object, allowed: re.Pattern[str]) -> str:
    """Where ``text`` breaks ``allowed`` (a pattern of characters), the text itself unshown: its
    first bad character and where it is, or its type when it is no text."""
    if not isinstance(text, str):
        return f"given {type(text).__name__}, not text"
    if not text:
        return "given an empty text"
    at, char = next(((i, c) for i, c in enumerate(text) if not allowed.fullmatch(c)), (0, text[0]))
    return f"given {echo(char)} at character {at + 1} of {len(text)} (the text is not shown: it may be a secret)"


def verify(value: object, rest: bool) -> bool | str:
    """TLS verification: ``True``, ``False`` or a CA bundle's path (a file, or a directory of
    certificates), over REST; a gRPC channel verifies with gRPC's roots (its own, or the file
    ``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH`` names), so only ``True``."""
    if value is True:
        return True
    if not rest:
        raise ModelAdapterError(
            "verify",
            f"a gRPC channel always verifies, with gRPC's roots (set GRPC_DEFAULT_SSL_ROOTS_FILE_PATH "
            f"to a CA bundle's file); given {echo(value)}",
        )
    if value is False:
        return False
    if not isinstance(value, str) or not (os.path.isfile(value) or os.path.isdir(value)):
        raise ModelAdapterError("verify", f"give True, False or a CA bundle's file or directory, given {echo(value)}")
    from counterplan.planning.remote.rest import tls_verify  # noqa: PLC0415 - the rest of the REST module

    try:  # read now: a file that is no CA bundle fails here, not at the first call
        tls_verify(value)
    except (OSError, ValueError) as exc:
        raise ModelAdapterError("verify", f"cannot read the CA bundle {echo(value)}: {exc}") from None
    return value


def classes(value: Any) -> tuple[Any, ...]:
    """The class names: a sequence of two or more distinct, hashable names."""
    if isinstance(value, str | bytes) or not hasattr(value, "__len__") or not hasattr(value, "__iter__"):
        raise ModelAdapterError("classes", f"give a list of class names, given {echo(value)}")
    names = tuple(value)
    try:
        distinct = len(set(names)) == len(names)
    except TypeError:
        raise ModelAdapterError("classes", f"class names must be text or numbers, given {echo(names)}") from None
    if len(names) < 2 or not distinct:
        raise ModelAdapterError("classes", f"a classifier needs two distinct class names or more, given {list(names)}")
    return names


__all__ = ["MAX_CALL_SECONDS", "classes", "count", "first_bad", "headers", "seconds", "verify"]
