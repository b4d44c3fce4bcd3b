"""A small, safe expression language for actions declared as data (consequences, efforts,
conditions, the cost graph's discounts).

An action file comes from outside, so its formulas are never ``eval``-ed. A formula is parsed
with Python's own parser (``ast.parse(..., mode="eval")``) and every node is checked against a
short whitelist before anything runs; the checked tree is then evaluated on whole numpy arrays,
one value per candidate state, so a generation of plans is scored without a Python call per
plan.

What a formula may hold:

* numbers, ``true``/``false`` (or ``True``/``False``), and strings, the latter only compared
  with a categorical feature (``occupation == "Armed-Forces"``; an unknown category is refused).
  A categorical feature is only compared with its categories' names (or the same feature,
  ``before.x == after.x``): ``education == 3`` and ``education + 1`` are refused, since its
  internal code is no number a user means (a boolean feature counts as 0/1, as before);
* names: the features of the problem (a name with characters a Python name cannot hold is
  written with ``_`` for each: ``capital-gain`` is ``capital_gain``) (the state the formula reads: before the action for
  pre-conditions, efforts' and discounts' inputs, after it for post-conditions), ``before.<f>``
  and ``after.<f>`` for either state explicitly, and ``delta`` / ``value`` where the caller
  provides them (an action's change and its new value);
* ``+ - * / % **``, unary ``-``/``+``, comparisons (chains too), ``and``/``or``/``not``,
  ``x if condition else y``;
* the functions ``abs``, ``min``, ``max`` (two or more arguments, element-wise), ``clip(x, lo,
  hi)``, ``exp``, ``log``, ``sqrt``, ``floor``, ``ceil``, ``round``.

Anything else (attributes other than ``before.``/``after.``, subscripts, lambdas, calls of other
names, comprehensions, keyword arguments) is refused with :class:`ExpressionError` naming the
field and the construct. A formula is at most :data:`MAX_LENGTH` characters and
:data:`MAX_NODES` nodes. Arithmetic that fails (a division by zero, a log of a negative) gives
NaN or infinity, never an exception; a condition that is NaN is false.
"""

from __future__ import annotations

import ast
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from counterplan.planning.errors import InvalidInputError

_PARSING = threading.Lock()
"""One ``ast.parse`` at a time in the process: CPython 3.11 keeps the AST constructor's
recursion counter in state all threads share, so two threads parsing long formulas at once can
fail with ``SystemError: AST constructor recursion depth mismatch`` (cpython gh-106905; seen
in the soak: a heavy plan answered UNKNOWN). Parsing a formula of at most 500 characters takes
microseconds, so the lock costs nothing measurable."""

FloatArray = npt.NDArray[np.float64]
MAX_LENGTH = 500
MAX_NODES = 200
STATES = ("before", "after")

_FUNCTIONS: dict[str, tuple[int, int, Callable[..., Any]]] = {
    "abs": (1, 1, np.abs),
    "exp": (1, 1, np.exp),
    "log": (1, 1, np.log),
    "sqrt": (1, 1, np.sqrt),
    "floor": (1, 1, np.floor),
    "ceil": (1, 1, np.ceil),
    "round": (1, 1, np.rint),
    "clip": (3, 3, lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi)),
    "min": (2, 16, lambda *xs: _fold(np.minimum, xs)),
    "max": (2, 16, lambda *xs: _fold(np.maximum, xs)),
}
_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: np.add,
    ast.Sub: np.subtract,
    ast.Mult: np.multiply,
    ast.Div: np.divide,
    ast.Mod: np.mod,
    ast.Pow: np.power,
}
_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Lt: np.less,
    ast.LtE: np.less_equal,
    ast.Gt: np.greater,
    ast.GtE: np.greater_equal,
    ast.Eq: np.equal,
    ast.NotEq: np.not_equal,
}


def _fold(op: Callable[[Any, Any], Any], values: Sequence[Any]) -> Any:
    out = values[0]
    for value in values[1:]:
        out = op(out, value)
    return out


def identifier(name: str) -> str:
    """``name`` as a formula writes it: each character that cannot be in a Python name as ``_``."""
    out = re.sub(r"\W", "_", name)
    return f"_{out}" if out[:1].isdigit() else out


class ExpressionError(InvalidInputError):
    """A formula is not in the expression language, or names what the problem does not have."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__("expression", field, problem)


def _excerpt(text: str, most: int = 60) -> str:
    """A short, printable excerpt of user text (errors never echo unbounded input)."""
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= most else flat[: most - 3] + "...")


@dataclass(frozen=True)
class Vocabulary:
    """What a formula may name: the features (and, per categorical feature, its categories in
    code order) and the extra variables the caller provides."""

    features: tuple[str, ...]
    categories: Mapping[str, tuple[str, ...]]
    extras: tuple[str, ...] = ()
    booleans: frozenset[str] = frozenset()
    """Features among ``categories`` that are booleans: compared with ``True``/``False`` or 1/0
    and counted like numbers, where a category is only compared with its names."""
    states: tuple[str, ...] = STATES
    """The states a formula may name as ``state.x`` (of :data:`STATES`): what its caller hands
    it. A formula read where its state does not exist yet (an action's consequence computes the
    state after; a cost graph's tau reads the state before by the features' own names) is
    refused here, naming its field, rather than failing when a plan is scored."""

    gives: str | None = None
    """The categorical feature whose value the formula gives (an action's consequence on it), or
    None for a number. Its value is then one of that feature's categories by name (``"BSc"``,
    ``"BSc" if education_num > 12 else "HS"``) or that feature itself: its code is no number a
    user means, so ``1`` is refused (it set the category second in the model's order)."""

    def category(self, name: str) -> str | None:
        """The categorical (not boolean) feature ``name`` resolves to, or None."""
        real = self.resolve(name)
        return real if real is not None and real in self.categories and real not in self.booleans else None

    def resolve(self, name: str) -> str | None:
        """The feature ``name`` stands for: itself, or the feature whose name becomes ``name`` when
        each character that cannot be in a Python name is written ``_`` (``education-num`` is
        ``education_num`` in a formula); None when there is none, or several."""
        if name in self.features:
            return name
        found = [f for f in self.features if identifier(f) == name]
        return found[0] if len(found) == 1 else None

    def code(self, feature: str, category: str, field: str) -> float:
        """The code of ``category`` of categorical ``feature``."""
        known = self.categories[feature]
        if category not in known:
            shown = ", ".join(repr(c) for c in known[:10]) + (" ..." if len(known) > 10 else "")
            # "may take": a rule's allowed categories narrow the list, and the data may hold others
            problem = f"{feature!r} may not take the category {_excerpt(category)}; it may take {shown}"
            raise ExpressionError(field, problem)
        return float(known.index(category))


class Expression:
    """A checked formula, evaluated on arrays.

    Build with :meth:`parse`. Call with an environment: a mapping from each name the formula
    reads (``names``) to an array (or a number); ``before.x`` and ``after.x`` are read as
    ``"before.x"`` and ``"after.x"``.
    """

    def __init__(self, text: str, tree: ast.expr, names: frozenset[str], field: str, size: int = 1) -> None:
        self.text = text
        self._tree = tree
        self.names = names
        """Every variable the formula reads (``x``, ``before.x``, ``delta``...)."""
        self.field = field
        self.size = size
        """The formula's parts (its syntax tree's nodes): what evaluating it costs, per state."""

    @classmethod
    def parse(cls, text: str | float | bool, vocabulary: Vocabulary, field: str) -> Expression:
        """Check ``text`` against the language and ``vocabulary``; a number is a constant."""
        if isinstance(text, bool | int | float):
            text = repr(float(text)) if not isinstance(text, bool) else ("True" if text else "False")
        if not isinstance(text, str) or not text.strip():
            raise ExpressionError(field, "give a formula as text (or a number)")
        if len(text) > MAX_LENGTH:
            raise ExpressionError(field, f"a formula has at most {MAX_LENGTH} characters, given {len(text)}")
        try:
            with _PARSING:
                tree = ast.parse(text.strip(), mode="eval")
        except (SyntaxError, ValueError) as exc:  # a null byte is a ValueError in some Python versions
            message = exc.msg if isinstance(exc, SyntaxError) else str(exc)
            raise ExpressionError(field, f"not a formula: {message} in {_excerpt(text)}") from None
        nodes = sum(1 for _ in ast.walk(tree))
        if nodes > MAX_NODES:
            raise ExpressionError(field, f"a formula has at most {MAX_NODES} parts, given {nodes}")
        names: set[str] = set()
        checker = _Checker(vocabulary, field, names)
        checked = checker.visit(tree.body) if vocabulary.gives is None else checker.category_value(tree.body)
        return cls(text, checked, frozenset(names), field, nodes)

    def __call__(self, env: Mapping[str, Any]) -> FloatArray:
        """The formula's value for every state in ``env`` (conditions give 1.0 or 0.0)."""
        with np.errstate(all="ignore"):
            value = _evaluate(self._tree, env)
        return np.asarray(value, dtype=np.float64)

    def holds(self, env: Mapping[str, Any]) -> npt.NDArray[np.bool_]:
        """As a condition: true where the value is true (not zero and not NaN)."""
        value = self(env)
        return np.asarray((value != 0.0) & ~np.isnan(value), dtype=bool)

    def __repr__(self) -> str:
        return f"Expression({_excerpt(self.text)})"


class _Checker:
    """Walks a parsed formula, refusing every node outside the language, and rewrites names,
    ``before.x``/``after.x`` and category strings into checked nodes."""

    def __init__(self, vocabulary: Vocabulary, field: str, names: set[str]) -> None:
        self.vocabulary = vocabulary
        self.field = field
        self.names = names

    def refuse(self, what: str) -> ExpressionError:
        return ExpressionError(self.field, f"{what} is not allowed in a formula")

    def visit(self, node: ast.expr) -> ast.expr:
        """The checked form of ``node`` used as a number (arithmetic, a function's argument, a
        condition, a formula's value): a category is refused here, its code means nothing."""
        category = self._categorical(node)
        if category is not None:
            raise self.compare_by_name(category)
        return self.visit_any(node)

    def category_value(self, node: ast.expr) -> ast.expr:
        """The checked form of ``node`` as a value of the categorical feature ``gives``: one of its
        categories by name, the feature itself (before the action), or ``a if condition else b``
        of those."""
        feature = self.vocabulary.gives
        assert feature is not None  # the caller asks only then
        if isinstance(node, ast.IfExp):
            return ast.IfExp(self.visit(node.test), self.category_value(node.body), self.category_value(node.orelse))
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return ast.Constant(self.vocabulary.code(feature, node.value, self.field))
        if self._categorical(node) is not None and self._same_categories(feature, node):
            return self.visit_any(node)
        known = self.vocabulary.categories[feature]
        shown = repr(list(known[:10]))[:-1] + (", ...]" if len(known) > 10 else "]")
        raise ExpressionError(
            self.field,
            f"{feature[:60]} is a category: give one of its categories {shown} by name "
            f"(or 'a' if condition else 'b'), not a number",
        )

    def compare_by_name(self, feature: str) -> ExpressionError:
        """A category used as a number, or compared with one."""
        known = self.vocabulary.categories[feature]
        shown = repr(list(known[:10]))[:-1] + (", ...]" if len(known) > 10 else "]")
        return ExpressionError(
            self.field, f"{feature[:60]} is a category: compare it with one of its categories {shown}"
        )

    def visit_any(self, node: ast.expr) -> ast.expr:
        """The checked form of ``node``; a node outside the language is refused by its kind."""
        for kind, check in _CHECKS:
            if isinstance(node, kind):
                return check(self, node)
        raise self.refuse(type(node).__name__)

    def _constant(self, node: ast.Constant) -> ast.expr:
        if isinstance(node.value, bool | int | float):
            try:
                return ast.Constant(float(node.value))
            except OverflowError:  # a whole number past float64's range
                raise ExpressionError(self.field, "a number in a formula is too large") from None
        if isinstance(node.value, str):
            raise ExpressionError(self.field, "a text value may only be compared with a categorical feature")
        raise self.refuse(f"the constant {type(node.value).__name__}")

    def _name_node(self, node: ast.Name) -> ast.expr:
        return self._name(node.id)

    def _attribute(self, node: ast.Attribute) -> ast.expr:
        if not isinstance(node.value, ast.Name) or node.value.id not in STATES:
            raise self.refuse("an attribute other than before.<feature> or after.<feature>")
        if node.value.id not in self.vocabulary.states:
            name = _excerpt(node.attr, 40)[1:-1]
            written = " or ".join([name, *(f"{state}.{name}" for state in self.vocabulary.states)])
            raise ExpressionError(
                self.field,
                f"{node.value.id}.{name} is not available here: this formula reads the state before the action "
                f"(write {written})",
            )
        return self._feature(node.attr, f"{node.value.id}.{node.attr}")

    def _binary(self, node: ast.BinOp) -> ast.expr:
        if type(node.op) not in _BINARY:
            raise self.refuse(f"the operator {type(node.op).__name__}")
        return ast.BinOp(self.visit(node.left), node.op, self.visit(node.right))

    def _unary(self, node: ast.UnaryOp) -> ast.expr:
        if not isinstance(node.op, ast.USub | ast.UAdd | ast.Not):
            raise self.refuse(f"the operator {type(node.op).__name__}")
        return ast.UnaryOp(node.op, self.visit(node.operand))

    def _bool(self, node: ast.BoolOp) -> ast.expr:
        return ast.BoolOp(node.op, [self.visit(v) for v in node.values])

    def _if(self, node: ast.IfExp) -> ast.expr:
        return ast.IfExp(self.visit(node.test), self.visit(node.body), self.visit(node.orelse))

    def _name(self, name: str) -> ast.expr:
        if name in self.vocabulary.extras:
            self.names.add(name)
            return ast.Name(name)
        if name in ("True", "False", "true", "false") and name not in self.vocabulary.features:
            return ast.Constant(1.0 if name.lower() == "true" else 0.0)
        return self._feature(name, name)

    def _feature(self, feature: str, name: str) -> ast.expr:
        real = self.vocabulary.resolve(feature)
        if real is None:
            extras = f" or {', '.join(self.vocabulary.extras)}" if self.vocabulary.extras else ""
            raise ExpressionError(self.field, f"unknown name {_excerpt(name, 40)}: use a feature's name{extras}")
        name = name[: -len(feature)] + real  # education_num -> education-num, before.x -> before.x
        self.names.add(name)
        return ast.Name(name)

    def _compare(self, node: ast.Compare) -> ast.expr:
        parts = [node.left, *node.comparators]
        checked = [self._operand(parts, i) for i in range(len(parts))]
        for op in node.ops:
            if type(op) not in _COMPARE:
                raise self.refuse(f"the comparison {type(op).__name__}")
        return ast.Compare(checked[0], list(node.ops), checked[1:])

    def _operand(self, parts: list[ast.expr], i: int) -> ast.expr:
        """Part ``i`` of a comparison: a category's name (as its code) beside a categorical
        feature, a categorical feature beside a name of its own or the same feature, or a number."""
        part = parts[i]
        neighbours = [parts[j] for j in (i - 1, i + 1) if 0 <= j < len(parts)]
        if isinstance(part, ast.Constant) and isinstance(part.value, str):
            feature = next((f for f in map(self._categorical_or_boolean, neighbours) if f is not None), None)
            if feature is None:
                raise ExpressionError(self.field, "a text value may only be compared with a categorical feature")
            return ast.Constant(self.vocabulary.code(feature, part.value, self.field))
        category = self._categorical(part)
        if category is None:
            return self.visit(part)
        for other in neighbours:
            text = isinstance(other, ast.Constant) and isinstance(other.value, str)
            same = self._categorical(other) is not None and self._same_categories(category, other)
            if not (text or same):
                raise self.compare_by_name(category)
        return self.visit_any(part)

    def _same_categories(self, feature: str, other: ast.expr) -> bool:
        found = self._categorical(other)
        return found is not None and self.vocabulary.categories[found] == self.vocabulary.categories[feature]

    def _categorical_or_boolean(self, node: ast.expr) -> str | None:
        """The feature with categories (a boolean's are ``False``/``True``) ``node`` names, or None."""
        name = self._feature_name(node)
        real = None if name is None else self.vocabulary.resolve(name)
        return real if real is not None and real in self.vocabulary.categories else None

    def _categorical(self, node: ast.expr) -> str | None:
        """The categorical feature ``node`` names (``x``, ``before.x``, ``after.x``), or None."""
        name = self._feature_name(node)
        if name is None or (isinstance(node, ast.Name) and name in self.vocabulary.extras):
            return None
        return self.vocabulary.category(name)

    @staticmethod
    def _feature_name(node: ast.expr) -> str | None:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in STATES:
            return node.attr
        return None

    def _call(self, node: ast.Call) -> ast.expr:
        if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
            allowed = ", ".join(sorted(_FUNCTIONS))
            raise ExpressionError(self.field, f"only these functions may be called: {allowed}")
        if node.keywords:
            raise self.refuse("a keyword argument")
        least, most, _ = _FUNCTIONS[node.func.id]
        if not least <= len(node.args) <= most:
            raise ExpressionError(
                self.field, f"{node.func.id} takes {least}" + (f" to {most}" if most > least else "") + " arguments"
            )
        if any(isinstance(a, ast.Starred) for a in node.args):
            raise self.refuse("a starred argument")
        return ast.Call(ast.Name(node.func.id), [self.visit(a) for a in node.args], [])


_CHECKS: tuple[tuple[type[ast.expr], Callable[[_Checker, Any], ast.expr]], ...] = (
    (ast.Constant, _Checker._constant),
    (ast.Name, _Checker._name_node),
    (ast.Attribute, _Checker._attribute),
    (ast.BinOp, _Checker._binary),
    (ast.UnaryOp, _Checker._unary),
    (ast.BoolOp, _Checker._bool),
    (ast.Compare, _Checker._compare),
    (ast.IfExp, _Checker._if),
    (ast.Call, _Checker._call),
)
"""The language: each kind of node a formula may hold, and how it is checked (in this order)."""


def _evaluate(node: ast.expr, env: Mapping[str, Any]) -> Any:
    """The value of a checked node (see :class:`_Checker`: no other node reaches here)."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return env[node.id]
    if isinstance(node, ast.BinOp):
        return _BINARY[type(node.op)](_evaluate(node.left, env), _evaluate(node.right, env))
    if isinstance(node, ast.UnaryOp):
        return _evaluate_unary(node, env)
    if isinstance(node, ast.BoolOp):
        values = [_truth(_evaluate(v, env)) for v in node.values]
        joined = _fold(np.logical_and if isinstance(node.op, ast.And) else np.logical_or, values)
        return np.asarray(joined, dtype=np.float64)
    if isinstance(node, ast.Compare):
        return _evaluate_compare(node, env)
    if isinstance(node, ast.IfExp):
        return np.where(_truth(_evaluate(node.test, env)), _evaluate(node.body, env), _evaluate(node.orelse, env))
    if isinstance(node, ast.Call):
        assert isinstance(node.func, ast.Name)
        return _FUNCTIONS[node.func.id][2](*[_evaluate(a, env) for a in node.args])
    raise AssertionError(f"unchecked node {type(node).__name__}")  # pragma: no cover


def _evaluate_unary(node: ast.UnaryOp, env: Mapping[str, Any]) -> Any:
    value = _evaluate(node.operand, env)
    if isinstance(node.op, ast.Not):
        return np.logical_not(_truth(value)).astype(np.float64)
    return np.negative(value) if isinstance(node.op, ast.USub) else value


def _evaluate_compare(node: ast.Compare, env: Mapping[str, Any]) -> Any:
    """A chain of comparisons (``a < b <= c``): each one true, as 1.0 or 0.0."""
    left = _evaluate(node.left, env)
    result: Any = True
    for op, comparator in zip(node.ops, node.comparators, strict=True):
        right = _evaluate(comparator, env)
        result = np.logical_and(result, _COMPARE[type(op)](left, right))
        left = right
    return np.asarray(result, dtype=np.float64)


def _truth(value: Any) -> Any:
    """True where a value is neither zero nor NaN."""
    array = np.asarray(value, dtype=np.float64)
    return (array != 0.0) & ~np.isnan(array)
