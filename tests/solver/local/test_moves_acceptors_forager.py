from __future__ import annotations

import numpy as np
import pytest

from counterplan.planning import CounterfactualProblem
from counterplan.solver.core.scope import Walker
from counterplan.solver.local.acceptors import (
    GreatDelugeAcceptor,
    HillClimbingAcceptor,
    LateAcceptanceAcceptor,
    SimulatedAnnealingAcceptor,
    StepContext,
    StepCountingHillClimbingAcceptor,
    TabuSearchAcceptor,
)
from counterplan.solver.local.config import (
    ForagerConfig,
    GreatDelugeAcceptorConfig,
    LateAcceptanceAcceptorConfig,
    MoveSelectorConfig,
    SimulatedAnnealingAcceptorConfig,
    StepCountingHillClimbingAcceptorConfig,
    TabuSearchAcceptorConfig,
)
from counterplan.solver.local.factory import entity_tabu_size
from counterplan.solver.local.forager import Forager
from counterplan.solver.local.moves import MOVE_KINDS, MoveBatch, MoveSelector


def test_moves_never_touch_constrained_features_and_stay_in_domain(linear_problem: CounterfactualProblem) -> None:
    space = linear_problem.space
    config = MoveSelectorConfig(swap_weight=1.0, moves_per_step=500)
    selector = MoveSelector(config, space)
    rng = np.random.default_rng(0)
    current = space.original.copy()
    seen_kinds: set[int] = set()
    for _ in range(20):
        batch = selector.sample(current, 500, rng)
        X = batch.candidates
        assert len(batch) > 0
        space.check_candidates(X)  # in domain, whole numbers where they must be
        assert (X[:, ~space.mutable] == space.original[~space.mutable]).all()
        assert not batch.touched[:, ~space.mutable].any()
        assert ((current != X) <= batch.touched).all()  # every change is a touched feature
        assert (current != X).any(axis=1).all()  # no-op moves are dropped
        seen_kinds |= set(batch.kinds.tolist())
        current = X[rng.integers(len(batch))]
    assert seen_kinds == set(range(len(MOVE_KINDS)))


def test_revert_and_toward_original_moves_reduce_the_change(linear_problem: CounterfactualProblem) -> None:
    space = linear_problem.space
    config = MoveSelectorConfig(change_weight=0, pair_change_weight=0, revert_weight=1, toward_original_weight=1)
    selector = MoveSelector(config, space)
    current = space.original.copy()
    current[0] = 9.0  # x moved far
    current[2] = 2.0  # plan changed
    batch = selector.sample(current, 200, np.random.default_rng(1))
    distance_before = np.abs(current - space.original)
    distance_after = np.abs(batch.candidates - space.original)
    assert (distance_after <= distance_before).all()
    assert (distance_after.sum(axis=1) < distance_before.sum()).all()
    assert (batch.candidates[:, 2] == 0.0).any()  # plan reverted somewhere


def test_only_constrained_features_give_no_moves() -> None:
    from counterplan.planning import CallableAdapter, ClassGoal, FloatFeature, OutputSpec

    problem = CounterfactualProblem(
        [FloatFeature(name="x", value=1.0)],
        [ClassGoal(target=1)],
        CallableAdapter(lambda X: np.column_stack([X[:, 0], 1 - X[:, 0]]), [OutputSpec("y", (0, 1))]),
    )
    batch = MoveSelector(MoveSelectorConfig(), problem.space).sample(
        problem.space.original, 10, np.random.default_rng(0)
    )
    assert len(batch) == 0


def _context(
    scores: list[list[float]],
    current: list[float],
    best: list[float] | None = None,
    touched: list[list[bool]] | None = None,
    gradient: float = 0.0,
    seed: int = 0,
) -> StepContext:
    S = np.array(scores, dtype=float)
    n = S.shape[0]
    t = np.array(touched if touched is not None else [[True, False, False]] * n)
    moves = MoveBatch(np.where(t, 1.0, 0.0), t, np.zeros(n, dtype=np.int8))
    walker = Walker(0, np.zeros(3), np.array(current, dtype=float))
    return StepContext(S, moves, walker, np.array(best or current, dtype=float), gradient, np.random.default_rng(seed))


SCORES = [[-1.0, 0, 0, 0, 0], [-0.5, 0, 0, -1, -1], [-0.5, 0, 0, 0, 0], [0.0, 0, 0, -2, -2]]
CURRENT = [-0.5, 0.0, 0.0, -0.5, -1.0]


def test_hill_climbing_accepts_not_worse() -> None:
    assert HillClimbingAcceptor().is_accepted(_context(SCORES, CURRENT)).tolist() == [False, False, True, True]


def test_tabu_blocks_recent_features_unless_aspiration() -> None:
    acceptor = TabuSearchAcceptor(TabuSearchAcceptorConfig(), entity_tabu_size=1)
    walker = Walker(0, np.zeros(3), np.array(CURRENT))
    acceptor.phase_started(walker)
    touched_first = [[True, False, False]]
    taken = MoveBatch(np.array([[1.0, 0, 0]]), np.array(touched_first), np.zeros(1, dtype=np.int8))
    acceptor.step_ended(walker, taken, np.zeros(3))
    touched = [[True, False, False], [False, True, False], [True, False, False], [False, False, True]]
    best = [-0.2, 0, 0, 0, 0]
    accepted = acceptor.is_accepted(_context(SCORES, CURRENT, best, touched)).tolist()
    # feature 0 is tabu: rows 0 and 2 rejected; row 1 is accepted although worse (tabu search
    # takes the best non-tabu move); row 3 touches a free feature.
    assert accepted == [False, True, False, True]
    better_than_best = [[0.0, 0, 0, 0, 0], *SCORES[1:]]
    aspirated = acceptor.is_accepted(_context(better_than_best, CURRENT, best, touched)).tolist()
    assert aspirated[0] is True


def test_tabu_size_is_capped_below_the_mutable_count() -> None:
    assert entity_tabu_size(TabuSearchAcceptorConfig(entity_tabu_size=10), mutable_count=4) == 3
    assert entity_tabu_size(TabuSearchAcceptorConfig(), mutable_count=1) == 0
    assert entity_tabu_size(TabuSearchAcceptorConfig(), mutable_count=9) == 3
    assert entity_tabu_size(TabuSearchAcceptorConfig(value_tabu_size=5), mutable_count=9) == 0


def test_late_acceptance_compares_with_the_score_size_steps_ago() -> None:
    acceptor = LateAcceptanceAcceptor(LateAcceptanceAcceptorConfig(late_acceptance_size=2))
    walker = Walker(0, np.zeros(3), np.array([-1.0, 0, 0, 0, 0]))
    acceptor.phase_started(walker)
    walker.current_score = np.array(CURRENT)
    acceptor.step_ended(walker, None, np.zeros(3))
    # the late score is still the starting -1: everything not worse than it passes
    assert acceptor.is_accepted(_context(SCORES, CURRENT)).tolist() == [True, True, True, True]


def test_simulated_annealing_cools_to_hill_climbing() -> None:
    acceptor = SimulatedAnnealingAcceptor(
        SimulatedAnnealingAcceptorConfig(starting_temperature="[1/0/0]hard/[1/1]soft")
    )
    worse = [[-0.6, 0, 0, -0.5, -1.0]] * 400
    hot = acceptor.is_accepted(_context(worse, CURRENT, gradient=0.0))
    cold = acceptor.is_accepted(_context(worse, CURRENT, gradient=1.0))
    assert 0.8 < hot.mean() < 0.99  # exp(-0.1) ~ 0.905
    assert not cold.any()
    assert acceptor.is_accepted(_context(SCORES, CURRENT, gradient=1.0)).tolist() == [False, False, True, True]


def test_great_deluge_and_step_counting() -> None:
    deluge = GreatDelugeAcceptor(GreatDelugeAcceptorConfig(water_level_increment_ratio=0.5))
    walker = Walker(0, np.zeros(3), np.array([-1.0, 0, 0, 0, 0]))
    deluge.phase_started(walker)
    assert deluge.is_accepted(_context(SCORES, CURRENT)).tolist() == [True, True, True, True]
    deluge.step_ended(walker, None, np.zeros(3))  # level [-1/0/0]/[0/0] -> [-0.5/0/0]/[0/0]
    assert deluge.is_accepted(_context(SCORES, CURRENT)).tolist() == [False, False, True, True]
    counting = StepCountingHillClimbingAcceptor(
        StepCountingHillClimbingAcceptorConfig(step_counting_hill_climbing_size=1)
    )
    counting.phase_started(Walker(0, np.zeros(3), np.array([-1.0, 0, 0, 0, 0])))
    assert counting.is_accepted(_context(SCORES, CURRENT)).all()
    counting.step_ended(Walker(0, np.zeros(3), np.array(CURRENT)), None, np.zeros(3))
    assert counting.is_accepted(_context(SCORES, CURRENT)).tolist() == [False, False, True, True]


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (ForagerConfig(), 3),
        (ForagerConfig(accepted_count_limit=2), 2),
        (ForagerConfig(pick_early_type="first_last_step_score_improving"), 2),
        (ForagerConfig(pick_early_type="first_best_score_improving"), 3),
    ],
)
def test_forager_picks(config: ForagerConfig, expected: int) -> None:
    scores = np.array([[-1.0, 0, 0, 0, 0], [-0.5, 0, 0, -1, -1], [-0.4, 0, 0, 0, 0], [0.0, 0, 0, -2, -2]])
    accepted = np.array([False, True, True, True])
    current = np.array([-0.45, 0, 0, 0, 0])
    best = np.array([-0.2, 0, 0, 0, 0])
    assert Forager(config).pick(scores, accepted, current, best) == expected
    assert Forager(config).pick(scores, np.zeros(4, dtype=bool), current, best) is None
