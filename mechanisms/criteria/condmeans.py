"""Criterion ``conditional_means``: the largest error of a (resized) conditional mean.

Spec: ``target`` (column), ``by`` (list of groupings: ``null`` = the overall mean, a column
name, or a list of column names = their joint groups, e.g. ``[sex, age]``), ``bounds: [L, U]``
(public), optional ``margin_share`` (default 0.01, the k-way threshold) and ``margin_plus``
(default 1). A 0/1 target makes each mean a share.

Numbers: y = clip(values[target code], L, U) (the released numbers, never code indices).
Groups of a group-by column g: its codes' numbers (``ColumnCoding.values``) are cut with the
spec's ``group_bins[g].edges`` (``np.searchsorted(edges, v, side="right")``, labels from
``group_bins[g].labels``), or with ``group_bins[g].per_alternative[ALT]`` for the configuration's
alternative ALT of g; a column without group bins (or an alternative not listed under
``per_alternative``) groups by code: each category / bin is one group. Joint groups are the cells
of the product of the columns' groups. Groups that no code of the domain falls in (public) are
left out: they hold no record.

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

    f(T, C) = max over groupings and groups g of |resized mean_T,g - mean_C,g|   (in [0, U - L]).

Sensitivity (U - L) / min_g m_g (min also over n for the overall mean). The argument uses only
that each record lies in exactly one group of a grouping, so it holds for joint groups (product
cells) and per-alternative bins alike. Per group, with the keys fixed (coupling): changing row i
of T either (a) keeps i in g -- the kept set is unchanged (keys do not depend on values) and one kept y moves by <= U - L; (b) moves i out of/into g --
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

__all__ = ["ConditionalMeans", "group_ids", "column_groups", "group_bins_of", "by_name"]


def group_bins_of(spec: dict, column: str, alternative: str | None) -> dict | None:
    """The {edges, labels} that cut ``column`` into groups under ``alternative``: the spec's
    ``group_bins.<column>``, or its ``per_alternative[alternative]`` entry; None = group by the
    column's own codes (each category / bin one group)."""
    gb = (spec.get("group_bins") or {}).get(column)
    if gb is None or "per_alternative" not in gb:
        return gb
    if alternative is None:
        raise CriterionError(f"group_bins.{column}.per_alternative: the configuration's "
                             f"alternative of column {column!r} is not known to the criterion")
    return (gb["per_alternative"] or {}).get(alternative)


def column_groups(coded: "Coded", column: str, spec: dict, alternative: str | None = None
                  ) -> tuple[np.ndarray, tuple[str, ...], np.ndarray]:
    """Group of every record of ``coded`` by one column, the groups' labels, and which groups
    some code of the column's domain falls in (public). With group bins, a code with number v
    (``ColumnCoding.values``) is in group #{edges <= v}; else each code is its own group."""
    j = coded.column(column)
    cc = coded.columns[j]
    gb = group_bins_of(spec, column, alternative)
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


def by_name(item: str | list[str]) -> str:
    """Display name of a ``by`` item: the column, or the joint columns joined by ' x '."""
    return item if isinstance(item, str) else " x ".join(item)


def group_ids(coded: "Coded", by: str | list[str], spec: dict,
              alternatives: dict | None = None
              ) -> tuple[np.ndarray, tuple[str, ...], np.ndarray]:
    """Group of every record by a ``by`` item (a column, or a list of columns = joint groups:
    the mixed-radix index of the columns' groups, first column most significant), the groups'
    labels ("a, b" for joint groups) and which groups are reachable (the outer product of the
    columns' reachable groups; public)."""
    from .base import alternative_of

    cols = [by] if isinstance(by, str) else list(by)
    ids = np.zeros(coded.n, dtype=np.int64)
    labels: list[str] = [""]
    reach = np.ones(1, dtype=bool)
    for c in cols:
        gi, lab, r = column_groups(coded, c, spec, alternative_of(spec, c, alternatives))
        ids = ids * len(lab) + gi
        labels = [f"{a}, {b}" if a else b for a in labels for b in lab]
        reach = np.outer(reach, r).ravel()
    return ids, tuple(labels), reach


def _by_item_ok(b) -> bool:
    if b is None or isinstance(b, str):
        return True
    return isinstance(b, list) and bool(b) and all(isinstance(x, str) for x in b)


@register
class ConditionalMeans(Criterion):
    """Largest error of the target's mean, overall and within coarse groups (resized)."""

    type: ClassVar[str] = "conditional_means"
    summary: ClassVar[str] = ("max over groups of |resized mean_T - mean_C| of a clipped target; "
                              "sensitivity (U - L) / min group size after resize")
    parameters: ClassVar[dict[str, str]] = {
        "target": "column whose mean is compared",
        "by": "list of groupings: null = overall mean, a column, or a list of columns (joint "
              "groups)",
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
        if not isinstance(by, list) or not by or not all(_by_item_ok(b) for b in by):
            raise CriterionError(f"{self.where}.by: expected a list whose items are null, a "
                                 "column name or a non-empty list of column names")
        self.by: list[str | list[str] | None] = [list(b) if isinstance(b, list) else b for b in by]
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

    def metric_range(self) -> tuple[float, float]:
        """|resized mean_T - mean_C| of values clipped to [L, U]: [0, U - L]."""
        return 0.0, self.U - self.L

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
            ids_c, labels, reachable = group_ids(ctx.synth, col, ctx.spec, ctx.alternatives)
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
            sizes[by_name(col)] = {lab: int(v) for lab, v, ok in zip(labels, s, reach) if ok}
            g = int(np.argmin(np.where(reach, m, np.iinfo(np.int64).max)))
            if best is None or m[g] < best:
                best, at = int(m[g]), f"{by_name(col)}={labels[g]}"
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
            ids_t, _, _ = group_ids(ctx.real, col, ctx.spec, ctx.alternatives)
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
