"""Local search scores fewer rows (issue 29): walkers on the same row sample once, and once the
best is feasible a move that cannot beat it costs no model call and is never a walker's step."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.pipeline import Pipeline

from counterplan.planning import (
    CallableAdapter,
    ClassGoal,
    CounterfactualProblem,
    FloatFeature,
    IntegerFeature,
    OutputSpec,
)
from counterplan.planning.calculator import ScoreCalculator
from counterplan.planning.demo import IMMUTABLE, TARGET
from counterplan.planning.score import PRUNED
from counterplan.planning.space import FeatureSpace, SplitValues
from counterplan.solver import explain
from counterplan.solver.core.trade import pricer_for, undominated
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


def _cut_space() -> tuple[Any, Any]:
    """A space whose whole number ``t`` (original 5.5, off its grid) has thresholds at 3.5, 9.5
    and 10.5 with known sides (cuts 4, 10, 11), and its pricer (range-scaled L1)."""
    problem = CounterfactualProblem(
        [
            FloatFeature(name="t", value=5.5, low=0.0, high=20.0, precision=0),
            IntegerFeature(name="u", value=0, low=0, high=3),
        ],
        [ClassGoal(target=1)],
        CallableAdapter(lambda X: np.column_stack([np.ones(len(X)), np.zeros(len(X))]), [OutputSpec("ok", (0, 1))]),
    )
    space = problem.space.with_split_values(
        SplitValues({0: np.array([3.0, 4.0, 9.0, 10.0, 11.0])}, {0: np.array([4.0, 10.0, 11.0])})
    )
    pricer = pricer_for(problem)
    assert pricer is not None
    return space, pricer


def test_a_row_a_nearer_row_of_the_same_cells_beats_is_dropped() -> None:
    """Of a trade round's rows (each changes the base's t and u), those the trees decide alike
    (the same features changed, t in one cell, u the same) keep only the nearest; a value off the
    grid (the original 5.5: a threshold may lie between it and 5 or 6) is a cell of its own, and
    rows at the same distance all stay."""
    space, pricer = _cut_space()
    base = np.array([15.0, 0.0])
    X = np.array([[8, 1], [6, 1], [4, 1], [9, 2], [5.5, 1], [12, 1], [20, 1], [3, 1], [0, 1]], dtype=np.float64)
    kept = undominated(space, pricer, X, base)
    # cell 4..9 with u = 1: 6 is nearest the original (8 and 4 only add distance); 9 with u = 2 is
    # another row; 5.5 off the grid stands alone; cell 11..20: 12; cell 0..3: 3
    assert kept.tolist() == [[6.0, 1.0], [9.0, 2.0], [5.5, 1.0], [12.0, 1.0], [3.0, 1.0]]
    ties = np.array([[5.0, 1.0], [6.0, 1.0]])  # 0.5 either side of the original: the same distance
    assert undominated(space, pricer, ties, base).tolist() == ties.tolist()
    assert undominated(space, pricer, np.vstack([X, [[15.0, 1.0]]]), base).shape == (10, 2)  # not all change two
    space.split_cuts = {}
    assert undominated(space, pricer, X, base) is X  # without cuts nothing is known alike


def test_with_the_trees_cuts_a_solve_sends_fewer_rows_for_the_same_answers(
    loan_data: pd.DataFrame, loan_model: Pipeline, rejected_loans: pd.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The demo's gradient boosting (float32 trees, x <= t) has cuts for its whole numbers: the
    scan's chains rescan, and the trades score, one value per cell, and every answer is the one
    found without the cuts."""
    made: list[ScoreCalculator] = []
    init = ScoreCalculator.__init__

    def recording(self: ScoreCalculator, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(ScoreCalculator, "__init__", recording)

    def solve() -> tuple[list[Any], int]:
        made.clear()
        answers = []
        for _, row in rejected_loans.iloc[:4].iterrows():
            problem = CounterfactualProblem.from_dataframe(
                loan_data, row, loan_model, [ClassGoal(target=1, confidence=0.7)], target=TARGET, immutable=IMMUTABLE
            )
            assert problem.split_values().cuts, "the demo's trees have cuts"
            answers.append(explain(problem, seed=0))
        return answers, sum(c.model_row_count for c in made)

    with_cuts, rows = solve()
    with_split_values = FeatureSpace.with_split_values

    def without_cuts(self: FeatureSpace, split_values: Any) -> FeatureSpace:
        view = with_split_values(self, split_values)
        view.split_cuts = {}
        return view

    monkeypatch.setattr(FeatureSpace, "with_split_values", without_cuts)
    without, rows_without = solve()
    for a, b in zip(with_cuts, without, strict=True):
        assert a.valid and np.array_equal(a.score_levels, b.score_levels)
        assert a.proposed == b.proposed
    assert rows < 0.95 * rows_without
