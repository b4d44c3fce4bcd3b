"""Scorecards served and on the command line: a points table (YAML or CSV) and an optbinning
Scorecard (joblib) in a model directory, explained by the exact engine over gRPC with the bins
named, the scorecard paper's objective as a distance metric, and the same from the command line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import joblib
import numpy as np
import pandas as pd
import pytest
import yaml
from sklearn.linear_model import LogisticRegression

from counterplan.server._generated.counterplan.v1 import counterplan_pb2 as pb
from counterplan.server.cli.main import main
from counterplan.server.grpc.app import RunningServer, start_server
from counterplan.server.grpc.client import CounterplanClient, class_goal, field_violations
from counterplan.server.grpc.settings import ServerSettings
from counterplan.server.registry.registry import ModelRegistry

pytestmark = pytest.mark.integration  # a real server on a loopback port (or a local Ray cluster)

pytest.importorskip("highspy")

TABLE = {
    "classes": ["bad", "good"],
    "cutoff": 150,
    "variables": [
        {
            "name": "income",
            "bins": [
                {"upper": 20, "points": 10},
                {"lower": 20, "upper": 35, "points": 40},
                {"lower": 35, "upper": 50, "points": 70},
                {"lower": 50, "points": 95},
            ],
        },
        {
            "name": "cards",
            "bins": [{"upper": 2, "points": 60}, {"lower": 2, "upper": 5, "points": 35}, {"lower": 5, "points": 0}],
        },
        {
            "name": "home",
            "bins": [{"categories": ["own", "mortgage"], "points": 50}, {"categories": ["rent"], "points": 20}],
        },
    ],
}
ORIGINAL = {"income": 18, "cards": 6, "home": "rent"}


def _data(n: int = 500, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "income": rng.integers(0, 81, n),
            "cards": rng.integers(0, 10, n),
            "home": rng.choice(["own", "rent", "mortgage"], n),
        }
    )
    frame.loc[0, list(ORIGINAL)] = list(ORIGINAL.values())
    logit = 0.06 * (frame.income - 40) - 0.5 * (frame.cards - 4)
    frame["default"] = (rng.random(n) < 1 / (1 + np.exp(logit))).astype(int)
    return frame


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("scorecards")
    data = _data()
    data.to_csv(folder / "applicants.csv", index=False)
    (folder / "table.yaml").write_text(yaml.safe_dump(TABLE), encoding="utf-8")
    card = {"id": "points", "model_file": "table.yaml", "training_data": "applicants.csv", "target": "default"}
    (folder / "points.yaml").write_text(yaml.safe_dump(card), encoding="utf-8")
    optbinning = pytest.importorskip("optbinning")
    features = data.drop(columns="default")
    process = optbinning.BinningProcess(list(features.columns), categorical_variables=["home"])
    scorecard = optbinning.Scorecard(binning_process=process, estimator=LogisticRegression())
    scorecard.fit(features, data["default"])
    joblib.dump(scorecard, folder / "optbinning.joblib")
    card = {"id": "fitted", "model_file": "optbinning.joblib", "training_data": "applicants.csv", "target": "default"}
    (folder / "fitted.yaml").write_text(yaml.safe_dump(card), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def running(models: Path) -> Iterator[RunningServer]:
    server = start_server(ServerSettings(port=0), ModelRegistry.from_directory(models, trust_pickle=True))
    try:
        yield server
    finally:
        server.stop(grace=0)


def _request(model_id: str, goal: Any, **fields: Any) -> pb.ExplainRequest:
    request = CounterplanClient.request(model_id, ORIGINAL, [goal], seed=0)
    request.solver.engine_choice = pb.ENGINE_CHOICE_EXACT
    for name, value in fields.items():
        setattr(request, name, value)
    return request


def test_a_points_table_is_served_and_explained_exactly_with_its_bins(running: RunningServer) -> None:
    with CounterplanClient(running.target) as client:
        response = client.explain(_request("points", class_goal("good")), timeout=60)
    assert response.valid and response.statistics.exact.proven
    assert response.statistics.exact.model.startswith("points table")
    changes = {c.feature: (c.original_bin, c.proposed_bin) for c in response.changes}
    assert changes and all(before != after for before, after in changes.values())
    assert changes.get("income", ("", "[20, 35)"))[1] in {"[20, 35)", "[35, 50)", "[50, inf)"}
    score = next(p for p in response.predictions if p.output == "score")
    assert score.value >= 150


def test_an_optbinning_scorecard_is_served_with_the_papers_objective(running: RunningServer) -> None:
    with CounterplanClient(running.target) as client:
        ours = client.explain(_request("fitted", class_goal(0, 0.6)), timeout=60)
        paper = client.explain(
            _request(
                "fitted",
                class_goal(0, 0.6),
                distance_metric=pb.DISTANCE_METRIC_SCORECARD,
                scorecard_alpha=1.0,
                scorecard_beta=0.5,
            ),
            timeout=60,
        )
        with pytest.raises(Exception) as refused:
            client.explain(
                _request("fitted", class_goal(0, 0.6), distance_metric=pb.DISTANCE_METRIC_SCORECARD, scorecard_beta=-1),
                timeout=60,
            )
    assert ours.valid and ours.statistics.exact.proven
    assert paper.valid and paper.statistics.exact.proven
    assert all(c.proposed_bin for c in paper.changes)
    assert "scorecard_beta" in dict(field_violations(refused.value))


def test_the_command_line_explains_a_points_table(models: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "explain",
            "--model",
            str(models / "table.yaml"),
            "--data",
            str(models / "applicants.csv"),
            "--target",
            "default",
            "--row",
            "0",
            "--goal",
            "class:good",
            "--engine",
            "exact",
            "--json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["valid"]
    assert out["statistics"]["exact"]["proven"]
    assert all(c["proposed_bin"] for c in out["changes"])
    code = main(
        [
            "explain",
            "--model",
            str(models / "table.yaml"),
            "--data",
            str(models / "applicants.csv"),
            "--target",
            "default",
            "--row",
            "0",
            "--goal",
            "class:good",
            "--engine",
            "exact",
        ]
    )
    text = capsys.readouterr().out
    assert code == 0
    assert any(f"{before} -> " in text for before in ("{rent}", "(-inf, 20)", "[5, inf)"))  # the bins column


def test_the_command_line_explains_an_optbinning_scorecard(models: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "explain",
            "--model",
            str(models / "optbinning.joblib"),
            "--data",
            str(models / "applicants.csv"),
            "--target",
            "default",
            "--row",
            "0",
            "--goal",
            "class:0@0.6",
            "--engine",
            "exact",
            "--distance",
            "scorecard",
            "--json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["valid"] and out["statistics"]["exact"]["proven"]
    assert out["predictions"]["default"]["0"] >= 0.6
    assert all(c["proposed_bin"] for c in out["changes"])
