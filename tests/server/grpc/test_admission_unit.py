"""Admission on its own (:mod:`counterplan.server.grpc.admission`): slots, memory shares, the deadline
rule and shutdown, without a server."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from typing import Any

import grpc
import pytest

from counterplan.server.grpc.admission import MB, Admission, shutting_down
from counterplan.server.grpc.refusal import Refusal, refused
from counterplan.server.grpc.settings import ServerSettings

pytestmark = pytest.mark.unit


def _admission(**settings: Any) -> Admission:
    return Admission(ServerSettings(port=0, **settings))


def test_slots_run_out_and_come_back() -> None:
    admission = _admission(max_concurrent_solves=2)
    first, second = admission.take_slot(MB), admission.take_slot(MB)
    with pytest.raises(Refusal) as info:
        admission.take_slot(MB)
    assert info.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert info.value.message().message.startswith("2 solves are running; retry in ")
    assert not admission.wait_idle(0.01)
    admission.release_slot(first)
    third = admission.take_slot(MB)
    assert len({first, second, third}) == 3  # tickets are never reused
    admission.release_slot(second)
    admission.release_slot(third)
    assert admission.wait_idle(0.01)


def test_a_solve_must_fit_beside_the_running_ones() -> None:
    admission = _admission(max_solve_memory_mb=64, max_concurrent_solves=4)
    ticket = admission.take_slot(40 * MB)
    with pytest.raises(Refusal) as info:
        admission.take_slot(30 * MB)
    assert info.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "the running solves hold about 40 of 64 MB" in info.value.message().message
    admission.release_slot(ticket)
    admission.release_slot(admission.take_slot(30 * MB))


def test_a_waiting_instance_gets_the_slot_that_comes_free_or_gives_up() -> None:
    admission = _admission(max_concurrent_solves=1)
    held = admission.take_slot(MB)
    threading.Timer(0.05, admission.release_slot, args=(held,)).start()
    admission.release_slot(admission.wait_for_slot(MB, lambda: None))
    held = admission.take_slot(MB)
    gone = refused(grpc.StatusCode.CANCELLED, "the call ended")
    with pytest.raises(Refusal) as info:
        admission.wait_for_slot(MB, lambda: gone)
    assert info.value is gone
    admission.release_slot(held)


def test_batch_instances_hold_at_most_their_share_of_the_slots() -> None:
    admission = _admission(max_concurrent_solves=4)  # batches get 2 of the 4
    batch = [admission.wait_for_slot(MB, lambda: None) for _ in range(2)]
    gone = refused(grpc.StatusCode.CANCELLED, "the call ended")
    with pytest.raises(Refusal) as info:  # two slots are free, but not for a batch instance
        admission.wait_for_slot(MB, lambda: gone)
    assert info.value is gone
    interactive = [admission.take_slot(MB) for _ in range(2)]  # the rest stay for interactive calls
    admission.release_slot(interactive[0])
    with pytest.raises(Refusal):  # a free slot, and still the batch's share is full
        admission.wait_for_slot(MB, lambda: gone)
    threading.Timer(0.05, admission.release_slot, args=(batch[0],)).start()
    batch[0] = admission.wait_for_slot(MB, lambda: None)  # a batch slot coming back is the batch's again
    for ticket in [*batch, interactive[1]]:
        admission.release_slot(ticket)
    assert admission.wait_idle(0.01)


def test_the_time_limit_is_the_servers_maximum_capped_by_the_deadline() -> None:
    admission = _admission(max_solve_seconds=30.0)
    assert admission.time_limit(None, "solve") == 30.0
    assert admission.time_limit(100.0, "solve") == 30.0
    assert admission.time_limit(10.0, "solve") == 10.0 * 0.8 - 0.15
    with pytest.raises(Refusal) as info:
        admission.time_limit(0.05, "plan")
    assert info.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
    assert info.value.message().message == "the deadline leaves no time to plan"


def test_shutdown_sets_every_stop_switch_and_admits_nothing_new() -> None:
    admission = _admission()
    running = admission.stop_switch()
    ended = admission.stop_switch()
    admission.drop_stop_switch(ended)
    assert admission.stop_switches == 1 and not admission.closing
    admission.begin_shutdown()
    assert admission.closing and running.is_set() and not ended.is_set()
    assert admission.stop_switch().is_set()  # one asked for during shutdown is already set
    refusal = shutting_down()
    assert refusal.code == grpc.StatusCode.UNAVAILABLE
    assert refusal.message().message == "the server is shutting down; retry on another instance"


def test_a_call_answers_by_most_of_its_deadline_and_a_call_without_one_waits() -> None:
    admission = _admission()
    before = time.monotonic()
    answer_by = admission.answer_by(2.0)
    assert answer_by is not None and before + 1.6 <= answer_by <= time.monotonic() + 1.7  # 90 % less 0.1 s
    assert admission.answer_by(None) is None
    assert admission.answer_by(8.7e18) is None  # what gRPC says of a call without a deadline
    future: Future[int] = Future()
    started = time.monotonic()
    assert not admission.wait_done(future, time.monotonic() + 0.2)  # not done by then: the caller answers
    assert time.monotonic() - started >= 0.19
    future.set_result(1)
    assert admission.wait_done(future, time.monotonic() + 1e12)  # a far time is no wait error
