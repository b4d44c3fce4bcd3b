"""The phase types counterplan ships, one registration line each (:mod:`counterplan.solver.core.registry`).

Everything is named by ``"module:name"`` and imported only when a configuration uses the type, so
importing the solver loads no engine (and no MILP solver). A new phase type is its own package
plus one line like these.
"""

from __future__ import annotations

from counterplan.solver.core.registry import register_phase_type, set_default_phases

register_phase_type(
    "local_search",
    config="counterplan.solver.local.config:LocalSearchPhaseConfig",
    factory="counterplan.solver.local.factory:LocalSearchPhaseFactory",
)
register_phase_type(
    "feature_scan",
    config="counterplan.solver.local.config:FeatureScanPhaseConfig",
    factory="counterplan.solver.local.factory:FeatureScanPhaseFactory",
)
register_phase_type(
    "boundary_polish",
    config="counterplan.solver.local.config:BoundaryPolishPhaseConfig",
    factory="counterplan.solver.local.factory:BoundaryPolishPhaseFactory",
)
register_phase_type(
    "exact",
    config="counterplan.solver.exact.config:ExactPhaseConfig",
    factory="counterplan.solver.exact.factory:ExactPhaseFactory",
)
register_phase_type(
    "swarm",
    config="counterplan.solver.swarm.config:SwarmPhaseConfig",
    factory="counterplan.solver.swarm.factory:SwarmPhaseFactory",
)
set_default_phases("counterplan.solver.local.config:default_phases")
