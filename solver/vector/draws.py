"""Counter-based random numbers: a uniform draw is a hash of (instance seed, step, walker, slot).

A ``numpy.random.Generator`` is a stream: what one instance draws would depend on what the
instances before it in the block drew. Here every number is a pure function of its coordinates
(splitmix64's finaliser over a combined 64-bit counter, as Philox and ``jax.random`` do with keys
and counters), computed for whole arrays at once in ``uint64`` arithmetic, so an instance draws
the same numbers alone, in a block of 64, or in another worker.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

U64 = npt.NDArray[np.uint64]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_TO_UNIT = 1.0 / float(1 << 53)


def mix(x: U64) -> U64:
    """splitmix64's finaliser: every input bit moves every output bit."""
    with np.errstate(over="ignore"):
        z = x.astype(np.uint64, copy=True)
        z ^= z >> np.uint64(30)
        z *= _MIX1
        z ^= z >> np.uint64(27)
        z *= _MIX2
        z ^= z >> np.uint64(31)
    return z


def key(seeds: npt.ArrayLike, *counters: npt.ArrayLike) -> U64:
    """One 64-bit key per element: the seed hashed, then each counter folded in and hashed."""
    with np.errstate(over="ignore"):
        k = mix(np.asarray(seeds, dtype=np.uint64) + _GOLDEN)
        for counter in counters:
            k = mix(k ^ (np.asarray(counter, dtype=np.int64).astype(np.uint64) * _GOLDEN))
    return k


def uniforms(keys: U64, draws: int) -> npt.NDArray[np.float64]:
    """``(draws, n)`` uniform numbers in [0, 1) for ``n`` keys: draw ``d`` of key ``k`` is
    ``mix(k + d * golden)``'s top 53 bits."""
    with np.errstate(over="ignore"):
        offsets = (np.arange(1, draws + 1, dtype=np.uint64) * _GOLDEN).reshape(-1, 1)
        bits = mix(keys.reshape(1, -1) + offsets)
    return np.asarray((bits >> np.uint64(11)).astype(np.float64) * _TO_UNIT, dtype=np.float64)
