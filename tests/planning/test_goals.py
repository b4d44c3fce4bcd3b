from __future__ import annotations

import numpy as np
import pytest

from counterplan.planning import ClassGoal, GoalError, OutputSpec, RangeGoal, ValueGoal, parse_goal
from counterplan.planning.goals import bind_goals

NUMERIC = (OutputSpec("y"),)
BINARY = (OutputSpec("decision", ("no", "yes")),)


def _distance(goal: ValueGoal | RangeGoal, *values: float) -> list[float]:
    (bound,) = bind_goals([goal], NUMERIC)
    return bound.distance(np.array(values, dtype=np.float64)).tolist()


@pytest.mark.parametrize(
    ("p", "expected"),
    [
        (0.04, 0.0),  # |p| < t
        (-0.04, 0.0),
        (0.05, 0.05),  # exactly at the threshold: not met
        (-0.06, 0.06),
        (0.0, 0.0),
    ],
)
def test_value_goal_of_zero_uses_absolute_tolerance(p: float, expected: float) -> None:
    assert _distance(ValueGoal(value=0.0, tolerance=0.05), p) == [pytest.approx(expected)]


@pytest.mark.parametrize(
    ("g", "p", "t", "expected"),
    [
        (10.0, 10.4, 0.05, 0.0),  # 0.4 / 10.4 < 0.05
        (10.0, 9.0, 0.1, 1.0),  # 1 / 10 == 0.1 exactly: not met
        (10.0, 9.01, 0.1, 0.0),
        (-10.0, -10.4, 0.05, 0.0),  # negative values: scale by magnitudes
        (-10.0, -9.0, 0.05, 1.0),
        (-10.0, 10.0, 0.5, 20.0),  # opposite signs are far apart
        (3.0, 3.0, 0.0, 0.0),  # tolerance 0: equality only
        (3.0, 3.0001, 0.0, 0.0001),
    ],
)
def test_value_goal_relative_tolerance(g: float, p: float, t: float, expected: float) -> None:
    assert _distance(ValueGoal(value=g, tolerance=t), p) == [pytest.approx(expected)]


def test_range_goal_distance_is_the_distance_to_the_interval() -> None:
    got = _distance(RangeGoal(low=1.0, high=2.0), 0.25, 1.0, 1.5, 2.0, 3.5)
    assert got == pytest.approx([0.75, 0.0, 0.0, 0.0, 1.5])


def test_class_goal_is_graded_towards_the_boundary() -> None:
    (plain,) = bind_goals([ClassGoal(target="yes", margin=0.0)], BINARY)
    (confident,) = bind_goals([ClassGoal(target="yes", confidence=0.8, margin=0.0)], BINARY)
    proba = np.array([[0.9, 0.1], [0.6, 0.4], [0.3, 0.7], [0.1, 0.9], [0.2, 0.8]])
    assert plain.distance(proba) == pytest.approx([0.8, 0.2, 0.0, 0.0, 0.0])
    assert confident.distance(proba) == pytest.approx([0.8, 0.4, 0.1, 0.0, 0.0])
    assert confident.below_confidence(proba).tolist() == [True, True, True, False, False]
    assert plain.below_confidence(proba).tolist() == [False] * 5


def test_a_margin_keeps_met_goals_off_the_threshold() -> None:
    (plain,) = bind_goals([ClassGoal(target="yes", margin=0.05)], BINARY)
    (confident,) = bind_goals([ClassGoal(target="yes", confidence=0.8, margin=0.05)], BINARY)
    proba = np.array([[0.5, 0.5], [0.48, 0.52], [0.46, 0.54], [0.2, 0.8], [0.15, 0.85]])
    # ahead of the other class by 0.05: 0.525 and above
    assert plain.distance(proba) == pytest.approx([0.05, 0.01, 0.0, 0.0, 0.0])
    # and 0.8 + 0.05 for the confident goal
    assert confident.distance(proba) == pytest.approx([0.35, 0.33, 0.31, 0.05, 0.0])
    assert confident.below_confidence(proba).tolist() == [True, True, True, True, False]
    assert ClassGoal(target="yes").margin == pytest.approx(0.005)  # on by default, small
    (capped,) = bind_goals([ClassGoal(target="yes", confidence=1.0, margin=0.05)], BINARY)
    assert capped.met(np.array([[0.0, 1.0]])).tolist() == [True]  # 1 + margin is capped at 1
    with pytest.raises(GoalError):
        ClassGoal(target="yes", margin=-0.1)


def test_a_tie_meets_only_the_class_argmax_picks() -> None:
    tie = np.array([[0.5, 0.5]])
    (first,) = bind_goals([ClassGoal(target="no", margin=0.0)], BINARY)
    (second,) = bind_goals([ClassGoal(target="yes", margin=0.0)], BINARY)
    assert first.met(tie).tolist() == [True]
    assert second.met(tie).tolist() == [False]
    assert second.distance(tie)[0] > 0.0


def test_class_goal_matches_labels_by_value_then_text() -> None:
    spec = (OutputSpec("label", (0, 1, 2)),)
    assert bind_goals([ClassGoal(target=2)], spec)[0].class_index == 2
    assert bind_goals([ClassGoal(target="1")], spec)[0].class_index == 1
    bools = (OutputSpec("label", (False, True)),)
    assert bind_goals([ClassGoal(target=True)], bools)[0].class_index == 1
    with pytest.raises(GoalError, match="not one of"):
        bind_goals([ClassGoal(target=7)], spec)


def test_goals_are_matched_by_output_name() -> None:
    outputs = (OutputSpec("high"), OutputSpec("low"))
    bound = bind_goals([RangeGoal(output="low", low=0, high=1), ValueGoal(output="high", value=5)], outputs)
    assert [b.output.name for b in bound] == ["low", "high"]


@pytest.mark.parametrize(
    ("goals", "outputs", "field", "fragment"),
    [
        ([ValueGoal(value=1.0)], (OutputSpec("a"), OutputSpec("b")), "goals[0].output", "name one"),
        ([ValueGoal(output="c", value=1.0)], NUMERIC, "goals[0].output", "unknown output"),
        ([ClassGoal(target="yes")], NUMERIC, "goals[0].target", "numeric"),
        ([ValueGoal(value=1.0)], BINARY, "goals[0].kind", "class goal"),
        ([ValueGoal(value=1.0), RangeGoal(low=0, high=1)], NUMERIC, "goals[1].output", "two goals"),
        ([], NUMERIC, "goals", "at least one"),
    ],
)
def test_binding_errors_name_the_goal_field(
    goals: list[ClassGoal | ValueGoal | RangeGoal], outputs: tuple[OutputSpec, ...], field: str, fragment: str
) -> None:
    with pytest.raises(GoalError, match=fragment) as info:
        bind_goals(goals, outputs)
    assert info.value.field == field


def test_invalid_goal_fields_raise_goal_error() -> None:
    with pytest.raises(GoalError, match="inverted range"):
        RangeGoal(low=2.0, high=1.0)
    with pytest.raises(GoalError, match="confidence"):
        ClassGoal(target=1, confidence=1.5)
    with pytest.raises(GoalError, match="tolerance"):
        ValueGoal(value=1.0, tolerance=-0.1)
    with pytest.raises(GoalError):
        ValueGoal(value=float("nan"))
    assert isinstance(parse_goal({"kind": "range", "low": 0, "high": 1}), RangeGoal)
    with pytest.raises(GoalError):
        parse_goal({"kind": "shape", "output": "y"})


@pytest.mark.parametrize("tolerance", [1.0, 100.0])
def test_a_relative_tolerance_of_one_or_more_is_refused_as_an_absolute_one_meant(tolerance: float) -> None:
    """``value:60000~100`` was read as 10,000% and every positive output met it."""
    with pytest.raises(GoalError, match="relative") as info:
        ValueGoal(value=60_000.0, tolerance=tolerance)
    assert info.value.field.endswith("tolerance")
    assert ValueGoal(value=0.0, tolerance=tolerance).tolerance == tolerance  # at 0 it is absolute: |p| < t
    assert ValueGoal(value=60_000.0, tolerance=0.99).tolerance == 0.99


def test_a_label_written_as_text_names_a_numeric_class() -> None:
    floats = OutputSpec("risk", (0.0, 1.0))
    assert bind_goals([ClassGoal(target="1")], (floats,))[0].class_index == 1
    assert bind_goals([ClassGoal(target=1)], (floats,))[0].class_index == 1
    assert bind_goals([ClassGoal(target="0.0")], (floats,))[0].class_index == 0
    with pytest.raises(GoalError, match="not one of"):
        bind_goals([ClassGoal(target="2")], (floats,))
    flags = OutputSpec("flag", (False, True))
    with pytest.raises(GoalError):
        bind_goals([ClassGoal(target="1")], (flags,))  # a number never names a boolean class


def test_a_command_line_label_is_the_models_text_label_before_a_number() -> None:
    """``--goal class:01`` was read as the number 1 and named the class "1" of ["01", "1", "2.0"]."""
    from counterplan.server.cli.goal_text import parse_goal_text

    codes = (OutputSpec("code", ("01", "1", "2.0")),)
    for text, index in (("class:01", 0), ("class:1", 1), ("class:2.0", 2), ("class:2", 2), ("class: 01 @0.6", 0)):
        (bound,) = bind_goals([parse_goal_text(text)], codes)
        assert (bound.class_index, bound.goal.target) == (index, codes[0].classes[index])  # type: ignore[index]
    (bound,) = bind_goals([parse_goal_text("class:-1")], (OutputSpec("y", (-1, 1)),))
    assert (bound.class_index, bound.goal.target) == (0, -1)


def test_a_numpy_label_keeps_its_kind() -> None:
    """``ClassGoal(target=model.classes_[1])`` of a boolean classifier was the number 1.0 and refused
    ("class 1.0 is not one of [False, True]"); numpy's integers are whole numbers, as Python's."""
    from sklearn.linear_model import LogisticRegression

    flags = LogisticRegression().fit(np.arange(6.0).reshape(-1, 1), np.arange(6) > 2).classes_
    (bound,) = bind_goals([ClassGoal(target=flags[1])], (OutputSpec("flag", tuple(flags)),))
    assert bound.class_index == 1 and bound.goal.target is True
    assert ClassGoal(target=np.int64(7)).target == 7 and isinstance(ClassGoal(target=np.int64(7)).target, int)
    assert ClassGoal(target=np.str_("yes")).target == "yes"


@pytest.mark.parametrize("target", [float("nan"), np.nan, np.float32("inf"), -float("inf")])
def test_a_target_that_is_not_a_number_is_refused_in_one_message(target: float) -> None:
    """A NaN label was refused by each of the union's kinds in turn ("goal.target.str,
    goal.target.int, goal.target.float, goal.target.bool: ...")."""
    with pytest.raises(GoalError, match="finite number") as info:
        ClassGoal(target=target)
    assert info.value.field == "goal.target"


def test_a_range_may_be_open_at_one_end() -> None:
    import math

    from counterplan.planning.errors import GoalError
    from counterplan.planning.goals import RangeGoal
    from counterplan.server.cli.goal_text import parse_goal_text

    at_least = parse_goal_text("score=range:600..")
    assert isinstance(at_least, RangeGoal) and at_least.low == 600 and at_least.high == math.inf
    at_most = parse_goal_text("score=range:..600")
    assert isinstance(at_most, RangeGoal) and at_most.low == -math.inf and at_most.high == 600
    for low, high in ((-math.inf, math.inf), (math.inf, math.inf), (0.0, math.nan)):
        with pytest.raises(GoalError):
            RangeGoal(low=low, high=high)


def test_huge_goal_distances_stay_ordered_finite_and_above_a_failure() -> None:
    """A plain cap at 1e14 made every distance past it equal, so a search on a model whose outputs
    are 1e21 from the goal saw no direction. The scored distance is the distance up to the knee,
    then logarithmic: strictly increasing, continuous, finite and above a failed prediction's."""
    from counterplan.planning.calculator import FAILED_PREDICTION
    from counterplan.planning.goals import GOAL_DISTANCE_KNEE, scored_goal_distance

    small = np.array([0.0, 1e-9, 3.5, GOAL_DISTANCE_KNEE])
    assert scored_goal_distance(small).tolist() == small.tolist()
    huge = np.array([GOAL_DISTANCE_KNEE, 1e14, 1e15, 1e21, 1e21 * (1 + 1e-9), 1e100, 1e308, np.inf])
    scored = scored_goal_distance(huge)
    assert np.all(np.diff(scored[:-1]) > 0.0) and scored[-1] >= scored[-2]
    assert np.all(np.isfinite(scored)) and scored.max() < -FAILED_PREDICTION / 10.0
    assert scored_goal_distance(np.array([GOAL_DISTANCE_KNEE * (1 + 1e-12)]))[0] == pytest.approx(GOAL_DISTANCE_KNEE)
    assert np.isnan(scored_goal_distance(np.array([np.nan, 1e20]))[0])
