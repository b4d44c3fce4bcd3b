"""counterplan's errors pickle whole, whatever their constructors take: an error raised in a
batch's worker process (a served model that is down) reaches the parent as itself, not as a
broken process pool."""

from __future__ import annotations

import pickle

import pytest

from counterplan.planning.errors import (
    CounterplanError,
    FeatureError,
    InvalidInputError,
    ModelCallError,
    ProblemError,
    RemoteInferenceError,
    RemoteModelError,
)


@pytest.mark.unit
@pytest.mark.parametrize(
    "error",
    [
        CounterplanError("plain"),
        ModelCallError("the model raised"),
        RemoteInferenceError("served model 'm' raised: ValueError: x"),
        InvalidInputError("goal", "target", "no such class"),
        FeatureError("income.low", "above high"),
        ProblemError("rows", "duplicate labels"),
        RemoteModelError("http://h:1/v2/models/m", "cannot reach the server"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_an_error_pickles_with_its_fields(error: CounterplanError) -> None:
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert str(copy) == str(error) and copy.args == error.args
    assert copy.__dict__ == error.__dict__  # component, field, problem
