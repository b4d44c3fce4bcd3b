"""Run a batch on Ray: blocks of rows, as on worker processes, on a cluster's workers.

:func:`connect` starts a local Ray for the job (``"auto"``) or joins a running cluster (an
address), and refuses an address that does not answer within seconds, before any work starts:
Ray's own connection retries take from half a minute (``ray://``) to many minutes (a GCS
address), which is no way to learn of a typo.

:func:`run_on_ray` follows Ray Data's batch-inference pattern: the explainer (model, training
data, settings) goes into the object store once (``ray.put``) and each worker actor fetches it
once; the rows become a :class:`ray.data.Dataset` cut into blocks of at most ``window`` rows,
and ``map_batches`` solves each block with :func:`counterplan.solver.batch.block.run_blocks` (the
vectorised engine where it can go, else the threads path), so a block is searched as in one
process. Each row keeps the seed it gets from the global seed and its id
(:func:`counterplan.solver.batch.rows.row_seed`), and its answer does not depend on its block, so
every record equals the in-process one whatever block or node it lands in.

Rows and records travel as pickled bytes in a single binary column: a row dict mixes numbers,
strings, None and NaN, which Arrow and pandas would coerce column by column (an integer column
with a missing value becomes float, a row id's type changes), while the records must come back
exactly as :func:`~counterplan.solver.batch.block.run_blocks` made them. Ray itself pickles whatever it ships,
so this adds no new trust boundary: driver and workers are one job.

Ray is an optional dependency (the ``ray`` extra) and is imported only here, only when asked;
its module is handled as ``Any`` at this boundary.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import math
import os
import pickle
import queue
import socket
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit

from counterplan.planning.errors import ProblemError, one_line
from counterplan.solver.batch.block import Item, Record, run_blocks
from counterplan.solver.batch.protocol import RowExplainer

logger = logging.getLogger(__name__)

RAY_EXTRA_MISSING = "needs the ray extra: pip install 'counterplan[ray]'"
"""The reason given when Ray is not installed."""
PROBE_SECONDS = 3.0
"""How long an address may take to accept a connection (and, for gRPC, to complete the HTTP/2
handshake) before it is refused: enough for a cluster across a slow network, short enough that
a wrong address fails at once rather than after Ray's own minutes of retries."""
CLIENT_PORT = 10001
"""The Ray Client server's default port (``ray://host`` without a port)."""
GCS_PORT = 6379
"""The head node's default GCS port (``host`` without a port)."""
ITEM_COLUMN = "item"
"""The binary column that carries one pickled ``(row_id, row)`` per dataset row."""
TOKEN_HINT = (
    "a cluster with token authentication (ray start's default in recent Ray) needs RAY_AUTH_MODE=token "
    "and its token (RAY_AUTH_TOKEN, or the file ~/.ray/auth_token) on this machine"
)
"""Added to a failed join that looks like a missing token: Ray Client only reports a timeout."""
MESSAGE_CHARS = 500
"""A refusal quotes Ray's reason up to this length (its hints on authentication are long)."""
POLL_SECONDS = 1.0
"""How long a Ray Client driver's call for finished records waits on the cluster for the next one."""
RECORD_COLUMN = "record"
"""The binary column that carries one pickled record per solved row."""
_QUIET_DATA = {"enable_progress_bars": False, "print_on_execution_start": False}
"""Ray Data settings for a batch run: a library prints no progress bars or execution plans of its
own (the command line reports progress from the records). Set only for the run, then restored."""

_joined: str | None = None
"""The address this process joined (or ``"auto"`` for a Ray it started): a later batch with the
same address reuses the connection."""


def connect(address: str) -> None:
    """Make Ray ready for a batch: start a local Ray, join a cluster, or reuse this process's.

    Parameters
    ----------
    address:
        ``"auto"``: the Ray this process already uses, else the cluster in ``RAY_ADDRESS`` (as
        ``ray job submit`` sets it), else a new local Ray for the job with every CPU of this
        machine (it stops when the process exits). An address joins a running cluster: a Ray
        Client address ``ray://host:10001`` (any machine that reaches the head node), or the head
        node's GCS address ``host:6379`` (from a node of the cluster; as ``ray start --address``).

    Raises
    ------
    ProblemError
        Field ``ray``: Ray is not installed; the address is malformed, does not answer within
        :data:`PROBE_SECONDS`, or is not a Ray cluster; or this process already uses another
        Ray cluster.
    """
    global _joined  # noqa: PLW0603 - one Ray connection per process, as Ray itself keeps
    if not isinstance(address, str) or not address.strip():
        raise ProblemError(
            "ray", f"give 'auto' or a Ray cluster address (ray://host:10001, host:6379), given {address!r}"
        )
    address = address.strip()
    ray = _ray()
    if address == "auto":
        if ray.is_initialized():
            return
        from_env = os.environ.get("RAY_ADDRESS", "").strip()
        if from_env and from_env not in {"auto", "local"}:
            connect(from_env)
            return
        _start_local(ray)
        _joined = "auto"
        return
    host, port = _host_port(address)
    _probe(address, host, port, grpc_check=not _uses_tls())
    if ray.is_initialized():
        if address == _joined:
            return
        raise ProblemError(
            "ray",
            f"this process already uses the Ray cluster at {_current_address(ray)!r}; give 'auto' to run there, "
            f"or call ray.shutdown() before joining {address!r}",
        )
    try:
        ray.init(address=address, log_to_driver=False, configure_logging=False)
    except Exception as exc:  # Ray's ConnectionError, RuntimeError, ValueError ...: one reason for the user
        reason = _reason(exc)
        if (
            os.environ.get("RAY_AUTH_MODE", "").lower() != "token"
            and "RAY_AUTH_MODE" not in reason  # Ray's own message says it already
            and ("token" in reason.lower() or (address.startswith("ray://") and "timeout" in reason.lower()))
        ):
            reason += f"; {TOKEN_HINT}"
        raise ProblemError("ray", f"could not join the Ray cluster at {address!r}: {reason}") from exc
    _joined = address
    logger.info("joined the Ray cluster at %s", address)


def run_on_ray(
    explainer: RowExplainer,
    items: Sequence[Item],
    seed: int,
    *,
    window: int,
    on_record: Callable[[Record], None],
    vectorised: bool = True,
) -> None:
    """Solve ``items`` on Ray in blocks of ``window`` rows (``vectorised``: through the
    vectorised engine where it can go, as :func:`~counterplan.solver.batch.block.run_blocks`); each
    record to ``on_record`` as its block finishes (in this thread, in the order blocks finish).

    Ray must be ready (:func:`connect`; ``"auto"`` is used when it is not). The explainer is put
    in the object store once; one actor per CPU of the cluster (at most one per block) fetches
    it once and solves block after block with one CPU, its model calls on one native thread
    (the explainer's ``model_threads``; Ray also gives each one-CPU worker one OpenMP thread).
    Through Ray Client (``ray://``), whose drivers cannot run Ray Data, the pipeline runs in a
    :class:`Coordinator` actor on the cluster and the records are fetched from it as they come.
    """
    if not items:
        return
    ray = _ray()
    if not ray.is_initialized():
        connect("auto")
    shared = [ray.put(explainer)]  # once: every actor reads this one copy (one per node)
    if _is_client(ray):
        blocks: Iterator[list[bytes]] = _through_coordinator(ray, shared, items, seed, window, vectorised=vectorised)
    else:
        blocks = solve_blocks(shared, items, seed, window, vectorised)
    for blobs in blocks:
        for blob in blobs:
            on_record(pickle.loads(blob))


def solve_blocks(
    shared: list[Any], items: Sequence[Item], seed: int, window: int, vectorised: bool = True
) -> Iterator[list[bytes]]:
    """The Ray Data pipeline, run from this process: the pickled records of each block as it
    finishes. ``shared`` holds the explainer's object reference (inside a list, so that Ray
    passes it on as a reference and each actor fetches it itself)."""
    ray = _ray()
    data = importlib.import_module("ray.data")
    blocks = math.ceil(len(items) / window)
    cpus = max(1, math.floor(float(ray.cluster_resources().get("CPU", 1))))
    with _quiet(data):
        # from_items builds the blocks here (from_arrow and from_pandas would start a remote task
        # per block to read its metadata): ceil(n / window) blocks of at most ``window`` rows.
        dataset = data.from_items([{ITEM_COLUMN: pickle.dumps(item)} for item in items], override_num_blocks=blocks)
        solved = dataset.map_batches(
            BlockSolver,
            batch_size=None,  # one whole block per call: the block is the unit that shares model calls
            batch_format="pyarrow",
            fn_constructor_args=(shared, seed, window, vectorised),
            **_actor_pool(ray, data, min(blocks, cpus)),
            num_cpus=1,
        )
        for batch in solved.iter_batches(batch_size=None, batch_format="pyarrow"):
            yield batch.column(RECORD_COLUMN).to_pylist()


class Coordinator:
    """A Ray actor that runs :func:`solve_blocks` on the cluster for a Ray Client driver and hands
    out the finished records when asked (Ray Client supports neither Ray Data on the driver nor
    streaming generators, but it does support actor calls)."""

    def __init__(self, shared: list[Any], items: list[Item], seed: int, window: int, vectorised: bool = True) -> None:
        self._finished: queue.Queue[list[bytes] | BaseException | None] = queue.Queue()
        self._failure: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run,
            args=(shared, items, seed, window, vectorised),
            name="counterplan-ray-coordinator",
            daemon=True,
        )
        self._thread.start()

    def _run(self, shared: list[Any], items: list[Item], seed: int, window: int, vectorised: bool) -> None:
        try:
            for blobs in solve_blocks(shared, items, seed, window, vectorised):
                self._finished.put(blobs)
        except BaseException as exc:  # handed to the driver by poll()
            self._finished.put(exc)
            return
        self._finished.put(None)

    def poll(self, wait: float) -> tuple[list[bytes], bool]:
        """The pickled records finished since the last call (waiting up to ``wait`` seconds for
        the first), and whether the run is over; the run's exception if it failed."""
        if self._failure is not None:
            raise self._failure
        out: list[bytes] = []
        try:
            pending = [self._finished.get(timeout=wait)]
        except queue.Empty:
            return out, False
        with contextlib.suppress(queue.Empty):
            while True:
                pending.append(self._finished.get_nowait())
        for entry in pending:
            if isinstance(entry, BaseException):
                if not out:
                    raise entry
                self._failure = entry  # the records that came before it first
                return out, False
            if entry is None:
                return out, True
            out.extend(entry)
        return out, False


def _through_coordinator(
    ray: Any, shared: list[Any], items: Sequence[Item], seed: int, window: int, *, vectorised: bool
) -> Iterator[list[bytes]]:
    """:func:`solve_blocks` run by a :class:`Coordinator` on the cluster (Ray Client)."""
    coordinator = ray.remote(num_cpus=0)(Coordinator).remote(shared, list(items), seed, window, vectorised)
    try:
        while True:
            blobs, over = ray.get(coordinator.poll.remote(POLL_SECONDS))
            if blobs:
                yield blobs
            if over:
                return
    finally:
        ray.kill(coordinator)


class BlockSolver:
    """A Ray Data actor: solves whole blocks of rows with one explainer, fetched once.

    Ray Data calls it with a pyarrow table of pickled items (:data:`ITEM_COLUMN`) and gets back
    one of pickled records (:data:`RECORD_COLUMN`).
    """

    def __init__(self, explainer: list[Any], seed: int, window: int, vectorised: bool = True) -> None:
        self.explainer: RowExplainer = _ray().get(explainer[0])
        self.seed = seed
        self.window = window
        self.vectorised = vectorised

    def __call__(self, batch: Any) -> Any:
        """The records of one block (pyarrow table in, pyarrow table out)."""
        pa = importlib.import_module("pyarrow")
        items: list[Item] = [pickle.loads(blob) for blob in batch.column(ITEM_COLUMN).to_pylist()]
        records: list[Record] = []
        # the actor holds one CPU of the cluster (num_cpus=1): rows under a time limit, one at a time
        run_blocks(self.explainer, items, self.seed, self.window, records.append, vectorised=self.vectorised, cores=1)
        return pa.table({RECORD_COLUMN: pa.array([pickle.dumps(r) for r in records], pa.binary())})


def _actor_pool(ray: Any, data: Any, size: int) -> dict[str, Any]:
    """``map_batches``'s argument for an actor pool of 1 to ``size`` actors, as the installed Ray
    wants it: Ray 2.9 to 2.50 warn about ``compute`` and take ``concurrency``; from 2.51 on it is
    the other way round. The pool grows from one actor, so a busy cluster still starts the run."""
    if _version(ray.__version__) >= (2, 51):
        return {"compute": data.ActorPoolStrategy(min_size=1, max_size=size)}
    return {"concurrency": (1, size)}


def _version(text: str) -> tuple[int, int]:
    """The (major, minor) of a version string such as ``2.60.0`` or ``3.0.0.dev0``."""
    major, _, rest = text.partition(".")
    minor = rest.partition(".")[0]
    return int(major) if major.isdigit() else 0, int(minor) if minor.isdigit() else 0


def _ray() -> Any:
    """The ``ray`` module, or the reason it cannot be used."""
    try:
        return importlib.import_module("ray")
    except ImportError as exc:
        raise ProblemError("ray", RAY_EXTRA_MISSING) from exc


def _start_local(ray: Any) -> None:
    """A local Ray for this job: quiet (no dashboard, no worker output on this terminal, no log
    handler of Ray's own in this process) and with every CPU of the machine."""
    try:
        ray.init(
            address="local",  # never attach to a stale cluster file under /tmp/ray
            num_cpus=os.cpu_count() or 1,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
        )
    except Exception as exc:
        raise ProblemError("ray", f"could not start a local Ray: {_reason(exc)}") from exc
    logger.info("started a local Ray with %s CPUs", os.cpu_count() or 1)


def _host_port(address: str) -> tuple[str, int]:
    """The host and port an address names (``ray://`` defaults to the client port, a bare host
    to the GCS port); a malformed one is refused."""
    client = address.startswith("ray://")
    if "://" in address and not client:
        raise ProblemError("ray", f"give 'auto', ray://host:port or host:port, given {address!r}")
    try:
        parts = urlsplit(address if client else f"//{address}")
        host, port = parts.hostname, parts.port
    except ValueError as exc:  # a port that is not a number, or out of range
        raise ProblemError("ray", f"{address!r} is not host:port ({exc})") from exc
    if not host or parts.path not in {"", "/"}:
        raise ProblemError("ray", f"give 'auto', ray://host:port or host:port, given {address!r}")
    try:  # a name no resolver takes (an empty or 64-character label) fails the probe's lookup with a UnicodeError
        host.encode("idna")
    except UnicodeError as exc:
        raise ProblemError("ray", f"{address!r} is not host:port (the host name is invalid: {exc})") from exc
    return host, port if port is not None else (CLIENT_PORT if client else GCS_PORT)


def _probe(address: str, host: str, port: int, *, grpc_check: bool) -> None:
    """Refuse ``address`` unless ``host:port`` accepts a connection and speaks gRPC (both the
    GCS and the Ray Client server do) within :data:`PROBE_SECONDS`.

    Ray's own retries would wait from 30 s (Ray Client) to many minutes (GCS) for an address that
    never answers, or for one that answers but is no Ray (the dashboard's HTTP port, say)."""
    try:
        with socket.create_connection((host, port), timeout=PROBE_SECONDS):
            pass
    except OSError as exc:
        reason = (
            f"no answer within {PROBE_SECONDS:g} s"
            if isinstance(exc, TimeoutError)
            else (exc.strerror or type(exc).__name__).lower()
        )
        raise ProblemError("ray", f"the Ray cluster at {address!r} does not answer ({host}:{port}: {reason})") from exc
    if not grpc_check:
        return
    import grpc  # noqa: PLC0415 - a core dependency, loaded only here

    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    channel = grpc.insecure_channel(target)
    try:
        grpc.channel_ready_future(channel).result(timeout=PROBE_SECONDS)
    except grpc.FutureTimeoutError as exc:
        raise ProblemError(
            "ray", f"{address!r} accepts connections but is not a Ray cluster (no gRPC within {PROBE_SECONDS:g} s)"
        ) from exc
    finally:
        channel.close()


def _uses_tls() -> bool:
    """Whether Ray is set to TLS (``RAY_USE_TLS``): then the plain gRPC handshake cannot
    succeed, and only the TCP probe runs."""
    return os.environ.get("RAY_USE_TLS", "0").strip().lower() in {"1", "true", "yes"}


def _reason(error: BaseException) -> str:
    """An error of Ray's in one line, its first cause first: Ray wraps the telling reason (a
    missing authentication token, say) in a generic "Failed to connect"."""
    root = error
    for _ in range(8):  # bounded: a chain may loop
        cause = root.__cause__ or root.__context__
        if cause is None:
            break
        root = cause
    text = f"{type(root).__name__}: {_last_line(str(root))}"
    if root is not error:
        text += f" ({type(error).__name__}: {_last_line(str(error))})"
    return one_line(text, MESSAGE_CHARS)


def _last_line(message: str) -> str:
    """A message that quotes a traceback (as Ray's "Failed to connect to GCS" does) cut to what
    the traceback ends with: the error that was raised."""
    if "Traceback (most recent call last)" not in message:
        return message
    lines = [line for line in message.splitlines() if line.strip() and not line.startswith((" ", "\t"))]
    return lines[-1] if lines else message


def _is_client(ray: Any) -> bool:
    """Whether this process reaches Ray through Ray Client (``ray://``)."""
    return bool(ray.util.client.ray.is_connected())


def _current_address(ray: Any) -> str:
    """The address of the Ray this process uses, for a message."""
    try:
        return str(ray.get_runtime_context().gcs_address)
    except Exception:  # a Ray Client connection may not tell
        return _joined or "unknown"


@contextlib.contextmanager
def _quiet(data: Any) -> Iterator[None]:
    """Ray Data (the module ``data``) with :data:`_QUIET_DATA` while a batch runs (a dataset keeps
    the settings it was made with), the user's own settings afterwards."""
    with warnings.catch_warnings():
        # Making or copying a DataContext (as every dataset does) sets each of its fields, and Ray
        # warns about its own deprecated ones: nothing a user of counterplan could change.
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"ray\.data\.context")
        context = data.DataContext.get_current()
        saved = {name: getattr(context, name) for name in _QUIET_DATA if hasattr(context, name)}
        with contextlib.suppress(Exception):  # Ray Data warns once that its bars are off: we turned them off
            importlib.import_module("ray.util.debug").log_once("ray_data_progress_manager_disabled")
        for name in saved:
            setattr(context, name, _QUIET_DATA[name])
        try:
            yield
        finally:
            for name, value in saved.items():
                setattr(context, name, value)
