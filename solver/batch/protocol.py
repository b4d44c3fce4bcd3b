"""What a batch needs from the explainer it runs: the model, the data, the settings, a solver per row.

The batch machinery (:mod:`counterplan.solver.batch.run`, :mod:`~counterplan.solver.batch.block`,
:mod:`~counterplan.solver.batch.on_ray`) sits below :class:`counterplan.solver.explainer.Explainer`:
the explainer's ``explain_batch`` hands itself to :func:`counterplan.solver.batch.run.explain_batch`.
So the batch names the explainer only through this protocol, and the arrow points one way.
"""

from __future__ import annotations

from typing import Any, Protocol

import pandas as pd

from counterplan.planning.calculator import ModelCalls
from counterplan.planning.model_protocol import ModelAdapter
from counterplan.planning.problem import CounterfactualProblem
from counterplan.solver.core.config import SolverConfig
from counterplan.solver.engines import EngineChoice
from counterplan.solver.result import CounterfactualResult


class RowSolve(Protocol):
    """One row's solver, ready to run."""

    def solve(self) -> CounterfactualResult:
        """Run the search; the row's result."""
        ...

    def terminate_early(self) -> None:
        """Stop the running search at its next step (from any thread); the best so far comes back."""
        ...


class RowExplainer(Protocol):
    """A model, its training data and settings, read once, that gives a solver for any row
    (:class:`counterplan.solver.explainer.Explainer` is one)."""

    @property
    def adapter(self) -> ModelAdapter:
        """The model, adapted once; every solve of a block shares its calls."""
        ...

    @property
    def data(self) -> pd.DataFrame | None:
        """The training data: the rows a selection by position picks from (None: a schema's
        explainer, which explains the rows it is given)."""
        ...

    @property
    def columns(self) -> list[str]:
        """The features in model order: the only columns of a row its problem reads (a batch's
        rows may hold others, such as an id or a group column, which it leaves out)."""
        ...

    @property
    def seed(self) -> int | None:
        """The default seed of a batch."""
        ...

    @property
    def question(self) -> str:
        """The fingerprint of what every row is asked (each record holds it)."""
        ...

    @property
    def engine(self) -> EngineChoice | None:
        """The engine choice of every solve."""
        ...

    @property
    def config(self) -> SolverConfig:
        """The solver configuration of every solve."""
        ...

    def problem(self, row: int | dict[str, Any] | pd.Series, *, trust_region: bool = True) -> CounterfactualProblem:
        """The problem of the data's row at position ``row``, or of a row's values as a dict or a
        Series (its features name the record's columns; the vectorised engine searches a block's
        problems together, and the selection of rejected rows reads them as a Series)."""
        ...

    def solver(self, row: dict[str, Any], *, seed: int | None = None, calls: ModelCalls | None = None) -> RowSolve:
        """A solver for ``row`` with its own seed, its model calls made through ``calls``."""
        ...
