"""Norm-sub: consistent non-negative counts from a noisy count table whose true total is public.

A post-processing step shared by the generators (PrivBayes' conditional tables, the one-way
shares of :mod:`dpbundle.mechanisms.oneway`, MST and PrivSyn). It lives in its own module, below
all of them, so that none has to import another generator for it (``privbayes`` imports
``oneway``; ``oneway`` once imported ``norm_sub`` from ``privbayes``: an import circle).
``dpbundle.mechanisms.privbayes.norm_sub`` remains importable as before.
"""
from __future__ import annotations

import numpy as np

__all__ = ["norm_sub"]


def norm_sub(noisy: np.ndarray, total: float) -> np.ndarray:
    """Consistent non-negative counts from a noisy count table whose true total is public.

    Every table of (X, Pi) counts each of the n records once, so its true total is n (public).
    Plain clipping of negative cells adds the positive half of the noise of every empty cell
    and inflates rare values; "norm-sub" (as in PrivSyn/DPSyn) instead finds the delta >= 0 with
    sum(max(noisy - delta, 0)) = total and returns max(noisy - delta, 0). If the clipped table
    already sums to at most ``total`` it is returned clipped. Post-processing: no budget.
    """
    clipped = np.clip(noisy, 0.0, None)
    if clipped.sum() <= total:
        return clipped
    v = np.sort(noisy.ravel())[::-1]
    k = np.arange(1, v.size + 1, dtype=np.float64)
    deltas = (np.cumsum(v) - total) / k       # delta if exactly the k largest cells stay positive
    j = int(np.flatnonzero(v >= deltas)[-1])  # the largest k whose k-th cell stays at or above its delta
    return np.clip(noisy - max(float(deltas[j]), 0.0), 0.0, None)
