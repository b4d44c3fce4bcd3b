"""The particle-swarm engine (MD-PSO) for high-dimensional data: one phase of the solver.

:mod:`~solver.swarm.positions` (scaled coordinates, the box, decoding), :mod:`~solver.swarm.ranking`
(which features are searched), :mod:`~solver.swarm.velocity` (the update),
:mod:`~solver.swarm.clusters` (several answers by k-means) and :mod:`~solver.swarm.phase`.
"""
