"""Exactly bounded floats for the criteria's DP releases.

The noise layer checks a Laplace map at ``nextafter(s)``, one ulp above the declared sensitivity
``s`` (:func:`dpbundle.mechanisms.noise.map_distance`). That slack covers the rounding of the
*formula* of ``s``; it does not cover the rounding of the *statistic*. Example: with n = 5 the
shares 3/5 and 4/5 differ by exactly 1/n, but fl(4/5) - fl(3/5) exceeds 1/5 by 6.7e-17 and
``nextafter(fl(1/5))`` by 2.8e-17 (8,871 of the 19,899 pairs M/n, (M + 1)/n with n < 200
overshoot so; tests/test_sensitivity_exact.py). A float statistic x^ = fl(x) can move by
|x - x'| + ulp(x) between neighbours, and ulp(x) is far above ulp(s) when x >> s.

Two tools make the released floats move by at most the declared sensitivity, exactly:

* :func:`lipschitz_float` for a scalar statistic computed exactly as a rational x (integer counts
  over a public n, sums of dyadic numbers): it returns y = F g with g a power of two and
  F = floor(theta x / g) an integer below 2^52, theta = (sigma - g) / delta, where delta is the
  exact sensitivity of x and sigma = min(declared float, delta). For neighbours,
  |x - x'| <= delta gives

      |y - y'| = g |F - F'| < g (theta |x - x'| / g + 1) <= theta delta + g = sigma <= declared,

  and y is an exact float. y <= x, and x - y < x g / delta + g: a relative deflation of at most
  x_max 2^-52 / delta (n 2^-52 for a share with sensitivity 1/n: 4e-11 at n = 160,000).
* :func:`on_grid` for the vectors of the regression and classification fits: the scaled
  features and target, all in [-1, 1], are rounded to multiples of 2^-k with
  2k + bitlen(n) <= 53; then every product of two of them times a record count, and every
  partial sum of such products over records whose counts add up to at most n (in any order,
  as BLAS may sum), is a multiple of 2^-2k below n <= 2^(53 - 2k) in magnitude: an exact
  float. (A factor 1/2, 1/4 or 1/8 -- the logistic loss's -- keeps this: the number of grid
  steps stays below 2^53 and scaling by a power of two is exact.) The noised vector is then computed
  exactly, and its L1 sensitivity (a property of records in [-1, 1]^d, which the rounding
  keeps) holds with no rounding term.

:func:`dyadic_units` writes bounded numbers (the released numbers of a target, predictions) as
integers on one dyadic grid, so that sums of up to n of them are exact in int64.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

__all__ = ["lipschitz_float", "grid_bits", "on_grid", "dyadic_units", "exact", "float_grid_of"]


def exact(x) -> Fraction:
    """The exact rational value of an int, float or Fraction (floats are dyadic rationals)."""
    if isinstance(x, Fraction):
        return x
    if isinstance(x, (int, np.integer)):
        return Fraction(int(x))
    f = float(x)
    if not math.isfinite(f):
        raise ValueError(f"not a finite number: {x!r}")
    return Fraction(f)


def _floor_log2(q: Fraction) -> int:
    """floor(log2(q)) for q > 0, exactly."""
    e = q.numerator.bit_length() - q.denominator.bit_length()
    # 2^(e-1) < q < 2^(e+1); settle which side of 2^e
    if q >= Fraction(2) ** e:
        return e
    return e - 1


def float_grid_of(x_max) -> int:
    """The exponent e of the grid g = 2^e of :func:`lipschitz_float`: the smallest e with
    x_max < 2^(e + 52), so that every |F| <= x_max / g is below 2^52."""
    q = exact(x_max)
    if q <= 0:
        raise ValueError(f"x_max must be > 0, got {x_max!r}")
    return _floor_log2(q) - 51


def lipschitz_float(x, delta, declared: float, x_max) -> float:
    """A float y close below the exact statistic ``x`` (>= 0 or signed, |x| <= ``x_max``) such
    that |y(D) - y(D')| < min(``declared``, ``delta``) whenever |x(D) - x(D')| <= ``delta``.

    ``delta`` is the exact sensitivity of x (a rational: a formula's value, not its float);
    ``declared`` the float sensitivity handed to the noise layer; ``delta``, ``declared`` and
    ``x_max`` must be public (the same for neighbours). Derivation in the module docstring.
    Raises ValueError when x is outside [-x_max, x_max] or when the numbers leave no room
    (sigma <= g: a sensitivity below 2^-52 x_max)."""
    xq, dq, mq = exact(x), exact(delta), exact(x_max)
    if dq <= 0:
        raise ValueError(f"delta must be > 0, got {delta!r}")
    if abs(xq) > mq:
        raise ValueError("the statistic lies outside [-x_max, x_max]")
    sigma = min(exact(declared), dq)
    e = float_grid_of(mq)
    g = Fraction(2) ** e
    if sigma <= g:
        raise ValueError(f"sensitivity {float(sigma)!r} too small for values up to {float(mq)!r}")
    theta = (sigma - g) / dq
    F = math.floor(theta * xq / g)
    assert abs(F) < 2 ** 52
    return math.ldexp(float(F), e)


def grid_bits(n: int) -> int:
    """k of :func:`on_grid`: the largest k with 2k + bitlen(n) <= 53 (n = the public number of
    records; n < 2^bitlen(n), so n 2^2k < 2^53); at least 1."""
    n = int(n)
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    k = (53 - n.bit_length()) // 2
    if k < 1:
        raise ValueError(f"too many records for exact sums: {n}")
    return k


def on_grid(x: np.ndarray, n: int) -> np.ndarray:
    """``x`` (entries in [-1, 1]) rounded to the nearest multiple of 2^-k, k = grid_bits(n):
    still in [-1, 1] (+-1 are grid points and rounding is monotone); see the module docstring
    for why sums of products of such numbers over n records are exact."""
    k = grid_bits(n)
    a = np.asarray(x, dtype=np.float64)
    if a.size and not (np.all(np.isfinite(a)) and float(np.abs(a).max()) <= 1.0):
        raise ValueError("on_grid: entries must lie in [-1, 1]")
    return np.ldexp(np.rint(np.ldexp(a, k)), -k)


def dyadic_units(values: np.ndarray, lo: float, hi: float, total: int) -> tuple[np.ndarray, int]:
    """(Y, e): the numbers ``values`` (floats in [lo, hi]) as int64 integers Y = values 2^e.

    e is the smallest exponent >= 0 that makes every value an integer, capped so that a sum of
    up to ``total`` of them (or of differences of two of them) stays below 2^62 in magnitude:
    2 total max(|lo|, |hi|, 1) 2^e < 2^62. A value with more fractional bits than the cap
    allows is rounded to the nearest multiple of 2^-e inside [lo, hi] (a change below 2^-e;
    ``lo`` and ``hi`` themselves are rounded inwards). ``lo``, ``hi`` and ``total`` must be
    public, and so are the values wherever this is used (a code's released number, a prediction
    of a public model)."""
    v = np.asarray(values, dtype=np.float64)
    lo_q, hi_q = exact(lo), exact(hi)
    if not lo_q <= hi_q:
        raise ValueError(f"need lo <= hi, got {lo!r}, {hi!r}")
    if v.size and not (np.all(np.isfinite(v)) and v.min() >= float(lo) and v.max() <= float(hi)):
        raise ValueError("dyadic_units: values must lie in [lo, hi]")
    big = max(abs(lo_q), abs(hi_q), Fraction(1))
    cap = 0
    while 2 * int(total) * big * 2 ** (cap + 1) < 2 ** 62:
        cap += 1
    if not 2 * int(total) * big * 2 ** cap < 2 ** 62:
        raise ValueError(f"dyadic_units: {total} values up to {float(big)!r} do not fit int64 sums")
    need = 0
    for f in np.unique(v):
        den = float(f).as_integer_ratio()[1]
        need = max(need, den.bit_length() - 1)
        if need >= cap:
            need = cap
            break
    e = min(need, cap)
    scaled = np.ldexp(v, e)
    Y = np.rint(scaled)
    lo_i = math.ceil(lo_q * 2 ** e)
    hi_i = math.floor(hi_q * 2 ** e)
    if lo_i > hi_i:
        raise ValueError("dyadic_units: no grid point inside [lo, hi]")
    Y = np.clip(Y, lo_i, hi_i)
    return Y.astype(np.int64), e
