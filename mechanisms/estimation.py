"""Estimation from noisy marginals (post-processing): consistent 1-ways and 2-ways that use every
measurement, for the marginal generators (``privsyn``'s ``estimator: hierarchical``).

The measurements are noisy count tables: the 1-way table of each column (per-cell noise
variance ``v_j``) and 2-way tables of selected pairs, possibly over *merged codes* (a column of
``k`` values whose codes are grouped ``g`` consecutive codes at a time: code ``c`` -> ``c // g``,
:func:`merge_factor`; per-cell variance ``v_ab``). Everything here reads only the noisy tables,
their public noise variances, the public domain and the public number of records ``n``: no
privacy budget is spent, and for fixed noisy tables the output is deterministic.

The estimate, in three steps (each a least-squares or maximum-entropy projection):

1. **1-ways** (:func:`estimate_oneways`). For column ``j``, every measurement that contains it
   gives an unbiased estimate of its *merged* 1-way (bins of ``g_j`` codes): its own 1-way
   summed over each bin (variance ``|bin| v_j`` per bin) and each pair's table summed over the
   other column (variance ``k'_other v_ab``, ``k'`` the other column's merged size). Their
   inverse-variance weighted mean is the minimum-variance linear unbiased combination. It is
   projected onto ``{x >= 0, sum x = n}`` (Euclidean projection, :func:`project_simplex`), and
   each bin's total is then spread over its codes by projecting the code-level 1-way within the
   bin onto ``{x >= 0, sum x = bin total}`` (the hierarchical least-squares of a 2-level tree,
   then non-negativity with the totals kept).
2. **2-ways** (:func:`estimate_pair`). A pair's noisy (merged) table is made non-negative with
   total ``n`` (:func:`project_simplex`), mixed with a small share of the independence table of
   the estimated 1-ways (so no cell the 1-ways allow is impossible; the share grows with the
   public noise level, :func:`estimate_pair`), then raked by iterative
   proportional fitting to the merged 1-way estimates of step 1: the table closest in
   Kullback-Leibler divergence to the projected measurement whose margins are the 1-ways. All
   pairs therefore agree on every shared column.
3. **Merged codes back to codes** (:func:`expand_pair`): a merged cell's count is split over its
   codes in proportion to the estimated code-level 1-ways (the maximum-entropy split given the
   1-ways). The code-level table then has exactly the step-1 1-ways as its margins.

The result is a set of 1-way and 2-way count tables, all non-negative, each summing to ``n``,
mutually consistent on every shared column: what ``PrivSynModel`` (GUM) samples from, in the
published ``marginals_gum`` format.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

__all__ = [
    "merge_factor",
    "merged_size",
    "merge_codes",
    "merge_axis",
    "project_simplex",
    "estimate_oneways",
    "estimate_pair",
    "expand_pair",
    "rake",
    "PairMeasurement",
    "hierarchical_estimate",
    "INDEPENDENCE_MIX",
    "RAKE_ROUNDS",
]

#: Largest share of the independence table mixed into a projected pair table before raking
#: (step 2); the share used is ``min(INDEPENDENCE_MIX, MIX_PER_NOISE x expected L1 noise / n)``.
INDEPENDENCE_MIX = 0.02

#: See INDEPENDENCE_MIX.
MIX_PER_NOISE = 0.05

#: Rounds of iterative proportional fitting for a pair table (step 2).
RAKE_ROUNDS = 50


def merge_factor(k: int, max_values: int | None) -> int:
    """Codes per merged code for a column of ``k`` values: ``ceil(k / max_values)`` when
    ``k > max_values``, else 1 (None: never merge). Public (domain and hyperparameter only)."""
    k = int(k)
    if max_values is None or k <= int(max_values):
        return 1
    return -(-k // int(max_values))


def merged_size(k: int, g: int) -> int:
    """Number of merged codes of a ``k``-value column merged ``g`` at a time: ``ceil(k / g)``."""
    return -(-int(k) // int(g))


def merge_codes(codes: np.ndarray, g: int) -> np.ndarray:
    """Merged codes ``c // g`` (int64)."""
    c = np.asarray(codes, dtype=np.int64)
    return c if int(g) == 1 else c // int(g)


def merge_axis(table: np.ndarray, axis: int, g: int) -> np.ndarray:
    """Sum a table's codes along ``axis`` into merged codes of ``g`` consecutive codes."""
    t = np.asarray(table, dtype=np.float64)
    if int(g) == 1:
        return t
    k = t.shape[axis]
    edges = np.arange(0, k, int(g))
    return np.add.reduceat(t, edges, axis=axis)


def _bin_sizes(k: int, g: int) -> np.ndarray:
    kc = merged_size(k, g)
    sizes = np.full(kc, float(g))
    sizes[-1] = float(k - g * (kc - 1))
    return sizes


def project_simplex(y: np.ndarray, total: float) -> np.ndarray:
    """Euclidean projection of ``y`` onto ``{x >= 0, sum x = total}`` (``total >= 0``):
    ``x = max(y - tau, 0)`` with the ``tau`` that makes the sum ``total`` (sort-based, exact up
    to rounding). ``total = 0`` gives zeros. Keeps the shape."""
    a = np.asarray(y, dtype=np.float64)
    total = float(total)
    if total <= 0 or a.size == 0:
        return np.zeros(a.shape)
    v = np.sort(a.ravel())[::-1]
    css = np.cumsum(v) - total
    k = np.arange(1, v.size + 1, dtype=np.float64)
    ok = v - css / k > 0
    r = int(np.flatnonzero(ok)[-1]) if ok.any() else 0
    tau = css[r] / (r + 1)
    out = np.maximum(a - tau, 0.0)
    s = out.sum()
    return out * (total / s) if s > 0 else np.full(a.shape, total / a.size)


class PairMeasurement:
    """A noisy 2-way count table over merged codes of columns ``(a, b)`` (merge factors
    ``ga``, ``gb``), with per-cell noise variance ``variance`` (public) and expected absolute
    noise per cell ``mean_abs`` (public; None: the Laplace's, ``sqrt(variance / 2)``; the
    Gaussian's is ``sigma sqrt(2 / pi)``)."""

    def __init__(self, cols: tuple[int, int], table: np.ndarray, factors: tuple[int, int],
                 variance: float, mean_abs: float | None = None) -> None:
        self.cols = (int(cols[0]), int(cols[1]))
        self.table = np.asarray(table, dtype=np.float64)
        self.factors = (int(factors[0]), int(factors[1]))
        self.variance = float(variance)
        self.mean_abs = math.sqrt(self.variance / 2.0) if mean_abs is None else float(mean_abs)


def estimate_oneways(domain: Sequence[int], oneways: dict[int, np.ndarray],
                     variances: dict[int, float], pairs: Sequence[PairMeasurement],
                     factors: Sequence[int], n: float) -> list[np.ndarray]:
    """Step 1: the code-level 1-way count table of every column (non-negative, sum ``n``).

    ``oneways[j]``: the noisy 1-way of column ``j`` (columns with one value may be absent: their
    table is ``[n]``), per-cell variance ``variances[j]``; ``factors[j]``: the merge factor used
    for column ``j`` in every pair measurement ``pairs``."""
    d = len(domain)
    out: list[np.ndarray] = []
    for j in range(d):
        k, g = int(domain[j]), int(factors[j])
        if k < 2 or j not in oneways:
            out.append(np.full(k, float(n) / k))
            continue
        y = np.asarray(oneways[j], dtype=np.float64).reshape(-1)
        sizes = _bin_sizes(k, g)
        num = merge_axis(y, 0, g) / (sizes * variances[j])
        den = 1.0 / (sizes * variances[j])
        for m in pairs:
            if j not in m.cols:
                continue
            ax = m.cols.index(j)
            proj = m.table.sum(axis=1 - ax)
            var = m.table.shape[1 - ax] * m.variance
            num = num + proj / var
            den = den + 1.0 / var
        merged = project_simplex(num / den, n)
        if g == 1:
            out.append(merged)
            continue
        fine = np.empty(k)
        for i, tot in enumerate(merged):
            lo, hi = i * g, min(k, (i + 1) * g)
            fine[lo:hi] = project_simplex(y[lo:hi], tot)
        out.append(fine)
    return out


def rake(table: np.ndarray, rows: np.ndarray, cols: np.ndarray, rounds: int = RAKE_ROUNDS) -> np.ndarray:
    """Iterative proportional fitting of a non-negative 2-D table to row and column totals
    (both summing to the same total); rows/columns of the table that are all zero while their
    target is positive are filled uniformly first."""
    t = np.array(table, dtype=np.float64)
    r = np.asarray(rows, dtype=np.float64)
    c = np.asarray(cols, dtype=np.float64)
    for _ in range(int(rounds)):
        s = t.sum(axis=1)
        t *= np.divide(r, s, out=np.zeros_like(r), where=s > 0)[:, None]
        s = t.sum(axis=0)
        t *= np.divide(c, s, out=np.zeros_like(c), where=s > 0)[None, :]
    return t


def estimate_pair(m: PairMeasurement, merged_a: np.ndarray, merged_b: np.ndarray,
                  n: float, mix: float | None = None) -> np.ndarray:
    """Step 2: the merged 2-way count table of a pair: the measurement projected onto the
    simplex of total ``n``, mixed with ``mix`` of the independence table, raked to the merged
    1-ways ``merged_a``, ``merged_b`` (each summing to ``n``). ``mix`` None: a share that grows
    with the public noise level, ``min(INDEPENDENCE_MIX, MIX_PER_NOISE cells b / n)`` (``b =
    m.mean_abs``, the expected absolute noise per cell: the Laplace scale ``sqrt(variance /
    2)``, or ``sigma sqrt(2 / pi)`` for Gaussian noise; cells x b is the expected L1 of the
    noise), at least 1e-6: every cell the 1-ways allow stays possible, and a nearly exact table
    is not biased toward independence."""
    if mix is None:
        noise = m.table.size * m.mean_abs / max(float(n), 1.0)
        mix = max(min(INDEPENDENCE_MIX, MIX_PER_NOISE * noise), 1e-6)
    ind = np.outer(merged_a, merged_b) / float(n) if n > 0 else np.zeros(m.table.shape)
    base = project_simplex(m.table, n)
    start = (1.0 - mix) * base + mix * ind
    return rake(start, merged_a, merged_b)


def expand_pair(merged: np.ndarray, fine_a: np.ndarray, fine_b: np.ndarray,
                ga: int, gb: int) -> np.ndarray:
    """Step 3: split each merged cell over its codes in proportion to the code-level 1-ways."""
    t = np.asarray(merged, dtype=np.float64)
    for axis, fine, g in ((0, fine_a, ga), (1, fine_b, gb)):
        if int(g) == 1:
            continue
        f = np.asarray(fine, dtype=np.float64)
        tot = merge_axis(f, 0, g)
        idx = np.arange(f.size) // int(g)
        share = np.divide(f, tot[idx], out=np.zeros_like(f), where=tot[idx] > 0)
        # a merged code with no mass in the 1-way: spread evenly (its cells are ~0 after raking)
        empty = tot[idx] <= 0
        share[empty] = 1.0 / _bin_sizes(f.size, g)[idx[empty]]
        t = np.take(t, idx, axis=axis) * (share[:, None] if axis == 0 else share[None, :])
    return t


def hierarchical_estimate(domain: Sequence[int], oneways: dict[int, np.ndarray],
                          variances: dict[int, float], pairs: Sequence[PairMeasurement],
                          factors: Sequence[int], n: float
                          ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Steps 1-3: (code-level 1-way count tables of all columns, code-level 2-way count tables
    of ``pairs`` in order). Deterministic post-processing of the noisy tables."""
    for m in pairs:
        if tuple(factors[c] for c in m.cols) != m.factors:
            raise ValueError(f"pair {m.cols}: merge factors {m.factors} differ from the columns' "
                             f"{tuple(factors[c] for c in m.cols)}")
    ones = estimate_oneways(domain, oneways, variances, pairs, factors, n)
    tables = []
    for m in pairs:
        a, b = m.cols
        ma, mb = merge_axis(ones[a], 0, factors[a]), merge_axis(ones[b], 0, factors[b])
        merged = estimate_pair(m, ma, mb, n)
        tables.append(expand_pair(merged, ones[a], ones[b], factors[a], factors[b]))
    return ones, tables
