"""Criterion ``quantile``: the largest error of a DP quantile (e.g. the median) of T, overall and
within groups, against the same quantile of C, in the target's released numbers.

Spec: ``target`` (a column with numbers: binned, or categorical with ``values``), optional
``quantiles`` (levels in (0, 1), default [0.5]) and ``by`` (groupings as in
``conditional_means``: ``null`` = all records, a column, or a list of columns; default [null]).

Candidates (public): the distinct released numbers c_1 < ... < c_K of the target's codes.
For a group with counts h_k of records at c_k, let a_k = sum_{m<k} h_m (records below c_k) and
b_k = sum_{m>k} h_m (records above). The alpha-quantile score of candidate k is

    u_k = -|(1 - alpha) a_k - alpha b_k|,

largest (0) where an alpha share lies below and a 1 - alpha share above. The quantile of C's
group is the candidate of largest score (the smallest on ties): exact, C is public. The DP
quantile of T's group is chosen by report-noisy-max (``Randomness.exponential``, OpenDP's
``make_noisy_max``) on T's scores.

Score sensitivity 1 (non-monotonic, max over k). Changing one record of T either keeps it in the
group: it leaves one side of c_k (or c_k itself) and joins one; (a_k, b_k) changes by (da, db)
with da, db in {-1, 0, 1} and not both of one sign, so (1 - alpha) da - alpha db lies in
[-1, 1]; or it moves the record out of / into the group: only one of a_k, b_k (or neither)
changes by 1, a change of at most max(alpha, 1 - alpha) <= 1. And ||u| - |u'|| <= |u - u'|.

Exact scores. In floating point, (1 - alpha) a_k - alpha b_k is rounded three times, and two
neighbours' float scores can differ by more than 1 (1.0000000000000018 in the issue's report;
with alpha = 0.1 and counts near a million by up to 5e-10 more; tests/test_sensitivity_exact.py),
which the noise layer's one-ulp slack does not cover. So the score is computed from the
integers: with alpha = m / 2^e exactly (its binary value), u_k = -|2^e a_k - m (a_k + b_k)| / 2^e, and the released float is
floor(u_k / G) G on the grid G = 2^-g, g = 52 - bitlen(n) (n public, the same for neighbours;
|u_k| <= n, so |u_k| / G < 2^52 and the value is an exact float). Flooring keeps the
sensitivity exactly: 1/G is an integer, and if |u - u'| <= 1 then floor(u/G) - floor(u'/G) is an
integer below 1/G + 1, so at most 1/G. For the usual levels (0.5, 0.25, 0.75, ...) 2^e divides
2^g and the scores are the exact (1 - alpha) a_k - alpha b_k, as the float formula gave them.

Composition (bounded neighbours). Groups of one grouping are disjoint: a changed record touches
at most two of them (it leaves one and joins another), the overall group once. So a grouping
costs 2 eps_0 per level (1 eps_0 for ``null``), and the criterion's epsilon is split evenly:

    eps_0 = epsilon / R (the largest float with R eps_0 <= epsilon exactly),
    R = (number of levels) * sum over groupings of (1 if null else 2).

Groups compared: those with at least one record of C (public); a group absent from C is left
out of the metric (other criteria judge missing groups), and T's group is not released.

    dp_value = max over groupings, compared groups and levels of |DP quantile_T - quantile_C|

(post-processing of R-counted DP choices; in [0, c_K - c_1]). ``value`` is the same with T's
exact quantiles. The result row reports mechanism ``exponential_mechanism``, sensitivity 1 (of
the scores), noise_scale = the noisy-max scale at eps_0 (2 R / epsilon, nudged), noise_std =
noise_scale (the noise is exponential), and ``releases`` = R.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from ..exact import even_split
from ..cells import types_of
from .base import _column_name, Criterion, CriterionError, EvalContext, register
from .condmeans import _by_item_ok, by_name, group_ids

if TYPE_CHECKING:  # pragma: no cover
    from dpbundle.mechanisms.coding import Coded
    from dpbundle.mechanisms.noise import Randomness

__all__ = ["Quantile", "quantile_scores", "quantile_releases"]


def quantile_releases(levels: int, by: list) -> int:
    """R = levels * sum over groupings of (1 for null, 2 for a column or joint columns)."""
    return levels * sum(1 if b is None else 2 for b in by)


def quantile_scores(hist: np.ndarray, alpha: float, n: int | None = None) -> np.ndarray:
    """Scores -|(1 - alpha) a_k - alpha b_k| of every candidate, per row of ``hist`` (counts
    per candidate; shape (groups, K) or (K,)), computed exactly from the integers and floored
    to the grid 2^-(52 - bitlen(n)) (module docstring): exact floats whose neighbour distance is
    at most 1 exactly. ``n`` is the public bound on a group's size (the number of records);
    default the total of ``hist`` (the table's n when ``hist`` holds every group of a
    grouping -- pass n explicitly for a single group's row)."""
    h = np.asarray(hist)
    if h.size and not np.all(h == np.rint(h)):
        raise ValueError("quantile_scores: counts must be integers")
    h = np.rint(h).astype(np.int64)
    if h.size and h.min() < 0:
        raise ValueError("quantile_scores: counts must be >= 0")
    n = int(h.sum()) if n is None else int(n)
    g = 52 - max(n, 1).bit_length()
    if g < 0:
        raise ValueError(f"quantile_scores: too many records ({n})")
    m, den = float(alpha).as_integer_ratio()
    e = den.bit_length() - 1                                  # alpha = m / 2^e exactly
    below = np.cumsum(h, axis=-1) - h                         # a_k
    others = h.sum(axis=-1, keepdims=True) - h                # a_k + b_k
    if e + n.bit_length() + 2 <= 62 and m.bit_length() + n.bit_length() + 2 <= 62:
        num = np.abs((below << e) - m * others)               # int64, exact
        if g >= e:
            return -np.ldexp(num.astype(np.float64), -e)      # exact: |num| < 2^(52 - g + e) <= 2^52
    else:
        num = np.abs(below.astype(object) * (1 << e) - m * others.astype(object))
    # floor(u / G) with u = -num / 2^e, G = 2^-g: (-num 2^g) >> e in integers (>> floors)
    num = num.astype(object)
    steps = (-(num << g)) >> e if e > g else -(num << (g - e))
    return np.ldexp(np.asarray(steps, dtype=np.float64), -g)   # |steps| <= 2^52: exact


@register
class Quantile(Criterion):
    """Largest error of DP quantiles (median by default) of a numeric column, overall and by group."""

    type: ClassVar[str] = "quantile"
    mechanism: ClassVar[str] = "exponential_mechanism"
    summary: ClassVar[str] = ("max over groups and levels of |DP quantile of T (report-noisy-max "
                              "over the target's numbers) - quantile of C|, in the target's units")
    parameters: ClassVar[dict[str, str]] = {
        "target": "column whose quantiles are compared (its released numbers)",
        "quantiles": "levels in (0, 1) (default [0.5]: the median)",
        "by": "list of groupings: null = all records, a column, or a list of columns (joint "
              "groups) (default [null])",
    }

    def __init__(self, entry: dict) -> None:
        super().__init__(entry)
        self.target: str = _column_name(entry, "target", self.where)
        q = entry.get("quantiles", [0.5])
        if (not isinstance(q, list) or not q
                or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and 0 < x < 1
                           for x in q)
                or len(set(q)) != len(q)):
            raise CriterionError(f"{self.where}.quantiles: expected distinct levels in (0, 1), "
                                 f"got {q!r}")
        self.levels: list[float] = [float(x) for x in q]
        by = entry.get("by", [None])
        if not isinstance(by, list) or not by or not all(_by_item_ok(b) for b in by):
            raise CriterionError(f"{self.where}.by: expected a list whose items are null, a "
                                 "column name or a non-empty list of column names")
        self.by: list[str | list[str] | None] = [list(b) if isinstance(b, list) else b for b in by]

    @property
    def releases(self) -> int:
        return quantile_releases(len(self.levels), self.by)

    def metric_range(self) -> tuple[float, float]:
        """|difference of two candidates|: [0, c_K - c_1] (the upper end needs the spec's
        numbers; inf here)."""
        return 0.0, math.inf

    # ---- public part

    def candidates(self, coded: "Coded") -> tuple[np.ndarray, np.ndarray]:
        """(sorted distinct numbers c_k, candidate index of every code) of the target."""
        cc = coded.columns[coded.column(self.target)]
        vals = np.asarray(cc.values, dtype=np.float64)
        if not np.all(np.isfinite(vals)):
            raise CriterionError(f"{self.where}.target: column {self.target!r} has no numbers "
                                 "(a categorical column needs `values` to have quantiles)")
        cand = np.unique(vals)
        return cand, np.searchsorted(cand, vals)

    def _hist(self, coded: "Coded", item, ctx: EvalContext, of_code: np.ndarray, K: int
              ) -> tuple[np.ndarray, tuple[str, ...]]:
        """Counts per (group, candidate) of ``coded`` under grouping ``item``, and group labels
        (from its record types: the same integers in O(types))."""
        types = types_of(coded)
        t, w = types.table, types.weights
        k = of_code[t.codes[:, t.column(self.target)]]
        if item is None:
            return np.bincount(k, weights=w, minlength=K).astype(np.int64)[None, :], ("all",)
        ids, labels, _ = group_ids(t, item, ctx.spec, ctx.alternatives)
        G = len(labels)
        return np.bincount(ids * K + k, weights=w, minlength=G * K).astype(np.int64).reshape(G, K), labels

    def _plan(self, ctx: EvalContext):
        """Per (grouping, level): (name, alpha, group labels, compared groups, C's quantile
        index per group) -- public, from C and the spec."""
        cand, of_code = self.candidates(ctx.synth)
        K = cand.size
        plan = []
        for item in self.by:
            h_c, labels = self._hist(ctx.synth, item, ctx, of_code, K)
            compared = np.flatnonzero(h_c.sum(axis=1) > 0)
            for alpha in self.levels:
                q_c = np.argmax(quantile_scores(h_c, alpha, ctx.n), axis=1)
                plan.append((item, alpha, labels, compared, q_c))
        return cand, of_code, plan

    def sensitivity(self, ctx: EvalContext) -> tuple[float, dict]:
        """1 (score sensitivity), with R releases at epsilon / R each."""
        cand, _, plan = self._plan(ctx)
        synth_q = {f"{by_name(item) if item else 'all'} q{alpha:g}":
                   {labels[g]: float(cand[q_c[g]]) for g in compared}
                   for item, alpha, labels, compared, q_c in plan}
        return 1.0, {"n": ctx.n, "releases": self.releases,
                     "epsilon_each": even_split(self.epsilon, self.releases), "levels": self.levels,
                     "candidates": cand.tolist(), "synthetic_quantiles": synth_q,
                     "formula": "score sensitivity 1; R = levels x sum(1 per null, 2 per "
                                "grouping) releases of report-noisy-max at epsilon / R"}

    # ---- private part

    def value(self, ctx: EvalContext) -> float:
        """f(T, C) with T's exact quantiles."""
        self._check(ctx)
        cand, of_code, plan = self._plan(ctx)
        err = 0.0
        for item, alpha, labels, compared, q_c in plan:
            h_t, _ = self._hist(ctx.real, item, ctx, of_code, cand.size)
            q_t = np.argmax(quantile_scores(h_t, alpha, ctx.n), axis=1)
            if compared.size:
                err = max(err, float(np.abs(cand[q_t[compared]] - cand[q_c[compared]]).max()))
        return err

    def evaluate(self, ctx: EvalContext, rand: "Randomness"):
        from dpbundle.mechanisms.noise import calibrated_exponential_scale

        self._check(ctx)
        sens, inputs = self.sensitivity(ctx)
        cand, of_code, plan = self._plan(ctx)
        eps0 = even_split(self.epsilon, self.releases)  # R x eps0 <= epsilon exactly
        err, dp_q = 0.0, {}
        for item, alpha, labels, compared, q_c in plan:
            h_t, _ = self._hist(ctx.real, item, ctx, of_code, cand.size)
            scores = quantile_scores(h_t, alpha, ctx.n)
            name = f"{by_name(item) if item else 'all'} q{alpha:g}"
            got = {}
            for g in compared:
                k = rand.exponential(scores[g], sensitivity=1.0, epsilon=eps0,
                                     purpose=f"{self.purpose()} {name} {labels[g]}")
                got[labels[g]] = float(cand[k])
                err = max(err, abs(float(cand[k]) - float(cand[q_c[g]])))
            dp_q[name] = got
        scale = calibrated_exponential_scale(1.0, eps0)
        res = self._result(err, sens, dict(inputs, dp_quantiles=dp_q), scale)
        res.noise_std = scale  # exponential noise: std = scale
        return res
