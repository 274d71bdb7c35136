"""Criterion ``regression_mae_difference``: |MAE on T of the "real" fit - MAE on T of C's fit|.

Spec: ``target``, ``bounds: [L, U]``, optional ``reference`` (id of a
``regression_coefficients`` criterion; default: the one with the same target evaluated earlier
on the same :class:`EvalContext`).

    MAE_T(beta) = (1/n) sum_{i in T} |y_i - clip(beta_0 + z_i.beta, L, U)|
    f(T, C)     = |MAE_T(beta_ref) - MAE_T(beta_C)|

with the design of the regression criterion (y clipped to [L, U], features -- by default every
other released column, unordered categorical ones one-hot coded -- standardised with C's
means/sds and clipped to C's bounds), beta_C = OLS on C. The sensitivity below does not depend
on the design.

Which "real" coefficients. DESIGN's sensitivity 2(U-L)/n holds only if *both* coefficient
vectors are fixed when one record of T changes. It does NOT hold for beta_T = exact OLS on T:
the changed record also moves beta_T, and through it every one of the n predictions; the change
of MAE_T(beta_T) is then bounded only in terms of the conditioning of T's X'X (private,
unbounded from public information: with nearly collinear features one record can swing the
coefficients arbitrarily). So, as in Hod & Canetti (Sec. 2.5.4: "we consider the coefficient
vector ... as public since it is released in the previous acceptance criterion"), beta_ref is
the *DP* coefficient vector released by the ``regression_coefficients`` criterion (public
post-processing; the two releases compose to eps_reg + eps_mae). Evaluating this criterion
without such a release on the same context is an error.

Sensitivity 2(U - L)/n. With beta_ref, beta_C fixed, each record contributes g_i = |y_i -
p_i| - |y_i - q_i| with p_i, q_i, y_i in [L, U], so g_i in [-(U-L), U-L]; changing one record
changes sum_i g_i by at most 2(U - L), hence (1/n) sum g_i and its absolute value by at most
2(U - L)/n. (The 2024 code used (U - L)/n: known bug 4, the paper's erratum.)

MAE_T is computed on T's record types weighted by their counts: (1/n) sum_t c_t g_t.

Arithmetic versions (``dpbundle.mechanisms.arithmetic``): version 2 computes the predictions
(:func:`~dpbundle.mechanisms.criteria.regression.linear`) and C's OLS without BLAS or LAPACK,
the same bits on every machine; version 1 (bundles of dpbundle <= 0.2) with numpy's BLAS.

Exact arithmetic (:func:`mae_difference_exact`). y and both predictions are written as integers
on one dyadic grid 2^-e inside [L, U] (:func:`~dpbundle.mechanisms.criteria.rounding.dyadic_units`:
exact for the released numbers, a change below 2^-e -- 2^-32 at n = 160,000, U = 4600 -- for a
prediction with more bits), so every g_t and S = sum_t c_t g_t are exact integers (int64), f =
|S| 2^-e / n is an exact rational, and a changed record still moves S by at most
2 (U - L) 2^e (all three numbers stay in [L, U]). The released float is
``lipschitz_float(f, 2 (U - L)/n, fl(2 (U - L)/n), U - L)`` (criteria/rounding.py): neighbours'
floats differ by less than the declared sensitivity exactly, not by it plus rounding.
"""
from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from ..cells import types_of
from .base import Criterion, CriterionError, EvalContext, register
from .regression import RegressionDesign, cached_design, linear, parse_regression_entry, weighted_ols
from .rounding import dyadic_units, exact, lipschitz_float

if TYPE_CHECKING:  # pragma: no cover
    from dpbundle.mechanisms.noise import Randomness

__all__ = ["RegressionMAEDifference", "mae_difference", "mae_difference_exact"]


def mae_difference(des: RegressionDesign, real, beta_ref: np.ndarray,
                   beta_c: np.ndarray, weights: np.ndarray | None = None) -> float:
    """|MAE_T(beta_ref) - MAE_T(beta_C)| with predictions clipped to [L, U]; with ``weights``,
    ``real`` holds record types and row i counts weights[i] times: |sum_i w_i g_i| / sum_i w_i."""
    y = des.y(real)
    Z = des.z(real)
    p = np.clip(linear(beta_ref, Z), des.L, des.U)
    q = np.clip(linear(beta_c, Z), des.L, des.U)
    g = np.abs(y - p) - np.abs(y - q)
    if weights is None:
        return abs(float(np.mean(g)))
    w = np.asarray(weights, dtype=np.float64)
    return abs(float(np.sum(w * g)) / float(w.sum()))   # (pairwise sums: fixed order)


def mae_difference_exact(des: RegressionDesign, real, beta_ref: np.ndarray,
                         beta_c: np.ndarray, weights: np.ndarray | None, n: int) -> Fraction:
    """|MAE_T(beta_ref) - MAE_T(beta_C)| as an exact rational: y, p, q on the dyadic grid of
    :func:`dyadic_units` (public: the target's numbers and the two public models' predictions),
    S = sum_i w_i (|y_i - p_i| - |y_i - q_i|) in int64, f = |S| 2^-e / n (module docstring)."""
    y = des.y(real)
    Z = des.z(real)
    p = np.clip(linear(beta_ref, Z), des.L, des.U)
    q = np.clip(linear(beta_c, Z), des.L, des.U)
    units, e = dyadic_units(np.concatenate([y, p, q]), des.L, des.U, 2 * int(n))
    k = y.size
    Y, P, Q = units[:k], units[k:2 * k], units[2 * k:]
    g = np.abs(Y - P) - np.abs(Y - Q)
    w = np.ones(k, dtype=np.int64) if weights is None else np.rint(np.asarray(weights)).astype(np.int64)
    S = int(np.dot(w, g))
    return Fraction(abs(S), 2 ** e * int(n))


@register
class RegressionMAEDifference(Criterion):
    """Difference of the MAEs on T of the DP "real" regression and of C's OLS regression."""

    type: ClassVar[str] = "regression_mae_difference"
    summary: ClassVar[str] = ("|MAE_T(DP coefficients on T) - MAE_T(OLS on C)|, predictions "
                              "clipped to [L, U]; sensitivity 2(U - L)/n")
    parameters: ClassVar[dict[str, str]] = {
        "target": "the regressed column",
        "bounds": "[L, U] public bounds of the target",
        "features": "feature columns (default: every released column but the target; unordered "
                    "categorical ones one-hot coded, first category = reference)",
        "reference": "id of the regression_coefficients criterion whose DP coefficients are "
                     "the real regression (default: the one with the same target)",
    }

    def __init__(self, entry: dict) -> None:
        super().__init__(entry)
        self.target, self.L, self.U, self.features = parse_regression_entry(entry, self.where)
        ref = entry.get("reference")
        if ref is not None and not isinstance(ref, str):
            raise CriterionError(f"{self.where}.reference: expected a criterion id")
        self.reference: str | None = ref

    def metric_range(self) -> tuple[float, float]:
        """|mean of g_i| with g_i in [-(U - L), U - L]: [0, U - L]."""
        return 0.0, self.U - self.L

    def design(self, ctx: EvalContext) -> RegressionDesign:
        return cached_design(ctx.synth, self.target, self.L, self.U, self.features)

    def _reference(self, ctx: EvalContext) -> tuple[str, np.ndarray]:
        found = []
        for cid, rel in ctx.released.items():
            if rel.get("type") != "regression_coefficients":
                continue
            if self.reference is not None and cid != self.reference:
                continue
            if self.reference is None and (rel.get("target") != self.target
                                           or rel.get("bounds") != [self.L, self.U]
                                           or rel.get("features") != list(self.design(ctx).features)):
                continue
            found.append((cid, np.asarray(rel["coefficients"], dtype=np.float64)))
        if not found:
            raise CriterionError(
                f"{self.where}: needs the DP coefficients of a regression_coefficients criterion "
                f"({'id ' + repr(self.reference) if self.reference else 'target ' + repr(self.target)}"
                ") evaluated before it on the same context (list it earlier in `acceptance`)")
        cid, beta = found[0]
        feats = list(self.design(ctx).features)
        if ctx.released[cid].get("features") != feats or ctx.released[cid].get("target") != self.target:
            raise CriterionError(f"{self.where}: reference {cid!r} regresses "
                                 f"{ctx.released[cid].get('target')!r} on "
                                 f"{ctx.released[cid].get('features')}, not {self.target!r} on {feats}")
        return cid, beta

    def sensitivity(self, ctx: EvalContext) -> tuple[float, dict]:
        """2(U - L)/n."""
        n = ctx.n
        return 2.0 * (self.U - self.L) / n, {
            "n": n, "bounds": [self.L, self.U], "formula": "2 (U - L) / n",
            "reference": self.reference or f"regression_coefficients on {self.target}"}

    def value(self, ctx: EvalContext, beta_ref: np.ndarray | None = None) -> float:
        """f(T, C) with ``beta_ref`` (default: the released reference; else OLS on T, which is
        for information only -- the sensitivity does not cover that variant)."""
        self._check(ctx)
        des = self.design(ctx)
        if beta_ref is None:
            try:
                _, beta_ref = self._reference(ctx)
            except CriterionError:
                beta_ref = weighted_ols(des, ctx.real)
        beta_c = weighted_ols(des, ctx.synth)
        tt = types_of(ctx.real)  # record types with counts: O(types), not O(n)
        n = ctx.n
        f = mae_difference_exact(des, tt.table, beta_ref, beta_c, tt.weights, n)
        width = exact(self.U) - exact(self.L)
        return lipschitz_float(f, 2 * width / n, 2.0 * (self.U - self.L) / n, width)

    def evaluate(self, ctx: EvalContext, rand: "Randomness"):
        from dpbundle.mechanisms.noise import calibrated_laplace_scale

        self._check(ctx)
        cid, beta_ref = self._reference(ctx)
        sens, inputs = self.sensitivity(ctx)
        inputs = dict(inputs, reference=cid)
        true = self.value(ctx, beta_ref)
        noisy = float(rand.laplace(true, sensitivity=sens, epsilon=self.epsilon,
                                   purpose=self.purpose()))
        return self._result(noisy, sens, inputs, calibrated_laplace_scale(sens, self.epsilon))
