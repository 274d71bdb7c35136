"""The audit of bins drawn under DP (the spec's ``dp_edges`` alternatives), from public files.

For each ``dp_edges`` alternative of spec.json's spec (which carries the drawn ``edges``) the
audit recomputes, with its own code, what the release must have done (mechanisms/edges.py states
the derivation): the candidates ``clip[0] + i step`` inside the clip range, the edges (``clip[0]``,
k - 1 strictly increasing candidates, ``clip[1] + min(step, 1)``), and each draw's quantile
``j / k`` as OpenDP reads it (``num / den``), its sensitivity ``den``, its epsilon (the
alternative's split evenly, the k - 1 floats adding up to at most the declared decimal) and its
noise scale (the smallest OpenDP calibrates for them). budget.json's ``edges`` block must say
exactly that, and its epsilon enters the total. Whether the edges are the ones the registry gives
is the enclave replay's question (audit/replay.py): a key holder who edits an edge to another
candidate passes this check and fails the replay.
"""
from __future__ import annotations

import json
import math
from fractions import Fraction

from dpbundle.mechanisms import exact

from .report import CheckResult

__all__ = ["spec_edges", "edges_epsilon", "check_edges", "declared_spec", "quantile_fraction",
           "grid_of"]

_DEN = 10_000          # OpenDP's denominator for an alpha not exact in binary below it


def spec_edges(spec: dict) -> list[tuple[str, str, dict]]:
    """(column, alternative id, alternative) of every ``dp_edges`` alternative of ``spec``."""
    out = []
    for col in spec.get("columns") or []:
        for alt in (col.get("alternatives") or []) if isinstance(col, dict) else []:
            if isinstance(alt, dict) and "dp_edges" in alt:
                out.append((col.get("name"), alt.get("id"), alt))
    return out


def declared_spec(spec: dict) -> dict:
    """``spec`` without the drawn ``edges`` of its ``dp_edges`` alternatives: the spec as declared,
    whose canonical SHA-256 the run binding and a pre-registration hold."""
    from dpbundle.mechanisms.edges import declared_document    # the one form the release hashes

    return declared_document(spec) if spec_edges(spec) else spec


def edges_epsilon(spec: dict) -> Fraction:
    """The total epsilon of the spec's ``dp_edges`` draws, exactly."""
    return exact.total((alt.get("dp_edges") or {}).get("epsilon", 0) for _, _, alt in spec_edges(spec))


def quantile_fraction(j: int, k: int) -> tuple[int, int]:
    """``j / k`` as OpenDP reads a quantile for a domain of unknown size: the exact binary fraction
    of the float when its denominator is below 10,000, else floor(alpha x 10,000) / 10,000."""
    q = Fraction(j / k)
    if q.denominator < _DEN:
        return q.numerator, q.denominator
    return math.floor((j / k) * _DEN), _DEN


def _dec(x) -> Fraction:
    return Fraction(x) if isinstance(x, int) else exact.dec(x)


def grid_of(alt: dict) -> list[float]:
    """The candidates of a ``dp_edges`` alternative (its clip range and step, as decimals)."""
    lo, hi = (_dec(v) for v in alt["clip"])
    step = _dec(alt["dp_edges"].get("step", 1))
    count = int((hi - lo) // step) if step > 0 and hi > lo else 0
    if count > 10_000:
        raise ValueError(f"{count:,} candidates, more than 10,000")
    return [float(lo + i * step) for i in range(1, count + 1)]


def check_edges(budget: dict, spec: dict, r: CheckResult) -> Fraction:
    """budget.json's ``edges`` against the spec's ``dp_edges`` alternatives (module doc); returns
    the epsilon that enters the total (the spec's)."""
    W = "budget.json"
    found = spec_edges(spec)
    block = budget.get("edges")
    if not found:
        if block is not None:
            r.fail(f"{W}: an edges block, but the spec has no dp_edges alternative")
        return Fraction(0)
    if not isinstance(block, dict) or not isinstance(block.get("alternatives"), list):
        r.fail(f"{W}: no edges block, but the spec draws the bins of {len(found)} alternative(s) under DP")
        return edges_epsilon(spec)
    want = edges_epsilon(spec)
    if not _number(block.get("epsilon")) or exact.dec(block["epsilon"]) != want:
        r.fail(f"{W}: edges.epsilon {block.get('epsilon')!r} is not the spec's dp_edges total {exact.show(want)}")
    from dpbundle.mechanisms.edges import MECHANISM

    if block.get("mechanism") != MECHANISM:
        r.fail(f"{W}: edges.mechanism is not the statement of dpbundle's draws ({MECHANISM!r})")
    entries = block["alternatives"]
    if [(e.get("column"), e.get("alternative")) if isinstance(e, dict) else None for e in entries] != \
            [(c, a) for c, a, _ in found]:
        r.fail(f"{W}: edges.alternatives are not the spec's dp_edges alternatives in spec order")
        return want
    for (column, alt_id, alt), entry in zip(found, entries):
        _check_alternative(f"{W}: edges of {column} ({alt_id})", alt, entry, r)
    return want


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _check_alternative(w: str, alt: dict, entry: dict, r: CheckResult) -> None:
    d = alt.get("dp_edges") if isinstance(alt.get("dp_edges"), dict) else {}
    k, eps = d.get("bins"), d.get("epsilon")
    if not isinstance(k, int) or not _number(eps) or k < 2:
        r.fail(f"{w}: the spec's dp_edges needs whole bins >= 2 and an epsilon")
        return
    for key, value in (("bins", k), ("epsilon", eps), ("step", d.get("step", 1))):
        if not _number(entry.get(key)) or exact.dec(entry[key]) != _dec(value):
            r.fail(f"{w}: {key} {entry.get(key)!r} is not the spec's {value!r}")
    try:
        grid = grid_of(alt)
    except (ValueError, TypeError, KeyError) as exc:
        r.fail(f"{w}: the candidates cannot be listed ({exc})")
        return
    if entry.get("candidates") != len(grid):
        r.fail(f"{w}: {entry.get('candidates')!r} candidates, but the clip range and step give {len(grid)}")
    _check_drawn(w, alt, entry, grid, k, r)
    _check_draws(w, entry, k, eps, r)


def _check_drawn(w: str, alt: dict, entry: dict, grid: list[float], k: int, r: CheckResult) -> None:
    """spec.json's edges (= budget.json's): the clip minimum, k - 1 increasing candidates, the
    clip maximum plus min(step, 1)."""
    edges = alt.get("edges")
    if json.dumps(entry.get("edges")) != json.dumps(edges):        # the same numbers, written alike
        r.fail(f"{w}: budget.json's edges differ from spec.json's")
    if isinstance(edges, list) and not all(isinstance(e, float) for e in edges):
        r.fail(f"{w}: spec.json's edges must be written as the release writes them, JSON floats (1.0, "
               "not 1): one run, one byte sequence")
    if not isinstance(edges, list) or len(edges) != k + 1 or not all(_number(e) for e in edges):
        r.fail(f"{w}: spec.json has {len(edges) if isinstance(edges, list) else 'no'} edges for "
               f"{k} bins (the release draws exactly k - 1 inner edges)")
        return
    lo, hi = (_dec(v) for v in alt["clip"])
    last = float(hi + min(_dec(alt["dp_edges"].get("step", 1)), Fraction(1)))
    if edges[0] != float(lo) or edges[-1] != last:
        r.fail(f"{w}: the first and last edges must be the clip minimum {float(lo):g} and "
               f"{last:g} (the clip maximum + min(step, 1))")
    inner, allowed = edges[1:-1], set(grid)
    if any(e not in allowed for e in inner):
        r.fail(f"{w}: an inner edge is not one of the candidates clip[0] + i x step")
    if any(b <= a for a, b in zip(inner, inner[1:])):
        r.fail(f"{w}: the inner edges are not strictly increasing")


def _check_draws(w: str, entry: dict, k: int, eps, r: CheckResult) -> None:
    """One draw per inner edge: quantile j/k (OpenDP's fraction), sensitivity den, epsilon the
    declared one split evenly (k - 1 floats within it), the scale OpenDP calibrates."""
    from dpbundle.mechanisms.noise import calibrated_exponential_scale

    draws = entry.get("draws")
    if not isinstance(draws, list) or len(draws) != k - 1:
        r.fail(f"{w}: {len(draws) if isinstance(draws, list) else 'no'} draws for {k - 1} inner edges")
        return
    eps_j = exact.even_split(eps, k - 1)
    if (k - 1) * exact.binary(eps_j) > exact.dec(eps):
        r.fail(f"{w}: the draws' epsilons add up to more than {eps!r}")
    for j, draw in enumerate(draws, start=1):
        where = f"{w}, draw {j}/{k}"
        num, den = quantile_fraction(j, k)
        if not isinstance(draw, dict) or draw.get("quantile") != [num, den]:
            r.fail(f"{where}: quantile {draw.get('quantile') if isinstance(draw, dict) else draw!r} is not "
                   f"[{num}, {den}] (j/k as OpenDP reads it)")
            continue
        if draw.get("sensitivity") != den:
            r.fail(f"{where}: sensitivity {draw.get('sensitivity')!r} is not den = {den} (the quantile "
                   "score moves by at most den when one record changes)")
        if draw.get("epsilon") != eps_j:
            r.fail(f"{where}: epsilon {draw.get('epsilon')!r} is not {eps!r} split over {k - 1} draws = {eps_j!r}")
        want = calibrated_exponential_scale(den, eps_j)
        if not _number(draw.get("noise_scale")) or draw["noise_scale"] != want:
            r.fail(f"{where}: noise scale {draw.get('noise_scale')!r} is not {want!r} (2 x {den} / "
                   f"{eps_j!r}, as OpenDP calibrates it)")
