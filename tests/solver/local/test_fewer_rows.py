"""Local search scores fewer rows (issue 29): walkers on the same row sample once, and once the
best is feasible a move that cannot beat it costs no model call and is never a walker's step."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.pipeline import Pipeline

from counterplan.planning import ClassGoal, CounterfactualProblem
from counterplan.planning.demo import IMMUTABLE, TARGET
from counterplan.planning.score import PRUNED
from counterplan.solver import explain
from counterplan.solver.local import phase as phase_module
from counterplan.solver.local.config import MoveSelectorConfig
from counterplan.solver.local.moves import MoveSelector


def test_walkers_on_the_same_row_sample_their_moves_once(loan_problem: CounterfactualProblem) -> None:
    space = loan_problem.space
    currents = np.repeat(loan_problem.original_row(), 4, axis=0)
    currents[2, int(np.flatnonzero(space.mutable)[0])] += 0.0  # same row
    currents[3] = currents[0]
    moves = phase_module._sample(MoveSelector(MoveSelectorConfig(), space), currents, 16, np.random.default_rng(0))
    assert moves.owner is not None and set(moves.owner.tolist()) == {0}
    other = space.original.copy()
    other[int(np.flatnonzero(space.mutable & space.graded)[0])] += 1.0
    currents[2] = other
    moves = phase_module._sample(MoveSelector(MoveSelectorConfig(), space), currents, 16, np.random.default_rng(0))
    assert moves.owner is not None and set(moves.owner.tolist()) == {0, 2}
    assert (np.diff(moves.owner) >= 0).all()  # grouped by walker, in walker order


def _rows_sent(data: pd.DataFrame, model: Pipeline, row: pd.Series) -> tuple[Any, int]:
    sent = [0]

    class Spy:
        classes_ = model.classes_
        feature_names_in_ = model.feature_names_in_

        def predict_proba(self, frame: pd.DataFrame) -> Any:
            sent[0] += len(frame)
            return model.predict_proba(frame)

    problem = CounterfactualProblem.from_dataframe(
        data, row, Spy(), [ClassGoal(target=1, confidence=0.7)], target=TARGET, immutable=IMMUTABLE
    )
    return explain(problem, seed=0), sent[0]


def test_moves_that_cannot_beat_a_feasible_best_cost_no_model_call_and_are_never_stepped_onto(
    loan_data: pd.DataFrame, loan_model: Pipeline, rejected_loans: pd.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    picked: list[np.ndarray] = []  # the score of each walker's step
    pick = phase_module.Forager.pick_lockstep

    def watching(self: Any, scores: np.ndarray, accepted: np.ndarray, *args: Any) -> np.ndarray:
        picks: np.ndarray = pick(self, scores, accepted, *args)
        picked.append(scores[picks[picks >= 0]])
        return picks

    monkeypatch.setattr(phase_module.Forager, "pick_lockstep", watching)
    pruned = [0]
    from counterplan.planning.calculator import ScoreCalculator

    original = ScoreCalculator.calculate

    def counting(self: Any, X: np.ndarray, beat: np.ndarray | None = None) -> Any:
        evaluation = original(self, X, beat)
        pruned[0] += int(np.count_nonzero(evaluation.scores[:, 0] == PRUNED))
        return evaluation

    monkeypatch.setattr(ScoreCalculator, "calculate", counting)
    for _, row in rejected_loans.iloc[:3].iterrows():
        pruning, sent = _rows_sent(loan_data, loan_model, row)
        assert pruning.valid
        with monkeypatch.context() as patch:  # the best never counts as feasible to the phase: no pruning
            patch.setattr(phase_module, "is_feasible", lambda score: False)
            plain, sent_plain = _rows_sent(loan_data, loan_model, row)
        assert plain.valid and sent < sent_plain
    assert pruned[0] > 0 and picked
    assert not any((scores[:, 0] == PRUNED).any() for scores in picked)  # no walker stepped onto one
