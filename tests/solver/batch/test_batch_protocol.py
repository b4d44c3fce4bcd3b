"""The batch knows the explainer only as a :class:`~counterplan.solver.batch.protocol.RowExplainer`:
an object with nothing but the protocol's members runs a batch as the explainer itself does."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from counterplan.planning.calculator import ModelCalls
from counterplan.planning.model_protocol import ModelAdapter
from counterplan.planning.problem import CounterfactualProblem
from counterplan.solver.batch.protocol import RowExplainer, RowSolve
from counterplan.solver.batch.run import explain_batch
from counterplan.solver.core.config import SolverConfig
from counterplan.solver.engines import EngineChoice
from counterplan.solver.explainer import Explainer

pytestmark = pytest.mark.unit


class OnlyTheProtocol:
    """A row explainer that is not an :class:`Explainer`: the protocol's members, delegated."""

    def __init__(self, explainer: Explainer) -> None:
        self._explainer = explainer

    @property
    def adapter(self) -> ModelAdapter:
        return self._explainer.adapter

    @property
    def data(self) -> pd.DataFrame:
        return self._explainer.data

    @property
    def columns(self) -> list[str]:
        return self._explainer.columns

    @property
    def seed(self) -> int | None:
        return self._explainer.seed

    @property
    def question(self) -> str:
        return self._explainer.question

    @property
    def engine(self) -> EngineChoice | None:
        return self._explainer.engine

    @property
    def config(self) -> SolverConfig:
        return self._explainer.config

    def problem(self, row: int | dict[str, Any], *, trust_region: bool = True) -> CounterfactualProblem:
        return self._explainer.problem(row, trust_region=trust_region)

    def solver(self, row: dict[str, Any], *, seed: int | None = None, calls: ModelCalls | None = None) -> RowSolve:
        return self._explainer.solver(row, seed=seed, calls=calls)


def test_a_batch_needs_only_the_row_explainer_protocol(loan_explainer: Explainer, rejected_loans: pd.DataFrame) -> None:
    rows = rejected_loans.iloc[:4]
    plain: RowExplainer = OnlyTheProtocol(loan_explainer)
    ours = explain_batch(plain, rows, seed=3, window=2)
    theirs = loan_explainer.explain_batch(rows, seed=3, window=2)
    same = [c for c in theirs.columns if c != "seconds"]  # everything but the time taken
    pd.testing.assert_frame_equal(ours[same], theirs[same])
    assert ours["status"].tolist() == ["ok"] * 4


def test_each_record_holds_its_question_and_a_question_is_the_spec_config_and_engine(
    loan_explainer: Explainer, rejected_loans: pd.DataFrame
) -> None:
    """A resumed job tells an output of another question by the fingerprint each record holds:
    the same settings give the same one, whatever the seed; another goal, rule, configuration,
    engine or number of answers another."""
    from counterplan.planning import ClassGoal
    from counterplan.solver.batch.records import question_of
    from counterplan.solver.core.config import TerminationConfig

    frame = loan_explainer.explain_batch(rejected_loans.iloc[:2], seed=3)
    assert frame["question"].tolist() == [loan_explainer.question] * 2
    spec, config, engine = loan_explainer.spec, loan_explainer.config, loan_explainer.engine
    asked = question_of(spec, config, engine, 1)
    assert asked == loan_explainer.question and len(asked) == 16
    assert question_of(spec, config.model_copy(update={"random_seed": 99}), engine, 1) == asked
    others = [
        question_of(spec.asking([ClassGoal(target=1, confidence=0.9)]), config, engine, 1),
        question_of(spec.model_copy(update={"immutable": ("age",)}), config, engine, 1),
        question_of(
            spec, config.model_copy(update={"termination": TerminationConfig(spent_limit_seconds=1.0)}), engine, 1
        ),
        question_of(spec, config, "swarm", 1),
        question_of(spec, config, engine, 3),
    ]
    assert asked not in others and len(set(others)) == len(others)
