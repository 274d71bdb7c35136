"""Adaptive, workload-aware marginal generator ("aim_pure"): AIM's rounds in pure DP.

After McKenna, Mullins, Sheldon, Miklau, "AIM: An Adaptive and Iterative Mechanism for
Differentially Private Synthetic Data" (VLDB 2022), re-derived for pure DP (Laplace noise and
report-noisy-max through OpenDP, change-one neighbours, n public) and with PrivSyn's
consistency + GUM in place of Private-PGM.

Input: integer codes ``(n, d)`` over a public domain ``(k_0, ..., k_{d-1})`` and a public
*workload* ``W``: sets of columns whose marginals matter (built from the spec's criteria by
:func:`criteria_workload`; all pairs when none is given). The budget ``eps``:

* ``eps_1 = float_down(dec(split_1way) dec(eps))``: the 1-way marginals of all columns in one
  vector release, discrete Laplace with L1 sensitivity ``2 d`` (:func:`mst.oneway_sensitivity`).
* ``rest = dec(eps) - binary(eps_1)`` for the **rounds** (:func:`schedule`). Round budget
  ``e_t`` starts at ``rest / T`` with ``T = rounds_per_column * d`` (AIM: 16 d; here 2 d by
  default: measured on births and persons, T = 16 d spends the first rounds on measurements the
  noise drowns, and GUM, unlike Private-PGM, fits them as if they were exact); it doubles
  after a round whose measurement barely changed the model (AIM halves sigma: the pure-DP
  analogue halves the Laplace scale); a round at whose start less than ``2 e_t`` remains takes
  all that remains and is the last. Round t spends ``eps_meas = float_down(dec(measure_split)
  e_t)`` on measuring and ``eps_sel = float_down(e_t - binary(eps_meas))`` on selecting, so the
  binary values of all floats handed to OpenDP sum to at most ``dec(eps)`` (exact rationals).

Round t (adaptive sequential composition: the candidate set, the estimates, the scales and
the budget are functions of earlier DP outputs and public values only):

1. **Select** (``eps_sel``): OpenDP's report-noisy-max over the candidates ``C`` (every subset
   of a workload set with 2..``max_size`` columns, each of two values or more, and at most
   ``max_cells`` cells: public) on
   ``q_r(D) = w_r (||T_r(D) - E_r||_1 - b_t cells_r)``; ``T_r`` the true count table, ``E_r``
   the current model's estimate (post-processing), ``b_t`` the Laplace scale a measurement at
   ``eps_meas`` would have, ``2 / eps_meas`` (so ``b_t cells_r`` is about the expected L1
   noise: measuring what the noise would drown is penalised, AIM's rule), ``w_r = sum_c (1/|W_c|) sum_{s in W_c} |r ∩ s|``
   (AIM's workload weights, each criterion's sets sharing weight 1). Sensitivity:
   :func:`score_sensitivity`.
2. **Measure** (``eps_meas``): ``T_r`` with discrete Laplace, L1 sensitivity 2
   (``COUNT_SENSITIVITY``: one record leaves a cell and enters one).
3. **Update** (post-processing): the model is a working synthetic table of
   ``min(n, estimate_rows)`` records moved by GUM steps toward the measured marginals
   (PrivSyn's update, :func:`privsyn._gum_step`, on a recorded seed); ``E_r`` is its marginal
   scaled to n. If the estimate of ``r`` moved by at most ``b_t cells_r`` in L1 (no more than
   the noise), the next round's budget doubles.

A marginal may be selected again; its measurements are combined by inverse variance. The
released model: the measured marginals made consistent (:func:`privsyn.consistent_tables`,
inverse-variance weights) and sampled by GUM (:class:`AdaptiveModel`), post-processing.
``fit`` is ``eps``-DP, ``privacy_map(d_in) = d_in * eps`` (group privacy).
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Iterable, Sequence

import numpy as np

from . import exact
from .generators import check_codes, constructor_grid_problems, record_weights
from .marginals import COUNT_SENSITIVITY
from .mst import _to_total, oneway_sensitivity, selection_score
from .noise import Randomness
from .privsyn import PrivSynModel, _distribution, _gum_step, _keys, consistent_tables, gum

__all__ = [
    "AdaptiveMarginals",
    "AdaptiveModel",
    "Round",
    "candidates",
    "criteria_workload",
    "score",
    "score_sensitivity",
    "schedule",
    "schedule_problems",
    "grid_problems",
    "DEFAULTS",
]

DEFAULTS: dict[str, Any] = {
    "rounds_per_column": 2, "split_1way": 0.1, "measure_split": 0.9, "max_size": 3,
    "max_cells": 100_000, "estimate_rows": 50_000, "gum_rounds": 6, "gum_alpha": 1.0,
    "workload": None,
}

#: Rounds of consistency and norm-sub on the measured marginals (post-processing; PrivSyn's).
CONSISTENCY_ROUNDS = 10

#: Largest n (scores are exact in int64 grid units, :func:`mst.score_grid`).
MAX_ROWS = (1 << 40) - 1

#: GUM steps that move the working table toward a newly measured marginal, then one pass at
#: the last step over every measured marginal (post-processing).
UPDATE_STEPS = (1.0, 0.5, 0.25)


# --------------------------------------------------------------------------------------------
# workload and candidates (public)
# --------------------------------------------------------------------------------------------

def criteria_workload(spec: dict, names: Sequence[str]) -> list[list[list[int]]]:
    """The spec's criteria as workload groups: one list of column-index sets per criterion.

    Public (the spec document only). ``kway_marginals``: every set of its columns (default all)
    of size 1..``max_k`` (at most 3); ``smoothed_ratio``: each column's 1-way; ``conditional_means`` and
    ``quantile``: the target with each grouping (``null`` -> the target alone);
    ``regression_coefficients``, ``regression_mae_difference``, ``classification``: the target
    with each of its features (default: every other column; a linear model's coefficients are
    a function of the 2-way moments); ``faithfulness``: its exact, adjacent
    and nominal columns together. Unknown columns and types contribute nothing.
    """
    idx = {n: i for i, n in enumerate(names)}
    d = len(names)

    def cols(xs: Iterable[Any]) -> list[int]:
        return sorted({idx[x] for x in xs if isinstance(x, str) and x in idx})

    groups: list[list[list[int]]] = []
    for c in spec.get("acceptance") or []:
        t = c.get("type")
        target = [c["target"]] if isinstance(c.get("target"), str) else []
        sets: list[list[int]] = []
        if t == "kway_marginals":
            use = cols(c.get("columns") or names)
            top = min(int(c.get("max_k") or len(use)), len(use), 3)
            sets = [list(s) for k in range(1, top + 1) for s in itertools.combinations(use, k)]
        elif t == "smoothed_ratio":
            sets = [[j] for j in cols(c.get("columns") or names)]
        elif t in ("conditional_means", "quantile"):
            for by in c.get("by") or [None]:
                extra = [] if by is None else ([by] if isinstance(by, str) else list(by))
                sets.append(cols(target + extra))
        elif t in ("regression_coefficients", "regression_mae_difference", "classification"):
            feats = c.get("features") or [x for x in names if x not in target]
            sets = [cols(target + [f]) for f in feats]
        sets = [s for s in sets if s]
        if sets:
            groups.append(sets)
    faith = spec.get("faithfulness")
    if isinstance(faith, dict):
        s = cols(list(faith.get("exact") or []) + list(faith.get("adjacent") or [])
                 + list(faith.get("nominal") or []))
        if s:
            groups.append([s])
    if not groups:
        groups = [[[a, b] for a, b in itertools.combinations(range(d), 2)]] if d > 1 else []
    return groups


def candidates(workload: Sequence[Sequence[Sequence[int]]], domain: Sequence[int],
               max_size: int, max_cells: int) -> tuple[list[tuple[int, ...]], list[Fraction]]:
    """(candidate sets, weights): every subset of a workload set with 2..max_size columns of
    at least 2 values each and at most ``max_cells`` cells, sorted; weight
    ``w_r = sum over groups c of (1/|W_c|) sum_{s in W_c} |r ∩ s|`` (exact). Public."""
    dom = [int(k) for k in domain]
    found: set[tuple[int, ...]] = set()
    for group in workload:
        for s in group:
            use = sorted(j for j in set(int(x) for x in s) if 0 <= j < len(dom) and dom[j] >= 2)
            for k in range(2, min(max_size, len(use)) + 1):
                for r in itertools.combinations(use, k):
                    if math.prod(dom[j] for j in r) <= max_cells:
                        found.add(r)
    cands = sorted(found, key=lambda r: (len(r), r))
    # |r ∩ s| = sum over j in r of [j in s], so w_r = sum over j in r of u_j with
    # u_j = sum_c (number of sets of W_c holding j) / |W_c|: linear in the workload's size
    unit: dict[int, Fraction] = {}
    for group in workload:
        if group:
            for s in group:
                for j in set(int(x) for x in s):
                    unit[j] = unit.get(j, Fraction(0)) + Fraction(1, len(group))
    weights = [sum((unit.get(j, Fraction(0)) for j in r), Fraction(0)) for r in cands]
    return cands, weights


# --------------------------------------------------------------------------------------------
# the selection score and its sensitivity
# --------------------------------------------------------------------------------------------

def _score_bound(n: int, estimate: np.ndarray, penalty: float) -> Fraction:
    """A public bound on ``|q_r| / w_r``: ``||T - E'||_1 <= n + sum E'`` and the penalty."""
    e = np.abs(np.asarray(estimate, dtype=np.float64))
    return Fraction(int(n) + math.ceil(float(e.sum()) * (1 + e.size * 2.0 ** -51)) + e.size + 1) \
        + Fraction(abs(penalty))


def score(true_table: np.ndarray, estimate: np.ndarray, weight: Fraction, penalty: float) -> float:
    """``q = w (||T - E'||_1 - penalty)`` rounded once to the nearest float.

    ``||T - E'||_1`` is :func:`mst.selection_score` (``E'`` = the estimate on a public dyadic
    grid; the L1 distance is an exact float); the product and difference are exact rationals,
    so the float differs from the exact ``q`` by at most half an ulp (2^-53 |q|)."""
    dist = Fraction(selection_score(true_table, estimate))
    return float(Fraction(weight) * (dist - Fraction(penalty)))


def score_sensitivity(n: int, estimates: Sequence[np.ndarray], weights: Sequence[Fraction],
                      penalties: Sequence[float]) -> float:
    """linf sensitivity of the float score vector under change-one: the smallest float >=
    ``max_r w_r (2 + 2^-52 B_r)``, ``B_r`` = :func:`_score_bound` (public).

    Derivation. ``E'_r`` and the penalty come from earlier DP outputs and public values: the
    same for D and its neighbour D'. Changing one record moves ``T_r`` by ``e_y - e_x``, so
    ``| ||T_r(D) - E'||_1 - ||T_r(D') - E'||_1 | <= ||T_r(D) - T_r(D')||_1 <= 2`` (reverse
    triangle inequality; ``selection_score`` computes the distance exactly, no rounding term).
    The exact scores then differ by at most ``2 w_r``. Each is rounded once to the nearest float:
    ``|fl(q) - q| <= 2^-53 |q|`` with ``|q| <= w_r B_r``, so the float scores differ by at most
    ``2 w_r + 2^-52 w_r B_r``. The noisy max needs the largest such bound over the candidates.
    Tight up to the rounding term: a record leaving a cell with ``T < E'`` for a cell with
    ``T >= E'`` moves the distance by exactly 2.
    """
    best = Fraction(0)
    for est, w, pen in zip(estimates, weights, penalties):
        b = Fraction(w) * (2 + _score_bound(n, est, pen) / 2 ** 52)
        best = max(best, b)
    return exact.float_up(best)


# --------------------------------------------------------------------------------------------
# budget schedule (public arithmetic)
# --------------------------------------------------------------------------------------------

#: budget.json's words for the rounds' part (dpbundle 0.3 and later); ROUNDS_PURPOSE_0_2 is what
#: dpbundle 0.2 wrote, which the audit still accepts in a bundle that claims 0.2.
ROUNDS_PURPOSE = ("adaptive rounds: select a marginal (noisy max) and measure it (Laplace), spending at most "
                  "this in all (nothing when no marginal is a candidate)")
ROUNDS_PURPOSE_0_2 = ("adaptive rounds: select a marginal (noisy max), measure it (Laplace); "
                      "at most this (nothing without a candidate marginal)")

@dataclass(frozen=True)
class Round:
    """One round: the chosen marginal (column indices) and its two epsilons (floats handed to
    OpenDP). Public: published in model.json so that anyone can redo the arithmetic."""

    columns: tuple[int, ...]
    epsilon_select: float
    epsilon_measure: float

    def to_public(self) -> dict:
        return {"columns": list(self.columns), "epsilon_select": self.epsilon_select,
                "epsilon_measure": self.epsilon_measure}


def round_split(budget: Fraction, measure_split: float) -> tuple[float, float]:
    """(eps_sel, eps_meas) of a round budget, exactly: eps_meas = float_down(dec(measure_split)
    budget), eps_sel = float_down(budget - binary(eps_meas)); binary sum <= budget."""
    meas = exact.float_down(exact.dec(measure_split) * budget)
    sel = exact.float_down(budget - exact.binary(meas))
    return sel, meas


def schedule(rest: Fraction, T: int):
    """The budget rule as a coroutine: ``send(doubled)`` after each round returns the next
    round's budget (a Fraction) and whether it is the last; starts with ``next()``.

    ``e = rest / T``; after a round, ``e *= 2`` if its update was not significant; a round at
    whose start less than ``2 e`` remains takes everything that remains (exactly) and is last."""
    e = rest / T
    spent = Fraction(0)
    doubled = False
    while True:
        if doubled:
            e *= 2
        remaining = rest - spent
        last = remaining < 2 * e
        budget = remaining if last else e
        doubled = yield budget, last
        spent += budget
        if last:
            return


def schedule_problems(rounds: Sequence[dict], epsilon: float, split_1way: float,
                      measure_split: float, rounds_per_column: int, d: int,
                      has_candidates: bool = True) -> list[str]:
    """Check published rounds against the budget rule (public arithmetic): each round's
    epsilons are :func:`round_split` of a budget the rule allows (the previous one or twice
    it; the remainder for the last round, and only there), the last round exhausts the rest,
    and the binary sum is at most the declared epsilon; there are rounds exactly when there are
    candidates (``has_candidates``). Which of the allowed budgets was taken depends on DP outputs
    (checked by the enclave replay, not here)."""
    out: list[str] = []
    eps_1 = exact.float_down(exact.dec(split_1way) * exact.dec(epsilon))
    rest = exact.dec(epsilon) - exact.binary(eps_1)
    if d < 2 or not has_candidates:
        return [] if not rounds else ["model.json: rounds are published, yet the generator has no "
                                      "candidate marginal to choose"]
    if not rounds:
        return ["model.json: no rounds, yet the generator always runs at least one when it has "
                "candidate marginals"]
    e = rest / (int(rounds_per_column) * d)
    spent = Fraction(0)
    for t, r in enumerate(rounds):
        pair = (r.get("epsilon_select"), r.get("epsilon_measure"))
        remaining = rest - spent
        allowed = [(remaining, True, c) if remaining < 2 * c else (c, False, c)
                   for c in ((e,) if t == 0 else (e, 2 * e))]
        hit = next((a for a in allowed if round_split(a[0], measure_split) == pair), None)
        if hit is None:
            return [f"model.json: rounds[{t}] epsilons {list(pair)} are not what the budget rule "
                    "allows at this round"]
        b, last, e = hit
        if last != (t == len(rounds) - 1):
            return [f"model.json: rounds[{t}] " + ("takes the remaining budget but is not the last round"
                                                   if last else "is the last round but does not take "
                                                   "the remaining budget")]
        spent += b
    total = exact.binary(eps_1) + sum(exact.binary(r["epsilon_select"]) + exact.binary(r["epsilon_measure"])
                                      for r in rounds)
    if total > exact.dec(epsilon):
        out.append("model.json: the rounds spend more than the generation epsilon")
    return out


# --------------------------------------------------------------------------------------------
# model
# --------------------------------------------------------------------------------------------

@dataclass
class AdaptiveModel(PrivSynModel):
    """PrivSyn's model (consistent marginals, GUM sampling) plus the public round log."""

    rounds: list[Round] = field(default_factory=list)
    epsilon_1way: float = 0.0

    def description(self, names: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """The rounds in order: chosen columns (and names) and their epsilons."""
        out = []
        for r in self.rounds:
            e = r.to_public()
            if names is not None:
                e["names"] = [names[c] for c in r.columns]
            out.append(e)
        return out


class _Working:
    """The working synthetic table (post-processing): its marginals are the round estimates."""

    def __init__(self, oneways: list[np.ndarray], dom: tuple[int, ...], m: int, n: int,
                 rng: np.random.Generator) -> None:
        self.dom, self.n, self.rng = dom, n, rng
        self.X = gum(oneways, [], dom, m, rng, rounds=0, alpha=1.0).T.copy()
        self.X = np.ascontiguousarray(self.X.astype(np.uint8 if max(dom) <= 256 else np.int32))
        self.targets: dict[tuple[int, ...], np.ndarray] = {}

    def estimate(self, r: tuple[int, ...]) -> np.ndarray:
        c = math.prod(self.dom[j] for j in r)
        counts = np.bincount(_keys(self.X, r, tuple(self.dom[j] for j in r)), minlength=c)
        return counts.astype(np.float64) * (self.n / self.X.shape[1])

    def update(self, r: tuple[int, ...], target: np.ndarray) -> None:
        self.targets[r] = target
        sizes = tuple(self.dom[j] for j in r)
        for a in UPDATE_STEPS:
            _gum_step(self.X, r, sizes, target, a, 0.5, self.rng)
        for s, p in self.targets.items():
            if s != r:
                _gum_step(self.X, s, tuple(self.dom[j] for j in s), p, UPDATE_STEPS[-1], 0.9, self.rng)


def _to_distribution(noisy: np.ndarray, n: float) -> np.ndarray:
    """A noisy count table -> a distribution (norm-sub to total n, as MST's 1-ways)."""
    return _to_total(np.asarray(noisy, dtype=np.float64).reshape(-1), n) / float(n)


# --------------------------------------------------------------------------------------------
# generator
# --------------------------------------------------------------------------------------------

def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _is_share(v: Any) -> bool:
    return not isinstance(v, bool) and isinstance(v, (int, float, np.integer, np.floating)) \
        and math.isfinite(float(v)) and 0 < float(v) < 1


def _check_workload(w: Any) -> list[list[list[int]]] | None:
    if w is None:
        return None
    ok = isinstance(w, (list, tuple)) and all(
        isinstance(g, (list, tuple)) and all(
            isinstance(s, (list, tuple)) and s and all(_is_int(x) and x >= 0 for x in s) for s in g)
        for g in w)
    if not ok:
        raise ValueError("aim_pure: workload must be a list of groups, each a list of non-empty "
                         f"lists of column indices, or null; got {w!r}")
    return [[sorted({int(x) for x in s}) for s in g] for g in w]


class AdaptiveMarginals:
    """Adaptive workload-aware marginals (pure DP, change-one neighbours, n public); see the
    module doc.

    Hyperparameters: ``rounds_per_column`` (T = this x d; AIM's is 16, the default 2),
    ``split_1way`` (share of epsilon for the 1-way marginals), ``measure_split`` (share of each
    round for measuring, AIM's 0.9), ``max_size`` and ``max_cells`` (largest candidate
    marginal), ``estimate_rows`` (records of the working table), ``gum_rounds``, ``gum_alpha``
    (post-processing), ``workload`` (set by the release from the spec's criteria).
    """

    type = "aim_pure"
    HYPERPARAMETERS = tuple(DEFAULTS)
    #: ``fit(rows, domain, rand, counts=...)`` fits on record types
    FITS_TYPES = True

    def __init__(self, epsilon: float, rounds_per_column: int = 2, split_1way: float = 0.1,
                 measure_split: float = 0.9, max_size: int = 3, max_cells: int = 100_000,
                 estimate_rows: int = 50_000, gum_rounds: int = 6, gum_alpha: float = 1.0,
                 workload: Any = None) -> None:
        if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) \
                or not math.isfinite(epsilon) or epsilon <= 0:
            raise ValueError(f"aim_pure: epsilon must be a finite number > 0, got {epsilon!r}")
        self.epsilon = float(epsilon)
        for name, v, lo, hi in (("rounds_per_column", rounds_per_column, 1, 1000),
                                ("max_size", max_size, 2, 6), ("max_cells", max_cells, 4, 1 << 24),
                                ("estimate_rows", estimate_rows, 100, 10_000_000),
                                ("gum_rounds", gum_rounds, 0, 1000)):
            if not _is_int(v) or not lo <= v <= hi:
                raise ValueError(f"aim_pure: {name} must be an integer in {lo}..{hi}, got {v!r}")
        for name, v in (("split_1way", split_1way), ("measure_split", measure_split)):
            if not _is_share(v):
                raise ValueError(f"aim_pure: {name} must be a number in (0, 1), got {v!r}")
        if isinstance(gum_alpha, bool) or not isinstance(gum_alpha, (int, float)) \
                or not math.isfinite(float(gum_alpha)) or not 0 < float(gum_alpha) <= 1:
            raise ValueError(f"aim_pure: gum_alpha must be a number in (0, 1], got {gum_alpha!r}")
        self.rounds_per_column, self.max_size = int(rounds_per_column), int(max_size)
        self.max_cells, self.estimate_rows = int(max_cells), int(estimate_rows)
        self.gum_rounds = int(gum_rounds)
        self.split_1way, self.measure_split = float(split_1way), float(measure_split)
        self.gum_alpha = float(gum_alpha)
        self.workload = _check_workload(workload)

    # -- protocol -------------------------------------------------------------------------
    @property
    def epsilon_1(self) -> float:
        """1-way budget: the largest float <= dec(split_1way) x dec(epsilon)."""
        return exact.float_down(exact.dec(self.split_1way) * exact.dec(self.epsilon))

    @property
    def epsilon_rounds(self) -> Fraction:
        """What the rounds may spend, exactly: dec(epsilon) - binary(epsilon_1)."""
        return exact.dec(self.epsilon) - exact.binary(self.epsilon_1)

    def hyperparameters(self) -> dict[str, Any]:
        """Constructor keyword arguments (round-trip)."""
        return {k: getattr(self, k) for k in DEFAULTS}

    def privacy_map(self, d_in: int) -> float:
        """Change-one distance -> epsilon: d_in * epsilon (pure DP, group privacy)."""
        if d_in < 0:
            raise ValueError(f"d_in must be >= 0, got {d_in}")
        return float(d_in) * self.epsilon

    def budget_parts(self) -> list[dict[str, Any]]:
        """The two parts: the 1-way marginals, and the rounds (selection + measurement, split
        adaptively; the exact per-round epsilons are in model.json and the transcript)."""
        return [{"purpose": "1-way marginals of all columns", "epsilon": self.epsilon_1},
                {"purpose": ROUNDS_PURPOSE, "epsilon": exact.float_down(self.epsilon_rounds)}]

    # -- fit ------------------------------------------------------------------------------
    def fit(self, codes: np.ndarray, domain: Sequence[int], rand: Randomness,
            counts: np.ndarray | None = None) -> AdaptiveModel:
        """1-ways (eps_1), then the rounds until the budget is spent; then consistency.
        ``counts``: ``codes`` are distinct records occurring that many times (the same counts,
        the same fit)."""
        codes, dom = check_codes(codes, domain)
        per_row = None if counts is None else record_weights(counts, codes.shape[0])
        n, d = (codes.shape[0] if per_row is None else int(counts.sum())), codes.shape[1]
        if not 1 <= n <= MAX_ROWS:
            raise ValueError(f"aim_pure: need 1..{MAX_ROWS} records, got {n}")
        cols = np.ascontiguousarray(codes.T)
        true_1 = np.concatenate([np.bincount(cols[j], weights=per_row, minlength=k)
                                 for j, k in enumerate(dom)]).astype(np.int64)
        noisy_flat = np.asarray(rand.laplace(true_1, sensitivity=oneway_sensitivity(d),
                                             epsilon=self.epsilon_1, integer=True,
                                             purpose="aim_pure: 1-way marginals"), dtype=np.float64)
        noisy_1 = np.split(noisy_flat, np.cumsum(dom)[:-1])
        oneways = [_to_distribution(v, n) for v in noisy_1]
        workload = self.workload if self.workload is not None else \
            [[[a, b] for a, b in itertools.combinations(range(d), 2)]]
        cands, weights = candidates(workload, dom, self.max_size, self.max_cells)
        true = {r: np.bincount(_keys(cols, r, tuple(dom[j] for j in r)), weights=per_row,
                               minlength=math.prod(dom[j] for j in r)).astype(np.int64) for r in cands}
        work = _Working(oneways, dom, min(n, self.estimate_rows), n, rand.rng("aim_pure: working table"))
        sums: dict[tuple[int, ...], tuple[np.ndarray, float]] = {}
        rounds: list[Round] = []
        plan = schedule(self.epsilon_rounds, self.rounds_per_column * d)
        step = next(plan) if cands else None
        while step is not None:
            budget, last = step
            eps_sel, eps_meas = round_split(budget, self.measure_split)
            b = COUNT_SENSITIVITY / eps_meas
            ests = [work.estimate(r) for r in cands]
            pens = [b * e.size for e in ests]
            scores = np.array([score(true[r], e, w, p) for r, e, w, p in zip(cands, ests, weights, pens)])
            sens = score_sensitivity(n, ests, weights, pens)
            pick = int(rand.exponential(scores, sensitivity=sens, epsilon=eps_sel,
                                        purpose=f"aim_pure: round {len(rounds)} selection"))
            r = cands[pick]
            y = np.asarray(rand.laplace(true[r], sensitivity=COUNT_SENSITIVITY, epsilon=eps_meas,
                                        integer=True, purpose=f"aim_pure: round {len(rounds)} marginal {list(r)}"),
                           dtype=np.float64)
            rounds.append(Round(r, eps_sel, eps_meas))
            inv = 1.0 / (2.0 * b * b)
            acc, w_sum = sums.get(r, (np.zeros(y.size), 0.0))
            sums[r] = (acc + y * inv, w_sum + inv)
            before = ests[pick]
            work.update(r, _to_distribution(sums[r][0] / sums[r][1], n))
            moved = float(np.abs(work.estimate(r) - before).sum())
            try:
                step = None if last else plan.send(moved <= b * before.size)
            except StopIteration:
                step = None
        del true, true_1, cols  # nothing below reads the data
        return self._model(dom, n, noisy_1, sums, rounds)

    def _model(self, dom: tuple[int, ...], n: int, noisy_1: list[np.ndarray],
               sums: dict[tuple[int, ...], tuple[np.ndarray, float]], rounds: list[Round]) -> AdaptiveModel:
        """Consistency over the 1-ways and the measured marginals (post-processing)."""
        d = len(dom)
        b1 = oneway_sensitivity(d) / self.epsilon_1
        ones = [(j,) for j in range(d) if dom[j] >= 2]
        attrs = ones + sorted(sums, key=lambda r: (len(r), r))
        noisy = [noisy_1[j] for (j,) in ones] + [
            (sums[r][0] / sums[r][1]).reshape([dom[j] for j in r]) for r in attrs[len(ones):]]
        # per-cell variance: 2 b1^2 for a 1-way, 1 / sum(1/v) for a combined marginal; passed
        # to consistent_tables as Laplace-equivalent scales sqrt(var / 2)
        scales = [b1] * len(ones) + [math.sqrt(0.5 / sums[r][1]) for r in attrs[len(ones):]]
        tabs = consistent_tables(noisy, attrs, scales, float(n), CONSISTENCY_ROUNDS)
        oneways: list[np.ndarray] = [np.ones(1)] * d
        margs = []
        for a, t in zip(attrs, tabs):
            p = _distribution(t)
            if len(a) == 1:
                oneways[a[0]] = p
            else:
                margs.append((a, p))
        return AdaptiveModel(domain=dom, oneways=oneways, marginals=margs, gum_rounds=self.gum_rounds,
                             gum_alpha=self.gum_alpha, selected=[], rounds=list(rounds),
                             epsilon_1way=self.epsilon_1)


def grid_problems(grid: dict) -> list[str]:
    """Problems of an ``aim_pure`` grid (spec validation): every value of every hyperparameter
    must be accepted by the constructor."""
    return constructor_grid_problems(AdaptiveMarginals, DEFAULTS, grid)
