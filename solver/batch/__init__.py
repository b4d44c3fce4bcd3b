"""Many problems of one model explained together (DESIGN.md, "Many instances, many machines").

The solves of a batch run in threads and share their model calls (:mod:`counterplan.solver.batch.shared_calls`),
so they step in lockstep: one model call per step for all of them. Each instance keeps its own
seed (from the global seed and its row id, :func:`counterplan.solver.batch.rows.row_seed`), termination and
result, so its answer does not depend on the batch it ran in, the number of workers or Ray.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from counterplan.planning._lazy import attach

if TYPE_CHECKING:
    from counterplan.solver.batch.records import RECORD_COLUMNS
    from counterplan.solver.batch.rows import RowSelection, row_seed
    from counterplan.solver.batch.run import explain_batch
    from counterplan.solver.batch.shared_calls import SharedCalls

_EXPORTS: dict[str, str] = {
    "RECORD_COLUMNS": "counterplan.solver.batch.records",
    "RowSelection": "counterplan.solver.batch.rows",
    "SharedCalls": "counterplan.solver.batch.shared_calls",
    "explain_batch": "counterplan.solver.batch.run",
    "row_seed": "counterplan.solver.batch.rows",
}
"""Each public name and the module that defines it, imported on first use."""

__all__ = ["RECORD_COLUMNS", "RowSelection", "SharedCalls", "explain_batch", "row_seed"]

__getattr__, __dir__ = attach(__name__, _EXPORTS, __all__)
