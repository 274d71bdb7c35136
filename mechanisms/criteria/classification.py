"""Criterion ``classification``: a DP logistic regression of a binary outcome on T vs the same fit
on C, reported as coefficient distance or as accuracy difference.

Spec: ``target`` (any released column), ``positive`` (a category / label of the target, or a list
of them: the outcome is y = 1[target in positive], one-vs-rest), optional ``features`` (default:
every released column but the target; unordered categorical ones one-hot coded, first category =
reference -- the design of ``regression_coefficients``), ``report`` (``coefficients``, the
default, or ``accuracy``), ``include_intercept`` (coefficients only, default false),
``reference`` (accuracy only: id of the ``coefficients`` criterion whose DP model is the
real-data model; default the one with the same target and positive labels).

Design. As in ``regression.py``: each design column z_j standardised with C's mean and sd and
clipped to C's bounds [lo_j, hi_j], then tx_j = (2 z_j - (lo_j + hi_j)) / (hi_j - lo_j) in
[-1, 1]; tx_0 = 1 is the intercept's constant; d = number of active design columns + 1.

Functional mechanism (Zhang et al., VLDB 2012, Sec. 5): the logistic loss of one record,
log(1 + e^s) - y s with s = w.tx, is replaced by its second-order Taylor expansion at s = 0,
log 2 + (1/2 - y) s + s^2 / 8. Summed over T this is the polynomial in w

    n log 2  +  sum_j lin_j w_j  +  sum_{j<=k} quad_jk w_j w_k,
    lin_j = sum_i (1/2 - y_i) tx_ij,   quad_jj = (1/8) sum_i tx_ij^2,   quad_jk = (1/4) sum_i tx_ij tx_ik.

The constant n log 2 and quad_00 = n/8 are public (n is public); the other d + d(d+1)/2 - 1
coefficients get Laplace noise with the L1 sensitivity

    Delta = (d + 2)^2 / 8   for d >= 2,      Delta = 1   for d = 1,

d counting the intercept's constant (d = active design columns + 1, as in ``regression.py``).

Derivation (change one record (tx, y) -> (tx', y'), tx_0 = tx'_0 = 1, every |tx_j| <= 1,
y in {0, 1}). Put s = 1/2 - y in {-1/2, 1/2} and w = (4s, tx_0, ..., tx_{d-1}) (d + 1 entries).
The entries of (1/8) w w^T are: (4s)^2/8 = 1/2 and tx_0^2/8 = 1/8 (the same for every record),
(1/8) tx_j^2 = quad_jj (j >= 1), and each off-diagonal pair (twice (1/8) w_a w_b) is
2 (1/8) 4s tx_j = s tx_j = lin_j or 2 (1/8) tx_j tx_k = quad_jk (j < k, j = 0 included). So
the noised vector of one record is the upper triangle of (1/8) w w^T without its two constant
diagonal entries, each off-diagonal pair counted once, and its L1 change is exactly
(1/8) ||w w^T - w' w'^T||_1 (entrywise, full matrix). As for the regression's polynomial: with
p = (w + w')/2, q = (w - w')/2, w w^T - w' w'^T = 2 (p q^T + q p^T), whose entrywise L1 norm is
at most 4 |p|_1 |q|_1 <= (|p|_1 + |q|_1)^2, and |p_i| + |q_i| = max(|w_i|, |w'_i|): 2 for the
4s entry, 1 for tx_0, <= 1 for each of the d - 1 features, so |p|_1 + |q|_1 <= d + 2 and

    ||v(tx, y) - v(tx', y')||_1 <= (d + 2)^2 / 8.

Attained for d >= 2: all of p, q >= 0 makes every inequality an equality, and |p|_1 = |q|_1 is
reachable. Take y = 0, y' = 1 (4s = 2, 4s' = -2: p = 0, q = 2 there), tx = (1, 1, ..., 1) and
tx' = (1, 2 p_1 - 1, ..., 2 p_{d-1} - 1) with p_j in [0, 1] summing to d/2 (q_j = 1 - p_j):
|p|_1 = 1 + d/2 = |q|_1. For instance tx' = (1; 1 x floor(d/2), 0 if d is odd, -1 for the rest);
at d = 2, y flips at tx = tx' = (1, 1) and lin_0, lin_1 move by 1 each: 2 = 16/8. (Corners of
the box alone reach only ((d + 2)^2 - 1)/8 for odd d: the 0 is needed.) For d = 1 the vector is
lin_0 = sum (1/2 - y_i) alone, which moves by |s - s'| <= 1 (here (d + 2)^2 / 8 = 9/8 is not
reached: the 4s entry is all in p or all in q and tx_0 all in p, so 4 |p|_1 |q|_1 <= 4 * 1 * 2).
Brute force over {-1, -1/2, 0, 1/2, 1}^(d-1) x {0, 1}, d = 1..5, finds exactly these maxima
(tests/test_sensitivity_exact.py). The bound of the earlier versions, adding each entry's own
maximum (d + (d - 1)/8 + d(d - 1)/4 = (2 d^2 + 7 d - 1)/8), is sound but up to about twice
as large (d = 8: 22.875 vs 12.5); Zhang et al.'s d^2/4 + d for the same scaling is larger too.

Exact arithmetic (tests/test_sensitivity_exact.py). The DP fit rounds the scaled features to the
dyadic grid of :func:`~dpbundle.mechanisms.criteria.rounding.on_grid` (post-processing of the
public design, |tx| <= 1 kept) before the sums, so every product and partial sum of the vector
is an exact float and the noised vector moves by at most Delta exactly, not Delta plus rounding.

Post-processing: Q (symmetric, Q_jj = quad_jj, Q_jk = quad_jk / 2) with eigenvalues clipped from
below at sqrt(d) * scale (public), w = argmin w'Qw + lin.w = -Q^-1 lin / 2, mapped back to
beta of the linear predictor beta_0 + z.beta. The prediction is positive when beta_0 + z.beta > 0.
C's model is the same objective minimised exactly (no noise) on C; ``value`` uses the exact fit
on T. (The Taylor objective's minimiser is 4 (X'X)^-1 X'(y - 1/2): a linear probability model
scaled by 4, so the sign rule predicts "positive" where the fitted share exceeds 1/2.)

``report: coefficients``: dp_value = L1 distance between the DP coefficients on T and C's
coefficients (feature coefficients; with ``include_intercept`` also the intercept). The noise
is inside the fit (mechanism ``functional_mechanism``). The DP coefficients are stored in
``ctx.released[id]`` for an accuracy criterion (public post-processing).

``report: accuracy``: f(T, C) = |acc_T(beta_ref) - acc_T(beta_C)| with acc_T(beta) = (1/n)
sum_i 1[prediction_i = y_i] and beta_ref the DP coefficients of a ``coefficients`` criterion
evaluated earlier on the same context (both models are then public and fixed, as for
``regression_mae_difference``). Sensitivity 2/n: each record contributes g_i =
1[beta_ref right on i] - 1[beta_C right on i] in {-1, 0, 1}; changing one record changes one
g_i by at most 2, so (1/n) sum g_i and its absolute value by at most 2/n. Laplace release of
``lipschitz_float(|G|/n, 2/n, fl(2/n), 1)`` with the integer G = sum_i g_i (criteria/rounding.py:
neighbours' floats differ by less than fl(2/n) exactly).

Sums over records are computed on record types weighted by their counts
(``dpbundle.mechanisms.cells``): sum_i g(x_i) = sum_t c_t g(x_t).

Arithmetic versions (``dpbundle.mechanisms.arithmetic``, docs/determinism.md): version 2 (new
releases) computes the polynomial's sums, the predictions, the clipped solve and C's
minimum-norm fit with fixed-order routines (the same bits on every CPU and BLAS kernel);
version 1 (bundles of dpbundle <= 0.2) with numpy's BLAS and LAPACK.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from .. import arithmetic as ar
from ..cells import types_of
from .base import _column_name, Criterion, CriterionError, EvalContext, register
from .rounding import lipschitz_float, on_grid
from .regression import (RegressionDesign, _parse_features, _solve, _triu, cached_design,
                         coef_distance, linear)

if TYPE_CHECKING:  # pragma: no cover
    from dpbundle.mechanisms.coding import Coded
    from dpbundle.mechanisms.noise import Randomness

__all__ = ["Classification", "logistic_fm_sensitivity", "logistic_fm_vector", "positive_codes",
           "REPORTS"]

REPORTS = ("coefficients", "accuracy")


def logistic_fm_sensitivity(d: int) -> float:
    """(d + 2)^2 / 8 for d >= 2 and 1 for d = 1: the exact L1 sensitivity of
    :func:`logistic_fm_vector` under a changed record (module docstring), d counting the
    intercept's constant. An exact float (a multiple of 1/8)."""
    d = int(d)
    if d < 1:
        raise ValueError(f"logistic_fm_sensitivity: d must be >= 1 (the intercept counts), got {d}")
    return 1.0 if d == 1 else (d + 2) * (d + 2) / 8.0


def logistic_fm_vector(tX: np.ndarray, y: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    """[lin (d), quad upper triangle j <= k without (0, 0)] of the Taylor logistic loss; row i
    counts ``w[i]`` times (record types with their counts; default once)."""
    d = tX.shape[1]
    if ar.current() == ar.FIXED:
        lin, G = ar.cross(tX, 0.5 - np.asarray(y, dtype=np.float64), w), ar.gram(tX, w)
    else:
        wX = tX if w is None else tX * np.asarray(w, dtype=np.float64)[:, None]
        lin = wX.T @ (0.5 - y)
        G = wX.T @ tX
    iu, ju = _triu(d)
    quad = np.where(iu == ju, 0.125, 0.25) * G[iu, ju]
    return np.concatenate([lin, quad[1:]])


def _quadratic(vec: np.ndarray, d: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(Q, lin) of the polynomial w'Qw + lin.w from a (noisy) vector of logistic_fm_vector."""
    lin = vec[:d]
    quad = np.concatenate([[n / 8.0], vec[d:]])
    iu, ju = _triu(d)
    Q = np.zeros((d, d))
    Q[iu, ju] = np.where(iu == ju, quad, 0.5 * quad)
    Q[ju, iu] = Q[iu, ju]
    return Q, lin


def exact_fit(des: RegressionDesign, coded: "Coded", y: np.ndarray,
              w: np.ndarray | None = None) -> np.ndarray:
    """Minimiser of the Taylor logistic objective on ``coded`` (no noise; minimum norm when
    singular), as beta of beta_0 + z.beta; with ``w``, row i of ``coded`` counts w[i] times."""
    tX = des.tx(coded)
    n = coded.n if w is None else float(np.sum(w))
    Q, lin = _quadratic(logistic_fm_vector(tX, y, w), tX.shape[1], n)
    if ar.current() == ar.FIXED:
        w = ar.lstsq_sym(Q, -0.5 * lin, rcond=1e-12)
    else:
        w, *_ = np.linalg.lstsq(Q, -0.5 * lin, rcond=1e-12)
    return des.unscale_logit(w)


def positive_codes(coded: "Coded", target: str, positive: list[str], where: str) -> np.ndarray:
    """Boolean table over the target's codes: True for a code whose category name or label is
    one of ``positive``. Errors when no code or every code is positive."""
    cc = coded.columns[coded.column(target)]
    names = cc.categories if cc.categories is not None else cc.labels
    table = np.array([str(a) in positive or str(b) in positive
                      for a, b in zip(names, cc.labels)], dtype=bool)
    if not table.any():
        raise CriterionError(f"{where}.positive: none of {positive} is a category or label of "
                             f"{target!r} (its labels: {', '.join(cc.labels)})")
    if table.all():
        raise CriterionError(f"{where}.positive: every category of {target!r} is positive; "
                             "leave at least one negative")
    return table


def accuracy(des: RegressionDesign, coded: "Coded", y: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """1[prediction right] per record; the prediction is positive when beta_0 + z.beta > 0."""
    pred = linear(beta, des.z(coded)) > 0
    return (pred == (y > 0.5)).astype(np.float64)


@register
class Classification(Criterion):
    """DP logistic regression (functional mechanism) of a one-vs-rest outcome: coefficient
    distance, or accuracy difference against the DP model."""

    type: ClassVar[str] = "classification"
    mechanism: ClassVar[str] = "functional_mechanism"  # per instance: laplace for accuracy
    summary: ClassVar[str] = ("logistic regression of 1[target in positive]: L1 distance between "
                              "DP coefficients on T (functional mechanism) and the fit on C, or "
                              "|accuracy on T of the DP model - of C's model| (sensitivity 2/n)")
    parameters: ClassVar[dict[str, str]] = {
        "target": "the classified column",
        "positive": "category/label (or list) of the target counted as the positive class",
        "features": "feature columns (default: every released column but the target; unordered "
                    "categorical ones one-hot coded, first category = reference)",
        "report": "coefficients (default) or accuracy",
        "include_intercept": "coefficients: include |intercept difference| (default false)",
        "reference": "accuracy: id of the coefficients criterion whose DP model is the real "
                     "model (default: the one with the same target and positive labels)",
    }

    def __init__(self, entry: dict) -> None:
        super().__init__(entry)
        self.target: str = _column_name(entry, "target", self.where)
        pos = entry.get("positive")
        pos_list = pos if isinstance(pos, list) else [pos]
        if (not pos_list or not all(isinstance(p, (str, int)) and not isinstance(p, bool)
                                    for p in pos_list)):
            raise CriterionError(f"{self.where}.positive: expected a label or a list of labels, "
                                 f"got {pos!r}")
        self.positive: list[str] = [str(p) for p in pos_list]
        self.features = _parse_features(entry, self.where)
        self.report = entry.get("report", "coefficients")
        if self.report not in REPORTS:
            raise CriterionError(f"{self.where}.report: expected one of {list(REPORTS)}, "
                                 f"got {self.report!r}")
        self.mechanism = "functional_mechanism" if self.report == "coefficients" else "laplace"  # type: ignore[misc]
        ii = entry.get("include_intercept", False)
        if not isinstance(ii, bool):
            raise CriterionError(f"{self.where}.include_intercept: expected true/false")
        ref = entry.get("reference")
        if ref is not None and not isinstance(ref, str):
            raise CriterionError(f"{self.where}.reference: expected a criterion id")
        if self.report == "coefficients" and ref is not None:
            raise CriterionError(f"{self.where}.reference: only for report: accuracy")
        if self.report == "accuracy" and "include_intercept" in entry:
            raise CriterionError(f"{self.where}.include_intercept: only for report: coefficients")
        self.include_intercept: bool = ii
        self.reference: str | None = ref

    def metric_range(self) -> tuple[float, float]:
        """coefficients: an L1 distance, [0, inf); accuracy: |difference of shares|, [0, 1]."""
        return (0.0, math.inf) if self.report == "coefficients" else (0.0, 1.0)

    # ---- public part

    def design(self, ctx: EvalContext) -> RegressionDesign:
        return cached_design(ctx.synth, self.target, 0.0, 1.0, self.features)

    def y(self, coded: "Coded") -> np.ndarray:
        """1[target in positive] per record, as 0.0 / 1.0."""
        table = positive_codes(coded, self.target, self.positive, self.where)
        return table[coded.codes[:, coded.column(self.target)]].astype(np.float64)

    def sensitivity(self, ctx: EvalContext) -> tuple[float, dict]:
        """coefficients: (d + 2)^2 / 8 (1 at d = 1; d from C); accuracy: 2/n."""
        n = ctx.n
        if self.report == "accuracy":
            return 2.0 / n, {"n": n, "formula": "2 / n", "positive": self.positive,
                             "reference": self.reference or f"classification of {self.target}"}
        des = self.design(ctx)
        d = des.d
        return logistic_fm_sensitivity(d), {
            "n": n, "d": d, "intercept_counted_in_d": True, "features": list(des.features),
            "features_constant_in_C": list(des.dropped), "positive": self.positive,
            "feature_means_C": des.mu.tolist(), "feature_sds_C": des.sd.tolist(),
            "feature_bounds_C": [des.lo.tolist(), des.hi.tolist()],
            "formula": "(d + 2)^2 / 8 (1 if d = 1)", "include_intercept": self.include_intercept,
            "note": ("Laplace noise is added to the Taylor-expanded logistic loss's polynomial "
                     "coefficients (L1 sensitivity above); dp_value is the L1 distance of the "
                     "resulting DP coefficients to C's fit, not a noisy distance")}

    def synth_coefficients(self, ctx: EvalContext) -> np.ndarray:
        tc = types_of(ctx.synth)
        return exact_fit(self.design(ctx), tc.table, self.y(tc.table), tc.weights)

    def _reference(self, ctx: EvalContext) -> tuple[str, np.ndarray]:
        feats = list(self.design(ctx).features)
        for cid, rel in ctx.released.items():
            if rel.get("type") != self.type or rel.get("report") != "coefficients":
                continue
            if self.reference is not None and cid != self.reference:
                continue
            if self.reference is None and (rel.get("target") != self.target
                                           or rel.get("positive") != self.positive):
                continue
            if rel.get("features") != feats:
                raise CriterionError(f"{self.where}: reference {cid!r} uses the features "
                                     f"{rel.get('features')}, not {feats}")
            return cid, np.asarray(rel["coefficients"], dtype=np.float64)
        raise CriterionError(
            f"{self.where}: needs the DP coefficients of a classification criterion with report: "
            f"coefficients ({'id ' + repr(self.reference) if self.reference else 'target ' + repr(self.target)}"
            ") evaluated before it on the same context (list it earlier in `acceptance`)")

    # ---- private part

    def value(self, ctx: EvalContext, beta_ref: np.ndarray | None = None) -> float:
        """f(T, C) without noise: coefficients, L1(exact fit on T, fit on C); accuracy, with
        ``beta_ref`` (default: the released reference, else the exact fit on T)."""
        self._check(ctx)
        des = self.design(ctx)
        tt = types_of(ctx.real)  # record types with counts: O(types), not O(n)
        t, w = tt.table, tt.weights
        y_t = self.y(t)
        beta_c = self.synth_coefficients(ctx)
        if self.report == "coefficients":
            return coef_distance(exact_fit(des, t, y_t, w), beta_c, self.include_intercept)
        if beta_ref is None:
            try:
                _, beta_ref = self._reference(ctx)
            except CriterionError:
                beta_ref = exact_fit(des, t, y_t, w)
        g = accuracy(des, t, y_t, beta_ref) - accuracy(des, t, y_t, beta_c)
        # G = sum_i g_i is an integer (exact: counts and g in {-1, 0, 1}); |G|/n is released
        # through lipschitz_float, so neighbours' floats differ by less than fl(2/n) exactly
        G = int(np.sum(np.rint(w).astype(np.int64) * g.astype(np.int64)))
        n = int(round(float(w.sum())))
        return lipschitz_float(Fraction(abs(G), n), Fraction(2, n), 2.0 / n, 1)

    def dp_coefficients(self, ctx: EvalContext, rand: "Randomness") -> tuple[np.ndarray, float]:
        """The functional-mechanism fit on T -> (beta, noise scale)."""
        from dpbundle.mechanisms.noise import calibrated_laplace_scale

        des = self.design(ctx)
        d = des.d
        sens = logistic_fm_sensitivity(d)
        tt = types_of(ctx.real)
        # features on the exact grid: every sum of the vector is an exact float (module docstring)
        vec = logistic_fm_vector(on_grid(des.tx(tt.table), ctx.n), self.y(tt.table), tt.weights)
        noisy = np.asarray(rand.laplace(vec, sensitivity=sens, epsilon=self.epsilon,
                                        purpose=self.purpose()), dtype=np.float64)
        scale = calibrated_laplace_scale(sens, self.epsilon, vector=True)
        Q, lin = _quadratic(noisy, d, ctx.n)
        w = _solve(Q, -0.5 * lin, math.sqrt(d) * scale)
        return des.unscale_logit(w), scale

    def evaluate(self, ctx: EvalContext, rand: "Randomness"):
        from dpbundle.mechanisms.noise import calibrated_laplace_scale

        self._check(ctx)
        sens, inputs = self.sensitivity(ctx)
        beta_c = self.synth_coefficients(ctx)
        if self.report == "coefficients":
            beta, scale = self.dp_coefficients(ctx, rand)
            ctx.released[self.id] = {"type": self.type, "report": "coefficients",
                                     "target": self.target, "positive": self.positive,
                                     "features": list(self.design(ctx).features),
                                     "coefficients": beta}
            inputs = dict(inputs, dp_coefficients=beta.tolist(),
                          synthetic_coefficients=beta_c.tolist())
            return self._result(coef_distance(beta, beta_c, self.include_intercept), sens, inputs, scale)
        cid, beta_ref = self._reference(ctx)
        true = self.value(ctx, beta_ref)
        noisy = float(rand.laplace(true, sensitivity=sens, epsilon=self.epsilon,
                                   purpose=self.purpose()))
        return self._result(noisy, sens, dict(inputs, reference=cid),
                            calibrated_laplace_scale(sens, self.epsilon))
