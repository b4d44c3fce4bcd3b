"""``counterplan plan``: the front as a table and numbered steps, JSON, and refusals by field."""

from __future__ import annotations

import json
import os
from pathlib import Path

import joblib
import numpy as np
import pandas as pd
import pytest
import yaml
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import GradientBoostingClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder

from tests.cli import run_cli

pytest.importorskip("pymoo")

ACTIONS = {
    "actions": [
        {
            "name": "add education",
            "feature": "education-num",
            "low": 1,
            "high": 6,
            "consequences": {"age": "age + 2 * delta"},
            "effort": "abs(delta)",
        },
        {"name": "invest", "feature": "capital-gain", "low": 0, "high": 30000, "effort": "abs(delta) / 10000"},
        {"name": "change occupation", "feature": "occupation", "kind": "set", "values": ["Manager"], "effort": 5},
    ],
    "graph": [{"source": "education-num", "target": "capital-gain", "tau": "1 - education_num / 32"}],
}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """An adult-like data set (columns with '-' as adult's) and a gradient-boosting pipeline."""
    rng = np.random.default_rng(0)
    n = 600
    frame = pd.DataFrame(
        {
            "age": rng.integers(18, 70, n),
            "education-num": rng.integers(1, 17, n),
            "capital-gain": np.where(rng.random(n) < 0.2, rng.integers(0, 40000, n), 0),
            "occupation": rng.choice(["Manager", "Other"], n),
        }
    )
    score = frame["education-num"] / 4 + frame["capital-gain"] / 8000 + (frame["occupation"] == "Manager") * 1.5
    frame["income"] = (score + rng.normal(0, 0.5, n) > 4.5).astype(int)
    folder = tmp_path_factory.mktemp("plans")
    csv = folder / "adult.csv"
    frame.to_csv(csv, index=False)
    encode = ColumnTransformer([("occupation", OneHotEncoder(), ["occupation"])], remainder="passthrough")
    model = Pipeline([("encode", encode), ("model", GradientBoostingClassifier(n_estimators=30, random_state=0))])
    model.fit(frame.drop(columns="income"), frame["income"])
    joblib.dump(model, folder / "model.joblib")
    (folder / "actions.yaml").write_text(yaml.safe_dump(ACTIONS))
    row = int(np.flatnonzero(model.predict(frame.drop(columns="income")) == 0)[0])
    return {"csv": csv, "model": folder / "model.joblib", "actions": folder / "actions.yaml", "row": Path(str(row))}


def _args(files: dict[str, Path], *more: str) -> list[str]:
    return [
        "plan", "--model", str(files["model"]), "--data", str(files["csv"]), "--target", "income",
        "--row", str(files["row"]), "--actions", str(files["actions"]), "--population", "60",
        "--generations", "20", *more,
    ]  # fmt: skip


def test_the_front_prints_as_a_table_and_numbered_steps(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path]
) -> None:
    code, out, err = run_cli(capsys, *_args(files))
    assert code == 0, err
    assert "plans on the Pareto front" in out and "Plan 1: cost" in out
    assert "  1. " in out and "<- the goal is met" in out
    studies = [line for line in out.splitlines() if "add education: education-num" in line]
    assert studies and all(", age " in line for line in studies)  # the consequence is shown, on one line


def test_json_gives_every_plan_with_its_steps_and_states(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path]
) -> None:
    code, out, err = run_cli(capsys, *_args(files, "--json"))
    assert code == 0, err
    result = json.loads(out)
    assert result["plans"] and result["cheapest"]["valid"]
    last = result["cheapest"]["steps"][-1]
    assert last["goal_met"] and set(last["state"]) == {"age", "education-num", "capital-gain", "occupation"}
    costs = [p["total_cost"] for p in result["plans"]]
    assert costs == sorted(costs)
    studies = [s for p in result["plans"] for s in p["steps"] if s["action"] == "add education"]
    assert studies  # the front has a plan through education: it ages the person two years a level
    for step in studies:
        (before, after), levels = step["consequences"]["age"], step["after"] - step["before"]
        assert after - before == 2 * levels and step["state"]["age"] == after


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"feature": "salary"}, "actions 'actions[0].feature': no feature 'salary'"),
        ({"low": 5, "high": 1}, "actions 'actions[0].low': low (5) is above high (1)"),
        ({"low": True}, "actions 'actions[0].low': must be a number, given True"),
        ({"effort": "open('x')"}, "actions 'actions[0].effort': only these functions may be called"),
    ],
)
def test_a_bad_action_is_refused_naming_its_field(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path], tmp_path: Path, change: dict[str, object], fragment: str
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        yaml.safe_dump({**ACTIONS, "actions": [{**ACTIONS["actions"][0], **change}, *ACTIONS["actions"][1:]]})
    )
    args = _args(files)
    args[args.index("--actions") + 1] = str(bad)
    code, _, err = run_cli(capsys, *args)
    assert code == 2 and fragment in err


def test_an_immutable_feature_and_missing_flags_are_refused(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path]
) -> None:
    code, _, err = run_cli(capsys, *_args(files, "--immutable", "occupation"))
    assert code == 2 and "'occupation' is immutable" in err
    code, _, err = run_cli(capsys, "plan", "--model", str(files["model"]))
    assert code == 2 and "give both --model and --data (or neither, for the demo)" in err
    code, _, err = run_cli(capsys, "plan", "--model", str(files["model"]), "--data", str(files["csv"]), "--row", "0")
    assert code == 2 and "--actions: give the actions file" in err
    code, _, err = run_cli(capsys, *_args(files, "--instance", "{}"))
    assert code == 2 and "give exactly one of --row and --instance" in err
    code, _, err = run_cli(capsys, *_args(files, "--population", "2"))
    assert code == 2 and "--population" in err


SMALL = ("--population", "60", "--generations", "10", "--json")


def test_the_demo_plans_with_its_own_actions_without_any_file(capsys: pytest.CaptureFixture[str]) -> None:
    from counterplan.planning.demo import DEMO_ACTIONS

    code, out, err = run_cli(capsys, "plan", *SMALL)
    assert code == 0, err
    result = json.loads(out)
    names = {a["name"] for a in DEMO_ACTIONS["actions"]}
    assert result["plans"] and all(p["valid"] for p in result["plans"])
    assert {s["action"] for p in result["plans"] for s in p["steps"]} <= names
    assert result["original"]["income"] == 38_000.0 and result["original_prediction"] < 0.7


def test_an_instance_that_already_meets_the_goal_needs_no_plan(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "plan", "--goal", "class:0", "--population", "20", "--generations", "2")
    assert code == 0, err
    assert "already met" in out and "no action is needed" in out and "Plan 1" not in out


def test_the_shipped_demo_actions_file_is_the_demos_own() -> None:
    from counterplan.planning.actions import ActionSet
    from counterplan.planning.demo import DEMO_ACTIONS

    text = (Path(__file__).parents[3] / "examples" / "loan-demo-actions.yaml").read_text()
    assert ActionSet.from_data(yaml.safe_load(text)) == ActionSet.from_data(DEMO_ACTIONS)


@pytest.mark.integration  # a real server on a loopback port
def test_a_plan_on_a_server_prints_what_a_local_plan_prints(capsys: pytest.CaptureFixture[str]) -> None:
    from counterplan.planning.demo import DEMO_ACTIONS
    from counterplan.server.grpc.app import start_server
    from counterplan.server.grpc.settings import ServerSettings

    running = start_server(ServerSettings(port=0))
    capsys.readouterr()  # the server's start line
    try:
        code, remote_out, err = run_cli(capsys, "plan", "--server", running.target, *SMALL)
        assert code == 0, err
        code, text, err = run_cli(
            capsys, "plan", "--server", running.target, "--population", "60", "--generations", "10"
        )
        assert code == 0 and "Plan 1: cost" in text and "<- the goal is met" in text, err
        bad = {"actions": [{"name": "shrink", "feature": "age", "low": -5, "high": -1}]}
        code, _, err = run_cli(capsys, "plan", "--server", running.target, "--actions", _write(bad), *SMALL)
        assert code == 2 and "INVALID_ARGUMENT" in err and "'age' is immutable" in err
        # no action with a price: the front is empty for the costs, and the model did not fail
        unpriced = {"actions": [{**a, "effort": "10 ** 10 ** 10"} for a in DEMO_ACTIONS["actions"]]}
        code, text, err = run_cli(
            capsys, "plan", "--server", running.target, "--actions", _write(unpriced), "--generations", "3"
        )
        assert code == 3 and "No plan reaches the goal" in text, err  # 3: nothing found
        assert "Without a price: " in text and "had no finite cost" in text and "The model failed" not in text
    finally:
        running.stop(0)
    code, local_out, err = run_cli(capsys, "plan", *SMALL)
    assert code == 0, err
    remote, local = json.loads(remote_out), json.loads(local_out)
    for result in (remote, local):
        del result["seconds"]
    assert remote == local


def _write(data: dict[str, object]) -> str:
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as handle:
        yaml.safe_dump(data, handle)
    return handle.name


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [
        (("--generations", "0"), "--generations: Input should be greater than 0"),
        (("--time-limit", "-1"), "--time-limit must be a finite number of seconds above 0"),  # as explain says
        (("--time-limit", "1e12"), "--time-limit must be a finite number of seconds above 0 and at most 1e+10"),
        (("--seed", "-1"), "--seed must be a whole number from 0 to 2**63 - 1"),
    ],
)
def test_a_bad_search_flag_is_refused_naming_the_flag(
    capsys: pytest.CaptureFixture[str], flags: tuple[str, str], fragment: str
) -> None:
    """The generations and the time limit fill the search's termination; an error still names
    the flag the user gave, never the solver's field."""
    code, _, err = run_cli(capsys, "plan", *flags)
    assert code == 2 and fragment in err, err
    assert "step_count_limit" not in err and "spent_limit_seconds" not in err and "random_seed" not in err


def test_a_front_laid_out_in_part_says_how_many_plans_it_left_out(capsys: pytest.CaptureFixture[str]) -> None:
    """A search that a stop or its time limit ended lays out its cheapest plans only
    (``PlanResult.front_size`` counts them all): the table and the interrupted line say so."""
    from counterplan.server.cli.plan import _print, _so_far
    from counterplan.solver.plans.planner import ActionPlan, PlanResult, PlanStep

    step = PlanStep(
        action="a", feature="x", before=0.0, after=1.0, cost=1.0, state={"x": 1.0}, prediction=0.9, goal_met=True
    )
    cheapest = ActionPlan(steps=[step], total_cost=1.0, distance=0.1, valid=True)
    fields = {"original": {"x": 0.0}, "original_prediction": 0.1, "generations": 3, "model_calls": 4, "seconds": 1.0}
    part = PlanResult(
        plans=[cheapest], front_size=1820, cheapest=cheapest, short=cheapest, stopped_early=True, **fields
    )
    _print(part, "probability")
    assert "Stopped: the cheapest 1 of the 1820 plans on the front are laid out, the rest are not." in (
        capsys.readouterr().out
    )
    assert "1820 plans on the front" in _so_far(part)
    whole = PlanResult(plans=[cheapest], cheapest=cheapest, short=cheapest, **fields)  # front_size: all of them
    assert whole.front_size == 1
    _print(whole, "probability")
    assert "Stopped" not in capsys.readouterr().out


@pytest.mark.parametrize("effort", ["10 ** 10 ** 10", "-3"], ids=["infinite", "negative"])
def test_an_action_without_a_price_is_named_under_the_front(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path], tmp_path: Path, effort: str
) -> None:
    """A plan whose step has no price (an effort that is infinite, NaN or negative) is infeasible,
    and the result's ``cost_failure`` says so; the command printed only "No plan reaches the goal
    with these actions.", as if the model were the reason."""
    priced = {
        **ACTIONS,
        "actions": [{**a, "effort": effort} if a["name"] == "invest" else a for a in ACTIONS["actions"]],
    }
    actions = tmp_path / "unpriced.yaml"
    actions.write_text(yaml.safe_dump(priced))
    args = _args(files)
    args[args.index("--actions") + 1] = str(actions)
    _, out, err = run_cli(capsys, *args)
    assert "Traceback" not in out + err
    assert "Without a price: " in out and "had no finite cost (the first: action 'invest'" in out, out


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_an_actions_file_that_is_a_named_pipe_is_refused_not_waited_on(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path], tmp_path: Path
) -> None:
    """``--actions`` on a named pipe waited for a writer for good (fuzzing: killed after 20 s)."""
    pipe = tmp_path / "actions.yaml"
    os.mkfifo(pipe)
    args = _args(files)
    args[args.index("--actions") + 1] = str(pipe)
    code, out, err = run_cli(capsys, *args)
    assert code == 2, err
    assert "--actions: " in err and "not a regular file" in err and "Traceback" not in out + err


def test_action_names_that_look_like_markup_are_printed_as_they_are(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path], tmp_path: Path
) -> None:
    """The front's table is a rich table, which reads ``[...]`` as markup: an action named ``[/]``
    ended the command with a stack trace, ``[red]invest`` was shown as ``invest``."""
    names = ["[/]", "[red]invest", "change occupation"]
    marked = {**ACTIONS, "actions": [{**a, "name": n} for a, n in zip(ACTIONS["actions"], names, strict=True)]}
    actions = tmp_path / "marked.yaml"
    actions.write_text(yaml.safe_dump(marked))
    args = _args(files)
    args[args.index("--actions") + 1] = str(actions)
    code, out, err = run_cli(capsys, *args)
    assert code == 0, err
    assert "Traceback" not in out + err
    table = out.split("Plan 1:")[0]
    assert any(name in table for name in names[:2]), table
