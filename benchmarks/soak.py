"""A soak: many concurrent clients for minutes, mixing valid, invalid, cancelled and short-deadline
calls and health checks, against a real ``counterplan serve`` process.

Every call has the statuses it may end with (a valid solve: ``OK``, or ``RESOURCE_EXHAUSTED``
when the server is full, after which the client waits the ``RetryInfo`` delay it was given; an
invalid request: ``INVALID_ARGUMENT`` or ``NOT_FOUND``; a cancelled stream: ``CANCELLED``; a
deadline shorter than a solve: ``OK`` or ``DEADLINE_EXCEEDED``; a health check: ``SERVING``).
Anything else (``INTERNAL``, ``UNKNOWN``, ``UNAVAILABLE``, a health check that fails) is
unexpected. The table gives calls, statuses, latency percentiles of the valid solves and of the
health checks, and the server's resident memory after a warm-up and at the end. Targets: 0
unexpected statuses, memory growth under 10% after the warm-up::

    python benchmarks/soak.py --clients 64 --seconds 180

:func:`soak` is also run, briefly, by ``tests/server/test_soak.py`` against an in-process server.
"""

from __future__ import annotations

import argparse
import random
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import numpy as np
from grpc_health.v1 import health_pb2, health_pb2_grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.serve_process import rss_mb, serve_process
from counterplan.planning.demo import TARGET, make_loan_data
from counterplan.server._generated.counterplan.v1 import counterplan_pb2 as pb
from counterplan.server.grpc.client import CounterplanClient, class_goal, retry_after
from counterplan.server.registry.registry import demo_model

EXPECTED: dict[str, set[str]] = {
    "solve": {"OK", "RESOURCE_EXHAUSTED"},
    "stream": {"OK", "RESOURCE_EXHAUSTED"},
    "invalid": {"INVALID_ARGUMENT", "NOT_FOUND"},
    "cancelled": {"CANCELLED", "RESOURCE_EXHAUSTED", "OK"},
    "short deadline": {"OK", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED"},
    "health": {"SERVING"},
}
MIX = {"solve": 0.35, "stream": 0.15, "invalid": 0.2, "cancelled": 0.1, "short deadline": 0.1, "health": 0.1}
MAX_BACKOFF_SECONDS = 2.0


def applicants(count: int = 32) -> list[dict[str, Any]]:
    """Rejected applicants of the demo data (P(approved) < 0.5 by the served demo model), as wire instances."""
    data = make_loan_data()
    features = data.drop(columns=[TARGET])
    adapter: Any = demo_model().adapter  # the demo's pipeline takes the frame as is
    approved = adapter.model.predict_proba(features)[:, list(adapter.model.classes_).index(1)]
    rows = np.flatnonzero(approved < 0.5)[:count]
    return [
        {str(k): (v.item() if isinstance(v, np.generic) else v) for k, v in features.iloc[int(i)].items()} for i in rows
    ]


def _invalid(rng: random.Random, instance: dict[str, Any]) -> pb.ExplainRequest:
    request = CounterplanClient.request("loan-demo", instance, [class_goal(1, 0.7)], seed=0)
    kind = rng.randrange(5)
    if kind == 0:
        request.instance["no_such_feature"].CopyFrom(pb.FeatureValue(number_value=1.0))
    elif kind == 1:
        request.solver.config_json = "a: &a [1, 2]\nb: [*a, *a]\n"
    elif kind == 2:
        request.solver.config_json = '{"phases": [{"move_selector": {"moves_per_step": 1000000000}}]}'
    elif kind == 3:
        request.instance["income"].CopyFrom(pb.FeatureValue(number_value=float("nan")))
    else:
        request.model_id = "no-such-model"
    return request


@dataclass
class SoakReport:
    """What the clients saw."""

    statuses: Counter[tuple[str, str]] = field(default_factory=Counter)
    solve_latencies: list[float] = field(default_factory=list)
    health_latencies: list[float] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, kind: str, status: str, seconds: float, detail: str = "") -> None:
        with self.lock:
            self.statuses[(kind, status)] += 1
            if status not in EXPECTED[kind]:
                self.unexpected.append(f"{kind}: {status} {detail[:200]}")
            elif kind in ("solve", "stream") and status == "OK":
                self.solve_latencies.append(seconds)
            elif kind == "health":
                self.health_latencies.append(seconds)

    @property
    def calls(self) -> int:
        return sum(self.statuses.values())


def _client(target: str, seed: int, stop_at: float, instances: list[dict[str, Any]], report: SoakReport) -> None:
    rng = random.Random(seed)
    kinds, weights = list(MIX), list(MIX.values())
    with CounterplanClient(target) as client, grpc.insecure_channel(target) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < stop_at:
            kind = rng.choices(kinds, weights)[0]
            instance = rng.choice(instances)
            request = CounterplanClient.request("loan-demo", instance, [class_goal(1, 0.7)], seed=rng.randrange(100))
            started = time.perf_counter()
            backoff = 0.0
            try:
                if kind == "health":
                    reply = health.Check(health_pb2.HealthCheckRequest(), timeout=5)
                    status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
                elif kind == "solve":
                    client.explain(request, timeout=60)
                    status = "OK"
                elif kind == "stream":
                    for _ in client.explain_stream(request, timeout=60):
                        pass
                    status = "OK"
                elif kind == "invalid":
                    client.explain(_invalid(rng, instance), timeout=30)
                    status = "OK"
                elif kind == "cancelled":
                    call = client.stub.ExplainStream(request, timeout=60)
                    threading.Timer(rng.uniform(0.0, 0.3), call.cancel).start()
                    for _ in call:
                        pass
                    status = "OK"
                else:
                    client.explain(request, timeout=rng.uniform(0.02, 0.3))
                    status = "OK"
                detail = ""
            except grpc.RpcError as exc:
                error: Any = exc
                status, detail = error.code().name, error.details() or ""
                if status == "RESOURCE_EXHAUSTED":
                    backoff = min(retry_after(exc) or 0.0, MAX_BACKOFF_SECONDS)
            report.record(kind, status, time.perf_counter() - started, detail)
            if backoff:
                time.sleep(backoff * rng.uniform(0.5, 1.0))  # as a polite client does, with jitter


def soak(target: str, clients: int, seconds: float, instances: list[dict[str, Any]], seed: int = 0) -> SoakReport:
    """Run ``clients`` threads against ``target`` for ``seconds``; return what they saw."""
    report = SoakReport()
    stop_at = time.monotonic() + seconds
    threads = [
        threading.Thread(target=_client, args=(target, seed * 1000 + i, stop_at, instances, report), daemon=True)
        for i in range(clients)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return report


def _percentiles(values: list[float]) -> str:
    if not values:
        return "-"
    p50, p95, p99 = np.percentile(np.array(values) * 1e3, [50, 95, 99])
    return f"p50 {p50:.0f} ms, p95 {p95:.0f} ms, p99 {p99:.0f} ms ({len(values)} calls)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=180.0)
    parser.add_argument("--warmup", type=float, default=20.0, help="seconds of load before the first memory reading")
    args = parser.parse_args()
    instances = applicants()
    with serve_process() as (server, target):
        idle = rss_mb(server.pid)
        warm = soak(target, args.clients, args.warmup, instances, seed=1)
        before = rss_mb(server.pid)
        report = soak(target, args.clients, args.seconds, instances, seed=2)
        after = rss_mb(server.pid)
        alive = server.poll() is None
    warmup = f"after a {args.warmup:.0f} s warm-up of {warm.calls} calls"
    print(f"{args.clients} clients for {args.seconds:.0f} s ({warmup})")
    print(f"{'call':<16} {'status':<20} {'count':>7}")
    for (kind, status), count in sorted(report.statuses.items()):
        print(f"{kind:<16} {status:<20} {count:>7}")
    print(f"calls: {report.calls} ({report.calls / args.seconds:.1f}/s); unexpected statuses: {len(report.unexpected)}")
    for line in report.unexpected[:10]:
        print(f"  {line}")
    print(f"valid solves answered OK: {_percentiles(report.solve_latencies)}")
    print(f"health checks: {_percentiles(report.health_latencies)}")
    growth = (after - before) / before * 100
    print(f"server RSS: idle {idle:.0f} MB, after warm-up {before:.0f} MB, end {after:.0f} MB ({growth:+.1f}%)")
    print(f"server alive at the end: {alive}")


if __name__ == "__main__":
    main()
