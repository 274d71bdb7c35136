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

Special values (``special: exclude``; a column's special values, such as not applicable, have no
number). The groups of a special value of a ``by`` column are not compared (a maximum over fewer
groups). A record whose *target* is special lies in no group, so every s_g and r_g counts records
with a number only, and the overall mean, whose size is then a private count, is resized like a
group: s_0 = C's records with a number, m_0 = max(s_0 - margin, 1). The argument below holds as it
stands: it uses only that each record lies in at most one group of a grouping, and a record whose
target changes between special and a number moves out of or into a group (case (b)). The
sensitivity is (U - L) / min m_g over the compared groups, m_0 included.

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

Exact arithmetic. The target's numbers y (clipped to [L, U]) are written as integers Y = y 2^e
on one dyadic grid (:func:`~dpbundle.mechanisms.criteria.rounding.dyadic_units`: exact for the
usual released numbers -- integers, midpoints -- a change below 2^-e inside [L, U] otherwise).
Every kept sum is then an exact integer (int64), each mean an exact rational (the pad
(L + U)/2 exactly), and f(T, C) the exact maximum of rationals; a changed record still moves
a kept sum by at most (U - L) 2^e. The released float is
``lipschitz_float(f, (U - L)/min m_g, fl((U - L)/min m_g), U - L)`` (criteria/rounding.py):
neighbours' floats differ by less than the declared sensitivity exactly (means computed in
floating point could differ by the sensitivity plus rounding).

Computation on counts. Only the order of T's rows by key matters, and that order is a uniformly
random permutation; what a grouping keeps depends on it only through the *fine type* of each
position (target code and group of every grouping). So the value is computed from T's record
types: the fine types' counts are put in a uniformly random order drawn lazily by halving
(:class:`LazyOrder`: the first half of a uniform order of a multiset is a multivariate
hypergeometric draw, and each half is again in uniform order), and the kept records of group g
are the first m_g of g in that order -- the same joint distribution over all groupings as the
priority keys, in O(log n) hypergeometric draws per group instead of O(n log n) per grouping.
For every T the released value therefore has the distribution of the key-based mechanism above,
so the same guarantee holds (DP is a property of the output distributions); the draws come from
``rand.rng("criterion <id> resize")`` and are replayed with it.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from ..cells import types_of
from .base import _column_name, Criterion, CriterionError, EvalContext, _number, register
from .rounding import dyadic_units, exact, lipschitz_float

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


class LazyOrder:
    """A uniformly random order of a multiset (``counts[f]`` items of type f), drawn lazily.

    Node (a, b) holds the types at positions a..b-1 as (type ids, counts > 0). Its first half
    (a, mid) is a multivariate hypergeometric draw of mid - a items from it (the first h items of
    a uniform order are a uniform h-subset), its second half the rest; given their contents both
    halves are again uniformly ordered. Each node's draw has its own generator, seeded from the
    entropy drawn from ``rng`` and the node's position, so the order is a function of that
    entropy alone: a query draws only the nodes it descends through, in any order.
    """

    LIMIT = 10**9  # numpy's multivariate hypergeometric ("marginals") needs fewer items

    def __init__(self, counts: np.ndarray, rng: np.random.Generator) -> None:
        counts = np.asarray(counts, dtype=np.int64)
        self.n = int(counts.sum())
        if self.n >= self.LIMIT:
            raise ValueError(f"LazyOrder: at most {self.LIMIT - 1} items")
        ids = np.flatnonzero(counts)
        self.size = counts.size
        self._entropy = [int(x) for x in rng.integers(0, 2**63, size=4)]
        self._nodes: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {(0, self.n): (ids, counts[ids])}

    def _halves(self, node: tuple[int, int]) -> tuple[tuple[int, int], tuple[int, int]]:
        a, b = node
        mid = (a + b) // 2
        if (a, mid) not in self._nodes:
            ids, cnt = self._nodes[node]
            seed = np.random.SeedSequence(self._entropy, spawn_key=node)
            left = np.random.Generator(np.random.PCG64(seed)).multivariate_hypergeometric(cnt, mid - a)
            right = cnt - left
            self._nodes[(a, mid)] = (ids[left > 0], left[left > 0])
            self._nodes[(mid, b)] = (ids[right > 0], right[right > 0])
        return (a, mid), (mid, b)

    def first(self, member: np.ndarray, m: int) -> np.ndarray:
        """Count of each type among the first ``m`` items whose type has ``member[type]`` (all
        of them when there are at most m)."""
        out = np.zeros(self.size, dtype=np.int64)
        ids, cnt = self._nodes[(0, self.n)]
        inside = member[ids]
        if m >= cnt[inside].sum():
            out[ids[inside]] = cnt[inside]
            return out
        node = (0, self.n)  # invariant: node holds more than m members
        while m > 0:
            left, right = self._halves(node)
            ids, cnt = self._nodes[left]
            inside = member[ids]
            here = int(cnt[inside].sum())
            if here <= m:
                out[ids[inside]] += cnt[inside]
                m -= here
                node = right
            else:
                node = left
        return out

    def sequence(self) -> np.ndarray:
        """The type at every position (draws every node: O(n), for checks on small n)."""
        out = np.empty(self.n, dtype=np.int64)
        stack = [(0, self.n)] if self.n else []
        while stack:
            node = stack.pop()
            ids, _ = self._nodes[node]
            if node[1] - node[0] == 1:
                out[node[0]] = ids[0]
            else:
                stack.extend(self._halves(node))
        return out

    def positions(self, item_types: np.ndarray) -> np.ndarray:
        """A position for each of n items of the given types: the j-th item of type f (in the
        given order) takes the j-th position of type f (for checks against row-wise code)."""
        seq = self.sequence()
        out = np.empty(self.n, dtype=np.int64)
        out[np.argsort(item_types, kind="stable")] = np.argsort(seq, kind="stable")
        return out


def _counts(weights: np.ndarray) -> np.ndarray:
    """Record-type counts (float64 integers) as int64."""
    return np.rint(np.asarray(weights, dtype=np.float64)).astype(np.int64)


def _int_bincount(ids: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """Exact int64 sums of ``values`` per id (np.bincount would sum in float64)."""
    out = np.zeros(size + 1, dtype=np.int64)      # id ``size``: in no group (special: exclude)
    np.add.at(out, np.asarray(ids, dtype=np.int64), np.asarray(values, dtype=np.int64))
    return out[:size]


def fine_types(keys: list[np.ndarray], counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge record types equal in every key array (non-negative integers): (counts of the
    merged types, merged type of every record type, numbered in lexicographic key order)."""
    index = np.zeros(counts.size, dtype=np.int64)
    for k in keys:  # index < number of types after each step: index * (max + 1) + k fits int64
        k = np.asarray(k, dtype=np.int64)
        index = np.unique(index * (int(k.max(initial=0)) + 1) + k, return_inverse=True)[1].reshape(-1)
    merged = np.bincount(index, weights=counts, minlength=int(index.max(initial=-1)) + 1)
    return merged.astype(np.int64), index


def _special_groups(ctx: EvalContext, coded: "Coded", col, size: int) -> np.ndarray:
    """Which groups of a grouping hold a special value of one of its columns (``null``: none),
    in :func:`group_ids`' order. A column with special values has no group bins (validation),
    so its groups are its codes; another column's groups are its own (codes or group bins)."""
    from .base import alternative_of

    cols = [] if col is None else [col] if isinstance(col, str) else list(col)
    special = np.zeros(1, dtype=bool)
    for c in cols:
        cc = coded.columns[coded.column(c)]
        if cc.special_codes:
            own = np.zeros(cc.size, dtype=bool)
            own[list(cc.special_codes)] = True
        else:
            own = np.zeros(len(column_groups(coded, c, ctx.spec, alternative_of(ctx.spec, c, ctx.alternatives))[1]),
                           dtype=bool)
        special = np.logical_or.outer(special, own).ravel()
    if special.size != size:
        raise CriterionError(f"conditional_means: {size} groups of {by_name(col)}, but {special.size} "
                             "counted for its special values")
    return special


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
        "special": "include (default; a target with special values needs exclude) or exclude: the "
                   "groups of special values left out, and the records whose target is special",
    }

    def __init__(self, entry: dict) -> None:
        super().__init__(entry)
        self.target: str = _column_name(entry, "target", self.where)
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
        self.exclude = entry.get("special") == "exclude"
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

    def _groupings(self) -> list:
        """The groupings resized: every ``by`` item but ``null``; with ``special: exclude`` also
        ``null`` (the overall mean of the records whose target is not special: a private count,
        so it is resized like a group)."""
        return [col for col in self.by if col is not None or self.exclude]

    def _group_ids(self, ctx: EvalContext, coded: "Coded", col) -> tuple[np.ndarray, tuple[str, ...], np.ndarray]:
        """:func:`group_ids` of one grouping of ``coded`` (C's or T's record types); with
        ``special: exclude`` the groups of special values are not compared (unreachable) and a
        record whose target is special is in no group (its id is the number of groups)."""
        if col is None:
            ids, labels, reach = np.zeros(coded.n, dtype=np.int64), ("all records",), np.ones(1, dtype=bool)
        else:
            ids, labels, reach = group_ids(coded, col, ctx.spec, ctx.alternatives)
        if self.exclude:
            reach = reach & ~_special_groups(ctx, coded, col, len(labels))
            target = coded.columns[coded.column(self.target)]
            if target.special_codes:
                out = np.isin(coded.codes[:, coded.column(self.target)], list(target.special_codes))
                ids = np.where(out, len(labels), ids)
        return ids, labels, reach

    def _groups(self, ctx: EvalContext):
        """Per grouping: (column, labels, group of each record type of C, s_g, m_g, reachable)
        -- all public (C's record types, the spec)."""
        out = []
        n = ctx.n
        margin = self.margin(n)
        tc = types_of(ctx.synth)
        for col in self._groupings():
            ids_c, labels, reachable = self._group_ids(ctx, tc.table, col)
            s = np.bincount(ids_c, weights=tc.weights, minlength=len(labels))[:len(labels)].astype(np.int64)
            # groups no code of the domain falls in can hold no record of T or C: they are
            # left out of the metric and of min m_g (m_g set to n, never used)
            m = np.where(reachable, np.maximum(s - margin, 1), n)
            out.append((col, labels, ids_c, s, m, reachable))
        return out

    def sensitivity(self, ctx: EvalContext) -> tuple[float, dict]:
        """(U - L) / min m_g from C's group sizes (and n for the overall mean)."""
        n = ctx.n
        best, at = (n, "overall") if None in self.by and not self.exclude else (None, None)
        sizes = {}
        for col, labels, _, s, m, reach in self._groups(ctx):
            if not reach.any():
                continue
            sizes[by_name(col) if col is not None else "overall"] = {
                lab: int(v) for lab, v, ok in zip(labels, s, reach) if ok}
            g = int(np.argmin(np.where(reach, m, np.iinfo(np.int64).max)))
            if best is None or m[g] < best:
                best, at = int(m[g]), (f"{by_name(col)}={labels[g]}" if col is not None else "overall")
        if best is None:        # every group excluded: nothing is compared
            best, at = n, "none"
        return (self.U - self.L) / best, {
            "n": n, "bounds": [self.L, self.U], "margin": self.margin(n),
            "min_group_size": int(best), "min_group": at, "synthetic_group_sizes": sizes,
            "formula": "(U - L) / min_g max(s_g - margin, 1), margin = "
                       f"ceil({self.margin_share} n) + {self.margin_plus}"} | (
            {"special": "exclude"} if self.exclude else {})

    # ---- private part

    def _y(self, coded: "Coded") -> np.ndarray:
        return np.clip(coded.values_of(self.target), self.L, self.U)

    def value(self, ctx: EvalContext, rng: np.random.Generator | None = None) -> float:
        """f(T, C) from the record types of T and C; with ``rng=None`` each subsampled mean is
        replaced by its expectation (the full group's mean), otherwise the kept records are the
        first m_g of each group in a uniformly random order of T (:meth:`resize_order`).
        Computed exactly and released through ``lipschitz_float`` (module docstring)."""
        self._check(ctx)
        n = ctx.n
        tt, tc = types_of(ctx.real), types_of(ctx.synth)
        units, e = self._units(ctx)
        code_t = tt.table.codes[:, tt.table.column(self.target)]
        code_c = tc.table.codes[:, tc.table.column(self.target)]
        y_t, y_c = units[code_t], units[code_c]          # int64: y 2^e
        w_t, w_c = _counts(tt.weights), _counts(tc.weights)
        scale = Fraction(1, 2 ** e)
        L, U = exact(self.L), exact(self.U)
        mid = (L + U) / 2
        err = Fraction(0)
        if None in self.by and not self.exclude:
            err = abs(Fraction(int(np.dot(w_t, y_t)) - int(np.dot(w_c, y_c)), n)) * scale
        groups = self._groups(ctx)
        ids_t = self._ids(ctx, tt)
        order = None if rng is None else self.resize_order(ctx, rng)
        for (col, labels, ids_c, s, m, reach), gid in zip(groups, ids_t):
            G = len(labels)
            r = np.bincount(gid, weights=w_t, minlength=G)[:G].astype(np.int64)
            total = _int_bincount(gid, w_t * y_t, G)
            if order is not None:
                kept = self._kept_sum(order, gid, y_t, m)
            sum_c = _int_bincount(ids_c, w_c * y_c, G)
            for g in np.flatnonzero(reach):
                mg, rg = int(m[g]), int(r[g])
                if order is None:   # expectation of the subsample's sum
                    kept_g = Fraction(int(total[g]) * mg, rg) if rg > mg else Fraction(int(total[g]))
                else:
                    kept_g = Fraction(int(kept[g]))
                mean_t = (kept_g * scale + max(mg - rg, 0) * mid) / mg
                mean_c = Fraction(int(sum_c[g]), int(s[g])) * scale if s[g] > 0 else mid
                err = max(err, abs(mean_t - mean_c))
        best = self._min_size(ctx)   # the declared sensitivity is (U - L) / best, as below
        return lipschitz_float(err, (U - L) / best, (self.U - self.L) / best, U - L)

    def _units(self, ctx: EvalContext) -> tuple[np.ndarray, int]:
        """The target's clipped numbers per code as int64 integers on the grid 2^-e (public)."""
        vals = np.clip(np.asarray(ctx.synth.columns[ctx.synth.column(self.target)].values,
                                  dtype=np.float64), self.L, self.U)
        vals[np.isnan(vals)] = self.L     # special values: no number, and in no group (exclude)
        return dyadic_units(vals, self.L, self.U, ctx.n)

    def _min_size(self, ctx: EvalContext) -> int:
        """min m_g over the compared groups (n for the overall mean): public."""
        best = ctx.n if None in self.by and not self.exclude else None
        for _, _, _, _, m, reach in self._groups(ctx):
            mg = int(np.min(m[reach])) if reach.any() else None
            if mg is not None and (best is None or mg < best):
                best = mg
        return int(best) if best is not None else ctx.n

    def _ids(self, ctx: EvalContext, tt) -> list[np.ndarray]:
        """Group of every record type of T, per grouping (``null`` left out)."""
        return [self._group_ids(ctx, tt.table, col)[0] for col in self._groupings()]

    def resize_order(self, ctx: EvalContext, rng: np.random.Generator) -> tuple[LazyOrder, np.ndarray]:
        """The uniformly random order of T's records shared by every grouping's resize, over
        fine types (target code and the group of every grouping), and the fine type of each
        record type of T."""
        tt = types_of(ctx.real)
        target = tt.table.codes[:, tt.table.column(self.target)]
        counts, fine = fine_types([target, *self._ids(ctx, tt)], tt.counts)
        return LazyOrder(counts, rng), fine

    @staticmethod
    def _kept_sum(order: tuple[LazyOrder, np.ndarray], gid: np.ndarray, y: np.ndarray,
                  m: np.ndarray) -> np.ndarray:
        """Sum of y over the first min(r_g, m_g) records of each group g in the order (int64
        when y is: exact)."""
        lazy, fine = order
        fine_gid = np.empty(lazy.size, dtype=np.int64)
        fine_y = np.empty(lazy.size, dtype=np.asarray(y).dtype)
        fine_gid[fine], fine_y[fine] = gid, y
        return np.array([np.dot(lazy.first(fine_gid == g, int(m[g])), fine_y) for g in range(m.size)],
                        dtype=fine_y.dtype)

    def evaluate(self, ctx: EvalContext, rand: "Randomness"):
        from dpbundle.mechanisms.noise import calibrated_laplace_scale

        self._check(ctx)
        sens, inputs = self.sensitivity(ctx)
        rng = rand.rng(f"criterion {self.id} resize")
        true = float(self.value(ctx, rng))
        noisy = float(rand.laplace(true, sensitivity=sens, epsilon=self.epsilon,
                                   purpose=self.purpose()))
        return self._result(noisy, sens, inputs, calibrated_laplace_scale(sens, self.epsilon))
