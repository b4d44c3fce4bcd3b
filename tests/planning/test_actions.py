"""Actions, their consequences and conditions, and the consequence-aware cost model."""

from __future__ import annotations

import numpy as np
import pytest

from counterplan.planning import CategoricalFeature, FloatFeature, IntegerFeature
from counterplan.planning.actions import Action, ActionError, ActionSet, CostGraph, apply, pass_size, total_cost
from counterplan.planning.expressions import Expression, Vocabulary
from counterplan.planning.space import FeatureSpace
from tests.toy_person import TOY, bad_everywhere, toy_space


def test_the_papers_worked_example_costs_27_5_and_22_5() -> None:
    space = toy_space()
    actions, graph = ActionSet.from_data(TOY).compile(space)
    job, degree, move = 0, 1, 2
    developer, bsc, us = 1.0, 1.0, 1.0  # encoded values: category indices
    total, steps = total_cost(actions, graph, space, space.original, [(move, us), (job, developer), (degree, bsc)])
    assert steps == pytest.approx([15.0, 7.5, 5.0]) and total == pytest.approx(27.5)
    total, steps = total_cost(actions, graph, space, space.original, [(degree, bsc), (move, us), (job, developer)])
    assert steps == pytest.approx([2.5, 15.0, 5.0]) and total == pytest.approx(22.5)


def test_an_action_applies_its_consequences_and_conditions_to_many_states_at_once() -> None:
    space = FeatureSpace(
        [
            IntegerFeature(name="education", value=13, low=1, high=16),
            IntegerFeature(name="age", value=30, low=17, high=90),
            FloatFeature(name="capital_gain", value=0.0, low=0.0, high=100_000.0),
            FloatFeature(name="capital_loss", value=0.0, low=0.0, high=5_000.0),
        ]
    )
    data = {
        "actions": [
            {
                "name": "study",
                "feature": "education",
                "low": 0,
                "high": 4,
                "consequences": {"age": "age + 2 * delta"},
                "effort": "abs(delta)",
                "post": "after.education > before.education",
            },
            {
                "name": "invest",
                "feature": "capital_gain",
                "low": 0,
                "high": 20_000,
                "effort": "abs(delta) / 10000",
                "pre": "capital_loss < 1",
            },
        ]
    }
    actions, graph = ActionSet.from_data(data).compile(space)
    states = np.array([[13, 30, 0, 0], [15, 40, 0, 0], [13, 30, 0, 500]], dtype=float)
    study = apply(actions[0], graph, space, states, np.array([2.0, 3.0, 0.0]))
    assert study.after[:, :2].tolist() == [[15, 34], [15, 40], [13, 30]]  # 15 + 3 leaves the domain; + 0 does nothing
    assert study.ok.tolist() == [True, False, False]
    assert study.cost[0] == pytest.approx(2.0)
    invest = apply(actions[1], graph, space, states, np.array([5000.0, 5000.0, 5000.0]))
    assert invest.ok.tolist() == [True, True, False]  # the third has a capital loss
    assert invest.cost[:2] == pytest.approx([0.5, 0.5])
    assert invest.after[2].tolist() == states[2].tolist()


@pytest.mark.parametrize(
    ("change", "field", "fragment"),
    [
        ({"feature": "salary"}, "actions[0].feature", "no feature 'salary'"),
        ({"feature": "location"}, "actions[0].feature", "'location' is immutable"),
        ({"kind": "add", "low": 3, "high": 1, "values": None}, "actions[0].low", "low (3) is above high (1)"),
        ({"kind": "add", "low": True, "high": 4, "values": None}, "actions[0].low", "must be a number, given True"),
        ({"kind": "add", "low": 1, "high": "5", "values": None}, "actions[0].high", "must be a number, given '5'"),
        ({"values": ["Astronaut"]}, "actions[0].values[0]", "not a value of 'job'"),
        ({"pre": "salary > 2"}, "actions[0].pre", "unknown name 'salary'"),
        ({"effort": "__import__('os')"}, "actions[0].effort", "only these functions may be called"),
        ({"consequences": {"height": "1"}}, "actions[0].consequences", "no feature 'height'"),
        ({"consequences": {"location": '"US"'}}, "actions[0].consequences.location", "'location' is immutable"),
    ],
)
def test_bad_actions_are_refused_naming_the_field(change: dict[str, object], field: str, fragment: str) -> None:
    space = FeatureSpace(
        [
            *toy_space().features[:2],
            CategoricalFeature(name="location", value="Germany", constrained=True),
            *toy_space().features[3:],
        ]
    )
    data = {"actions": [{**TOY["actions"][0], **change}]}  # type: ignore[dict-item]
    with pytest.raises(ActionError) as info:
        ActionSet.from_data(data).compile(space)
    assert info.value.field == field and fragment in info.value.problem


def test_the_graph_and_duplicate_names_are_checked() -> None:
    space = toy_space()
    with pytest.raises(ActionError, match="no feature 'city'"):
        ActionSet.from_data({**TOY, "graph": [{"source": "city", "target": "job", "tau": 1}]}).compile(space)
    with pytest.raises(ActionError, match="two actions are named 'job'"):
        ActionSet.from_data({"actions": [TOY["actions"][0], TOY["actions"][0]]}).compile(space)
    with pytest.raises(ActionError, match="actions"):
        ActionSet.from_data({"actions": []})


@pytest.mark.parametrize("name", ["raise\nincome", "pay\x1b[2Joff", "close\u202ecard"])
def test_an_action_name_that_would_not_show_as_it_is_is_refused(name: str) -> None:
    """Found fuzzing plans: a newline in a name split the front's table in two rows; an escape
    sequence or a bidirectional override would act on the terminal that prints it."""
    with pytest.raises(ActionError, match=r"actions\[0\]\.name.*a name is text that shows as it is; it holds \\"):
        ActionSet.from_data({"actions": [{"name": name, "feature": "job", "low": 1, "high": 2}]})
    assert ActionSet.from_data({"actions": [{"name": "pay off → card", "feature": "job", "low": 1, "high": 2}]})


def test_malformed_action_data_names_each_field_with_its_index() -> None:
    data = {
        "actions": [
            {"name": "a", "feature": "job", "low": 1.5, "high": "z"},
            {"name": "", "feature": "job"},
            {"name": 2.25, "feature": "job"},
        ]
    }
    with pytest.raises(ActionError) as info:
        ActionSet.from_data({**data, "graph": [{"source": "job"}]})
    fields = info.value.field.split(", ")
    assert {"actions[0].high", "actions[1].name", "graph[0].target", "graph[0].tau"} <= set(fields)
    assert "actions[0].high: " in info.value.problem and "(given 2.25)" in info.value.problem  # numbers stay
    spec = ActionSet.from_data({"actions": [{"name": "a", "feature": "job", "effort": 5}]}).actions[0]
    assert spec.effort == "5"  # a bare number is a formula too


def test_effort_and_pre_read_the_state_before_and_post_the_state_after() -> None:
    space = FeatureSpace(
        [
            IntegerFeature(name="education", value=13, low=1, high=16),
            IntegerFeature(name="age", value=30, low=17, high=90),
        ]
    )
    study = {
        "name": "study",
        "feature": "education",
        "low": 1,
        "high": 3,
        "consequences": {"age": "age + 2 * delta"},
        "effort": "age / 10 + after.age / 100",  # plain names: before the step
        "pre": "age < 40",
        "post": "age < 35 and before.age == 30",  # plain names: after the step
    }
    actions, graph = ActionSet.from_data({"actions": [study]}).compile(space)
    states = np.array([[13, 30], [13, 30], [13, 45]], dtype=float)
    result = apply(actions[0], graph, space, states, np.array([2.0, 3.0, 1.0]))
    assert result.cost == pytest.approx([3.0 + 0.34, 3.0 + 0.36, 4.5 + 0.47])
    assert result.ok.tolist() == [True, False, False]  # aged 36 after three levels; 45 is too old to start


def test_an_infinite_or_nan_effort_or_tau_leaves_a_step_without_a_price() -> None:
    space = toy_space()
    states = np.repeat(space.original.reshape(1, -1), 3, axis=0)
    for effort, tau in (("1e999", "0"), ("1e999", "1"), ("5", "log(-1)"), ("5", "1e999")):
        data = {
            "actions": [{**TOY["actions"][0], "effort": effort}],
            "graph": [{"source": "location", "target": "job", "tau": tau}],
        }
        actions, graph = ActionSet.from_data(data).compile(space)
        result = apply(actions[0], graph, space, states, np.ones(3))
        assert not result.priced.any() and not result.ok.any(), (effort, tau)  # before: NaN, inf, or tau 1
        assert (result.after == states).all()
    actions, graph = ActionSet.from_data({"actions": [TOY["actions"][0]]}).compile(space)
    assert apply(actions[0], graph, space, states, np.ones(3)).priced.all()
    with pytest.raises(ActionError, match="has no finite cost"):
        total_cost(
            *ActionSet.from_data({"actions": [{**TOY["actions"][0], "effort": "1e999"}]}).compile(space),
            space,
            space.original,
            [(0, 1.0)],
        )


def test_a_negative_effort_leaves_a_step_without_a_price_not_free() -> None:
    """``effort: delta / 5000`` on an action whose delta is negative (paying down debt), or
    ``effort: -3``: the effort was made 0, so the step was free and its plans looked cheapest
    (fuzzing: the demo's fronts were the same with ``effort: -3`` as with ``effort: 0``). It has
    no price now, as a NaN effort has: its plans are infeasible, and the result says why."""
    space = toy_space()
    states = np.repeat(space.original.reshape(1, -1), 3, axis=0)
    for effort in ("-3", "0 - abs(delta)"):
        actions, graph = ActionSet.from_data({"actions": [{**TOY["actions"][0], "effort": effort}]}).compile(space)
        result = apply(actions[0], graph, space, states, np.ones(3))
        assert not result.priced.any() and not result.ok.any(), effort
    actions, graph = ActionSet.from_data({"actions": [{**TOY["actions"][0], "effort": "0"}]}).compile(space)
    free = apply(actions[0], graph, space, states, np.ones(3))
    assert free.priced.all() and (free.cost == 0.0).all() and not np.signbit(free.cost).any()  # 0 is a price
    with pytest.raises(ActionError, match="an effort that is negative"):
        total_cost(
            *ActionSet.from_data({"actions": [{**TOY["actions"][0], "effort": "-3"}]}).compile(space),
            space,
            space.original,
            [(0, 1.0)],
        )


@pytest.mark.parametrize(
    ("change", "fields"),
    [
        ({"kind": "add", "low": -1e308, "high": 1e308}, ["actions[0].low", "actions[0].high"]),
        ({"kind": "add", "low": 0, "high": 2.0**53 + 2}, ["actions[0].high"]),
        ({"kind": "set", "values": [1e300, 3]}, ["actions[0].values[0]"]),
    ],
)
def test_bounds_and_set_values_are_held_to_2_to_the_53(change: dict[str, object], fields: list[str]) -> None:
    with pytest.raises(ActionError) as info:
        ActionSet.from_data({"actions": [{"name": "earn", "feature": "age", **change}]})
    assert [f for f, _ in info.value.violations] == fields
    assert all("between -2^53 and 2^53" in problem for _, problem in info.value.violations)
    ActionSet.from_data({"actions": [{"name": "earn", "feature": "age", "low": -(2.0**53), "high": 2.0**53}]})


def test_every_bad_field_of_every_action_and_edge_is_reported_at_once() -> None:
    space = toy_space()
    with pytest.raises(ActionError) as info:
        ActionSet.from_data(bad_everywhere(32, 32)).compile(space)
    violations = info.value.violations
    assert len(violations) == 32 * 6 + 32 * 3 == 288  # before: 1
    fields = [f for f, _ in violations]
    assert len(set(fields)) == 288
    assert {"actions[0].feature", "actions[3].effort", "actions[31].post", "graph[1].tau", "graph[31].target"} <= set(
        fields
    )
    assert ("actions[3].consequences.age", "unknown name 'salary': use a feature's name or delta, value") in violations
    assert ("actions[3].post", "job is a category: compare it with one of its categories ['Seller', 'Developer']") in (
        violations
    )
    text = str(info.value)
    assert "\n" not in text and len(text) <= 600 and text.startswith("actions: 288 bad fields: actions[0].feature")


def test_malformed_data_gives_one_precise_error_a_field() -> None:
    data = {
        "actions": [
            {"name": "a", "feature": "job", "low": "z", "high": 1},
            {"name": "b", "feature": "job", "kind": "set", "values": ["Developer", float("nan")]},
            {"name": "c", "feature": "job", "effort": "1 + " * 200 + "1"},
            {"name": "d", "feature": "job", "consequences": {"age": "1 + " * 200 + "1"}},
        ]
    }
    with pytest.raises(ActionError) as info:
        ActionSet.from_data(data)
    assert info.value.violations == [
        ("actions[0].low", "must be a number, given 'z'"),
        ("actions[1].values[1]", "a value must be a text or a finite number, given nan"),
        ("actions[2].effort", "a formula has at most 500 characters, given 801"),
        ("actions[3].consequences.age", "a formula has at most 500 characters, given 801"),
    ]  # before: a "Tuple should have at least 1 item" more, three union branches for the NaN, "500 items"
    with pytest.raises(ActionError) as info:
        ActionSet.from_data({"actions": []})
    assert info.value.violations == [("actions", "give at least one action")]


def test_a_pass_counts_each_actions_formula_parts_and_the_edges_into_what_it_changes() -> None:
    """What a server weighs a plan generation by (population x this): a formula counts its parts
    as the formula limit does (its syntax tree's nodes), an action 1 more, and an edge's tau
    counts for every action that changes the edge's target, directly or as a consequence."""
    space = FeatureSpace(
        [
            FloatFeature(name="a", value=1.0, low=0.0, high=10.0),
            FloatFeature(name="b", value=1.0, low=0.0, high=10.0),
            FloatFeature(name="c", value=1.0, low=0.0, high=10.0),
        ]
    )
    data = {
        "actions": [
            {"name": "raise a", "feature": "a", "kind": "add", "low": 0, "high": 1, "effort": "a + b"},
            {"name": "raise b", "feature": "b", "kind": "add", "low": 0, "high": 1, "consequences": {"c": "a + b"}},
        ],
        "graph": [{"source": "a", "target": "c", "tau": "a + b"}],
    }
    actions, graph = ActionSet.from_data(data).compile(space)
    parts = Expression.parse("a + b", Vocabulary(space.names, {}), "x").size
    assert parts == 7  # Expression, BinOp, Add, two Names and their two Load contexts
    assert pass_size(actions[:1], graph) == 1 + parts  # no edge into a
    assert pass_size(actions, graph) == (1 + parts) + (1 + parts + parts)  # b's consequence on c pays c's edge


def _gridded_space() -> FeatureSpace:
    """A whole number, a float with two decimals (the space then keeps grids) and an age that
    may only rise."""
    return FeatureSpace(
        [
            IntegerFeature(name="cards", value=3, low=0, high=4),
            FloatFeature(name="income", value=40.0, low=0.0, high=100.0, precision=2),
            IntegerFeature(name="age", value=30, low=18, high=90, monotone="increase"),
        ]
    )


def _one(space: FeatureSpace, action: dict[str, object]) -> tuple[list[Action], CostGraph]:
    return ActionSet.from_data({"actions": [{"name": "a", **action}]}).compile(space)


def test_an_add_on_a_grid_takes_the_grids_deltas_within_its_bounds() -> None:
    """``low: 0.5, high: 3.5`` on a whole number added 4 (``rint(3.5)``) and 0: beyond its bounds."""
    space = _gridded_space()
    actions, _ = _one(space, {"feature": "cards", "low": -3.5, "high": -0.5})
    deltas = actions[0].value_of(np.linspace(0.0, 1.0, 101), space)
    assert set(deltas.tolist()) == {-3.0, -2.0, -1.0}
    actions, _ = _one(space, {"feature": "income", "low": 0.004, "high": 0.026})
    assert set(actions[0].value_of(np.linspace(0.0, 1.0, 101), space).tolist()) == {0.01, 0.02}
    with pytest.raises(ActionError, match=r"no change of 'cards' \(whole numbers\) lies between low \(0.3\)"):
        _one(space, {"feature": "cards", "low": 0.3, "high": 0.7})


def test_a_consequence_that_leaves_the_domain_breaks_its_step_on_a_gridded_space() -> None:
    """The space's snap clipped ``cards - 10`` into the domain (cards 3 -> 0): a step reported with
    a consequence its formula never gave, where leaving the domain makes the plan infeasible."""
    space = _gridded_space()
    actions, graph = _one(space, {"feature": "income", "low": 1, "high": 5, "consequences": {"cards": "cards - 10"}})
    result = apply(actions[0], graph, space, space.original.reshape(1, -1), np.array([2.0]))
    assert result.ok.tolist() == [False]
    assert result.after[0].tolist() == space.original.tolist()


def test_a_consequence_on_a_grid_is_rounded_onto_it_never_clipped() -> None:
    """A whole number's consequence is a whole number (``cards + 0.5 * delta`` held 3.5 when no
    float had a precision) and a decrease of an age that may only rise is kept for the final
    check (the snap clipped it back to the original: a step shown without its consequence)."""
    space = _gridded_space()
    actions, graph = _one(
        space,
        {"feature": "income", "low": 1, "high": 5, "consequences": {"cards": "cards - 0.4 * delta", "age": "age - 1"}},
    )
    result = apply(actions[0], graph, space, space.original.reshape(1, -1), np.array([2.0]))
    assert result.ok.tolist() == [True]
    assert result.after[0].tolist() == [2.0, 42.0, 29.0]  # 3 - 0.8 is 2.2, on its grid 2
    plain = FeatureSpace([space["cards"], FloatFeature(name="income", value=40.0, low=0.0, high=100.0)])
    assert not plain.checks_grid  # nothing was snapped: a model was asked about 2.2 cards
    actions, graph = _one(
        plain, {"feature": "income", "low": 1, "high": 5, "consequences": {"cards": "cards - 0.4 * delta"}}
    )
    result = apply(actions[0], graph, plain, plain.original.reshape(1, -1), np.array([2.0]))
    assert result.after[0].tolist() == [2.0, 42.0]


def test_an_effort_prices_the_change_the_state_holds() -> None:
    """The effort read the delta before it was put on the feature's grid: income 40 -> 40.87 was
    priced 0.873."""
    space = _gridded_space()
    actions, graph = _one(space, {"feature": "income", "low": 0, "high": 5})
    result = apply(actions[0], graph, space, space.original.reshape(1, -1), np.array([0.873]))
    assert result.after[0, 1] == 40.87 and result.cost[0] == pytest.approx(0.87)


def test_a_consequence_on_a_category_gives_one_of_its_categories_by_name() -> None:
    """``job: 1`` set the category second in the model's order (its code), silently, while
    ``job: "b"`` was refused: a category's code is no number a user means."""
    space = FeatureSpace(
        [
            CategoricalFeature(name="job", value="a", categories=("a", "b", "c")),
            IntegerFeature(name="n", value=3, low=0, high=9),
        ]
    )
    for formula, job in (('"b"', "b"), ('"c" if n > 3 else "b"', "b"), ('"c" if before.n < 4 else job', "c")):
        actions, graph = _one(space, {"feature": "n", "low": 1, "high": 2, "consequences": {"job": formula}})
        result = apply(actions[0], graph, space, space.original.reshape(1, -1), np.array([1.0]))
        assert result.ok.tolist() == [True] and space.decode(result.after[0]) == {"job": job, "n": 4}
    for formula in ("1", "n", "2 if n > 2 else 0", 'job == "a"'):
        with pytest.raises(ActionError, match=r"consequences.job': job is a category: give one of its categories"):
            _one(space, {"feature": "n", "low": 1, "high": 2, "consequences": {"job": formula}})


def test_a_step_onto_allowed_values_prices_and_propagates_the_value_it_takes() -> None:
    """A feature with allowed values takes the nearest of them: ``savings`` of 0 and an add of 7
    lands on 10. The effort priced 7 and the consequence read a delta of 7 (``bonus`` +14), where
    the state moved by 10: a step whose cost and consequence were not those of the change it
    reports."""
    space = FeatureSpace(
        [
            IntegerFeature(name="savings", value=0, low=0, high=40, allowed=(0.0, 10.0, 20.0, 40.0)),
            IntegerFeature(name="bonus", value=0, low=0, high=100),
        ]
    )
    data = {
        "actions": [
            {"name": "save", "feature": "savings", "low": 1, "high": 12, "consequences": {"bonus": "bonus + 2 * delta"}}
        ]
    }
    actions, graph = ActionSet.from_data(data).compile(space)
    states = np.array([[0.0, 0.0], [0.0, 0.0], [20.0, 0.0]])
    study = apply(actions[0], graph, space, states, np.array([7.0, 12.0, 1.0]))
    # 7 and 12 land on 10; 20 + 1 lands back on 20: no change, so no step
    assert study.ok.tolist() == [True, True, False]
    assert study.after.tolist() == [[10.0, 20.0], [10.0, 20.0], [20.0, 0.0]]  # bonus + 2 x the change held
    assert study.cost[:2] == pytest.approx([10.0, 10.0])  # the effort prices it (|delta| by default)


def test_a_set_value_off_its_features_grid_is_refused_naming_it() -> None:
    """``rate`` holds two decimals: a set value of 1.234 was taken and the step held 1.23, a value
    the action does not list (the plan fuzz's finding)."""
    space = FeatureSpace([FloatFeature(name="rate", value=1.0, low=0.0, high=9.0, precision=2)])
    data = {"actions": [{"name": "r", "feature": "rate", "kind": "set", "values": [1.5, 1.234, 2.25]}]}
    with pytest.raises(ActionError) as info:
        ActionSet.from_data(data).compile(space)
    assert info.value.field == "actions[0].values[1]"
    assert "1.234 is not on 'rate''s grid (multiples of 0.01)" in info.value.problem
    fine = {"actions": [{"name": "r", "feature": "rate", "kind": "set", "values": [1.5, 1.23, 2.25]}]}
    actions, _ = ActionSet.from_data(fine).compile(space)
    assert actions[0].choices(space).tolist() == [1.5, 1.23, 2.25]


def test_a_set_value_off_its_features_allowed_values_is_refused_naming_it() -> None:
    """``term`` may only take 16, 19, 22, 57 or 59: a set action listing 6 and 83 was taken, and
    its steps held 16 and 59, values the action does not list (6 onto the original 16: a step of
    its consequences alone). Found by fuzzing plans under allowed values; a category's values
    were refused already (its domain is its allowed categories)."""
    space = FeatureSpace(
        [
            IntegerFeature(name="term", value=16, low=0, high=90, allowed=(16.0, 19.0, 22.0, 57.0, 59.0)),
            FloatFeature(name="rate", value=1.0, low=0.0, high=9.0, precision=1, allowed=(1.0, 1.25, 2.5)),
        ]
    )
    data = {
        "actions": [
            {"name": "t", "feature": "term", "kind": "set", "values": [6, 19, 83, 16]},
            {"name": "r", "feature": "rate", "kind": "set", "values": [1.25, 2.0]},
        ]
    }
    with pytest.raises(ActionError) as info:
        ActionSet.from_data(data).compile(space)
    assert [field for field, _ in info.value.violations] == [
        "actions[0].values[0]",
        "actions[0].values[2]",
        "actions[1].values[1]",
    ]
    assert info.value.violations[0][1] == "6 is not one of 'term''s allowed values (16, 19, 22, 57, 59)"
    # the allowed values (and the original) are held as listed, 1.25 off the precision's grid too
    fine = {"actions": [{**data["actions"][0], "values": [19, 16]}, {**data["actions"][1], "values": [1.25, 1.0]}]}
    actions, graph = ActionSet.from_data(fine).compile(space)
    states = np.array([[16.0, 1.0], [16.0, 2.5]])
    assert apply(actions[0], graph, space, states, actions[0].choices(space)).after[:, 0].tolist() == [19.0, 16.0]
    assert apply(actions[1], graph, space, states, actions[1].choices(space)).after[:, 1].tolist() == [1.25, 1.0]


def test_a_float_with_allowed_values_holds_them_whatever_its_decimals() -> None:
    """``rate`` has one decimal and may take 1.21, 1.25 or 2.5 (a list of values wins over
    decimals): a step setting 1.25, and a consequence giving 1.25, were rounded to 1.2 first and
    held as 1.21, a value neither listed nor computed. Found by fuzzing plans under allowed values."""
    space = FeatureSpace(
        [
            FloatFeature(name="rate", value=1.0, low=0.0, high=9.0, precision=1, allowed=(1.21, 1.25, 2.5)),
            IntegerFeature(name="n", value=0, low=0, high=9),
        ]
    )
    data = {
        "actions": [
            {"name": "r", "feature": "rate", "kind": "set", "values": [1.25, 1.21]},
            {"name": "c", "feature": "n", "low": 1, "high": 1, "consequences": {"rate": "1.25 if n < 1 else 1.3"}},
        ]
    }
    actions, graph = ActionSet.from_data(data).compile(space)
    states = np.array([[1.0, 0.0], [1.0, 1.0]])
    assert apply(actions[0], graph, space, states, actions[0].choices(space)).after[:, 0].tolist() == [1.25, 1.21]
    # 1.25 is held as given, 1.3 (not allowed) goes onto the nearest allowed value
    assert apply(actions[1], graph, space, states, np.array([1.0, 1.0])).after.tolist() == [[1.25, 1.0], [1.25, 2.0]]


def test_a_step_may_take_an_allowed_value_against_a_monotone_rule_on_the_way() -> None:
    """A plan's steps may move a monotone feature against its rule (its final state keeps it): with
    allowed values too, the step went onto the allowed values of the search bounds, which a
    feature that may only rise cuts below its original, so ``set 10`` or ``add -10`` from 20 held
    20 and changed nothing (the gRPC/plan fuzz's open finding); without the list the step was taken."""
    space = FeatureSpace(
        [
            IntegerFeature(name="x", value=20, low=0, high=40, monotone="increase", allowed=(10, 20, 30)),
            IntegerFeature(name="n", value=0, low=0, high=9),
        ]
    )
    assert space.allowed[0].tolist() == [20.0, 30.0]  # the search still never goes below the original
    data = {
        "actions": [
            {"name": "down", "feature": "x", "kind": "set", "values": [10]},
            {"name": "less", "feature": "x", "low": -10, "high": -10},
            {"name": "nudge", "feature": "n", "low": 1, "high": 1, "consequences": {"x": "x - 9"}},
        ]
    }
    actions, graph = ActionSet.from_data(data).compile(space)
    states = np.array([[20.0, 0.0]])
    for action, value in zip(actions[:2], (10.0, -10.0), strict=True):
        step = apply(action, graph, space, states, np.array([value]))
        assert step.ok.tolist() == [True] and step.after.tolist() == [[10.0, 0.0]]
    step = apply(actions[2], graph, space, states, np.array([1.0]))  # 11 goes onto the nearest allowed, 10
    assert step.ok.tolist() == [True] and step.after.tolist() == [[10.0, 1.0]]


def test_an_actions_fields_of_the_other_kind_are_refused_not_ignored() -> None:
    """``values`` on an 'add' action and ``low``/``high`` on a 'set' one were dropped without a
    word: the plan then ran a different action from the one written (the plan fuzz's finding)."""
    space = FeatureSpace([IntegerFeature(name="n", value=0, low=0, high=9)])
    cases = [
        ({"name": "a", "feature": "n", "low": 1, "high": 2, "values": [3]}, "actions[0].values", "use kind 'set'"),
        ({"name": "s", "feature": "n", "kind": "set", "values": [3], "high": 5}, "actions[0].high", "not a change"),
    ]
    for action, field, words in cases:
        with pytest.raises(ActionError) as caught:
            ActionSet.from_data({"actions": [action]}).compile(space)
        assert caught.value.field == field and words in caught.value.problem


def test_an_add_onto_allowed_values_stays_within_its_bounds() -> None:
    """An add of -11 to 3 from 12, on a feature allowed 0, 4, 7, 17 and 18, took the nearest
    allowed value whatever the bounds: 12 + 3 = 15 landed on 17 (a change of 5) and 12 - 11 = 1
    on 0 (a change of -12), steps the action does not allow. It takes the nearest allowed value
    the bounds reach (the original too: then no change), or runs not at all."""
    space = FeatureSpace([IntegerFeature(name="n", value=12, low=0, high=19, allowed=(0.0, 4.0, 7.0, 17.0, 18.0))])
    actions, graph = _one(space, {"feature": "n", "low": -11, "high": 3})
    states = np.array([[12.0], [12.0], [12.0], [18.0]])
    step = apply(actions[0], graph, space, states, np.array([3.0, -11.0, -5.0, 1.0]))
    # 15 -> 12 (within [1, 15]: 4, 7 and the original 12): no change; 1 -> 4; 7 -> 7; from 18,
    # [19, 21] holds no allowed value
    assert step.after[:, 0].tolist() == [12.0, 4.0, 7.0, 18.0]
    assert step.ok.tolist() == [False, True, True, False]
    assert step.cost[1:3].tolist() == [8.0, 5.0]  # |delta| as held


def test_a_formula_reads_a_gap_as_nan_and_an_add_cannot_fill_it() -> None:
    """A missing value the problem may fill was read by the formulas as its missing code, a
    number below the domain (-1 here): an add of 1 to 15 filled the gap with 0 to 14 (code plus
    delta), a consequence ``n + 5`` gave 4 and a condition ``n < 3`` held. A gap is NaN to every
    formula, as to the model: an add on it or a consequence computed from it cannot run, a
    condition on it is false, and a set fills it."""
    space = FeatureSpace(
        [
            IntegerFeature(name="n", value=None, low=0, high=20, fill_missing=True),
            IntegerFeature(name="m", value=3, low=0, high=20),
        ]
    )
    gap = space.original.reshape(1, -1)

    def runs(action: dict[str, object], value: float) -> bool:
        actions, graph = _one(space, action)
        return bool(apply(actions[0], graph, space, gap, np.array([value])).ok[0])

    assert not runs({"feature": "n", "low": 1, "high": 15}, 5.0)
    assert runs({"feature": "n", "kind": "set", "values": [5]}, 5.0)
    assert not runs({"feature": "m", "low": 1, "high": 2, "consequences": {"n": "n + 5"}}, 1.0)
    assert runs({"feature": "m", "low": 1, "high": 2, "consequences": {"n": "5"}}, 1.0)
    assert not runs({"feature": "m", "low": 1, "high": 2, "pre": "n < 3"}, 1.0)
    assert runs({"feature": "m", "low": 1, "high": 2, "pre": "not n < 3"}, 1.0)


def test_a_consequence_far_past_the_domain_is_refused_without_a_warning() -> None:
    """A consequence of 1e308 on a float of two decimals was scaled by 100 to be rounded: numpy
    printed 'RuntimeWarning: overflow encountered in multiply' (on the command line's stderr
    too) before the step was refused as outside the domain."""
    import warnings

    space = _gridded_space()
    actions, graph = _one(space, {"feature": "cards", "low": -1, "high": -1, "consequences": {"income": "1e308"}})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        step = apply(actions[0], graph, space, space.original.reshape(1, -1), np.array([-1.0]))
    assert not step.ok[0]
