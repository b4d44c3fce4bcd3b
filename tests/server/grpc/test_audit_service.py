"""The ``Audit`` call on a real gRPC server on a loopback port: progress messages, then the same
report :func:`counterplan.solver.audit.audit` gives in Python for the same seed; bad fields named;
the deadline, the server's maximum solve time and a cancel stop it between rows."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pandas as pd
import pytest
import skops.io as sio
import yaml
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from counterplan.planning import CallableAdapter, OutputSpec
from counterplan.server._generated.counterplan.v1 import counterplan_pb2 as pb
from counterplan.server.cli.main import main
from counterplan.server.grpc.app import RunningServer, start_server
from counterplan.server.grpc.client import CounterplanClient, class_goal, field_violations
from counterplan.server.grpc.convert import value_message
from counterplan.server.grpc.settings import ServerSettings
from counterplan.server.registry.registry import FeatureSpec, ModelRegistry, RegisteredModel
from counterplan.solver.audit.report import AuditReport
from counterplan.solver.audit.runner import audit
from counterplan.solver.core.config import SolverConfig, TerminationConfig
from counterplan.solver.explainer import Explainer

pytestmark = pytest.mark.integration  # a real server on a loopback port

pytest.importorskip("highspy")

FEATURES = ["income", "debt", "age"]
SEED = 3
BOOTSTRAP = 200
MAX_ROWS = 300


def _people(n: int = 200, seed: int = 0) -> pd.DataFrame:
    """Approval rises with income and age and falls with debt; age is immutable on the card, so
    the youngest rejected rows cannot be approved (the exact engine proves it)."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "income": rng.uniform(0, 10, n).round(2),
            "debt": rng.uniform(0, 10, n).round(2),
            "age": rng.integers(18, 70, n),
        }
    )
    frame["region"] = rng.choice(["north", "south", "east"], n)
    logit = 0.3 * frame.income - 0.2 * frame.debt + 0.3 * (frame.age - 40)
    frame["approved"] = (logit + rng.normal(0, 0.5, n) > 0).astype(int)
    return frame


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("audit")
    data = _people()
    data.to_csv(folder / "people.csv", index=False)
    model = Pipeline([("scale", StandardScaler()), ("lr", LogisticRegression())]).fit(data[FEATURES], data.approved)
    sio.dump(model, folder / "lr.skops")
    card = {
        "id": "lr",
        "model_file": "lr.skops",
        "training_data": "people.csv",
        "target": "approved",
        "immutable": ["age"],
        "trusted_types": list(sio.get_untrusted_types(file=folder / "lr.skops")),
    }
    (folder / "lr.yaml").write_text(yaml.safe_dump(card), encoding="utf-8")
    return folder


class SlowModel:
    """p(yes) rises with x; every call sleeps; counts its calls."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self, X: Any) -> Any:
        with self._lock:
            self.calls += 1
        time.sleep(self.delay)
        p = 1.0 / (1.0 + np.exp(-(X[:, 0] - 8.0)))
        return np.column_stack([1.0 - p, p])


FULL_AUDIT_CALLS = 99
"""Model calls of the slow model's whole audit (every row, ``prove=False``), counted once."""
SLOW_CONFIG = SolverConfig(termination=TerminationConfig(step_count_limit=10), phases=({"type": "local_search"},))


def _slow(model: SlowModel, n: int = MAX_ROWS) -> RegisteredModel:
    """A model whose audit takes many seconds: each window of 64 rows pays ten slow model calls."""
    rng = np.random.default_rng(1)
    data = pd.DataFrame({"x": rng.uniform(0, 6, n), "y": rng.uniform(0, 10, n)})
    data["label"] = "no"
    adapter = CallableAdapter(model, [OutputSpec("label", ("no", "yes"))])
    features = [
        FeatureSpec(name="x", kind="float", low=0.0, high=10.0),
        FeatureSpec(name="y", kind="float", low=0.0, high=10.0),
    ]
    explainer = Explainer(adapter, data, target="label", columns=["x", "y"], config=SLOW_CONFIG, check=False)
    return RegisteredModel(
        "slow", "1", "slow", adapter, features, default_config=SLOW_CONFIG, target="label", explainer=explainer
    )


@pytest.fixture(scope="module")
def slow_model() -> SlowModel:
    return SlowModel(delay=0.15)


@pytest.fixture(scope="module")
def registry(models: Path, slow_model: SlowModel) -> ModelRegistry:
    cards = ModelRegistry.from_directory(models)
    return ModelRegistry([*cards.list(), _slow(slow_model)])


@pytest.fixture(scope="module")
def running(registry: ModelRegistry) -> Iterator[RunningServer]:
    # a maximum no search reaches on a busy machine: the answers are then the seed's alone, as in Python
    settings = ServerSettings(
        port=0, max_solve_seconds=600.0, max_audit_rows=MAX_ROWS, max_audit_group_values=10, max_audit_bootstrap=500
    )
    server = start_server(settings, registry)
    try:
        yield server
    finally:
        server.stop(grace=0)


@pytest.fixture
def client(running: RunningServer) -> Iterator[CounterplanClient]:
    with CounterplanClient(running.target) as c:
        yield c
    assert running.service.wait_idle(30), "every audit gave its slot back"


def _request(**fields: Any) -> pb.AuditRequest:
    request = pb.AuditRequest(
        **{"model_id": "lr", "groups": ["region"], "seed": SEED, "bootstrap": BOOTSTRAP, **fields}
    )
    request.problem.goals.append(class_goal(1))
    return request


def _comparable(report: AuditReport) -> dict[str, Any]:
    """The report without what depends on the clock (timing, start time) and the proofs' time limit."""
    data = json.loads(report.to_json())
    data.pop("timing")
    data["settings"].pop("started")
    return data


def test_the_stream_reports_progress_then_the_report_python_gives(
    client: CounterplanClient, registry: ModelRegistry
) -> None:
    responses = list(client.audit(_request(selection="rejected"), timeout=300))
    *progress, final = responses
    assert final.stage == pb.STAGE_FINAL and final.HasField("result")
    assert progress and all(r.stage == pb.STAGE_INTERMEDIATE for r in progress)
    assert [r.sequence_id for r in responses] == list(range(1, len(responses) + 1))
    last = progress[-1].progress
    result = final.result
    assert not result.partial and not result.stopped_by
    # Python, on the card's own explainer, with the same seed
    model = registry.get("lr")
    assert model is not None
    local = audit(model.ready_explainer, "rejected", groups=["region"], seed=SEED, bootstrap=BOOTSTRAP)
    served = AuditReport.model_validate_json(result.report_json)
    assert _comparable(served) == _comparable(local)
    assert local.no_recourse_proven, "the fixture has rows without recourse, proven"
    assert list(result.no_recourse_proven) == [str(i) for i in local.no_recourse_proven]
    assert list(result.with_recourse) == [str(i) for i in local.with_recourse]
    assert result.recourse_rate == pytest.approx(local.recourse_rate)
    assert result.n_rows == local.n_rows
    by_value = {(g.column, g.value): g for g in result.groups}
    assert set(by_value) == {("region", v) for v in local.groups["region"]}
    for value, figures in local.groups["region"].items():
        typed = by_value["region", value]
        assert (typed.n, typed.with_recourse, typed.no_recourse_proven) == (
            figures.n,
            figures.with_recourse,
            figures.no_recourse_proven,
        )
        assert typed.recourse_rate == pytest.approx(figures.recourse_rate)
        ratio = local.burden["region"].values[value].cost_ratio
        assert typed.HasField("cost_ratio") == (ratio is not None)
    # the last progress message counts what the report holds; the screen (on by default for this
    # encodable model) proved the rows before their search, so none is left for the proof stage
    assert served.settings.screen and served.timing.rows_screened == local.n_rows
    assert last.stage == "prove" and last.rows_done == last.rows_total == 0
    assert last.with_recourse == len(local.with_recourse)
    assert last.no_recourse_proven == len(local.no_recourse_proven)


def test_inline_rows_are_audited_under_the_callers_ids(client: CounterplanClient) -> None:
    data = _people().head(40)
    request = _request()
    for i, row in enumerate(data.to_dict("records")):
        values = {"income": float(row["income"]), "debt": float(row["debt"]), "age": int(row["age"])}
        values["region"] = str(row["region"])
        request.inline.rows.append(
            pb.AuditRow(row_id=f"applicant-{i}", values={k: value_message(v) for k, v in values.items()})
        )
    request.prove = False
    *_, final = list(client.audit(request, timeout=300))
    result = final.result
    ids = {f"applicant-{i}" for i in range(40)}
    assert set(result.with_recourse) | set(result.no_recourse_unproven) | set(result.already_met) == ids
    assert not result.no_recourse_proven  # prove = false: nothing is called proven
    assert json.loads(result.report_json)["settings"]["prove"] is False


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"groups": ["nationality"]}, "groups[0]"),
        ({"bootstrap": 501}, "bootstrap"),
        ({"selection": "0:301"}, "selection"),
        ({"retrain": 2}, "retrain"),
        ({"confidence": 1.5}, "confidence"),
    ],
)
def test_a_bad_field_is_invalid_argument_naming_it(
    client: CounterplanClient, fields: dict[str, Any], named: str
) -> None:
    request = _request(**{k: v for k, v in fields.items() if k != "groups"})
    if "groups" in fields:
        del request.groups[:]
        request.groups.extend(fields["groups"])
    with pytest.raises(grpc.RpcError) as refused:
        list(client.audit(request, timeout=60))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert named in [field for field, _ in field_violations(refused.value)], field_violations(refused.value)


def test_too_many_rows_or_group_values_and_bad_problem_fields_are_named(client: CounterplanClient) -> None:
    too_many = _request()
    too_many.inline.rows.extend(pb.AuditRow(row_id=str(i)) for i in range(MAX_ROWS + 1))
    by_age = _request(selection="all")
    by_age.groups.append("age")  # 52 ages; the server allows 10 values
    bad_problem = _request(selection="all")
    bad_problem.problem.overrides.append(pb.FeatureOverride(name="salary", constrained=True))
    bad_problem.problem.solver.seed = 4
    named = []
    for request in (too_many, by_age, bad_problem):
        with pytest.raises(grpc.RpcError) as refused:
            list(client.audit(request, timeout=60))
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        named.append([field for field, _ in field_violations(refused.value)])
    assert named[0] == ["inline.rows"]
    assert named[1] == ["groups[1]"]
    assert set(named[2]) == {"problem.overrides[0].name", "problem.solver.seed"}


def _slow_request() -> pb.AuditRequest:
    request = pb.AuditRequest(model_id="slow", selection="all", bootstrap=0, prove=False)
    request.problem.goals.append(class_goal("yes"))
    return request


def test_a_short_deadline_ends_with_the_partial_report(client: CounterplanClient) -> None:
    started = time.monotonic()
    *progress, final = list(client.audit(_slow_request(), timeout=4.0))
    assert time.monotonic() - started < 4.0
    result = final.result
    assert final.stage == pb.STAGE_FINAL
    assert result.partial and result.stopped_by == "deadline"
    assert 0 < result.n_rows < MAX_ROWS, "some rows were done, not all"
    assert progress and progress[-1].progress.rows_done <= result.n_rows
    report = AuditReport.model_validate_json(result.report_json)
    assert report.partial and report.n_rows == result.n_rows


def test_the_servers_maximum_solve_time_stops_an_audit_too(registry: ModelRegistry) -> None:
    server = start_server(ServerSettings(port=0, max_solve_seconds=2.0), registry)
    try:
        with CounterplanClient(server.target) as client:
            *_, final = list(client.audit(_slow_request(), timeout=120))
        assert server.service.wait_idle(30)
    finally:
        server.stop(grace=0)
    assert final.result.partial and final.result.stopped_by == "max_solve_seconds"
    assert 0 < final.result.n_rows < MAX_ROWS


def test_a_cancelled_audit_stops_and_gives_its_slot_back(
    client: CounterplanClient, running: RunningServer, slow_model: SlowModel
) -> None:
    before = slow_model.calls
    call = client.audit(_slow_request(), timeout=120)
    first = next(iter(call))
    assert first.stage == pb.STAGE_INTERMEDIATE
    call.cancel()  # type: ignore[attr-defined]  # a gRPC call
    assert running.service.wait_idle(60), "the audit stopped at its next row and gave its slot back"
    used = slow_model.calls - before
    # the whole audit calls the model about 100 times (5 windows of 64 rows, 10 steps each and the
    # checks); cancelled at its first message, it stops after its first window
    assert 0 < used <= FULL_AUDIT_CALLS // 2, used
    time.sleep(0.5)
    assert slow_model.calls - before == used, "no model call after the audit stopped"


def test_a_shutdown_ends_an_audit_with_its_partial_report(registry: ModelRegistry, slow_model: SlowModel) -> None:
    server = start_server(ServerSettings(port=0, grace_seconds=20.0), registry)
    try:
        with CounterplanClient(server.target) as client:
            call = iter(client.audit(_slow_request(), timeout=120))
            assert next(call).stage == pb.STAGE_INTERMEDIATE
            stopper = threading.Thread(target=server.stop)
            stopper.start()
            *_, final = list(call)
            stopper.join()
    finally:
        server.stop(grace=0)
    assert final.stage == pb.STAGE_FINAL
    assert final.result.partial and final.result.stopped_by == "shutdown"
    assert 0 < final.result.n_rows < MAX_ROWS


def test_the_command_line_audits_on_the_server(
    capsys: pytest.CaptureFixture[str], running: RunningServer, registry: ModelRegistry, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    remote = ["audit", "--server", running.target, "--model-id", "lr", "--group", "region", "--seed", str(SEED),
              "--bootstrap", str(BOOTSTRAP), "--out", str(out)]  # fmt: skip
    assert main([*remote, "--json"]) == 0
    printed = AuditReport.model_validate_json(capsys.readouterr().out)
    written = AuditReport.model_validate_json((out / "audit.json").read_text(encoding="utf-8"))
    model = registry.get("lr")
    assert model is not None
    local = audit(model.ready_explainer, "rejected", groups=["region"], seed=SEED, bootstrap=BOOTSTRAP)
    assert _comparable(printed) == _comparable(written) == _comparable(local)
    for flags, named in (
        (["--workers", "2"], "--workers 2"),
        (["--rows", "1,2"], "--rows"),
        (["--retrain", "2"], "retrain"),  # the server's refusal, a bad flag too
        # no field of the request holds them: the server ran 5 rules of 0.8 and its own screen
        (["--rules", "0"], "--rules 0"),
        (["--rule-validity", "0.95"], "--rule-validity 0.95"),
        (["--no-screen"], "--no-screen"),
    ):
        with pytest.raises(SystemExit) as caught:
            main([*remote, *flags])
        assert caught.value.code == 2
        assert named in capsys.readouterr().err


def test_an_audit_that_could_never_fit_in_memory_is_refused_naming_its_fields(registry: ModelRegistry) -> None:
    request = _request(selection="all")
    wide = {"type": "local_search", "walkers": 8, "move_selector": {"moves_per_step": 4096}}
    request.problem.solver.config_json = json.dumps({"phases": [wide]})  # one solve fits; a window of 64 does not
    server = start_server(ServerSettings(port=0, max_solve_memory_mb=64), registry)
    try:
        with CounterplanClient(server.target) as client, pytest.raises(grpc.RpcError) as refused:
            list(client.audit(request, timeout=60))
    finally:
        server.stop(grace=0)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert [field for field, _ in field_violations(refused.value)] == ["problem.solver.config_json", "selection"]
