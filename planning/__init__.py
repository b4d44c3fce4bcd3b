"""counterplan's planning domain: what a counterfactual problem is and how a candidate scores.

``import planning`` loads numpy, pandas, pydantic and scikit-learn only; it never imports the
solver, the server, grpc or optuna.
"""

from planning.calculator import FAILED_PREDICTION, Evaluation, ScoreCalculator, reference_score
from planning.distance import DistanceSettings, FeatureStatistics
from planning.errors import (
    CandidateError,
    CounterplanError,
    FeatureError,
    GoalError,
    InvalidInputError,
    ModelAdapterError,
    ProblemError,
    ScoreFormatError,
)
from planning.features import (
    BooleanFeature,
    CategoricalFeature,
    FloatFeature,
    IntegerFeature,
    parse_feature,
)
from planning.goals import ClassGoal, OutputSpec, RangeGoal, ValueGoal, parse_goal
from planning.models import (
    CallableAdapter,
    ModelAdapter,
    SklearnClassifierAdapter,
    SklearnRegressorAdapter,
    adapt_sklearn,
)
from planning.problem import CounterfactualProblem
from planning.score import BendableScore
from planning.space import FeatureSpace

__all__ = [
    "FAILED_PREDICTION",
    "BendableScore",
    "BooleanFeature",
    "CallableAdapter",
    "CandidateError",
    "CategoricalFeature",
    "ClassGoal",
    "CounterfactualProblem",
    "CounterplanError",
    "DistanceSettings",
    "Evaluation",
    "FeatureError",
    "FeatureSpace",
    "FeatureStatistics",
    "FloatFeature",
    "GoalError",
    "IntegerFeature",
    "InvalidInputError",
    "ModelAdapter",
    "ModelAdapterError",
    "OutputSpec",
    "ProblemError",
    "RangeGoal",
    "ScoreCalculator",
    "ScoreFormatError",
    "SklearnClassifierAdapter",
    "SklearnRegressorAdapter",
    "ValueGoal",
    "adapt_sklearn",
    "parse_feature",
    "parse_goal",
    "reference_score",
]
