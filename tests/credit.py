"""A small credit table as users have it: whole-number counts, a two-decimal ratio, gaps in income.

Written to CSV and read back, the whole-number columns come back as float64 (a column with a gap
always does); a missing income is a bad sign for the label.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def credit_with_gaps(n: int = 1500, seed: int = 5) -> pd.DataFrame:
    """``income`` (whole, 20% missing), ``late`` (whole floats), ``ratio`` (2 decimals), ``home``, ``ok``."""
    rng = np.random.default_rng(seed)
    income = np.round(rng.lognormal(8.5, 0.5, n))
    late = rng.poisson(0.5, n).astype(float)
    ratio = np.round(rng.uniform(0.0, 1.5, n), 2)
    home = rng.choice(["rent", "own"], n)
    gap = rng.random(n) < 0.2
    logit = 1.5 * (np.log(income) - 8.5) - 1.3 * late - 1.2 * ratio + 0.8 - 1.5 * gap
    ok = (rng.random(n) < 1.0 / (1.0 + np.exp(-logit))).astype(int)
    income[gap] = np.nan
    return pd.DataFrame({"income": income, "late": late, "ratio": ratio, "home": home, "ok": ok})
