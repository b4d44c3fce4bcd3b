"""The embedded demo: a loan-approval model trained on data counterplan generates itself.

No download, no file: ``make_loan_data`` draws a deterministic synthetic applicant table with
every feature kind (integers, floats, categories, booleans, immutable fields), and
``train_loan_model`` fits a scikit-learn pipeline (ColumnTransformer + OneHotEncoder +
gradient boosting) on it. ``rejected_applicant`` is the row the demo explains.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import GradientBoostingClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder

from counterplan.planning.goals import ClassGoal, RangeGoal, ValueGoal
from counterplan.planning.spec import ProblemSpec

TARGET = "approved"
CATEGORICAL = ("education", "home_ownership", "purpose")
IMMUTABLE = ("age", "has_prior_default")
_EDUCATION = ("high-school", "bachelor", "master", "doctorate")
_HOME = ("rent", "mortgage", "own")
_PURPOSE = ("car", "home-improvement", "debt-consolidation", "education")


def make_loan_data(n: int = 4000, seed: int = 7) -> pd.DataFrame:
    """A synthetic loan table; the same ``n`` and ``seed`` give the same table."""
    rng = np.random.default_rng(seed)
    age = rng.integers(21, 70, n)
    education = rng.choice(len(_EDUCATION), n, p=[0.4, 0.35, 0.2, 0.05])
    income = np.round(rng.lognormal(10.4, 0.45, n) * (1 + 0.15 * education), 2)
    years_employed = np.minimum(rng.poisson(6, n), age - 18)
    credit_cards = rng.integers(0, 9, n)
    debt = np.round(rng.uniform(0, 1, n) * income * 0.8, 2)
    loan_amount = np.round(rng.uniform(2_000, 60_000, n), -2)
    home = rng.choice(len(_HOME), n, p=[0.45, 0.4, 0.15])
    purpose = rng.choice(len(_PURPOSE), n)
    has_prior_default = rng.random(n) < 0.12
    has_guarantor = rng.random(n) < 0.25
    logit = (
        2.2 * (np.log(income) - 10.4)
        - 2.8 * debt / income
        - 2.2e-5 * loan_amount
        - 0.25 * credit_cards
        + 0.08 * years_employed
        + 0.35 * education
        + 0.4 * (home == 2)
        - 1.8 * has_prior_default
        + 0.9 * has_guarantor
        + 0.9
    )
    approved = rng.random(n) < 1.0 / (1.0 + np.exp(-logit))
    return pd.DataFrame(
        {
            "age": age.astype(np.int64),
            "income": income,
            "years_employed": years_employed.astype(np.int64),
            "credit_cards": credit_cards.astype(np.int64),
            "debt": debt,
            "loan_amount": loan_amount,
            "education": np.array(_EDUCATION, dtype=object)[education],
            "home_ownership": np.array(_HOME, dtype=object)[home],
            "purpose": np.array(_PURPOSE, dtype=object)[purpose],
            "has_prior_default": has_prior_default,
            "has_guarantor": has_guarantor,
            TARGET: approved.astype(np.int64),
        }
    )


def train_loan_model(data: pd.DataFrame, seed: int = 0) -> Pipeline:
    """Fit the demo pipeline on a DataFrame from :func:`make_loan_data`."""
    features = data.drop(columns=[TARGET])
    numeric = [c for c in features.columns if c not in CATEGORICAL]
    pipeline = Pipeline(
        [
            (
                "encode",
                ColumnTransformer(
                    [
                        ("categories", OneHotEncoder(handle_unknown="ignore"), list(CATEGORICAL)),
                        ("numbers", "passthrough", numeric),
                    ],
                    sparse_threshold=0.0,
                ),
            ),
            ("classify", GradientBoostingClassifier(n_estimators=100, max_depth=3, random_state=seed)),
        ]
    )
    pipeline.fit(features, data[TARGET])
    return pipeline


def demo_goals() -> list[ClassGoal | ValueGoal | RangeGoal]:
    """The demo's question: approved, with at least 70% confidence."""
    return [ClassGoal(target=1, confidence=0.7)]


def demo_spec() -> ProblemSpec:
    """The demo model's own rules, as the served demo and every command's demo have them: its
    immutables and its question (a default: a request's goals replace it)."""
    return ProblemSpec(immutable=IMMUTABLE, goals=tuple(demo_goals()), goals_default="the demo model's question")


def rejected_applicant() -> dict[str, Any]:
    """The applicant the demo explains: rejected, with room to act."""
    return {
        "age": 34,
        "income": 38_000.0,
        "years_employed": 3,
        "credit_cards": 6,
        "debt": 26_000.0,
        "loan_amount": 30_000.0,
        "education": "high-school",
        "home_ownership": "rent",
        "purpose": "debt-consolidation",
        "has_prior_default": False,
        "has_guarantor": False,
    }


DEMO_ACTIONS: dict[str, Any] = {
    "actions": [
        {"name": "pay down debt", "feature": "debt", "kind": "add", "low": -30000, "high": -1000,
         "effort": "abs(delta) / 5000"},
        {"name": "earn more", "feature": "income", "kind": "add", "low": 1000, "high": 40000,
         "effort": "abs(delta) / 5000"},
        {"name": "close credit cards", "feature": "credit_cards", "kind": "add", "low": -5, "high": -1,
         "effort": "abs(delta) / 2"},
        {"name": "borrow less", "feature": "loan_amount", "kind": "add", "low": -25000, "high": -1000,
         "effort": "abs(delta) / 10000"},
        {"name": "find a guarantor", "feature": "has_guarantor", "kind": "set", "values": [True], "effort": 3,
         "pre": "not has_guarantor"},
        {"name": "get a degree", "feature": "education", "kind": "set", "values": ["bachelor", "master"],
         "consequences": {"income": "income * 1.15"}, "effort": '6 if after.education == "master" else 4',
         "pre": 'education == "high-school"'},
    ],
    "graph": [
        {"source": "income", "target": "debt", "tau": "clip(45000 / income, 0.5, 1)"},
        {"source": "education", "target": "income", "tau": '1 if education == "high-school" else 0.7'},
    ],
}  # fmt: skip
"""What the demo's applicant can do, as an actions file holds it (``examples/loan-demo-actions.yaml``
is the same, with comments): ``counterplan plan`` on the demo uses it when no --actions is given."""
