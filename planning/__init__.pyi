"""The planning domain's public names, each with the module that defines it: the one listing.

Type checkers read this stub; at run time ``__init__.py`` reads it too and loads each name on first
use (:func:`counterplan.planning._lazy.attach_stub`)."""

from counterplan.planning.actions import (
    Action as Action,
    ActionError as ActionError,
    ActionSet as ActionSet,
    CostGraph as CostGraph,
)
from counterplan.planning.calculator import (
    FAILED_PREDICTION as FAILED_PREDICTION,
    Evaluation as Evaluation,
    ScoreCalculator as ScoreCalculator,
    reference_score as reference_score,
)
from counterplan.planning.distance import (
    DistanceSettings as DistanceSettings,
    FeatureStatistics as FeatureStatistics,
)
from counterplan.planning.errors import (
    CandidateError as CandidateError,
    CounterplanError as CounterplanError,
    FeatureError as FeatureError,
    GoalError as GoalError,
    InvalidInputError as InvalidInputError,
    ModelAdapterError as ModelAdapterError,
    ProblemError as ProblemError,
    ScoreFormatError as ScoreFormatError,
)
from counterplan.planning.features import (
    BooleanFeature as BooleanFeature,
    CategoricalFeature as CategoricalFeature,
    FloatFeature as FloatFeature,
    IntegerFeature as IntegerFeature,
    parse_feature as parse_feature,
)
from counterplan.planning.goals import (
    ClassGoal as ClassGoal,
    OutputSpec as OutputSpec,
    RangeGoal as RangeGoal,
    ValueGoal as ValueGoal,
    parse_goal as parse_goal,
)
from counterplan.planning.models import (
    CallableAdapter as CallableAdapter,
    ModelAdapter as ModelAdapter,
    SklearnClassifierAdapter as SklearnClassifierAdapter,
    SklearnRegressorAdapter as SklearnRegressorAdapter,
    adapt_sklearn as adapt_sklearn,
)
from counterplan.planning.onnx_model import (
    OnnxModel as OnnxModel,
)
from counterplan.planning.plausibility import (
    PlausibilitySettings as PlausibilitySettings,
)
from counterplan.planning.problem import (
    CounterfactualProblem as CounterfactualProblem,
    build_problem as build_problem,
)
from counterplan.planning.profile import (
    SchemaProfile as SchemaProfile,
)
from counterplan.planning.score import (
    BendableScore as BendableScore,
)
from counterplan.planning.space import (
    FeatureSpace as FeatureSpace,
)
from counterplan.planning.spec import (
    FeatureRule as FeatureRule,
    ProblemSpec as ProblemSpec,
)
from counterplan.planning.trust_region import (
    TrustRegion as TrustRegion,
    TrustRegionSettings as TrustRegionSettings,
)
