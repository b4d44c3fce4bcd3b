"""Scorecard counterfactuals: counterplan's exact engine against optbinning's ``Counterfactual``.

optbinning implements the scorecard paper (Navas-Palencia); its answers come from
``benchmarks/optbinning_reference.py``, run first in its own process (it writes
``benchmarks/.cache/optbinning-<dataset>.json``). This script answers the same questions with
counterplan on the same fitted scorecards (``benchmarks/scorecards.py``), with the paper's
objective as the distance (``DistanceSettings(metric="scorecard", alpha=1, beta=1)``, optbinning's
default weights), and scores both sides' answers with the same code (``scorecards.paper_objective``)
and the real ``Scorecard.predict_proba``::

    .venv/bin/python benchmarks/optbinning_reference.py --dataset heloc
    .venv/bin/python benchmarks/optbinning_reference.py --dataset adult
    .venv/bin/python benchmarks/scorecard_compare.py --markdown

Questions: optbinning's weighted (``W``) runs: one counterfactual with at most K = 1..4 changes on
the paper's query and 10 rejected test rows, for the ``probability`` target (P(good) >= 0.5, which
optbinning states on its piecewise-linear sigmoid) and the ``binary`` one (score >= 0); several
counterfactuals (n_cf = 3..5, K = 2..4) with its diversity rules on the paper's query. Ours:
``ClassGoal(target=1, confidence=0.5, margin=0)`` (the log-odds >= 1e-6), ``max_changed_features=K``,
and for several answers the exact engine's k-copy program with the same rules
(``distinct_features`` for F, ``distinct_values`` for FV), with optbinning's time limit of the run
(10 s for one answer, 30 s for several). The hierarchical runs (H(1,0), H(0,1)) have no
counterpart: counterplan weighs the two terms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.scorecards import build_scorecard, objective_data, paper_objective
from counterplan.planning import ClassGoal, CounterfactualProblem
from counterplan.planning.distance import DistanceSettings
from counterplan.solver.core.config import SolverConfig
from counterplan.solver.counterfactual import explain
from counterplan.solver.engines import exact_config
from counterplan.solver.exact.config import ExactPhaseConfig

CACHE = Path(__file__).resolve().parent / ".cache"
TARGET = "__good__"


def _ours(
    scorecard: Any, train: pd.DataFrame, row: dict[str, Any], setting: dict[str, Any]
) -> tuple[list[dict[str, Any]], float, Any]:
    """counterplan's answers to one optbinning run's question, and the solve's wall time."""
    k = int(setting["n_cf"])
    diversity = setting.get("diversity") or ""
    config = exact_config(
        SolverConfig(
            phases=(
                ExactPhaseConfig(
                    time_limit_seconds=float(setting.get("time_limit") or 30.0),  # optbinning's own limit
                    answer_set="copies",
                    distinct_features="F" in diversity.replace("FV", ""),
                    distinct_values="FV" in diversity,
                ),
            )
        )
    )
    problem = CounterfactualProblem.from_dataframe(
        train,
        row,
        scorecard,
        [ClassGoal(target=1, confidence=float(setting.get("y") or 0.5), margin=0.0)],
        target=TARGET,
        immutable=list(setting.get("non_actionable") or []),
        distance=DistanceSettings(metric="scorecard", alpha=1.0, beta=1.0),
        max_changed_features=int(setting["max_changes"]),
    )
    started = time.perf_counter()
    result = explain(problem, config, seed=0, num_counterfactuals=k, engine="exact")
    seconds = time.perf_counter() - started
    rows = [c.proposed for c in result.counterfactuals] if k > 1 else [result.proposed]
    return rows, seconds, result


def compare(dataset: str, single_queries: int | None, reference_file: Path | None = None) -> list[dict[str, Any]]:
    """Every weighted optbinning run of ``dataset`` (in ``reference_file``), answered by both."""
    path = reference_file or CACHE / f"optbinning-{dataset}.json"
    reference = json.loads(path.read_text(encoding="utf-8"))
    scorecard, X_train, y_train, _, _ = build_scorecard(dataset)
    train = X_train.assign(**{TARGET: np.asarray(y_train)})
    data = objective_data(scorecard, X_train)
    queries = reference["queries"]
    out = []
    seen: set[str] = set()
    for run in reference["runs"]:
        setting = run["setting"]
        if setting["method"] != "W":
            continue
        if setting["section"] in ("single", "pwl") and single_queries is not None and not setting["paper_query"]:
            key = str(setting["query"])
            if key not in seen and len(seen) >= single_queries:
                continue
            seen.add(key)
        row = queries[str(setting["query"])]["row"]
        rows, seconds, result = _ours(scorecard, train, row, setting)
        ours = [paper_objective(scorecard, X_train, row, r, data=data) for r in rows]
        theirs = run.get("counterfactuals") or []
        out.append(
            {
                "dataset": dataset,
                "setting": setting,
                "describe": run["describe"],
                "theirs": {
                    "status": run["status"],
                    "seconds": run["wall_s"],
                    "objective": sum(c["proximity"] + c["closeness"] for c in theirs) if theirs else None,
                    "probabilities": [c["true_probability"] for c in theirs],
                    "valid": [
                        bool(c["true_probability"] >= float(setting.get("y") or 0.5)) and bool(c.get("within_k", True))
                        for c in theirs
                    ],
                    "changed": [c["n_changed"] for c in theirs],
                    "sets": [sorted(c["changed"]) for c in theirs],
                },
                "ours": {
                    "status": result.statistics.exact.answer_set or result.statistics.exact.status
                    if result.statistics.exact is not None
                    else "none",
                    "proven": bool(result.statistics.exact is not None and result.statistics.exact.proven),
                    "seconds": seconds,
                    "objective": sum(o["proximity"] + o["closeness"] for o in ours) if result.valid else None,
                    "probabilities": [o["probability"] for o in ours],
                    "valid": [bool(o["probability"] >= float(setting.get("y") or 0.5)) for o in ours]
                    if result.valid
                    else [],
                    "changed": [o["n_changed"] for o in ours],
                    "sets": [sorted(o["changed"]) for o in ours],
                    "reason": result.statistics.exact.answer_set_reason if result.statistics.exact else "",
                },
            }
        )
        print(f"{dataset} {run['describe']}: done in {seconds:.2f} s", file=sys.stderr)
    return out


def _verdict(entry: dict[str, Any]) -> str:
    theirs, ours = entry["theirs"], entry["ours"]
    k = int(entry["setting"]["n_cf"])
    their_ok = theirs["objective"] is not None and len(theirs["valid"]) == k and all(theirs["valid"])
    our_ok = ours["objective"] is not None and len(ours["valid"]) == k and all(ours["valid"])
    if k > 1:  # a set: ours only when the set program found one
        our_ok = our_ok and str(ours["status"]).lower() in ("optimal", "feasible")
        rules = entry["setting"].get("diversity") or ""
        sets = [tuple(x) for x in theirs.get("sets", [])]
        if their_ok and "F" in rules.replace("FV", "") and len(set(sets)) < len(sets):
            # optbinning counts a "change" to the same bin (occupation Other -> Other) as a change
            their_ok = False
            if our_ok:
                return "theirs repeat a set, ours differ"
            return "theirs repeat a set"
    if not their_ok and not our_ok:
        if str(ours["status"]).lower() == "infeasible" and str(theirs["status"]).upper() == "UNKNOWN":
            return "none: ours proves it, theirs out of time"
        return "both: none"
    if their_ok and our_ok:
        gap = ours["objective"] - theirs["objective"]
        if abs(gap) <= 1e-6 * max(1.0, abs(theirs["objective"])):
            return "same optimum"
        return "ours lower" if gap < 0 else f"ours higher by {gap:.3g}"
    if our_ok and theirs["valid"] and not all(theirs["valid"]):
        return "theirs invalid, ours valid"
    if our_ok:
        return "only ours"
    return "only theirs"


def table(entries: list[dict[str, Any]]) -> str:
    """The markdown tables: single counterfactuals summarised, several listed."""
    lines = []
    single = [e for e in entries if e["setting"]["section"] in ("single", "pwl")]
    for dataset in dict.fromkeys(e["dataset"] for e in single):
        lines.append(f"\n**{dataset}, one counterfactual** (weighted objective, proximity + closeness):\n")
        lines.append(
            "| target | K | rows | same optimum | ours lower | theirs invalid, ours valid | ours higher "
            "| none exists (both) | optbinning median s | ours median s |"
        )
        lines.append("|---|---|---|---|---|---|---|---|---|---|")
        for target in ("probability", "probability>=0.7", "binary"):
            for k in range(1, 5):
                chosen = [
                    e
                    for e in single
                    if e["dataset"] == dataset and _target(e["setting"]) == target and e["setting"]["max_changes"] == k
                ]
                if not chosen:
                    continue
                verdicts = [_verdict(e) for e in chosen]
                lines.append(
                    f"| {target} | {k} | {len(chosen)} | {verdicts.count('same optimum')} "
                    f"| {verdicts.count('ours lower')} "
                    f"| {verdicts.count('theirs invalid, ours valid')} "
                    f"| {sum(v.startswith('ours higher') for v in verdicts)} | {verdicts.count('both: none')} "
                    f"| {statistics.median(e['theirs']['seconds'] for e in chosen):.2f} "
                    f"| {statistics.median(e['ours']['seconds'] for e in chosen):.2f} |"
                )
    multi = [e for e in entries if e["setting"]["section"] not in ("single", "pwl")]
    if multi:
        lines.append("\n**Several counterfactuals** (the paper's query; objective summed over the set):\n")
        lines.append(
            "| data | target | n_cf | K | rules | optbinning: objective, P(good) min-max, s | ours: objective, "
            "P(good) min-max, s | verdict |"
        )
        lines.append("|---|---|---|---|---|---|---|---|")
        for e in multi:
            s, t, o = e["setting"], e["theirs"], e["ours"]
            rules = (s.get("diversity") or "-") + (" +NA" if s.get("non_actionable") else "")
            lines.append(
                f"| {e['dataset']} | {s['target']} | {s['n_cf']} | {s['max_changes']} | {rules} "
                f"| {_side(t)} | {_side(o)} | {_verdict(e)} |"
            )
    return "\n".join(lines)


def _with_sets(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Older results without optbinning's changed-feature sets: read them from its JSON."""
    runs: dict[tuple[str, str], list[list[str]]] = {}
    for dataset in {e["dataset"] for e in entries if "sets" not in e["theirs"]}:
        for run in json.loads((CACHE / f"optbinning-{dataset}.json").read_text(encoding="utf-8"))["runs"]:
            runs[(dataset, run["describe"])] = [sorted(c["changed"]) for c in run.get("counterfactuals") or []]
    for e in entries:
        if "sets" not in e["theirs"]:
            e["theirs"]["sets"] = runs.get((e["dataset"], e["describe"]), [])
    return entries


def _target(setting: dict[str, Any]) -> str:
    y = setting.get("y")
    return f"{setting['target']}>={y:g}" if y and setting["target"] == "probability" and y != 0.5 else setting["target"]


def _side(side: dict[str, Any]) -> str:
    if side["objective"] is None or not side["probabilities"] or str(side["status"]).lower() == "infeasible":
        return f"{side['status'].lower()}, {side['seconds']:.1f} s"
    p = side["probabilities"]
    status = str(side["status"]).lower()
    return f"{side['objective']:.3f} ({status}), {min(p):.3f}-{max(p):.3f}, {side['seconds']:.1f} s"


def main() -> None:
    """Compare, print, keep the raw results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="heloc,adult")
    parser.add_argument("--queries", type=int, help="single counterfactuals: at most this many non-paper queries")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--tables", help="print the tables of earlier results (JSON files, comma-separated)")
    parser.add_argument(
        "--reference", type=Path, help="optbinning's results (default .cache/optbinning-<dataset>.json)"
    )
    args = parser.parse_args()
    if args.tables:
        entries = [e for name in args.tables.split(",") for e in json.loads(Path(name).read_text(encoding="utf-8"))]
        print(table(_with_sets(entries)))
        return
    entries: list[dict[str, Any]] = []
    for dataset in args.datasets.split(","):
        entries += compare(dataset.strip(), args.queries, args.reference)
    name = "-".join(d.strip() for d in args.datasets.split(",")) + ("-" + args.reference.stem if args.reference else "")
    (CACHE / f"scorecard-compare-{name}.json").write_text(json.dumps(entries, indent=1, default=str), encoding="utf-8")
    print(table(entries))


if __name__ == "__main__":
    main()
