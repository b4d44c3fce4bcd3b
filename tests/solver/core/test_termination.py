from __future__ import annotations

import time

import numpy as np

from counterplan.solver.core.config import TerminationConfig
from counterplan.solver.core.scope import Progress
from counterplan.solver.core.termination import Termination

INFEASIBLE = np.array([-0.5, 0.0, 0.0, 0.0, 0.0])
FEASIBLE = np.array([0.0, 0.0, 0.0, -0.3, -2.0])


def _progress(**changes: object) -> Progress:
    progress = Progress.starting(INFEASIBLE)
    for key, value in changes.items():
        setattr(progress, key, value)
    return progress


def test_each_count_limit_and_its_progress() -> None:
    cases = [
        (TerminationConfig(step_count_limit=10), {"step_count": 4}, {"step_count": 10}, 0.4),
        (
            TerminationConfig(unimproved_step_count_limit=5),
            {"step_count": 7, "best_step_index": 5},
            {"step_count": 10, "best_step_index": 5},
            0.4,
        ),
        (
            TerminationConfig(score_calculation_count_limit=100),
            {"score_calculation_count": 25},
            {"score_calculation_count": 100},
            0.25,
        ),
        (TerminationConfig(move_count_limit=8), {"move_count": 2}, {"move_count": 9}, 0.25),
    ]
    for config, running, reached, fraction in cases:
        termination = Termination(config)
        done, progress, _ = termination.evaluate(_progress(**running))
        assert not done and progress == fraction
        done, progress, reason = termination.evaluate(_progress(**reached))
        assert done and progress == 1.0 and reason


def test_time_limits() -> None:
    spent = Termination(TerminationConfig(spent_limit_seconds=0.5))
    assert not spent.evaluate(Progress.starting(INFEASIBLE))[0]
    assert spent.evaluate(_progress(start_time=time.perf_counter() - 1.0))[0]
    unimproved = Termination(TerminationConfig(unimproved_spent_limit_seconds=0.5))
    assert unimproved.evaluate(_progress(last_improvement_time=time.perf_counter() - 1.0))[0]
    assert not unimproved.evaluate(_progress(last_improvement_time=time.perf_counter()))[0]


def test_score_limits() -> None:
    feasible = Termination(TerminationConfig(best_score_feasible=True))
    assert not feasible.evaluate(_progress())[0]
    assert feasible.evaluate(_progress(best_score=FEASIBLE))[0]
    limit = Termination(TerminationConfig(best_score_limit="[0/0/0]hard/[-0.5/-3]soft"))
    assert limit.evaluate(_progress(best_score=FEASIBLE))[0]
    assert not limit.evaluate(_progress(best_score=np.array([0.0, 0.0, 0.0, -0.6, 0.0])))[0]


def test_and_or_composition_and_progress() -> None:
    both = TerminationConfig(composition="and", best_score_feasible=True, step_count_limit=10)
    either = TerminationConfig(composition="or", best_score_feasible=True, step_count_limit=10)
    state = _progress(step_count=5, best_score=FEASIBLE)
    assert Termination(either).evaluate(state)[:2] == (True, 1.0)
    assert Termination(both).evaluate(state)[:2] == (False, 0.5)
    assert Termination(both).evaluate(_progress(step_count=10, best_score=FEASIBLE))[0]
    nested = TerminationConfig(step_count_limit=100, children=(both,))
    done, progress, reason = Termination(nested).evaluate(_progress(step_count=10, best_score=FEASIBLE))
    assert done and progress == 1.0 and "best score feasible" in reason
    assert Termination(TerminationConfig()).is_empty
    assert Termination(TerminationConfig()).evaluate(state) == (False, 0.0, "")


def test_the_wall_limit_of_a_termination_tree() -> None:
    from counterplan.solver.core.config import TerminationConfig
    from counterplan.solver.core.termination import wall_limit

    assert wall_limit(TerminationConfig()) is None
    assert wall_limit(TerminationConfig(spent_limit_seconds=5.0)) == 5.0
    nested = TerminationConfig(spent_limit_seconds=5.0, children=(TerminationConfig(spent_limit_seconds=2.0),))
    assert wall_limit(nested) == 2.0  # OR: the first limit reached ends it
    both = TerminationConfig(spent_limit_seconds=1.0, step_count_limit=10, composition="and")
    assert wall_limit(both) is None  # AND: time alone does not end it
    assert wall_limit(TerminationConfig(step_count_limit=3, children=(both,))) is None
