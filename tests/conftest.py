"""Shared fixtures: real scikit-learn models trained on data the tests generate.

Markers (registered in pyproject.toml): ``integration`` for a test that starts a real server on
a loopback port or a local Ray cluster (marked where it does), ``slow`` for one that takes more
than about ten seconds on a quiet 2-core machine, and ``unit`` for every other test (marked
here). ``pytest -m unit`` is the quick loop; the README's test command runs them all.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pandas as pd
import pytest
import structlog
from hypothesis import HealthCheck, settings
from sklearn.pipeline import Pipeline

from counterplan.planning import ClassGoal, CounterfactualProblem
from counterplan.planning.demo import IMMUTABLE, TARGET, make_loan_data, rejected_applicant, train_loan_model
from counterplan.solver.explainer import Explainer

# Tests must pass on a slow, busy 2-core machine, and the same way every run.
settings.register_profile(
    "counterplan",
    deadline=None,
    derandomize=True,
    max_examples=100,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("counterplan")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that starts no server and no cluster is a unit test."""
    for item in items:
        if item.get_closest_marker("integration") is None:
            item.add_marker(pytest.mark.unit)


_RAY_STARTS = 3
"""How many times :func:`local_ray` starts a cluster before it gives up."""


@pytest.fixture(scope="module")
def local_ray() -> Iterator[Any]:
    """A real local Ray with two CPUs for the module that asks for it, stopped afterwards (it takes
    several seconds to start: a module starts it once for its tests)."""
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.data")
    if ray.is_initialized():
        ray.shutdown()
    # Ray waits 30 s for its GCS server's port file, and a fixed 30 s for its raylet to register;
    # on a busy 2-core machine, right after another module's cluster stopped, each ran out once
    # in CI ("Timed out waiting for file ... gcs_server_port", a RuntimeError; "The current node
    # timed out during startup", a plain Exception): wait longer for the port file, and start
    # afresh up to twice more if the cluster still did not come up.
    os.environ.setdefault("RAY_gcs_server_port_wait_time_s", "120")
    options = {"address": "local", "num_cpus": 2, "include_dashboard": False}
    for attempt in range(_RAY_STARTS):
        try:
            ray.init(**options, log_to_driver=False, configure_logging=False)
            break
        except Exception:  # Ray's own start-up time-outs (see above); anything else recurs and is raised
            ray.shutdown()
            if attempt + 1 == _RAY_STARTS:
                raise
    yield ray
    ray.shutdown()


@pytest.fixture(autouse=True)
def _default_logging() -> Iterator[None]:
    """The command line configures structlog globally; every test starts from the defaults."""
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()


@pytest.fixture(scope="session")
def loan_data() -> pd.DataFrame:
    """The demo loan table (small, deterministic)."""
    return make_loan_data(n=1500, seed=3)


@pytest.fixture(scope="session")
def loan_model(loan_data: pd.DataFrame) -> Pipeline:
    """A gradient-boosting pipeline (ColumnTransformer + OneHotEncoder) fitted on ``loan_data``."""
    return train_loan_model(loan_data)


@pytest.fixture
def loan_problem(loan_data: pd.DataFrame, loan_model: Pipeline) -> CounterfactualProblem:
    """The demo question on ``loan_model``: approve the rejected applicant with 70% confidence."""
    return CounterfactualProblem.from_dataframe(
        loan_data,
        rejected_applicant(),
        loan_model,
        [ClassGoal(target=1, confidence=0.7)],
        target=TARGET,
        immutable=IMMUTABLE,
    )


@pytest.fixture(scope="session")
def loan_explainer(loan_data: pd.DataFrame, loan_model: Pipeline) -> Explainer:
    """The demo question on ``loan_model`` as an explainer (built once, for many rows)."""
    return Explainer(loan_model, loan_data, [ClassGoal(target=1, confidence=0.7)], target=TARGET, immutable=IMMUTABLE)


@pytest.fixture(scope="session")
def rejected_loans(loan_data: pd.DataFrame, loan_model: Pipeline) -> pd.DataFrame:
    """The rows of ``loan_data`` (features only) that ``loan_model`` rejects, in order."""
    features = loan_data.drop(columns=[TARGET])
    rows: pd.DataFrame = features[loan_model.predict(features) == 0]
    return rows


@pytest.fixture(scope="session")
def loan_features(loan_data: pd.DataFrame) -> pd.DataFrame:
    """``loan_data`` without its label column."""
    return loan_data.drop(columns=[TARGET])
