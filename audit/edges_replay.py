"""The enclave replay of the bins drawn under DP (``dp_edges``): from the private registry, the
audit's own quantile scores, the recorded draws replayed one by one (their scores must be the
recorded ones exactly, their sensitivity, epsilon and scale those budget.json states), and the
edges they give must be spec.json's.

The transcript's head (the records before the first mark) holds, in this order, the records
policy's DP count and resize seed (``dp_count``) and then the edges' draws, purposes ``edges
COLUMN ALTERNATIVE j/k``. The score of candidate c at quantile num/den over the values x (the
plausible records', derived and clipped; OpenDP's make_quantile_score_candidates) is
``|den #(x < c) - num (n - #(x = c))|``.
"""
from __future__ import annotations

import numpy as np

from .edges_check import grid_of, quantile_fraction, spec_edges
from .private_data import PrivateTable, derived_values, special_limits

__all__ = ["split_head", "replay_edges", "EdgesMismatch"]

_PREFIX = "edges "


class EdgesMismatch(ValueError):
    """The replayed edges are not spec.json's (the message names the column, never a value)."""


def split_head(head: list[dict]) -> tuple[list[dict], list[dict]]:
    """(the records policy's records, the edges' draws) of the records before the first mark."""
    first = next((i for i, rec in enumerate(head) if rec.get("kind") == "mark"), len(head))
    start = next((i for i, rec in enumerate(head[:first]) if str(rec.get("purpose", "")).startswith(_PREFIX)),
                 first)
    return head[:start], head[start:first]


def _scores(v: np.ndarray, cum: np.ndarray, cands: list[float], num: int, den: int) -> np.ndarray:
    n = int(cum[-1])
    c = np.asarray(cands, dtype=np.float64)
    lt = cum[np.searchsorted(v, c, side="left")]
    eq = cum[np.searchsorted(v, c, side="right")] - lt
    return np.abs(den * lt - num * (n - eq)).astype(np.float64)


def replay_edges(draws: list[dict], table: PrivateTable, spec: dict) -> int:
    """Replay every ``dp_edges`` alternative's draws (ReplayMismatch from the replay when a draw
    differs; :class:`EdgesMismatch` when the edges are not spec.json's). Returns the number of
    alternatives replayed."""
    from dpbundle.mechanisms import exact
    from dpbundle.mechanisms.noise import Randomness

    rand = Randomness.replay(draws)
    weights = np.bincount(table.record_rows(), minlength=len(next(iter(table.values.values()))))
    found = spec_edges(spec)
    cols = {c.get("name"): c for c in spec.get("columns") or []}
    limits = special_limits(spec)
    for column, alt_id, alt in found:
        src = cols[column]["source"]
        x = np.clip(derived_values(table, src), float(alt["clip"][0]), float(alt["clip"][1]))
        w = weights
        if src["column"] in limits:        # special values have no number: not scored
            keep = table.values[src["column"]] <= limits[src["column"]]
            x, w = x[keep], weights[keep]
        order = np.argsort(x, kind="stable")
        v, cum = x[order], np.concatenate([[0], np.cumsum(w[order])])
        grid, k = grid_of(alt), int(alt["dp_edges"]["bins"])
        eps_j = exact.even_split(alt["dp_edges"]["epsilon"], k - 1)
        inner, low = [], 0
        for j in range(1, k):
            allowed = grid[low:len(grid) - (k - 1 - j)]
            num, den = quantile_fraction(j, k)
            pick = int(rand.exponential(-_scores(v, cum, allowed, num, den), sensitivity=float(den),
                                        epsilon=eps_j, purpose=f"{_PREFIX}{column} {alt_id} {j}/{k}"))
            inner.append(allowed[pick])
            low += pick + 1
        if [float(e) for e in alt.get("edges", [])[1:-1]] != inner:
            raise EdgesMismatch(f"the edges of {column} ({alt_id}) replayed from the registry differ "
                                "from spec.json's")
    rand.check_finished()
    return len(found)
