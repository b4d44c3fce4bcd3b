"""The batch package's public names, each with the module that defines it: the one listing.

Type checkers read this stub; at run time ``__init__.py`` reads it too and loads each name on first
use (:func:`counterplan.planning._lazy.attach_stub`)."""

from counterplan.solver.batch.records import (
    RECORD_COLUMNS as RECORD_COLUMNS,
)
from counterplan.solver.batch.rows import (
    RowSelection as RowSelection,
    row_seed as row_seed,
)
from counterplan.solver.batch.run import (
    explain_batch as explain_batch,
)
from counterplan.solver.batch.shared_calls import (
    SharedCalls as SharedCalls,
)
