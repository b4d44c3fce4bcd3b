"""The service on real data: a model card over a CSV with whole-number float columns and gaps.

A HistGradientBoosting pipeline (it takes NaN natively) is saved with joblib next to its model
card and training CSV; a real server loads the directory on a loopback port.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import joblib
import pandas as pd
import pytest
from grpc_status import rpc_status
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder

from counterplan.server._generated.counterplan.v1 import counterplan_pb2 as pb
from counterplan.server.grpc.app import RunningServer, start_server
from counterplan.server.grpc.client import CounterplanClient, class_goal
from counterplan.server.grpc.convert import plain_value
from counterplan.server.grpc.settings import ServerSettings
from tests.credit import credit_with_gaps

pytestmark = pytest.mark.integration  # a real server on a loopback port (or a local Ray cluster)

IMPUTED = 0.6180339887498949


@pytest.fixture(scope="module")
def gaps_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("gaps")
    data = credit_with_gaps()
    data.loc[:2, "late"] = IMPUTED  # an imputed mean in a whole-number column, as in CARLA's heloc
    data.to_csv(folder / "train.csv", index=False)
    data = pd.read_csv(folder / "train.csv")  # as the server will read it
    features = data.drop(columns=["ok"])
    model = Pipeline(
        [
            (
                "encode",
                ColumnTransformer(
                    [("home", OneHotEncoder(), ["home"]), ("numbers", "passthrough", ["income", "late", "ratio"])],
                    sparse_threshold=0.0,
                ),
            ),
            ("classify", HistGradientBoostingClassifier(max_iter=40, random_state=0)),
        ]
    ).fit(features, data["ok"])
    joblib.dump(model, folder / "model.joblib")
    card = "model_file: model.joblib\noutputs: [ok]\ntraining_data: train.csv\ntarget: ok\n"
    (folder / "credit.yaml").write_text("id: credit\n" + card)
    (folder / "credit-card.yaml").write_text(
        "id: credit-card\n"
        + card
        + "immutable: [late, home]\noverrides:\n"
        + "  ratio: {precision: 1, monotone: decrease}\n  income: {fill_missing: true}\n"
    )
    return folder


@pytest.fixture(scope="module")
def client(gaps_dir: Path) -> Iterator[CounterplanClient]:
    running: RunningServer = start_server(
        ServerSettings(port=0, models_dir=gaps_dir, trust_pickle=True, max_solve_seconds=60)
    )
    try:
        with CounterplanClient(running.target) as c:
            yield c
    finally:
        running.stop(grace=0)


def _request(client: CounterplanClient, **instance: Any) -> pb.ExplainRequest:
    values = {"income": None, "late": 2, "ratio": 1.2, "home": "rent", **instance}
    return client.request("credit", values, [class_goal(1)], seed=0)


def _fields(error: Any) -> list[str]:
    from google.rpc import error_details_pb2

    status = rpc_status.from_call(error)
    assert status is not None
    fields = []
    for detail in status.details:
        bad = error_details_pb2.BadRequest()
        detail.Unpack(bad)
        fields += [v.field for v in bad.field_violations]
    return fields


def test_the_schema_has_the_datas_kinds_and_grid(client: CounterplanClient) -> None:
    by_name = {f.name: f for f in client.get_model("credit").features}
    assert by_name["income"].type == pb.FEATURE_TYPE_INTEGER  # whole numbers with gaps: float64 in pandas
    assert by_name["late"].type == pb.FEATURE_TYPE_INTEGER
    assert by_name["ratio"].type == pb.FEATURE_TYPE_FLOAT and by_name["ratio"].precision == 2
    assert not by_name["late"].HasField("precision")


def test_a_missing_value_travels_and_stays_missing(client: CounterplanClient) -> None:
    response = client.explain(_request(client), timeout=60)
    assert response.valid
    assert response.proposed["income"].WhichOneof("kind") == "missing"
    assert "income" not in {c.feature for c in response.changes}
    for change in response.changes:
        value = plain_value(change.proposed)
        if change.feature == "late":
            assert change.proposed.WhichOneof("kind") == "integer_value"
        if change.feature == "ratio":
            assert round(value, 2) == value  # on the data's grid


def test_a_missing_value_may_be_filled_when_asked(client: CounterplanClient) -> None:
    request = _request(client, late=0, ratio=0.6)  # missing income: p(ok) 0.36; a filled one can pass
    request.overrides.extend(
        [
            pb.FeatureOverride(name="income", fill_missing=True),
            pb.FeatureOverride(name="late", constrained=True),
            pb.FeatureOverride(name="ratio", constrained=True),
            pb.FeatureOverride(name="home", constrained=True),
        ]
    )
    response = client.explain(request, timeout=60)
    assert response.valid
    (change,) = response.changes
    assert change.feature == "income" and change.original.WhichOneof("kind") == "missing"
    assert change.proposed.WhichOneof("kind") == "integer_value"


def test_margin_and_precision_are_checked_at_the_boundary(client: CounterplanClient) -> None:
    request = _request(client)
    request.goals[0].class_target.margin = 0.9
    request.overrides.append(pb.FeatureOverride(name="late", precision=2))
    with pytest.raises(grpc.RpcError) as info:
        client.explain(request, timeout=60)
    error: Any = info.value
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert sorted(_fields(error)) == ["goals[0].margin", "overrides[0].precision"]
    wide = _request(client)
    wide.goals[0].class_target.margin = 0.2
    response = client.explain(wide, timeout=60)
    assert response.valid
    (ok,) = [p for p in response.predictions if p.output == "ok"]
    assert ok.probabilities["1"] - ok.probabilities["0"] >= 0.2


def test_a_model_cards_overrides_shape_the_inferred_schema(client: CounterplanClient) -> None:
    by_name = {f.name: f for f in client.get_model("credit-card").features}
    assert by_name["ratio"].precision == 1 and by_name["ratio"].monotone == pb.MONOTONE_DECREASE
    assert by_name["late"].immutable and by_name["home"].immutable
    values = {"income": None, "late": 0, "ratio": 0.6, "home": "rent"}
    request = client.request("credit-card", values, [class_goal(1)], seed=0)
    response = client.explain(request, timeout=60)
    assert response.valid
    for change in response.changes:
        assert change.feature in {"income", "ratio"}
        if change.feature == "ratio":
            value = plain_value(change.proposed)
            assert round(value, 1) == value <= 0.6  # the card's precision and monotone rule
    request.overrides.append(pb.FeatureOverride(name="ratio", constrained=True))
    (filled,) = client.explain(request, timeout=60).changes  # only the gap is left to move
    assert filled.feature == "income" and filled.proposed.WhichOneof("kind") == "integer_value"


def test_an_imputed_mean_in_a_whole_number_column_is_kept_as_a_local_explain_keeps_it(
    client: CounterplanClient,
) -> None:
    late = {f.name: f for f in client.get_model("credit").features}["late"]
    assert late.type == pb.FEATURE_TYPE_INTEGER  # three imputed means do not make the column fractional
    response = client.explain(_request(client, late=IMPUTED), timeout=60)
    assert response.valid
    proposed = plain_value(response.proposed["late"])
    assert proposed == IMPUTED or float(proposed).is_integer()  # kept, or moved onto whole numbers
    bad = _request(client, late=2)
    bad.instance["ratio"].CopyFrom(pb.FeatureValue(number_value=float("nan")))
    with pytest.raises(grpc.RpcError):
        client.explain(bad, timeout=60)
