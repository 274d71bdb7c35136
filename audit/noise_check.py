"""The enclave replay's test of the recorded noise: is the noise in the private transcript
plausible under the distributions the records declare?

The replay (``replay.py``) re-runs the selected attempt from the transcript and the private
data, and so proves that the released files follow from the *recorded* noisy values. It cannot
tell from that alone whether those values carry the declared noise: a run whose Laplace draws
returned their input (zero noise) replays byte for byte. This module tests the noise itself,
over **every** DP draw of the run (every attempt, the records-policy count included):

* **Laplace records** (``opendp.make_laplace``, continuous, and ``opendp.make_laplace/integer``,
  discrete Laplace ``P(z) ∝ exp(-|z| / b)`` on the integers): each coordinate's noise
  ``z = noisy - true`` is mapped to ``u = F_b(z)``, its probability-integral transform (PIT),
  uniform on (0, 1) when ``z`` has the declared distribution. For the discrete Laplace the PIT is
  randomized, ``u = F_b(z - 1) + V P_b(z)``, with ``V`` uniform from a fixed public generator
  (:data:`PIT_SEED`, ``numpy.random.Generator(PCG64(PIT_SEED))``, one ``V`` per discrete
  coordinate in transcript order), which makes ``u`` exactly uniform too. Two tests, pooled
  over all coordinates:

  - **shape**: a two-sided Kolmogorov-Smirnov test of the ``u`` against Uniform(0, 1);
  - **scale**: ``e = -log(2 min(u, 1 - u))`` is Exponential(1) (for continuous noise
    ``e = |z| / b`` exactly), so ``S = sum(e)`` is Gamma(N, 1); a two-sided test of ``S``
    catches noise scaled down (or up) far more powerfully than the shape test.

* **Gaussian records** (zCDP; ``opendp.make_gaussian``, continuous normal noise of standard
  deviation ``sigma``, and ``opendp.make_gaussian/integer``, the discrete Gaussian
  ``P(z) ∝ exp(-z^2 / (2 sigma^2))`` on the integers): the same PIT (:func:`gaussian_pit`),
  randomized for the discrete Gaussian with the same public stream of ``V``'s (one per
  discrete coordinate, Laplace and Gaussian in transcript order); its CDF is computed exactly
  from the normalised weights for ``sigma <= DISCRETE_EXACT_UPTO``, above as the normal CDF at
  ``z + V - 1/2`` (the discrete Gaussian plus a uniform, which is within ``O(1 / sigma^2)`` of
  normal). The ``u`` and ``e`` of the Gaussian coordinates join the Laplace ones in the two
  pooled tests (``e = -log(2 min(u, 1 - u))`` is Exponential(1) whatever the continuous
  distribution): the standardized noise against its declared distribution.

* **report-noisy-max records** (``opendp.make_noisy_max`` under max-divergence: exponential
  noise of scale ``b`` added to each score, the index of the largest reported): a single choice
  says little, so the test is over the count ``X`` of choices that were *not* a top-scoring
  candidate. Under the declared noise each draw picks a top candidate with probability
  ``P_i = ∫_0^1 m (1-y)^(m-1) prod_j (1 - exp(-g_j / b) y) dy`` (``m`` top candidates, gaps
  ``g_j`` of the others), so ``X`` is Poisson-binomial; zero noise gives ``X = 0``. Its power
  depends on the scores: when they are far apart relative to ``b``, honest noise also picks the
  top candidate, and nothing can tell zero noise apart; the detail gives the expected count.

* **not tested**: the stop draws of the selection (every one in a released run says "continue"
  by construction), ``opaque_release`` marks (releases through ``opendp.extras.mbi`` whose noise
  is not recorded per draw), and seeds (post-processing; the replay re-uses them).

Every record's scale must also be the one OpenDP calibration gives for its sensitivity and
epsilon (rho for a Gaussian record) (``mechanisms.noise.calibrated_*_scale``): noise tested against a scale the record
made up would prove nothing.

**False alarms.** The three tests run at ``ALPHA / 3`` each (Bonferroni), so an honest
transcript fails with probability at most :data:`ALPHA` = 1e-6 per audit: the PITs are exactly
uniform and independent under honest noise. (The private selection stops at the first attempt
that passes, which conditions each attempt's acceptance-criteria draws, a handful per attempt,
on its pass or fail; their share of the pooled draws is small and the measured rate in the tests
stays within the stated one.)

**What it cannot prove.** Noise drawn from any good generator other than OpenDP's passes; so
does honest-looking noise chosen after the fact for a draw or two (too few to move the pooled
tests). The test catches noise that is absent, too small, too large or too regular in bulk;
with few draws (a small run) its power is low, and the detail states the number of coordinates
tested and the power against noise halved and against zero noise.
"""
from __future__ import annotations

import functools
import hashlib
import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["ALPHA", "PIT_SEED", "NoiseCheck", "check_noise", "NoiseRecordError",
           "laplace_pit", "gaussian_pit", "top_choice_probability"]

ALPHA = 1e-6                     # false-alarm rate of the whole noise check, per audit
TESTS = 3                        # shape (KS), scale (Gamma), report-noisy-max (Poisson-binomial)
ALPHA_EACH = ALPHA / TESTS       # Bonferroni
# The randomized PIT's V: a fixed, public stream (anyone re-computes the same u's).
PIT_SEED = int.from_bytes(hashlib.sha256(b"dpbundle-noise-check/1").digest(), "big")
CONTINUOUS, DISCRETE = "opendp.make_laplace", "opendp.make_laplace/integer"
NOISY_MAX = "opendp.make_noisy_max"
GAUSS, GAUSS_DISCRETE = "opendp.make_gaussian", "opendp.make_gaussian/integer"
DISCRETE_EXACT_UPTO = 1_000.0    # discrete Gaussian: exact CDF table up to this sigma
MAX_POISSON_BINOMIAL = 100_000   # choices for the exact Poisson-binomial tail (normal beyond)
CONTINUOUS_ABOVE = 1_000.0       # discrete scales above this are treated as continuous for power


class NoiseRecordError(ValueError):
    """A record the noise test cannot read (the message says where, never a value)."""


@dataclass
class NoiseCheck:
    """The outcome: ``problems`` (empty when the noise is plausible), ``facts`` and a ``detail``
    sentence. Every number here is about the noise and the run's shape, never a true value."""

    problems: list[str] = field(default_factory=list)
    facts: dict = field(default_factory=dict)
    detail: str = ""

    @property
    def ok(self) -> bool:
        return not self.problems


# ----------------------------------------------------------------------------- the PIT


def laplace_pit(z: np.ndarray, b: float, discrete: bool, v: np.ndarray | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """(u, e) of noise values ``z`` under Laplace(b): ``u`` the (randomized, for ``discrete``)
    PIT, ``e = -log(2 min(u, 1 - u))`` (Exponential(1) under the declared noise), computed
    without cancellation; ``v``: the uniform draws of the randomized PIT (discrete only)."""
    z = np.asarray(z, dtype=np.float64)
    if not discrete:
        x = z / b
        ax = np.abs(x)
        tail = 0.5 * np.exp(-ax)
        u = np.where(x < 0, tail, 1.0 - tail)
        return u, ax
    assert v is not None
    logp = -1.0 / b
    p = math.exp(logp)
    q = -math.expm1(logp)                       # 1 - p
    az = np.abs(z)
    # z != 0: tail = p^|z| s / (1 + p), s = 1 - V q (z > 0) or p + V q (z < 0), both in [p, 1]
    s = np.where(z > 0, 1.0 - v * q, p + v * q)
    log_tail = az * logp + np.log(s) - math.log1p(p)
    # z == 0: u uniform on [p/(1+p), 1/(1+p)]
    u0 = (p + v * q) / (1.0 + p)
    zero = az == 0
    log_tail = np.where(zero, np.log(np.minimum(u0, 1.0 - u0)), log_tail)
    tail = np.exp(log_tail)
    u = np.where(zero, u0, np.where(z > 0, 1.0 - tail, tail))
    e = -math.log(2.0) - log_tail
    return u, np.maximum(e, 0.0)


@functools.lru_cache(maxsize=64)
def _dgauss_table(sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """(P(Z = -k), P(Z < -k)) for k = 0..M of the discrete Gaussian of parameter ``sigma``,
    M = ceil(40 sigma) + 2 (the mass beyond is below e^-800); the weights are normalised over
    -M..M. Both arrays are computed from the left tail, so small tail probabilities keep their
    relative precision."""
    m = int(math.ceil(40.0 * sigma)) + 2
    k = np.arange(m, -1, -1, dtype=np.float64)          # M, M-1, ..., 0 (left tail first)
    w = np.exp(-k * k / (2.0 * sigma * sigma))
    norm = 2.0 * math.fsum(w) - 1.0                       # w[-1] = exp(0) = 1 counted once
    p = w / norm
    below = np.concatenate([[0.0], np.cumsum(p)[:-1]])   # P(Z < -k)
    return p[::-1].copy(), below[::-1].copy()


def gaussian_pit(z: np.ndarray, sigma: float, discrete: bool, v: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(u, e) of noise values ``z`` under the (discrete, for ``discrete``) Gaussian of standard
    deviation parameter ``sigma``, as :func:`laplace_pit`: ``u`` the (randomized) PIT, ``e =
    -log(2 min(u, 1 - u))`` computed from the smaller tail without cancellation."""
    from scipy import special

    z = np.asarray(z, dtype=np.float64)
    if discrete and sigma <= DISCRETE_EXACT_UPTO:
        assert v is not None
        p_k, below_k = _dgauss_table(float(sigma))
        az = np.abs(z)
        inside = az < p_k.size
        k = np.where(inside, az, 0).astype(np.int64)
        pz = np.where(inside, p_k[k], 0.0)
        lower = np.where(inside, below_k[k], 0.0)          # P(Z < -|z|) = P(Z > |z|)
        # z <= 0: u = P(Z < z) + V P(z); z > 0: 1 - u = P(Z > z) + (1 - V) P(z)
        small = np.where(z > 0, lower + (1.0 - v) * pz, lower + v * pz)
        big = 1.0 - small
        tail = np.minimum(small, big)
        u = np.where(z > 0, big, small)
        with np.errstate(divide="ignore"):
            e = -math.log(2.0) - np.log(tail)
        return u, np.maximum(e, 0.0)
    if discrete:
        assert v is not None
        z = z + v - 0.5
    x = z / sigma if sigma > 0 else np.where(z == 0, 0.0, np.sign(z) * np.inf)
    log_tail = special.log_ndtr(-np.abs(x))
    tail = np.exp(log_tail)
    u = np.where(x < 0, tail, 1.0 - tail)
    return u, np.maximum(-math.log(2.0) - log_tail, 0.0)


def top_choice_probability(scores: np.ndarray, b: float) -> tuple[float, np.ndarray]:
    """(P, top) for report-noisy-max with Exponential(b) noise: the probability that a
    top-scoring candidate is chosen, and the boolean mask of the top candidates."""
    from scipy import integrate

    s = np.asarray(scores, dtype=np.float64)
    best = float(s.max())
    top = s == best
    m = int(top.sum())
    gaps = best - s[~top]
    a = np.exp(-gaps / b) if b > 0 else np.zeros_like(gaps)
    a = a[a > 1e-300]
    if a.size == 0:
        return 1.0, top

    def f(y: float) -> float:
        return m * (1.0 - y) ** (m - 1) * float(np.exp(np.sum(np.log1p(-a * y))))

    # the integrand falls off at y ~ 1 / (m + sum a): split the range there
    knee = min(1.0, 1.0 / (m + float(a.sum())))
    pts = sorted({min(1.0, knee * k) for k in (1, 4, 16, 64)})
    total, lo = 0.0, 0.0
    for hi in [*pts, 1.0]:
        if hi > lo:
            val, _err = integrate.quad(f, lo, hi, limit=200, epsabs=1e-13, epsrel=1e-10)
            total += val
            lo = hi
    return min(1.0, max(0.0, total)), top


# ----------------------------------------------------------------------------- the check


def _where(i: int, rec: dict) -> str:
    purpose = rec.get("purpose")
    what = f" ({purpose!r})" if isinstance(purpose, str) and len(purpose) <= 120 else ""
    return f"transcript record {i}{what}"


def _numbers(x, integer: bool, where: str, name: str, what: str = "discrete Laplace") -> np.ndarray:
    vals = x if isinstance(x, list) else [x]
    if not vals or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
        raise NoiseRecordError(f"{where}: field {name!r} is not a number or a list of numbers")
    if integer and not all(isinstance(v, int) for v in vals):
        raise NoiseRecordError(f"{where}: field {name!r} of a {what} record is not integers")
    arr = np.asarray(vals, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise NoiseRecordError(f"{where}: field {name!r} has a non-finite number")
    return arr


def _declared_scale(rec: dict, where: str, kind: str) -> float:
    """The record's scale, after checking it is OpenDP's calibration for its sensitivity and
    epsilon (NoiseRecordError otherwise)."""
    from dpbundle.mechanisms.noise import (calibrated_exponential_scale, calibrated_gaussian_scale,
                                           calibrated_laplace_scale)

    budget = "rho" if kind in (GAUSS, GAUSS_DISCRETE) else "epsilon"
    b, s, e = rec.get("scale"), rec.get("sensitivity"), rec.get(budget)
    for name, v in (("scale", b), ("sensitivity", s), (budget, e)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise NoiseRecordError(f"{where}: field {name!r} is not a finite number")
    try:
        if kind == NOISY_MAX:
            want = calibrated_exponential_scale(s, e)
        elif budget == "rho":
            want = calibrated_gaussian_scale(s, e, integer=kind == GAUSS_DISCRETE)
        else:
            want = calibrated_laplace_scale(s, e, vector=isinstance(rec.get("true"), list),
                                            integer=kind == DISCRETE)
    except (ValueError, RuntimeError):
        raise NoiseRecordError(f"{where}: its sensitivity and {budget} have no OpenDP calibration") from None
    if b != want:
        raise NoiseRecordError(f"{where}: the recorded noise scale is not OpenDP's calibration for "
                               f"the record's sensitivity and {budget}")
    if not b > 0:
        raise NoiseRecordError(f"{where}: the noise scale is not positive")
    return float(b)


def _noise(rec: dict, integer: bool, where: str) -> np.ndarray:
    """``noisy - true`` of an additive-noise record (NoiseRecordError if malformed)."""
    what = "discrete Gaussian" if rec.get("kind") == "gaussian" else "discrete Laplace"
    true = _numbers(rec.get("true"), integer, where, "true", what)
    noisy = _numbers(rec.get("noisy"), integer, where, "noisy", what)
    if isinstance(rec.get("true"), list) != isinstance(rec.get("noisy"), list) \
            or true.shape != noisy.shape:
        raise NoiseRecordError(f"{where}: 'true' and 'noisy' have different shapes")
    return noisy - true


@dataclass
class _Pooled:
    u: list = field(default_factory=list)
    e: list = field(default_factory=list)
    groups: dict = field(default_factory=dict)     # (discrete, scale) -> coordinates
    records: int = 0
    gauss_groups: dict = field(default_factory=dict)  # Gaussian: (discrete, sigma) -> coordinates
    gauss_records: int = 0
    noisy_max: list = field(default_factory=list)  # P(top) per report-noisy-max draw
    not_top: int = 0
    opaque: int = 0
    stop_draws: int = 0


#: record kind -> (its mechanisms, the discrete one, its PIT, the _Pooled groups and counter
#: attributes, its name in messages)
_FAMILIES = {"laplace": ((CONTINUOUS, DISCRETE), DISCRETE, laplace_pit, "groups", "records", "Laplace"),
             "gaussian": ((GAUSS, GAUSS_DISCRETE), GAUSS_DISCRETE, gaussian_pit, "gauss_groups",
                          "gauss_records", "Gaussian")}


def _pool(records: list[dict]) -> _Pooled:
    out = _Pooled()
    rng = np.random.Generator(np.random.PCG64(PIT_SEED))
    for i, rec in enumerate(records):
        kind = rec.get("kind")
        if kind == "mark":
            out.opaque += rec.get("mark") == "opaque_release"
            out.stop_draws += rec.get("mark") == "stop draw"
            continue
        if kind not in ("laplace", "exponential", "gaussian"):
            continue
        where = _where(i, rec)
        mech = rec.get("mechanism")
        if kind in _FAMILIES:
            mechs, discrete_mech, pit, groups, counter, name = _FAMILIES[kind]
            if mech not in mechs:
                raise NoiseRecordError(f"{where}: unknown {name} mechanism")
            discrete = mech == discrete_mech
            scale = _declared_scale(rec, where, mech)
            z = _noise(rec, discrete, where)
            v = rng.random(z.size) if discrete else None
            u, e = pit(z, scale, discrete, v)
            out.u.append(u)
            out.e.append(e)
            table = getattr(out, groups)
            table[(discrete, scale)] = table.get((discrete, scale), 0) + z.size
            setattr(out, counter, getattr(out, counter) + 1)
        else:
            if mech != NOISY_MAX:
                raise NoiseRecordError(f"{where}: unknown report-noisy-max mechanism")
            b = _declared_scale(rec, where, NOISY_MAX)
            scores = _numbers(rec.get("true"), False, where, "true")
            choice = rec.get("noisy")
            if not isinstance(choice, int) or isinstance(choice, bool) or not 0 <= choice < scores.size:
                raise NoiseRecordError(f"{where}: the recorded choice is not an index of the candidates")
            p_top, top = top_choice_probability(scores, b)
            out.noisy_max.append(p_top)
            out.not_top += int(not top[choice])
    return out


def _ks_p(u: np.ndarray) -> tuple[float, float]:
    from scipy import stats

    res = stats.kstest(u, "uniform")
    return float(res.statistic), float(res.pvalue)


def _gamma_p(total: float, n: int) -> tuple[float, float]:
    """(P(G <= total), P(G >= total)) for G ~ Gamma(n, 1)."""
    from scipy import special

    if not math.isfinite(total):
        return 1.0, 0.0
    return float(special.gammainc(n, total)), float(special.gammaincc(n, total))


def _poisson_binomial_p(probs: np.ndarray, x: int) -> tuple[float, float]:
    """(P(X <= x), P(X >= x)) for X = sum of independent Bernoulli(probs)."""
    n = probs.size
    if n == 0:
        return 1.0, 1.0
    if n > MAX_POISSON_BINOMIAL:   # normal approximation with continuity correction
        from scipy import stats

        mu, var = float(probs.sum()), float((probs * (1 - probs)).sum())
        if var == 0:
            return (1.0 if x >= mu else 0.0), (1.0 if x <= mu else 0.0)
        sd = math.sqrt(var)
        return float(stats.norm.cdf((x + 0.5 - mu) / sd)), float(stats.norm.sf((x - 0.5 - mu) / sd))
    dist = np.zeros(n + 1)
    dist[0] = 1.0
    for k, p in enumerate(probs, start=1):
        dist[1:k + 1] = dist[1:k + 1] * (1 - p) + dist[0:k] * p
        dist[0] *= 1 - p
    return float(min(1.0, dist[:x + 1].sum())), float(min(1.0, dist[x:].sum()))


# -- power -------------------------------------------------------------------------------


def _dlap_e_moments(b: float, c: float) -> tuple[float, float]:
    """(E e, E e^2) of the scale statistic's e for discrete Laplace noise of scale ``c b``
    (c = 0: no noise) tested against scale ``b``."""
    logp = -1.0 / b
    p = math.exp(logp)
    q = -math.expm1(logp)
    # s ~ U[p, 1]: L = -log s
    m1 = (1 + p * logp - p) / q
    m2 = (2 - p * logp * logp + 2 * p * logp - 2 * p) / q
    a0 = 2 * p / (1 + p)                       # z = 0: e = -log w, w ~ U[a0, 1]
    la0 = math.log(a0)
    z1 = (1 - a0 + a0 * la0) / (1 - a0)
    z2 = (2 - a0 * la0 * la0 + 2 * a0 * la0 - 2 * a0) / (1 - a0)
    if c == 0:
        return z1, z2
    pa = math.exp(-1.0 / (c * b))              # the alternative's p
    kmax = int(math.ceil(60 * c * b)) + 2
    k = np.arange(1, kmax + 1, dtype=np.float64)
    w = 2 * (1 - pa) / (1 + pa) * pa ** k      # P(|Z| = k), k >= 1
    w0 = (1 - pa) / (1 + pa)
    base = -math.log(2.0) - k * logp + math.log1p(p)   # e = base + L for |z| = k
    e1 = w0 * z1 + float(np.sum(w * (base + m1)))
    e2 = w0 * z2 + float(np.sum(w * (base * base + 2 * base * m1 + m2)))
    return e1, e2


@functools.lru_cache(maxsize=256)
def _gauss_e_moments(sigma: float, discrete: bool, c: float) -> tuple[float, float]:
    """(E e, E e^2) of the scale statistic's e for Gaussian noise of standard deviation
    ``c sigma`` (c = 0: no noise) tested against ``sigma``. For c > 0 the noise is taken as
    continuous (Gauss-Hermite quadrature over ``z = c sigma N``; the discrete Gaussian is close
    to it for the power estimate); for c = 0 a discrete record's e is ``-log w``, ``w``
    uniform on ``[2 P(Z < 0), 1]`` (z = 0, randomized PIT), a continuous record's is 0."""
    from scipy import special

    if c == 0:
        if not discrete or sigma > DISCRETE_EXACT_UPTO:
            return 0.0, 0.0   # (smoothed discrete: e = -log(2 ndtr(-|V - 1/2| / sigma)) ~ 0)
        _, below = _dgauss_table(float(sigma))
        a0 = 2.0 * float(below[0])
        la0 = math.log(a0)
        return ((1 - a0 + a0 * la0) / (1 - a0),
                (2 - a0 * la0 * la0 + 2 * a0 * la0 - 2 * a0) / (1 - a0))
    x, w = np.polynomial.hermite_e.hermegauss(80)        # weight exp(-x^2 / 2)
    w = w / w.sum()
    e = np.maximum(-math.log(2.0) - special.log_ndtr(-np.abs(c * x)), 0.0)
    return float(np.sum(w * e)), float(np.sum(w * e * e))


def _scale_power(groups: dict, n: int, c: float, gauss_groups: dict | None = None) -> float:
    """Power of the scale test (its lower tail, normal approximation of S) against noise
    scaled by ``c`` (0: no noise) on coordinates grouped by (discrete, scale) (Laplace) and
    ``gauss_groups`` by (discrete, sigma) (Gaussian)."""
    from scipy import special, stats

    if n == 0:
        return 0.0
    q_lo = float(special.gammaincinv(n, ALPHA_EACH / 2))
    mean = var = 0.0
    for (discrete, sigma), k in (gauss_groups or {}).items():
        e1, e2 = _gauss_e_moments(float(sigma), bool(discrete), float(c))
        mean += k * e1
        var += k * (e2 - e1 * e1)
    for (discrete, b), k in groups.items():
        if discrete and b <= CONTINUOUS_ABOVE:
            e1, e2 = _dlap_e_moments(b, c)
        else:
            e1, e2 = c, 2 * c * c          # c |Lap(1)|: mean c, E[e^2] = 2 c^2
        mean += k * e1
        var += k * (e2 - e1 * e1)
    if var <= 0:
        return 1.0 if mean < q_lo else 0.0
    return float(stats.norm.cdf((q_lo - mean) / math.sqrt(var)))


def check_noise(records: list[dict]) -> NoiseCheck:
    """Test the noise of every Laplace and report-noisy-max record of a whole transcript."""
    out = NoiseCheck()
    try:
        pooled = _pool(records)
    except NoiseRecordError as e:
        out.problems.append(f"the recorded noise cannot be tested: {e}")
        return out
    u = np.concatenate(pooled.u) if pooled.u else np.zeros(0)
    e = np.concatenate(pooled.e) if pooled.e else np.zeros(0)
    n = int(u.size)
    n_gauss = sum(pooled.gauss_groups.values())
    facts: dict = {"alpha": ALPHA, "laplace_records": pooled.records, "laplace_coordinates": n - n_gauss,
                   "discrete_coordinates": sum(k for (d, _), k in pooled.groups.items() if d),
                   "noisy_max_draws": len(pooled.noisy_max),
                   "opaque_releases_not_tested": pooled.opaque,
                   "stop_draws_not_tested": pooled.stop_draws}
    if pooled.gauss_records:
        facts.update(gaussian_records=pooled.gauss_records, gaussian_coordinates=n_gauss,
                     discrete_gaussian_coordinates=sum(k for (d, _), k in pooled.gauss_groups.items() if d))
    noun = ("Laplace" if not pooled.gauss_records else
            "Gaussian" if n == n_gauss else "Laplace and Gaussian")
    level = f"below the false-alarm level {ALPHA_EACH:.2g} of this test"
    if n:
        d, p_ks = _ks_p(u)
        total = float(np.sum(e))
        lo, hi = _gamma_p(total, n)
        p_scale = min(1.0, 2 * min(lo, hi))
        facts.update(ks_statistic=d, ks_p=p_ks, scale_ratio=total / n, scale_p=p_scale,
                     power_noise_halved=_scale_power(pooled.groups, n, 0.5, pooled.gauss_groups),
                     power_no_noise=_scale_power(pooled.groups, n, 0.0, pooled.gauss_groups))
        if p_ks < ALPHA_EACH:
            out.problems.append(
                f"the {noun} noise of the transcript does not have the declared distribution: its "
                f"probability-integral transforms are not uniform (Kolmogorov-Smirnov D = {d:.3g} "
                f"over {n:,} coordinates, p = {p_ks:.2g}, {level})")
        if p_scale < ALPHA_EACH:
            how = "smaller" if lo < hi else "larger"
            out.problems.append(
                f"the {noun} noise of the transcript is {how} than its declared scales (mean of "
                f"|noise| / scale-equivalent {total / n:.3g}, 1 expected, over {n:,} coordinates, "
                f"p = {p_scale:.2g}, {level})" + (": no noise at all" if total == 0 else ""))
    if pooled.noisy_max:
        probs = 1.0 - np.asarray(pooled.noisy_max)
        lo, hi = _poisson_binomial_p(probs, pooled.not_top)
        p_max = min(1.0, 2 * min(lo, hi))
        expected = float(probs.sum())
        facts.update(noisy_max_not_top=pooled.not_top, noisy_max_not_top_expected=expected,
                     noisy_max_p=p_max)
        if p_max < ALPHA_EACH:
            out.problems.append(
                f"the report-noisy-max choices are implausible under their declared noise: "
                f"{pooled.not_top:,} of {len(probs):,} choices were not a top-scoring candidate, "
                f"{expected:.3g} expected (p = {p_max:.2g}, {level})")
    out.facts = facts
    parts = [f"{n - n_gauss:,} Laplace coordinates in {pooled.records:,} records"]
    if pooled.gauss_records:
        parts.append(f"{n_gauss:,} Gaussian coordinates in {pooled.gauss_records:,} records")
    if n:
        parts.append(f"KS p = {facts['ks_p']:.2g}, scale p = {facts['scale_p']:.2g} (mean |noise|/scale "
                     f"{facts['scale_ratio']:.3f}); power against noise halved "
                     f"{facts['power_noise_halved']:.3g}, against no noise {facts['power_no_noise']:.3g}")
    if pooled.noisy_max:
        parts.append(f"{len(pooled.noisy_max):,} report-noisy-max choices, {pooled.not_top:,} not a top "
                     f"score ({facts['noisy_max_not_top_expected']:.3g} expected), p = "
                     f"{facts['noisy_max_p']:.2g}")
    if pooled.opaque:
        parts.append(f"{pooled.opaque} opaque release(s) not tested")
    out.detail = (f"noise test over every draw of the run (false-alarm rate {ALPHA:g} per audit): "
                  + "; ".join(parts))
    if n == 0 and not pooled.noisy_max:
        out.detail = "noise test: the transcript has no Laplace or report-noisy-max draw to test"
    return out
