"""How numbers are printed: metrics.csv (machine-readable, ``format_number``) and the datasheet
(for people: :func:`plain`, :func:`noisy`, :func:`with_unit`).

The datasheet's rule (:data:`PEOPLE_RULE`): a number measured with noise is rounded to the
decimal place of the second significant digit of its noise's standard deviation (a DP value
whose noise std is 2.26 is printed to one decimal, 9.15364 as 9.2; the std itself to two
significant digits, 2.3); a number without noise (a threshold, an epsilon, a count) keeps at
most six significant digits, trailing zeros dropped. Every number is written out in decimals
(never 1.2e-05), with thousands separators (21,590), and a minus sign U+2212 for negatives.
metrics.csv and metrics.json keep full precision.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["NUMBER_FORMAT", "NUMBER_FORMAT_DOC", "format_number", "plain", "noisy", "std_text",
           "decimals_for", "with_unit", "points", "PEOPLE_RULE", "MINUS"]

NUMBER_FORMAT = ".6g"
NUMBER_FORMAT_DOC = "format(x, '.6g')"
MINUS = "\u2212"

PEOPLE_RULE = ("a number measured with noise is rounded to the second significant digit of the "
               "noise's standard deviation; other numbers keep at most six significant digits")


def format_number(x: Any) -> str:
    """The machine-readable form of metrics.csv: ``format(x, '.6g')`` (ints as they are)."""
    if x is None:
        return ""
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    return format(float(x), NUMBER_FORMAT)


def _finite(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _fixed(v: float, decimals: int, strip: bool) -> str:
    """``v`` rounded to ``decimals`` places (negative: tens, hundreds, ...), decimal notation,
    thousands separators, U+2212 for a minus; ``strip``: drop trailing zeros of the fraction."""
    decimals = max(min(decimals, 45), -320)
    r = round(v, decimals)
    text = f"{abs(r):,.{max(decimals, 0)}f}"
    if strip and "." in text:
        text = text.rstrip("0").rstrip(".")
    if r < 0 and any(ch in "123456789" for ch in text):
        text = MINUS + text
    return text


def decimals_for(std: float, digits: int = 2) -> int:
    """Decimal places that keep ``digits`` significant digits of ``std`` (> 0): 2.26 -> 1,
    0.000856 -> 5, 1597 -> -2."""
    return digits - 1 - int(math.floor(math.log10(std)))


def plain(x: Any, sig: int = 6) -> str:
    """A number without noise: at most ``sig`` significant digits, trailing zeros dropped,
    decimal notation with thousands separators (0.0000228, 21,590, 9.98, 1,000,000)."""
    if x is None:
        return ""
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, (int, np.integer)):
        return _fixed(float(int(x)), 0, True) if abs(int(x)) < 2 ** 53 else f"{int(x):,}"
    v = _finite(x)
    if v is None:
        return "not a finite number"
    if v == 0:
        return "0"
    if abs(v) < 1e-40:
        return "almost 0 (below 10\u207b\u2074\u2070)"
    return _fixed(v, sig - 1 - int(math.floor(math.log10(abs(v)))), True)


def noisy(x: Any, std: Any) -> str:
    """A number measured with noise of standard deviation ``std``: rounded to the second
    significant digit of ``std`` (trailing zeros kept: 9.20 says two decimals are known);
    without a usable std, three significant digits."""
    v, s = _finite(x), _finite(std)
    if v is None:
        return plain(x)
    if s is None or s <= 0:
        return plain(v, sig=3)
    return _fixed(v, decimals_for(s), False)


def std_text(std: Any) -> str:
    """A noise standard deviation: two significant digits (2.3, 0.00086, 1,600)."""
    s = _finite(std)
    if s is None:
        return ""
    if s == 0:
        return "0"
    return _fixed(s, decimals_for(abs(s)), False)


def with_unit(number_text: str, unit: str | None) -> str:
    """``100 g``, ``1.5 hours``; a unit ending in "s" loses it after exactly 1 ("1 week")."""
    unit = (unit or "").strip()
    if not unit or not number_text:
        return number_text
    if number_text == "1" and len(unit) > 2 and unit.endswith("s") and not unit.endswith("ss") \
            and unit.isalpha() and unit.islower():
        unit = unit[:-1]
    return f"{number_text}\u00a0{unit}"


def points(share_text: str) -> str:
    """``1.5 percentage points`` (``1 percentage point``) from a number already in points."""
    return with_unit(share_text, "percentage points") if share_text != "1" else "1\u00a0percentage point"
