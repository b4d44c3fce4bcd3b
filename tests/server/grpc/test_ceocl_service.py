"""CE-OCL's models and trust region over gRPC and on the command line: a ReLU network served from
a model directory gets a proven-optimal answer; with the trust region, a proven answer inside the
convex hull of the training rows with the target outcome; bad trust-region fields are refused."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import skops.io as sio
import yaml
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from counterplan.planning import ClassGoal, CounterfactualProblem
from counterplan.planning.trust_region import TrustRegionSettings
from counterplan.server._generated.counterplan.v1 import counterplan_pb2 as pb
from counterplan.server.cli.main import main
from counterplan.server.grpc.app import RunningServer, start_server
from counterplan.server.grpc.client import CounterplanClient, class_goal, field_violations
from counterplan.server.grpc.convert import plain_value
from counterplan.server.grpc.settings import ServerSettings
from counterplan.server.registry.registry import ModelRegistry

pytestmark = pytest.mark.integration  # a real server on a loopback port (or a local Ray cluster)

pytest.importorskip("highspy")

ORIGINAL = {"priors": 6, "stay": 20, "age": 30}


def _data(n: int = 400, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {"priors": rng.integers(0, 15, n), "stay": rng.integers(0, 40, n), "age": rng.integers(18, 70, n)}
    )
    frame.loc[0, list(ORIGINAL)] = list(ORIGINAL.values())
    risk = 0.35 * frame.priors + 0.05 * frame.stay - 0.04 * (frame.age - 40) + rng.normal(0, 0.4, n)
    frame["low_risk"] = (risk < 2.0).astype(int)
    return frame


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("ceocl")
    data = _data()
    data.to_csv(folder / "people.csv", index=False)
    network = Pipeline(
        [("scale", StandardScaler()), ("mlp", MLPClassifier(hidden_layer_sizes=(12,), max_iter=2000, random_state=0))]
    ).fit(data[list(ORIGINAL)].to_numpy(dtype=float), data["low_risk"])
    sio.dump(network, folder / "mlp.skops")
    card = {
        "id": "mlp",
        "model_file": "mlp.skops",
        "training_data": "people.csv",
        "target": "low_risk",
        "immutable": ["age"],
        "trusted_types": [t for t in sio.get_untrusted_types(file=folder / "mlp.skops")],
    }
    (folder / "mlp.yaml").write_text(yaml.safe_dump(card), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def running(models: Path) -> Iterator[RunningServer]:
    server = start_server(ServerSettings(port=0), ModelRegistry.from_directory(models))
    try:
        yield server
    finally:
        server.stop(grace=0)


def _request(**region: object) -> pb.ExplainRequest:
    request = CounterplanClient.request("mlp", ORIGINAL, [class_goal(1, 0.6)], seed=0)
    request.solver.engine_choice = pb.ENGINE_CHOICE_EXACT
    if region:
        request.trust_region.SetInParent()
        for name, value in region.items():
            if name != "on":
                setattr(request.trust_region, name, value)
    return request


def test_a_network_and_its_trust_region_are_proven_over_grpc(running: RunningServer, models: Path) -> None:
    with CounterplanClient(running.target) as client:
        plain = client.explain(_request(), timeout=120)
        hull = client.explain(_request(on=True, nearest=60), timeout=120)
        with pytest.raises(Exception) as refused:
            client.explain(_request(on=True, slack=-1.0), timeout=60)
    assert plain.valid and plain.statistics.exact.proven, plain.statistics.exact
    assert plain.statistics.exact.model.startswith("MLPClassifier")
    assert hull.valid and hull.statistics.exact.proven, hull.statistics.exact
    # the hull's answer is inside the hull, and no closer than the answer without it
    data = _data()
    problem = CounterfactualProblem.from_dataframe(
        data,
        ORIGINAL,
        sio.load(models / "mlp.skops", trusted=sio.get_untrusted_types(file=models / "mlp.skops")),
        [ClassGoal(target=1, confidence=0.6)],
        columns=list(ORIGINAL),
        target="low_risk",
        immutable=["age"],
        trust_region=TrustRegionSettings(nearest=60, max_reference_rows=500),
    )
    assert problem.trust_region is not None
    proposed = {k: plain_value(v) for k, v in hull.proposed.items()}
    row = problem.space.encode(proposed).reshape(1, -1)
    assert problem.trust_region.inside(row)[0]
    assert tuple(hull.score.soft_levels) <= tuple(plain.score.soft_levels)
    assert "trust_region.slack" in dict(field_violations(refused.value))


def test_the_command_line_takes_the_trust_region(models: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "explain",
            "--model",
            str(models / "mlp.skops"),
            "--trust-model",
            "--data",
            str(models / "people.csv"),
            "--target",
            "low_risk",
            "--row",
            "0",
            "--immutable",
            "age",
            "--goal",
            "class:1@0.6",
            "--engine",
            "exact",
            "--trust-region",
            "--trust-nearest",
            "60",
            "--json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["valid"] and out["statistics"]["exact"]["proven"]
