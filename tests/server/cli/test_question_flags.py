"""The question's flags: one group, the same in every command, restricting categories too.

``explain``, ``batch``, ``plan`` and ``tune`` take the same flags (a plan leaves out what its own
objectives replace), with the same defaults and help, read into the same spec; ``--allowed``
takes categories and ``--forbid`` keeps a value such as a missing-data code out of every answer;
a misspelt category or an unknown key in ``--instance`` is refused naming the feature; and every
output states the goal it answered on a line of its own.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import skops.io as sio
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import GradientBoostingClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder

from counterplan.server.cli.main import build_parser
from counterplan.server.cli.plan import NOT_FOR_PLANS
from counterplan.server.cli.problem_flags import problem_spec
from tests.cli import run_cli

COMMANDS = ("explain", "batch", "plan", "tune", "audit")


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {name: commands.choices[name] for name in COMMANDS}


def _question_flags(parser: argparse.ArgumentParser) -> dict[str, tuple[object, ...]]:
    """Each flag of the question's group: what it means (dest, default, type, choices, help, nargs)."""
    (group,) = (g for g in parser._action_groups if g.title and g.title.startswith("the question"))
    return {
        a.option_strings[-1]: (a.dest, a.default, a.type, a.choices, a.help, a.nargs, type(a).__name__)
        for a in group._group_actions
    }


def test_every_command_takes_the_same_question_flags_with_the_same_meaning() -> None:
    parsers = _subparsers()
    explain = _question_flags(parsers["explain"])
    assert {"--immutable", "--monotone", "--allowed", "--forbid", "--cost", "--goal", "--margin", "--distance"} <= set(
        explain
    )
    for command in ("batch", "tune", "audit"):
        assert _question_flags(parsers[command]) == explain, command
    plan = _question_flags(parsers["plan"])
    assert plan == {flag: meaning for flag, meaning in explain.items() if flag not in NOT_FOR_PLANS}
    for command in COMMANDS:  # and the search's shared flags where they apply
        flags = {s for a in parsers[command]._actions for s in a.option_strings}
        assert {"--seed", "--no-progress"} <= flags, command
        assert ("--engine" in flags) == (command != "plan"), command


def test_the_same_flags_give_the_same_spec_in_every_command() -> None:
    parsers = _subparsers()
    argv = ["--immutable", "age", "--monotone", "income=increase", "--allowed", "purpose=car,education"]
    argv += ["--forbid", "education=doctorate", "--goal", "class:1@0.8", "--margin", "0.01", "--max-changes", "3"]
    specs = {command: problem_spec(parsers[command].parse_args(argv)) for command in COMMANDS}
    assert len({spec.model_dump_json() for spec in specs.values()}) == 1
    spec = specs["explain"]
    assert spec.features["purpose"].allowed == ("car", "education")
    assert spec.features["education"].forbidden == ("doctorate",)
    assert spec.immutable == ("age",) and spec.max_changed_features == 3 and spec.margin == 0.01


@pytest.fixture(scope="module")
def savings_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A model that approves almost anyone whose savings are ``not_known`` (a missing-data code
    the data happens to reward): the cheapest answer for a saver with little is to say not_known."""
    rng = np.random.default_rng(4)
    n = 800
    savings = rng.choice(["little", "moderate", "rich", "not_known"], size=n)
    income = rng.uniform(10, 100, size=n)
    approved = ((savings == "not_known") | (income > 80)).astype(int)
    data = pd.DataFrame({"savings": savings, "income": income.round(1), "approved": approved})
    model = Pipeline(
        [
            ("encode", ColumnTransformer([("cat", OneHotEncoder(), ["savings"])], remainder="passthrough")),
            ("model", GradientBoostingClassifier(random_state=0)),
        ]
    ).fit(data[["savings", "income"]], data["approved"])
    folder = tmp_path_factory.mktemp("savings")
    data.to_csv(folder / "savings.csv", index=False)
    sio.dump(model, folder / "savings.skops")
    instance = json.dumps({"savings": "little", "income": 30.0})
    base = ["--model", str(folder / "savings.skops"), "--trust-model", "--data", str(folder / "savings.csv")]
    return {"base": " ".join(base), "instance": instance, "folder": str(folder)}


def _explain(capsys: pytest.CaptureFixture[str], files: dict[str, str], *flags: str) -> tuple[int, dict, str]:
    argv = [*files["base"].split(" "), "--target", "approved", "--instance", files["instance"]]
    code, out, err = run_cli(capsys, "explain", *argv, "--goal", "class:1@0.85", "--seed", "0", "--json", *flags)
    return code, (json.loads(out) if out.strip() else {}), err


def test_forbid_keeps_a_missing_data_code_out_of_the_answer(
    capsys: pytest.CaptureFixture[str], savings_files: dict[str, str]
) -> None:
    code, result, err = _explain(capsys, savings_files)
    assert code == 0 and result["proposed"]["savings"] == "not_known", err  # the code is the cheapest answer
    for flags in (["--forbid", "savings=not_known"], ["--allowed", "savings=little,moderate,rich"]):
        code, result, err = _explain(capsys, savings_files, *flags)
        assert code in (0, 3), err
        assert result["proposed"]["savings"] != "not_known", flags


def test_a_listed_category_the_feature_lacks_is_refused_naming_the_flag(
    capsys: pytest.CaptureFixture[str], savings_files: dict[str, str]
) -> None:
    code, _, err = _explain(capsys, savings_files, "--allowed", "savings=little,lots")
    assert code == 2 and err.count("\n") == 1, err
    assert "--allowed savings: ['lots'] is not a category of savings; categories:" in err
    code, _, err = _explain(capsys, savings_files, "--forbid", "income=5")
    assert code == 2 and "--forbid income: " in err, err
    # every allowed number forbidden: said so, not "allowed values: give at least one" (the rules fuzz)
    code, _, err = _explain(capsys, savings_files, "--allowed", "income=5,10", "--forbid", "income=10,5")
    assert code == 2 and err.count("\n") == 1, err
    assert "--forbid income: forbids every allowed value of income ([5.0, 10.0]); to keep income as it is" in err, err
    # an allowed number the feature cannot take names --allowed, not --instance (the rules fuzz)
    code, _, err = _explain(capsys, savings_files, "--allowed", "income=1000")
    assert code == 2 and err.count("\n") == 1, err
    assert "--allowed income: allowed values [1000.0] are outside the domain [" in err, err


@pytest.mark.parametrize(
    ("instance", "fragment"),
    [
        ({"savings": "litle", "income": 30.0}, "--instance: savings: 'litle' is not one of its categories"),
        ({"savings": "little", "income": 30.0, "incme": 3}, "--instance: incme: not a feature of the model"),
    ],
)
def test_a_misspelt_category_or_key_in_the_instance_is_refused(
    capsys: pytest.CaptureFixture[str], savings_files: dict[str, str], instance: dict[str, object], fragment: str
) -> None:
    files = {**savings_files, "instance": json.dumps(instance)}
    for command in ("explain", "plan"):
        argv = [*files["base"].split(" "), "--target", "approved", "--instance", files["instance"]]
        if command == "plan":
            argv += ["--actions", str(_actions(Path(savings_files["folder"])))]
        code, out, err = run_cli(capsys, command, *argv)
        assert code == 2 and fragment in err and out == "", (command, err)


def _actions(folder: Path) -> Path:
    path = folder / "actions.yaml"
    path.write_text("actions:\n  - {name: earn, feature: income, kind: add, low: 1, high: 50, effort: 1}\n")
    return path


def test_every_output_states_its_goal(capsys: pytest.CaptureFixture[str], savings_files: dict[str, str]) -> None:
    code, out, err = run_cli(capsys, "explain", "--no-progress")
    assert (
        code == 0 and out.splitlines()[0] == "Goal: approved = 1 with p >= 0.705 (default: the demo model's question)"
    )
    code, out, _ = run_cli(capsys, "explain", "--no-progress", "--goal", "class:1", "--margin", "0.1")
    assert out.splitlines()[0] == "Goal: approved = 1 with p >= 0.55"  # asked: no default said
    base = [*savings_files["base"].split(" "), "--target", "approved", "--instance", savings_files["instance"]]
    code, result, _ = _explain(capsys, savings_files)
    assert result["goal"] == "approved = 1 with p >= 0.855" and result["goal_default"] is None
    code, out, err = run_cli(capsys, "explain", *base, "--json", "--seed", "0")
    assert json.loads(out)["goal_default"] == "a binary classifier's second class", err
    actions = str(_actions(Path(savings_files["folder"])))
    code, out, err = run_cli(capsys, "plan", *base, "--actions", actions, "--generations", "5", "--population", "40")
    assert out.splitlines()[0] == "Goal: approved = 1 with p >= 0.5025 (default: a binary classifier's second class)"
    records = Path(savings_files["folder"]) / "records.csv"
    batch = ["batch", *savings_files["base"].split(" "), "--target", "approved", "--rows", "0:3", "--no-progress"]
    code, out, err = run_cli(capsys, *batch, "--output", str(records), "--time-limit", "2")
    assert code == 0 and out.splitlines()[0].startswith("Goal: approved = 1 with p >= 0.5025 (default:"), err


def test_every_flag_with_a_default_says_it_in_its_help() -> None:
    """``--help`` states each flag's default, as the command-line page does (``-k`` 1,
    kserve's ``--predictor-protocol`` v2 and ``--predictor-timeout`` 10 did not say theirs), and
    states an interval's level only at ``--confidence``, which sets it (``--bootstrap`` said 95%)."""
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    silent = [
        f"{name} {action.option_strings[-1]}"
        for name, parser in commands.choices.items()
        for action in parser._actions
        if action.option_strings
        and action.help not in (None, argparse.SUPPRESS)
        and action.default not in (None, False, [], argparse.SUPPRESS)
        and "default" not in str(action.help)
    ]
    assert silent == []
    audit = commands.choices["audit"].format_help()
    assert "95%" not in audit and "default 0.95" in audit
