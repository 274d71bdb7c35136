"""Shared test data for the generators (integer codes over a small public domain)."""
from __future__ import annotations

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
