"""Granular utility of a simulated release: how close is the candidate C to the transformed data T?

Used by ``dpbundle sweep`` on PUBLIC data, beyond the acceptance criteria. Nothing here is
differentially private and nothing here needs to be: it only ever sees public data.

Measures (all computed on the integer-coded tables, numbers of codes as in ``ColumnCoding.values``):

* ``groups``: mean and median of every ordered (binned numeric) column, overall and by the
  spec's coarse group-by bins (``group_bins``), in T and in C.
* ``correlations``: Pearson correlation matrices of the columns' numbers in T and in C (a special
  value, which has no number, counts as its column's mean); ``groups`` leave special values out.
* ``marginals``: for every 2- and 3-way table (every cell of the full domain), the total
  variation distance ``1/2 sum |f_T - f_C|`` and the largest absolute cell-share error.
* ``s_pmse``: the table-based standardised pMSE of DP synthpop (Raab 2024, after Snoke et al.
  2018 and Voas & Williams): for one table with counts ``y_j`` (T) and ``s_j`` (C) over the cells
  seen in either, ``pMSE = sum_j (y_j + s_j) (s_j / (y_j + s_j) - c)^2 / N`` with ``N = n_T + n_C``,
  ``c = n_C / N``; its expectation for a correct synthesis model is ``df (1 - c)^2 c / N`` with
  ``df`` = cells seen - 1, and ``S_pMSE`` is the ratio. For ``c = 1/2`` this is Raab's
  ``sum_j (y_j - s_j)^2 / ((y_j + s_j) / 2) / df``. Reference values: about 1 when C is drawn
  from T's own empirical distribution (the synthpop null), about 2 when C is an independent
  sample of the distribution T came from; Raab: below 10 useful, below 30 usable.
* ``propensity``: Bowen & Snoke 2021 (Algorithm 1 with a logistic regression on all main
  effects, one-hot coded): the propensity scores ``p_i = P(record i is synthetic | x_i)`` of the
  pooled table, ``pMSE = mean_i (p_i - c)^2``; the **pMSE ratio** divides it by the null mean
  pMSE estimated by permuting the T/C labels (``permutations`` refits), so it is about 1 when C
  and T are samples of the same distribution. ``pmse_ratio_snoke`` divides by Snoke et al.'s
  analytic expectation ``(k - 1)(1 - c)^2 c / N`` instead (k = parameters), whose null is a
  synthesis from the correct model fitted to T (about 2 for an independent sample). **SPECKS**
  (Bowen & Liu 2018) is the Kolmogorov-Smirnov distance between the empirical CDFs of the
  propensity scores of T's and C's records (0 = indistinguishable, 1 = separated).

Records are discrete, so every measure is computed on record *types* with their counts (T and
C of an iteration are held as types: their n rows are never built here, so a sweep over tens of
millions of records keeps its memory bounded per worker); the logistic regression is a weighted
binomial IRLS, which gives the same estimates as a record-level fit at a fraction of the cost. A small ridge penalty (``ridge``, on the non-intercept coefficients) keeps the fit
finite when a category occurs in only one of the two tables.
"""
from __future__ import annotations

import itertools
import math
from typing import Any, Callable, Sequence

import numpy as np

from dpbundle.mechanisms.cells import types_of
from dpbundle.mechanisms.coding import Coded, mixed_radix_index

__all__ = [
    "evaluate_utility",
    "propensity_measures",
    "propensity_of_types",
    "fit_logistic",
    "s_pmse_table",
    "marginal_tables",
    "correlations",
    "group_statistics",
    "weighted_median",
]


# --------------------------------------------------------------------------- logistic regression

def fit_logistic(X, successes: np.ndarray, trials: np.ndarray, *, ridge: float = 1.0,
                 max_iter: int = 100, tol: float = 1e-8) -> np.ndarray:
    """Binomial logistic regression by penalised Newton-Raphson (IRLS) with step halving.

    ``X`` (K, p; dense or scipy.sparse) has the intercept in column 0 (not penalised); row j has
    ``successes[j]`` of ``trials[j]`` records labelled 1. Maximises the log-likelihood minus
    ``ridge/2 * |beta[1:]|^2``.
    """
    import scipy.sparse as sp

    sparse = sp.issparse(X)
    X = X.tocsr() if sparse else np.asarray(X, dtype=np.float64)
    XT = X.T.tocsr() if sparse else X.T
    y = np.asarray(successes, dtype=np.float64)
    m = np.asarray(trials, dtype=np.float64)
    K, p = X.shape
    pen = np.full(p, float(ridge))
    pen[0] = 0.0
    total = m.sum()
    c = min(max(y.sum() / total, 1e-12), 1 - 1e-12)
    beta = np.zeros(p)
    beta[0] = math.log(c / (1 - c))

    def objective(b: np.ndarray) -> float:
        eta = X @ b
        softplus = np.maximum(eta, 0.0) + np.log1p(np.exp(-np.abs(eta)))  # log(1 + e^eta), stable
        return float(y @ eta - m @ softplus - 0.5 * (pen * b * b).sum())

    def hessian(w: np.ndarray) -> np.ndarray:
        if sparse:
            H = (XT @ sp.diags(w) @ X).toarray()
        else:
            H = (X * w[:, None]).T @ X
        return H + np.diag(pen) + 1e-10 * np.eye(p)

    obj = objective(beta)
    for _ in range(max_iter):
        eta = X @ beta
        prob = 1.0 / (1.0 + np.exp(-eta))
        grad = XT @ (y - m * prob) - pen * beta
        step = _solve(hessian(m * prob * (1.0 - prob)), grad)
        cand, new, t = _halve_until_no_worse(objective, beta, step, obj)
        beta, gain, obj = cand, new - obj, new
        if np.max(np.abs(t * step)) < tol or abs(gain) < tol * max(1.0, abs(obj)) * 1e-3:
            break
    return beta


def _solve(H: np.ndarray, grad: np.ndarray) -> np.ndarray:
    """The Newton step H^-1 grad (least squares if H is singular)."""
    try:
        return np.linalg.solve(H, grad)
    except np.linalg.LinAlgError:
        return np.linalg.lstsq(H, grad, rcond=None)[0]


def _halve_until_no_worse(objective: Callable[[np.ndarray], float], beta: np.ndarray, step: np.ndarray,
                          obj: float) -> tuple[np.ndarray, float, float]:
    """Step halving: the first ``beta + t * step`` (t = 1, 1/2, ...) whose objective is not
    below ``obj`` (or t < 1e-8); returns (candidate, its objective, t)."""
    t = 1.0
    while True:
        cand = beta + t * step
        new = objective(cand)
        if new >= obj - 1e-12 * abs(obj) or t < 1e-8:
            return cand, new, t
        t *= 0.5


def _one_hot_types(codes: np.ndarray, domain: Sequence[int]):
    """Unique record types of ``codes`` -> (type index per record, sparse main-effects design matrix).

    The design matrix (CSR) has an intercept and one indicator per level seen in the data except
    each column's first seen level (the reference); constant columns contribute nothing.
    """
    import scipy.sparse as sp

    flat = mixed_radix_index(codes, domain)
    uniq, first, inverse = np.unique(flat, return_index=True, return_inverse=True)
    types = codes[first]
    K = len(uniq)
    rows, cols = [np.arange(K)], [np.zeros(K, dtype=np.int64)]
    p = 1
    for j in range(types.shape[1]):
        levels = np.unique(types[:, j])
        if len(levels) < 2:
            continue
        index = np.full(int(domain[j]), -1, dtype=np.int64)
        index[levels[1:]] = np.arange(p, p + len(levels) - 1)
        col = index[types[:, j]]
        keep = col >= 0
        rows.append(np.flatnonzero(keep))
        cols.append(col[keep])
        p += len(levels) - 1
    r, c = np.concatenate(rows), np.concatenate(cols)
    X = sp.csr_matrix((np.ones(len(r)), (r, c)), shape=(K, p))
    return inverse.reshape(-1), X


def _weighted_ks(values: np.ndarray, w1: np.ndarray, w2: np.ndarray) -> float:
    """Kolmogorov-Smirnov distance between two weighted empirical CDFs on the same support."""
    order = np.argsort(values, kind="stable")
    v = values[order]
    a = np.cumsum(w1[order]) / w1.sum()
    b = np.cumsum(w2[order]) / w2.sum()
    # evaluate the CDFs only at the last position of each run of equal values
    last = np.r_[v[1:] != v[:-1], True]
    return float(np.max(np.abs(a[last] - b[last]))) if len(v) else 0.0


def propensity_measures(real: np.ndarray, synth: np.ndarray, domain: Sequence[int], *,
                        permutations: int = 3, seed: int = 0, ridge: float = 1.0) -> dict:
    """pMSE, pMSE ratio (permutation null and Snoke's analytic null) and SPECKS (Bowen & Snoke 2021).

    The logistic model has all main effects (one-hot). Fitted on the pooled table of T (label 0)
    and C (label 1); ``permutations`` refits on randomly permuted labels estimate the null pMSE.
    """
    real = np.asarray(real, dtype=np.int64)
    synth = np.asarray(synth, dtype=np.int64)
    return propensity_of_types(real, np.ones(real.shape[0], np.int64), synth, np.ones(synth.shape[0], np.int64),
                               domain, permutations=permutations, seed=seed, ridge=ridge)


def propensity_of_types(real: np.ndarray, real_counts: np.ndarray, synth: np.ndarray, synth_counts: np.ndarray,
                        domain: Sequence[int], *, permutations: int = 3, seed: int = 0, ridge: float = 1.0) -> dict:
    """:func:`propensity_measures` of T and C given as record types (rows and their counts): the
    same pooled types, trials and labels, without building n rows (memory of the types only)."""
    real_counts = np.asarray(real_counts, dtype=np.int64)
    synth_counts = np.asarray(synth_counts, dtype=np.int64)
    n_t, n_c = int(real_counts.sum()), int(synth_counts.sum())
    N = n_t + n_c
    c = n_c / N
    pooled = np.vstack([np.asarray(real, dtype=np.int64), np.asarray(synth, dtype=np.int64)])
    inverse, X = _one_hot_types(pooled, domain)
    K = X.shape[0]
    weights = np.concatenate([real_counts, synth_counts]).astype(np.float64)
    trials = np.bincount(inverse, weights=weights, minlength=K)
    y_c = np.bincount(inverse[len(real_counts):], weights=weights[len(real_counts):], minlength=K)
    y_t = trials - y_c

    def pmse_of(successes: np.ndarray) -> tuple[float, np.ndarray]:
        beta = fit_logistic(X, successes, trials, ridge=ridge)
        prob = 1.0 / (1.0 + np.exp(-(X @ beta)))
        return float(trials @ (prob - c) ** 2 / N), prob

    pmse, prob = pmse_of(y_c)
    nulls = _permutation_nulls(lambda succ: pmse_of(succ)[0], trials, n_c, permutations, seed)
    k = X.shape[1]
    expected_snoke = (k - 1) * (1 - c) ** 2 * c / N
    expected_perm = (k - 1) * c * (1 - c) / N
    pmse_null = float(np.mean(nulls)) if nulls else expected_perm
    return {
        "model": "logistic regression, main effects (one-hot), fitted on the pooled table",
        "parameters": int(k),
        "c": c,
        "pmse": pmse,
        "pmse_null": pmse_null,
        "null": f"mean of {len(nulls)} label permutations" if nulls else "analytic permutation null (k-1)c(1-c)/N",
        "pmse_ratio": pmse / pmse_null if pmse_null > 0 else float("nan"),
        "pmse_expected_snoke": expected_snoke,
        "pmse_ratio_snoke": pmse / expected_snoke if expected_snoke > 0 else float("nan"),
        "specks": _weighted_ks(prob, y_t, y_c),
    }


def _permutation_nulls(pmse_of: Callable[[np.ndarray], float], trials: np.ndarray, n_c: int,
                       permutations: int, seed: int) -> list[float]:
    """pMSE of ``permutations`` refits on randomly permuted labels (seeded with ``seed``)."""
    rng = np.random.Generator(np.random.PCG64(seed))
    nulls = []
    for _ in range(max(int(permutations), 0)):
        # labels permuted over the N records: the synthetic count of each type is multivariate hypergeometric
        perm_c = rng.multivariate_hypergeometric(trials.astype(np.int64), n_c).astype(np.float64)
        nulls.append(pmse_of(perm_c))
    return nulls


# --------------------------------------------------------------------------- tables

def s_pmse_table(y: np.ndarray, s: np.ndarray) -> tuple[float, int, float]:
    """Table-based pMSE, its degrees of freedom and S_pMSE (Raab 2024) of count vectors y (T), s (C)."""
    y = np.asarray(y, dtype=np.float64)
    s = np.asarray(s, dtype=np.float64)
    seen = (y + s) > 0
    y, s = y[seen], s[seen]
    N = y.sum() + s.sum()
    c = s.sum() / N
    tot = y + s
    pmse = float(np.sum(tot * (s / tot - c) ** 2) / N)
    df = int(seen.sum()) - 1
    if df <= 0:
        return pmse, df, float("nan")
    expected = df * (1 - c) ** 2 * c / N
    return pmse, df, pmse / expected


def _types(t: Coded) -> tuple[np.ndarray, np.ndarray]:
    """(distinct rows, counts) of a table: its record types (``types_of``, remembered for T and
    C of an iteration), so that no measure builds the n rows of a large table."""
    ty = types_of(t)
    return ty.table.codes, ty.counts


def _weighted_table_counts(rows: np.ndarray, counts: np.ndarray, domain: Sequence[int],
                           cols: Sequence[int]) -> np.ndarray:
    sub_domain = [int(domain[j]) for j in cols]
    idx = mixed_radix_index(rows[:, list(cols)], sub_domain)
    return np.bincount(idx, weights=counts.astype(np.float64), minlength=int(np.prod(sub_domain)))


def marginal_tables(real: Coded, synth: Coded, ways: Sequence[int] = (2, 3)) -> list[dict]:
    """Every k-way table (k in ``ways``): TVD, largest cell-share error and S_pMSE (counted on
    the record types, weighted by their counts: the same tables as on the rows)."""
    domain = real.domain
    d = len(domain)
    (rt, wt), (rc, wc) = _types(real), _types(synth)
    n_t, n_c = int(wt.sum()), int(wc.sum())
    rows = []
    for k in ways:
        for cols in itertools.combinations(range(d), k):
            y = _weighted_table_counts(rt, wt, domain, cols)
            s = _weighted_table_counts(rc, wc, domain, cols)
            diff = np.abs(y / n_t - s / n_c)
            _, df, spmse = s_pmse_table(y, s)
            rows.append({
                "k": k,
                "columns": [real.columns[j].name for j in cols],
                "cells": int(len(y)),
                "tvd": float(0.5 * diff.sum()),
                "max_abs_error": float(diff.max()),
                "df": df,
                "s_pmse": spmse,
            })
    return rows


def _summarise_tables(rows: list[dict], ways: Sequence[int]) -> tuple[dict, dict]:
    marg, sp = {}, {}
    for k in ways:
        sel = [r for r in rows if r["k"] == k]
        if not sel:
            continue
        worst_tvd = max(sel, key=lambda r: r["tvd"])
        finite = [r for r in sel if math.isfinite(r["s_pmse"])]
        marg[str(k)] = {
            "tables": len(sel),
            "mean_tvd": float(np.mean([r["tvd"] for r in sel])),
            "max_tvd": worst_tvd["tvd"],
            "max_abs_error": float(max(r["max_abs_error"] for r in sel)),
            "worst": worst_tvd["columns"],
        }
        if finite:
            worst = max(finite, key=lambda r: r["s_pmse"])
            sp[str(k)] = {
                "tables": len(finite),
                "mean": float(np.mean([r["s_pmse"] for r in finite])),
                "max": worst["s_pmse"],
                "worst": worst["columns"],
            }
    return marg, sp


# --------------------------------------------------------------------------- moments

def correlations(real: Coded, synth: Coded) -> dict:
    """Pearson correlations of the columns' numbers in T and in C (constant columns give 0)."""

    def corr(t: Coded) -> np.ndarray:
        ty = types_of(t)
        w = ty.counts.astype(np.float64)
        total = max(float(w.sum()), 1.0)
        V = np.column_stack([ty.table.values_of(name) for name in t.names]).astype(np.float64)
        gap = np.isnan(V)          # special values (not applicable, unknown) have no number:
        if gap.any():              # they count as their column's mean (no deviation)
            known = np.where(gap, 0.0, V)
            means = (w @ known) / np.maximum(w @ (~gap), 1.0)
            V = np.where(gap, means, V)
        V = V - (w @ V) / total
        sd = np.sqrt((w @ (V * V)) / total)
        sd[sd == 0] = np.inf
        Z = V / sd
        R = (Z.T @ (Z * w[:, None])) / total
        np.fill_diagonal(R, 1.0)
        return R

    R_t, R_c = corr(real), corr(synth)
    iu = np.triu_indices(len(real.names), 1)
    diff = np.abs(R_t - R_c)[iu]
    worst = int(np.argmax(diff)) if len(diff) else 0
    return {
        "columns": list(real.names),
        "real": np.round(R_t, 6).tolist(),
        "synth": np.round(R_c, 6).tolist(),
        "max_abs_diff": float(diff.max()) if len(diff) else 0.0,
        "mean_abs_diff": float(diff.mean()) if len(diff) else 0.0,
        "worst": [real.names[iu[0][worst]], real.names[iu[1][worst]]] if len(diff) else [],
    }


def weighted_median(values: np.ndarray, weights: np.ndarray | None = None) -> float:
    """Median (lower median for an even count; values of binned columns are discrete) of
    ``values``, each occurring ``weights`` times (integer counts; default once)."""
    values = np.asarray(values, dtype=np.float64)
    if weights is None:
        if len(values) == 0:
            return float("nan")
        v = np.sort(values)
        return float(v[(len(v) - 1) // 2])
    weights = np.asarray(weights, dtype=np.int64)
    total = int(weights.sum())
    if total == 0:
        return float("nan")
    order = np.argsort(values, kind="stable")
    upto = np.cumsum(weights[order])
    return float(values[order][int(np.searchsorted(upto, (total - 1) // 2, side="right"))])


def _group_of(values: np.ndarray, rule: dict | None, coding) -> tuple[np.ndarray, list[str]]:
    if rule and "edges" in rule:
        edges = np.asarray(rule["edges"], dtype=np.float64)
        labels = list(rule.get("labels") or [str(i) for i in range(len(edges) + 1)])
        return np.searchsorted(edges, values, side="right"), labels
    # no coarse bins: the column's own codes (numbers -> code index)
    lookup = {float(v): i for i, v in enumerate(coding.values)}
    return np.array([lookup.get(float(v), -1) for v in values]), list(coding.labels)


def group_statistics(real: Coded, synth: Coded, spec: dict | None = None, *,
                     max_groups: int = 12) -> dict:
    """Mean and median of every ordered column, overall and by every group-by column.

    Group-by columns are the spec's ``group_bins`` (coarse bins on the numbers); without a spec,
    every column with at most ``max_groups`` codes, by its codes.
    """
    group_bins = (spec or {}).get("group_bins") or {}
    names = list(real.names)
    if group_bins:
        by_cols = [b for b in group_bins if b in names]
    else:
        by_cols = [c.name for c in real.columns if c.size <= max_groups]
    targets = [c.name for c in real.columns if c.ordered]
    rows: list[dict] = []
    summary: dict[str, dict] = {}
    tt, tc = types_of(real), types_of(synth)
    for target in targets:
        vt, vc = tt.table.values_of(target), tc.table.values_of(target)
        tmax_mean, tmax_median = 0.0, 0.0
        for by in [None] + [b for b in by_cols if b != target]:
            if by is None:
                gt, gc, labels = np.zeros(len(vt), int), np.zeros(len(vc), int), ["all"]
            else:
                coding = real.columns[real.column(by)]
                gt, labels = _group_of(tt.table.values_of(by), group_bins.get(by), coding)
                gc, _ = _group_of(tc.table.values_of(by), group_bins.get(by), coding)
            for g, label in enumerate(labels):     # special values (no number) left out
                a, wa = vt[(gt == g) & ~np.isnan(vt)], tt.counts[(gt == g) & ~np.isnan(vt)]
                b, wb = vc[(gc == g) & ~np.isnan(vc)], tc.counts[(gc == g) & ~np.isnan(vc)]
                na, nb = int(wa.sum()), int(wb.sum())
                mt = float(a @ wa / na) if na else float("nan")
                mc = float(b @ wb / nb) if nb else float("nan")
                dt, dc = weighted_median(a, wa), weighted_median(b, wb)
                rows.append({
                    "target": target, "by": by, "group": label,
                    "n_real": na, "n_synth": nb,
                    "mean_real": mt, "mean_synth": mc,
                    "median_real": dt, "median_synth": dc,
                })
                if na and nb:
                    tmax_mean = max(tmax_mean, abs(mt - mc))
                    tmax_median = max(tmax_median, abs(dt - dc))
        summary[target] = {"max_abs_mean_diff": tmax_mean, "max_abs_median_diff": tmax_median}
    return {"by": by_cols, "targets": targets, "rows": rows, "summary": summary}


# --------------------------------------------------------------------------- everything

def _clean(x: Any) -> Any:
    """JSON-able copy: numpy scalars -> Python, non-finite floats -> None."""
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        x = float(x)
        return x if math.isfinite(x) else None
    return x


def evaluate_utility(real: Coded, synth: Coded, spec: dict | None = None, *,
                     ways: Sequence[int] = (2, 3), permutations: int = 3, seed: int = 0) -> dict:
    """All granular utility measures of candidate ``synth`` (C) against ``real`` (T); JSON-able."""
    if real.names != synth.names or real.domain != synth.domain:
        raise ValueError("utility: T and C must have the same columns and domains")
    tables = marginal_tables(real, synth, ways)
    marg, sp = _summarise_tables(tables, ways)
    return _clean({
        "n_real": real.n,
        "n_synth": synth.n,
        "propensity": propensity_of_types(*_types(real), *_types(synth), real.domain,
                                          permutations=permutations, seed=seed),
        "s_pmse": sp,
        "marginals": marg,
        "tables": tables,
        "correlations": correlations(real, synth),
        "groups": group_statistics(real, synth, spec),
    })
