"""A program whose goal is a constant the held features decide: the exact engine proves it
infeasible (it used to raise while building the program, so the row ended in an error)."""

from __future__ import annotations

import itertools

import pandas as pd
import pytest
from sklearn.tree import DecisionTreeClassifier

from counterplan.solver.core.config import SolverConfig
from counterplan.solver.exact.config import ExactPhaseConfig
from counterplan.solver.exact.milp import INF, Milp
from counterplan.solver.explainer import Explainer

pytest.importorskip("highspy")


def test_a_constant_row_that_fails_is_an_infeasible_row() -> None:
    milp = Milp()
    x = milp.var("x", 0.0, 1.0)
    milp.row({x: 0.0}, 1.0, INF)  # 0 >= 1: cannot hold
    assert milp.rows and all(milp.lower[v] == milp.upper[v] == 0.0 for v in milp.rows[-1][0])
    milp.row({}, -1.0, 1.0)  # 0 in [-1, 1]: holds, nothing added
    assert len(milp.rows) == 1


@pytest.mark.parametrize("backend", ["highs", "cpsat", "auto"])
def test_a_tree_decided_by_an_immutable_is_proven_infeasible(backend: str) -> None:
    """Approved only when c >= 1; c is immutable and 0: every leaf the row can reach says no."""
    if backend == "cpsat":
        pytest.importorskip("ortools")
    cells = pd.DataFrame(list(itertools.product(range(4), range(4), range(3))), columns=["a", "b", "c"])
    cells["y"] = ((cells.a + cells.b >= 3) & (cells.c >= 1)).astype(int)
    model = DecisionTreeClassifier(random_state=0).fit(cells[["a", "b", "c"]], cells["y"])
    config = SolverConfig(phases=(ExactPhaseConfig(backend=backend),))
    explainer = Explainer(model, cells, target="y", immutable=["c"], config=config)
    result = explainer.explain(0)  # a = b = c = 0
    exact = result.statistics.exact
    assert exact is not None and (exact.status, exact.proven) == ("infeasible", True)
    assert not result.valid and "proved" in (result.note or "")
    assert explainer.explain(int(cells.index[(cells.c == 1) & (cells.a == 0)][0])).valid  # c = 1 can
