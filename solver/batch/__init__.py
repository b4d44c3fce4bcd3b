"""Many problems of one model explained together (DESIGN.md, "Many instances, many machines").

The solves of a batch run in threads and share their model calls (:mod:`counterplan.solver.batch.shared_calls`),
so they step in lockstep: one model call per step for all of them. Each instance keeps its own
seed (from the global seed and its row id, :func:`counterplan.solver.batch.rows.row_seed`), termination and
result, so its answer does not depend on the batch it ran in, the number of workers or Ray.
"""

from __future__ import annotations

from counterplan.planning._lazy import attach_stub

__getattr__, __dir__, __all__ = attach_stub(__name__, __file__)
