"""The iteration's hot path on counts (issue 13): every count-based computation equals the
row-wise one it replaces.

The ``*_rows`` functions below are the row-wise implementations the criteria, the sampling and
the projection used before (written out here as references). On random tables -- empty cells,
columns with a single value, n down to 1 -- the values computed from record types must equal
them; the resize of ``conditional_means`` must keep the records the row-wise priority keys keep
for the order it draws, and its distribution must be that of the keys; the cached T must be the
fresh transformation's.
"""
from __future__ import annotations

import gc
import itertools
import math
import pickle
from collections import Counter

import numpy as np
import pytest

from dpbundle.mechanisms import arithmetic
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from criteria_util import (BIRTHS_FAITHFULNESS, BIRTHS_GROUP_BINS, births_columns, births_like,
                           cat_coding, int_coding, neighbours)
from dpbundle.mechanisms import cells
from dpbundle.mechanisms.cells import tabulate, types_from_rows, types_of
from dpbundle.mechanisms.coding import Coded, mixed_radix_index
from dpbundle.mechanisms.criteria import EvalContext, make_criterion
from dpbundle.mechanisms.criteria import kway
from dpbundle.mechanisms.criteria.base import group_keys
from dpbundle.mechanisms.criteria.classification import (_quadratic, accuracy, exact_fit,
                                                         logistic_fm_vector)
from dpbundle.mechanisms.criteria.condmeans import LazyOrder, group_ids
from dpbundle.mechanisms.criteria.faithfulness import FaithfulnessRules, candidate_edges
from dpbundle.mechanisms.criteria.mae import mae_difference
from dpbundle.mechanisms.criteria.ratio import ratio_sensitivity
from dpbundle.mechanisms.criteria.regression import RegressionDesign, fm_vector, ols, ss_vector
from dpbundle.mechanisms.criteria.rounding import on_grid
from dpbundle.mechanisms.noise import Randomness, Transcript
from dpbundle.mechanisms.projection import ProjectionError, project
from dpbundle.release.scheme import iteration as it
from dpbundle.release.data import transform as tr
from dpbundle.release.data.constraints import synthetic_violations, violation_table

TOL = dict(rel=1e-9, abs=1e-9)


def fresh(coded: Coded) -> Coded:
    """The same rows in a new object (no remembered record types)."""
    return Coded(coded.codes.copy(), coded.columns)


# --------------------------------------------------------------------------- row-wise references


def kway_rows(t: Coded, c: Coded, max_k: int) -> float:
    """max over subsets and cells of |count_T - count_C| / n, one bincount per subset."""
    d, best = len(t.columns), 0
    for k in range(1, max_k + 1):
        for S in itertools.combinations(range(d), k):
            dom = tuple(t.domain[j] for j in S)
            kt, size = group_keys(t.codes[:, S], dom)
            kc, _ = group_keys(c.codes[:, S], dom)
            best = max(best, int(np.abs(np.bincount(kt, minlength=size) - np.bincount(kc, minlength=size)).max()))
    return best / t.n


def ratio_rows(t: Coded, c: Coded, clip: float) -> tuple[float, float]:
    """(value, sensitivity) of smoothed_ratio from per-row bincounts."""
    best, smin = 1.0, math.inf
    for j, k in enumerate(t.domain):
        r = np.bincount(t.codes[:, j], minlength=k) + 1.0
        s = np.bincount(c.codes[:, j], minlength=k) + 1.0
        best = max(best, float(np.minimum(clip, np.maximum(r / s, s / r)).max()))
        smin = min(smin, float(s.min()))
    return best, ratio_sensitivity(smin, clip)


def condmeans_rows(crit, ctx: EvalContext, keys: np.ndarray | None) -> float:
    """conditional_means row by row: the m_g rows of each group with the smallest keys (keys
    None: the expectation), as before issue 13."""
    t, c, n = ctx.real, ctx.synth, ctx.n
    y_t = np.clip(t.values_of(crit.target), crit.L, crit.U)
    y_c = np.clip(c.values_of(crit.target), crit.L, crit.U)
    mid, margin = 0.5 * (crit.L + crit.U), crit.margin(n)
    err = abs(float(y_t.mean()) - float(y_c.mean())) if None in crit.by else 0.0
    for col in [b for b in crit.by if b is not None]:
        ids_c, labels, reach = group_ids(c, col, ctx.spec, ctx.alternatives)
        ids_t = group_ids(t, col, ctx.spec, ctx.alternatives)[0]
        G = len(labels)
        s, r = np.bincount(ids_c, minlength=G), np.bincount(ids_t, minlength=G)
        m = np.where(reach, np.maximum(s - margin, 1), n)
        total = np.bincount(ids_t, weights=y_t, minlength=G)
        if keys is None:
            kept = np.where(r > m, total / np.maximum(r, 1) * m, total)
        else:
            order = np.lexsort((keys, ids_t))
            rank = np.arange(n) - np.concatenate(([0], np.cumsum(r)[:-1]))[ids_t[order]]
            keep = order[rank < m[ids_t[order]]]
            kept = np.bincount(ids_t[keep], weights=y_t[keep], minlength=G)
        mean_c = np.where(s > 0, np.bincount(ids_c, weights=y_c, minlength=G) / np.maximum(s, 1), mid)
        mean_t = (kept + np.maximum(m - r, 0) * mid) / m
        err = max(err, float(np.abs(mean_t - mean_c)[reach].max()))
    return err


def max_matching_rows(t: Coded, c: Coded, rules_spec: dict) -> int:
    """Faithfulness' max-flow with the record types found by np.unique on the rows."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import maximum_flow

    dom, rules = c.domain, FaithfulnessRules(rules_spec, c.columns)
    tk, tf, tn = np.unique(group_keys(t.codes, dom)[0], return_index=True, return_counts=True)
    ck, cf, cn = np.unique(group_keys(c.codes, dom)[0], return_index=True, return_counts=True)
    ti, ci = candidate_edges(t.codes[tf], tk, ck, dom, rules, c.codes[cf])
    if ti.size == 0:
        return 0
    a, b = tk.size, ck.size
    rows = np.concatenate([np.zeros(a, np.int64), 1 + ti, 1 + a + np.arange(b)])
    cols = np.concatenate([1 + np.arange(a), 1 + a + ci, np.full(b, a + b + 1)])
    cap = np.concatenate([tn, np.full(ti.size, t.n), cn]).astype(np.int32)
    g = csr_matrix((cap, (rows, cols)), shape=(a + b + 2, a + b + 2))
    return int(maximum_flow(g, 0, a + b + 1).flow_value)


# --------------------------------------------------------------------------- strategies


def mixed_columns(t: Coded) -> tuple:
    """The columns of ``t`` with the last one made categorical (one-hot in regressions)."""
    last = t.columns[-1]
    cat = cat_coding(last.name, list(last.labels), list(range(last.size)))
    return t.columns[:-1] + (cat,)


@st.composite
def pair(draw, max_d: int = 4, max_n: int = 30):
    """(T, C) with the same columns: often empty cells, sometimes one-value columns, n >= 1."""
    t, _, c = draw(neighbours(max_d=max_d, max_size=4, max_n=max_n))
    if draw(st.booleans()) and len(t.columns) > 1:
        cols = mixed_columns(t)
        t, c = Coded(t.codes, cols), Coded(c.codes, cols)
    return t, c


# --------------------------------------------------------------------------- record types


@settings(max_examples=80, deadline=None)
@given(pair())
def test_record_types_are_the_distinct_rows_with_counts(tc):
    t, _ = tc
    types = types_of(t)
    rows, counts = np.unique(t.codes, axis=0, return_counts=True)
    assert np.array_equal(types.table.codes, rows) and np.array_equal(types.counts, counts)
    assert np.array_equal(types.cells, mixed_radix_index(rows, t.domain)) and types.n == t.n
    for j in range(len(t.columns)):
        assert np.array_equal(types.column_counts(j), np.bincount(t.codes[:, j], minlength=t.domain[j]))
    assert types_of(t) is types  # remembered


def test_tabulate_dense_and_sorted_agree(monkeypatch):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 5000, size=3000)
    dense = tabulate(x, 5000)
    monkeypatch.setattr(cells, "DENSE_CELLS", 0)
    assert all(np.array_equal(a, b) for a, b in zip(dense, tabulate(x, 5000)))
    assert all(a.size == 0 for a in tabulate(np.zeros(0, np.int64), 10))


def test_a_domain_beyond_int64_cells_uses_rows():
    cols = tuple(int_coding(f"c{j}", list(range(0, 201))) for j in range(9))  # 200^9 > 2^62
    rng = np.random.default_rng(1)
    codes = rng.integers(0, 3, size=(50, 9))
    types = types_from_rows(codes, cols)
    rows, counts = np.unique(codes, axis=0, return_counts=True)
    assert types.cells is None and np.array_equal(types.table.codes, rows)
    assert np.array_equal(types.counts, counts)


# --------------------------------------------------------------------------- criteria


@settings(max_examples=80, deadline=None)
@given(pair(), st.integers(1, 4))
def test_kway_counts_equal_rows(tc, max_k):
    t, c = tc
    crit = make_criterion({"id": "k", "type": "kway_marginals", "threshold": 0.1, "epsilon": 1.0,
                           "max_k": max_k})
    want = kway_rows(t, c, min(max_k, len(t.columns)))
    assert crit.value(EvalContext(t, c, {})) == pytest.approx(want, **TOL)
    old = kway._JOINT_LIMIT
    try:
        kway._JOINT_LIMIT = 0  # the per-subset path
        assert crit.value(EvalContext(fresh(t), fresh(c), {})) == pytest.approx(want, **TOL)
    finally:
        kway._JOINT_LIMIT = old


@settings(max_examples=80, deadline=None)
@given(pair(), st.sampled_from([1.5, 2.0, 10.0]))
def test_ratio_counts_equal_rows(tc, clip):
    t, c = tc
    crit = make_criterion({"id": "r", "type": "smoothed_ratio", "clip": clip, "threshold": 1.5,
                           "epsilon": 0.3})
    value, sens = ratio_rows(t, c, clip)
    for ctx in (EvalContext(t, c, {}), EvalContext(fresh(t), fresh(c), {})):
        assert crit.sensitivity(ctx)[0] == sens  # reads C only, the same integers
        assert crit.value(ctx) == pytest.approx(value, **TOL)  # lipschitz_float: a hair below


@st.composite
def means_case(draw):
    t, c = draw(pair(max_d=3, max_n=25))
    names = [x.name for x in t.columns]
    target = draw(st.sampled_from(names))
    others = [x for x in names if x != target] or names
    items = others + [None] + ([others] if len(others) > 1 else [])
    by = draw(st.lists(st.sampled_from(items), min_size=1, max_size=3, unique_by=str))
    gb = {}
    for col in others:
        if draw(st.booleans()) and t.columns[t.column(col)].ordered:
            edges = sorted(draw(st.lists(st.integers(-3, 15), min_size=1, max_size=3, unique=True)))
            gb[col] = {"edges": edges, "labels": [f"g{i}" for i in range(len(edges) + 1)]}
    vals = t.columns[t.column(target)].values
    L = float(draw(st.integers(int(vals.min()) - 2, int(vals.max()))))
    entry = {"id": "m", "type": "conditional_means", "target": target, "by": by,
             "bounds": [L, L + draw(st.integers(1, 20))], "threshold": 1.0, "epsilon": 0.1,
             "margin_share": draw(st.sampled_from([0.0, 0.01, 0.2])),
             "margin_plus": draw(st.integers(0, 2))}
    return t, c, entry, {"group_bins": gb}


def order_keys(crit, ctx: EvalContext, seed: int) -> np.ndarray:
    """Priority key (position) of every row of T in the order the criterion draws for ``seed``."""
    lazy, fine = crit.resize_order(ctx, np.random.default_rng(seed))
    t = ctx.real
    row_type = np.searchsorted(types_of(t).cells, mixed_radix_index(t.codes, t.domain))
    return lazy.positions(fine[row_type])


@settings(max_examples=150, deadline=None)
@given(means_case(), st.integers(0, 2**32 - 1))
def test_condmeans_counts_equal_rows(cs, seed):
    t, c, entry, spec = cs
    crit = make_criterion(entry)
    ctx = EvalContext(t, c, spec)
    assert crit.value(ctx) == pytest.approx(condmeans_rows(crit, ctx, None), **TOL)
    keys = order_keys(crit, ctx, seed)
    got = crit.value(ctx, np.random.default_rng(seed))
    assert got == pytest.approx(condmeans_rows(crit, ctx, keys), **TOL)
    # the sensitivity reads C only: the same from rows as from remembered record types
    assert crit.sensitivity(ctx) == crit.sensitivity(EvalContext(fresh(t), fresh(c), spec))


def test_condmeans_resize_has_the_distribution_of_row_keys():
    """All 6! orders of six rows give the exact distribution of the row-wise value. Columns a and
    b are equal, so the two groupings' resizes share one order: drawn independently, their
    maximum would be distributed otherwise (total variation 0.25 here). 4,000 seeds of the
    count-based value must fit the exact distribution (chi-square, fixed seeds)."""
    from scipy.stats import chisquare

    cols = (int_coding("a", [0, 1, 2]), int_coding("b", [0, 1, 2]), int_coding("y", list(range(7))))
    t = Coded(np.array([[0, 0, 2], [1, 1, 2], [1, 1, 0], [1, 1, 3], [1, 1, 1], [0, 0, 4]]), cols)
    c = Coded(np.array([[1, 1, 1], [0, 0, 4], [1, 1, 0], [1, 1, 2], [0, 0, 4], [1, 1, 1]]), cols)
    crit = make_criterion({"id": "m", "type": "conditional_means", "target": "y", "by": ["a", "b"],
                           "bounds": [0, 4], "threshold": 1.0, "epsilon": 0.1,
                           "margin_share": 0.0, "margin_plus": 1})
    ctx = EvalContext(t, c, {})
    exact = Counter(round(condmeans_rows(crit, ctx, np.asarray(p, float)), 9)
                    for p in itertools.permutations(range(6)))
    drawn = Counter(round(crit.value(ctx, np.random.default_rng(s)), 9) for s in range(4000))
    assert set(drawn) <= set(exact) and len(exact) == 5
    support = sorted(exact)
    expected = [4000 * exact[v] / 720 for v in support]
    assert chisquare([drawn[v] for v in support], expected).pvalue > 1e-3


def test_lazy_order_is_a_uniform_order_whatever_is_drawn_first():
    counts = np.array([2, 1, 0, 1])
    seen = Counter(tuple(LazyOrder(counts, np.random.default_rng(s)).sequence()) for s in range(3000))
    assert len(seen) == 12  # 4! / 2! arrangements
    from scipy.stats import chisquare
    assert chisquare(list(seen.values())).pvalue > 1e-3
    rng = np.random.default_rng(7)
    for seed in range(40):
        big = rng.integers(0, 6, size=5)
        a, b = LazyOrder(big, np.random.default_rng(seed)), LazyOrder(big, np.random.default_rng(seed))
        member, m = rng.random(5) < 0.5, int(rng.integers(0, 12))
        got = a.first(member, m)            # a: queried first; b: drawn in full first
        seq = b.sequence()
        want = np.bincount(seq[member[seq]][:m], minlength=5)
        assert np.array_equal(got, want) and np.array_equal(a.sequence(), seq)


def gram(Z: np.ndarray) -> np.ndarray:
    """[1, Z]'[1, Z]: the normal equations' matrix of OLS with an intercept."""
    A = np.column_stack([np.ones(Z.shape[0]), Z])
    return A.T @ A


@st.composite
def regression_case(draw):
    t, c = draw(pair(max_d=4, max_n=30))
    names = [x.name for x in t.columns]
    target = draw(st.sampled_from([x.name for x in t.columns if x.ordered] or names))
    vals = t.columns[t.column(target)].values
    return t, c, target, float(vals.min()) - 1.0, float(vals.max()) + 1.0


@settings(max_examples=80, deadline=None)
@given(regression_case(), st.sampled_from(["functional_mechanism", "sufficient_statistics"]))
def test_regression_and_mae_counts_equal_rows(cs, fit):
    t, c, target, L, U = cs
    entry = {"id": "reg", "type": "regression_coefficients", "target": target, "bounds": [L, U],
             "fit": fit, "threshold": 30.0, "epsilon": 0.4}
    crit, ctx = make_criterion(entry), EvalContext(t, c, {})
    des = RegressionDesign.from_synth(fresh(c), target, L, U)   # from C's rows
    # a singular least-squares fit is decided by rounding: compare well-conditioned ones only
    assume(all(np.linalg.cond(gram(des.z(x))) < 1e8 for x in (t, c)))
    assert crit.sensitivity(ctx) == make_criterion(entry).sensitivity(EvalContext(fresh(t), fresh(c), {}))
    want = np.abs(ols(des.z(t), des.y(t))[1:] - ols(des.z(c), des.y(c))[1:]).sum()
    assert crit.value(ctx) == pytest.approx(want, rel=1e-7, abs=1e-7)
    types = types_of(t)
    vec = fm_vector if fit == "functional_mechanism" else ss_vector
    assert np.allclose(vec(*des.scaled(types.table), types.counts), vec(*des.scaled(t)), rtol=1e-9, atol=1e-9)
    rand = Randomness(Transcript())
    crit.evaluate(ctx, rand)     # the recorded true vector is the row-wise one
    # the DP fit's features and target are on the exact grid (criteria/rounding.on_grid)
    grid = [on_grid(a, t.n) for a in des.scaled(t)]
    assert np.array_equal(rand.transcript[0]["true"], vec(*grid))
    assert np.allclose(rand.transcript[0]["true"], vec(*des.scaled(t)), rtol=1e-5, atol=1e-5)
    mae = make_criterion({"id": "mae", "type": "regression_mae_difference", "target": target,
                          "bounds": [L, U], "threshold": 5.0, "epsilon": 0.04})
    beta = np.asarray(ctx.released["reg"]["coefficients"])
    want = mae_difference(des, t, beta, ols(des.z(c), des.y(c)))
    assert mae.value(ctx, beta) == pytest.approx(want, rel=1e-7, abs=1e-7)


@settings(max_examples=60, deadline=None)
@given(pair(max_d=4, max_n=30), st.sampled_from(["coefficients", "accuracy"]), st.integers(0, 2**32 - 1))
def test_classification_counts_equal_rows(tc, report, seed):
    t, c = tc
    target = t.columns[0]
    assume(target.size >= 2)
    entry = {"id": "cls", "type": "classification", "target": target.name,
             "positive": [target.labels[0]], "report": report, "threshold": 1.0, "epsilon": 0.5}
    crit, ctx = make_criterion(entry), EvalContext(t, c, {})
    des, y_t = crit.design(ctx), crit.y(t)
    types = types_of(t)
    vec = logistic_fm_vector(des.tx(t), y_t)   # the fit's input: the same from record types
    assert np.allclose(logistic_fm_vector(des.tx(types.table), crit.y(types.table), types.counts),
                       vec, rtol=1e-9, atol=1e-9)
    beta_c = crit.synth_coefficients(ctx)
    if report == "coefficients":
        # a singular fit is decided by rounding: compare well-conditioned ones only
        assume(np.linalg.cond(_quadratic(vec, des.d, t.n)[0]) < 1e8)
        want = np.abs(exact_fit(des, t, y_t)[1:] - beta_c[1:]).sum()
        assert crit.value(ctx) == pytest.approx(want, rel=1e-6, abs=1e-6)
        return
    beta_ref = beta_c + np.random.default_rng(seed).normal(size=beta_c.size)
    preds = [beta[0] + des.z(t) @ beta[1:] for beta in (beta_ref, beta_c)]
    assume(all(np.all(np.abs(p) > 1e-9) for p in preds))   # no sign decided by rounding
    want = abs(float((accuracy(des, t, y_t, beta_ref) - accuracy(des, t, y_t, beta_c)).mean()))
    assert crit.value(ctx, beta_ref) == pytest.approx(want, abs=1e-12)


@settings(max_examples=80, deadline=None)
@given(means_case(), st.sampled_from([[0.5], [0.25, 0.9]]))
def test_quantile_counts_equal_rows(cs, levels):
    t, c, entry, spec = cs
    crit = make_criterion({"id": "q", "type": "quantile", "target": entry["target"],
                           "by": entry["by"], "quantiles": levels, "threshold": 1.0, "epsilon": 1.0})
    ctx, rows_ctx = EvalContext(t, c, spec), EvalContext(fresh(t), fresh(c), spec)
    cand, of_code = crit.candidates(c)
    K = cand.size
    for item in crit.by:   # the histograms behind every score: the same integers as from rows
        for coded in (t, c):
            k = of_code[coded.codes[:, coded.column(crit.target)]]
            ids, labels = (np.zeros(coded.n, np.int64), ["all"]) if item is None \
                else group_ids(coded, item, spec)[:2]
            rows = np.bincount(ids * K + k, minlength=len(labels) * K).reshape(len(labels), K)
            assert np.array_equal(crit._hist(coded, item, ctx, of_code, K)[0], rows)
    assert crit.value(ctx) == crit.value(rows_ctx)
    assert crit.sensitivity(ctx) == crit.sensitivity(rows_ctx)


@settings(max_examples=80, deadline=None)
@given(pair(max_d=4, max_n=25), st.integers(0, 2))
def test_faithfulness_counts_equal_rows(tc, max_adjacent):
    t, c = tc
    ordered = [x.name for x in t.columns if x.ordered]
    rules = {"exact": [], "adjacent": ordered, "max_adjacent": max_adjacent}
    crit = make_criterion({"id": "f", "type": "faithfulness", "threshold": 0.05, "epsilon": 0.01})
    want = 1.0 - max_matching_rows(t, c, rules) / t.n
    assert crit.value(EvalContext(t, c, {"faithfulness": rules})) == pytest.approx(want, **TOL)


def test_births_like_criteria_counts_equal_rows():
    """A larger births-like pair: kway, ratio, means and faithfulness against the row code."""
    rng = np.random.default_rng(3)
    t, c = births_like(3000, rng), births_like(3000, rng)
    ctx = EvalContext(t, c, {"group_bins": BIRTHS_GROUP_BINS, "faithfulness": BIRTHS_FAITHFULNESS})
    assert make_criterion({"id": "k", "type": "kway_marginals", "threshold": 0.1, "epsilon": 1,
                           "max_k": 3}).value(ctx) == pytest.approx(kway_rows(t, c, 3), **TOL)
    means = make_criterion({"id": "m", "type": "conditional_means", "target": "birth_weight",
                            "by": ["birth_sex", "parity", "mother_age", None],
                            "bounds": [1400, 4600], "threshold": 100, "epsilon": 0.17})
    assert means.value(ctx, np.random.default_rng(5)) == pytest.approx(
        condmeans_rows(means, ctx, order_keys(means, ctx, 5)), **TOL)
    faith = make_criterion({"id": "f", "type": "faithfulness", "threshold": 0.05, "epsilon": 0.01})
    assert faith.value(ctx) == pytest.approx(1.0 - max_matching_rows(t, c, BIRTHS_FAITHFULNESS) / t.n, **TOL)


# --------------------------------------------------------------------------- sampling, projection


class FakeModel:
    """Samples rows uniformly over the domain (a stand-in for a fitted generator)."""

    def __init__(self, domain: tuple[int, ...]) -> None:
        self.domain = domain

    def sample(self, m: int, rng: np.random.Generator) -> np.ndarray:
        return np.stack([rng.integers(0, k, size=m) for k in self.domain], axis=1).astype(np.int64)


BIRTH_CONSTRAINTS = [
    {"name": "young, high parity", "when": [["mother_age", "<", 23], ["parity", ">", 6]]},
    {"name": "early and heavy", "when": [["gestation_week", "<", 34], ["birth_weight", ">", 3999]]},
    {"name": "month", "when": [["birth_month", "in", [1, 2]]]},
]


@pytest.mark.parametrize("constraints", [[], BIRTH_CONSTRAINTS])
@pytest.mark.parametrize("n,min_count", [(1, 1), (7, 2), (2000, 2), (2000, 5)])
def test_sampling_and_projection_on_cells_are_the_row_path(constraints, n, min_count):
    cols = births_columns()
    model = FakeModel(tuple(x.size for x in cols))
    rec = Randomness(Transcript())
    sampled = it.sample_cells(model, n, constraints, cols, rec)
    cand = it.project_cells(sampled, cols, min_count, rec.rng("projection"))
    rep = Randomness.replay(rec.transcript)   # the same draws, row by row
    rows = it.sample_constrained(model, n, constraints, cols, rep)
    assert np.array_equal(sampled, mixed_radix_index(rows, [x.size for x in cols]))
    assert np.array_equal(cand.codes, project(rows, min_count, rep.rng("projection")))
    assert types_of(cand).n == n and np.array_equal(types_of(cand).table.codes,
                                                     types_of(fresh(cand)).table.codes)


def test_projection_refuses_what_project_refuses():
    cols = births_columns()
    with pytest.raises(ProjectionError):
        it.project_cells(np.zeros(2, np.int64), cols, 3, np.random.default_rng(0))


def test_violation_table_is_the_row_rule():
    cols = births_columns()
    t = births_like(5000, np.random.default_rng(2))
    table = violation_table(BIRTH_CONSTRAINTS, cols)
    cells_ = mixed_radix_index(t.codes, t.domain)
    assert np.array_equal(table[cells_], synthetic_violations(BIRTH_CONSTRAINTS, t))


# --------------------------------------------------------------------------- the cached T


CONFIGS = [{"columns": {"birth_month": "month", "mother_age": age, "parity": parity,
                        "gestation_week": "coarse", "birth_sex": "sex", "birth_weight": "100g"}}
           for age in ("coarse", "coarse-37", "years") for parity in ("coarse", "unit")]


@pytest.fixture(scope="module")
def small_prepared(births_spec, shared_data_dir):
    from dpbundle.release.data.prepare import prepare

    path = shared_data_dir / "nvss2019_singleton_10k.csv"
    if not path.exists():
        pytest.skip("shared/data/nvss2019_singleton_10k.csv is not available")
    return prepare(path, births_spec)


def test_cache_returns_the_fresh_transform(births_spec, small_prepared):
    held = []
    for config in CONFIGS + CONFIGS[::-1]:   # more binnings than the cache keeps, then again
        real = tr.cached_transform(small_prepared, births_spec, config)
        want = tr.transform(small_prepared, births_spec, config)
        assert real.columns == want.columns and np.array_equal(real.codes, want.codes)
        assert real.codes.dtype == np.int64 and not real.codes.flags.writeable
        types = types_of(real)   # remembered: equal to the types of the fresh rows
        assert np.array_equal(types.table.codes, types_of(want).table.codes)
        assert np.array_equal(types.counts, types_of(want).counts)
        held.append(real)
    assert tr.cached_transform(small_prepared, births_spec, CONFIGS[0]) is held[-1]
    assert len(tr._T_CACHE[id(small_prepared)]) == tr.T_CACHE_SIZE


def test_cache_is_per_table_private_and_goes_with_it(births_spec, small_prepared):
    sub = small_prepared.subset(np.arange(500))
    before = pickle.dumps(sub)
    real = tr.cached_transform(sub, births_spec, CONFIGS[0])
    assert real.n == 500 and pickle.dumps(sub) == before   # nothing attached to the table
    assert np.array_equal(real.codes, tr.transform(sub, births_spec, CONFIGS[0]).codes)
    key = id(sub)
    assert key in tr._T_CACHE
    del sub, real
    gc.collect()
    assert key not in tr._T_CACHE


def test_iteration_replays_on_the_row_path(births_spec, small_prepared):
    """run_iteration (counts) with the row sampler (version 1) against a row-wise replay of its
    transcript: same C, same values. (Version 2: tests/test_count_sampler.py.)"""
    config = dict(CONFIGS[0], generator={"type": "privbayes", "flavour": "theta",
                                         "epsilon_split": 0.25, "theta": 30},
                  projection={"min_count": 2})
    rec = Randomness(Transcript())
    result = it.run_iteration(small_prepared, births_spec, config, rec, sampler=1)
    rep = Randomness.replay(rec.transcript)
    rep.mark("arithmetic", version=2)     # run_iteration's first record (mechanisms/arithmetic.py)
    real = tr.transform(small_prepared, births_spec, config)   # a new object: types from rows
    model = it.make_config_generator(births_spec, config).fit(real.codes, real.domain, rep)
    rows = it.sample_constrained(model, real.n, births_spec.raw["synthetic_constraints"],
                                 real.columns, rep)
    cand = real.with_codes(project(rows, 2, rep.rng("projection")))
    assert np.array_equal(cand.codes, result.candidate.codes)
    ctx = EvalContext(real=real, synth=cand, spec=births_spec.raw, alternatives=config["columns"])
    with arithmetic.use(2):
        values = [make_criterion(e).evaluate(ctx, rep).dp_value for e in births_spec.criteria]
    rep.check_finished()
    assert values == [r.dp_value for r in result.results]
