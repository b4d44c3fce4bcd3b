"""The one error hierarchy of counterplan.

Every error a user can provoke derives from :class:`CounterplanError`. The ones caused by bad
input also derive from :class:`ValueError` and carry the component, the field and the problem,
so a caller (the gRPC service, the command line) can report every bad field by name instead
of showing a stack trace.

Every message may quote what a caller gave (an id, a value, a column name), and a caller can give
a megabyte: so every echo is cut here, in one place (:func:`cut`, :func:`echo`, :func:`one_line`),
and every error of this hierarchy caps its own text. An id or a value is shown by at most
:data:`ECHO_CHARS` characters, an error text by at most :data:`TEXT_CHARS`; a cut says how long
the original was. gRPC carries a status's message in trailing metadata, which a default client
caps (a 20 KB message reached it as RESOURCE_EXHAUSTED "Stream removed"); a terminal shows a
10 KB one-line error as a screenful.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

ECHO_CHARS = 100
"""An id or a value the caller gave is echoed by at most this many characters."""
TEXT_CHARS = 1024
"""An error's text is at most this many characters (1 KB), whatever it quotes."""


def cut(text: str, limit: int = ECHO_CHARS) -> str:
    """``text`` whole when it fits in ``limit`` characters; else its start, an ellipsis and its
    length (``mmm… (1,000,000 characters)``), ``limit`` characters in all (``limit`` >= 40): the
    reader sees what it was and that it was cut, never a megabyte."""
    if len(text) <= limit:
        return text
    mark = f"… ({len(text):,} characters)"
    return text[: limit - len(mark)] + mark


def echo(value: object, limit: int = ECHO_CHARS) -> str:
    """A caller's value as a message quotes it: its ``repr`` (escapes keep the message on one
    line); a string's text cut by :func:`cut` inside its quotes, so a long id reads
    ``'mmm… (1,000,000 characters)'`` (``limit`` characters and the quotes; a text cut once is
    not cut again). A list or object nested too deep for ``repr`` (JSON a caller sent: orjson,
    KServe's decoder, reads 1,024 levels) is shown by its brackets alone, ``[…] (nested too deep
    to show)``: repr recurses per level, and its RecursionError would be a stack trace."""
    try:
        shown = repr(value)
    except RecursionError:
        brackets = "{…}" if isinstance(value, dict | set | frozenset) else "(…)" if isinstance(value, tuple) else "[…]"
        return f"{brackets} (nested too deep to show)"
    if not isinstance(value, str):
        return cut(shown, limit)
    return shown if len(shown) <= limit + 2 else shown[0] + cut(shown[1:-1], limit) + shown[-1]


class CounterplanError(Exception):
    """Base class of every error counterplan raises on purpose.

    Its text is cut to :data:`TEXT_CHARS` (each text argument): a message built from a caller's
    input stays readable and fits a gRPC status, whichever subclass built it.
    """

    def __init__(self, *args: object) -> None:
        super().__init__(*(cut(a, TEXT_CHARS) if isinstance(a, str) else a for a in args))

    def __reduce__(self) -> tuple[object, ...]:
        """Pickled with its fields, whatever its constructor takes (a subclass's fields are not
        its message): an error raised in a batch's worker process reaches the parent whole."""
        return (_restored, (type(self), self.args, self.__dict__.copy()))


def _restored(kind: type[CounterplanError], args: tuple[object, ...], fields: dict[str, object]) -> CounterplanError:
    """The error :meth:`CounterplanError.__reduce__` pickled, rebuilt without its constructor."""
    error = kind.__new__(kind)
    error.args = args
    error.__dict__.update(fields)
    return error


class ModelCallError(CounterplanError):
    """The model itself fails on the instance (it raises, or gives no finite prediction)."""


class ModelFailureError(ModelCallError):
    """The model fails on the original instance itself: there is nothing to search from (an
    explanation and a plan both refuse it).

    ``missing``: the features the instance leaves missing. A model that fails on an instance
    with gaps most likely takes no missing values, and the gaps are the caller's to fill: the
    service answers INVALID_ARGUMENT (HTTP 400) naming them, not INTERNAL (500), the model's
    fault, as for an instance without any."""

    missing: tuple[str, ...] = ()

    @classmethod
    def on_original(cls, failure: object, missing: Sequence[str] = ()) -> ModelFailureError:
        """The error of an original instance the model failed on (``failure``: why), in the one
        wording every engine gives it; ``missing``: the features the instance leaves missing."""
        gaps = f" (the instance leaves {', '.join(missing)} missing)" if missing else ""
        error = cls(f"the model fails on the original instance{gaps}: {failure}")
        error.missing = tuple(missing)
        return error


MISSING_THE_MODEL_FAILS_ON = (
    "missing in the instance, and the model fails on it: it takes no missing values; give a value"
)
"""What a service says of each feature an instance leaves missing when the model fails on that
instance (:class:`ModelFailureError`'s ``missing``)."""


class InvalidInputError(CounterplanError, ValueError):
    """A value given to counterplan breaks a rule; names where and what.

    Parameters
    ----------
    component:
        What was being built or checked (``"feature"``, ``"goal"``, ``"score"``...).
    field:
        The name of the bad field, as the caller wrote it (``"income.low"``).
    problem:
        What is wrong, in words, including what is allowed and what was given.
    """

    def __init__(self, component: str, field: str, problem: str) -> None:
        self.component = component
        self.field = cut(field)
        self.problem = cut(problem, TEXT_CHARS)
        self.parts: tuple[tuple[str, str], ...] = ((self.field, self.problem),)
        """Each bad field and its problem: one pair, or one per field of an error that names
        several (``field`` then joins them, ``a, b``, cut as one text: a caller reporting each
        field reads them here)."""
        super().__init__(f"{component} {echo(field)}: {self.problem}")


class FeatureError(InvalidInputError):
    """A feature definition or value is invalid."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__("feature", field, problem)


class GoalError(InvalidInputError):
    """A goal is invalid or names an output the model does not have."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__("goal", field, problem)


class ScoreFormatError(InvalidInputError):
    """A score's text form cannot be parsed."""

    def __init__(self, text: str, problem: str) -> None:
        super().__init__("score", text, problem)


class CandidateError(InvalidInputError):
    """A candidate matrix does not fit the problem's search space."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__("candidates", field, problem)


class ModelAdapterError(InvalidInputError):
    """A model cannot be adapted (wrong kind, missing outputs, bad output shape)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__("model", field, problem)


class RemoteModelError(ModelAdapterError):
    """A served model cannot be used: its server is down or too slow, it does not know the
    model, or it answers in another form than the one it declares (shape, datatype).

    A :class:`ModelAdapterError`, so the score calculator stops the solve at once instead of
    bisecting the batch (every smaller call would fail the same way). ``address`` is the model's
    address as the user gave it. ``unavailable``: the server could not be reached or answered too
    slowly (worth another try later), not a wrong answer or a refusal; a service telling its
    caller tells the two apart (gRPC UNAVAILABLE or FAILED_PRECONDITION, never the caller's
    INVALID_ARGUMENT).
    """

    def __init__(self, address: str, problem: str, *, unavailable: bool = False) -> None:
        super().__init__(address, problem)
        self.unavailable = unavailable


class RemoteInferenceError(ModelCallError):
    """A served model raised on a batch (an HTTP 500, a gRPC INTERNAL): the model's own failure,
    which the score calculator treats as a local model's exception (it bisects the batch and
    counts the rows that fail)."""


class ProblemError(InvalidInputError):
    """A counterfactual problem cannot be built from what was given."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__("problem", field, problem)


MESSAGE_LIMIT = 300
"""A model's error message is cut to this many characters: it may quote a whole input."""


_UNSHOWN = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufeff]")
"""Characters a terminal acts on rather than shows: control characters (ESC starts a terminal's
escape sequence) and the invisible format ones (bidirectional overrides, zero-width)."""


def unshown(text: str) -> str | None:
    """The first character of ``text`` a terminal would act on rather than show (a control or an
    invisible format character, :data:`_UNSHOWN`) as its escape, or None: a name printed in a
    table must show as it is (a newline would split the table's row)."""
    found = _UNSHOWN.search(text)
    return None if found is None else repr(found.group())[1:-1]


def one_line(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """``text`` on one line, cut by :func:`cut` to ``limit`` characters (a model's message may
    span many), each control or invisible format character written as its escape (``\\x1b``):
    the text may be a served model's server's, shown on a terminal or in a log."""
    flat = " ".join(text.split())
    return cut(_UNSHOWN.sub(lambda m: repr(m.group())[1:-1], flat), limit)
