"""The command line, run in-process (and once through the installed console script)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import joblib
import pandas as pd
import pytest
from sklearn.pipeline import Pipeline

from counterplan.planning.demo import IMMUTABLE, TARGET, rejected_applicant
from counterplan.server.cli.render import exact_line
from counterplan.solver.exact.report import ExactStatistics
from tests.cli import run_cli as _run


@pytest.fixture(scope="module")
def quick_config(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("config") / "quick.yaml"
    path.write_text("termination:\n  unimproved_step_count_limit: 15\n  spent_limit_seconds: 30\n")
    return str(path)


def test_explain_with_no_arguments_explains_the_demo(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "explain", "--no-progress")
    assert code == 0
    assert "Counterfactual: change these features" in out
    assert "valid" in out and "Score: [0/0/0]hard/" in out


def test_json_output_is_the_whole_result(capsys: pytest.CaptureFixture[str], quick_config: str) -> None:
    code, out, _ = _run(capsys, "explain", "--json", "--seed", "5", "--config", quick_config)
    assert code == 0
    result = json.loads(out)
    assert result["valid"] and result["feasible"]
    assert all(result["proposed"][name] == result["original"][name] for name in IMMUTABLE)
    assert result["changes"] and result["statistics"]["score_calculation_count"] > 0
    again = _run(capsys, "explain", "--json", "--seed", "5", "--config", quick_config)[1]
    assert json.loads(again)["proposed"] == result["proposed"]


@pytest.fixture(scope="module")
def model_files(
    tmp_path_factory: pytest.TempPathFactory, loan_data: pd.DataFrame, loan_model: Pipeline
) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("model")
    csv = folder / "loans.csv"
    loan_data.to_csv(csv, index=False)
    joblib_file = folder / "model.joblib"
    joblib.dump(loan_model, joblib_file)
    import skops.io as sio

    skops_file = folder / "model.skops"
    sio.dump(loan_model, skops_file)
    return {"csv": csv, "joblib": joblib_file, "skops": skops_file}


def _rejected_row(loan_data: pd.DataFrame, loan_model: Pipeline) -> int:
    proba = loan_model.predict_proba(loan_data.drop(columns=[TARGET]))[:, 1]
    return int((proba < 0.3).nonzero()[0][0])


def test_explain_a_model_file_and_csv(
    capsys: pytest.CaptureFixture[str],
    model_files: dict[str, Path],
    loan_data: pd.DataFrame,
    loan_model: Pipeline,
    quick_config: str,
) -> None:
    row = _rejected_row(loan_data, loan_model)
    args = [
        "explain",
        "--model",
        str(model_files["joblib"]),
        "--data",
        str(model_files["csv"]),
        "--row",
        str(row),
        "--target",
        TARGET,
        "--immutable",
        "age,has_prior_default",
        "--goal",
        "class:1@0.6",
        "--json",
        "--config",
        quick_config,
    ]
    code, out, err = _run(capsys, *args)
    assert code == 0, err
    result = json.loads(out)
    assert result["valid"]
    assert result["predictions"][TARGET]["1"] >= 0.6
    assert result["proposed"]["age"] == loan_data["age"].iloc[row]
    # with no goal, a binary classifier is asked for the class it does not predict now
    code, out, _ = _run(capsys, *[a for a in args if a not in ("--goal", "class:1@0.6")])
    assert code == 0 and json.loads(out)["predictions"][TARGET]["1"] > 0.5


def test_skops_files_load_only_trusted_types_unless_told(
    capsys: pytest.CaptureFixture[str],
    model_files: dict[str, Path],
    loan_data: pd.DataFrame,
    loan_model: Pipeline,
    quick_config: str,
) -> None:
    row = str(_rejected_row(loan_data, loan_model))
    base = [
        "explain",
        "--model",
        str(model_files["skops"]),
        "--data",
        str(model_files["csv"]),
        "--row",
        row,
        "--target",
        TARGET,
        "--json",
        "--config",
        quick_config,
    ]
    import skops.io as sio

    if sio.get_untrusted_types(file=model_files["skops"]):
        code, _, err = _run(capsys, *base)
        assert code == 2 and "--trust-model" in err and "trusted_types" not in err  # a card's field, not a flag
    code, out, err = _run(capsys, *base, "--trust-model")
    assert code == 0, err
    assert json.loads(out)["valid"]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--row", "3"], "need --model and --data"),
        (["--model", "missing.joblib"], "give both --model and --data"),
        (["--goal", "class"], "goal"),
        (["--goal", "prediction=colour:red"], "unknown goal kind"),
        (["--goal", "range:1"], "LOW..HIGH"),
        (["--goal", "class:7"], "not one of"),
        (["--immutable", "height"], "not a feature column"),
        (["--instance", "{not json"], "not valid JSON"),
        (["--instance", "[" * 100_000], "'instance': not valid JSON: nested too deep"),  # RecursionError, no ValueError
        (["--instance", json.dumps({"age": 30})], "no value"),
        (["--config", "missing.yaml"], "cannot read"),
        (["--time-limit", "-1"], "--time-limit"),
    ],
)
def test_bad_arguments_give_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], args: list[str], fragment: str
) -> None:
    code, out, err = _run(capsys, "explain", "--no-progress", *args)
    assert code == 2
    assert err.startswith("counterplan: error:") and err.count("\n") == 1
    assert fragment in err
    assert "Traceback" not in err + out


def test_an_instance_file_given_without_its_at_is_refused_saying_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    instance = tmp_path / "instance.json"
    instance.write_text(json.dumps({"age": 30}), encoding="utf-8")
    code, _, err = _run(capsys, "explain", "--no-progress", "--instance", str(instance))
    assert code == 2 and err.count("\n") == 1
    assert f"not valid JSON: Expecting value; to read the file, give @{instance}" in err


def test_files_that_do_not_load_are_reported(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, model_files: dict[str, Path]
) -> None:
    garbage = tmp_path / "model.joblib"
    garbage.write_bytes(b"not a pickle")
    code, _, err = _run(capsys, "explain", "--model", str(garbage), "--data", str(model_files["csv"]), "--row", "0")
    assert code == 2 and "cannot load model" in err
    code, _, err = _run(
        capsys, "explain", "--model", str(tmp_path / "m.onnx"), "--data", str(model_files["csv"]), "--row", "0"
    )
    assert code == 2 and "no such file" in err


def test_the_console_script_is_installed() -> None:
    script = shutil.which("counterplan", path=str(Path(sys.executable).parent))
    assert script is not None
    result = subprocess.run([script, "explain", "--help"], capture_output=True, text=True, check=False)
    assert result.returncode == 0 and "--goal" in result.stdout


@pytest.fixture(scope="module")
def demo_server() -> Iterator[str]:
    """A real server of the demo model on a loopback port; its target."""
    from counterplan.server.grpc.app import start_server
    from counterplan.server.grpc.settings import ServerSettings
    from counterplan.server.registry.registry import ModelRegistry

    running = start_server(ServerSettings(port=0), ModelRegistry.demo())
    try:
        yield running.target
    finally:
        running.stop(0)


@pytest.mark.integration  # a real server on a loopback port
def test_explain_on_a_server_answers_as_a_local_explain(capsys: pytest.CaptureFixture[str], demo_server: str) -> None:
    capsys.readouterr()
    code, out, err = _run(capsys, "explain", "--server", demo_server, "--json", "--seed", "2")
    assert code == 0, err
    result = json.loads(out)
    code, local_out, err = _run(capsys, "explain", "--json", "--seed", "2")
    assert code == 0, err
    local = json.loads(local_out)
    assert set(result) == set(local) and set(result["statistics"]) == set(local["statistics"])
    for key in ("valid", "original", "proposed", "changes", "score", "score_levels", "note", "requested", "goal"):
        assert result[key] == local[key], key  # one schema, one set of defaults, the same answer
    assert result["goal_default"] == local["goal_default"] == "the demo model's question"
    assert list(result["original"]) == list(local["original"]) == list(rejected_applicant())  # the model's order
    assert list(result["proposed"]) == list(local["proposed"])
    assert result["valid"] and isinstance(result["original"]["age"], int)
    code, out, _ = _run(capsys, "explain", "--server", demo_server, "--no-progress")
    assert code == 0 and "Counterfactual: change these features" in out
    assert out.splitlines()[0] == "Goal: approved = 1 with p >= 0.705 (default: the demo model's question)"
    code, out, _ = _run(capsys, "explain", "--server", demo_server, "--no-progress", "--forbid", "purpose=boat")
    assert code == 2 and out == ""  # refused by the server, as locally: boat is no purpose


@pytest.mark.integration  # a real server on a loopback port
def test_explain_on_a_server_refuses_in_one_line(capsys: pytest.CaptureFixture[str], demo_server: str) -> None:
    capsys.readouterr()
    code, _, err = _run(capsys, "explain", "--server", demo_server, "--model-id", "nope")
    assert code == 2 and "--instance is needed" in err  # only the demo has a default instance
    code, _, err = _run(capsys, "explain", "--server", demo_server, "--target", TARGET)
    assert code == 2 and "--target: with --server" in err and err.count("\n") == 1
    applicant = json.dumps(rejected_applicant())
    code, _, err = _run(capsys, "explain", "--server", demo_server, "--model-id", "nope", "--instance", applicant)
    assert code == 1 and "NOT_FOUND" in err and err.count("\n") == 1
    for bad in (["-k", "0"], ["--time-limit", "0"], ["--change-penalty", "-2"]):
        code, _, err = _run(capsys, "explain", "--server", demo_server, *bad)
        assert code == 2 and err.startswith("counterplan: error:"), (bad, err)


@pytest.mark.integration  # a real server on a loopback port
def test_explain_on_a_server_takes_the_problem_flags(capsys: pytest.CaptureFixture[str], demo_server: str) -> None:
    capsys.readouterr()
    shaped = ("-k", "3", "--max-changes", "1", "--change-penalty", "2", "--monotone", "income=increase")
    code, out, err = _run(capsys, "explain", "--server", demo_server, "--json", *shaped)
    assert code == 0, err
    options = json.loads(out)["counterfactuals"]
    assert 1 <= len(options) <= 3  # the flags reach the server: k, the change limit, monotone income
    assert all(len(option["changes"]) == 1 for option in options)
    assert all(option["proposed"]["income"] >= 38000 for option in options)
    code, out, err = _run(capsys, "explain", "--server", demo_server, "--no-progress", "-k", "2")
    assert code == 0 and "Alternative 2" in out, err
    both = ("--immutable", "debt", "--cost", "debt=2", "--monotone", "income=increase", "--json")
    code, out, err = _run(capsys, "explain", "--server", demo_server, *both)  # one override per feature
    assert code == 0, err
    assert json.loads(out)["proposed"]["debt"] == rejected_applicant()["debt"]


@pytest.mark.integration  # a real server on a loopback port
def test_explain_on_a_server_diagnoses_as_a_local_explain(
    capsys: pytest.CaptureFixture[str], demo_server: str, quick_config: str
) -> None:
    capsys.readouterr()
    # only age and has_prior_default (the demo's own immutables) could move: the same diagnosis on both sides
    frozen = "income,years_employed,credit_cards,debt,loan_amount,education,home_ownership,purpose,has_guarantor"
    blocked = ("explain", "--json", "--seed", "2", "--config", quick_config, "--immutable", frozen)
    code, out, err = _run(capsys, *blocked, "--server", demo_server)
    local_code, local_out, _ = _run(capsys, *blocked)
    assert code == local_code == 3, err
    result, local = json.loads(out), json.loads(local_out)
    every = ["age", *frozen.split(",")[:-1], "has_prior_default", "has_guarantor"]  # in the model's order
    assert result["held_fixed"] == local["held_fixed"] == every
    for key in ("blocked_by", "reaches", "note", "original", "proposed", "score"):
        assert result[key] == local[key], key


def test_serve_rejects_bad_settings(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "serve", "--port", "70000")
    assert code == 2 and "port" in err


def test_several_counterfactuals_and_actionability_flags(capsys: pytest.CaptureFixture[str], quick_config: str) -> None:
    code, out, err = _run(
        capsys,
        "explain",
        "-k",
        "3",
        "--monotone",
        "income=increase",
        "--monotone",
        "debt=decrease",
        "--cost",
        "debt=2",
        "--max-changes",
        "3",
        "--json",
        "--config",
        quick_config,
    )
    assert code == 0, err
    result = json.loads(out)
    assert result["valid"] and 1 <= len(result["counterfactuals"]) <= 3 and result["requested"] == 3
    for option in result["counterfactuals"]:
        assert option["valid"] and len(option["changes"]) <= 3
        assert option["proposed"]["income"] >= result["original"]["income"]
        assert option["proposed"]["debt"] <= result["original"]["debt"]
    code, out, _ = _run(capsys, "explain", "-k", "2", "--plausible", "--no-progress", "--config", quick_config)
    assert code == 0 and "Counterfactual" in out
    bad_flags = (
        ["--monotone", "income=up"],
        ["--cost", "debt=much"],
        ["--max-changes", "0"],
        ["-k", "0"],
        ["--allowed", "income=lots"],
        ["--change-penalty", "-1"],
        ["--change-penalty", "nan"],
        ["--change-penalty", "1e7"],
    )
    for bad in bad_flags:
        code, _, err = _run(capsys, "explain", "--no-progress", *bad)
        assert code == 2 and err.startswith("counterplan: error:")


def test_tune_writes_a_configuration_explain_accepts(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    output = tmp_path / "tuned.yaml"
    code, out, err = _run(
        capsys,
        "tune",
        "--rows",
        "2",
        "--heldout",
        "1",
        "--trials",
        "2",
        "--budget",
        "0.1",
        "--storage",
        f"sqlite:///{tmp_path / 'tune.db'}",
        "--output",
        str(output),
    )
    assert code == 0, err
    assert "Held-out gain over the default" in out and "trial 1:" in err
    code, out, err = _run(capsys, "explain", "--config", str(output), "--json")
    result = json.loads(out)  # the tuned 0.1 s budget may end a solve early on a busy machine
    assert result["valid"] or "spent time" in result["statistics"]["termination_reason"]
    assert code == (0 if result["valid"] else 3), err  # exit 3: no valid answer in the time
    code, _, err = _run(capsys, "tune", "--rows", "0")
    assert code == 2 and "--rows" in err


@pytest.fixture(scope="module")
def credit_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A CSV with gaps and whole-number float columns, and a HistGradientBoosting pipeline (takes NaN)."""
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.preprocessing import OneHotEncoder

    from tests.credit import credit_with_gaps

    folder = tmp_path_factory.mktemp("credit")
    csv = folder / "credit.csv"
    credit_with_gaps().to_csv(csv, index=False)
    data = pd.read_csv(csv)
    encode = ColumnTransformer(
        [("home", OneHotEncoder(), ["home"]), ("numbers", "passthrough", ["income", "late", "ratio"])],
        sparse_threshold=0.0,
    )
    model = Pipeline([("encode", encode), ("classify", HistGradientBoostingClassifier(max_iter=40, random_state=0))])
    model.fit(data.drop(columns=["ok"]), data["ok"])
    joblib_file = folder / "model.joblib"
    joblib.dump(model, joblib_file)
    return {"csv": csv, "model": joblib_file}


def test_explain_a_row_with_a_gap_keeps_it_and_proposes_values_on_the_grid(
    capsys: pytest.CaptureFixture[str], credit_files: dict[str, Path]
) -> None:
    data = pd.read_csv(credit_files["csv"])
    row = int(data.index[data["income"].isna() & (data["late"] >= 1)][0])
    base = ("explain", "--model", str(credit_files["model"]), "--data", str(credit_files["csv"]), "--target", "ok")
    code, out, err = _run(capsys, *base, "--row", str(row), "--json", "--precision", "ratio=1")
    assert code == 0, err
    result = json.loads(out)
    assert result["original"]["income"] is None and result["proposed"]["income"] is None
    for change in result["changes"]:
        if change["feature"] == "late":
            assert isinstance(change["proposed"], int)
        if change["feature"] == "ratio":
            assert round(change["proposed"], 1) == change["proposed"]
    code, out, _ = _run(capsys, *base, "--row", str(row), "--no-progress")
    assert code == 0 and "kept missing: income" in out
    filled = ("--fill-missing", "income", "--immutable", "late,ratio,home", "--json")
    code, out, err = _run(
        capsys, *base, "--instance", '{"income": null, "late": 0, "ratio": 0.6, "home": "rent"}', *filled
    )
    assert code == 0, err
    (change,) = json.loads(out)["changes"]
    assert change["feature"] == "income" and change["original"] is None and isinstance(change["proposed"], int)


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [
        (("--margin", "0.6"), "--margin"),
        (("--precision", "ratio=two"), "--precision"),
        (("--fill-missing", "nope"), "nope"),
        (("--threads", "0"), "--threads"),
        (("--time-limit", "inf"), "--time-limit must be a finite number"),
        (("--time-limit", "nan"), "--time-limit must be a finite number"),
    ],
)
def test_value_flags_are_checked(
    capsys: pytest.CaptureFixture[str], credit_files: dict[str, Path], flags: tuple[str, ...], fragment: str
) -> None:
    base = ("explain", "--model", str(credit_files["model"]), "--data", str(credit_files["csv"]), "--target", "ok")
    code, _, err = _run(capsys, *base, "--row", "0", *flags)
    assert code == 2 and fragment in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [
        (("--row", "99999"), "row 99999 is outside"),
        (("--row", "0", "--target", "incme"), "no column 'incme'"),
        (("--instance", '{"income": 1000}'), "no value for this feature"),
    ],
)
def test_without_a_goal_bad_rows_and_columns_are_one_line_errors(
    capsys: pytest.CaptureFixture[str], credit_files: dict[str, Path], flags: tuple[str, ...], fragment: str
) -> None:
    base = ("explain", "--model", str(credit_files["model"]), "--data", str(credit_files["csv"]))
    target = () if "--target" in flags else ("--target", "ok")
    code, _, err = _run(capsys, *base, *target, *flags)
    assert code == 2 and fragment in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_csv_missing_the_models_columns_is_a_one_line_error(
    capsys: pytest.CaptureFixture[str], credit_files: dict[str, Path], tmp_path: Path
) -> None:
    partial = tmp_path / "partial.csv"
    pd.read_csv(credit_files["csv"]).drop(columns=["ratio"]).to_csv(partial, index=False)
    code, _, err = _run(
        capsys, "explain", "--model", str(credit_files["model"]), "--data", str(partial), "--target", "ok", "--row", "0"
    )
    assert code == 2 and "ratio" in err and "missing" in err and err.count("\n") == 1


def test_a_column_of_numbers_with_a_stray_text_is_a_one_line_error(
    capsys: pytest.CaptureFixture[str], credit_files: dict[str, Path], tmp_path: Path
) -> None:
    """One row's income reads "lots": explain and batch refuse the column (they searched it as
    categories and answered, exit 0); declared categorical, explain runs as asked."""
    data = pd.read_csv(credit_files["csv"])
    stray = tmp_path / "stray.csv"
    data.astype({"income": object}).assign(income=["lots", *data["income"].iloc[1:]]).to_csv(stray, index=False)
    base = ("--model", str(credit_files["model"]), "--data", str(stray), "--target", "ok", "--no-progress")
    present = int(data["income"].notna().sum()) + int(pd.isna(data["income"].iloc[0]))
    expected = f"problem 'income': the training data's column holds numbers, but 1 of its {present:,} values"
    for argv in (
        ("explain", *base, "--row", "1"),
        ("batch", *base, "--rows", "1:3", "--output", str(tmp_path / "o.csv")),
    ):
        code, out, err = _run(capsys, *argv)
        assert code == 2 and out == "" and err.count("\n") == 1, err
        assert expected in err and "(first: 'lots')" in err and "--categorical income" in err
    assert not (tmp_path / "o.csv").exists()
    code, _, err = _run(capsys, "explain", *base, "--row", "1", "--categorical", "income", "--json")
    assert code in (0, 3), err


def test_an_unreachable_goal_exits_3_and_says_what_blocks_it(capsys: pytest.CaptureFixture[str]) -> None:
    # every feature but age (immutable) held fixed: no approval is reachable
    frozen = "income,years_employed,credit_cards,debt,loan_amount,education,home_ownership,purpose,has_guarantor"
    code, out, _ = _run(capsys, "explain", "--no-progress", "--immutable", f"age,has_prior_default,{frozen}")
    assert code == 3
    assert "not valid" in out and "no valid counterfactual" in out
    assert "with age, income, years_employed" in " ".join(out.split())  # which features were held fixed
    assert "Prediction before: approved = 0 (0: " in out  # the predicted class is said
    code, out, _ = _run(capsys, "explain", "--json", "--immutable", f"age,has_prior_default,{frozen}")
    assert code == 3 and json.loads(out)["valid"] is False


def test_an_instance_that_meets_the_goal_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "explain", "--no-progress", "--goal", "class:0")
    assert code == 0 and "already meets the goal" in out and "Search: 0 steps" in out
    assert "1 candidate scored in 1 model call (" in " ".join(out.split())  # one, not "1 candidates"
    assert out.count("nothing to change") == 1  # said once, not again as a note
    assert "No change found" not in out


def test_a_model_that_cannot_take_a_gap_says_so_in_one_line(
    capsys: pytest.CaptureFixture[str], credit_files: dict[str, Path], tmp_path: Path
) -> None:
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import OneHotEncoder

    data = pd.read_csv(credit_files["csv"])
    whole = data.dropna()
    encode = ColumnTransformer([("home", OneHotEncoder(), ["home"])], remainder="passthrough")
    model = Pipeline([("encode", encode), ("classify", LogisticRegression(max_iter=500))])
    model.fit(whole.drop(columns=["ok"]), whole["ok"])  # trained without gaps: NaN makes it raise
    path = tmp_path / "linear.joblib"
    joblib.dump(model, path)
    row = int(data.index[data["income"].isna()][0])
    code, _, err = _run(
        capsys, "explain", "--model", str(path), "--data", str(credit_files["csv"]), "--target", "ok", "--row", str(row)
    )
    assert code == 1 and "the model fails on the original instance" in err and "NaN" in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_a_long_time_limit_is_the_only_clock(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "explain", "--json", "--seed", "1", "--time-limit", "1e9")
    assert code == 0, err
    result = json.loads(out)
    assert result["valid"] and "spent time" not in result["statistics"]["termination_reason"]
    code, plain, _ = _run(capsys, "explain", "--json", "--seed", "1")
    assert json.loads(plain)["proposed"] == result["proposed"]  # a limit never reached changes nothing


@pytest.fixture(scope="module")
def float_label_card(tmp_path_factory: pytest.TempPathFactory, credit_files: dict[str, Path]) -> dict[str, Path]:
    """The credit data with its label read as 0.0/1.0 (as pandas reads a label column with a gap),
    a model fitted on it, and a model card serving them from a directory."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    folder = tmp_path_factory.mktemp("served")
    data = pd.read_csv(credit_files["csv"])
    data["ok"] = data["ok"].astype(float)
    csv = folder / "credit.csv"
    data.to_csv(csv, index=False)
    model = joblib.load(credit_files["model"])
    model.set_params(classify=HistGradientBoostingClassifier(max_iter=40, random_state=0))
    model.fit(data.drop(columns=["ok"]), data["ok"])
    assert [float(c) for c in model.classes_] == [0.0, 1.0] and model.classes_.dtype.kind == "f"
    joblib.dump(model, folder / "credit.joblib")
    card = "id: credit\nmodel_file: credit.joblib\ntraining_data: credit.csv\ntarget: ok\noutputs: [ok]\n"
    (folder / "credit.yaml").write_text(card)
    return {"dir": folder, "csv": csv, "model": folder / "credit.joblib"}


def _without_statistics(text: str) -> str:
    """The JSON text as printed, but the timings: the order of every key kept."""
    result = json.loads(text)
    del result["statistics"]
    return json.dumps(result, indent=2)


def test_the_same_explain_locally_and_on_a_server_prints_the_same_json(
    capsys: pytest.CaptureFixture[str], float_label_card: dict[str, Path], quick_config: str
) -> None:
    """One request schema, one output schema, one set of defaults, for a model of the user's own."""
    from counterplan.server.grpc.app import start_server
    from counterplan.server.grpc.settings import ServerSettings
    from counterplan.server.registry.registry import ModelRegistry

    data = pd.read_csv(float_label_card["csv"])
    proba = joblib.load(float_label_card["model"]).predict_proba(data.drop(columns=["ok"]))[:, 1]
    row = int(((proba < 0.3) & data["income"].notna()).to_numpy().nonzero()[0][0])
    instance = json.dumps({k: v for k, v in data.drop(columns=["ok"]).iloc[row].items()})
    local_args = ("--model", str(float_label_card["model"]), "--data", str(float_label_card["csv"]), "--target", "ok")
    running = start_server(ServerSettings(port=0), ModelRegistry.from_directory(float_label_card["dir"], True))
    capsys.readouterr()
    try:
        remote_args = ("--server", running.target, "--model-id", "credit")
        questions: list[tuple[str, ...]] = [
            (),  # no goal: the class the model does not predict now, on both sides
            ("--goal", "class:1@0.6"),  # "1" names the class 1.0, on both sides
            ("--margin", "0.2"),  # the margin reaches the server's default goal too
            ("--immutable", "income,late,ratio,home"),  # nothing may move: not valid, the same diagnosis
        ]
        for question in questions:
            flags = ("explain", "--json", "--seed", "4", "--config", quick_config, "--instance", instance, *question)
            code, local, err = _run(capsys, *flags, *local_args)
            remote_code, remote, remote_err = _run(capsys, *flags, *remote_args)
            assert (code, remote_code) == ((3, 3) if "--immutable" in question else (0, 0)), (err, remote_err)
            assert _without_statistics(remote) == _without_statistics(local), question
            result, remote_result = json.loads(local), json.loads(remote)
            assert list(remote_result["statistics"]) == list(result["statistics"])
            assert list(result["original"]) == ["income", "late", "ratio", "home"]
            if not question:
                assert result["changes"] and result["predictions"]["ok"]["1.0"] > 0.5
            if "--margin" in question:
                assert result["predictions"]["ok"]["1.0"] - result["predictions"]["ok"]["0.0"] >= 0.2
            if "--immutable" in question:
                assert result["held_fixed"] == ["income", "late", "ratio", "home"] and result["blocked_by"]
    finally:
        running.stop(0)


def test_tune_with_the_exact_engine_writes_its_phase(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("highspy")
    output = tmp_path / "tuned-exact.yaml"
    storage = f"sqlite:///{tmp_path / 'tune.db'}"
    # the budget is the tuned configuration's time limit too: 0.2 s left explain, on a machine busy
    # with five processes (a whole suite's run beside others), without an answer (exit 3)
    quick = ("--rows", "1", "--heldout", "0", "--trials", "1", "--budget", "3", "--storage", storage)
    code, _, err = _run(capsys, "tune", *quick, "--engine", "exact", "--output", str(output))
    assert code == 0, err
    assert "type: exact" in output.read_text()  # the tuned local search is the exact engine's warm start
    code, out, err = _run(capsys, "explain", "--config", str(output), "--json")
    assert code == 0, err
    assert json.loads(out)["statistics"]["engine"] == "exact"


def test_tune_checks_its_flags_and_labels_as_explain_does(
    capsys: pytest.CaptureFixture[str], float_label_card: dict[str, Path], tmp_path: Path
) -> None:
    base = ("tune", "--model", str(float_label_card["model"]), "--data", str(float_label_card["csv"]))
    quick = ("--rows", "1", "--heldout", "0", "--trials", "1", "--budget", "0.1")
    storage = ("--storage", f"sqlite:///{tmp_path / 'tune.db'}", "--output", str(tmp_path / "tuned.yaml"))
    for flags, fragment in (
        (("--target", "incme"), "no column 'incme' in the data; columns: income, late, ratio, home, ok"),
        (("--target", "ok", "--budget", "nan"), "--budget must be a finite number"),
        (("--target", "ok", "--budget", "inf"), "--budget must be a finite number"),
        (("--target", "ok", "--goal", "class:7"), "class '7' is not one of [0.0, 1.0]"),
        (("--target", "ok", "--goal", "range:0..1"), "--goal: output 'ok' is a classifier's; use a class goal"),
        (("--target", "ok", "--storage", "nosuchdialect://x"), "'storage': cannot open 'nosuchdialect://x'"),
        (("--target", "ok", "--storage", "not a url"), "'storage': cannot open 'not a url'"),
        (("--target", "ok", "--output", str(tmp_path)), "is a directory"),  # a directory: refused before the trials
        (("--target", "ok", "--output", str(tmp_path / ("t" * 300 + ".yaml"))), "--output: cannot use"),
    ):
        code, out, err = _run(capsys, *base, *quick, *storage, *flags)
        assert code == 2 and fragment in err and err.count("\n") == 1 and "Traceback" not in err + out, err
    code, _, err = _run(capsys, *base, *quick, *storage, "--target", "ok", "--goal", "class:1")
    assert code == 0, err  # "1" names the class 1.0, as in explain


def test_tune_keeps_one_study_per_problem_in_the_default_storage(
    capsys: pytest.CaptureFixture[str],
    float_label_card: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import optuna

    monkeypatch.chdir(tmp_path)  # the default storage, sqlite:///counterplan-tuning.db, is in the working directory
    credit = ("--model", str(float_label_card["model"]), "--data", str(float_label_card["csv"]), "--target", "ok")
    quick = ("--rows", "1", "--heldout", "0", "--trials", "1", "--budget", "0.1")
    for problem in (credit, (), credit):  # the credit model, the demo, the credit model again
        code, _, err = _run(capsys, "tune", *problem, *quick)
        assert code == 0, err
    storage = "sqlite:///counterplan-tuning.db"
    names = optuna.get_all_study_names(storage)
    assert len(names) == 2 and all(n.startswith("counterplan-") and len(n) == len("counterplan-") + 12 for n in names)
    trials = sorted(len(optuna.load_study(study_name=n, storage=storage).trials) for n in names)
    assert trials == [1, 2]  # the credit study resumed; the demo's trial is not in its table
    code, _, err = _run(capsys, "tune", *credit, *quick, "--study-name", "mine")
    assert code == 0, err
    code, _, err = _run(capsys, "tune", *quick, "--study-name", "mine")  # the demo into the credit study
    assert code == 2 and err.count("\n") == 1
    assert "study 'mine' was made for another problem: Pipeline(HistGradientBoostingClassifier) on income" in err
    assert "this one is Pipeline(GradientBoostingClassifier) on age" in err  # both problems named
    assert len(optuna.load_study(study_name="mine", storage=storage).trials) == 1  # nothing mixed in


def test_without_highs_auto_falls_back_and_exact_says_what_to_install(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "highspy", None)  # as on an install without the exact extra...
    monkeypatch.setitem(sys.modules, "ortools.linear_solver.pywraplp", None)  # ...nor the scorecard extra
    code, out, err = _run(capsys, "explain", "--engine", "auto", "--no-progress")
    assert code == 0, err
    assert "auto: local search, because the exact engine needs HiGHS" in " ".join(out.split())
    assert "counterplan[exact]" in out.replace("\n", "")  # printed as text, not read as markup
    code, _, err = _run(capsys, "explain", "--engine", "exact", "--no-progress")
    assert code == 2 and "pip install 'counterplan[exact]'" in err


def test_the_auto_budget_flag_sets_the_choice_and_a_bad_one_is_refused_naming_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytest.importorskip("highspy")
    # the demo: 100 trees of depth 3, expected at 1.1 s under CP-SAT (it took 0.6-2.5 s a row at load
    # 5-7 on 2 cores): exact under the default 2 s budget, local search under a 1 s one
    code, out, err = _run(capsys, "explain", "--engine", "auto", "--auto-budget", "1", "--no-progress")
    assert code == 0, err
    said = " ".join(out.split())
    assert "auto: local search, because the exact engine's estimate for 100 trees" in said
    assert "more than the 1 s budget" in said
    code, out, err = _run(capsys, "explain", "--engine", "auto", "--no-progress")
    assert code == 0, err
    said = " ".join(out.split())
    assert "auto: the exact engine, because the exact engine's estimate for 100 trees" in said
    assert "within the 2 s budget" in said
    code, out, err = _run(capsys, "explain", "--engine", "auto", "--auto-budget", "3600", "--no-progress")
    assert code == 0, err
    assert "auto: the exact engine, because" in " ".join(out.split()) and "within the 3,600 s budget" in out
    for value in ("0", "-1", "nan", "7200"):
        code, _, err = _run(capsys, "explain", "--engine", "auto", "--auto-budget", value, "--no-progress")
        assert code == 2 and "--auto-budget must be a finite number of seconds above 0 and at most 3600" in err
    code, _, err = _run(capsys, "explain", "--engine", "auto", "--auto-improve", "0", "--no-progress")
    assert code == 2 and "--auto-improve must be" in err


def test_an_exact_phase_stopped_before_its_program_was_built_names_no_empty_model() -> None:
    """A program the clock stopped while it was built has no model description: the line read
    "Exact engine (): no solution"."""
    stopped = ExactStatistics(status="no solution", proven=False, reason="the time limit came while it was built")
    assert exact_line(stopped).startswith("Exact engine: no solution; ")
    built = ExactStatistics(status="feasible", proven=False, model="RandomForestClassifier (300 trees)")
    assert exact_line(built).startswith("Exact engine (RandomForestClassifier (300 trees)): feasible")


def test_an_infeasible_program_without_a_proof_is_not_said_to_prove_anything() -> None:
    """A program stricter than the problem (a softmax's sufficient condition, a goal of probability
    1 asked as a score that surely rounds up) or one whose relaxation ran out of time has no answer
    and proves nothing: the line read "proven: no counterfactual exists" beside its reason."""
    unproven = ExactStatistics(status="infeasible", proven=False, model="MLPClassifier", reason="a softmax")
    assert "proven" not in exact_line(unproven).split(";")[0], exact_line(unproven)
    proven = ExactStatistics(status="infeasible", proven=True, model="MLPClassifier")
    assert exact_line(proven).startswith("Exact engine (MLPClassifier): proven: no counterfactual exists")


def test_the_text_lists_every_answer_of_a_set_that_leaves_out_the_one_shown() -> None:
    """The text showed ``counterfactuals[1:]`` as the alternatives, taking the first for the answer
    shown; the exact engine's set solved as a whole need not hold that proven optimum (the result
    fuzz: Ridge, ``-k 3``), so the set's first answer was never shown. Here the set is a real
    result's answers less the one shown."""
    import io

    import numpy as np
    from rich.console import Console

    from counterplan.planning import CallableAdapter, ClassGoal, CounterfactualProblem, IntegerFeature, OutputSpec
    from counterplan.server.cli.render import print_result
    from counterplan.solver import explain

    def three_ways(X: np.ndarray) -> np.ndarray:
        p = ((X[:, 0] >= 8) | (X[:, 1] <= 1) | (X[:, 2] >= 8)).astype(float)
        return np.column_stack([1.0 - p, p])

    features = [IntegerFeature(name=name, value=value, low=0, high=9) for name, value in (("n", 2), ("m", 5), ("o", 3))]
    problem = CounterfactualProblem(
        features, [ClassGoal(target=1)], CallableAdapter(three_ways, [OutputSpec("ok", (0, 1))])
    )
    result = explain(problem, seed=0, num_counterfactuals=3)
    assert len(result.counterfactuals) == 3 and result.counterfactuals[0].proposed == result.proposed
    others = result.counterfactuals[1:]
    console = Console(file=io.StringIO(), width=120)
    print_result(result.model_copy(update={"counterfactuals": others}), console)
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert "Alternative 2" in out and "Alternative 3" in out and "Alternative 4" not in out
