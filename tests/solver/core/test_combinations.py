"""The combinations of single-feature moves (solver.core.combinations): the ranked growth, the
hopeless states dropped and the last size's bound find exactly the cheapest combinations that
reach, as listing every subset does."""

from __future__ import annotations

from collections.abc import Callable
from itertools import combinations as subsets

import numpy as np
import pytest

from counterplan.solver.core import combinations as module
from counterplan.solver.core.combinations import (
    beam_pairs,
    cheap_ends,
    combinations,
    first_reaching,
    range_max,
    sparse_max,
)

pytestmark = pytest.mark.unit


def _entries(rng: np.random.Generator, count: int) -> tuple[np.ndarray, ...]:
    """Entries of ``count`` instances, grouped by instance and feature (2-5 a feature)."""
    inst, feature = [], []
    for i in range(count):
        for f in range(int(rng.integers(3, 8))):
            k = int(rng.integers(2, 6))
            inst += [i] * k
            feature += [f] * k
    n = len(inst)
    return np.array(inst), np.array(feature), rng.uniform(0.1, 3.0, n), rng.uniform(0.05, 1.0, n)


def _listed(inst, feature, cost, gain, i, *, deficit, best, slack, max_rows, max_features=4):  # type: ignore[no-untyped-def]
    """Instance ``i``'s cheapest ``max_rows`` combinations, by listing every subset."""
    mine = np.flatnonzero(inst == i).tolist()
    found = []
    for size in range(2, max_features + 1):
        for chosen in subsets(mine, size):
            if len({int(feature[c]) for c in chosen}) < size:
                continue
            c, g = sum(cost[list(chosen)]), sum(gain[list(chosen)])
            if c < best * (1.0 - 1e-9) and g >= slack * deficit:
                found.append((c, frozenset(chosen)))
    found.sort(key=lambda x: x[0])
    return [s for _, s in found[:max_rows]]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("max_rows", [3, 40, 10_000])
@pytest.mark.parametrize("bounded", [False, True], ids=["listed", "bounded"])
def test_the_cheapest_combinations_that_reach_are_those_a_full_listing_finds(
    seed: int, max_rows: int, bounded: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Also with ``PAIR_LOT`` 1, so the last size lists only the pairs under its bound; the
    larger deficits leave only combinations of four to reach."""
    if bounded:
        monkeypatch.setattr(module, "PAIR_LOT", 1)
    rng = np.random.default_rng(seed)
    inst, feature, cost, gain = _entries(rng, 4)
    deficit = rng.uniform(0.5, 3.0, 4) * np.array([1.0, 1.0, 2.5, 3.0])
    best = rng.uniform(2.0, 7.0, 4) * np.array([1.0, 1.0, 1.5, 2.0])
    got_inst, chosen, gained = combinations(
        inst, feature, cost, gain, deficit=deficit, best=best, max_features=4, slack=0.5,
        max_rows=max_rows, max_states=10**9,
    )  # fmt: skip
    for i in range(4):
        theirs = _listed(inst, feature, cost, gain, i, deficit=deficit[i], best=best[i], slack=0.5, max_rows=max_rows)
        ours = [frozenset(int(c) for c in row if c >= 0) for row in chosen[got_inst == i]]
        assert ours == theirs  # the same sets, cheapest first
        assert np.allclose(gained[got_inst == i], [gain[list(s)].sum() for s in ours])
    assert any(len(_listed(inst, feature, cost, gain, i, deficit=deficit[i], best=best[i], slack=0.5,
                           max_rows=10**9)) > max_rows for i in range(4)) or max_rows == 10_000  # fmt: skip


def test_the_range_searches_agree_with_plain_scans() -> None:
    rng = np.random.default_rng(3)
    values = rng.normal(size=200)
    table = sparse_max(values)
    low = rng.integers(0, 200, 500)
    high = np.minimum(low + rng.integers(0, 80, 500), 200)
    most = range_max(table, low, high)
    need = rng.normal(size=500)
    first = first_reaching(table, low, high, need)
    costs = np.sort(rng.uniform(0, 5, 200))
    costs[195:] = np.inf  # a cost of infinity sorts last and is never cheap enough
    base, limit = rng.uniform(0, 2, 500), rng.uniform(0, 6, 500)
    limit[::50] = np.inf  # ...except below an infinite limit
    ends = cheap_ends(costs, low, high, base, limit)
    for q in range(500):
        part = values[low[q] : high[q]]
        assert most[q] == (part.max() if part.size else -np.inf)
        hits = np.flatnonzero(part >= need[q])
        assert first[q] == (low[q] + hits[0] if hits.size else high[q])
        dear = np.flatnonzero(base[q] + costs[low[q] : high[q]] >= limit[q])
        assert ends[q] == (low[q] + dear[0] if dear.size else high[q])


@pytest.mark.parametrize("seed", range(4))
def test_the_bounded_listings_choose_as_the_full_ones(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past ``PAIR_LOT`` pairs the last size lists only pairs under a bound, and the beam weighs
    an instance at a time: the same combinations and pairs, in the same order, as listing all."""
    rng = np.random.default_rng(10 + seed)
    inst, feature, cost, gain = _entries(rng, 5)
    deficit, best = rng.uniform(0.5, 3.0, 5), rng.uniform(2.0, 7.0, 5)

    def both() -> tuple[np.ndarray, ...]:
        got = combinations(
            inst, feature, cost, gain, deficit=deficit, best=best, max_features=4, slack=0.5, max_rows=7,
            max_states=50,
        )  # fmt: skip
        return (*got, *beam_pairs(inst, feature, cost, gain, best=best, width=2, max_rows=9))

    listed = both()
    monkeypatch.setattr(module, "PAIR_LOT", 1)
    bounded = both()
    assert listed[0].size > 0 and listed[3].size > 0  # the case is not empty
    for ours, theirs in zip(bounded, listed, strict=True):
        np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("seed", range(4))
def test_the_beam_pairs_are_the_largest_gains_of_every_pair(seed: int) -> None:
    rng = np.random.default_rng(20 + seed)
    inst, feature, cost, gain = _entries(rng, 3)
    gain = np.round(gain, 1)  # ties, broken by the first row, then the second
    best = rng.uniform(2.0, 7.0, 3)
    a, b = beam_pairs(inst, feature, cost, gain, best=best, width=2, max_rows=6)
    for i in range(3):
        mine = np.flatnonzero(inst == i)
        top = {int(f): max(gain[mine][feature[mine] == f]) for f in np.unique(feature[mine])}
        leaders = sorted(top, key=lambda f: (-top[f], f))[:2]
        pairs = [
            (-(gain[x] + gain[y]), x, y)
            for x in mine
            if feature[x] in leaders and top[int(feature[x])] > 0
            for y in mine
            if (feature[x] < feature[y] or (feature[x] > feature[y] and feature[y] not in leaders))
            and cost[x] + cost[y] < best[i] * (1 - 1e-9)
        ]
        theirs = [(x, y) for _, x, y in sorted(pairs)[:6]]
        assert list(zip(a[inst[a] == i].tolist(), b[inst[a] == i].tolist(), strict=True)) == theirs


def test_a_block_s_combinations_are_each_instance_s_own_taken_a_lot_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The instances are taken a lot at a time (each alone here, all at once below): the same
    combinations, in the same order."""
    rng = np.random.default_rng(7)
    inst, feature, cost, gain = _entries(rng, 12)
    deficit, best = rng.uniform(0.5, 3.0, 12), rng.uniform(2.0, 7.0, 12)

    def listed() -> tuple[np.ndarray, ...]:
        return combinations(
            inst, feature, cost, gain, deficit=deficit, best=best, max_features=4, slack=0.5, max_rows=7,
            max_states=50,
        )  # fmt: skip

    monkeypatch.setattr(module, "COMBINATION_LOT", 10**9)
    whole = listed()
    monkeypatch.setattr(module, "COMBINATION_LOT", 1)
    alone = listed()
    assert np.unique(whole[0]).size > 6  # the case is not empty
    for ours, theirs in zip(alone, whole, strict=True):
        np.testing.assert_array_equal(ours, theirs)


def test_a_stop_check_is_asked_between_lots_and_keeps_what_was_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """A deadline's stop check: asked before each lot of instances (and each size), the
    combinations and beam pairs found come back, the instances not reached have none (a block's
    took 13-18 s with no check asked: 64 rows of a 100-tree forest on 60 features)."""
    rng = np.random.default_rng(8)
    inst, feature, cost, gain = _entries(rng, 12)
    deficit, best = rng.uniform(0.5, 3.0, 12), rng.uniform(2.0, 7.0, 12)
    monkeypatch.setattr(module, "COMBINATION_LOT", 1)
    monkeypatch.setattr(module, "PAIR_LOT", 1)  # the beam's lots: an instance each
    asked: list[int] = []

    def after(k: int) -> Callable[[], bool]:
        asked.clear()

        def should_stop() -> bool:
            asked.append(1)
            return len(asked) > k

        return should_stop

    def found(stop: Callable[[], bool] | None) -> tuple[np.ndarray, ...]:
        return combinations(
            inst, feature, cost, gain, deficit=deficit, best=best, max_features=4, slack=0.5, max_rows=7,
            max_states=50, should_stop=stop,
        )  # fmt: skip

    whole = found(None)
    cut = found(after(6))
    assert len(asked) == 7  # stopped as soon as it said so
    reached, every = np.unique(cut[0]), np.unique(whole[0])
    assert 0 < reached.size < every.size and (reached == every[: reached.size]).all()
    done = np.isin(whole[0], reached[:-1])  # the instances before the last one reached are whole
    for ours, theirs in zip(cut, whole, strict=True):
        np.testing.assert_array_equal(ours[np.isin(cut[0], reached[:-1])], theirs[done])
    assert found(after(0))[0].size == 0  # stopped before the first lot: none

    a, b = beam_pairs(inst, feature, cost, gain, best=best, width=2, max_rows=9)
    cut_a, cut_b = beam_pairs(inst, feature, cost, gain, best=best, width=2, max_rows=9, should_stop=after(3))
    assert len(asked) == 4 and 0 < np.unique(inst[cut_a]).size < np.unique(inst[a]).size
    pairs = set(zip(a.tolist(), b.tolist(), strict=True))
    assert set(zip(cut_a.tolist(), cut_b.tolist(), strict=True)) < pairs  # some instances' pairs, as they were
