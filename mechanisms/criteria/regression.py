"""Criterion ``regression_coefficients``: DP linear regression on T vs OLS on C.

Spec: ``target``, ``bounds: [L, U]`` (public bounds of the target), ``fit`` (default
``functional_mechanism``; or ``sufficient_statistics``), optional ``features`` (default: every
released column except the target), optional ``include_intercept`` (default false: the distance
is over the feature coefficients only; see below).

Design (public, from C only). y = clip(values[target], L, U) (the released numbers). Design
columns x_j: an ordered (binned) feature enters with its released numbers; an unordered
categorical feature with k categories enters one-hot coded as k - 1 indicators 1[category = c_i],
i = 2..k (the first category is the reference level) -- never as code numbers. Each design column
is standardised with C's mean mu_j and standard deviation sd_j: z_j = (x_j - mu_j)/sd_j; bounds
[lo_j, hi_j] = min/max of z_j over C (an indicator present both as 0 and 1 in C has lo_j, hi_j =
the standardised 0 and 1, so its scaled value below is exactly -1 or +1). T's z_j are clipped to [lo_j, hi_j]
(otherwise the sensitivity below is wrong). Features constant in C (lo_j = hi_j) get
coefficient 0 in both fits and are left out of the design (public decision). Coefficients are
reported as beta = (beta_0, beta_1..p) of y ~ beta_0 + sum_j beta_j z_j (y in its own units, one
standard deviation of C per feature).

DP fit on T. Scale into [-1, 1]: ty = (2y - (L+U))/(U-L), tx_j = (2 z_j - (lo_j+hi_j))/(hi_j-lo_j),
plus the intercept's constant feature tx_0 = 1, so d = p + 1 features (intercept counted; p = the
number of design columns not constant in C, one-hot indicators counted one by one).
The sensitivities below use only |ty| <= 1 and |tx_j| <= 1 for every coordinate, which the
scaling guarantees for indicators as for numbers, so they hold with this d. (One-hot structure
would allow less: two records differ in at most 2 indicators of a column, so |q|_1 below is at
most 1 + p_numeric + 2 per categorical column; we keep the simpler (1 + d)^2, an upper bound.)
* ``functional_mechanism`` (Zhang et al., VLDB 2012): the squared loss sum_i (ty_i - w.tx_i)^2 is
  the polynomial  sum ty^2  +  sum_j (-2 sum ty tx_j) w_j  +  sum_j (sum tx_j^2) w_j^2  +
  sum_{j<k} (2 sum tx_j tx_k) w_j w_k, whose coefficient vector has 1 + d + d(d+1)/2 entries.
  One record contributes |ty|^2 + 2|ty| sum|tx_j| + (sum|tx_j|)^2 = (|ty| + sum_j |tx_j|)^2
  <= (1 + d)^2 in L1: the entrywise L1 norm of w w^T with w = (ty, tx) (an off-diagonal pair
  of the symmetric matrix is one coefficient 2 w_j w_k). Zhang et al. bound a changed record by
  the triangle inequality, 2(1 + d)^2 = 2(1 + 2d + d^2); the exact worst case is half that:
  with p = (w + w')/2 and q = (w - w')/2, w w^T - w' w'^T = 2(p q^T + q p^T), whose entrywise
  L1 norm is at most 4 |p|_1 |q|_1, and |p_i| + |q_i| = max(|w_i|, |w'_i|) <= 1 gives
  |p|_1 + |q|_1 <= 1 + d, so 4 |p|_1 |q|_1 <= (1 + d)^2. We use Delta = (1 + d)^2, which
  is attained (tests/test_criteria_regression.py), so half the noise of the published bound
  for the same epsilon. Laplace noise with that L1 sensitivity is added to all entries with
  one vector call ``rand.laplace``.
* ``sufficient_statistics``: noisy X'y (d entries, |ty tx_j| <= 1) and the upper triangle of
  X'X (d(d+1)/2 entries, |tx_j tx_k| <= 1) except the (0, 0) entry = n (public, not noised):
  L1 sensitivity d(d+3)/2, the exact worst case of a changed record (derivation in
  :func:`ss_sensitivity`; attained by y = 1, x = 1 against y' = -1, x' = 0). Bounding every
  entry's change by 2 separately gives 2(d + d(d+1)/2 - 1), about twice as much (52 vs 27 at
  d = 6).
Post-processing: the noisy quadratic Q (symmetric) is made positive definite by clipping its
eigenvalues from below at sqrt(d) * scale (the order of the noise's spectral norm, public), then
w = argmin, and w is mapped back: beta_j = (U-L)/2 * w_j * 2/(hi_j-lo_j), beta_0 = (U-L)/2 *
(w_0 - sum_j w_j (lo_j+hi_j)/(hi_j-lo_j)) + (L+U)/2.

Released value: L1 distance between the DP coefficients on T and the OLS coefficients on C (over
the feature coefficients; with ``include_intercept`` also |beta_0 - beta_0'|). The noise is
*inside the fit*, not added to the distance: the result row reports mechanism =
``functional_mechanism`` (or ``sufficient_statistics``), sensitivity = the L1 sensitivity of the
noised vector, noise_scale = its Laplace scale (per entry). The DP coefficients are stored in
``ctx.released[id]`` for the MAE criterion (public post-processing of this release).
``value(ctx)`` (the private, non-noisy counterpart) is the same distance with OLS on T.

Exact arithmetic. Before the DP fit the scaled features and target (all in [-1, 1]) are
rounded to the dyadic grid of :func:`~dpbundle.mechanisms.criteria.rounding.on_grid` (2^-k,
2k + bitlen(n) <= 53; k = 17 at n = 160,000): the records stay in [-1, 1], so every
sensitivity above holds for them, and every product and partial sum of the noised vector is an
exact float, so the vector moves by at most Delta exactly (a float vector summed with rounding
could move by Delta plus the rounding, which the noise layer's one-ulp slack does not cover).

Every sum over records is computed on record types with their counts as weights
(``dpbundle.mechanisms.cells``): sum_i g(x_i) = sum_t c_t g(x_t), so the fits cost O(types).

Arithmetic versions (``dpbundle.mechanisms.arithmetic``, docs/determinism.md). Version 2 (new
releases) computes C's means and standard deviations, the Gram matrices and cross products,
the predictions, the eigen-decomposition of the clipped solve and OLS's minimum-norm least
squares with fixed-order routines (fsum, column-ordered elementwise products, cyclic Jacobi),
the same bits on every CPU and BLAS kernel; version 1 (bundles of dpbundle <= 0.2) with numpy's
BLAS and LAPACK, as those bundles were made.
"""
from __future__ import annotations

import math
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from .. import arithmetic as ar
from ..cells import types_of
from .base import _column_name, Criterion, CriterionError, EvalContext, register
from .rounding import on_grid

if TYPE_CHECKING:  # pragma: no cover
    from dpbundle.mechanisms.coding import Coded
    from dpbundle.mechanisms.noise import Randomness

__all__ = ["RegressionCoefficients", "RegressionDesign", "design_columns", "ols", "weighted_ols", "fm_vector", "ss_vector",
           "fm_sensitivity", "ss_sensitivity", "FITS"]

FITS = ("functional_mechanism", "sufficient_statistics")


def fm_sensitivity(d: int) -> float:
    """(1 + d)^2, d features including the intercept's constant (see the module docstring:
    the exact worst case of a changed record, half of Zhang et al.'s 2(1 + 2d + d^2))."""
    return float((1 + d) * (1 + d))


def ss_sensitivity(d: int) -> float:
    """d (d + 3) / 2: the exact L1 sensitivity of :func:`ss_vector` (X'y and X'X's upper
    triangle without the public (0,0) entry = n), d features including the intercept's constant.

    Derivation. One record is w = (y, u) with u = (1, x_1..x_p), p = d - 1, |y|, |x_j| <= 1; its
    contribution to ss_vector is y u (d entries) and the upper triangle of u u^T without (0,0).
    Change it to w' = (y', u') and write u = a + b, u' = a - b (a = (u + u')/2, b = (u - u')/2,
    so a_0 = 1, b_0 = 0 and |a_j| + |b_j| = max(|x_j|, |x'_j|) <= 1), y = c + e, y' = c - e
    (|c| + |e| <= 1). Then y u - y' u' = 2(c b + e a) and u_j u_k - u'_j u'_k = 2(a_j b_k +
    b_j a_k), so with alpha_j = |a_j|, beta_j = |b_j|, A = sum_j alpha_j, B = sum_j beta_j:

        |y u - y' u'|_1            <= 2 (|c| B + |e| A)
        sum_{j<=k} |u_j u_k - ...| <= sum_{j<k} 2(alpha_j beta_k + beta_j alpha_k)
                                      + sum_j 4 alpha_j beta_j = 2 A B + 2 sum_j alpha_j beta_j.

    Every coefficient is >= 0, so the bound is largest with alpha_j + beta_j = 1 (j >= 1) and
    |c| + |e| = 1; put t_j = beta_j, T = sum_j t_j, so A = 1 + p - T, B = T. The bound is linear
    in |e|, so |e| in {0, 1}; it is concave in t, and its gradient vanishes at
    * |e| = 1: f = 2(1 + p - T) + 2 T (1 + p - T) + 2 sum_j t_j (1 - t_j), maximal at
      t_j = 1/2 (T = p/2): f = (1 + p)(4 + p)/2 = d (d + 3)/2;
    * |e| = 0: f = 2 T + 2 T (1 + p - T) + 2 sum_j t_j (1 - t_j), maximal at T = p (p + 3) /
      (2 (p + 1)): f = p (p + 3)^2 / (2 (p + 1)), which is (1 + p)(4 + p)/2 - 2/(p + 1), smaller.
    So Delta <= d (d + 3)/2, and it is attained (all a, b >= 0 make every inequality an
    equality): y = 1, x = (1, ..., 1) against y' = -1, x' = (0, ..., 0) -- X'y moves by
    2 + p, each of the p (0, k) entries, p diagonal entries and p (p - 1)/2 products by 1:
    2 + p + p (p + 3)/2 = d (d + 3)/2 (tests/test_criteria_regression.py searches the corners
    and zeros of the box exhaustively). d = 6: 27, where the triangle inequality, entry by
    entry, gave 2 (d + d (d + 1)/2 - 1) = 52.
    """
    d = int(d)
    if d < 1:
        raise ValueError(f"ss_sensitivity: d must be >= 1 (the intercept counts), got {d}")
    return float(d * (d + 3) // 2)


def _parse_bounds(entry: dict, where: str) -> tuple[float, float]:
    b = entry.get("bounds")
    if (not isinstance(b, (list, tuple)) or len(b) != 2
            or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in b)
            or not b[0] < b[1]):
        raise CriterionError(f"{where}.bounds: expected [L, U] with L < U, got {b!r}")
    return float(b[0]), float(b[1])


def _parse_features(entry: dict, where: str) -> list[str] | None:
    f = entry.get("features")
    if f is not None and (not isinstance(f, list) or not all(isinstance(x, str) for x in f)):
        raise CriterionError(f"{where}.features: expected a list of column names, got {f!r}")
    return f


def parse_regression_entry(entry: dict, where: str) -> tuple[str, float, float, list[str] | None]:
    """(target, L, U, features) of a regression-type spec entry, with clear errors."""
    t = _column_name(entry, "target", where)
    L, U = _parse_bounds(entry, where)
    return t, L, U, _parse_features(entry, where)


def design_columns(synth: "Coded", target: str, features: list[str] | None
                   ) -> list[tuple[str, str, np.ndarray]]:
    """(design name, source column, raw number of each code) of every design column, from the
    public codings only: an ordered (binned) feature is one column, its released numbers; an
    unordered categorical feature with k categories is k - 1 one-hot indicator columns
    ``"col=label"`` (indicator of category i >= 1 as a per-code 0/1 table; the first category
    is the reference level), never its code numbers."""
    synth.column(target)
    if features is None:
        names = [c.name for c in synth.columns if c.name != target]
    else:
        for f in features:
            synth.column(f)
            if f == target:
                raise CriterionError(f"regression: the target {target!r} cannot be a feature")
        names = list(dict.fromkeys(features))
    out = []
    for c in names:
        cc = synth.columns[synth.column(c)]
        if cc.ordered:
            out.append((c, c, np.asarray(cc.values, dtype=np.float64)))
        else:
            for i in range(1, cc.size):
                out.append((f"{c}={cc.labels[i]}", c, (np.arange(cc.size) == i).astype(np.float64)))
    return out


def _mean_sd(cnt: np.ndarray, vals: np.ndarray, n: int) -> tuple[float, float]:
    """Mean and (population) standard deviation of ``vals`` counted ``cnt`` times each."""
    if ar.current() == ar.FIXED:
        m = ar.fsum_dot(cnt, vals) / n
        return m, math.sqrt(ar.fsum_dot(cnt, (vals - m) ** 2) / n)
    m = float(cnt @ vals) / n
    return m, float(np.sqrt(cnt @ (vals - m) ** 2 / n))


@dataclass(frozen=True)
class RegressionDesign:
    """Public regression design derived from C: design columns, standardisation and bounds."""

    target: str
    L: float
    U: float
    features: tuple[str, ...]     # the active design columns (constant-in-C ones left out)
    dropped: tuple[str, ...]      # design columns constant in C (coefficient 0)
    mu: np.ndarray
    sd: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    sources: tuple[str, ...] = ()           # released column of each active design column
    tables: tuple[np.ndarray, ...] = ()     # raw number of each code, per active design column

    @classmethod
    def from_synth(cls, synth: "Coded", target: str, L: float, U: float,
                   features: list[str] | None = None) -> "RegressionDesign":
        cols = design_columns(synth, target, features)
        # per-code tables from C's code counts (its record types: no (n, p) float matrix)
        n = synth.n
        types = types_of(synth)
        mu, sd, lo, hi = [], [], [], []
        counts: dict[str, np.ndarray] = {}
        for _, src, vals in cols:
            if src not in counts:
                counts[src] = types.column_counts(synth.column(src)).astype(np.float64)
            cnt = counts[src]
            m, s = _mean_sd(cnt, vals, n)
            present = (vals[cnt > 0] - m) / (s if s > 0 else 1.0)
            mu.append(m), sd.append(s), lo.append(present.min()), hi.append(present.max())
        mu_a, sd_a = np.asarray(mu, float), np.asarray(sd, float)
        lo_a, hi_a = np.asarray(lo, float), np.asarray(hi, float)
        active = (sd_a > 0) & (hi_a > lo_a)
        keep = np.flatnonzero(active)
        return cls(target=target, L=L, U=U,
                   features=tuple(cols[i][0] for i in keep),
                   dropped=tuple(cols[i][0] for i in np.flatnonzero(~active)),
                   mu=mu_a[keep], sd=sd_a[keep], lo=lo_a[keep], hi=hi_a[keep],
                   sources=tuple(cols[i][1] for i in keep),
                   tables=tuple(cols[i][2] for i in keep))

    @property
    def d(self) -> int:
        """Number of scaled features including the constant."""
        return len(self.features) + 1

    def y(self, coded: "Coded") -> np.ndarray:
        return np.clip(coded.values_of(self.target), self.L, self.U)

    def z(self, coded: "Coded") -> np.ndarray:
        """Standardised features, clipped to C's bounds, shape (n, p)."""
        if not self.features:
            return np.zeros((coded.n, 0))
        Z = np.empty((coded.n, len(self.features)))
        for k, (c, raw) in enumerate(zip(self.sources, self.tables)):
            j = coded.column(c)
            table = np.clip((raw - self.mu[k]) / self.sd[k], self.lo[k], self.hi[k])
            Z[:, k] = table[coded.codes[:, j]]
        return Z

    def tx(self, coded: "Coded") -> np.ndarray:
        """tX: the constant column first, then each z_j scaled into [-1, 1] with C's bounds."""
        Z = self.z(coded)
        tx = (2.0 * Z - (self.lo + self.hi)) / (self.hi - self.lo)
        tx = np.clip(tx, -1.0, 1.0)  # guards rounding only
        return np.column_stack([np.ones(coded.n), tx])

    def scaled(self, coded: "Coded") -> tuple[np.ndarray, np.ndarray]:
        """(tX with the constant column first, ty), all entries in [-1, 1]."""
        ty = np.clip((2.0 * self.y(coded) - (self.L + self.U)) / (self.U - self.L), -1.0, 1.0)
        return self.tx(coded), ty

    def unscale_logit(self, w: np.ndarray) -> np.ndarray:
        """Coefficients w of a linear predictor w.tx -> beta of beta_0 + beta.z (same predictor)."""
        width = self.hi - self.lo
        b0 = w[0] - np.sum(w[1:] * (self.lo + self.hi) / width)
        return np.concatenate([[b0], 2.0 * w[1:] / width])

    def unscale(self, w: np.ndarray) -> np.ndarray:
        """Coefficients w of ty ~ w.tx -> beta of y ~ beta_0 + beta.z."""
        half = 0.5 * (self.U - self.L)
        width = self.hi - self.lo
        slopes = half * w[1:] * 2.0 / width
        b0 = half * (w[0] - np.sum(w[1:] * (self.lo + self.hi) / width)) + 0.5 * (self.L + self.U)
        return np.concatenate([[b0], slopes])

    def predict(self, beta: np.ndarray, coded: "Coded") -> np.ndarray:
        """clip(beta_0 + z.beta, L, U)."""
        return np.clip(linear(beta, self.z(coded)), self.L, self.U)


def linear(beta: np.ndarray, Z: np.ndarray) -> np.ndarray:
    """beta_0 + Z beta_1..p per row (version 2: :func:`arithmetic.matvec`, fixed order)."""
    if ar.current() == ar.FIXED:
        return ar.matvec(Z, np.asarray(beta, dtype=np.float64)[1:], float(beta[0]))
    return beta[0] + Z @ beta[1:]


# synth object -> {key: design}; weak, so that a cached design never keeps a candidate (n rows)
# alive after its iteration
_DESIGN_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def cached_design(synth: "Coded", target: str, L: float, U: float,
                  features: list[str] | None) -> RegressionDesign:
    """RegressionDesign.from_synth, memoised on the (immutable) candidate object."""
    key = (target, L, U, None if features is None else tuple(features))
    designs = _DESIGN_CACHE.setdefault(synth, {})
    if key not in designs:
        designs[key] = RegressionDesign.from_synth(synth, target, L, U, features)
    return designs[key]


def ols(Z: np.ndarray, y: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    """Least squares of y on [1, Z] via the normal equations (minimum-norm if rank deficient:
    pinv(A'A) A'y = pinv(A) y); row i counts ``w[i]`` times (record types with their counts)."""
    if ar.current() == ar.FIXED:
        return _ols_fixed(Z, y, w)
    if w is None:
        wZ, total, sum_y = Z, Z.shape[0], y.sum()
    else:
        w = np.asarray(w, dtype=np.float64)
        wZ, total, sum_y = Z * w[:, None], w.sum(), np.sum(w * y)
    p = Z.shape[1]
    G = np.empty((p + 1, p + 1))
    G[0, 0] = total
    G[0, 1:] = G[1:, 0] = wZ.sum(axis=0)
    G[1:, 1:] = wZ.T @ Z
    b = np.concatenate([[sum_y], wZ.T @ y])
    beta, *_ = np.linalg.lstsq(G, b, rcond=1e-12)
    return beta


def _ols_fixed(Z: np.ndarray, y: np.ndarray, w: np.ndarray | None) -> np.ndarray:
    """:func:`ols` in arithmetic version 2: the normal equations of [1, Z] from fsum sums
    (:func:`arithmetic.gram`, :func:`arithmetic.cross`), solved by :func:`arithmetic.lstsq_sym`
    (the minimum-norm solution with lstsq's rcond)."""
    A = np.column_stack([np.ones(Z.shape[0]), np.asarray(Z, dtype=np.float64)])
    return ar.lstsq_sym(ar.gram(A, w), ar.cross(A, y, w), rcond=1e-12)


def weighted_ols(des: RegressionDesign, coded: "Coded") -> np.ndarray:
    """OLS of y on the design, on the record types of ``coded`` weighted by their counts."""
    types = types_of(coded)
    return ols(des.z(types.table), des.y(types.table), types.weights)


def _triu(d: int) -> tuple[np.ndarray, np.ndarray]:
    return np.triu_indices(d)


def _weighted(tX: np.ndarray, w: np.ndarray | None) -> np.ndarray:
    """tX with row i multiplied by w[i] (tX itself without weights)."""
    return tX if w is None else tX * np.asarray(w, dtype=np.float64)[:, None]


def fm_vector(tX: np.ndarray, ty: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    """Polynomial coefficients of sum_i c_i (ty_i - w.tx_i)^2: [const, linear (d), monomials
    j<=k]; row i counts c_i = ``w[i]`` times (a record type and its count; default once)."""
    d = tX.shape[1]
    if ar.current() == ar.FIXED:
        G, lin = ar.gram(tX, w), ar.cross(tX, ty, w)
        iu, ju = _triu(d)
        quad = np.where(iu == ju, 1.0, 2.0) * G[iu, ju]
        const = ar.fsum_dot(ty if w is None else np.asarray(w, dtype=np.float64) * ty, ty)
        return np.concatenate([[const], -2.0 * lin, quad])
    wX = _weighted(tX, w)
    G = wX.T @ tX
    iu, ju = _triu(d)
    quad = np.where(iu == ju, 1.0, 2.0) * G[iu, ju]
    const = ty @ ty if w is None else np.sum(w * ty * ty)  # (no BLAS call on the k types)
    return np.concatenate([[const], -2.0 * (wX.T @ ty), quad])


def ss_vector(tX: np.ndarray, ty: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    """[X'y (d), X'X upper triangle without (0,0)]; row i counts ``w[i]`` times."""
    d = tX.shape[1]
    iu, ju = _triu(d)
    if ar.current() == ar.FIXED:
        return np.concatenate([ar.cross(tX, ty, w), ar.gram(tX, w)[iu, ju][1:]])
    wX = _weighted(tX, w)
    G = wX.T @ tX
    return np.concatenate([wX.T @ ty, G[iu, ju][1:]])


def _solve(Q: np.ndarray, b: np.ndarray, floor: float) -> np.ndarray:
    """argmin w'Qw - 2b'w with Q's eigenvalues clipped below at ``floor`` (Q symmetric);
    version 2: :func:`arithmetic.solve_clipped` (Jacobi, no LAPACK)."""
    if ar.current() == ar.FIXED:
        return ar.solve_clipped(Q, b, floor)
    lam, V = np.linalg.eigh(0.5 * (Q + Q.T))
    lam = np.maximum(lam, floor)
    return V @ ((V.T @ b) / lam)


def solve_fm(vec: np.ndarray, d: int, floor: float) -> np.ndarray:
    """Minimiser of the (noisy) functional-mechanism polynomial."""
    lin = vec[1:1 + d]
    quad = vec[1 + d:]
    iu, ju = _triu(d)
    Q = np.zeros((d, d))
    Q[iu, ju] = np.where(iu == ju, quad, 0.5 * quad)
    Q[ju, iu] = Q[iu, ju]
    return _solve(Q, -0.5 * lin, floor)


def solve_ss(vec: np.ndarray, d: int, n: int, floor: float) -> np.ndarray:
    """Solve the (noisy) normal equations X'X w = X'y."""
    b = vec[:d]
    iu, ju = _triu(d)
    Q = np.zeros((d, d))
    Q[iu, ju] = np.concatenate([[float(n)], vec[d:]])
    Q[ju, iu] = Q[iu, ju]
    return _solve(Q, b, floor)


def coef_distance(a: np.ndarray, b: np.ndarray, include_intercept: bool) -> float:
    """L1 distance of coefficient vectors (intercept first), optionally without the intercept."""
    k = 0 if include_intercept else 1
    return float(np.abs(np.asarray(a)[k:] - np.asarray(b)[k:]).sum())


@register
class RegressionCoefficients(Criterion):
    """L1 distance between DP regression coefficients on T and OLS coefficients on C."""

    type: ClassVar[str] = "regression_coefficients"
    mechanism: ClassVar[str] = "functional_mechanism"  # per instance: the spec's `fit`
    summary: ClassVar[str] = ("L1 distance between DP linear-regression coefficients on T "
                              "(functional mechanism) and OLS coefficients on C")
    parameters: ClassVar[dict[str, str]] = {
        "target": "the regressed column (the others are the features)",
        "bounds": "[L, U] public bounds of the target",
        "fit": "functional_mechanism (default) or sufficient_statistics",
        "features": "feature columns (default: every released column but the target; unordered "
                    "categorical ones one-hot coded, first category = reference)",
        "include_intercept": "include |intercept difference| in the distance (default false)",
    }

    def __init__(self, entry: dict) -> None:
        super().__init__(entry)
        self.target, self.L, self.U, self.features = parse_regression_entry(entry, self.where)
        self.fit = entry.get("fit", "functional_mechanism")
        if self.fit not in FITS:
            raise CriterionError(f"{self.where}.fit: expected one of {list(FITS)}, got {self.fit!r}")
        self.mechanism = self.fit  # type: ignore[misc]
        ii = entry.get("include_intercept", False)
        if not isinstance(ii, bool):
            raise CriterionError(f"{self.where}.include_intercept: expected true/false")
        self.include_intercept = ii

    def design(self, ctx: EvalContext) -> RegressionDesign:
        return cached_design(ctx.synth, self.target, self.L, self.U, self.features)

    def sensitivity(self, ctx: EvalContext) -> tuple[float, dict]:
        """L1 sensitivity of the noised polynomial / statistics vector (d from C)."""
        des = self.design(ctx)
        d = des.d
        if self.fit == "functional_mechanism":
            s, formula = fm_sensitivity(d), "(1 + d)^2"
        else:
            s, formula = ss_sensitivity(d), "d (d + 3) / 2"
        return s, {
            "n": ctx.n, "d": d, "intercept_counted_in_d": True, "features": list(des.features),
            "features_constant_in_C": list(des.dropped), "bounds": [self.L, self.U],
            "feature_means_C": des.mu.tolist(), "feature_sds_C": des.sd.tolist(),
            "feature_bounds_C": [des.lo.tolist(), des.hi.tolist()], "formula": formula,
            "include_intercept": self.include_intercept,
            "note": ("Laplace noise is added to the fit's polynomial coefficients (L1 "
                     "sensitivity above, one noise draw per coefficient); dp_value is the L1 "
                     "distance of the resulting DP coefficients to C's OLS coefficients, not a "
                     "noisy distance")}

    def synth_coefficients(self, ctx: EvalContext, des: RegressionDesign) -> np.ndarray:
        return weighted_ols(des, ctx.synth)

    def value(self, ctx: EvalContext) -> float:
        """Non-private counterpart: L1(OLS on T, OLS on C) (same design)."""
        self._check(ctx)
        des = self.design(ctx)
        bt = weighted_ols(des, ctx.real)
        return coef_distance(bt, self.synth_coefficients(ctx, des), self.include_intercept)

    def dp_coefficients(self, ctx: EvalContext, rand: "Randomness") -> tuple[np.ndarray, float]:
        """The DP fit on T -> (beta, noise scale)."""
        from dpbundle.mechanisms.noise import calibrated_laplace_scale

        des = self.design(ctx)
        sens, _ = self.sensitivity(ctx)
        tt = types_of(ctx.real)
        tX, ty = des.scaled(tt.table)
        # on the exact grid (criteria/rounding.py): every sum of the vector is an exact float,
        # so it moves by at most the sensitivity exactly, not by it plus rounding
        tX, ty = on_grid(tX, ctx.n), on_grid(ty, ctx.n)
        d = des.d
        vec = (fm_vector if self.fit == "functional_mechanism" else ss_vector)(tX, ty, tt.weights)
        noisy = np.asarray(rand.laplace(vec, sensitivity=sens, epsilon=self.epsilon,
                                        purpose=self.purpose()), dtype=np.float64)
        scale = calibrated_laplace_scale(sens, self.epsilon, vector=True)
        floor = math.sqrt(d) * scale
        if self.fit == "functional_mechanism":
            w = solve_fm(noisy, d, floor)
        else:
            w = solve_ss(noisy, d, ctx.n, floor)
        return des.unscale(w), scale

    def evaluate(self, ctx: EvalContext, rand: "Randomness"):
        self._check(ctx)
        des = self.design(ctx)
        sens, inputs = self.sensitivity(ctx)
        beta, scale = self.dp_coefficients(ctx, rand)
        bc = self.synth_coefficients(ctx, des)
        ctx.released[self.id] = {"type": self.type, "target": self.target,
                                 "bounds": [self.L, self.U], "features": list(des.features),
                                 "coefficients": beta}
        inputs = dict(inputs, dp_coefficients=beta.tolist(), synthetic_ols_coefficients=bc.tolist())
        return self._result(coef_distance(beta, bc, self.include_intercept), sens, inputs, scale)
