"""Tests of mechanisms/privsyn.py: InDif sensitivity (property tests and worst cases), budget
arithmetic, selection, consistency as post-processing, GUM, domain, accuracy, replay, spec and
an end-to-end release + enclave audit."""
from __future__ import annotations

import itertools
import json
import math
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from generator_util import code_neighbours  # noqa: E402
from dpbundle.mechanisms import exact
from dpbundle.mechanisms.generators import Model, generator_types, make_generator
from dpbundle.mechanisms.noise import Randomness, ReplayMismatch
from dpbundle.mechanisms.privsyn import (
    INDIF_SENSITIVITY,
    PrivSyn,
    _gum_step,
    allocate,
    candidate_pairs,
    consistent_tables,
    expected_l1_error,
    grid_problems,
    gum,
    indif,
    indif_numerator,
    indif_sensitivity,
    pair_table,
    select_pairs,
)

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ----------------------------------------------------------------------------- helpers

def _indif_float(table: np.ndarray) -> float:
    """InDif straight from the definition, in floats (independent of indif_numerator)."""
    t = np.asarray(table, dtype=np.float64)
    n = t.sum()
    return float(np.abs(t - np.outer(t.sum(axis=1), t.sum(axis=0)) / n).sum())


def _all_indifs(codes, domain):
    return np.array([indif(pair_table(codes, domain, a, b)) for a, b in candidate_pairs(domain)])


def _chain(n: int, domain, seed: int = 0, keep: float = 0.8) -> np.ndarray:
    """Each column a noisy function of the previous one: strong 2-way dependence."""
    g = np.random.default_rng(seed)
    cols = [g.choice(domain[0], n, p=np.arange(1, domain[0] + 1) / sum(range(1, domain[0] + 1)))]
    for k in domain[1:]:
        dep = (cols[-1] * 7 + 3) % k
        cols.append(np.where(g.random(n) < keep, dep, g.integers(0, k, n)))
    return np.stack(cols, axis=1).astype(np.int64)


def _freq(codes, cols, domain):
    idx = np.zeros(codes.shape[0], dtype=np.int64)
    size = 1
    for j in cols:
        idx = idx * domain[j] + codes[:, j]
        size *= domain[j]
    return np.bincount(idx, minlength=size) / codes.shape[0]


def _tvd(a, b, cols, domain) -> float:
    return 0.5 * float(np.abs(_freq(a, cols, domain) - _freq(b, cols, domain)).sum())


# ----------------------------------------------------------------------------- strategies

@st.composite
def concentrated_neighbours(draw):
    """Worst-case-like neighbours: most records on one 'big' value per column (as in the tight
    construction), a few elsewhere, and the changed record moved to rarely used values."""
    ka, kb = draw(st.integers(2, 5)), draw(st.integers(2, 5))
    n = draw(st.integers(2, 60))
    big = draw(st.integers(n // 2, n))
    rows = [(0, 0)] * big
    for _ in range(n - big):
        rows.append((draw(st.integers(0, ka - 1)), draw(st.integers(0, kb - 1))))
    codes = np.array(rows, dtype=np.int64)
    other = codes.copy()
    i = draw(st.integers(0, n - 1))
    other[i] = (draw(st.integers(0, ka - 1)), draw(st.integers(0, kb - 1)))
    return codes, other, (ka, kb)


# ----------------------------------------------------------------------------- InDif sensitivity

def test_indif_exact_equals_float_definition():
    g = np.random.default_rng(3)
    for _ in range(50):
        t = g.integers(0, 50, size=(g.integers(1, 6), g.integers(1, 6)))
        if t.sum() == 0:
            continue
        assert indif(t) == pytest.approx(_indif_float(t), rel=1e-12, abs=1e-9)
        n = int(t.sum())
        assert indif_numerator(t) == int(np.abs(n * t - np.outer(t.sum(1), t.sum(0))).sum())
    assert indif(np.zeros((2, 3), dtype=np.int64)) == 0.0
    assert indif_sensitivity() == INDIF_SENSITIVITY == 6.0


@SETTINGS
@given(code_neighbours(min_d=2, max_d=4, max_n=14))
def test_indif_change_within_sensitivity(case):
    codes, other, domain = case
    a, b = _all_indifs(codes, domain), _all_indifs(other, domain)
    assert np.all(np.abs(a - b) <= INDIF_SENSITIVITY + 1e-9)
    # the vector of all K scores: L1 change <= 6 K (the sensitivity handed to the Laplace draw)
    assert np.abs(a - b).sum() <= INDIF_SENSITIVITY * len(candidate_pairs(domain)) + 1e-9


@SETTINGS
@given(concentrated_neighbours())
def test_indif_change_within_sensitivity_concentrated(case):
    codes, other, domain = case
    delta = abs(indif(pair_table(codes, domain, 0, 1)) - indif(pair_table(other, domain, 0, 1)))
    assert delta <= INDIF_SENSITIVITY + 1e-9


@pytest.mark.parametrize("s", [2, 3, 5, 10, 30, 100, 1000])
def test_indif_worst_case_approaches_six(s):
    """The tight construction of indif_sensitivity's docstring: n = s^2, an independent table
    (InDif 0) on values {0, 1}; the record of cell (0, 0) moves to the empty cell (2, 2).
    InDif' = 6 - 4/s - 2/s^2 exactly: the bound 6 is the supremum, and above the 4 PrivSyn
    states for add/remove neighbours (so that number must not be used for change-one)."""
    t = np.zeros((3, 3), dtype=np.int64)
    t[0, 0], t[0, 1], t[1, 0], t[1, 1] = 1, s - 1, s - 1, (s - 1) ** 2
    t2 = t.copy()
    t2[0, 0] -= 1
    t2[2, 2] += 1
    assert indif(t) == 0.0
    delta = indif(t2) - indif(t)
    assert delta == pytest.approx(6 - 4 / s - 2 / s**2, abs=1e-12)
    assert delta <= INDIF_SENSITIVITY
    if s >= 10:
        assert delta > 4.0 + 1.5   # not vacuous: a claimed 4 (or 5) would be violated
    # as datasets of records: the same change through pair_table
    rows = [(x, y) for x in range(3) for y in range(3) for _ in range(int(t[x, y]))]
    codes = np.array(rows, dtype=np.int64)
    other = codes.copy()
    other[rows.index((0, 0))] = (2, 2)
    assert indif(pair_table(other, (3, 3), 0, 1)) - indif(pair_table(codes, (3, 3), 0, 1)) == \
        pytest.approx(delta, abs=1e-12)


@pytest.mark.parametrize("n", [1, 2, 3, 4])
@pytest.mark.parametrize("ka,kb", [(2, 2), (2, 3), (3, 3)])
def test_indif_sensitivity_exhaustive_small(n, ka, kb):
    """Every dataset of n records on a ka x kb domain and every changed record."""
    cells = [(a, b) for a in range(ka) for b in range(kb)]
    worst = 0.0
    for rows in itertools.combinations_with_replacement(cells, n):
        codes = np.array(rows, dtype=np.int64)
        base = indif(pair_table(codes, (ka, kb), 0, 1))
        for c in cells:
            other = codes.copy()
            other[0] = c
            worst = max(worst, abs(indif(pair_table(other, (ka, kb), 0, 1)) - base))
    assert worst <= INDIF_SENSITIVITY + 1e-12


@SETTINGS
@given(code_neighbours(min_d=2, max_d=4, max_n=14))
def test_count_tables_l1_change_at_most_2(case):
    codes, other, domain = case
    for a, b in itertools.combinations(range(len(domain)), 2):
        assert np.abs(pair_table(codes, domain, a, b) - pair_table(other, domain, a, b)).sum() <= 2
    for j, k in enumerate(domain):
        assert np.abs(np.bincount(codes[:, j], minlength=k)
                      - np.bincount(other[:, j], minlength=k)).sum() <= 2


def test_candidate_pairs_public_rule():
    assert candidate_pairs((3, 1, 4, 2)) == [(0, 2), (0, 3), (2, 3)]
    assert candidate_pairs((5,)) == []
    from dpbundle.mechanisms import privsyn
    assert candidate_pairs((privsyn.MAX_PAIR_CELLS, 2, 2)) == [(1, 2)]


# ----------------------------------------------------------------------------- budget

@settings(max_examples=200, deadline=None)
@given(st.floats(1e-3, 1e3, allow_nan=False), st.floats(0.01, 0.99, allow_nan=False),
       st.lists(st.integers(1, 5000), min_size=1, max_size=60))
def test_budget_parts_and_allocation_never_exceed_epsilon(eps, split, cells):
    g = PrivSyn(eps, split_select=split)
    parts = g.budget_parts()
    assert len(parts) == 2
    total = sum(exact.binary(p["epsilon"]) for p in parts)
    assert total <= exact.dec(eps)                                     # exactly
    assert float(total) == pytest.approx(eps, rel=1e-9)
    assert exact.binary(g.epsilon_select) <= exact.dec(split) * exact.dec(eps)
    shares = allocate(g.epsilon_measure, cells)
    assert sum(exact.binary(e) for e in shares) <= exact.binary(g.epsilon_measure)
    assert all(e > 0 for e in shares)
    w = np.sqrt(cells)
    np.testing.assert_allclose(shares, g.epsilon_measure * w / w.sum(), rtol=1e-9)


def test_allocation_is_l1_optimal():
    """sqrt(cells) shares minimise sum 2 c_i / eps_i; expected_l1_error is that minimum."""
    cells = [12, 9, 32, 288, 60, 384]
    eps = 3.6
    shares = np.array(allocate(eps, cells))
    err = float(np.sum(2 * np.array(cells) / shares))
    assert err == pytest.approx(expected_l1_error(cells, eps), rel=1e-9)
    g = np.random.default_rng(0)
    for _ in range(200):   # any other split of the same budget is worse
        w = g.dirichlet(np.ones(len(cells)))
        assert float(np.sum(2 * np.array(cells) / (eps * w))) >= err * (1 - 1e-12)
    assert allocate(eps, []) == []


def test_transcript_spends_at_most_epsilon_with_right_sensitivities():
    domain = (4, 3, 5, 2)
    codes = _chain(800, domain, seed=2)
    g = PrivSyn(0.8, split_select=0.25)
    rand = Randomness()
    g.fit(codes, domain, rand)
    recs = [r for r in rand.transcript.records if r["kind"] == "laplace"]
    k = len(candidate_pairs(domain))
    assert recs[0]["purpose"] == "privsyn: InDif scores of all candidate pairs"
    assert recs[0]["sensitivity"] == 6.0 * k and recs[0]["epsilon"] == g.epsilon_select
    assert all(r["sensitivity"] == 2 and r["mechanism"].endswith("/integer") for r in recs[1:])
    assert len(recs) == 1 + len(domain) + len(g.selected)
    spent_meas = sum(Fraction(r["epsilon"]) for r in recs[1:])
    assert spent_meas <= Fraction(g.epsilon_measure)
    assert sum(Fraction(r["epsilon"]) for r in recs) <= Fraction(4, 5)   # the declared 0.8
    assert float(sum(Fraction(r["epsilon"]) for r in recs)) == pytest.approx(0.8, rel=1e-9)


# ----------------------------------------------------------------------------- selection

def test_densemarg_trade_off():
    """A pair is kept while its noisy InDif exceeds the noise error its measurement adds."""
    oneway = [4, 4, 4]                      # S = 6 at the start
    pair_cells = [16, 16, 16]
    eps = 1.0
    cost_first = 2 * ((6 + 4) ** 2 - 6**2) / eps      # 128
    cost_second = 2 * ((10 + 4) ** 2 - 10**2) / eps   # 192
    cost_third = 2 * ((14 + 4) ** 2 - 14**2) / eps    # 256
    # 2 first (largest gain); then S = 10 and pair 0 still gains (300 > 192); then S = 14 and
    # pair 1 does not (200 < 256), though alone it would have been kept (200 > 128)
    scores = [300.0, 200.0, 10_000.0]
    assert cost_second < 300 and cost_first < 200 < cost_third
    assert select_pairs(scores, pair_cells, oneway, eps, max_pairs=None) == [2, 0]
    assert select_pairs([0.0, 200.0, 0.0], pair_cells, oneway, eps, max_pairs=None) == [1]
    assert select_pairs([cost_first - 1] * 3, pair_cells, oneway, eps, max_pairs=None) == []
    assert select_pairs(scores, pair_cells, oneway, eps, max_pairs=1) == [2]
    assert select_pairs([1e9, 1e9, 1e9], pair_cells, oneway, eps, max_pairs=2) == [0, 1]  # ties: lower index
    assert select_pairs([5.0, -3.0, 7.0], pair_cells, oneway, eps, max_pairs=2, rule="top") == [2, 0]
    assert select_pairs([5.0, -3.0, 7.0], pair_cells, oneway, eps, max_pairs=None, rule="top") == [2, 0, 1]
    assert select_pairs([], [], oneway, eps, max_pairs=None) == []
    assert select_pairs([1e9], [4], [], eps, max_pairs=0) == []
    with pytest.raises(ValueError, match="select_rule"):
        select_pairs([1.0], [4], [], eps, max_pairs=None, rule="best")


def test_selection_finds_the_dependent_pairs():
    domain = (6, 5, 4, 3)
    g = np.random.default_rng(1)
    a = g.integers(0, 6, 20_000)
    b = np.where(g.random(20_000) < 0.9, a % 5, g.integers(0, 5, 20_000))
    c = g.integers(0, 4, 20_000)                          # independent of everything
    d = np.where(g.random(20_000) < 0.9, c % 3, g.integers(0, 3, 20_000))
    codes = np.stack([a, b, c, d], axis=1)
    gen = PrivSyn(2.0)
    gen.fit(codes, domain, Randomness())
    assert set(gen.selected[:2]) == {(0, 1), (2, 3)}
    gen2 = PrivSyn(2.0, max_pairs=1, select_rule="top")
    model = gen2.fit(codes, domain, Randomness())
    assert len(gen2.selected) == 1 and gen2.selected[0] in {(0, 1), (2, 3)}
    assert model.description(["a", "b", "c", "d"])[0]["names"] in (["a", "b"], ["c", "d"])


# ----------------------------------------------------------------------------- post-processing only

class _FixedNoise:
    """A stand-in for Randomness that ignores the true values: it returns the outputs of a
    recorded run in order. Fitting two different datasets with it must give the same model if
    everything after the noise reads only the noisy values and public facts."""

    def __init__(self, records):
        self._out = [r for r in records if r["kind"] == "laplace"]

    def laplace(self, true_value, *, sensitivity, epsilon, purpose, integer=False):
        rec = self._out.pop(0)
        assert rec["purpose"] == purpose and rec["epsilon"] == epsilon
        assert np.size(true_value) == len(rec["noisy"])
        return np.asarray(rec["noisy"], dtype=np.int64 if integer else np.float64).reshape(np.shape(true_value))


def test_model_depends_only_on_the_noisy_values():
    domain = (5, 4, 3, 6)
    d1 = _chain(3000, domain, seed=4)
    d2 = np.random.default_rng(9).integers(0, 5, size=(3000, 4)) % np.array(domain)  # other data, same n
    rand = Randomness()
    g = PrivSyn(1.5)
    m0 = g.fit(d1, domain, rand)
    m1 = PrivSyn(1.5).fit(d1, domain, _FixedNoise(rand.transcript.records))
    m2 = PrivSyn(1.5).fit(d2, domain, _FixedNoise(rand.transcript.records))
    for m in (m1, m2):
        assert m.selected == m0.selected
        for p, q in zip(m.oneways, m0.oneways):
            assert np.array_equal(p, q)
        for (ca, p), (cb, q) in zip(m.marginals, m0.marginals):
            assert ca == cb and np.array_equal(p, q)
    s1 = m1.sample(500, np.random.default_rng(5))
    s2 = m2.sample(500, np.random.default_rng(5))
    assert np.array_equal(s1, s2)


def test_consistency_agrees_on_shared_columns_and_is_non_negative():
    g = np.random.default_rng(0)
    n = 1000.0
    attrs = [(0,), (1,), (2,), (0, 1), (1, 2), (0, 2)]
    domain = (3, 4, 2)
    truth = g.dirichlet(np.ones(24)).reshape(domain) * n
    noisy, scales = [], []
    for i, a in enumerate(attrs):
        other = tuple(j for j in range(3) if j not in a)
        b = 2.0 + i
        noisy.append(truth.sum(axis=other) + g.laplace(0, b, size=[domain[j] for j in a]))
        scales.append(b)
    tabs = consistent_tables(noisy, attrs, scales, n, rounds=30)
    for t in tabs:
        assert np.all(t >= 0) and t.sum() == pytest.approx(n, rel=1e-3)
    # the 1-way of column 1 from (1,), (0, 1) and (1, 2) agree
    one = [tabs[1], tabs[3].sum(axis=0), tabs[4].sum(axis=1)]
    for x in one[1:]:
        np.testing.assert_allclose(x, one[0], rtol=0, atol=0.05 * n / 4)
    # deterministic: same inputs, same output
    again = consistent_tables(noisy, attrs, scales, n, rounds=30)
    assert all(np.array_equal(x, y) for x, y in zip(tabs, again))
    assert consistent_tables([], [], [], n, 3) == []


# ----------------------------------------------------------------------------- GUM

def test_gum_step_moves_toward_target_and_keeps_m():
    rng = np.random.default_rng(0)
    m = 20_000
    X = np.zeros((2, m), dtype=np.uint8)
    X[0] = rng.integers(0, 3, m)
    X[1] = rng.integers(0, 2, m)
    target = np.array([0.3, 0.0, 0.05, 0.05, 0.1, 0.5])
    before = np.abs(np.bincount(X[0].astype(int) * 2 + X[1], minlength=6) / m - target).sum()
    _gum_step(X, (0, 1), (3, 2), target, 0.5, 0.5, rng)
    mid = np.abs(np.bincount(X[0].astype(int) * 2 + X[1], minlength=6) / m - target).sum()
    assert X.shape == (2, m) and mid < 0.6 * before
    for _ in range(6):
        _gum_step(X, (0, 1), (3, 2), target, 1.0, 0.5, rng)
    after = np.abs(np.bincount(X[0].astype(int) * 2 + X[1], minlength=6) / m - target).sum()
    assert after < 0.02


def test_gum_reaches_targets_and_is_deterministic_given_rng():
    domain = (4, 3, 5)
    g = np.random.default_rng(1)
    joint = g.dirichlet(np.ones(60) * 0.3).reshape(domain)
    p01 = joint.sum(axis=2).reshape(-1)
    p12 = joint.sum(axis=0).reshape(-1)
    ones = [joint.sum(axis=(1, 2)), joint.sum(axis=(0, 2)), joint.sum(axis=(0, 1))]
    margs = [((0, 1), p01), ((1, 2), p12)]
    out = gum(ones, margs, domain, 30_000, np.random.default_rng(7), rounds=6, alpha=1.0)
    assert out.dtype == np.int64 and out.shape == (30_000, 3)
    for cols, p in margs:
        assert 0.5 * np.abs(_freq(out, cols, domain) - p).sum() < 0.01
    again = gum(ones, margs, domain, 30_000, np.random.default_rng(7), rounds=6, alpha=1.0)
    assert np.array_equal(out, again)
    # without rounds the records are independent draws: the pair tables are far off
    indep = gum(ones, margs, domain, 30_000, np.random.default_rng(7), rounds=0, alpha=1.0)
    assert 0.5 * np.abs(_freq(indep, (0, 1), domain) - p01).sum() > 0.05
    assert gum(ones, margs, domain, 0, np.random.default_rng(7), rounds=3, alpha=1.0).shape == (0, 3)


# ----------------------------------------------------------------------------- domain, accuracy

@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 9), min_size=1, max_size=5), st.integers(1, 80),
       st.sampled_from([{}, {"max_pairs": 1}, {"select_rule": "top"}, {"gum_rounds": 0}]),
       st.integers(0, 2**32 - 1))
def test_samples_stay_in_domain(domain, n, kw, seed):
    g = np.random.default_rng(seed)
    codes = np.stack([g.integers(0, k, n) for k in domain], axis=1).astype(np.int64)
    rand = Randomness()
    model = PrivSyn(0.5, **kw).fit(codes, domain, rand)
    assert isinstance(model, Model)
    for m in (0, 1, 17, 400):
        out = model.sample(m, rand.rng("sample"))
        assert out.shape == (m, len(domain)) and out.dtype == np.int64
        assert np.all(out >= 0) and np.all(out < np.asarray(domain))


def test_wide_domains_use_narrow_storage_correctly():
    domain = (300, 2, 7)
    codes = np.stack([np.arange(1000) % 300, np.arange(1000) % 2, np.arange(1000) % 7], axis=1)
    rand = Randomness()
    out = PrivSyn(5.0).fit(codes, domain, rand).sample(2000, rand.rng("s"))
    assert out[:, 0].max() < 300 and out[:, 0].max() > 255


def test_large_epsilon_reproduces_selected_pairs():
    """eps = 100 on a strongly dependent table: the selected 2-way marginals are reproduced
    (TVD small) -- and only thanks to GUM: the same model without GUM rounds is far off."""
    domain = (6, 5, 8, 4, 3)
    codes = _chain(20_000, domain, seed=11)
    gen = PrivSyn(100.0)
    rand = Randomness()
    model = gen.fit(codes, domain, rand)
    assert {(0, 1), (1, 2), (2, 3), (3, 4)} <= set(gen.selected)
    synth = model.sample(20_000, rand.rng("sample"))
    tvds = [_tvd(codes, synth, p, domain) for p in gen.selected]
    assert max(tvds) < 0.03, tvds
    for j in range(len(domain)):
        assert _tvd(codes, synth, (j,), domain) < 0.02
    model.gum_rounds = 0
    flat = model.sample(20_000, rand.rng("sample without GUM"))
    assert max(_tvd(codes, flat, p, domain) for p in [(0, 1), (1, 2)]) > 0.3


def test_small_epsilon_is_noisy_but_valid():
    domain = (6, 5, 8, 4)
    codes = _chain(300, domain, seed=3)
    gen = PrivSyn(0.05)
    rand = Randomness()
    synth = gen.fit(codes, domain, rand).sample(5000, rand.rng("s"))
    assert max(_tvd(codes, synth, (j,), domain) for j in range(4)) > 0.05


def test_fit_rejects_bad_input():
    with pytest.raises(ValueError, match="domain"):
        PrivSyn(1.0).fit(np.array([[0, 3]]), (2, 3), Randomness())
    with pytest.raises(ValueError, match="at least one record"):
        PrivSyn(1.0).fit(np.zeros((0, 2), dtype=np.int64), (2, 3), Randomness())
    with pytest.raises(ValueError, match="rows to sample"):
        PrivSyn(1.0).fit(np.zeros((5, 2), dtype=np.int64), (2, 3), Randomness()).sample(-1, np.random.default_rng(0))


# ----------------------------------------------------------------------------- replay

def test_replay_gives_the_same_model_and_sample_bit_for_bit():
    domain = (5, 4, 6, 3)
    codes = _chain(2000, domain, seed=8)
    gen = PrivSyn(1.0, split_select=0.2)
    rec = Randomness()
    model = gen.fit(codes, domain, rec)
    synth = model.sample(3000, rec.rng("sample"))
    records = list(rec.transcript.records)
    kinds = [r["kind"] for r in records]
    assert kinds.count("laplace") == 1 + len(domain) + len(gen.selected) and kinds[-1] == "seed"

    rep = Randomness.replay(records)
    again_model = PrivSyn(1.0, split_select=0.2).fit(codes, domain, rep)
    again = again_model.sample(3000, rep.rng("sample"))
    rep.check_finished()
    assert again_model.selected == model.selected
    assert all(np.array_equal(p, q) for p, q in zip(model.oneways, again_model.oneways))
    assert all(a == b and np.array_equal(p, q)
               for (a, p), (b, q) in zip(model.marginals, again_model.marginals))
    assert np.array_equal(synth, again)

    other = codes.copy()
    other[0] = [(v + 1) % k for v, k in zip(other[0], domain)]
    with pytest.raises(ReplayMismatch):
        PrivSyn(1.0, split_select=0.2).fit(other, domain, Randomness.replay(records))


# ----------------------------------------------------------------------------- protocol, spec

def test_registered_and_protocol():
    info = generator_types()["privsyn"]
    assert info["available"] and info["hyperparameters"] == list(PrivSyn.HYPERPARAMETERS)
    g = make_generator("privsyn", 2.0, max_pairs=3)
    assert isinstance(g, PrivSyn) and g.type == "privsyn" and g.epsilon == 2.0
    assert g.privacy_map(1) == 2.0 and g.privacy_map(3) == 6.0
    hp = g.hyperparameters()
    assert hp == {"split_select": 0.1, "max_pairs": 3, "select_rule": "densemarg",
                  "gum_rounds": 6, "gum_alpha": 1.0, "consistency_rounds": 10}
    assert make_generator("privsyn", 2.0, **hp).hyperparameters() == hp


@pytest.mark.parametrize("kw,msg", [
    ({"split_select": 0}, "split_select"), ({"split_select": 1.0}, "split_select"),
    ({"split_select": True}, "split_select"), ({"max_pairs": -1}, "max_pairs"),
    ({"max_pairs": 2.5}, "max_pairs"), ({"select_rule": "greedy"}, "select_rule"),
    ({"gum_rounds": -1}, "gum_rounds"), ({"gum_rounds": 1.5}, "gum_rounds"),
    ({"gum_alpha": 0}, "gum_alpha"), ({"gum_alpha": 1.5}, "gum_alpha"),
    ({"consistency_rounds": -2}, "consistency_rounds"),
])
def test_bad_hyperparameters(kw, msg):
    with pytest.raises(ValueError, match=msg):
        PrivSyn(1.0, **kw)
    assert grid_problems({k: [v] for k, v in kw.items()})[0].startswith(f".{msg}[0]: ")
    for eps in (0, -1.0, math.inf):
        with pytest.raises(ValueError, match="epsilon"):
            PrivSyn(eps)


def test_spec_validation_of_a_privsyn_grid(births_doc):
    from dpbundle.release.spec.load import semantic_problems

    births_doc["generators"] = [{"type": "privsyn", "grid": {"split_select": [0.1, 0.3],
                                                             "max_pairs": [None, 4]}}]
    assert not [p for p in semantic_problems(births_doc) if "generators" in p]
    births_doc["generators"] = [{"type": "privsyn", "grid": {"split_select": [0.1, 1.5],
                                                             "gum_rounds": ["many"]}}]
    probs = [p for p in semantic_problems(births_doc) if "generators" in p]
    assert any(p.startswith("generators[0].grid.split_select[1]: ") for p in probs), probs
    assert any(p.startswith("generators[0].grid.gum_rounds[0]: ") for p in probs), probs


# ----------------------------------------------------------------------------- end to end

@pytest.mark.slow
def test_release_with_privsyn_passes_the_enclave_audit(tmp_path):
    """`dpbundle release` with a privsyn spec, then `dpbundle audit` with the transcript and the
    registry: every check passes, including the byte-for-byte replay of the iteration."""
    from typer.testing import CliRunner

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import audit_fixtures as fx
    from dpbundle.audit.cli import cli_audit
    from dpbundle.release.cli.main import app
    import typer

    spec_path = fx.fast_spec(tmp_path / "fast.yaml", "dp_count")
    doc = yaml.safe_load(spec_path.read_text())
    doc["generators"] = [{"type": "privsyn", "grid": {"split_select": [0.2]}}]
    spec_path.write_text(yaml.safe_dump(doc, sort_keys=False))
    data = fx.example_registry(tmp_path / "registry.csv", 4000, 5)
    runner = CliRunner()
    assert runner.invoke(app, ["keygen", "--out", str(tmp_path / "k")]).exit_code == 0
    transcript = tmp_path / "private" / "t.jsonl"
    transcript.parent.mkdir(mode=0o700)
    res = runner.invoke(app, ["release", str(spec_path), str(data), "--out", str(tmp_path / "B"),
                              "--key", str(tmp_path / "k.key"), "--transcript", str(transcript),
                              "--ledger", str(tmp_path / "ledger.jsonl")])
    assert res.exit_code == 0, res.output
    budget = json.loads((tmp_path / "B" / "budget.json").read_text())
    assert budget["generation"]["type"] == "privsyn"
    assert [p["purpose"] for p in budget["generation"]["parts"]] == \
        [p["purpose"] for p in PrivSyn(1.0).budget_parts()]

    audit = typer.Typer()
    audit.command("audit")(cli_audit)
    rj = tmp_path / "enclave.json"
    res = runner.invoke(audit, [str(tmp_path / "B"), "--pubkey", str(tmp_path / "k.pub"),
                                "--transcript", str(transcript), "--data", str(data),
                                "--json", str(rj)])
    assert res.exit_code == 0, res.output
    report = json.loads(rj.read_text())
    assert report["passed"] is True
    replay = next(c for c in report["checks"] if c["check"] == "replay")
    assert replay["result"] == "pass", replay
