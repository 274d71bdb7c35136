"""Issue 22, section 5: tighter and exactly rounded sensitivities.

1. The classification criterion's functional-mechanism sensitivity is (d + 2)^2 / 8 (1 at
   d = 1), found by brute force, attained, kept on neighbouring datasets, mirrored in the audit.
2. Every DP statistic moves by at most its declared sensitivity *as a float*: the overshoots of
   the earlier float computations are reproduced (quantile scores, MST scores, shares M/n,
   functional-mechanism vectors), and the exact computations are checked on neighbours, with
   no tolerance: every float difference is taken exactly, as a Fraction.

Every expected value here is computed independently (definitions, fractions, brute force), not
copied from the code under test.
"""
from __future__ import annotations

import itertools
import math
from decimal import Decimal, getcontext
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from criteria_util import cat_coding, int_coding, neighbours
from dpbundle.audit.labels import AuditColumn, SpecView
from dpbundle.audit.sensitivity import recompute_sensitivity
from dpbundle.mechanisms.coding import Coded
from dpbundle.mechanisms.criteria import EvalContext, make_criterion
from dpbundle.mechanisms.criteria.classification import logistic_fm_sensitivity, logistic_fm_vector
from dpbundle.mechanisms.criteria.quantile import quantile_scores
from dpbundle.mechanisms.criteria.regression import fm_sensitivity, fm_vector, ss_sensitivity, ss_vector
from dpbundle.mechanisms.criteria.rounding import (dyadic_units, grid_bits, lipschitz_float,
                                                   on_grid)
from dpbundle.mechanisms.mst import independence_estimate, selection_score
from dpbundle.mechanisms.noise import Randomness, map_distance
from dpbundle.mechanisms.privbayes import (mi_of_table, mi_score_sensitivity, r_numerator,
                                           r_of_table, r_score_sensitivity)
from dpbundle.mechanisms.privsyn import indif_numerator, indif_score

F = Fraction
SLOW = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def fdiff(a: float, b: float) -> Fraction:
    """|a - b| exactly (a float subtraction could round)."""
    return abs(F(float(a)) - F(float(b)))


def l1(u, v) -> Fraction:
    """Exact L1 distance of two float vectors."""
    return sum((fdiff(a, b) for a, b in zip(np.ravel(u), np.ravel(v))), F(0))


# ================================================================ 1. classification sensitivity

def taylor_logistic_vector(x, y) -> list[Fraction]:
    """The noised coefficients of one record by their definition (fractions): lin_j =
    (1/2 - y) x_j for j = 0..d-1, then quad_jk for j <= k in row-major order without (0, 0):
    x_j^2 / 8 on the diagonal, x_j x_k / 4 off it (x_0 = 1)."""
    x = [F(1)] + [F(v) for v in x]
    d = len(x)
    s = F(1, 2) - F(y)
    lin = [s * xj for xj in x]
    quad = [(x[j] * x[k] / 8 if j == k else x[j] * x[k] / 4)
            for j in range(d) for k in range(j, d) if (j, k) != (0, 0)]
    return lin + quad


def claimed(d: int) -> Fraction:
    """The issue's claim, written here: (d + 2)^2 / 8 for d >= 2; 1 for d = 1 (only lin_0)."""
    return F(1) if d == 1 else F((d + 2) ** 2, 8)


def brute_force_max(d: int, grid) -> Fraction:
    recs = [(x, y) for x in itertools.product(grid, repeat=d - 1) for y in (0, 1)]
    V = np.array([[float(v) for v in taylor_logistic_vector(x, y)] for x, y in recs])
    best = 0.0   # all entries are dyadic with few bits: float differences and sums are exact
    for i in range(len(V)):
        best = max(best, float(np.abs(V[i] - V).sum(axis=1).max()))
    return F(best)


@pytest.mark.parametrize("d", [1, 2, 3, 4, 5])
def test_brute_force_maximum_over_the_record_domain(d):
    """Over {-1, -1/2, 0, 1/2, 1}^(d-1) x {0, 1} (corners, midpoints and 0) the largest change
    of the vector between two records is exactly the claim, and the code's formula says so."""
    worst = brute_force_max(d, (-1, -0.5, 0, 0.5, 1))
    assert worst == claimed(d)
    assert F(logistic_fm_sensitivity(d)) == claimed(d)


@pytest.mark.parametrize("d", [3, 5])
def test_corners_alone_miss_the_maximum_for_odd_d(d):
    """The extreme points of the box reach ((d + 2)^2 - 1)/8 only: the maximiser needs a 0."""
    assert brute_force_max(d, (-1, 1)) == F((d + 2) ** 2 - 1, 8)


def test_the_vector_of_the_code_is_the_definition():
    rng = np.random.default_rng(1)
    for d in (1, 2, 4):
        for _ in range(20):
            x = rng.choice([-1.0, -0.5, 0.0, 0.25, 1.0], size=d - 1)
            y = float(rng.integers(0, 2))
            got = logistic_fm_vector(np.array([[1.0, *x]]), np.array([y]))
            assert [F(v) for v in got] == taylor_logistic_vector(x, y)


def attaining_pair(d: int) -> tuple[tuple, tuple]:
    """(x, y=0) and (x', y'=1) of the derivation: x = all ones; x' has floor(d/2) ones, a 0 if
    d is odd, -1 for the rest (d - 1 features)."""
    half = d // 2
    rest = d - 1 - half - (d % 2)
    x2 = (1,) * half + ((0,) if d % 2 else ()) + (-1,) * rest
    return ((1,) * (d - 1), 0), (x2, 1)


@pytest.mark.parametrize("d", range(2, 11))
def test_the_bound_is_attained(d):
    (x, y), (x2, y2) = attaining_pair(d)
    assert len(x2) == d - 1
    a, b = taylor_logistic_vector(x, y), taylor_logistic_vector(x2, y2)
    assert sum(abs(u - v) for u, v in zip(a, b)) == claimed(d)
    # and the code's float vectors give the same
    va = logistic_fm_vector(np.array([[1.0, *x]], float), np.array([float(y)]))
    vb = logistic_fm_vector(np.array([[1.0, *x2]], float), np.array([float(y2)]))
    assert l1(va, vb) == claimed(d)


@st.composite
def two_records(draw):
    d = draw(st.integers(1, 7))
    unit = st.one_of(st.sampled_from([-1.0, 0.0, 1.0]), st.floats(-1, 1))
    x = draw(st.lists(unit, min_size=d - 1, max_size=d - 1))
    x2 = draw(st.lists(unit, min_size=d - 1, max_size=d - 1))
    return d, x, draw(st.sampled_from([0, 1])), x2, draw(st.sampled_from([0, 1]))


@FAST
@given(two_records())
def test_no_two_records_exceed_the_bound(rec):
    """Any two records of [-1, 1]^(d-1) x {0, 1} (not only grid points), exactly."""
    d, x, y, x2, y2 = rec
    a, b = taylor_logistic_vector(x, y), taylor_logistic_vector(x2, y2)
    assert sum(abs(u - v) for u, v in zip(a, b)) <= claimed(d)


@st.composite
def design_neighbours(draw):
    """(d, T rows, y, T' rows, y') with features in [-1, 1]: random, or worst-case (one record
    of T replaced by the other half of an attaining pair)."""
    d = draw(st.integers(1, 6))
    n = draw(st.integers(1, 40))
    unit = st.one_of(st.sampled_from([-1.0, 0.0, 1.0, 0.5]), st.floats(-1, 1))
    X = np.array(draw(st.lists(st.lists(unit, min_size=d - 1, max_size=d - 1), min_size=n,
                               max_size=n)), dtype=float).reshape(n, d - 1)
    y = np.array(draw(st.lists(st.sampled_from([0.0, 1.0]), min_size=n, max_size=n)))
    i = draw(st.integers(0, n - 1))
    X2, y2 = X.copy(), y.copy()
    if d >= 2 and draw(st.booleans()):
        (a, ya), (b, yb) = attaining_pair(d)
        X[i], y[i], X2[i], y2[i] = a, ya, b, yb
    else:
        X2[i] = draw(st.lists(unit, min_size=d - 1, max_size=d - 1))
        y2[i] = draw(st.sampled_from([0.0, 1.0]))
    return d, X, y, X2, y2


@SLOW
@given(design_neighbours())
def test_released_logistic_vector_on_neighbours(case):
    """The vector the DP fit noises (features on the exact grid) moves by at most the
    sensitivity between neighbouring datasets, exactly, and by exactly that much for the
    worst-case neighbours."""
    d, X, y, X2, y2 = case
    n = len(y)
    tx = on_grid(np.column_stack([np.ones(n), X]), n)
    tx2 = on_grid(np.column_stack([np.ones(n), X2]), n)
    dist = l1(logistic_fm_vector(tx, y), logistic_fm_vector(tx2, y2))
    assert dist <= claimed(d)
    # the same with the rows as record types with counts (the code's hot path): the grid is
    # chosen for the number of records, here 3n (the code passes the public n = sum of counts)
    w = np.full(n, 3.0)
    tx, tx2 = (on_grid(np.column_stack([np.ones(n), x]), 3 * n) for x in (X, X2))
    assert l1(logistic_fm_vector(tx, y, w), logistic_fm_vector(tx2, y2, w)) <= 3 * claimed(d)


def _cls_columns():
    y = cat_coding("y", ["no", "yes"], [0, 1])
    feats = tuple(int_coding(f"f{j}", [0, 1, 2, 3]) for j in range(3))   # numbers 0, 1, 2
    return (y,) + feats


def _cls_table(rows) -> Coded:
    return Coded(codes=np.array(rows, dtype=np.int64), columns=_cls_columns())


def test_classification_release_attains_its_sensitivity_through_the_criterion():
    """Through the criterion: C spans every feature value (scaled to -1, 0, 1); T' changes one
    record of T from (y = no, x = (1, 1, 1)) to (y = yes, x = (1, 1, -1)) -- the attaining pair
    of d = 4 -- and the recorded true vectors differ by exactly 36/8 = the declared sensitivity."""
    rng = np.random.default_rng(4)
    c_rows = [[int(rng.integers(0, 2))] + [0, 0, 0] for _ in range(10)] + \
             [[int(rng.integers(0, 2))] + [2, 2, 2] for _ in range(10)] + \
             [[int(rng.integers(0, 2))] + list(rng.integers(0, 3, 3)) for _ in range(40)]
    c = _cls_table(c_rows)
    t_rows = [[int(rng.integers(0, 2))] + list(rng.integers(0, 3, 3)) for _ in range(60)]
    t_rows[0] = [0, 2, 2, 2]
    t2_rows = [r[:] for r in t_rows]
    t2_rows[0] = [1, 2, 2, 0]
    entry = {"id": "cls", "type": "classification", "target": "y", "positive": "yes",
             "threshold": 3, "epsilon": 0.5}
    vecs = []
    for rows in (t_rows, t2_rows):
        crit = make_criterion(entry)
        ctx = EvalContext(_cls_table(rows), c, {})
        rand = Randomness()
        res = crit.evaluate(ctx, rand)
        vecs.append(rand.transcript[0]["true"])
        assert res.sensitivity == 4.5 and crit.design(ctx).d == 4
    des_tx = make_criterion(entry).design(EvalContext(c, c, {})).tx(c)
    assert set(np.round(des_tx[:, 1:].ravel(), 12)) == {-1.0, 0.0, 1.0}
    assert l1(*vecs) == F(36, 8)


@SLOW
@given(neighbours(columns=(cat_coding("y", ["no", "yes", "maybe"], [0, 1, 2]),
                           int_coding("f0", [0, 1, 2, 4]), cat_coding("f1", ["a", "b", "c"], [0, 1, 2])),
                  max_n=30, min_n=2))
def test_classification_release_on_random_neighbours(cs):
    """The transcripts of two releases on neighbouring T (same C) record true vectors at most
    the declared sensitivity apart, exactly."""
    t, t2, c = cs
    entry = {"id": "cls", "type": "classification", "target": "y", "positive": "yes",
             "threshold": 3, "epsilon": 0.5}
    vecs, sens = [], None
    for tt in (t, t2):
        rand = Randomness()
        res = make_criterion(entry).evaluate(EvalContext(tt, c, {}), rand)
        vecs.append(rand.transcript[0]["true"])
        sens = res.sensitivity
    assert l1(*vecs) <= F(sens)


# -------------------------------------------------------------------- the audit's mirror

def _view(spec: dict, cols) -> SpecView:
    out = [AuditColumn(name=cc.name, alternative="only", labels=cc.labels,
                       numbers=np.asarray(cc.values), ordered=cc.ordered,
                       categories=None if cc.ordered else cc.labels) for cc in cols]
    return SpecView(spec=spec, configuration={}, configuration_id="", columns=out, min_count=None,
                    notes=[])


def test_audit_recomputes_the_new_classification_sensitivity():
    from dpbundle.audit.sensitivity import _logistic_delta

    for d in range(1, 40):
        assert F(_logistic_delta(d)) == claimed(d) == F(logistic_fm_sensitivity(d))
    rng = np.random.default_rng(2)
    cols = _cls_columns()
    codes = np.column_stack([rng.integers(0, k, 200) for k in (2, 3, 3, 3)])
    c = Coded(codes=codes, columns=cols)
    entry = {"id": "cls", "type": "classification", "target": "y", "positive": "yes",
             "threshold": 3, "epsilon": 0.5}
    sens, inputs = make_criterion(entry).sensitivity(EvalContext(c, c, {}))
    view = _view({}, cols)
    want, facts = recompute_sensitivity(entry, {"sensitivity": sens, "sensitivity_inputs": inputs},
                                        view, codes, 200)
    assert want == sens == 4.5 and facts["d"] == 4 and "legacy_formula" not in facts


def test_audit_accepts_the_legacy_bound_of_earlier_bundles_only():
    """A bundle of an earlier version declared (2 d^2 + 7 d - 1)/8 (more noise, sound): the
    audit recomputes that value for it and says so; any other declared value gets the exact one
    (and the budget check then reports the mismatch)."""
    rng = np.random.default_rng(3)
    cols = _cls_columns()
    codes = np.column_stack([rng.integers(0, k, 100) for k in (2, 3, 3, 3)])
    entry = {"id": "cls", "type": "classification", "target": "y", "positive": "yes",
             "threshold": 3, "epsilon": 0.5}
    view = _view({}, cols)
    legacy = 4 + 3 / 8 + 4 * 3 / 4     # d = 4, written out: d + (d-1)/8 + d(d-1)/4
    want, facts = recompute_sensitivity(entry, {"sensitivity": legacy}, view, codes, 100)
    assert want == legacy == 7.375 and facts["legacy_formula"] == "(2 d^2 + 7 d - 1) / 8"
    for other in (6.0, 7.0, 4.5, 2.0):
        want, facts = recompute_sensitivity(entry, {"sensitivity": other}, view, codes, 100)
        assert want == 4.5 and "legacy_formula" not in facts


# ================================================================ 2. exactly rounded statistics

# ---------------------------------------------------------------- quantile scores

def old_quantile_scores(hist, alpha):
    """The float formula of earlier versions (for the overshoot demonstration)."""
    hist = np.asarray(hist, dtype=np.float64)
    below = np.cumsum(hist, axis=-1) - hist
    above = hist.sum(axis=-1, keepdims=True) - below - hist
    return -np.abs((1.0 - alpha) * below - alpha * above)


def exact_scores(hist, alpha) -> list[Fraction]:
    a = F(alpha)
    out = []
    for k in range(len(hist)):
        below, above = sum(int(v) for v in hist[:k]), sum(int(v) for v in hist[k + 1:])
        out.append(-abs((1 - a) * below - a * above))
    return out


def _neighbour_hist(h, rng):
    h2 = h.copy()
    kind = rng.integers(0, 3)
    if kind != 2:                             # leave the group, or move inside it
        h2[rng.choice(np.flatnonzero(h))] -= 1
    if kind != 0:                             # join the group, or move inside it
        h2[rng.integers(0, h.size)] += 1
    return h2


def test_old_quantile_scores_overshoot_the_sensitivity():
    """The reported overshoot: float scores of neighbouring groups more than 1 apart -- beyond
    the one-ulp slack of the noise layer's map (nextafter(1) = 1 + 2^-52)."""
    rng = np.random.default_rng(0)
    limit = F(map_distance(1.0))
    worst = F(0)
    for _ in range(400):
        alpha = float(rng.choice([0.1, 0.3, 0.9, 0.05]))
        h = rng.integers(10**5, 10**6, size=6)
        h2 = _neighbour_hist(h, rng)
        s, s2 = old_quantile_scores(h, alpha), old_quantile_scores(h2, alpha)
        worst = max(worst, max(fdiff(a, b) for a, b in zip(s, s2)))
    assert worst > limit, float(worst - 1)
    # e.g. the 1.0000000000000018: 1 + 8 ulps
    assert worst - 1 >= F(2) ** -52 * 4


@FAST
@given(st.lists(st.integers(0, 2**21), min_size=1, max_size=7),
       st.one_of(st.sampled_from([0.5, 0.1, 0.25, 0.9, 0.05, 0.75, 0.3]), st.floats(0.001, 0.999)),
       st.integers(0, 2**31), st.integers(2**22, 2**30))
def test_quantile_scores_on_neighbours_exactly(hist, alpha, seed, n):
    """Random groups (counts up to 2^21, public n up to 2^30) and a record that moves inside,
    leaves or joins the group: every released score moves by at most 1, exactly; each score is
    within the grid 2^-(52 - bitlen(n)) below the exact score."""
    h = np.array(hist, dtype=np.int64)
    assume(h.sum() > 0)
    h2 = _neighbour_hist(h, np.random.default_rng(seed))
    s, s2 = quantile_scores(h, alpha, n), quantile_scores(h2, alpha, n)
    assert max(fdiff(a, b) for a, b in zip(s, s2)) <= 1
    G = F(2) ** -(52 - n.bit_length())
    for got, want in zip(s, exact_scores(h, alpha)):
        assert want - G < F(float(got)) <= want


@pytest.mark.parametrize("alpha", [0.5, 0.25, 0.75, 0.125])
def test_dyadic_levels_keep_the_scores_of_earlier_versions(alpha):
    """For the usual levels the exact scores are what the float formula gave: transcripts of
    earlier versions replay unchanged."""
    rng = np.random.default_rng(5)
    for _ in range(50):
        h = rng.integers(0, 10**6, size=(3, 9))
        assert np.array_equal(quantile_scores(h, alpha, int(h.sum())), old_quantile_scores(h, alpha))


# ---------------------------------------------------------------- MST selection score

def old_selection_score(table, estimate) -> float:
    return float(np.abs(np.asarray(table, dtype=np.float64) - estimate).sum())


def _mst_case(rng, n, ka, kb, worst: bool = False):
    """A count table of n records, a noisy-1-way independence estimate, and a neighbour table
    (one record moved to another cell; with ``worst``, from a cell below its estimate to one
    above it, which moves the exact score by +2)."""
    p = rng.dirichlet(np.full(ka * kb, 0.5))
    t = rng.multinomial(n, p).reshape(ka, kb)
    noisy_a = t.sum(axis=1) + rng.laplace(0, 3, ka)
    noisy_b = t.sum(axis=0) + rng.laplace(0, 3, kb)
    est = independence_estimate(noisy_a, noisy_b, n)
    t2 = t.copy().ravel()
    e = est.ravel()
    low, high = np.flatnonzero((t2 > 0) & (t2 <= e)), np.flatnonzero(t2 >= e)
    if worst and low.size and high.size:
        src, dst = rng.choice(low), rng.choice(high)
    else:
        src, dst = rng.choice(np.flatnonzero(t2)), rng.integers(0, t2.size)
    t2[src] -= 1
    t2[dst] += 1
    return t, est, t2.reshape(ka, kb)


def test_old_mst_scores_overshoot_the_sensitivity():
    """The reported overshoot: float L1 scores of neighbouring tables more than 2 apart (beyond
    nextafter(2)) -- when a partial sum crosses a power of two, the two sums round differently;
    the exact scores of the same pairs are at most 2 apart."""
    rng = np.random.default_rng(0)
    limit = F(map_distance(2.0))
    worst_old, overs = F(0), 0
    for _ in range(4000):
        ka, kb = (int(v) for v in rng.integers(2, 12, 2))
        t, est, t2 = _mst_case(rng, int(rng.integers(5, 3000)), ka, kb, worst=True)
        old = fdiff(old_selection_score(t, est), old_selection_score(t2, est))
        worst_old = max(worst_old, old)
        overs += old > limit
        assert fdiff(selection_score(t, est), selection_score(t2, est)) <= 2
    assert overs > 0 and worst_old > limit, float(worst_old - 2)


@SLOW
@given(st.integers(1, 10**7), st.integers(1, 30), st.integers(1, 30), st.integers(0, 2**31),
       st.booleans())
def test_mst_scores_on_neighbours_exactly(n, ka, kb, seed, worst):
    t, est, t2 = _mst_case(np.random.default_rng(seed), n, ka, kb, worst)
    a, b = selection_score(t, est), selection_score(t2, est)
    assert fdiff(a, b) <= 2
    # close to the float L1 distance (the estimate moved to a grid of at least 2^-... )
    exact_l1 = sum(abs(F(int(x)) - F(float(e))) for x, e in zip(t.ravel(), est.ravel()))
    assert abs(F(a) - exact_l1) <= F(t.size, 2 ** 20)


# ---------------------------------------------------------------- shares M / n (criteria)

def test_float_shares_overshoot_the_one_ulp_slack():
    """fl((M+1)/n) - fl(M/n) exceeds nextafter(fl(1/n)) for many M and n, e.g. n = 5, M = 3
    (by 6.7e-17 against a slack of 3.9e-17)."""
    assert fdiff(4 / 5, 3 / 5) > F(map_distance(1 / 5))
    over = sum(fdiff((m + 1) / n, m / n) > F(map_distance(1.0 / n))
               for n in range(2, 200) for m in range(n))
    assert over > 5_000     # 8,871 of the 19,899 pairs


@FAST
@given(st.integers(1, 10**9), st.integers(0, 10**9), st.integers(-1, 1),
       st.sampled_from(["down", "exact", "up"]), st.integers(1, 3))
def test_lipschitz_float_on_integer_shares(n, m, step, declared_kind, dm):
    """Shares M/n and (M +- dm)/n with sensitivity dm/n: released floats differ by less than the
    declared float (which may be the formula's float rounded down or up), and sit just below the
    exact share."""
    m = m % (n + 1)
    m2 = min(max(m + step * dm, 0), n)
    delta = F(dm, n)
    declared = dm / n
    if declared_kind == "down":
        declared = math.nextafter(declared, 0)
    elif declared_kind == "up":
        declared = math.nextafter(declared, 1)
    y = lipschitz_float(F(m, n), delta, declared, 1)
    y2 = lipschitz_float(F(m2, n), delta, declared, 1)
    assert fdiff(y, y2) < min(F(declared), delta)
    assert F(y) <= F(m, n)
    # deflation: x (delta - sigma + g) / delta + g, sigma >= delta - ulp(delta), g = 2^-51
    assert F(m, n) - F(y) <= F(m, n) * (F(n, dm) * F(2) ** -51 + F(2) ** -51) + F(2) ** -51


@FAST
@given(st.fractions(0, 100), st.fractions(F(1, 10**6), 10), st.fractions(-1, 1))
def test_lipschitz_float_on_rationals(x, delta, t):
    x2 = min(max(x + t * delta, F(0)), F(100))
    declared = float(delta)
    y, y2 = (lipschitz_float(v, delta, declared, 100) for v in (x, x2))
    assert fdiff(y, y2) < min(F(declared), delta)
    assert F(y) <= x


# ---------------------------------------------------------------- criteria on neighbours

def _crit_value(entry, t, c, spec=None, **kw):
    return make_criterion(entry).value(EvalContext(t, c, spec or {}), **kw)


def _crit_sens(entry, c, spec=None):
    return make_criterion(entry).sensitivity(EvalContext(c, c, spec or {}))[0]


@SLOW
@given(neighbours(max_n=30, min_n=1))
def test_scalar_criteria_on_neighbours_exactly(cs):
    """kway, smoothed ratio, faithfulness, conditional means (expected resize) and MAE: the
    released float moves by less than the declared sensitivity between neighbours, exactly."""
    t, t2, c = cs
    names = [x.name for x in t.columns]
    vals = t.columns[0].values
    L, U = float(vals.min()) - 0.75, float(vals.max()) + 1.5
    entries = [
        ({"id": "k", "type": "kway_marginals", "threshold": 0.5, "epsilon": 1}, {}, {}),
        ({"id": "r", "type": "smoothed_ratio", "clip": 1.7, "smoothing": 1.5, "threshold": 1.5,
          "epsilon": 1}, {}, {}),
        ({"id": "f", "type": "faithfulness", "threshold": 0.5, "epsilon": 1},
         {"faithfulness": {"exact": [], "adjacent": names, "max_adjacent": 1}}, {}),
        ({"id": "m", "type": "conditional_means", "target": names[0], "bounds": [L, U],
          "by": [None] + names[1:2], "threshold": 1, "epsilon": 1}, {}, {}),
    ]
    for entry, spec, kw in entries:
        sens = _crit_sens(entry, c, spec)
        a, b = _crit_value(entry, t, c, spec, **kw), _crit_value(entry, t2, c, spec, **kw)
        assert fdiff(a, b) <= F(sens), entry["id"]
    # MAE with fixed public coefficients (the reference is a DP output, C's fit is public)
    entry = {"id": "mae", "type": "regression_mae_difference", "target": names[0],
             "bounds": [L, U], "threshold": 5, "epsilon": 0.1}
    crit = make_criterion(entry)
    des = crit.design(EvalContext(c, c, {}))
    rng = np.random.default_rng(len(t.codes))
    beta = rng.normal(size=des.d) * (U - L)
    sens = crit.sensitivity(EvalContext(c, c, {}))[0]
    a = crit.value(EvalContext(t, c, {}), beta)
    b = crit.value(EvalContext(t2, c, {}), beta)
    assert fdiff(a, b) <= F(sens)


def test_kway_worst_case_neighbours_where_the_float_share_overshoots():
    """n = 999,999, T has M = 999,998 records in the cell C leaves empty, T' one more: the
    float shares fl(M/n), fl((M+1)/n) differ by more than the map's one-ulp slack; the
    released values by less than the declared 1/n."""
    n, m = 999_999, 999_998
    assert fdiff((m + 1) / n, m / n) > F(map_distance(1.0 / n))
    cols = (int_coding("a", [0, 1, 2]),)
    c = Coded(codes=np.ones((n, 1), dtype=np.int64), columns=cols)
    t = Coded(codes=(np.arange(n) >= m).astype(np.int64)[:, None], columns=cols)
    t2 = Coded(codes=(np.arange(n) >= m + 1).astype(np.int64)[:, None], columns=cols)
    entry = {"id": "k", "type": "kway_marginals", "threshold": 0.5, "epsilon": 1}
    a, b = _crit_value(entry, t, c), _crit_value(entry, t2, c)
    assert fdiff(a, b) < F(_crit_sens(entry, c)) and a < b <= 1


def test_accuracy_release_on_worst_case_neighbours():
    """The accuracy difference moves by 2/n when one record turns from right-for-the-reference
    and wrong-for-C to the opposite: released floats stay within the declared 2/n."""
    cols = (cat_coding("y", ["no", "yes"], [0, 1]), int_coding("x", [0, 1, 2]))
    rng = np.random.default_rng(8)
    n = 3001
    c = Coded(codes=np.column_stack([rng.integers(0, 2, n), rng.integers(0, 2, n)]), columns=cols)
    t_codes = np.column_stack([rng.integers(0, 2, n), rng.integers(0, 2, n)])
    entry = {"id": "acc", "type": "classification", "target": "y", "positive": "yes",
             "report": "accuracy", "threshold": 0.05, "epsilon": 0.1}
    crit = make_criterion(entry)
    des = crit.design(EvalContext(c, c, {}))
    beta_ref = np.array([-1.0, 2.0])          # predicts yes iff z > 0.5
    worst = F(0)
    for i in range(20):
        t2_codes = t_codes.copy()
        t2_codes[i] = [1 - t_codes[i, 0], t_codes[i, 1]]
        a = crit.value(EvalContext(Coded(codes=t_codes, columns=cols), c, {}), beta_ref)
        b = crit.value(EvalContext(Coded(codes=t2_codes, columns=cols), c, {}), beta_ref)
        worst = max(worst, fdiff(a, b))
    assert worst < F(2 / n) and des.d == 2
    assert worst > F(1, n)   # the worst case (2/n, less the deflation) was reached


# ---------------------------------------------------------------- regression / logistic vectors

def _fm_old_vs_grid(seed: int, kind: str):
    """Neighbouring datasets of 2000 records with non-grid features; the changed record is the
    attaining pair of the bound. (L1 of the float vectors without the grid, with it, bound)."""
    rng = np.random.default_rng(seed)
    n, d = 2000, 4
    X = np.column_stack([np.ones(n), rng.uniform(-1, 1, (n, d - 1))])
    if kind == "fm":
        y = rng.uniform(-1, 1, n)
        X[0], y[0] = 1.0, 1.0                    # (y, x) = (1; 1, 1, ..)
        X2, y2 = X.copy(), y.copy()
        X2[0, 1:], y2[0] = 0.0, -1.0             # -> (-1; 1, 0, .., 0): p = q = (1 + d)/2
        vec, bound = fm_vector, F(fm_sensitivity(d))
    elif kind == "ss":
        y = rng.uniform(-1, 1, n)
        X[0], y[0] = 1.0, 1.0
        X2, y2 = X.copy(), y.copy()
        X2[0, 1:], y2[0] = 0.0, -1.0
        vec, bound = ss_vector, F(ss_sensitivity(d))
    else:
        y = rng.integers(0, 2, n).astype(float)
        (a, ya), (b, yb) = attaining_pair(d)
        X[0, 1:], y[0] = a, ya
        X2, y2 = X.copy(), y.copy()
        X2[0, 1:], y2[0] = b, yb
        vec, bound = logistic_fm_vector, claimed(d)
    w = rng.integers(1, 50, n).astype(float)
    w[0] = 1.0                                   # the changed record: one record
    old = l1(vec(X, y, w), vec(X2, y2, w))
    total = int(w.sum())
    if kind == "logistic":                       # y in {0, 1}: only the features are scaled
        gy, gy2 = y, y2
    else:
        gy, gy2 = on_grid(y, total), on_grid(y2, total)
    new = l1(vec(on_grid(X, total), gy, w), vec(on_grid(X2, total), gy2, w))
    return old, new, bound


@pytest.mark.parametrize("kind", ["fm", "ss", "logistic"])
def test_fit_vectors_overshoot_in_floats_and_are_exact_on_the_grid(kind):
    """Summed in floating point over many records, the noised vector of a worst-case pair of
    neighbours moves by more than the bound (rounding); on the grid it moves by at most the
    bound, exactly."""
    overs = 0
    for seed in range(12):
        old, new, bound = _fm_old_vs_grid(seed, kind)
        assert new <= bound
        overs += old > F(map_distance(float(bound)))
    assert overs > 0


@FAST
@given(st.integers(1, 2**40))
def test_grid_bits_leave_room_for_exact_sums(n):
    k = grid_bits(n)
    assert n * 4 ** k < 2 ** 53 and k >= 1
    assert n * 4 ** (k + 1) >= 2 ** 53 or k == (53 - n.bit_length()) // 2


def test_on_grid_keeps_the_box_and_rounds_to_nearest():
    x = np.array([-1.0, -0.3, 0.0, 1e-17, 0.7, 1.0])
    g = on_grid(x, 1000)
    k = grid_bits(1000)
    assert g[0] == -1.0 and g[-1] == 1.0 and g[2] == 0.0 and g[3] == 0.0
    assert np.all(np.abs(g - x) <= 2.0 ** -(k + 1))
    assert np.all(np.ldexp(g, k) == np.rint(np.ldexp(g, k)))


def test_dyadic_units_are_exact_when_possible_and_stay_inside():
    Y, e = dyadic_units(np.array([1400.0, 1549.5, 4600.0]), 1400, 4600, 160_000)
    assert e == 1 and Y.tolist() == [2800, 3099, 9200]
    Y, e = dyadic_units(np.array([0.1, 0.30000000000000004, 1.0]), 0.1, 1.0, 10**6)
    assert 2 * 10**6 * 2 ** e < 2 ** 62 and e > 30
    assert F(0.1) <= F(int(Y.min()), 2 ** e) and F(int(Y.max()), 2 ** e) <= 1
    assert np.all(np.abs(np.ldexp(Y.astype(float), -e) - [0.1, 0.30000000000000004, 1.0]) <= 2.0 ** -e)


# ---------------------------------------------------------------- PrivSyn InDif

def _table_neighbour(t, rng):
    t2 = t.copy().ravel()
    t2[rng.choice(np.flatnonzero(t2))] -= 1
    t2[rng.integers(0, t2.size)] += 1
    return t2.reshape(t.shape)


@SLOW
@given(st.integers(2, 6), st.integers(2, 6), st.integers(0, 2**31),
       st.sampled_from([10, 10**3, 10**5, 2**26 - 5, 2**26 + 7, 2**29]))
def test_indif_scores_on_neighbours_exactly(ka, kb, seed, n):
    """|N - N'| <= 6n - 2 for the integer numerators, and the released floats of neighbouring
    tables differ by at most 6 per pair, exactly, on both sides of n = 2^26 (correctly rounded
    below, floored onto a grid above)."""
    rng = np.random.default_rng(seed)
    t = rng.multinomial(n, rng.dirichlet(np.full(ka * kb, 0.4))).reshape(ka, kb)
    t2 = _table_neighbour(t, rng)
    N, N2 = indif_numerator(t), indif_numerator(t2)
    assert abs(N - N2) <= 6 * n - 2
    # the numerator is n InDif by its definition
    A, B = t.sum(axis=1), t.sum(axis=0)
    want = sum(abs(F(int(t[i, j])) - F(int(A[i]) * int(B[j]), n)) for i in range(ka) for j in range(kb))
    assert F(N, n) == want
    a, b = indif_score(N, n), indif_score(N2, n)
    assert fdiff(a, b) <= 6
    assert abs(F(a) - want) <= F(2) ** (2 * n).bit_length() * F(2) ** -52


def test_indif_scores_unchanged_below_2_to_the_26():
    rng = np.random.default_rng(6)
    for n in (7, 5000, 160_000, 2**26):
        t = rng.multinomial(n, rng.dirichlet(np.ones(12))).reshape(3, 4)
        assert indif_score(indif_numerator(t), n) == indif_numerator(t) / n


def test_indif_worst_change_is_below_6n_minus_2():
    """Exhaustive over every table of n <= 5 records on a 3 x 3 domain and every changed
    record: |N - N'| <= 6n - 2."""
    cells = [(a, b) for a in range(3) for b in range(3)]
    for n in (2, 3, 4, 5):
        worst = 0
        for rows in itertools.combinations_with_replacement(cells, n):
            t = np.zeros((3, 3), dtype=np.int64)
            for a, b in rows:
                t[a, b] += 1
            base = indif_numerator(t)
            a0, b0 = rows[0]
            for a, b in cells:
                t2 = t.copy()
                t2[a0, b0] -= 1
                t2[a, b] += 1
                worst = max(worst, abs(indif_numerator(t2) - base))
        assert worst <= 6 * n - 2


@pytest.mark.parametrize("s", [10, 100, 1000])
def test_indif_change_approaches_6n(s):
    """The docstring's example: n = s^2, A = B = (s, s^2 - s, 0), T = A B^T / n, the record of
    cell (0, 0) moved to (2, 2): N moves by 6n - 4s - 2 (InDif by 6 - 4/s - 2/s^2), within
    6n - 2."""
    n = s * s
    A = np.array([s, s * s - s, 0])
    t = np.outer(A, A) // n
    assert t.sum() == n and t[0, 0] == 1
    t2 = t.copy()
    t2[0, 0] -= 1
    t2[2, 2] += 1
    assert indif_numerator(t2) - indif_numerator(t) == 6 * n - 4 * s - 2


# ---------------------------------------------------------------- PrivBayes R and MI

@pytest.mark.parametrize("n", [1, 2, 3, 7, 700, 160_000, 10**6, 2**26, 2**27])
def test_r_sensitivity_is_the_formula_of_earlier_versions(n):
    """Unchanged up to n = 2^27 (transcripts replay), and it covers (3n + 1)/n^2, exactly."""
    assert r_score_sensitivity(n) == 3.0 / n + 2.0 / (float(n) * float(n))
    assert F(r_score_sensitivity(n)) >= F(3 * n + 1, n * n)


def test_r_sensitivity_above_2_to_the_27_has_an_allowance():
    n = 2**27 + 1
    assert F(r_score_sensitivity(n)) >= F(3 * n - 1, n * n) + F(1, 2**53)


@SLOW
@given(st.integers(2, 5), st.integers(2, 5), st.integers(0, 2**31),
       st.sampled_from([2, 5, 50, 700, 10**5, 10**7, 2**27 - 1, 2**28]))
def test_r_scores_on_neighbours_exactly(kx, kp, seed, n):
    rng = np.random.default_rng(seed)
    t = rng.multinomial(n, rng.dirichlet(np.full(kx * kp, 0.5))).reshape(kp, kx).astype(float)
    t2 = _table_neighbour(t.astype(np.int64), rng).astype(float)
    a, b = r_of_table(t, n), r_of_table(t2, n)
    assert fdiff(a, b) <= F(r_score_sensitivity(n))
    exact = F(r_numerator(t), 2 * n * n)
    # R by its definition on the empirical distribution
    p = [[F(int(v), n) for v in row] for row in t]
    pa = [sum(row) for row in p]
    pb = [sum(p[i][j] for i in range(kp)) for j in range(kx)]
    assert exact == sum(abs(p[i][j] - pa[i] * pb[j]) for i in range(kp) for j in range(kx)) / 2
    assert abs(F(a) - exact) <= (F(1, n * n) if n <= 2**27 else F(1, 2**54))


def test_r_falls_back_to_the_exact_quotient(monkeypatch):
    """When the float formula is further than 1/n^2 from the exact R, the correctly rounded
    quotient is released."""
    import dpbundle.mechanisms.privbayes as pb

    t = np.array([[30.0, 10.0], [5.0, 55.0]])
    n = 100
    exact = F(r_numerator(t), 2 * n * n)
    assert r_of_table(t, n) == pytest.approx(float(exact), rel=1e-15)
    monkeypatch.setattr(pb, "_r_of_table", lambda table, nn: float(exact) + 2.0 / n**2)
    assert r_of_table(t, n) == r_numerator(t) / (2 * n * n)


def _mi_reference(t) -> Decimal:
    """I(X; Pi) in bits with 50 significant digits (Decimal's ln is correctly rounded)."""
    getcontext().prec = 50
    t = [[int(v) for v in row] for row in t]
    n = sum(map(sum, t))
    rows = [sum(r) for r in t]
    cols = [sum(t[i][j] for i in range(len(t))) for j in range(len(t[0]))]
    total = Decimal(0)
    for i, r in enumerate(t):
        for j, v in enumerate(r):
            if v:
                total += Decimal(v) / n * (Decimal(v) * n / (Decimal(rows[i]) * cols[j])).ln()
    return total / Decimal(2).ln()


@SLOW
@given(st.integers(2, 6), st.integers(2, 6), st.integers(0, 2**31),
       st.sampled_from([2, 9, 700, 10**5, 10**7]))
def test_mi_is_within_its_rounding_allowance(kx, kp, seed, n):
    rng = np.random.default_rng(seed)
    t = rng.multinomial(n, rng.dirichlet(np.full(kx * kp, 0.5))).reshape(kp, kx)
    got = mi_of_table(t.astype(float), n)
    err = abs(Decimal(got) - _mi_reference(t))
    assert err <= Decimal(math.log2(n)) * Decimal(2) ** -39
    # the allowance in the sensitivity is twice that bound and then some
    allowance = mi_score_sensitivity(n, kx, kp) - (
        (math.log2(n) / n + (n - 1) / n * math.log2(n / (n - 1))) if min(kx, kp) == 2 else
        (2.0 / n * math.log2((n + 1) / 2.0) + (n - 1) / n * math.log2((n + 1) / (n - 1))))
    assert allowance >= 2 * math.log2(n) * 2.0 ** -39 * 0.99


def test_numpy_log2_is_as_accurate_as_assumed():
    """The allowance assumes np.log2 within 2^-42 relative (1024 ulps); measured against
    50-digit logarithms it is within one ulp here."""
    getcontext().prec = 50
    rng = np.random.default_rng(7)
    xs = np.unique(np.concatenate([np.arange(2, 3000), rng.integers(2, 2**40, 3000)])).astype(float)
    got = np.log2(xs)
    ln2 = Decimal(2).ln()
    worst = 0.0
    for x, g in zip(xs, got):
        ref = Decimal(int(x)).ln() / ln2
        ulp = math.ulp(float(ref))
        worst = max(worst, float(abs(Decimal(g) - ref)) / ulp)
    assert worst <= 1.0


@pytest.mark.parametrize("n", [2, 3, 4])
@pytest.mark.parametrize("kx,kp", [(2, 2), (2, 3), (3, 3)])
def test_mi_scores_on_every_neighbour_exactly(n, kx, kp):
    """Exhaustive over small datasets: released MI floats of neighbours differ by at most the
    declared sensitivity, exactly (no tolerance)."""
    cells = [(a, b) for a in range(kp) for b in range(kx)]
    sens = F(mi_score_sensitivity(n, kx, kp))
    for rows in itertools.combinations_with_replacement(cells, n):
        t = np.zeros((kp, kx))
        for a, b in rows:
            t[a, b] += 1
        base = mi_of_table(t, n)
        a0, b0 = rows[0]
        for a, b in cells:
            t2 = t.copy()
            t2[a0, b0] -= 1
            t2[a, b] += 1
            assert fdiff(mi_of_table(t2, n), base) <= sens


def test_mi_is_exactly_zero_with_a_single_value():
    assert mi_of_table(np.array([[3.0, 4.0, 5.0]]), 12) == 0.0
    assert mi_of_table(np.array([[3.0], [9.0]]), 12) == 0.0
    assert mi_score_sensitivity(12, 1, 3) == 0.0
