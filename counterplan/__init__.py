"""counterplan: counterfactual explanations for tabular models, solved as a constraint-planning problem.

The front door: ``import counterplan`` gives the public API of the layers below (the planning
domain, the solver, the results), ``python -m counterplan`` is the ``counterplan`` command. It
defines nothing of its own, and like the layers it loads each name on first use, so
``python -m counterplan --help`` answers at once.

>>> import counterplan
>>> problem = counterplan.CounterfactualProblem.from_dataframe(data, row, model, target="approved")
>>> result = counterplan.explain(problem, seed=0)
>>> explainer = counterplan.Explainer(model, data, target="approved")  # build once, explain many
>>> results = explainer.explain_batch("rejected")                       # a DataFrame, one row per row

The layers stay what they are: ``planning`` (the domain), ``solver`` (the engines), ``server``
(command line and gRPC service). ``counterplan.demo`` is the embedded demo.
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
        ScoreCalculator,
    )
    from planning.defaults import (
        default_goals,
    )
    from planning.distance import (
        DistanceSettings,
        FeatureStatistics,
    )
    from planning.errors import (
        CounterplanError,
        FeatureError,
        GoalError,
        InvalidInputError,
        ProblemError,
    )
    from planning.features import (
        BooleanFeature,
        CategoricalFeature,
        FloatFeature,
        IntegerFeature,
    )
    from planning.goals import (
        ClassGoal,
        OutputSpec,
        RangeGoal,
        ValueGoal,
    )
    from planning.models import (
        CallableAdapter,
        ModelAdapter,
        adapt_sklearn,
    )
    from planning.plausibility import (
        PlausibilitySettings,
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
    from solver.core.config import (
        BoundaryPolishPhaseConfig,
        ConfigError,
        FeatureScanPhaseConfig,
        ForagerConfig,
        GreatDelugeAcceptorConfig,
        HillClimbingAcceptorConfig,
        LateAcceptanceAcceptorConfig,
        LocalSearchPhaseConfig,
        MoveSelectorConfig,
        SimulatedAnnealingAcceptorConfig,
        SolverConfig,
        StepCountingHillClimbingAcceptorConfig,
        SwarmPhaseConfig,
        TabuSearchAcceptorConfig,
        TerminationConfig,
    )
    from solver.core.result import (
        BestSolutionEvent,
        Change,
        Counterfactual,
        CounterfactualResult,
        SolveStatistics,
    )
    from solver.counterfactual import (
        CounterfactualSolver,
        ModelFailureError,
        explain,
    )
    from solver.explainer import (
        Explainer,
    )
    from solver.manager import (
        SolverJob,
        SolverManager,
        SolveStatus,
    )
    from solver.plans.planner import (
        ActionPlan,
        PlanResult,
        PlanStep,
        plan,
    )
    from solver.plans.search import (
        PlanConfig,
    )

_EXPORTS: dict[str, str] = {
    "Action": "planning.actions",
    "ActionError": "planning.actions",
    "ActionPlan": "solver.plans.planner",
    "ActionSet": "planning.actions",
    "BendableScore": "planning.score",
    "BestSolutionEvent": "solver.core.result",
    "BooleanFeature": "planning.features",
    "BoundaryPolishPhaseConfig": "solver.core.config",
    "CallableAdapter": "planning.models",
    "CategoricalFeature": "planning.features",
    "Change": "solver.core.result",
    "ClassGoal": "planning.goals",
    "ConfigError": "solver.core.config",
    "CostGraph": "planning.actions",
    "Counterfactual": "solver.core.result",
    "CounterfactualProblem": "planning.problem",
    "CounterfactualResult": "solver.core.result",
    "CounterfactualSolver": "solver.counterfactual",
    "CounterplanError": "planning.errors",
    "DistanceSettings": "planning.distance",
    "Explainer": "solver.explainer",
    "FeatureError": "planning.errors",
    "FeatureScanPhaseConfig": "solver.core.config",
    "FeatureSpace": "planning.space",
    "FeatureStatistics": "planning.distance",
    "FloatFeature": "planning.features",
    "ForagerConfig": "solver.core.config",
    "GoalError": "planning.errors",
    "GreatDelugeAcceptorConfig": "solver.core.config",
    "HillClimbingAcceptorConfig": "solver.core.config",
    "IntegerFeature": "planning.features",
    "InvalidInputError": "planning.errors",
    "LateAcceptanceAcceptorConfig": "solver.core.config",
    "LocalSearchPhaseConfig": "solver.core.config",
    "ModelAdapter": "planning.models",
    "ModelFailureError": "solver.counterfactual",
    "MoveSelectorConfig": "solver.core.config",
    "OutputSpec": "planning.goals",
    "PlanConfig": "solver.plans.search",
    "PlanResult": "solver.plans.planner",
    "PlanStep": "solver.plans.planner",
    "PlausibilitySettings": "planning.plausibility",
    "ProblemError": "planning.errors",
    "RangeGoal": "planning.goals",
    "ScoreCalculator": "planning.calculator",
    "SimulatedAnnealingAcceptorConfig": "solver.core.config",
    "SolveStatistics": "solver.core.result",
    "SolveStatus": "solver.manager",
    "SolverConfig": "solver.core.config",
    "SolverJob": "solver.manager",
    "SolverManager": "solver.manager",
    "StepCountingHillClimbingAcceptorConfig": "solver.core.config",
    "SwarmPhaseConfig": "solver.core.config",
    "TabuSearchAcceptorConfig": "solver.core.config",
    "TerminationConfig": "solver.core.config",
    "ValueGoal": "planning.goals",
    "adapt_sklearn": "planning.models",
    "default_goals": "planning.defaults",
    "explain": "solver.counterfactual",
    "plan": "solver.plans.planner",
}
"""Each public name and the module that defines it, imported on first use."""

__all__ = [
    "Action",
    "ActionError",
    "ActionPlan",
    "ActionSet",
    "BendableScore",
    "BestSolutionEvent",
    "BooleanFeature",
    "BoundaryPolishPhaseConfig",
    "CallableAdapter",
    "CategoricalFeature",
    "Change",
    "ClassGoal",
    "ConfigError",
    "CostGraph",
    "Counterfactual",
    "CounterfactualProblem",
    "CounterfactualResult",
    "CounterfactualSolver",
    "CounterplanError",
    "DistanceSettings",
    "Explainer",
    "FeatureError",
    "FeatureScanPhaseConfig",
    "FeatureSpace",
    "FeatureStatistics",
    "FloatFeature",
    "ForagerConfig",
    "GoalError",
    "GreatDelugeAcceptorConfig",
    "HillClimbingAcceptorConfig",
    "IntegerFeature",
    "InvalidInputError",
    "LateAcceptanceAcceptorConfig",
    "LocalSearchPhaseConfig",
    "ModelAdapter",
    "ModelFailureError",
    "MoveSelectorConfig",
    "OutputSpec",
    "PlanConfig",
    "PlanResult",
    "PlanStep",
    "PlausibilitySettings",
    "ProblemError",
    "RangeGoal",
    "ScoreCalculator",
    "SimulatedAnnealingAcceptorConfig",
    "SolveStatistics",
    "SolveStatus",
    "SolverConfig",
    "SolverJob",
    "SolverManager",
    "StepCountingHillClimbingAcceptorConfig",
    "SwarmPhaseConfig",
    "TabuSearchAcceptorConfig",
    "TerminationConfig",
    "ValueGoal",
    "adapt_sklearn",
    "default_goals",
    "explain",
    "plan",
]


__getattr__, __dir__ = attach(__name__, _EXPORTS, __all__)
