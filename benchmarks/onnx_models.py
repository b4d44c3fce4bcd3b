"""ONNX models against the scikit-learn models they were converted from: ms per solve of local
search and of the exact engine, and whether the answers agree.

Each model (``gb``: ``GradientBoostingClassifier(n_estimators=50, max_depth=3)``, ``rf``:
``RandomForestClassifier(n_estimators=50, max_depth=5)``, ``lr``: ``LogisticRegression`` behind a
``StandardScaler``) is a pipeline of one-hot categories and numbers fitted on the data set's
training rows, and converted by skl2onnx with one input per column (numbers FLOAT, categories
STRING). The first ``--rows`` test rows each model predicts 0 are asked for class 1 with
confidence 0.7, once through the scikit-learn pipeline and once through
:class:`counterplan.planning.OnnxModel`. Reported per model and engine: the median ms per solve of
each, their ratio, the answers valid, and the rows whose distances agree (within 1e-6; an ONNX
model is a float32 model, so a row may differ by a threshold)::

    .venv/bin/python benchmarks/onnx_models.py --rows 5
    .venv/bin/python benchmarks/onnx_models.py --dataset heloc --models gb,lr --engines local
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sklearn.compose import ColumnTransformer
from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from benchmarks.real_data import DATASETS, Data, default_data_dir, load_data, render
from counterplan.planning import ClassGoal, CounterfactualProblem, OnnxModel
from counterplan.solver.counterfactual import explain

MODELS = {
    "gb": lambda: GradientBoostingClassifier(n_estimators=50, max_depth=3, random_state=0),
    "rf": lambda: RandomForestClassifier(n_estimators=50, max_depth=5, random_state=0),
    "lr": lambda: LogisticRegression(max_iter=2000),
}


def _pipeline(data: Data, name: str) -> Pipeline:
    numbers: Any = StandardScaler() if name == "lr" else "passthrough"
    encode = ColumnTransformer(
        [
            ("categories", OneHotEncoder(handle_unknown="ignore", sparse_output=False), data.categorical),
            ("numbers", numbers, data.numeric),
        ]
    )
    return Pipeline([("encode", encode), ("model", MODELS[name]())])


def _convert(data: Data, pipe: Pipeline) -> OnnxModel:
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import FloatTensorType, StringTensorType

    types = [
        (c, StringTensorType([None, 1]) if c in data.categorical else FloatTensorType([None, 1])) for c in data.features
    ]
    proto = convert_sklearn(
        pipe, initial_types=types, options={id(pipe): {"zipmap": False}}, target_opset={"": 17, "ai.onnx.ml": 3}
    )
    return OnnxModel(proto, data.spec.target)


def _problem(data: Data, model: Any, query: Any) -> CounterfactualProblem:
    return CounterfactualProblem.from_dataframe(
        data.train,
        {c: query[c] for c in data.features},
        model,
        [ClassGoal(target=1, confidence=0.7)],
        target=data.spec.target,
        immutable=data.spec.immutable,
    )


def run(data: Data, name: str, rows: int, engines: Sequence[str]) -> list[list[str]]:
    pipe = _pipeline(data, name).fit(data.train[data.features], data.train[data.spec.target])
    onnx_model = _convert(data, pipe)
    queries = data.test[pipe.predict(data.test) == 0].head(rows)
    out = []
    for engine in engines:
        seconds: dict[str, list[float]] = {"sklearn": [], "onnx": []}
        valid = {"sklearn": 0, "onnx": 0}
        agree = 0
        for _, query in queries.iterrows():
            distances = {}
            for kind, model in (("sklearn", pipe), ("onnx", onnx_model)):
                problem = _problem(data, model, query)
                started = time.perf_counter()
                result = explain(problem, engine=engine, seed=0)  # type: ignore[arg-type]
                seconds[kind].append(time.perf_counter() - started)
                valid[kind] += int(result.valid)
                distances[kind] = result.score_levels[3]
            agree += int(abs(distances["sklearn"] - distances["onnx"]) <= 1e-6)
        ms = {k: 1000 * statistics.median(v) for k, v in seconds.items()}
        out.append(
            [
                name,
                engine,
                str(len(queries)),
                f"{ms['sklearn']:.0f}",
                f"{ms['onnx']:.0f}",
                f"{ms['onnx'] / ms['sklearn']:.2f}",
                f"{valid['sklearn']}/{valid['onnx']}",
                str(agree),
            ]
        )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="adult", choices=sorted(DATASETS))
    parser.add_argument("--models", default="gb,rf,lr")
    parser.add_argument("--engines", default="local,exact")
    parser.add_argument("--rows", type=int, default=5)
    parser.add_argument("--data-dir", type=Path, default=default_data_dir())
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    data = load_data(DATASETS[args.dataset], args.data_dir)
    rows = [line for name in args.models.split(",") for line in run(data, name, args.rows, args.engines.split(","))]
    header = ["model", "engine", "rows", "sklearn ms", "onnx ms", "onnx/sklearn", "valid sk/onnx", "same distance"]
    print(render(header, rows, markdown=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
