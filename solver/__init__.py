"""counterplan's search engines: local-search phases, termination, events, the solver manager.

The engines know a problem only through :mod:`counterplan.solver.core.protocol`;
:mod:`counterplan.solver.counterfactual` bridges them to :mod:`counterplan.planning`.

Names load on first use (PEP 562), as in :mod:`planning`, so importing one engine module
does not load them all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from counterplan.planning._lazy import attach
from counterplan.solver import phases as _phases  # noqa: F401 - registers the phase types counterplan ships

if TYPE_CHECKING:
    from counterplan.planning.errors import ModelFailureError
    from counterplan.solver.core.config import ConfigError, SolverConfig, TerminationConfig
    from counterplan.solver.counterfactual import (
        CounterfactualSolver,
        explain,
    )
    from counterplan.solver.explainer import Explainer
    from counterplan.solver.local.config import (
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
    from counterplan.solver.result import BestSolutionEvent, Change, CounterfactualResult, SolveStatistics

_EXPORTS: dict[str, str] = {
    "ActionPlan": "counterplan.solver.plans.planner",
    "BestSolutionEvent": "counterplan.solver.result",
    "Change": "counterplan.solver.result",
    "ConfigError": "counterplan.solver.core.config",
    "CounterfactualResult": "counterplan.solver.result",
    "CounterfactualSolver": "counterplan.solver.counterfactual",
    "Explainer": "counterplan.solver.explainer",
    "ForagerConfig": "counterplan.solver.local.config",
    "GreatDelugeAcceptorConfig": "counterplan.solver.local.config",
    "HillClimbingAcceptorConfig": "counterplan.solver.local.config",
    "LateAcceptanceAcceptorConfig": "counterplan.solver.local.config",
    "LocalSearchPhaseConfig": "counterplan.solver.local.config",
    "ModelFailureError": "counterplan.planning.errors",
    "MoveSelectorConfig": "counterplan.solver.local.config",
    "PlanConfig": "counterplan.solver.plans.search",
    "PlanResult": "counterplan.solver.plans.planner",
    "PlanStep": "counterplan.solver.plans.planner",
    "SimulatedAnnealingAcceptorConfig": "counterplan.solver.local.config",
    "SolveStatistics": "counterplan.solver.result",
    "SolveStatus": "counterplan.solver.manager",
    "SolverConfig": "counterplan.solver.core.config",
    "SolverJob": "counterplan.solver.manager",
    "SolverManager": "counterplan.solver.manager",
    "StepCountingHillClimbingAcceptorConfig": "counterplan.solver.local.config",
    "TabuSearchAcceptorConfig": "counterplan.solver.local.config",
    "TerminationConfig": "counterplan.solver.core.config",
    "explain": "counterplan.solver.counterfactual",
    "plan": "counterplan.solver.plans.planner",
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
