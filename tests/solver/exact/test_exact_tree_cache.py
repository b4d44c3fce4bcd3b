"""Bulk exact: a tree ensemble is read into arrays once per fitted model
(:mod:`counterplan.solver.exact.encoders.tree_cache`), and each row's program is written from them
(each distinct split decided once, the nodes the row reaches found level by level) - the very
program the walk of every tree writes, variable for variable and row for row, narrowed or not. What
the real model says at a row's original is asked once per problem, and the tie-break program's
answer, when it is the first program's, is not checked through the model twice."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import GradientBoostingClassifier, HistGradientBoostingClassifier, RandomForestClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from counterplan.planning import ClassGoal, CounterfactualProblem, FloatFeature
from counterplan.planning.distance import DistanceSettings
from counterplan.planning.models import adapt_sklearn
from counterplan.planning.structure import cache
from counterplan.planning.structure.trees import read_ensemble
from counterplan.solver.counterfactual import explain
from counterplan.solver.exact.backend import solve
from counterplan.solver.exact.encoders import trees
from counterplan.solver.exact.encoders.tree_cache import EnsembleArrays
from counterplan.solver.exact.formulation import build
from counterplan.solver.exact.program import Formulation, ModelInputs, Output
from counterplan.solver.scoring import CalculatorScorer

pytest.importorskip("highspy")

COLUMNS = ["income", "tenure", "debt", "plan", "member"]
NUMBERS = ["income", "tenure", "debt"]
ESTIMATORS = {
    "random forest": lambda: RandomForestClassifier(n_estimators=12, max_depth=5, random_state=0),
    "gradient boosting": lambda: GradientBoostingClassifier(n_estimators=20, max_depth=3, random_state=0),
    "hist gradient boosting": lambda: HistGradientBoostingClassifier(max_iter=12, random_state=0),
}


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    rng = np.random.default_rng(5)
    n = 400
    out = pd.DataFrame(
        {
            "income": np.round(rng.uniform(0.0, 10.0, n), 1),
            "tenure": rng.integers(0, 15, n),
            "debt": np.round(rng.uniform(0.0, 5.0, n), 2),
            "plan": rng.choice(["basic", "silver", "gold"], n),
            "member": rng.random(n) < 0.4,
        }
    )
    score = out.income + 0.4 * out.tenure - out.debt + 1.5 * (out.plan == "gold") + out.member
    out["ok"] = (score + rng.normal(0, 0.5, n) > 6.0).astype(int)
    return out


def _model(frame: pd.DataFrame, estimator: Any) -> Pipeline:
    encode = ColumnTransformer(
        [("plan", OneHotEncoder(sparse_output=False), ["plan", "member"]), ("numbers", StandardScaler(), NUMBERS)]
    )
    model = Pipeline([("encode", encode), ("model", estimator)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(frame[COLUMNS], frame["ok"])
    return model


def _problems(frame: pd.DataFrame, model: Pipeline, count: int) -> list[CounterfactualProblem]:
    """Rejected rows, some with tenure immutable (its splits decided by the original)."""
    rejected = np.flatnonzero(model.predict(frame[COLUMNS]) == 0)[:count]
    return [
        CounterfactualProblem.from_dataframe(
            frame,
            int(row),
            model,
            [ClassGoal(target=1)],
            target="ok",
            columns=COLUMNS,
            immutable=["tenure"] if k % 2 else (),
            distance=DistanceSettings(metric="mad_l1"),
        )
        for k, row in enumerate(rejected)
    ]


def _walked(formulation: Formulation, estimator: Any, inputs: ModelInputs, original: Any) -> Output:
    """The encoder as it was: every tree walked node by node (its leaves out of reach fixed as
    the arrays' are)."""
    ensemble = read_ensemble(estimator)
    return trees.encode_ensemble(formulation, ensemble, inputs, original, leaf_bounds=formulation.leaf_bounds)


def _program(formulation: Formulation) -> tuple[Any, ...]:
    milp = formulation.milp
    rows = [(list(terms.items()), low, high) for terms, low, high in milp.rows]
    return (
        milp.lower,
        milp.upper,
        milp.integer,
        milp.names,
        rows,
        list(milp.objective.items()),
        formulation.output.lin,
        formulation.thresholds,
        formulation.bands,
        formulation.leaves,
    )


@pytest.mark.unit
@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_the_arrays_write_the_program_the_walk_writes(
    name: str, frame: pd.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whole and narrowed (a reach cuts domains: splits outside them are decided while building,
    some with a margin row of their own), with and without an immutable: the same variables, rows
    and objective in the same order, so the same optimum."""
    model = _model(frame, ESTIMATORS[name]())
    solved = 0
    for problem in _problems(frame, model, 6):
        for reach in (None, 2.0, 0.5):
            cached = build(problem, reach=reach)
            with monkeypatch.context() as patch:
                patch.setattr(trees, "encode_trees", _walked)
                walked = build(problem, reach=reach)
            assert _program(cached) == _program(walked), (name, reach)
            if reach is None and solved < 2:  # the optimum is the same (the programs are)
                first, _ = solve(cached.milp, "highs", time_limit=None, relative_gap=0.0)
                second, _ = solve(walked.milp, "highs", time_limit=None, relative_gap=0.0)
                assert first.status == second.status == "optimal"
                assert first.objective == pytest.approx(second.objective, rel=1e-9)
                solved += 1
    assert solved == 2


@pytest.mark.unit
@pytest.mark.parametrize("name", ["random forest", "gradient boosting"])
def test_numbers_without_a_grid_keep_their_margins_the_same_way(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Numbers off any grid: each split keeps a margin on each side; a domain that ends within the
    margin of a threshold decides the split while building with a row of its own, at every node
    the row reaches (here: the domains end just past two of the model's thresholds)."""
    rng = np.random.default_rng(1)
    data = pd.DataFrame(rng.uniform(0.0, 5.0, (300, 3)), columns=NUMBERS)
    label = (data.sum(axis=1) + rng.normal(0.0, 0.3, 300) > 7.5).astype(int)
    estimator = ESTIMATORS[name]().fit(data, label)
    ensemble = read_ensemble(estimator)
    splits = [
        (int(t.feature[n]), float(t.threshold[n])) for t in ensemble.trees for n in np.flatnonzero(t.feature >= 0)
    ]
    high = min(t for f, t in splits if f == 0 and t > 1.5)  # the domain ends inside the margin above it
    low = max(t for f, t in splits if f == 1 and t < 3.5)  # and inside the margin below it
    features = [
        FloatFeature(name="income", value=1.0, low=0.0, high=high * (1.0 + 2.0**-21)),
        FloatFeature(name="tenure", value=3.6, low=low * (1.0 - 2.0**-21), high=5.0),
        FloatFeature(name="debt", value=2.5, low=0.0, high=5.0),
    ]
    problem = CounterfactualProblem(features, [ClassGoal(target=1)], adapt_sklearn(estimator, "ok"))
    cases: list[str] = []
    threshold_case = trees._TreeEncoder._threshold_case

    def counted(self: Any, *args: Any, **kwargs: Any) -> str:
        cases.append(threshold_case(self, *args, **kwargs))
        return cases[-1]

    monkeypatch.setattr(trees._TreeEncoder, "_threshold_case", counted)
    for reach in (None, 1.0):
        cached = build(problem, reach=reach)
        with monkeypatch.context() as patch:
            patch.setattr(trees, "encode_trees", _walked)
            walked = build(problem, reach=reach)
        assert _program(cached) == _program(walked), reach
    assert {"free", "below", "above", "left", "right"} <= set(cases)


@pytest.mark.unit
def test_a_model_is_read_once_for_many_rows(frame: pd.DataFrame, monkeypatch: pytest.MonkeyPatch) -> None:
    """The trees are read into arrays at the first program and kept while the model is fitted as
    it is; a refit reads them again."""
    model = _model(frame, ESTIMATORS["gradient boosting"]())
    reads: list[int] = []
    of = EnsembleArrays.of.__func__  # type: ignore[attr-defined]

    def counted(cls: type[EnsembleArrays], ensemble: Any) -> EnsembleArrays:
        reads.append(len(ensemble.trees))
        return of(cls, ensemble)  # type: ignore[no-any-return]

    monkeypatch.setattr(EnsembleArrays, "of", classmethod(counted))
    cache.MEMO.clear()
    for problem in _problems(frame, model, 4):
        build(problem)
        build(problem, reach=1.0)
    assert reads == [20]
    _model_refit = model.fit(frame[COLUMNS], frame["ok"])
    build(_problems(frame, _model_refit, 1)[0])
    assert reads == [20, 20]


@pytest.mark.unit
def test_the_original_goes_through_the_pipeline_once_per_problem(
    frame: pd.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check before the solve, the narrowed program and the whole one all read the model's
    input row and output at the original: one call of the preprocessing for all of them (the
    output is the final estimator's on that row, as the pipeline would compute it)."""
    model = _model(frame, ESTIMATORS["gradient boosting"]())
    (problem,) = _problems(frame, model, 1)
    encode = model.named_steps["encode"]
    calls: list[int] = []
    transform = encode.transform

    def counted(data: Any) -> Any:
        calls.append(len(data))
        return transform(data)

    monkeypatch.setattr(encode, "transform", counted)
    whole = build(problem)
    narrowed = build(problem, reach=1.0)
    assert calls == [1]
    assert whole.output.lin[1] == narrowed.output.lin[1]  # the same offset
    expected = model.decision_function(problem.space.to_frame(problem.space.original.reshape(1, -1)))[0]
    at_original = whole.assignment_of_original()
    terms, offset = whole.output.lin
    assert offset + sum(c * at_original[v] for v, c in terms.items()) == pytest.approx(expected, abs=1e-9)


@pytest.mark.unit
def test_a_row_is_checked_through_the_real_model_once(frame: pd.DataFrame, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tie-break program's answer is most often the first program's: the exact phase checks
    each distinct row through the real model once."""
    model = _model(frame, ESTIMATORS["gradient boosting"]())
    checked: list[bytes] = []
    score_final = CalculatorScorer.score_final

    def counted(self: CalculatorScorer, X: Any) -> Any:
        if len(X) == 1:
            checked.append(np.asarray(X).tobytes())
        return score_final(self, X)

    monkeypatch.setattr(CalculatorScorer, "score_final", counted)
    for problem in _problems(frame, model, 3):
        checked.clear()
        result = explain(problem, engine="exact", seed=0)
        assert result.valid and result.statistics.exact is not None and result.statistics.exact.proven
        assert checked, "the answer was checked through the real model"
        assert len(checked) == len(set(checked)), "a row was checked twice"
