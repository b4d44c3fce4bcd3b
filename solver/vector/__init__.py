"""The vectorised batch engine: every instance of a block searched as one array program.

Where the threads path (:mod:`counterplan.solver.batch.block`) runs one solver per row and shares
only their model calls, this engine holds a block's instances side by side in matrices
(instances x walkers x moves) and steps them all with a few dozen numpy operations and one model
call per step, so its own Python work per step does not grow with the block. Each instance keeps
its own random stream (:mod:`~counterplan.solver.vector.draws`), termination and best, so its
answer does not depend on the block it ran in.
"""
