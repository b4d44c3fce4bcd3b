"""The solver's public names, each with the module that defines it: the one listing.

Type checkers read this stub; at run time ``__init__.py`` reads it too and loads each name on first
use (:func:`counterplan.planning._lazy.attach_stub`)."""

from counterplan.planning.errors import (
    ModelFailureError as ModelFailureError,
)
from counterplan.solver.core.config import (
    ConfigError as ConfigError,
    SolverConfig as SolverConfig,
    TerminationConfig as TerminationConfig,
)
from counterplan.solver.counterfactual import (
    CounterfactualSolver as CounterfactualSolver,
    explain as explain,
)
from counterplan.solver.exact.config import (
    ExactPhaseConfig as ExactPhaseConfig,
)
from counterplan.solver.explainer import (
    Explainer as Explainer,
)
from counterplan.solver.local.config import (
    ForagerConfig as ForagerConfig,
    GreatDelugeAcceptorConfig as GreatDelugeAcceptorConfig,
    HillClimbingAcceptorConfig as HillClimbingAcceptorConfig,
    LateAcceptanceAcceptorConfig as LateAcceptanceAcceptorConfig,
    LocalSearchPhaseConfig as LocalSearchPhaseConfig,
    MoveSelectorConfig as MoveSelectorConfig,
    SimulatedAnnealingAcceptorConfig as SimulatedAnnealingAcceptorConfig,
    StepCountingHillClimbingAcceptorConfig as StepCountingHillClimbingAcceptorConfig,
    TabuSearchAcceptorConfig as TabuSearchAcceptorConfig,
)
from counterplan.solver.manager import (
    SolverJob as SolverJob,
    SolverManager as SolverManager,
    SolveStatus as SolveStatus,
)
from counterplan.solver.plans.planner import (
    ActionPlan as ActionPlan,
    PlanResult as PlanResult,
    PlanStep as PlanStep,
    plan as plan,
)
from counterplan.solver.plans.search import (
    PlanConfig as PlanConfig,
)
from counterplan.solver.result import (
    BestSolutionEvent as BestSolutionEvent,
    Change as Change,
    CounterfactualResult as CounterfactualResult,
    SolveStatistics as SolveStatistics,
)
