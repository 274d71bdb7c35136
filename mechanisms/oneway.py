"""Accurate one-way shares: measure every 1-way marginal with Laplace, rake a synthetic sample to it.

Generators that learn a joint model (PrivBayes, MST, PrivSyn, ...) reproduce rare values badly:
a value with 0.1% of the records is spread over many noisy cells of the model's tables, and
norm-sub/clipping of those cells moves its share by a factor of two or more. The 1-way shares,
though, are cheap to measure directly, and one-way criteria (``smoothed_ratio``) compare exactly
them. This module is the generator-independent part of the fix:

1. :func:`measure_oneway` -- a DP measurement of the ``d`` one-way histograms (``epsilon``-DP),
   whose per-cell noise variance is :func:`oneway_noise_variance`;
2. :func:`inverse_variance` -- post-processing: combine it with any other unbiased noisy count of
   the same histogram the generator already released (PrivBayes: a column's raw noisy
   conditional table summed over its parents; MST/PrivSyn: their own 1-way measurements), each
   weighted by the inverse of its variance (the minimum-variance unbiased combination);
3. :func:`shares_from_noisy` -- post-processing: norm-sub to the public total ``n`` (non-negative,
   sums to ``n``), then shares;
4. :class:`RakedModel` -- wraps any fitted model (``sample(m, rng)``): it samples ``m`` rows and
   rakes them (:func:`rake`) so that the 1-way counts of the ``m`` rows are the shares scaled to
   ``m`` (:func:`largest_remainder`), using only the ``rng`` handed to ``sample``. Sampling stays
   post-processing of DP outputs. A generator wires it in by returning
   ``RakedModel(model, shares)`` from ``fit`` (PrivBayes: hyperparameter ``oneway``).

Privacy (change-one neighbours, n public)
-----------------------------------------
The histogram ``h_j(D)[v] = #{r in D : r_j = v}`` of column ``j``: changing one record r into r'
moves one count of ``h_j`` from ``r_j`` to ``r'_j`` (nothing if they are equal), so
``||h_j(D) - h_j(D')||_1 <= 2`` (:data:`COLUMN_SENSITIVITY`). The concatenation of the ``d``
histograms moves by the sum over columns, ``<= 2 d`` (:func:`oneway_l1_sensitivity`), attained
when the changed record differs in every column. Two equivalent ways to release all of them at
total ``epsilon``:

* one vector Laplace on the concatenation: L1 sensitivity ``2 d``, scale ``2 d / epsilon``;
* ``d`` separate Laplace draws, one per column, each at ``epsilon / d`` with L1 sensitivity 2,
  i.e. scale ``2 / (epsilon / d) = 2 d / epsilon``; sequential composition gives
  ``d x epsilon / d = epsilon``.

The noise is the same (i.i.d. Laplace of scale ``2 d / epsilon`` on every cell). We use the
second form (OpenDP's discrete Laplace on the integer counts): one transcript record per column,
with its own purpose, and no sensitivity that depends on ``d``. The per-column float is the
largest ``e`` with ``d x binary(e) <= binary(epsilon)`` exactly (:func:`exact.split_float`), so
the floats handed to OpenDP never add up to more than the part.

Raking: why record weights + systematic resampling (and a minimal in-place fix)
---------------------------------------------------------------------------------
Two ways to make a sample's 1-way counts hit integer targets:

* *in-place re-assignment* (:func:`reassign`): for each column, change the value of the minimal
  number of randomly chosen records of over-represented values to under-represented values.
  It changes the fewest records and is exact in one pass (a column's 1-way counts depend on that
  column only), but a re-assigned record keeps the *other* columns of a record of another value:
  a record turned from parity 1 into parity "11 or more" keeps a 20-year-old mother, which is
  implausible (and may be dropped by a synthetic constraint, undoing the fix).
* *raking the record weights* (:func:`rake`, the default): classic survey raking, i.e. IPF on
  per-record weights -- for each column in turn multiply the weight of every record with value v
  by ``target[v] / weighted count[v]`` -- for a few rounds, then draw ``m`` records by systematic
  resampling in proportion to the weights. Records are duplicated or dropped, never edited, so
  the joint of the other columns *given* each value is the model's own (a rare value is made
  more frequent by repeating the model's own rare records). Systematic resampling (one uniform,
  ``m`` evenly spaced positions) keeps every record ``floor(w)`` or ``ceil(w)`` times, which is
  the least resampling noise, and with all weights 1 it returns the sample unchanged. The counts
  it produces are within a few records of the targets; :func:`reassign` then fixes that small
  residual exactly (few records changed), and a value the sample lacks altogether (weight cannot
  create it) is created by re-assignment too.

Resampled records stay in the slots of the records they replace (kept records keep their place,
extra copies fill the slots of dropped ones in random order), so the row order stays as random as
the model's: the iteration keeps the first n of ~1.1 n rows, and the shares survive that
truncation up to hypergeometric noise.

Synthetic constraints: the iteration drops sampled rows that fail the spec's synthetic
constraints. A model that puts a rare value on implausible records (parity "11 or more" with a
mother under 23) would lose 10-20% of it there, after raking. So ``RakedModel.sample`` takes an
optional ``keep`` (rows -> boolean mask of the rows that will be kept; a public function of the
synthetic rows only) and rakes the kept rows to the shares scaled to their number, leaving the
others (which are dropped anyway) in place; ``release/scheme/iteration.py`` and the audit's replay pass
their constraint filter to models with ``accepts_keep``.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from . import exact
from .norm_sub import norm_sub

__all__ = [
    "COLUMN_SENSITIVITY",
    "oneway_l1_sensitivity",
    "oneway_counts",
    "measure_oneway",
    "oneway_noise_variance",
    "discrete_laplace_variance",
    "inverse_variance",
    "shares_from_noisy",
    "largest_remainder",
    "target_counts",
    "rake",
    "reassign",
    "rake_shares",
    "RakedModel",
    "RAKE_METHODS",
]

#: L1 sensitivity of one column's histogram under change-one (see the module docstring).
COLUMN_SENSITIVITY = 2

#: how :class:`RakedModel` makes a sample consistent: "rake" (weights + systematic resampling +
#: minimal fix) or "reassign" (minimal in-place re-assignment only).
RAKE_METHODS = ("rake", "reassign")

#: raking rounds (each round visits every column) and the stop rule: every weighted count within
#: this many records of its target before a round's update.
DEFAULT_ROUNDS = 25
DEFAULT_TOLERANCE = 0.5


def oneway_l1_sensitivity(d: int) -> int:
    """L1 sensitivity of the ``d`` concatenated one-way histograms under change-one: ``2 d``."""
    if int(d) < 0:
        raise ValueError(f"d must be >= 0, got {d}")
    return COLUMN_SENSITIVITY * int(d)


def oneway_counts(codes: np.ndarray, domain: Sequence[int], counts: np.ndarray | None = None) -> list[np.ndarray]:
    """The ``d`` one-way histograms (int64, ``len == domain[j]``) of integer codes (n, d), or of
    distinct rows ``codes`` occurring ``counts`` times (exact: integer weights < 2^53)."""
    codes = np.asarray(codes)
    weights = None if counts is None else np.asarray(counts, dtype=np.float64)
    dom = tuple(int(k) for k in domain)
    if codes.ndim != 2 or codes.shape[1] != len(dom):
        raise ValueError(f"codes must have shape (n, {len(dom)}), got {codes.shape}")
    out = []
    for j, k in enumerate(dom):
        col = codes[:, j].astype(np.int64, copy=False)
        if col.size and (col.min() < 0 or col.max() >= k):
            raise ValueError(f"codes of column {j} lie outside the domain 0..{k - 1}")
        out.append(np.bincount(col, weights=weights, minlength=k).astype(np.int64))
    return out


def measure_oneway(codes: np.ndarray, domain: Sequence[int], epsilon: float, rand: Any, *,
                   purpose: str = "one-way marginal", counts: np.ndarray | None = None) -> list[np.ndarray]:
    """Release the ``d`` one-way histograms, ``epsilon``-DP in total (change-one, n public).

    One discrete Laplace draw per column (OpenDP, ``rand.laplace(integer=True)``), L1 sensitivity
    :data:`COLUMN_SENSITIVITY` = 2 and ``exact.split_float(epsilon, d)`` each (``d`` such floats
    add up to at most ``binary(epsilon)`` exactly), purpose ``"{purpose} of column {j}"``.
    ``epsilon`` is a *computed* float part (its binary value is what is spent). Returns the
    noisy int64 counts (may be negative). ``counts``: ``codes`` are distinct rows occurring that
    many times (the same histograms, the same draws).
    """
    tables = oneway_counts(codes, domain, counts)
    if not tables:
        return []
    eps_col = exact.split_float(float(epsilon), len(tables))
    return [np.asarray(rand.laplace(c, sensitivity=COLUMN_SENSITIVITY, epsilon=eps_col,
                                    integer=True, purpose=f"{purpose} of column {j}"),
                       dtype=np.int64)
            for j, c in enumerate(tables)]


def oneway_noise_variance(epsilon: float, d: int, *, sensitivity: float = COLUMN_SENSITIVITY) -> float:
    """Per-cell noise variance of :func:`measure_oneway` at ``epsilon`` over ``d`` columns: the
    discrete Laplace of the calibrated scale of ``sensitivity`` at ``split_float(epsilon, d)``
    (the scale OpenDP uses, about ``2 d / epsilon``). With ``d = 1`` and a table's epsilon it is
    the per-cell variance of any noisy count table released that way."""
    from .noise import calibrated_laplace_scale

    eps = exact.split_float(float(epsilon), int(d))
    return discrete_laplace_variance(calibrated_laplace_scale(sensitivity, eps, vector=True,
                                                              integer=True))


def discrete_laplace_variance(scale: float) -> float:
    """Variance of OpenDP's discrete Laplace of ``scale`` b (P(k) ~ exp(-|k| / b)):
    ``2 q / (1 - q)^2`` with ``q = exp(-1/b)`` (about ``2 b^2`` for large b)."""
    from . import arithmetic as ar

    b = float(scale)
    if not b > 0:
        raise ValueError(f"scale must be > 0, got {scale!r}")
    # arithmetic version 2: an exp of fixed operations (the C library's depends on the CPU)
    q = ar.exp(-1.0 / b) if ar.current() == ar.FIXED else math.exp(-1.0 / b)
    return 2.0 * q / (1.0 - q) ** 2


def inverse_variance(estimates: Sequence[tuple[np.ndarray, float]]) -> np.ndarray:
    """The minimum-variance unbiased combination of independent unbiased estimates of the same
    counts, each ``(values, per-cell variance)``: ``sum(x_i / v_i) / sum(1 / v_i)``.
    Post-processing; ``v = 0`` (an exact estimate) wins outright."""
    if not estimates:
        raise ValueError("no estimates to combine")
    exact_ones = [np.asarray(x, dtype=np.float64) for x, v in estimates if float(v) == 0.0]
    if exact_ones:
        return exact_ones[0]
    num = sum(np.asarray(x, dtype=np.float64) / float(v) for x, v in estimates)
    den = sum(1.0 / float(v) for _, v in estimates)
    return num / den


def shares_from_noisy(noisy: Sequence[np.ndarray], total: float) -> list[np.ndarray | None]:
    """Post-processing of noisy histograms: norm-sub to the public ``total`` (non-negative,
    summing to ``total`` unless the clipped counts sum to less), then shares (sum 1).

    A column whose noisy counts are all <= 0 carries no information: ``None`` (not raked)."""
    out: list[np.ndarray | None] = []
    for h in noisy:
        c = norm_sub(np.asarray(h, dtype=np.float64).reshape(1, -1), float(total)).ravel()
        s = c.sum()
        out.append(c / s if s > 0 else None)
    return out


def largest_remainder(shares: np.ndarray, m: int) -> np.ndarray:
    """Integer counts summing to ``m`` in proportion to ``shares`` (Hamilton / largest remainder).

    ``q = m shares / sum(shares)``; every value gets ``floor(q)``, and the ``m - sum(floor(q))``
    values with the largest remainders get one more (ties: lower index first). A zero share
    gets 0 (its remainder is 0, and at most as many values as have a positive remainder get one
    more). Deterministic: no randomness.
    """
    m = int(m)
    if m < 0:
        raise ValueError(f"m must be >= 0, got {m}")
    p = np.asarray(shares, dtype=np.float64).reshape(-1)
    if p.size == 0 or not np.all(np.isfinite(p)) or np.any(p < 0) or not p.sum() > 0:
        raise ValueError("shares must be finite, non-negative and not all zero")
    q = (p / p.sum()) * m  # normalise first: m / sum could overflow for tiny shares
    base = np.floor(q).astype(np.int64)
    rem = q - base
    short = m - int(base.sum())
    if short < 0:  # float rounding pushed a floor over: take from the smallest remainders
        order = np.argsort(rem, kind="stable")
        for i in order:
            if short == 0:
                break
            if base[i] > 0:
                base[i] -= 1
                short += 1
    elif short > 0:
        order = np.argsort(-rem, kind="stable")
        # a remainder can only be 0 for a zero share if short exceeds the positive remainders,
        # which needs float rounding; then the largest shares take the rest
        pos = order[rem[order] > 0][:short]
        base[pos] += 1
        short -= pos.size
        if short > 0:
            base[np.argsort(-p, kind="stable")[:short]] += 1
    return base


def target_counts(shares: Sequence[np.ndarray | None], m: int) -> list[np.ndarray | None]:
    """:func:`largest_remainder` of every column's shares for ``m`` rows (None stays None)."""
    return [None if s is None else largest_remainder(s, m) for s in shares]


def _check_targets(codes: np.ndarray, targets: Sequence[np.ndarray | None]) -> tuple[np.ndarray, list]:
    codes = np.asarray(codes)
    if codes.ndim != 2 or not np.issubdtype(codes.dtype, np.integer):
        raise ValueError(f"codes must be a 2-d integer array, got {codes.dtype} {codes.shape}")
    codes = codes.astype(np.int64, copy=False)
    m, d = codes.shape
    if len(targets) != d:
        raise ValueError(f"{len(targets)} targets for {d} columns")
    out = []
    for j, t in enumerate(targets):
        if t is None:
            out.append(None)
            continue
        t = np.asarray(t)
        if t.ndim != 1 or not np.issubdtype(t.dtype, np.integer) or np.any(t < 0) or int(t.sum()) != m:
            raise ValueError(f"target of column {j} must be non-negative integer counts summing "
                             f"to the {m} rows")
        if m and (codes[:, j].min() < 0 or codes[:, j].max() >= t.size):
            raise ValueError(f"codes of column {j} lie outside the target's 0..{t.size - 1}")
        out.append(t.astype(np.int64))
    return codes, out


def _matches(codes: np.ndarray, targets: list) -> bool:
    return all(t is None or np.array_equal(np.bincount(codes[:, j], minlength=t.size), t)
               for j, t in enumerate(targets))


def reassign(codes: np.ndarray, targets: Sequence[np.ndarray | None],
             rng: np.random.Generator) -> np.ndarray:
    """Minimal in-place re-assignment: a copy of ``codes`` whose 1-way counts equal ``targets``.

    For each column j with a target t (columns with ``None`` are left alone): with
    ``excess[v] = count[v] - t[v]``, choose ``excess[v]`` records uniformly at random among
    those with value v for every over-represented v, and give them the under-represented values
    (each u ``-excess[u]`` times) in random order. Exactly ``sum(max(excess, 0))`` values change
    -- the fewest possible, since every record of the excess must change -- and only in column j,
    so the columns are independent and one pass is exact. Randomness: ``rng`` only.
    """
    codes, targets = _check_targets(codes, targets)
    out = codes.copy()
    for j, t in enumerate(targets):
        if t is None:
            continue
        col = out[:, j]
        excess = np.bincount(col, minlength=t.size) - t
        if not excess.any():
            continue
        over = np.flatnonzero(excess > 0)
        chosen = np.concatenate([rng.choice(np.flatnonzero(col == v), size=int(excess[v]),
                                            replace=False) for v in over])
        under = np.flatnonzero(excess < 0)
        new = np.repeat(under, -excess[under])
        rng.shuffle(new)
        col[chosen] = new
    return out


def _rake_weights(codes: np.ndarray, targets: list, rounds: int, tolerance: float) -> np.ndarray:
    """IPF on per-record weights (start 1) towards the 1-way targets; see :func:`rake`."""
    m = codes.shape[0]
    w = np.ones(m, dtype=np.float64)
    for _ in range(rounds):
        worst = 0.0
        for j, t in enumerate(targets):
            if t is None:
                continue
            col = codes[:, j]
            c = np.bincount(col, weights=w, minlength=t.size)
            worst = max(worst, float(np.max(np.abs(c - t))))
            f = np.divide(t, c, out=np.zeros(t.size), where=c > 0)
            w *= f[col]
        if worst <= tolerance or not w.sum() > 0:
            break
    return w


def _systematic(codes: np.ndarray, w: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``m`` records by systematic resampling in proportion to ``w``; kept records keep their
    slot, extra copies fill the slots of dropped records in random order."""
    m = codes.shape[0]
    # sorted by the codes (column 0 most significant): systematic resampling then matches the
    # weighted counts of column 0 to within one record, and of the others closely
    order = np.lexsort(codes.T[::-1])
    ws = w[order] * (m / w.sum())
    cum = np.cumsum(ws)
    pos = rng.random() + np.arange(m, dtype=np.float64)
    pick = np.searchsorted(cum, pos, side="right")
    last = int(np.flatnonzero(ws > 0)[-1])
    np.minimum(pick, last, out=pick)  # float rounding of the cumulative sum at the very end
    copies = np.empty(m, dtype=np.int64)
    copies[order] = np.bincount(pick, minlength=m)
    free = np.flatnonzero(copies == 0)
    extra = np.repeat(np.arange(m), np.maximum(copies - 1, 0))
    rng.shuffle(free)
    out = codes.copy()
    out[free] = codes[extra]
    return out


def rake(codes: np.ndarray, targets: Sequence[np.ndarray | None], rng: np.random.Generator, *,
         rounds: int = DEFAULT_ROUNDS, tolerance: float = DEFAULT_TOLERANCE) -> np.ndarray:
    """``m`` records whose 1-way counts equal ``targets`` (int counts summing to m, or None for
    a column left alone), changing the joint as little as possible; see the module docstring.

    1. If the counts already match: the sample, unchanged (no randomness used).
    2. Raking: per-record weights, start 1; per round and column j, ``w *= t[v] / c_w[v]`` for the
       record's value v (``c_w`` the weighted counts); at most ``rounds`` rounds, stopping when
       every weighted count was within ``tolerance`` records of its target.
    3. Systematic resampling of ``m`` records in proportion to ``w`` (records duplicated or
       dropped, never edited; kept records keep their slot).
    4. :func:`reassign` for the small residual (and values the sample lacks): exact counts.
    Randomness: ``rng`` only.
    """
    codes, targets = _check_targets(codes, targets)
    if codes.shape[0] == 0 or _matches(codes, targets):
        return codes.copy()
    w = _rake_weights(codes, targets, int(rounds), float(tolerance))
    if math.isfinite(w.sum()) and w.sum() > 0:
        codes = _systematic(codes, w, rng)
    return reassign(codes, targets, rng)


def rake_shares(codes: np.ndarray, shares: Sequence[np.ndarray | None], rng: np.random.Generator,
                *, method: str = "rake") -> np.ndarray:
    """:func:`rake` (or :func:`reassign`) of ``codes`` (m, d) to 1-way *shares*: the targets are
    ``largest_remainder(shares[j], m)`` (shares, not counts, so the same shares serve a sample of
    any size, e.g. the iteration's ~1.1 n rows)."""
    if method not in RAKE_METHODS:
        raise ValueError(f"method must be one of {RAKE_METHODS}, got {method!r}")
    codes = np.asarray(codes)
    targets = target_counts(shares, codes.shape[0])
    return reassign(codes, targets, rng) if method == "reassign" else rake(codes, targets, rng)


class RakedModel:
    """A fitted model whose samples are raked to fixed 1-way shares (post-processing).

    ``shares[j]``: the share of every value of column j (sums to 1; None = column not raked),
    e.g. :func:`shares_from_noisy` of :func:`measure_oneway`. ``sample(m, rng)`` draws ``m`` rows
    from ``model`` with ``rng``, then makes their 1-way counts ``largest_remainder(shares[j], m)``
    with ``method`` ("rake": :func:`rake`, "reassign": :func:`reassign`), with the same ``rng``.
    With ``keep`` (see the module docstring) only the rows it keeps are raked, to the shares
    scaled to their number. Other attributes are the wrapped model's (e.g. PrivBayes'
    ``network_description``).
    """

    #: ``sample`` takes ``keep=`` (the iteration's synthetic-constraint filter)
    accepts_keep = True

    def __init__(self, model: Any, shares: Sequence[np.ndarray | None], *, method: str = "rake",
                 rounds: int = DEFAULT_ROUNDS) -> None:
        if method not in RAKE_METHODS:
            raise ValueError(f"method must be one of {RAKE_METHODS}, got {method!r}")
        if not callable(getattr(model, "sample", None)):
            raise ValueError("RakedModel needs a model with sample(m, rng)")
        self.model = model
        self.shares = [None if s is None else np.asarray(s, dtype=np.float64).copy() for s in shares]
        self.method = method
        self.rounds = int(rounds)

    def __getattr__(self, name: str) -> Any:
        if name in ("model", "shares", "method", "rounds") or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.model, name)

    def sample(self, m: int, rng: np.random.Generator, keep: Any = None) -> np.ndarray:
        """``m`` rows of the wrapped model, raked to the shares (int64, (m, d)); with ``keep``
        only the rows ``keep(rows)`` marks True are raked (to the shares x their number)."""
        rows = np.asarray(self.model.sample(m, rng))
        if rows.shape[0] == 0:
            return rows
        if len(self.shares) != rows.shape[1]:
            raise ValueError(f"{len(self.shares)} columns of shares for a {rows.shape[1]}-column sample")
        if keep is None:
            return self._fit(rows, rng)
        mask = np.asarray(keep(rows), dtype=bool)
        if mask.shape != (rows.shape[0],):
            raise ValueError(f"keep returned a mask of shape {mask.shape} for {rows.shape[0]} rows")
        if not mask.any():
            return rows
        out = rows.copy()
        out[mask] = self._fit(rows[mask], rng)
        return out

    def _fit(self, rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        targets = target_counts(self.shares, rows.shape[0])
        if self.method == "reassign":
            return reassign(rows, targets, rng)
        return rake(rows, targets, rng, rounds=self.rounds)
