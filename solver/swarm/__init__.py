"""The particle-swarm engine (MD-PSO) for high-dimensional data: one phase of the solver.

:mod:`~counterplan.solver.swarm.positions` (scaled coordinates, the box, decoding),
:mod:`~counterplan.solver.swarm.ranking` (which features are searched),
:mod:`~counterplan.solver.swarm.velocity` (the update), :mod:`~counterplan.solver.swarm.clusters`
(several answers by k-means) and :mod:`~counterplan.solver.swarm.phase`.
"""
