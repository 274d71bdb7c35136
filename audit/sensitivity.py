"""The audit's own recomputation of every criterion's sensitivity and derived threshold from the
public bundle only (n, data.csv, the spec), following DESIGN.md:

* kway_marginals (any ``columns`` subset, any ``max_k``), faithfulness (any exact / adjacent /
  nominal rules): 1/n
* smoothed_ratio: s' = min over the full domain of (synthetic count + k), k = smoothing (1);
  Delta = max(1/s', c - 1/(1/c + 1/s'))
* conditional_means: margin = ceil(margin_share n) + margin_plus (defaults 0.01, 1);
  m_g = max(s_g - margin, 1) over every group of every ``by`` item (a column: group_bins cut on
  the labels' numbers -- per_alternative for the bundle's alternative -- or one group per label;
  a list of columns: the cells of their groups' product; groups no label's number falls in are
  left out, other groups absent from C count with m_g = 1; ``null`` = the overall mean, size n);
  Delta = (U - L) / min m_g
* regression_coefficients: functional mechanism, (1 + d)^2 (sufficient statistics:
  2 + 3 (d - 1) + (d - 1)(d - 2)/2 = d (d + 3)/2, see ``_ss_delta``) with d = the design columns not constant in C + 1 for the intercept's
  constant feature (as the criterion's sensitivity_inputs count it); an unordered categorical
  feature with k categories is k - 1 one-hot indicators (first category = reference)
* regression_mae_difference: 2 (U - L) / n
* classification: report coefficients, the logistic functional mechanism (d + 2)^2 / 8 (1 at
  d = 1; see ``_logistic_delta``) with d as for the regression (the target left out of the
  features); a bundle of an earlier version that declared the looser (2 d^2 + 7 d - 1)/8 is
  accepted too (more noise than needed, still sound); report accuracy, 2 / n
* quantile: score sensitivity 1 of report-noisy-max, R = levels x (1 per null grouping + 2 per
  column grouping) releases at epsilon / R each; the noise scale is 2 R / epsilon (nudged) and
  the noise std equals the scale (exponential noise)
* derived threshold (laplace_false_positive): c0 - F^-1_Laplace(1 - p; Delta_assumed / eps)
"""
from __future__ import annotations

import math

import numpy as np

from .bounds import MAX_GROUP_CELLS
from .data_csv import Counted, as_counted
from .labels import SpecView

__all__ = ["Unverifiable", "recompute_sensitivity", "derive_threshold", "ratio_delta",
           "laplace_inverse_cdf", "quantile_releases"]


class Unverifiable(ValueError):
    """The sensitivity cannot be recomputed from the public bundle (the message says why)."""


def ratio_delta(s: float, c: float) -> float:
    return max(1.0 / s, c * c / (c + s))  # = c - 1/(1/c + 1/s), without cancellation


def laplace_inverse_cdf(q: float, scale: float) -> float:
    if not 0.0 < q < 1.0:
        raise Unverifiable(f"quantile level {q} outside (0, 1)")
    if q >= 0.5:
        return -scale * math.log(2.0 * (1.0 - q))
    return scale * math.log(2.0 * q)


def _num(entry: dict, key: str, where: str, default=None) -> float:
    v = entry.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(float(v)):
        raise Unverifiable(f"{where}: {key} = {v!r} is not a finite number")
    return float(v)


def _bounds(entry: dict, where: str) -> tuple[float, float]:
    b = entry.get("bounds")
    if (not isinstance(b, list) or len(b) != 2
            or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in b)
            or not b[0] < b[1]):
        raise Unverifiable(f"{where}: bounds {b!r} is not [L, U] with L < U")
    return float(b[0]), float(b[1])


def derive_threshold(entry: dict) -> tuple[float, float | None, dict]:
    """(threshold, stakeholder threshold or None, facts) from a spec acceptance entry."""
    where = f"spec acceptance[{entry.get('id')}].threshold"
    t = entry.get("threshold")
    if not isinstance(t, dict):
        if isinstance(t, bool) or not isinstance(t, (int, float)):
            raise Unverifiable(f"{where}: {t!r} is not a number")
        return float(t), None, {}
    if t.get("derive") != "laplace_false_positive":
        raise Unverifiable(f"{where}: unknown derivation {t.get('derive')!r}")
    c0 = _num(t, "stakeholder", where)
    p = _num(t, "false_positive", where)
    eps = _num(entry, "epsilon", f"spec acceptance[{entry.get('id')}]")
    if not 0 < p < 0.5 or eps <= 0:
        raise Unverifiable(f"{where}: false_positive {p} or epsilon {eps} out of range")
    if "assumed_sensitivity" in t:
        delta = _num(t, "assumed_sensitivity", where)
    elif entry.get("type") == "smoothed_ratio":
        a = _num(t, "assumed_min_count", where)
        c = _num(entry, "clip", f"spec acceptance[{entry.get('id')}]")
        k = _num(entry, "smoothing", f"spec acceptance[{entry.get('id')}]", default=1.0)
        if a <= 0 or c <= 1 or k < 1:
            raise Unverifiable(f"{where}: assumed_min_count {a}, clip {c} or smoothing {k} out of range")
        delta = ratio_delta(max(a, k), c)   # the smoothed count is at least k for every candidate
    else:
        raise Unverifiable(f"{where}: no assumed sensitivity for type {entry.get('type')!r}")
    scale = delta / eps
    thr = c0 - laplace_inverse_cdf(1.0 - p, scale)
    return thr, c0, {"assumed_sensitivity": delta, "scale": scale}


def _cut_of(view: SpecView, column: str) -> dict | None:
    """The {edges, labels} cutting ``column`` under the bundle's alternative: group_bins.<col>,
    or its per_alternative entry for the selected alternative (None: each label its own group)."""
    gb = (view.spec.get("group_bins") or {}).get(column)
    if not isinstance(gb, dict):
        return None
    if "per_alternative" in gb:
        per = gb.get("per_alternative")
        if not isinstance(per, dict):
            raise Unverifiable(f"spec group_bins.{column}.per_alternative is not a mapping")
        gb = per.get(view.columns[view.index(column)].alternative)
        if gb is None:
            return None
        if not isinstance(gb, dict):
            raise Unverifiable(f"spec group_bins.{column}.per_alternative entry is not a mapping")
    return gb


def _groups_of(view: SpecView, codes: np.ndarray, column: str) -> tuple[np.ndarray, np.ndarray]:
    """Group id of every row by one column, and which groups some label's number falls in.
    With group bins a label whose number is v is in group #{edges <= v}; without, each label
    is its own group."""
    j = view.index(column)
    col = view.columns[j]
    gb = _cut_of(view, column)
    if gb is None:
        return codes[:, j], np.ones(col.size, dtype=bool)
    edges = gb.get("edges")
    if not isinstance(edges, list) or not all(isinstance(e, (int, float)) for e in edges):
        raise Unverifiable(f"spec group_bins.{column}.edges is not a list of numbers")
    e = np.sort(np.asarray(edges, dtype=np.float64))
    # #{edges <= v} for every label's number v: one binary search each (not a pass over the edges)
    of_label = np.searchsorted(e, col.numbers, side="right").astype(np.int64)
    reach = np.zeros(len(edges) + 1, dtype=bool)
    reach[of_label] = True
    return of_label[codes[:, j]], reach


def group_count(view: SpecView, column: str) -> int:
    """The number of groups of one column (its group bins' edges + 1, else its labels);
    KeyError for a column that is not released."""
    col = view.columns[view.index(column)]
    gb = _cut_of(view, column)
    if gb is None:
        return col.size
    edges = gb.get("edges")
    return len(edges) + 1 if isinstance(edges, list) else 1


def _joint_groups(view: SpecView, codes: np.ndarray, item) -> tuple[np.ndarray, np.ndarray]:
    """Groups of a ``by`` item: one column, or a list of columns (the cells of the product of
    their groups; a cell is reachable when each of its parts is)."""
    cols = [item] if isinstance(item, str) else item
    if not isinstance(cols, list) or not cols or not all(isinstance(c, str) for c in cols):
        raise Unverifiable(f"by item {item!r} is not a column or a list of columns")
    cells = 1
    for c in cols:   # the number of groups, before any array is made
        cells *= group_count(view, c)
        if cells > MAX_GROUP_CELLS:
            raise Unverifiable(f"by item {cols} has more than {MAX_GROUP_CELLS:,} groups (the limit)")
    ids = np.zeros(codes.shape[0], dtype=np.int64)
    reach = np.ones(1, dtype=bool)
    for c in cols:
        g, r = _groups_of(view, codes, c)
        ids = ids * r.size + g
        reach = (reach[:, None] & r[None, :]).reshape(-1)
    return ids, reach


def _special_cells(view: SpecView, item) -> np.ndarray:
    """Per group of a ``by`` item, whether one of its columns holds a special value there (a
    column with special values has no group bins: its groups are its labels)."""
    cols = [item] if isinstance(item, str) else item
    out = np.zeros(1, dtype=bool)
    for c in cols:
        col = view.columns[view.index(c)]
        own = np.zeros(col.size if col.special_codes else group_count(view, c), dtype=bool)
        own[list(col.special_codes)] = True
        out = (out[:, None] | own[None, :]).reshape(-1)
    return out


def _ss_delta(d: int) -> float:
    """L1 sensitivity of the regression's sufficient statistics [X'y (d), X'X upper triangle
    without the public (0,0) = n], d features counting the intercept's constant 1, every scaled
    feature and the target in [-1, 1]; recomputed here, not imported.

    The audit's own argument. Split a changed record into its mean and half-difference,
    (y, u) = (c + e, a + b) and (y', u') = (c - e, a - b) with u_0 = u'_0 = 1 (a_0 = 1, b_0 = 0)
    and |c| + |e| <= 1, |a_j| + |b_j| <= 1. Each entry of the vector changes by twice a sum of
    products of one "a-or-c" factor and one "b-or-e" factor (c b_j + e a_j for X'y,
    a_j b_k + b_j a_k for X'X), so the L1 change is at most the same expression in absolute
    values, attained when all factors are >= 0. Taking every |a_j| + |b_j| = 1 and
    |c| + |e| = 1 can only increase it; it is then linear in |e| and concave in the |b_j|,
    maximal at |e| = 1, |b_j| = 1/2: y = 1, u = (1, 1, ..., 1) against y' = -1,
    u' = (1, 0, ..., 0). That pair moves X'y by 2 (the constant's entry) + 1 per feature, and
    each X'X entry other than (0,0) that involves a feature by 1: (0, j) and (j, j) for each of
    the d - 1 features and (j, k) for each pair of them. Delta = 2 + (d - 1) + 2 (d - 1) +
    (d - 1)(d - 2)/2 (27 at d = 6; the per-entry bound 2 (d + d(d+1)/2 - 1) = 52 is loose)."""
    p = int(d) - 1
    if p < 0:
        raise Unverifiable(f"regression design with d = {d} < 1")
    return float(2 + p + 2 * p + p * (p - 1) // 2)


def _logistic_delta(d: int) -> float:
    """L1 sensitivity of the Taylor logistic loss's noised coefficients [lin (d), quad upper
    triangle without the public (0,0) = n/8], d features counting the intercept's constant 1,
    every scaled feature in [-1, 1], y in {0, 1}; recomputed here, not imported.

    The audit's own argument. One record's coefficients are lin_j = s x_j (s = 1/2 - y = +-1/2),
    quad_jj = x_j^2 / 8 (j >= 1), quad_jk = x_j x_k / 4 (j < k), x_0 = 1. With
    w = (4s, x_0, ..., x_{d-1}) they are the off-diagonal pairs and the non-constant diagonal
    of w w^T / 8 (4s x_j / 4 = s x_j; the diagonal 16 s^2 / 8 and x_0^2 / 8 never change), so a
    changed record moves them by ||w w^T - w' w'^T||_1 / 8 (entrywise). Writing w = a + b,
    w' = a - b: w w^T - w' w'^T = 2 (a b^T + b a^T), at most 4 |a|_1 |b|_1 <= (|a|_1 + |b|_1)^2
    in L1, and |a_i| + |b_i| = max(|w_i|, |w'_i|) sums to at most 2 + 1 + (d - 1) = d + 2.
    Reached for d >= 2 with a, b >= 0 and |a|_1 = |b|_1: y = 0 -> 1 (the 4s entry all in b),
    x = (1, ..., 1) -> (1; d/2 of feature mass in a). For d = 1 only lin_0 = s moves: 1."""
    d = int(d)
    if d < 1:
        raise Unverifiable(f"classification design with d = {d} < 1")
    return 1.0 if d == 1 else float((d + 2) ** 2) / 8.0


def _logistic_legacy_delta(d: int) -> float:
    """The per-entry bound of earlier versions: d + (d - 1)/8 + d (d - 1)/4 = (2 d^2 + 7 d - 1)/8
    (d x 1 for lin, (d - 1) x 1/8 for the diagonal, d (d - 1)/2 x 1/2 for the products), sound
    and >= :func:`_logistic_delta` (equal at d = 1)."""
    return d + (d - 1) / 8.0 + d * (d - 1) / 4.0


def _design_size(view: SpecView, codes: Counted, target, feats) -> int:
    """d of the regression design from data.csv: each ordered feature that is not constant, and
    each one-hot indicator (categories 2..k of an unordered feature) that is neither always 0
    nor always 1, plus the intercept's constant."""
    if not isinstance(feats, list):
        feats = [c for c in view.names if c != target]
    used = 0
    for f in dict.fromkeys(feats):
        try:
            j = view.index(f)
        except (KeyError, TypeError):
            raise Unverifiable(f"feature {f!r} is not a released column") from None
        col = view.columns[j]
        if col.ordered:
            x = col.numbers[codes.rows[:, j]]
            used += int(x.size > 0 and float(x.max()) > float(x.min()))
        else:
            count = codes.column_counts(j, col.size)
            used += int(np.sum((count[1:] > 0) & (count[1:] < codes.n)))
    return used + 1


def data_passes(entry: dict, view: SpecView) -> int:
    """How many column passes over data.csv recomputing this criterion's sensitivity takes (an
    upper bound, from the spec only): smoothed_ratio one per released column, conditional_means
    one per column of every ``by`` item, the regression and classification fits one per
    feature (every released column when they name none); the others none."""
    typ = entry.get("type")
    if typ == "smoothed_ratio":
        return len(view.columns)
    if typ == "conditional_means":
        by = entry.get("by", [None])
        if not isinstance(by, list):
            return 0
        return sum(1 if isinstance(b, str) else len(b) if isinstance(b, list) else 0 for b in by)
    if typ in ("regression_coefficients", "classification"):
        feats = entry.get("features")
        return len(feats) if isinstance(feats, list) else len(view.columns)
    return 0


def quantile_releases(entry: dict, where: str = "criterion") -> int:
    """R of a quantile criterion: levels x sum over ``by`` of (1 for null, 2 for a grouping: a
    changed record leaves one group and joins another)."""
    levels = entry.get("quantiles", [0.5])
    by = entry.get("by", [None])
    if not isinstance(levels, list) or not levels or not isinstance(by, list) or not by:
        raise Unverifiable(f"{where}: quantiles or by is not a non-empty list")
    return len(levels) * sum(1 if b is None else 2 for b in by)


def recompute_sensitivity(entry: dict, row: dict, view: SpecView, codes: Counted | np.ndarray | None,
                          n: int) -> tuple[float, dict]:
    """(Delta, facts) for one criterion from public data (data.csv as its distinct rows and
    counts, or as rows); Unverifiable if it cannot be done."""
    typ = entry.get("type")
    where = f"criterion {entry.get('id')}"
    if n <= 0:
        raise Unverifiable("n must be positive")
    public = _sensitivity_without_data(entry, row, view, n, where)
    if public is not None:
        return public
    if codes is None:
        raise Unverifiable(f"{where}: data.csv is needed to recompute the sensitivity and is unusable")
    codes = as_counted(codes)
    if codes.n != n:
        raise Unverifiable(f"{where}: data.csv has {codes.n} rows, not n = {n}")
    if typ == "smoothed_ratio":
        return _smoothed_ratio_sensitivity(entry, view, codes, where)
    if typ == "conditional_means":
        return _conditional_means_sensitivity(entry, row, view, codes, n)
    if typ in ("regression_coefficients", "classification"):
        return _design_sensitivity(entry, row, view, codes, where)
    raise Unverifiable(f"{where}: unknown criterion type {typ!r}; the audit cannot recompute its sensitivity")


def _sensitivity_without_data(entry: dict, row: dict, view: SpecView, n: int,
                              where: str) -> tuple[float, dict] | None:
    """(Delta, facts) of the criterion types whose sensitivity needs only n and the spec, else None."""
    typ = entry.get("type")
    if typ in ("kway_marginals", "faithfulness"):
        for c in (entry.get("columns") or []) if typ == "kway_marginals" else []:
            if c not in view.names:
                raise Unverifiable(f"{where}: column {c!r} is not released")
        return 1.0 / n, {"n": n}
    if typ == "regression_mae_difference":
        L, U = _bounds(entry, where)
        return 2.0 * (U - L) / n, {"n": n, "bounds": [L, U]}
    if typ == "classification" and entry.get("report", "coefficients") == "accuracy":
        return 2.0 / n, {"n": n}
    if typ == "quantile":
        R = quantile_releases(entry, where)
        facts = {"releases": R}
        declared = (row.get("sensitivity_inputs") or {}).get("releases")
        if declared is not None and declared != R:
            facts["declared_releases"] = declared
        return 1.0, facts
    return None


def _smoothed_ratio_sensitivity(entry: dict, view: SpecView, codes: Counted,
                                where: str) -> tuple[float, dict]:
    """smoothed_ratio: the ratio bound at the smallest smoothed count of any released label."""
    c = _num(entry, "clip", where)
    k = _num(entry, "smoothing", where, default=1.0)
    if c <= 1 or k < 1:
        raise Unverifiable(f"{where}: clip {c} must be > 1 and smoothing {k} >= 1")
    s_min = None
    for j, col in enumerate(view.columns):
        cnt = codes.column_counts(j, col.size)
        m = int(cnt.min()) + k     # smoothed: (count + k), k = 1 unless the spec says
        s_min = m if s_min is None else min(s_min, m)
    if float(s_min).is_integer():
        s_min = int(s_min)
    facts = {"min_smoothed_synthetic_count": s_min, "clip": c}
    if k != 1:
        facts["smoothing"] = k
    return ratio_delta(float(s_min), c), facts


def _conditional_means_sensitivity(entry: dict, row: dict, view: SpecView, codes: Counted,
                                   n: int) -> tuple[float, dict]:
    """conditional_means: (U - L) over the smallest group size less the margin, over every ``by``."""
    where = f"criterion {entry.get('id')}"
    L, U = _bounds(entry, where)
    share = _num(entry, "margin_share", where, default=0.01)
    plus = _num(entry, "margin_plus", where, default=1)
    margin = math.ceil(share * n) + int(plus)
    by = entry.get("by", [None])
    if not isinstance(by, list) or not by:
        raise Unverifiable(f"{where}: by is not a list")
    exclude = entry.get("special") == "exclude"
    best = n if None in by and not exclude else None
    counts = codes.counts
    if exclude:   # a record whose target is a special value is in no group (its weight 0 here)
        try:
            t = view.index(entry.get("target"))
        except (KeyError, ValueError):
            raise Unverifiable(f"{where}: the target is not released") from None
        counts = np.where(np.isin(codes.rows[:, t], list(view.columns[t].special_codes)), 0, counts)
    for col in by:
        if col is None and not exclude:
            continue
        try:
            if col is None:      # exclude: the overall mean is resized like a group
                ids, reach = np.zeros(codes.rows.shape[0], dtype=np.int64), np.ones(1, dtype=bool)
            else:
                ids, reach = _joint_groups(view, codes.rows, col)
                if exclude:      # the groups of special values are not compared
                    reach = reach & ~_special_cells(view, col)
        except KeyError:
            raise Unverifiable(f"{where}: by column {col!r} is not released") from None
        if not reach.any():
            continue
        s = np.bincount(ids, weights=counts, minlength=reach.size).astype(np.int64)
        # groups no label's number falls in hold no record of T or C: left out
        m = int(np.maximum(s - margin, 1)[reach].min())
        best = m if best is None else min(best, m)
    if best is None:
        raise Unverifiable(f"{where}: no groups")
    declared = (row.get("sensitivity_inputs") or {}).get("min_group_size")
    facts = {"margin": margin, "min_group_size": best}
    if declared is not None and declared != best:
        facts["declared_min_group_size"] = declared
    return (U - L) / best, facts


def _design_sensitivity(entry: dict, row: dict, view: SpecView, codes: Counted,
                        where: str) -> tuple[float, dict]:
    """regression_coefficients and classification: the fit's bound at the design size d."""
    typ = entry.get("type")
    try:
        d = _design_size(view, codes, entry.get("target"), entry.get("features"))
    except Unverifiable as e:
        raise Unverifiable(f"{where}: {e}") from None
    fit = entry.get("fit", "functional_mechanism") if typ == "regression_coefficients" else "logistic"
    legacy = None
    if fit == "logistic":
        delta = _logistic_delta(d)  # Taylor logistic loss, quad_00 = n/8 public
        declared = row.get("sensitivity")
        old = _logistic_legacy_delta(d)
        if (d >= 2 and isinstance(declared, (int, float)) and not isinstance(declared, bool)
                and math.isclose(float(declared), old, rel_tol=1e-12)):
            delta, legacy = old, "(2 d^2 + 7 d - 1) / 8"
    elif fit == "functional_mechanism":
        delta = float((1 + d) ** 2)  # exact worst case of a changed record (half of Zhang's 2(1+d)^2)
    elif fit == "sufficient_statistics":
        delta = _ss_delta(d)
    else:
        raise Unverifiable(f"{where}: unknown fit {fit!r}")
    facts = {"d": d, "fit": fit}
    if legacy is not None:
        facts["legacy_formula"] = legacy
        facts["note"] = (f"an earlier version's sound but looser bound; the exact worst case is "
                         f"(d + 2)^2 / 8 = {_logistic_delta(d):g}")
    declared = (row.get("sensitivity_inputs") or {}).get("d")
    if declared is not None and declared != d:
        facts["declared_d"] = declared
    return delta, facts
