"""Issue 37 item 2, privsyn's zCDP mode (``PrivSyn(rho=...)``): construction, exact budget
(parts and the transcript's spend), sensitivities on neighbouring datasets, fit and sample on
both estimators and on record types, the Gaussian noise in the post-processing, and the pure
path unchanged."""
from __future__ import annotations

import hashlib
import json
import math
import zlib
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from generator_util import code_neighbours  # noqa: E402
from dpbundle.mechanisms import estimation, exact, privsyn
from dpbundle.mechanisms.generators import make_generator
from dpbundle.mechanisms.noise import Randomness, calibrated_gaussian_scale
from dpbundle.mechanisms.privsyn import PrivSyn, allocate_rho, candidate_pairs, select_pairs

SQRT2 = math.sqrt(2.0)
HIER = {"estimator": "hierarchical"}
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _data(n: int = 3000, seed: int = 5):
    """The block-structured table of tests/test_estimation.py."""
    from test_estimation import _golden_data

    return _golden_data(n, seed)


# ----------------------------------------------------------------------------- construction


def test_exactly_one_of_epsilon_and_rho():
    with pytest.raises(ValueError, match="exactly one of epsilon .* and rho"):
        PrivSyn()
    with pytest.raises(ValueError, match="exactly one of epsilon .* and rho"):
        PrivSyn(1.0, rho=0.1)
    for bad in (0, -0.1, math.inf, math.nan, True, "0.1"):
        with pytest.raises(ValueError, match="rho must be a finite number > 0"):
            PrivSyn(rho=bad)
    with pytest.raises(ValueError, match="epsilon must be a finite number > 0"):
        PrivSyn(0.0)
    pure = PrivSyn(1.0, 0.2)            # positional epsilon and split_select, as always
    assert pure.definition == "pure" and pure.epsilon == 1.0 and pure.rho is None
    assert pure.split_select == 0.2
    z = PrivSyn(rho=0.0139, split_select=0.2, max_pairs=5, **HIER)
    assert z.definition == "zcdp" and z.rho == 0.0139 and z.epsilon is None
    # the hyperparameters are those of the pure generator, and rho is not one of them
    assert z.hyperparameters() == PrivSyn(1.0, split_select=0.2, max_pairs=5, **HIER).hyperparameters()
    assert "rho" not in z.hyperparameters()
    assert PrivSyn(rho=0.5, **z.hyperparameters()).hyperparameters() == z.hyperparameters()


def test_privacy_map_is_zcdp_group_privacy():
    z = PrivSyn(rho=0.03)
    assert z.privacy_map(0) == 0.0 and z.privacy_map(1) == 0.03
    assert z.privacy_map(3) == pytest.approx(0.27)
    assert PrivSyn(0.5).privacy_map(3) == 1.5   # pure: d_in x epsilon
    with pytest.raises(ValueError):
        z.privacy_map(-1)


# ----------------------------------------------------------------------------- budget


@SETTINGS
@given(rho=st.one_of(st.sampled_from([0.0139, 0.01497, 0.1, 1.0, 1e-4]),
                     st.floats(min_value=1e-6, max_value=50.0, allow_nan=False)),
       split=st.one_of(st.sampled_from([0.1, 0.25, 0.5]),
                       st.floats(min_value=0.01, max_value=0.99, allow_nan=False)),
       cells=st.lists(st.integers(1, 10_000), min_size=1, max_size=30))
def test_parts_sum_to_at_most_rho_exactly(rho, split, cells):
    g = PrivSyn(rho=rho, split_select=split)
    parts = g.budget_parts()
    assert [set(p) for p in parts] == [{"purpose", "rho"}] * 2
    declared = exact.dec(rho)
    assert sum(Fraction(p["rho"]) for p in parts) <= declared
    # the selection's pure epsilon is within its zCDP part: e^2 / 2 <= rho_select (and the
    # dec(split) x dec(rho) it was cut from), and it is the largest such float
    e = g.epsilon_select
    assert Fraction(e) ** 2 / 2 <= Fraction(parts[0]["rho"])
    assert Fraction(e) ** 2 / 2 <= exact.dec(split) * declared
    assert Fraction(math.nextafter(e, math.inf)) ** 2 / 2 > exact.dec(split) * declared
    # the measurement shares: binary sum <= rho_measure
    shares = allocate_rho(g.rho_measure, cells)
    assert sum(Fraction(s) for s in shares) <= Fraction(g.rho_measure)
    assert float(sum(Fraction(p["rho"]) for p in parts)) == pytest.approx(rho, rel=1e-9)


def test_pure_generator_has_no_rho_and_zcdp_no_epsilon_measure():
    with pytest.raises(ValueError):
        PrivSyn(1.0).rho_measure
    with pytest.raises(ValueError):
        PrivSyn(rho=1.0).epsilon_measure
    assert [set(p) for p in PrivSyn(1.0).budget_parts()] == [{"purpose", "epsilon"}] * 2


@pytest.mark.parametrize("hp", [{}, HIER, {**HIER, "select_rule": "top", "max_pairs": 3}])
def test_transcript_spends_at_most_rho_with_the_right_sensitivities(hp):
    codes, dom = _data()
    rho = 0.0139
    g = PrivSyn(rho=rho, **hp)
    rand = Randomness()
    g.fit(codes, dom, rand)
    recs = [r for r in rand.transcript.records if r["kind"] in ("laplace", "gaussian")]
    k = len(candidate_pairs(dom))
    sel, tables = recs[0], recs[1:]
    assert sel["kind"] == "laplace" and sel["sensitivity"] == 6.0 * k
    assert sel["epsilon"] == g.epsilon_select
    assert len(tables) == len(dom) + len(g.selected)
    assert all(r["kind"] == "gaussian" and r["sensitivity"] == SQRT2
               and r["mechanism"] == "opendp.make_gaussian/integer" for r in tables)
    # zCDP composition, exactly: the Laplace's eps^2/2 plus the Gaussians' rhos <= rho
    spent = Fraction(sel["epsilon"]) ** 2 / 2 + sum(Fraction(r["rho"]) for r in tables)
    assert spent <= exact.dec(rho)
    assert sum(Fraction(r["rho"]) for r in tables) <= Fraction(g.rho_measure)
    assert float(spent) == pytest.approx(rho, rel=1e-6)
    # shares follow cells^(2/3)
    cells = [np.asarray(r["true"]).size for r in tables]
    ratio = [r["rho"] / c ** (2 / 3) for r, c in zip(tables, cells)]
    assert max(ratio) == pytest.approx(min(ratio), rel=1e-9)


def test_allocate_rho_is_l1_optimal():
    """The cells^(2/3) split has the smallest expected Gaussian L1 error among perturbed
    splits of the same total (error of a table: c sigma sqrt(2/pi), sigma = sqrt 2 / sqrt(2 rho))."""
    cells = [10, 40, 200, 1000, 3]
    rho = 0.05

    def err(shares):
        return sum(c * SQRT2 / math.sqrt(2 * r) * math.sqrt(2 / math.pi) for c, r in zip(cells, shares))

    best = allocate_rho(rho, cells)
    assert err(best) == pytest.approx(privsyn.expected_l1_error_gaussian(cells, rho), rel=1e-9)
    g = np.random.default_rng(0)
    for _ in range(200):
        w = np.asarray(best) * np.exp(g.normal(0, 0.3, len(cells)))
        other = list(w / w.sum() * rho)
        assert err(other) >= err(best) * (1 - 1e-12)


# ----------------------------------------------------------------------------- sensitivities


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=code_neighbours(min_d=2, max_d=4, max_k=5, max_n=12), hier=st.booleans())
def test_neighbours_stay_within_the_declared_sensitivities(case, hier):
    """Run on D, then on D' along D's random path (frozen mode): every Gaussian table's true
    values move by at most sqrt(2) in L2 and the InDif vector by at most 6 K in L1."""
    codes, other, dom = case
    assume(any(k >= 2 for k in dom))
    hp = {"estimator": "hierarchical", "pair_values": 2} if hier else {}
    rec = Randomness()
    PrivSyn(rho=0.5, **hp).fit(codes, dom, rec)
    fr = Randomness.frozen(rec.transcript.records)
    PrivSyn(rho=0.5, **hp).fit(other, dom, fr)
    fr.check_finished()
    assert any(r["kind"] == "gaussian" for r in rec.transcript.records)
    for a, b in zip(rec.transcript.records, fr.transcript.records):
        if a["kind"] == "gaussian":
            d = np.linalg.norm(np.asarray(a["true"], float) - np.asarray(b["true"], float))
            assert d <= SQRT2 * (1 + 1e-12) and a["sensitivity"] == b["sensitivity"] == SQRT2
        elif a["kind"] == "laplace":
            k = len(candidate_pairs(dom))
            d = np.abs(np.asarray(a["true"], float) - np.asarray(b["true"], float)).sum()
            assert d <= 6.0 * k and a["sensitivity"] == 6.0 * k


# ----------------------------------------------------------------------------- fit and sample


@pytest.mark.parametrize("hp", [{}, HIER, {**HIER, "select_rule": "top", "max_pairs": 8},
                                {"select_rule": "top", "max_pairs": 2}])
def test_zcdp_fit_and_sample_and_replay(hp):
    codes, dom = _data(2000)
    g = PrivSyn(rho=0.2, **hp)
    rec = Randomness()
    model = g.fit(codes, dom, rec)
    synth = model.sample(1500, rec.rng("sample"))
    assert synth.shape == (1500, 5) and synth.dtype == np.int64
    assert all(0 <= synth[:, j].min() and synth[:, j].max() < k for j, k in enumerate(dom))
    assert len(model.marginals) == len(g.selected)
    if hp.get("max_pairs"):
        assert len(g.selected) <= hp["max_pairs"]
    # replay gives the same model and sample bit for bit
    rep = Randomness.replay(rec.transcript.records)
    again = PrivSyn(rho=0.2, **hp).fit(codes, dom, rep)
    assert np.array_equal(again.sample(1500, rep.rng("sample")), synth)
    rep.check_finished()


@pytest.mark.parametrize("hp", [{}, HIER])
def test_zcdp_fit_on_record_types(hp):
    """counts=: distinct records with multiplicities give the same true values (replay of the
    full data's transcript accepts them) and the same model."""
    codes, dom = _data(1500)
    rec = Randomness()
    model = PrivSyn(rho=0.1, **hp).fit(codes, dom, rec)
    uniq, counts = np.unique(codes, axis=0, return_counts=True)
    rep = Randomness.replay(rec.transcript.records)
    again = PrivSyn(rho=0.1, **hp).fit(uniq, dom, rep, counts=counts)
    rep.check_finished()
    assert again.selected == model.selected
    assert all(np.array_equal(p, q) for p, q in zip(model.oneways, again.oneways))
    assert all(np.array_equal(p, q) for (_, p), (_, q) in zip(model.marginals, again.marginals))


def test_make_generator_builds_a_zcdp_privsyn():
    codes, dom = _data(500)
    g = make_generator("privsyn", None, rho=0.05, **HIER)
    assert g.definition == "zcdp"
    g.fit(codes, dom, Randomness()).sample(100, np.random.default_rng(0))


# ----------------------------------------------------------------------------- post-processing


class _Capture(Exception):
    pass


def test_estimators_weigh_by_the_gaussian_noise_variance(monkeypatch):
    """The hierarchical estimator gets sigma^2 per cell and the Gaussian's expected absolute
    noise sigma sqrt(2/pi); the consistency estimator gets sigma^2 as its cell variances."""
    codes, dom = _data(1500)
    seen = {}

    def fake_hier(domain, ones, variances, pairs, factors, n):
        seen["ones_var"], seen["pairs"] = dict(variances), list(pairs)
        raise _Capture

    monkeypatch.setattr(estimation, "hierarchical_estimate", fake_hier)
    rand = Randomness()
    with pytest.raises(_Capture):
        PrivSyn(rho=0.05, **HIER).fit(codes, dom, rand)
    recs = {r["purpose"]: r for r in rand.transcript.records if r["kind"] == "gaussian"}
    for j, v in seen["ones_var"].items():
        r = recs[f"privsyn: 1-way marginal of column {j}"]
        assert r["scale"] == calibrated_gaussian_scale(SQRT2, r["rho"])
        assert v == pytest.approx(r["scale"] ** 2, rel=1e-12)
    for m in seen["pairs"]:
        r = next(r for p, r in recs.items() if f"columns {list(m.cols)}" in p)
        assert m.variance == pytest.approx(r["scale"] ** 2, rel=1e-12)
        assert m.mean_abs == pytest.approx(r["scale"] * math.sqrt(2 / math.pi), rel=1e-12)

    got = {}

    def fake_consistent(noisy, attrs, scales, total, rounds, variances=None):
        got["variances"] = variances
        raise _Capture

    monkeypatch.setattr(privsyn, "consistent_tables", fake_consistent)
    rand = Randomness()
    with pytest.raises(_Capture):
        PrivSyn(rho=0.05).fit(codes, dom, rand)
    scales = [r["scale"] for r in rand.transcript.records if r["kind"] == "gaussian"]
    assert got["variances"] == pytest.approx([s * s for s in scales], rel=1e-12)


def test_pair_measurement_mean_abs_defaults_to_the_laplace():
    m = estimation.PairMeasurement((0, 1), np.zeros((2, 2)), (1, 1), 8.0)
    assert m.mean_abs == 2.0          # Laplace scale b with variance 2 b^2 = 8
    g = estimation.PairMeasurement((0, 1), np.zeros((2, 2)), (1, 1), 9.0, mean_abs=2.4)
    assert g.mean_abs == 2.4


def test_densemarg_uses_the_gaussian_noise_error():
    """A pair is selected iff its noisy InDif exceeds the rise of the Gaussian's expected L1
    error ``K ((W + c^(2/3))^(3/2) - W^(3/2))`` (K = sqrt(2 / (pi rho)), W over the 1-ways)."""
    ones = [4, 4, 4]
    rho = 0.01
    w = sum(c ** (2 / 3) for c in ones)
    rise = math.sqrt(2 / (math.pi * rho)) * ((w + 16 ** (2 / 3)) ** 1.5 - w ** 1.5)
    assert rise == pytest.approx(privsyn.expected_l1_error_gaussian(ones + [16], rho)
                                 - privsyn.expected_l1_error_gaussian(ones, rho))
    assert select_pairs([rise * 1.01], [16], ones, None, max_pairs=None, rho_meas=rho) == [0]
    assert select_pairs([rise * 0.99], [16], ones, None, max_pairs=None, rho_meas=rho) == []
    # the Laplace trade-off at an epsilon with the same noise variance would decide otherwise
    assert select_pairs([rise * 0.99], [16], ones, 1.0, max_pairs=None) == [0]


# ----------------------------------------------------------------------------- pure unchanged


def _golden_digest(eps, hp, counts=False):
    """sha256 of 2000 records sampled (rng seed 3) after a fit with seeded numpy Laplace noise,
    plus the log of the calls (purpose, sensitivity, epsilon), budget_parts, privacy_map(2) and
    hyperparameters()."""
    class FakeRand:
        def __init__(self, seed):
            self.g = np.random.default_rng(seed)
            self.log = []

        def laplace(self, true, *, sensitivity, epsilon, purpose, integer=False):
            self.log.append(["laplace", purpose, float(sensitivity), float(epsilon)])
            t = np.asarray(true, dtype=np.float64)
            out = t + self.g.laplace(0.0, sensitivity / epsilon, size=t.shape)
            return np.rint(out).astype(np.int64) if integer else out

        def rng(self, name):
            return np.random.default_rng(zlib.crc32(name.encode()))

    codes, dom = _data()
    g = PrivSyn(eps, **hp)
    r = FakeRand(11)
    if counts:
        u, c = np.unique(codes, axis=0, return_counts=True)
        m = g.fit(u, dom, r, counts=c)
    else:
        m = g.fit(codes, dom, r)
    s = m.sample(2000, np.random.default_rng(3))
    h = hashlib.sha256(np.ascontiguousarray(s, dtype=np.int64).tobytes())
    h.update(json.dumps([r.log, g.budget_parts(), g.privacy_map(2), g.hyperparameters()]).encode())
    return h.hexdigest()


#: computed with mechanisms/privsyn.py and estimation.py of commit 8adb0d3 (before the zCDP mode)
GOLDEN = {
    (0.5, "{}"): "526b7881cb21b2d27c2448b5f88b23dc3571369610323ba1ba54cae2a92dac51",
    (5.0, "{}"): "ee7a2689fc9998fa423e3123a97dcc86fad0bd6b0e1eecf5e10eb6395abf2a55",
    (0.5, '{"estimator": "hierarchical", "pair_values": 8}'):
        "8dfcf2f82505a134930e808dfe8b62c37c2dc3f7fd29f36862d24d86d4fd6da3",
    (1.0, '{"estimator": "hierarchical", "max_pairs": 3, "select_rule": "top"}'):
        "c09a24389ba1d3846ff0fa5c12f673e81311e431721fa521f84e8e4ecee6ad36",
    (1.0, '{"max_pairs": 4, "select_rule": "top", "split_select": 0.3}'):
        "e1927a67c146f74065afe61b7a771d830efdd56a538156a4750fb1702367785d",
}


@pytest.mark.parametrize("eps,hp", sorted(GOLDEN))
def test_pure_path_is_unchanged(eps, hp):
    assert _golden_digest(eps, json.loads(hp)) == GOLDEN[(eps, hp)]


def test_pure_path_on_record_types_is_unchanged():
    hp = '{"estimator": "hierarchical", "pair_values": 8}'
    assert _golden_digest(0.5, json.loads(hp), counts=True) == GOLDEN[(0.5, hp)]
