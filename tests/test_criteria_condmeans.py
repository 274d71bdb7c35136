"""conditional_means: value against a loop reference, resize coupling, sensitivity."""
from __future__ import annotations

import bisect
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from criteria_util import BIRTHS_GROUP_BINS, births_like, neighbours
from dpbundle.mechanisms.cells import types_of
from dpbundle.mechanisms.coding import mixed_radix_index
from dpbundle.mechanisms.criteria import EvalContext, make_criterion
from dpbundle.mechanisms.noise import Randomness


def reference(t, c, target, by, L, U, group_bins, keys, margin_share=0.01, margin_plus=1):
    """Straightforward loops over groups and records (keys=None: expected subsample mean)."""
    n = t.n
    jt = t.column(target)
    yv = lambda D: [min(max(float(D.columns[jt].values[r[jt]]), L), U) for r in D.codes]
    yt, yc = yv(t), yv(c)
    mid = (L + U) / 2
    margin = math.ceil(margin_share * n) + margin_plus
    err = abs(sum(yt) / n - sum(yc) / n) if None in by else 0.0
    for col in by:
        if col is None:
            continue
        j = t.column(col)
        if col in group_bins:
            edges = group_bins[col]["edges"]
            grp = lambda r: bisect.bisect_right(edges, float(t.columns[j].values[r[j]]))
            G = len(edges) + 1
        else:
            grp = lambda r: int(r[j])
            G = t.columns[j].size
        gt = [grp(r) for r in t.codes]
        gc = [grp(r) for r in c.codes]
        for g in range(G):
            cy = [yc[i] for i in range(n) if gc[i] == g]
            m = max(len(cy) - margin, 1)
            rows = [i for i in range(n) if gt[i] == g]
            if keys is None and len(rows) > m:
                mean_t = sum(yt[i] for i in rows) / len(rows)
            else:
                if keys is not None:
                    rows = sorted(rows, key=lambda i: (keys[i], i))[:m]
                mean_t = (sum(yt[i] for i in rows) + (m - len(rows)) * mid) / m
            mean_c = sum(cy) / len(cy) if cy else mid
            err = max(err, abs(mean_t - mean_c))
    return err


def order_keys(crit, ctx, t, rng) -> np.ndarray:
    """Priority key (position) of every row of T in the criterion's random order for ``rng``."""
    lazy, fine = crit.resize_order(ctx, rng)
    row_type = np.searchsorted(types_of(t).cells, mixed_radix_index(t.codes, t.domain))
    return lazy.positions(fine[row_type])


@st.composite
def case(draw):
    t, t2, c = draw(neighbours(max_d=3, max_size=5, max_n=30))
    names = [col.name for col in t.columns]
    target = draw(st.sampled_from(names))
    others = [x for x in names if x != target] or names
    by = draw(st.lists(st.sampled_from(others + [None]), min_size=1, max_size=3, unique=True))
    group_bins = {}
    for col in others:
        if draw(st.booleans()):
            edges = sorted(draw(st.lists(st.integers(-3, 15), min_size=1, max_size=3, unique=True)))
            group_bins[col] = {"edges": edges, "labels": [f"g{i}" for i in range(len(edges) + 1)]}
    vals = t.columns[t.column(target)].values
    L = draw(st.integers(int(vals.min()) - 2, int(vals.max())))
    U = draw(st.integers(L + 1, L + 20))
    share = draw(st.sampled_from([0.0, 0.01, 0.1]))
    return t, t2, c, target, by, group_bins, float(L), float(U), share


def entry(target, by, L, U, share=0.01):
    return {"id": "m", "type": "conditional_means", "target": target, "by": by,
            "bounds": [L, U], "threshold": 1.0, "epsilon": 0.1, "margin_share": share}


@settings(max_examples=250, deadline=None)
@given(case(), st.integers(0, 2**32 - 1))
def test_value_reference_and_neighbour_sensitivity(cs, seed):
    t, t2, c, target, by, gb, L, U, share = cs
    crit = make_criterion(entry(target, by, L, U, share))
    spec = {"group_bins": gb}
    ctx, ctx2 = EvalContext(t, c, spec), EvalContext(t2, c, spec)
    # the value keeps the first m_g records of each group in a random order of T drawn on
    # record types; as priority keys, that order is the position of each row
    keys = order_keys(crit, ctx, t, np.random.Generator(np.random.PCG64(seed)))
    v = crit.value(ctx, np.random.Generator(np.random.PCG64(seed)))
    assert v == pytest.approx(reference(t, c, target, by, L, U, gb, keys, share), abs=1e-9)
    assert crit.value(ctx) == pytest.approx(reference(t, c, target, by, L, U, gb, None, share),
                                            abs=1e-9)
    sens, inputs = crit.sensitivity(ctx)
    v2 = reference(t2, c, target, by, L, U, gb, keys, share)  # same keys (the proof's coupling)
    assert abs(reference(t, c, target, by, L, U, gb, keys, share) - v2) <= sens + 1e-9
    # min group size after resize, from C and the domain only, written out
    margin = math.ceil(share * t.n) + 1
    sizes = [t.n] if None in by else []
    for col in by:
        if col is None:
            continue
        cc = c.columns[c.column(col)]
        if col in gb:
            gid = lambda v: bisect.bisect_right(gb[col]["edges"], float(v))
            reach = {gid(v) for v in cc.values}
            gc = [gid(cc.values[k]) for k in c.codes[:, c.column(col)]]
        else:
            reach = set(range(cc.size))
            gc = list(c.codes[:, c.column(col)])
        sizes += [max(gc.count(g) - margin, 1) for g in reach]
    assert inputs["min_group_size"] == min(sizes)
    assert sens == pytest.approx((U - L) / min(sizes))
    assert crit.sensitivity(ctx2) == (sens, inputs)   # C only


def test_group_absent_from_candidate():
    """A group present in T but not in C: m_g = 1, C mean = midpoint, sensitivity U - L."""
    rng = np.random.default_rng(0)
    t = births_like(2000, rng)
    codes = t.codes.copy()
    codes[codes[:, 4] == 1, 4] = 0          # C has no girls at all
    c = t.with_codes(codes)
    crit = make_criterion(entry("birth_weight", ["birth_sex", None], 1400, 4600))
    ctx = EvalContext(t, c, {"group_bins": BIRTHS_GROUP_BINS})
    sens, inputs = crit.sensitivity(ctx)
    assert inputs["min_group_size"] == 1 and inputs["min_group"] == "birth_sex=F"
    assert inputs["synthetic_group_sizes"]["birth_sex"]["F"] == 0
    assert sens == 3200.0
    v = crit.value(ctx, np.random.default_rng(1))
    assert v <= 1600.0 + 1e-9


def test_births_like_group_sizes_and_margin():
    rng = np.random.default_rng(5)
    t = births_like(20000, rng)
    c = births_like(20000, rng)
    crit = make_criterion(entry("parity", ["mother_age", None], 1, 11))
    sens, inputs = crit.sensitivity(EvalContext(t, c, {"group_bins": BIRTHS_GROUP_BINS}))
    assert inputs["margin"] == 201
    ages = c.values_of("mother_age")
    sizes = [int(((ages >= lo) & (ages < hi)).sum())
             for lo, hi in [(-1e9, 25), (25, 30), (30, 35), (35, 1e9)]]
    assert list(inputs["synthetic_group_sizes"]["mother_age"].values()) == sizes
    assert inputs["min_group_size"] == max(min(sizes) - 201, 1)
    assert sens == pytest.approx(10 / max(min(sizes) - 201, 1))


def test_evaluate_records_seed_then_laplace():
    rng = np.random.default_rng(2)
    t = births_like(500, rng)
    crit = make_criterion(entry("gestation_week", ["parity", None], 28, 43))
    rand = Randomness()
    res = crit.evaluate(EvalContext(t, t, {"group_bins": BIRTHS_GROUP_BINS}), rand)
    kinds = [(r["kind"], r["purpose"]) for r in rand.transcript.records]
    assert kinds == [("seed", "criterion m resize"), ("laplace", "criterion m")]
    assert res.sensitivity == rand.transcript.records[1]["sensitivity"]


def test_unreachable_group_is_left_out():
    """A group no code can fall in (edge beyond the domain) does not lower min m_g."""
    rng = np.random.default_rng(8)
    t = births_like(3000, rng)
    gb = {"parity": {"edges": [2, 4, 50], "labels": ["1", "2-3", "4-49", "50+"]}}
    crit = make_criterion(entry("birth_weight", ["parity"], 1400, 4600))
    sens, inputs = crit.sensitivity(EvalContext(t, t, {"group_bins": gb}))
    assert "50+" not in inputs["synthetic_group_sizes"]["parity"]
    assert inputs["min_group_size"] > 1
    sizes = inputs["synthetic_group_sizes"]["parity"]
    assert inputs["min_group_size"] == max(min(sizes.values()) - 31, 1)


def test_sensitivity_worst_case_is_attained():
    """Deterministic worst case: the smallest resized group (m_g = s_g - margin) holds exactly
    m_g real records; one of them moves from U to L and the error moves by (U - L)/m_g. A
    sensitivity of half that (or one based on the unresized s_g) fails here."""
    from criteria_util import int_coding
    from dpbundle.mechanisms.coding import Coded

    L, U, n = 0.0, 10.0, 200
    cols = (int_coding("g", [0, 1, 2]), int_coding("y", [0, 1, 2], values=[L, U]))
    margin = math.ceil(0.01 * n) + 1                       # 3
    s0 = 10                                                # C: 10 records in group 0, y = L
    c = Coded(codes=np.array([[0, 0]] * s0 + [[1, 0]] * (n - s0)), columns=cols)
    m0 = s0 - margin                                       # 7
    t = Coded(codes=np.array([[0, 1]] * m0 + [[1, 0]] * (n - m0)), columns=cols)
    codes2 = t.codes.copy()
    codes2[0, 1] = 0                                       # one record of group 0: y U -> L
    t2 = t.with_codes(codes2)
    crit = make_criterion(entry("y", ["g"], L, U))
    ctx, ctx2 = EvalContext(t, c, {}), EvalContext(t2, c, {})
    sens, inputs = crit.sensitivity(ctx)
    assert inputs["min_group_size"] == m0
    v = crit.value(ctx, np.random.default_rng(0))
    v2 = crit.value(ctx2, np.random.default_rng(0))
    assert v == pytest.approx(U - L)
    assert abs(v - v2) == pytest.approx((U - L) / m0)
    assert abs(v - v2) <= sens + 1e-12
