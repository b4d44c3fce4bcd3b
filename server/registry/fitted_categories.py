"""A LightGBM or XGBoost model fitted on pandas ``category`` columns, given its data from a CSV.

LightGBM keeps the categories of each ``category`` column it was fitted on
(``booster_.pandas_categorical``) and refuses a DataFrame whose category columns differ from
them ("train and valid dataset categorical_feature do not match"); XGBoost (``enable_categorical``)
keeps them too (``get_categories``) and refuses text columns. A CSV has no dtypes: read
from one, those columns are text or numbers, so the command line and a model card could not
explain such a model at all. :func:`with_fitted_categories` gives those columns back their
fitted categories; the explainer then hands the model category columns, as it does for data
that came as a DataFrame with them (``CategoricalFeature.category_dtype``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from counterplan.planning.errors import InvalidInputError, echo


class CategoriesError(InvalidInputError):
    """The data holds a value of a category column that the model was not fitted on."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__("data", field, problem)


def fitted_categories(model: Any) -> dict[str, list[Any]]:
    """The category columns a LightGBM or XGBoost model was fitted on, by name, each with its
    categories in the fitted order; empty for any other model (or one fitted on no category
    column)."""
    return _lightgbm_categories(model) or _xgboost_categories(model)


def _xgboost_categories(model: Any) -> dict[str, list[Any]]:
    """XGBoost (3.1 and later) keeps a model's categories, read through Arrow (pyarrow)."""
    try:
        booster = model if hasattr(model, "get_categories") else model.get_booster()
        pairs = booster.get_categories(export_to_arrow=True).to_arrow()
    except Exception:  # no XGBoost model, an older XGBoost, no pyarrow: nothing to restore
        return {}
    return {str(name): values.to_pylist() for name, values in pairs or () if values is not None}


def _lightgbm_categories(model: Any) -> dict[str, list[Any]]:
    """LightGBM keeps them as ``pandas_categorical``, in the order of its categorical features."""
    booster: Any = model if hasattr(model, "pandas_categorical") else getattr(model, "booster_", None)
    categories = getattr(booster, "pandas_categorical", None)
    if not categories or not hasattr(booster, "dump_model"):
        return {}
    infos = booster.dump_model().get("feature_infos", {})
    # LightGBM lists a categorical feature's values, a numerical one's range only
    names = [name for name, info in infos.items() if isinstance(info, dict) and info.get("values")]
    if len(names) != len(categories):  # not the layout this reads: leave the data as it is
        return {}
    return {name: list(values) for name, values in zip(names, categories, strict=True)}


def with_fitted_categories(model: Any, data: pd.DataFrame, field: str) -> pd.DataFrame:
    """``data`` with each column the model was fitted on as a ``category`` column made one again,
    with the model's own categories (a value it does not know is refused, naming ``field``, the
    column and the value: the model would read it as a gap without a word)."""
    wanted = {name: values for name, values in fitted_categories(model).items() if name in data.columns}
    if not wanted or all(isinstance(data[name].dtype, pd.CategoricalDtype) for name in wanted):
        return data
    out = data.copy()
    for name, values in wanted.items():
        column = data[name]
        if isinstance(column.dtype, pd.CategoricalDtype):
            continue
        known = pd.Index(values)
        if known.dtype == object:  # text categories: a CSV of codes reads numbers as numbers
            column = column.map(lambda v: v if pd.isna(v) else str(v))
        unknown = column[column.notna() & ~column.isin(known)]
        if len(unknown):
            shown = ", ".join(echo(v) for v in values[:10]) + (" ..." if len(values) > 10 else "")
            value = unknown.iloc[0]
            raise CategoriesError(
                field,
                f"column {echo(name)} holds {echo(value.item() if isinstance(value, np.generic) else value)}, "
                "a category the model was not fitted on "
                f"(its categories: {shown})",
            )
        out[name] = pd.Categorical(column, categories=known)
    return out
