"""The embedded demo (:mod:`planning.demo`): a loan model trained on data counterplan generates."""

from planning.demo import (
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
