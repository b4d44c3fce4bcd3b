"""counterplan's search engines: local-search phases, termination, events, the solver manager.

The engines know a problem only through :mod:`solver.protocol`; :mod:`solver.counterfactual`
bridges them to :mod:`planning`.
"""

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
from solver.counterfactual import CounterfactualSolver, ModelFailureError, explain
from solver.manager import SolverJob, SolverManager, SolveStatus
from solver.result import BestSolutionEvent, Change, CounterfactualResult, SolveStatistics

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
