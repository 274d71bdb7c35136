"""Exact budget arithmetic of the mechanisms (issue 11, item 5): every float share handed to
OpenDP adds up, as a rational, to at most the declared (decimal) epsilon it comes from.

The rationals here are computed with :mod:`fractions` directly (``Fraction(repr(x))`` for the
decimal a spec wrote, ``Fraction(x)`` for a float's exact value), not with mechanisms/exact.py,
so that the tests check its functions rather than restate them.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dpbundle.mechanisms import exact
from dpbundle.mechanisms.generators import declared_share, even_split, make_generator
from dpbundle.mechanisms.mbi import AIM, MST
from dpbundle.mechanisms.noise import Randomness
from dpbundle.mechanisms.privbayes import PrivBayes


def D(x: float) -> Fraction:
    """The decimal a spec wrote (repr is the shortest decimal that rounds to the float)."""
    return Fraction(repr(x))


B = Fraction   # the exact value of a float


#: epsilons as a spec writes them: decimals with up to 4 places, then read as floats
decimal_eps = st.decimals(min_value="0.0001", max_value="50", places=4).map(lambda d: float(str(d)))
AWKWARD = [0.1, 0.3, 1 / 3, 0.8, 1e-3, 9.98, 0.7, 4.0, 0.43, 0.17]


# --------------------------------------------------------------------------- the 0.8 x 5 case


def test_five_times_point_eight_is_above_four():
    """Why fsum is not enough: fl(0.8) is 0.8000000000000000444, 5 x fl(0.8) = 4 + 2.2e-16
    exactly, and fsum rounds that back to 4.0."""
    assert B(0.8) > Fraction(4, 5)
    assert 5 * B(0.8) - 4 == Fraction(1, 2**52)
    assert math.fsum([0.8] * 5) == 4.0          # the old check passed it
    assert 4.0 / 5 == 0.8                       # and the old split returned fl(0.8)


def test_four_split_five_ways():
    e = even_split(4.0, 5)
    assert e == 0.7999999999999999 == math.nextafter(0.8, 0.0)
    assert 5 * B(e) <= 4
    assert 5 * B(math.nextafter(e, math.inf)) > 4    # the largest such float


def test_point_eight_as_one_part_and_split():
    """A declared 0.8 handed to OpenDP whole is 0.7999999999999999 (<= 4/5); split in two or
    in five, the shares stay within 4/5 as well."""
    assert declared_share(0.8) == math.nextafter(0.8, 0.0) and B(declared_share(0.8)) <= Fraction(4, 5)
    assert 2 * B(even_split(0.8, 2)) <= Fraction(4, 5)
    assert 5 * B(even_split(0.8, 5)) <= Fraction(4, 5)
    assert declared_share(4.0) == 4.0 and declared_share(0.5) == 0.5   # exact decimals stay


@settings(max_examples=400, deadline=None)
@given(decimal_eps, st.integers(1, 200))
@example(4.0, 5)
@example(0.8, 1)
@example(0.3, 3)
@example(9.98, 7)
def test_even_split_is_exact_and_maximal(eps, k):
    e = even_split(eps, k)
    assert k * B(e) <= D(eps)
    assert k * B(math.nextafter(e, math.inf)) > D(eps)


@pytest.mark.parametrize("bad", [0, -1])
def test_even_split_refuses_no_parts(bad):
    with pytest.raises(ValueError):
        even_split(1.0, bad)


def test_spendable_and_split_float():
    assert exact.spendable(0.8) == Fraction(4, 5) < B(0.8)       # the decimal is smaller
    f = exact.float_down(Fraction(2, 5))                         # a computed share, 0.39999999999999997
    assert exact.spendable(f) == B(f) < D(f)                     # its binary value is smaller
    for x in (0.1, 1 / 3, 0.7999999999999999, 3.6, 1e-3):
        for k in (1, 2, 3, 5, 7, 10, 99):
            s = exact.split_float(x, k)
            assert k * B(s) <= B(x) < k * B(math.nextafter(s, math.inf))
    with pytest.raises(TypeError):
        exact.spendable(True)


# --------------------------------------------------------------------------- PrivBayes


def _old_privbayes_split(eps: float, split: float) -> tuple[float, float]:
    """The float arithmetic this replaced (for the regression check below)."""
    e1 = split * eps
    while e1 + (eps - e1) > eps:
        e1 = float(np.nextafter(e1, 0.0))
    e2 = eps - e1
    while e1 + e2 > eps:
        e2 = float(np.nextafter(e2, 0.0))
    return e1, e2


def test_old_privbayes_split_exceeded_the_budget():
    """4.0 split 0.1 (a births grid point): the old eps_1 + eps_2 was 4 + 2^-53 exactly."""
    e1, e2 = _old_privbayes_split(4.0, 0.1)
    assert B(e1) + B(e2) == 4 + Fraction(1, 2**53)
    pb = PrivBayes(4.0, epsilon_split=0.1, theta=4)
    assert B(pb.epsilon_1) + B(pb.epsilon_2) <= 4
    assert B(pb.epsilon_1) <= Fraction(2, 5) < B(0.4)


@settings(max_examples=300, deadline=None)
@given(decimal_eps, st.decimals(min_value="0.01", max_value="0.99", places=2).map(lambda d: float(str(d))))
@example(4.0, 0.1)
@example(0.8, 0.5)
@example(0.8, 0.25)
@example(9.98, 0.3)
def test_privbayes_parts_are_exact(eps, split):
    pb = PrivBayes(eps, epsilon_split=split, degree=2)
    e1, e2 = pb.epsilon_1, pb.epsilon_2
    assert B(e1) + B(e2) <= D(eps)
    assert B(e1) <= D(split) * D(eps) < B(math.nextafter(e1, math.inf))
    # nothing is wasted beyond one ulp of each part
    assert D(eps) - (B(e1) + B(e2)) <= B(math.nextafter(e2, math.inf)) - B(e2)
    parts = pb.budget_parts()
    assert [p["epsilon"] for p in parts] == [e1, e2]


@pytest.mark.parametrize("eps,split", [(4.0, 0.1), (0.8, 0.5), (0.8, 0.25), (9.98, 0.3),
                                       (1.0, 1 / 3), (0.3, 0.1), (1e-3, 0.75)])
def test_privbayes_fit_spends_within_its_parts(eps, split):
    """The transcript's epsilons (the floats handed to OpenDP): the d - 1 structure steps sum
    exactly to <= eps_1, the d tables to <= eps_2, all of them to <= the declared eps."""
    g = np.random.default_rng(3)
    codes = g.integers(0, 3, size=(200, 5)).astype(np.int64)
    pb = PrivBayes(eps, epsilon_split=split, degree=2)
    rand = Randomness()
    pb.fit(codes, (3, 3, 3, 3, 3), rand)
    steps = [B(r["epsilon"]) for r in rand.transcript.records if r["kind"] == "exponential"]
    tables = [B(r["epsilon"]) for r in rand.transcript.records if r["kind"] == "laplace"]
    assert len(steps) == 4 and len(tables) == 5
    assert sum(steps) <= B(pb.epsilon_1) and sum(tables) <= B(pb.epsilon_2)
    assert sum(steps) + sum(tables) <= D(eps)


# --------------------------------------------------------------------------- other generators


@pytest.mark.parametrize("eps", AWKWARD)
@pytest.mark.parametrize("gtype,kw", [("crosstab", {}), ("marginals", {}),
                                      ("marginals", {"marginals": [(0, 1), (1, 2), (0, 2)]}),
                                      ("privbayes", {"epsilon_split": 0.3, "degree": 1})])
def test_generator_parts_and_draws_are_within_the_declared_epsilon(gtype, kw, eps):
    g = make_generator(gtype, eps, **kw)
    parts = [B(p["epsilon"]) for p in g.budget_parts()]
    assert sum(parts) <= D(eps)
    assert float(sum(parts)) == pytest.approx(eps, rel=1e-12)
    rand = Randomness()
    codes = np.random.default_rng(0).integers(0, 2, size=(50, 3)).astype(np.int64)
    g.fit(codes, (2, 2, 2), rand)
    spent = [B(r["epsilon"]) for r in rand.transcript.records if "epsilon" in r]
    assert spent and sum(spent) <= D(eps)


@pytest.mark.parametrize("cls", [AIM, MST])
@pytest.mark.parametrize("eps", AWKWARD)
def test_mbi_parts_are_exact(cls, eps):
    parts = [B(p["epsilon"]) for p in cls(eps).budget_parts()]
    assert len(parts) == 2 and sum(parts) <= D(eps)
    assert parts[0] <= D(eps) / 2
