"""Throughput, latency and errors of the gRPC ``Explain`` call under concurrent clients, and its overhead.

It serves the embedded demo loan model from a real server started in-process on a free loopback
port (or dials ``--target host:port``), and builds 16 fixed problems: the first rows of
``make_loan_data()`` that the demo model rejects (P(approved=1) < 0.5), each with the goal
"class 1 with confidence 0.7" and seed 0. Then it measures:

* **load**: ``--clients`` threads, each with its own channel, send ``Explain`` back to back (each
  thread walks the problems in turn) for ``--seconds``, and record every latency and status.
  The server refuses solves beyond ``max_concurrent_solves`` with RESOURCE_EXHAUSTED by design,
  so ``--max-concurrent-solves`` defaults to ``--clients`` for a run that should see no error;
  errors are reported by status code. ``requests`` counts every call, ``requests/s`` and the
  latency percentiles only the successful ones;
* **in-process p50**: ``counterplan.solver.counterfactual.explain`` on the very problems the server builds
  (the same request checked by ``counterplan.server.grpc.convert.check_request`` against the same registered
  model, with the same solve-time cap the server adds), one at a time;
* **single-client gRPC p50**: the same problems through one client, one call at a time, timed
  alternately with the in-process solves so machine load hits both alike; the **overhead** is
  its p50 minus the in-process p50 (no queueing: one call at a time).

Before timing, every problem is solved once both ways and the answers are checked to be equal;
under load, every answer is checked against that one (``same answer``: dynamic batching, or
queueing, must not change what a request gets back).

**Dynamic batching** (``--compare-batching``): the load run is made on fresh in-process servers
that differ only in ``dynamic_batching_max_wait_ms``: 0 (off: every solve calls the model
itself), then the setting's default (or each of ``--dynamic-batching-max-wait-ms 5,20``).
``req/call`` is how many solves' requests one model call served on average (the server's
``batching_statistics()``; ``-`` when off). On a machine shared with other work, ``--rounds N``
runs the settings in turn N times, so a change in the machine's load hits all alike. Dynamic
batching saves what a model call costs whatever its row count, so ``--model-path pipeline``
serves the demo through its real scikit-learn pipeline on a DataFrame at every call (the cost
of a model the adapter's compiled fast path cannot take: a custom transformer, a remote model);
``adapter`` (the default) serves the registry's adapter as it is.

The server's one-JSON-line-per-call log is rendered as in production but discarded unless
``--server-logs``. With the in-process server, the client threads share the interpreter (and
its GIL) with the server; dial a separately started ``counterplan serve`` with ``--target`` to
keep them apart. Goals: zero errors at 32 clients, overhead under 5 ms at p50.

Run: ``python benchmarks/grpc_load.py`` (options: ``--clients 32 --seconds 20``, ``--target``,
``--compare-batching``, ``--rounds``, ``--dynamic-batching-max-wait-ms``).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import logging
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import grpc
import numpy as np
import structlog

from counterplan.planning import CallableAdapter
from counterplan.planning.demo import TARGET, make_loan_data
from counterplan.planning.problem import CounterfactualProblem
from counterplan.server._generated.counterplan.v1 import counterplan_pb2 as pb
from counterplan.server.grpc.app import RunningServer, start_server
from counterplan.server.grpc.client import CounterplanClient, class_goal
from counterplan.server.grpc.convert import check_request
from counterplan.server.grpc.settings import ServerSettings
from counterplan.server.logs import configure_json_logs
from counterplan.server.registry.registry import DEMO_ID, ModelRegistry, RegisteredModel
from counterplan.solver.core.config import SolverConfig, TerminationConfig
from counterplan.solver.counterfactual import explain

GOAL_LABEL = 1
GOAL_CONFIDENCE = 0.7
SEED = 0
OVERHEAD_GOAL_MS = 5.0
ERRORS_GOAL_CLIENTS = 32


@dataclass(frozen=True)
class Problem:
    """One benchmark problem: the wire request and the in-process problem the server builds from it."""

    row: int
    request: pb.ExplainRequest
    problem: CounterfactualProblem
    config: SolverConfig
    seed: int | None


@dataclass
class ClientRecord:
    """What one load client saw: latency in seconds and status of every call."""

    latencies: list[float] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    answers: list[tuple[int, str]] = field(default_factory=list)
    """(problem index, score text) of every successful call."""


def _native(value: Any) -> Any:
    """A numpy scalar as the Python value the client's ``value_message`` expects."""
    return value.item() if isinstance(value, np.generic) else value


def build_problems(model: RegisteredModel, count: int, timeout: float, max_solve_seconds: float) -> list[Problem]:
    """The first ``count`` demo rows the model rejects, as requests and as the server's problems."""
    data = make_loan_data()
    features = data.drop(columns=[TARGET])
    adapter: Any = model.adapter  # the demo's SklearnClassifierAdapter, or pipeline_model's CallableAdapter
    pipeline = adapter.model if hasattr(adapter, "model") else adapter.function.__self__  # takes the frame as is
    classes = list(pipeline.classes_)
    approved = pipeline.predict_proba(features)[:, classes.index(GOAL_LABEL)]
    rows = [int(i) for i in np.flatnonzero(approved < 0.5)[:count]]
    if len(rows) < count:
        raise SystemExit(f"only {len(rows)} rejected rows in the demo data; asked for {count}")
    # The server caps every solve at min(max_solve_seconds, 0.9 * deadline - 0.05) (service._submit).
    limit = min(max_solve_seconds, timeout * 0.9 - 0.05)
    problems = []
    for row in rows:
        instance = {str(name): _native(value) for name, value in features.iloc[row].items()}
        request = CounterplanClient.request(
            model.id, instance, [class_goal(GOAL_LABEL, GOAL_CONFIDENCE)], seed=SEED, request_id=f"row-{row}"
        )
        checked = check_request(request, model, max_features=1000)
        config = checked.config.model_copy(
            update={"termination": TerminationConfig(spent_limit_seconds=limit, children=(checked.config.termination,))}
        )
        problem = model.problem(checked.features, checked.goals, checked.distance)
        problems.append(Problem(row, request, problem, config, checked.seed))
    return problems


def percentile_ms(seconds: list[float], q: float) -> float:
    """The ``q``-th percentile of ``seconds``, in milliseconds (NaN when empty)."""
    return float(np.percentile(seconds, q)) * 1e3 if seconds else float("nan")


def check_answers(client: CounterplanClient, problems: list[Problem], timeout: float) -> tuple[int, list[str]]:
    """Solve every problem both ways once (also a warm-up): the number whose scores agree, and
    each problem's score as the server gives it alone (the answer every loaded call must give)."""
    same = 0
    expected = []
    for p in problems:
        local = explain(p.problem, p.config, seed=p.seed)
        remote = client.explain(p.request, timeout=timeout)
        same += remote.score.text == local.score
        expected.append(remote.score.text)
    return same, expected


def sequential_times(
    client: CounterplanClient, problems: list[Problem], repeats: int, timeout: float
) -> tuple[list[float], list[float]]:
    """In-process solve and single-client gRPC latencies (seconds), timed alternately per problem."""
    local: list[float] = []
    remote: list[float] = []
    for _ in range(repeats):
        for p in problems:
            start = time.perf_counter()
            explain(p.problem, p.config, seed=p.seed)
            local.append(time.perf_counter() - start)
            start = time.perf_counter()
            client.explain(p.request, timeout=timeout)
            remote.append(time.perf_counter() - start)
    return local, remote


@dataclass(frozen=True)
class LoadRun:
    """A load run: ``clients`` threads calling ``target`` back to back for ``seconds``."""

    target: str
    problems: list[Problem]
    clients: int
    seconds: float
    max_requests: int
    timeout: float


def _load_client(
    run: LoadRun, offset: int, start: threading.Barrier, stop_at: list[float], record: ClientRecord
) -> None:
    with CounterplanClient(run.target) as client:
        grpc.channel_ready_future(client.channel).result(timeout=10)
        start.wait()
        for i in range(run.max_requests):
            if time.perf_counter() >= stop_at[0]:
                break
            index = (offset + i) % len(run.problems)
            request = run.problems[index].request
            began = time.perf_counter()
            try:
                response = client.explain(request, timeout=run.timeout)
                status = "OK"
                record.answers.append((index, response.score.text))
            except grpc.RpcError as exc:
                code = exc.code() if isinstance(exc, grpc.Call) else None
                status = code.name if code is not None else type(exc).__name__
            except Exception as exc:
                status = type(exc).__name__
            record.latencies.append(time.perf_counter() - began)
            record.statuses.append(status)


def run_load(run: LoadRun) -> tuple[float, list[ClientRecord]]:
    """Every client's record, and the wall time from the common start to the last client's end."""
    records = [ClientRecord() for _ in range(run.clients)]
    stop_at = [float("inf")]
    barrier = threading.Barrier(run.clients + 1, timeout=30)
    threads = [
        threading.Thread(
            target=_load_client, args=(run, i, barrier, stop_at, records[i]), name=f"load-client-{i}", daemon=True
        )
        for i in range(run.clients)
    ]
    for thread in threads:
        thread.start()
    barrier.wait()
    began = time.perf_counter()
    stop_at[0] = began + run.seconds
    for thread in threads:  # a call started before the stop ends within its deadline
        thread.join(timeout=max(stop_at[0] + run.timeout + 5 - time.perf_counter(), 0.0))
    wall = time.perf_counter() - began
    hung = sum(thread.is_alive() for thread in threads)
    if hung:
        print(f"warning: {hung} client threads still running after their last deadline", file=sys.stderr)
    return wall, records


@dataclass(frozen=True)
class LoadResult:
    """One load run's table row."""

    batching: str
    wall: float
    records: list[ClientRecord]
    requests_per_call: float | None
    expected: list[str]

    def row(self, clients: int) -> str:
        """The run as a line of the table."""
        ok = [s for r in self.records for s, st in zip(r.latencies, r.statuses, strict=True) if st == "OK"]
        statuses = collections.Counter(st for r in self.records for st in r.statuses)
        errors = ", ".join(f"{code}={n}" for code, n in sorted(statuses.items()) if code != "OK") or "0"
        answers = [a for r in self.records for a in r.answers]
        same = sum(text == self.expected[i] for i, text in answers)
        per_call = "-" if self.requests_per_call is None else f"{self.requests_per_call:.1f}"
        return (
            f"{self.batching:>8} {clients:>7} {self.wall:>10.1f} {sum(statuses.values()):>8}"
            f" {len(ok) / self.wall:>10.1f} {percentile_ms(ok, 50):>8.1f} {percentile_ms(ok, 95):>8.1f}"
            f" {percentile_ms(ok, 99):>8.1f} {per_call:>8} {f'{same}/{len(answers)}':>11}  {errors}"
        )

    @property
    def errors(self) -> int:
        """Calls that did not return OK."""
        return sum(st != "OK" for r in self.records for st in r.statuses)


TABLE_HEADER = (
    f"{'batching':>8} {'clients':>7} {'duration s':>10} {'requests':>8} {'requests/s':>10} {'p50 ms':>8}"
    f" {'p95 ms':>8} {'p99 ms':>8} {'req/call':>8} {'same answer':>11}  errors"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=ERRORS_GOAL_CLIENTS, help="concurrent client threads")
    parser.add_argument("--seconds", type=float, default=20.0, help="length of the load run")
    parser.add_argument("--target", metavar="HOST:PORT", help="dial this server instead of starting one")
    parser.add_argument(
        "--max-concurrent-solves", type=int, help="in-process server's solve limit (default: --clients)"
    )
    parser.add_argument("--workers", type=int, help="in-process server's gRPC threads (default: max(8, solves))")
    parser.add_argument("--problems", type=int, default=16, help="distinct rejected applicants")
    parser.add_argument("--repeats", type=int, default=5, help="sequential passes over the problems")
    parser.add_argument("--max-requests", type=int, default=100_000, help="cap on calls per load client")
    parser.add_argument("--timeout", type=float, default=30.0, help="deadline of every call, seconds")
    parser.add_argument(
        "--dynamic-batching-max-wait-ms",
        type=_waits,
        help="in-process server's setting (default: its default; 0: off); several (0,5,20): a load run each",
    )
    parser.add_argument(
        "--compare-batching", action="store_true", help="load runs with dynamic batching off, then on (in-process)"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="with --compare-batching: alternate off/on this many times (noisy machines)",
    )
    parser.add_argument(
        "--model-path",
        choices=("adapter", "pipeline"),
        default="adapter",
        help="the demo's adapter as registered, or its real pipeline at every call",
    )
    parser.add_argument("--server-logs", action="store_true", help="print the server's JSON logs to stderr")
    args = parser.parse_args()
    if args.target and (args.compare_batching or args.dynamic_batching_max_wait_ms):
        parser.error(
            "--compare-batching and --dynamic-batching-max-wait-ms start their own servers: leave out --target"
        )
    solves = args.max_concurrent_solves or args.clients
    workers = args.workers or min(max(8, solves), 256)

    configure_json_logs(logging.INFO)
    if not args.server_logs:  # render them as in production, but drop the lines
        structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=open(os.devnull, "w")))  # noqa: SIM115

    registry = ModelRegistry.demo()
    model = registry.get(DEMO_ID)
    assert model is not None
    if args.model_path == "pipeline":
        model = pipeline_model(model)
        registry = ModelRegistry([model])
    on = float(ServerSettings.model_fields["dynamic_batching_max_wait_ms"].default)
    chosen: list[float] = args.dynamic_batching_max_wait_ms or [on]
    if args.compare_batching and 0.0 not in chosen:
        chosen = [0.0, *chosen]

    def settings(wait: float) -> ServerSettings:
        return ServerSettings(
            port=0,
            address="127.0.0.1",
            max_concurrent_solves=solves,
            workers=workers,
            dynamic_batching_max_wait_ms=wait,
        )

    problems = build_problems(model, args.problems, args.timeout, settings(on).max_solve_seconds)
    waits = chosen * max(args.rounds, 1)
    results: list[LoadResult] = []
    where = ""
    for run_index, wait in enumerate(waits):
        running: RunningServer | None = None
        if args.target:
            target = args.target
            where = f"server at {target} (its own settings)"
        else:
            running = start_server(settings(wait), registry)
            target = running.target
            where = f"in-process server at {target}, workers={workers}, max_concurrent_solves={solves}"
        try:
            with CounterplanClient(target) as client:
                grpc.channel_ready_future(client.channel).result(timeout=10)
                same, expected = check_answers(client, problems, args.timeout)
                if run_index == len(waits) - 1:  # one-at-a-time timings once, on the default server
                    local, remote = sequential_times(client, problems, args.repeats, args.timeout)
            before = _batching_requests(running)
            wall, records = run_load(
                LoadRun(target, problems, args.clients, args.seconds, args.max_requests, args.timeout)
            )
            after = _batching_requests(running)
        finally:
            if running is not None:
                running.stop(grace=0)
        per_call = None
        if before is not None and after is not None and after[0] > before[0]:
            per_call = (after[1] - before[1]) / (after[0] - before[0])
        label = "?" if args.target else ("off" if wait == 0 else f"{wait:g} ms")
        results.append(LoadResult(label, wall, records, per_call, expected))

    local_p50, remote_p50 = percentile_ms(local, 50), percentile_ms(remote, 50)
    overhead = remote_p50 - local_p50
    paired = float(np.median(np.subtract(remote, local))) * 1e3

    print(f"{where}; {os.cpu_count()} CPUs")
    print(
        f"{len(problems)} problems: demo rows {[p.row for p in problems]}, goal class {GOAL_LABEL}"
        f" at confidence {GOAL_CONFIDENCE}, seed {SEED}; gRPC answers equal in-process: {same}/{len(problems)}"
    )
    print()
    print(TABLE_HEADER)
    for result in results:
        print(result.row(args.clients))
    print()
    n = len(local)
    print(f"in-process solve p50:    {local_p50:8.1f} ms  ({n} solves, one at a time)")
    print(f"single-client gRPC p50:  {remote_p50:8.1f} ms  ({n} calls, one at a time)")
    print(f"gRPC overhead at p50:    {overhead:8.1f} ms  (median paired difference {paired:.1f} ms)")
    print()
    error_verdict = "met" if not any(r.errors for r in results) else "NOT met"
    if args.clients != ERRORS_GOAL_CLIENTS:
        error_verdict += f" (but this run used {args.clients} clients)"
    print(f"goal: zero errors at {ERRORS_GOAL_CLIENTS} clients: {error_verdict}")
    print(f"goal: overhead < {OVERHEAD_GOAL_MS:g} ms at p50: {'met' if overhead < OVERHEAD_GOAL_MS else 'NOT met'}")


def _waits(text: str) -> list[float]:
    """``--dynamic-batching-max-wait-ms``: one or more comma-separated milliseconds."""
    try:
        return [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected milliseconds such as 5 or 0,5,20, given {text!r}") from None


def pipeline_model(model: RegisteredModel) -> RegisteredModel:
    """The demo served through its real pipeline on a DataFrame at every call (no fast path)."""
    pipeline = model.adapter.model  # type: ignore[attr-defined]  # the demo's SklearnClassifierAdapter
    adapter = CallableAdapter(
        pipeline.predict_proba, list(model.adapter.outputs), input_kind="dataframe", row_by_row=True
    )
    return dataclasses.replace(model, adapter=adapter)


def _batching_requests(running: RunningServer | None) -> tuple[int, int] | None:
    """(model calls, requests) dynamic batching has made so far on the demo model; None when unknown."""
    if running is None:
        return None
    stats = running.service.batching_statistics().get(DEMO_ID)
    return None if stats is None else (stats.calls, stats.requests)


if __name__ == "__main__":
    main()
