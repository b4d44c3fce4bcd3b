"""counterplan's planning domain: what a counterfactual problem is and how a candidate scores.

``import planning`` loads numpy, pandas, pydantic and scikit-learn only; it never imports the
solver, the server, grpc or optuna.

Names load on first use (PEP 562), so ``import planning.errors`` or the command line's
``--help`` does not pay for scikit-learn and pandas; ``from planning import X`` works as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planning._lazy import attach

if TYPE_CHECKING:
    from planning.actions import (
        Action,
        ActionError,
        ActionSet,
        CostGraph,
    )
    from planning.calculator import (
        FAILED_PREDICTION,
        Evaluation,
        ScoreCalculator,
        reference_score,
    )
    from planning.distance import (
        DistanceSettings,
        FeatureStatistics,
    )
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
    from planning.goals import (
        ClassGoal,
        OutputSpec,
        RangeGoal,
        ValueGoal,
        parse_goal,
    )
    from planning.models import (
        CallableAdapter,
        ModelAdapter,
        SklearnClassifierAdapter,
        SklearnRegressorAdapter,
        adapt_sklearn,
    )
    from planning.problem import (
        CounterfactualProblem,
    )
    from planning.score import (
        BendableScore,
    )
    from planning.space import (
        FeatureSpace,
    )
    from planning.trust_region import (
        TrustRegion,
        TrustRegionSettings,
    )

_EXPORTS: dict[str, str] = {
    "Action": "planning.actions",
    "ActionError": "planning.actions",
    "ActionSet": "planning.actions",
    "BendableScore": "planning.score",
    "BooleanFeature": "planning.features",
    "CallableAdapter": "planning.models",
    "CandidateError": "planning.errors",
    "CategoricalFeature": "planning.features",
    "ClassGoal": "planning.goals",
    "CostGraph": "planning.actions",
    "CounterfactualProblem": "planning.problem",
    "CounterplanError": "planning.errors",
    "DistanceSettings": "planning.distance",
    "Evaluation": "planning.calculator",
    "FAILED_PREDICTION": "planning.calculator",
    "FeatureError": "planning.errors",
    "FeatureSpace": "planning.space",
    "FeatureStatistics": "planning.distance",
    "FloatFeature": "planning.features",
    "GoalError": "planning.errors",
    "IntegerFeature": "planning.features",
    "InvalidInputError": "planning.errors",
    "ModelAdapter": "planning.models",
    "ModelAdapterError": "planning.errors",
    "OutputSpec": "planning.goals",
    "ProblemError": "planning.errors",
    "RangeGoal": "planning.goals",
    "ScoreCalculator": "planning.calculator",
    "ScoreFormatError": "planning.errors",
    "SklearnClassifierAdapter": "planning.models",
    "SklearnRegressorAdapter": "planning.models",
    "TrustRegion": "planning.trust_region",
    "TrustRegionSettings": "planning.trust_region",
    "ValueGoal": "planning.goals",
    "adapt_sklearn": "planning.models",
    "parse_feature": "planning.features",
    "parse_goal": "planning.goals",
    "reference_score": "planning.calculator",
}
"""Each public name and the module that defines it, imported on first use."""

__all__ = [
    "Action",
    "ActionError",
    "ActionSet",
    "BendableScore",
    "BooleanFeature",
    "CallableAdapter",
    "CandidateError",
    "CategoricalFeature",
    "ClassGoal",
    "CostGraph",
    "CounterfactualProblem",
    "CounterplanError",
    "DistanceSettings",
    "Evaluation",
    "FAILED_PREDICTION",
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
    "TrustRegion",
    "TrustRegionSettings",
    "ValueGoal",
    "adapt_sklearn",
    "parse_feature",
    "parse_goal",
    "reference_score",
]


__getattr__, __dir__ = attach(__name__, _EXPORTS, __all__)
