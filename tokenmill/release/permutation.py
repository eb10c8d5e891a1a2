"""A seeded permutation of 0..n-1 computed per position, in bounded memory: a Feistel network
over the smallest even number of bits that holds n, cycle-walking past the end (a value >= n is
encrypted again until it lands in range: a bijection of the range, since the network is one of
its whole domain). As Grain's `index_shuffle` and Levanter's permutation do; no array of n
indices is ever built, so a release of 10^10 documents is shuffled position by position.
"""

from __future__ import annotations

import numpy as np

ROUNDS = 6
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def mix64(values: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer, element-wise on uint64 (wrapping arithmetic)."""
    z = np.asarray(values, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * _MIX1
        z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


class Permutation:
    """position -> element, a bijection of range(size) chosen by ``seed``; ``position_of`` is
    its inverse."""

    def __init__(self, size: int, seed: int, rounds: int = ROUNDS):
        if size < 1:
            raise ValueError(f"a permutation needs at least one element, not {size}")
        self.size = size
        bits = max(2, (size - 1).bit_length())
        self.half = (bits + 1) // 2
        self.mask = np.uint64((1 << self.half) - 1)
        with np.errstate(over="ignore"):
            base = np.uint64(seed & (2**64 - 1)) * _GOLDEN
            self.keys = mix64(base + np.arange(1, rounds + 1, dtype=np.uint64) * _GOLDEN)

    def _encrypt(self, x: np.ndarray) -> np.ndarray:
        half = np.uint64(self.half)
        left, right = x >> half, x & self.mask
        for key in self.keys:
            left, right = right, left ^ (mix64(right ^ key) & self.mask)
        return (left << half) | right

    def _decrypt(self, x: np.ndarray) -> np.ndarray:
        half = np.uint64(self.half)
        left, right = x >> half, x & self.mask
        for key in self.keys[::-1]:
            left, right = right ^ (mix64(left ^ key) & self.mask), left
        return (left << half) | right

    def __call__(self, positions) -> np.ndarray:
        return self._walk(positions, self._encrypt)

    def position_of(self, elements) -> np.ndarray:
        """The positions holding ``elements``: the network run backwards, walking the cycle
        back past the end."""
        return self._walk(elements, self._decrypt)

    def _walk(self, positions, network) -> np.ndarray:
        positions = np.asarray(positions, dtype=np.uint64)
        if positions.size and int(positions.max()) >= self.size:
            raise IndexError(f"{int(positions.max())} is outside 0..{self.size - 1}")
        values = network(positions)
        outside = np.flatnonzero(values >= np.uint64(self.size))
        while outside.size:  # cycle-walking: each walk ends, as the network is a bijection
            values[outside] = network(values[outside])
            outside = outside[values[outside] >= np.uint64(self.size)]
        return values.astype(np.int64)
