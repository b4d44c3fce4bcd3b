"""Global rules: a few "for rows with <condition>, change <feature> by <amount>" rules that help
most of the audited rows, each checked through the model on every row it covers.

One counterfactual per row answers "what would change this decision?"; a portfolio's owner asks
"which few changes would help most people?". The method follows T-CREx (Bewley et al., 2024:
actions drawn from the counterfactuals, conditions learnt by a shallow tree, rules kept where
they are valid) and AReS (Rawal and Lakkaraju, 2020: a greedy choice of a small rule set weighing
how many rows it helps against what it asks of them):

1. **The rows**: those that need recourse (records with status ``ok`` or ``not_found``; rows that
   meet the goal already, or whose solve failed, are left out), each with its own problem (its
   domains, immutables, monotone rules, distance) built by the explainer.
2. **Candidate actions** from the valid counterfactuals: for each mutable feature and direction,
   the amounts by which the answers change it (the median, 75th, 90th percentile and largest
   change, rounded up to two significant digits, whole numbers on a whole-number feature); for a
   category or a boolean, "set it to" each of its most frequent new values; and the most
   frequent combinations of two or three changed features, each feature moved by the 75th
   percentile or the largest of its changes among the answers with that combination. A feature
   the problem holds fixed (immutable) never enters an action, nor a direction a monotone rule
   forbids. At most ``max_actions``, the most supported first.
3. **Validity through the model**, never from the counterfactuals: every candidate action is
   applied to every row (clipped to the row's domains, put on the feature's grid) and the whole
   set is scored by one reference call of the model per encoding of rows (one call in the usual
   case); each row's own score calculator then says whether the changed row is feasible (every
   goal met, no rule of the row's problem broken: an immutable kept, a monotone rule, the trust
   region) and what it costs (the problem's distance, as a record's ``distance``).
4. **Candidate conditions** for each action: every node of a shallow decision tree
   (``depth`` levels, leaves of at least ``min_rows`` rows) fitted on the rows' feature values to
   the rows the action helps; a threshold is rounded for reading (a whole number on a
   whole-number feature, three significant digits otherwise) and the rows it covers are counted
   again with the rounded threshold, so the text and the numbers agree. The root (every row) is a
   condition too.
5. **Greedy selection** (AReS's trade-off of coverage against cost, as a facility-location
   objective): a pair is eligible when its validity (the share of the rows its condition covers
   that its action helps) is at least ``min_validity``. A pair gives each row it helps the value
   ``min(1, own / cost) ** cost_weight``, where ``cost`` is the action's distance on that row and
   ``own`` the row's own answer's distance (the median of the answers' for a row without one):
   1 for a rule that asks no more than the row's own counterfactual, a third for one that asks
   three times as much (``cost_weight=0``: every helped row counts 1, plain coverage). The rule set
   is worth the sum over rows of the best value any of its rules gives the row; rules are added
   greedily by the most they add to that sum (ties: fewer condition terms, fewer changed
   features, lower cost, then the order the candidates were built in), until ``max_rules`` rules
   or none adds one row's worth (:data:`MIN_GAIN`). So a cheap rule for a subgroup can join a
   broad costly one: each row counts with the cheapest chosen rule that helps it. The objective is
   monotone and submodular, so the greedy set is within 1 - 1/e of the best set of its size.

Everything is deterministic: candidates are built in a fixed order and the tree is seeded.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import pandas as pd
import structlog

from counterplan.planning.calculator import Evaluation, check_shared
from counterplan.planning.features import BooleanFeature, CategoricalFeature
from counterplan.planning.problem import CounterfactualProblem
from counterplan.planning.space import FeatureSpace, FloatMatrix
from counterplan.solver.audit.report import Action as ReportAction, AuditRule, Condition
from counterplan.solver.batch.protocol import RowExplainer
from counterplan.solver.batch.records import PROPOSED_PREFIX
from counterplan.solver.batch.rows import column_codes
from counterplan.solver.batch.shared_calls import encoding_key

BoolMatrix = npt.NDArray[np.bool_]
NEEDING = ("ok", "not_found")
"""Record statuses of the rows a rule may help: the rows that do not meet the goal now."""
AMOUNT_QUANTILES = (0.5, 0.75, 0.9, 1.0)
"""Quantiles of one feature's changes among the answers that become a single-feature action's amounts."""
COMBINATION_QUANTILES = (0.75, 1.0)
"""Quantiles of each feature's changes that become a combined action's amounts."""
TOP_TARGETS = 3
"""New values of a category tried as "set to" actions, the most frequent first."""
TOP_COMBINATIONS = 8
"""Combinations of changed features tried as actions, the most frequent first."""
MIN_GAIN = 1.0
"""The least a rule must add to the objective to be chosen: one row's worth."""
TOP_CATEGORIES = 8
"""Values of a category a condition may name (``feature = value``), the most frequent first."""
_log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Step:
    """One feature's part of an action: moved ``by`` an encoded amount, or set ``to`` a code."""

    column: int
    feature: str
    how: Literal["by", "to"]
    amount: float
    """The encoded amount (``by``) or code (``to``)."""
    value: Any
    """The same in the feature's own values: the number added, or the value set."""
    text: str


@dataclass(frozen=True)
class Action:
    """What a rule asks: one or more steps, applied together."""

    steps: tuple[Step, ...]
    support: int
    """Valid answers that made these changes (the order in which actions are tried)."""

    @property
    def text(self) -> str:
        return " and ".join(step.text for step in self.steps)


@dataclass(frozen=True)
class Term:
    """One part of a condition: ``feature <= value``, ``feature > value``, ``= value``, ``!= value``."""

    feature: str
    op: Literal["<=", ">", "=", "!="]
    value: Any

    @property
    def text(self) -> str:
        shown = repr(self.value) if isinstance(self.value, str) else _number_text(float(self.value))
        return f"{self.feature} {self.op} {shown}"


@dataclass(frozen=True)
class FoundRule:
    """A chosen rule, with what was measured through the model."""

    condition: tuple[Term, ...]
    action: Action
    rows_covered: int
    coverage: float
    """Share of the rows needing recourse that the condition covers."""
    validity: float
    """Share of the covered rows the action helps (checked through the model)."""
    cost_mean: float
    """Mean distance of the action over the covered rows it helps."""
    helped: int
    """Covered rows the action helps."""
    new_rows: int
    """Rows it helps that no rule chosen before it helps."""
    gain: float
    """What it added to the objective when it was chosen (module text, step 5)."""
    row_ids: tuple[Any, ...]
    """The ids of the covered rows."""

    @property
    def condition_text(self) -> str:
        return " and ".join(term.text for term in self.condition) or "every row"


@dataclass
class _Rows:
    """The rows that need recourse, each with its problem, and the answers' changes."""

    ids: list[Any]
    problems: list[CounterfactualProblem]
    original: FloatMatrix
    proposed: FloatMatrix
    """Encoded answers (NaN where a row has no valid answer)."""
    valid: npt.NDArray[np.bool_]


@dataclass
class _Candidate:
    action: int
    terms: tuple[Term, ...]
    covered: npt.NDArray[np.bool_]


def find_rules(
    explainer: RowExplainer,
    rows: pd.DataFrame,
    records: pd.DataFrame,
    *,
    max_rules: int = 5,
    min_validity: float = 0.8,
    seed: int = 0,
    depth: int = 2,
    min_rows: int | None = None,
    max_actions: int = 48,
    cost_weight: float = 1.0,
    stop: Callable[[], bool] | None = None,
) -> list[FoundRule]:
    """The global rules of ``rows`` (the audited rows' feature values, indexed by row id) given
    their batch ``records`` (a ``row_id``, ``status``, ``valid`` and ``cf_<feature>`` column
    each); see the module's text for the method. ``min_rows`` (default: 2% of the rows, at least
    3) is the fewest rows a condition may cover; ``stop`` is asked before every model call (rows
    left unscored then count as not helped)."""
    if max_rules < 1 or not 0.0 < min_validity <= 1.0 or depth < 0 or max_actions < 1 or cost_weight < 0:
        raise ValueError("max_rules >= 1, 0 < min_validity <= 1, depth >= 0, max_actions >= 1, cost_weight >= 0")
    audited = _rows(explainer, rows, records)
    if audited is None:
        return []
    n = len(audited.ids)
    least = min_rows if min_rows is not None else max(3, math.ceil(0.02 * n))
    reference = audited.problems[0].space
    actions = _actions(reference, audited, max_actions)
    if not actions:
        return []
    helps, costs = _measure(audited, actions, stop)
    conditions, names = _condition_matrix(reference, audited.original)
    candidates: list[_Candidate] = []
    for a in range(len(actions)):
        if not helps[a].any():
            continue
        for terms, covered in _conditions(conditions, names, reference, helps[a], depth=depth, least=least, seed=seed):
            if covered.sum() >= least and helps[a, covered].mean() >= min_validity:
                candidates.append(_Candidate(a, terms, covered))
    return _select(
        candidates,
        actions,
        helps,
        costs,
        own=_own_costs(records, audited),
        ids=audited.ids,
        max_rules=max_rules,
        cost_weight=cost_weight,
    )


def _rows(explainer: RowExplainer, rows: pd.DataFrame, records: pd.DataFrame) -> _Rows | None:
    """The rows whose records say they need recourse, with their problems; None when there are none."""
    status = records.set_index("row_id")["status"]
    valid_of = records.set_index("row_id")["valid"]
    ids, problems = [], []
    for row_id in rows.index:
        if row_id not in status.index or status.loc[row_id] not in NEEDING:
            continue
        try:
            problem = explainer.problem(rows.loc[row_id])
        except Exception:
            continue
        ids.append(row_id)
        problems.append(problem)
    if not ids:
        return None
    space = problems[0].space
    original = np.vstack([p.space.original for p in problems])
    proposed = np.full_like(original, np.nan)
    chosen = records.set_index("row_id").loc[ids]
    for j, feature in enumerate(space.features):
        name = PROPOSED_PREFIX + feature.name
        if name in chosen.columns:
            proposed[:, j] = column_codes(feature, chosen[name].reset_index(drop=True))
    valid = np.asarray(valid_of.loc[ids].to_numpy(dtype=bool)) & np.isfinite(proposed).all(axis=1)
    proposed[~valid] = np.nan
    return _Rows(ids, problems, original, proposed, valid)


def _own_costs(records: pd.DataFrame, rows: _Rows) -> FloatMatrix:
    """Each row's own answer's distance; the median of those where a row has no valid answer (1
    when no row has one)."""
    distance = records.set_index("row_id").loc[rows.ids, "distance"].to_numpy(dtype=np.float64)
    known = rows.valid & np.isfinite(distance) & (distance > 0)
    typical = float(np.median(distance[known])) if known.any() else 1.0
    return np.where(known, distance, typical)


def _actions(space: FeatureSpace, rows: _Rows, most: int) -> list[Action]:
    """The candidate actions drawn from the valid answers' changes (module text, step 2)."""
    answers, original = rows.proposed[rows.valid], rows.original[rows.valid]
    if not len(answers):
        return []
    delta = answers - original
    allowed = space.mutable
    moves: dict[tuple[int, float], npt.NDArray[np.bool_]] = {}  # (column, sign or target code) -> answers
    for j in np.flatnonzero(allowed).tolist():
        changed = answers[:, j] != original[:, j]
        if space.nominal[j]:
            for code in np.unique(answers[changed, j]):
                moves[(j, float(code))] = changed & (answers[:, j] == code)
        else:
            for sign in (1.0, -1.0):
                if space.monotone[j] * sign < 0:
                    continue
                moves[(j, sign)] = changed & (np.sign(delta[:, j]) == sign)
    singles: list[Action] = []
    for (j, key), mask in moves.items():
        support = int(mask.sum())
        if not support:
            continue
        if space.nominal[j]:
            singles.append(Action((_step(space, j, "to", key),), support))
            continue
        amounts = _amounts(space, j, np.abs(delta[mask, j]), AMOUNT_QUANTILES)
        singles.extend(Action((_step(space, j, "by", key * a),), support) for a in amounts)
    nominal_targets = _top_targets(singles, space)
    singles = [a for a in singles if not space.nominal[a.steps[0].column] or a in nominal_targets]
    combined = _combinations(space, moves, delta)
    ordered = sorted(
        [*singles, *combined],
        key=lambda a: (-a.support, len(a.steps), [(s.column, s.how, s.amount) for s in a.steps]),
    )
    return ordered[:most]


def _top_targets(singles: list[Action], space: FeatureSpace) -> set[Action]:
    """The "set to" actions of each category kept: its :data:`TOP_TARGETS` most frequent values."""
    kept: set[Action] = set()
    by_column: dict[int, list[Action]] = {}
    for action in singles:
        if space.nominal[action.steps[0].column]:
            by_column.setdefault(action.steps[0].column, []).append(action)
    for actions in by_column.values():
        kept.update(sorted(actions, key=lambda a: (-a.support, a.steps[0].amount))[:TOP_TARGETS])
    return kept


def _combinations(
    space: FeatureSpace, moves: dict[tuple[int, float], npt.NDArray[np.bool_]], delta: FloatMatrix
) -> list[Action]:
    """Actions of the most frequent sets of two or three moves made together by one answer."""
    keys = list(moves)
    if len(keys) < 2:
        return []
    member = np.column_stack([moves[k] for k in keys])
    sets = Counter(tuple(np.flatnonzero(row).tolist()) for row in member if 2 <= row.sum() <= 3)
    out: list[Action] = []
    for chosen, support in sorted(sets.items(), key=lambda item: (-item[1], item[0]))[:TOP_COMBINATIONS]:
        together = member[:, list(chosen)].all(axis=1)
        for q in COMBINATION_QUANTILES:
            steps = []
            for k in chosen:
                j, key = keys[k]
                if space.nominal[j]:
                    steps.append(_step(space, j, "to", key))
                else:
                    (amount,) = _amounts(space, j, np.abs(delta[together, j]), (q,))[:1] or (0.0,)
                    steps.append(_step(space, j, "by", key * amount))
            if all(s.how == "to" or s.amount != 0.0 for s in steps):
                out.append(Action(tuple(steps), support))
    return list(dict.fromkeys(out))  # the quantiles may give one action twice


def _amounts(space: FeatureSpace, column: int, changes: FloatMatrix, quantiles: Sequence[float]) -> list[float]:
    """The quantiles of a feature's changes, rounded up for reading (whole on a whole-number
    feature), distinct, in increasing order."""
    if not changes.size:
        return []
    raw = np.quantile(changes, quantiles, method="higher")
    rounded = {_round_up(float(v), bool(space.integral[column])) for v in raw if v > 0}
    return sorted(rounded)


def _round_up(value: float, whole: bool) -> float:
    """``value`` rounded up to two significant digits (up to a whole number on a whole feature)."""
    magnitude = 10.0 ** (math.floor(math.log10(value)) - 1)
    rounded = math.ceil(value / magnitude - 1e-9) * magnitude
    rounded = float(f"{rounded:.12g}")  # no 0.30000000000000004
    return float(math.ceil(rounded)) if whole else rounded


def _step(space: FeatureSpace, column: int, how: Literal["by", "to"], amount: float) -> Step:
    feature = space.features[column]
    if how == "to":
        value = feature.decode(amount)
        shown = repr(value) if isinstance(value, str) else str(value)
        return Step(column, feature.name, how, amount, value, f"set {feature.name} to {shown}")
    number = int(amount) if space.integral[column] else amount
    return Step(column, feature.name, how, amount, number, f"change {feature.name} by {amount:+,.6g}")


def _measure(rows: _Rows, actions: Sequence[Action], stop: Callable[[], bool] | None) -> tuple[BoolMatrix, FloatMatrix]:
    """Whether each action helps each row, and what it costs there: every action applied to every
    row, scored through the model by one reference call per encoding of rows (module text, step 3)."""
    n, k = len(rows.ids), len(actions)
    helps = np.zeros((k, n), dtype=bool)
    costs = np.full((k, n), np.nan)
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, problem in enumerate(rows.problems):
        groups.setdefault(encoding_key(problem.space), []).append(i)
    for members in groups.values():
        if stop is not None and stop():
            break
        candidates = np.stack([_applied(rows.problems[i], rows.original[i], actions) for i in members])  # (m, k, d)
        evaluations = _scored([rows.problems[i] for i in members], candidates)
        for i, evaluation in zip(members, evaluations, strict=True):
            fine = np.array([failure is None for failure in evaluation.failures], dtype=bool)
            helps[:, i] = evaluation.feasible & fine
            costs[:, i] = -evaluation.scores[:, 3]
    return helps, costs


def _applied(problem: CounterfactualProblem, original: FloatMatrix, actions: Sequence[Action]) -> FloatMatrix:
    """Every action applied to one row: clipped to the row's domains, on its features' grids."""
    space = problem.space
    X = np.tile(original, (len(actions), 1))
    for a, action in enumerate(actions):
        for step in action.steps:
            X[a, step.column] = X[a, step.column] + step.amount if step.how == "by" else step.amount
    np.clip(X, space.domain_lower, space.domain_upper, out=X)
    held = space.missing & ~space.mutable  # a missing value that stays missing keeps its code
    X[:, held] = original[held]
    return space.snap(X)


def _scored(problems: Sequence[CounterfactualProblem], candidates: npt.NDArray[np.float64]) -> list[Evaluation]:
    """Each row's candidates scored by its own calculator, from one reference call for all rows,
    each candidate as it is reported (:func:`~counterplan.planning.calculator.check_shared`)."""
    return check_shared(problems, candidates, problems[0].model)


def _condition_matrix(space: FeatureSpace, original: FloatMatrix) -> tuple[FloatMatrix, list[tuple[int, Any]]]:
    """The columns a condition reads: each number as it is, each category's most frequent values
    as 0/1 columns. Names: ``(column, None)`` for a number, ``(column, code)`` for a value."""
    columns: list[FloatMatrix] = []
    names: list[tuple[int, Any]] = []
    for j, feature in enumerate(space.features):
        values = original[:, j]
        if isinstance(feature, CategoricalFeature | BooleanFeature):
            codes, counts = np.unique(values, return_counts=True)
            if len(codes) < 2:
                continue
            for code in codes[np.argsort(-counts, kind="stable")][:TOP_CATEGORIES]:
                columns.append((values == code).astype(np.float64))
                names.append((j, float(code)))
        elif np.unique(values).size > 1:
            columns.append(values)
            names.append((j, None))
    if not columns:
        return np.zeros((len(original), 0)), []
    return np.column_stack(columns), names


def _conditions(
    Z: FloatMatrix,
    names: list[tuple[int, Any]],
    space: FeatureSpace,
    target: npt.NDArray[np.bool_],
    *,
    depth: int,
    least: int,
    seed: int,
) -> list[tuple[tuple[Term, ...], npt.NDArray[np.bool_]]]:
    """Every node of a shallow tree fitted to the rows an action helps, as (terms, covered rows)."""
    everyone = np.ones(len(target), dtype=bool)
    out: list[tuple[tuple[Term, ...], npt.NDArray[np.bool_]]] = [((), everyone)]
    if depth == 0 or Z.shape[1] == 0 or target.all() or len(target) < 2 * least:
        return out
    from sklearn.tree import DecisionTreeClassifier  # noqa: PLC0415 - only the rules need it

    tree = DecisionTreeClassifier(max_depth=depth, min_samples_leaf=least, random_state=seed).fit(Z, target)
    inner = tree.tree_
    seen: set[tuple[Term, ...]] = set()

    def walk(node: int, terms: tuple[Term, ...]) -> None:
        left, right = int(inner.children_left[node]), int(inner.children_right[node])
        if left < 0:
            return
        column, threshold = int(inner.feature[node]), float(inner.threshold[node])
        for child, below in ((left, True), (right, False)):
            term = _term(space, names[column], threshold, below, Z[:, column])
            merged = _merged((*terms, term))
            if merged not in seen:
                seen.add(merged)
                out.append((merged, _covered(merged, space, Z, names)))
            walk(child, merged)

    walk(0, ())
    return out


def _term(space: FeatureSpace, name: tuple[int, Any], threshold: float, below: bool, values: FloatMatrix) -> Term:
    """A tree split as a readable term; a number's threshold rounded (module text, step 4)."""
    column, code = name
    feature = space.features[column]
    if code is not None:  # a 0/1 column: "<= 0.5" is "not this value"
        value = feature.decode(code)
        return Term(feature.name, "!=" if below else "=", value)
    if space.integral[column]:
        cut: float = math.floor(threshold)
    else:
        cut = float(f"{threshold:.3g}")
        low, high = values[values <= threshold].max(), values[values > threshold].min()
        if not low <= cut < high:  # rounding would move rows across: keep the digits it needs
            cut = float(low)
    return Term(feature.name, "<=" if below else ">", int(cut) if space.integral[column] else cut)


def _merged(terms: tuple[Term, ...]) -> tuple[Term, ...]:
    """Terms with the looser of two bounds on one side of a number dropped."""
    kept: dict[tuple[str, str, Any], Term] = {}
    for term in terms:
        if term.op in ("<=", ">"):
            key = (term.feature, term.op, None)
            old = kept.get(key)
            tighter = old is None or (term.value < old.value if term.op == "<=" else term.value > old.value)
            if tighter:
                kept[key] = term
        else:
            kept[(term.feature, term.op, term.value)] = term
    return tuple(kept.values())


def _covered(terms: tuple[Term, ...], space: FeatureSpace, Z: FloatMatrix, names: list[tuple[int, Any]]) -> BoolMatrix:
    """The rows every term holds for (the rounded thresholds, not the tree's)."""
    covered = np.ones(Z.shape[0], dtype=bool)
    for term in terms:
        column = space.index[term.feature]
        if term.op in ("<=", ">"):
            values = Z[:, names.index((column, None))]
            covered &= values <= term.value if term.op == "<=" else values > term.value
        else:
            code = space.features[column].encode(term.value)
            values = Z[:, names.index((column, float(code)))]
            covered &= (values == 1.0) if term.op == "=" else (values == 0.0)
    return covered


def _select(
    candidates: list[_Candidate],
    actions: Sequence[Action],
    helps: BoolMatrix,
    costs: FloatMatrix,
    *,
    own: FloatMatrix,
    ids: list[Any],
    max_rules: int,
    cost_weight: float,
) -> list[FoundRule]:
    """The greedy choice of at most ``max_rules`` rules (module text, step 5): ``own`` is each
    row's own answer's distance (the typical one where it has none)."""
    if not candidates:
        return []
    helped = np.stack([c.covered & helps[c.action] for c in candidates])  # (candidates, rows)
    applied = np.stack([costs[c.action] for c in candidates])
    with np.errstate(divide="ignore", invalid="ignore"):
        value = np.where(helped, np.minimum(1.0, own / np.maximum(applied, 1e-12)) ** cost_weight, 0.0)
    cost = np.array([float(applied[i, h].mean()) for i, h in enumerate(helped)])
    keys = np.vstack(
        [
            np.arange(len(candidates), dtype=np.float64),
            cost,
            [len(actions[c.action].steps) for c in candidates],
            [len(c.terms) for c in candidates],
        ]
    )
    order = np.lexsort(keys)  # the tie-breaks, last key first
    rank = np.empty(len(candidates), dtype=np.int64)
    rank[order] = np.arange(len(candidates))
    best_value = np.zeros(helps.shape[1])  # per row, the most a chosen rule gives it
    done = np.zeros(helps.shape[1], dtype=bool)
    chosen: list[FoundRule] = []
    while len(chosen) < max_rules:
        gain = np.maximum(value - best_value, 0.0).sum(axis=1)
        top = gain.max()
        if top < MIN_GAIN:
            break
        tied = np.flatnonzero(gain >= top - 1e-9)
        best = int(tied[np.argmin(rank[tied])])
        candidate = candidates[best]
        covered = candidate.covered
        chosen.append(
            FoundRule(
                condition=candidate.terms,
                action=actions[candidate.action],
                rows_covered=int(covered.sum()),
                coverage=float(covered.mean()),
                validity=float(helps[candidate.action, covered].mean()),
                cost_mean=float(cost[best]),
                helped=int(helped[best].sum()),
                new_rows=int((helped[best] & ~done).sum()),
                gain=float(top),
                row_ids=tuple(ids[i] for i in np.flatnonzero(covered)),
            )
        )
        best_value = np.maximum(best_value, value[best])
        done |= helped[best]
    _log.info("audit.rules", candidates=len(candidates), chosen=len(chosen), helped=int(done.sum()))
    return chosen


def _number_text(value: float) -> str:
    return f"{int(value):,}" if value.is_integer() else f"{value:,.6g}"


def global_rules(
    explainer: RowExplainer,
    rows: pd.DataFrame,
    records: pd.DataFrame,
    *,
    max_rules: int = 5,
    min_validity: float = 0.8,
    seed: int = 0,
    **options: Any,
) -> list[AuditRule]:
    """The global rules of an audit, as the report holds them (:func:`find_rules` for the method
    and the ``options``: ``depth``, ``min_rows``, ``max_actions``, ``cost_weight``, ``stop``)."""
    found = find_rules(explainer, rows, records, max_rules=max_rules, min_validity=min_validity, seed=seed, **options)
    return [audit_rule(rule) for rule in found]


def audit_rule(rule: FoundRule) -> AuditRule:
    """A found rule as the report's :class:`AuditRule`: a number's change as ``add``, a category's
    as ``set``, in the feature's own values."""
    return AuditRule(
        condition=[
            Condition(feature=t.feature, op="==" if t.op == "=" else t.op, value=t.value) for t in rule.condition
        ],
        action=[
            ReportAction(feature=s.feature, kind="add" if s.how == "by" else "set", value=s.value)
            for s in rule.action.steps
        ],
        coverage=rule.coverage,
        validity=rule.validity,
        cost_mean=rule.cost_mean,
        rows_covered=rule.rows_covered,
    )
