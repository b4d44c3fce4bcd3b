"""What problems of one data set share, kept for a bounded number of settings."""

from __future__ import annotations

import pickle
import threading

from counterplan.planning.shared_builds import SharedBuilds


def test_the_newest_builds_are_kept_and_a_dropped_one_is_built_again() -> None:
    builds: list[int] = []

    def build(key: int) -> int:
        builds.append(key)
        return key * 10

    kept = SharedBuilds(size=3)
    assert [kept.get(k, lambda k=k: build(k)) for k in (1, 2, 3, 1, 4)] == [10, 20, 30, 10, 40]
    assert builds == [1, 2, 3, 4] and len(kept) == 3
    assert kept.get(1, lambda: build(1)) == 10  # the oldest went when 4 came: built again
    assert builds == [1, 2, 3, 4, 1]


def test_threads_share_it_and_a_copy_starts_empty() -> None:
    kept = SharedBuilds(size=4)
    errors: list[BaseException] = []

    def ask(offset: int) -> None:
        try:
            for i in range(2000):
                key = (offset + i) % 9
                assert kept.get(key, lambda key=key: key + 100) == key + 100
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=ask, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and len(kept) <= 4
    copy = pickle.loads(pickle.dumps(kept))
    assert len(copy) == 0 and copy.size == 4
