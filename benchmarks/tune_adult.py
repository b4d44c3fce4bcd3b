"""Tune counterplan's solver configuration on the adult data and compare on held-out rows.

The model is compare.py's gradient-boosting pipeline on adult (``../shared/data/adult.csv``,
never copied into the project). Rejected test rows are shuffled with a fixed seed; the first
``--rows`` tune, the next ``--heldout`` judge the tuned configuration against the default at the
same time budget per row. The study is stored in SQLite (``--storage``), so it can be resumed or
opened in optuna-dashboard. Distance: MAD-scaled L1; immutable: age, sex, race, native-country.

Run: ``python benchmarks/tune_adult.py --trials 30 --budget 0.25``
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import optuna
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import GradientBoostingClassifier
from sklearn.model_selection import train_test_split
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder

from counterplan.planning import ClassGoal, CounterfactualProblem, DistanceSettings
from counterplan.solver.tuning import tune

CATEGORICAL = ["workclass", "marital-status", "occupation", "relationship", "race", "sex", "native-country"]
IMMUTABLE = ["age", "sex", "race", "native-country"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--rows", type=int, default=12)
    parser.add_argument("--heldout", type=int, default=12)
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--budget", type=float, default=0.25)
    parser.add_argument("--storage", default="sqlite:///adult-tuning.db")
    parser.add_argument("--study-name", default="adult")
    args = parser.parse_args()
    data = pd.read_csv(args.data_dir / "adult.csv")
    train, test = train_test_split(data, test_size=0.25, random_state=0)
    train = train.sample(n=8000, random_state=0)
    features = [c for c in data.columns if c != "income"]
    numeric = [c for c in features if c not in CATEGORICAL]
    model = Pipeline(
        [
            (
                "encode",
                ColumnTransformer(
                    [("c", OneHotEncoder(handle_unknown="ignore"), CATEGORICAL), ("n", "passthrough", numeric)]
                ),
            ),
            ("classify", GradientBoostingClassifier(n_estimators=100, max_depth=3, random_state=0)),
        ]
    ).fit(train[features], train["income"])
    rejected = test[model.predict(test[features]) == 0]
    order = np.random.default_rng(0).permutation(len(rejected))[: args.rows + args.heldout]
    problems = [
        CounterfactualProblem.from_dataframe(
            train,
            {c: rejected.iloc[i][c] for c in features},
            model,
            [ClassGoal(target=1)],
            target="income",
            immutable=IMMUTABLE,
            distance=DistanceSettings(metric="mad_l1"),
        )
        for i in order
    ]
    optuna.logging.set_verbosity(optuna.logging.WARNING)

    def progress(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        print(f"trial {trial.number}: {trial.value if trial.value is not None else trial.state.name}", file=sys.stderr)

    report = tune(
        problems[: args.rows],
        problems[args.rows :],
        n_trials=args.trials,
        budget_seconds=args.budget,
        storage=args.storage,
        study_name=args.study_name,
        on_trial=progress,
    )
    complete = [t for t in report.study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    pruned = sum(t.state == optuna.trial.TrialState.PRUNED for t in report.study.trials)
    print(
        f"{len(report.study.trials)} trials ({len(complete)} complete, {pruned} pruned); best objective "
        f"{report.best_value:.4f}; best engine {min(complete, key=lambda t: t.value).params['engine']}"
    )
    print("top importances: " + ", ".join(f"{k} {v:.2f}" for k, v in list(report.importances.items())[:5]))
    print(f"held-out ({args.heldout} rows, {args.budget} s per row):")
    print(f"{'configuration':<14} {'objective':>9} {'validity':>8} {'MAD-L1':>8} {'changed':>7} {'median s':>8}")
    for label, e in (("default", report.default_heldout), ("tuned", report.tuned_heldout)):
        assert e is not None
        print(
            f"{label:<14} {e.mean_cost:>9.4f} {e.validity:>8.0%} {e.mean_distance:>8.4f} {e.mean_changed:>7.2f}"
            f" {e.median_seconds:>8.3f}"
        )
    Path("adult-tuned.yaml").write_text(report.best_config.to_yaml(), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
