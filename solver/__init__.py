"""counterplan's search engines: local-search phases, termination, events, the solver manager.

The engines know a problem only through :mod:`solver.protocol`; :mod:`solver.counterfactual`
bridges them to :mod:`planning`.

Names load on first use (PEP 562), as in :mod:`planning`, so importing one engine module
does not load them all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planning._lazy import attach

if TYPE_CHECKING:
    from solver.config import (
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
    from solver.counterfactual import (
        CounterfactualSolver,
        ModelFailureError,
        explain,
    )
    from solver.manager import (
        SolverJob,
        SolverManager,
        SolveStatus,
    )
    from solver.result import (
        BestSolutionEvent,
        Change,
        CounterfactualResult,
        SolveStatistics,
    )

_EXPORTS: dict[str, str] = {
    "BestSolutionEvent": "solver.result",
    "Change": "solver.result",
    "ConfigError": "solver.config",
    "CounterfactualResult": "solver.result",
    "CounterfactualSolver": "solver.counterfactual",
    "ForagerConfig": "solver.config",
    "GreatDelugeAcceptorConfig": "solver.config",
    "HillClimbingAcceptorConfig": "solver.config",
    "LateAcceptanceAcceptorConfig": "solver.config",
    "LocalSearchPhaseConfig": "solver.config",
    "ModelFailureError": "solver.counterfactual",
    "MoveSelectorConfig": "solver.config",
    "SimulatedAnnealingAcceptorConfig": "solver.config",
    "SolveStatistics": "solver.result",
    "SolveStatus": "solver.manager",
    "SolverConfig": "solver.config",
    "SolverJob": "solver.manager",
    "SolverManager": "solver.manager",
    "StepCountingHillClimbingAcceptorConfig": "solver.config",
    "TabuSearchAcceptorConfig": "solver.config",
    "TerminationConfig": "solver.config",
    "explain": "solver.counterfactual",
}
"""Each public name and the module that defines it, imported on first use."""

__all__ = [
    "BestSolutionEvent",
    "Change",
    "ConfigError",
    "CounterfactualResult",
    "CounterfactualSolver",
    "ForagerConfig",
    "GreatDelugeAcceptorConfig",
    "HillClimbingAcceptorConfig",
    "LateAcceptanceAcceptorConfig",
    "LocalSearchPhaseConfig",
    "ModelFailureError",
    "MoveSelectorConfig",
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
]


__getattr__, __dir__ = attach(__name__, _EXPORTS, __all__)
