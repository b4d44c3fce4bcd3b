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

The layers are subpackages: ``counterplan.planning`` (the domain), ``counterplan.solver`` (the
engines), ``counterplan.server`` (command line and gRPC service); ``counterplan.demo`` is the
embedded demo.
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
        ScoreCalculator,
    )
    from counterplan.planning.defaults import (
        default_goals,
    )
    from counterplan.planning.distance import (
        DistanceSettings,
        FeatureStatistics,
    )
    from counterplan.planning.errors import (
        CounterplanError,
        FeatureError,
        GoalError,
        InvalidInputError,
        ModelFailureError,
        ProblemError,
    )
    from counterplan.planning.features import (
        BooleanFeature,
        CategoricalFeature,
        FloatFeature,
        IntegerFeature,
    )
    from counterplan.planning.goals import (
        ClassGoal,
        OutputSpec,
        RangeGoal,
        ValueGoal,
    )
    from counterplan.planning.models import (
        CallableAdapter,
        ModelAdapter,
        adapt_sklearn,
    )
    from counterplan.planning.plausibility import (
        PlausibilitySettings,
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
    from counterplan.solver.core.config import ConfigError, SolverConfig, TerminationConfig
    from counterplan.solver.counterfactual import (
        CounterfactualSolver,
        explain,
    )
    from counterplan.solver.explainer import (
        Explainer,
    )
    from counterplan.solver.local.config import (
        BoundaryPolishPhaseConfig,
        FeatureScanPhaseConfig,
        ForagerConfig,
        GreatDelugeAcceptorConfig,
        HillClimbingAcceptorConfig,
        LateAcceptanceAcceptorConfig,
        LocalSearchPhaseConfig,
        MoveSelectorConfig,
        SimulatedAnnealingAcceptorConfig,
        StepCountingHillClimbingAcceptorConfig,
        TabuSearchAcceptorConfig,
    )
    from counterplan.solver.manager import (
        SolverJob,
        SolverManager,
        SolveStatus,
    )
    from counterplan.solver.plans.planner import (
        ActionPlan,
        PlanResult,
        PlanStep,
        plan,
    )
    from counterplan.solver.plans.search import (
        PlanConfig,
    )
    from counterplan.solver.result import (
        BestSolutionEvent,
        Change,
        Counterfactual,
        CounterfactualResult,
        SolveStatistics,
    )
    from counterplan.solver.swarm.config import SwarmPhaseConfig

_EXPORTS: dict[str, str] = {
    "Action": "counterplan.planning.actions",
    "ActionError": "counterplan.planning.actions",
    "ActionPlan": "counterplan.solver.plans.planner",
    "ActionSet": "counterplan.planning.actions",
    "BendableScore": "counterplan.planning.score",
    "BestSolutionEvent": "counterplan.solver.result",
    "BooleanFeature": "counterplan.planning.features",
    "BoundaryPolishPhaseConfig": "counterplan.solver.local.config",
    "CallableAdapter": "counterplan.planning.models",
    "CategoricalFeature": "counterplan.planning.features",
    "Change": "counterplan.solver.result",
    "ClassGoal": "counterplan.planning.goals",
    "ConfigError": "counterplan.solver.core.config",
    "CostGraph": "counterplan.planning.actions",
    "Counterfactual": "counterplan.solver.result",
    "CounterfactualProblem": "counterplan.planning.problem",
    "CounterfactualResult": "counterplan.solver.result",
    "CounterfactualSolver": "counterplan.solver.counterfactual",
    "CounterplanError": "counterplan.planning.errors",
    "DistanceSettings": "counterplan.planning.distance",
    "Explainer": "counterplan.solver.explainer",
    "FeatureError": "counterplan.planning.errors",
    "FeatureScanPhaseConfig": "counterplan.solver.local.config",
    "FeatureSpace": "counterplan.planning.space",
    "FeatureStatistics": "counterplan.planning.distance",
    "FloatFeature": "counterplan.planning.features",
    "ForagerConfig": "counterplan.solver.local.config",
    "GoalError": "counterplan.planning.errors",
    "GreatDelugeAcceptorConfig": "counterplan.solver.local.config",
    "HillClimbingAcceptorConfig": "counterplan.solver.local.config",
    "IntegerFeature": "counterplan.planning.features",
    "InvalidInputError": "counterplan.planning.errors",
    "LateAcceptanceAcceptorConfig": "counterplan.solver.local.config",
    "LocalSearchPhaseConfig": "counterplan.solver.local.config",
    "ModelAdapter": "counterplan.planning.models",
    "ModelFailureError": "counterplan.planning.errors",
    "MoveSelectorConfig": "counterplan.solver.local.config",
    "OutputSpec": "counterplan.planning.goals",
    "PlanConfig": "counterplan.solver.plans.search",
    "PlanResult": "counterplan.solver.plans.planner",
    "PlanStep": "counterplan.solver.plans.planner",
    "PlausibilitySettings": "counterplan.planning.plausibility",
    "ProblemError": "counterplan.planning.errors",
    "RangeGoal": "counterplan.planning.goals",
    "ScoreCalculator": "counterplan.planning.calculator",
    "SimulatedAnnealingAcceptorConfig": "counterplan.solver.local.config",
    "SolveStatistics": "counterplan.solver.result",
    "SolveStatus": "counterplan.solver.manager",
    "SolverConfig": "counterplan.solver.core.config",
    "SolverJob": "counterplan.solver.manager",
    "SolverManager": "counterplan.solver.manager",
    "StepCountingHillClimbingAcceptorConfig": "counterplan.solver.local.config",
    "SwarmPhaseConfig": "counterplan.solver.swarm.config",
    "TabuSearchAcceptorConfig": "counterplan.solver.local.config",
    "TerminationConfig": "counterplan.solver.core.config",
    "ValueGoal": "counterplan.planning.goals",
    "adapt_sklearn": "counterplan.planning.models",
    "default_goals": "counterplan.planning.defaults",
    "explain": "counterplan.solver.counterfactual",
    "plan": "counterplan.solver.plans.planner",
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
