"""Marginal-based generators: a noisy full cross-tabulation, and noisy marginals + IPF.

Neighbouring datasets differ in one record (change-one, n public). Both generators are pure DP
with the Laplace mechanism (OpenDP) on count vectors whose L1 sensitivity is 2; everything after
the noise (clipping, consistency, IPF, sampling) is post-processing.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from .coding import mixed_radix_decode, mixed_radix_index
from .failures import AttemptFailure
from .generators import check_codes, declared_share, even_split
from .noise import Randomness

__all__ = [
    "COUNT_SENSITIVITY",
    "ConvergenceError",
    "crosstab_counts",
    "marginal_counts",
    "resolve_marginals",
    "NoisyCrossTab",
    "CrossTabModel",
    "NoisyMarginals",
    "MarginalsModel",
    "ipf",
]

COUNT_SENSITIVITY = 2.0
"""L1 sensitivity of any histogram (count vector) under change-one-record.

Derivation: ``c(D)[k] = #{r in D : cell(r) = k}``. Changing record r into r' removes one from
``c[cell(r)]`` and adds one to ``c[cell(r')]``; every other cell is unchanged. So
``||c(D) - c(D')||_1 = 2`` if the cells differ and ``0`` otherwise, hence ``<= 2``.
"""

DEFAULT_MAX_CELLS = 10_000_000


class ConvergenceError(AttemptFailure):
    """IPF did not converge; carries ``iterations`` and the final deviations. IPF runs on the
    noisy marginals only, so this is a failed attempt, not an abort."""

    def __init__(self, message: str, *, iterations: int, max_deviation: float,
                 sweep_change: float) -> None:
        super().__init__(message)
        self.iterations = iterations
        self.max_deviation = max_deviation
        self.sweep_change = sweep_change


def _n_cells(domain: Sequence[int]) -> int:
    return math.prod(int(s) for s in domain)


def crosstab_counts(codes: np.ndarray, domain: Sequence[int]) -> np.ndarray:
    """Full cross-tabulation: int64 counts of every cell of ``domain`` (C order, flat).

    Cell index = mixed-radix index of the record; ``minlength = prod(domain)`` so empty cells
    are included. L1 sensitivity under change-one: 2 (see ``COUNT_SENSITIVITY``).
    """
    codes, dom = check_codes(codes, domain)
    idx = mixed_radix_index(codes, dom)
    return np.bincount(idx, minlength=_n_cells(dom)).astype(np.int64)


def marginal_counts(codes: np.ndarray, domain: Sequence[int], cols: Sequence[int]) -> np.ndarray:
    """Counts of the marginal on columns ``cols``: int64 array of shape ``[domain[j] for j in cols]``.

    It is the cross-tabulation of the projected records, so its L1 sensitivity is 2.
    """
    codes, dom = check_codes(codes, domain)
    cols = tuple(int(j) for j in cols)
    sub = tuple(dom[j] for j in cols)
    idx = mixed_radix_index(codes[:, cols], sub)
    return np.bincount(idx, minlength=_n_cells(sub)).astype(np.int64).reshape(sub)


def resolve_marginals(spec: str | Sequence[Sequence[int]], d: int) -> list[tuple[int, ...]]:
    """Column-index tuples of the marginals: ``"all-1way"``/``"all-2way"``/``"all-3way"`` or a list.

    ``all-kway`` with ``k > d`` means the single d-way marginal. Explicit tuples are sorted and
    must hold distinct column indices in ``range(d)``.
    """
    if isinstance(spec, str):
        names = {"all-1way": 1, "all-2way": 2, "all-3way": 3}
        if spec not in names:
            raise ValueError(
                f"marginals must be one of {sorted(names)} or a list of column-index tuples, got {spec!r}"
            )
        k = min(names[spec], d)
        return list(itertools.combinations(range(d), k))
    out: list[tuple[int, ...]] = []
    try:
        items = list(spec)
    except TypeError:
        raise ValueError(f"marginals must be a string or a list of column-index tuples, got {spec!r}") from None
    if not items:
        raise ValueError("marginals: the list of marginals is empty")
    for m in items:
        try:
            t = tuple(sorted(int(j) for j in m))
        except (TypeError, ValueError):
            raise ValueError(f"marginals: {m!r} is not a tuple of column indices") from None
        if not t or len(set(t)) != len(t) or t[0] < 0 or t[-1] >= d:
            raise ValueError(
                f"marginals: {tuple(m)!r} must be distinct column indices in 0..{d - 1}"
            )
        if t in out:
            raise ValueError(f"marginals: {t} is listed twice")
        out.append(t)
    return out


def _check_max_cells(max_cells: Any) -> int:
    if isinstance(max_cells, bool) or not isinstance(max_cells, (int, np.integer)) or max_cells < 1:
        raise ValueError(f"max_cells must be a positive integer, got {max_cells!r}")
    return int(max_cells)


def _sample_cells(p: np.ndarray, domain: tuple[int, ...], m: int,
                  rng: np.random.Generator) -> np.ndarray:
    """m i.i.d. records from the cell distribution ``p`` (flat, sums to 1) -> int64 (m, d)."""
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 0:
        raise ValueError(f"the number of rows to sample must be an integer >= 0, got {m!r}")
    idx = rng.choice(p.shape[0], size=int(m), p=p)
    return mixed_radix_decode(idx, domain)


def _cell_counts(p: np.ndarray, domain: tuple[int, ...], m: int,
                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """multinomial(m, p / sum p) over the flat cells: (rows of the cells drawn, their counts)."""
    from .sampling import counts_from_distribution

    p = np.asarray(p, dtype=np.float64)
    return counts_from_distribution(p / p.sum(), domain, m, rng)


def _to_distribution(noisy: np.ndarray) -> np.ndarray:
    """Clip negative noisy counts to 0 and normalise (uniform if nothing is left)."""
    p = np.clip(np.asarray(noisy, dtype=np.float64).reshape(-1), 0.0, None)
    total = p.sum()
    if not total > 0:
        return np.full(p.shape[0], 1.0 / p.shape[0])
    return p / total


# --------------------------------------------------------------------------- cross-tab


@dataclass
class CrossTabModel:
    """Distribution over the flat cells of ``domain``."""

    domain: tuple[int, ...]
    p: np.ndarray

    def sample(self, m: int, rng: np.random.Generator) -> np.ndarray:
        """m records drawn i.i.d. from ``p`` (post-processing)."""
        return _sample_cells(self.p, self.domain, m, rng)

    def sample_counts(self, m: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """The counts of m i.i.d. records per cell, multinomial(m, p) (the count sampler)."""
        return _cell_counts(self.p, self.domain, m, rng)


class NoisyCrossTab:
    """Laplace noise on every cell of the full cross-tabulation ("crosstab").

    ``fit`` releases ``c(D) + DLap(2/epsilon)^cells`` (OpenDP's exact discrete Laplace) (L1 sensitivity 2, see
    ``COUNT_SENSITIVITY``), which is epsilon-DP (the float handed to OpenDP is
    ``declared_share(epsilon)``, at most the declared decimal); the model clips negatives, normalises and
    samples cells. Refuses domains with more than ``max_cells`` cells.
    """

    type = "crosstab"
    HYPERPARAMETERS = ("max_cells",)

    def __init__(self, epsilon: float, max_cells: int = DEFAULT_MAX_CELLS) -> None:
        if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon > 0):
            raise ValueError(f"crosstab: epsilon must be a finite number > 0, got {epsilon!r}")
        self.epsilon = float(epsilon)
        self.max_cells = _check_max_cells(max_cells)

    def hyperparameters(self) -> dict:
        return {"max_cells": self.max_cells}

    def privacy_map(self, d_in: int) -> float:
        """Change-one distance d_in -> d_in * epsilon (L1 change <= 2 d_in; scale 2/epsilon)."""
        return float(d_in) * self.epsilon

    def budget_parts(self) -> list[dict]:
        """One part, the float handed to OpenDP: ``declared_share(epsilon)``, whose binary value
        is <= the declared decimal (fl(0.8) itself is above 4/5)."""
        return [{"purpose": "crosstab counts", "epsilon": declared_share(self.epsilon)}]

    def fit(self, codes: np.ndarray, domain: Sequence[int], rand: Randomness) -> CrossTabModel:
        """Noisy counts of every cell (epsilon-DP) -> clipped, normalised cell distribution."""
        dom = tuple(int(s) for s in domain)
        cells = _n_cells(dom)
        if cells > self.max_cells:
            raise ValueError(
                f"crosstab: the full domain {dom} has {cells:,} cells, more than max_cells="
                f"{self.max_cells:,}; use a coarser configuration, the 'marginals' or "
                "'privbayes' generator, or raise max_cells"
            )
        counts = crosstab_counts(codes, dom)
        noisy = rand.laplace(counts, sensitivity=COUNT_SENSITIVITY,
                             epsilon=declared_share(self.epsilon),
                             purpose="crosstab counts", integer=True)
        return CrossTabModel(domain=dom, p=_to_distribution(noisy))


# --------------------------------------------------------------------------- marginals + IPF


def _intersection_closure(sets: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """All non-trivial intersections of the marginals' column sets (with the empty set), small first."""
    found = {()}
    frontier = {tuple(sorted(set(a) & set(b))) for a, b in itertools.combinations(sets, 2)}
    while frontier - found:
        new = frontier - found
        found |= new
        frontier = {tuple(sorted(set(a) & set(b))) for a in found for b in sets}
    return sorted(found, key=lambda s: (len(s), s))


def _project(table: np.ndarray, attrs: tuple[int, ...], sub: tuple[int, ...]) -> np.ndarray:
    """Sum a marginal over ``attrs`` (its axes) down to the axes of ``sub`` (keepdims)."""
    axes = tuple(i for i, a in enumerate(attrs) if a not in sub)
    return table.sum(axis=axes, keepdims=True) if axes else table


def make_consistent(tables: list[np.ndarray], attrs: list[tuple[int, ...]], total: float,
                    rounds: int = 10, *, cell_variances: Sequence[float] | None = None,
                    nonnegative: Callable[[np.ndarray, float], np.ndarray] | None = None,
                    ) -> list[np.ndarray]:
    """Post-process noisy marginals into non-negative, (nearly) mutually consistent tables.

    For every intersection S of marginal column sets (the empty set first, whose target is the
    public ``total`` = n), each table's projection on S is replaced by the inverse-variance
    weighted average of all projections on S (a projection summing ``k`` noisy cells has
    variance ``k v``, ``v`` the table's per-cell noise variance: ``cell_variances[i]``, equal
    for all tables when not given) by adding the difference evenly over the summed cells;
    then each table is made non-negative: ``nonnegative(table, total)`` if given (e.g.
    ``norm_sub.norm_sub``), else negative cells are set to 0 and the table rescaled to
    ``total``. Repeated ``rounds`` times. Pure post-processing (the variances must be public:
    functions of the noise scales, never of the data).
    """
    tabs = [np.array(t, dtype=np.float64) for t in tables]
    subsets = _intersection_closure(attrs)
    for _ in range(rounds):
        for s in subsets:
            members = [i for i, a in enumerate(attrs) if set(s) <= set(a)]
            if not s:
                target = None
            elif len(members) < 2:
                continue
            projs, weights = [], []
            for i in members:
                p = _project(tabs[i], attrs[i], s)
                k = tabs[i].size / max(p.size, 1)
                projs.append(p.reshape([tabs[i].shape[ax] for ax, a in enumerate(attrs[i]) if a in s]))
                weights.append(1.0 / (k * (1.0 if cell_variances is None else cell_variances[i])))
            if s:
                w = np.asarray(weights) / np.sum(weights)
                target = sum(wi * pi for wi, pi in zip(w, projs))
            for i, proj in zip(members, projs):
                k = tabs[i].size / max(proj.size, 1)
                goal = np.asarray(total if not s else target, dtype=np.float64)
                shape = [tabs[i].shape[ax] if a in s else 1 for ax, a in enumerate(attrs[i])]
                tabs[i] = tabs[i] + ((goal - proj) / k).reshape(shape)
        for i in range(len(tabs)):
            if nonnegative is not None:
                tabs[i] = np.asarray(nonnegative(tabs[i], float(total)), dtype=np.float64)
                continue
            t = np.clip(tabs[i], 0.0, None)
            ssum = t.sum()
            tabs[i] = t * (total / ssum) if ssum > 0 else np.full(t.shape, total / t.size)
    return tabs


@dataclass
class IPFResult:
    """Outcome of :func:`ipf`."""

    p: np.ndarray                 # fitted joint distribution over the full domain (shape = domain)
    iterations: int
    converged: bool
    max_deviation: float          # max |fitted marginal - target| (probabilities), last sweep
    sweep_change: float           # max change of the pre-update marginals between the last sweeps


def ipf(targets: list[np.ndarray], attrs: list[tuple[int, ...]], domain: tuple[int, ...], *,
        max_iterations: int = 1000, tolerance: float = 1e-5) -> IPFResult:
    """Iterative proportional fitting of a joint distribution to marginal ``targets``.

    Start uniform; a sweep rescales the table for each marginal A in turn:
    ``P <- P * t_A / P_A`` (0 where ``P_A = 0``), ``P_A`` the table's marginal on A. Targets are
    normalised to sum 1. Convergence: the pre-update marginals change by at most ``tolerance``
    between consecutive sweeps (this also holds on the limit cycle of slightly inconsistent
    targets); ``max_deviation`` reports how far the fit is from the targets.
    """
    d = len(domain)
    P = np.full(domain, 1.0 / _n_cells(domain))
    tnorm = []
    for t in targets:
        s = t.sum()
        tnorm.append(t / s if s > 0 else np.full(t.shape, 1.0 / t.size))
    prev: list[np.ndarray | None] = [None] * len(targets)
    change = math.inf
    deviation = math.inf
    it = 0
    for it in range(1, max_iterations + 1):
        change = 0.0
        deviation = 0.0
        for i, (a, t) in enumerate(zip(attrs, tnorm)):
            other = tuple(j for j in range(d) if j not in a)
            cur = P.sum(axis=other) if other else P.copy()
            deviation = max(deviation, float(np.max(np.abs(cur - t))))
            if prev[i] is not None:
                change = max(change, float(np.max(np.abs(cur - prev[i]))))
            else:
                change = math.inf
            prev[i] = cur
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(cur > 0, t / cur, 0.0)
            shape = [domain[j] if j in a else 1 for j in range(d)]
            P *= ratio.reshape(shape)
        if change <= tolerance:
            break
    total = P.sum()
    P = P / total if total > 0 else np.full(domain, 1.0 / _n_cells(domain))
    return IPFResult(p=P, iterations=it, converged=change <= tolerance,
                     max_deviation=deviation, sweep_change=change)


@dataclass
class MarginalsModel:
    """The IPF fit over the full domain, plus convergence information."""

    domain: tuple[int, ...]
    p: np.ndarray                       # flat cell distribution
    marginals: list[tuple[int, ...]]
    iterations: int
    converged: bool
    max_deviation: float
    sweep_change: float
    warnings: list[str] = field(default_factory=list)

    @property
    def warning(self) -> str | None:
        """The first warning (e.g. IPF non-convergence), or None."""
        return self.warnings[0] if self.warnings else None

    def sample(self, m: int, rng: np.random.Generator) -> np.ndarray:
        """m records drawn i.i.d. from the IPF distribution (post-processing)."""
        return _sample_cells(self.p, self.domain, m, rng)

    def sample_counts(self, m: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """The counts of m i.i.d. records per cell, multinomial(m, p) (the count sampler)."""
        return _cell_counts(self.p, self.domain, m, rng)


class NoisyMarginals:
    """Noisy marginals made consistent by IPF ("marginals"; cf. Raab 2024, DPSyn).

    Each of the K marginals (default all 2-way) is released with Laplace noise of L1
    sensitivity 2 (``COUNT_SENSITIVITY``) and epsilon/K (``even_split``: the largest float
    share with K x share <= the declared decimal epsilon, exactly), so the fit is epsilon-DP by
    sequential composition. Post-processing: consistency + non-negativity
    (``make_consistent``), then IPF on the full domain (refused above ``max_cells`` cells);
    non-convergence raises :class:`ConvergenceError` unless ``allow_nonconvergence``.
    """

    type = "marginals"
    HYPERPARAMETERS = ("marginals", "max_cells", "max_iterations", "tolerance",
                       "allow_nonconvergence", "consistency_rounds")

    def __init__(self, epsilon: float, marginals: str | Sequence[Sequence[int]] = "all-2way",
                 max_cells: int = DEFAULT_MAX_CELLS, max_iterations: int = 1000,
                 tolerance: float = 1e-5, allow_nonconvergence: bool = False,
                 consistency_rounds: int = 30) -> None:
        if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon > 0):
            raise ValueError(f"marginals: epsilon must be a finite number > 0, got {epsilon!r}")
        self.epsilon = float(epsilon)
        if isinstance(marginals, str):
            resolve_marginals(marginals, 3)  # validates the name
            self.marginals: str | list[tuple[int, ...]] = marginals
        else:
            self.marginals = resolve_marginals(marginals, 1 + max(
                (max(int(j) for j in m) for m in marginals if len(m)), default=0))
        self.max_cells = _check_max_cells(max_cells)
        if isinstance(max_iterations, bool) or not isinstance(max_iterations, (int, np.integer)) \
                or max_iterations < 1:
            raise ValueError(f"marginals: max_iterations must be a positive integer, got {max_iterations!r}")
        self.max_iterations = int(max_iterations)
        if not (isinstance(tolerance, (int, float)) and math.isfinite(tolerance) and tolerance > 0):
            raise ValueError(f"marginals: tolerance must be a finite number > 0, got {tolerance!r}")
        self.tolerance = float(tolerance)
        if not isinstance(allow_nonconvergence, bool):
            raise ValueError("marginals: allow_nonconvergence must be true or false")
        self.allow_nonconvergence = allow_nonconvergence
        if isinstance(consistency_rounds, bool) or not isinstance(consistency_rounds, (int, np.integer)) \
                or consistency_rounds < 0:
            raise ValueError("marginals: consistency_rounds must be an integer >= 0")
        self.consistency_rounds = int(consistency_rounds)

    def hyperparameters(self) -> dict:
        m = self.marginals if isinstance(self.marginals, str) else [list(t) for t in self.marginals]
        return {"marginals": m, "max_cells": self.max_cells, "max_iterations": self.max_iterations,
                "tolerance": self.tolerance, "allow_nonconvergence": self.allow_nonconvergence,
                "consistency_rounds": self.consistency_rounds}

    def privacy_map(self, d_in: int) -> float:
        """Change-one distance d_in -> d_in * epsilon (sum over marginals of d_in * epsilon/K)."""
        return float(d_in) * self.epsilon

    def budget_parts(self) -> list[dict]:
        if isinstance(self.marginals, str):
            # K is known only with the data's width: one aggregate part, declared_share(epsilon)
            # <= the declared decimal; the K shares of fit(), even_split(epsilon, K), sum
            # exactly to at most the declared decimal as well
            return [{"purpose": f"noisy marginals ({self.marginals}, budget split evenly)",
                     "epsilon": declared_share(self.epsilon)}]
        e = even_split(self.epsilon, len(self.marginals))
        return [{"purpose": f"marginal {list(t)}", "epsilon": e} for t in self.marginals]

    def fit(self, codes: np.ndarray, domain: Sequence[int], rand: Randomness) -> MarginalsModel:
        """K noisy marginals (epsilon/K each) -> consistency -> IPF -> cell distribution."""
        codes, dom = check_codes(codes, domain)
        d = len(dom)
        cells = _n_cells(dom)
        if cells > self.max_cells:
            raise ValueError(
                f"marginals: IPF needs the full domain {dom} with {cells:,} cells, more than "
                f"max_cells={self.max_cells:,}; use a coarser configuration or 'privbayes'"
            )
        attrs = resolve_marginals(self.marginals, d)
        eps_k = even_split(self.epsilon, len(attrs))
        noisy = []
        for a in attrs:
            true = marginal_counts(codes, dom, a)
            noisy.append(rand.laplace(true, sensitivity=COUNT_SENSITIVITY, epsilon=eps_k,
                                      purpose=f"marginal {list(a)}", integer=True))
        n = float(codes.shape[0])
        tables = make_consistent(noisy, attrs, total=max(n, 1.0), rounds=self.consistency_rounds)
        res = ipf(tables, attrs, dom, max_iterations=self.max_iterations, tolerance=self.tolerance)
        model = MarginalsModel(domain=dom, p=res.p.reshape(-1), marginals=attrs,
                               iterations=res.iterations, converged=res.converged,
                               max_deviation=res.max_deviation, sweep_change=res.sweep_change)
        if not res.converged:
            msg = (f"IPF did not converge after {res.iterations} iterations: the marginals still "
                   f"changed by {res.sweep_change:.3g} between sweeps (tolerance "
                   f"{self.tolerance:.3g}); max deviation from the noisy marginals "
                   f"{res.max_deviation:.3g}")
            if not self.allow_nonconvergence:
                raise ConvergenceError(msg, iterations=res.iterations,
                                       max_deviation=res.max_deviation,
                                       sweep_change=res.sweep_change)
            model.warnings.append(msg)
        return model
