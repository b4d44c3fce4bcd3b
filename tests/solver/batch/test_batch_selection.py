"""``only_rejected`` / ``--rows rejected``: the rows that meet the goal already are found by one model
call over the selection and cost no solve; a row the model fails on is never taken for one of them."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.pipeline import Pipeline

from counterplan.planning import ClassGoal
from counterplan.planning.demo import IMMUTABLE, TARGET
from counterplan.planning.models import SklearnClassifierAdapter
from counterplan.solver.batch import block
from counterplan.solver.batch.rows import meeting_the_goal
from counterplan.solver.batch.run import SKIPPED
from counterplan.solver.explainer import Explainer

GOAL = [ClassGoal(target=1, confidence=0.7)]
ROWS = "0:40"


class CountingAdapter(SklearnClassifierAdapter):
    """The real model, counting its calls (search and reference paths) and the rows of each."""

    def __init__(self, model: Any) -> None:
        super().__init__(model, TARGET)
        self.sizes: list[int] = []
        self._lock = threading.Lock()

    def _count(self, X: Any) -> None:
        with self._lock:
            self.sizes.append(int(X.shape[0]))

    def predict(self, X: Any, space: Any) -> Any:
        self._count(X)
        return super().predict(X, space)

    def predict_reference(self, X: Any, space: Any) -> Any:
        self._count(X)
        return super().predict_reference(X, space)


@pytest.fixture(scope="module")
def every(loan_explainer: Explainer) -> pd.DataFrame:
    """The records of every row of ``ROWS``, each solved (the approved ones say ``already_met``)."""
    frame = loan_explainer.explain_batch(ROWS, seed=5, window=40)
    statuses = set(frame["status"])
    assert "already_met" in statuses and "ok" in statuses  # both kinds of row in the selection
    return frame


def _solved_rows(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Collects the id of every row that reaches a solve (in this process): a solve of its own
    on the threads path, or a place in a block of the vectorised engine."""
    solved: list[Any] = []
    solve_row, run_vector_block = block.solve_row, block.run_vector_block

    def counting(explainer: Any, row_id: Any, *args: Any, **kwargs: Any) -> Any:
        solved.append(row_id)
        return solve_row(explainer, row_id, *args, **kwargs)

    def counting_block(explainer: Any, items: Any, *args: Any, **kwargs: Any) -> Any:
        solved.extend(item[0] for item in items)
        return run_vector_block(explainer, items, *args, **kwargs)

    monkeypatch.setattr(block, "solve_row", counting)
    monkeypatch.setattr(block, "run_vector_block", counting_block)
    return solved


def _same(a: pd.DataFrame, b: pd.DataFrame) -> None:
    columns = [c for c in a.columns if c != "seconds"]
    pd.testing.assert_frame_equal(a[columns].reset_index(drop=True), b[columns].reset_index(drop=True))


def test_approved_rows_cost_one_model_call_together_and_no_solve(
    loan_data: pd.DataFrame, loan_model: Pipeline, every: pd.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    adapter = CountingAdapter(loan_model)
    explainer = Explainer(adapter, loan_data, GOAL, target=TARGET, immutable=IMMUTABLE)
    adapter.sizes.clear()
    met = meeting_the_goal(explainer, loan_data.iloc[:40])
    assert adapter.sizes == [40]  # one call over the selection
    approved = every["status"] == "already_met"
    assert met.tolist() == approved.tolist()  # as each row's own solve decides it
    solved = _solved_rows(monkeypatch)
    frame = explainer.explain_batch(ROWS, only_rejected=True, seed=5, window=40)
    assert sorted(solved) == sorted(every.loc[~approved, "row_id"])  # no approved row reaches a solve
    assert frame.attrs[SKIPPED] == int(approved.sum())
    _same(frame, every[~approved])  # the same records for the rejected rows, with the same seed


def test_processes_skip_the_same_rows_with_the_same_records(loan_explainer: Explainer, every: pd.DataFrame) -> None:
    frame = loan_explainer.explain_batch(ROWS, only_rejected=True, seed=5, window=8, workers=2)
    _same(frame, every[every["status"] != "already_met"])
    assert frame.attrs[SKIPPED] == int((every["status"] == "already_met").sum())


def test_a_row_the_model_fails_on_is_never_skipped_as_approved(
    loan_data: pd.DataFrame, loan_model: Pipeline, every: pd.DataFrame
) -> None:
    approved = every.loc[every["status"] == "already_met", "row_id"].tolist()
    nan_income, raising_income = (float(loan_data["income"].iloc[r]) for r in approved[:2])

    class Failing(SklearnClassifierAdapter):
        """NaN for one approved applicant, an exception for another."""

        def predict(self, X: Any, space: Any) -> Any:
            income = X[:, space.names.index("income")]
            if np.any(income == raising_income):
                raise RuntimeError("the scoring service is down for this applicant")
            out = super().predict(X, space)
            out[TARGET][income == nan_income] = np.nan
            return out

        def predict_reference(self, X: Any, space: Any) -> Any:
            return self.predict(X, space)

    explainer = Explainer(Failing(loan_model, TARGET), loan_data, GOAL, target=TARGET, immutable=IMMUTABLE)
    met = meeting_the_goal(explainer, loan_data.iloc[:40])
    assert not met[approved[0]] and not met[approved[1]]
    assert met.sum() == len(approved) - 2  # the call that raised was bisected: the other rows kept
    frame = explainer.explain_batch(ROWS, only_rejected=True, seed=5, window=40).set_index("row_id")
    for row in approved[:2]:
        assert frame.loc[row, "status"] == "error"  # its solve says why, it is not skipped
    assert frame.attrs[SKIPPED] == len(approved) - 2


def test_rows_the_selection_cannot_read_plainly_go_to_their_solve(
    loan_explainer: Explainer, every: pd.DataFrame
) -> None:
    approved = every.loc[every["status"] == "already_met", "row_id"].tolist()
    frame = loan_explainer.data.iloc[:40].copy()
    frame.loc[approved[0], "income"] = 10 * frame["income"].max()  # outside the data's domain: judged
    frame["debt"] = frame["debt"].astype("float64")
    frame.loc[approved[1], "debt"] = np.nan  # a gap: its solve says what it is
    met = meeting_the_goal(loan_explainer, frame)
    assert not met[approved[1]]
    assert met.sum() == len(approved) - 1
    # a value outside the data's range widens its row's own domain: the decision is that row's solve's
    own = loan_explainer.explain_batch(frame.iloc[[approved[0]]], seed=5)
    assert met[approved[0]] == (own["status"].iloc[0] == "already_met")


def test_the_selection_decides_every_row_as_its_own_solve_does(loan_data: pd.DataFrame, loan_model: Pipeline) -> None:
    """Imputed fractions in a whole-number column (CARLA's heloc has them in most approved rows),
    values outside the data's range, unknown categories, fractions where the data's column is of
    integers, gaps: the rows the selection calls approved are exactly those whose own solve says
    ``already_met``, and the fractional rows are judged, not left to their solves."""
    data = loan_data.assign(credit_cards=loan_data["credit_cards"].astype("float64"))  # whole numbers as floats
    explainer = Explainer(loan_model, data, GOAL, target=TARGET, immutable=IMMUTABLE)
    frame = data.iloc[:48].copy()
    frame["years_employed"] = frame["years_employed"].astype("float64")
    frame["debt"] = frame["debt"].astype("float64")
    frame.loc[frame.index[0:24:2], "credit_cards"] += 0.37  # an imputed fraction: a float in its own problem
    frame.loc[frame.index[1], "income"] = 10 * data["income"].max()  # above the data's range
    frame.loc[frame.index[3], "loan_amount"] = data["loan_amount"].min() / 2  # below it
    frame.loc[frame.index[4], "credit_cards"] = data["credit_cards"].max() + 7.5  # both
    frame.loc[frame.index[5], "years_employed"] = 2.5  # the data's column holds integers: refused
    frame.loc[frame.index[7], "education"] = "phd"  # a category the data has never seen
    frame.loc[frame.index[9], "debt"] = np.nan  # a gap
    solved = explainer.explain_batch(frame, seed=1)
    already = (solved.set_index("row_id").loc[frame.index, "status"] == "already_met").to_numpy()
    met = meeting_the_goal(explainer, frame)
    assert met.tolist() == already.tolist()
    fractional = np.zeros(len(frame), dtype=bool)
    fractional[0:24:2] = True
    assert (met & fractional).sum() >= 3  # judged: before, every one of them went to its solve
    assert (met & ~fractional).sum() >= 3
    statuses = solved.set_index("row_id")["status"]
    assert statuses.loc[frame.index[[5, 7, 9]]].tolist() == ["error"] * 3


def test_auto_chooses_per_row_the_same_way_in_any_block_and_logs_why(loan_data: pd.DataFrame) -> None:
    """``engine="auto"`` in a batch: each row's choice comes from its own program's size (the
    immutables' values prune leaves), the same whatever block it runs in, and a log line per row
    gives the engine and the reason (the estimate and the budget)."""
    from sklearn.ensemble import GradientBoostingClassifier
    from structlog.testing import capture_logs

    from counterplan.planning.demo import train_loan_model
    from counterplan.solver.core.config import AutoConfig, SolverConfig
    from counterplan.solver.exact.estimate import estimate_seconds, program_size

    pytest.importorskip("highspy")
    model = train_loan_model(loan_data)
    model.set_params(classify=GradientBoostingClassifier(n_estimators=12, max_depth=3, random_state=0))
    model.fit(loan_data.drop(columns=[TARGET]), loan_data[TARGET])
    probe = Explainer(model, loan_data, GOAL, target=TARGET, immutable=IMMUTABLE)
    rows = loan_data.iloc[:60]
    rejected = rows[model.predict(rows.drop(columns=[TARGET])) == 0].iloc[:8]
    estimates = [estimate_seconds(program_size(probe.problem(k))) for k in rejected.index]
    assert min(estimates) < max(estimates)  # a row whose immutables reach fewer leaves: a smaller program
    budget = (min(estimates) + max(estimates)) / 2
    config = SolverConfig(auto=AutoConfig(budget_seconds=budget))
    explainer = Explainer(model, loan_data, GOAL, target=TARGET, immutable=IMMUTABLE, config=config, engine="auto")
    chosen = []
    for window in (1, 8):
        with capture_logs() as logs:
            explainer.explain_batch(rejected, seed=2, window=window)
        lines = [e for e in logs if e["event"] == "batch.auto_engine"]
        chosen.append({e["row_id"]: (e["engine"], e["reason"]) for e in lines})
        assert len(lines) == len(rejected)
    assert chosen[0] == chosen[1]
    engines = {engine for engine, _ in chosen[0].values()}
    assert engines == {"exact", "local"}  # per row, by its own estimate
    for row_id, (engine, reason) in chosen[0].items():
        expected = estimates[rejected.index.get_loc(int(row_id))] <= budget
        assert (engine == "exact") == expected
        assert reason.startswith("auto:") and "budget" in reason


def test_on_the_threads_path_no_approved_row_reaches_a_solve(
    loan_data: pd.DataFrame, loan_model: Pipeline, every: pd.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The threads path (``vectorised=False``) gets the same rows to solve, one solve each."""
    explainer = Explainer(CountingAdapter(loan_model), loan_data, GOAL, target=TARGET, immutable=IMMUTABLE)
    solved = _solved_rows(monkeypatch)
    approved = every["status"] == "already_met"
    frame = explainer.explain_batch(ROWS, only_rejected=True, seed=5, window=40, vectorised=False)
    assert sorted(solved) == sorted(every.loc[~approved, "row_id"])  # no approved row reaches a solve
    assert frame.attrs[SKIPPED] == int(approved.sum())
    assert sorted(frame["row_id"]) == sorted(every.loc[~approved, "row_id"]) and frame["valid"].all()
