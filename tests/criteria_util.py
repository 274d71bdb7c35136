"""Test helpers of the criteria tests: Coded builders and hypothesis strategies (T, T', C)."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from dpbundle.mechanisms.coding import Coded, ColumnCoding


def int_coding(name: str, edges: list[int], values: list[float] | None = None) -> ColumnCoding:
    """Ordered integer bins [edges[i], edges[i+1]); values default to the bins' midpoints."""
    lo = np.asarray(edges[:-1], float)
    up = np.asarray(edges[1:], float)
    labels = tuple(f"{int(a)}-{int(b) - 1}" if b - a > 1 else f"{int(a)}" for a, b in zip(lo, up))
    vals = (lo + up - 1) / 2 if values is None else np.asarray(values, float)
    return ColumnCoding(name, labels, vals, True, lo, up)


def cat_coding(name: str, labels: list[str], values: list[float]) -> ColumnCoding:
    nan = np.full(len(labels), np.nan)
    return ColumnCoding(name, tuple(labels), np.asarray(values, float), False, nan, nan)


def births_columns(age: str = "coarse") -> tuple[ColumnCoding, ...]:
    """Codings shaped like the births spec's first alternatives (written here independently)."""
    ages = {"coarse": [17, 18, 20, 25, 30, 35, 40, 43, 45, 46],
            "coarse-37": [17, 18, 20, 25, 30, 35, 37, 40, 43, 45, 46]}[age]
    return (
        int_coding("birth_month", list(range(1, 14))),
        int_coding("mother_age", ages),
        int_coding("parity", [1, 2, 4, 7, 11, 12]),
        int_coding("gestation_week", [28, 29, 32, 34, 37, 42, 43]),
        cat_coding("birth_sex", ["M", "F"], [0, 1]),
        int_coding("birth_weight", list(range(1400, 4700, 100))),
    )


BIRTHS_GROUP_BINS = {
    "mother_age": {"edges": [25, 30, 35], "labels": ["<25", "25-29", "30-34", "35+"]},
    "parity": {"edges": [2, 4], "labels": ["1", "2-3", "4+"]},
    "gestation_week": {"edges": [37], "labels": ["<37", "37+"]},
    "birth_sex": {"edges": [1], "labels": ["M", "F"]},
    "birth_weight": {"edges": [2500, 4000], "labels": ["<2500", "2500-3999", "4000+"]},
}

BIRTHS_FAITHFULNESS = {
    "exact": ["birth_month", "parity", "birth_sex"],
    "adjacent": ["mother_age", "gestation_week", "birth_weight"],
    "max_adjacent": 1,
    "exact_if_contains": {"mother_age": [37]},
}


def births_like(n: int, rng: np.random.Generator, age: str = "coarse") -> Coded:
    """Random records over the births-like domain with correlated, skewed columns."""
    cols = births_columns(age)
    dom = [c.size for c in cols]
    codes = np.empty((n, len(cols)), dtype=np.int64)
    for j, k in enumerate(dom):
        p = rng.dirichlet(np.full(k, 0.7))
        codes[:, j] = rng.choice(k, size=n, p=p)
    # correlate weight with gestation
    codes[:, 5] = np.clip(codes[:, 5] + 3 * codes[:, 3] - 8, 0, dom[5] - 1)
    return Coded(codes=codes, columns=cols)


def random_columns(draw, max_d: int = 4, max_size: int = 4) -> tuple[ColumnCoding, ...]:
    d = draw(st.integers(1, max_d))
    cols = []
    for j in range(d):
        k = draw(st.integers(1, max_size))
        widths = draw(st.lists(st.integers(1, 3), min_size=k, max_size=k))
        start = draw(st.integers(-3, 5))
        edges = list(np.cumsum([start] + widths))
        cols.append(int_coding(f"c{j}", [int(e) for e in edges]))
    return tuple(cols)


@st.composite
def neighbours(draw, max_d: int = 4, max_size: int = 4, max_n: int = 25, min_n: int = 1,
               columns=None):
    """(T, T', C): T' = T with one record changed; C independent, same n (may miss values)."""
    cols = columns if columns is not None else random_columns(draw, max_d, max_size)
    dom = [c.size for c in cols]
    n = draw(st.integers(min_n, max_n))
    row = st.tuples(*[st.integers(0, k - 1) for k in dom])
    t = np.array(draw(st.lists(row, min_size=n, max_size=n)), dtype=np.int64).reshape(n, -1)
    # C often concentrated on few values so that some domain cells / groups are empty in C
    if draw(st.booleans()):
        c = np.array(draw(st.lists(row, min_size=n, max_size=n)), dtype=np.int64).reshape(n, -1)
    else:
        base = draw(row)
        c = np.tile(np.array(base, dtype=np.int64), (n, 1))
    i = draw(st.integers(0, n - 1))
    t2 = t.copy()
    t2[i] = np.array(draw(row), dtype=np.int64)
    return (Coded(codes=t, columns=cols), Coded(codes=t2, columns=cols),
            Coded(codes=c, columns=cols))
