"""Bin edges chosen under DP: k - 1 quantiles of a numeric column, one OpenDP draw each.

A spec's alternative ``dp_edges: {bins, epsilon, step}`` (docs/spec.md) asks for them: the
candidates are the public grid :func:`candidate_grid` of its clip range, the release draws the
edges after the records policy's count and before the selection
(:mod:`dpbundle.release.scheme.edges`), spec.json carries them (:func:`resolved_document`), the
audit checks them against the grid and the budget (audit/checks_budget.py) and replays the draws
in the enclave (audit/replay.py).

The score (OpenDP's ``make_quantile_score_candidates``). The values ``x`` of a column (clipped to
its public range), ``n = |x|``, a quantile ``alpha`` read as the fraction ``num / den`` by
:func:`alpha_fraction` (OpenDP's rule for a domain of unknown size), and a public, strictly
increasing list of candidates. For a candidate ``c``, with ``L(c) = #(x < c)``, ``E(c) = #(x = c)``
and ``G(c) = #(x > c) = n - L - E``:

    s_c(x) = | den L(c) - num (n - E(c)) | = | (den - num) L(c) - num G(c) |

(0 when c sits at the alpha quantile; lower is better, so the draw maximises ``-s``).

Sensitivity (derivation). Neighbouring tables (``mechanisms/records.py``): one value replaced
by another, or one value added or removed (a record moved across a raw constraint). Write ``T =
(den - num) L - num G``; ``s_c = |T|`` and ``|.|`` is 1-Lipschitz.

* replace ``a`` by ``b``: ``L`` and ``G`` each move by at most 1, and in the worst case (``a < c
  < b``) ``L`` falls by 1 while ``G`` rises by 1: ``|dT| <= (den - num) + num = den``;
* add or remove ``v``: ``v < c`` moves ``T`` by ``den - num``, ``v > c`` by ``num``, ``v = c``
  not at all: ``|dT| <= max(num, den - num) <= den``.

So ``max_c |s_c(x) - s_c(x')| <= den`` for every alpha, the scores of different candidates moving
in opposite directions (not monotonic). The draw is OpenDP's report-noisy-max under
``max_divergence`` through ``Randomness.exponential(-s, sensitivity=den, epsilon=eps_j)``
(scale ``2 den / eps_j``): ``eps_j``-DP. (OpenDP's own ``make_private_quantile`` is not used: its
domain either knows n, which is private under the records policy ``dp_count``, or pays for
add/remove neighbours only; and it does not expose the scores the enclave replay recomputes.)

The neighbours are those of the plausible records (after the raw constraints, before the records
policy's resize): the edges are drawn on them, so the resize does not enter. Candidates should lie
strictly inside the column's public range (a candidate at its minimum would make an empty bin).

k bins (:func:`dp_edges`): the inner edges ``q_1 < ... < q_{k-1}`` are drawn one after the other,
``q_j`` at ``alpha = j / k`` among the candidates above ``q_{j-1}`` that leave room for the edges
still to come (the set's lower end moves up past each edge drawn, its upper end by one a draw:
it depends only on the earlier edges, k and the number of candidates), each at ``eps_j = exact.even_split(epsilon, k - 1)``: a candidate set depends only
on earlier DP outputs (adaptive sequential composition), so the k - 1 draws together are
``epsilon``-DP (``(k - 1) binary(eps_j) <= dec(epsilon)`` exactly), and every run gives exactly k
bins whose edges are sorted and distinct.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Sequence

import numpy as np

from . import exact

__all__ = ["alpha_fraction", "quantile_scores", "score_sensitivity", "dp_edges", "candidate_grid",
           "full_edges", "resolved_document", "declared_document", "drawn_edges", "DEN_APPROX",
           "MAX_EXACT", "MAX_VALUES", "MAX_CANDIDATES", "PURPOSE", "MECHANISM"]

#: OpenDP's denominator for an alpha whose binary fraction is not exact below it (unsized domain).
DEN_APPROX = 10_000
#: Scores are recorded in the transcript as JSON floats: they must stay exact (< 2^53).
MAX_EXACT = 1 << 53
#: At most this many values (a public bound, far above any registry): den * n then stays below
#: MAX_EXACT for every den up to DEN_APPROX (10^4 * 2^36 < 2^53).
MAX_VALUES = 1 << 36
#: At most this many candidates per alternative (each draw records its scores in the transcript).
MAX_CANDIDATES = 10_000
#: budget.json's ``edges.mechanism``: how every edge is drawn (the audit compares the text).
MECHANISM = ("OpenDP report-noisy-max (make_noisy_max, exponential noise) on the quantile score of OpenDP's "
             "make_quantile_score_candidates (computed by dpbundle, exactly): edge j of k at quantile j/k, "
             "one draw per inner edge, among the candidates above the previous edge that leave room for the "
             "edges still to come; sensitivity den (the quantile's denominator)")
#: The transcript purpose of the draws of one alternative: ``PURPOSE.format(column, alternative)``
#: followed by `` j/k`` (:func:`dp_edges`).
PURPOSE = "edges {} {}"


def _decimal(x: Any) -> Fraction:
    """A spec number as the decimal it was written as (0.1 -> 1/10)."""
    return exact.dec(x) if not isinstance(x, int) else Fraction(x)


def candidate_grid(clip: Sequence[float], step: float | None = None) -> list[float]:
    """The public candidates of a ``dp_edges`` alternative: ``clip[0] + i * step`` for ``i >= 1``
    up to ``clip[1]`` included (``step`` default 1), computed on the decimals as written (0.1 steps
    do not drift) and given as floats. ValueError beyond :data:`MAX_CANDIDATES`."""
    lo, hi = _decimal(clip[0]), _decimal(clip[1])
    h = _decimal(1 if step is None else step)
    if h <= 0 or hi <= lo:
        raise ValueError("the clip range needs max > min and the step must be positive")
    count = int((hi - lo) // h)
    if count > MAX_CANDIDATES:
        raise ValueError(f"{count:,} candidates, more than the limit of {MAX_CANDIDATES:,}: take a larger step")
    return [float(lo + i * h) for i in range(1, count + 1)]


def full_edges(clip: Sequence[float], step: float | None, inner: Sequence[float]) -> list[float]:
    """All bin edges of a ``dp_edges`` alternative from its drawn inner edges: ``clip[0]``, the
    inner edges, and ``clip[1] + min(step, 1)`` (so that the last bin holds the clip maximum)."""
    h = _decimal(1 if step is None else step)
    return [float(clip[0]), *(float(e) for e in inner), float(_decimal(clip[1]) + min(h, Fraction(1)))]


def drawn_edges(doc: dict) -> dict[tuple[str, str], list]:
    """``{(column, alternative): edges}`` of every ``dp_edges`` alternative of a spec document
    that carries its drawn ``edges`` (a resolved spec, spec.json's spec)."""
    out: dict[tuple[str, str], list] = {}
    for col in doc.get("columns") or []:
        for alt in col.get("alternatives") or []:
            if isinstance(alt, dict) and "dp_edges" in alt and "edges" in alt:
                out[(col.get("name"), alt.get("id"))] = alt["edges"]
    return out


def resolved_document(doc: dict, drawn: dict[tuple[str, str], Sequence[float]]) -> dict:
    """A copy of spec document ``doc`` whose ``dp_edges`` alternatives carry their drawn
    ``edges`` (``drawn``: ``{(column, alternative): all edges}``, one entry for each of them)."""
    import copy

    out = copy.deepcopy(doc)
    for col in out.get("columns") or []:
        for alt in col.get("alternatives") or []:
            if "dp_edges" in alt:
                alt["edges"] = [float(e) for e in drawn[(col["name"], alt["id"])]]
    return out


def declared_document(doc: dict) -> dict:
    """A copy of ``doc`` without the drawn ``edges`` of its ``dp_edges`` alternatives: the spec
    as declared (whose SHA-256 the run binding, the ledger and a pre-registration hold)."""
    import copy

    out = copy.deepcopy(doc)
    for col in out.get("columns") or []:
        for alt in col.get("alternatives") or [] if isinstance(col, dict) else []:
            if isinstance(alt, dict) and "dp_edges" in alt:
                alt.pop("edges", None)
    return out


def alpha_fraction(alpha: float) -> tuple[int, int]:
    """``(num, den)`` of ``alpha`` as OpenDP reads it for a domain of unknown size: the exact
    binary fraction of the float when its denominator is below :data:`DEN_APPROX`, else
    ``(floor(alpha * DEN_APPROX), DEN_APPROX)``, the product in float64 (OpenDP truncates: 2/3
    is 6666/10000, and 0.57 is 5699/10000; tests/test_i39_dp_edges.py compares)."""
    if not 0.0 <= float(alpha) <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha!r}")
    exact_fraction = Fraction(float(alpha))
    if exact_fraction.denominator < DEN_APPROX:
        return exact_fraction.numerator, exact_fraction.denominator
    return int(math.floor(float(alpha) * DEN_APPROX)), DEN_APPROX


def score_sensitivity(alpha: tuple[int, int]) -> int:
    """The score's sensitivity under the project's neighbours (module docstring): ``den``."""
    return int(alpha[1])


def _cumulative(values: Any, counts: Any) -> tuple[np.ndarray, np.ndarray]:
    """(values sorted, cumulative counts with a leading 0): what every score needs, sorted once."""
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    w = np.ones(v.size, dtype=np.int64) if counts is None else np.asarray(counts, dtype=np.int64).reshape(-1)
    if w.size != v.size or np.any(w < 0) or not np.all(np.isfinite(v)):
        raise ValueError("one non-negative count per finite value is needed")
    order = np.argsort(v, kind="stable")
    cum = np.concatenate([[0], np.cumsum(w[order])])
    if cum[-1] > MAX_VALUES:
        raise ValueError(f"more than {MAX_VALUES:,} values: the scores would not be exact")
    return v[order], cum


def _scores(v: np.ndarray, cum: np.ndarray, candidates: Sequence[float], alpha: tuple[int, int]) -> np.ndarray:
    num, den = (int(a) for a in alpha)
    if not 0 <= num <= den <= DEN_APPROX:
        raise ValueError(f"alpha {num}/{den} is not a fraction OpenDP uses")
    cands = np.asarray(candidates, dtype=np.float64)
    if cands.size == 0 or np.any(np.diff(cands) <= 0) or not np.all(np.isfinite(cands)):
        raise ValueError("candidates must be finite and strictly increasing")
    n = int(cum[-1])
    below = cum[np.searchsorted(v, cands, side="left")]
    equal = cum[np.searchsorted(v, cands, side="right")] - below
    return np.abs(den * below - num * (n - equal)).astype(np.int64)


def quantile_scores(values: Any, candidates: Sequence[float], alpha: tuple[int, int],
                    counts: Any = None) -> np.ndarray:
    """``s_c`` (module docstring) of every candidate, exact int64: ``values`` the column's values
    (or distinct values occurring ``counts`` times), ``candidates`` strictly increasing."""
    return _scores(*_cumulative(values, counts), candidates, alpha)


def dp_edges(values: Any, candidates: Sequence[float], bins: int, epsilon: float, rand: Any, *,
             purpose: str, counts: Any = None) -> list[float]:
    """The ``bins - 1`` inner edges (module docstring), drawn through ``rand.exponential`` with
    purposes ``f"{purpose} {j}/{bins}"``; ``candidates`` public and strictly increasing, at least
    ``bins - 1`` of them; ``epsilon`` the declared total of the draws."""
    k = int(bins)
    cands = [float(c) for c in candidates]
    if k < 2:
        raise ValueError(f"bins must be at least 2, got {bins!r}")
    if len(cands) < k - 1:
        raise ValueError(f"{len(cands)} candidates for {k - 1} inner edges")
    eps_j = exact.even_split(epsilon, k - 1)
    v, cum = _cumulative(values, counts)
    edges: list[float] = []
    low = 0                                  # index of the first candidate still allowed
    for j in range(1, k):
        allowed = cands[low:len(cands) - (k - 1 - j)]
        alpha = alpha_fraction(j / k)
        scores = _scores(v, cum, allowed, alpha)
        pick = int(rand.exponential(-scores.astype(np.float64), sensitivity=float(score_sensitivity(alpha)),
                                    epsilon=eps_j, purpose=f"{purpose} {j}/{k}"))
        edges.append(allowed[pick])
        low += pick + 1
    return edges
