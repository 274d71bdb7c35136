"""Tests of mechanisms/estimation.py and privsyn's ``estimator: hierarchical``: post-processing
only (deterministic for fixed noisy tables, non-negative, consistent, totals n), better recovery
than the default path where its model holds, merged measurements' sensitivities on neighbouring
datasets, budget, validation, publishing, record types, speed, and the default path unchanged."""
from __future__ import annotations

import hashlib
import itertools
import time
import zlib
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from generator_util import code_neighbours  # noqa: E402
from dpbundle.mechanisms import estimation, exact
from dpbundle.mechanisms.estimation import (
    PairMeasurement,
    expand_pair,
    hierarchical_estimate,
    merge_axis,
    merge_codes,
    merge_factor,
    merged_size,
    project_simplex,
)
from dpbundle.mechanisms.generators import make_generator
from dpbundle.mechanisms.privsyn import PrivSyn, grid_problems, indif, pair_table
from dpbundle.mechanisms.published import model_document, model_from_document

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
HIER = {"estimator": "hierarchical"}


class FakeRand:
    """Deterministic stand-in for Randomness: seeded numpy noise, and a log of the epsilons."""

    def __init__(self, seed: int) -> None:
        self.g = np.random.default_rng(seed)
        self.spent: list[float] = []
        self.purposes: list[str] = []

    def laplace(self, true, *, sensitivity, epsilon, purpose, integer=False):
        self.spent.append(epsilon)
        self.purposes.append(purpose)
        t = np.asarray(true, dtype=np.float64)
        out = t + self.g.laplace(0.0, sensitivity / epsilon, size=t.shape)
        return np.rint(out).astype(np.int64) if integer else out

    def exponential(self, scores, *, sensitivity, epsilon, purpose):
        self.spent.append(epsilon)
        s = np.asarray(scores, dtype=np.float64)
        return int(np.argmax(s * epsilon / (2 * sensitivity) + self.g.gumbel(size=s.shape)))

    def rng(self, name):
        return np.random.default_rng(zlib.crc32(name.encode()))


def _golden_data(n: int = 3000, seed: int = 5):
    g = np.random.default_rng(seed)
    a = g.integers(0, 30, n)
    b = (a // 6 + g.integers(0, 2, n)) % 5
    c = (b + g.integers(0, 3, n)) % 4
    d = g.integers(0, 2, n)
    e = (c * d + g.integers(0, 2, n)) % 3
    return np.stack([a, b, c, d, e], 1), (30, 5, 4, 2, 3)


def _digest(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a, dtype=np.int64).tobytes()).hexdigest()


# ----------------------------------------------------------------------------- default unchanged

#: sha256 of 2000 records sampled (rng seed 3) from a default-hyperparameter fit with FakeRand(11)
#: on _golden_data(), computed with the ORIGINAL mechanisms/privsyn.py and aim.py (commit a716147,
#: before the hierarchical estimator existed).
GOLDEN = {
    ("privsyn", 0.5): "31df0a36f14b56291bcdbe397e0a099d9f2864b663cd116c7953fd85fb09d054",
    ("privsyn", 5.0): "16aebab6aeec5e0ebf1b423cd52310e22f3ccd2bb3a6747a9e24a8e621aa877b",
    ("aim_pure", 0.5): "e93ed21ccf149ffb30e2158ea51505c2d6a4369dbb180892445715f250198048",
    ("aim_pure", 5.0): "b90f06b05eb6056f7d1ea1ea200defd7204a5bac5b74a8ee76926018d025198a",
}


@pytest.mark.parametrize("gen,eps", sorted(GOLDEN))
def test_default_path_gives_the_records_of_the_original_code(gen, eps):
    codes, dom = _golden_data()
    model = make_generator(gen, eps).fit(codes, dom, FakeRand(11))
    assert _digest(model.sample(2000, np.random.default_rng(3))) == GOLDEN[(gen, eps)]


def test_default_estimator_is_consistency_and_round_trips():
    g = PrivSyn(1.0)
    assert g.estimator == "consistency" and g.pair_values == 20
    assert "estimator" not in g.hyperparameters() and "pair_values" not in g.hyperparameters()
    hp = PrivSyn(1.0, **HIER, pair_values=7).hyperparameters()
    assert hp["estimator"] == "hierarchical" and hp["pair_values"] == 7
    assert PrivSyn(1.0, **hp).hyperparameters() == hp


# ----------------------------------------------------------------------------- validation

@pytest.mark.parametrize("kw,word", [
    ({"estimator": "pgm"}, "estimator"), ({"estimator": None}, "estimator"),
    ({"estimator": 1}, "estimator"), ({"pair_values": 1}, "pair_values"),
    ({"pair_values": 2.5}, "pair_values"), ({"pair_values": True}, "pair_values"),
    ({"pair_values": None}, "pair_values"), ({"pair_values": "20"}, "pair_values"),
])
def test_bad_hyperparameters_are_refused(kw, word):
    with pytest.raises(ValueError, match=word):
        PrivSyn(1.0, **kw)
    with pytest.raises(ValueError, match=word):
        make_generator("privsyn", 1.0, **kw)


def test_grid_problems_name_the_bad_values():
    probs = grid_problems({"estimator": ["hierarchical", "pgm"], "pair_values": [20, 0]})
    assert len(probs) == 2
    assert probs[0].startswith(".estimator[1]:") and probs[1].startswith(".pair_values[1]:")
    assert grid_problems({"estimator": ["consistency", "hierarchical"], "pair_values": [2, 50]}) == []


# ----------------------------------------------------------------------------- building blocks

def test_merge_rule():
    assert merge_factor(100, 20) == 5 and merged_size(100, 5) == 20
    assert merge_factor(101, 20) == 6 and merged_size(101, 6) == 17
    assert merge_factor(20, 20) == 1 and merge_factor(3, None) == 1
    assert list(merge_codes(np.arange(7), 3)) == [0, 0, 0, 1, 1, 1, 2]
    t = np.arange(14.0).reshape(7, 2)
    assert np.array_equal(merge_axis(t, 0, 3), np.array([[6.0, 9.0], [24.0, 27.0], [12.0, 13.0]]))


@SETTINGS
@given(st.lists(st.floats(-50, 50), min_size=1, max_size=30), st.one_of(st.just(0.0), st.floats(1e-3, 200.0)))
def test_project_simplex_is_the_euclidean_projection(y, total):
    y = np.array(y)
    x = project_simplex(y, total)
    assert (x >= 0).all()
    assert x.sum() == pytest.approx(total, abs=1e-7 * max(1.0, total))
    if total > 0:
        # KKT: x = max(y - tau, 0) for one tau, so every positive cell has the same y - x
        pos = x > 1e-9 * total
        tau = (y - x)[pos]
        assert np.ptp(tau) < 1e-6 * max(1.0, np.abs(y).max())
        assert (y[~pos] <= tau[0] + 1e-6 * max(1.0, np.abs(y).max())).all()
        # and no feasible point of a few random ones is closer to y
        g = np.random.default_rng(0)
        for _ in range(5):
            z = g.dirichlet(np.ones(y.size)) * total
            assert np.sum((x - y) ** 2) <= np.sum((z - y) ** 2) + 1e-9


def test_expand_pair_keeps_the_merged_table_and_gives_the_oneways():
    fine_a = np.array([1.0, 3.0, 0.0, 2.0, 2.0])      # merged by 2: bins 4, 2, 2
    fine_b = np.array([4.0, 4.0])
    merged = np.array([[1.0, 3.0], [2.0, 0.0], [0.0, 2.0]])
    t = expand_pair(merged, fine_a, fine_b, 2, 1)
    assert t.shape == (5, 2)
    assert np.allclose(merge_axis(t, 0, 2), merged)
    assert np.allclose(t.sum(axis=1), fine_a)


def _noisy_problem(seed: int, scale: float):
    g = np.random.default_rng(seed)
    dom = (12, 3, 4)
    n = 2000
    a = g.integers(0, 12, n)
    b = (a // 4 + g.integers(0, 2, n)) % 3
    c = (b + g.integers(0, 2, n)) % 4
    codes = np.stack([a, b, c], 1)
    factors = [merge_factor(k, 6) for k in dom]
    pc = np.stack([merge_codes(codes[:, j], factors[j]) for j in range(3)], 1)
    pdom = tuple(merged_size(k, f) for k, f in zip(dom, factors))
    ones = {j: np.bincount(codes[:, j], minlength=dom[j]) + g.laplace(0, scale, dom[j])
            for j in range(3)}
    pairs = [PairMeasurement((x, y), pair_table(pc, pdom, x, y) + g.laplace(0, scale, (pdom[x], pdom[y])),
                             (factors[x], factors[y]), 2 * scale ** 2)
             for x, y in [(0, 1), (1, 2), (0, 2)]]
    return dom, ones, {j: 2 * scale ** 2 for j in range(3)}, pairs, factors, float(n)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_estimate_is_deterministic_nonnegative_consistent_and_sums_to_n(seed):
    args = _noisy_problem(seed, 30.0)
    ones1, pairs1 = hierarchical_estimate(*args)
    ones2, pairs2 = hierarchical_estimate(*args)
    for u, v in zip(ones1 + pairs1, ones2 + pairs2):
        assert np.array_equal(u, v)                       # post-processing: same input, same output
    n = args[-1]
    for t in ones1 + pairs1:
        assert (t >= 0).all() and t.sum() == pytest.approx(n, rel=1e-9)
    for m, t in zip(args[3], pairs1):                    # the pairs' margins are the 1-ways
        a, b = m.cols
        assert np.allclose(t.sum(axis=1), ones1[a], atol=1e-6 * n)
        assert np.allclose(t.sum(axis=0), ones1[b], atol=1e-6 * n)


def test_mismatched_merge_factors_are_refused():
    dom, ones, var, pairs, factors, n = _noisy_problem(0, 1.0)
    with pytest.raises(ValueError, match="merge factors"):
        hierarchical_estimate(dom, ones, var, pairs, [1, 1, 1], n)


# ----------------------------------------------------------------------------- recovery

def _block_data(n: int, seed: int):
    """A 40-value column whose dependence on the others is through blocks of 8 codes."""
    g = np.random.default_rng(seed)
    a = g.integers(0, 40, n)
    b = (a // 8 + (g.random(n) < 0.2)) % 5
    c = ((a // 8) % 3 + (g.random(n) < 0.15)) % 3
    return np.stack([a, b, c], 1), (40, 5, 3)


def _pair_error(model, codes, dom) -> float:
    err = []
    for cols, p in model.marginals:
        t = pair_table(codes, dom, *cols).reshape(-1).astype(float)
        err.append(np.abs(p - t / t.sum()).sum())
    assert len(err) == 3
    return float(np.mean(err))


def test_hierarchical_recovers_the_true_marginals_better_than_the_default():
    codes, dom = _block_data(5000, 3)
    kw = {"select_rule": "top"}                         # every pair measured on both paths
    old, new = [], []
    for seed in range(6):
        old.append(_pair_error(PrivSyn(0.3, **kw).fit(codes, dom, FakeRand(seed)), codes, dom))
        new.append(_pair_error(PrivSyn(0.3, **kw, **HIER, pair_values=5).fit(codes, dom, FakeRand(seed)),
                               codes, dom))
    assert np.mean(new) < 0.8 * np.mean(old), (old, new)


def test_hierarchical_at_low_noise_is_close_to_the_truth():
    codes, dom = _block_data(5000, 4)
    model = PrivSyn(200.0, select_rule="top", **HIER, pair_values=5).fit(codes, dom, FakeRand(0))
    assert _pair_error(model, codes, dom) < 0.05
    for j, k in enumerate(dom):
        true = np.bincount(codes[:, j], minlength=k) / len(codes)
        assert np.abs(model.oneways[j] - true).sum() < 0.02


# ----------------------------------------------------------------------------- DP: what is measured

@SETTINGS
@given(code_neighbours(min_d=2, max_d=4, max_k=9, max_n=15), st.integers(2, 5))
def test_merged_tables_keep_count_and_indif_sensitivities(case, pv):
    """A merged 2-way table moves by at most 2 in L1 and its InDif by at most 6 between
    neighbours (the sensitivities the hierarchical path hands to the noise)."""
    codes, other, dom = case
    f = [merge_factor(k, pv) for k in dom]
    pdom = tuple(merged_size(k, g) for k, g in zip(dom, f))
    m1 = np.stack([merge_codes(codes[:, j], f[j]) for j in range(len(dom))], 1)
    m2 = np.stack([merge_codes(other[:, j], f[j]) for j in range(len(dom))], 1)
    for a, b in itertools.combinations(range(len(dom)), 2):
        t1, t2 = pair_table(m1, pdom, a, b), pair_table(m2, pdom, a, b)
        assert np.abs(t1 - t2).sum() <= 2
        assert abs(indif(t1) - indif(t2)) <= 6.0


def test_hierarchical_fit_spends_at_most_epsilon_and_says_what_it_merged():
    codes, dom = _golden_data()
    for eps in (0.94, 9.4, 0.1):
        r = FakeRand(1)
        gen = PrivSyn(eps, **HIER, pair_values=10)
        gen.fit(codes, dom, r)
        spent = sum((exact.binary(e) for e in r.spent), Fraction(0))
        assert spent <= exact.dec(eps)
        assert sum((exact.binary(p["epsilon"]) for p in gen.budget_parts()), Fraction(0)) <= exact.dec(eps)
        assert any("merged 3 and 1" in p for p in r.purposes if "[0, " in p)


def test_record_types_give_the_same_fit():
    codes, dom = _golden_data(2000)
    types, counts = np.unique(codes, axis=0, return_counts=True)
    gen = PrivSyn(1.0, **HIER)
    m1 = gen.fit(codes, dom, FakeRand(4))
    m2 = gen.fit(types, dom, FakeRand(4), counts=counts)
    for (c1, p1), (c2, p2) in zip(m1.marginals, m2.marginals):
        assert c1 == c2 and np.array_equal(p1, p2)


# ----------------------------------------------------------------------------- publishing, speed

def test_hierarchical_model_is_published_and_rebuilt_exactly():
    codes, dom = _golden_data()
    gen = PrivSyn(1.0, **HIER)
    model = gen.fit(codes, dom, FakeRand(2))
    doc = model_document(model, generator={"type": "privsyn", **HIER}, epsilon=1.0,
                         columns=list("abcde"))
    assert doc["kind"] == "marginals_gum"
    back = model_from_document(doc)
    s1 = model.sample(500, np.random.default_rng(9))
    s2 = back.sample(500, np.random.default_rng(9))
    assert np.array_equal(s1, s2)


def test_fit_and_sample_at_10k_rows_is_fast():
    g = np.random.default_rng(0)
    dom = (100, 2, 7, 9, 3, 3, 13, 11, 7, 2)
    codes = np.stack([g.integers(0, k, 10_000) for k in dom], 1)
    t0 = time.perf_counter()
    model = PrivSyn(0.94, **HIER).fit(codes, dom, FakeRand(0))
    model.sample(10_000, np.random.default_rng(0))
    assert time.perf_counter() - t0 < 5.0
