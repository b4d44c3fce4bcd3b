"""counterplan's planning domain: what a counterfactual problem is and how a candidate scores.

``import counterplan.planning`` loads numpy, pandas, pydantic and scikit-learn only; it never
imports the solver, the server, grpc or optuna.

Names load on first use (PEP 562), so ``import counterplan.planning.errors`` or the command line's
``--help`` does not pay for scikit-learn and pandas; ``from counterplan.planning import X`` works as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from counterplan.planning._lazy import attach

if TYPE_CHECKING:
    from counterplan.planning.actions import (
        Action,
        ActionError,
        ActionSet,
        CostGraph,
    )
    from counterplan.planning.calculator import (
        FAILED_PREDICTION,
        Evaluation,
        ScoreCalculator,
        reference_score,
    )
    from counterplan.planning.distance import (
        DistanceSettings,
        FeatureStatistics,
    )
    from counterplan.planning.errors import (
        CandidateError,
        CounterplanError,
        FeatureError,
        GoalError,
        InvalidInputError,
        ModelAdapterError,
        ProblemError,
        ScoreFormatError,
    )
    from counterplan.planning.features import (
        BooleanFeature,
        CategoricalFeature,
        FloatFeature,
        IntegerFeature,
        parse_feature,
    )
    from counterplan.planning.goals import (
        ClassGoal,
        OutputSpec,
        RangeGoal,
        ValueGoal,
        parse_goal,
    )
    from counterplan.planning.models import (
        CallableAdapter,
        ModelAdapter,
        SklearnClassifierAdapter,
        SklearnRegressorAdapter,
        adapt_sklearn,
    )
    from counterplan.planning.problem import (
        CounterfactualProblem,
    )
    from counterplan.planning.score import (
        BendableScore,
    )
    from counterplan.planning.space import (
        FeatureSpace,
    )
    from counterplan.planning.trust_region import (
        TrustRegion,
        TrustRegionSettings,
    )

_EXPORTS: dict[str, str] = {
    "Action": "counterplan.planning.actions",
    "ActionError": "counterplan.planning.actions",
    "ActionSet": "counterplan.planning.actions",
    "BendableScore": "counterplan.planning.score",
    "BooleanFeature": "counterplan.planning.features",
    "CallableAdapter": "counterplan.planning.models",
    "CandidateError": "counterplan.planning.errors",
    "CategoricalFeature": "counterplan.planning.features",
    "ClassGoal": "counterplan.planning.goals",
    "CostGraph": "counterplan.planning.actions",
    "CounterfactualProblem": "counterplan.planning.problem",
    "CounterplanError": "counterplan.planning.errors",
    "DistanceSettings": "counterplan.planning.distance",
    "Evaluation": "counterplan.planning.calculator",
    "FAILED_PREDICTION": "counterplan.planning.calculator",
    "FeatureError": "counterplan.planning.errors",
    "FeatureSpace": "counterplan.planning.space",
    "FeatureStatistics": "counterplan.planning.distance",
    "FloatFeature": "counterplan.planning.features",
    "GoalError": "counterplan.planning.errors",
    "IntegerFeature": "counterplan.planning.features",
    "InvalidInputError": "counterplan.planning.errors",
    "ModelAdapter": "counterplan.planning.models",
    "ModelAdapterError": "counterplan.planning.errors",
    "OutputSpec": "counterplan.planning.goals",
    "ProblemError": "counterplan.planning.errors",
    "RangeGoal": "counterplan.planning.goals",
    "ScoreCalculator": "counterplan.planning.calculator",
    "ScoreFormatError": "counterplan.planning.errors",
    "SklearnClassifierAdapter": "counterplan.planning.models",
    "SklearnRegressorAdapter": "counterplan.planning.models",
    "TrustRegion": "counterplan.planning.trust_region",
    "TrustRegionSettings": "counterplan.planning.trust_region",
    "ValueGoal": "counterplan.planning.goals",
    "adapt_sklearn": "counterplan.planning.models",
    "parse_feature": "counterplan.planning.features",
    "parse_goal": "counterplan.planning.goals",
    "reference_score": "counterplan.planning.calculator",
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
