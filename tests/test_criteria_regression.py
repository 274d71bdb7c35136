"""regression_coefficients and regression_mae_difference: polynomial, sensitivities, fits."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from criteria_util import births_like, neighbours
from dpbundle.mechanisms.criteria import CriterionError, EvalContext, make_criterion
from dpbundle.mechanisms.criteria.mae import mae_difference
from dpbundle.mechanisms.criteria.regression import (RegressionDesign, fm_sensitivity,
                                                     fm_vector, ols, solve_fm, solve_ss,
                                                     ss_sensitivity, ss_vector)
from dpbundle.mechanisms.noise import Randomness

REG = {"id": "reg", "type": "regression_coefficients", "target": "birth_weight",
       "bounds": [1400, 4600], "threshold": 30, "epsilon": 0.43}
MAE = {"id": "mae", "type": "regression_mae_difference", "target": "birth_weight",
       "bounds": [1400, 4600], "threshold": 5, "epsilon": 0.04}


@st.composite
def reg_case(draw):
    t, t2, c = draw(neighbours(max_d=4, max_size=5, max_n=25, min_n=2))
    names = [x.name for x in t.columns]
    target = draw(st.sampled_from(names))
    vals = t.columns[t.column(target)].values
    L = draw(st.integers(int(vals.min()) - 2, int(vals.max())))
    U = draw(st.integers(L + 1, L + 15))
    return t, t2, c, target, float(L), float(U)


@settings(max_examples=250, deadline=None)
@given(reg_case())
def test_polynomial_vectors_l1_sensitivity(cs):
    """Change one record of T (C fixed): the noised vectors move by <= the claimed L1 bound."""
    t, t2, c, target, L, U = cs
    des = RegressionDesign.from_synth(c, target, L, U)
    X1, y1 = des.scaled(t)
    X2, y2 = des.scaled(t2)
    assert np.all(np.abs(X1) <= 1) and np.all(np.abs(y1) <= 1)
    d = des.d
    assert X1.shape[1] == d
    assert np.abs(fm_vector(X1, y1) - fm_vector(X2, y2)).sum() <= fm_sensitivity(d) + 1e-9
    assert np.abs(ss_vector(X1, y1) - ss_vector(X2, y2)).sum() <= ss_sensitivity(d) + 1e-9
    crit = make_criterion(dict(REG, target=target, bounds=[L, U]))
    sens, inputs = crit.sensitivity(EvalContext(t, c, {}))
    assert sens == (1 + d) ** 2 and inputs["d"] == d
    assert crit.sensitivity(EvalContext(t2, c, {})) == (sens, inputs)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 5), st.integers(1, 30), st.integers(0, 2**32 - 1))
def test_fm_vector_is_the_squared_loss(d, n, seed):
    rng = np.random.default_rng(seed)
    X = np.column_stack([np.ones(n), rng.uniform(-1, 1, (n, d - 1))])
    y = rng.uniform(-1, 1, n)
    w = rng.normal(size=d)
    vec = fm_vector(X, y)
    assert vec.size == 1 + d + d * (d + 1) // 2
    iu, ju = np.triu_indices(d)
    poly = vec[0] + vec[1:1 + d] @ w + vec[1 + d:] @ (w[iu] * w[ju])
    assert poly == pytest.approx(np.sum((y - X @ w) ** 2), rel=1e-9, abs=1e-9)


def test_per_record_bound_is_attained():
    """One record's vector has L1 norm (|y| + sum |x_j|)^2 <= (1 + d)^2, attained at a corner.
    The triangle inequality would give 2(1 + d)^2 for a changed record; the declared (1 + d)^2
    is the exact worst case (see test_fm_true_sensitivity_is_attained)."""
    d = 4
    a = np.ones((1, d)); ya = np.array([1.0])
    b = np.array([[1.0, -1, -1, -1]]); yb = np.array([-1.0])
    assert np.abs(fm_vector(a, ya)).sum() == (1 + d) ** 2
    assert np.abs(fm_vector(b, yb)).sum() == (1 + d) ** 2
    assert np.abs(fm_vector(a, ya) - fm_vector(b, yb)).sum() <= fm_sensitivity(d)
    assert fm_sensitivity(d) == (1 + d) ** 2


def test_noiseless_solutions_are_ols():
    rng = np.random.default_rng(0)
    t = births_like(4000, rng)
    des = RegressionDesign.from_synth(t, "birth_weight", 1400, 4600)
    X, y = des.scaled(t)
    beta = ols(des.z(t), des.y(t))
    w_fm = solve_fm(fm_vector(X, y), des.d, 1e-9)
    w_ss = solve_ss(ss_vector(X, y), des.d, t.n, 1e-9)
    assert des.unscale(w_fm) == pytest.approx(beta, rel=1e-6, abs=1e-6)
    assert des.unscale(w_ss) == pytest.approx(beta, rel=1e-6, abs=1e-6)
    # predictions agree with an independent least-squares fit on the raw numbers (birth_sex
    # enters one-hot as "birth_sex=F", the indicator of F, which equals its values M=0, F=1)
    assert "birth_sex=F" in des.features
    raw = np.column_stack([np.ones(t.n)] + [t.values_of(c.split("=")[0]) for c in des.features])
    b_raw = np.linalg.lstsq(raw, np.clip(t.values_of("birth_weight"), 1400, 4600), rcond=None)[0]
    assert des.predict(beta, t) == pytest.approx(np.clip(raw @ b_raw, 1400, 4600), rel=1e-9)


@pytest.mark.parametrize("fit,length", [("functional_mechanism", lambda d: 1 + d + d * (d + 1) // 2),
                                        ("sufficient_statistics", lambda d: d + d * (d + 1) // 2 - 1)])
def test_evaluate_regression_and_mae(fit, length):
    rng = np.random.default_rng(1)
    t = births_like(6000, rng)
    c = births_like(6000, rng)
    ctx = EvalContext(t, c, {})
    rand = Randomness()
    reg = make_criterion(dict(REG, fit=fit))
    res = reg.evaluate(ctx, rand)
    rec = rand.transcript.records[-1]
    d = 6
    assert len(rec["true"]) == length(d) and rec["purpose"] == "criterion reg"
    assert res.mechanism == fit and res.noise_scale == rec["scale"]
    assert res.sensitivity == (fm_sensitivity(d) if fit == "functional_mechanism" else ss_sensitivity(d))
    if fit == "sufficient_statistics":   # the tight d (d + 3)/2, not the old per-entry 52
        assert res.sensitivity == rec["sensitivity"] == 27.0
        assert res.sensitivity_inputs["formula"] == "d (d + 3) / 2"
        assert 27.0 / 0.43 <= res.noise_scale < 27.0 / 0.43 * (1 + 1e-12)
    beta = ctx.released["reg"]["coefficients"]
    des = RegressionDesign.from_synth(c, "birth_weight", 1400, 4600)
    bc = ols(des.z(c), des.y(c))
    assert res.dp_value == pytest.approx(np.abs(beta[1:] - bc[1:]).sum())
    assert res.passed == (res.dp_value < 30)
    # the MAE criterion uses the released DP coefficients as the real regression
    mae = make_criterion(MAE)
    r2 = mae.evaluate(ctx, rand)
    rec2 = rand.transcript.records[-1]
    assert rec2["true"] == pytest.approx(mae_difference(des, t, beta, bc))
    assert r2.sensitivity == pytest.approx(2 * 3200 / 6000)
    assert r2.sensitivity_inputs["reference"] == "reg"


def test_mae_without_reference_is_an_error():
    rng = np.random.default_rng(2)
    t = births_like(100, rng)
    with pytest.raises(CriterionError, match="regression_coefficients"):
        make_criterion(MAE).evaluate(EvalContext(t, t, {}), Randomness())


def test_dp_fit_converges_with_large_epsilon():
    rng = np.random.default_rng(3)
    t = births_like(20000, rng)
    ctx = EvalContext(t, t, {})
    crit = make_criterion(dict(REG, epsilon=1e4))
    beta, _ = crit.dp_coefficients(ctx, Randomness())
    des = crit.design(ctx)
    assert np.abs(beta - ols(des.z(t), des.y(t))).sum() < 5.0


@settings(max_examples=250, deadline=None)
@given(reg_case(), st.integers(0, 2**32 - 1))
def test_mae_sensitivity_with_fixed_coefficients(cs, seed):
    t, t2, c, target, L, U = cs
    des = RegressionDesign.from_synth(c, target, L, U)
    rng = np.random.default_rng(seed)
    scale = (U - L) * 3
    b1 = rng.normal(size=des.d) * scale
    b2 = rng.normal(size=des.d) * scale
    f1, f2 = mae_difference(des, t, b1, b2), mae_difference(des, t2, b1, b2)
    crit = make_criterion(dict(MAE, target=target, bounds=[L, U]))
    sens, _ = crit.sensitivity(EvalContext(t, c, {}))
    assert sens == pytest.approx(2 * (U - L) / t.n)
    assert abs(f1 - f2) <= sens + 1e-9


def test_exact_ols_reference_breaks_the_mae_bound():
    """Why the real regression must be the released DP fit: with beta_T = OLS on T itself,
    one changed record moves beta_T and |MAE_T(beta_T) - MAE_T(beta_C)| changes by more than
    2(U - L)/n (here about 1.7 times; found by random search, checked with plain numpy)."""
    L, U = 0.0, 1.0
    d = 0.15
    z = np.array([0.86, d, d, -d, -d, d, d, -d]); y = np.array([0, 1, 1, 0, .5, 1, 1, .5])
    z2 = z.copy(); z2[0] = 0.157; y2 = y.copy(); y2[0] = 1.0
    bc = np.array([-0.48, 0.3756])

    def f(z, y):
        A = np.column_stack([np.ones_like(z), z])
        bt = np.linalg.lstsq(A, y, rcond=None)[0]
        p, q = np.clip(A @ bt, L, U), np.clip(A @ bc, L, U)
        return abs(np.mean(np.abs(y - p) - np.abs(y - q)))

    assert abs(f(z, y) - f(z2, y2)) > 1.5 * 2 * (U - L) / len(y)


def test_feature_subset_and_constant_feature():
    rng = np.random.default_rng(6)
    t = births_like(3000, rng)
    c_codes = t.codes.copy()
    c_codes[:, 0] = 4                     # birth_month constant in C -> left out of the design
    c = t.with_codes(c_codes)
    ctx = EvalContext(t, c, {})
    full = make_criterion(REG)
    sens, inputs = full.sensitivity(ctx)
    assert inputs["features_constant_in_C"] == ["birth_month"] and inputs["d"] == 5
    assert sens == 36  # (1 + d)^2 with d = 5
    sub = make_criterion(dict(REG, features=["gestation_week", "birth_sex"]))
    sens, inputs = sub.sensitivity(ctx)
    assert inputs["d"] == 3 and sens == 16  # (1 + d)^2 with d = 3
    rand = Randomness()
    sub.evaluate(ctx, rand)
    assert len(ctx.released["reg"]["coefficients"]) == 3
    # an MAE criterion with other features must not silently use this reference
    with pytest.raises(CriterionError):
        make_criterion(MAE).evaluate(ctx, rand)
    r = make_criterion(dict(MAE, features=["gestation_week", "birth_sex"])).evaluate(ctx, rand)
    assert r.sensitivity_inputs["reference"] == "reg"


def test_mae_sensitivity_worst_case_is_attained():
    """Deterministic worst case: the DP reference predicts L everywhere, C's OLS predicts U
    everywhere; changing one record's y from L to U moves f by exactly 2(U - L)/n. A sensitivity
    of (U - L)/n (known bug 4: the 2024 code's halved value) fails here, not just sometimes."""
    from criteria_util import int_coding
    from dpbundle.mechanisms.coding import Coded

    L, U, n = 0.0, 10.0, 20
    cols = (int_coding("x", [0, 1, 2]), int_coding("y", [0, 1, 2], values=[L, U]))
    c = Coded(codes=np.array([[i % 2, 1] for i in range(n)]), columns=cols)   # OLS on C: y = U
    t = Coded(codes=np.array([[i % 2, 0 if i == 0 else 1] for i in range(n)]), columns=cols)
    t2 = Coded(codes=np.array([[i % 2, 1] for i in range(n)]), columns=cols)
    crit = make_criterion(dict(MAE, target="y", bounds=[L, U]))
    beta_ref = np.array([L - 1e6, 0.0])                                      # predicts L
    f1 = crit.value(EvalContext(t, c, {}), beta_ref)
    f2 = crit.value(EvalContext(t2, c, {}), beta_ref)
    sens, _ = crit.sensitivity(EvalContext(t, c, {}))
    assert abs(f1 - f2) == pytest.approx(2 * (U - L) / n)
    assert abs(f1 - f2) <= sens + 1e-12


@pytest.mark.parametrize("d", [1, 2, 3, 4, 5, 8])
def test_fm_true_sensitivity_is_attained(d):
    """Two records whose polynomial vectors differ by exactly (1 + d)^2 in L1 (constant feature
    first, = 1 in both). With w = (y, x) and w' the changed record, the difference is the
    entrywise L1 norm of w w^T - w' w'^T, which is at most (1 + d)^2 for |w_i|, |w'_i| <= 1 and
    is reached here; so any declared sensitivity below (1 + d)^2 is unsound, and the declared
    one, (1 + d)^2, is exactly the worst case."""
    free = d                                 # y and the d - 1 non-constant features
    q = np.zeros(free)
    q[:(d + 1) // 2] = 1.0
    if (d + 1) % 2:
        q[(d + 1) // 2] = 0.5
    w2 = 1.0 - 2.0 * q                       # the other record: w' = p - q with p = 1 - q
    a, ya = np.ones((1, d)), np.array([1.0])
    b = np.concatenate([[1.0], w2[1:]])[None, :]
    yb = np.array([w2[0]])
    diff = np.abs(fm_vector(a, ya) - fm_vector(b, yb)).sum()
    assert diff == pytest.approx((1 + d) ** 2)
    assert diff <= fm_sensitivity(d) * (1 + 1e-12)


# ------------------------------------------------------------- sufficient statistics: exact Delta


def _ss_of(records: np.ndarray) -> np.ndarray:
    """ss_vector of rows (y, x_1..x_p) with the intercept's constant feature 1 put first."""
    records = np.atleast_2d(np.asarray(records, dtype=np.float64))
    X = np.column_stack([np.ones(records.shape[0]), records[:, 1:]])
    return ss_vector(X, records[:, 0])


_EXTREME = st.sampled_from([-1.0, 0.0, 1.0, 0.5, -0.5])
_COORD = st.one_of(_EXTREME, st.floats(-1.0, 1.0, allow_nan=False))


@st.composite
def ss_neighbours(draw):
    """Two datasets of n records (y, x_1..x_{d-1}) in [-1, 1] that differ in one record; the
    changed pair is drawn from extremes (corners, 0, 1/2) as well as from the whole box."""
    d = draw(st.integers(1, 7))
    n = draw(st.integers(1, 6))
    row = st.lists(_COORD, min_size=d, max_size=d)
    rows = np.array(draw(st.lists(row, min_size=n, max_size=n)), dtype=np.float64).reshape(n, d)
    i = draw(st.integers(0, n - 1))
    other = rows.copy()
    other[i] = draw(row)
    return d, rows, other


@settings(max_examples=400, deadline=None)
@given(ss_neighbours())
@example((6, np.array([[1.0] * 6]), np.array([[-1.0] + [0.0] * 5])))     # the worst case
@example((3, np.array([[1.0, 1.0, 1.0], [0.2, -0.3, 0.9]]),
          np.array([[1.0, -1.0, 1.0], [0.2, -0.3, 0.9]])))
def test_ss_vector_change_is_within_the_tight_bound(case):
    """Property on neighbouring datasets: ||ss(D) - ss(D')||_1 <= d (d + 3)/2."""
    d, rows, other = case
    diff = np.abs(_ss_of(rows) - _ss_of(other)).sum()
    assert diff <= ss_sensitivity(d) + 1e-9


@pytest.mark.parametrize("d", [1, 2, 3, 4, 5, 6])
def test_ss_bound_equals_an_exhaustive_worst_case_search(d):
    """All pairs of records with coordinates in {-1, 0, 1} (corners and zeros of the box): the
    largest L1 change of ss_vector is exactly ss_sensitivity(d); 27 at d = 6, where the old
    per-entry bound 2 (d + d(d+1)/2 - 1) claimed 52 (about twice the noise)."""
    grid = np.array(list(itertools.product([-1.0, 0.0, 1.0], repeat=d)))
    V = np.array([_ss_of(r) for r in grid])
    worst = max(float(np.abs(V - v).sum(axis=1).max()) for v in V)
    assert worst == ss_sensitivity(d) == d * (d + 3) / 2
    if d == 6:
        assert worst == 27 < 2 * (d + d * (d + 1) // 2 - 1) == 52


@pytest.mark.parametrize("d", [1, 2, 4, 6, 9, 15])
def test_ss_bound_is_attained_by_ones_against_zeros(d):
    """y = 1, x = (1, ..., 1) against y' = -1, x' = 0: the difference is d (d + 3)/2 exactly, so
    no smaller sensitivity is sound."""
    a = np.ones(d)
    b = np.concatenate([[-1.0], np.zeros(d - 1)])
    assert np.abs(_ss_of(a) - _ss_of(b)).sum() == ss_sensitivity(d)


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 6), st.integers(0, 2**32 - 1))
def test_ss_no_interior_pair_beats_the_bound(d, seed):
    """A local search from random starts inside the box (the bound is derived for the whole
    box, not only its corners) never exceeds d (d + 3)/2."""
    rng = np.random.default_rng(seed)
    a, b = rng.uniform(-1, 1, d), rng.uniform(-1, 1, d)
    best = np.abs(_ss_of(a) - _ss_of(b)).sum()
    for _ in range(300):                          # coordinate-wise random hill climbing
        a2, b2 = a.copy(), b.copy()
        j = rng.integers(2 * d)
        (a2 if j < d else b2)[j % d] = np.clip((a2 if j < d else b2)[j % d]
                                               + rng.normal(scale=0.3), -1, 1)
        v = np.abs(_ss_of(a2) - _ss_of(b2)).sum()
        if v >= best:
            a, b, best = a2, b2, v
    assert best <= ss_sensitivity(d) + 1e-12


def test_audit_recomputes_the_same_ss_sensitivity():
    """The audit's own formula (no import of the criterion) agrees for every d."""
    from dpbundle.audit.sensitivity import _ss_delta

    for d in range(1, 60):
        assert _ss_delta(d) == ss_sensitivity(d) == d * (d + 3) // 2
    with pytest.raises(ValueError):
        ss_sensitivity(0)
