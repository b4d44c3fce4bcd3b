"""Bulk explanation on Ray (:mod:`counterplan.solver.batch.on_ray`): a real local Ray gives every row the
record it gets in one process, and an address that does not answer is refused within seconds,
before any work. Ray starts once for the module (it takes several seconds); the connection rules
are checked against a stand-in ``ray`` module, so they run without Ray."""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pandas as pd
import pytest

from counterplan.planning import ClassGoal
from counterplan.planning.errors import ProblemError
from counterplan.solver.batch import on_ray
from counterplan.solver.batch.run import SKIPPED
from counterplan.solver.explainer import Explainer

GOAL = [ClassGoal(target=1, confidence=0.7)]


@pytest.fixture(scope="module")
def explainer(loan_explainer: Explainer) -> Explainer:
    return loan_explainer


@pytest.fixture(scope="module")
def rejected(rejected_loans: pd.DataFrame) -> pd.DataFrame:
    return rejected_loans.iloc[:10]


def closed_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.integration  # a local Ray cluster
@pytest.mark.parametrize("vectorised", [False, True], ids=["threads", "vector"])
def test_ray_gives_every_row_its_in_process_record(
    vectorised: bool, local_ray: Any, explainer: Explainer, rejected: pd.DataFrame
) -> None:
    # the vectorised engine's answers do not depend on the block: in-process blocks of 64, Ray's of 4
    alone = explainer.explain_batch(rejected, seed=5, window=None if vectorised else 4, vectorised=vectorised)
    streamed: list[Any] = []
    on_cluster = explainer.explain_batch(
        rejected,
        seed=5,
        window=4,
        ray="auto",
        on_record=lambda r: streamed.append(r["row_id"]),
        vectorised=vectorised,
    )
    columns = [c for c in alone.columns if c != "seconds"]
    pd.testing.assert_frame_equal(alone[columns], on_cluster[columns])
    assert sorted(streamed) == sorted(rejected.index.tolist())  # every record passed on as it came
    assert (on_cluster["status"] == "ok").all()
    assert local_ray.is_initialized()  # "auto" used the running Ray rather than starting another


@pytest.mark.integration  # a local Ray cluster
def test_ray_skips_the_approved_rows_before_any_block_as_one_process_does(local_ray: Any, explainer: Explainer) -> None:
    alone = explainer.explain_batch("0:24", seed=5, window=8, only_rejected=True)
    on_cluster = explainer.explain_batch("0:24", seed=5, window=8, only_rejected=True, ray="auto")
    columns = [c for c in alone.columns if c != "seconds"]
    pd.testing.assert_frame_equal(alone[columns], on_cluster[columns])
    assert on_cluster.attrs[SKIPPED] == alone.attrs[SKIPPED] > 0
    assert (on_cluster["status"] != "already_met").all()


@pytest.mark.parametrize("address", ["127.0.0.1:{port}", "ray://127.0.0.1:{port}"])
def test_an_address_that_does_not_answer_is_refused_at_once(
    address: str, explainer: Explainer, rejected: pd.DataFrame
) -> None:
    pytest.importorskip("ray")
    address = address.format(port=closed_port())
    done: list[Any] = []
    started = time.perf_counter()
    with pytest.raises(ProblemError) as caught:
        explainer.explain_batch(rejected.iloc[:2], ray=address, on_record=done.append)
    assert time.perf_counter() - started < 5
    assert caught.value.field == "ray"
    assert address in str(caught.value)
    assert "does not answer" in str(caught.value)
    assert not done  # refused before any work


def test_a_port_that_answers_but_is_no_ray_is_refused_within_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    """The dashboard's HTTP port given by mistake: Ray itself would retry for minutes."""
    monkeypatch.setattr(on_ray, "_ray", FakeRay)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()

        def answer_http() -> None:
            with contextlib.suppress(OSError):
                connection, _ = server.accept()
                with connection:
                    connection.recv(64)
                    connection.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")

        threading.Thread(target=answer_http, daemon=True).start()
        address = f"127.0.0.1:{server.getsockname()[1]}"
        started = time.perf_counter()
        with pytest.raises(ProblemError, match="not a Ray cluster"):
            on_ray.connect(address)
        assert time.perf_counter() - started < on_ray.PROBE_SECONDS + 2


class FakeRay:
    """Enough of the ``ray`` module to see what :func:`on_ray.connect` asks of it."""

    def __init__(self, initialized: bool = False) -> None:
        self.initialized = initialized
        self.inits: list[dict[str, Any]] = []

    def is_initialized(self) -> bool:
        return self.initialized

    def init(self, **kwargs: Any) -> None:
        self.inits.append(kwargs)
        self.initialized = True

    def get_runtime_context(self) -> Any:
        raise RuntimeError("not told")


@pytest.fixture
def fake_ray(monkeypatch: pytest.MonkeyPatch) -> FakeRay:
    fake = FakeRay()
    monkeypatch.setattr(on_ray, "_ray", lambda: fake)
    monkeypatch.setattr(on_ray, "_joined", None)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    return fake


@pytest.fixture
def grpc_port() -> Iterator[int]:
    """A loopback port with a gRPC server on it (it passes the probe as a Ray head would)."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield port
    server.stop(None)


def test_auto_starts_a_quiet_local_ray_with_every_cpu(fake_ray: FakeRay) -> None:
    on_ray.connect("auto")
    (kwargs,) = fake_ray.inits
    assert kwargs["address"] == "local"  # never a stale cluster file
    assert kwargs["num_cpus"] == (os.cpu_count() or 1)
    assert kwargs["include_dashboard"] is False
    assert kwargs["log_to_driver"] is False
    on_ray.connect("auto")
    assert len(fake_ray.inits) == 1  # then reused


def test_auto_joins_the_cluster_in_ray_address(fake_ray: FakeRay, monkeypatch: pytest.MonkeyPatch) -> None:
    address = f"127.0.0.1:{closed_port()}"
    monkeypatch.setenv("RAY_ADDRESS", address)
    with pytest.raises(ProblemError, match=address):
        on_ray.connect("auto")
    assert not fake_ray.inits


def test_an_address_is_joined_once_and_another_is_refused(fake_ray: FakeRay, grpc_port: int) -> None:
    address = f"127.0.0.1:{grpc_port}"
    on_ray.connect(address)
    on_ray.connect(address)
    assert fake_ray.inits == [{"address": address, "log_to_driver": False, "configure_logging": False}]
    with pytest.raises(ProblemError, match="already uses the Ray cluster"):
        on_ray.connect(f"ray://localhost:{grpc_port}")


def test_a_failing_join_names_the_address_and_ray_s_reason(
    fake_ray: FakeRay, grpc_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(**kwargs: Any) -> None:
        raise ConnectionError("Authentication token is missing or incorrect")

    monkeypatch.setattr(fake_ray, "init", refuse)
    with pytest.raises(ProblemError, match=r"127\.0\.0\.1:\d+.*Authentication token is missing"):
        on_ray.connect(f"127.0.0.1:{grpc_port}")


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("", "give 'auto'"),
        ("http://head:8265", "give 'auto'"),
        ("head:port", "not host:port"),
        ("head:99999", "not host:port"),
        ("head..cluster:10001", "host name is invalid"),  # an empty label
        (f"ray://{'a' * 64}.example:10001", "host name is invalid"),  # a label over 63 characters
    ],
)
def test_malformed_addresses_are_refused(fake_ray: FakeRay, address: str, reason: str) -> None:
    with pytest.raises(ProblemError, match=reason) as caught:
        on_ray.connect(address)
    assert caught.value.field == "ray"


def test_without_ray_the_extra_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # as if not installed
    with pytest.raises(ProblemError, match=r"pip install 'counterplan\[ray\]'"):
        on_ray.connect("auto")
