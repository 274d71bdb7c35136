"""Tests of the marginal-based generators (noisy cross-tab; noisy marginals + IPF)."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpbundle.mechanisms.generators import make_generator
from dpbundle.mechanisms.marginals import (
    COUNT_SENSITIVITY,
    ConvergenceError,
    NoisyCrossTab,
    NoisyMarginals,
    crosstab_counts,
    ipf,
    make_consistent,
    marginal_counts,
    resolve_marginals,
)
from dpbundle.mechanisms.noise import Randomness, ReplayMismatch, Transcript

# --------------------------------------------------------------------------- helpers


def _naive_marginal(codes: np.ndarray, domain, cols) -> np.ndarray:
    """Reference marginal with plain Python loops (independent of the code under test)."""
    out = np.zeros([domain[j] for j in cols], dtype=np.int64)
    for row in codes:
        out[tuple(int(row[j]) for j in cols)] += 1
    return out


def _freq(codes: np.ndarray, domain, cols) -> np.ndarray:
    return _naive_marginal(codes, domain, cols) / max(len(codes), 1)


@st.composite
def neighbours(draw, max_d: int = 4, max_size: int = 5, max_n: int = 25):
    """(domain, D, D') with D' = D with one record changed to an arbitrary record of the domain."""
    d = draw(st.integers(1, max_d))
    domain = tuple(draw(st.lists(st.integers(1, max_size), min_size=d, max_size=d)))
    n = draw(st.integers(1, max_n))
    rows = draw(st.lists(st.tuples(*[st.integers(0, s - 1) for s in domain]), min_size=n, max_size=n))
    codes = np.array(rows, dtype=np.int64).reshape(n, d)
    i = draw(st.integers(0, n - 1))
    new = draw(st.tuples(*[st.integers(0, s - 1) for s in domain]))
    other = codes.copy()
    other[i] = new
    return domain, codes, other


def _correlated(n: int, seed: int = 0) -> tuple[np.ndarray, tuple[int, ...]]:
    """A small correlated data set over domain (4, 3, 2, 5) (fixed generator: test fixture)."""
    g = np.random.default_rng(seed)
    a = g.integers(0, 4, n)
    b = np.minimum(a // 2 + g.integers(0, 2, n), 2)
    c = (g.random(n) < 0.2 + 0.2 * b).astype(np.int64)
    e = np.clip(a + c + g.integers(-1, 2, n), 0, 4)
    return np.column_stack([a, b, c, e]).astype(np.int64), (4, 3, 2, 5)


# --------------------------------------------------------------------------- sensitivity


def test_declared_sensitivity_is_two():
    assert COUNT_SENSITIVITY == 2.0


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(neighbours())
def test_crosstab_sensitivity(case):
    domain, D, D2 = case
    c1, c2 = crosstab_counts(D, domain), crosstab_counts(D2, domain)
    assert c1.shape == (math.prod(domain),)
    assert np.abs(c1 - c2).sum() <= COUNT_SENSITIVITY


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(neighbours())
def test_marginal_sensitivity_and_value(case):
    domain, D, D2 = case
    d = len(domain)
    for k in range(1, min(d, 3) + 1):
        for cols in itertools.combinations(range(d), k):
            m1, m2 = marginal_counts(D, domain, cols), marginal_counts(D2, domain, cols)
            np.testing.assert_array_equal(m1, _naive_marginal(D, domain, cols))
            assert np.abs(m1 - m2).sum() <= COUNT_SENSITIVITY


# --------------------------------------------------------------------------- accuracy at huge epsilon


def test_crosstab_reproduces_all_marginals_at_large_epsilon():
    codes, domain = _correlated(3000)
    model = make_generator("crosstab", 1e6).fit(codes, domain, Randomness())
    synth = model.sample(4000, np.random.default_rng(1))
    for k in range(1, 5):
        for cols in itertools.combinations(range(4), k):
            err = np.abs(_freq(synth, domain, cols) - _freq(codes, domain, cols)).max()
            assert err < 0.02, (cols, err)


def test_marginals_reproduce_two_way_marginals_at_large_epsilon():
    codes, domain = _correlated(3000)
    model = make_generator("marginals", 1e6).fit(codes, domain, Randomness())
    assert model.converged and model.warning is None
    synth = model.sample(4000, np.random.default_rng(2))
    for cols in itertools.combinations(range(4), 2):
        err = np.abs(_freq(synth, domain, cols) - _freq(codes, domain, cols)).max()
        assert err < 0.02, (cols, err)


def test_marginals_explicit_list_and_three_way():
    codes, domain = _correlated(3000)
    g = make_generator("marginals", 1e6, marginals=[(0, 1, 3), (2, 1)])
    rand = Randomness()
    model = g.fit(codes, domain, rand)
    purposes = [r["purpose"] for r in rand.transcript.records if r["kind"] == "laplace"]
    assert purposes == ["marginal [0, 1, 3]", "marginal [1, 2]"]
    synth = model.sample(4000, np.random.default_rng(3))
    for cols in [(0, 1, 3), (1, 2)]:
        err = np.abs(_freq(synth, domain, cols) - _freq(codes, domain, cols)).max()
        assert err < 0.02, (cols, err)


# --------------------------------------------------------------------------- budget and records


def test_marginals_budget_split_and_records():
    codes, domain = _correlated(200)
    eps = 0.7
    rand = Randomness()
    make_generator("marginals", eps).fit(codes, domain, rand)
    lap = [r for r in rand.transcript.records if r["kind"] == "laplace"]
    assert len(lap) == 6  # all 2-way marginals of 4 columns
    assert all(r["sensitivity"] == 2.0 for r in lap)
    assert math.fsum(r["epsilon"] for r in lap) <= eps
    assert math.fsum(r["epsilon"] for r in lap) == pytest.approx(eps)
    # the true values are the exact marginals over the public domain (empty cells included)
    for r, cols in zip(lap, itertools.combinations(range(4), 2)):
        assert r["true"] == _naive_marginal(codes, domain, cols).reshape(-1).tolist()


def test_crosstab_domain_comes_from_arguments():
    codes = np.zeros((10, 2), dtype=np.int64)  # the data use a single cell
    rand = Randomness()
    make_generator("crosstab", 1.0).fit(codes, (3, 4), rand)
    rec = rand.transcript.records[0]
    assert len(rec["true"]) == 12 and rec["true"][0] == 10 and sum(rec["true"]) == 10
    assert rec["sensitivity"] == 2.0 and rec["epsilon"] == 1.0
    with pytest.raises(ValueError, match="outside the domain"):
        make_generator("crosstab", 1.0).fit(np.array([[3, 0]]), (3, 4), Randomness())


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(neighbours(max_d=3, max_size=4, max_n=10), st.sampled_from(["crosstab", "marginals"]))
def test_samples_stay_in_domain(case, gtype):
    domain, D, _ = case
    g = make_generator(gtype, 0.05, allow_nonconvergence=True) if gtype == "marginals" \
        else make_generator(gtype, 0.05)
    rand = Randomness()
    model = g.fit(D, domain, rand)
    synth = model.sample(300, rand.rng("sample"))
    assert synth.shape == (300, len(domain)) and synth.dtype == np.int64
    assert np.all(synth >= 0) and np.all(synth < np.array(domain))


# --------------------------------------------------------------------------- replay


@pytest.mark.parametrize("gtype", ["crosstab", "marginals"])
def test_replay_fit_and_sample(gtype):
    codes, domain = _correlated(500)

    def run(rand: Randomness, data: np.ndarray) -> np.ndarray:
        rand.mark("iteration", index=0)
        model = make_generator(gtype, 1.0).fit(data, domain, rand)
        return model.sample(500, rand.rng("sample"))

    rand = Randomness()
    synth = run(rand, codes)
    records = Transcript.from_jsonl(rand.transcript.to_jsonl()).records
    rp = Randomness.replay(records)
    np.testing.assert_array_equal(run(rp, codes), synth)
    rp.check_finished()
    # a second independent run gives other data (so the equality above is not trivial)
    assert not np.array_equal(run(Randomness(), codes), synth)
    changed = codes.copy()
    changed[17] = (changed[17] + 1) % np.array(domain)
    with pytest.raises(ReplayMismatch, match="true value"):
        run(Randomness.replay(records), changed)


# --------------------------------------------------------------------------- limits and IPF


def test_crosstab_refuses_above_cell_limit():
    rand = Randomness()
    g = make_generator("crosstab", 1.0, max_cells=100)
    with pytest.raises(ValueError, match=r"110 cells.*max_cells=100"):
        g.fit(np.zeros((5, 2), dtype=np.int64), (11, 10), rand)
    assert len(rand.transcript) == 0  # refused before any noise was drawn
    g.fit(np.zeros((5, 2), dtype=np.int64), (10, 10), rand)  # exactly at the limit is fine
    assert NoisyCrossTab(1.0).max_cells == 10_000_000


def test_marginals_refuse_above_cell_limit():
    rand = Randomness()
    with pytest.raises(ValueError, match="max_cells"):
        NoisyMarginals(1.0, max_cells=50).fit(np.zeros((5, 2), dtype=np.int64), (11, 10), rand)
    assert len(rand.transcript) == 0


def test_ipf_nonconvergence_is_reported():
    codes, domain = _correlated(300)
    g = NoisyMarginals(0.5, max_iterations=2, tolerance=1e-12)
    with pytest.raises(ConvergenceError) as exc:
        g.fit(codes, domain, Randomness())
    assert exc.value.iterations == 2 and exc.value.max_deviation >= 0
    assert "2 iterations" in str(exc.value)
    model = NoisyMarginals(0.5, max_iterations=2, tolerance=1e-12,
                           allow_nonconvergence=True).fit(codes, domain, Randomness())
    assert not model.converged and "did not converge" in model.warning


def test_ipf_fits_consistent_targets():
    g = np.random.default_rng(5)
    domain = (3, 4, 2)
    P0 = g.random(domain) ** 3
    P0 /= P0.sum()
    attrs = [(0, 1), (1, 2), (0, 2)]
    targets = [P0.sum(axis=tuple(j for j in range(3) if j not in a)) * 1000 for a in attrs]
    res = ipf(targets, attrs, domain, max_iterations=5000, tolerance=1e-12)
    assert res.converged
    for a, t in zip(attrs, targets):
        fitted = res.p.sum(axis=tuple(j for j in range(3) if j not in a))
        np.testing.assert_allclose(fitted, t / 1000, atol=1e-8)
    assert res.max_deviation < 1e-8


def test_make_consistent():
    g = np.random.default_rng(6)
    attrs = [(0, 1), (1, 2), (0, 2)]
    shape = {0: 3, 1: 4, 2: 2}
    noisy = [g.normal(10, 8, size=[shape[j] for j in a]) for a in attrs]
    tabs = make_consistent(noisy, attrs, total=100.0, rounds=100)
    for t in tabs:
        assert np.all(t >= 0) and t.sum() == pytest.approx(100.0)
    # the one-way projections of column 1 agree between the tables containing it
    p01 = tabs[0].sum(axis=0)
    p12 = tabs[1].sum(axis=1)
    np.testing.assert_allclose(p01, p12, atol=1e-6)


def test_resolve_marginals():
    assert resolve_marginals("all-2way", 3) == [(0, 1), (0, 2), (1, 2)]
    assert resolve_marginals("all-3way", 2) == [(0, 1)]
    assert resolve_marginals([(2, 0)], 3) == [(0, 2)]
    for bad in ["all-9way", [], [(0, 0)], [(0, 5)], [(0, 1), (1, 0)], [("a",)]]:
        with pytest.raises(ValueError):
            resolve_marginals(bad, 3)
    with pytest.raises(ValueError, match="marginals"):
        make_generator("marginals", 1.0, marginals="pairs")
    with pytest.raises(ValueError):
        make_generator("marginals", 1.0, max_iterations=0)
