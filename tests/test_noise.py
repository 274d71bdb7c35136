"""Tests of the randomness layer: OpenDP noise calibration, transcript, replay, coding."""
from __future__ import annotations

import hashlib
import json
import math
from fractions import Fraction

import numpy as np
import opendp.prelude as dp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dpbundle.mechanisms.coding import Coded, ColumnCoding, mixed_radix_decode, mixed_radix_index
from dpbundle.mechanisms.measurements import ExponentialSelection, LaplaceRelease
from dpbundle.mechanisms.noise import (
    Randomness,
    ReplayMismatch,
    calibrated_exponential_scale,
    calibrated_laplace_scale,
    Transcript,
    read_transcript_file,
    write_transcript_file,
)

dp.enable_features("contrib")
ALPHA = 1e-6  # per statistical test: the file fails by chance with probability < 1e-5


# --------------------------------------------------------------------------- calibration


def test_scalar_laplace_matches_laplace_distribution():
    rand = Randomness()
    sens, eps, x = 3.0, 1.5, 10.0
    draws = np.array([rand.laplace(x, sensitivity=sens, epsilon=eps, purpose="ks") for _ in range(2000)])
    scale = sens / eps
    assert stats.kstest(draws - x, stats.laplace(scale=scale).cdf).pvalue > ALPHA
    # a wrong scale is detected by the same test (the test can fail)
    assert stats.kstest(draws - x, stats.laplace(scale=1.5 * scale).cdf).pvalue < ALPHA
    rec = rand.transcript.records[0]
    assert rec["kind"] == "laplace" and rec["true"] == x and rec["scale"] >= scale
    m = dp.m.make_laplace(dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), rec["scale"])
    assert m.map(sens) <= eps


def test_vector_laplace_matches_laplace_distribution():
    rand = Randomness()
    true = np.linspace(-5, 5, 2000)
    out = rand.laplace(true, sensitivity=2.0, epsilon=0.5, purpose="vec")
    assert out.shape == true.shape and out.dtype == np.float64
    assert stats.kstest(out - true, stats.laplace(scale=4.0).cdf).pvalue > ALPHA
    m = dp.m.make_laplace(dp.vector_domain(dp.atom_domain(T=float, nan=False)),
                          dp.l1_distance(T=float), rand.transcript.records[0]["scale"])
    assert m.map(2.0) <= 0.5


def test_vector_laplace_keeps_shape():
    rand = Randomness()
    out = rand.laplace(np.zeros((3, 4)), sensitivity=1.0, epsilon=1.0, purpose="2d")
    assert out.shape == (3, 4)
    assert rand.transcript.records[0]["shape"] == [3, 4]


def test_integer_laplace_matches_discrete_laplace():
    rand = Randomness()
    true = np.full(2000, 7, dtype=np.int64)
    out = rand.laplace(true, sensitivity=2, epsilon=1.0, purpose="counts", integer=True)
    assert out.dtype == np.int64
    noise = out - 7
    scale = 2.0
    # discrete Laplace pmf P(k) = (1 - a) / (1 + a) * a^|k|, a = exp(-1/scale)
    a = math.exp(-1 / scale)
    ks = np.arange(-6, 7)
    pmf = (1 - a) / (1 + a) * a ** np.abs(ks)
    tail = (1 - pmf.sum()) / 2
    observed = np.array([np.sum(noise < -6)] + [np.sum(noise == k) for k in ks] + [np.sum(noise > 6)])
    expected = 2000 * np.concatenate([[tail], pmf, [tail]])
    assert stats.chisquare(observed, expected).pvalue > ALPHA
    with pytest.raises(ValueError, match="integer"):
        rand.laplace(np.array([1.5]), sensitivity=2, epsilon=1.0, purpose="x", integer=True)
    with pytest.raises(ValueError, match="integer sensitivity"):
        rand.laplace(np.array([1]), sensitivity=1.5, epsilon=1.0, purpose="x", integer=True)


def _permute_and_flip_probs(scores: np.ndarray, scale: float) -> np.ndarray:
    """P[argmax_i (s_i + Z_i) = i] for i.i.d. Z_i ~ Exponential(scale), by numerical integration."""
    from scipy import integrate

    def p(i: int) -> float:
        def f(z: float) -> float:
            out = math.exp(-z / scale) / scale
            for j, sj in enumerate(scores):
                if j != i:
                    t = scores[i] + z - sj
                    out *= (1 - math.exp(-t / scale)) if t > 0 else 0.0
            return out
        return integrate.quad(f, max(0.0, scores.max() - scores[i]), np.inf, limit=200)[0]

    return np.array([p(i) for i in range(len(scores))])


def test_exponential_frequencies_match_report_noisy_max():
    """OpenDP's make_noisy_max under max_divergence adds exponential noise of scale 2*sens/eps
    (permute-and-flip); the chosen-index frequencies must match its exact probabilities."""
    rand = Randomness()
    scores = np.array([0.0, 1.0, 2.0, 4.0])
    sens, eps = 1.0, 1.0
    n = 3000
    choices = np.array([rand.exponential(scores, sensitivity=sens, epsilon=eps, purpose="em")
                        for _ in range(n)])
    observed = np.bincount(choices, minlength=len(scores))
    probs = _permute_and_flip_probs(scores, 2 * sens / eps)
    assert probs.sum() == pytest.approx(1.0, abs=1e-9)
    assert stats.chisquare(observed, n * probs).pvalue > ALPHA
    # the test can fail: the softmax of the exponential mechanism, exp(eps*u/(2*sens)), is a
    # different distribution and is rejected, as is permute-and-flip at twice the epsilon
    w = np.exp(eps * scores / (2 * sens))
    assert stats.chisquare(observed, n * w / w.sum()).pvalue < ALPHA
    assert stats.chisquare(observed, n * _permute_and_flip_probs(scores, sens / eps)).pvalue < ALPHA
    rec = rand.transcript.records[0]
    assert rec["kind"] == "exponential" and rec["true"] == scores.tolist()
    assert isinstance(rec["noisy"], int) and rec["scale"] >= 2.0
    m = dp.m.make_noisy_max(dp.vector_domain(dp.atom_domain(T=float, nan=False)),
                            dp.linf_distance(T=float), dp.max_divergence(), rec["scale"])
    assert m.map(sens) <= eps


def test_zero_sensitivity_is_exact():
    rand = Randomness()
    assert rand.laplace(1.25, sensitivity=0.0, epsilon=1.0, purpose="z") == 1.25


# ------------------------------------------------- calibration in exact arithmetic (issue 11.5)

AWKWARD_EPS = [0.1, 0.3, 1 / 3, 0.8, 1e-3, 9.98, 0.43, 0.01, 0.17, 0.7, 4.0, 0.05 / 3, 2.0 / 7]
AWKWARD_SENS = [1.0, 2.0, 0.5, 3.0, 0.1, 1 / 3, 2 / 160_000, 3 / 4000 + 2 / 4000**2, 27.0, 36.0,
                3200 / 6000, 1e-3, 9.98]


def _spendable(e: float) -> Fraction:
    """Independent of mechanisms/exact.py: the smaller of the float's value and its decimal."""
    return min(Fraction(e), Fraction(repr(e)))


def _opendp_laplace(scale: float, vector: bool, integer: bool):
    T = "i64" if integer else float
    atom = dp.atom_domain(T="i64") if integer else dp.atom_domain(T=float, nan=False)
    if vector:
        return dp.m.make_laplace(dp.vector_domain(atom), dp.l1_distance(T=T), scale)
    return dp.m.make_laplace(atom, dp.absolute_distance(T=T), scale)


def _opendp_noisy_max(scale: float):
    return dp.m.make_noisy_max(dp.vector_domain(dp.atom_domain(T=float, nan=False)),
                               dp.linf_distance(T=float), dp.max_divergence(), scale)


def _check_calibration(s: float, e: float) -> None:
    target = _spendable(e)
    up = math.nextafter(s, math.inf)          # the docstring's "next float up"
    for vector in (False, True):
        scale = calibrated_laplace_scale(s, e, vector=vector)
        m = _opendp_laplace(scale, vector, False)
        assert Fraction(m.map(up)) <= target, (s, e, vector, scale)
        assert Fraction(m.map(s)) <= target
        # rounded up no further than needed: one float lower breaks the exact budget
        lower = _opendp_laplace(math.nextafter(scale, 0.0), vector, False)
        assert Fraction(lower.map(up)) > target
    if s == int(s):
        scale = calibrated_laplace_scale(s, e, integer=True)
        assert Fraction(_opendp_laplace(scale, False, True).map(int(s))) <= target
        assert Fraction(_opendp_laplace(math.nextafter(scale, 0.0), False, True).map(int(s))) > target
    scale = calibrated_exponential_scale(s, e)
    assert Fraction(_opendp_noisy_max(scale).map(up)) <= target
    assert Fraction(_opendp_noisy_max(math.nextafter(scale, 0.0)).map(up)) > target
    assert Fraction(scale) >= 2 * Fraction(s) / target


@pytest.mark.parametrize("e", AWKWARD_EPS)
@pytest.mark.parametrize("s", AWKWARD_SENS)
def test_calibrated_map_is_within_the_exact_epsilon(s, e):
    """For every (sensitivity, epsilon) pair, OpenDP's own map at the calibrated scale, taken at
    the next float above the sensitivity, is <= epsilon as a rational -- both <= the float and
    <= the decimal the spec wrote (0.8 -> 4/5) -- and the scale is the smallest such float."""
    _check_calibration(s, e)


@settings(max_examples=150, deadline=None)
@given(st.floats(1e-6, 1e3, allow_nan=False), st.floats(1e-4, 20.0, allow_nan=False))
def test_calibrated_map_property(s, e):
    _check_calibration(s, e)


def test_the_old_calibration_spent_more_than_a_decimal_epsilon():
    """The 0.8 case: scale = 1 / fl(0.8) = 1.25 gives OpenDP's map fl(0.8) =
    0.8000000000000000444 > 4/5 at sensitivity 1 (the float check map <= 0.8 passed it); and a
    map checked at the sensitivity itself misses a formula's rounding. The calibrated scale is
    above 1.25 and its map at the next float above 1 is <= 4/5."""
    old = _opendp_laplace(1.0 / 0.8, False, False)
    assert old.map(1.0) <= 0.8 and Fraction(old.map(1.0)) > Fraction(4, 5)
    rand = Randomness()
    rand.laplace(0.0, sensitivity=1.0, epsilon=0.8, purpose="p")
    rec = rand.transcript.records[0]
    assert rec["scale"] > 1.25 and rec["epsilon"] == 0.8
    assert Fraction(_opendp_laplace(rec["scale"], False, False).map(math.nextafter(1.0, 2.0))) \
        <= Fraction(4, 5)
    # the descriptors report the calibrated map, never above the exact epsilon
    m = LaplaceRelease("x", sensitivity=1.0, epsilon=0.8)
    assert Fraction(m.privacy_map(1)) <= Fraction(4, 5) and m.privacy_map(1) == pytest.approx(0.8)
    x = ExponentialSelection("y", sensitivity=3 / 4000, epsilon=0.1)
    assert Fraction(x.privacy_map(1)) <= Fraction(1, 10)


# --------------------------------------------------------------------------- arguments


@pytest.mark.parametrize("eps", [0.0, -1.0, math.nan, math.inf])
def test_bad_epsilon(eps):
    with pytest.raises(ValueError, match="epsilon"):
        Randomness().laplace(1.0, sensitivity=1.0, epsilon=eps, purpose="p")
    with pytest.raises(ValueError, match="epsilon"):
        Randomness().exponential([1.0, 2.0], sensitivity=1.0, epsilon=eps, purpose="p")


@pytest.mark.parametrize("sens", [-1.0, math.nan, math.inf])
def test_bad_sensitivity(sens):
    with pytest.raises(ValueError, match="sensitivity"):
        Randomness().laplace(1.0, sensitivity=sens, epsilon=1.0, purpose="p")


def test_bad_values_and_purpose():
    r = Randomness()
    with pytest.raises(ValueError, match="finite"):
        r.laplace(math.nan, sensitivity=1.0, epsilon=1.0, purpose="p")
    with pytest.raises(ValueError, match="non-finite"):
        r.laplace(np.array([1.0, math.inf]), sensitivity=1.0, epsilon=1.0, purpose="p")
    with pytest.raises(ValueError, match="empty"):
        r.laplace(np.array([]), sensitivity=1.0, epsilon=1.0, purpose="p")
    with pytest.raises(ValueError, match="purpose"):
        r.laplace(1.0, sensitivity=1.0, epsilon=1.0, purpose="")
    with pytest.raises(ValueError, match="empty"):
        r.exponential([], sensitivity=1.0, epsilon=1.0, purpose="p")
    with pytest.raises(ValueError, match="finite"):
        r.exponential([1.0, math.nan], sensitivity=1.0, epsilon=1.0, purpose="p")
    with pytest.raises(ValueError):
        r.mark("m", mark="x")
    with pytest.raises(ValueError):
        r.mark("")
    assert len(r.transcript) == 0  # nothing recorded by failed calls


# --------------------------------------------------------------------------- transcript


def _run(rand: Randomness, shift: float = 0.0) -> dict:
    out = {}
    out["a"] = rand.laplace(0.1 + 0.2 + shift, sensitivity=1.0, epsilon=0.7, purpose="scalar")
    rand.mark("iteration", index=0, config={"theta": 4, "split": 0.25})
    out["v"] = rand.laplace(np.array([1.0, 2.5, 3.0]), sensitivity=2.0, epsilon=0.3, purpose="vector")
    out["c"] = rand.laplace(np.array([4, 0, 9]), sensitivity=2, epsilon=0.3, purpose="counts",
                            integer=True)
    out["e"] = rand.exponential(np.array([0.5, 0.25, 1.0]), sensitivity=0.5, epsilon=1.0,
                                purpose="select")
    out["r"] = rand.rng("sample").integers(0, 2**62, size=5)
    out["r2"] = rand.rng("shuffle").random(3)
    return out


def test_transcript_canonical_round_trip():
    rand = Randomness()
    _run(rand)
    data = rand.transcript.to_jsonl()
    assert data.endswith(b"\n")
    lines = data.decode().split("\n")[:-1]
    assert len(lines) == len(rand.transcript.records)
    for line, rec in zip(lines, rand.transcript.records):
        assert line == json.dumps(rec, sort_keys=True, separators=(",", ":"))
    back = Transcript.from_jsonl(data)
    assert back.records == rand.transcript.records
    assert back.to_jsonl() == data
    assert back.records[0]["true"] == 0.1 + 0.2  # exact float, not 0.3
    assert back.records[0]["true"] != 0.3
    seed_rec = back.records[-2]
    assert seed_rec["kind"] == "seed" and len(seed_rec["seed"]) == 64
    int(seed_rec["seed"], 16)
    assert back.records[-1]["seed"] != seed_rec["seed"]


def test_transcript_converts_numpy_and_rejects_nan():
    t = Transcript()
    t.append({"kind": "mark", "x": np.float64(1.5), "y": np.arange(3), "z": (1, 2)})
    assert t.records[0] == {"kind": "mark", "x": 1.5, "y": [0, 1, 2], "z": [1, 2]}
    assert type(t.records[0]["x"]) is float and type(t.records[0]["y"][0]) is int
    with pytest.raises(ValueError):
        t.append({"kind": "mark", "x": float("nan")})
    with pytest.raises(ValueError):
        t.append({"x": 1})
    assert len(t) == 1


def test_commitment():
    rand = Randomness()
    _run(rand)
    salt1, salt2 = bytes(range(32)), bytes(range(1, 33))
    t = rand.transcript
    c1 = t.commitment(salt1)
    assert c1 == hashlib.sha256(salt1 + t.to_jsonl()).hexdigest()
    assert t.commitment(salt2) != c1
    changed = Transcript.from_jsonl(t.to_jsonl())
    changed.records[0]["noisy"] = changed.records[0]["noisy"] + 1e-9
    assert changed.commitment(salt1) != c1
    with pytest.raises(ValueError):
        t.commitment(b"short")


def test_transcript_file_round_trip(tmp_path):
    rand = Randomness()
    _run(rand)
    salt = bytes(range(32))
    path = tmp_path / "transcript.jsonl"
    write_transcript_file(path, rand.transcript, salt)
    first = json.loads(path.read_bytes().split(b"\n")[0])
    assert first == {"kind": "header", "format": "dpbundle-transcript/1", "salt": salt.hex()}
    salt2, t2 = read_transcript_file(path)
    assert salt2 == salt and t2.commitment(salt) == rand.transcript.commitment(salt)


# --------------------------------------------------------------------------- replay


def test_replay_returns_recorded_outputs_and_seeds():
    rand = Randomness()
    original = _run(rand)
    records = Transcript.from_jsonl(rand.transcript.to_jsonl()).records
    rp = Randomness.replay(records)
    again = _run(rp)
    assert again["a"] == original["a"]
    np.testing.assert_array_equal(again["v"], original["v"])
    np.testing.assert_array_equal(again["c"], original["c"])
    assert again["c"].dtype == np.int64
    assert again["e"] == original["e"]
    np.testing.assert_array_equal(again["r"], original["r"])
    np.testing.assert_array_equal(again["r2"], original["r2"])
    rp.check_finished()
    assert rp.transcript.to_jsonl() == rand.transcript.to_jsonl()


def test_replay_fresh_run_differs():
    """Two recorded runs are independent (so replay equality above is not trivial)."""
    a, b = _run(Randomness()), _run(Randomness())
    assert not np.array_equal(a["r"], b["r"])
    assert not np.array_equal(a["v"], b["v"])


def test_replay_changed_true_value_names_the_record():
    rand = Randomness()
    _run(rand)
    rp = Randomness.replay(rand.transcript.records)
    with pytest.raises(ReplayMismatch) as exc:
        _run(rp, shift=1e-12)
    msg = str(exc.value)
    assert "record 0" in msg and "'scalar'" in msg and "true value" in msg
    assert exc.value.index == 0 and exc.value.field == "true"


def test_replay_changed_vector_element():
    rand = Randomness()
    rand.laplace(np.array([1.0, 2.0, 3.0]), sensitivity=1.0, epsilon=1.0, purpose="vec")
    rp = Randomness.replay(rand.transcript.records)
    with pytest.raises(ReplayMismatch, match=r"record 0 .*'vec'.*element 2"):
        rp.laplace(np.array([1.0, 2.0, 3.5]), sensitivity=1.0, epsilon=1.0, purpose="vec")


@pytest.mark.parametrize("change,field", [
    (dict(epsilon=0.8), "epsilon"),
    (dict(sensitivity=1.5), "sensitivity"),
    (dict(purpose="other"), "purpose"),
])
def test_replay_checks_parameters(change, field):
    rand = Randomness()
    rand.laplace(1.0, sensitivity=1.0, epsilon=0.7, purpose="p")
    args = dict(sensitivity=1.0, epsilon=0.7, purpose="p") | change
    with pytest.raises(ReplayMismatch) as exc:
        Randomness.replay(rand.transcript.records).laplace(1.0, **args)
    assert exc.value.field == field and "record 0" in str(exc.value)


def test_replay_kind_mark_and_end():
    rand = Randomness()
    rand.rng("sample")
    rand.mark("iteration", index=3)
    rp = Randomness.replay(rand.transcript.records)
    with pytest.raises(ReplayMismatch, match="record 0"):
        rp.laplace(1.0, sensitivity=1.0, epsilon=1.0, purpose="sample")
    rp = Randomness.replay(rand.transcript.records)
    rp.rng("sample")
    with pytest.raises(ReplayMismatch, match="index"):
        rp.mark("iteration", index=4)
    rp = Randomness.replay(rand.transcript.records)
    rp.rng("sample")
    rp.mark("iteration", index=3)
    with pytest.raises(ReplayMismatch, match="ended after 2 records"):
        rp.rng("more")
    rp = Randomness.replay(rand.transcript.records)
    rp.rng("sample")
    with pytest.raises(ReplayMismatch, match="not replayed"):
        rp.check_finished()


def test_replay_from_start_index():
    rand = Randomness()
    rand.mark("iteration", index=0)
    g0 = rand.rng("sample").random(4)
    rand.mark("iteration", index=1)
    g1 = rand.rng("sample").random(4)
    rp = Randomness.replay(rand.transcript.records, start=2)
    assert rp.cursor == 2
    rp.mark("iteration", index=1)
    np.testing.assert_array_equal(rp.rng("sample").random(4), g1)
    assert not np.array_equal(g0, g1)
    rp.check_finished()
    with pytest.raises(ValueError):
        Randomness.replay(rand.transcript.records, start=5)


# --------------------------------------------------------------------------- measurements


def test_laplace_release_descriptor():
    m = LaplaceRelease("criterion kway", sensitivity=0.5, epsilon=0.25)
    assert m.scale >= 2.0 and m.scale == pytest.approx(2.0, rel=1e-12)
    assert m.noise_std == pytest.approx(math.sqrt(2) * 2.0)
    assert m.privacy_map(1) <= 0.25 and m.privacy_map(1) == pytest.approx(0.25)
    assert m.privacy_map(2) == pytest.approx(0.5)
    d = m.describe()
    assert d["input_metric"] == "change_one_distance" and d["output_measure"] == "max_divergence"
    json.dumps(d, allow_nan=False)
    rand = Randomness()
    v = m.release(3.0, rand)
    assert isinstance(v, float)
    assert rand.transcript.records[0]["purpose"] == "criterion kway"
    with pytest.raises(ValueError):
        LaplaceRelease("x", sensitivity=1.0, epsilon=0.0)
    with pytest.raises(ValueError):
        m.release(np.array([1.0]), rand)


def test_exponential_selection_descriptor():
    m = ExponentialSelection("structure", sensitivity=1.0, epsilon=0.5)
    assert m.scale == pytest.approx(4.0)
    assert m.privacy_map(1) <= 0.5 and m.privacy_map(1) == pytest.approx(0.5)
    rand = Randomness()
    assert m.release(np.array([0.0, 100.0]), rand) in (0, 1)
    assert rand.transcript.records[0]["kind"] == "exponential"


# --------------------------------------------------------------------------- coding


def _col(name: str, k: int) -> ColumnCoding:
    return ColumnCoding(name=name, labels=tuple(str(i) for i in range(k)), values=np.arange(k),
                        ordered=True, lower=np.arange(k), upper=np.arange(k) + 1)


def test_coded_validation_and_helpers():
    cols = (_col("a", 3), _col("b", 2))
    c = Coded(codes=np.array([[0, 1], [2, 0]]), columns=cols)
    assert c.domain == (3, 2) and c.column("b") == 1 and c.codes.dtype == np.int64
    assert c.labels_frame()["a"].tolist() == ["0", "2"]
    with pytest.raises(KeyError):
        c.column("zzz")
    with pytest.raises(ValueError, match="outside"):
        Coded(codes=np.array([[3, 0]]), columns=cols)
    with pytest.raises(ValueError, match="shape"):
        Coded(codes=np.array([[0, 0, 0]]), columns=cols)
    assert cols[0] == _col("a", 3) and cols[0] != _col("a", 4)
    with pytest.raises(ValueError):
        ColumnCoding(name="x", labels=("a", "b"), values=[1.0], ordered=False,
                     lower=[np.nan, np.nan], upper=[np.nan, np.nan])


def test_mixed_radix_matches_numpy():
    rng = np.random.default_rng(0)
    domain = (4, 1, 7, 3)
    codes = np.column_stack([rng.integers(0, s, 500) for s in domain])
    idx = mixed_radix_index(codes, domain)
    np.testing.assert_array_equal(idx, np.ravel_multi_index(codes.T, domain))
    np.testing.assert_array_equal(mixed_radix_decode(idx, domain), codes)
