"""The last phase of every solve: choosing what the solve returns.

:mod:`~counterplan.solver.answers.phase` (the answers phase: the best checked through the model,
then several answers when asked), :mod:`~counterplan.solver.answers.choose` (from the pool or
from an engine's picks), :mod:`~counterplan.solver.answers.routes` (other routes to the goal) and
:mod:`~counterplan.solver.answers.diversity` (the diverse choice).
"""
