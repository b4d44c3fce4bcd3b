"""Native thread pools: limits per calling thread, and the reference-counted process-wide guard."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest
from threadpoolctl import ThreadpoolController, threadpool_limits

from counterplan.planning.errors import InvalidInputError
from counterplan.planning.threads import (
    MAX_MODEL_THREADS,
    NativeThreadLimit,
    SharedPoolLimit,
    check_threads,
    is_per_thread,
)


class FakePool:
    """A process-wide pool that remembers every size it was given."""

    user_api = "blas"

    def __init__(self, name: str, size: int) -> None:
        self.filepath = name
        self.size = size
        self.history = [size]

    def get_num_threads(self) -> int:
        return self.size

    def set_num_threads(self, num_threads: int) -> None:
        self.size = num_threads
        self.history.append(num_threads)


@pytest.mark.parametrize("bad", [0, -1, MAX_MODEL_THREADS + 1, True, 1.5])
def test_thread_counts_outside_1_to_256_are_refused(bad: Any) -> None:
    with pytest.raises(InvalidInputError, match="model_threads"):
        check_threads(bad)
    with pytest.raises(InvalidInputError):
        NativeThreadLimit(bad)


def test_thread_counts_inside_the_bounds_pass() -> None:
    assert [check_threads(n) for n in (None, 1, MAX_MODEL_THREADS)] == [None, 1, MAX_MODEL_THREADS]


def test_the_first_solve_in_sets_the_shared_limit_and_the_last_one_out_restores_it() -> None:
    guard = SharedPoolLimit()
    blas = FakePool("libblas.so", 8)
    guard.acquire([blas], 2)
    assert blas.size == 2
    guard.acquire([blas], 1)  # a second solve asks for fewer: the smaller limit holds
    assert blas.size == 1 and guard.holders == 2
    guard.release(2)  # the first one ends: the second still runs with its limit
    assert blas.size == 1 and guard.holders == 1
    guard.release(1)
    assert blas.size == 8 and guard.holders == 0
    assert blas.history == [8, 2, 1, 8]


def test_a_finishing_solve_with_the_smaller_limit_hands_over_to_the_larger_one() -> None:
    guard = SharedPoolLimit()
    blas = FakePool("libblas.so", 8)
    guard.acquire([blas], 1)
    guard.acquire([blas], 4)
    assert blas.size == 1
    guard.release(1)
    assert blas.size == 4
    guard.release(4)
    assert blas.size == 8


def test_a_pool_first_seen_by_a_later_solve_is_restored_too() -> None:
    guard = SharedPoolLimit()
    early, late = FakePool("early.so", 6), FakePool("late.so", 5)
    guard.acquire([early], 1)
    guard.acquire([early, late], 1)
    assert (early.size, late.size) == (1, 1)
    guard.release(1)
    assert (early.size, late.size) == (1, 1)
    guard.release(1)
    assert (early.size, late.size) == (6, 5)


def _process_wide_pools() -> list[Any]:
    np.dot(np.ones((4, 4)), np.ones((4, 4)))  # numpy's BLAS is loaded
    return [pool for pool in ThreadpoolController().lib_controllers if not is_per_thread(pool)]


def test_overlapping_solves_in_two_threads_keep_the_real_blas_limit_until_the_last_ends() -> None:
    if not _process_wide_pools():
        pytest.skip("no process-wide BLAS pool is loaded")
    with threadpool_limits(limits=3, user_api="blas"):
        before = [pool.get_num_threads() for pool in _process_wide_pools()]
        if 1 in before:
            pytest.skip("this BLAS cannot be set above 1 thread here: a limit of 1 would not show")
        first_in, second_in, first_may_leave, first_out, second_may_leave = (threading.Event() for _ in range(5))

        def first() -> None:
            with NativeThreadLimit(1):
                first_in.set()
                first_may_leave.wait(30)
            first_out.set()

        def second() -> None:
            first_in.wait(30)
            with NativeThreadLimit(1):
                second_in.set()
                second_may_leave.wait(30)

        threads = [threading.Thread(target=first), threading.Thread(target=second)]
        for thread in threads:
            thread.start()
        try:
            assert second_in.wait(30)
            assert [pool.get_num_threads() for pool in _process_wide_pools()] == [1] * len(before)
            first_may_leave.set()
            assert first_out.wait(30)
            assert [pool.get_num_threads() for pool in _process_wide_pools()] == [1] * len(before)
        finally:
            first_may_leave.set()
            second_may_leave.set()
            for thread in threads:
                thread.join(30)
        assert [pool.get_num_threads() for pool in _process_wide_pools()] == before


def _openmp() -> list[Any]:
    import sklearn.ensemble  # noqa: F401 - loads scikit-learn's OpenMP runtime

    return [pool for pool in ThreadpoolController().lib_controllers if pool.user_api == "openmp"]


def test_openmp_limits_nest_in_one_thread_and_come_back() -> None:
    if not _openmp():
        pytest.skip("no OpenMP runtime is loaded")

    def sizes() -> set[int]:
        return {pool.get_num_threads() for pool in _openmp()}

    with threadpool_limits(limits=4, user_api="openmp"):
        assert sizes() == {4}
        with NativeThreadLimit(2):
            assert sizes() == {2}
            with NativeThreadLimit(1):
                assert sizes() == {1}
            assert sizes() == {2}
            with NativeThreadLimit(None):
                assert sizes() == {2}
        assert sizes() == {4}


def test_a_pool_that_refuses_leaves_no_limit_held_and_the_others_restored() -> None:
    class Refusing(FakePool):
        def set_num_threads(self, num_threads: int) -> None:
            if num_threads != 1:
                raise OSError("no")
            super().set_num_threads(num_threads)

    guard = SharedPoolLimit()
    refusing, fine = Refusing("refusing.so", 6), FakePool("fine.so", 6)
    guard.acquire([refusing, fine], 1)
    assert (refusing.size, fine.size) == (1, 1)
    with pytest.raises(OSError):
        guard.release(1)  # the first pool refuses its old size back...
    assert fine.size == 6 and guard.holders == 0  # ...the next one still gets it
    with pytest.raises(OSError):
        guard.acquire([fine, refusing], 2)  # refuses the limit: the solve holds nothing
    assert guard.holders == 0 and fine.history[-2:] == [2, 6]


def test_a_limit_already_applied_asks_nothing_of_the_pools() -> None:
    """Each solve's start and end asked every process-wide pool its size under the guard's lock;
    a native call lets go of the GIL, so with a batch window's 64 solves starting and ending
    together every such call queued the others behind its wait for the GIL, on their clocks."""

    class Counting(FakePool):
        asked = 0

        def get_num_threads(self) -> int:
            self.asked += 1
            return super().get_num_threads()

    guard = SharedPoolLimit()
    blas = Counting("libblas.so", 8)
    guard.acquire([blas], 1)
    asked = blas.asked
    for _ in range(3):
        guard.acquire([blas], 1)
    for _ in range(3):
        guard.release(1)
    assert blas.asked == asked and blas.size == 1 and guard.holders == 1
    guard.acquire([blas], 2)  # a larger limit changes nothing: the smaller one holds
    guard.release(2)
    assert blas.asked == asked
    guard.release(1)
    assert blas.size == 8 and blas.history == [8, 1, 8]


def test_a_solve_starting_while_another_thread_rescans_the_pools_does_not_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A module imported since the last scan makes the next solve rescan the loaded libraries;
    every other solve starting meanwhile waited for it (a batch window's rows, their clocks
    running). Only the first scan is waited for; the others take the last scan's pools."""
    import sys

    import threadpoolctl

    from counterplan.planning import threads

    first, second = FakePool("first.so", 4), FakePool("second.so", 4)
    scanning, release = threading.Event(), threading.Event()

    class Controller:
        def __init__(self) -> None:
            if loaded._modules >= 0:  # a rescan: held until the test lets it go
                scanning.set()
                release.wait(30)
            self.lib_controllers = [first] if loaded._modules < 0 else [first, second]

    monkeypatch.setattr(threadpoolctl, "ThreadpoolController", Controller)
    loaded = threads._LoadedPools()
    assert loaded.current() == [first]
    monkeypatch.setitem(sys.modules, "counterplan_test_new_module", sys.modules[__name__])
    rescan = threading.Thread(target=loaded.current)
    rescan.start()
    try:
        assert scanning.wait(30)
        seen: list[list[Any]] = []
        other = threading.Thread(target=lambda: seen.append(loaded.current()))
        other.start()
        other.join(30)
        assert seen == [[first]], "a solve waited for another thread's rescan"
    finally:
        release.set()
        rescan.join(30)
    assert loaded.current() == [first, second]
