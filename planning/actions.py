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

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from counterplan.planning._pydantic import reraise
from counterplan.planning.errors import InvalidInputError
from counterplan.planning.expressions import Expression, ExpressionError, Vocabulary
from counterplan.planning.space import AnyFeature, FeatureSpace, FloatMatrix

Formula = Callable[[Mapping[str, Any]], Any]
BoolArray = npt.NDArray[np.bool_]
MAX_ACTIONS = 32
MAX_VALUES = 1000
MAX_EDGES = 256


class ActionError(InvalidInputError):
    """An action or the cost graph is invalid for the problem."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__("actions", field, problem)


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
        interpolated into ``[low, high]`` (rounded for a whole-number feature), or an index into
        the values."""
        if self.kind == "add":
            delta = self.low + key * (self.high - self.low)
            return np.rint(delta) if space.integral[space.index[self.feature]] else delta
        choices = self.choices(space)
        return choices[np.minimum((key * choices.size).astype(np.intp), choices.size - 1)]


@dataclass(frozen=True)
class CostGraph:
    """Edges ``source -> target`` with a discount ``tau(state)`` in [0, 1] each."""

    edges: tuple[tuple[str, str, Formula], ...] = ()

    def discount(self, before: Mapping[str, Any], changed: Mapping[str, BoolArray], n: int) -> FloatMatrix:
        """g per state: the mean, over the changed features with incoming edges, of the mean of
        their edges' tau at the state before (clipped to [0, 1]; NaN counts as 1); 1 where none
        changed. Only the edges into a feature some state changed are evaluated."""
        incoming: dict[str, list[FloatMatrix]] = {}
        for _source, target, tau in self.edges:  # the formula reads the source itself
            hit = changed.get(target)
            if hit is None or not hit.any():
                continue
            value = np.asarray(tau(before), dtype=np.float64)
            incoming.setdefault(target, []).append(np.clip(np.where(np.isnan(value), 1.0, value), 0.0, 1.0))
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
        self._index = space.index
        self._names = space.names
        self._states = states
        self._prefix = prefix

    def __getitem__(self, key: str) -> FloatMatrix:
        if not key.startswith(self._prefix) or key[len(self._prefix) :] not in self._index:
            raise KeyError(key)
        return self._states[:, self._index[key[len(self._prefix) :]]]

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
    """The action kept its conditions, stayed in the domains and changed something."""


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
    if action.kind == "add":
        after_states[:, column] = states[:, column] + values
        extras = {"delta": values, "value": after_states[:, column].copy()}
    else:
        after_states[:, column] = values
        extras = {"delta": values - states[:, column], "value": values}
    scope = Layers(extras, before, marked)
    """What the pre-condition, the consequences and the effort read: the state before."""
    for name, formula in action.consequences.items():
        j = space.index[name]
        after_states[:, j] = np.broadcast_to(np.asarray(formula(scope), dtype=np.float64), (n,))
    after_states = space.snap(after_states.copy()) if space.checks_grid else after_states
    later = StateColumns(space, after_states, "after.")
    scope.maps.append(later)
    ok = np.ones(n, dtype=bool)
    if action.pre is not None:
        ok &= _truth(action.pre(scope), n)
    if action.post is not None:
        ok &= _truth(action.post(Layers(extras, StateColumns(space, after_states), marked, later)), n)
    inside = ((after_states >= space.domain_lower) & (after_states <= space.domain_upper)) | (after_states == states)
    ok &= inside.all(axis=1)
    changed_columns = after_states != states
    ok &= changed_columns.any(axis=1)
    effort_formula = action.effort
    if effort_formula is None:
        effort = np.abs(scope["delta"]) if action.kind == "add" else np.ones(n)
    else:
        effort = np.broadcast_to(np.asarray(effort_formula(scope), dtype=np.float64), (n,))
    effort = np.where(np.isfinite(effort), np.maximum(effort, 0.0), np.inf)
    changed = {space.names[j]: changed_columns[:, j] for j in np.flatnonzero(changed_columns.any(axis=0))}
    cost = effort * graph.discount(before, changed, n)
    return StepResult(after=np.where(ok[:, None], after_states, states), cost=cost, ok=ok)


def _truth(value: Any, n: int) -> BoolArray:
    array = np.broadcast_to(np.asarray(value, dtype=np.float64), (n,))
    return np.asarray((array != 0.0) & ~np.isnan(array), dtype=bool)


# --------------------------------------------------------------------------------------------
# actions declared as data


class _Data(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


def _number_as_text(value: Any) -> Any:
    """A formula may be a bare number (``effort: 5``): it is the formula ``5``."""
    return repr(value) if isinstance(value, int | float) else value


FormulaText = Annotated[str, BeforeValidator(_number_as_text), Field(max_length=500)]
"""A formula of the expression language (a number is one too), at most 500 characters."""


class ActionSpec(_Data):
    """An action as data; formulas in the safe expression language (:mod:`counterplan.planning.expressions`)."""

    name: Annotated[str, Field(min_length=1, max_length=100)]
    feature: Annotated[str, Field(min_length=1, max_length=200)]
    kind: Literal["add", "set"] = "add"
    low: float | None = None
    """``add``: the smallest delta."""
    high: float | None = None
    """``add``: the largest delta."""
    values: Annotated[tuple[str | float | bool, ...], Field(max_length=MAX_VALUES)] | None = None
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

    actions: Annotated[tuple[ActionSpec, ...], Field(min_length=1, max_length=MAX_ACTIONS)]
    graph: Annotated[tuple[EdgeSpec, ...], Field(max_length=MAX_EDGES)] = ()

    @classmethod
    def from_data(cls, data: Any) -> ActionSet:
        """Validate plain data (a YAML file read within the configuration reader's limits, see
        ``counterplan.planning.safe_yaml``), raising :class:`ActionError` naming the bad field."""
        if not isinstance(data, Mapping):
            raise ActionError("actions", "expected a mapping with 'actions' (and optionally 'graph')")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            reraise(exc, "", _indexed_error)

    def compile(self, space: FeatureSpace) -> tuple[list[Action], CostGraph]:
        """The runtime actions and graph for ``space``, every name and formula checked."""
        vocabulary = Vocabulary(space.names, _categories(space), ("delta", "value"))
        plain = Vocabulary(space.names, _categories(space))
        seen: set[str] = set()
        actions = []
        for i, spec in enumerate(self.actions):
            where = f"actions[{i}]"
            if spec.name in seen:
                raise ActionError(f"{where}.name", f"two actions are named {spec.name!r}")
            seen.add(spec.name)
            actions.append(_compile_action(spec, space, vocabulary, where))
        edges = []
        for i, edge in enumerate(self.graph):
            where = f"graph[{i}]"
            for end in ("source", "target"):
                _known(space, getattr(edge, end), f"{where}.{end}")
            edges.append((edge.source, edge.target, _formula(edge.tau, plain, f"{where}.tau")))
        return actions, CostGraph(tuple(edges))


_INDEX = re.compile(r"(?<=[A-Za-z_\]])\.(\d+)(?=[.:,]|$)")


def _indexed_error(field: str, problem: str) -> ActionError:
    """pydantic's ``actions.0.low`` as ``actions[0].low``, the way every other error names it."""
    return ActionError(_INDEX.sub(r"[\1]", field), _INDEX.sub(r"[\1]", problem))


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


def _compile_action(spec: ActionSpec, space: FeatureSpace, vocabulary: Vocabulary, where: str) -> Action:
    _known(space, spec.feature, f"{where}.feature")
    feature = space[spec.feature]
    if not feature.mutable:
        raise ActionError(f"{where}.feature", f"{spec.feature!r} is immutable: no action may change it")
    low = high = 0.0
    values: tuple[Any, ...] = ()
    if spec.kind == "add":
        low, high = _delta_bounds(spec, space, where)
    else:
        values = _set_values(spec, feature, where)
    return Action(
        name=spec.name,
        feature=spec.feature,
        kind=spec.kind,
        low=low,
        high=high,
        values=values,
        consequences=_consequences(spec, space, vocabulary, where),
        effort=None if spec.effort is None else _formula(spec.effort, vocabulary, f"{where}.effort"),
        pre=None if spec.pre is None else _formula(spec.pre, vocabulary, f"{where}.pre"),
        post=None if spec.post is None else _formula(spec.post, vocabulary, f"{where}.post"),
    )


def _delta_bounds(spec: ActionSpec, space: FeatureSpace, where: str) -> tuple[float, float]:
    """An 'add' action's bounds of the delta, on a number."""
    if spec.low is None or spec.high is None:
        raise ActionError(f"{where}.low", "an 'add' action needs low and high (the delta's bounds)")
    if spec.low > spec.high:
        raise ActionError(f"{where}.low", f"low ({spec.low:g}) is above high ({spec.high:g})")
    if space.nominal[space.index[spec.feature]]:
        raise ActionError(f"{where}.kind", f"{spec.feature!r} is categorical: use kind 'set' with values")
    return spec.low, spec.high


def _set_values(spec: ActionSpec, feature: AnyFeature, where: str) -> tuple[Any, ...]:
    """A 'set' action's values, each one the feature can take."""
    if not spec.values:
        raise ActionError(f"{where}.values", "a 'set' action needs at least one value")
    for k, value in enumerate(spec.values):
        try:
            feature.encode(value)
        except (InvalidInputError, ValueError, TypeError) as exc:
            raise ActionError(f"{where}.values[{k}]", f"not a value of {spec.feature!r}: {exc}") from None
    return spec.values


def _consequences(spec: ActionSpec, space: FeatureSpace, vocabulary: Vocabulary, where: str) -> dict[str, Expression]:
    """An action's consequences compiled, each on a mutable feature."""
    consequences = {}
    for name, text in spec.consequences.items():
        _known(space, name, f"{where}.consequences")
        if not space[name].mutable:
            raise ActionError(
                f"{where}.consequences.{name}",
                f"{name!r} is immutable: no consequence may change it (a feature that only rises, "
                "such as age, is mutable with a monotone rule)",
            )
        consequences[name] = _formula(text, vocabulary, f"{where}.consequences.{name}")
    return consequences


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
        if not result.ok[0]:
            raise ActionError(f"steps[{position}]", f"action {actions[index].name!r} cannot run here")
        costs.append(float(result.cost[0]))
        state = result.after
    return float(sum(costs)), costs
