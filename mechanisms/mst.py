"""Native pure-DP MST ("mst_pure"): McKenna, Miklau & Sheldon (2021), "Winning the NIST Contest:
A scalable and general approach to differentially private synthetic data", adapted from zCDP
with Gaussian noise to pure DP with (discrete) Laplace noise and the exponential mechanism.

Input: integer codes ``(n, d)`` over a public domain ``(k_0, ..., k_{d-1})``; ``n`` is public
(bounded neighbours: change one record). The generation epsilon ``eps`` is split in three
parts, exactly (rationals, ``mechanisms/exact.py``)::

    eps_1   = float_down(dec(split_1way)   * dec(eps))          1-way marginals
    eps_sel = float_down(dec(split_select) * dec(eps))          tree selection
    eps_2   = float_down(dec(eps) - binary(eps_1) - binary(eps_sel))   2-way marginals

so ``binary(eps_1) + binary(eps_sel) + binary(eps_2) <= dec(eps)`` (the floats handed to OpenDP
never add up to more than the declared decimal). The defaults are MST's: a third each.

1. **1-way marginals** (``eps_1``). One vector release of the concatenation
   ``c(D) = (c_0(D), ..., c_{d-1}(D))`` of the d histograms, discrete Laplace (OpenDP) with L1
   sensitivity ``2 d`` (:func:`oneway_sensitivity`). The per-cell noise scale ``2 d / eps_1``
   is the same as d separate releases at ``eps_1 / d`` with sensitivity 2 each.
2. **Tree selection** (``eps_sel``), Kruskal style, ``d - 1`` steps at
   ``eps_step = eps_sel / (d - 1)`` each (exact split). Step t chooses one pair (i, j) among the
   pairs whose attributes lie in different components of the edges chosen so far (a function of
   earlier DP outputs only) with OpenDP's report-noisy-max (exponential-mechanism family,
   permute-and-flip) on the score ``u_ij(D) = ||T_ij(D) - E_ij||_1``: the L1 distance between
   the true 2-way count table and its estimate ``E_ij = n p_i (x) p_j`` from the *noisy*
   1-ways (``p_i`` = the noisy 1-way made non-negative with total n by norm-sub, normalised).
   Sensitivity 2 (:data:`SCORE_SENSITIVITY`). Sequential composition: ``eps_sel``.
3. **2-way marginals** (``eps_2``): the ``d - 1`` chosen count tables, discrete Laplace with L1
   sensitivity 2 (``COUNT_SENSITIVITY``) at ``eps_2 / (d - 1)`` each (exact split).
   Sequential composition: ``eps_2``.

Everything after that is post-processing of the noisy vectors (and public n, domain, scales):
:func:`consistent_tree` averages each attribute's 1-way estimates (its own measurement and the
margins of the 2-ways containing it) by inverse noise variance, fits each tree table to those
margins with IPF, and returns a tree-structured Bayesian network (root = attribute 0) that is
sampled exactly by ancestral sampling (:class:`~dpbundle.mechanisms.privbayes.PrivBayesModel`,
with the ``rng`` given to ``sample`` only). ``fit`` is therefore ``eps_1 + eps_sel + eps_2 <=
eps``-DP under change-one distance, and ``privacy_map(d_in) = d_in * eps`` (group privacy).
With one column there is nothing to select: only the 1-ways are measured (``eps_1``).

Not implemented from MST: the compression of rare values (domain reduction by a noisy
threshold) and Private-PGM; a tree is decomposable, so the consistent tables define the
maximum-entropy model directly.
"""
from __future__ import annotations

import math
from collections import deque
from fractions import Fraction
from typing import Any, Sequence

import numpy as np

from . import exact
from .generators import check_codes, record_weights
from .marginals import COUNT_SENSITIVITY
from .measured import MeasuredTable, attach, measured_table
from .noise import Randomness
from .norm_sub import norm_sub
from .privbayes import NetworkNode, PrivBayesModel

__all__ = [
    "PureMST",
    "PureMSTModel",
    "SCORE_SENSITIVITY",
    "oneway_counts",
    "oneway_sensitivity",
    "pair_counts",
    "independence_estimate",
    "selection_score",
    "score_grid",
    "consistent_tree",
    "grid_problems",
    "MAX_PAIR_CELLS",
    "DEFAULT_SPLIT",
]

#: Default share of each of the first two parts (MST's: a third each; the 2-way marginals get
#: the rest).
DEFAULT_SPLIT = 1 / 3

#: Largest 2-way table (cells) of a candidate pair (memory guard; the domain is public).
MAX_PAIR_CELLS = 1 << 24

#: IPF rounds fitting one tree table to its two margins (post-processing; two margins of one
#: table converge in a few rounds unless noise left structural zeros).
IPF_ROUNDS = 100

#: Share of the independence table added to a noisy 2-way table before IPF (post-processing;
#: 1e-6 of n records in total, see :func:`_fit_table`).
SMOOTHING = 1e-6

SCORE_SENSITIVITY = 2.0
"""Sensitivity of the selection score ``u_ij(D) = ||T_ij(D) - E_ij||_1`` under change-one.

Derivation: ``E_ij`` is computed from the noisy 1-ways and the public n only (earlier DP
outputs, fixed when the selection runs: adaptive sequential composition), so it is the same for
D and its neighbour D'. By the reverse triangle inequality
``|u_ij(D) - u_ij(D')| = | ||T(D) - E||_1 - ||T(D') - E||_1 | <= ||T(D) - T(D')||_1 <= 2``
(``COUNT_SENSITIVITY``: the changed record leaves one cell and enters one). This holds for
every candidate pair at once, so the linf sensitivity of the score vector (OpenDP's
report-noisy-max input metric) is 2. It is attained: a cell with ``T < E`` losing the record
and a cell with ``T >= E`` gaining it move the score by +2.

Exactly, not up to rounding (:func:`selection_score`): summed in floating point, ``|T - E|``
and its sum are rounded, and two neighbours' float scores can differ by more than 2
(2.000000000000007 in the issue's report: when a partial sum crosses a power of two the two sums
round differently; tests/test_sensitivity_exact.py finds such pairs), beyond the noise layer's
one-ulp slack. So ``E`` is first rounded to a dyadic grid (post-processing of the noisy 1-ways, the same for
D and D'), after which the score is an integer multiple of the grid computed in int64 and an
exact float, and the bound above holds for it with no rounding term.
"""


# --------------------------------------------------------------------------------------------
# DP statistics (the functions the tests check on neighbouring datasets)
# --------------------------------------------------------------------------------------------

def oneway_sensitivity(d: int) -> int:
    """L1 sensitivity of the concatenated d one-way histograms under change-one: ``2 d``.

    Derivation: ``||c(D) - c(D')||_1 = sum_i ||c_i(D) - c_i(D')||_1`` and each histogram moves
    by at most 2 (one cell -1, one +1; ``COUNT_SENSITIVITY``). Attained when the changed
    record differs in every attribute.
    """
    if d < 1:
        raise ValueError(f"need at least one column, got d={d}")
    return 2 * int(d)


def oneway_counts(codes: np.ndarray, domain: Sequence[int]) -> np.ndarray:
    """The d one-way histograms concatenated (int64, length ``sum(domain)``)."""
    codes, dom = check_codes(codes, domain)
    return np.concatenate([np.bincount(codes[:, j], minlength=k) for j, k in enumerate(dom)]
                          ).astype(np.int64)


def pair_counts(codes: np.ndarray, domain: Sequence[int], i: int, j: int) -> np.ndarray:
    """Count table of attributes (i, j): int64 array of shape ``(k_i, k_j)``. L1 sensitivity 2."""
    codes, dom = check_codes(codes, domain)
    return _pair_table(codes[:, i], codes[:, j], dom[i], dom[j])


def _pair_table(a: np.ndarray, b: np.ndarray, ka: int, kb: int, weights: np.ndarray | None = None) -> np.ndarray:
    idx = a * kb + b
    return np.bincount(idx, weights=weights, minlength=ka * kb).astype(np.int64).reshape(ka, kb)


def _to_total(noisy: np.ndarray, n: float) -> np.ndarray:
    """Non-negative counts with total exactly n: norm-sub, then rescaling (uniform if empty)."""
    t = norm_sub(np.asarray(noisy, dtype=np.float64), float(n))
    s = t.sum()
    if not s > 0:
        return np.full(t.shape, float(n) / t.size)
    return t * (float(n) / s) if s != n else t


def independence_estimate(noisy_i: np.ndarray, noisy_j: np.ndarray, n: float) -> np.ndarray:
    """``E_ij = n p_i (x) p_j`` from two *noisy* 1-way count vectors (post-processing)."""
    p_i = _to_total(noisy_i, n) / float(n)
    p_j = _to_total(noisy_j, n) / float(n)
    return float(n) * np.outer(p_i, p_j)


def score_grid(n: int, estimate: np.ndarray) -> int:
    """k of the grid 2^-k that :func:`selection_score` rounds ``estimate`` to: the largest k
    with 2^k (n + ceil(sum |E|) + 1 + cells) < 2^52 (sum |E| bounded from above) -- public (n,
    the noisy estimate, its size). Then every |T - E'| sum over the table is below 2^52 grid
    steps: exact in int64 and as a float. At least 0 (ValueError for tables too large)."""
    e = np.abs(np.asarray(estimate, dtype=np.float64))
    if not np.all(np.isfinite(e)):
        raise ValueError("selection_score: the estimate must be finite")
    # sum |E| from a float sum of m >= 0 terms, which is within (m - 1) 2^-53 / (1 - ...) of
    # the exact sum in any order: the factor (1 + m 2^-51) bounds the exact sum from above
    total = float(e.sum()) * (1.0 + e.size * 2.0 ** -51)
    bound = int(n) + math.ceil(total) + 1 + int(e.size)
    k = 52 - bound.bit_length()
    if k < 0:
        raise ValueError(f"selection_score: {n} records and {e.size} cells are too many for exact scores")
    return k


def selection_score(true_table: np.ndarray, estimate: np.ndarray) -> float:
    """``||T - E'||_1`` with ``E'`` = ``estimate`` rounded to the grid 2^-k of
    :func:`score_grid` (n = the table's total, public): an exact float whose neighbour distance
    is at most 2 exactly (:data:`SCORE_SENSITIVITY`). The rounding moves the score by at most
    cells x 2^-(k+1) from the float ``||T - E||_1``.

    Exactness: T 2^k and round(E 2^k) are integers below 2^52, so their differences and the sum
    of the absolute differences (at most 2^k (n + sum |E| + cells / 2) < 2^52) are exact in
    int64, and the sum times 2^-k is an exact float."""
    t = np.asarray(true_table)
    if t.size and not np.all(t == np.rint(t)):
        raise ValueError("selection_score: the true table must hold counts")
    t = np.rint(t).astype(np.int64)
    est = np.asarray(estimate, dtype=np.float64)
    if est.shape != t.shape:
        raise ValueError(f"selection_score: table {t.shape} and estimate {est.shape} differ in shape")
    n = int(t.sum())
    k = score_grid(n, est)
    e_int = np.rint(np.ldexp(est, k)).astype(np.int64)
    total = int(np.abs((t << k) - e_int).sum())
    return math.ldexp(float(total), -k)


# --------------------------------------------------------------------------------------------
# post-processing
# --------------------------------------------------------------------------------------------

def _bfs_tree(d: int, edges: Sequence[tuple[int, int]], root: int = 0) -> list[tuple[int, int]]:
    """Orient a spanning tree from ``root``: (parent, child) pairs in breadth-first order
    (neighbours in ascending order). ValueError unless ``edges`` is a spanning tree."""
    if len(edges) != d - 1:
        raise ValueError(f"a spanning tree of {d} attributes has {d - 1} edges, got {len(edges)}")
    adj: list[list[int]] = [[] for _ in range(d)]
    for i, j in edges:
        adj[i].append(j)
        adj[j].append(i)
    seen = [False] * d
    seen[root] = True
    order: list[tuple[int, int]] = []
    queue = deque([root])
    while queue:
        p = queue.popleft()
        for c in sorted(adj[p]):
            if not seen[c]:
                seen[c] = True
                order.append((p, c))
                queue.append(c)
    if not all(seen):
        raise ValueError(f"the edges {list(edges)} do not connect all {d} attributes")
    return order


def _wls_oneway(i: int, k: int, noisy_1way: np.ndarray, tables: dict[tuple[int, int], np.ndarray],
                domain: Sequence[int], n: float, var_1way: float, var_2way: float) -> np.ndarray:
    """Attribute i's 1-way counts: inverse-variance weighted average of its own noisy 1-way and
    the margins of the noisy 2-ways holding it (each first shifted evenly to the public total n,
    the least-squares projection onto ``sum = n``), then made non-negative with total n."""
    ests = [np.asarray(noisy_1way, dtype=np.float64)]
    weights = [1.0 / var_1way]
    for (a, b), t in tables.items():
        if i == a:
            ests.append(np.asarray(t, dtype=np.float64).sum(axis=1))
            weights.append(1.0 / (domain[b] * var_2way))   # a margin sums k_b noisy cells
        elif i == b:
            ests.append(np.asarray(t, dtype=np.float64).sum(axis=0))
            weights.append(1.0 / (domain[a] * var_2way))
    acc = np.zeros(k)
    for e, w in zip(ests, weights):
        acc += w * (e + (n - e.sum()) / k)
    return _to_total(acc / sum(weights), n)


def _fit_table(noisy: np.ndarray, rows: np.ndarray, cols: np.ndarray, n: float,
               rounds: int = IPF_ROUNDS) -> np.ndarray:
    """A non-negative table with row sums exactly ``rows`` and column sums close to ``cols``
    (both sum to n): norm-sub of the noisy table plus ``SMOOTHING`` times the independence
    table ``rows (x) cols / n``, then IPF ending on the rows.

    The smoothing makes every cell of supp(rows) x supp(cols) positive, so a table with both
    margins exists within the support and IPF converges to it; without it, noise can leave the
    mass of a row only in columns whose target is 0 (IPF would then empty the row, or the whole
    table). A row the noise left empty becomes ``cols`` in proportion (independence)."""
    indep = np.outer(rows, cols) / float(n)
    t = norm_sub(np.asarray(noisy, dtype=np.float64), float(n)) + SMOOTHING * indep
    tol = 1e-9 * max(float(n), 1.0)
    for _ in range(rounds):
        cs = t.sum(axis=0)
        t *= np.divide(cols, cs, out=np.zeros_like(cs), where=cs > 0)[None, :]
        rs = t.sum(axis=1)
        t *= np.divide(rows, rs, out=np.zeros_like(rs), where=rs > 0)[:, None]
        if float(np.abs(t.sum(axis=0) - cols).max()) <= tol:
            break
    return t


def consistent_tree(noisy_1way: Sequence[np.ndarray], noisy_2way: dict[tuple[int, int], np.ndarray],
                    domain: Sequence[int], n: float, var_1way: float, var_2way: float,
                    root: int = 0) -> tuple[list[NetworkNode], list[np.ndarray], dict]:
    """Post-processing only: noisy 1-ways, noisy tree 2-ways (key (i, j), i < j, table shape
    (k_i, k_j)) and public things (domain, n, nominal noise variances) -> a tree-structured
    Bayesian network ``(nodes, conditionals, info)`` for :class:`PrivBayesModel`.

    1. Each attribute's 1-way target m_i: :func:`_wls_oneway` (weights 1/var; a 2-way margin
       summing k cells has variance k * var_2way), non-negative, total n.
    2. Edges oriented from ``root`` (breadth first). For an edge (p, c) the noisy table is fitted
       (:func:`_fit_table`) to rows = the model's marginal of p (m_root for the root, else the
       column sums of p's own parent table) and columns = m_c; the model's marginal of c is the
       fitted table's column sums. The rows match exactly, so the sampled distribution's 2-way
       marginal on every tree edge is the fitted table and all margins shared by two tables
       agree. Every table is non-negative with total n.
    ``info``: {"oneway": {i: m_i}, "marginal": {i: model 1-way}, "tables": {(p, c): table}}.
    """
    dom = tuple(int(k) for k in domain)
    d = len(dom)
    n = float(n)
    if not n > 0:
        raise ValueError(f"n must be > 0, got {n}")
    if len(noisy_1way) != d:
        raise ValueError(f"{len(noisy_1way)} noisy 1-ways for {d} attributes")
    tables = {}
    for (i, j), t in noisy_2way.items():
        t = np.asarray(t, dtype=np.float64)
        if not i < j or t.shape != (dom[i], dom[j]):
            raise ValueError(f"2-way table ({i}, {j}) must have i < j and shape {(dom[i], dom[j])}")
        tables[(i, j)] = t
    order = _bfs_tree(d, list(tables), root)
    oneway = {i: _wls_oneway(i, dom[i], noisy_1way[i], tables, dom, n, var_1way, var_2way)
              for i in range(d)}
    marginal = {root: oneway[root]}
    nodes = [NetworkNode(root, ())]
    conds = [(oneway[root] / n).reshape(1, -1)]
    fitted = {}
    for p, c in order:
        noisy = tables[(p, c)] if p < c else tables[(c, p)].T
        t = _fit_table(noisy, marginal[p], oneway[c], n)
        fitted[(p, c)] = t
        marginal[c] = t.sum(axis=0)
        rs = t.sum(axis=1, keepdims=True)
        fallback = np.broadcast_to(marginal[c] / marginal[c].sum(), t.shape)
        cond = np.where(rs > 0, t / np.where(rs > 0, rs, 1.0), fallback)
        nodes.append(NetworkNode(c, ((p, 0),)))
        conds.append(cond)
    return nodes, conds, {"oneway": oneway, "marginal": marginal, "tables": fitted}


# --------------------------------------------------------------------------------------------
# model and generator
# --------------------------------------------------------------------------------------------

class PureMSTModel(PrivBayesModel):
    """The fitted tree: a Bayesian network with one parent per non-root attribute, sampled by
    ancestral sampling (vectorised inverse CDF, ``PrivBayesModel.sample``).

    ``edges``: the selected pairs in selection order; ``tables``: the consistent 2-way count
    tables by oriented edge (parent, child); ``marginals``: the model's 1-way counts."""

    def __init__(self, domain: Sequence[int], nodes: Sequence[NetworkNode],
                 conditionals: Sequence[np.ndarray], edges: Sequence[tuple[int, int]],
                 info: dict) -> None:
        super().__init__(domain, nodes, conditionals)
        self.edges = tuple(tuple(e) for e in edges)
        self.tables = dict(info.get("tables", {}))
        self.marginals = dict(info.get("marginal", {}))


def _check_split(name: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise ValueError(f"mst_pure: {name} must be a number in (0, 1), got {v!r}")
    v = float(v)
    if not (math.isfinite(v) and 0.0 < v < 1.0):
        raise ValueError(f"mst_pure: {name} must be a number in (0, 1), got {v!r}")
    return v


class PureMST:
    """Native pure-DP MST generator ("mst_pure"); see the module docstring for the mechanism,
    the sensitivities and the exact budget split."""

    type = "mst_pure"
    #: ``fit(rows, domain, rand, counts=...)`` fits on record types
    FITS_TYPES = True
    HYPERPARAMETERS = ("split_1way", "split_select")

    def __init__(self, epsilon: float, split_1way: float = DEFAULT_SPLIT,
                 split_select: float = DEFAULT_SPLIT) -> None:
        if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) \
                or not math.isfinite(epsilon) or epsilon <= 0:
            raise ValueError(f"mst_pure: epsilon must be a finite number > 0, got {epsilon!r}")
        self.epsilon = float(epsilon)
        self.split_1way = _check_split("split_1way", split_1way)
        self.split_select = _check_split("split_select", split_select)
        if exact.dec(self.split_1way) + exact.dec(self.split_select) >= 1:
            raise ValueError(
                f"mst_pure: split_1way + split_select must be < 1 (the rest pays the 2-way "
                f"marginals), got {split_1way!r} + {split_select!r}")
        if not self.epsilon_2 > 0:  # pragma: no cover - only for absurdly small epsilons
            raise ValueError("mst_pure: the 2-way share of epsilon rounds to 0")
        self.edges: list[tuple[int, int]] | None = None  # set by fit (last selected tree)

    # -- budget ---------------------------------------------------------------------------
    @property
    def epsilon_1(self) -> float:
        """1-way budget: the largest float <= dec(split_1way) x dec(epsilon)."""
        return exact.float_down(exact.dec(self.split_1way) * exact.dec(self.epsilon))

    @property
    def epsilon_select(self) -> float:
        """Selection budget: the largest float <= dec(split_select) x dec(epsilon)."""
        return exact.float_down(exact.dec(self.split_select) * exact.dec(self.epsilon))

    @property
    def epsilon_2(self) -> float:
        """2-way budget: the largest float <= dec(epsilon) - binary(eps_1) - binary(eps_sel),
        so the three parts add up to at most the declared epsilon, exactly."""
        rest = exact.dec(self.epsilon) - exact.binary(self.epsilon_1) - exact.binary(self.epsilon_select)
        return exact.float_down(rest) if rest > 0 else 0.0

    def hyperparameters(self) -> dict[str, Any]:
        """Constructor keyword arguments (round-trip: ``PureMST(eps, **hyperparameters())``)."""
        return {"split_1way": self.split_1way, "split_select": self.split_select}

    def privacy_map(self, d_in: int) -> float:
        """Change-one distance -> epsilon: d_in * epsilon (pure DP, group privacy)."""
        if d_in < 0:
            raise ValueError(f"d_in must be >= 0, got {d_in}")
        return float(d_in) * self.epsilon

    def budget_parts(self) -> list[dict[str, Any]]:
        """The three parts (floats handed to OpenDP, exact binary sum <= the declared epsilon).
        The per-step / per-table shares of fit are exact splits of these parts."""
        return [{"purpose": "1-way marginals", "epsilon": self.epsilon_1},
                {"purpose": "tree selection", "epsilon": self.epsilon_select},
                {"purpose": "2-way marginals of the tree", "epsilon": self.epsilon_2}]

    def noise_scales(self, d: int) -> tuple[float, float]:
        """Nominal Laplace scales (b_1way, b_2way) = (2d / eps_1, 2 (d-1) / eps_2): public,
        used only to weight the estimates in post-processing."""
        b1 = oneway_sensitivity(d) / self.epsilon_1
        b2 = COUNT_SENSITIVITY * max(d - 1, 1) / self.epsilon_2
        return b1, b2

    # -- fit ------------------------------------------------------------------------------
    def fit(self, codes: np.ndarray, domain: Sequence[int], rand: Randomness,
            counts: np.ndarray | None = None) -> PureMSTModel:
        """Measure the 1-ways (eps_1), select a spanning tree (eps_sel), measure its 2-ways
        (eps_2), then post-process (:func:`consistent_tree`). ``counts``: ``codes`` are
        distinct records occurring that many times (the same counts, the same fit)."""
        codes, dom = check_codes(codes, domain)
        weights = None if counts is None else record_weights(counts, codes.shape[0])
        n, d = (codes.shape[0] if weights is None else int(counts.sum())), codes.shape[1]
        if n < 1:
            raise ValueError("mst_pure: need at least one row")
        for a in range(d):
            for b in range(a + 1, d):
                if dom[a] * dom[b] > MAX_PAIR_CELLS:
                    raise ValueError(
                        f"mst_pure: the 2-way table of columns {a} and {b} would have "
                        f"{dom[a] * dom[b]:,} cells, more than {MAX_PAIR_CELLS:,}; use a coarser "
                        "configuration")
        cols = [np.ascontiguousarray(codes[:, j]) for j in range(d)]

        # ---- 1-way marginals (eps_1): one vector release, L1 sensitivity 2d ----
        true_1 = np.concatenate([np.bincount(c, weights=weights, minlength=k)
                                 for c, k in zip(cols, dom)]).astype(np.int64)
        noisy_flat = np.asarray(rand.laplace(true_1, sensitivity=oneway_sensitivity(d),
                                             epsilon=self.epsilon_1, integer=True,
                                             purpose="mst_pure: 1-way marginals"))
        cuts = np.cumsum(dom)[:-1]
        noisy_1 = [np.asarray(v, dtype=np.float64) for v in np.split(noisy_flat, cuts)]
        measured = [measured_table([j], [1], dom, v, oneway_sensitivity(d), self.epsilon_1,
                                   "mst_pure: 1-way marginals") for j, v in enumerate(noisy_1)]

        # ---- tree selection (eps_sel): Kruskal with report-noisy-max, sensitivity 2 ----
        pairs = [(a, b) for a in range(d) for b in range(a + 1, d)]
        true_2: dict[tuple[int, int], np.ndarray] = {}
        scores: dict[tuple[int, int], float] = {}
        for a, b in pairs:
            true_2[(a, b)] = _pair_table(cols[a], cols[b], dom[a], dom[b], weights)
            scores[(a, b)] = selection_score(true_2[(a, b)],
                                             independence_estimate(noisy_1[a], noisy_1[b], n))
        comp = list(range(d))

        def find(x: int) -> int:
            while comp[x] != x:
                comp[x] = comp[comp[x]]
                x = comp[x]
            return x

        edges: list[tuple[int, int]] = []
        eps_step = exact.split_float(self.epsilon_select, d - 1) if d > 1 else 0.0
        for step in range(1, d):
            cands = [(a, b) for a, b in pairs if find(a) != find(b)]
            pick = int(rand.exponential(np.array([scores[p] for p in cands]),
                                        sensitivity=SCORE_SENSITIVITY, epsilon=eps_step,
                                        purpose=f"mst_pure: tree edge {step}"))
            a, b = cands[pick]
            comp[find(a)] = find(b)
            edges.append((a, b))

        # ---- 2-way marginals of the tree (eps_2): L1 sensitivity 2 each ----
        eps_pair = exact.split_float(self.epsilon_2, d - 1) if d > 1 else 0.0
        noisy_2: dict[tuple[int, int], np.ndarray] = {}
        for a, b in edges:
            t = true_2[(a, b)]
            noisy_2[(a, b)] = np.asarray(
                rand.laplace(t.reshape(-1), sensitivity=COUNT_SENSITIVITY, epsilon=eps_pair,
                             integer=True, purpose=f"mst_pure: 2-way marginal [{a}, {b}]"),
                dtype=np.float64).reshape(t.shape)
            measured.append(measured_table([a, b], [1, 1], dom, noisy_2[(a, b)], COUNT_SENSITIVITY,
                                           eps_pair, f"mst_pure: 2-way marginal [{a}, {b}]"))
        del true_1, true_2, scores  # nothing below this line sees the data
        self.edges = list(edges)
        return self.estimate(measured, dom, n)

    def estimate(self, tables: Sequence[MeasuredTable], domain: Sequence[int], n: float) -> PureMSTModel:
        """The model from the measured tables (post-processing: no data, no budget; the fit's
        own code, and a refit on other counts for ``dpbundle sample --copies``): the d 1-way
        tables in column order, then the tree's 2-way tables in the order the edges were chosen,
        made consistent by :func:`consistent_tree` with the noise variances of the public scales."""
        dom = tuple(int(k) for k in domain)
        d = len(dom)
        noisy_1 = [t.counts.astype(np.float64) for t in tables[:d]]
        edges = [(t.columns[0], t.columns[1]) for t in tables[d:]]
        noisy_2 = {(a, b): t.counts.astype(np.float64).reshape(dom[a], dom[b])
                   for (a, b), t in zip(edges, tables[d:])}
        b1, b2 = self.noise_scales(d)
        nodes, conds, info = consistent_tree(noisy_1, noisy_2, dom, float(n),
                                             var_1way=2.0 * b1 * b1, var_2way=2.0 * b2 * b2)
        return attach(PureMSTModel(dom, nodes, conds, edges, info), tables)


# --------------------------------------------------------------------------------------------
# spec validation
# --------------------------------------------------------------------------------------------

def grid_problems(grid: dict) -> list[str]:
    """Problems of an ``mst_pure`` grid (spec validation), each as ``".key[j]: message"``.

    Every split value must be a number in (0, 1); every combination of split_1way and
    split_select must leave a positive share for the 2-way marginals.
    """
    out: list[str] = []
    good: dict[str, list[Fraction]] = {}
    for key in ("split_1way", "split_select"):
        vals = grid.get(key, [DEFAULT_SPLIT])
        good[key] = []
        for j, v in enumerate(vals if isinstance(vals, list) else [vals]):
            try:
                good[key].append(exact.dec(_check_split(key, v)))
            except ValueError:
                out.append(f".{key}[{j}]: must be a number > 0 and < 1 (got {v!r})")
    if good["split_1way"] and good["split_select"]:
        worst = max(good["split_1way"]) + max(good["split_select"])
        if worst >= 1:
            out.append(f": split_1way + split_select must be < 1 for every combination (the rest "
                       f"pays the 2-way marginals); the largest values add up to {exact.show(worst)}")
    return out
