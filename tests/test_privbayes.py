"""Tests of mechanisms/privbayes.py: sensitivities, theta bound, accuracy, domain, replay."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck

from generator_util import planted  # noqa: E402
from dpbundle.mechanisms.noise import Randomness, ReplayMismatch
from dpbundle.mechanisms.privbayes import (
    PrivBayes,
    PrivBayesModel,
    count_table,
    count_table_sensitivity,
    level_size,
    max_level,
    mi_score,
    mi_score_sensitivity,
    r_score,
    r_score_sensitivity,
    theta_max_cells,
)

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


# ----------------------------------------------------------------------------- strategies

@st.composite
def neighbours(draw, max_d: int = 4, max_k: int = 5, max_n: int = 12):
    """(codes, codes', domain, x, parents): codes' = codes with one record changed."""
    d = draw(st.integers(2, max_d))
    domain = tuple(draw(st.lists(st.integers(1, max_k), min_size=d, max_size=d)))
    n = draw(st.integers(1, max_n))
    rows = [[draw(st.integers(0, k - 1)) for k in domain] for _ in range(n)]
    codes = np.array(rows, dtype=np.int64).reshape(n, d)
    i = draw(st.integers(0, n - 1))
    other = codes.copy()
    other[i] = [draw(st.integers(0, k - 1)) for k in domain]
    x = draw(st.integers(0, d - 1))
    pool = [j for j in range(d) if j != x]
    chosen = draw(st.lists(st.sampled_from(pool), unique=True, max_size=len(pool)))
    parents = tuple((j, draw(st.integers(0, max(max_level(domain[j]), 0)))) for j in chosen)
    return codes, other, domain, x, parents


@st.composite
def adversarial_neighbours(draw):
    """Neighbours built to push R: data concentrated on a few cells (large score changes)."""
    kx = draw(st.integers(2, 4))
    kp = draw(st.integers(2, 4))
    n = draw(st.integers(1, 6))
    xs = draw(st.lists(st.integers(0, kx - 1), min_size=n, max_size=n))
    ps = draw(st.lists(st.integers(0, kp - 1), min_size=n, max_size=n))
    codes = np.array([xs, ps], dtype=np.int64).T.reshape(n, 2)
    other = codes.copy()
    i = draw(st.integers(0, n - 1))
    other[i] = [draw(st.integers(0, kx - 1)), draw(st.integers(0, kp - 1))]
    return codes, other, (kx, kp)


# ----------------------------------------------------------------------------- sensitivities

@SETTINGS
@given(neighbours())
def test_r_score_change_within_sensitivity(case):
    codes, other, domain, x, parents = case
    n = codes.shape[0]
    delta = abs(r_score(codes, domain, x, parents) - r_score(other, domain, x, parents))
    assert delta <= r_score_sensitivity(n) + 1e-12


@SETTINGS
@given(adversarial_neighbours())
def test_r_score_change_within_sensitivity_small_n(case):
    codes, other, domain = case
    n = codes.shape[0]
    delta = abs(r_score(codes, domain, 0, ((1, 0),)) - r_score(other, domain, 0, ((1, 0),)))
    assert delta <= r_score_sensitivity(n) + 1e-12


def test_r_score_sensitivity_is_not_vacuous():
    """A real change moves R by 1.75/n (found by brute force): a claimed 1/n would be wrong,
    so the property tests above can fail."""
    n = 4
    codes = np.array([[0, 0], [0, 1], [1, 0], [1, 1]])
    other = codes.copy()
    other[0] = [2, 2]
    delta = abs(r_score(codes, (3, 3), 0, ((1, 0),)) - r_score(other, (3, 3), 0, ((1, 0),)))
    assert delta == pytest.approx(1.75 / n)
    assert 1.0 / n < delta <= r_score_sensitivity(n)


@SETTINGS
@given(neighbours())
def test_mi_score_change_within_sensitivity(case):
    codes, other, domain, x, parents = case
    n = codes.shape[0]
    kpi = math.prod(level_size(domain[j], lv) for j, lv in parents)
    delta = abs(mi_score(codes, domain, x, parents) - mi_score(other, domain, x, parents))
    assert delta <= mi_score_sensitivity(n, domain[x], kpi) + 1e-9


@pytest.mark.parametrize("n", [2, 3, 4])
@pytest.mark.parametrize("kx,kp", [(2, 2), (2, 3), (3, 3)])
def test_mi_score_sensitivity_exhaustive_and_tight(n, kx, kp):
    """Every dataset of n records on a kx x kp domain and every changed record: the bound holds
    and, for n >= 3, is nearly attained (within 3%; exactly in most cases): not vacuous."""
    import itertools
    cells = [(a, b) for a in range(kx) for b in range(kp)]
    worst = 0.0
    for rows in itertools.combinations_with_replacement(cells, n):
        codes = np.array(rows, dtype=np.int64)
        base = mi_score(codes, (kx, kp), 0, ((1, 0),))
        for c in cells:
            other = codes.copy()
            other[0] = c
            worst = max(worst, abs(mi_score(other, (kx, kp), 0, ((1, 0),)) - base))
    bound = mi_score_sensitivity(n, kx, kp)
    assert worst <= bound + 1e-9
    if n >= 3:
        assert worst >= 0.97 * bound


@SETTINGS
@given(neighbours())
def test_count_table_l1_change_at_most_2(case):
    codes, other, domain, x, parents = case
    a = count_table(codes, domain, x, parents)
    b = count_table(other, domain, x, parents)
    assert a.shape == b.shape
    assert np.abs(a - b).sum() <= count_table_sensitivity()
    assert a.sum() == codes.shape[0]


def test_compressed_counts_equal_plain_counts():
    from dpbundle.mechanisms.privbayes import _compress
    codes, domain = planted(700, seed=5)
    rows, w = _compress(codes, domain)
    assert w.sum() == 700 and len(rows) == len(np.unique(codes, axis=0))
    for x, parents in [(0, ()), (2, ((0, 0), (1, 1))), (3, ((2, 1),))]:
        assert np.array_equal(count_table(rows, domain, x, parents, w),
                              count_table(codes, domain, x, parents))


def test_generalisation_levels():
    assert [level_size(32, lv) for lv in range(5)] == [32, 16, 8, 4, 2]
    assert [level_size(29, lv) for lv in range(5)] == [29, 15, 8, 4, 2]
    assert max_level(29) == 4 and max_level(2) == 0 and max_level(1) == -1 and max_level(3) == 1
    assert level_size(3, max_level(3)) == 2


# ----------------------------------------------------------------------------- theta bound

def test_theta_max_cells_formula():
    assert theta_max_cells(160_000, 3.0, 6, 30) == pytest.approx(160_000 * 3.0 / (2 * 6 * 30))
    pb = PrivBayes(4.0, epsilon_split=0.25, theta=30)
    assert pb.max_table_cells(160_000, 6) == pytest.approx(160_000 * 3.0 / 360)


def _dependent_binary(n: int, seed: int = 1) -> np.ndarray:
    g = np.random.default_rng(seed)
    a = g.integers(0, 2, n)
    b = np.where(g.random(n) < 0.9, a, 1 - a)
    return np.stack([a, b], axis=1).astype(np.int64)


def test_theta_bound_uses_epsilon_2_not_total_epsilon():
    """n=1000, eps=1, split=0.5, d=2, theta=41: eps_2 bound = 500/164 = 3.05 < 4 = |X||Pi|, but
    the total-epsilon bound = 1000/164 = 6.1 >= 4. So the second attribute must get NO parent
    (with the 2024 bug it would get one)."""
    codes = _dependent_binary(1000)
    pb = PrivBayes(1.0, epsilon_split=0.5, theta=41)
    assert pb.max_table_cells(1000, 2) < 4 <= theta_max_cells(1000, 1.0, 2, 41)
    for _ in range(3):
        model = pb.fit(codes, (2, 2), Randomness())
        assert [node["parents"] for node in model.network_description()] == [[], []]
    # control: with a theta the eps_2 bound admits, the dependent parent is used
    pb2 = PrivBayes(1.0, epsilon_split=0.5, theta=20)  # 500/80 = 6.25 >= 4
    model = pb2.fit(codes, (2, 2), Randomness())
    assert len(model.network_description()[1]["parents"]) == 1


def test_theta_parent_sets_are_maximal_and_fit():
    pb = PrivBayes(4.0, epsilon_split=0.25, theta=30)
    domain = (12, 29, 11, 15, 2, 32)
    cap = pb.max_table_cells(160_000, 6) / domain[5]
    sets = pb._theta_parent_sets([0, 1, 2, 3], domain, cap)
    assert sets and all(math.prod(level_size(domain[j], lv) for j, lv in s) <= cap for s in sets)
    for s in sets:  # no refinement / addition fits any more
        prod = math.prod(level_size(domain[j], lv) for j, lv in s)
        lv = dict(s)
        for j in [0, 1, 2, 3]:
            if j in lv and lv[j] > 0:
                assert prod // level_size(domain[j], lv[j]) * level_size(domain[j], lv[j] - 1) > cap
            if j not in lv:
                assert prod * level_size(domain[j], max_level(domain[j])) > cap


# ----------------------------------------------------------------------------- accuracy

def _freq(codes: np.ndarray, cols: list[tuple[int, int]], domain) -> np.ndarray:
    idx = np.zeros(codes.shape[0], dtype=np.int64)
    size = 1
    for j, lv in cols:
        k = level_size(domain[j], lv)
        idx = idx * k + (codes[:, j] >> lv)
        size *= k
    return np.bincount(idx, minlength=size) / codes.shape[0]


@pytest.mark.parametrize("kw", [{"theta": 1.0}, {"degree": 2}, {"theta": 1.0, "score": "MI"}])
def test_huge_epsilon_reproduces_marginals(kw):
    codes, domain = planted(5000)
    pb = PrivBayes(1e6, epsilon_split=0.5, **kw)
    rand = Randomness()
    model = pb.fit(codes, domain, rand)
    synth = model.sample(60_000, rand.rng("test sample"))
    for j in range(len(domain)):
        err = np.abs(_freq(codes, [(j, 0)], domain) - _freq(synth, [(j, 0)], domain)).max()
        assert err < 0.02, (j, err)
    modelled = 0
    for node in model.network_description():
        for p in node["parents"]:
            cols = [(p["attribute"], p["level"]), (node["attribute"], 0)]
            err = np.abs(_freq(codes, cols, domain) - _freq(synth, cols, domain)).max()
            assert err < 0.02, (node, err)
            modelled += 1
    assert modelled >= len(domain) - 1  # every non-root attribute has a parent here
    assert pb.network == model.network_description()
    named = model.network_description(names=["a", "b", "c", "e"])
    assert all(node["name"] == "abce"[node["attribute"]] for node in named)
    assert all(p["size"] == level_size(domain[p["attribute"]], p["level"])
               for node in named for p in node["parents"])


def test_low_epsilon_is_noisy_but_valid():
    """At a small epsilon the planted dependence is not reproduced exactly (the noise is real)."""
    codes, domain = planted(300)
    pb = PrivBayes(0.05, epsilon_split=0.5, degree=2)
    rand = Randomness()
    model = pb.fit(codes, domain, rand)
    synth = model.sample(20_000, rand.rng("s"))
    errs = [np.abs(_freq(codes, [(j, 0)], domain) - _freq(synth, [(j, 0)], domain)).max()
            for j in range(len(domain))]
    assert max(errs) > 0.02


# ----------------------------------------------------------------------------- domain

@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 9), min_size=1, max_size=5), st.integers(1, 60),
       st.sampled_from([{"theta": 4.0}, {"theta": 0.5}, {"degree": 1}, {"degree": 3}]),
       st.integers(0, 2**32 - 1))
def test_samples_stay_in_domain(domain, n, kw, seed):
    g = np.random.default_rng(seed)
    codes = np.stack([g.integers(0, k, n) for k in domain], axis=1).astype(np.int64)
    rand = Randomness()
    model = PrivBayes(0.5, epsilon_split=0.3, **kw).fit(codes, domain, rand)
    out = model.sample(500, rand.rng("sample"))
    assert out.shape == (500, len(domain)) and out.dtype == np.int64
    assert np.all(out >= 0) and np.all(out < np.asarray(domain))
    assert sorted(node["attribute"] for node in model.network_description()) == list(range(len(domain)))


def test_sampler_follows_conditionals_and_skips_zero_probability():
    domain = (2, 3)
    cond0 = np.array([[0.25, 0.75]])
    cond1 = np.array([[0.0, 1.0, 0.0], [0.5, 0.0, 0.5]])
    from dpbundle.mechanisms.privbayes import NetworkNode
    model = PrivBayesModel(domain, [NetworkNode(0, ()), NetworkNode(1, ((0, 0),))], [cond0, cond1])
    out = model.sample(40_000, np.random.Generator(np.random.PCG64(3)))
    assert abs(out[:, 0].mean() - 0.75) < 0.01
    assert np.all(out[out[:, 0] == 0, 1] == 1)
    assert not np.any(out[out[:, 0] == 1, 1] == 1)
    assert model.sample(0, np.random.Generator(np.random.PCG64(3))).shape == (0, 2)


def test_model_rejects_bad_network():
    from dpbundle.mechanisms.privbayes import NetworkNode
    ok = np.array([[0.5, 0.5]])
    with pytest.raises(ValueError, match="earlier"):
        PrivBayesModel((2, 2), [NetworkNode(0, ((1, 0),)), NetworkNode(1, ())],
                       [np.full((2, 2), 0.5), ok])
    with pytest.raises(ValueError, match="every attribute"):
        PrivBayesModel((2, 2), [NetworkNode(0, ())], [ok])
    with pytest.raises(ValueError, match="positive mass"):
        PrivBayesModel((2,), [NetworkNode(0, ())], [np.array([[0.0, 0.0]])])


def test_codes_outside_domain_rejected():
    with pytest.raises(ValueError, match="domain"):
        PrivBayes(1.0, epsilon_split=0.5, degree=1).fit(np.array([[0, 3]]), (2, 3), Randomness())


# ----------------------------------------------------------------------------- replay

def test_replay_identical_and_neighbour_mismatch():
    codes, domain = planted(800, seed=11)
    pb = PrivBayes(2.0, epsilon_split=0.25, theta=4)
    rec = Randomness()
    synth = pb.fit(codes, domain, rec).sample(3000, rec.rng("sample"))
    records = list(rec.transcript.records)
    kinds = [r["kind"] for r in records]
    assert kinds.count("exponential") == len(domain) - 1 and kinds.count("laplace") == len(domain)

    rep = Randomness.replay(records)
    again = pb.fit(codes, domain, rep).sample(3000, rep.rng("sample"))
    rep.check_finished()
    assert np.array_equal(synth, again)

    other = codes.copy()
    other[0] = [(v + 1) % k for v, k in zip(other[0], domain)]
    rep2 = Randomness.replay(records)
    with pytest.raises(ReplayMismatch):
        pb.fit(other, domain, rep2).sample(3000, rep2.rng("sample"))


def test_transcript_budget_matches_epsilon():
    codes, domain = planted(500, seed=2)
    pb = PrivBayes(3.0, epsilon_split=0.4, theta=2)
    rand = Randomness()
    pb.fit(codes, domain, rand)
    spent = {"exponential": 0.0, "laplace": 0.0}
    for r in rand.transcript.records:
        if r["kind"] in spent:
            spent[r["kind"]] += r["epsilon"]
            if r["kind"] == "exponential":
                assert r["sensitivity"] == r_score_sensitivity(codes.shape[0])
            else:
                assert r["sensitivity"] == 2.0
    assert spent["exponential"] == pytest.approx(0.4 * 3.0)
    assert spent["laplace"] == pytest.approx(0.6 * 3.0)
    # exactly (rationals): the floats handed to OpenDP add up to at most the declared 3.0, and
    # each phase to at most its part, eps_1 = 6/5 and eps_2 = 9/5 (0.4 x 3.0 as decimals)
    exact_spent = {k: sum(Fraction(r["epsilon"]) for r in rand.transcript.records if r["kind"] == k)
                   for k in ("exponential", "laplace")}
    assert exact_spent["exponential"] <= Fraction(pb.epsilon_1) <= Fraction(6, 5)
    assert exact_spent["laplace"] <= Fraction(pb.epsilon_2)
    assert Fraction(pb.epsilon_1) + Fraction(pb.epsilon_2) <= 3
    assert sum(exact_spent.values()) <= 3


# ----------------------------------------------------------------------------- protocol

def test_budget_parts_and_privacy_map():
    pb = PrivBayes(4.0, epsilon_split=0.25, theta=30)
    parts = pb.budget_parts()
    assert [p["purpose"] for p in parts] == ["network structure", "conditional tables"]
    assert sum(p["epsilon"] for p in parts) == pytest.approx(4.0)
    assert parts[0]["epsilon"] == pytest.approx(1.0)
    assert pb.privacy_map(1) == 4.0 and pb.privacy_map(2) == 8.0
    assert pb.type == "privbayes"
    assert pb.hyperparameters() == {"epsilon_split": 0.25, "theta": 30, "score": "R"}
    assert PrivBayes(4.0, **pb.hyperparameters()).hyperparameters() == pb.hyperparameters()
    assert PrivBayes(1.0, epsilon_split=0.5, degree=3).hyperparameters()["degree"] == 3


@pytest.mark.parametrize("args,kw,msg", [
    ((0.0,), {"epsilon_split": 0.5, "theta": 4}, "epsilon"),
    ((-1.0,), {"epsilon_split": 0.5, "theta": 4}, "epsilon"),
    ((float("inf"),), {"epsilon_split": 0.5, "theta": 4}, "epsilon"),
    ((1.0,), {"epsilon_split": 0.0, "theta": 4}, "epsilon_split"),
    ((1.0,), {"epsilon_split": 1.0, "theta": 4}, "epsilon_split"),
    ((1.0,), {"epsilon_split": 0.5}, "exactly one"),
    ((1.0,), {"epsilon_split": 0.5, "theta": 4, "degree": 2}, "exactly one"),
    ((1.0,), {"epsilon_split": 0.5, "theta": 0}, "theta"),
    ((1.0,), {"epsilon_split": 0.5, "degree": 0}, "degree"),
    ((1.0,), {"epsilon_split": 0.5, "degree": 2.5}, "degree"),
    ((1.0,), {"epsilon_split": 0.5, "degree": True}, "degree"),
    ((1.0,), {"epsilon_split": 0.5, "theta": 4, "score": "mutual"}, "score"),
])
def test_bad_hyperparameters(args, kw, msg):
    with pytest.raises(ValueError, match=msg):
        PrivBayes(*args, **kw)


def test_registered_in_generators_if_present():
    gens = pytest.importorskip("dpbundle.mechanisms.generators")
    g = gens.make_generator("privbayes", 2.0, epsilon_split=0.5, theta=8)
    assert isinstance(g, PrivBayes) and g.epsilon == 2.0


# --------------------------------------------------------------------------- norm-sub post-processing

from hypothesis import given, settings, strategies as st  # noqa: E402

from dpbundle.mechanisms.privbayes import norm_sub  # noqa: E402


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-50, 200, allow_nan=False), min_size=1, max_size=40),
       st.floats(0, 500, allow_nan=False))
def test_norm_sub_hits_the_public_total_and_keeps_order(values, total):
    noisy = np.array(values, dtype=float).reshape(1, -1)
    out = norm_sub(noisy, total)
    assert (out >= 0).all()
    clipped_sum = np.clip(noisy, 0, None).sum()
    # Either the clipped table was already within the total, or the result sums to the total.
    expected = min(clipped_sum, total)
    assert abs(out.sum() - expected) <= 1e-7 * max(1.0, total)
    # A common shift: the order of cells is kept and cells only ever shrink.
    assert (out <= np.clip(noisy, 0, None) + 1e-9).all()
    order = np.argsort(noisy.ravel(), kind="stable")
    assert (np.diff(out.ravel()[order]) >= -1e-9).all()


def test_norm_sub_removes_noise_mass_from_empty_cells():
    # 3 real cells (100 records) and 97 empty cells with noise +-4: plain clipping inflates the
    # table by 49 * 4 = 196 records; norm-sub keeps the total at 100 with one common shift.
    noisy = np.array([40.0, 35.0, 25.0] + [4.0, -4.0] * 48 + [4.0])
    out = norm_sub(noisy.reshape(1, -1), 100.0)
    # The shift, found independently by bisection on sum(max(noisy - delta, 0)) = 100.
    lo, hi = 0.0, 40.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if np.clip(noisy - mid, 0, None).sum() > 100 else (lo, mid)
    np.testing.assert_allclose(out.ravel(), np.clip(noisy - lo, 0, None), atol=1e-9)
    assert abs(out.sum() - 100.0) < 1e-9
    assert out[0, 3:].sum() < 0.1 * np.clip(noisy[3:], 0, None).sum()
