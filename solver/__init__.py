"""counterplan's search engines: local-search phases, termination, events, the solver manager.

The engines know a problem only through :mod:`solver.core.protocol`; :mod:`solver.counterfactual`
bridges them to :mod:`planning`.

Names load on first use (PEP 562), as in :mod:`planning`, so importing one engine module
does not load them all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planning._lazy import attach

if TYPE_CHECKING:
    from solver.core.config import (
        ConfigError,
        ForagerConfig,
        GreatDelugeAcceptorConfig,
        HillClimbingAcceptorConfig,
        LateAcceptanceAcceptorConfig,
        LocalSearchPhaseConfig,
        MoveSelectorConfig,
        SimulatedAnnealingAcceptorConfig,
        SolverConfig,
        StepCountingHillClimbingAcceptorConfig,
        TabuSearchAcceptorConfig,
        TerminationConfig,
    )
    from solver.core.result import (
        BestSolutionEvent,
        Change,
        CounterfactualResult,
        SolveStatistics,
    )
    from solver.counterfactual import (
        CounterfactualSolver,
        ModelFailureError,
        explain,
    )
    from solver.explainer import Explainer
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
    "ActionPlan": "solver.plans.planner",
    "BestSolutionEvent": "solver.core.result",
    "Change": "solver.core.result",
    "ConfigError": "solver.core.config",
    "CounterfactualResult": "solver.core.result",
    "CounterfactualSolver": "solver.counterfactual",
    "Explainer": "solver.explainer",
    "ForagerConfig": "solver.core.config",
    "GreatDelugeAcceptorConfig": "solver.core.config",
    "HillClimbingAcceptorConfig": "solver.core.config",
    "LateAcceptanceAcceptorConfig": "solver.core.config",
    "LocalSearchPhaseConfig": "solver.core.config",
    "ModelFailureError": "solver.counterfactual",
    "MoveSelectorConfig": "solver.core.config",
    "PlanConfig": "solver.plans.search",
    "PlanResult": "solver.plans.planner",
    "PlanStep": "solver.plans.planner",
    "SimulatedAnnealingAcceptorConfig": "solver.core.config",
    "SolveStatistics": "solver.core.result",
    "SolveStatus": "solver.manager",
    "SolverConfig": "solver.core.config",
    "SolverJob": "solver.manager",
    "SolverManager": "solver.manager",
    "StepCountingHillClimbingAcceptorConfig": "solver.core.config",
    "TabuSearchAcceptorConfig": "solver.core.config",
    "TerminationConfig": "solver.core.config",
    "explain": "solver.counterfactual",
    "plan": "solver.plans.planner",
}
"""Each public name and the module that defines it, imported on first use."""

__all__ = [
    "ActionPlan",
    "BestSolutionEvent",
    "Change",
    "ConfigError",
    "CounterfactualResult",
    "CounterfactualSolver",
    "Explainer",
    "ForagerConfig",
    "GreatDelugeAcceptorConfig",
    "HillClimbingAcceptorConfig",
    "LateAcceptanceAcceptorConfig",
    "LocalSearchPhaseConfig",
    "ModelFailureError",
    "MoveSelectorConfig",
    "PlanConfig",
    "PlanResult",
    "PlanStep",
    "SimulatedAnnealingAcceptorConfig",
    "SolveStatistics",
    "SolveStatus",
    "SolverConfig",
    "SolverJob",
    "SolverManager",
    "StepCountingHillClimbingAcceptorConfig",
    "TabuSearchAcceptorConfig",
    "TerminationConfig",
    "explain",
    "plan",
]


__getattr__, __dir__ = attach(__name__, _EXPORTS, __all__)
