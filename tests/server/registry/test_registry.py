"""Model registries loaded from a directory of model cards, and served."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import joblib
import pandas as pd
import pytest
import skops.io as sio
import yaml
from sklearn.pipeline import Pipeline

from counterplan.planning.demo import IMMUTABLE, TARGET, rejected_applicant
from counterplan.server.grpc.app import start_server
from counterplan.server.grpc.client import CounterplanClient, class_goal
from counterplan.server.grpc.settings import ServerSettings
from counterplan.server.registry.registry import ModelRegistry, RegistryError

LOAN_SCHEMA = [
    {"name": "age", "kind": "integer", "low": 18, "high": 90, "immutable": True},
    {"name": "income", "kind": "float", "low": 0, "high": 200000},
    {"name": "years_employed", "kind": "integer", "low": 0, "high": 40},
    {"name": "credit_cards", "kind": "integer", "low": 0, "high": 10},
    {"name": "debt", "kind": "float", "low": 0, "high": 150000},
    {"name": "loan_amount", "kind": "float", "low": 1000, "high": 60000},
    {"name": "education", "kind": "categorical", "categories": ["high-school", "bachelor", "master", "doctorate"]},
    {"name": "home_ownership", "kind": "categorical", "categories": ["rent", "mortgage", "own"]},
    {
        "name": "purpose",
        "kind": "categorical",
        "categories": ["car", "home-improvement", "debt-consolidation", "education"],
    },
    {"name": "has_prior_default", "kind": "boolean", "immutable": True},
    {"name": "has_guarantor", "kind": "boolean"},
]
"""The loan model's full feature schema, as a card writes it."""


@pytest.fixture(scope="module")
def card_dir(tmp_path_factory: pytest.TempPathFactory, loan_data: pd.DataFrame, loan_model: Pipeline) -> Path:
    folder = tmp_path_factory.mktemp("models")
    sio.dump(loan_model, folder / "loan.skops")
    loan_data.to_csv(folder / "train.csv", index=False)
    (folder / "loan.yaml").write_text(
        yaml.safe_dump(
            {
                "id": "loan",
                "version": "7",
                "description": "from a card",
                "model_file": "loan.skops",
                "outputs": [TARGET],
                "training_data": "train.csv",
                "target": TARGET,
                "immutable": list(IMMUTABLE),
                "default_solver_config": {"random_seed": 5},
                "trusted_types": sio.get_untrusted_types(file=folder / "loan.skops"),
            }
        )
    )
    return folder


@pytest.mark.integration  # a real server on a loopback port
def test_a_directory_of_cards_is_served(card_dir: Path) -> None:
    registry = ModelRegistry.from_directory(card_dir)
    model = registry.get("loan")
    assert model is not None and model.version == "7" and model.default_config.random_seed == 5
    assert model.feature("age") is not None and model.feature("age").immutable  # type: ignore[union-attr]
    assert "mad" in model.statistics["income"].model_dump()
    running = start_server(ServerSettings(port=0, models_dir=card_dir))
    try:
        with CounterplanClient(running.target) as client:
            assert [m.id for m in client.list_models()] == ["loan"]
            response = client.explain(client.request("loan", rejected_applicant(), [class_goal(1, 0.6)]))
            assert response.valid and response.model_id == "loan"
    finally:
        running.stop(0)


def test_explicit_feature_schema_and_json_cards(tmp_path: Path, loan_model: Pipeline) -> None:
    sio.dump(loan_model, tmp_path / "m.skops")
    features = LOAN_SCHEMA
    card: dict[str, object] = {"id": "m", "model_file": "m.skops", "outputs": [TARGET], "features": features}
    (tmp_path / "m.json").write_text(json.dumps(card))
    with pytest.raises(RegistryError, match="trusted_types"):  # skops loads only trusted types
        ModelRegistry.from_directory(tmp_path)
    card["trusted_types"] = sio.get_untrusted_types(file=tmp_path / "m.skops")
    (tmp_path / "m.json").write_text(json.dumps(card))
    model = ModelRegistry.from_directory(tmp_path).get("m")
    assert model is not None and [f.name for f in model.features] == [f["name"] for f in features]


def test_pickle_needs_a_trusted_directory(tmp_path: Path, loan_data: pd.DataFrame, loan_model: Pipeline) -> None:
    joblib.dump(loan_model, tmp_path / "m.joblib")
    loan_data.to_csv(tmp_path / "train.csv", index=False)
    card = {"id": "m", "model_file": "m.joblib", "outputs": [TARGET], "training_data": "train.csv", "target": TARGET}
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(card))
    with pytest.raises(RegistryError, match="TRUST_PICKLE"):
        ModelRegistry.from_directory(tmp_path)
    assert ModelRegistry.from_directory(tmp_path, trust_pickle=True).get("m") is not None


@pytest.mark.parametrize(
    ("card", "fragment"),
    [
        ({"id": "bad id!", "model_file": "m.skops"}, "id"),
        ({"id": "m"}, "model_file"),
        ({"id": "m", "model_file": "missing.skops", "features": []}, "no such file"),
        ({"id": "m", "model_file": "m.skops", "unknown": 1}, "unknown"),
        # found fuzzing: the first was taken for a scorecard's points table and skipped
        # silently; the second's target was ignored
        ({"id": "m", "variables": [{"name": "age"}]}, "variables"),
        ({"id": "m", "model_file": "m.skops", "features": [], "target": "approved"}, "'m.yaml:target'.*training_data"),
    ],
)
def test_bad_cards_name_the_problem(
    tmp_path: Path, loan_model: Pipeline, card: dict[str, object], fragment: str
) -> None:
    sio.dump(loan_model, tmp_path / "m.skops")
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(card))
    with pytest.raises(RegistryError, match=fragment):
        ModelRegistry.from_directory(tmp_path)


def test_a_card_can_name_a_tuned_configuration_file(tmp_path: Path, loan_model: Pipeline) -> None:
    from counterplan.solver.core.config import SolverConfig
    from counterplan.solver.local.config import LateAcceptanceAcceptorConfig, LocalSearchPhaseConfig

    tuned = SolverConfig(phases=(LocalSearchPhaseConfig(acceptor=LateAcceptanceAcceptorConfig()),), random_seed=9)
    (tmp_path / "configs").mkdir()  # every *.yaml at the top level is a model card
    (tmp_path / "configs" / "tuned-solver.yaml").write_text(tuned.to_yaml())
    card = _skops_card(tmp_path, loan_model, features=LOAN_SCHEMA, default_solver_config="configs/tuned-solver.yaml")
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(card))
    model = ModelRegistry.from_directory(tmp_path).get("m")
    assert model is not None and model.default_config == tuned
    (tmp_path / "configs" / "tuned-solver.yaml").write_text("phases: []")
    with pytest.raises(RegistryError, match="default_solver_config"):
        ModelRegistry.from_directory(tmp_path)


def test_empty_or_missing_directories(tmp_path: Path) -> None:
    with pytest.raises(RegistryError, match="no model card"):
        ModelRegistry.from_directory(tmp_path)
    with pytest.raises(RegistryError, match="not a directory"):
        ModelRegistry.from_directory(tmp_path / "nope")


def test_model_card_paths_stay_inside_the_models_directory(tmp_path: Path) -> None:
    from counterplan.server.registry.registry import RegistryError, load_card

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "m.skops").write_bytes(b"not a model")
    folder = tmp_path / "models"
    folder.mkdir()
    for field, value in (
        ("model_file", "../elsewhere/m.skops"),
        ("model_file", str(outside / "m.skops")),
        ("training_data", "../elsewhere/train.csv"),
    ):
        card = folder / "card.yaml"
        lines = {"id": "x", "model_file": "m.skops", field: value}
        card.write_text("\n".join(f"{k}: {v}" for k, v in lines.items()) + "\n")
        with pytest.raises(RegistryError, match="outside the models directory"):
            load_card(card)


def _skops_card(folder: Path, model: Pipeline, **fields: object) -> dict[str, object]:
    """A card of ``model`` saved as ``m.skops`` in ``folder`` (its types trusted), with ``fields``."""
    sio.dump(model, folder / "m.skops")
    card: dict[str, object] = {"id": "m", "model_file": "m.skops", "outputs": [TARGET]}
    return {**card, **fields, "trusted_types": sio.get_untrusted_types(file=folder / "m.skops")}


def _broken_card(folder: Path, case: str) -> None:
    """One broken card in ``folder`` (which holds ``m.skops`` and ``train.csv``)."""
    card: dict[str, object] = {
        "id": "m",
        "model_file": "m.skops",
        "outputs": [TARGET],
        "training_data": "train.csv",
        "target": TARGET,
        "trusted_types": sio.get_untrusted_types(file=folder / "m.skops"),
    }
    text = yaml.safe_dump(card)
    path = folder / "m.yaml"
    pd.DataFrame({"age": [30, 40], TARGET: [0, 1]}).to_csv(folder / "small.csv", index=False)
    writes: dict[str, Callable[[], object]] = {
        "not UTF-8": lambda: path.write_bytes(text.encode() + b"description: \xff\xfe\n"),
        "UTF-16": lambda: path.write_bytes(text.encode("utf-16")),
        "a directory": path.mkdir,
        "a dangling link": lambda: path.symlink_to(folder / "gone.yaml"),
        "a named pipe": lambda: os.mkfifo(path),
        "a key twice": lambda: path.write_text(text + "id: other\n"),
        "no outputs": lambda: path.write_text(yaml.safe_dump({**card, "outputs": []})),
        "a NUL in a path": lambda: path.write_text(yaml.safe_dump({**card, "model_file": "m\x00.skops"})),
        "data lacks the model's columns": lambda: path.write_text(
            yaml.safe_dump({**card, "training_data": "small.csv"})
        ),
        "no such data": lambda: path.write_text(yaml.safe_dump({**card, "training_data": "gone.csv"})),
        "target not in the data": lambda: path.write_text(yaml.safe_dump({**card, "target": "nope"})),
    }
    writes[case]()


@pytest.mark.parametrize(
    ("case", "fragment"),
    [
        ("not UTF-8", "'m.yaml': not UTF-8 text"),
        ("UTF-16", "'m.yaml': not UTF-8 text"),
        ("a directory", "'m.yaml': cannot read"),
        ("a dangling link", "'m.yaml': cannot read"),
        ("a named pipe", "'m.yaml': cannot read: not a regular file"),
        ("a key twice", "'m.yaml': key 'id' is given twice"),
        ("no outputs", "'m.yaml:outputs'"),
        ("a NUL in a path", "'m.yaml:model_file': not a usable path"),
        ("data lacks the model's columns", "'m.yaml:training_data': lacks the model's columns income"),
        ("no such data", "'m.yaml:training_data': .*gone.csv: no such file"),
        ("target not in the data", "'m.yaml:target': no column 'nope'"),
    ],
)
def test_a_broken_card_is_one_error_naming_the_card_and_field(
    tmp_path: Path, loan_data: pd.DataFrame, loan_model: Pipeline, case: str, fragment: str
) -> None:
    """Found fuzzing the registry: these hung (a named pipe), raised UnicodeDecodeError, IsADirectoryError,
    FileNotFoundError, IndexError, ValueError or KeyError with a traceback (so ``serve`` died
    with one), or a one-line error that did not say which card (a directory may hold many);
    a repeated key was silently its last value."""
    sio.dump(loan_model, tmp_path / "m.skops")
    loan_data.to_csv(tmp_path / "train.csv", index=False)
    _broken_card(tmp_path, case)
    with pytest.raises(RegistryError, match=fragment):
        ModelRegistry.from_directory(tmp_path)


def test_duplicate_ids_name_both_cards(tmp_path: Path, loan_model: Pipeline) -> None:
    card = _skops_card(tmp_path, loan_model, features=LOAN_SCHEMA)
    (tmp_path / "a.yaml").write_text(yaml.safe_dump(card))
    (tmp_path / "b.json").write_text(json.dumps(card))
    with pytest.raises(RegistryError, match=r"two model cards use this id: a\.yaml, b\.json"):
        ModelRegistry.from_directory(tmp_path)


@pytest.mark.parametrize(
    ("schema", "fragment"),
    [
        ([], "'m.json:features': lacks the model's columns age, income"),
        (LOAN_SCHEMA[:3], "'m.json:features': lacks the model's columns credit_cards"),
        ([{**LOAN_SCHEMA[0], "name": ""}, *LOAN_SCHEMA[1:]], r"features\[0\]: a feature needs a name"),
        ([*LOAN_SCHEMA, LOAN_SCHEMA[1]], r"features\[11\] \('income'\): the name is given twice"),
        ([{**LOAN_SCHEMA[0], "low": 90, "high": 18}, *LOAN_SCHEMA[1:]], "empty domain, low 90 > high 18"),
        ([{**LOAN_SCHEMA[1], "low": float("nan")}, LOAN_SCHEMA[0], *LOAN_SCHEMA[2:]], "must be finite"),
        ([{**LOAN_SCHEMA[1], "high": float("inf")}, LOAN_SCHEMA[0], *LOAN_SCHEMA[2:]], "must be finite"),
        ([*LOAN_SCHEMA[:6], {**LOAN_SCHEMA[6], "categories": []}, *LOAN_SCHEMA[7:]], "at least one category"),
    ],
)
def test_a_card_schema_no_request_could_use_is_refused_when_loaded(
    tmp_path: Path, loan_model: Pipeline, schema: list[dict[str, object]], fragment: str
) -> None:
    """Found fuzzing the registry: each of these cards loaded, and then every Explain was refused
    as if the request were wrong (``instance[age]: unknown feature``, ``instance[income]: given
    nan``, ``'high-school' is not one of its categories []``), or an empty domain was served."""
    card = _skops_card(tmp_path, loan_model, features=schema)
    (tmp_path / "m.json").write_text(json.dumps(card))  # JSON: NaN and Infinity written as such, no YAML anchors
    with pytest.raises(RegistryError, match=fragment):
        ModelRegistry.from_directory(tmp_path)


def test_a_large_points_table_in_the_models_directory_is_read_as_a_table(tmp_path: Path) -> None:
    """A 5 MB JSON table (the table limit is 8 MB): the directory's scan read it within a card's
    4 MB limit, took it for a card and refused the whole directory; a 3.4 MB one passed through
    PyYAML, 45 s before the server could start. Now it is a table, read by json."""
    import time

    variables = [
        {
            "name": f"v{j}",
            "bins": [{"upper": 1, "points": 1.5}]
            + [{"lower": e, "upper": e + 1, "points": float(e % 7)} for e in range(1, 400)]
            + [{"lower": 400, "points": 2.0}],
        }
        for j in range(300)
    ]
    (tmp_path / "table.json").write_text("\ufeff" + json.dumps({"variables": variables, "cutoff": 100}))
    assert (tmp_path / "table.json").stat().st_size > 5_000_000
    names = [f"v{j}" for j in range(300)]
    rows = [[(i * 7 + j) % 400 for j in range(300)] + [i % 2] for i in range(40)]
    pd.DataFrame(rows, columns=[*names, "default"]).to_csv(tmp_path / "applicants.csv", index=False)
    card = {"id": "points", "model_file": "table.json", "training_data": "applicants.csv", "target": "default"}
    (tmp_path / "card.yaml").write_text(yaml.safe_dump(card))
    started = time.perf_counter()
    registry = ModelRegistry.from_directory(tmp_path)
    assert registry.get("points") is not None
    assert time.perf_counter() - started < 30.0  # 54 s for 4 MB before, through PyYAML twice
