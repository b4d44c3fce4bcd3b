"""Goals: what a model output must become for a candidate to count as a counterfactual.

Each goal names a model output (matched by name, never by position alone) and is graded, so
the search can climb towards it: its *distance* is 0 exactly when the goal is met and grows
with how far the prediction is from meeting it. Hard level 0 of the score is minus the sum of
these distances.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Self

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from counterplan.planning._pydantic import a_scalar, reraise
from counterplan.planning.errors import GoalError, echo

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

_UNMET_FLOOR = 1e-12
"""Distance of an unmet class goal whose probabilities tie: unmet is never distance 0."""
GOAL_DISTANCE_KNEE = 1.0e11
"""Summed goal distances above this are scored on a logarithmic scale (:func:`scored_goal_distance`)."""
DEFAULT_MARGIN = 0.005
"""A class goal is met only this far past its threshold (confidence 0.7: at 0.705; no
confidence: the target class ahead of every other by 0.005), so an answer does not sit exactly
on the decision boundary, where the next model version or platform may tip it back."""


class _Goal(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    output: str | None = None
    """Name of the model output; may be omitted when the model has exactly one output."""

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            output = data.get("output")
            reraise(exc, f"goal[{output}]" if output else "goal", GoalError)


class ClassGoal(_Goal):
    """A classifier must predict ``target``, with at least ``confidence`` if given.

    ``margin`` keeps answers off the boundary: the target class must lead every other class by
    ``margin`` and reach ``confidence + margin`` (at most 1). 0 accepts an answer exactly at
    the threshold.
    """

    kind: Literal["class"] = "class"
    target: Annotated[str | int | float | bool, BeforeValidator(a_scalar)]
    confidence: Annotated[float, Field(gt=0.0, le=1.0)] | None = None
    margin: Annotated[float, Field(ge=0.0, le=0.5)] = DEFAULT_MARGIN


class ValueGoal(_Goal):
    """A numeric output must equal ``value`` within a relative ``tolerance``.

    The output ``p`` meets goal ``g`` when ``|p - g| / max(|p|, |g|) < tolerance``; when
    ``g == 0`` the rule is ``|p| < tolerance``. With tolerance 0 only equality meets it.
    """

    kind: Literal["value"] = "value"
    value: float
    tolerance: Annotated[float, Field(ge=0.0)] = 0.0

    @model_validator(mode="after")
    def _relative(self) -> Self:
        """A relative tolerance of 1 or more meets every output of the value's sign: an absolute
        one was meant (``value:60000~100`` read as 10,000% said "already meets the goal")."""
        if self.value != 0.0 and self.tolerance >= 1.0:
            raise GoalError(
                "tolerance",
                f"is relative (0.05: within 5% of the value) and below 1, given {self.tolerance!r}; "
                f"for a band in the output's own units give a range goal",
            )
        return self


class RangeGoal(_Goal):
    """A numeric output must land in the inclusive interval ``[low, high]``; one end may be
    open (``high=inf``: at least ``low``; ``low=-inf``: at most ``high``)."""

    kind: Literal["range"] = "range"
    low: Annotated[float, Field(allow_inf_nan=True)]
    high: Annotated[float, Field(allow_inf_nan=True)]

    @model_validator(mode="after")
    def _check(self) -> Self:
        if math.isnan(self.low) or math.isnan(self.high):
            raise GoalError("low" if math.isnan(self.low) else "high", "must be a number, not NaN")
        if self.low == math.inf or self.high == -math.inf or (math.isinf(self.low) and math.isinf(self.high)):
            raise GoalError("low", f"a range needs a finite end: given {self.low!r}..{self.high!r}")
        if self.low > self.high:
            raise GoalError("low", f"inverted range: low {self.low!r} is greater than high {self.high!r}")
        return self


Goal = Annotated[ClassGoal | ValueGoal | RangeGoal, Field(discriminator="kind")]
_GOAL_ADAPTER: TypeAdapter[ClassGoal | ValueGoal | RangeGoal] = TypeAdapter(Goal)


def parse_goal(data: Any) -> ClassGoal | ValueGoal | RangeGoal:
    """Build a goal from plain data (a dict with a ``kind``), raising ``GoalError``."""
    try:
        return _GOAL_ADAPTER.validate_python(data)
    except ValidationError as exc:
        owner = f"goal({data.get('output') or ''})" if isinstance(data, dict) else "goal"
        reraise(exc, owner, GoalError)


@dataclass(frozen=True)
class OutputSpec:
    """One output of a model: a classifier's class probabilities, or a number."""

    name: str
    classes: tuple[Any, ...] | None = None

    @property
    def is_classification(self) -> bool:
        """True for a class-probability output."""
        return self.classes is not None


@dataclass(frozen=True)
class BoundGoal:
    """A goal matched to one model output, ready to grade prediction columns."""

    goal: ClassGoal | ValueGoal | RangeGoal
    output: OutputSpec
    class_index: int = -1

    def describe(self) -> str:
        """The goal in words, as every output states it: ``approved = 1 with p >= 0.705`` (the
        probability the margin asks for), ``income = 50000 within 0.01 (relative)``,
        ``score in [600, 700]``, ``risk <= 0.2``."""
        goal, name = self.goal, self.output.name
        if isinstance(goal, ClassGoal):
            if goal.confidence is not None:
                return f"{name} = {goal.target} with p >= {_number(_needed(goal.confidence, goal.margin))}"
            if len(self.output.classes or ()) == 2:  # ahead of the one other class by the margin
                return f"{name} = {goal.target} with p >= {_number(min(round((1.0 + goal.margin) / 2.0, 12), 1.0))}"
            return f"{name} = {goal.target}, ahead of every other class by {_number(goal.margin)}"
        if isinstance(goal, ValueGoal):
            within = f" within {_number(goal.tolerance)} (relative)" if goal.tolerance else " exactly"
            return f"{name} = {_number(goal.value)}{within}"
        if math.isinf(goal.low):
            return f"{name} <= {_number(goal.high)}"
        if math.isinf(goal.high):
            return f"{name} >= {_number(goal.low)}"
        return f"{name} in [{_number(goal.low)}, {_number(goal.high)}]"

    def distance(self, prediction: FloatArray) -> FloatArray:
        """Distance of each prediction from the goal; 0 exactly where the goal is met.

        ``prediction`` is ``(n, n_classes)`` probabilities for a class goal, ``(n,)`` values
        otherwise. Non-finite predictions are the caller's to handle.
        """
        goal = self.goal
        if isinstance(goal, ClassGoal):
            return _class_distance(prediction, self.class_index, goal.confidence, goal.margin)
        if isinstance(goal, ValueGoal):
            return _value_distance(prediction, goal.value, goal.tolerance)
        below = np.maximum(goal.low - prediction, 0.0)
        above = np.maximum(prediction - goal.high, 0.0)
        return below + above

    def below_confidence(self, prediction: FloatArray) -> BoolArray:
        """Where a class goal's target probability is below its confidence threshold."""
        goal = self.goal
        if isinstance(goal, ClassGoal) and goal.confidence is not None:
            return np.asarray(prediction[:, self.class_index] < _needed(goal.confidence, goal.margin))
        return np.zeros(prediction.shape[0], dtype=bool)

    def met(self, prediction: FloatArray) -> BoolArray:
        """Where the goal is met."""
        return np.asarray(self.distance(prediction) == 0.0, dtype=bool)


def bind_goals(
    goals: list[ClassGoal | ValueGoal | RangeGoal] | tuple[ClassGoal | ValueGoal | RangeGoal, ...],
    outputs: tuple[OutputSpec, ...],
) -> tuple[BoundGoal, ...]:
    """Match goals to model outputs by name and check each goal fits its output's kind."""
    if not goals:
        raise GoalError("goals", "give at least one goal")
    by_name = {spec.name: spec for spec in outputs}
    bound: list[BoundGoal] = []
    used: set[str] = set()
    for i, goal in enumerate(goals):
        field = f"goals[{i}]"
        if goal.output is None:
            # the model's only output, or its only output of the goal's kind (a scorecard has a
            # class output and a score output: a class goal means the class)
            kind = [o for o in outputs if o.is_classification == isinstance(goal, ClassGoal)]
            if len(outputs) != 1 and len(kind) != 1:
                raise GoalError(
                    f"{field}.output",
                    f"the model has {len(outputs)} outputs {list(by_name)}; name one",
                )
            spec = outputs[0] if len(outputs) == 1 else kind[0]
        elif goal.output in by_name:
            spec = by_name[goal.output]
        else:
            raise GoalError(f"{field}.output", f"unknown output {goal.output!r}; the model has {list(by_name)}")
        if spec.name in used:
            raise GoalError(f"{field}.output", f"output {spec.name!r} has two goals")
        used.add(spec.name)
        if isinstance(goal, ClassGoal):
            if spec.classes is None:
                raise GoalError(f"{field}.target", f"output {spec.name!r} is numeric, not a class")
            index = _class_index(spec, goal.target, f"{field}.target")
            label = _plain(spec.classes[index])  # the model's own label: "1" and 1 ask the same class
            bound.append(BoundGoal(goal.model_copy(update={"target": label}), spec, index))
        else:
            if spec.classes is not None:
                raise GoalError(
                    f"{field}.kind",
                    f"output {spec.name!r} is a classifier's; use a class goal",
                )
            bound.append(BoundGoal(goal, spec))
    return tuple(bound)


def _plain(label: Any) -> str | int | float | bool:
    """A class label as a goal holds it: numpy's scalars as Python's."""
    value = label.item() if hasattr(label, "item") else label
    return value if isinstance(value, str | int | float | bool) else str(value)


def _class_index(spec: OutputSpec, target: Any, field: str) -> int:
    assert spec.classes is not None
    for i, label in enumerate(spec.classes):
        if _is_bool(label) == _is_bool(target) and label == target:
            return i
    matches = [i for i, label in enumerate(spec.classes) if str(label) == str(target)]
    if len(matches) == 1:
        return matches[0]
    number = as_number(target)  # "1" (a command line, a gRPC label) names the class 1.0
    if number is not None:
        matches = [i for i, label in enumerate(spec.classes) if not _is_bool(label) and as_number(label) == number]
        if len(matches) == 1:
            return matches[0]
    raise GoalError(field, f"class {echo(target)} is not one of {list(spec.classes)}")


def as_number(value: Any) -> float | None:
    """A class label as a number (``"1"``, ``1``, ``1.0``: 1.0), or None (text, booleans)."""
    if _is_bool(value):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if np.isfinite(number) else None


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool | np.bool_)


def _class_distance(proba: FloatArray, index: int, confidence: float | None, margin: float) -> FloatArray:
    target = proba[:, index]
    n_classes = proba.shape[1]
    lead = None
    if n_classes == 2 and index in (0, 1):  # the one other class (a binary model: most solves)
        best_other = proba[:, 1 - index]
        lead = target - best_other
        # Predicted, as below, without argmax: class 0 is argmax's first maximum when its lead is
        # not negative, class 1 when its lead is positive (a tie is class 0's); a lead of at
        # least the margin says so already unless the margin is 0. A NaN lead is never predicted.
        predicted = lead >= margin
        if index == 0 and margin < 0.0:
            predicted &= lead >= 0.0
        elif index == 1 and margin <= 0.0:
            predicted &= lead > 0.0
    elif n_classes > 1:
        best_other = proba[:, [k for k in range(n_classes) if k != index % n_classes]].max(axis=1)
    else:
        best_other = np.zeros_like(target)
    if lead is None:
        # Predicted means: strictly above every other class, or tied only with later classes
        # (the first maximum wins, as numpy's and scikit-learn's argmax do); then ahead by the margin.
        predicted = (np.argmax(proba, axis=1) == index) & (target - best_other >= margin)
    shortfall = np.where(predicted, 0.0, np.maximum(best_other + margin - target, _UNMET_FLOOR))
    if confidence is not None:
        shortfall = np.maximum(shortfall, np.maximum(_needed(confidence, margin) - target, 0.0))
    return shortfall


def scored_goal_distance(total: FloatArray) -> FloatArray:
    """Hard level 0's magnitude for summed goal distances ``total``: the distance itself up to
    :data:`GOAL_DISTANCE_KNEE`, logarithmic above it (``knee * (1 + ln(total / knee))``).

    Why: hard level 0 must stay finite and above a failed prediction's (-1e15) for every real
    distance, and a plain cap (it was 1e14) made every candidate of a model whose outputs are
    1e21 from the goal score the same, so the search had no direction and stopped at the
    original. The logarithm keeps every distance ordered (strictly increasing and continuous at
    the knee), keeps relative improvements visible at any size, and tops out below 7e13 even for
    an infinite sum. NaN stays NaN, for the caller's failure handling.
    """
    total = np.asarray(total, dtype=np.float64)
    far = total > GOAL_DISTANCE_KNEE
    if not far.any():
        return total
    scored = total.copy()
    top = np.minimum(total[far], np.finfo(np.float64).max)
    scored[far] = GOAL_DISTANCE_KNEE * (1.0 + np.log(top / GOAL_DISTANCE_KNEE))
    return scored


def describe_goals(goals: Sequence[BoundGoal]) -> str:
    """Every goal in words, ``; ``-separated (one per output)."""
    return "; ".join(bound.describe() for bound in goals)


def _number(value: float) -> str:
    """A goal's number as a reader writes it: whole numbers without a point, others to 6 digits."""
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.6g}"


def _needed(confidence: float, margin: float) -> float:
    """The probability a class goal needs: its confidence plus the margin (0.8 + 0.05 is 0.85), at most 1."""
    return min(round(confidence + margin, 12), 1.0)


def _value_distance(p: FloatArray, g: float, tolerance: float) -> FloatArray:
    gap = np.abs(p - g)
    if g == 0.0:
        return np.where(np.abs(p) < tolerance, 0.0, gap)
    scale = np.maximum(np.abs(p), abs(g))
    return np.where(gap / scale < tolerance, 0.0, gap)
