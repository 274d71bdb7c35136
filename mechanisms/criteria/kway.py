"""Criterion ``kway_marginals``: the largest error of any cell of any k-way marginal.

    f(T, C) = max_{S subset of columns, 1 <= |S| <= K} max_{cell x of dom(S)} |p_T(x) - p_C(x)|

with p_D(x) = #{records of D whose columns S equal x} / n, the subsets S taken among the spec's
``columns`` (default: every released column; d = their number) and K = ``max_k`` (default d;
a larger max_k is capped at d). Every
cell of the *full* domain of S is included, also cells that are empty in T, in C, or in both
(known bug 1 of the 2024 code: cells present in only one dataset were skipped).

Sensitivity 1/n: changing one record of T moves it from one cell x to a cell x' of each
marginal, so each p_T(x) changes by at most 1/n, hence each |p_T - p_C| and their maximum
change by at most 1/n (C and n are fixed and public). Restricting to a subset of columns keeps
this: the record still moves between one pair of cells of each marginal. f lies in [0, 1].
``special: exclude`` leaves out the cells where a compared column holds a special value (not
applicable, unknown): a maximum over fewer cells, each still moving by at most 1/n, so the
sensitivity stays 1/n.

The released float is not fl(M/n) (M = the largest count difference, an integer): two such
floats can differ by 1/n plus rounding, more than the noise layer's one-ulp slack covers
(:mod:`~dpbundle.mechanisms.criteria.rounding`). It is ``lipschitz_float(M/n, 1/n, fl(1/n), 1)``,
computed from the integer M exactly: below M/n by at most a relative n 2^-52, and two
neighbours' values differ by less than fl(1/n), exactly.
"""
from __future__ import annotations

from itertools import combinations
from typing import ClassVar

import numpy as np

from fractions import Fraction

from ..cells import types_of
from .base import Criterion, CriterionError, EvalContext, group_keys, register
from .rounding import lipschitz_float

__all__ = ["KWayMarginals", "max_marginal_error"]

_JOINT_LIMIT = 20_000_000  # cells: above this, tabulate each subset directly


def _table(keys: np.ndarray, weights: np.ndarray | None, size: int) -> np.ndarray:
    """int64 count of each cell: np.bincount of the keys (weighted by record-type counts)."""
    return np.bincount(keys, weights=weights, minlength=size).astype(np.int64)


def _cells_max(table: np.ndarray, S: tuple[int, ...], keep: list | None) -> int:
    """max |table| over the cells kept (``keep[j]``: a boolean per code of column j, or None: all)."""
    if keep is not None and any(keep[j] is not None for j in S):
        idx = np.ix_(*[np.flatnonzero(keep[j]) if keep[j] is not None else np.arange(table.shape[a])
                       for a, j in enumerate(S)])
        table = table[idx]
    return int(np.abs(table).max()) if table.size else 0


def max_marginal_error(real: np.ndarray, synth: np.ndarray, domain: tuple[int, ...],
                       max_k: int, real_counts: np.ndarray | None = None,
                       synth_counts: np.ndarray | None = None,
                       keep: list | None = None) -> tuple[float, tuple[int, ...]]:
    """max over subsets S (|S| <= max_k) and cells of |count_T - count_C| (counts, not shares).

    ``real``/``synth`` are rows, or record types with their counts (``real_counts``,
    ``synth_counts``: row i stands for that many records). Returns (max count difference, the
    subset attaining it). If the full joint domain is small the count difference D = N_T - N_C
    is tabulated once on it and every marginal is obtained by summing one axis out of the
    cheapest already computed superset marginal (marginals are linear, so marginal(N_T) -
    marginal(N_C) = marginal(D)); otherwise each subset is tabulated directly with
    ``np.bincount`` on its mixed-radix index. ``keep`` (``special: exclude``): per column a
    boolean per code, the cells compared (None: every cell).
    """
    wr = None if real_counts is None else np.asarray(real_counts, dtype=np.float64)
    ws = None if synth_counts is None else np.asarray(synth_counts, dtype=np.float64)
    d = len(domain)
    subsets = [S for k in range(1, max_k + 1) for S in combinations(range(d), k)]
    best, arg = -1, ()
    total = int(np.prod(np.asarray(domain, dtype=np.float64)))
    rows = max(real.shape[0], synth.shape[0])
    if total <= _JOINT_LIMIT and total <= 64 * rows * max(len(subsets), 1):
        kr, size = group_keys(real, domain)
        ks, _ = group_keys(synth, domain)
        diff = _table(kr, wr, size) - _table(ks, ws, size)
        full = tuple(range(d))
        marg: dict[tuple[int, ...], np.ndarray] = {full: diff.reshape(domain)}
        if d <= max_k:
            best, arg = _cells_max(diff.reshape(domain), full, keep), full
        for k in range(d - 1, 0, -1):
            for S in combinations(range(d), k):
                # cheapest parent: S plus one missing axis, smallest parent table
                parent, axis, cost = None, None, None
                for j in range(d):
                    if j in S:
                        continue
                    P = tuple(sorted(S + (j,)))
                    c = marg[P].size
                    if cost is None or c < cost:
                        parent, axis, cost = P, P.index(j), c
                marg[S] = marg[parent].sum(axis=axis)
                if k <= max_k:
                    m = _cells_max(marg[S], S, keep)
                    if m > best:
                        best, arg = m, S
            for P in [P for P in marg if len(P) == k + 1]:
                del marg[P]  # level k+1 is no longer needed as a parent
        return float(best), arg
    for S in subsets:
        dom = tuple(domain[j] for j in S)
        kr, size = group_keys(real[:, list(S)], dom)
        ks, _ = group_keys(synth[:, list(S)], dom)
        m = _cells_max((_table(kr, wr, size) - _table(ks, ws, size)).reshape(dom), S, keep)
        if m > best:
            best, arg = m, S
    return float(best), arg


@register
class KWayMarginals(Criterion):
    """Largest absolute share error over every cell of every k-way marginal (full domain)."""

    type: ClassVar[str] = "kway_marginals"
    summary: ClassVar[str] = ("max over all k-way marginals (k = 1..max_k) and every cell of the "
                              "full domain of |p_T - p_C|; sensitivity 1/n")
    parameters: ClassVar[dict[str, str]] = {
        "columns": "subset of released columns whose marginals are compared (default: all)",
        "max_k": "largest marginal order k (default: the number of compared columns)",
        "special": "include (default) or exclude: the cells of special values left out"}

    def __init__(self, entry: dict) -> None:
        super().__init__(entry)
        mk = entry.get("max_k")
        if mk is not None and (isinstance(mk, bool) or not isinstance(mk, int) or mk < 1):
            raise CriterionError(f"{self.where}.max_k: expected an integer >= 1, got {mk!r}")
        self.max_k: int | None = mk
        cols = entry.get("columns")
        if cols is not None and (not isinstance(cols, list) or not cols
                                 or not all(isinstance(c, str) for c in cols)
                                 or len(set(cols)) != len(cols)):
            raise CriterionError(f"{self.where}.columns: expected a non-empty list of distinct "
                                 f"column names, got {cols!r}")
        self.columns: list[str] | None = cols
        self.exclude = entry.get("special") == "exclude"

    def metric_range(self) -> tuple[float, float]:
        """A difference of two shares: [0, 1]."""
        return 0.0, 1.0

    def _k(self, d: int) -> int:
        return d if self.max_k is None else min(self.max_k, d)

    def _index(self, ctx: EvalContext) -> list[int]:
        """Column indices of the compared columns (all when ``columns`` is absent)."""
        if self.columns is None:
            return list(range(len(ctx.synth.columns)))
        try:
            return [ctx.synth.column(c) for c in self.columns]
        except KeyError as e:
            raise CriterionError(f"{self.where}.columns: {e.args[0]}") from None

    def value(self, ctx: EvalContext) -> float:
        """f(T, C) as defined in the module docstring."""
        self._check(ctx)
        idx = self._index(ctx)
        dom = tuple(ctx.synth.domain[j] for j in idx)
        tt, tc = types_of(ctx.real), types_of(ctx.synth)  # record types: O(types), not O(n)
        real, synth = tt.table.codes[:, idx], tc.table.codes[:, idx]
        keep = None
        if self.exclude:       # the cells of special values are not compared
            keep = []
            for j in idx:
                col = ctx.synth.columns[j]
                mask = np.ones(col.size, dtype=bool)
                mask[list(getattr(col, "special_codes", ()))] = False
                keep.append(mask if not mask.all() else None)
        m, _ = max_marginal_error(real, synth, dom, self._k(len(dom)), tt.counts, tc.counts, keep=keep)
        n = ctx.n
        return lipschitz_float(Fraction(int(m), n), Fraction(1, n), 1.0 / n, 1)

    def sensitivity(self, ctx: EvalContext) -> tuple[float, dict]:
        """1/n (public n)."""
        n = ctx.n
        idx = self._index(ctx)
        return 1.0 / n, {"n": n, "max_k": self._k(len(idx)),
                         "columns": [ctx.synth.columns[j].name for j in idx],
                         "formula": "1 / n"}
