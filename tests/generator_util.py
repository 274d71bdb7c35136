"""Shared test data for the generators (integer codes over a small public domain)."""
from __future__ import annotations

import zlib

import numpy as np
from hypothesis import strategies as st


def planted(n: int, seed: int = 7) -> tuple[np.ndarray, tuple[int, ...]]:
    """n records over domain (4, 3, 5, 2) with planted dependencies a -> b, (a, b) -> c, c -> e."""
    g = np.random.default_rng(seed)
    domain = (4, 3, 5, 2)
    a = g.choice(4, n, p=[0.1, 0.2, 0.3, 0.4])
    b = np.where(g.random(n) < 0.8, a % 3, g.integers(0, 3, n))
    c = np.where(g.random(n) < 0.7, (a + b) % 5, g.integers(0, 5, n))
    e = np.where(g.random(n) < 0.85, (c >= 2).astype(int), g.integers(0, 2, n))
    return np.stack([a, b, c, e], axis=1).astype(np.int64), domain


@st.composite
def code_neighbours(draw, min_d: int = 1, max_d: int = 5, max_k: int = 5, max_n: int = 12,
                    every_column: bool = False):
    """(codes, codes', domain): codes' = codes with one record changed (in every column that
    has more than one value when ``every_column``: the worst case of a 1-way sensitivity)."""
    d = draw(st.integers(min_d, max_d))
    domain = tuple(draw(st.lists(st.integers(2 if every_column else 1, max_k), min_size=d, max_size=d)))
    n = draw(st.integers(1, max_n))
    codes = np.array([[draw(st.integers(0, k - 1)) for k in domain] for _ in range(n)],
                     dtype=np.int64).reshape(n, d)
    i = draw(st.integers(0, n - 1))
    other = codes.copy()
    if every_column:
        other[i] = [(v + draw(st.integers(1, k - 1))) % k for v, k in zip(codes[i], domain)]
    else:
        other[i] = [draw(st.integers(0, k - 1)) for k in domain]
    return codes, other, domain


class FixedNoise:
    """A stand-in for Randomness whose outputs depend only on the purpose and the shape of the
    request, never on the true value; it records every call (true value, sensitivity, epsilon).

    Two fits on different data with the same n and domain see the same "DP outputs", so (a) on
    neighbours the candidate sets of every step are the same and the recorded true values can
    be compared against the declared sensitivities, and (b) the models must be identical if
    nothing but the DP outputs and public facts reaches the post-processing."""

    def __init__(self, low: int = -5, high: int = 60) -> None:
        self.calls: list[dict] = []
        self.low, self.high = low, high

    @staticmethod
    def _seed(purpose: str) -> int:
        return zlib.crc32(purpose.encode())

    def laplace(self, true_value, *, sensitivity, epsilon, purpose, integer=False):
        arr = np.asarray(true_value)
        out = np.random.default_rng(self._seed(purpose)).integers(self.low, self.high, size=arr.shape)
        self.calls.append({"kind": "laplace", "purpose": purpose, "true": arr.copy(),
                           "sensitivity": sensitivity, "epsilon": epsilon, "noisy": out})
        return out.astype(np.int64)

    def exponential(self, scores, *, sensitivity, epsilon, purpose):
        arr = np.asarray(scores, dtype=np.float64)
        pick = self._seed(purpose) % arr.size
        self.calls.append({"kind": "exponential", "purpose": purpose, "true": arr.copy(),
                           "sensitivity": sensitivity, "epsilon": epsilon, "noisy": pick})
        return pick

    def rng(self, purpose):
        return np.random.Generator(np.random.PCG64(self._seed(purpose)))
