"""Noise against thresholds, before any private run: which acceptance criteria would give only
weak evidence (``spec validate``, ``sweep``).

A criterion released with Laplace noise of scale b = Delta / epsilon (standard deviation
sqrt(2) b) passes when its noisy value is below the threshold t. Its evidence is *weak* when the
noise std is at least half of (t - the metric's smallest value) -- the rule the datasheet uses
(:mod:`dpbundle.templates.datasheet.evidence`, which also states the error a check rules out:
t + b ln 10 at 95%). Delta depends on the data:

- ``kway_marginals``, ``faithfulness``: 1/n; ``regression_mae_difference``: 2 (U - L)/n;
  ``classification`` with ``report: accuracy``: 2/n. Weak exactly when n <= n* =
  2 sqrt(2) c / (epsilon (t - floor)) with Delta = c/n.
- ``conditional_means``: (U - L)/m, m the smallest group after the resize margin (at most n):
  weak when m <= m* = 2 sqrt(2) (U - L) / (epsilon t).
- ``smoothed_ratio``: max(1/s', c^2/(c + s')), s' the smallest smoothed synthetic count: weak
  when s' <= s*.
- fits (``regression_coefficients``, ``classification`` coefficients) and ``quantile`` put the
  noise inside a fit or on a choice, not on the value: no rule here (the datasheet estimates
  their effect from the released data).

Without data (``spec validate SPEC``) the rules are printed as conditions on n, the smallest
group or the smallest count. With data (``spec validate --data``, inside the enclave: private;
``sweep``, on public data), :func:`noise_warnings_on_data` computes each criterion's sensitivity
exactly as a release would, with the transformed data standing in for a candidate (a candidate
that passes resembles it), under every binning of the spec (the first ``limit``), and warns
where the evidence would be weak.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from dpbundle.templates.datasheet.evidence import LAPLACE_Z, WEAK_STD_SHARE

__all__ = ["NoiseRule", "noise_rules", "noise_notes", "noise_warnings_on_data", "BINNING_LIMIT"]

BINNING_LIMIT = 64
_SQRT2 = math.sqrt(2.0)


@dataclass(frozen=True)
class NoiseRule:
    """When one criterion's evidence is weak: ``size`` <= ``critical`` (``size``: "n", "group" or
    "count"); ``critical`` None: no rule (noise not on the value)."""

    index: int
    id: str
    type: str
    threshold: float
    floor: float
    epsilon: float
    size: str | None
    critical: float | None


def _criterion(entry: dict):
    """(criterion, threshold, metric floor) of an acceptance entry (Nones when it has none)."""
    from dpbundle.mechanisms.criteria import CriterionError, make_criterion

    try:
        c = make_criterion(entry)
        t = c.threshold()[0]
        floor = c.metric_range()[0]
    except (CriterionError, KeyError, TypeError, ValueError):
        return None, None, None
    return c, float(t), float(floor)


def noise_rules(spec) -> list[NoiseRule]:
    """The weak-evidence rule of every criterion of a validated spec (a loaded Spec)."""
    out = []
    for i, crit in enumerate(spec.model.acceptance):
        c, t, floor = _criterion(crit.to_document())
        if c is None or not t > floor:
            continue
        span, eps = t - floor, float(c.epsilon)
        share = WEAK_STD_SHARE * span          # weak when std >= share
        size, critical = None, None
        if c.mechanism == "laplace":
            typ = c.type
            if typ in ("kway_marginals", "faithfulness"):
                size, critical = "n", _SQRT2 * 1.0 / (eps * share)
            elif typ == "regression_mae_difference":
                size, critical = "n", _SQRT2 * 2.0 * (c.U - c.L) / (eps * share)
            elif typ == "classification":
                size, critical = "n", _SQRT2 * 2.0 / (eps * share)
            elif typ == "conditional_means":
                size, critical = "group", _SQRT2 * (c.U - c.L) / (eps * share)
            elif typ == "smoothed_ratio":
                d = eps * share / _SQRT2           # weak when Delta(s') >= d
                size, critical = "count", max(1.0 / d, c.clip * c.clip / d - c.clip)
        out.append(NoiseRule(i, c.id, c.type, t, floor, eps, size, critical))
    return out


def _count(x: float) -> str:
    return f"{math.floor(x):,}"


def noise_notes(spec) -> list[str]:
    """Without data: one line per criterion with a rule, the condition under which its evidence
    is weak (noise std at least half the threshold). ``spec``: a loaded Spec."""
    lines = []
    for r in noise_rules(spec):
        if r.critical is None:
            continue
        where = f"acceptance[{r.index}] ({r.id})"
        if r.size == "n":
            cond = f"n is {_count(r.critical)} records or fewer"
        elif r.size == "group":
            cond = (f"its smallest group holds {_count(r.critical)} records or fewer "
                    f"(after the resize margin)")
        else:
            cond = (f"some value of some column has {_count(r.critical)} or fewer synthetic records "
                    f"(smoothed)")
        lines.append(f"{where}: weak evidence when {cond}")
    return lines


def _binnings(spec, limit: int) -> tuple[list[dict], int]:
    names = spec.model.column_names
    alts = [c.alternative_ids for c in spec.model.columns]
    total = math.prod(len(a) for a in alts)
    chosen = [dict(zip(names, choice)) for choice in itertools.islice(itertools.product(*alts), limit)]
    return chosen, total


def _names_in(obj) -> list[str]:
    """Every string in a criterion entry (its target, groupings, features, columns)."""
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [x for v in obj.values() for x in _names_in(v)]
    if isinstance(obj, list):
        return [x for v in obj for x in _names_in(v)]
    return []


def _fmt(x: float) -> str:
    from dpbundle.templates.datasheet.numbers import plain

    return plain(x, sig=3)


def noise_warnings_on_data(spec, prepared, limit: int = BINNING_LIMIT) -> list[str]:
    """Warnings for the criteria whose noise std, computed on ``prepared`` (transformed under
    each binning, standing in for a candidate), is at least half their threshold; the worst
    binning is named. ``spec``: a loaded Spec; ``prepared``: release.prepare's Prepared."""
    from dpbundle.mechanisms.criteria import EvalContext

    from dpbundle.release.data.transform import transform

    rules = {r.id: r for r in noise_rules(spec) if r.critical is not None}
    if not rules or getattr(prepared, "n", 0) <= 0:
        return []
    entries = [c.to_document() for c in spec.model.acceptance if c.id in rules]
    binnings, total = _binnings(spec, limit)
    worst: dict[str, tuple[float, float, float, dict]] = {}
    for columns in binnings:
        try:
            real = transform(prepared, spec, {"columns": columns})
        except Exception:  # noqa: BLE001 - a binning that cannot be built is reported elsewhere
            continue
        ctx = EvalContext(real=real, synth=real, spec=spec.evaluation_document, alternatives=dict(columns))
        for entry in entries:
            c, t, floor = _criterion(entry)
            if c is None:
                continue
            try:
                sens, _ = c.sensitivity(ctx)
            except Exception:  # noqa: BLE001 - no warning rather than a crash in a warning
                continue
            scale = float(sens) / float(c.epsilon)
            ratio = _SQRT2 * scale / (t - floor)
            if c.id not in worst or ratio > worst[c.id][0]:
                worst[c.id] = (ratio, scale, t, columns)
    lines = []
    for entry in entries:
        cid = entry["id"]
        if cid not in worst:
            continue
        ratio, scale, t, columns = worst[cid]
        if ratio < WEAK_STD_SHARE:
            continue
        r = rules[cid]
        named = set(_names_in(entry))
        varying = {k: v for k, v in columns.items() if (k in named or r.type != "conditional_means")
                   and len(spec.model.column(k).alternatives) > 1}
        binning = ", ".join(f"{k}={v}" for k, v in varying.items())
        lines.append(
            f"acceptance[{r.index}] ({cid}): noise std {_fmt(_SQRT2 * scale)} is at least half the threshold "
            f"{_fmt(t)}{' above ' + _fmt(r.floor) if r.floor else ''}"
            f"{' (binning ' + binning + ')' if binning else ''}: a pass would be weak evidence; only a true "
            f"value above {_fmt(t + scale * LAPLACE_Z)} would fail with probability >= 95%. Raise its "
            f"epsilon (the std falls as 1/epsilon){', or widen its groups' if r.size == 'group' else ''}.")
    if total > len(binnings) and lines:
        lines.append(f"(noise checked under the first {len(binnings)} of {total:,} binnings)")
    return lines
