"""Hostile requests against a real ``counterplan serve`` process: status, time, health, memory.

Starts ``counterplan serve --port 0`` (the demo model) in its own process, sends each hostile
request of issue 13 once (YAML bombs, deep nesting, huge sizes, out-of-range values, floods of
bad fields, idle reflection streams), and after each prints the status, the seconds it took,
whether the server still answers a health check and a real explain, and its resident memory
(VmRSS from /proc). Target: every case refused within a second, the server alive, memory flat::

    python benchmarks/hostile.py
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.serve_process import rss_mb, serve_process
from counterplan.planning.demo import rejected_applicant
from counterplan.server._generated.counterplan.v1 import counterplan_pb2 as pb
from counterplan.server.grpc.client import CounterplanClient, class_goal

BOMB = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8)
)


def _request(**instance: Any) -> pb.ExplainRequest:
    return CounterplanClient.request("loan-demo", {**rejected_applicant(), **instance}, [class_goal(1, 0.7)], seed=0)


def _config(text: str) -> pb.ExplainRequest:
    request = _request()
    request.solver.config_json = text
    return request


def _seed(seed: int) -> pb.ExplainRequest:
    request = _request()
    request.solver.seed = seed
    return request


def _flood() -> pb.ExplainRequest:
    request = _request()
    for i in range(10_000):
        request.instance[f"unknown_{i}"].CopyFrom(pb.FeatureValue(number_value=1.0))
    return request


def _long_name() -> pb.ExplainRequest:
    request = _request()
    request.instance["x" * 1_000_000].CopyFrom(pb.FeatureValue(number_value=1.0))
    return request


def _allowed() -> pb.ExplainRequest:
    request = _request()
    request.overrides.append(pb.FeatureOverride(name="income", allowed_values=[float(v) for v in range(200_000)]))
    return request


CASES: dict[str, Callable[[], pb.ExplainRequest]] = {
    "YAML billion laughs (1 KB)": lambda: _config(BOMB),
    "20,000 x [": lambda: _config("[" * 20_000),
    "5,000-deep JSON under phases": lambda: _config('{"phases": ' + "[" * 5000 + "]" * 5000 + "}"),
    "moves_per_step 1e9": lambda: _config('{"phases": [{"move_selector": {"moves_per_step": 1000000000}}]}'),
    "late_acceptance_size 1e12": lambda: _config(
        '{"phases": [{"acceptor": {"type": "late_acceptance", "late_acceptance_size": 1000000000000}}]}'
    ),
    "integer feature = int64 max": lambda: _request(credit_cards=2**63 - 1),
    "seed -1": lambda: _seed(-1),
    "10,000 unknown features": _flood,
    "a 1 MB feature name": _long_name,
    "200,000 allowed values": _allowed,
    "unicode feature name": lambda: _request(**{"\u00e9\u00df\u2603": 1.0}),
}


def main() -> None:
    with serve_process() as (server, target):
        channel = grpc.insecure_channel(target)
        health = health_pb2_grpc.HealthStub(channel)
        client = CounterplanClient(target)
        print(f"server pid {server.pid} on {target}; resident {rss_mb(server.pid):.0f} MB before the cases")
        print(f"{'case':<32} {'status':<18} {'seconds':>8} {'healthy':>8} {'solves':>7} {'RSS MB':>7}")
        for name, build in CASES.items():
            request = build()
            started = time.perf_counter()
            try:
                client.explain(request, timeout=60)
                status = "OK"
            except grpc.RpcError as exc:
                status = exc.code().name  # type: ignore[attr-defined]
            spent = time.perf_counter() - started
            alive = health.Check(health_pb2.HealthCheckRequest(), timeout=10).status == 1
            solves = client.explain(_request(), timeout=60).valid
            print(f"{name:<32} {status:<18} {spent:>8.3f} {alive!s:>8} {solves!s:>7} {rss_mb(server.pid):>7.0f}")
        client.close()
        channel.close()


if __name__ == "__main__":
    main()
