from google.rpc import status_pb2 as _status_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class FeatureType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FEATURE_TYPE_UNSPECIFIED: _ClassVar[FeatureType]
    FEATURE_TYPE_INTEGER: _ClassVar[FeatureType]
    FEATURE_TYPE_FLOAT: _ClassVar[FeatureType]
    FEATURE_TYPE_CATEGORICAL: _ClassVar[FeatureType]
    FEATURE_TYPE_BOOLEAN: _ClassVar[FeatureType]

class Monotone(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MONOTONE_UNSPECIFIED: _ClassVar[Monotone]
    MONOTONE_INCREASE: _ClassVar[Monotone]
    MONOTONE_DECREASE: _ClassVar[Monotone]

class Engine(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ENGINE_UNSPECIFIED: _ClassVar[Engine]
    ENGINE_TABU_SEARCH: _ClassVar[Engine]
    ENGINE_HILL_CLIMBING: _ClassVar[Engine]
    ENGINE_LATE_ACCEPTANCE: _ClassVar[Engine]
    ENGINE_SIMULATED_ANNEALING: _ClassVar[Engine]
    ENGINE_GREAT_DELUGE: _ClassVar[Engine]
    ENGINE_STEP_COUNTING_HILL_CLIMBING: _ClassVar[Engine]

class EngineChoice(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ENGINE_CHOICE_UNSPECIFIED: _ClassVar[EngineChoice]
    ENGINE_CHOICE_LOCAL: _ClassVar[EngineChoice]
    ENGINE_CHOICE_EXACT: _ClassVar[EngineChoice]
    ENGINE_CHOICE_AUTO: _ClassVar[EngineChoice]
    ENGINE_CHOICE_SWARM: _ClassVar[EngineChoice]

class DistanceMetric(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DISTANCE_METRIC_UNSPECIFIED: _ClassVar[DistanceMetric]
    DISTANCE_METRIC_RANGE_L1: _ClassVar[DistanceMetric]
    DISTANCE_METRIC_MAD_L1: _ClassVar[DistanceMetric]
    DISTANCE_METRIC_SD_SQUARED: _ClassVar[DistanceMetric]
    DISTANCE_METRIC_SCORECARD: _ClassVar[DistanceMetric]

class Stage(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STAGE_UNSPECIFIED: _ClassVar[Stage]
    STAGE_INTERMEDIATE: _ClassVar[Stage]
    STAGE_FINAL: _ClassVar[Stage]

class ActionKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACTION_KIND_UNSPECIFIED: _ClassVar[ActionKind]
    ACTION_KIND_ADD: _ClassVar[ActionKind]
    ACTION_KIND_SET: _ClassVar[ActionKind]
FEATURE_TYPE_UNSPECIFIED: FeatureType
FEATURE_TYPE_INTEGER: FeatureType
FEATURE_TYPE_FLOAT: FeatureType
FEATURE_TYPE_CATEGORICAL: FeatureType
FEATURE_TYPE_BOOLEAN: FeatureType
MONOTONE_UNSPECIFIED: Monotone
MONOTONE_INCREASE: Monotone
MONOTONE_DECREASE: Monotone
ENGINE_UNSPECIFIED: Engine
ENGINE_TABU_SEARCH: Engine
ENGINE_HILL_CLIMBING: Engine
ENGINE_LATE_ACCEPTANCE: Engine
ENGINE_SIMULATED_ANNEALING: Engine
ENGINE_GREAT_DELUGE: Engine
ENGINE_STEP_COUNTING_HILL_CLIMBING: Engine
ENGINE_CHOICE_UNSPECIFIED: EngineChoice
ENGINE_CHOICE_LOCAL: EngineChoice
ENGINE_CHOICE_EXACT: EngineChoice
ENGINE_CHOICE_AUTO: EngineChoice
ENGINE_CHOICE_SWARM: EngineChoice
DISTANCE_METRIC_UNSPECIFIED: DistanceMetric
DISTANCE_METRIC_RANGE_L1: DistanceMetric
DISTANCE_METRIC_MAD_L1: DistanceMetric
DISTANCE_METRIC_SD_SQUARED: DistanceMetric
DISTANCE_METRIC_SCORECARD: DistanceMetric
STAGE_UNSPECIFIED: Stage
STAGE_INTERMEDIATE: Stage
STAGE_FINAL: Stage
ACTION_KIND_UNSPECIFIED: ActionKind
ACTION_KIND_ADD: ActionKind
ACTION_KIND_SET: ActionKind

class FeatureValue(_message.Message):
    __slots__ = ("number_value", "integer_value", "category_value", "bool_value", "missing")
    NUMBER_VALUE_FIELD_NUMBER: _ClassVar[int]
    INTEGER_VALUE_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_VALUE_FIELD_NUMBER: _ClassVar[int]
    BOOL_VALUE_FIELD_NUMBER: _ClassVar[int]
    MISSING_FIELD_NUMBER: _ClassVar[int]
    number_value: float
    integer_value: int
    category_value: str
    bool_value: bool
    missing: bool
    def __init__(self, number_value: _Optional[float] = ..., integer_value: _Optional[int] = ..., category_value: _Optional[str] = ..., bool_value: _Optional[bool] = ..., missing: _Optional[bool] = ...) -> None: ...

class FeatureDomain(_message.Message):
    __slots__ = ("low", "high", "categories")
    LOW_FIELD_NUMBER: _ClassVar[int]
    HIGH_FIELD_NUMBER: _ClassVar[int]
    CATEGORIES_FIELD_NUMBER: _ClassVar[int]
    low: float
    high: float
    categories: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, low: _Optional[float] = ..., high: _Optional[float] = ..., categories: _Optional[_Iterable[str]] = ...) -> None: ...

class FeatureOverride(_message.Message):
    __slots__ = ("name", "domain", "constrained", "monotone", "cost", "allowed_values", "precision", "fill_missing", "allowed_categories", "forbidden")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    CONSTRAINED_FIELD_NUMBER: _ClassVar[int]
    MONOTONE_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_VALUES_FIELD_NUMBER: _ClassVar[int]
    PRECISION_FIELD_NUMBER: _ClassVar[int]
    FILL_MISSING_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_CATEGORIES_FIELD_NUMBER: _ClassVar[int]
    FORBIDDEN_FIELD_NUMBER: _ClassVar[int]
    name: str
    domain: FeatureDomain
    constrained: bool
    monotone: Monotone
    cost: float
    allowed_values: _containers.RepeatedScalarFieldContainer[float]
    precision: int
    fill_missing: bool
    allowed_categories: _containers.RepeatedScalarFieldContainer[str]
    forbidden: _containers.RepeatedCompositeFieldContainer[FeatureValue]
    def __init__(self, name: _Optional[str] = ..., domain: _Optional[_Union[FeatureDomain, _Mapping]] = ..., constrained: _Optional[bool] = ..., monotone: _Optional[_Union[Monotone, str]] = ..., cost: _Optional[float] = ..., allowed_values: _Optional[_Iterable[float]] = ..., precision: _Optional[int] = ..., fill_missing: _Optional[bool] = ..., allowed_categories: _Optional[_Iterable[str]] = ..., forbidden: _Optional[_Iterable[_Union[FeatureValue, _Mapping]]] = ...) -> None: ...

class Goal(_message.Message):
    __slots__ = ("output", "class_target", "value_target", "range_target")
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    CLASS_TARGET_FIELD_NUMBER: _ClassVar[int]
    VALUE_TARGET_FIELD_NUMBER: _ClassVar[int]
    RANGE_TARGET_FIELD_NUMBER: _ClassVar[int]
    output: str
    class_target: ClassTarget
    value_target: ValueTarget
    range_target: RangeTarget
    def __init__(self, output: _Optional[str] = ..., class_target: _Optional[_Union[ClassTarget, _Mapping]] = ..., value_target: _Optional[_Union[ValueTarget, _Mapping]] = ..., range_target: _Optional[_Union[RangeTarget, _Mapping]] = ...) -> None: ...

class ClassTarget(_message.Message):
    __slots__ = ("label", "confidence", "margin")
    LABEL_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    MARGIN_FIELD_NUMBER: _ClassVar[int]
    label: str
    confidence: float
    margin: float
    def __init__(self, label: _Optional[str] = ..., confidence: _Optional[float] = ..., margin: _Optional[float] = ...) -> None: ...

class ValueTarget(_message.Message):
    __slots__ = ("value", "tolerance")
    VALUE_FIELD_NUMBER: _ClassVar[int]
    TOLERANCE_FIELD_NUMBER: _ClassVar[int]
    value: float
    tolerance: float
    def __init__(self, value: _Optional[float] = ..., tolerance: _Optional[float] = ...) -> None: ...

class RangeTarget(_message.Message):
    __slots__ = ("low", "high")
    LOW_FIELD_NUMBER: _ClassVar[int]
    HIGH_FIELD_NUMBER: _ClassVar[int]
    low: float
    high: float
    def __init__(self, low: _Optional[float] = ..., high: _Optional[float] = ...) -> None: ...

class Termination(_message.Message):
    __slots__ = ("spent_limit_seconds", "unimproved_spent_limit_seconds", "step_count_limit", "unimproved_step_count_limit", "best_score_limit", "score_calculation_count_limit")
    SPENT_LIMIT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    UNIMPROVED_SPENT_LIMIT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    STEP_COUNT_LIMIT_FIELD_NUMBER: _ClassVar[int]
    UNIMPROVED_STEP_COUNT_LIMIT_FIELD_NUMBER: _ClassVar[int]
    BEST_SCORE_LIMIT_FIELD_NUMBER: _ClassVar[int]
    SCORE_CALCULATION_COUNT_LIMIT_FIELD_NUMBER: _ClassVar[int]
    spent_limit_seconds: float
    unimproved_spent_limit_seconds: float
    step_count_limit: int
    unimproved_step_count_limit: int
    best_score_limit: str
    score_calculation_count_limit: int
    def __init__(self, spent_limit_seconds: _Optional[float] = ..., unimproved_spent_limit_seconds: _Optional[float] = ..., step_count_limit: _Optional[int] = ..., unimproved_step_count_limit: _Optional[int] = ..., best_score_limit: _Optional[str] = ..., score_calculation_count_limit: _Optional[int] = ...) -> None: ...

class SolverSpec(_message.Message):
    __slots__ = ("config_json", "engine", "termination", "seed", "engine_choice", "auto_engine")
    CONFIG_JSON_FIELD_NUMBER: _ClassVar[int]
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    TERMINATION_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    ENGINE_CHOICE_FIELD_NUMBER: _ClassVar[int]
    AUTO_ENGINE_FIELD_NUMBER: _ClassVar[int]
    config_json: str
    engine: Engine
    termination: Termination
    seed: int
    engine_choice: EngineChoice
    auto_engine: AutoEngine
    def __init__(self, config_json: _Optional[str] = ..., engine: _Optional[_Union[Engine, str]] = ..., termination: _Optional[_Union[Termination, _Mapping]] = ..., seed: _Optional[int] = ..., engine_choice: _Optional[_Union[EngineChoice, str]] = ..., auto_engine: _Optional[_Union[AutoEngine, _Mapping]] = ...) -> None: ...

class AutoEngine(_message.Message):
    __slots__ = ("budget_seconds", "exact_improvement_seconds")
    BUDGET_SECONDS_FIELD_NUMBER: _ClassVar[int]
    EXACT_IMPROVEMENT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    budget_seconds: float
    exact_improvement_seconds: float
    def __init__(self, budget_seconds: _Optional[float] = ..., exact_improvement_seconds: _Optional[float] = ...) -> None: ...

class ExplainRequest(_message.Message):
    __slots__ = ("model_id", "instance", "overrides", "goals", "solver", "distance_metric", "request_id", "num_counterfactuals", "max_changed_features", "plausible", "change_penalty", "margin", "scorecard_alpha", "scorecard_beta", "trust_region")
    class InstanceEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: FeatureValue
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[FeatureValue, _Mapping]] = ...) -> None: ...
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    OVERRIDES_FIELD_NUMBER: _ClassVar[int]
    GOALS_FIELD_NUMBER: _ClassVar[int]
    SOLVER_FIELD_NUMBER: _ClassVar[int]
    DISTANCE_METRIC_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    NUM_COUNTERFACTUALS_FIELD_NUMBER: _ClassVar[int]
    MAX_CHANGED_FEATURES_FIELD_NUMBER: _ClassVar[int]
    PLAUSIBLE_FIELD_NUMBER: _ClassVar[int]
    CHANGE_PENALTY_FIELD_NUMBER: _ClassVar[int]
    MARGIN_FIELD_NUMBER: _ClassVar[int]
    SCORECARD_ALPHA_FIELD_NUMBER: _ClassVar[int]
    SCORECARD_BETA_FIELD_NUMBER: _ClassVar[int]
    TRUST_REGION_FIELD_NUMBER: _ClassVar[int]
    model_id: str
    instance: _containers.MessageMap[str, FeatureValue]
    overrides: _containers.RepeatedCompositeFieldContainer[FeatureOverride]
    goals: _containers.RepeatedCompositeFieldContainer[Goal]
    solver: SolverSpec
    distance_metric: DistanceMetric
    request_id: str
    num_counterfactuals: int
    max_changed_features: int
    plausible: bool
    change_penalty: float
    margin: float
    scorecard_alpha: float
    scorecard_beta: float
    trust_region: TrustRegion
    def __init__(self, model_id: _Optional[str] = ..., instance: _Optional[_Mapping[str, FeatureValue]] = ..., overrides: _Optional[_Iterable[_Union[FeatureOverride, _Mapping]]] = ..., goals: _Optional[_Iterable[_Union[Goal, _Mapping]]] = ..., solver: _Optional[_Union[SolverSpec, _Mapping]] = ..., distance_metric: _Optional[_Union[DistanceMetric, str]] = ..., request_id: _Optional[str] = ..., num_counterfactuals: _Optional[int] = ..., max_changed_features: _Optional[int] = ..., plausible: _Optional[bool] = ..., change_penalty: _Optional[float] = ..., margin: _Optional[float] = ..., scorecard_alpha: _Optional[float] = ..., scorecard_beta: _Optional[float] = ..., trust_region: _Optional[_Union[TrustRegion, _Mapping]] = ...) -> None: ...

class TrustRegion(_message.Message):
    __slots__ = ("nearest", "slack", "enlarge_when_infeasible")
    NEAREST_FIELD_NUMBER: _ClassVar[int]
    SLACK_FIELD_NUMBER: _ClassVar[int]
    ENLARGE_WHEN_INFEASIBLE_FIELD_NUMBER: _ClassVar[int]
    nearest: int
    slack: float
    enlarge_when_infeasible: bool
    def __init__(self, nearest: _Optional[int] = ..., slack: _Optional[float] = ..., enlarge_when_infeasible: _Optional[bool] = ...) -> None: ...

class Counterfactual(_message.Message):
    __slots__ = ("proposed", "changes", "predictions", "score", "valid", "feasible")
    class ProposedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: FeatureValue
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[FeatureValue, _Mapping]] = ...) -> None: ...
    PROPOSED_FIELD_NUMBER: _ClassVar[int]
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    PREDICTIONS_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    VALID_FIELD_NUMBER: _ClassVar[int]
    FEASIBLE_FIELD_NUMBER: _ClassVar[int]
    proposed: _containers.MessageMap[str, FeatureValue]
    changes: _containers.RepeatedCompositeFieldContainer[FeatureChange]
    predictions: _containers.RepeatedCompositeFieldContainer[OutputPrediction]
    score: Score
    valid: bool
    feasible: bool
    def __init__(self, proposed: _Optional[_Mapping[str, FeatureValue]] = ..., changes: _Optional[_Iterable[_Union[FeatureChange, _Mapping]]] = ..., predictions: _Optional[_Iterable[_Union[OutputPrediction, _Mapping]]] = ..., score: _Optional[_Union[Score, _Mapping]] = ..., valid: _Optional[bool] = ..., feasible: _Optional[bool] = ...) -> None: ...

class FeatureChange(_message.Message):
    __slots__ = ("feature", "original", "proposed", "original_bin", "proposed_bin")
    FEATURE_FIELD_NUMBER: _ClassVar[int]
    ORIGINAL_FIELD_NUMBER: _ClassVar[int]
    PROPOSED_FIELD_NUMBER: _ClassVar[int]
    ORIGINAL_BIN_FIELD_NUMBER: _ClassVar[int]
    PROPOSED_BIN_FIELD_NUMBER: _ClassVar[int]
    feature: str
    original: FeatureValue
    proposed: FeatureValue
    original_bin: str
    proposed_bin: str
    def __init__(self, feature: _Optional[str] = ..., original: _Optional[_Union[FeatureValue, _Mapping]] = ..., proposed: _Optional[_Union[FeatureValue, _Mapping]] = ..., original_bin: _Optional[str] = ..., proposed_bin: _Optional[str] = ...) -> None: ...

class OutputPrediction(_message.Message):
    __slots__ = ("output", "probabilities", "value")
    class ProbabilitiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    PROBABILITIES_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    output: str
    probabilities: _containers.ScalarMap[str, float]
    value: float
    def __init__(self, output: _Optional[str] = ..., probabilities: _Optional[_Mapping[str, float]] = ..., value: _Optional[float] = ...) -> None: ...

class Score(_message.Message):
    __slots__ = ("hard_levels", "soft_levels", "text", "feasible")
    HARD_LEVELS_FIELD_NUMBER: _ClassVar[int]
    SOFT_LEVELS_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    FEASIBLE_FIELD_NUMBER: _ClassVar[int]
    hard_levels: _containers.RepeatedScalarFieldContainer[float]
    soft_levels: _containers.RepeatedScalarFieldContainer[float]
    text: str
    feasible: bool
    def __init__(self, hard_levels: _Optional[_Iterable[float]] = ..., soft_levels: _Optional[_Iterable[float]] = ..., text: _Optional[str] = ..., feasible: _Optional[bool] = ...) -> None: ...

class SolveStatistics(_message.Message):
    __slots__ = ("steps", "score_calculation_count", "model_call_count", "score_calculation_speed", "time_spent_seconds", "best_found_at_step", "termination_reason", "best_found_after_seconds", "engine", "engine_reason", "exact", "swarm")
    STEPS_FIELD_NUMBER: _ClassVar[int]
    SCORE_CALCULATION_COUNT_FIELD_NUMBER: _ClassVar[int]
    MODEL_CALL_COUNT_FIELD_NUMBER: _ClassVar[int]
    SCORE_CALCULATION_SPEED_FIELD_NUMBER: _ClassVar[int]
    TIME_SPENT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    BEST_FOUND_AT_STEP_FIELD_NUMBER: _ClassVar[int]
    TERMINATION_REASON_FIELD_NUMBER: _ClassVar[int]
    BEST_FOUND_AFTER_SECONDS_FIELD_NUMBER: _ClassVar[int]
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    ENGINE_REASON_FIELD_NUMBER: _ClassVar[int]
    EXACT_FIELD_NUMBER: _ClassVar[int]
    SWARM_FIELD_NUMBER: _ClassVar[int]
    steps: int
    score_calculation_count: int
    model_call_count: int
    score_calculation_speed: float
    time_spent_seconds: float
    best_found_at_step: int
    termination_reason: str
    best_found_after_seconds: float
    engine: str
    engine_reason: str
    exact: ExactStatistics
    swarm: SwarmStatistics
    def __init__(self, steps: _Optional[int] = ..., score_calculation_count: _Optional[int] = ..., model_call_count: _Optional[int] = ..., score_calculation_speed: _Optional[float] = ..., time_spent_seconds: _Optional[float] = ..., best_found_at_step: _Optional[int] = ..., termination_reason: _Optional[str] = ..., best_found_after_seconds: _Optional[float] = ..., engine: _Optional[str] = ..., engine_reason: _Optional[str] = ..., exact: _Optional[_Union[ExactStatistics, _Mapping]] = ..., swarm: _Optional[_Union[SwarmStatistics, _Mapping]] = ...) -> None: ...

class SwarmStatistics(_message.Message):
    __slots__ = ("particles", "iterations", "searched", "searchable", "ranking", "searched_features", "objective", "clusters", "empty_clusters", "widened", "answers_from")
    PARTICLES_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    SEARCHED_FIELD_NUMBER: _ClassVar[int]
    SEARCHABLE_FIELD_NUMBER: _ClassVar[int]
    RANKING_FIELD_NUMBER: _ClassVar[int]
    SEARCHED_FEATURES_FIELD_NUMBER: _ClassVar[int]
    OBJECTIVE_FIELD_NUMBER: _ClassVar[int]
    CLUSTERS_FIELD_NUMBER: _ClassVar[int]
    EMPTY_CLUSTERS_FIELD_NUMBER: _ClassVar[int]
    WIDENED_FIELD_NUMBER: _ClassVar[int]
    ANSWERS_FROM_FIELD_NUMBER: _ClassVar[int]
    particles: int
    iterations: int
    searched: int
    searchable: int
    ranking: str
    searched_features: _containers.RepeatedScalarFieldContainer[str]
    objective: str
    clusters: int
    empty_clusters: int
    widened: bool
    answers_from: str
    def __init__(self, particles: _Optional[int] = ..., iterations: _Optional[int] = ..., searched: _Optional[int] = ..., searchable: _Optional[int] = ..., ranking: _Optional[str] = ..., searched_features: _Optional[_Iterable[str]] = ..., objective: _Optional[str] = ..., clusters: _Optional[int] = ..., empty_clusters: _Optional[int] = ..., widened: _Optional[bool] = ..., answers_from: _Optional[str] = ...) -> None: ...

class ExactStatistics(_message.Message):
    __slots__ = ("status", "proven", "model", "objective", "bound", "gap", "nodes", "seconds", "variables", "constraints", "verified", "retries", "reason", "backend", "answer_set", "answer_set_reason")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PROVEN_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    OBJECTIVE_FIELD_NUMBER: _ClassVar[int]
    BOUND_FIELD_NUMBER: _ClassVar[int]
    GAP_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    VARIABLES_FIELD_NUMBER: _ClassVar[int]
    CONSTRAINTS_FIELD_NUMBER: _ClassVar[int]
    VERIFIED_FIELD_NUMBER: _ClassVar[int]
    RETRIES_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    ANSWER_SET_FIELD_NUMBER: _ClassVar[int]
    ANSWER_SET_REASON_FIELD_NUMBER: _ClassVar[int]
    status: str
    proven: bool
    model: str
    objective: float
    bound: float
    gap: float
    nodes: int
    seconds: float
    variables: int
    constraints: int
    verified: bool
    retries: int
    reason: str
    backend: str
    answer_set: str
    answer_set_reason: str
    def __init__(self, status: _Optional[str] = ..., proven: _Optional[bool] = ..., model: _Optional[str] = ..., objective: _Optional[float] = ..., bound: _Optional[float] = ..., gap: _Optional[float] = ..., nodes: _Optional[int] = ..., seconds: _Optional[float] = ..., variables: _Optional[int] = ..., constraints: _Optional[int] = ..., verified: _Optional[bool] = ..., retries: _Optional[int] = ..., reason: _Optional[str] = ..., backend: _Optional[str] = ..., answer_set: _Optional[str] = ..., answer_set_reason: _Optional[str] = ...) -> None: ...

class ExplainResponse(_message.Message):
    __slots__ = ("request_id", "model_id", "proposed", "changes", "predictions", "original_predictions", "score", "valid", "feasible", "statistics", "counterfactuals", "note", "original", "requested", "failure", "blocked_by", "reaches", "already_met", "held_fixed", "feature_names", "goal", "goal_default", "stopped_early")
    class ProposedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: FeatureValue
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[FeatureValue, _Mapping]] = ...) -> None: ...
    class OriginalEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: FeatureValue
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[FeatureValue, _Mapping]] = ...) -> None: ...
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    PROPOSED_FIELD_NUMBER: _ClassVar[int]
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    PREDICTIONS_FIELD_NUMBER: _ClassVar[int]
    ORIGINAL_PREDICTIONS_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    VALID_FIELD_NUMBER: _ClassVar[int]
    FEASIBLE_FIELD_NUMBER: _ClassVar[int]
    STATISTICS_FIELD_NUMBER: _ClassVar[int]
    COUNTERFACTUALS_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    ORIGINAL_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    BLOCKED_BY_FIELD_NUMBER: _ClassVar[int]
    REACHES_FIELD_NUMBER: _ClassVar[int]
    ALREADY_MET_FIELD_NUMBER: _ClassVar[int]
    HELD_FIXED_FIELD_NUMBER: _ClassVar[int]
    FEATURE_NAMES_FIELD_NUMBER: _ClassVar[int]
    GOAL_FIELD_NUMBER: _ClassVar[int]
    GOAL_DEFAULT_FIELD_NUMBER: _ClassVar[int]
    STOPPED_EARLY_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    model_id: str
    proposed: _containers.MessageMap[str, FeatureValue]
    changes: _containers.RepeatedCompositeFieldContainer[FeatureChange]
    predictions: _containers.RepeatedCompositeFieldContainer[OutputPrediction]
    original_predictions: _containers.RepeatedCompositeFieldContainer[OutputPrediction]
    score: Score
    valid: bool
    feasible: bool
    statistics: SolveStatistics
    counterfactuals: _containers.RepeatedCompositeFieldContainer[Counterfactual]
    note: str
    original: _containers.MessageMap[str, FeatureValue]
    requested: int
    failure: str
    blocked_by: _containers.RepeatedScalarFieldContainer[str]
    reaches: bool
    already_met: bool
    held_fixed: _containers.RepeatedScalarFieldContainer[str]
    feature_names: _containers.RepeatedScalarFieldContainer[str]
    goal: str
    goal_default: str
    stopped_early: bool
    def __init__(self, request_id: _Optional[str] = ..., model_id: _Optional[str] = ..., proposed: _Optional[_Mapping[str, FeatureValue]] = ..., changes: _Optional[_Iterable[_Union[FeatureChange, _Mapping]]] = ..., predictions: _Optional[_Iterable[_Union[OutputPrediction, _Mapping]]] = ..., original_predictions: _Optional[_Iterable[_Union[OutputPrediction, _Mapping]]] = ..., score: _Optional[_Union[Score, _Mapping]] = ..., valid: _Optional[bool] = ..., feasible: _Optional[bool] = ..., statistics: _Optional[_Union[SolveStatistics, _Mapping]] = ..., counterfactuals: _Optional[_Iterable[_Union[Counterfactual, _Mapping]]] = ..., note: _Optional[str] = ..., original: _Optional[_Mapping[str, FeatureValue]] = ..., requested: _Optional[int] = ..., failure: _Optional[str] = ..., blocked_by: _Optional[_Iterable[str]] = ..., reaches: _Optional[bool] = ..., already_met: _Optional[bool] = ..., held_fixed: _Optional[_Iterable[str]] = ..., feature_names: _Optional[_Iterable[str]] = ..., goal: _Optional[str] = ..., goal_default: _Optional[str] = ..., stopped_early: _Optional[bool] = ...) -> None: ...

class ExplainStreamResponse(_message.Message):
    __slots__ = ("sequence_id", "stage", "score", "proposed", "time_spent_seconds", "step_index", "result")
    class ProposedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: FeatureValue
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[FeatureValue, _Mapping]] = ...) -> None: ...
    SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    PROPOSED_FIELD_NUMBER: _ClassVar[int]
    TIME_SPENT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    STEP_INDEX_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    sequence_id: int
    stage: Stage
    score: Score
    proposed: _containers.MessageMap[str, FeatureValue]
    time_spent_seconds: float
    step_index: int
    result: ExplainResponse
    def __init__(self, sequence_id: _Optional[int] = ..., stage: _Optional[_Union[Stage, str]] = ..., score: _Optional[_Union[Score, _Mapping]] = ..., proposed: _Optional[_Mapping[str, FeatureValue]] = ..., time_spent_seconds: _Optional[float] = ..., step_index: _Optional[int] = ..., result: _Optional[_Union[ExplainResponse, _Mapping]] = ...) -> None: ...

class ExplainBatchRequest(_message.Message):
    __slots__ = ("row_id", "request")
    ROW_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    row_id: str
    request: ExplainRequest
    def __init__(self, row_id: _Optional[str] = ..., request: _Optional[_Union[ExplainRequest, _Mapping]] = ...) -> None: ...

class ExplainBatchResponse(_message.Message):
    __slots__ = ("row_id", "response", "error")
    ROW_ID_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    row_id: str
    response: ExplainResponse
    error: _status_pb2.Status
    def __init__(self, row_id: _Optional[str] = ..., response: _Optional[_Union[ExplainResponse, _Mapping]] = ..., error: _Optional[_Union[_status_pb2.Status, _Mapping]] = ...) -> None: ...

class ListModelsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListModelsResponse(_message.Message):
    __slots__ = ("models",)
    MODELS_FIELD_NUMBER: _ClassVar[int]
    models: _containers.RepeatedCompositeFieldContainer[ModelSummary]
    def __init__(self, models: _Optional[_Iterable[_Union[ModelSummary, _Mapping]]] = ...) -> None: ...

class ModelSummary(_message.Message):
    __slots__ = ("id", "version", "description")
    ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    id: str
    version: str
    description: str
    def __init__(self, id: _Optional[str] = ..., version: _Optional[str] = ..., description: _Optional[str] = ...) -> None: ...

class GetModelRequest(_message.Message):
    __slots__ = ("model_id",)
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    model_id: str
    def __init__(self, model_id: _Optional[str] = ...) -> None: ...

class FeatureSchema(_message.Message):
    __slots__ = ("name", "type", "domain", "immutable", "monotone", "cost", "precision")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    IMMUTABLE_FIELD_NUMBER: _ClassVar[int]
    MONOTONE_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    PRECISION_FIELD_NUMBER: _ClassVar[int]
    name: str
    type: FeatureType
    domain: FeatureDomain
    immutable: bool
    monotone: Monotone
    cost: float
    precision: int
    def __init__(self, name: _Optional[str] = ..., type: _Optional[_Union[FeatureType, str]] = ..., domain: _Optional[_Union[FeatureDomain, _Mapping]] = ..., immutable: _Optional[bool] = ..., monotone: _Optional[_Union[Monotone, str]] = ..., cost: _Optional[float] = ..., precision: _Optional[int] = ...) -> None: ...

class OutputSchema(_message.Message):
    __slots__ = ("name", "classes")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CLASSES_FIELD_NUMBER: _ClassVar[int]
    name: str
    classes: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., classes: _Optional[_Iterable[str]] = ...) -> None: ...

class Model(_message.Message):
    __slots__ = ("id", "version", "description", "features", "outputs", "default_solver_config_json")
    ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_SOLVER_CONFIG_JSON_FIELD_NUMBER: _ClassVar[int]
    id: str
    version: str
    description: str
    features: _containers.RepeatedCompositeFieldContainer[FeatureSchema]
    outputs: _containers.RepeatedCompositeFieldContainer[OutputSchema]
    default_solver_config_json: str
    def __init__(self, id: _Optional[str] = ..., version: _Optional[str] = ..., description: _Optional[str] = ..., features: _Optional[_Iterable[_Union[FeatureSchema, _Mapping]]] = ..., outputs: _Optional[_Iterable[_Union[OutputSchema, _Mapping]]] = ..., default_solver_config_json: _Optional[str] = ...) -> None: ...

class Action(_message.Message):
    __slots__ = ("name", "feature", "kind", "low", "high", "values", "consequences", "effort", "pre", "post")
    class ConsequencesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    FEATURE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    LOW_FIELD_NUMBER: _ClassVar[int]
    HIGH_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    CONSEQUENCES_FIELD_NUMBER: _ClassVar[int]
    EFFORT_FIELD_NUMBER: _ClassVar[int]
    PRE_FIELD_NUMBER: _ClassVar[int]
    POST_FIELD_NUMBER: _ClassVar[int]
    name: str
    feature: str
    kind: ActionKind
    low: float
    high: float
    values: _containers.RepeatedCompositeFieldContainer[FeatureValue]
    consequences: _containers.ScalarMap[str, str]
    effort: str
    pre: str
    post: str
    def __init__(self, name: _Optional[str] = ..., feature: _Optional[str] = ..., kind: _Optional[_Union[ActionKind, str]] = ..., low: _Optional[float] = ..., high: _Optional[float] = ..., values: _Optional[_Iterable[_Union[FeatureValue, _Mapping]]] = ..., consequences: _Optional[_Mapping[str, str]] = ..., effort: _Optional[str] = ..., pre: _Optional[str] = ..., post: _Optional[str] = ...) -> None: ...

class CostEdge(_message.Message):
    __slots__ = ("source", "target", "tau")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    TAU_FIELD_NUMBER: _ClassVar[int]
    source: str
    target: str
    tau: str
    def __init__(self, source: _Optional[str] = ..., target: _Optional[str] = ..., tau: _Optional[str] = ...) -> None: ...

class PlanSearch(_message.Message):
    __slots__ = ("population", "generations", "mutant_share", "bias", "seed", "time_limit_seconds")
    POPULATION_FIELD_NUMBER: _ClassVar[int]
    GENERATIONS_FIELD_NUMBER: _ClassVar[int]
    MUTANT_SHARE_FIELD_NUMBER: _ClassVar[int]
    BIAS_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    TIME_LIMIT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    population: int
    generations: int
    mutant_share: float
    bias: float
    seed: int
    time_limit_seconds: float
    def __init__(self, population: _Optional[int] = ..., generations: _Optional[int] = ..., mutant_share: _Optional[float] = ..., bias: _Optional[float] = ..., seed: _Optional[int] = ..., time_limit_seconds: _Optional[float] = ...) -> None: ...

class PlanRequest(_message.Message):
    __slots__ = ("model_id", "instance", "overrides", "goals", "actions", "graph", "search", "request_id", "margin", "max_changed_features", "max_plans", "plausible", "trust_region")
    class InstanceEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: FeatureValue
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[FeatureValue, _Mapping]] = ...) -> None: ...
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    OVERRIDES_FIELD_NUMBER: _ClassVar[int]
    GOALS_FIELD_NUMBER: _ClassVar[int]
    ACTIONS_FIELD_NUMBER: _ClassVar[int]
    GRAPH_FIELD_NUMBER: _ClassVar[int]
    SEARCH_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    MARGIN_FIELD_NUMBER: _ClassVar[int]
    MAX_CHANGED_FEATURES_FIELD_NUMBER: _ClassVar[int]
    MAX_PLANS_FIELD_NUMBER: _ClassVar[int]
    PLAUSIBLE_FIELD_NUMBER: _ClassVar[int]
    TRUST_REGION_FIELD_NUMBER: _ClassVar[int]
    model_id: str
    instance: _containers.MessageMap[str, FeatureValue]
    overrides: _containers.RepeatedCompositeFieldContainer[FeatureOverride]
    goals: _containers.RepeatedCompositeFieldContainer[Goal]
    actions: _containers.RepeatedCompositeFieldContainer[Action]
    graph: _containers.RepeatedCompositeFieldContainer[CostEdge]
    search: PlanSearch
    request_id: str
    margin: float
    max_changed_features: int
    max_plans: int
    plausible: bool
    trust_region: TrustRegion
    def __init__(self, model_id: _Optional[str] = ..., instance: _Optional[_Mapping[str, FeatureValue]] = ..., overrides: _Optional[_Iterable[_Union[FeatureOverride, _Mapping]]] = ..., goals: _Optional[_Iterable[_Union[Goal, _Mapping]]] = ..., actions: _Optional[_Iterable[_Union[Action, _Mapping]]] = ..., graph: _Optional[_Iterable[_Union[CostEdge, _Mapping]]] = ..., search: _Optional[_Union[PlanSearch, _Mapping]] = ..., request_id: _Optional[str] = ..., margin: _Optional[float] = ..., max_changed_features: _Optional[int] = ..., max_plans: _Optional[int] = ..., plausible: _Optional[bool] = ..., trust_region: _Optional[_Union[TrustRegion, _Mapping]] = ...) -> None: ...

class PlanStep(_message.Message):
    __slots__ = ("action", "feature", "before", "after", "cost", "state", "prediction", "goal_met", "consequences")
    class StateEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: FeatureValue
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[FeatureValue, _Mapping]] = ...) -> None: ...
    ACTION_FIELD_NUMBER: _ClassVar[int]
    FEATURE_FIELD_NUMBER: _ClassVar[int]
    BEFORE_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PREDICTION_FIELD_NUMBER: _ClassVar[int]
    GOAL_MET_FIELD_NUMBER: _ClassVar[int]
    CONSEQUENCES_FIELD_NUMBER: _ClassVar[int]
    action: str
    feature: str
    before: FeatureValue
    after: FeatureValue
    cost: float
    state: _containers.MessageMap[str, FeatureValue]
    prediction: float
    goal_met: bool
    consequences: _containers.RepeatedCompositeFieldContainer[FeatureChange]
    def __init__(self, action: _Optional[str] = ..., feature: _Optional[str] = ..., before: _Optional[_Union[FeatureValue, _Mapping]] = ..., after: _Optional[_Union[FeatureValue, _Mapping]] = ..., cost: _Optional[float] = ..., state: _Optional[_Mapping[str, FeatureValue]] = ..., prediction: _Optional[float] = ..., goal_met: _Optional[bool] = ..., consequences: _Optional[_Iterable[_Union[FeatureChange, _Mapping]]] = ...) -> None: ...

class ActionPlan(_message.Message):
    __slots__ = ("steps", "total_cost", "distance", "valid")
    STEPS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_COST_FIELD_NUMBER: _ClassVar[int]
    DISTANCE_FIELD_NUMBER: _ClassVar[int]
    VALID_FIELD_NUMBER: _ClassVar[int]
    steps: _containers.RepeatedCompositeFieldContainer[PlanStep]
    total_cost: float
    distance: float
    valid: bool
    def __init__(self, steps: _Optional[_Iterable[_Union[PlanStep, _Mapping]]] = ..., total_cost: _Optional[float] = ..., distance: _Optional[float] = ..., valid: _Optional[bool] = ...) -> None: ...

class PlanResponse(_message.Message):
    __slots__ = ("request_id", "model_id", "original", "original_prediction", "plans", "cheapest", "short_plan", "generations", "stopped_early", "model_calls", "time_spent_seconds", "feature_names", "front_size", "already_met", "failure", "goal", "goal_default", "cost_failure")
    class OriginalEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: FeatureValue
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[FeatureValue, _Mapping]] = ...) -> None: ...
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    ORIGINAL_FIELD_NUMBER: _ClassVar[int]
    ORIGINAL_PREDICTION_FIELD_NUMBER: _ClassVar[int]
    PLANS_FIELD_NUMBER: _ClassVar[int]
    CHEAPEST_FIELD_NUMBER: _ClassVar[int]
    SHORT_PLAN_FIELD_NUMBER: _ClassVar[int]
    GENERATIONS_FIELD_NUMBER: _ClassVar[int]
    STOPPED_EARLY_FIELD_NUMBER: _ClassVar[int]
    MODEL_CALLS_FIELD_NUMBER: _ClassVar[int]
    TIME_SPENT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    FEATURE_NAMES_FIELD_NUMBER: _ClassVar[int]
    FRONT_SIZE_FIELD_NUMBER: _ClassVar[int]
    ALREADY_MET_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    GOAL_FIELD_NUMBER: _ClassVar[int]
    GOAL_DEFAULT_FIELD_NUMBER: _ClassVar[int]
    COST_FAILURE_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    model_id: str
    original: _containers.MessageMap[str, FeatureValue]
    original_prediction: float
    plans: _containers.RepeatedCompositeFieldContainer[ActionPlan]
    cheapest: int
    short_plan: int
    generations: int
    stopped_early: bool
    model_calls: int
    time_spent_seconds: float
    feature_names: _containers.RepeatedScalarFieldContainer[str]
    front_size: int
    already_met: bool
    failure: str
    goal: str
    goal_default: str
    cost_failure: str
    def __init__(self, request_id: _Optional[str] = ..., model_id: _Optional[str] = ..., original: _Optional[_Mapping[str, FeatureValue]] = ..., original_prediction: _Optional[float] = ..., plans: _Optional[_Iterable[_Union[ActionPlan, _Mapping]]] = ..., cheapest: _Optional[int] = ..., short_plan: _Optional[int] = ..., generations: _Optional[int] = ..., stopped_early: _Optional[bool] = ..., model_calls: _Optional[int] = ..., time_spent_seconds: _Optional[float] = ..., feature_names: _Optional[_Iterable[str]] = ..., front_size: _Optional[int] = ..., already_met: _Optional[bool] = ..., failure: _Optional[str] = ..., goal: _Optional[str] = ..., goal_default: _Optional[str] = ..., cost_failure: _Optional[str] = ...) -> None: ...

class FrontPoint(_message.Message):
    __slots__ = ("cost", "distance", "feature_changes")
    COST_FIELD_NUMBER: _ClassVar[int]
    DISTANCE_FIELD_NUMBER: _ClassVar[int]
    FEATURE_CHANGES_FIELD_NUMBER: _ClassVar[int]
    cost: float
    distance: float
    feature_changes: int
    def __init__(self, cost: _Optional[float] = ..., distance: _Optional[float] = ..., feature_changes: _Optional[int] = ...) -> None: ...

class PlanStreamResponse(_message.Message):
    __slots__ = ("sequence_id", "stage", "generation", "front", "front_size", "time_spent_seconds", "result")
    SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    FRONT_FIELD_NUMBER: _ClassVar[int]
    FRONT_SIZE_FIELD_NUMBER: _ClassVar[int]
    TIME_SPENT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    sequence_id: int
    stage: Stage
    generation: int
    front: _containers.RepeatedCompositeFieldContainer[FrontPoint]
    front_size: int
    time_spent_seconds: float
    result: PlanResponse
    def __init__(self, sequence_id: _Optional[int] = ..., stage: _Optional[_Union[Stage, str]] = ..., generation: _Optional[int] = ..., front: _Optional[_Iterable[_Union[FrontPoint, _Mapping]]] = ..., front_size: _Optional[int] = ..., time_spent_seconds: _Optional[float] = ..., result: _Optional[_Union[PlanResponse, _Mapping]] = ...) -> None: ...

class AuditRow(_message.Message):
    __slots__ = ("row_id", "values")
    class ValuesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: FeatureValue
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[FeatureValue, _Mapping]] = ...) -> None: ...
    ROW_ID_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    row_id: str
    values: _containers.MessageMap[str, FeatureValue]
    def __init__(self, row_id: _Optional[str] = ..., values: _Optional[_Mapping[str, FeatureValue]] = ...) -> None: ...

class AuditRows(_message.Message):
    __slots__ = ("rows",)
    ROWS_FIELD_NUMBER: _ClassVar[int]
    rows: _containers.RepeatedCompositeFieldContainer[AuditRow]
    def __init__(self, rows: _Optional[_Iterable[_Union[AuditRow, _Mapping]]] = ...) -> None: ...

class AuditRequest(_message.Message):
    __slots__ = ("model_id", "inline", "selection", "groups", "problem", "seed", "prove", "prove_seconds", "bootstrap", "confidence", "retrain", "request_id")
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    INLINE_FIELD_NUMBER: _ClassVar[int]
    SELECTION_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    PROBLEM_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    PROVE_FIELD_NUMBER: _ClassVar[int]
    PROVE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    BOOTSTRAP_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    RETRAIN_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    model_id: str
    inline: AuditRows
    selection: str
    groups: _containers.RepeatedScalarFieldContainer[str]
    problem: ExplainRequest
    seed: int
    prove: bool
    prove_seconds: float
    bootstrap: int
    confidence: float
    retrain: int
    request_id: str
    def __init__(self, model_id: _Optional[str] = ..., inline: _Optional[_Union[AuditRows, _Mapping]] = ..., selection: _Optional[str] = ..., groups: _Optional[_Iterable[str]] = ..., problem: _Optional[_Union[ExplainRequest, _Mapping]] = ..., seed: _Optional[int] = ..., prove: _Optional[bool] = ..., prove_seconds: _Optional[float] = ..., bootstrap: _Optional[int] = ..., confidence: _Optional[float] = ..., retrain: _Optional[int] = ..., request_id: _Optional[str] = ...) -> None: ...

class AuditProgress(_message.Message):
    __slots__ = ("stage", "rows_done", "rows_total", "with_recourse", "no_recourse_proven")
    STAGE_FIELD_NUMBER: _ClassVar[int]
    ROWS_DONE_FIELD_NUMBER: _ClassVar[int]
    ROWS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    WITH_RECOURSE_FIELD_NUMBER: _ClassVar[int]
    NO_RECOURSE_PROVEN_FIELD_NUMBER: _ClassVar[int]
    stage: str
    rows_done: int
    rows_total: int
    with_recourse: int
    no_recourse_proven: int
    def __init__(self, stage: _Optional[str] = ..., rows_done: _Optional[int] = ..., rows_total: _Optional[int] = ..., with_recourse: _Optional[int] = ..., no_recourse_proven: _Optional[int] = ...) -> None: ...

class AuditGroupValue(_message.Message):
    __slots__ = ("column", "value", "n", "with_recourse", "no_recourse_proven", "no_recourse_unproven", "recourse_rate", "cost_mean", "cost_median", "cost_ratio", "no_recourse_ratio")
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    WITH_RECOURSE_FIELD_NUMBER: _ClassVar[int]
    NO_RECOURSE_PROVEN_FIELD_NUMBER: _ClassVar[int]
    NO_RECOURSE_UNPROVEN_FIELD_NUMBER: _ClassVar[int]
    RECOURSE_RATE_FIELD_NUMBER: _ClassVar[int]
    COST_MEAN_FIELD_NUMBER: _ClassVar[int]
    COST_MEDIAN_FIELD_NUMBER: _ClassVar[int]
    COST_RATIO_FIELD_NUMBER: _ClassVar[int]
    NO_RECOURSE_RATIO_FIELD_NUMBER: _ClassVar[int]
    column: str
    value: str
    n: int
    with_recourse: int
    no_recourse_proven: int
    no_recourse_unproven: int
    recourse_rate: float
    cost_mean: float
    cost_median: float
    cost_ratio: float
    no_recourse_ratio: float
    def __init__(self, column: _Optional[str] = ..., value: _Optional[str] = ..., n: _Optional[int] = ..., with_recourse: _Optional[int] = ..., no_recourse_proven: _Optional[int] = ..., no_recourse_unproven: _Optional[int] = ..., recourse_rate: _Optional[float] = ..., cost_mean: _Optional[float] = ..., cost_median: _Optional[float] = ..., cost_ratio: _Optional[float] = ..., no_recourse_ratio: _Optional[float] = ...) -> None: ...

class AuditResult(_message.Message):
    __slots__ = ("request_id", "model_id", "recourse_rate", "n_rows", "skipped_already_met", "with_recourse", "no_recourse_proven", "no_recourse_unproven", "already_met", "errors", "cost_mean", "cost_median", "groups", "partial", "stopped_by", "report_json", "note", "time_spent_seconds")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    RECOURSE_RATE_FIELD_NUMBER: _ClassVar[int]
    N_ROWS_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_ALREADY_MET_FIELD_NUMBER: _ClassVar[int]
    WITH_RECOURSE_FIELD_NUMBER: _ClassVar[int]
    NO_RECOURSE_PROVEN_FIELD_NUMBER: _ClassVar[int]
    NO_RECOURSE_UNPROVEN_FIELD_NUMBER: _ClassVar[int]
    ALREADY_MET_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    COST_MEAN_FIELD_NUMBER: _ClassVar[int]
    COST_MEDIAN_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    PARTIAL_FIELD_NUMBER: _ClassVar[int]
    STOPPED_BY_FIELD_NUMBER: _ClassVar[int]
    REPORT_JSON_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    TIME_SPENT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    model_id: str
    recourse_rate: float
    n_rows: int
    skipped_already_met: int
    with_recourse: _containers.RepeatedScalarFieldContainer[str]
    no_recourse_proven: _containers.RepeatedScalarFieldContainer[str]
    no_recourse_unproven: _containers.RepeatedScalarFieldContainer[str]
    already_met: _containers.RepeatedScalarFieldContainer[str]
    errors: _containers.RepeatedScalarFieldContainer[str]
    cost_mean: float
    cost_median: float
    groups: _containers.RepeatedCompositeFieldContainer[AuditGroupValue]
    partial: bool
    stopped_by: str
    report_json: str
    note: str
    time_spent_seconds: float
    def __init__(self, request_id: _Optional[str] = ..., model_id: _Optional[str] = ..., recourse_rate: _Optional[float] = ..., n_rows: _Optional[int] = ..., skipped_already_met: _Optional[int] = ..., with_recourse: _Optional[_Iterable[str]] = ..., no_recourse_proven: _Optional[_Iterable[str]] = ..., no_recourse_unproven: _Optional[_Iterable[str]] = ..., already_met: _Optional[_Iterable[str]] = ..., errors: _Optional[_Iterable[str]] = ..., cost_mean: _Optional[float] = ..., cost_median: _Optional[float] = ..., groups: _Optional[_Iterable[_Union[AuditGroupValue, _Mapping]]] = ..., partial: _Optional[bool] = ..., stopped_by: _Optional[str] = ..., report_json: _Optional[str] = ..., note: _Optional[str] = ..., time_spent_seconds: _Optional[float] = ...) -> None: ...

class AuditResponse(_message.Message):
    __slots__ = ("sequence_id", "stage", "progress", "result")
    SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    sequence_id: int
    stage: Stage
    progress: AuditProgress
    result: AuditResult
    def __init__(self, sequence_id: _Optional[int] = ..., stage: _Optional[_Union[Stage, str]] = ..., progress: _Optional[_Union[AuditProgress, _Mapping]] = ..., result: _Optional[_Union[AuditResult, _Mapping]] = ...) -> None: ...
