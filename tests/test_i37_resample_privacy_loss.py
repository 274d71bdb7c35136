"""Issue 37: an empirical privacy-loss check of `retries: resample` on neighbouring datasets.

A toy release with the real parts (OpenDP's Laplace through ``Randomness.laplace``, the real
``KnownThresholdSelection`` and ``StopRule``): the "generator" is a noisy count of ones among n
bits (epsilon_gen), fitted ONCE; each attempt samples n bits from it and measures the criterion
|share of ones in the sample - share in the data| with Laplace noise (epsilon_eval, sensitivity
1/n); the first attempt below the threshold is released (its share of ones, in buckets), or
nothing after a stop draw. The claimed loss is epsilon_gen + 2 epsilon_eval. On two neighbouring
datasets (one bit flipped) every output bucket's probability ratio must stay below
exp(claimed loss), judged with exact binomial confidence bounds; a mutant that reads the data
outside the DP measurements fails the same check (so the check can fail).
"""
from __future__ import annotations

import math

import numpy as np
from scipy.stats import beta

from dpbundle.mechanisms.noise import Randomness
from dpbundle.mechanisms.private_selection import KnownThresholdSelection, StopRule

N, EPS_GEN, EPS_EVAL, THRESHOLD, GAMMA = 8, 0.5, 0.25, 0.2, 0.3
CLAIMED = EPS_GEN + 2 * EPS_EVAL          # resample: generation once + 2 x criteria


def _release(data: np.ndarray, rng: np.random.Generator, leak: bool = False):
    """One toy release: the bucket of the released sample's count of ones, or None (nothing)."""
    rand = Randomness()
    count = int(data.sum())
    noisy = rand.laplace(count, sensitivity=1, epsilon=EPS_GEN, purpose="toy generator", integer=True)
    p = min(max(noisy / N, 0.0), 1.0)                                  # the model, fitted once

    def candidate(_k: int):
        sample = rng.random(N) < p                                     # post-processing of the model
        error = abs(sample.mean() - data.mean())
        if leak:                                                       # a mutant: no noise on the data
            return (1.0 if error < THRESHOLD else 0.0), int(sample.sum())
        dp_error = rand.laplace(error, sensitivity=1 / N, epsilon=EPS_EVAL, purpose="toy criterion")
        return (1.0 if dp_error < THRESHOLD else 0.0), int(sample.sum())

    out = KnownThresholdSelection(EPS_EVAL, StopRule(GAMMA), 1.0).run(candidate)
    return None if out is None else out[1]


def _frequencies(data: np.ndarray, runs: int, seed: int, leak: bool = False) -> dict:
    rng = np.random.default_rng(seed)
    counts: dict = {}
    for _ in range(runs):
        key = _release(data, rng, leak)
        counts[key] = counts.get(key, 0) + 1
    return counts


def _worst_lower_bound(a: dict, b: dict, runs: int, alpha: float = 1e-4) -> float:
    """The largest, over outputs, of a lower confidence bound on log(P_a(o) / P_b(o)) (exact
    Clopper-Pearson bounds at level alpha each: lower for P_a, upper for P_b)."""
    worst = -math.inf
    for key in set(a) | set(b):
        ka, kb = a.get(key, 0), b.get(key, 0)
        if ka == 0:
            continue
        lo_a = beta.ppf(alpha, ka, runs - ka + 1)
        hi_b = beta.ppf(1 - alpha, kb + 1, runs - kb) if kb < runs else 1.0
        worst = max(worst, math.log(lo_a / hi_b))
    return worst


def _neighbours():
    d = np.array([1, 1, 1, 1, 0, 0, 0, 0])
    d2 = d.copy()
    d2[4] = 1                                                          # one record changed
    return d, d2


def test_the_loss_on_neighbours_stays_below_the_claimed_total():
    d, d2 = _neighbours()
    runs = 6000
    fa, fb = _frequencies(d, runs, 1), _frequencies(d2, runs, 2)
    assert len(fa) >= 4                    # several outputs, nothing released among them
    assert None in fa
    for a, b in ((fa, fb), (fb, fa)):
        assert _worst_lower_bound(a, b, runs) <= CLAIMED, (a, b)


def test_the_check_fails_a_mutant_that_reads_the_data_without_noise():
    d, d2 = _neighbours()
    runs = 6000
    fa, fb = _frequencies(d, runs, 3, leak=True), _frequencies(d2, runs, 4, leak=True)
    worst = max(_worst_lower_bound(fa, fb, runs), _worst_lower_bound(fb, fa, runs))
    assert worst > CLAIMED, (fa, fb)
