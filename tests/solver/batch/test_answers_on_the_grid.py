"""Found by fuzzing the vectorised engine: an answer is the row its record shows. A float with a
precision is decoded rounded to it, so every value the search scores must be on its grid (or the
original): a value a rounding error off it (2.788 + 0.001 is 2.7889999999999997, a step toward
the original that rounded to nothing) passed the grid check (it is within 1e-12 of 2.789), was
checked valid through the model and reported as 2.789, which a threshold between the two (a
histogram-boosting bin edge, here a callable's) decides otherwise."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from counterplan.planning import CallableAdapter, ClassGoal, OutputSpec
from counterplan.solver.explainer import Explainer

GOAL = [ClassGoal(target=1, confidence=0.7)]
THRESHOLD = 2.789
"""The model approves below it: 2.788 is the nearest answer on a 3-decimal grid from above."""


def _threshold_model(X: Any) -> np.ndarray:
    """Approves ``x`` strictly below :data:`THRESHOLD` (2.7889999999999997 is, 2.789 is not)."""
    approve = np.where(np.asarray(X["x"], dtype=np.float64) < THRESHOLD, 0.9, 0.1)
    return np.column_stack([1.0 - approve, approve])


def test_vectorised_answers_are_the_rows_their_records_show() -> None:
    rng = np.random.default_rng(0)
    data = pd.DataFrame({"x": rng.uniform(0, 5, 300).round(3), "z": rng.uniform(0, 5, 300).round(3)})
    data["y"] = (data["x"] < THRESHOLD).astype(int)
    adapter = CallableAdapter(_threshold_model, [OutputSpec("y", (0, 1))], input_kind="dataframe")
    explainer = Explainer(adapter, data, GOAL, target="y", immutable=["z"])
    rows = pd.DataFrame({"x": (THRESHOLD + 0.001 * np.arange(1, 30)).round(3), "z": 1.0})
    frame = explainer.explain_batch(rows, seed=0)
    assert len(frame) == len(rows) and frame["valid"].all()
    answers = frame["cf_x"].to_numpy(dtype=np.float64)
    # the record's row meets the goal through the model (before: 2.789, approved at 0.1)
    assert (_threshold_model(pd.DataFrame({"x": answers}))[:, 1] >= 0.7).all()
    assert (answers == 2.788).all()
