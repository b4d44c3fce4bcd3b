"""ExplainBatch: a stream of instances in, one result per instance out, as each finishes.

Three kinds of thread work one stream, so that reading, solving and sending never wait on each
other:

* the **reader** (a thread of its own) reads the next instance only while fewer than
  ``batch_max_in_flight`` are unanswered, checks it exactly as Explain does
  (:meth:`~counterplan.server.grpc.explain_steps.ExplainSteps.check`), waits for a solve slot (an
  instance queues where a unary call is refused: a batch is a job, not an interactive caller)
  and starts its solve. While it waits, it reads nothing, so gRPC's flow control holds a fast
  client back and the stream keeps at most ``batch_max_in_flight`` requests and results in memory;
* the **solves** run on the server's solver manager, within ``max_concurrent_solves`` and the
  memory budget, and every stream's together within ``max_batch_solves`` of those slots (the rest
  stay for interactive callers, who are refused rather than queued), sharing their model's calls
  with every other running solve of that model (dynamic batching); each finished job is handed to
  the out-queue;
* the **call's own thread** (gRPC's) turns each finished job or refusal into its
  ``ExplainBatchResponse``, tagged with the caller's row id, sends it, and only then frees the
  instance's place in flight.

Errors of one instance (a bad field, an unknown model, a model failing on it, no time left)
are that instance's result; the stream goes on. A message that cannot be answered on its own
ends the call with INVALID_ARGUMENT: a row id that is empty, too long or repeated (its result
could not be matched to it, and going on would hide the client's bug), or one instance more
than ``batch_max_instances``. Nothing after it is read, and the rows read before it are
answered first (their solves run on as they would), so the client knows which rows were
explained. Ending the call (done, failed, cancelled, past its deadline)
terminates every running solve of the stream; each gives its slot back within one model call.
On shutdown the reader stops, instances waiting for a slot get UNAVAILABLE, running solves
answer with their best so far (at shutdown's cut, a solve still inside a model call is not waited
for: its row gets the best scored so far, or UNAVAILABLE when it has none), and the call ends with
UNAVAILABLE unless every instance had been read (the client resends the rows without a result).

A stream is handed the server's :class:`~counterplan.server.grpc.explain_steps.ExplainSteps` and
:class:`~counterplan.server.grpc.admission.Admission`; it knows nothing of the servicer that opens it.
"""

from __future__ import annotations

import queue
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import structlog

from counterplan.planning.errors import echo
from counterplan.server._generated.counterplan.v1 import counterplan_pb2 as pb
from counterplan.server.grpc.admission import Admission, shutting_down
from counterplan.server.grpc.convert import BadRequestError, result_message
from counterplan.server.grpc.decoding import UndecodableRequest
from counterplan.server.grpc.explain_steps import ExplainSteps
from counterplan.server.grpc.refusal import Refusal, bad_request, refused
from counterplan.server.grpc.request_log import log_request
from counterplan.server.grpc.settings import ServerSettings
from counterplan.solver.manager import SolverJob

log = structlog.get_logger("counterplan.server")

MAX_ROW_ID_CHARS = 256
"""A row id is the caller's key, echoed on every result; longer is not a key."""
_POLL_SECONDS = 0.25
"""The reader, waiting for room, looks this often whether the call has ended or the server is stopping."""
_READER_WAIT = 0.5
"""On shutdown, how long the call waits for a reader not heard from to say whether it read the
client's whole stream (a small part of the shutdown's grace)."""


@dataclass(frozen=True)
class _Row:
    """An instance read from the stream."""

    row_id: str
    request_id: str
    model_id: str
    started: float


@dataclass(frozen=True)
class _Solved:
    """A row whose solve has ended (its result, or its error, is read from the job)."""

    row: _Row
    job: SolverJob


@dataclass(frozen=True)
class _Refused:
    """A row refused before its solve started."""

    row: _Row
    refusal: Refusal


@dataclass(frozen=True)
class _ReaderDone:
    """The reader stopped: every instance read (``all_read``), or the call must end (``refusal``)."""

    all_read: bool
    refusal: Refusal | None = None


_WAKE = object()
"""Put on the out-queue to make the call's thread look at the stream's state again."""


class BatchStream:
    """One ExplainBatch call: reads, solves and answers its instances (see the module docstring)."""

    def __init__(
        self,
        steps: ExplainSteps,
        admission: Admission,
        settings: ServerSettings,
        requests: Iterator[pb.ExplainBatchRequest],
        context: grpc.ServicerContext,
    ) -> None:
        self._steps = steps
        self._admission = admission
        self._settings = settings
        self._requests = requests
        self._context = context
        self.stream_id = uuid.uuid4().hex
        self._out: queue.Queue[object] = queue.Queue()
        self._room = threading.Semaphore(self._settings.batch_max_in_flight)
        self._lock = threading.Lock()
        self._unanswered = 0
        """Rows read and counted whose result is not yet sent (guarded by ``_lock``)."""
        self._jobs: dict[str, SolverJob] = {}
        """Running solves by row id (guarded by ``_lock``)."""
        self._seen: set[str] = set()
        self._read = 0
        self._sent = 0
        self._ended = threading.Event()
        """The call is over (done, failed or cancelled): nothing more is read or started."""
        self._closing = threading.Event()
        """The server is shutting down: nothing more is read; what runs answers with its best."""
        self._client_done = False
        """The client's stream has ended: every instance was read (set by the reader only)."""

    # -- the call's thread ----------------------------------------------------------------------
    def run(self) -> Iterator[pb.ExplainBatchResponse]:
        """The call's responses, one per instance; ends the call with a status when it must."""
        started = time.perf_counter()
        outcome = {"status": "OK"}
        if not self._context.add_callback(self._call_ended):
            return  # the call is already over
        if self._admission.closing:
            self._closing.set()
        reader = threading.Thread(target=self._reader, name=f"counterplan-batch-{self.stream_id[:8]}", daemon=True)
        reader.start()
        try:
            yield from self._responses(outcome)
        except GeneratorExit:  # the client went away
            outcome["status"] = "CANCELLED"
            raise
        finally:
            self._stop()
            log.info(
                "stream",
                method="ExplainBatch",
                stream_id=self.stream_id,
                instances=self._read,
                answered=self._sent,
                duration_ms=round((time.perf_counter() - started) * 1e3, 2),
                status=outcome["status"],
            )

    def _responses(self, outcome: dict[str, str]) -> Iterator[pb.ExplainBatchResponse]:
        """Each answer as it comes, until every instance read is answered; ``outcome["status"]``
        says how the call ends (set before the call is ended with it)."""
        all_read = False
        refusal: Refusal | None = None  # the call must end so, once the rows read are answered
        while True:
            with self._lock:
                if (all_read or refusal is not None or self._closing.is_set()) and self._unanswered == 0:
                    break
            item = self._out.get()
            if self._ended.is_set():  # cancelled or past the deadline: no one to answer
                outcome["status"] = "CANCELLED"
                return
            if isinstance(item, _ReaderDone):
                refusal, all_read = item.refusal, item.all_read
            elif isinstance(item, _Solved | _Refused):
                response = self._answer(item)
                yield response
                self._sent += 1
                with self._lock:
                    self._unanswered -= 1
                self._room.release()
        if refusal is not None:
            outcome["status"] = refusal.code.name
            refusal.abort(self._context)
        if not all_read:
            all_read = self._reader_saw_the_end()
        if not all_read:  # shutting down: the instances not read are not explained
            outcome["status"] = "UNAVAILABLE"
            refused(
                grpc.StatusCode.UNAVAILABLE,
                f"the server is shutting down after answering {self._sent} instances; instances it had "
                "not read were not explained: send those rows to another instance",
            ).abort(self._context)

    def _reader_saw_the_end(self) -> bool:
        """Whether the reader, not heard from yet when the server began shutting down, finds the
        client's stream ended within :data:`_READER_WAIT` seconds: it may have been about to read
        the end when the shutdown came (a client that sent its last instance has half-closed its
        stream; the reader, on a busy machine, had not got to it)."""
        deadline = time.monotonic() + _READER_WAIT
        while (left := deadline - time.monotonic()) > 0:
            try:
                item = self._out.get(timeout=left)
            except queue.Empty:
                break
            if isinstance(item, _ReaderDone):
                return item.all_read
        return self._client_done

    def shutdown(self) -> None:
        """The server is stopping: read no more; the running solves answer with their best so far."""
        self._closing.set()
        self._out.put(_WAKE)

    def _answer(self, item: _Solved | _Refused) -> pb.ExplainBatchResponse:
        """One row's response, logged as Explain logs a call."""
        row = item.row
        outcome: dict[str, Any] = {"status": "OK"}
        try:
            if isinstance(item, _Refused):
                outcome["status"] = item.refusal.code.name
                return pb.ExplainBatchResponse(row_id=row.row_id, error=item.refusal.message())
            try:
                result = self._steps.result_of(item.job, row.request_id)
            except Refusal as refusal:
                outcome["status"] = refusal.code.name
                return pb.ExplainBatchResponse(row_id=row.row_id, error=refusal.message())
            outcome["score"], outcome["stopped_early"] = result.score, result.stopped_early
            return pb.ExplainBatchResponse(
                row_id=row.row_id, response=result_message(result, row.request_id, row.model_id)
            )
        finally:
            log_request(
                "ExplainBatch",
                row.request_id,
                row.model_id,
                row.started,
                outcome,
                row_id=row.row_id,
                stream_id=self.stream_id,
            )

    def _call_ended(self) -> None:
        """gRPC's callback when the call is over, for whatever reason: stop every solve now."""
        self._ended.set()
        self._stop()
        self._out.put(_WAKE)

    def _stop(self) -> None:
        """Read and start nothing more; terminate the running solves (each frees its slot when it returns)."""
        self._ended.set()
        with self._lock:
            jobs = list(self._jobs.values())
        for job in jobs:
            job.terminate_early()

    # -- the reader -----------------------------------------------------------------------------
    def _reader(self) -> None:
        try:
            done = self._read_all()
        except grpc.RpcError:  # the call was cancelled while reading: _call_ended stops the rest
            done = _ReaderDone(all_read=False)
        except UndecodableRequest as error:  # the instances read before it are still answered
            done = _ReaderDone(all_read=False, refusal=error.refusal())
        except Exception:
            log.exception("internal error", stream_id=self.stream_id)
            message = f"internal error (stream {self.stream_id}); see the server log"
            done = _ReaderDone(all_read=False, refusal=refused(grpc.StatusCode.INTERNAL, message))
        self._out.put(done)

    def _read_all(self) -> _ReaderDone:
        """Read, check and start instances until the client is done or the call must end."""
        limit = self._settings.batch_max_instances
        for message in self._messages():
            self._read += 1
            if self._read > limit:
                return _ReaderDone(
                    all_read=False,
                    refusal=bad_request(
                        BadRequestError(
                            [
                                (
                                    "row_id",
                                    f"a stream takes at most {limit:,} instances (batch_max_instances); "
                                    f"instance {self._read:,} ({echo(message.row_id)}) is one too many: "
                                    "split the batch over several calls",
                                )
                            ]
                        )
                    ),
                )
            problem = self._row_id_problem(message.row_id)
            if problem is not None:
                violation = ("row_id", f"instance {self._read:,}: {problem}")
                return _ReaderDone(all_read=False, refusal=bad_request(BadRequestError([violation])))
            self._seen.add(message.row_id)
            with self._lock:  # counted only while the call's thread still waits for answers
                if self._ended.is_set() or self._closing.is_set():
                    return _ReaderDone(all_read=False)
                self._unanswered += 1
            self._start_row(message)
        # every instance was read once the client's stream ended, whatever came after: a shutdown
        # between the end of the stream and here ended an answered stream as UNAVAILABLE
        return _ReaderDone(all_read=self._client_done)

    def _messages(self) -> Iterator[pb.ExplainBatchRequest]:
        """The client's messages, each read only once a place in flight is free."""
        iterator = iter(self._requests)
        while True:
            while not self._room.acquire(timeout=_POLL_SECONDS):
                if self._ended.is_set() or self._closing.is_set():
                    return
            if self._ended.is_set() or self._closing.is_set():
                return
            message = next(iterator, None)
            if message is None:
                self._client_done = True
                return
            yield message

    def _row_id_problem(self, row_id: str) -> str | None:
        if not row_id:
            return "required: each instance needs the caller's row id, which tags its result"
        if len(row_id) > MAX_ROW_ID_CHARS:
            return f"at most {MAX_ROW_ID_CHARS} characters, given {len(row_id):,}"
        if row_id in self._seen:
            return f"{echo(row_id)} was already sent in this stream: results would not tell the two apart"
        return None

    def _start_row(self, message: pb.ExplainBatchRequest) -> None:
        """Check the instance, wait for a slot and start its solve; puts exactly one outcome."""
        request = message.request
        row = _Row(message.row_id, request.request_id or uuid.uuid4().hex, request.model_id, time.perf_counter())
        admission = self._admission
        try:
            checked = self._steps.check(request)
            ticket = admission.wait_for_slot(checked.estimate, self._give_up)
            try:
                job = self._steps.start(row.request_id, checked.model, checked.request, self._context.time_remaining())
            except BaseException:
                admission.release_slot(ticket)
                raise
        except Refusal as refusal:
            self._out.put(_Refused(row, refusal))
            return
        with self._lock:
            self._jobs[row.row_id] = job
        if self._ended.is_set():  # the call ended while it started
            job.terminate_early()

        keys: list[int] = []
        timers: list[threading.Timer] = []

        def solved(
            _: object = None,
        ) -> None:  # once: as the solve returns (in its thread), at shutdown's cut or by its deadline
            with self._lock:
                if self._jobs.pop(row.row_id, None) is None:
                    return
            for key in keys:
                admission.drop_on_cut(key)
            for timer in timers:
                timer.cancel()
            admission.release_slot(ticket)
            self._out.put(_Solved(row, job))  # at the cut or the deadline, its answer is its best so far

        keys.append(admission.on_cut(solved))
        if job.answer_by is not None:  # the row answers by its deadline, its solve done or not
            timer = threading.Timer(max(job.answer_by - time.monotonic(), 0.0), solved)
            timer.daemon = True
            timers.append(timer)
            timer.start()
        assert job.future is not None
        job.future.add_done_callback(solved)

    def _give_up(self) -> Refusal | None:
        """Why an instance waiting for a solve slot stops waiting, if it must."""
        if self._closing.is_set() or self._admission.closing:
            return shutting_down()
        if self._ended.is_set():
            return refused(grpc.StatusCode.CANCELLED, "the call ended before a solve slot came free")
        return None
