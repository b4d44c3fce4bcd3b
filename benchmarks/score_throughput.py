"""Candidate scores per second of the vectorised calculator, beside the bare model call.

For batch sizes 1, 64, 256 and 1024, on a logistic-regression pipeline and a gradient-boosting
pipeline (ColumnTransformer + OneHotEncoder, fitted on the demo loan data), it times:

* ``model``: the bare ``predict_proba`` on an already decoded DataFrame;
* ``calculator``: ``ScoreCalculator.calculate`` on the encoded matrix (bounds check, decoding
  to a DataFrame, the same model call, all five score levels);

and prints a table with rates and the calculator's overhead over the model. Goal: under 20%
at batch 256. Run: ``python benchmarks/score_throughput.py``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from counterplan.planning import ClassGoal, CounterfactualProblem, ScoreCalculator
from counterplan.planning.demo import (
    CATEGORICAL,
    IMMUTABLE,
    TARGET,
    make_loan_data,
    rejected_applicant,
    train_loan_model,
)


def _interleaved_medians(
    first: Callable[[], object], second: Callable[[], object], repeats: int
) -> tuple[float, float]:
    """Median seconds of two functions timed alternately, so machine load hits both alike."""
    first()
    second()
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeats):
        for function, bucket in ((first, times[0]), (second, times[1])):
            start = time.perf_counter()
            function()
            bucket.append(time.perf_counter() - start)
    return statistics.median(times[0]), statistics.median(times[1])


def _logistic_pipeline(numeric: list[str]) -> Pipeline:
    return Pipeline(
        [
            (
                "encode",
                ColumnTransformer(
                    [
                        ("categories", OneHotEncoder(handle_unknown="ignore"), list(CATEGORICAL)),
                        ("numbers", StandardScaler(), numeric),
                    ]
                ),
            ),
            ("classify", LogisticRegression(max_iter=1000)),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    data = make_loan_data()
    features = data.drop(columns=[TARGET])
    numeric = [c for c in features.columns if c not in CATEGORICAL]
    models = {
        "logistic regression": _logistic_pipeline(numeric).fit(features, data[TARGET]),
        "gradient boosting": train_loan_model(data),
    }
    rng = np.random.default_rng(0)
    print(
        f"{'model':<20} {'batch':>6} {'model ms':>9} {'calc ms':>9} {'overhead':>9}"
        f" {'model rows/s':>13} {'scores/s':>11}"
    )
    for label, model in models.items():
        problem = CounterfactualProblem.from_dataframe(
            data,
            rejected_applicant(),
            model,
            [ClassGoal(target=1, confidence=0.7)],
            target=TARGET,
            immutable=IMMUTABLE,
        )
        space = problem.space
        calculator = ScoreCalculator(problem)
        for batch in (1, 64, 256, 1024):
            X = np.repeat(problem.original_row(), batch, axis=0)
            for j in np.flatnonzero(space.mutable):
                values = rng.uniform(space.lower[j], space.upper[j], batch)
                X[:, j] = np.where(rng.random(batch) < 0.3, np.rint(values) if space.integral[j] else values, X[:, j])
            frame = space.to_frame(X)
            bare, full = _interleaved_medians(
                lambda m=model, f=frame: m.predict_proba(f),  # type: ignore[misc]
                lambda c=calculator, x=X: c.calculate(x),  # type: ignore[misc]
                args.repeats,
            )
            print(
                f"{label:<20} {batch:>6} {bare * 1e3:>9.2f} {full * 1e3:>9.2f} {(full / bare - 1) * 100:>8.1f}%"
                f" {batch / bare:>13,.0f} {batch / full:>11,.0f}"
            )


if __name__ == "__main__":
    main()
