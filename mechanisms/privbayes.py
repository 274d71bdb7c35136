"""PrivBayes (Zhang, Cormode, Procopiuc, Srivastava, Xiao; SIGMOD 2014 / TODS 2017), pure DP.

Input: integer codes ``(n, d)`` with a public domain ``(k_0, ..., k_{d-1})``; ``n`` is public
(bounded neighbours: change one record). Total budget ``eps`` split in two parts:

* ``eps_1 = epsilon_split * eps`` -- the network structure. The first attribute is drawn
  uniformly at random (post-processing randomness, no data involved); then ``d - 1`` greedy
  steps, each choosing one pair (attribute X, parent set Pi) with the exponential mechanism at
  ``eps_1 / (d - 1)`` on the score R(X, Pi) (sensitivity ``3/n + 2/n^2``, see
  :func:`r_score_sensitivity`) or, with ``score="MI"``, the mutual information (see
  :func:`mi_score_sensitivity`). Sequential composition: ``(d - 1) * eps_1 / (d - 1) = eps_1``.
  The candidate pairs of a step depend only on public things (domain, n, hyperparameters) and
  on the attributes chosen so far (earlier DP outputs).
* ``eps_2 = (1 - epsilon_split) * eps`` -- the parameters: ``d`` noisy count tables of
  (X, Pi), (discrete) Laplace with L1 sensitivity 2 and ``eps_2 / d`` each (see
  :func:`count_table_sensitivity`). Sequential composition: ``d * eps_2 / d = eps_2``.

Exact arithmetic: ``eps_1 = float_down(dec(epsilon_split) dec(eps))`` and ``eps_2 =
float_down(dec(eps) - binary(eps_1))`` (rationals, ``mechanisms/exact.py``), so
``binary(eps_1) + binary(eps_2) <= dec(eps)``; the per-step and per-table floats are the
largest with ``(d - 1) binary(step) <= binary(eps_1)`` and ``d binary(table) <= binary(eps_2)``.

Everything after the noisy tables (norm-sub, normalising, sampling) is post-processing, so
the whole ``fit`` is ``eps_1 + eps_2 = eps``-DP under change-one distance, and
``privacy_map(d_in) = d_in * eps`` (group privacy).

Parents may be *generalised* (coarsened) by a public hierarchy computed from the domain size
only: level ``l`` of a column maps code ``c`` to ``c >> l`` (= ``c // 2**l``, merging adjacent
codes in pairs, then in fours, ...), so level ``l`` has ``ceil(k / 2**l)`` values. Levels with a
single value carry no information and are never used.

Flavours: ``theta`` (theta-usefulness bounds the size of every table, the original PrivBayes
rule, see :func:`theta_max_cells`) or ``degree`` (parent sets of ``min(degree, #chosen)``
attributes at level 0).

Accurate one-way shares (hyperparameter ``oneway``, :mod:`mechanisms.oneway`). The marginal a
sample of the model implies for a rare value is biased: the value's mass is spread over many
noisy cells, and norm-sub + normalising each table row moves it. But the *raw* noisy table of
(X, Pi) summed over Pi is an unbiased noisy count of X's one-way histogram, with per-cell variance
``|dom(Pi)| var(DLap(2 d / eps_2))``. So:

* ``oneway="tables"`` (no extra budget): the model's samples are raked to those sums (after
  norm-sub to n); pure post-processing of the tables.
* ``oneway="measure"``: a third part ``eps_0 = float_down(dec(oneway_split) dec(eps))``
  measures the ``d`` one-way histograms (discrete Laplace, sensitivity 2 and ``eps_0 / d`` each:
  the ``d`` concatenated histograms have L1 sensitivity ``2 d``); ``eps_1``/``eps_2`` split the
  rest ``dec(eps) - binary(eps_0)`` as above. Each measured histogram is combined with the table
  sum by inverse-variance weighting (independent unbiased estimates), norm-sub'ed to n, and the
  samples are raked to it. Total: ``eps_0 + eps_1 + eps_2 <= eps`` exactly.

With ``oneway="none"`` (the default) ``eps_0 = 0`` and everything, transcripts included, is as
without the option.
"""
from __future__ import annotations

import itertools
import math
from collections import OrderedDict
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Sequence

import numpy as np

from . import exact
from . import oneway as ow
from .measured import MeasuredTable, attach, measured_table
from .norm_sub import norm_sub  # re-exported: dpbundle.mechanisms.privbayes.norm_sub

__all__ = [
    "PrivBayes",
    "PrivBayesModel",
    "ONEWAY_METHODS",
    "oneway_grid_problems",
    "r_score",
    "r_score_sensitivity",
    "r_of_table",
    "r_numerator",
    "mi_of_table",
    "mi_rounding_allowance",
    "mi_score",
    "mi_score_sensitivity",
    "count_table",
    "count_table_sensitivity",
    "theta_max_cells",
    "level_size",
    "max_level",
]

#: A parent: (column index, generalisation level).
Parent = tuple[int, int]

#: Upper bound on the (attribute, parent set) candidates scored in one greedy step. Candidates
#: beyond it are dropped deterministically (public rule: largest parent domain first, see
#: :meth:`PrivBayes._candidates`), which keeps ``fit`` fast for wide tables.
MAX_CANDIDATES_PER_STEP = 400

#: Upper bound on the parent sets enumerated per attribute and step in the theta flavour
#: (depth-first, finest levels of the earliest attributes first); only matters for wide tables.
MAX_ENUMERATED_SETS = 100_000

#: Largest conditional table (cells) the degree flavour will build (memory guard).
MAX_TABLE_CELLS = 1 << 24


# --------------------------------------------------------------------------------------------
# public math helpers (also used by the tests)
# --------------------------------------------------------------------------------------------

def level_size(size: int, level: int) -> int:
    """Number of values of a column of ``size`` codes at generalisation ``level``: ceil(size / 2**level)."""
    return ((int(size) - 1) >> int(level)) + 1


def max_level(size: int) -> int:
    """Coarsest useful level: the largest ``l`` with ``level_size(size, l) >= 2`` (-1 if size < 2)."""
    size = int(size)
    if size < 2:
        return -1
    return (size - 1).bit_length() - 1


def theta_max_cells(n: int, epsilon_2: float, d: int, theta: float) -> float:
    """Largest table size |dom(X)| * |dom(Pi)| that is theta-useful.

    Derivation (PrivBayes TODS 2017, Def. of theta-usefulness: the average scale of the
    information in a noisy distribution over the average scale of its noise is at least theta).
    Each of the ``d`` tables gets ``eps_2 / d``; on the frequency scale (counts / n) one changed
    record moves L1 mass ``2/n``, so the Laplace noise per cell has scale ``2 d / (n eps_2)``.
    A table with ``|dom(X, Pi)|`` cells has average information ``1 / |dom(X, Pi)|`` per cell.
    theta-useful iff ``(1/|dom|) / (2 d / (n eps_2)) >= theta`` iff
    ``|dom(X, Pi)| <= n eps_2 / (2 d theta)``.  It is ``eps_2``, the budget that actually pays
    for the tables -- not the total epsilon (the bug in the code behind the 2024 release).
    """
    return float(n) * float(epsilon_2) / (2.0 * int(d) * float(theta))


#: Largest n for which R's sensitivity 3/n + 2/n^2 also covers the rounding of the released
#: score (:func:`r_score_sensitivity`); above it an allowance of 2^-52 is added.
R_ROUNDED_ROWS = 1 << 27

#: Assumed accuracy of ``np.log2`` on float64, relative: 2^-42 (1024 ulps). NumPy validates
#: its float64 log2 to 1 ulp (numpy/_core/tests/data/umath-validation-set-log2.csv); the margin
#: makes the MI allowance below hold for any libm that is not broken.
LOG2_REL_ERROR = 2.0 ** -42


def r_score_sensitivity(n: int) -> float:
    """Sensitivity of R(X, Pi) = 1/2 ||Pr[X,Pi] - Pr[X] Pr[Pi]||_1 under change-one, n public: 3/n + 2/n^2.

    Derivation: one changed record moves the empirical joint p by L1 at most 2/n (one cell
    -1/n, one +1/n) and each marginal a = Pr[X], b = Pr[Pi] by L1 at most 2/n. For the product
    sum_{x,pi} |a'b' - ab| = sum |da b + a db + da db| <= |da|_1 |b|_1 + |a|_1 |db|_1 +
    |da|_1 |db|_1 <= 2/n + 2/n + 4/n^2. By the triangle inequality the L1 norm inside R moves
    at most 2/n + 4/n + 4/n^2, so R moves at most 3/n + 2/n^2. (Holds for generalised parents
    too: they are a fixed public function of the record.)

    The released float, not only the exact R. In counts R = N / (2 n^2) with the integer
    N = sum |n T - A B^T| (T the count table, A, B its margins), and a changed record moves N by
    at most 6n - 2 (:func:`dpbundle.mechanisms.privsyn.indif_sensitivity`: N is n InDif), so the
    exact R moves by at most (3n - 1)/n^2, 3/n^2 below the bound. :func:`r_of_table` releases a
    float within 1/n^2 of the exact R (the float formula when an exact check shows it is that
    close, else the correctly rounded N / (2 n^2), within 2^-54 <= 1/n^2 for n <= 2^27), so two
    neighbours' floats differ by at most (3n + 1)/n^2; the float returned here is checked
    (exactly, with fractions) to be at least that. For n > 2^27 the score is always the correctly
    rounded quotient (within 2^-54 each) and 2^-52 is added to the bound.
    """
    n = int(n)
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    nf = float(n)
    s = 3.0 / nf + 2.0 / (nf * nf)
    if n <= R_ROUNDED_ROWS:
        need = Fraction(3 * n + 1, n * n)
    else:
        s += 2.0 ** -52
        need = Fraction(3 * n - 1, n * n) + Fraction(1, 2 ** 53)
    while Fraction(s) < need:   # never for n <= 2^27 (the float formula is 3 ulps from 3/n + 2/n^2)
        s = math.nextafter(s, math.inf)
    return s


def mi_rounding_allowance(n: int) -> float:
    """2 E(n), E(n) = log2(n) 2^-39 bounding the rounding of :func:`mi_of_table` (and of the
    float formula of the sensitivity), added to :func:`mi_score_sensitivity`.

    Derivation. mi_of_table computes I = log2 n + (sum_c T_c log2 T_c - sum_x A_x log2 A_x -
    sum_pi B_pi log2 B_pi) / n over positive integer counts (each family sums to n). With eta =
    LOG2_REL_ERROR and u = 2^-53: each term c log2 c is computed within (eta + u + eta u) of
    itself (relatively); the terms' absolute values sum to W <= 3 n log2 n; math.fsum rounds
    their sum once (u W at most); the division by n and the final addition round once each.
    So |I^ - I| <= log2(n) (3 (eta + 4u) + eta + 2u) <= log2(n) (4 eta + 14 u) <= log2(n) 2^-39
    (4 eta = 2^-40, 14 u < 2^-49). The float formula of the sensitivity (a few log2 calls and
    roundings on numbers below 2 log2(n + 1)/n) is off by far less than log2(n) 2^-40. So the
    allowance 2 log2(n) 2^-39 + log2(n) 2^-40 <= log2(n) 2^-37 covers both neighbours' rounding
    and the formula's: the released floats move by at most the returned sensitivity.
    """
    n = int(n)
    return math.log2(n) * 2.0 ** -37 if n > 1 else 0.0


def mi_score_sensitivity(n: int, kx: int, kpi: int) -> float:
    """Sensitivity (bits) of the empirical mutual information I(X; Pi) under change-one, n public,
    plus :func:`mi_rounding_allowance` (the released scores are floats).

    PrivBayes (SIGMOD 2014 Lemma 4.1 / TODS 2017): if X or Pi has at most 2 values,
    S = (1/n) log2 n + ((n-1)/n) log2(n/(n-1)); otherwise
    S = (2/n) log2((n+1)/2) + ((n-1)/n) log2((n+1)/(n-1)). (Not re-derived here: the tests check
    it exhaustively for n <= 5 on small domains -- it is attained there -- and by hypothesis on
    random neighbours.) Being attained, S leaves no room for the rounding of the float scores:
    hence the allowance (log2(n) 2^-37, about 1e-11 at n = 160,000 against S = 2e-4). If X or
    Pi has one value, I = 0 for every dataset and :func:`mi_of_table` returns exactly 0
    (sensitivity 0). For n = 1, I = 0 for every dataset; we return 1.0 (any positive bound is
    valid).
    """
    n = int(n)
    if min(kx, kpi) < 2:
        return 0.0
    if n <= 1:
        return 1.0
    if min(kx, kpi) == 2:
        s = math.log2(n) / n + (n - 1) / n * math.log2(n / (n - 1))
    else:
        s = 2.0 / n * math.log2((n + 1) / 2.0) + (n - 1) / n * math.log2((n + 1) / (n - 1))
    return s + mi_rounding_allowance(n)


def count_table_sensitivity() -> float:
    """L1 sensitivity of a count table of (X, Pi) under change-one: 2.

    Derivation: the changed record leaves one cell (-1) and enters one cell (+1); if both are
    the same cell nothing moves. Every other record keeps its cell. So ||c(D) - c(D')||_1 <= 2.
    """
    return 2.0


def _parent_sizes(parents: Sequence[Parent], domain: Sequence[int]) -> list[int]:
    return [level_size(domain[j], lv) for j, lv in parents]


def _parent_index(codes: np.ndarray, parents: Sequence[Parent], domain: Sequence[int]) -> np.ndarray:
    """Mixed-radix index of the (generalised) parent configuration of each row (0 if no parent)."""
    idx = np.zeros(codes.shape[0], dtype=np.int64)
    for j, lv in parents:
        idx *= level_size(domain[j], lv)
        idx += codes[:, j] >> lv
    return idx


def count_table(codes: np.ndarray, domain: Sequence[int], x: int, parents: Sequence[Parent],
                weights: np.ndarray | None = None) -> np.ndarray:
    """Counts of (Pi, X) as a float64 array of shape (|dom(Pi)|, |dom(X)|), Pi in mixed radix."""
    kx = int(domain[x])
    n_pi = math.prod(_parent_sizes(parents, domain))
    idx = _parent_index(codes, parents, domain) * kx + codes[:, x]
    c = np.bincount(idx, weights=weights, minlength=n_pi * kx)
    return c.astype(np.float64, copy=False).reshape(n_pi, kx)


def _r_of_table(table: np.ndarray, n: float) -> float:
    """R = 1/2 * sum |p(pi, x) - p(pi) p(x)| for a count table of shape (|Pi|, |X|), in floating
    point (the formula of earlier versions; :func:`r_of_table` releases it only when it is
    within 1/n^2 of the exact value)."""
    p = table / n
    return 0.5 * float(np.abs(p - np.outer(p.sum(axis=1), p.sum(axis=0))).sum())


def r_numerator(table: np.ndarray) -> int:
    """N = sum |n T - A B^T| of a count table, exactly (R = N / (2 n^2))."""
    t = np.rint(np.asarray(table, dtype=np.float64))
    n = int(t.sum())
    if n < 2 ** 31:
        ti = t.astype(np.int64)
        return int(np.abs(n * ti - np.outer(ti.sum(axis=1), ti.sum(axis=0))).sum())
    to = t.astype(np.int64).astype(object)
    return int(np.abs(n * to - np.outer(to.sum(axis=1), to.sum(axis=0))).sum())


def r_of_table(table: np.ndarray, n: int) -> float:
    """The released R score of a count table (n = its total, public): the float formula
    :func:`_r_of_table` when it lies within 1/n^2 of the exact R = N / (2 n^2) (checked with
    fractions; n <= 2^27), else the correctly rounded N / (2 n^2). Within 1/n^2 (n <= 2^27) or
    2^-54 (larger n) of R either way, which :func:`r_score_sensitivity` covers. The first branch
    keeps the scores (and transcripts) of earlier versions wherever they were that accurate."""
    n = int(n)
    N = r_numerator(table)
    den = 2 * n * n
    if n <= R_ROUNDED_ROWS:
        approx = _r_of_table(table, float(n))
        if math.isfinite(approx) and abs(Fraction(approx) - Fraction(N, den)) <= Fraction(1, n * n):
            return approx
    return N / den   # int / int: correctly rounded


def mi_of_table(table: np.ndarray, n: int) -> float:
    """I(X; Pi) in bits of a count table of shape (|Pi|, |X|) (n = its total), computed as
    log2 n + (sum T log2 T - sum A log2 A - sum B log2 B) / n over positive counts, with one
    correctly rounded sum (math.fsum): within log2(n) 2^-39 of the exact I
    (:func:`mi_rounding_allowance`). Exactly 0 when X or Pi has a single value (then I = 0 for
    every dataset); never below 0."""
    t = np.rint(np.asarray(table, dtype=np.float64))
    if min(t.shape) < 2:
        return 0.0
    n = int(n)
    if n <= 1:
        return 0.0
    terms = []
    for v, sign in ((t.ravel(), 1.0), (t.sum(axis=0), -1.0), (t.sum(axis=1), -1.0)):
        v = v[v > 1]          # 1 log2 1 = 0
        terms.append(sign * v * np.log2(v))
    bracket = math.fsum(np.concatenate(terms).tolist())
    return max(0.0, math.log2(n) + bracket / n)


def mi_score(codes: np.ndarray, domain: Sequence[int], x: int, parents: Sequence[Parent]) -> float:
    """Empirical mutual information I(X; Pi) in bits, as released (:func:`mi_of_table`)."""
    return mi_of_table(count_table(codes, domain, x, parents), codes.shape[0])


def r_score(codes: np.ndarray, domain: Sequence[int], x: int, parents: Sequence[Parent]) -> float:
    """R(X, Pi) = 1/2 ||Pr[X, Pi] - Pr[X] Pr[Pi]||_1 on the empirical distribution of ``codes``,
    as released (:func:`r_of_table`)."""
    return r_of_table(count_table(codes, domain, x, parents), codes.shape[0])


# --------------------------------------------------------------------------------------------
# model
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class NetworkNode:
    """One node of the learned Bayesian network: attribute and its (parent, level) pairs."""

    attribute: int
    parents: tuple[Parent, ...]

    def to_dict(self, domain: Sequence[int] | None = None,
                names: Sequence[str] | None = None) -> dict[str, Any]:
        """{"attribute", "parents": [{"attribute", "level"(, "size")}]} (+ "name"s when given)."""
        def one(j: int) -> dict[str, Any]:
            return {"attribute": j} if names is None else {"attribute": j, "name": names[j]}
        parents = []
        for j, lv in self.parents:
            p = {**one(j), "level": lv}
            if domain is not None:
                p["size"] = level_size(domain[j], lv)
            parents.append(p)
        return {**one(self.attribute), "parents": parents}


class PrivBayesModel:
    """The noisy Bayesian network: ancestral sampling from the conditional tables.

    ``conditionals[i]`` has shape (|dom(Pi_i)|, |dom(X_i)|), rows are probability vectors.
    """

    def __init__(self, domain: Sequence[int], network: Sequence[NetworkNode],
                 conditionals: Sequence[np.ndarray]) -> None:
        self.domain = tuple(int(k) for k in domain)
        self.network = tuple(network)
        self.conditionals = tuple(np.asarray(c, dtype=np.float64) for c in conditionals)
        # flattened shifted CDFs: flat[c * k + x] = c + F(x | c); monotone, last of each row = c + 1
        if len(self.conditionals) != len(self.network):
            raise ValueError("one conditional table per network node is needed")
        order = [node.attribute for node in self.network]
        if sorted(order) != list(range(len(self.domain))):
            raise ValueError(f"the network must list every attribute once, got order {order}")
        self._flat: list[np.ndarray] = []
        for i, (node, cond) in enumerate(zip(self.network, self.conditionals)):
            k = self.domain[node.attribute]
            if any(j not in order[:i] or not 0 <= lv <= max(max_level(self.domain[j]), 0)
                   for j, lv in node.parents):
                raise ValueError(f"attribute {node.attribute}: parents {node.parents} must be "
                                 "earlier attributes at valid levels")
            if cond.shape != (math.prod(_parent_sizes(node.parents, self.domain)), k):
                raise ValueError(f"conditional table of attribute {node.attribute} has shape "
                                 f"{cond.shape}, expected (|dom(Pi)|, {k})")
            if not (np.all(np.isfinite(cond)) and np.all(cond >= 0) and np.all(cond.sum(axis=1) > 0)):
                raise ValueError(f"conditional table of attribute {node.attribute}: rows must be "
                                 "finite, non-negative and have positive mass")
            cdf = np.cumsum(cond, axis=1)
            cdf /= cdf[:, -1:]
            cdf[:, -1] = 1.0
            self._flat.append((cdf + np.arange(cdf.shape[0], dtype=np.float64)[:, None]).ravel())

    def network_description(self, names: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """The network in sampling order, for the datasheet/transcript.

        ``[{"attribute": j, "parents": [{"attribute": p, "level": l, "size": groups}]}]``; level
        ``l`` of a parent merges its codes ``c -> c >> l`` (``size`` groups); with ``names``
        (column names by index) every entry also gets a ``"name"``.
        """
        if names is not None and len(names) != len(self.domain):
            raise ValueError(f"{len(names)} names for {len(self.domain)} columns")
        return [node.to_dict(self.domain, names) for node in self.network]

    def sample(self, m: int, rng: np.random.Generator) -> np.ndarray:
        """Ancestral sampling of ``m`` rows (int64, (m, d)), vectorised per attribute.

        For attribute X with parent configuration c (mixed radix), draw u ~ U[0, 1) and return
        the first x with c + F(x | c) > c + u (searchsorted on the flattened shifted CDFs).
        """
        m = int(m)
        if m < 0:
            raise ValueError(f"m must be >= 0, got {m}")
        out = np.zeros((m, len(self.domain)), dtype=np.int64)
        for node, flat in zip(self.network, self._flat):
            k = self.domain[node.attribute]
            cfg = _parent_index(out, node.parents, self.domain)
            u = rng.random(m)
            pos = np.searchsorted(flat, cfg + u, side="right")
            x = pos - cfg * k
            np.clip(x, 0, k - 1, out=x)
            out[:, node.attribute] = x
        return out

    def sample_counts(self, m: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """The counts of ``m`` ancestral samples per record type, drawn without drawing rows
        (the count sampler, ``mechanisms/sampling.py``): the first attribute's values get
        multinomial(m, P_1); then, attribute by attribute in network order, every partial type
        (values of the attributes so far) with count c splits by one multinomial(c, P(X | its
        parents)). Returns (distinct rows (types, d) int64, counts int64 > 0 summing to m), the
        types in the order of the splits. The law is multinomial(m, p) over the cells (proof:
        ``mechanisms/sampling.py``, point 3); the cost grows with the partial types, at most
        min(m, cells) per attribute, not with m."""
        from .sampling import split_counts

        if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 0:
            raise ValueError(f"m must be an integer >= 0, got {m!r}")
        rows = np.zeros((1 if m else 0, len(self.domain)), dtype=np.int64)
        counts = np.full(rows.shape[0], int(m), dtype=np.int64)
        for node, probs in zip(self.network, self._probabilities()):
            cfg = _parent_index(rows, node.parents, self.domain)
            t, x, c = split_counts(counts, probs, cfg, rng)
            rows = rows[t]
            rows[:, node.attribute] = x
            counts = c
        return rows, counts

    def _probabilities(self) -> list[np.ndarray]:
        """The conditional tables with every row divided by its sum (computed once)."""
        probs = self.__dict__.get("_probs")
        if probs is None:
            probs = [c / c.sum(axis=1, keepdims=True) for c in self.conditionals]
            self.__dict__["_probs"] = probs
        return probs


# --------------------------------------------------------------------------------------------
# generator
# --------------------------------------------------------------------------------------------

#: values of the ``oneway`` hyperparameter: "none" (PrivBayes as published), "tables" (rake every
#: sample to the one-way marginals of the noisy conditional tables; no extra budget) or "measure"
#: (also measure the one-way marginals with ``oneway_split`` of epsilon, combine, rake).
ONEWAY_METHODS = ("none", "tables", "measure")


def oneway_grid_problems(grid: dict) -> list[str]:
    """Problems of the ``oneway``/``oneway_split`` entries of a privbayes grid (spec validation),
    each as ``".key[j]: message"`` or ``": message"``."""
    out: list[str] = []
    methods = grid.get("oneway", ["none"])
    methods = methods if isinstance(methods, list) else [methods]
    for j, v in enumerate(methods):
        if not isinstance(v, str) or v not in ONEWAY_METHODS:
            out.append(f".oneway[{j}]: must be one of {', '.join(ONEWAY_METHODS)} (got {v!r})")
    splits = grid.get("oneway_split", [])
    for j, v in enumerate(splits if isinstance(splits, list) else [splits]):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < 1:
            out.append(f".oneway_split[{j}]: must be a number > 0 and < 1 (got {v!r})")
    if "oneway_split" in grid and "measure" not in methods:
        out.append(".oneway_split: only oneway 'measure' spends it; add measure to the oneway "
                   "values or drop oneway_split")
    return out


def _check_positive_finite(name: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise ValueError(f"PrivBayes: {name} must be a number, got {v!r}")
    v = float(v)
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"PrivBayes: {name} must be a finite number > 0, got {v!r}")
    return v


class PrivBayes:
    """PrivBayes generator (pure DP, change-one neighbours, n public); see the module docstring."""

    type = "privbayes"
    HYPERPARAMETERS = ("epsilon_split", "theta", "degree", "score", "oneway", "oneway_split")
    #: ``fit(rows, domain, rand, counts=...)`` fits on record types (see :meth:`fit`)
    FITS_TYPES = True

    def __init__(self, epsilon: float, *, epsilon_split: float, theta: float | None = None,
                 degree: int | None = None, score: str = "R", oneway: str = "none",
                 oneway_split: float = 0.2) -> None:
        self.epsilon = _check_positive_finite("epsilon", epsilon)
        split = _check_positive_finite("epsilon_split", epsilon_split)
        if not split < 1.0:
            raise ValueError(f"PrivBayes: epsilon_split must be in (0, 1), got {epsilon_split!r}")
        self.epsilon_split = split
        if (theta is None) == (degree is None):
            raise ValueError("PrivBayes: give exactly one of theta (theta flavour) or degree "
                             f"(degree flavour), got theta={theta!r}, degree={degree!r}")
        if theta is not None:
            _check_positive_finite("theta", theta)
            theta = int(theta) if isinstance(theta, (int, np.integer)) else float(theta)
        self.theta = theta
        if degree is not None:
            if isinstance(degree, bool) or not isinstance(degree, (int, np.integer)) or degree < 1:
                raise ValueError(f"PrivBayes: degree must be an integer >= 1, got {degree!r}")
            degree = int(degree)
        self.degree = degree
        if score not in ("R", "MI"):
            raise ValueError(f"PrivBayes: score must be 'R' (the TODS 2017 score R(X, Pi)) or "
                             f"'MI' (mutual information), got {score!r}")
        self.score = score
        if oneway not in ONEWAY_METHODS:
            raise ValueError(f"PrivBayes: oneway must be one of {', '.join(ONEWAY_METHODS)}, "
                             f"got {oneway!r}")
        self.oneway = oneway
        osplit = _check_positive_finite("oneway_split", oneway_split)
        if not osplit < 1.0:
            raise ValueError(f"PrivBayes: oneway_split must be in (0, 1), got {oneway_split!r}")
        self.oneway_split = osplit
        self.network: list[dict[str, Any]] | None = None  # set by fit (last fitted network)

    # -- protocol -------------------------------------------------------------------------
    @property
    def flavour(self) -> str:
        return "theta" if self.theta is not None else "degree"

    @property
    def epsilon_oneway(self) -> float:
        """One-way marginals budget (``oneway="measure"``), exactly: the largest float <=
        dec(oneway_split) x dec(epsilon); 0.0 otherwise."""
        if self.oneway != "measure":
            return 0.0
        return exact.float_down(exact.dec(self.oneway_split) * exact.dec(self.epsilon))

    def _rest(self) -> exact.Fraction:
        """What the network and the tables share: dec(epsilon) - binary(epsilon_oneway)
        (= dec(epsilon) unless ``oneway="measure"``)."""
        return exact.dec(self.epsilon) - exact.binary(self.epsilon_oneway)

    @property
    def epsilon_1(self) -> float:
        """Structure budget, exactly: the largest float <= dec(epsilon_split) x rest, rest =
        dec(epsilon) - binary(epsilon_oneway) (both the spec's decimals without oneway: 0.1 x 4.0
        = 2/5 -> 0.39999999999999997, not fl(0.4))."""
        return exact.float_down(exact.dec(self.epsilon_split) * self._rest())

    @property
    def epsilon_2(self) -> float:
        """Conditional-tables budget, exactly: the largest float <= rest - binary(epsilon_1),
        so binary(eps_0) + binary(eps_1) + binary(eps_2) <= dec(epsilon) in exact arithmetic
        (float arithmetic can exceed eps by an ulp)."""
        return exact.float_down(self._rest() - exact.binary(self.epsilon_1))

    def hyperparameters(self) -> dict[str, Any]:
        """Constructor keyword arguments (round-trip: ``PrivBayes(eps, **hyperparameters())``)."""
        h: dict[str, Any] = {"epsilon_split": self.epsilon_split, "score": self.score}
        if self.theta is not None:
            h["theta"] = self.theta
        else:
            h["degree"] = self.degree
        if self.oneway != "none":  # absent when off: as before the option existed
            h["oneway"] = self.oneway
        if self.oneway == "measure":
            h["oneway_split"] = self.oneway_split
        return h

    def privacy_map(self, d_in: int) -> float:
        """Change-one distance -> epsilon: d_in * epsilon (pure DP, group privacy)."""
        if d_in < 0:
            raise ValueError(f"d_in must be >= 0, got {d_in}")
        return float(d_in) * self.epsilon

    def budget_parts(self) -> list[dict[str, Any]]:
        parts = [{"purpose": "network structure", "epsilon": self.epsilon_1},
                 {"purpose": "conditional tables", "epsilon": self.epsilon_2}]
        if self.oneway == "measure":
            parts.append({"purpose": "one-way marginals", "epsilon": self.epsilon_oneway})
        return parts

    def max_table_cells(self, n: int, d: int) -> float:
        """theta flavour: theta_max_cells(n, eps_2, d, theta); degree flavour: inf."""
        if self.theta is None:
            return math.inf
        return theta_max_cells(n, self.epsilon_2, d, self.theta)

    # -- candidates -----------------------------------------------------------------------
    def _theta_parent_sets(self, chosen: Sequence[int], domain: Sequence[int],
                           cap: float) -> list[tuple[Parent, ...]]:
        """Maximal parent sets over ``chosen`` (each parent at some level) with |dom(Pi)| <= cap.

        Maximal: no parent can be refined by one level and no absent attribute can be added at
        its coarsest level without exceeding ``cap``. Returns [()] when nothing fits.
        """
        opts: list[list[int]] = []  # per chosen attribute: feasible levels (finest first)
        for j in chosen:
            opts.append(list(range(0, max_level(domain[j]) + 1)))
        found: list[tuple[Parent, ...]] = []

        def rec(i: int, prod: int, cur: list[Parent]) -> None:
            if len(found) >= MAX_ENUMERATED_SETS:  # wide tables: public, deterministic cut-off
                return
            if i == len(chosen):
                found.append(tuple(cur))
                return
            j = chosen[i]
            rec(i + 1, prod, cur)  # j absent
            for lv in opts[i]:
                s = level_size(domain[j], lv)
                if prod * s <= cap:
                    cur.append((j, lv))
                    rec(i + 1, prod * s, cur)
                    cur.pop()

        rec(0, 1, [])
        maximal: list[tuple[Parent, ...]] = []
        for ps in found:
            prod = math.prod(_parent_sizes(ps, domain))
            levels = dict(ps)
            extendable = False
            for j in chosen:
                if j in levels:
                    lv = levels[j]
                    if lv > 0 and prod // level_size(domain[j], lv) * level_size(domain[j], lv - 1) <= cap:
                        extendable = True
                        break
                elif max_level(domain[j]) >= 0 and prod * level_size(domain[j], max_level(domain[j])) <= cap:
                    extendable = True
                    break
            if not extendable:
                maximal.append(ps)
        return maximal or [()]

    def _candidates(self, chosen: Sequence[int], remaining: Sequence[int], domain: Sequence[int],
                    n: int) -> list[tuple[int, tuple[Parent, ...]]]:
        """All (X, Pi) pairs of one greedy step, capped at MAX_CANDIDATES_PER_STEP (public rule)."""
        d = len(domain)
        chosen_sorted = sorted(chosen)
        cands: list[tuple[int, tuple[Parent, ...]]] = []
        if self.theta is not None:
            cells = self.max_table_cells(n, d)
            for x in remaining:
                for ps in self._theta_parent_sets(chosen_sorted, domain, cells / domain[x]):
                    cands.append((x, ps))
        else:
            k = min(self.degree, len(chosen_sorted))
            for x in remaining:
                for comb in itertools.combinations(chosen_sorted, k):
                    ps = tuple((j, 0) for j in comb)
                    if domain[x] * math.prod(_parent_sizes(ps, domain)) <= MAX_TABLE_CELLS:
                        cands.append((x, ps))
                if not cands or cands[-1][0] != x:
                    cands.append((x, ()))
        if len(cands) > MAX_CANDIDATES_PER_STEP:
            # public, deterministic: keep the candidates with the largest tables (most detail)
            def key(c: tuple[int, tuple[Parent, ...]]) -> tuple:
                x, ps = c
                return (-domain[x] * math.prod(_parent_sizes(ps, domain)), -len(ps), x, ps)
            cands = sorted(cands, key=key)[:MAX_CANDIDATES_PER_STEP]
        return cands

    # -- fit ------------------------------------------------------------------------------
    def fit(self, codes: np.ndarray, domain: Sequence[int], rand: Any, counts: np.ndarray | None = None) -> Any:
        """Learn the network (eps_1) and the noisy conditional tables (eps_2); see module doc.

        Returns a :class:`PrivBayesModel`, or with ``oneway`` "tables"/"measure" a
        :class:`~dpbundle.mechanisms.oneway.RakedModel` wrapping it; "measure" measures the
        one-way histograms last (eps_0, purposes "privbayes: one-way marginal of column j").
        ``counts``: ``codes`` are the record types (distinct rows ascending in mixed radix, as
        ``cells.types_from_rows`` gives them) occurring that many times: the same fit as on the
        rows, without them."""
        if counts is not None:
            return self._fit_types(codes, counts, domain, rand)
        codes = np.asarray(codes)
        if codes.ndim != 2:
            raise ValueError(f"PrivBayes.fit: codes must be a 2-d array, got shape {codes.shape}")
        if not np.issubdtype(codes.dtype, np.integer):
            raise ValueError(f"PrivBayes.fit: codes must be integers, got dtype {codes.dtype}")
        codes = codes.astype(np.int64, copy=False)
        n, d = codes.shape
        domain = tuple(int(k) for k in domain)
        if len(domain) != d:
            raise ValueError(f"PrivBayes.fit: domain has {len(domain)} sizes for {d} columns")
        if d < 1 or n < 1:
            raise ValueError(f"PrivBayes.fit: need at least one row and one column, got {codes.shape}")
        if any(k < 1 for k in domain):
            raise ValueError(f"PrivBayes.fit: domain sizes must be >= 1, got {domain}")
        known = _known_types(codes, domain)   # the record types of a cached T: no pass over n rows
        rows = codes if known is None else known[0]
        if rows.min(initial=0) < 0 or np.any(rows.max(axis=0, initial=0) >= np.asarray(domain)):
            raise ValueError("PrivBayes.fit: codes outside the (public) domain")

        # Compress to distinct records with multiplicities (exact: integer weights < 2^53).
        data, weights = _compress(codes, domain) if known is None else known
        return self._fit_compressed(data, weights, n, domain, rand)

    def _fit_types(self, rows: np.ndarray, counts: np.ndarray, domain: Sequence[int], rand: Any) -> Any:
        """:meth:`fit` of record types (see its ``counts``)."""
        from .generators import check_codes, record_weights

        rows, domain = check_codes(rows, domain)
        weights = record_weights(counts, rows.shape[0])
        if rows.shape[0] < 1:
            raise ValueError("PrivBayes.fit: need at least one row")
        return self._fit_compressed(rows, weights, int(counts.sum()), domain, rand)

    def _fit_compressed(self, data: np.ndarray, weights: np.ndarray, n: int, domain: tuple[int, ...],
                        rand: Any) -> Any:
        """The fit on distinct records ``data`` with multiplicities ``weights`` (n in all)."""
        d = len(domain)
        columns = _Columns(data, domain)
        score_sens = r_score_sensitivity(n)
        score_of = r_of_table if self.score == "R" else mi_of_table

        # ---- structure (eps_1) ----
        first = int(rand.rng("privbayes: first attribute").integers(d))
        network: list[NetworkNode] = [NetworkNode(first, ())]
        chosen = [first]
        remaining = [j for j in range(d) if j != first]
        eps_step = _even_split(self.epsilon_1, d - 1) if d > 1 else 0.0
        step = 0
        while remaining:
            step += 1
            cands = self._candidates(chosen, remaining, domain, n)
            scores = np.empty(len(cands), dtype=np.float64)
            for i, (x, ps) in enumerate(cands):
                kx = domain[x]
                n_pi = math.prod(_parent_sizes(ps, domain))
                idx = columns.index(ps + ((x, 0),))
                tab = np.bincount(idx, weights=weights, minlength=n_pi * kx).reshape(n_pi, kx)
                scores[i] = score_of(tab, n)
            if self.score == "MI":  # one bound for all candidates of the step (public: domain sizes)
                score_sens = max(
                    mi_score_sensitivity(n, domain[x], math.prod(_parent_sizes(ps, domain)))
                    for x, ps in cands) or mi_score_sensitivity(n, 2, 2)
            pick = int(rand.exponential(scores, sensitivity=score_sens, epsilon=eps_step,
                                        purpose=f"privbayes: network structure, step {step}"))
            x, ps = cands[pick]
            network.append(NetworkNode(x, ps))
            chosen.append(x)
            remaining.remove(x)
            columns.forget()

        # ---- conditional tables (eps_2) ----
        eps_table = _even_split(self.epsilon_2, d)
        sens = count_table_sensitivity()
        measured: list[MeasuredTable] = []
        for node in network:
            counts = count_table(data, domain, node.attribute, node.parents, weights)
            # integer counts -> OpenDP's discrete Laplace (exact, same scale 2 d / eps_2)
            what = f"privbayes: conditional table of column {node.attribute}"
            noisy = np.asarray(rand.laplace(counts.ravel().astype(np.int64), sensitivity=sens,
                                            epsilon=eps_table, integer=True, purpose=what),
                               dtype=np.float64).reshape(counts.shape)
            measured.append(measured_table([p for p, _ in node.parents] + [node.attribute],
                                           [1 << lv for _, lv in node.parents] + [1], domain, noisy,
                                           int(sens), eps_table, what))
        self.network = [node.to_dict(domain) for node in network]
        if self.oneway == "measure":   # eps_0: the d one-way histograms, measured last
            oneways = ow.measure_oneway(data, domain, self.epsilon_oneway, rand,
                                        purpose="privbayes: one-way marginal", counts=weights)
            eps_col = exact.split_float(float(self.epsilon_oneway), d)
            measured += [measured_table([j], [1], domain, oneways[j], ow.COLUMN_SENSITIVITY, eps_col,
                                        f"privbayes: one-way marginal of column {j}") for j in range(d)]
        return self.estimate(measured, domain, n)

    def estimate(self, tables: Sequence[MeasuredTable], domain: Sequence[int], n: float) -> Any:
        """The model from the measured tables (post-processing: no data, no budget): the same
        code for the fit and for a refit on other counts (``dpbundle sample --copies``).

        ``tables``: the d conditional tables in network order (columns: the parents, then the
        attribute; merge ``2^level`` per parent), then with ``oneway: measure`` the d one-way
        tables in column order. Each conditional is norm-sub'ed to ``n`` and its rows
        normalised; with ``oneway`` "tables"/"measure" the model is raked to the one-way shares
        (:meth:`_oneway_model`)."""
        domain = tuple(int(k) for k in domain)
        d = len(domain)
        network, conditionals, table_sums = [], [], {}
        for t in tables[:d]:
            parents = tuple((c, g.bit_length() - 1) for c, g in zip(t.columns[:-1], t.merge[:-1]))
            node = NetworkNode(t.columns[-1], parents)
            noisy = t.counts.astype(np.float64).reshape(-1, domain[node.attribute])
            network.append(node)
            table_sums[node.attribute] = (noisy.sum(axis=0), noisy.shape[0])
            conditionals.append(_normalise(norm_sub(noisy, float(n))))
        model = PrivBayesModel(domain, network, conditionals)
        if self.oneway == "none":
            return attach(model, tables)
        return self._oneway_model(model, n, domain, table_sums, tables)

    def _oneway_model(self, model: PrivBayesModel, n: float, domain: tuple[int, ...],
                      table_sums: dict[int, tuple[np.ndarray, int]], tables: Sequence[MeasuredTable]) -> Any:
        """The RakedModel of ``oneway`` "tables"/"measure" (see the module docstring).

        Per column X: the raw noisy table of (X, Pi) summed over Pi (unbiased, per-cell variance
        ``|dom(Pi)| v_table``); with "measure" also the measured one-way histogram (the tables
        after the d conditionals; eps_0 / d, variance ``v_oneway``), combined by inverse-variance
        weighting. Then norm-sub to n and shares. All post-processing."""
        d = len(domain)
        eps_table = _even_split(self.epsilon_2, d)
        v_table = ow.oneway_noise_variance(eps_table, 1, sensitivity=count_table_sensitivity())
        estimates = [[(table_sums[j][0], table_sums[j][1] * v_table)] for j in range(d)]
        if self.oneway == "measure":
            v_one = ow.oneway_noise_variance(self.epsilon_oneway, d)
            for t in tables[d:]:
                estimates[t.columns[0]].append((t.counts.astype(np.float64), v_one))
        counts = [ow.inverse_variance(e) for e in estimates]
        return attach(ow.RakedModel(model, ow.shares_from_noisy(counts, float(n)), method="rake"), tables)


class _Columns:
    """Contiguous (generalised) columns of the distinct records, and a small LRU cache of
    mixed-radix prefixes (candidates are enumerated depth-first, so neighbours share prefixes)."""

    CACHE_SIZE = 12

    def __init__(self, data: np.ndarray, domain: Sequence[int]) -> None:
        self.domain = domain
        self._cols: dict[Parent, np.ndarray] = {
            (j, 0): np.ascontiguousarray(data[:, j]) for j in range(data.shape[1])}
        self._prefix: OrderedDict[tuple[Parent, ...], np.ndarray] = OrderedDict()

    def column(self, j: int, level: int) -> np.ndarray:
        key = (j, level)
        col = self._cols.get(key)
        if col is None:
            col = self._cols[key] = self._cols[(j, 0)] >> level
        return col

    def index(self, attrs: tuple[Parent, ...]) -> np.ndarray:
        """Mixed-radix index over ``attrs`` (first attribute most significant)."""
        if not attrs:
            return np.zeros(self._cols[(0, 0)].shape[0], dtype=np.int64)
        if len(attrs) == 1:
            return self.column(*attrs[0])
        head = attrs[:-1]
        pre = self._prefix.get(head)
        if pre is None:
            pre = self.index(head)
            if len(head) > 1:
                self._prefix[head] = pre
                if len(self._prefix) > self.CACHE_SIZE:
                    self._prefix.popitem(last=False)
        else:
            self._prefix.move_to_end(head)
        j, lv = attrs[-1]
        out = pre * level_size(self.domain[j], lv)
        out += self.column(j, lv)
        return out

    def forget(self) -> None:
        """Drop cached prefixes."""
        self._prefix.clear()


def _even_split(epsilon: float, k: int) -> float:
    """One of k equal shares of a *computed* float part (eps_1 or eps_2, not a declared
    decimal): the largest float e with k x binary(e) <= binary(epsilon), exactly, so sequential
    composition stays within the part (fsum([e] * k) <= epsilon is not enough: fsum rounds)."""
    return exact.split_float(epsilon, k)


def _compress(codes: np.ndarray, domain: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows and their multiplicities (float64), via a mixed-radix key when it fits int64."""
    if math.prod(domain) < (1 << 62):
        key = np.zeros(codes.shape[0], dtype=np.int64)
        for j, k in enumerate(domain):
            key *= k
            key += codes[:, j]
        uniq, counts = np.unique(key, return_counts=True)
        rows = np.empty((uniq.shape[0], len(domain)), dtype=np.int64)
        rest = uniq.copy()
        for j in range(len(domain) - 1, -1, -1):
            rows[:, j] = rest % domain[j]
            rest //= domain[j]
        return rows, counts.astype(np.float64)
    return codes, np.ones(codes.shape[0], dtype=np.float64)


def _known_types(codes: np.ndarray, domain: Sequence[int]) -> tuple[np.ndarray, np.ndarray] | None:
    """What :func:`_compress` returns for ``codes``, from the record types remembered for this
    very array (``cells.known_types``: the cached transformation hands them over), or None.
    The same arrays: the distinct rows ascending in mixed radix, their counts as float64; so
    the scores, the tables and every DP draw are those computed from the rows."""
    from .cells import known_types

    if math.prod(domain) >= (1 << 62):
        return None
    types = known_types(codes)
    if types is None or types.cells is None or types.n != codes.shape[0] \
            or tuple(types.table.domain) != tuple(domain):
        return None
    return np.ascontiguousarray(types.table.codes, dtype=np.int64), types.counts.astype(np.float64)


def _normalise(noisy: np.ndarray) -> np.ndarray:
    """Normalise each row of non-negative counts; rows with zero mass -> uniform."""
    t = np.clip(noisy, 0.0, None)
    tot = t.sum(axis=1, keepdims=True)
    k = t.shape[1]
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.where(tot > 0, t / np.where(tot > 0, tot, 1.0), 1.0 / k)
    return p
