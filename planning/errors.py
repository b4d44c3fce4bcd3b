"""The one error hierarchy of counterplan.

Every error a user can provoke derives from :class:`CounterplanError`. The ones caused by bad
input also derive from :class:`ValueError` and carry the component, the field and the problem,
so a caller (the gRPC service, the command line) can report every bad field by name instead
of showing a stack trace.
"""

from __future__ import annotations


class CounterplanError(Exception):
    """Base class of every error counterplan raises on purpose."""


class ModelCallError(CounterplanError):
    """The model itself fails on the instance (it raises, or gives no finite prediction)."""


class ModelFailureError(ModelCallError):
    """The model fails on the original instance itself: there is nothing to search from (an
    explanation and a plan both refuse it)."""


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
        self.field = field
        self.problem = problem
        super().__init__(f"{component} {field!r}: {problem}")


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


class ProblemError(InvalidInputError):
    """A counterfactual problem cannot be built from what was given."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__("problem", field, problem)


MESSAGE_LIMIT = 300
"""A model's error message is cut to this many characters: it may quote a whole input."""


def one_line(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """``text`` on one line, at most ``limit`` characters (a model's message may span many)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
