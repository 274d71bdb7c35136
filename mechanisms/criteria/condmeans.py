"""Criterion ``conditional_means``: the largest error of a (resized) conditional mean.

Spec: ``target`` (column), ``by`` (list of group-by columns; ``null`` = the overall mean),
``bounds: [L, U]`` (public), optional ``margin_share`` (default 0.01, the k-way threshold) and
``margin_plus`` (default 1).

Numbers: y = clip(values[target code], L, U). Groups of a group-by column g: its code values
are cut with the spec's ``group_bins[g].edges`` (``np.searchsorted(edges, v, side="right")``,
labels from ``group_bins[g].labels``); a column without ``group_bins`` groups by code. Groups
that no code of the column's domain falls in (public) are left out: they hold no record.

Resize (public sizes). For group g with s_g records in C: m_g = max(s_g - margin, 1) with
margin = ceil(margin_share * n) + margin_plus (public: n and C only). The real group (r_g
records) is resized to m_g records: if r_g > m_g keep the m_g rows with the smallest random
priority keys u_i (one uniform key per *row position* i of T, drawn from ``rand.rng``,
independent of the data), if r_g < m_g pad with m_g - r_g copies of (L + U)/2. The resized mean
is (sum of kept y + pad * (L+U)/2) / m_g. The C side is the plain mean of C's group; a group with
no C record (s_g = 0, m_g = 1) takes the pad value (L + U)/2 as its C mean (C's group resized to
one record by the same rule), so its error is at most (U - L)/2 and it counts with m_g = 1 in
the sensitivity (a candidate missing a group gets sensitivity U - L: huge noise, an honest fail).
The ``null`` group is the overall mean, size n, not resized.

    f(T, C) = max over groupings and groups g of |resized mean_T,g - mean_C,g|.

Sensitivity (U - L) / min_g m_g (min also over n for the overall mean). Per group, with the keys
fixed (coupling): changing row i of T either (a) keeps i in g -- the kept set is unchanged
(keys do not depend on values) and one kept y moves by <= U - L; (b) moves i out of/into g --
the kept set loses/gains i and, if r_g > m_g, the next key takes/loses its place: the kept sum
changes by one element replaced by another or by a pad (<= U - L); so each resized sum changes by
<= U - L and each mean by <= (U - L)/m_g, hence the max by <= (U - L)/min m_g. As the keys are
drawn independently of T, the mechanism is a mixture over keys of eps-DP mechanisms, hence eps-DP
(Hod & Canetti, Prop. 7-8).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from .base import Criterion, CriterionError, EvalContext, _number, register

if TYPE_CHECKING:  # pragma: no cover
    from dpbundle.mechanisms.coding import Coded
    from dpbundle.mechanisms.noise import Randomness

__all__ = ["ConditionalMeans", "group_ids"]


def group_ids(coded: "Coded", column: str, spec: dict
              ) -> tuple[np.ndarray, tuple[str, ...], np.ndarray]:
    """Coarse group of every record of ``coded`` by ``column`` (spec ``group_bins``), the
    groups' labels, and which groups some code of the column's domain falls in (public)."""
    j = coded.column(column)
    cc = coded.columns[j]
    gb = (spec.get("group_bins") or {}).get(column)
    if gb is None:
        return coded.codes[:, j], tuple(cc.labels), np.ones(cc.size, dtype=bool)
    edges = np.asarray(gb["edges"], dtype=np.float64)
    of_code = np.searchsorted(edges, cc.values, side="right")
    labels = gb.get("labels")
    if labels is None:
        labels = [f"group {g}" for g in range(len(edges) + 1)]
    if len(labels) != len(edges) + 1:
        raise CriterionError(f"group_bins.{column}: {len(edges)} edges need {len(edges) + 1} "
                             f"labels, got {len(labels)}")
    reachable = np.bincount(of_code, minlength=len(edges) + 1) > 0
    return of_code[coded.codes[:, j]], tuple(str(x) for x in labels), reachable


@register
class ConditionalMeans(Criterion):
    """Largest error of the target's mean, overall and within coarse groups (resized)."""

    type: ClassVar[str] = "conditional_means"
    summary: ClassVar[str] = ("max over groups of |resized mean_T - mean_C| of a clipped target; "
                              "sensitivity (U - L) / min group size after resize")
    parameters: ClassVar[dict[str, str]] = {
        "target": "column whose mean is compared",
        "by": "list of group-by columns (null = overall mean)",
        "bounds": "[L, U] public bounds of the target (values are clipped to them)",
        "margin_share": "resize margin share of n (default 0.01, the k-way threshold)",
        "margin_plus": "added to ceil(margin_share * n) (default 1)",
    }

    def __init__(self, entry: dict) -> None:
        super().__init__(entry)
        t = entry.get("target")
        if not isinstance(t, str):
            raise CriterionError(f"{self.where}.target: expected a column name, got {t!r}")
        self.target: str = t
        by = entry.get("by", [None])
        if not isinstance(by, list) or not by or not all(b is None or isinstance(b, str)
                                                          for b in by):
            raise CriterionError(f"{self.where}.by: expected a list of column names or null")
        self.by: list[str | None] = list(by)
        b = entry.get("bounds")
        if (not isinstance(b, (list, tuple)) or len(b) != 2
                or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in b)
                or not b[0] < b[1]):
            raise CriterionError(f"{self.where}.bounds: expected [L, U] with L < U, got {b!r}")
        self.L, self.U = float(b[0]), float(b[1])
        self.margin_share = _number(entry, "margin_share", self.where, default=0.01)
        self.margin_plus = int(_number(entry, "margin_plus", self.where, default=1))
        if self.margin_share < 0 or self.margin_plus < 0:
            raise CriterionError(f"{self.where}: margin_share and margin_plus must be >= 0")

    # ---- public part

    def margin(self, n: int) -> int:
        return math.ceil(self.margin_share * n) + self.margin_plus

    def _groups(self, ctx: EvalContext):
        """Per grouping: (column, labels, ids_C, s_g, m_g, reachable) -- all public."""
        out = []
        n = ctx.n
        margin = self.margin(n)
        for col in self.by:
            if col is None:
                continue
            ids_c, labels, reachable = group_ids(ctx.synth, col, ctx.spec)
            s = np.bincount(ids_c, minlength=len(labels))
            # groups no code of the domain falls in can hold no record of T or C: they are
            # left out of the metric and of min m_g (m_g set to n, never used)
            m = np.where(reachable, np.maximum(s - margin, 1), n)
            out.append((col, labels, ids_c, s, m, reachable))
        return out

    def sensitivity(self, ctx: EvalContext) -> tuple[float, dict]:
        """(U - L) / min m_g from C's group sizes (and n for the overall mean)."""
        n = ctx.n
        best, at = (n, "overall") if None in self.by else (None, None)
        sizes = {}
        for col, labels, _, s, m, reach in self._groups(ctx):
            sizes[col] = {lab: int(v) for lab, v, ok in zip(labels, s, reach) if ok}
            g = int(np.argmin(np.where(reach, m, np.iinfo(np.int64).max)))
            if best is None or m[g] < best:
                best, at = int(m[g]), f"{col}={labels[g]}"
        return (self.U - self.L) / best, {
            "n": n, "bounds": [self.L, self.U], "margin": self.margin(n),
            "min_group_size": int(best), "min_group": at, "synthetic_group_sizes": sizes,
            "formula": "(U - L) / min_g max(s_g - margin, 1), margin = "
                       f"ceil({self.margin_share} n) + {self.margin_plus}"}

    # ---- private part

    def _y(self, coded: "Coded") -> np.ndarray:
        return np.clip(coded.values_of(self.target), self.L, self.U)

    def value(self, ctx: EvalContext, rng: np.random.Generator | None = None) -> float:
        """f(T, C); with ``rng=None`` each subsampled mean is replaced by its expectation
        (the full group's mean), otherwise the priority keys are ``rng.random(n)``."""
        self._check(ctx)
        n = ctx.n
        y_t, y_c = self._y(ctx.real), self._y(ctx.synth)
        mid = 0.5 * (self.L + self.U)
        keys = rng.random(n) if rng is not None else None
        key_order = np.argsort(keys, kind="stable") if keys is not None else None
        err = 0.0
        if None in self.by:
            err = abs(float(y_t.mean()) - float(y_c.mean()))
        for col, labels, ids_c, s, m, reach in self._groups(ctx):
            G = len(labels)
            ids_t, _, _ = group_ids(ctx.real, col, ctx.spec)
            r = np.bincount(ids_t, minlength=G)
            sum_c = np.bincount(ids_c, weights=y_c, minlength=G)
            mean_c = np.where(s > 0, sum_c / np.maximum(s, 1), mid)
            if keys is None:
                sum_all = np.bincount(ids_t, weights=y_t, minlength=G)
                big = r > m
                kept_sum = np.where(big, sum_all / np.maximum(r, 1) * m, sum_all)
            else:
                # by group, then by key (= np.lexsort((keys, ids_t))): a stable radix sort of
                # the small group ids applied to the key order
                g_perm = ids_t[key_order]
                if G < 2**15:
                    g_perm = g_perm.astype(np.int16)
                order = key_order[np.argsort(g_perm, kind="stable")]
                g_sorted = ids_t[order]
                start = np.concatenate(([0], np.cumsum(r)[:-1]))
                rank = np.arange(n) - start[g_sorted]
                keep = order[rank < m[g_sorted]]
                kept_sum = np.bincount(ids_t[keep], weights=y_t[keep], minlength=G)
            pad = np.maximum(m - r, 0)
            mean_t = (kept_sum + pad * mid) / m
            err = max(err, float(np.abs(mean_t - mean_c)[reach].max()))
        return err

    def evaluate(self, ctx: EvalContext, rand: "Randomness"):
        from dpbundle.mechanisms.noise import calibrated_laplace_scale

        self._check(ctx)
        sens, inputs = self.sensitivity(ctx)
        rng = rand.rng(f"criterion {self.id} resize")
        true = float(self.value(ctx, rng))
        noisy = float(rand.laplace(true, sensitivity=sens, epsilon=self.epsilon,
                                   purpose=self.purpose()))
        return self._result(noisy, sens, inputs, calibrated_laplace_scale(sens, self.epsilon))
