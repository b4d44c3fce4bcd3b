"""The fast path and the exact engine read models with one pipeline walker, so they cannot drift:
every pipeline the fast path compiles, the exact engine encodes or refuses by name
(``NotEncodableError``), never with another exception; and ``engine="auto"`` answers on a pipeline
whose ``ColumnTransformer`` selects columns by a label slice (this used to raise ``TypeError``)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer, make_column_selector
from sklearn.ensemble import (
    GradientBoostingClassifier,
    HistGradientBoostingClassifier,
    RandomForestClassifier,
)
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import (
    FunctionTransformer,
    MaxAbsScaler,
    MinMaxScaler,
    OneHotEncoder,
    OrdinalEncoder,
    RobustScaler,
    StandardScaler,
)
from sklearn.svm import LinearSVC
from sklearn.tree import DecisionTreeClassifier
from threadpoolctl import threadpool_limits

from counterplan.planning import BooleanFeature, CategoricalFeature, ClassGoal, CounterfactualProblem, FloatFeature
from counterplan.planning.models import adapt_sklearn
from counterplan.planning.structure import kind
from counterplan.planning.structure.errors import NotEncodableError
from counterplan.solver.counterfactual import explain
from counterplan.solver.exact.encoders import ESTIMATOR_ENCODERS, estimator_encoder
from counterplan.solver.exact.formulation import build
from counterplan.solver.exact.program import evaluate

COLUMNS = ["income", "tenure", "debt", "plan", "member"]
NUMBERS = ["income", "tenure", "debt"]


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    rng = np.random.default_rng(2)
    n = 300
    out = pd.DataFrame(
        {
            "income": np.round(rng.uniform(0.0, 10.0, n), 1),
            "tenure": rng.integers(0, 15, n),
            "debt": np.round(rng.uniform(0.0, 5.0, n), 1),
            "plan": rng.choice(["basic", "silver", "gold"], n),
            "member": rng.random(n) < 0.4,
        }
    )
    score = out.income + 0.4 * out.tenure - out.debt + 1.5 * (out.plan == "gold") + out.member
    out["ok"] = (score + rng.normal(0, 0.5, n) > 6.0).astype(int)
    return out


def _dense(**kwargs: Any) -> OneHotEncoder:
    return OneHotEncoder(sparse_output=False, **kwargs)


PREPROCESSING: dict[str, Callable[[], Any]] = {
    "names, one-hot, standard scaler": lambda: ColumnTransformer(
        [("plan", _dense(handle_unknown="ignore"), ["plan", "member"]), ("numbers", StandardScaler(), NUMBERS)]
    ),
    "a label slice (inclusive end)": lambda: ColumnTransformer(
        [("numbers", StandardScaler(), slice("income", "debt")), ("plan", _dense(), ["plan"])]
    ),
    "numpy integers and a boolean mask": lambda: ColumnTransformer(
        [
            ("numbers", MinMaxScaler(), [np.int64(0), np.int64(1), np.int64(2)]),
            ("plan", _dense(drop="first"), np.array([False, False, False, True, False])),
        ]
    ),
    "an integer slice and a pass-through remainder": lambda: ColumnTransformer(
        [("numbers", RobustScaler(), slice(0, 3)), ("plan", _dense(), ["plan"])], remainder="passthrough"
    ),
    "a callable and make_column_selector": lambda: ColumnTransformer(
        [
            ("text", _dense(), make_column_selector(dtype_include=object)),
            ("numbers", MaxAbsScaler(), lambda X: NUMBERS),
        ]
    ),
    "a transformer as the remainder": lambda: ColumnTransformer(
        [("plan", _dense(), ["plan", "member"])], remainder=StandardScaler()
    ),
    "a dropped remainder": lambda: ColumnTransformer(
        [("plan", _dense(), ["plan"]), ("income", "passthrough", ["income"])]
    ),
    "nested pipelines with imputers": lambda: ColumnTransformer(
        [
            ("plan", Pipeline([("fill", SimpleImputer(strategy="most_frequent")), ("code", _dense())]), ["plan"]),
            ("numbers", Pipeline([("fill", SimpleImputer()), ("scale", StandardScaler())]), NUMBERS),
        ]
    ),
    "an ordinal encoder": lambda: ColumnTransformer(
        [("plan", OrdinalEncoder(), ["plan"]), ("numbers", "passthrough", NUMBERS)]
    ),
    "a clipping scaler": lambda: ColumnTransformer(
        [("plan", _dense(), ["plan"]), ("numbers", MinMaxScaler(clip=True), NUMBERS)]
    ),
    "an identity function and scaled one-hot columns": lambda: ColumnTransformer(
        [
            ("plan", Pipeline([("code", _dense()), ("scale", StandardScaler())]), ["plan"]),
            ("numbers", FunctionTransformer(), NUMBERS),
        ]
    ),
    "an encoder that raises on an unknown category": lambda: ColumnTransformer(
        [("plan", _dense(handle_unknown="error"), ["plan"])], remainder="passthrough"
    ),
}
UNKNOWN_PLAN = {"an encoder that raises on an unknown category": "silver"}
"""Pipelines fitted without one plan the problem's domain holds."""

ESTIMATORS: dict[str, Callable[[], Any]] = {
    "logistic regression": lambda: LogisticRegression(max_iter=1000),
    "linear SVC": LinearSVC,
    "decision tree": lambda: DecisionTreeClassifier(max_depth=4, random_state=0),
    "random forest": lambda: RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0),
    "gradient boosting": lambda: GradientBoostingClassifier(n_estimators=8, max_depth=2, random_state=0),
    "hist gradient boosting": lambda: HistGradientBoostingClassifier(max_iter=8, random_state=0),
    "network": lambda: MLPClassifier(hidden_layer_sizes=(4,), max_iter=300, random_state=0),
    "k nearest neighbours": lambda: KNeighborsClassifier(n_neighbors=5),
}


def _problem(
    frame: pd.DataFrame, encode: Any, estimator: Any, without: str | None = None
) -> CounterfactualProblem | None:
    """A problem on ``frame`` (every plan in its domain) for the pipeline fitted without the rows of
    plan ``without``; None when scikit-learn itself refuses the pipeline."""
    model = Pipeline([("encode", encode), ("model", estimator)])
    training = frame if without is None else frame[frame["plan"] != without]
    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            model.fit(training[COLUMNS], training["ok"])
        except ValueError:
            return None
    rejected = training.index[model.predict(training[COLUMNS]) == 0]
    row = int(frame.index.get_loc(rejected[0]))
    return CounterfactualProblem.from_dataframe(frame, row, model, [ClassGoal(target=1)], target="ok", columns=COLUMNS)


@pytest.mark.unit
@pytest.mark.parametrize("preprocessing", list(PREPROCESSING))
def test_what_the_fast_path_compiles_the_exact_engine_encodes_or_refuses_by_name(
    preprocessing: str, frame: pd.DataFrame
) -> None:
    outcomes: dict[str, str] = {}
    for name, make in ESTIMATORS.items():
        problem = _problem(frame, PREPROCESSING[preprocessing](), make(), UNKNOWN_PLAN.get(preprocessing))
        assert problem is not None, name
        if problem.model.fast_path(problem.space) is None:  # type: ignore[attr-defined]
            outcomes[name] = "not compiled"
            continue
        try:
            build(problem)
        except NotEncodableError as exc:  # anything else fails the test
            outcomes[name] = f"refused: {exc}"
        else:
            outcomes[name] = "encoded"
    assert outcomes.get("k nearest neighbours", "not compiled") != "encoded"
    if preprocessing not in UNKNOWN_PLAN:
        assert "not compiled" not in outcomes.values(), outcomes


@pytest.mark.unit
def test_the_matrix_covers_encoded_and_refused_pipelines(frame: pd.DataFrame) -> None:
    """The parity matrix is not vacuous: the label slice, numpy integers and a callable selector are
    encoded; an ordinal encoder and a clipping scaler are refused, naming the step."""
    tree = ESTIMATORS["decision tree"]
    for name in (
        "a label slice (inclusive end)",
        "numpy integers and a boolean mask",
        "a callable and make_column_selector",
    ):
        problem = _problem(frame, PREPROCESSING[name](), tree())
        assert problem is not None and problem.model.fast_path(problem.space) is not None  # type: ignore[attr-defined]
        build(problem)
    ordinal = _problem(frame, PREPROCESSING["an ordinal encoder"](), tree())
    assert ordinal is not None
    with pytest.raises(NotEncodableError, match="transformer 'plan': OrdinalEncoder: ordinal codes of 'plan'"):
        build(ordinal)
    clipped = _problem(frame, PREPROCESSING["a clipping scaler"](), tree())
    assert clipped is not None
    with pytest.raises(NotEncodableError, match=r"transformer 'numbers': MinMaxScaler\(clip=True\) is not affine"):
        build(clipped)


@pytest.mark.unit
def test_a_category_the_encoder_raises_on_is_forbidden_in_the_program_and_kept_off_the_fast_path(
    frame: pd.DataFrame,
) -> None:
    name = "an encoder that raises on an unknown category"
    problem = _problem(frame, PREPROCESSING[name](), ESTIMATORS["decision tree"](), without="silver")
    assert problem is not None
    assert problem.model.fast_path(problem.space) is None  # type: ignore[attr-defined]
    formulation = build(problem)
    silver = problem.space.features[problem.space.index["plan"]].model_values().index("silver")
    indicator = formulation.features[problem.space.index["plan"]].categories[silver][1]  # type: ignore[index]
    assert any(terms == indicator[0] and high == -indicator[1] for terms, _, high in formulation.milp.rows)


@pytest.mark.unit
def test_every_family_the_kind_module_names_has_an_encoder() -> None:
    families = (
        kind.LINEAR_CLASSIFIERS
        + kind.LINEAR_REGRESSORS
        + kind.ONNX_LINEAR_CLASSIFIERS
        + kind.ONNX_LINEAR_REGRESSORS
        + kind.NETWORKS
        + kind.TREE_ENSEMBLES
    )
    assert set(ESTIMATOR_ENCODERS) == set(families)
    with pytest.raises(NotEncodableError, match="KNeighborsClassifier is not a tree ensemble, linear model or network"):
        estimator_encoder(KNeighborsClassifier())


@pytest.mark.integration
@pytest.mark.parametrize(
    "estimator",
    [LogisticRegression(max_iter=1000), HistGradientBoostingClassifier(max_iter=20, random_state=0)],
    ids=["logistic regression", "hist gradient boosting"],
)
def test_auto_answers_on_a_label_slice_column_transformer(estimator: Any, frame: pd.DataFrame) -> None:
    pytest.importorskip("highspy")
    encode = ColumnTransformer(
        [("numbers", StandardScaler(), slice("income", "debt")), ("plan", _dense(handle_unknown="ignore"), ["plan"])],
        remainder="passthrough",
    )
    problem = _problem(frame, encode, estimator)
    assert problem is not None
    result = explain(problem, engine="auto", seed=0)
    assert result.valid
    assert result.statistics.engine == "exact", result.statistics.engine_reason
    model: Any = problem.model
    proposed = pd.DataFrame([result.proposed])[COLUMNS]
    assert int(model.model.predict(proposed)[0]) == 1  # the real model agrees
    exact = explain(problem, engine="exact", seed=0)
    assert exact.valid and exact.statistics.exact is not None and exact.statistics.exact.proven


@pytest.mark.unit
@pytest.mark.parametrize(
    "estimator",
    [LogisticRegression(max_iter=1000), HistGradientBoostingClassifier(max_iter=10, random_state=0)],
    ids=["logistic regression", "hist gradient boosting"],
)
def test_a_pipeline_fitted_on_the_encoded_matrix_reads_category_codes_alike(estimator: Any) -> None:
    """Fitted on arrays, a pipeline one-hot encodes the codes of a category and of a boolean: the
    fast path and the exact engine both read them as codes (the missing code -1 in slot 0)."""
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.uniform(0, 10, 400), rng.integers(0, 3, 400), rng.integers(0, 2, 400)]).astype(float)
    y = (X[:, 0] + 2 * (X[:, 1] == 2) + X[:, 2] > 6).astype(int)
    encode = ColumnTransformer([("codes", _dense(handle_unknown="ignore"), [1, 2]), ("x", StandardScaler(), [0])])
    with threadpool_limits(1):
        model = Pipeline([("encode", encode), ("model", estimator)]).fit(X, y)
    features = [
        FloatFeature(name="x", value=2.0, low=0.0, high=10.0, precision=1),
        CategoricalFeature(name="k", value="0", categories=("0", "1", "2")),
        BooleanFeature(name="b", value=False),
    ]
    problem = CounterfactualProblem(features, [ClassGoal(target=1)], adapt_sklearn(model, "ok"))
    adapter: Any = problem.model
    assert adapter.input_kind == "array" and adapter.fast_path(problem.space) is not None
    X_probe = np.array([[x, k, b] for x in (0.0, 5.0, 9.9) for k in (0.0, 1.0, 2.0) for b in (0.0, 1.0)])
    np.testing.assert_allclose(
        adapter.predict(X_probe, problem.space)["ok"], model.predict_proba(X_probe), rtol=0, atol=1e-12
    )
    formulation = build(problem)
    for row in X_probe:  # the program's columns give the real preprocessing at every row
        x = formulation.assignment(row)
        assert formulation.inputs is not None
        real = model[:-1].transform(row.reshape(1, -1))[0]
        np.testing.assert_allclose([evaluate(lin, x) for lin in formulation.inputs.columns], real, atol=1e-12)
