"""What a batch found, in figures: how many rows got a valid answer, how far and how sparse the
answers are, and which features they change.

A batch of thousands of records is read through its summary first, as a model's audit starts
with its aggregate counterfactual figures ("most rejected applicants are told to lower their
debt") before single rows. The computation is pure pandas over the records
(:mod:`counterplan.solver.batch.records`) and the original rows, so it is the same for a batch just run and
for one read back from a results file, and tests need no solver.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from counterplan.solver.batch.records import PROPOSED_PREFIX, breaks_a_rule

FEATURE_COLUMNS = ("feature", "changed", "share", "median_change", "top_change", "top_change_count")
"""The columns of :attr:`BatchSummary.features`."""
_RELATIVE_TOLERANCE = 1e-9
"""Numbers closer than this (relative) count as unchanged: a value read back from a CSV may
differ from the original in its last bit."""


@dataclass(frozen=True)
class BatchSummary:
    """The figures of a batch's records.

    Attributes
    ----------
    explained:
        Records of rows that needed an answer (every status but ``already_met``).
    valid:
        Of those, the rows with a valid answer within the rules (status ``ok``).
    broke_rules:
        Rows of status ``ok`` whose answer reaches the goal only by breaking a rule (an
        immutable feature changed, more changes than allowed: :func:`~counterplan.solver.batch.records.breaks_a_rule`):
        no recourse, so counted apart from ``valid`` and left out of every figure below (they
        were counted valid, and their immutable changes listed among the features changed).
    not_found, errors, already_met:
        Records with status ``not_found``, ``error`` and ``already_met``.
    mean_distance, median_distance, mean_changes, median_changes:
        Over the valid answers; NaN when there is none.
    features:
        One row per feature (:data:`FEATURE_COLUMNS`): how many valid answers change it
        (``changed``) and their share, the median of proposed - original among them
        (``median_change``, numbers) or the most common change ``"a -> b"`` (``top_change``,
        categories and booleans) with its count; most often changed first.
    """

    explained: int
    valid: int
    broke_rules: int
    not_found: int
    errors: int
    already_met: int
    mean_distance: float
    median_distance: float
    mean_changes: float
    median_changes: float
    features: pd.DataFrame

    @property
    def valid_share(self) -> float:
        """Valid answers over the rows that needed one (NaN when none did)."""
        return self.valid / self.explained if self.explained else math.nan

    def to_dict(self) -> dict[str, Any]:
        """The figures as plain JSON-ready values (NaN as None)."""
        figures: dict[str, Any] = {
            "explained": self.explained,
            "valid": self.valid,
            "valid_share": self.valid_share,
            "broke_rules": self.broke_rules,
            "not_found": self.not_found,
            "errors": self.errors,
            "already_met": self.already_met,
            "mean_distance": self.mean_distance,
            "median_distance": self.median_distance,
            "mean_changes": self.mean_changes,
            "median_changes": self.median_changes,
        }
        rows = self.features.astype(object).to_dict(orient="records")
        return {
            **{name: _plain(value) for name, value in figures.items()},
            "features": [{str(k): _plain(v) for k, v in row.items()} for row in rows],
        }


def summarize(records: pd.DataFrame, originals: pd.DataFrame) -> BatchSummary:
    """The summary of ``records`` (one per row, as :func:`counterplan.solver.batch.explain_batch` returns them
    or as read back from its output) against ``originals``, the rows as they were, indexed by
    row id, with one column per feature."""
    status = records["status"].astype(str)
    scores = records["score"] if "score" in records.columns else pd.Series(None, index=records.index, dtype=object)
    broke = np.array([breaks_a_rule(s, score) for s, score in zip(status, scores, strict=True)], dtype=bool)
    valid = records[((status == "ok").to_numpy()) & ~broke]
    distance = pd.to_numeric(valid["distance"], errors="coerce")
    changes = pd.to_numeric(valid["changed"], errors="coerce")
    return BatchSummary(
        explained=int((status != "already_met").sum()),
        valid=len(valid),
        broke_rules=int(broke.sum()),
        not_found=int((status == "not_found").sum()),
        errors=int((status == "error").sum()),
        already_met=int((status == "already_met").sum()),
        mean_distance=_figure(distance.mean()),
        median_distance=_figure(distance.median()),
        mean_changes=_figure(changes.mean()),
        median_changes=_figure(changes.median()),
        features=feature_changes(valid, originals),
    )


def feature_changes(valid: pd.DataFrame, originals: pd.DataFrame) -> pd.DataFrame:
    """Per feature, how often the ``valid`` answers change it and how (see :class:`BatchSummary`)."""
    names = _compared(valid, originals)
    before = originals.reindex(valid["row_id"].to_numpy())
    rows = [_one_feature(name, valid[PROPOSED_PREFIX + name], before[name], len(valid)) for name in names]
    frame = pd.DataFrame(rows, columns=list(FEATURE_COLUMNS))
    frame["changed"] = frame["changed"].astype("int64")
    frame["share"] = frame["share"].astype("float64")
    frame["median_change"] = frame["median_change"].astype("float64")
    frame["top_change"] = frame["top_change"].astype("string")  # missing for numbers: <NA>
    frame["top_change_count"] = frame["top_change_count"].astype("int64")
    frame = frame.sort_values(["share", "feature"], ascending=[False, True], kind="stable")
    return frame.reset_index(drop=True)


def changed_flags(valid: pd.DataFrame, originals: pd.DataFrame) -> tuple[list[str], npt.NDArray[np.bool_]]:
    """The features compared, and per ``valid`` answer (a row, in order) and feature (a column),
    whether the answer changes it: what :func:`feature_changes` counts, for a caller that counts
    it over many subsets of the answers (an audit's group values: one :func:`feature_changes` per
    value took 8 s for 800 values of 40 features)."""
    names = _compared(valid, originals)
    before = originals.reindex(valid["row_id"].to_numpy())
    flags = np.zeros((len(valid), len(names)), dtype=bool)
    for j, name in enumerate(names):
        flags[:, j] = _changed(valid[PROPOSED_PREFIX + name], before[name]).to_numpy()
    return names, flags


def _compared(valid: pd.DataFrame, originals: pd.DataFrame) -> list[str]:
    """The features the answers propose values for and the originals hold, in the records' order."""
    names = [c[len(PROPOSED_PREFIX) :] for c in valid.columns if str(c).startswith(PROPOSED_PREFIX)]
    return [n for n in names if n in originals.columns]


def _changed(proposed: pd.Series, original: pd.Series) -> pd.Series:
    """Which answers change a feature (both reset to positions): numbers beyond a tolerance,
    categories and booleans as text."""
    proposed = proposed.reset_index(drop=True)
    original = original.reset_index(drop=True)
    numeric = _is_number(proposed) and _is_number(original)
    return _changed_numbers(proposed, original) if numeric else _changed_values(proposed, original)


def _one_feature(name: str, proposed: pd.Series, original: pd.Series, n_valid: int) -> dict[str, Any]:
    proposed = proposed.reset_index(drop=True)
    original = original.reset_index(drop=True)
    numeric = _is_number(proposed) and _is_number(original)
    changed = _changed(proposed, original)
    count = int(changed.sum())
    row: dict[str, Any] = {
        "feature": name,
        "changed": count,
        "share": count / n_valid if n_valid else math.nan,
        "median_change": math.nan,
        "top_change": None,
        "top_change_count": 0,
    }
    if count and numeric:
        difference = proposed[changed].astype("float64") - original[changed].astype("float64")
        row["median_change"] = _figure(difference.median())
    elif count:
        moves = _text(original[changed]) + " -> " + _text(proposed[changed])
        counts = moves.value_counts(sort=True)
        row["top_change"] = str(counts.index[0])
        row["top_change_count"] = int(counts.iloc[0])
    return row


def _is_number(values: pd.Series) -> bool:
    return bool(pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values))


def _changed_numbers(proposed: pd.Series, original: pd.Series) -> pd.Series:
    """Changed numbers: beyond a relative tolerance, or a gap filled (a gap kept is no change)."""
    p = proposed.astype("float64").to_numpy()
    o = original.astype("float64").to_numpy()
    same = np.isclose(p, o, rtol=_RELATIVE_TOLERANCE, atol=0.0) | (np.isnan(p) & np.isnan(o))
    return pd.Series(~same, index=proposed.index)


def _changed_values(proposed: pd.Series, original: pd.Series) -> pd.Series:
    """Changed categories and booleans, compared as text (``True`` read back from a CSV is the
    boolean it was written from)."""
    p = _text(proposed)
    o = _text(original)
    return pd.Series((p != o).to_numpy(), index=proposed.index)


def _text(values: pd.Series) -> pd.Series:
    return values.astype(object).map(_value_text).astype(object)


def _value_text(value: Any) -> str:
    """A value as a user reads it: ``5`` for 5.0, ``True`` for a boolean, ``missing`` for a gap."""
    if value is None or value is pd.NA or (isinstance(value, float | np.floating) and math.isnan(value)):
        return "missing"
    if isinstance(value, bool | np.bool_):
        return str(bool(value))
    if isinstance(value, float | np.floating) and float(value).is_integer():
        return str(int(value))
    return str(value)


def _figure(value: Any) -> float:
    """A mean or median as a float (NaN for an empty selection)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return math.nan
    return number


def _plain(value: Any) -> Any:
    """A numpy or pandas scalar as a JSON value; NaN and missing as None."""
    if value is None or value is pd.NA:
        return None
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value
