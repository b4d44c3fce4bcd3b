"""A soak: many concurrent clients for minutes, mixing every method (Explain, ExplainStream,
ExplainBatch, Plan, heavy plans), invalid requests, cancels, short deadlines, a slow model and
health checks, against a real server process (``benchmarks/soak_server.py``: ``counterplan
serve``'s own start and shutdown, with the demo model and a slow copy of it).

Every call has the statuses it may end with (a valid solve: ``OK``, or ``RESOURCE_EXHAUSTED``
when the server is full, after which the client waits the ``RetryInfo`` delay it was given; an
invalid request: ``INVALID_ARGUMENT`` or ``NOT_FOUND``; a cancelled stream: ``CANCELLED``; a
deadline shorter than a solve: ``OK`` with the best so far, or ``DEADLINE_EXCEEDED`` only before
any answer; a slow model (a model call of 0.3 s) under a 2 s deadline: ``OK`` with its best so
far; a heavy plan under a 2 s deadline: ``OK`` with its front so far, ``INVALID_ARGUMENT``
when one generation would not fit the server's limits, or ``DEADLINE_EXCEEDED`` when building its
problem and actions left the deadline no time to plan, before any answer, as a short deadline's
(a busy server's build took up to 1.9 s); a health check: ``SERVING``). Anything
else (``INTERNAL``, ``UNKNOWN``, ``UNAVAILABLE``, a health check that fails) is unexpected.

Each call carries a request id; the server's JSON log says how long it held the call, so the
table also gives, per kind, how far past its deadline the server held a call (the promise: at
most one model call). The table gives calls, statuses, latency percentiles of the valid solves
and of the health checks, and the server's resident memory after a warm-up and at the end.
Targets: 0 unexpected statuses, memory growth under 10% after the warm-up, no call held past
its deadline by more than one model call::

    python benchmarks/soak.py --clients 64 --seconds 180

:func:`soak` is also run, briefly, by ``tests/server/grpc/test_soak.py`` against an in-process
server.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
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
    "batch": {"OK", "RESOURCE_EXHAUSTED"},
    "plan": {"OK", "RESOURCE_EXHAUSTED"},
    "heavy plan": {"OK", "RESOURCE_EXHAUSTED", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED"},
    "slow model": {"OK", "RESOURCE_EXHAUSTED"},
    "invalid": {"INVALID_ARGUMENT", "NOT_FOUND"},
    "cancelled": {"CANCELLED", "RESOURCE_EXHAUSTED", "OK"},
    "short deadline": {"OK", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED"},
    "health": {"SERVING"},
}
MIX = {
    "solve": 0.22,
    "stream": 0.1,
    "batch": 0.06,
    "plan": 0.06,
    "heavy plan": 0.04,
    "slow model": 0.06,
    "invalid": 0.16,
    "cancelled": 0.1,
    "short deadline": 0.1,
    "health": 0.1,
}
DEADLINES = {"slow model": 2.0, "heavy plan": 2.0}
"""The client's deadline of the kinds that test the promise (seconds); the others allow 60 s."""
SLOW_MODEL_ID = "slow-demo"
SLOW_CALL_SECONDS = 0.3
"""How long each call of the slow model takes."""
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
    deadlines: dict[str, tuple[str, float]] = field(default_factory=dict)
    """Each call's request id: its kind and the client's deadline in seconds."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, kind: str, status: str, seconds: float, detail: str = "") -> None:
        with self.lock:
            self.statuses[(kind, status)] += 1
            if status not in EXPECTED[kind]:
                self.unexpected.append(f"{kind}: {status} {detail[:200]}")
            elif kind in ("solve", "stream", "batch", "plan", "slow model") and status == "OK":
                self.solve_latencies.append(seconds)
            elif kind == "health":
                self.health_latencies.append(seconds)

    @property
    def calls(self) -> int:
        return sum(self.statuses.values())


def heavy_actions() -> dict[str, Any]:
    """32 actions with long efforts (18 terms: a formula has at most 200 parts and 500 characters), conditions and
    consequences, and a dense cost graph: a generation of 2,000 plans costs seconds of formula
    work between two model calls."""
    numbers = [("debt", -30000, -1000), ("income", 1000, 40000), ("loan_amount", -25000, -1000)]
    effort = " + ".join(f"abs(delta) / {5000 + k}" for k in range(18))
    actions = []
    for i in range(32):
        feature, low, high = numbers[i % len(numbers)]
        actions.append(
            {
                "name": f"step {i}",
                "feature": feature,
                "kind": "add",
                "low": low,
                "high": high,
                "effort": effort,
                "pre": " and ".join(f"income > {1000 + k}" for k in range(24)),
                "post": " and ".join(f"debt >= {-k}" for k in range(24)),
                "consequences": {
                    "years_employed": " + ".join(f"years_employed / {k + 1}" for k in range(12)) + " - years_employed",
                    "credit_cards": " + ".join(f"credit_cards / {k + 1}" for k in range(12)) + " - credit_cards",
                },
            }
        )
    graph = [
        {"source": a, "target": b, "tau": "clip(45000 / income, 0.5, 1)"}
        for a, _, _ in numbers
        for b, _, _ in numbers
        if a != b
    ]
    return {"actions": actions, "graph": graph}


Call = tuple[str, float, Any]
"""A call's request id, its deadline in seconds and the function that makes it."""


def _request(rng: random.Random, instance: dict[str, Any], kind: str, model_id: str = "loan-demo") -> pb.ExplainRequest:
    request = CounterplanClient.request(model_id, instance, [class_goal(1, 0.7)], seed=rng.randrange(100))
    request.request_id = f"soak-{kind.replace(' ', '-')}-{rng.getrandbits(48):012x}"
    return request


def _plan(client: CounterplanClient, rng: random.Random, instance: dict[str, Any], heavy: bool, timeout: float) -> Call:
    from counterplan.planning.demo import DEMO_ACTIONS

    actions = heavy_actions() if heavy else DEMO_ACTIONS
    # heavy: at the server's cap on one generation's work (460 x 21,376 formula parts, admitted) or
    # four times past it (refused up front with INVALID_ARGUMENT, before it takes a slot)
    population = rng.choice((460, 2000)) if heavy else 60
    size = {"population": population, "generations": 1000 if heavy else 15}
    request = CounterplanClient.plan_request("loan-demo", instance, actions, seed=rng.randrange(100), **size)
    request.request_id = f"soak-{'heavy-plan' if heavy else 'plan'}-{rng.getrandbits(48):012x}"
    return request.request_id, timeout, lambda: client.plan(request, timeout=timeout)


def _prepare(kind: str, client: CounterplanClient, health: Any, rng: random.Random, instance: dict[str, Any]) -> Call:
    """The call of ``kind`` to make: its request id (``""`` for a health check) and a function that
    makes it, raising ``grpc.RpcError`` (or :class:`_StatusError`) for any status but a success."""
    timeout = DEADLINES.get(kind, 60.0) if kind != "short deadline" else rng.uniform(0.02, 0.3)
    request = _request(rng, instance, kind, SLOW_MODEL_ID if kind == "slow model" else "loan-demo")
    if kind == "health":
        return "", timeout, lambda: _health(health)
    if kind in ("solve", "slow model", "short deadline"):
        return request.request_id, timeout, lambda: client.explain(request, timeout=timeout)
    if kind == "stream":
        return request.request_id, timeout, lambda: list(client.explain_stream(request, timeout=timeout))
    if kind == "batch":
        rows = [(f"r{i}", _request(rng, instance, kind)) for i in range(3)]
        return rows[0][1].request_id, timeout, lambda: _batch(client, rows, timeout)
    if kind in ("plan", "heavy plan"):
        return _plan(client, rng, instance, kind == "heavy plan", timeout)
    if kind == "invalid":
        return "", timeout, lambda: client.explain(_invalid(rng, instance), timeout=30)
    return request.request_id, timeout, lambda: _cancelled(client, rng, request)


def _health(health: Any) -> None:
    reply = health.Check(health_pb2.HealthCheckRequest(), timeout=5)
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    if status != "SERVING":
        raise _StatusError(status)


def _batch(client: CounterplanClient, rows: list[tuple[str, pb.ExplainRequest]], timeout: float) -> None:
    for answer in client.explain_batch(rows, timeout=timeout):
        if answer.HasField("error"):
            raise _StatusError(_code_name(answer.error.code))


def _cancelled(client: CounterplanClient, rng: random.Random, request: pb.ExplainRequest) -> None:
    call = client.stub.ExplainStream(request, timeout=60)
    threading.Timer(rng.uniform(0.0, 0.3), call.cancel).start()
    for _ in call:
        pass


class _StatusError(Exception):
    """A call that ended with a status other than an RPC error's (a health reply, a batch row's)."""

    def __init__(self, status: str) -> None:
        super().__init__(status)
        self.status = status


def _code_name(code: int) -> str:
    return next((c.name for c in grpc.StatusCode if c.value[0] == code), f"CODE_{code}")


def _client(target: str, seed: int, stop_at: float, instances: list[dict[str, Any]], report: SoakReport) -> None:
    rng = random.Random(seed)
    kinds, weights = list(MIX), list(MIX.values())
    with CounterplanClient(target) as client, grpc.insecure_channel(target) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < stop_at:
            kind = rng.choices(kinds, weights)[0]
            started = time.perf_counter()
            backoff, detail = 0.0, ""
            request_id, timeout, call = _prepare(kind, client, health, rng, rng.choice(instances))
            if request_id:
                report.deadlines[request_id] = (kind, timeout)
            try:
                call()
                status = "OK" if kind != "health" else "SERVING"
            except _StatusError as exc:
                status = exc.status
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
    log = Path(tempfile.mkdtemp(prefix="soak-")) / "server.log"
    with serve_process(command=("benchmarks.soak_server",), log=log) as (server, target):
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
    _print_holds(report, log)


def held_past_deadline(report: SoakReport, log: Path) -> dict[str, list[float]]:
    """Per kind of call: how long past its client's deadline the server held each call (seconds;
    negative: it answered before), from the server's JSON log of each call's duration."""
    held: dict[str, list[float]] = {}
    for line in log.read_text(encoding="utf-8").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        known = report.deadlines.get(str(event.get("request_id", "")))
        if event.get("event") != "request" or known is None or "duration_ms" not in event:
            continue
        kind, deadline = known
        held.setdefault(kind, []).append(float(event["duration_ms"]) / 1e3 - deadline)
    return held


def _print_holds(report: SoakReport, log: Path) -> None:
    print(f"{'call':<16} {'logged':>7} {'past deadline: max':>19} {'p99':>8}  (the promise: one model call)")
    for kind, values in sorted(held_past_deadline(report, log).items()):
        if kind not in DEADLINES and kind != "short deadline":  # a generous deadline: nothing to learn
            continue
        worst, p99 = max(values), float(np.percentile(values, 99))
        print(f"{kind:<16} {len(values):>7} {worst:>18.2f}s {p99:>7.2f}s")


if __name__ == "__main__":
    main()
