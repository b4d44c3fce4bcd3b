"""A new phase type is its own code plus one registration line: this test writes a toy phase type
(random restarts), registers it from here, touching no library file, and runs it through
``explain``, configuration files, the budget and the events like any phase counterplan ships."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Literal

import pytest
from pydantic import Field

from counterplan.planning import CounterfactualProblem
from counterplan.planning.calculator import ScoreCalculator
from counterplan.solver.core.budget import check_budget
from counterplan.solver.core.config import ConfigError, PhaseConfig, SolverConfig
from counterplan.solver.core.phase import PhaseBase, PhaseReport, PhaseScope, SpaceSize
from counterplan.solver.core.registry import (
    PhaseTypeError,
    phase_type_names,
    register_phase_type,
    unregister_phase_type,
)
from counterplan.solver.core.solver import Solver
from counterplan.solver.counterfactual import explain
from counterplan.solver.local.config import BoundaryPolishPhaseConfig
from counterplan.solver.result import BestSolutionEvent
from counterplan.solver.scoring import CalculatorScorer

pytestmark = pytest.mark.unit


class RandomRestartPhaseConfig(PhaseConfig):
    """Score ``samples`` rows drawn uniformly from the search bounds, in one call."""

    type: Literal["random_restart"] = "random_restart"
    samples: Annotated[int, Field(ge=1, le=1_000_000)] = 64


class RandomRestartReport(PhaseReport):
    samples: int
    improved: bool


class RandomRestartPhase(PhaseBase[RandomRestartPhaseConfig]):
    def solve(self, phase_scope: PhaseScope) -> None:
        scope = phase_scope.solver_scope
        if phase_scope.must_stop():
            return
        space = scope.space
        X = scope.rng.uniform(space.lower, space.upper, (self.config.samples, space.n_features))
        X[:, ~space.mutable] = space.original[~space.mutable]
        X = space.snap(X)
        scores = scope.scorer.score(X)
        improved = scope.offer(X, scores, phase_scope.counters)
        if improved:
            scope.announce()
        phase_scope.report("random_restart", RandomRestartReport(samples=X.shape[0], improved=improved))


class RandomRestartFactory:
    def __init__(self) -> None:
        self.built = 0

    def build(self, config: RandomRestartPhaseConfig) -> RandomRestartPhase:
        self.built += 1
        return RandomRestartPhase(config)

    def step_cells(self, config: RandomRestartPhaseConfig, size: SpaceSize) -> tuple[str, int]:
        return "samples", config.samples * size.n_features

    def collects_pool(self, config: RandomRestartPhaseConfig) -> bool:
        return False


@pytest.fixture
def factory() -> Iterator[RandomRestartFactory]:
    made = RandomRestartFactory()
    register_phase_type("random_restart", config=RandomRestartPhaseConfig, factory=made)
    try:
        yield made
    finally:
        unregister_phase_type("random_restart")


def test_a_registered_phase_type_runs_through_explain(
    factory: RandomRestartFactory, linear_problem: CounterfactualProblem
) -> None:
    heard: list[BestSolutionEvent] = []
    config = SolverConfig(phases=(RandomRestartPhaseConfig(samples=512), BoundaryPolishPhaseConfig()))
    result = explain(linear_problem, config, seed=0, listeners=[heard.append])
    assert factory.built == 1
    assert result.valid  # 512 random rows hold valid ones; the polish shaves the best
    assert result.statistics.score_calculation_count > 512
    assert heard and heard[-1].score == result.score
    again = explain(linear_problem, config, seed=0)
    assert again.proposed == result.proposed  # seeded: the same answer


def test_a_registered_phase_type_is_configured_as_data(factory: RandomRestartFactory) -> None:
    loaded = SolverConfig.from_yaml("phases:\n  - type: random_restart\n    samples: 128\n  - type: boundary_polish\n")
    assert isinstance(loaded.phases[0], RandomRestartPhaseConfig) and loaded.phases[0].samples == 128
    assert SolverConfig.from_yaml(loaded.to_yaml()) == loaded
    with pytest.raises(ConfigError) as bad:
        SolverConfig.from_dict({"phases": [{"type": "random_restart", "samples": 0}]})
    assert bad.value.field == "phases.0.random_restart.samples"
    assert "random_restart" in phase_type_names()


def test_the_budget_sizes_a_registered_phase_type(factory: RandomRestartFactory) -> None:
    huge = SolverConfig(phases=(RandomRestartPhaseConfig(samples=1_000_000),))
    with pytest.raises(ConfigError) as refused:
        check_budget(huge, 100, 100)
    assert refused.value.field == "phases[0].samples"


def test_the_solver_keeps_what_a_registered_phase_reports(
    factory: RandomRestartFactory, linear_problem: CounterfactualProblem
) -> None:
    config = SolverConfig(phases=(RandomRestartPhaseConfig(samples=64),), random_seed=1)
    scorer = CalculatorScorer(ScoreCalculator(linear_problem))
    outcome = Solver(config).solve(linear_problem.space, scorer, problem=linear_problem)
    report = outcome.reports["random_restart"]
    assert isinstance(report, RandomRestartReport) and report.samples == 64
    assert outcome.step_count == 1 and outcome.score_calculation_count == 65  # the original, then one batch


def test_an_unknown_or_repeated_phase_type_is_refused() -> None:
    with pytest.raises(ConfigError) as unknown:
        SolverConfig.from_dict({"phases": [{"type": "random_restart"}]})
    assert unknown.value.field == "phases.0"
    assert "'local_search', 'feature_scan', 'boundary_polish', 'exact', 'swarm'" in unknown.value.problem
    with pytest.raises(PhaseTypeError, match="registered already"):
        register_phase_type("local_search", config=RandomRestartPhaseConfig, factory=RandomRestartFactory())
