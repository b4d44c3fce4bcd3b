"""Two exact-engine cases shared by the solver's tests and the gRPC service's (issue 28).

- A hard forest: 100 trees of depth 6 on 20 features (heloc-like), whose program (about 8,900
  variables, 28,000 rows) HiGHS cannot prove in seconds. Its presolve's probing and its root
  node's cut separation check no clock: the phase overran a 3 s time limit by 1.3 s and a 6 s
  one by 5-9 s before the phase held its limit.
- A needless change: a logistic regression whose goal is met by raising ``y`` one step with
  ``x`` kept at its original 2.25, off its one-decimal grid, by 1e-9 in the logit. The program
  keeps its goal ``goal_epsilon`` (1e-6) inside the threshold, so its optimum also moves ``x``
  onto the grid (2.3): a change the scored problem does not need.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pandas as pd
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression

FOREST_FEATURES = 20


def forest_data() -> tuple[pd.DataFrame, npt.NDArray[np.int64]]:
    """Synthetic rows (seeded): a noisy linear rule with a wiggle, 2,000 rows."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, FOREST_FEATURES))
    w = rng.normal(size=FOREST_FEATURES)
    y = ((X @ w + 0.5 * np.sin(3 * X[:, 0]) + rng.normal(0, 1.0, X.shape[0])) > 0).astype(int)
    return pd.DataFrame(X, columns=[f"f{j}" for j in range(FOREST_FEATURES)]), y


def hard_forest() -> tuple[RandomForestClassifier, dict[str, float]]:
    """The fitted forest and a rejected row (probability near 0.2), rounded to its grid."""
    frame, y = forest_data()
    model = RandomForestClassifier(n_estimators=100, max_depth=6, random_state=0, n_jobs=1).fit(frame, y)
    proba = model.predict_proba(frame)[:, 1]
    i = int(np.argmin(np.abs(proba - 0.2)))
    return model, {name: round(float(frame.iloc[i][name]), 2) for name in frame.columns}


FOREST_LOW, FOREST_HIGH, FOREST_PRECISION = -4.0, 4.0, 2

NEEDLESS_ORIGINAL = {"x": 2.25, "y": 2}
"""``x`` off its one-decimal grid on [0, 10]; ``y`` an integer on [0, 10]."""
NEEDLESS_CONFIDENCE = 0.7
"""The goal: class 1 at probability 0.7, with no margin."""


def needless_model() -> LogisticRegression:
    """logit = 0.25 x + y - 3.5625 + log(7/3) + 1e-9: at (2.25, 3) the probability is 0.7 plus
    2e-10, valid; exact in binary, so the score agrees whatever the rounding."""
    frame = pd.DataFrame({"x": [0.0, 10.0, 0.0, 10.0], "y": [0, 10, 10, 0]})
    model = LogisticRegression().fit(frame, [0, 1, 1, 0])
    model.coef_ = np.array([[0.25, 1.0]])
    model.intercept_ = np.array([np.log(7.0 / 3.0) + 1e-9 - 3.5625])
    return model
