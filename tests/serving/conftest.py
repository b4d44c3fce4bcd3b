"""A session's MLServer serving the loan pipeline (per-column inputs, the pandas codec) and a bare
gradient-boosting model on numbers (no declared inputs: one tensor), both with a text target."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import GradientBoostingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from counterplan.planning.demo import CATEGORICAL, TARGET, make_loan_data
from tests.serving.mlserver import MLServer, ServedModel, mlserver_binary, start

NUMBERS = ["age", "income", "years_employed", "credit_cards", "debt", "loan_amount"]
DATATYPES = {"int64": "INT64", "float64": "FP64", "bool": "BOOL", "object": "BYTES"}


@dataclass
class Served:
    """The server and the local twins of what it serves."""

    server: MLServer
    data: pd.DataFrame
    pipe: Pipeline
    numbers: pd.DataFrame
    gb: GradientBoostingClassifier


def loan_table() -> pd.DataFrame:
    data = make_loan_data(n=600, seed=11)
    data[TARGET] = np.where(data[TARGET] == 1, "yes", "no").astype(object)
    return data


def train_pipe(data: pd.DataFrame) -> Pipeline:
    features = data.drop(columns=[TARGET])
    numeric = [c for c in features.columns if c not in CATEGORICAL]
    pipe = Pipeline(
        [
            (
                "encode",
                ColumnTransformer(
                    [
                        ("numbers", StandardScaler(), numeric),
                        ("categories", OneHotEncoder(handle_unknown="ignore"), list(CATEGORICAL)),
                    ]
                ),
            ),
            ("classify", LogisticRegression(max_iter=2000)),
        ]
    )
    return pipe.fit(features, data[TARGET])


@pytest.fixture(scope="session")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """MLServer with ``pipe`` (declared inputs, ``content_type: pd``) and ``gb`` (nothing declared)."""
    binary = mlserver_binary()
    data = loan_table()
    pipe = train_pipe(data)
    numbers = data[[*NUMBERS, TARGET]]
    gb = GradientBoostingClassifier(n_estimators=30, max_depth=3, random_state=0)
    gb.fit(numbers[NUMBERS].to_numpy(dtype=np.float64), numbers[TARGET].to_numpy())
    features = data.drop(columns=[TARGET])
    inputs = [{"name": c, "datatype": DATATYPES[str(features[c].dtype)], "shape": [-1]} for c in features.columns]
    models = [
        ServedModel("pipe", pipe, inputs, [{"name": "predict_proba", "datatype": "FP64", "shape": [-1, 2]}], "pd"),
        ServedModel("gb", gb),
    ]
    server = start(binary, tmp_path_factory.mktemp("models"), models)
    try:
        yield Served(server, data, pipe, numbers, gb)
    finally:
        server.stop()
