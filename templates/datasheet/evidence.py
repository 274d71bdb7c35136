"""How strong a passed check is: the error a criterion's check rules out, from public numbers.

A candidate passes a criterion when its DP value v + Z is below the threshold t, where v is the
exact (private) value and Z the noise. With Laplace noise of scale b (metrics.json's
``noise_scale``; standard deviation sqrt(2) b), a candidate whose exact value is e fails with
probability P(e + Z >= t) = P(Z >= t - e), which is at least ``POWER`` = 95% exactly when

    t - e <= b ln(2 (1 - POWER)),   i.e.   e >= t + b ln(1 / (2 (1 - POWER))) = t + b ln 10.

So ``ruled_out = t + b ln 10`` (about t + 1.63 noise std) is the smallest exact value that the
check would have caught with probability at least 95%: a passed check is evidence that the
exact value is below it, not below t.

For a fit with the noise inside (the regression criteria), the DP value is a distance
D = |beta_dp - beta_c| and the exact value e = |beta_exact - beta_c|; by the triangle inequality
D >= e - N with N = |beta_dp - beta_exact|, the distance the noise alone moves the fit. With
N's 95th percentile q95 estimated by simulation on the released data (``value_noise.py``),
``ruled_out = t + q95`` (an estimate). Noise on the scores of a choice (quantiles) and fits
without a simulation get no number: the datasheet says so instead of guessing.

**Weak evidence** (the datasheet's word, ``spec validate``'s and ``sweep``'s warning): the
noise's standard deviation is at least half the distance from the metric's smallest value to
the threshold (``WEAK_STD_SHARE``; the smallest value is 0, or 1 for the smoothed ratio).
For Laplace noise that is the same as ``ruled_out`` lying at least ``WEAK_FACTOR`` (1.81) times
as far from the smallest value as the threshold; fits use that form of the rule.

Shared by the datasheet (public numbers of a bundle) and the release's pre-run warnings
(``release/spec/criteria_checks.py``, which computes the noise std it will have).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["POWER", "LAPLACE_Z", "WEAK_STD_SHARE", "WEAK_FACTOR", "metric_floor", "laplace_ruled_out",
           "is_weak_std", "Evidence", "evidence"]

POWER = 0.95
#: b ln(1 / (2 (1 - POWER))) is the margin above the threshold at which Laplace(b) noise fails a
#: candidate with probability POWER; ln 10 for 95%
LAPLACE_Z = math.log(1.0 / (2.0 * (1.0 - POWER)))
#: a criterion's evidence is weak when its noise std >= this share of (threshold - smallest value)
WEAK_STD_SHARE = 0.5
#: the same rule in terms of ruled_out for Laplace noise: 1 + LAPLACE_Z * WEAK_STD_SHARE / sqrt(2)
WEAK_FACTOR = 1.0 + LAPLACE_Z * WEAK_STD_SHARE / math.sqrt(2.0)


def metric_floor(criterion_type: str) -> float:
    """The smallest value a criterion's exact metric can take (1 for a ratio, else 0)."""
    return 1.0 if criterion_type == "smoothed_ratio" else 0.0


def laplace_ruled_out(threshold: float, scale: float, power: float = POWER) -> float:
    """The smallest exact value that fails with probability >= ``power`` under Laplace(scale)."""
    return float(threshold) + float(scale) * math.log(1.0 / (2.0 * (1.0 - power)))


def is_weak_std(std: float, threshold: float, floor: float = 0.0) -> bool:
    """The rule of the warnings: noise std >= WEAK_STD_SHARE x (threshold - floor)."""
    return float(std) >= WEAK_STD_SHARE * (float(threshold) - float(floor))


@dataclass(frozen=True)
class Evidence:
    """What a passed check rules out. ``ruled_out`` None: not stated (``reason`` says why)."""

    ruled_out: float | None
    method: str | None          # "laplace" (exact) or "simulated" (estimated), None when unknown
    weak: bool | None
    factor: float | None        # (ruled_out - floor) / (threshold - floor)
    floor: float
    reason: str = ""            # when ruled_out is None: "inside_fit" or "selection_scores"


def _num(x) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def evidence(row: dict, estimate: dict | None = None) -> Evidence:
    """The :class:`Evidence` of one metrics.json row (``estimate``: value_noise's simulation of
    the noise of the reported value, for fits)."""
    floor = metric_floor(str(row.get("type", "")))
    t = _num(row.get("threshold"))
    mech = str(row.get("mechanism", ""))
    span = None if t is None else t - floor
    if t is None or span is None or span <= 0:
        return Evidence(None, None, None, None, floor, "threshold")
    if mech == "laplace":
        b, std = _num(row.get("noise_scale")), _num(row.get("noise_std"))
        if b is None or b < 0:
            return Evidence(None, None, None, None, floor, "noise")
        e = laplace_ruled_out(t, b)
        weak = is_weak_std(std if std is not None else math.sqrt(2.0) * b, t, floor)
        return Evidence(e, "laplace", weak, (e - floor) / span, floor)
    q95 = _num((estimate or {}).get("q95"))
    if q95 is not None and q95 >= 0:
        e = t + q95
        return Evidence(e, "simulated", (e - floor) >= WEAK_FACTOR * span, (e - floor) / span, floor)
    from .value_noise import noise_on

    return Evidence(None, None, None, None, floor, noise_on(mech))
