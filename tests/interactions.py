"""Data whose model rewards two changes only together, shared by the tree-pair tests."""

from __future__ import annotations

import numpy as np
import pandas as pd

FEATURES = ["a", "b", "c", "d1", "d2", "d3", "d4"]


def together_data() -> pd.DataFrame:
    """8,000 rows of seven numbers in [0, 10] (one decimal) and ``y``: a above 3 alone makes
    approval all but impossible, b above 3 alone changes nothing, both approve (0.97); c above 9
    approves alone; each d above 5 adds 0.04 to a base of 0.3."""
    rng = np.random.default_rng(0)
    n = 8000
    data = pd.DataFrame(np.round(rng.uniform(0, 10, (n, len(FEATURES))), 1), columns=FEATURES)
    p = 0.3 + 0.04 * (data[["d1", "d2", "d3", "d4"]] > 5).sum(axis=1)
    p = np.where(data.a > 3, np.where(data.b > 3, 0.97, 0.0), p)
    p = np.where(data.c > 9, 0.97, p)
    data["y"] = (rng.random(n) < p).astype(int)
    return data
