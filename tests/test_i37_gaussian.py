"""Issue 37 item 2, mechanism layer: the Gaussian mechanism under zCDP (``Randomness.gaussian``),
its calibration, record, replay and frozen mode, the audit's noise test of Gaussian records and
the self-test's L2 distance."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import opendp.prelude as dp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dpbundle.mechanisms import exact
from dpbundle.mechanisms.noise import (
    PathDivergence,
    Randomness,
    ReplayMismatch,
    calibrated_gaussian_scale,
    map_distance,
)

dp.enable_features("contrib")
ALPHA = 1e-6  # per statistical test
SQRT2 = math.sqrt(2.0)


def _opendp_map(scale: float, d: float, integer: bool = True, vector: bool = True) -> Fraction:
    """OpenDP's own zCDP map of make_gaussian at ``d`` (built here, not by the code under test)."""
    atom = dp.atom_domain(T="i64") if integer else dp.atom_domain(T=float, nan=False)
    if vector:
        m = dp.m.make_gaussian(dp.vector_domain(atom), dp.l2_distance(T=float), scale)
    else:
        m = dp.m.make_gaussian(atom, dp.absolute_distance(T=float), scale)
    return Fraction(m.map(d))


def _discrete_gaussian_pmf(sigma: float, support: np.ndarray) -> np.ndarray:
    """P(Z = z) ∝ exp(-z^2 / (2 sigma^2)) on the integers (normalised over +-60 sigma)."""
    m = int(60 * sigma) + 10
    z = np.arange(-m, m + 1, dtype=np.float64)
    norm = np.exp(-z * z / (2 * sigma * sigma)).sum()
    return np.exp(-support.astype(np.float64) ** 2 / (2 * sigma * sigma)) / norm


def _chi_square_p(noise: np.ndarray, sigma: float) -> float:
    """Chi-square goodness of fit of integer noise to the discrete Gaussian of ``sigma``, the
    cells the integers within 3 sigma and the two tails pooled."""
    k = int(3 * sigma)
    inner = np.arange(-k, k + 1)
    p_inner = _discrete_gaussian_pmf(sigma, inner)
    p = np.concatenate([[(1 - p_inner.sum()) / 2], p_inner, [(1 - p_inner.sum()) / 2]])
    obs = np.concatenate([[np.sum(noise < -k)], np.bincount(np.clip(noise, -k, k) + k,
                                                             minlength=2 * k + 1).astype(float),
                          [np.sum(noise > k)]])
    obs[1] -= np.sum(noise < -k)
    obs[-2] -= np.sum(noise > k)
    return float(stats.chisquare(obs, p * noise.size).pvalue)


# --------------------------------------------------------------------------- distribution


def test_integer_gaussian_has_the_declared_discrete_gaussian_distribution():
    rand = Randomness()
    true = np.arange(20_000, dtype=np.int64) % 7
    out = rand.gaussian(true, sensitivity=SQRT2, rho=0.02, purpose="dg")
    assert out.dtype == np.int64 and out.shape == true.shape
    rec = rand.transcript.records[0]
    sigma = rec["scale"]
    assert sigma == pytest.approx(SQRT2 / math.sqrt(2 * 0.02), rel=1e-12)
    noise = np.asarray(rec["noisy"]) - np.asarray(rec["true"])
    assert np.array_equal(out - true, noise)
    assert _chi_square_p(noise, sigma) > ALPHA
    # the same test fails on a sigma 10% off either way: it can fail
    assert _chi_square_p(noise, 1.1 * sigma) < ALPHA
    assert _chi_square_p(noise, sigma / 1.1) < ALPHA


def test_continuous_gaussian_has_the_declared_normal_distribution():
    rand = Randomness()
    draws = np.array([rand.gaussian(2.5, sensitivity=1.0, rho=0.5, purpose="g", integer=False)
                      for _ in range(3000)])
    sigma = rand.transcript.records[0]["scale"]
    assert rand.transcript.records[0]["mechanism"] == "opendp.make_gaussian"
    assert stats.kstest(draws - 2.5, stats.norm(scale=sigma).cdf).pvalue > ALPHA
    assert stats.kstest(draws - 2.5, stats.norm(scale=1.25 * sigma).cdf).pvalue < ALPHA
    vec = rand.gaussian(np.zeros(3000), sensitivity=1.0, rho=0.5, purpose="v", integer=False)
    assert vec.dtype == np.float64
    assert stats.kstest(vec, stats.norm(scale=sigma).cdf).pvalue > ALPHA


# --------------------------------------------------------------------------- calibration


@settings(max_examples=60, deadline=None)
@given(s=st.sampled_from([SQRT2, 1.0, 2.0, 0.1, 3 * SQRT2, 1 / 3]),
       r=st.floats(min_value=1e-4, max_value=10.0, allow_nan=False))
def test_calibrated_scale_is_the_smallest_within_rho(s, r):
    """OpenDP's map at the next float above the sensitivity is <= rho exactly (both as decimal
    and as binary), and at the next smaller scale it is > rho."""
    scale = calibrated_gaussian_scale(s, r)
    d = math.nextafter(s, math.inf)
    assert d == map_distance(s)
    target = min(Fraction(r), Fraction(repr(r)))
    assert _opendp_map(scale, d) <= target
    assert _opendp_map(math.nextafter(scale, 0.0), d) > target
    # the exact real bound (s / scale)^2 / 2 <= rho holds too, with s read as a real number
    assert Fraction(s) ** 2 / (2 * Fraction(scale) ** 2) <= target


def test_sqrt2_is_covered_as_a_real_number():
    """fl(sqrt 2) lies above the real sqrt(2); the map is checked one ulp higher still, so the
    real L2 sensitivity sqrt(2) of a count table is covered: 2 / (2 scale^2) <= rho exactly."""
    assert Fraction(SQRT2) ** 2 > 2
    for rho in (0.0139, 0.01497, 0.001, 1.0):
        scale = calibrated_gaussian_scale(SQRT2, rho)
        assert Fraction(2) / (2 * Fraction(scale) ** 2) <= exact.spendable(rho)
        assert scale == pytest.approx(1 / math.sqrt(rho), rel=1e-12)
        # scalar and vector, integer and float measurements calibrate alike
        assert calibrated_gaussian_scale(SQRT2, rho, integer=False) == scale
        assert _opendp_map(scale, map_distance(SQRT2), integer=True, vector=False) <= exact.spendable(rho)


def test_zero_sensitivity_is_exact():
    rand = Randomness()
    assert rand.gaussian(np.array([3, 4]), sensitivity=0, rho=0.1, purpose="z").tolist() == [3, 4]
    assert rand.transcript.records[0]["scale"] == 0.0


# --------------------------------------------------------------------------- record


def test_record_format_and_schema(tmp_path):
    from dpbundle.audit.replay import TranscriptError, check_records

    rand = Randomness()
    rand.gaussian(np.arange(6).reshape(2, 3), sensitivity=SQRT2, rho=0.01, purpose="table")
    rand.gaussian(7, sensitivity=1, rho=0.3, purpose="scalar")
    rand.gaussian(1.5, sensitivity=1, rho=0.3, purpose="float", integer=False)
    recs = rand.transcript.records
    assert set(recs[0]) == {"kind", "purpose", "mechanism", "sensitivity", "rho", "scale", "true",
                            "noisy", "shape"}
    assert recs[0]["kind"] == "gaussian" and recs[0]["mechanism"] == "opendp.make_gaussian/integer"
    assert recs[0]["shape"] == [2, 3] and recs[0]["true"] == [0, 1, 2, 3, 4, 5]
    assert recs[0]["sensitivity"] == SQRT2 and recs[0]["rho"] == 0.01
    assert "shape" not in recs[1] and isinstance(recs[1]["noisy"], int)
    assert recs[2]["mechanism"] == "opendp.make_gaussian" and isinstance(recs[2]["noisy"], float)
    check_records(tmp_path / "t", recs)
    for bad in (dict(recs[1], epsilon=1.0), dict(recs[1], rho=0), dict(recs[1], noisy=1.5),
                dict(recs[1], mechanism="opendp.make_laplace")):
        with pytest.raises(TranscriptError):
            check_records(tmp_path / "t", [bad])


# --------------------------------------------------------------------------- replay, frozen


def _recorded():
    rand = Randomness()
    a = rand.gaussian(np.array([[5, 6], [7, 8]]), sensitivity=SQRT2, rho=0.05, purpose="t2")
    b = rand.gaussian(10, sensitivity=1, rho=0.2, purpose="t0")
    return rand.transcript.records, a, b


def test_replay_returns_the_recorded_output():
    recs, a, b = _recorded()
    rep = Randomness.replay(recs)
    a2 = rep.gaussian(np.array([[5, 6], [7, 8]]), sensitivity=SQRT2, rho=0.05, purpose="t2")
    b2 = rep.gaussian(10, sensitivity=1, rho=0.2, purpose="t0")
    assert np.array_equal(a2, a) and a2.dtype == np.int64 and b2 == b
    rep.check_finished()
    assert rep.transcript.records == recs


@pytest.mark.parametrize("change, field", [
    (dict(true=np.array([[5, 6], [7, 9]])), "true"),
    (dict(rho=0.04), "rho"),
    (dict(sensitivity=2.0), "sensitivity"),
])
def test_replay_refuses_a_changed_call(change, field):
    recs, _, _ = _recorded()
    args = dict(true=np.array([[5, 6], [7, 8]]), sensitivity=SQRT2, rho=0.05)
    args.update(change)
    rep = Randomness.replay(recs)
    with pytest.raises(ReplayMismatch) as e:
        rep.gaussian(args.pop("true"), purpose="t2", **args)
    assert e.value.field == field
    assert "5" not in str(e.value).replace("t2", "")  # no value in the message


def test_replay_refuses_a_changed_scale_and_a_laplace_in_its_place():
    recs, _, _ = _recorded()
    forged = [dict(recs[0], scale=recs[0]["scale"] * 0.5), recs[1]]
    with pytest.raises(ReplayMismatch) as e:
        Randomness.replay(forged).gaussian(np.array([[5, 6], [7, 8]]), sensitivity=SQRT2,
                                           rho=0.05, purpose="t2")
    assert e.value.field == "scale"
    with pytest.raises(ReplayMismatch) as e:
        Randomness.replay(recs).laplace(np.array([[5, 6], [7, 8]]), sensitivity=2, epsilon=0.05,
                                        purpose="t2", integer=True)
    assert e.value.field == "kind"
    bad = [dict(recs[0], noisy=[1, 2, 3])]
    with pytest.raises(ReplayMismatch) as e:
        Randomness.replay(bad).gaussian(np.array([[5, 6], [7, 8]]), sensitivity=SQRT2, rho=0.05,
                                        purpose="t2")
    assert e.value.field == "noisy"


def test_frozen_mode_returns_recorded_outputs_and_records_own_true_values():
    recs, a, b = _recorded()
    fr = Randomness.frozen(recs)
    a2 = fr.gaussian(np.array([[1, 1], [1, 1]]), sensitivity=SQRT2, rho=0.05, purpose="t2")
    b2 = fr.gaussian(3, sensitivity=1, rho=0.2, purpose="t0")
    assert np.array_equal(a2, a) and b2 == b
    fr.check_finished()
    own = fr.transcript.records
    assert own[0]["true"] == [1, 1, 1, 1] and own[0]["noisy"] == recs[0]["noisy"]
    assert own[1]["true"] == 3
    for kwargs, field in ((dict(rho=0.06), "rho"), (dict(integer=False), "mechanism")):
        fr = Randomness.frozen(recs)
        args = dict(sensitivity=SQRT2, rho=0.05, purpose="t2")
        args.update(kwargs)
        with pytest.raises(PathDivergence) as e:
            fr.gaussian(np.array([[1, 1], [1, 1]]), **args)
        assert e.value.field == field
    fr = Randomness.frozen(recs)
    with pytest.raises(PathDivergence) as e:
        fr.gaussian(np.array([1, 1, 1]), sensitivity=SQRT2, rho=0.05, purpose="t2")
    assert e.value.field == "shape"


# --------------------------------------------------------------------------- bad arguments


@pytest.mark.parametrize("kwargs, match", [
    (dict(rho=0), "rho must be a finite number > 0"),
    (dict(rho=-1.0), "rho must be a finite number > 0"),
    (dict(rho=math.inf), "rho must be a finite number > 0"),
    (dict(rho=True), "must be numbers"),
    (dict(rho="0.1"), None),
    (dict(sensitivity=-1.0), "sensitivity must be a finite number >= 0"),
    (dict(sensitivity=math.nan), "sensitivity must be a finite number >= 0"),
    (dict(sensitivity=None), "must be numbers"),
    (dict(purpose=""), "purpose must be a non-empty string"),
])
def test_bad_arguments(kwargs, match):
    args = dict(sensitivity=SQRT2, rho=0.1, purpose="p")
    args.update(kwargs)
    if match is None:   # a numeric string is read as a number, as laplace does
        Randomness().gaussian(np.array([1, 2]), **args)
        return
    with pytest.raises(ValueError, match=match):
        Randomness().gaussian(np.array([1, 2]), **args)


@pytest.mark.parametrize("value, match", [
    (np.array([1.5, 2.0]), "integer gaussian 'p': the true values must be integers"),
    (np.array([]), "gaussian 'p': the true value is an empty array"),
    (np.array(["a"]), "gaussian 'p': the true value must be numeric"),
    (2.5, "integer gaussian 'p': the true value 2.5 is not an integer"),
    (math.nan, "gaussian 'p': true value nan is not finite"),
    ("x", "gaussian 'p': true value 'x' is not a number"),
])
def test_bad_true_values(value, match):
    with pytest.raises(ValueError, match=match):
        Randomness().gaussian(value, sensitivity=SQRT2, rho=0.1, purpose="p")


def test_calibrated_scale_refuses_bad_arguments():
    with pytest.raises(ValueError, match="rho must be"):
        calibrated_gaussian_scale(SQRT2, 0.0)
    with pytest.raises(ValueError, match="sensitivity must be"):
        calibrated_gaussian_scale(-1.0, 0.5)


# --------------------------------------------------------------------------- audit noise test


def _gaussian_transcript(rhos=(2.0, 0.5, 0.02, 1e-4, 1e-8), size=3000, integer=True):
    """Honest Gaussian records over a range of sigmas (0.5 .. 14,000: the exact discrete CDF
    and the smoothed normal one), with one Laplace record beside them."""
    rand = Randomness()
    for k, rho in enumerate(rhos):
        true = (np.arange(size) % 11) if integer else np.linspace(-3, 3, size)
        rand.gaussian(true, sensitivity=SQRT2, rho=rho, purpose=f"g{k}", integer=integer)
    rand.laplace(np.zeros(500, dtype=np.int64), sensitivity=2, epsilon=0.5, purpose="l", integer=True)
    return [dict(r) for r in rand.transcript.records]


def _shrink(recs, factor):
    for r in recs:
        if r["kind"] == "gaussian":
            noisy = [t + (n - t) * factor for t, n in zip(r["true"], r["noisy"])]
            r["noisy"] = [int(round(v)) for v in noisy] if r["mechanism"].endswith("/integer") else noisy
    return recs


@pytest.mark.parametrize("integer", [True, False])
def test_honest_gaussian_noise_passes_the_audit(integer):
    from dpbundle.audit.noise_check import check_noise

    res = check_noise(_gaussian_transcript(integer=integer))
    assert res.ok, res.problems
    assert res.facts["gaussian_records"] == 5 and res.facts["gaussian_coordinates"] == 15_000
    assert res.facts["laplace_coordinates"] == 500
    assert res.facts["power_no_noise"] > 0.99 and res.facts["power_noise_halved"] > 0.99


def test_gaussian_pit_is_uniform_under_honest_noise():
    """The PIT of honest discrete Gaussian noise is uniform (small sigma, where the randomization
    matters most) and its e is Exponential(1); a wrong sigma is caught by the same test."""
    from dpbundle.audit.noise_check import gaussian_pit

    rand = Randomness()
    rand.gaussian(np.zeros(20_000, dtype=np.int64), sensitivity=SQRT2, rho=4.0, purpose="small")
    rec = rand.transcript.records[0]
    sigma, z = rec["scale"], np.asarray(rec["noisy"], dtype=float)
    assert sigma < 1
    v = np.random.default_rng(3).random(z.size)
    u, e = gaussian_pit(z, sigma, True, v)
    assert stats.kstest(u, "uniform").pvalue > ALPHA
    assert stats.kstest(e, "expon").pvalue > ALPHA
    u_bad, _ = gaussian_pit(z, 1.3 * sigma, True, v)
    assert stats.kstest(u_bad, "uniform").pvalue < ALPHA


@pytest.mark.parametrize("factor", [0.0, 0.5, 0.8])
def test_gaussian_noise_too_small_or_zero_fails_the_audit(factor):
    from dpbundle.audit.noise_check import check_noise

    res = check_noise(_shrink(_gaussian_transcript(), factor))
    assert not res.ok
    assert any("Gaussian noise of the transcript is smaller" in p for p in res.problems), res.problems


def test_gaussian_record_with_a_made_up_scale_is_refused():
    from dpbundle.audit.noise_check import check_noise

    recs = _gaussian_transcript()
    recs[0]["scale"] *= 2
    res = check_noise(recs)
    assert not res.ok and "not OpenDP's calibration for the record's sensitivity and rho" in res.problems[0]
    recs = _gaussian_transcript()
    recs[1]["mechanism"] = "opendp.make_gaussian/other"
    assert "unknown Gaussian mechanism" in check_noise(recs).problems[0]


# --------------------------------------------------------------------------- self-test distance


def test_selftest_distance_of_gaussian_calls_is_l2():
    from dpbundle.release.selftest import distance, pair_records

    metric, d, _ = distance("gaussian", [3, 4, 5], [4, 3, 5])
    assert metric == "L2" and d == pytest.approx(SQRT2)
    assert distance("laplace", [3, 4, 5], [4, 3, 5])[:2] == ("L1", 2.0)
    assert distance("gaussian", 7, 9)[:2] == ("abs", 2.0)

    base = Randomness()
    base.gaussian(np.array([3, 4, 5]), sensitivity=SQRT2, rho=0.1, purpose="table")
    fr = Randomness.frozen(base.transcript.records)
    fr.gaussian(np.array([4, 3, 5]), sensitivity=SQRT2, rho=0.1, purpose="table")   # moved: ok
    obs, findings = pair_records(base.transcript.records, fr.transcript.records, "c", 0, "change")
    assert not findings and obs[0].mechanism == "discrete Gaussian" and obs[0].metric == "L2"
    assert obs[0].rho == 0.1 and obs[0].epsilon is None
    fr = Randomness.frozen(base.transcript.records)
    fr.gaussian(np.array([5, 3, 4]), sensitivity=SQRT2, rho=0.1, purpose="table")   # L2 = sqrt 6
    obs, findings = pair_records(base.transcript.records, fr.transcript.records, "c", 0, "change")
    assert [f.kind for f in findings] == ["sensitivity"]
    assert obs[0].distance == pytest.approx(math.sqrt(6))


def test_selftest_json_of_pure_observations_is_unchanged():
    """A pure-DP observation's JSON has exactly its former fields (no rho)."""
    from dpbundle.release.selftest import Report

    base = Randomness()
    base.laplace(np.array([3, 4]), sensitivity=2, epsilon=0.5, purpose="t", integer=True)
    base.gaussian(np.array([3, 4]), sensitivity=SQRT2, rho=0.5, purpose="g")
    fr = Randomness.frozen(base.transcript.records)
    fr.laplace(np.array([4, 3]), sensitivity=2, epsilon=0.5, purpose="t", integer=True)
    fr.gaussian(np.array([4, 3]), sensitivity=SQRT2, rho=0.5, purpose="g")
    from dpbundle.release.selftest import pair_records

    obs, _ = pair_records(base.transcript.records, fr.transcript.records, "c", 0, "change")
    rep = Report(policy="p", pairs=1, seed=0, observations=obs)
    j = rep.to_json()["observations"]
    assert "rho" not in j[0] and j[0]["epsilon"] == 0.5 and j[0]["metric"] == "L1"
    assert j[1]["rho"] == 0.5 and j[1]["epsilon"] is None and j[1]["mechanism"] == "discrete Gaussian"
