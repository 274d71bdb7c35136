"""classification: functional-mechanism polynomial, its L1 sensitivity, the accuracy report."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from criteria_util import cat_coding, int_coding, neighbours
from dpbundle.mechanisms.coding import Coded
from dpbundle.mechanisms.criteria import CriterionError, EvalContext, make_criterion
from dpbundle.mechanisms.criteria.classification import (accuracy, exact_fit,
                                                         logistic_fm_sensitivity,
                                                         logistic_fm_vector, positive_codes)
from dpbundle.mechanisms.noise import Randomness

COEF = {"id": "cls", "type": "classification", "target": "y", "positive": "yes",
        "threshold": 3, "epsilon": 0.5}
ACC = {"id": "acc", "type": "classification", "target": "y", "positive": "yes",
       "report": "accuracy", "threshold": 0.05, "epsilon": 0.1}


def _columns(draw_cols):
    """A binary-ish target "y" (categories no / yes / maybe) plus the drawn feature columns."""
    return (cat_coding("y", ["no", "yes", "maybe"], [0, 1, 2]),) + tuple(draw_cols)


@st.composite
def cls_case(draw):
    feats = []
    for j in range(draw(st.integers(1, 3))):
        if draw(st.booleans()):
            k = draw(st.integers(2, 4))
            feats.append(cat_coding(f"f{j}", [f"v{i}" for i in range(k)], list(range(k))))
        else:
            k = draw(st.integers(2, 5))
            feats.append(int_coding(f"f{j}", list(range(0, 2 * k + 1, 2))))
    cols = _columns(feats)
    return draw(neighbours(columns=cols, max_n=25, min_n=2))


@settings(max_examples=250, deadline=None)
@given(cls_case())
def test_polynomial_l1_sensitivity_on_neighbours(cs):
    """Change one record of T (C fixed): the noised vector moves by <= (d + 2)^2 / 8."""
    t, t2, c = cs
    crit = make_criterion(COEF)
    ctx, ctx2 = EvalContext(t, c, {}), EvalContext(t2, c, {})
    des = crit.design(ctx)
    tx1, tx2 = des.tx(t), des.tx(t2)
    assert np.all(np.abs(tx1) <= 1 + 1e-12) and np.all(np.abs(tx2) <= 1 + 1e-12)
    assert np.all(tx1[:, 0] == 1)
    v1 = logistic_fm_vector(tx1, crit.y(t))
    v2 = logistic_fm_vector(tx2, crit.y(t2))
    d = des.d
    assert v1.size == d + d * (d + 1) // 2 - 1
    assert np.abs(v1 - v2).sum() <= logistic_fm_sensitivity(d) + 1e-9
    sens, inputs = crit.sensitivity(ctx)
    assert sens == logistic_fm_sensitivity(d) and inputs["d"] == d
    assert crit.sensitivity(ctx2)[0] == sens  # public: depends on C only


def test_sensitivity_formula_values():
    """By hand: d=1 -> 1 (only lin_0 moves), d=2 -> 16/8, d=3 -> 25/8, d=4 -> 36/8."""
    assert logistic_fm_sensitivity(1) == 1
    assert logistic_fm_sensitivity(2) == 2.0
    assert logistic_fm_sensitivity(3) == 3.125
    assert logistic_fm_sensitivity(4) == 4.5
    with pytest.raises(ValueError):
        logistic_fm_sensitivity(0)


def _worst_pair(d: int) -> float:
    """Largest L1 change of the vector over every pair of records whose features are corners or
    0 of [-1, 1]^(d-1) (the extreme points of the bound's derivation)."""
    pts = [np.array([[1.0, *x]]) for x in itertools.product((-1.0, 0.0, 1.0), repeat=d - 1)]
    recs = [(p, np.array([y])) for p in pts for y in (0.0, 1.0)]
    vecs = [logistic_fm_vector(p, y) for p, y in recs]
    return max(np.abs(a - b).sum() for a in vecs for b in vecs)


def test_worst_cases_reach_the_bound():
    """Exhaustive over extreme records: the largest change is the claim, exactly. At d = 2 it is
    2 (by hand: (1, x=1, y=0) -> (1, x=1, y=1) moves lin_0 and lin_1 by 1 each); the bound of
    earlier versions, 2.625, was sound but 0.625 loose."""
    assert _worst_pair(2) == 2.0
    for d in (1, 2, 3, 4):
        assert _worst_pair(d) == logistic_fm_sensitivity(d)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 5), st.integers(1, 30), st.integers(0, 2**32 - 1))
def test_vector_is_the_taylor_loss(d, n, seed):
    """n log 2 + lin.w + sum_{j<=k} quad_jk w_j w_k (quad_00 = n/8) equals
    sum_i log 2 + (1/2 - y_i) s_i + s_i^2 / 8, s = tx.w."""
    rng = np.random.default_rng(seed)
    tx = np.column_stack([np.ones(n), rng.uniform(-1, 1, (n, d - 1))])
    y = rng.integers(0, 2, n).astype(float)
    w = rng.normal(size=d)
    vec = logistic_fm_vector(tx, y)
    iu, ju = np.triu_indices(d)
    quad = np.concatenate([[n / 8.0], vec[d:]])
    poly = n * np.log(2) + vec[:d] @ w + quad @ (w[iu] * w[ju])
    s = tx @ w
    assert poly == pytest.approx(np.sum(np.log(2) + (0.5 - y) * s + s ** 2 / 8), rel=1e-9, abs=1e-9)


def _table(n_yes: int, n_no: int, x_yes: int, x_no: int) -> Coded:
    """y by one ordered feature x in {0, 1, 2}."""
    cols = (cat_coding("y", ["no", "yes"], [0, 1]), int_coding("x", [0, 1, 2, 3]))
    rows = [(1, x_yes)] * n_yes + [(0, x_no)] * n_no
    return Coded(codes=np.array(rows, dtype=np.int64), columns=cols)


def test_exact_fit_separates_a_separable_table():
    """y = 1 exactly where x = 2: the fit predicts every record right (accuracy 1)."""
    t = _table(30, 30, 2, 0)
    crit = make_criterion(COEF)
    des = crit.design(EvalContext(t, t, {}))
    beta = exact_fit(des, t, crit.y(t))
    assert beta[1] > 0
    assert accuracy(des, t, crit.y(t), beta).mean() == 1.0
    # the same fit on T and C: the coefficient distance is 0
    assert crit.value(EvalContext(t, t, {})) == pytest.approx(0.0, abs=1e-9)


def test_value_grows_when_the_relation_flips():
    """C says y rises with x, T says it falls: coefficient distance > 0, accuracy of C's model
    on T is 0 while T's own model is right everywhere."""
    t, c = _table(30, 30, 0, 2), _table(30, 30, 2, 0)
    ctx = EvalContext(t, c, {})
    assert make_criterion(COEF).value(ctx) > 0.5
    acc = make_criterion(ACC)
    des = acc.design(ctx)
    y = acc.y(t)
    beta_t = exact_fit(des, t, y)
    assert acc.value(ctx, beta_ref=beta_t) == pytest.approx(1.0)


@settings(max_examples=200, deadline=None)
@given(cls_case(), st.integers(0, 2**32 - 1))
def test_accuracy_difference_sensitivity_2_over_n(cs, seed):
    """Both models fixed (public): |f(T) - f(T')| <= 2/n for one changed record."""
    t, t2, c = cs
    crit = make_criterion(ACC)
    ctx, ctx2 = EvalContext(t, c, {}), EvalContext(t2, c, {})
    d = crit.design(ctx).d
    beta = np.random.default_rng(seed).normal(size=d) * 2
    f1, f2 = crit.value(ctx, beta_ref=beta), crit.value(ctx2, beta_ref=beta)
    assert abs(f1 - f2) <= 2 / t.n + 1e-12
    assert crit.sensitivity(ctx)[0] == 2 / t.n


def test_accuracy_worst_case_is_attained():
    """One record right under the DP model and wrong under C's becomes the opposite: the
    difference moves by exactly 2/n."""
    c = _table(30, 30, 2, 0)
    t = _table(30, 30, 2, 0)
    crit = make_criterion(ACC)
    ctx = EvalContext(t, c, {})
    des = crit.design(ctx)
    beta_c = crit.synth_coefficients(ctx)
    beta_ref = -beta_c  # predicts the opposite everywhere
    f1 = accuracy(des, t, crit.y(t), beta_ref) - accuracy(des, t, crit.y(t), beta_c)
    t2codes = t.codes.copy()
    t2codes[0] = (0, 2)  # a "no" at x = 2: C's model now wrong, the reversed one right
    t2 = Coded(codes=t2codes, columns=t.columns)
    f2 = accuracy(des, t2, crit.y(t2), beta_ref) - accuracy(des, t2, crit.y(t2), beta_c)
    assert abs(f1.mean() - f2.mean()) == pytest.approx(2 / t.n)


def test_positive_labels_and_errors():
    cols = (cat_coding("y", ["no", "yes", "maybe"], [0, 1, 2]),)
    coded = Coded(codes=np.zeros((3, 1), dtype=np.int64), columns=cols)
    assert positive_codes(coded, "y", ["yes", "maybe"], "w").tolist() == [False, True, True]
    with pytest.raises(CriterionError, match="none of"):
        positive_codes(coded, "y", ["YES"], "w")
    with pytest.raises(CriterionError, match="every category"):
        positive_codes(coded, "y", ["no", "yes", "maybe"], "w")
    for bad in ({"report": "auc"}, {"positive": None}, {"positive": True},
                {"include_intercept": "yes"}, {"reference": "cls"},
                {"report": "accuracy", "include_intercept": True}):
        with pytest.raises(CriterionError):
            make_criterion(dict(COEF, **bad))


def test_evaluate_records_and_accuracy_needs_a_reference():
    rng = np.random.default_rng(5)
    cols = _columns([int_coding("x", [0, 2, 4, 6]), cat_coding("s", ["a", "b"], [0, 1])])
    codes = np.column_stack([rng.integers(0, 3, 400), rng.integers(0, 3, 400),
                             rng.integers(0, 2, 400)])
    t = Coded(codes=codes.astype(np.int64), columns=cols)
    ctx = EvalContext(t, t, {})
    with pytest.raises(CriterionError, match="evaluated before"):
        make_criterion(ACC).evaluate(ctx, Randomness())
    rand = Randomness()
    res = make_criterion(COEF).evaluate(ctx, rand)
    rec = rand.transcript.records[-1]
    d = 3  # intercept, x, s = b (one-hot, a the reference)
    assert rec["kind"] == "laplace" and rec["sensitivity"] == logistic_fm_sensitivity(d)
    assert rec["epsilon"] == COEF["epsilon"]
    assert res.sensitivity == logistic_fm_sensitivity(d)
    assert "cls" in ctx.released
    res2 = make_criterion(ACC).evaluate(ctx, rand)
    rec2 = rand.transcript.records[-1]
    assert rec2["kind"] == "laplace" and rec2["sensitivity"] == pytest.approx(2 / 400)
    assert res2.sensitivity_inputs["reference"] == "cls" and res2.mechanism == "laplace"
