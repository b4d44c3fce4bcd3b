"""Actions a person can take, what they change and what they cost: the domain of action plans.

After "Consequence-aware Sequential Counterfactual Generation" (Naumann and Ntoutsi). An
:class:`Action` changes one feature, by adding a delta within bounds (``kind="add"``) or by
setting a value from a list (``kind="set"``); it may change other features as consequences
(getting a degree takes years: ``age += 2 * delta``), costs an effort ``b(x_before, x_after) >=
0``, and may have a pre-condition on the state before it and a post-condition on the state after
it. A :class:`CostGraph` of edges ``k -> h`` with discounts ``tau(x)`` in [0, 1] makes changing
``h`` cheaper or dearer given the current value of ``k``: an action's cost is

    c = b(x_{t-1}, x_t) * g(x_{t-1}),  g = mean over the changed features with incoming edges
                                           of the mean of their edges' tau (1 when none).

Formulas are plain callables ``f(env) -> array`` where ``env`` maps names to arrays (one value per
state): the features (the state before the action; after it, for a post-condition), ``before.x``
and ``after.x`` explicitly, and ``delta`` and ``value`` (the action's change and its new value).
Declared as data (:class:`ActionSet`, from YAML), they are formulas of the safe expression
language (:mod:`counterplan.planning.expressions`), never ``eval``. Everything runs on whole matrices of
states: one call applies an action to every plan that takes it at a step.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Annotated, Any, Literal, Protocol, TypeVar

import numpy as np
import numpy.typing as npt
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    ValidationError,
    field_validator,
)

from counterplan.planning._pydantic import describe, excerpt
from counterplan.planning.errors import InvalidInputError, one_line, unshown
from counterplan.planning.expressions import MAX_LENGTH, Expression, ExpressionError, Vocabulary
from counterplan.planning.features import Bound, FloatFeature, IntegerFeature, a_number, within_magnitude
from counterplan.planning.space import AnyFeature, FeatureSpace, FloatMatrix

Formula = Callable[[Mapping[str, Any]], Any]
BoolArray = npt.NDArray[np.bool_]
MAX_ACTIONS = 32
MAX_VALUES = 1000
MAX_EDGES = 256
MESSAGE_CHARS = 600
"""An error with many bad fields is one line of at most this many characters (the command line);
each field stays whole in ``violations``."""
Violation = tuple[str, str]
_T = TypeVar("_T")


class ActionError(InvalidInputError):
    """An action or the cost graph is invalid for the problem.

    ``violations`` holds every bad field as ``(field, problem)``: the actions are checked whole,
    so a user fixes a file in one round. With several, ``field`` joins the fields with ``", "``
    and ``problem`` says ``field: problem`` for each, joined with ``"; "`` (:meth:`every`).
    """

    def __init__(self, field: str, problem: str, violations: Sequence[Violation] = ()) -> None:
        super().__init__("actions", field, problem)
        self.violations: list[Violation] = list(violations) or [(field, problem)]

    @classmethod
    def every(cls, violations: Sequence[Violation]) -> ActionError:
        """One error for all of ``violations`` (at least one)."""
        if len(violations) == 1:
            return cls(*violations[0])
        fields = ", ".join(field for field, _ in violations)
        return cls(fields, "; ".join(f"{field}: {problem}" for field, problem in violations), violations)

    def __str__(self) -> str:
        """One line, bounded: 288 bad fields must not print 288 lines or 30 kB."""
        if len(self.violations) == 1:
            return one_line(super().__str__(), MESSAGE_CHARS)
        return one_line(f"actions: {len(self.violations)} bad fields: {self.problem}", MESSAGE_CHARS)


def _attempt(errors: list[Violation], make: Callable[[], _T]) -> _T | None:
    """``make()``, or None with its :class:`ActionError`'s violations added to ``errors``."""
    try:
        return make()
    except ActionError as exc:
        errors.extend(exc.violations)
        return None


@dataclass(frozen=True)
class Action:
    """One action, ready to apply to matrices of states (see the module docstring).

    ``low``/``high`` bound an ``add`` action's delta; ``values`` are a ``set`` action's choices in
    the feature's own terms (categories as text). ``consequences`` map other features to formulas
    of their new value. ``effort`` defaults to ``|delta|`` (``add``) or 1 (``set``).
    """

    name: str
    feature: str
    kind: Literal["add", "set"]
    low: float = 0.0
    high: float = 0.0
    values: tuple[Any, ...] = ()
    consequences: Mapping[str, Formula] = field(default_factory=dict)
    effort: Formula | None = None
    pre: Formula | None = None
    post: Formula | None = None

    def choices(self, space: FeatureSpace) -> FloatMatrix:
        """A ``set`` action's values encoded."""
        feature = space[self.feature]
        return np.array([feature.encode(v) for v in self.values], dtype=np.float64)

    def value_of(self, key: FloatMatrix, space: FeatureSpace) -> FloatMatrix:
        """The delta (``add``) or the encoded value (``set``) a random key in [0, 1] stands for:
        interpolated into ``[low, high]``, or an index into the values. A feature on a grid (a
        whole number, a float with a precision) takes the grid's deltas within the bounds: ``low:
        0.5, high: 3.5`` on a whole number adds 1 to 3, never 4 (rounding the interpolated delta
        added 4, and 0: a change beyond the action's bounds, or none)."""
        if self.kind == "add":
            column = space.index[self.feature]
            if not space.grid.gridded[column]:
                return self.low + key * (self.high - self.low)
            low, high = space.grid.ends(self.low, self.high, column)  # the grid's deltas within the bounds
            return space.grid.round(low + key * (high - low), column) + 0.0
        choices = self.choices(space)
        return choices[np.minimum((key * choices.size).astype(np.intp), choices.size - 1)]


@dataclass(frozen=True)
class CostGraph:
    """Edges ``source -> target`` with a discount ``tau(state)`` in [0, 1] each."""

    edges: tuple[tuple[str, str, Formula], ...] = ()

    def discount(self, before: Mapping[str, Any], changed: Mapping[str, BoolArray], n: int) -> FloatMatrix:
        """g per state: the mean, over the changed features with incoming edges, of the mean of
        their edges' tau at the state before (clipped to [0, 1]); 1 where none changed. A tau that
        is not a finite number gives NaN: that step has no price, and its plan is infeasible
        (:func:`apply`), rather than a guess at a discount. Only the edges into a feature some
        state changed are evaluated."""
        incoming: dict[str, list[FloatMatrix]] = {}
        for _source, target, tau in self.edges:  # the formula reads the source itself
            hit = changed.get(target)
            if hit is None or not hit.any():
                continue
            value = np.asarray(tau(before), dtype=np.float64)
            value = np.broadcast_to(value, (n,))
            incoming.setdefault(target, []).append(np.where(np.isfinite(value), np.clip(value, 0.0, 1.0), np.nan))
        total = np.zeros(n)
        count = np.zeros(n)
        for target, taus in incoming.items():
            hit = changed[target]
            mean = sum(taus[1:], taus[0]) / len(taus)
            total += np.where(hit, mean, 0.0)
            count += hit
        return np.where(count > 0, total / np.maximum(count, 1), 1.0)


class StateColumns(Mapping[str, FloatMatrix]):
    """Names to columns of ``states``, read on demand: ``x`` (or ``before.x`` with
    ``prefix="before."``). A formula reads a few names; building every column for every action
    and step would cost more than the formulas themselves."""

    def __init__(self, space: FeatureSpace, states: FloatMatrix, prefix: str = "") -> None:
        self._space = space
        self._index = space.index
        self._names = space.names
        self._states = states
        self._prefix = prefix

    def __getitem__(self, key: str) -> FloatMatrix:
        if not key.startswith(self._prefix) or key[len(self._prefix) :] not in self._index:
            raise KeyError(key)
        column = self._index[key[len(self._prefix) :]]
        return self._space.gaps_as_nan(self._states[:, column], column)  # a gap reads as NaN

    def __iter__(self) -> Iterator[str]:
        return (f"{self._prefix}{name}" for name in self._names)

    def __len__(self) -> int:
        return len(self._names)


class Layers(Mapping[str, Any]):
    """Several mappings read as one, the first that has a name winning (a read-only ChainMap)."""

    def __init__(self, *maps: Mapping[str, Any]) -> None:
        self.maps = list(maps)

    def __getitem__(self, key: str) -> Any:
        for layer in self.maps:
            if key in layer:
                return layer[key]
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys(name for layer in self.maps for name in layer))

    def __len__(self) -> int:
        return sum(1 for _ in self)


@dataclass(frozen=True)
class StepResult:
    """One action applied to many states."""

    after: FloatMatrix
    cost: FloatMatrix
    ok: BoolArray
    """The action kept its conditions, stayed in the domains, changed something and has a price."""
    priced: BoolArray
    """The step's cost is a finite number (its effort is one, at least 0, and every tau it reads
    is finite), or it cannot run for another reason (a condition, the domain, no change: its
    plan is refused for that, not for a price). A step without a price is not ``ok`` either: an
    infinite or NaN cost never ranks a plan, and a negative effort (``delta / 5000`` on a delta
    that is negative) is no free step."""


def apply(
    action: Action, graph: CostGraph, space: FeatureSpace, states: FloatMatrix, values: FloatMatrix
) -> StepResult:
    """Apply ``action`` with ``values`` (deltas or encoded values, one per state) to ``states``.

    A state where the action breaks its pre- or post-condition, leaves the domain, or changes
    nothing is not ``ok``; its ``after`` is then the state unchanged (the caller counts it).
    """
    n = states.shape[0]
    column = space.index[action.feature]
    before = StateColumns(space, states)
    marked = StateColumns(space, states, "before.")
    after_states = states.copy()
    start = before[action.feature]  # a gap is NaN: nothing to add to (a set fills it)
    own = _on_grid(space, start + values if action.kind == "add" else values, column)
    own_inside = ((own >= space.domain_lower[column]) & (own <= space.domain_upper[column])) | (
        own == states[:, column]
    )
    if column in space.allowed:  # the nearest allowed value, before the formulas read the change (any
        # in the domain: monotone holds at the end); an add's within its bounds, or none (NaN)
        if action.kind == "add":
            own = space.nearest_allowed_between(own, column, start + action.low, start + action.high)
            own_inside &= ~np.isnan(own)
        else:
            own = space.nearest_allowed(own, column, domain=True)
    after_states[:, column] = own
    extras = {"delta": own - start, "value": own}
    """The change as the state holds it (on the feature's grid, on an allowed value): what the
    consequences read and the effort prices."""
    scope = Layers(extras, before, marked)
    """What the pre-condition, the consequences and the effort read: the state before."""
    for name, formula in action.consequences.items():
        j = space.index[name]
        value = np.broadcast_to(np.asarray(formula(scope), dtype=np.float64), (n,))
        after_states[:, j] = _on_grid(space, value, j)
    # the domain is checked on the values the formulas gave (on their grids): snapping them would
    # clip a consequence that leaves the domain into it, a step the plan then reports as it never was
    inside = ((after_states >= space.domain_lower) & (after_states <= space.domain_upper)) | (after_states == states)
    inside[:, column] = own_inside  # the action's own value, checked before it was put onto an allowed one
    after_states = space.onto_allowed(after_states, domain=True) if space.allowed else after_states
    later = StateColumns(space, after_states, "after.")
    scope.maps.append(later)
    ok = np.ones(n, dtype=bool)
    if action.pre is not None:
        ok &= _truth(action.pre(scope), n)
    if action.post is not None:
        ok &= _truth(action.post(Layers(extras, StateColumns(space, after_states), marked, later)), n)
    ok &= inside.all(axis=1)
    changed_columns = after_states != states
    ok &= changed_columns.any(axis=1)
    effort_formula = action.effort
    if effort_formula is None:
        effort = np.abs(scope["delta"]) if action.kind == "add" else np.ones(n)
    else:
        effort = np.broadcast_to(np.asarray(effort_formula(scope), dtype=np.float64), (n,))
    with np.errstate(invalid="ignore"):  # a negative effort is no price, as NaN is: it was made 0, a free step
        effort = np.where(np.isfinite(effort) & (effort >= 0.0), effort + 0.0, np.nan)
    changed = {space.names[j]: changed_columns[:, j] for j in np.flatnonzero(changed_columns.any(axis=0))}
    cost = effort * graph.discount(before, changed, n)
    priced = np.isfinite(cost) | ~ok  # a step that cannot run anyway (an add on a gap) is refused for that
    ok &= priced
    return StepResult(after=np.where(ok[:, None], after_states, states), cost=cost, ok=ok, priced=priced)


def _on_grid(space: FeatureSpace, values: FloatMatrix, column: int) -> FloatMatrix:
    """``values`` of ``column`` rounded onto its grid (a whole number, a float's precision), and
    never clipped: a value outside the domain stays outside, for :func:`apply` to refuse (the
    space's ``snap`` clips into the search bounds). A value equal to the original (a missing
    code) is kept, as ``snap`` keeps it. A float with allowed values is left to them (the nearest
    is taken next): a list of values wins over decimals, and 1.25 allowed beside 1.21 on a
    feature of one decimal was rounded to 1.2 first and held as 1.21. A consequence far past any
    domain (``1e308`` on a float of two decimals) overflows the grid's scaling to infinity, still
    outside, without numpy's overflow warning on stderr."""
    if not space.rounded[column]:
        return values
    with np.errstate(over="ignore"):
        rounded = space.grid.round(values, column) + 0.0
    return np.where(values == space.original[column], values, rounded)


def _truth(value: Any, n: int) -> BoolArray:
    array = np.broadcast_to(np.asarray(value, dtype=np.float64), (n,))
    return np.asarray((array != 0.0) & ~np.isnan(array), dtype=bool)


# --------------------------------------------------------------------------------------------
# actions declared as data


class _Data(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


def _number_as_text(value: Any) -> Any:
    """A formula may be a bare number (``effort: 5``): it is the formula ``5``. A long text is
    refused here, by its length in characters (pydantic's own ``max_length`` would say "items")."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise ValueError(f"a number as a formula must be finite, given {value}")
        return repr(value)
    if isinstance(value, str) and len(value) > MAX_LENGTH:
        raise ValueError(f"a formula has at most {MAX_LENGTH} characters, given {len(value):,}")
    return value


def _set_value(value: Any) -> str | float | bool:
    """A ``set`` action's value: a text, a boolean or a finite number within +-2^53, checked in one
    step so that a bad one gets one message (a union would give one per member)."""
    if isinstance(value, str | bool):
        return value
    if isinstance(value, int | float):
        number = float(value)
        if not math.isfinite(number):
            raise ValueError(f"a value must be a text or a finite number, given {excerpt(value)}")
        return within_magnitude(number)
    raise ValueError(f"a value must be a text, a boolean or a number, given {excerpt(value)}")


FormulaText = Annotated[str, BeforeValidator(_number_as_text)]
"""A formula of the expression language (a number is one too), at most 500 characters."""
SetValue = Annotated[str | float | bool, PlainValidator(_set_value)]


def _shown_name(name: str) -> str:
    """An action's name shows as it is in the plans' table and text: no control or invisible
    format character (a newline split the front's table)."""
    character = unshown(name)
    if character is not None:
        raise ValueError(f"a name is text that shows as it is; it holds {character}")
    return name


class ActionSpec(_Data):
    """An action as data; formulas in the safe expression language (:mod:`counterplan.planning.expressions`)."""

    name: Annotated[str, Field(min_length=1, max_length=100), AfterValidator(_shown_name)]
    feature: Annotated[str, Field(min_length=1, max_length=200)]
    kind: Literal["add", "set"] = "add"
    low: Bound | None = None
    """``add``: the smallest delta (within +-2^53)."""
    high: Bound | None = None
    """``add``: the largest delta (within +-2^53)."""
    values: Annotated[tuple[SetValue, ...], Field(max_length=MAX_VALUES)] | None = None
    """``set``: the values to choose from, in the feature's own terms."""
    consequences: Annotated[dict[str, FormulaText], Field(max_length=64)] = Field(default_factory=dict)
    effort: FormulaText | None = None
    pre: FormulaText | None = None
    post: FormulaText | None = None


class EdgeSpec(_Data):
    """An edge of the cost graph: ``tau`` discounts changing ``target`` given ``source``."""

    source: Annotated[str, Field(min_length=1, max_length=200)]
    target: Annotated[str, Field(min_length=1, max_length=200)]
    tau: FormulaText


class ActionSet(_Data):
    """Actions and the cost graph, as data (YAML or JSON)."""

    actions: Annotated[tuple[ActionSpec, ...], Field(max_length=MAX_ACTIONS)]
    graph: Annotated[tuple[EdgeSpec, ...], Field(max_length=MAX_EDGES)] = ()

    @field_validator("actions")
    @classmethod
    def _some(cls, actions: tuple[ActionSpec, ...]) -> tuple[ActionSpec, ...]:
        """At least one action. Checked after the items (``min_length`` would also report a list
        whose items failed as empty: a spurious error beside the real ones)."""
        if not actions:
            raise ValueError("give at least one action")
        return actions

    @classmethod
    def from_data(cls, data: Any) -> ActionSet:
        """Validate plain data (a YAML file read within the configuration reader's limits, see
        ``counterplan.planning.safe_yaml``), raising :class:`ActionError` naming every bad field."""
        if not isinstance(data, Mapping):
            raise ActionError("actions", "expected a mapping with 'actions' (and optionally 'graph')")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ActionError.every([_indexed(field, problem) for field, problem in describe(exc)]) from None

    def compile(self, space: FeatureSpace) -> tuple[list[Action], CostGraph]:
        """The runtime actions and graph for ``space``, every name and formula checked; every bad
        field of every action and edge is reported at once (one :class:`ActionError`)."""
        categories = _categories(space)
        booleans = frozenset(f.name for f in space.features if f.kind == "boolean")
        vocabulary = Vocabulary(space.names, categories, ("delta", "value"), booleans)
        plain = Vocabulary(space.names, categories, booleans=booleans, states=())  # a tau reads the state before
        errors: list[Violation] = []
        errors += _duplicate_names(self.actions)
        actions = [
            _compile_action(spec, space, vocabulary, f"actions[{i}]", errors) for i, spec in enumerate(self.actions)
        ]
        edges = [_compile_edge(edge, space, plain, f"graph[{i}]", errors) for i, edge in enumerate(self.graph)]
        if errors:
            raise ActionError.every(errors)
        return [a for a in actions if a is not None], CostGraph(tuple(e for e in edges if e is not None))


_INDEX = re.compile(r"(?<=[A-Za-z_\]])\.(\d+)(?=[.:,]|$)")


def _indexed(field: str, problem: str) -> Violation:
    """pydantic's ``actions.0.low`` as ``actions[0].low``, the way every other error names it."""
    return _INDEX.sub(r"[\1]", field), _INDEX.sub(r"[\1]", problem)


def _duplicate_names(specs: Sequence[ActionSpec]) -> list[Violation]:
    seen: set[str] = set()
    out = []
    for i, spec in enumerate(specs):
        if spec.name in seen:
            out.append((f"actions[{i}].name", f"two actions are named {spec.name[:100]!r}"))
        seen.add(spec.name)
    return out


def _compile_edge(
    edge: EdgeSpec, space: FeatureSpace, vocabulary: Vocabulary, where: str, errors: list[Violation]
) -> tuple[str, str, Formula] | None:
    before = len(errors)
    for end in ("source", "target"):
        _attempt(errors, partial(_known, space, getattr(edge, end), f"{where}.{end}"))
    tau = _attempt(errors, partial(_formula, edge.tau, vocabulary, f"{where}.tau"))
    return None if tau is None or len(errors) > before else (edge.source, edge.target, tau)


def _categories(space: FeatureSpace) -> dict[str, tuple[str, ...]]:
    out = {}
    for feature in space.features:
        categories = getattr(feature, "categories", None)
        if categories is not None:
            out[feature.name] = tuple(str(c) for c in categories)
        elif feature.kind == "boolean":
            out[feature.name] = ("False", "True")
    return out


def _known(space: FeatureSpace, name: str, where: str) -> None:
    if name not in space.index:
        shown = ", ".join(space.names[:10]) + (" ..." if len(space.names) > 10 else "")
        raise ActionError(where, f"no feature {name[:60]!r}; the features are {shown}")


def _formula(text: str | float, vocabulary: Vocabulary, where: str) -> Expression:
    try:
        return Expression.parse(text, vocabulary, where)
    except ExpressionError as exc:
        raise ActionError(exc.field, exc.problem) from None


def _compile_action(
    spec: ActionSpec, space: FeatureSpace, vocabulary: Vocabulary, where: str, errors: list[Violation]
) -> Action | None:
    """``spec`` for ``space``, or None with each of its bad fields added to ``errors``."""
    before = len(errors)
    feature = _attempt(errors, partial(_changeable, spec, space, where))
    low = high = 0.0
    values: tuple[Any, ...] = ()
    if feature is not None and spec.kind == "add":
        low, high = _attempt(errors, partial(_delta_bounds, spec, space, where)) or (0.0, 0.0)
    elif feature is not None:
        values = _attempt(errors, partial(_set_values, spec, feature, where)) or ()
    consequences = _consequences(spec, space, vocabulary, where, errors)
    formulas = {
        name: _attempt(errors, partial(_formula, text, vocabulary, f"{where}.{name}"))
        for name, text in (("effort", spec.effort), ("pre", spec.pre), ("post", spec.post))
        if text is not None
    }
    if len(errors) > before:
        return None
    return Action(
        name=spec.name,
        feature=spec.feature,
        kind=spec.kind,
        low=low,
        high=high,
        values=values,
        consequences=consequences,
        effort=formulas.get("effort"),
        pre=formulas.get("pre"),
        post=formulas.get("post"),
    )


def _changeable(spec: _Shape, space: FeatureSpace, where: str) -> AnyFeature:
    """The feature an action changes: known and mutable."""
    _known(space, spec.feature, f"{where}.feature")
    feature = space[spec.feature]
    if not feature.mutable:
        raise ActionError(f"{where}.feature", f"{spec.feature!r} is immutable: no action may change it")
    return feature


class _Shape(Protocol):
    """What the shape checks read of an action, declared as data or built in Python."""

    @property
    def feature(self) -> str: ...
    @property
    def low(self) -> float | None: ...
    @property
    def high(self) -> float | None: ...
    @property
    def values(self) -> tuple[Any, ...] | None: ...


def _delta_bounds(spec: _Shape, space: FeatureSpace, where: str) -> tuple[float, float]:
    """An 'add' action's bounds of the delta, on a number (``values`` are a 'set' action's: given
    here they were ignored without a word)."""
    if spec.values is not None:
        raise ActionError(f"{where}.values", "an 'add' action changes by low to high, not to values: use kind 'set'")
    if spec.low is None or spec.high is None:
        raise ActionError(f"{where}.low", "an 'add' action needs low and high (the delta's bounds)")
    if spec.low > spec.high:
        raise ActionError(f"{where}.low", f"low ({spec.low:g}) is above high ({spec.high:g})")
    column = space.index[spec.feature]
    if space.nominal[column]:
        raise ActionError(f"{where}.kind", f"{spec.feature!r} is categorical: use kind 'set' with values")
    if space.grid.gridded[column]:  # its deltas are the grid's (Action.value_of): one must fit
        low, high = space.grid.ends(spec.low, spec.high, column)
        if low > high:
            steps = "whole numbers" if space.integral[column] else f"multiples of {space.step[column]:g}"
            raise ActionError(
                f"{where}.low",
                f"no change of {spec.feature!r} ({steps}) lies between low ({spec.low:g}) and high ({spec.high:g})",
            )
    return spec.low, spec.high


def _set_values(spec: _Shape, feature: AnyFeature, where: str) -> tuple[Any, ...]:
    """A 'set' action's values, each one the feature can take (every bad one named): a value the
    step would not hold as listed (rounded onto the grid, moved onto an allowed value) is refused;
    so are ``low``/``high`` (an 'add' action's: given here they were ignored without a word)."""
    for bound in ("low", "high"):
        if getattr(spec, bound) is not None:
            raise ActionError(f"{where}.{bound}", "a 'set' action takes one of its values, not a change within bounds")
    if not spec.values:
        raise ActionError(f"{where}.values", "a 'set' action needs at least one value")
    errors: list[Violation] = []
    for k, value in enumerate(spec.values):
        try:
            code = feature.encode(value)
        except (InvalidInputError, ValueError, TypeError) as exc:
            problem = one_line(f"not a value of {spec.feature!r}: {exc}", 200)
            errors.append((f"{where}.values[{k}]", problem))
            continue
        held = _not_held(feature, value, code)
        if held is not None:
            errors.append((f"{where}.values[{k}]", held))
    if errors:
        raise ActionError.every(errors)
    return spec.values


def _not_held(feature: AnyFeature, value: Any, code: float) -> str | None:
    """Why a step setting ``value`` (encoded ``code``) would hold another value, or None: a float
    off its precision's grid is rounded (1.234 held as 1.23), and a number off the feature's
    allowed values is moved onto the nearest one (6 held as 16 with ``allowed: [16, 19]``, a
    categorical feature's domain is its allowed categories already), so the plan would show a
    value the action does not list."""
    if not isinstance(feature, IntegerFeature | FloatFeature) or not math.isfinite(code):
        return None
    allowed = feature.allowed
    if allowed is not None and code != feature.value and code not in allowed:
        shown = ", ".join(f"{v:.15g}" for v in allowed[:10]) + (" ..." if len(allowed) > 10 else "")
        return f"{code:.15g} is not one of {feature.name!r}'s allowed values ({shown})"
    precision = feature.precision if isinstance(feature, FloatFeature) else None
    if allowed is None and precision is not None and round(code, precision) != code:
        return f"{value!r} is not on {feature.name!r}'s grid (multiples of {feature.step:g}): give it rounded"
    return None


def _consequences(
    spec: ActionSpec, space: FeatureSpace, vocabulary: Vocabulary, where: str, errors: list[Violation]
) -> dict[str, Expression]:
    """An action's consequences compiled, each on a mutable feature (bad ones added to ``errors``).
    A consequence computes the state after the action, so it reads the state before alone."""
    vocabulary = replace(vocabulary, states=("before",))
    consequences = {}
    for name, text in spec.consequences.items():
        compiled = _attempt(errors, partial(_consequence, name, text, space, vocabulary, where))
        if compiled is not None:
            consequences[name] = compiled
    return consequences


def _consequence(name: str, text: str, space: FeatureSpace, vocabulary: Vocabulary, where: str) -> Expression:
    _settable(space, name, where)
    gives = name if name in vocabulary.categories and name not in vocabulary.booleans else None
    return _formula(text, replace(vocabulary, gives=gives), f"{where}.consequences.{name}")


def _settable(space: FeatureSpace, name: str, where: str) -> None:
    """A consequence's feature: known and mutable."""
    _known(space, name, f"{where}.consequences")
    if not space[name].mutable:
        raise ActionError(
            f"{where}.consequences.{name}",
            f"{name!r} is immutable: no consequence may change it (a feature that only rises, "
            "such as age, is mutable with a monotone rule)",
        )


@dataclass(frozen=True)
class _RuntimeShape:
    """A runtime :class:`Action`'s fields as the shape checks read them: an ``add`` has no
    values, a ``set`` no bounds (its defaults, 0, mean none)."""

    feature: str
    low: float | None
    high: float | None
    values: tuple[Any, ...] | None


def check_runtime(actions: Sequence[Any], graph: Any, space: FeatureSpace) -> None:
    """Actions and a graph built in Python (:class:`Action`, :class:`CostGraph`, formulas as
    callables) checked against ``space`` as :meth:`ActionSet.compile` checks data: every bad
    field at once, in one :class:`ActionError` (an unknown feature was a ``KeyError``, an empty
    list numpy's 'need at least one array', inverted or NaN bounds a search that found nothing)."""
    if not isinstance(actions, Sequence) or isinstance(actions, str):
        raise ActionError("actions", f"expected a list of Action, given {type(actions).__name__}")
    errors = _runtime_actions(actions, space) + _runtime_graph(graph, space)
    if errors:
        raise ActionError.every(errors)


def _runtime_actions(actions: Sequence[Any], space: FeatureSpace) -> list[Violation]:
    """The bad fields of a list of runtime actions: none at all, each action, their names (a
    file's sizes are no limit in Python: a caller's own objects hold no untrusted input)."""
    errors: list[Violation] = [] if actions else [("actions", "give at least one action")]
    for i, action in enumerate(actions):
        if isinstance(action, Action):
            errors += _runtime_action(action, space, f"actions[{i}]")
        else:
            errors.append((f"actions[{i}]", f"expected an Action, given {type(action).__name__}"))
    if all(isinstance(a, Action) and isinstance(a.name, str) for a in actions):
        errors += _duplicate_names(actions)
    return errors


def _runtime_graph(graph: Any, space: FeatureSpace) -> list[Violation]:
    """The bad fields of a runtime graph: each edge ``(source, target, tau)``."""
    if not isinstance(graph, CostGraph):
        return [("graph", f"expected a CostGraph, given {type(graph).__name__}")]
    errors: list[Violation] = []
    for k, edge in enumerate(graph.edges):
        if not isinstance(edge, tuple) or len(edge) != 3:
            errors.append((f"graph[{k}]", "an edge is (source, target, tau)"))
            continue
        for end, name in zip(("source", "target"), edge[:2], strict=True):
            _attempt(errors, partial(_runtime_known, space, name, f"graph[{k}].{end}"))
        if not callable(edge[2]):
            errors.append((f"graph[{k}].tau", "a formula is a callable f(env) -> array"))
    return errors


def _runtime_known(space: FeatureSpace, name: Any, where: str) -> None:
    """A feature named by a runtime action or edge: a text, one of the space's."""
    if not isinstance(name, str):
        raise ActionError(where, f"a feature's name is a text, given {excerpt(name)}")
    _known(space, name, where)


def _runtime_changeable(action: Action, space: FeatureSpace, where: str) -> AnyFeature:
    """The feature a runtime action changes: named by a text, known and mutable."""
    if not isinstance(action.feature, str):
        raise ActionError(f"{where}.feature", f"a feature's name is a text, given {excerpt(action.feature)}")
    return _changeable(action, space, where)


def _runtime_action(action: Action, space: FeatureSpace, where: str) -> list[Violation]:
    """One runtime action's bad fields: its name, feature, kind and what the kind takes, formulas."""
    errors: list[Violation] = []
    if not isinstance(action.name, str) or not 1 <= len(action.name) <= 100:
        errors.append((f"{where}.name", "a name is a text of 1 to 100 characters"))
    elif (character := unshown(action.name)) is not None:
        errors.append((f"{where}.name", f"a name is text that shows as it is; it holds {character}"))
    feature = _attempt(errors, partial(_runtime_changeable, action, space, where))
    if action.kind == "add":
        low = _runtime_bound(action.low, f"{where}.low", errors)
        high = _runtime_bound(action.high, f"{where}.high", errors)
        if feature is not None and low is not None and high is not None:
            shape = _RuntimeShape(action.feature, low, high, action.values or None)
            _attempt(errors, partial(_delta_bounds, shape, space, where))
    elif action.kind == "set":
        if feature is not None:  # bounds are an add's: 0, their default, is none given
            shape = _RuntimeShape(action.feature, action.low or None, action.high or None, action.values)
            _attempt(errors, partial(_set_values, shape, feature, where))
    else:
        errors.append((f"{where}.kind", f"'add' or 'set', given {excerpt(action.kind)}"))
    return errors + _runtime_formulas(action, space, where)


def _runtime_formulas(action: Action, space: FeatureSpace, where: str) -> list[Violation]:
    """A runtime action's consequences (each on a known, mutable feature) and formulas: callables."""
    errors: list[Violation] = []
    if not isinstance(action.consequences, Mapping):
        return [(f"{where}.consequences", "a mapping of feature names to formulas")]
    for name, formula in action.consequences.items():
        _attempt(errors, partial(_runtime_known, space, name, f"{where}.consequences"))
        if isinstance(name, str) and name in space.index:
            _attempt(errors, partial(_settable, space, name, where))
        if not callable(formula):
            errors.append((f"{where}.consequences.{name}", "a formula is a callable f(env) -> array"))
    for name in ("effort", "pre", "post"):
        if getattr(action, name) is not None and not callable(getattr(action, name)):
            errors.append((f"{where}.{name}", "a formula is a callable f(env) -> array, or None"))
    return errors


def _runtime_bound(value: Any, where: str, errors: list[Violation]) -> float | None:
    """An add's bound, as a file's is checked (:data:`Bound`): a finite number within +-2^53."""
    try:
        number = float(a_number(value))
        if not math.isfinite(number):
            raise ValueError(f"must be a finite number, given {excerpt(value)}")
        return within_magnitude(number)
    except ValueError as exc:
        errors.append((where, str(exc)))
        return None


def formula_size(formula: Formula | None) -> int:
    """The parts of ``formula`` (:attr:`Expression.size`); 1 for a plain callable, 0 for none."""
    if formula is None:
        return 0
    return formula.size if isinstance(formula, Expression) else 1


def pass_size(actions: Sequence[Action], graph: CostGraph) -> int:
    """The formula parts one state's pass through every action evaluates at most: each action's
    own (1, its effort, conditions and consequences) and the discounts of the edges into the
    features it changes. A plan is at most one pass (each action once), so a generation of the
    plan search costs about ``population * pass_size``: what a server weighs before it admits a
    search whose single generation could outlast every deadline (the model call aside)."""
    into: dict[str, int] = {}
    for _source, target, tau in graph.edges:
        into[target] = into.get(target, 0) + formula_size(tau)
    total = 0
    for action in actions:
        own = 1 + sum(formula_size(f) for f in (action.effort, action.pre, action.post))
        own += sum(formula_size(f) for f in action.consequences.values())
        own += sum(into.get(name, 0) for name in {action.feature, *action.consequences})
        total += own
    return total


def total_cost(
    actions: Sequence[Action],
    graph: CostGraph,
    space: FeatureSpace,
    start: FloatMatrix,
    steps: Sequence[tuple[int, float]],
) -> tuple[float, list[float]]:
    """Replay one plan (``(action index, delta or encoded value)`` per step) from ``start``:
    its total cost and each step's. A step that is not ``ok`` raises :class:`ActionError`."""
    state = start.reshape(1, -1).copy()
    costs = []
    for position, (index, value) in enumerate(steps):
        result = apply(actions[index], graph, space, state, np.array([value], dtype=np.float64))
        if not result.priced[0]:
            raise ActionError(
                f"steps[{position}]",
                f"action {actions[index].name!r} has no finite cost here "
                "(an effort that is negative, or an effort or tau that is infinite or NaN)",
            )
        if not result.ok[0]:
            raise ActionError(f"steps[{position}]", f"action {actions[index].name!r} cannot run here")
        costs.append(float(result.cost[0]))
        state = result.after
    return float(sum(costs)), costs
