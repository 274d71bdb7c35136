"""Criterion ``smoothed_ratio``: the largest clipped, smoothed ratio of 1-way counts.

For every column j and every value v of its *full* domain, r = count of v in T, s = count of v
in C (either may be 0), a smoothing k >= 1 (``smoothing``, default 1 as in the 2024 release), and

    rho(r, s) = min(c, max((r+k)/(s+k), (s+k)/(r+k)))       (>= 1 always, so clipping to [1, c]
                                                            only acts at the top)
    f(T, C)   = max_{j, v} rho(r_{j,v}, s_{j,v}).

Sensitivity (C fixed; s' = min over all columns and values of the smoothed count s+k >= k):

    Delta = max(1/s', c - 1/(1/c + 1/s'))   <= max(1/k, c^2/(c + k)) whatever C is.

Derivation. Write a = s+k >= s' (fixed) and x = r+k > 0; a changed record moves x by at most
one for each (j, v), and rho = max(min(c, x/a), min(c, a/x)). Since max and min(c, .) are
1-Lipschitz in the sup norm, |rho(x+1) - rho(x)| <= the larger change of the two branches.
 * x/a branch: changes by at most 1/a <= 1/s'.
 * a/x branch g(x) = min(c, a/x) (decreasing): if a/x <= c, with u = a/x the change is
   a/x - a/(x+1) = u - 1/(1/u + 1/a) = u^2/(u + a) <= c^2/(c + a) (increasing in u <= c);
   if a/x > c >= a/(x+1), then x + 1 < a/c + 1, so the change c - a/(x+1) < c - a/(a/c + 1)
   = c^2/(c + a); if both are clipped it is 0. And c^2/(c + a) = c - 1/(1/c + 1/a) decreases
   in a, so it is <= its value at a = s'.
A changed record changes r at two values per column at most, each term by <= Delta, hence the
maximum over all terms by <= Delta. s' uses the smoothed count over the full domain (known bug 2:
the 2024 code used the smallest *observed* count, which ignores values absent from C).

Exact arithmetic. rho is a rational of the integer counts and the (dyadic) k and c, and f its
maximum; it is computed with fractions and released as
``lipschitz_float(f, Delta, fl(Delta), c)`` with Delta the exact value of the formula at s'
(criteria/rounding.py): neighbours' floats differ by less than the declared sensitivity exactly,
where the float quotients could differ by Delta plus rounding. (When the float formula rounds
below the exact Delta, the smaller of the two is what the release keeps to.)

Derived threshold (``{derive: laplace_false_positive, stakeholder: c0, false_positive: p,
assumed_min_count: m}``): Delta_assumed = Delta at s' = max(m, k) (the smoothed count is at
least k for every candidate, so with k >= m the "assumption" is a guarantee), and threshold =
c0 - F^-1_Laplace(1 - p; Delta_assumed / epsilon). Births: c = 2, m = 50, epsilon = 0.3,
p = 0.05: Delta = 2 - 1/(0.52) = 0.0769, scale 0.256, quantile 0.590, threshold 1.41. At
epsilon 0.15 the same derivation gives 0.82, below the metric's minimum of 1 (refused: no
candidate could pass); with k = 100: Delta = 4/102 = 0.0392, scale 0.261, threshold 1.40.
"""
from __future__ import annotations

from fractions import Fraction
from typing import ClassVar

import numpy as np

from ..cells import known_types, types_of
from .base import Criterion, CriterionError, EvalContext, _number, register
from .rounding import exact, lipschitz_float

__all__ = ["SmoothedRatio", "ratio_sensitivity", "ratio_sensitivity_exact", "smoothed_ratio_value",
           "smoothed_ratio_exact"]


def ratio_sensitivity(min_smoothed: float, clip: float) -> float:
    """max(1/s', c - 1/(1/c + 1/s'))."""
    s = float(min_smoothed)
    # c - 1/(1/c + 1/s') written as c^2/(c + s'): the same number without cancellation.
    return max(1.0 / s, clip * clip / (clip + s))


def ratio_sensitivity_exact(min_smoothed, clip) -> Fraction:
    """max(1/s', c^2/(c + s')) as an exact rational (s', c read as the rationals of their
    floats)."""
    s, c = exact(min_smoothed), exact(clip)
    return max(1 / s, c * c / (c + s))


def smoothed_ratio_exact(real: np.ndarray, synth: np.ndarray, domain: tuple[int, ...],
                         clip: float, smoothing: float = 1.0) -> Fraction:
    """:func:`smoothed_ratio_value` exactly: max over columns and values of
    min(c, max((r+k)/(s+k), (s+k)/(r+k))) as a rational."""
    return _ratio_of_counts(_counts(real, domain), _counts(synth, domain), clip, smoothing)


def _ratio_of_counts(real: list[np.ndarray], synth: list[np.ndarray], clip: float,
                     smoothing: float) -> Fraction:
    """:func:`smoothed_ratio_exact` from the 1-way counts of T and C."""
    c, k = exact(clip), exact(smoothing)
    best = Fraction(1)
    for r, s in zip(real, synth):
        for a, b in set(zip(np.asarray(r).tolist(), np.asarray(s).tolist())):
            x, y = int(a) + k, int(b) + k
            rho = min(c, max(x / y, y / x))
            if rho > best:
                best = rho
    return best


def _counts(codes: np.ndarray, domain: tuple[int, ...]) -> list[np.ndarray]:
    """1-way counts of every column; from the remembered record types of the table whose codes
    these are when known (the same integers in O(types)), else one bincount per column."""
    types = known_types(codes)
    if types is not None:
        return [types.column_counts(j) for j in range(len(domain))]
    return [np.bincount(codes[:, j], minlength=domain[j]) for j in range(len(domain))]


def _coded_counts(coded) -> list[np.ndarray]:
    """1-way counts of every column of a table, from its record types (never its rows)."""
    types = types_of(coded)
    return [types.column_counts(j) for j in range(len(coded.columns))]


def smoothed_ratio_value(real: np.ndarray, synth: np.ndarray, domain: tuple[int, ...],
                         clip: float, smoothing: float = 1.0) -> float:
    """max over columns and values of min(c, max((r+k)/(s+k), (s+k)/(r+k))), k = smoothing."""
    best = 1.0
    for r, s in zip(_counts(real, domain), _counts(synth, domain)):
        r1 = r.astype(np.float64) + smoothing
        s1 = s.astype(np.float64) + smoothing
        rho = np.minimum(clip, np.maximum(r1 / s1, s1 / r1))
        best = max(best, float(rho.max()))
    return best


@register
class SmoothedRatio(Criterion):
    """Largest clipped ratio of smoothed 1-way counts over the full domain."""

    type: ClassVar[str] = "smoothed_ratio"
    summary: ClassVar[str] = ("max over columns and values of min(c, max((r+1)/(s+1), "
                              "(s+1)/(r+1))); sensitivity max(1/s', c - 1/(1/c + 1/s'))")
    parameters: ClassVar[dict[str, str]] = {
        "clip": "clip c of the ratio (> 1)",
        "smoothing": "k added to every real and synthetic count (default 1): (r+k)/(s+k); a "
                     "larger k bounds the sensitivity by max(1/k, c^2/(c+k)) whatever the "
                     "candidate, so the derived threshold stays meaningful at small epsilon, and "
                     "compares values with fewer than about k records more loosely"}

    def __init__(self, entry: dict) -> None:
        super().__init__(entry)
        self.clip = _number(entry, "clip", self.where, positive=True)
        if self.clip <= 1.0:
            raise CriterionError(f"{self.where}.clip: must be > 1, got {self.clip}")
        self.smoothing = float(entry.get("smoothing", 1.0))
        if not self.smoothing >= 1.0:
            raise CriterionError(f"{self.where}.smoothing: must be >= 1, got {self.smoothing}")

    def metric_range(self) -> tuple[float, float]:
        """rho >= 1 always and is clipped at c: [1, c]."""
        return 1.0, self.clip

    def assumed_sensitivity(self, t: dict) -> tuple[float, dict]:
        """Delta at s' = max(assumed_min_count, k): the smoothed count is at least k always."""
        m = _number(t, "assumed_min_count", f"{self.where}.threshold", positive=True)
        inputs = {"assumed_min_count": m, "clip": self.clip}
        if self.smoothing != 1.0:
            inputs["smoothing"] = self.smoothing
        return ratio_sensitivity(max(m, self.smoothing), self.clip), inputs

    def value(self, ctx: EvalContext) -> float:
        self._check(ctx)
        synth = _coded_counts(ctx.synth)   # from the record types of T and C
        f = _ratio_of_counts(_coded_counts(ctx.real), synth, self.clip, self.smoothing)
        low = min(int(c.min()) for c in synth)  # public
        delta = ratio_sensitivity_exact(low + exact(self.smoothing), self.clip)
        declared = ratio_sensitivity(low + self.smoothing, self.clip)  # as sensitivity() has it
        return lipschitz_float(f, delta, declared, self.clip)

    def sensitivity(self, ctx: EvalContext) -> tuple[float, dict]:
        """Delta from s' = min smoothed synthetic count over the full domain (C only)."""
        counts = _coded_counts(ctx.synth)
        mins = [int(c.min()) for c in counts]
        j = int(np.argmin(mins))
        v = int(np.argmin(counts[j]))
        s_min = mins[j] + self.smoothing
        s_min = int(s_min) if float(s_min).is_integer() else s_min
        inputs = {
            "n": ctx.n, "clip": self.clip, "min_smoothed_synthetic_count": s_min,
            "at": {"column": ctx.synth.columns[j].name, "value": ctx.synth.columns[j].labels[v]},
            "formula": "max(1/s', c - 1/(1/c + 1/s')), s' = min over the full domain of "
                       "(synthetic count + k)"}
        if self.smoothing != 1.0:
            inputs["smoothing"] = self.smoothing
        return ratio_sensitivity(s_min, self.clip), inputs
