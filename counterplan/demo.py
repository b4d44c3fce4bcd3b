"""The embedded demo (:mod:`counterplan.planning.demo`): a loan model trained on data counterplan generates."""

from counterplan.planning.demo import (
    CATEGORICAL,
    IMMUTABLE,
    TARGET,
    demo_goals,
    make_loan_data,
    rejected_applicant,
    train_loan_model,
)

__all__ = [
    "CATEGORICAL",
    "IMMUTABLE",
    "TARGET",
    "demo_goals",
    "make_loan_data",
    "rejected_applicant",
    "train_loan_model",
]
