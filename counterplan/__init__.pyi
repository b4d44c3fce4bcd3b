"""The front door's names, each with the module that defines it: the one listing of ``counterplan.__all__``.

What a user needs to ask a question, configure the solver, read an answer and catch an error; at
most 40 names (tests/test_front_door.py holds it). Everything else stays importable from its module
(``counterplan.solver.local.config.TabuSearchAcceptorConfig``) or from its layer's package. Type
checkers read this stub; at run time ``__init__.py`` reads it too and loads each name on first use
(:func:`counterplan.planning._lazy.attach_stub`)."""

from counterplan.planning.actions import (
    Action as Action,
    ActionSet as ActionSet,
)
from counterplan.planning.distance import (
    DistanceSettings as DistanceSettings,
)
from counterplan.planning.errors import (
    CounterplanError as CounterplanError,
    InvalidInputError as InvalidInputError,
    ModelFailureError as ModelFailureError,
    ProblemError as ProblemError,
)
from counterplan.planning.features import (
    BooleanFeature as BooleanFeature,
    CategoricalFeature as CategoricalFeature,
    FloatFeature as FloatFeature,
    IntegerFeature as IntegerFeature,
)
from counterplan.planning.goals import (
    ClassGoal as ClassGoal,
    OutputSpec as OutputSpec,
    RangeGoal as RangeGoal,
    ValueGoal as ValueGoal,
)
from counterplan.planning.models import (
    CallableAdapter as CallableAdapter,
    adapt_sklearn as adapt_sklearn,
)
from counterplan.planning.plausibility import (
    PlausibilitySettings as PlausibilitySettings,
)
from counterplan.planning.problem import (
    CounterfactualProblem as CounterfactualProblem,
)
from counterplan.planning.remote.adapter import (
    RemoteModel as RemoteModel,
)
from counterplan.planning.spec import (
    FeatureRule as FeatureRule,
    ProblemSpec as ProblemSpec,
)
from counterplan.solver.audit.runner import (
    audit as audit,
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
    LocalSearchPhaseConfig as LocalSearchPhaseConfig,
)
from counterplan.solver.manager import (
    SolverManager as SolverManager,
)
from counterplan.solver.plans.planner import (
    PlanResult as PlanResult,
    plan as plan,
)
from counterplan.solver.plans.search import (
    PlanConfig as PlanConfig,
)
from counterplan.solver.result import (
    BestSolutionEvent as BestSolutionEvent,
    Change as Change,
    Counterfactual as Counterfactual,
    CounterfactualResult as CounterfactualResult,
)
from counterplan.solver.swarm.config import (
    SwarmPhaseConfig as SwarmPhaseConfig,
)
