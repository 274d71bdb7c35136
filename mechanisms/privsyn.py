"""PrivSyn-style generator ("privsyn"): DenseMarg selection, consistency, GUM; pure DP.

After Zhang, Wang, Li, Honorio, Backes, He, Chen, Zhang, "PrivSyn: Differentially Private Data
Synthesis" (USENIX Security 2021), as described in Li, Zhang, Wang (DPSyn in the NIST
challenges, appendix A), re-derived here for pure DP with the Laplace mechanism.

Input: integer codes ``(n, d)`` over a public domain ``(k_0, ..., k_{d-1})``; ``n`` is public,
neighbouring datasets differ in one record (change-one). The budget ``eps`` is split in two:

* ``eps_sel = split_select * eps`` -- **marginal selection**. For every *candidate pair*
  (a, b) (both columns with at least 2 values and ``k_a k_b <= MAX_PAIR_CELLS``: a public
  rule) the score ``InDif(a, b) = || T_ab - T_a T_b^T / n ||_1`` (counts: the L1 distance between
  the true 2-way table and the independence estimate from the true 1-way tables) is computed;
  the vector of the ``K`` scores gets Laplace noise in **one vector draw** of L1 sensitivity
  ``6 K`` (:func:`indif_sensitivity` derives the 6 for change-one; ``K`` is public). Which pairs
  are kept is post-processing of the noisy scores (:func:`select_pairs`): greedily, the pair
  whose noisy InDif most exceeds the increase of the expected noise error that measuring it
  causes (PrivSyn's DenseMarg trade-off), at most ``max_pairs`` pairs; or simply the
  ``max_pairs`` largest noisy scores (``select_rule="top"``).
* ``eps_meas = eps - eps_sel`` -- **measurements**: the 1-way table of every column with at
  least 2 values and the 2-way table of every selected pair, each count table with OpenDP's
  discrete Laplace (L1 sensitivity 2 under change-one, ``marginals.COUNT_SENSITIVITY``), the
  budget split over the tables in proportion to ``sqrt(cells)`` (:func:`allocate`, derivation
  there). Sequential composition: the shares sum to at most ``eps_meas``.

Exact arithmetic as in PrivBayes: ``eps_sel = float_down(dec(split_select) dec(eps))``,
``eps_meas = float_down(dec(eps) - binary(eps_sel))``, every table's share ``float_down`` of its
rational part of ``binary(eps_meas)``: the floats handed to OpenDP sum to at most ``dec(eps)``.
Adaptive composition: which tables are measured (and their shares) depends on the selection,
an earlier DP output, while the total ``eps_meas`` is fixed. So ``fit`` is ``eps``-DP and
``privacy_map(d_in) = d_in * eps`` (group privacy).

``estimator: hierarchical`` (a hyperparameter; the default ``consistency`` is the path above)
measures the same kinds of tables with the same noise and budget split, except that in the
2-way tables (and their InDif scores, and the cells that DenseMarg and :func:`allocate` count)
a column of ``k > pair_values`` values is read on *merged codes* ``c // g``, ``g = ceil(k /
pair_values)`` (a public rule: a function of the domain and the hyperparameter). A merged
table is a count table of a function of each record, so one changed record still moves one
count out of one cell and into one (L1 sensitivity 2) and InDif's derivation (any 2-way count
table) is unchanged. The noisy tables are then estimated by :func:`estimation.hierarchical_estimate`
(post-processing: the noisy tables, their public scales, the domain and n).

**zCDP mode** (``PrivSyn(rho=...)``, ``definition = "zcdp"``; not yet exposed in specs). The
budget is a zCDP rho, split in two exactly:

* selection: the same Laplace draw of the K InDif scores (L1 sensitivity ``6 K``) at the pure
  epsilon ``eps_sel``, the largest float with ``binary(eps_sel)^2 / 2 <= dec(split_select)
  dec(rho)``. An eps-DP release is ``eps^2 / 2``-zCDP (Bun & Steinke 2016, Prop. 1.4); the part
  charged is ``rho_sel = float_up(binary(eps_sel)^2 / 2)`` (OpenDP's Laplace calibration keeps
  the real epsilon within ``binary(eps_sel)``);
* measurements: ``rho_meas = float_down(dec(rho) - binary(rho_sel))``, split over the 1-way and
  selected 2-way count tables by :func:`allocate_rho` (``rho_i ∝ cells^(2/3)``, the L1-optimal
  split for Gaussian noise, derivation there); each table is one ``rand.gaussian`` draw
  (OpenDP's discrete Gaussian) of **L2 sensitivity sqrt(2)**: one changed record leaves one
  cell and enters one, ``||dT||_2 = sqrt(1 + 1)`` (0 if it stays in its cell); merged codes
  (hierarchical) change nothing in this (a count table of a function of each record).

zCDP composes by adding rhos (Bun & Steinke, Lemma 2.3, adaptively), so the binary values of the
floats handed to OpenDP sum to at most ``dec(rho)`` and ``fit`` is rho-zCDP for change-one
neighbours; group privacy for zCDP gives ``privacy_map(d_in) = rho d_in^2`` (Bun & Steinke,
Prop. 1.9: a ``k``-record change is ``k^2 rho``-zCDP). The post-processing is the same with the
Gaussian's noise in place of the Laplace's: inverse-variance weights ``sigma^2`` per cell (the
Laplace's ``2 b^2``), DenseMarg's noise error and the hierarchical estimator's noise level from
the Gaussian's expected absolute error ``sigma sqrt(2 / pi)`` per cell.

Everything after the noisy tables reads only them and public values (``n``, the domain, the
noise scales): consistency (:func:`consistent_tables`: ``marginals.make_consistent`` with
inverse-variance weights and ``norm_sub.norm_sub``), and synthesis by GUM (:func:`gum`), which
runs inside :meth:`PrivSynModel.sample` on the caller's recorded ``np.random.Generator``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Sequence

import numpy as np

from . import estimation, exact
from .generators import check_codes, constructor_grid_problems, record_weights
from .marginals import COUNT_SENSITIVITY, make_consistent
from .measured import MeasuredTable, attach, measured_table
from .noise import Randomness, calibrated_gaussian_scale
from .norm_sub import norm_sub

__all__ = [
    "PrivSyn",
    "PrivSynModel",
    "INDIF_SENSITIVITY",
    "MAX_PAIR_CELLS",
    "indif",
    "indif_numerator",
    "indif_score",
    "indif_sensitivity",
    "candidate_pairs",
    "pair_table",
    "allocate",
    "allocate_rho",
    "expected_l1_error",
    "expected_l1_error_gaussian",
    "GAUSSIAN_COUNT_SENSITIVITY",
    "select_pairs",
    "consistent_tables",
    "gum",
    "grid_problems",
]

INDIF_SENSITIVITY = 6.0
"""Sensitivity of one InDif score (counts) under change-one; see :func:`indif_sensitivity`."""

#: Largest 2-way table (cells) that is a candidate pair (memory guard; a public rule).
MAX_PAIR_CELLS = 1 << 22

#: Largest n: InDif is computed exactly in int64, and 2 n^2 must stay below 2^63.
MAX_ROWS = (1 << 31) - 1

SELECT_RULES = ("densemarg", "top")

#: L2 sensitivity of a count table under change-one: one record leaves one cell, enters one.
GAUSSIAN_COUNT_SENSITIVITY = math.sqrt(2.0)

#: Definitions of privacy a PrivSyn can be built for (``epsilon=`` pure DP, ``rho=`` zCDP).
DEFINITIONS = ("pure", "zcdp")

#: ``estimator`` values: ``consistency`` (the default; every table on its codes, PrivSyn's
#: consistency and norm-sub) and ``hierarchical`` (pairs measured on merged codes, estimated by
#: :func:`estimation.hierarchical_estimate`).
ESTIMATORS = ("consistency", "hierarchical")

#: Default ``pair_values`` (AGEP's 100 one-year codes -> 20 five-year groups).
DEFAULT_PAIR_VALUES = 20

#: Largest ``pair_values``.
MAX_PAIR_VALUES = 1 << 20


# --------------------------------------------------------------------------------------------
# InDif and its sensitivity
# --------------------------------------------------------------------------------------------

def indif_sensitivity() -> float:
    """Sensitivity of ``InDif(a, b) = sum_{x,y} |T(x,y) - A(x) B(y) / n|`` under change-one: 6.

    ``T`` is the true 2-way count table of columns (a, b), ``A = T 1`` and ``B = T^T 1`` its
    1-way tables (row / column sums), ``n`` the public number of records; ``P = A B^T / n`` is
    the independence estimate from the *true* 1-ways. Changing one record moves it from cell
    (x1, y1) to (x2, y2) (on these two columns):

    * ``T' = T + dT`` with ``dT = e_{x2 y2} - e_{x1 y1}``: ``||dT||_1 <= 2``;
    * ``A' = A + dA``, ``dA = e_{x2} - e_{x1}``, ``||dA||_1 <= 2``; likewise ``B' = B + dB``.
      Both 1-ways keep their sums: ``||A||_1 = ||A'||_1 = ||B||_1 = n`` (entries >= 0).
    * Write the product's change without a second-order term by using ``A'``:
      ``A' B'^T - A B^T = dA B^T + A' dB^T``. An outer product has
      ``||u v^T||_1 = ||u||_1 ||v||_1``, so
      ``||P' - P||_1 <= (||dA||_1 ||B||_1 + ||A'||_1 ||dB||_1) / n <= (2n + 2n) / n = 4``.
      (Expanding ``(A + dA)(B + dB)^T`` instead gives the looser ``4 + 4/n``.)
    * ``InDif = ||T - P||_1``; by the reverse triangle inequality
      ``|InDif' - InDif| <= ||(T' - P') - (T - P)||_1 <= ||dT||_1 + ||P' - P||_1 <= 6``.

    The bound is tight (approached as n grows): with ``n = s^2``, ``A = B = (s, s^2 - s, 0)``
    and the independent table ``T = A B^T / n`` (so InDif = 0), move the one record of cell
    (0, 0) to the empty cell (2, 2). Then InDif' = 6 - 4/s - 2/s^2 (for s = 100: 5.9598; see the
    tests), above the 4 that PrivSyn states for add/remove-one neighbours: the change-one
    bound must not be taken from there. The bound holds for every pair at once, so the vector
    of K scores has L1 sensitivity ``6 K``.

    **Strictly below 6, and why that matters for floats.** In counts, ``N = n InDif =
    sum |n T - A B^T|`` is an integer, and ``|N - N'| <= 6n - 2``: when the record changes both
    its row (x1 -> x2) and its column (y1 -> y2), the entry (x2, y1) of ``dA B^T + A' dB^T`` is
    ``B_y1 - A'_x2`` with ``B_y1 >= 1`` (the record was in column y1) and ``A'_x2 >= 1`` (it is in
    row x2 after), so it is smaller than ``B_y1 + A'_x2`` by at least 2 and
    ``||A' B'^T - A B^T||_1 <= 4n - 2``; when only one of them changes the product moves by 2n.
    So neighbouring exact scores differ by at most ``6 - 2/n``. The released float is
    :func:`indif_score`: for ``n <= 2^26`` the correctly rounded quotient ``N / n`` (one
    division), whose rounding adds at most ``(ulp(x) + ulp(x'))/2 <= 2^(bitlen(2n) - 53) <=
    4n 2^-53`` to the distance (InDif < 2n, and 2^bitlen(2n) <= 4n); ``4n 2^-53 <= 2/n`` iff
    ``n^2 <= 2^52``, so for ``n <= 2^26`` every coordinate of two neighbours' score vectors
    differs by at most 6 and the vector by at most ``6 K`` in L1, exactly (the values are
    those of earlier versions). For larger n the score is ``floor(N 2^g / n) 2^-g``
    (g = 52 - bitlen(2n)), an exact float on a grid that divides 6: two coordinates within 6 of
    each other before the floor are within 6 after it (the floored difference is a multiple of
    the grid below 6 + grid).
    """
    return INDIF_SENSITIVITY


def pair_table(codes: np.ndarray, domain: Sequence[int], a: int, b: int,
               weights: np.ndarray | None = None) -> np.ndarray:
    """int64 count table of columns (a, b), shape (k_a, k_b) (rows weighted by ``weights``)."""
    ka, kb = int(domain[a]), int(domain[b])
    idx = codes[:, a] * kb + codes[:, b]
    return np.bincount(idx, weights=weights, minlength=ka * kb).astype(np.int64).reshape(ka, kb)


def indif_numerator(table: np.ndarray) -> int:
    """``n * InDif`` of a count table, exactly: ``sum |n T - A B^T|`` in int64 (n < 2^31)."""
    t = np.asarray(table, dtype=np.int64)
    n = int(t.sum())
    if n > MAX_ROWS:
        raise ValueError(f"privsyn: at most {MAX_ROWS} records, got {n}")
    a = t.sum(axis=1)
    b = t.sum(axis=0)
    return int(np.abs(n * t - np.outer(a, b)).sum())


#: Largest n for which the correctly rounded quotient N / n keeps InDif's sensitivity 6 exactly
#: (:func:`indif_sensitivity`); above it :func:`indif_score` floors onto a grid.
ROUNDED_ROWS = 1 << 26


def indif_score(numerator: int, n: int) -> float:
    """The released float of InDif = N / n (N = :func:`indif_numerator`, n public): the
    correctly rounded quotient for n <= 2^26, else floor(N 2^g / n) 2^-g with
    g = 52 - bitlen(2n). Either way two neighbours' floats differ by at most 6
    (:func:`indif_sensitivity`)."""
    N, n = int(numerator), int(n)
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if n <= ROUNDED_ROWS:
        return N / n   # int / int: correctly rounded
    g = 52 - (2 * n).bit_length()
    return math.ldexp(float((N << g) // n), -g)   # (N 2^g) // n < 2n 2^g < 2^52: exact


def indif(table: np.ndarray) -> float:
    """InDif of a count table (counts): ``||T - A B^T / n||_1`` as :func:`indif_score` releases
    it (0 if n = 0)."""
    n = int(np.asarray(table).sum())
    return indif_score(indif_numerator(table), n) if n else 0.0


def candidate_pairs(domain: Sequence[int]) -> list[tuple[int, int]]:
    """The pairs (a < b) that are scored: both columns have >= 2 values and the table has at
    most ``MAX_PAIR_CELLS`` cells. Public: a function of the domain only."""
    dom = [int(k) for k in domain]
    return [(a, b) for a in range(len(dom)) for b in range(a + 1, len(dom))
            if dom[a] >= 2 and dom[b] >= 2 and dom[a] * dom[b] <= MAX_PAIR_CELLS]


# --------------------------------------------------------------------------------------------
# budget allocation and selection (post-processing of the noisy scores)
# --------------------------------------------------------------------------------------------

def allocate(epsilon: float, cells: Sequence[int]) -> list[float]:
    """Split the float part ``epsilon`` over tables of ``cells`` cells, ``eps_i ∝ sqrt(c_i)``.

    Derivation (the L1-optimal split for Laplace noise): a table of ``c`` cells measured with
    Laplace scale ``b = 2 / eps_i`` has expected L1 error ``c E|Lap(b)| = 2 c / eps_i``.
    Minimise ``sum_i 2 c_i / eps_i`` subject to ``sum_i eps_i = eps``: the Lagrange condition
    ``2 c_i / eps_i^2 = lambda`` gives ``eps_i = eps sqrt(c_i) / sum_j sqrt(c_j)``, and the
    minimum is ``2 (sum_i sqrt(c_i))^2 / eps`` (:func:`expected_l1_error`). Other objectives
    give other powers: the total *variance* ``sum_i 2 c_i b_i^2`` is minimised by
    ``eps_i ∝ c_i^(1/3)``, and Gaussian noise under zCDP (L1 error ``∝ c_i / sqrt(rho_i)``,
    PrivSyn's setting) by ``rho_i ∝ c_i^(2/3)``. The InDif scores, the DenseMarg trade-off and
    the acceptance criteria (TVD) are L1, so L1 is the objective here.

    Exactly: the weights ``w_i = sqrt(c_i)`` are floats (public), read as rationals; share
    ``i`` is ``float_down(binary(epsilon) w_i / sum_j w_j)``, so the shares' binary values sum
    to at most ``binary(epsilon)``.
    """
    if not cells:
        return []
    w = [Fraction(math.sqrt(int(c))) for c in cells]
    tot = sum(w, Fraction(0))
    eps = exact.binary(epsilon)
    return [exact.float_down(eps * wi / tot) for wi in w]


def expected_l1_error(cells: Sequence[int], epsilon: float) -> float:
    """Expected total L1 error (counts) of measuring tables of ``cells`` cells with
    :func:`allocate` shares of ``epsilon``: ``2 (sum sqrt(c_i))^2 / epsilon``."""
    s = math.fsum(math.sqrt(int(c)) for c in cells)
    return 2.0 * s * s / float(epsilon)


def allocate_rho(rho: float, cells: Sequence[int]) -> list[float]:
    """Split the float zCDP part ``rho`` over tables of ``cells`` cells, ``rho_i ∝ c_i^(2/3)``.

    Derivation (the L1-optimal split for Gaussian noise): a table of ``c`` cells measured with
    the Gaussian of L2 sensitivity ``D`` at ``rho_i`` has ``sigma_i = D / sqrt(2 rho_i)`` and
    expected L1 error ``c sigma_i sqrt(2 / pi)``, proportional to ``c_i rho_i^(-1/2)``.
    Minimise ``sum_i c_i rho_i^(-1/2)`` subject to ``sum_i rho_i = rho``: the Lagrange
    condition ``c_i rho_i^(-3/2) / 2 = lambda`` gives ``rho_i = rho c_i^(2/3) / sum_j
    c_j^(2/3)``, and the minimum error is ``sqrt(2 / pi) D W^(3/2) / sqrt(2 rho)`` with
    ``W = sum_j c_j^(2/3)`` (:func:`expected_l1_error_gaussian`). (Minimising the total
    variance ``sum c_i sigma_i^2`` instead gives ``rho_i ∝ sqrt(c_i)``, the pure path's split.)

    Exactly: the weights ``c_i^(2/3)`` are floats (public), read as rationals; share ``i`` is
    ``float_down(binary(rho) w_i / sum_j w_j)``: the shares sum to at most ``binary(rho)``."""
    if not cells:
        return []
    w = [Fraction(float(int(c)) ** (2.0 / 3.0)) for c in cells]
    tot = sum(w, Fraction(0))
    r = exact.binary(rho)
    return [exact.float_down(r * wi / tot) for wi in w]


def expected_l1_error_gaussian(cells: Sequence[int], rho: float) -> float:
    """Expected total L1 error (counts) of measuring tables of ``cells`` cells with the Gaussian
    (L2 sensitivity sqrt(2)) at :func:`allocate_rho` shares of ``rho``:
    ``sqrt(2 / pi) sqrt(2) W^(3/2) / sqrt(2 rho) = W^(3/2) sqrt(2 / (pi rho))``,
    ``W = sum c_i^(2/3)``."""
    w = math.fsum(float(int(c)) ** (2.0 / 3.0) for c in cells)
    return w ** 1.5 * math.sqrt(2.0 / (math.pi * float(rho)))


def select_pairs(noisy_scores: Sequence[float], pair_cells: Sequence[int],
                 oneway_cells: Sequence[int], eps_meas: float | None, *, max_pairs: int | None,
                 rule: str = "densemarg", rho_meas: float | None = None) -> list[int]:
    """Indices of the selected pairs, in the order chosen. Post-processing: reads only the noisy
    scores and public values (cells, ``eps_meas``, the hyperparameters).

    ``densemarg`` (PrivSyn's DenseMarg trade-off, greedy): the error of the model is the
    InDif of every pair *not* measured (it is modelled as independent) plus the expected
    noise error of every table measured. With ``S = sum sqrt(cells)`` of the tables chosen so
    far (the 1-ways at the start), adding pair ``p`` of ``c_p`` cells raises the noise error
    by ``2 ((S + sqrt(c_p))^2 - S^2) / eps_meas`` (:func:`allocate`) and removes its InDif;
    take the pair with the largest net gain while it is positive and fewer than ``max_pairs``
    (None: no cap) are chosen. ``top``: the ``max_pairs`` largest noisy scores (all pairs if
    ``max_pairs`` is None). Ties go to the lower index (deterministic).

    ``rho_meas`` (zCDP mode; ``eps_meas`` is then not used): the noise error is the Gaussian's,
    ``K W^(3/2)`` with ``W = sum cells^(2/3)`` and ``K = sqrt(2 / (pi rho_meas))``
    (:func:`expected_l1_error_gaussian`), so adding pair ``p`` raises it by
    ``K ((W + c_p^(2/3))^(3/2) - W^(3/2))``.
    """
    if rule not in SELECT_RULES:
        raise ValueError(f"privsyn: select_rule must be one of {SELECT_RULES}, got {rule!r}")
    scores = np.asarray(noisy_scores, dtype=np.float64)
    k = scores.shape[0]
    cap = k if max_pairs is None else min(int(max_pairs), k)
    gauss = rho_meas is not None
    pc = np.asarray(pair_cells, dtype=np.float64)
    sqrt_c = pc ** (2.0 / 3.0) if gauss else np.sqrt(pc)
    s = math.fsum((float(int(c)) ** (2.0 / 3.0) if gauss else math.sqrt(int(c))) for c in oneway_cells)
    k_gauss = math.sqrt(2.0 / (math.pi * float(rho_meas))) if gauss else 0.0
    chosen: list[int] = []
    free = np.ones(k, dtype=bool)
    while len(chosen) < cap:
        if rule == "densemarg" and gauss:
            gain = scores - k_gauss * ((s + sqrt_c) ** 1.5 - s ** 1.5)
        elif rule == "densemarg":
            gain = scores - 2.0 * (2.0 * s * sqrt_c + sqrt_c * sqrt_c) / float(eps_meas)
        else:
            gain = scores.copy()
        gain[~free] = -np.inf
        best = int(np.argmax(gain))
        if not free[best] or (rule == "densemarg" and not gain[best] > 0):
            break
        chosen.append(best)
        free[best] = False
        s += float(sqrt_c[best])
    return chosen


# --------------------------------------------------------------------------------------------
# consistency (post-processing)
# --------------------------------------------------------------------------------------------

def consistent_tables(noisy: Sequence[np.ndarray], attrs: Sequence[tuple[int, ...]],
                      scales: Sequence[float], total: float, rounds: int,
                      variances: Sequence[float] | None = None) -> list[np.ndarray]:
    """Noisy tables -> non-negative tables that agree on shared columns and sum to ``total``.

    ``marginals.make_consistent`` (PriView/PrivSyn consistency: for the empty set and every
    shared column, the inverse-variance weighted average of the tables' projections, the
    difference spread evenly over the summed cells) with per-cell variances ``2 b_i^2`` from
    the public Laplace scales ``b_i``, and ``norm_sub.norm_sub`` (PrivSyn's norm-sub) for
    non-negativity, alternated ``rounds`` times. Post-processing: reads only the noisy tables,
    their (public) noise scales and the public total ``n``. ``variances``: the per-cell noise
    variances themselves (e.g. ``sigma^2`` of Gaussian noise), in place of ``2 b^2``.
    """
    if not noisy:
        return []
    var = [2.0 * float(b) ** 2 for b in scales] if variances is None else [float(v) for v in variances]
    return make_consistent([np.asarray(t, dtype=np.float64) for t in noisy], list(attrs),
                           total=float(total), rounds=int(rounds), cell_variances=var,
                           nonnegative=norm_sub)


# --------------------------------------------------------------------------------------------
# GUM (post-processing)
# --------------------------------------------------------------------------------------------

#: share of the moved records that copy a whole existing record of the target cell
#: (duplication) rather than overwrite only the marginal's columns (replacement), by round
#: (the last value for later rounds): replacement creates new combinations early, duplication
#: keeps the other columns' joint distribution once the data are close (PrivSyn, A.2).
DUPLICATE_SHARE = (0.5, 0.75, 0.9)

#: GUM's step decays by this factor every STEP_EVERY rounds (PrivSyn, A.3: step decay).
STEP_DECAY = 0.5
STEP_EVERY = 2


def _draw(p: np.ndarray, m: int, rng: np.random.Generator) -> np.ndarray:
    """m i.i.d. draws from the distribution ``p`` (inverse CDF on uniforms)."""
    cdf = np.cumsum(p, dtype=np.float64)
    cdf /= cdf[-1]
    out = np.searchsorted(cdf, rng.random(m), side="right")
    np.minimum(out, p.shape[0] - 1, out=out)
    return out.astype(np.int64, copy=False)


def _keys(X: np.ndarray, cols: tuple[int, ...], sizes: tuple[int, ...]) -> np.ndarray:
    key = X[cols[0]].astype(np.intp)
    for c, k in zip(cols[1:], sizes[1:]):
        key *= k
        key += X[c]
    return key


def _gum_step(X: np.ndarray, cols: tuple[int, ...], sizes: tuple[int, ...], p: np.ndarray,
              alpha: float, dup_share: float, rng: np.random.Generator) -> None:
    """Move the records' marginal on ``cols`` a step ``alpha`` toward the target ``p``, in place.

    ``X`` is (d, m). With ``s`` the current counts and ``t = m p`` the target, a cell is
    over-full (``s > t``) or under-full (``s < t``). One uniform per record decides:

    * a record of an over-full cell is *moved* with probability ``alpha (s - t) / s``, so about
      ``alpha (s - t)`` leave each such cell;
    * a record of a non-empty under-full cell is a *source* with probability
      ``min(1, dup_share alpha (t - s) / s)``: about ``dup_share alpha (t - s)`` per cell (at
      most all of its records).

    Moved records, in random order, first become copies of the sources, all columns
    (*duplication*, which keeps the joint distribution of the other columns); the moved
    records left over get only the marginal's columns set (*replacement*, which can fill
    empty cells and create new combinations) to a cell drawn with probability proportional to
    the expected shortfall ``alpha (t - s) - s P(source)``. So about ``alpha (t - s)`` records
    enter each under-full cell, and the number of records never changes (PrivSyn's GUM,
    appendix A.2 of Li, Zhang & Wang). Records are chosen by independent coin flips, so every
    step is O(m) (no sorting).
    """
    m = X.shape[1]
    c = p.shape[0]
    key = _keys(X, cols, sizes)
    s = np.bincount(key, minlength=c).astype(np.float64)
    diff = p * m - s
    deficit = np.maximum(diff, 0.0)
    if not alpha * float(deficit.sum()) >= 0.5:
        return
    over = diff < 0
    prob = np.zeros(c, dtype=np.float64)
    np.divide(alpha * np.maximum(-diff, 0.0), s, out=prob, where=over)
    src_p = np.zeros(c, dtype=np.float64)
    np.divide(dup_share * alpha * deficit, s, out=src_p, where=(deficit > 0) & (s > 0))
    np.minimum(src_p, 1.0, out=src_p)
    prob += src_p
    hit = np.flatnonzero(rng.random(m, dtype=np.float32) < prob.astype(np.float32)[key])
    is_over = over[key[hit]]
    moved = hit[is_over]
    r = moved.shape[0]
    if r == 0:
        return
    sources = hit[~is_over]
    if sources.shape[0] > r:
        sources = sources[rng.permutation(sources.shape[0])[:r]]
    nd = sources.shape[0]
    if 0 < nd < r:
        # which moved records are duplicated and which replaced must be random: taking the
        # first ones in index order ties the kind of update to the position (slower to converge)
        moved = moved[rng.permutation(r)]
    if nd:
        X[:, moved[:nd]] = X[:, sources]
    if nd < r:
        w = np.maximum(alpha * deficit - s * src_p, 0.0)
        if not w.sum() > 0:
            w = deficit
        v = _draw(w, r - nd, rng)
        tgt = moved[nd:]
        for col, k in zip(reversed(cols[1:]), reversed(sizes[1:])):
            v, X[col, tgt] = np.divmod(v, k)
        X[cols[0], tgt] = v


def gum(oneways: Sequence[np.ndarray], marginals: Sequence[tuple[tuple[int, ...], np.ndarray]],
        domain: Sequence[int], m: int, rng: np.random.Generator, *, rounds: int,
        alpha: float) -> np.ndarray:
    """Gradually Update Method: ``m`` records whose marginals approach the targets.

    Start: every column drawn independently from its 1-way distribution ``oneways[j]``. Then
    ``rounds`` rounds; in each, every marginal ``(cols, p)`` (``p`` the flat distribution over
    the cells of ``cols``, C order) in turn, then the 1-way of every column in no marginal,
    moves the records a step toward its target (:func:`_gum_step`); the step starts at
    ``alpha`` and is multiplied by ``STEP_DECAY`` every ``STEP_EVERY`` rounds (step decay,
    PrivSyn A.3). Finally the records are shuffled. All randomness comes from ``rng``.
    Returns int64 (m, d) codes in the domain. Post-processing of the distributions.
    """
    dom = tuple(int(k) for k in domain)
    d = len(dom)
    m = int(m)
    # narrow storage: duplication copies whole records, 3x faster on uint8 than on int64
    X = np.empty((d, m), dtype=np.uint8 if max(dom) <= 256 else np.int32)
    for j in range(d):
        X[j] = _draw(np.asarray(oneways[j], dtype=np.float64), m, rng) if m else 0
    # a column in a 2-way marginal gets its 1-way from it (consistency made them agree)
    covered = {c for cols, _ in marginals for c in cols}
    alone = [j for j in range(d) if dom[j] > 1 and j not in covered]
    if m:
        for r in range(int(rounds)):
            a = float(alpha) * STEP_DECAY ** (r // STEP_EVERY)
            share = DUPLICATE_SHARE[min(r, len(DUPLICATE_SHARE) - 1)]
            for cols, p in marginals:
                _gum_step(X, cols, tuple(dom[c] for c in cols), p, a, share, rng)
            for j in alone:
                _gum_step(X, (j,), (dom[j],), oneways[j], a, share, rng)
        # records are exchangeable by construction; a final shuffle makes any prefix of the
        # output (sample_constrained keeps the first n rows) a uniform subset all the same
        X = X[:, rng.permutation(m)]
    return np.ascontiguousarray(X.T, dtype=np.int64)


# --------------------------------------------------------------------------------------------
# model
# --------------------------------------------------------------------------------------------

def _distribution(table: np.ndarray) -> np.ndarray:
    t = np.clip(np.asarray(table, dtype=np.float64).reshape(-1), 0.0, None)
    tot = t.sum()
    return t / tot if tot > 0 else np.full(t.shape[0], 1.0 / t.shape[0])


@dataclass
class PrivSynModel:
    """The consistent noisy marginals; ``sample`` synthesises records with GUM.

    ``oneways[j]``: distribution of column j (uniform point mass for a 1-value column);
    ``marginals``: ``[(cols, p)]`` for the selected pairs, ``p`` flat over their cells.
    """

    domain: tuple[int, ...]
    oneways: list[np.ndarray]
    marginals: list[tuple[tuple[int, ...], np.ndarray]]
    gum_rounds: int
    gum_alpha: float
    selected: list[tuple[int, int]] = field(default_factory=list)

    def sample(self, m: int, rng: np.random.Generator) -> np.ndarray:
        """``m`` records by GUM (post-processing; all randomness from ``rng``)."""
        if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 0:
            raise ValueError(f"the number of rows to sample must be an integer >= 0, got {m!r}")
        return gum(self.oneways, self.marginals, self.domain, int(m), rng,
                   rounds=self.gum_rounds, alpha=self.gum_alpha)

    def description(self, names: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """The selected 2-way marginals (in the order chosen), optionally with column names."""
        if names is not None and len(names) != len(self.domain):
            raise ValueError(f"{len(names)} names for {len(self.domain)} columns")
        out = []
        for a, b in self.selected:
            e: dict[str, Any] = {"columns": [a, b], "cells": self.domain[a] * self.domain[b]}
            if names is not None:
                e["names"] = [names[a], names[b]]
            out.append(e)
        return out


# --------------------------------------------------------------------------------------------
# generator
# --------------------------------------------------------------------------------------------

def _largest_eps_within(rho_part: Fraction) -> float:
    """The largest float ``e`` with ``binary(e)^2 / 2 <= rho_part`` (a pure epsilon whose zCDP
    charge ``e^2 / 2`` fits the rational part), decided on rationals."""
    e = math.sqrt(2.0 * float(rho_part))
    while e > 0 and exact.binary(e) ** 2 / 2 > rho_part:
        e = math.nextafter(e, 0.0)
    while exact.binary(math.nextafter(e, math.inf)) ** 2 / 2 <= rho_part:
        e = math.nextafter(e, math.inf)
    return e


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _check_split(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) \
            or not math.isfinite(float(v)) or not 0 < float(v) < 1:
        raise ValueError(f"privsyn: split_select must be a number in (0, 1), got {v!r}")
    return float(v)


class PrivSyn:
    """PrivSyn-style generator (pure DP, change-one neighbours, n public); see the module doc.

    Hyperparameters: ``split_select`` (share of epsilon for the selection), ``max_pairs`` (cap
    on the selected 2-way marginals; None = no cap), ``select_rule`` (``densemarg`` or
    ``top``), ``gum_rounds`` and ``gum_alpha`` (GUM's rounds and initial step),
    ``consistency_rounds``, ``estimator`` (``consistency``, the default: every table on its
    codes, PrivSyn's consistency and norm-sub; ``hierarchical``: the 2-way tables are selected
    and measured on merged codes, a column of more than ``pair_values`` values merging
    ``ceil(k / pair_values)`` consecutive codes, and :mod:`.estimation` makes all tables
    consistent; ``consistency_rounds`` is then not used) and ``pair_values`` (used by the
    ``hierarchical`` estimator only).

    The budget: exactly one of ``epsilon`` (pure DP, ``definition = "pure"``; positional as
    always) and ``rho`` (zCDP, ``definition = "zcdp"``: Gaussian count tables; see the module
    doc). ``rho`` is not a hyperparameter.
    """

    type = "privsyn"
    #: ``fit(rows, domain, rand, counts=...)`` fits on record types
    FITS_TYPES = True
    HYPERPARAMETERS = ("split_select", "max_pairs", "select_rule", "gum_rounds", "gum_alpha",
                       "consistency_rounds", "estimator", "pair_values")

    def __init__(self, epsilon: float | None = None, split_select: float = 0.1,
                 max_pairs: int | None = None, select_rule: str = "densemarg", gum_rounds: int = 6,
                 gum_alpha: float = 1.0, consistency_rounds: int = 10,
                 estimator: str = "consistency", pair_values: int = 20,  # = DEFAULT_PAIR_VALUES
                 rho: float | None = None) -> None:
        if (epsilon is None) == (rho is None):
            raise ValueError("privsyn: give exactly one of epsilon (pure DP) and rho (zCDP), got "
                             f"epsilon={epsilon!r}, rho={rho!r}")
        if rho is not None:
            if isinstance(rho, bool) or not isinstance(rho, (int, float)) \
                    or not math.isfinite(rho) or rho <= 0:
                raise ValueError(f"privsyn: rho must be a finite number > 0, got {rho!r}")
        elif isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) \
                or not math.isfinite(epsilon) or epsilon <= 0:
            raise ValueError(f"privsyn: epsilon must be a finite number > 0, got {epsilon!r}")
        #: the pure-DP budget (None in zCDP mode)
        self.epsilon: float | None = None if epsilon is None else float(epsilon)
        #: the zCDP budget (None in pure mode)
        self.rho: float | None = None if rho is None else float(rho)
        #: ``"pure"`` (epsilon) or ``"zcdp"`` (rho)
        self.definition = "pure" if rho is None else "zcdp"
        self.split_select = _check_split(split_select)
        if max_pairs is not None and (not _is_int(max_pairs) or max_pairs < 0):
            raise ValueError(f"privsyn: max_pairs must be an integer >= 0 or null, got {max_pairs!r}")
        self.max_pairs = None if max_pairs is None else int(max_pairs)
        if select_rule not in SELECT_RULES:
            raise ValueError(f"privsyn: select_rule must be one of {list(SELECT_RULES)}, got {select_rule!r}")
        self.select_rule = select_rule
        if not _is_int(gum_rounds) or not 0 <= gum_rounds <= 1000:
            raise ValueError(f"privsyn: gum_rounds must be an integer in 0..1000, got {gum_rounds!r}")
        self.gum_rounds = int(gum_rounds)
        if isinstance(gum_alpha, bool) or not isinstance(gum_alpha, (int, float, np.integer, np.floating)) \
                or not math.isfinite(float(gum_alpha)) or not 0 < float(gum_alpha) <= 1:
            raise ValueError(f"privsyn: gum_alpha must be a number in (0, 1], got {gum_alpha!r}")
        self.gum_alpha = float(gum_alpha)
        if not _is_int(consistency_rounds) or not 0 <= consistency_rounds <= 1000:
            raise ValueError("privsyn: consistency_rounds must be an integer in 0..1000, got "
                             f"{consistency_rounds!r}")
        self.consistency_rounds = int(consistency_rounds)
        if estimator not in ESTIMATORS:
            raise ValueError(f"privsyn: estimator must be one of {list(ESTIMATORS)}, got {estimator!r}")
        self.estimator = estimator
        if not _is_int(pair_values) or not 2 <= pair_values <= MAX_PAIR_VALUES:
            raise ValueError(f"privsyn: pair_values must be an integer in 2..{MAX_PAIR_VALUES}, got "
                             f"{pair_values!r}")
        self.pair_values = int(pair_values)
        self.selected: list[tuple[int, int]] | None = None  # set by fit (last fitted selection)

    # -- protocol -------------------------------------------------------------------------
    @property
    def epsilon_select(self) -> float:
        """Selection budget (a pure epsilon, the InDif Laplace draw), exactly: the largest float
        <= dec(split_select) x dec(epsilon); in zCDP mode the largest float ``e`` with
        ``binary(e)^2 / 2 <= dec(split_select) x dec(rho)``."""
        if self.rho is not None:
            return _largest_eps_within(exact.dec(self.split_select) * exact.dec(self.rho))
        return exact.float_down(exact.dec(self.split_select) * exact.dec(self.epsilon))

    @property
    def epsilon_measure(self) -> float:
        """Measurement budget: the largest float <= dec(epsilon) - binary(epsilon_select)
        (pure mode only: zCDP mode measures at :attr:`rho_measure`)."""
        if self.rho is not None:
            raise ValueError("privsyn: a zCDP generator measures in rho (rho_measure), not epsilon")
        return exact.float_down(exact.dec(self.epsilon) - exact.binary(self.epsilon_select))

    @property
    def rho_select(self) -> float:
        """zCDP mode: the rho charged for the selection, ``float_up(binary(eps_sel)^2 / 2)`` (an
        eps-DP release is eps^2/2-zCDP, Bun & Steinke 2016, Prop. 1.4)."""
        if self.rho is None:
            raise ValueError("privsyn: a pure-DP generator has no rho")
        return exact.float_up(exact.binary(self.epsilon_select) ** 2 / 2)

    @property
    def rho_measure(self) -> float:
        """zCDP mode: the rho of the count tables, the largest float <= dec(rho) -
        binary(rho_select); split over the tables by :func:`allocate_rho`."""
        if self.rho is None:
            raise ValueError("privsyn: a pure-DP generator has no rho")
        return exact.float_down(exact.dec(self.rho) - exact.binary(self.rho_select))

    def hyperparameters(self) -> dict[str, Any]:
        """Constructor keyword arguments (round-trip: ``PrivSyn(eps, **hyperparameters())``).
        ``estimator`` and ``pair_values`` (added in dpbundle 0.3) are listed only when not at
        their defaults, so the default generator's dictionary is what it always was."""
        hp: dict[str, Any] = {"split_select": self.split_select, "max_pairs": self.max_pairs,
                              "select_rule": self.select_rule, "gum_rounds": self.gum_rounds,
                              "gum_alpha": self.gum_alpha,
                              "consistency_rounds": self.consistency_rounds}
        if self.estimator != "consistency":
            hp["estimator"] = self.estimator
        if self.pair_values != DEFAULT_PAIR_VALUES:
            hp["pair_values"] = self.pair_values
        return hp

    def privacy_map(self, d_in: int) -> float:
        """Change-one distance -> epsilon: d_in * epsilon (pure DP, group privacy); in zCDP
        mode -> rho: rho * d_in^2 (zCDP group privacy, Bun & Steinke 2016, Prop. 1.9)."""
        if d_in < 0:
            raise ValueError(f"d_in must be >= 0, got {d_in}")
        if self.rho is not None:
            return self.rho * float(d_in) ** 2
        return float(d_in) * self.epsilon

    def budget_parts(self) -> list[dict[str, Any]]:
        """The two parts (floats handed to OpenDP, binary sum <= the declared epsilon); in
        zCDP mode with key ``rho`` (binary sum <= the declared rho)."""
        if self.rho is not None:
            return [{"purpose": "marginal selection (noisy InDif scores: Laplace at a pure epsilon "
                                "e, charged e^2/2)",
                     "rho": self.rho_select},
                    {"purpose": "1-way and selected 2-way marginals (Gaussian, split by "
                                "cells^(2/3))",
                     "rho": self.rho_measure}]
        return [{"purpose": "marginal selection (noisy InDif scores)",
                 "epsilon": self.epsilon_select},
                {"purpose": "1-way and selected 2-way marginals (split by sqrt(cells))",
                 "epsilon": self.epsilon_measure}]

    # -- fit ------------------------------------------------------------------------------
    def fit(self, codes: np.ndarray, domain: Sequence[int], rand: Randomness,
            counts: np.ndarray | None = None) -> PrivSynModel:
        """Select pairs (eps_sel), measure the tables (eps_meas), make them consistent.
        ``counts``: ``codes`` are distinct records occurring that many times (the same counts,
        the same fit)."""
        codes, dom = check_codes(codes, domain)
        weights = None if counts is None else record_weights(counts, codes.shape[0])
        n, d = (codes.shape[0] if weights is None else int(counts.sum())), codes.shape[1]
        if n < 1:
            raise ValueError("privsyn: need at least one record")
        if n > MAX_ROWS:
            raise ValueError(f"privsyn: at most {MAX_ROWS} records, got {n}")

        # ---- pairs measured on merged codes (hierarchical estimator; public rule) ----
        hier = self.estimator == "hierarchical"
        factors = [estimation.merge_factor(k, self.pair_values) if hier else 1 for k in dom]
        pdom = tuple(estimation.merged_size(k, g) for k, g in zip(dom, factors))
        pcodes = codes if not hier else np.stack(
            [estimation.merge_codes(codes[:, j], factors[j]) for j in range(d)], axis=1)

        # ---- selection (eps_sel): one Laplace vector draw on the K InDif scores ----
        pairs = candidate_pairs(dom)
        tables: dict[tuple[int, ...], np.ndarray] = {}
        noisy_scores = np.zeros(0)
        if pairs:
            for a, b in pairs:
                tables[(a, b)] = pair_table(pcodes, pdom, a, b, weights)
            true = np.array([indif_score(indif_numerator(tables[p]), n) for p in pairs],
                            dtype=np.float64)
            noisy_scores = np.asarray(rand.laplace(
                true, sensitivity=INDIF_SENSITIVITY * len(pairs), epsilon=self.epsilon_select,
                purpose="privsyn: InDif scores of all candidate pairs"), dtype=np.float64)
        ones = [(j,) for j in range(d) if dom[j] >= 2]
        zcdp = self.rho is not None
        eps_meas = None if zcdp else self.epsilon_measure
        rho_meas = self.rho_measure if zcdp else None
        chosen = select_pairs(noisy_scores, [pdom[a] * pdom[b] for a, b in pairs],
                              [dom[j] for (j,) in ones], eps_meas,
                              max_pairs=self.max_pairs, rule=self.select_rule, rho_meas=rho_meas)
        selected = [pairs[i] for i in chosen]

        # ---- measurements (eps_meas or rho_meas): 1-ways, then the selected pairs ----
        attrs: list[tuple[int, ...]] = ones + selected
        cells = [dom[a[0]] if len(a) == 1 else pdom[a[0]] * pdom[a[1]] for a in attrs]
        shares = allocate_rho(rho_meas, cells) if zcdp else allocate(eps_meas, cells)
        noisy, scales, variances, mean_abs = [], [], [], []
        measured: list[MeasuredTable] = []      # publish: tables (pure DP)
        for a, e in zip(attrs, shares):
            if len(a) == 1:
                true_t = np.bincount(codes[:, a[0]], weights=weights, minlength=dom[a[0]]).astype(np.int64)
                what = f"privsyn: 1-way marginal of column {a[0]}"
            else:
                t = tables.get(a)
                true_t = (t if t is not None else pair_table(pcodes, pdom, *a, weights)).reshape(-1)
                what = f"privsyn: 2-way marginal of columns {list(a)}"
                if factors[a[0]] > 1 or factors[a[1]] > 1:
                    what += f" (codes merged {factors[a[0]]} and {factors[a[1]]} at a time)"
            if zcdp:
                out = rand.gaussian(true_t, sensitivity=GAUSSIAN_COUNT_SENSITIVITY, rho=e,
                                    purpose=what, integer=True)
                sigma = calibrated_gaussian_scale(GAUSSIAN_COUNT_SENSITIVITY, e)
                variances.append(sigma * sigma)
                mean_abs.append(sigma * math.sqrt(2.0 / math.pi))
            else:
                out = rand.laplace(true_t, sensitivity=COUNT_SENSITIVITY, epsilon=e, purpose=what,
                                   integer=True)
                b = COUNT_SENSITIVITY / e
                measured.append(measured_table(a, [1] if len(a) == 1 else [factors[a[0]], factors[a[1]]],
                                               dom, out, COUNT_SENSITIVITY, e, what))
                scales.append(b)
                variances.append(2.0 * b * b)
                mean_abs.append(None)   # the Laplace's: sqrt(variance / 2) = b
            shape = [dom[a[0]]] if len(a) == 1 else [pdom[j] for j in a]
            noisy.append(np.asarray(out, dtype=np.float64).reshape(shape))
        self.selected = list(selected)
        if not zcdp:    # the estimator of the published tables (and of dpbundle sample --copies)
            return self.estimate(measured, dom, n)
        return self._model(dom, attrs, noisy, scales, variances, mean_abs, n, selected)

    def estimate(self, tables: Sequence[MeasuredTable], domain: Sequence[int], n: float) -> PrivSynModel:
        """The model from the measured tables (pure DP; post-processing: no data, no budget; the
        fit's own code, and a refit on other counts for ``dpbundle sample --copies``): the 1-way
        tables, then the selected pairs (merged codes under the hierarchical estimator), each with
        the Laplace's variance ``2 b^2``, ``b = 2 / epsilon`` of the table."""
        dom = tuple(int(k) for k in domain)
        attrs = [tuple(t.columns) for t in tables]
        noisy = [t.counts.astype(np.float64).reshape(t.sizes) for t in tables]
        scales = [COUNT_SENSITIVITY / t.epsilon for t in tables]
        variances = [2.0 * b * b for b in scales]
        selected = [a for a in attrs if len(a) == 2]
        model = self._model(dom, attrs, noisy, scales, variances, [None] * len(attrs), n, selected)
        return attach(model, tables)

    def _model(self, dom: tuple[int, ...], attrs: list[tuple[int, ...]], noisy: list[np.ndarray],
               scales: list[float], variances: list[float], mean_abs: list[float | None], n: float,
               selected: list[tuple[int, int]]) -> PrivSynModel:
        """Post-processing of the noisy tables: the hierarchical estimator's model, or the
        consistent tables (variances used under zCDP, the Laplace scales otherwise) and their
        distributions."""
        d = len(dom)
        if self.estimator == "hierarchical":
            factors = [estimation.merge_factor(k, self.pair_values) for k in dom]
            return self._hierarchical_model(dom, factors, attrs, noisy, variances, n, selected, mean_abs)
        zcdp = self.rho is not None
        tabs = consistent_tables(noisy, attrs, scales, float(n), self.consistency_rounds,
                                 variances=variances if zcdp else None)
        oneways = [np.ones(1)] * d
        margs: list[tuple[tuple[int, ...], np.ndarray]] = []
        for a, t in zip(attrs, tabs):
            if len(a) == 1:
                oneways[a[0]] = _distribution(t)
            else:
                margs.append((a, _distribution(t)))
        for j in range(d):
            if dom[j] < 2:
                oneways[j] = np.ones(1)
        return PrivSynModel(domain=dom, oneways=oneways, marginals=margs,
                            gum_rounds=self.gum_rounds, gum_alpha=self.gum_alpha,
                            selected=list(selected))

    def _hierarchical_model(self, dom: tuple[int, ...], factors: list[int],
                               attrs: list[tuple[int, ...]], noisy: list[np.ndarray],
                               variances: list[float], n: int,
                               selected: list[tuple[int, int]],
                               mean_abs: list[float | None]) -> PrivSynModel:
        """The ``hierarchical`` estimator's model (post-processing of the noisy tables, their
        public per-cell noise variances and expected absolute noise (None: the Laplace's), the
        domain and n): :func:`estimation.hierarchical_estimate`."""
        ones, ones_var, pairs = {}, {}, []
        for a, t, v, m in zip(attrs, noisy, variances, mean_abs):
            if len(a) == 1:
                ones[a[0]], ones_var[a[0]] = t, v
            else:
                pairs.append(estimation.PairMeasurement(a, t, (factors[a[0]], factors[a[1]]), v,
                                                        mean_abs=m))
        fine1, fine2 = estimation.hierarchical_estimate(dom, ones, ones_var, pairs, factors, float(n))
        oneways = [_distribution(t) if k >= 2 else np.ones(1) for t, k in zip(fine1, dom)]
        margs = [(m.cols, _distribution(t)) for m, t in zip(pairs, fine2)]
        return PrivSynModel(domain=dom, oneways=oneways, marginals=margs, gum_rounds=self.gum_rounds,
                            gum_alpha=self.gum_alpha, selected=list(selected))


def grid_problems(grid: dict) -> list[str]:
    """Problems of a ``privsyn`` grid (spec validation), each as ``".key[j]: message"``: every
    value of every hyperparameter must be accepted by the constructor."""
    return constructor_grid_problems(PrivSyn, PrivSyn.HYPERPARAMETERS, grid)
