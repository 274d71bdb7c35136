"""Private selection with a known threshold (Liu & Talwar 2019, Algorithm 1), run by dpbundle.

The algorithm, for an epsilon-DP candidate measurement Q that releases (score, candidate):

    repeat:
        (s, c) <- Q(D)
        if s >= threshold: release (s, c) and halt
        with probability gamma: release nothing and halt        # the stop draw

Liu & Talwar (Theorem 3.1, known threshold): for any gamma in [0, 1) the whole loop is
2 epsilon-DP (pure DP; the bound does not depend on gamma). So gamma is a utility choice only,
and the number of attempts is Geometric: P(k attempts | every candidate fails) = (1 - gamma)^(k-1)
gamma, mean 1 / gamma.

Why dpbundle runs the loop itself instead of calling OpenDP 0.16's
``make_select_private_candidate``: that combinator draws the number of attempts up front as
``sample_geometric_exp_fast(x) + 1`` with ``x = -1 / ln(1 - gamma)``, and the sampler returns the
number of failures of trials that continue with probability ``exp(-x)``: each failed attempt
continues with probability ``exp(1 / ln(1 - gamma))`` instead of ``1 - gamma`` (for gamma = 0.2,
0.0113 instead of 0.8; for gamma = 0.0127 the loop stops after the first failure with probability
1 - e^-78). Its privacy map (2 x the candidate's) is unaffected and is kept as the cross-check of
our accounting (:func:`opendp_selection_map`). Passing a corrected parameter
``gamma' = 1 - exp(1 / ln(1 - gamma))`` would fix the distribution only where floats allow it:
for gamma below 0.02636, ``1 - exp(1 / ln(1 - gamma))`` rounds to 1.0, which OpenDP refuses (and
just above it only a few bits of ``1 - gamma'`` survive), so the stop rule is implemented here
(docs/opendp-stop-probability.md).

The stop draw is exact for the float gamma, through OpenDP's exact Bernoulli sampler (OS
randomness): with ``gamma = m * 2**e`` (``math.frexp``: ``m`` in [1/2, 1), ``e <= 0``),

    stop  <=>  Bernoulli(m)  and  Bernoulli(1/2) x |e| times,

independent draws, so P(stop) = m * 2**e = gamma exactly. OpenDP exposes Bernoulli(p) for p in
[1/2, 1) as randomized response on ``True`` (``make_randomized_response_bool(p)(True)`` is
``True`` with probability p, by ``sample_bernoulli_float``, exact for the float p).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Callable

from . import exact

__all__ = ["bernoulli", "StopRule", "KnownThresholdSelection", "opendp_selection_map",
           "SELECTION_FACTOR"]

SELECTION_FACTOR = 2    # Liu & Talwar, Theorem 3.1 (known threshold): 2 x the candidate's epsilon


@functools.lru_cache(maxsize=64)
def _rr(p: float):
    """OpenDP's randomized response on booleans with truth probability ``p`` in [1/2, 1):
    ``_rr(p)(True)`` is True with probability exactly p (measurements are immutable: cached)."""
    import opendp.prelude as dp

    dp.enable_features("contrib")
    return dp.m.make_randomized_response_bool(p)


def _check_probability(p: float, what: str = "probability") -> float:
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= float(p) < 1:
        raise ValueError(f"{what} must be a number in [0, 1), got {p!r}")
    return float(p)


def bernoulli(p: float) -> bool:
    """``True`` with probability exactly ``p`` (a float in [0, 1)), from OpenDP's exact
    Bernoulli sampler (OS randomness). See the module docstring for the decomposition."""
    p = _check_probability(p)
    if p == 0.0:
        return False
    m, e = math.frexp(p)            # p = m * 2**e, 1/2 <= m < 1, e <= 0
    for _ in range(-e):             # Bernoulli(1/2), |e| times: stop at the first False
        if not _rr(0.5)(True):
            return False
    return bool(_rr(m)(True))


@dataclass(frozen=True)
class StopRule:
    """After each failed candidate, stop with probability ``gamma`` (exact for the float)."""

    gamma: float

    def __post_init__(self) -> None:
        _check_probability(self.gamma, "the stop probability")

    @property
    def exact(self) -> Fraction:
        """The stop probability as an exact rational (the float's binary value)."""
        return exact.binary(self.gamma)

    def mean_attempts_if_never_passing(self) -> float:
        """E[attempts] when no candidate passes: 1 / gamma (inf for gamma = 0)."""
        return math.inf if self.gamma == 0 else 1.0 / self.gamma

    def draw(self) -> bool:
        """True: stop now. Never stops for gamma = 0."""
        return self.gamma > 0 and bernoulli(self.gamma)

    def describe(self) -> dict:
        return {"stop_probability": self.gamma,
                "rule": "after each candidate below the threshold, stop with this probability "
                        "(Liu & Talwar 2019, Algorithm 1)",
                "sampler": "OpenDP make_randomized_response_bool (exact Bernoulli, OS randomness)"}


def opendp_selection_map(per_candidate_epsilon: float, gamma: float, threshold: float = 1.0) -> float:
    """OpenDP's privacy map at change-one distance 1 of ``make_select_private_candidate`` over a
    candidate with map ``d -> per_candidate_epsilon * d``: the independent cross-check of
    ``SELECTION_FACTOR x per_candidate_epsilon`` (the combinator is built, never run)."""
    import opendp.prelude as dp

    dp.enable_features("contrib", "honest-but-curious")
    domain = dp.user_domain("dpbundle.SelectionInput", lambda _x: True)
    candidate = dp.m.make_user_measurement(
        domain, dp.change_one_distance(), dp.max_divergence(), lambda _x: (0.0, None),
        lambda d_in: per_candidate_epsilon * d_in, TO="(f64, ExtrinsicObject)")
    meas = dp.c.make_select_private_candidate(candidate, stop_probability=gamma, threshold=threshold)
    return float(meas.map(1))


@dataclass(frozen=True)
class KnownThresholdSelection:
    """Liu & Talwar's known-threshold selection over an epsilon-DP candidate.

    Input metric: change-one distance (the candidate's); output measure: max-divergence;
    privacy map ``d_in -> SELECTION_FACTOR * per_candidate_epsilon * d_in`` for any gamma.
    """

    per_candidate_epsilon: float
    stop: StopRule
    threshold: float = 1.0

    def privacy_map(self, d_in: float) -> Fraction:
        """Exact: 2 x per-candidate epsilon (the float's binary value) x d_in."""
        return SELECTION_FACTOR * exact.binary(self.per_candidate_epsilon) * exact.binary(float(d_in))

    def run(self, candidate: Callable[[int], tuple[float, Any]],
            on_stop_draw: Callable[[int, bool], None] | None = None) -> tuple[int, Any] | None:
        """Call ``candidate(k)`` for k = 0, 1, ...; return ``(k, payload)`` of the first whose
        score is >= the threshold, or None when a stop draw ends the loop first.
        ``on_stop_draw(k, stopped)`` is told every stop draw (to record it privately)."""
        k = 0
        while True:
            score, payload = candidate(k)
            if score >= self.threshold:
                return k, payload
            if self.stop.gamma > 0:
                stopped = self.stop.draw()
                if on_stop_draw is not None:
                    on_stop_draw(k, stopped)
                if stopped:
                    return None
            k += 1
