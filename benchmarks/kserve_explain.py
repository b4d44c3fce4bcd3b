"""The KServe explainer's round trip: ms per explained row through a real MLServer.

Starts MLServer (its own venv: ``COUNTERPLAN_MLSERVER`` or ``.venv-mlserver``) serving a
scikit-learn credit pipeline (per-column inputs, the pandas codec, as KServe's sklearn runtime),
and the KServe runtime in this process on loopback with three explainers of the same question:
the predictor over V2 REST, over V2 gRPC, and the local pipeline itself (the runtime's own
cost without a predictor). Each explain request goes over HTTP to ``/v1/models/NAME:explain``;
the table gives the time per explained row and per model call, and the model calls per row
(each one inference request to the predictor), with the answers checked equal across the three.

    PYTHONPATH=$PWD COUNTERPLAN_MLSERVER=/path/to/bin/mlserver python benchmarks/kserve_explain.py --rows 24
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pandas as pd

from tests.server.kserve.conftest import GRPC_NAME, INPUTS, OUTPUTS, REST_NAME, TARGET, free_port
from tests.serving.mlserver import ServedModel, mlserver_binary, start

LOCAL_NAME = "credit-local"


def credit(n: int = 400) -> tuple[pd.DataFrame, Any]:
    """The test suite's credit data and pipeline (tests/server/kserve/conftest.py), built here."""
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    rng = np.random.default_rng(7)
    frame = pd.DataFrame(
        {
            "income": rng.normal(50, 10, n).round(1),
            "age": rng.integers(18, 70, n),
            "housing": rng.choice(["own", "rent", "free"], n),
        }
    )
    score = frame["income"] + 0.3 * frame["age"] + 5 * (frame["housing"] == "own") + rng.normal(0, 4, n)
    data = frame.assign(**{TARGET: np.where(score > 66, "good", "bad")})
    columns = ColumnTransformer(
        [("num", StandardScaler(), ["income", "age"]), ("cat", OneHotEncoder(handle_unknown="ignore"), ["housing"])]
    )
    model = Pipeline([("ct", columns), ("clf", LogisticRegression())]).fit(frame, data[TARGET])
    return data, model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=24, help="rejected rows to explain, each in its own request")
    parser.add_argument("--batch", type=int, default=8, help="rows per request in the batched pass")
    args = parser.parse_args([] if __name__ != "__main__" else None)

    from counterplan.server.kserve.sdk import import_kserve

    import_kserve()
    from counterplan.server.kserve.predictor import predictor_model
    from counterplan.server.kserve.runtime import CounterplanExplainer, KServeRuntime
    from counterplan.solver.explainer import Explainer

    data, model = credit()
    features = data.drop(columns=[TARGET])
    rejected = features[model.predict(features) == "bad"].head(args.rows)
    rows = [{k: (v.item() if hasattr(v, "item") else v) for k, v in row.items()} for _, row in rejected.iterrows()]
    with tempfile.TemporaryDirectory() as folder:
        served = [ServedModel(name, model, INPUTS, OUTPUTS, "pd") for name in (REST_NAME, GRPC_NAME)]
        mlserver = start(mlserver_binary(), Path(folder) / "models", served)
        try:
            port = free_port()
            explainers = [
                CounterplanExplainer(LOCAL_NAME, lambda: Explainer(model, data, target=TARGET)),
                *(
                    CounterplanExplainer(
                        name,
                        lambda name=name, protocol=protocol, p=p: Explainer(
                            predictor_model(f"127.0.0.1:{p}", protocol, name, timeout=30), data, target=TARGET
                        ),
                    )
                    for name, protocol, p in (
                        (REST_NAME, "v2", mlserver.http_port),
                        (GRPC_NAME, "grpc-v2", mlserver.grpc_port),
                    )
                ),
            ]
            runtime = KServeRuntime(explainers, port, host="127.0.0.1", grace_seconds=1)
            thread = threading.Thread(target=runtime.run, daemon=True)
            thread.start()
            while not runtime.started:
                time.sleep(0.02)
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=300) as http:
                table = [measure(http, name, rows, args.batch) for name in (LOCAL_NAME, REST_NAME, GRPC_NAME)]
            runtime.stop()
            thread.join(15)
        finally:
            mlserver.stop()
    names = (LOCAL_NAME, REST_NAME, GRPC_NAME)
    answers = {name: result.pop("answers") for name, result in zip(names, table, strict=True)}
    same = answers[REST_NAME] == answers[LOCAL_NAME] == answers[GRPC_NAME]
    print(f"{len(rows)} rejected rows, seed 0; answers equal across the three: {same}")
    print(
        f"| explainer's model | ms/row, 1 row per request | ms/row, {args.batch} rows per request "
        "| model calls/row | ms per model call over the local pipeline's |"
    )
    print("|---|---|---|---|---|")
    local = table[0]["single"]
    for name, result in zip(("local pipeline", "MLServer, V2 REST", "MLServer, V2 gRPC"), table, strict=True):
        extra = f"{(result['single'] - local) / result['calls']:.1f}" if result is not table[0] else "-"
        print(f"| {name} | {result['single']:.1f} | {result['batched']:.1f} | {result['calls']:.1f} | {extra} |")


def measure(http: httpx.Client, name: str, rows: list[dict[str, Any]], batch: int) -> dict[str, Any]:
    """ms per row (one row per request, then ``batch`` rows per request), model calls per row."""
    explain = f"/v1/models/{name}:explain"
    http.post(explain, json={"instances": rows[:1], "parameters": {"seed": 0}}).raise_for_status()  # warm up
    answers, calls, times = [], [], []
    for row in rows:
        started = time.perf_counter()
        response = http.post(explain, json={"instances": [row], "parameters": {"seed": 0}})
        times.append(time.perf_counter() - started)
        response.raise_for_status()
        (answer,) = response.json()["explanations"]
        answers.append(answer["proposed"])
        calls.append(answer["statistics"]["model_call_count"])
    started = time.perf_counter()
    for i in range(0, len(rows), batch):
        http.post(explain, json={"instances": rows[i : i + batch], "parameters": {"seed": 0}}).raise_for_status()
    batched = (time.perf_counter() - started) / len(rows)
    return {
        "single": 1e3 * statistics.fmean(times),
        "batched": 1e3 * batched,
        "calls": statistics.fmean(calls),
        "answers": answers,
    }


if __name__ == "__main__":
    main()
