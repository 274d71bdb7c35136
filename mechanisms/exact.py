"""Exact budget arithmetic: epsilons as rationals, floats only at the OpenDP boundary.

An epsilon written in a spec is a decimal ("0.8"); its float fl(0.8) is a little larger, and
5 x fl(0.8) = 4 + 2.2e-16 in floating point. Every budget sum and comparison therefore works
on :class:`fractions.Fraction`:

* :func:`dec` reads a declared epsilon as the decimal the user wrote (``repr`` of a float is
  the shortest decimal that rounds to it: fl(0.8) -> 4/5);
* :func:`binary` is the exact value of a float that is handed to OpenDP (what it really spends);
* :func:`total` sums declared epsilons exactly; :func:`float_down` / :func:`float_up` give the
  nearest float below / above a rational, so a share passed to OpenDP never exceeds its
  declared part (``binary(float_down(q)) <= q``) and a noise scale is never below its
  requirement (``binary(float_up(q)) >= q``).
"""
from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction
from typing import Iterable, Union

Number = Union[int, float, str, Decimal, Fraction]

__all__ = ["dec", "binary", "total", "float_down", "float_up", "even_split", "at_most", "show",
           "spendable", "split_float"]


def dec(x: Number) -> Fraction:
    """The declared (decimal) value of an epsilon: 0.8 -> 4/5 exactly."""
    if isinstance(x, bool):
        raise TypeError("an epsilon cannot be a boolean")
    if isinstance(x, Fraction):
        return x
    if isinstance(x, float):
        if not math.isfinite(x):
            raise ValueError(f"an epsilon must be finite, got {x!r}")
        return Fraction(repr(x))
    return Fraction(str(x)) if isinstance(x, (str, Decimal)) else Fraction(x)


def binary(x: float | int) -> Fraction:
    """The exact value of a float (fl(0.8) = 3602879701896397 / 2**52)."""
    return Fraction(x)


def total(xs: Iterable[Number]) -> Fraction:
    """Exact sum of declared epsilons."""
    return sum((dec(x) for x in xs), Fraction(0))


def float_down(q: Fraction) -> float:
    """The largest float f with binary(f) <= q."""
    f = float(q)
    while Fraction(f) > q:
        f = math.nextafter(f, -math.inf)
    return f


def float_up(q: Fraction) -> float:
    """The smallest float f with binary(f) >= q."""
    f = float(q)
    while Fraction(f) < q:
        f = math.nextafter(f, math.inf)
    return f


def even_split(epsilon: Number, k: int) -> float:
    """The float share of one of k equal parts: binary(share) * k <= dec(epsilon), exactly."""
    if k < 1:
        raise ValueError(f"cannot split an epsilon into {k} parts")
    return float_down(dec(epsilon) / k)


def at_most(spent: Iterable[Number], cap: Number) -> bool:
    """sum(spent) <= cap, exactly (declared decimals)."""
    return total(spent) <= dec(cap)


def show(q: Fraction) -> str:
    """A rational budget for people: a short decimal when exact, else 12 significant digits."""
    d = Decimal(q.numerator) / Decimal(q.denominator)
    if Fraction(d) == q:
        return format(d.normalize(), "f")
    return f"{float(q):.12g}"


def spendable(e: float) -> Fraction:
    """The most a mechanism handed the float ``e`` may spend: ``min(binary(e), dec(e))``.

    Both readings of a float epsilon are honoured: a declared decimal (fl(0.8) -> 4/5, below
    its binary value 0.8000000000000000444...) and a computed share such as
    ``float_down(q)`` (whose binary value is what the budget accounting adds up, and which
    may print as a decimal slightly above it). A privacy map <= ``spendable(e)`` is <= both.
    """
    if isinstance(e, bool) or not isinstance(e, (int, float)):
        raise TypeError(f"an epsilon handed to OpenDP must be a float, got {e!r}")
    return min(binary(e), dec(e))


def split_float(x: float, k: int) -> float:
    """One of ``k`` equal shares of a float part ``x`` (a share computed earlier, not a declared
    decimal): ``k * binary(share) <= binary(x)`` exactly."""
    if k < 1:
        raise ValueError(f"cannot split an epsilon into {k} parts")
    return float_down(binary(x) / k)
