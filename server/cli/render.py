"""Human-readable output of a counterfactual result, and the live best-score display."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from counterplan.planning.errors import one_line
from counterplan.solver.exact.report import ExactStatistics
from counterplan.solver.result import BestSolutionEvent, Change, CounterfactualResult
from counterplan.solver.swarm.report import SwarmStatistics


def format_value(value: Any) -> str:
    """A feature value as the command line prints it (thousands separated, "missing" for a gap)."""
    if value is None:
        return "missing"
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.2f}"
    return str(value)


def _fmt_predictions(predictions: dict[str, Any]) -> str:
    parts = []
    for name, value in predictions.items():
        if isinstance(value, dict):
            probabilities = ", ".join(f"{label}: {p:.3f}" for label, p in value.items())
            predicted = max(value, key=lambda label: value[label]) if value else "?"
            parts.append(f"{name} = {predicted} ({probabilities})")
        else:
            parts.append(f"{name} = {format_value(value)}")
    return "; ".join(parts)


def goal_line(goal: str, default: str | None) -> str:
    """The goal an output answers, on a line of its own: ``Goal: approved = 1 with p >= 0.705``,
    with ``(default: ...)`` when no goal was asked."""
    return f"Goal: {goal or 'the model default'}" + (f" (default: {default})" if default else "")


def print_result(result: CounterfactualResult, console: Console) -> None:
    """The goal, a table of the changes, then the predictions, the score and the statistics."""
    console.print(goal_line(result.goal, result.goal_default), markup=False, soft_wrap=True)
    if result.changes:
        console.print("Counterfactual: change these features")
        console.print(_changes_table(result.changes))
    elif result.already_met:
        console.print("The instance already meets the goal: nothing to change.")
    else:
        console.print("No change found that improves on the original instance.")
    kept = [name for name, value in result.original.items() if value is None and result.proposed.get(name) is None]
    if kept:
        console.print(f"Missing in the instance, kept missing: {', '.join(kept)}", markup=False)
    verdict = "[green]valid[/green]" if result.valid else "[red]not valid: the goal is not reached[/red]"
    console.print(f"Prediction before: {escape(_fmt_predictions(result.original_predictions))}")
    console.print(f"Prediction after:  {escape(_fmt_predictions(result.predictions))}  {verdict}")
    console.print(f"Score: {display_score(result.score_levels)}")
    # the answers other than the one shown: the first of them is it, but for the exact engine's set
    # solved as a whole, which need not hold the proven optimum shown above
    others = [c for c in result.counterfactuals if c.proposed != result.proposed]
    for i, option in enumerate(others, start=2):
        console.print(
            f"Alternative {i}: {display_score(option.score_levels)}  ({_fmt_predictions(option.predictions)})",
            markup=False,
        )
        console.print(_changes_table(option.changes))
    if result.note and not result.already_met:  # already met: said in the first line
        console.print(result.note, style="yellow", markup=False)
    s = result.statistics
    console.print(
        f"Search: {_counted(s.steps, 'step')}, {_counted(s.score_calculation_count, 'candidate')} scored in "
        f"{_counted(s.model_call_count, 'model call')} "
        f"({s.score_calculation_speed:,.0f}/s), {s.time_spent_seconds * 1e3:.0f} ms; best found at step "
        f"{s.best_found_at_step}; stopped: {s.termination_reason}",
        style="dim",
    )
    if s.engine in ("exact", "swarm") or s.engine_reason.startswith("auto"):
        console.print(f"Engine: {s.engine} ({s.engine_reason})", style="dim", markup=False)
    if s.exact is not None:
        console.print(exact_line(s.exact), style="dim", markup=False)  # reasons may hold [brackets]
    if s.swarm is not None:
        console.print(swarm_line(s.swarm), style="dim", markup=False)


def swarm_line(swarm: SwarmStatistics) -> str:
    """What the particle swarm searched, in one line."""
    shown = ", ".join(swarm.searched_features[:8]) + (", ..." if swarm.searched > 8 else "")
    chosen = {"all": "every mutable feature", "information_value": "by information value"}.get(
        swarm.ranking, "by sensitivity at this row"
    )
    line = (
        f"Swarm: {swarm.particles} particles, {swarm.iterations} iterations, {swarm.searched} of "
        f"{swarm.searchable} features searched ({chosen}: {shown}); objective {swarm.objective}"
    )
    if swarm.clusters:
        line += f"; {swarm.clusters} clusters, {swarm.empty_clusters} without a valid particle"
    return line


def exact_line(exact: ExactStatistics) -> str:
    """What the exact engine proved, in one line."""
    if exact.status == "not encodable":
        return f"Exact engine: not used: {exact.reason}"
    proof = "proven optimal" if exact.proven and exact.status == "optimal" else exact.status
    if exact.status == "infeasible":  # not proven: a stricter program than the problem's, or a margin left
        proof = "proven: no counterfactual exists" if exact.proven else "the program has no answer (no proof)"
    named = f" ({exact.model})" if exact.model else ""  # no model described before its program was built
    parts = [f"Exact engine{named}: {proof}"]
    if exact.gap is not None and exact.status != "infeasible":
        parts.append(f"gap {exact.gap:.2g}")
    parts.append(f"{exact.nodes:,} nodes, {exact.variables:,} variables, {exact.seconds:.2f} s")
    if exact.backend:
        parts.append(exact.backend)
    if exact.answer_set:
        parts.append(
            f"set of answers: {exact.answer_set}" + (f" ({exact.answer_set_reason})" if exact.answer_set_reason else "")
        )
    if exact.reason:
        parts.append(exact.reason)
    if exact.retries:
        parts.append(f"{exact.retries} retries with wider margins")
    if not exact.verified and exact.status in ("optimal", "feasible"):
        parts.append("the real model rejected its answer")
    return "; ".join(parts)


def display_score(levels: list[float]) -> str:
    """The score for a reader: each level to 4 significant digits (``--json`` keeps the exact text)."""
    text = [f"{level:.4g}" if level else "0" for level in levels]
    return f"[{'/'.join(text[:3])}]hard/[{'/'.join(text[3:])}]soft"


def _changes_table(changes: list[Change]) -> Table:
    table = Table()
    table.add_column("feature")
    table.add_column("original", justify="right")
    table.add_column("proposed", justify="right", style="bold")
    binned = any(c.proposed_bin for c in changes)
    if binned:  # a scorecard: the bins say what the change means
        table.add_column("bin", justify="left")
    for change in changes:
        cells = [escape(change.feature), escape(format_value(change.original)), escape(format_value(change.proposed))]
        if binned:
            cells.append(escape(f"{change.original_bin or '?'} -> {change.proposed_bin or '?'}"))
        table.add_row(*cells)
    return table


def prediction_label(goal: Any, output: str | None) -> str:
    """The prediction a goal follows, in words: a class goal's is the probability of its class of
    its output (``probability of approved = 1``), a value or range goal's the predicted value
    (``predicted income``). ``output`` None: the goal names none (the model's only output)."""
    if getattr(goal, "kind", None) == "class":
        return f"probability of {output} = {goal.target}" if output else f"probability of class {goal.target}"
    return f"predicted {output}" if output else "predicted value"


GOWER_NOTE = (
    "Distance: the mean Gower distance over the {features} features from the row to the plan's end "
    "(each 0 when kept, up to 1: a number moved across its whole range, a category or flag changed)."
)
"""What a plan's distance measures (:func:`counterplan.planning.distance.gower`), under its table."""


CHANGES_IN_A_LINE = 6
"""Changes an interrupted explain's line names; it counts the others."""
LINE_LIMIT = 400
"""An interrupted explain's line at most (long feature names are cut, the line stays one)."""


def interrupted_line(result: CounterfactualResult) -> str:
    """What an explain stopped with Ctrl-C had, in one line: the best valid answer so far (its
    score and changes) or that there is none yet, and whether the exact engine had its proof."""
    parts = []
    exact = result.statistics.exact
    if result.statistics.engine == "exact" and not (exact is not None and exact.proven):
        parts.append("the exact engine did not finish (no proof of optimality)")
    if not result.valid or not result.changes:
        parts.append("no answer yet")
        return "; ".join(parts)
    shown = ", ".join(
        f"{c.feature} {format_value(c.original)} -> {format_value(c.proposed)}"
        for c in result.changes[:CHANGES_IN_A_LINE]
    )
    more = len(result.changes) - CHANGES_IN_A_LINE
    parts.append(
        f"best so far (valid, after {result.statistics.time_spent_seconds:.1f} s): "
        f"score {display_score(result.score_levels)}; {shown}" + (f" and {more} more changes" if more > 0 else "")
    )
    return one_line("; ".join(parts), limit=LINE_LIMIT)


def progress_line(event: BestSolutionEvent) -> str:
    """One line for the live display: the best score so far."""
    state = "feasible" if event.feasible else "searching"
    score = display_score(event.score_levels)
    return f"best {score} ({state}) at step {event.step_index}, {event.time_spent_seconds * 1e3:.0f} ms"


def _counted(n: int, thing: str) -> str:
    """``n`` things, in the singular for one ("1 candidate", "1,500 candidates")."""
    return f"{n:,} {thing}" if n == 1 else f"{n:,} {thing}s"
